//! Every way a `repro` command can fail, and the exit code each one maps to (docs/cli.md, exit
//! codes). A failure of the user's input (spec, options, files) names the file and the fix and
//! exits 2; a failure that only a bug in repro can cause says so and exits 70, so that a script
//! (or a bug report) can tell the two apart.
//!
//! Each layer below fails with its own enum (the engine's `EngineError`, each feature crate's own);
//! this one wraps each as it is, and a feature's wrapped engine failure is unwrapped to the
//! engine's, so that a spec error prints and exits the same whichever command met it.

use std::path::PathBuf;

pub use crate::engine_error::EngineError;
use crate::spec::LoadError;

pub use repro_contract::exit;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failure of the engine (plan, generate, build, run, analyze), as it is.
    #[error(transparent)]
    Engine(#[from] EngineError),

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
    CaptureFolder { dir: PathBuf, message: String },

    /// `repro capture`: the program ran but no launch could be recorded, or turned into a spec.
    #[error("repro capture: {0}")]
    CaptureRun(String),

    #[error(transparent)]
    Capture(crate::capture::CaptureError),

    #[error(transparent)]
    Bisect(crate::bisect::BisectError),

    #[error(transparent)]
    Campaign(crate::campaign::CampaignError),

    #[error(transparent)]
    Bundle(crate::bundle::BundleError),
}

impl From<LoadError> for Error {
    fn from(error: LoadError) -> Self {
        Error::Engine(error.into())
    }
}

impl From<crate::bisect::BisectError> for Error {
    /// The feature's own failure as it is; a failure of the engine it met, as the engine's (a
    /// spec's errors print as the spec's, whichever command read it).
    fn from(error: crate::bisect::BisectError) -> Self {
        match error {
            crate::bisect::BisectError::Engine(engine) => Error::Engine(engine),
            error => Error::Bisect(error),
        }
    }
}

impl From<crate::campaign::CampaignError> for Error {
    /// The feature's own failure as it is; a failure of the engine it met, as the engine's (a
    /// spec's errors print as the spec's, whichever command read it).
    fn from(error: crate::campaign::CampaignError) -> Self {
        match error {
            crate::campaign::CampaignError::Engine(engine) => Error::Engine(engine),
            error => Error::Campaign(error),
        }
    }
}

impl From<crate::bundle::BundleError> for Error {
    /// The feature's own failure as it is; a failure of the engine it met, as the engine's (a
    /// spec's errors print as the spec's, whichever command read it).
    fn from(error: crate::bundle::BundleError) -> Self {
        match error {
            crate::bundle::BundleError::Engine(engine) => Error::Engine(engine),
            error => Error::Bundle(error),
        }
    }
}

impl From<crate::capture::CaptureError> for Error {
    /// The feature's own failure as it is; a failure of the engine it met, as the engine's (a
    /// spec's errors print as the spec's, whichever command read it).
    fn from(error: crate::capture::CaptureError) -> Self {
        match error {
            crate::capture::CaptureError::Engine(engine) => Error::Engine(engine),
            error => Error::Capture(error),
        }
    }
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NoManifest { .. }
            | Error::WouldOverwrite { .. }
            | Error::Flags(_)
            | Error::ImportRust(_)
            | Error::ImportCuda(_)
            | Error::AmbiguousLaunch { .. }
            | Error::AmbiguousKernel { .. }
            | Error::CaptureFolder { .. }
            | Error::CaptureRun(_) => exit::USAGE,
            Error::Engine(e) => e.exit_code(),
            Error::Capture(e) => e.exit_code(),
            Error::Bisect(e) => e.exit_code(),
            Error::Campaign(e) => e.exit_code(),
            Error::Bundle(e) => e.exit_code(),
        }
    }

    /// The error as a command prints it, the way cargo-nextest does: `error: ` and the message,
    /// then each underlying cause on a `caused by:` line. A spec error is already a list of
    /// `error:` blocks pointing into the file, and is printed as it is.
    pub fn render(&self) -> String {
        match self {
            Error::Engine(engine) => engine.render(),
            _ => crate::engine_error::render_with_causes(self),
        }
    }

    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let io = EngineError::io(action, path);
        move |source| Error::Engine(io(source))
    }
}

