//! What can stop `repro bisect` before or during its search, each with the fix; the exit code
//! each maps to (docs/cli.md): 2 for the user's input, 7 when there is no GPU to run on.

use std::path::PathBuf;

use repro_contract::exit;
use repro_contract::spec::LoadError;
use repro_engine::engine_error::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// A failure of the engine, or of the spec it reads, as it is: the same message and the same
    /// exit code as when the command met it itself.
    #[error(transparent)]
    Engine(#[from] EngineError),

    #[error("--repo {}: not a git repository ({why})\nhelp: point --repo at the checkout of the kernel library whose history to search", dir.display())]
    NotARepository { dir: PathBuf, why: String },

    #[error("{flag} {rev}: no such commit in {}\nhelp: a branch, tag or hash that `git -C {} rev-parse {rev}` knows", repo.display(), repo.display())]
    UnknownRevision {
        flag: &'static str,
        rev: String,
        repo: PathBuf,
    },

    #[error("--good {good} is not an ancestor of --bad {bad}\nhelp: give the older, passing commit as --good and a later, failing one as --bad")]
    NotAncestor { good: String, bad: String },

    #[error("{}: none of the spec's source.include_dirs is inside --repo {} (they are: {})\nhelp: bisect reads the include directories that lie in the repository from each commit; point --repo at the repository that holds the kernel's headers", spec.display(), repo.display(), dirs.join(", "))]
    NoIncludeDirInRepo {
        spec: PathBuf,
        repo: PathBuf,
        dirs: Vec<String>,
    },

    #[error("{}: uncommitted changes under the include directories bisect reads:\n{}\nhelp: what you ran there is no commit of the history; commit or stash them (bisect never touches your checkout)", repo.display(), lines.join("\n"))]
    Uncommitted { repo: PathBuf, lines: Vec<String> },

    #[error("no commit between --good {good} and --bad {bad} touches {}\nhelp: check the range (and --paths, --first-parent)", paths.join(", "))]
    NoCommits {
        good: String,
        bad: String,
        paths: Vec<String>,
    },

    #[error("--good {rev} does not pass: {what}\nhelp: bisect needs a --good commit where the spec passes; pick an older one")]
    GoodFails { rev: String, what: String },

    #[error("--bad {rev} does not fail{}: {what}\nhelp: bisect needs a --bad commit that fails the way you are searching for", class.as_ref().map(|c| format!(" with class `{c}`")).unwrap_or_default())]
    BadPasses {
        rev: String,
        class: Option<String>,
        what: String,
    },

    #[error("--class {class}: not a failure class\nhelp: one of the verdict classes of docs/cli.md (mismatch classes such as `row_mapping`, `k_coverage`, or `fault`, `hang`), `race` or `sanitizer`")]
    UnknownClass { class: String },

    #[error("mode {mode}: bisect judges each commit by the class of one harness run\nhelp: --mode ones, random or probe; `repro campaign` runs a spec under compute-sanitizer")]
    UnsupportedMode { mode: &'static str },

    #[error("no usable CUDA device: bisect judges each commit by running its harness; the builds are done and cached, run the same command on a machine with a GPU")]
    NoDevice,

    #[error("--repo {}: {why}\nhelp: bisect runs no command a repository's configuration names; remove that setting from the repository's .git/config (or the file it includes)", repo.display())]
    UnsafeConfig { repo: PathBuf, why: String },

    #[error("git could not {what}: {why}")]
    Git { what: String, why: String },
}

impl From<LoadError> for BisectError {
    fn from(error: LoadError) -> Self {
        BisectError::Engine(error.into())
    }
}

impl BisectError {
    /// The engine's file error (`cannot ACTION PATH`), as this feature's.
    pub fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> BisectError {
        let io = EngineError::io(action, path);
        move |source| BisectError::Engine(io(source))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            BisectError::Engine(e) => e.exit_code(),
            BisectError::NoDevice => exit::NO_DEVICE,
            _ => exit::USAGE,
        }
    }
}
