//! What can stop `repro capture` (docs/cli.md, `repro capture`), each with the fix: the program
//! ran but no launch could be recorded or turned into a spec, or the output folder is not new.
//! All are the user's to fix (exit 2); a failure of the engine it meets (the spec's build, a file
//! it cannot write) or of the `--source` importer keeps that one's own message and exit code.

use std::path::PathBuf;

use repro_contract::exit;
use repro_contract::spec::LoadError;
use repro_engine::engine_error::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A failure of the engine, or of the spec it reads, as it is: the same message and the same
    /// exit code as when the command met it itself.
    #[error(transparent)]
    Engine(#[from] EngineError),

    /// The `--source` declaration could not be read or parsed.
    #[error(transparent)]
    ImportCuda(#[from] crate::import::cuda::ImportError),

    /// The program ran but no launch could be recorded, or turned into a spec.
    #[error("repro capture: {0}")]
    Run(String),

    #[error("{} exists; repro {command} never overwrites it ({fix})", path.display())]
    WouldOverwrite {
        path: PathBuf,
        command: &'static str,
        fix: &'static str,
    },
}

impl From<LoadError> for CaptureError {
    fn from(error: LoadError) -> Self {
        CaptureError::Engine(error.into())
    }
}

impl CaptureError {
    /// The engine's file error (`cannot ACTION PATH`), as this feature's.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> CaptureError {
        let io = EngineError::io(action, path);
        move |source| CaptureError::Engine(io(source))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CaptureError::Engine(e) => e.exit_code(),
            _ => exit::USAGE,
        }
    }
}
