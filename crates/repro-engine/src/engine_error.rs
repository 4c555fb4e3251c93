//! Every way the engine (plan, generate, build, run, analyze) can fail, and the exit code each
//! one maps to (docs/cli.md, exit codes). The command-level error (src/error.rs) wraps it as it
//! is: same message, same exit code. It sits below the features and the commands, so it names
//! none of them: a failure only a feature or a command can have is in src/error.rs. The engine's
//! files import it as `Error` (`use crate::engine_error::EngineError as Error;`).

use std::path::PathBuf;

use crate::spec::{LoadError, SpecErrors};

use repro_contract::exit;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Spec(SpecErrors),

    #[error("cannot read spec {}", path.display())]
    ReadSpec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is larger than {limit_mib} MiB; a spec is a short YAML file (is this the right path?)", path.display())]
    SpecTooLarge { path: PathBuf, limit_mib: u64 },

    /// A spec path that names a fifo, a device or a folder: refused before reading, since a fifo
    /// with no writer would block the read forever and a device never ends.
    #[error("{} is {kind}, not a spec file; give the path of a YAML file", path.display())]
    SpecNotAFile { path: PathBuf, kind: &'static str },

    /// An artifact folder whose runtime/ is missing or unreadable.
    #[error("{}: {why}; regenerate the artifact with `repro scaffold`", dir.display())]
    RuntimeSources { dir: PathBuf, why: String },

    /// A folder on the way to the artifact is not a folder (a file, a dangling symlink).
    #[error("cannot write the artifact into {}: {} {what}; create the folder it names, or pass another -o", dir.display(), blocked.display())]
    OutputBlocked {
        dir: PathBuf,
        blocked: PathBuf,
        what: String,
    },

    /// Something that only a bug in repro explains; the message is what failed.
    #[error("this is a bug in repro: {0}\nplease report it, with the command line and the spec")]
    Internal(String),

    #[error("{} is a folder without spec.yaml; pass a spec file or an artifact folder made by `repro scaffold`", dir.display())]
    NotAnArtifact { dir: PathBuf },

    #[error("repro {command} changes sizes at run time, but in this spec they are compile-time constants: {reason}; \
             make those sizes kernel arguments, or make a spec per size")]
    SizesFixed {
        command: &'static str,
        reason: String,
    },

    #[error("{}: `{name}` is not one of the spec's sizes ({})", spec.display(), declared.join(", "))]
    UnknownSize {
        spec: PathBuf,
        name: String,
        declared: Vec<String>,
    },

    #[error("{}: no size to vary: the output's extents are not plain size names; name them with --dims", spec.display())]
    NoSizeToVary { spec: PathBuf },

    #[error("{}: repro shrink shrinks a GEMM's M, N and K; this spec's reference is `op: {op}`: \
             run `repro sweep --dims NAME` over its sizes instead", spec.display())]
    ShrinkNeedsGemm { spec: PathBuf, op: &'static str },

    #[error("the harness {} refused the options repro gave it: {message}", binary.display())]
    HarnessRefused { binary: PathBuf, message: String },

    /// A harness option that a queue file cannot hold (its words are separated by tabs, its
    /// checks by newlines).
    #[error("the harness option `{}` holds a tab or a line break, which a queue of checks cannot carry; \
             give the value without one", word.escape_debug())]
    QueueWord { word: String },

    /// The harness wrote a report repro cannot read: a harness of another repro version, or a bug.
    #[error("the harness's JSON report {} is not what repro reads: {why}\n\
             help: a harness built by another repro version writes another report: rebuild it with `repro build`; \
             if it was built by this one, this is a bug in repro: please report it", path.display())]
    HarnessReport { path: PathBuf, why: String },

    #[error("cannot write the shrunk spec from {}: {why}; write its sizes as plain numbers under `sizes:`", spec.display())]
    ShrunkSpec { spec: PathBuf, why: String },

    #[error("cannot {action} {}", path.display())]
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
        /// nvcc's first error line (shown above with the rest; bisect names a skip by it).
        first_error: Option<String>,
    },

    #[error("the custom reference does not compile (nvcc exit {code}): `{function}` in {header}; nvcc's message is above.\ncommand: {command}")]
    ReferenceBuild {
        header: String,
        function: String,
        code: String,
        command: String,
    },

    /// A file of the async-race checker's that cannot be read or written: an `Io` of its own.
    #[error(transparent)]
    AsyncRace(#[from] crate::async_race::error::AsyncRaceError),

    #[error("cannot run {}", path.display())]
    Launch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<LoadError> for EngineError {
    fn from(error: LoadError) -> Self {
        match error {
            LoadError::Spec(errors) => EngineError::Spec(errors),
            LoadError::Read { path, source } => EngineError::ReadSpec { path, source },
            LoadError::TooLarge { path, limit_mib } => {
                EngineError::SpecTooLarge { path, limit_mib }
            }
            LoadError::NotAFile { path, kind } => EngineError::SpecNotAFile { path, kind },
        }
    }
}

/// `error: ` and the error's message, then each underlying cause on a `caused by:` line.
/// `#[error(transparent)]` variants forward to their inner error's own source.
pub fn render_with_causes(error: &dyn std::error::Error) -> String {
    let mut out = format!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(&format!("\n  caused by: {cause}"));
        source = cause.source();
    }
    out
}

impl EngineError {
    /// The error as a command prints it, the way cargo-nextest does: `error: ` and the message,
    /// then each underlying cause on a `caused by:` line. A spec error is already a list of
    /// `error:` blocks pointing into the file, and is printed as it is. Here, not in the binary,
    /// because a feature that records an engine error as a result (bisect) prints it the same way.
    pub fn render(&self) -> String {
        if let EngineError::Spec(errors) = self {
            return errors.to_string();
        }
        render_with_causes(self)
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            EngineError::Spec(_)
            | EngineError::ReadSpec { .. }
            | EngineError::SpecTooLarge { .. }
            | EngineError::SpecNotAFile { .. }
            | EngineError::RuntimeSources { .. }
            | EngineError::OutputBlocked { .. }
            | EngineError::UserEdited { .. }
            | EngineError::NotAnArtifact { .. }
            | EngineError::SizesFixed { .. }
            | EngineError::UnknownSize { .. }
            | EngineError::NoSizeToVary { .. }
            | EngineError::ShrinkNeedsGemm { .. }
            | EngineError::HarnessRefused { .. }
            | EngineError::QueueWord { .. }
            | EngineError::ShrunkSpec { .. } => exit::USAGE,
            EngineError::Io { .. } | EngineError::AsyncRace(_) => exit::USAGE,
            EngineError::Internal(_) | EngineError::HarnessReport { .. } => exit::INTERNAL,
            EngineError::Toolchain(_)
            | EngineError::Build { .. }
            | EngineError::ReferenceBuild { .. } => exit::BUILD,
            EngineError::Launch { .. } => exit::CUDA_ERROR,
        }
    }

    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.into();
        move |source| EngineError::Io {
            action,
            path,
            source,
        }
    }
}