#[cfg(test)]
mod tests {
    use super::{exit, EngineError, Error};
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
        let plain = Error::from(EngineError::NotAnArtifact {
            dir: PathBuf::from("empty"),
        });
        assert!(plain
            .render()
            .starts_with("error: empty is a folder without spec.yaml"));
        assert!(!plain.render().contains("caused by"));
    }

    #[test]
    fn a_bug_in_repro_says_so_and_has_its_own_exit_code() {
        let bug = Error::from(EngineError::Internal(
            "the template of harness.cu does not render: x".into(),
        ));
        assert_eq!(
            bug.to_string(),
            "this is a bug in repro: the template of harness.cu does not render: x\n\
             please report it, with the command line and the spec"
        );
        assert_eq!(bug.exit_code(), exit::INTERNAL);
        let report = Error::from(EngineError::HarnessReport {
            path: PathBuf::from("art/.repro/run/report.json"),
            why: "not JSON".into(),
        });
        assert!(report.to_string().contains("this is a bug in repro"));
        assert_eq!(report.exit_code(), 70);
        // The user's own mistakes stay 2, whatever the command.
        let spec = Error::from(EngineError::NotAnArtifact {
            dir: PathBuf::from("empty"),
        });
        assert_eq!(spec.exit_code(), exit::USAGE);
    }
}

// The engine's errors, as the commands print them (they are tested here: the engine's crate cannot
// name this module).
#[cfg(test)]
mod engine_tests {
    use super::EngineError;
    use crate::async_race::error::AsyncRaceError;
    use crate::error::Error;

    fn denied() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied")
    }

    #[test]
    fn an_engine_error_reads_and_exits_as_it_did_before_it_was_wrapped() {
        let engine = EngineError::io("write", "art/harness.cu")(denied());
        let code = engine.exit_code();
        let wrapped = Error::from(engine);
        assert_eq!(
            wrapped.render(),
            "error: cannot write art/harness.cu\n  caused by: Permission denied"
        );
        assert_eq!(wrapped.exit_code(), code);
        assert_eq!(code, repro_contract::exit::USAGE);
    }

    #[test]
    fn the_checkers_own_file_error_reads_as_any_file_error() {
        let checker = AsyncRaceError::io("write", "cache/async-race")(denied());
        let wrapped = Error::from(EngineError::from(checker));
        let plain = Error::io("write", "cache/async-race")(denied());
        assert_eq!(wrapped.render(), plain.render());
        assert_eq!(wrapped.exit_code(), plain.exit_code());
    }
}

// A feature's error that wraps the engine's, as the commands print it.
#[cfg(test)]
mod feature_tests {
    use super::{EngineError, Error};
    use std::path::PathBuf;

    fn engine() -> EngineError {
        EngineError::NotAnArtifact {
            dir: PathBuf::from("empty"),
        }
    }

    #[test]
    fn an_engine_error_a_feature_met_is_the_engines_whichever_feature_met_it() {
        let plain = Error::from(engine());
        for wrapped in [
            Error::from(crate::bisect::BisectError::from(engine())),
            Error::from(crate::bundle::BundleError::from(engine())),
            Error::from(crate::campaign::CampaignError::from(engine())),
            Error::from(crate::capture::CaptureError::from(engine())),
        ] {
            // Unwrapped, so that a spec's errors print as the spec's (render's own case).
            assert!(matches!(wrapped, Error::Engine(_)), "{wrapped:?}");
            assert_eq!(wrapped.render(), plain.render());
            assert_eq!(wrapped.exit_code(), plain.exit_code());
        }
    }

    #[test]
    fn a_features_own_error_keeps_its_exit_code() {
        let no_device = Error::from(crate::campaign::CampaignError::NoDevice);
        assert!(matches!(no_device, Error::Campaign(_)));
        assert_eq!(no_device.exit_code(), repro_contract::exit::NO_DEVICE);
        let run = Error::from(crate::capture::CaptureError::Run("no launch".into()));
        assert_eq!(run.render(), "error: repro capture: no launch");
        assert_eq!(run.exit_code(), repro_contract::exit::USAGE);
    }
}
