//! Every way a `repro` command can fail, and the exit code each one maps to (DESIGN §2).

use std::path::PathBuf;

use crate::spec::SpecErrors;

/// Exit codes shared by `repro` and the generated harness (DESIGN §2).
pub mod exit {
    pub const PASSED: u8 = 0;
    pub const MISMATCH: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const BUILD: u8 = 3;
    pub const CUDA_ERROR: u8 = 4;
    pub const HANG: u8 = 5;
    pub const SANITIZER: u8 = 6;
    pub const NO_DEVICE: u8 = 7;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Spec(SpecErrors),

    #[error("cannot read spec {}: {source}", path.display())]
    ReadSpec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    Usage(String),

    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "refusing to overwrite {} in {}: edited since repro generated {}\n{diff}\nhelp: keep your edits and build them with `repro build {}`, or regenerate with `--force` (your version is kept in .repro/edited/)",
        files.join(", "), dir.display(), if files.len() == 1 { "it" } else { "them" }, dir.display()
    )]
    UserEdited {
        dir: PathBuf,
        files: Vec<String>,
        diff: String,
    },

    #[error("{0}")]
    Toolchain(String),

    #[error("nvcc failed (exit {code}) building {}; its output is above.\ncommand: {command}", dir.display())]
    Build {
        dir: PathBuf,
        code: String,
        command: String,
    },

    #[error("cannot run {}: {source}", path.display())]
    Launch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Spec(_)
            | Error::ReadSpec { .. }
            | Error::Usage(_)
            | Error::UserEdited { .. } => exit::USAGE,
            Error::Io { .. } => exit::USAGE,
            Error::Toolchain(_) | Error::Build { .. } => exit::BUILD,
            Error::Launch { .. } => exit::CUDA_ERROR,
        }
    }

    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    }
}
