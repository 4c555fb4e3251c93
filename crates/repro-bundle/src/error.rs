//! Why `repro bundle` refuses to write a bundle (docs/cli.md, `repro bundle`): a file the spec
//! reaches that must not travel to strangers, or a path of this machine in the bundle's text.
//! Every one is the sender's input to fix, so every one exits 2; a failure of the engine it meets
//! (the spec, a file it cannot read) keeps the engine's own message and exit code.

use repro_contract::exit;
use repro_contract::spec::LoadError;
use repro_engine::engine_error::EngineError;

/// A refusal of `repro bundle`; nothing is left behind (the bundle's folder is a temporary one
/// until the end).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A failure of the engine, or of the spec it reads, as it is: the same message and the same
    /// exit code as when the command met it itself.
    #[error(transparent)]
    Engine(#[from] EngineError),

    /// A file the spec (or an include dir) reaches is refused: outside the spec's tree, a
    /// special file, or not what its field says it is.
    #[error(
        "repro bundle refuses {file} (reached by {reached_by}): {why}\n\
         help: {fix}; a bundle carries only files inside the spec's folder and its include dirs, \
         each what it claims to be (docs/cli.md, `repro bundle`)"
    )]
    Refused {
        /// The file as the sender knows it: relative to the spec's folder.
        file: String,
        /// The spec field or include dir that named it: `tensor A's init.file`.
        reached_by: String,
        why: String,
        fix: &'static str,
    },

    /// A bundled file names a folder of this machine (the home folder, the current folder):
    /// text the sender wrote (`about:`, a captured command) that strangers would read.
    #[error(
        "repro bundle: the bundle's {file}, line {line}{written}, names {what} ({needle}), which \
         the receiver must not see\n\
         help: {fix}"
    )]
    Leak {
        file: String,
        line: usize,
        /// Where the line came from in the spec as written, for the bundled spec.yaml.
        written: String,
        what: &'static str,
        needle: String,
        fix: &'static str,
    },

    /// `-o PATH` names no folder of its own (`.`, `..`, `/`).
    #[error("repro bundle -o {}: not a new folder's name; pass -o with a folder name, e.g. -o bundles/report", path.display())]
    BadOutput { path: std::path::PathBuf },

    #[error("{} exists; repro {command} never overwrites it ({fix})", path.display())]
    WouldOverwrite {
        path: std::path::PathBuf,
        command: &'static str,
        fix: &'static str,
    },
}

impl From<LoadError> for BundleError {
    fn from(error: LoadError) -> Self {
        BundleError::Engine(error.into())
    }
}

impl BundleError {
    /// The engine's file error (`cannot ACTION PATH`), as this feature's.
    pub fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> BundleError {
        let io = EngineError::io(action, path);
        move |source| BundleError::Engine(io(source))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            BundleError::Engine(e) => e.exit_code(),
            _ => exit::USAGE,
        }
    }
}
