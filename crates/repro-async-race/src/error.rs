//! The checker's one failure of its own: a file of its toolkit or report it cannot read or write.
//! The engine wraps it as it is (src/engine_error.rs: the message and exit code of any file repro
//! cannot read or write), so this folder imports nothing of repro's: the build and the run use
//! it, and it may not import them.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}", path.display())]
pub struct AsyncRaceError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl AsyncRaceError {
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> AsyncRaceError {
        let path = path.into();
        move |source| AsyncRaceError {
            action,
            path,
            source,
        }
    }
}
