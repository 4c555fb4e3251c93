//! Every way a `repro` command can fail, and the exit code each one maps to (docs/cli.md, exit
//! codes). A failure of the user's input (spec, options, files) names the file and the fix and
//! exits 2; a failure that only a bug in repro can cause says so and exits 70, so that a script
//! (or a bug report) can tell the two apart.

use std::path::PathBuf;

use crate::spec::{LoadError, SpecErrors};

pub use repro_contract::exit;

#[derive(Debug, thiserror::Error)]
pub enum Error {
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

    #[error("{} has no .repro/manifest.json, so repro does not know which spec made it; run `repro diff SPEC` instead", dir.display())]
    NoManifest { dir: PathBuf },

    #[error("{} exists; repro {command} never overwrites it ({fix})", path.display())]
    WouldOverwrite {
        path: PathBuf,
        command: &'static str,
        fix: &'static str,
    },

    #[error(transparent)]
    Flags(#[from] crate::flags::FlagsError),

    #[error(transparent)]
    ImportRust(#[from] crate::import::rust::ImportError),

    #[error(transparent)]
    ImportCuda(#[from] crate::import::cuda::ImportError),

    #[error("{} has {count} launch sites; pick one with --kernel NAME:\n{listing}", file.display())]
    AmbiguousLaunch {
        file: PathBuf,
        count: usize,
        listing: String,
    },

    #[error("`{kernel}` is declared {count} times under {}; pass the file (or a narrower folder) as PATH:\n{listing}", path.display())]
    AmbiguousKernel {
        kernel: String,
        path: PathBuf,
        count: usize,
        listing: String,
    },

    /// A capture folder's manifest that is missing or does not parse (the message names the
    /// file and line), or a `--call` it does not hold.
    #[error("repro import capture {}: {message}", dir.display())]
    Capture { dir: PathBuf, message: String },

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

    /// The harness wrote a report repro cannot read: a harness of another repro version, or a bug.
    #[error("the harness's JSON report {} is not what repro reads: {why}\n\
             help: a harness built by another repro version writes another report: rebuild it with `repro build`; \
             if it was built by this one, this is a bug in repro: please report it", path.display())]
    HarnessReport { path: PathBuf, why: String },

    /// `repro capture`: the program ran but no launch could be recorded, or turned into a spec.
    #[error("repro capture: {0}")]
    CaptureRun(String),

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

    #[error(transparent)]
    Bisect(#[from] crate::bisect::BisectError),

    #[error(transparent)]
    Campaign(#[from] crate::campaign::CampaignError),

    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),

    #[error("cannot run {}", path.display())]
    Launch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<LoadError> for Error {
    fn from(error: LoadError) -> Self {
        match error {
            LoadError::Spec(errors) => Error::Spec(errors),
            LoadError::Read { path, source } => Error::ReadSpec { path, source },
            LoadError::TooLarge { path, limit_mib } => Error::SpecTooLarge { path, limit_mib },
            LoadError::NotAFile { path, kind } => Error::SpecNotAFile { path, kind },
        }
    }
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Spec(_)
            | Error::ReadSpec { .. }
            | Error::SpecTooLarge { .. }
            | Error::SpecNotAFile { .. }
            | Error::RuntimeSources { .. }
            | Error::OutputBlocked { .. }
            | Error::UserEdited { .. }
            | Error::NotAnArtifact { .. }
            | Error::NoManifest { .. }
            | Error::WouldOverwrite { .. }
            | Error::Flags(_)
            | Error::ImportRust(_)
            | Error::ImportCuda(_)
            | Error::AmbiguousLaunch { .. }
            | Error::AmbiguousKernel { .. }
            | Error::Capture { .. }
            | Error::SizesFixed { .. }
            | Error::UnknownSize { .. }
            | Error::NoSizeToVary { .. }
            | Error::ShrinkNeedsGemm { .. }
            | Error::HarnessRefused { .. }
            | Error::ShrunkSpec { .. }
            | Error::CaptureRun(_) => exit::USAGE,
            Error::Io { .. } => exit::USAGE,
            Error::Internal(_) | Error::HarnessReport { .. } => exit::INTERNAL,
            Error::Toolchain(_) | Error::Build { .. } | Error::ReferenceBuild { .. } => exit::BUILD,
            Error::Launch { .. } => exit::CUDA_ERROR,
            Error::Bisect(e) => e.exit_code(),
            Error::Campaign(e) => e.exit_code(),
            Error::Bundle(_) => exit::USAGE,
        }
    }

    /// The error as a command prints it, the way cargo-nextest does: `error: ` and the message,
    /// then each underlying cause on a `caused by:` line. A spec error is already a list of
    /// `error:` blocks pointing into the file, and is printed as it is.
    pub fn render(&self) -> String {
        if let Error::Spec(errors) = self {
            return errors.to_string();
        }
        let mut out = format!("error: {self}");
        // `#[error(transparent)]` variants forward to their inner error's own source.
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            out.push_str(&format!("\n  caused by: {cause}"));
            source = cause.source();
        }
        out
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

#[cfg(test)]
mod tests {
    use super::{exit, Error};
    use std::path::PathBuf;

    #[test]
    fn errors_render_with_their_causes() {
        let error = Error::io("read", "inputs/a.npy")(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file or directory (os error 2)",
        ));
        assert_eq!(
            error.render(),
            "error: cannot read inputs/a.npy\n  caused by: No such file or directory (os error 2)"
        );
        let plain = Error::NotAnArtifact {
            dir: PathBuf::from("empty"),
        };
        assert!(plain
            .render()
            .starts_with("error: empty is a folder without spec.yaml"));
        assert!(!plain.render().contains("caused by"));
    }

    #[test]
    fn a_bug_in_repro_says_so_and_has_its_own_exit_code() {
        let bug = Error::Internal("the template of harness.cu does not render: x".into());
        assert_eq!(
            bug.to_string(),
            "this is a bug in repro: the template of harness.cu does not render: x\n\
             please report it, with the command line and the spec"
        );
        assert_eq!(bug.exit_code(), exit::INTERNAL);
        let report = Error::HarnessReport {
            path: PathBuf::from("art/.repro/run/report.json"),
            why: "not JSON".into(),
        };
        assert!(report.to_string().contains("this is a bug in repro"));
        assert_eq!(report.exit_code(), 70);
        // The user's own mistakes stay 2, whatever the command.
        let spec = Error::NotAnArtifact {
            dir: PathBuf::from("empty"),
        };
        assert_eq!(spec.exit_code(), exit::USAGE);
    }
}
