//! What `repro bisect` asks of the kernel library's repository, through the `git` program: the
//! commits between two revisions, the trees of the include directories at each, and the facts of
//! the answer (subject, author date, changed files, diff stat); export.rs writes a commit's trees
//! out from the object store. Every call reads; none takes git's optional locks
//! (`GIT_OPTIONAL_LOCKS=0`, so not even `git status` refreshes the user's index), and nothing is
//! ever checked out in the user's tree.
//!
//! The repository is someone else's (docs/cli.md, `repro bisect`): git runs so that nothing its
//! configuration or attributes name is ever executed. Every call carries `-c` overrides of the
//! keys whose value is a command a read could run (`core.fsmonitor`, the clean / smudge /
//! process command of every configured filter, the signature check of `git show`, hooks,
//! transports for a lazy fetch, credential helpers), replace refs and lazy fetches are off, diffs
//! are plumbing (`diff-tree`, no external diff, no textconv), and there is no pager. Commands
//! such as merge drivers, editors, `core.sshCommand` or `uploadpack.packObjectsHook` belong to
//! git commands bisect never runs (merge, commit, fetch, push, upload-pack). Each call's output
//! and time are bounded.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

use super::error::BisectError;

/// The `-c` overrides every call carries: each key's value is a command (or what lets one run)
/// that a repository's own configuration could set. The last value of a key wins, and the
/// command line's come after every configuration file (includes too).
const NO_REPOSITORY_COMMANDS: &[&str] = &[
    // `git status` would run it to learn what changed.
    "core.fsmonitor=false",
    // No read runs a hook; an index written by status (it is not: no optional locks) would run
    // post-index-change.
    "core.hooksPath=/dev/null",
    // A partial clone fetches missing objects from its promisor remote: no transport at all
    // (and so no `core.sshCommand`, remote helper, `ext::` command or credential helper).
    "protocol.allow=never",
    "credential.helper=",
    // `git show` would verify a signed commit with `gpg.program`.
    "log.showSignature=false",
    // status would run `git submodule summary`, submodules run their own configuration.
    "status.submoduleSummary=false",
    "submodule.recurse=false",
];

/// The environment of every call: read-only, no prompt, no pager, no replacement objects (the
/// bytes tested are the commit's own), no lazy fetch, pathspecs taken literally, and none of a
/// calling git's own variables (a hook's `GIT_DIR` would point git at another repository).
const ENVIRONMENT: &[(&str, &str)] = &[
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_LITERAL_PATHSPECS", "1"),
];
/// The variables of a calling git (or the user's shell) that would point git elsewhere.
const REMOVED_ENVIRONMENT: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF",
];

/// The most a call's output may hold (a listing of every commit or file of a huge history fits).
const OUTPUT_LIMIT: u64 = 256 << 20;
/// The longest one call may take (a listing of a huge history, the blobs of a large tree take
/// seconds).
const CALL_LIMIT: Duration = Duration::from_secs(600);

/// A repository the user named with `--repo`.
#[derive(Debug, Clone)]
pub struct Repository {
    /// Its top-level folder, canonical.
    pub root: PathBuf,
    /// `-c` overrides beyond NO_REPOSITORY_COMMANDS: every configured filter's commands emptied.
    filters_off: Vec<OsString>,
    /// The longest one git call may take.
    pub(super) limit: Duration,
}

/// One commit, as the answer shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitInfo {
    pub hash: String,
    pub subject: String,
    pub author: String,
    /// Author date, ISO 8601.
    pub date: String,
}

impl Repository {
    /// The repository holding `dir`: an error naming `dir` when it is not one (or git is missing).
    pub fn open(dir: &Path) -> Result<Repository, BisectError> {
        Repository::open_with_limit(dir, CALL_LIMIT)
    }

    fn open_with_limit(dir: &Path, limit: Duration) -> Result<Repository, BisectError> {
        let not_a_repo = |why: String| BisectError::NotARepository {
            dir: dir.to_path_buf(),
            why,
        };
        if !dir.is_dir() {
            return Err(not_a_repo("no such folder".into()));
        }
        let mut command = git_in(dir, &[]);
        command.args(["rev-parse", "--show-toplevel"]);
        let root = run_bounded(command, limit).map_err(not_a_repo)?;
        let root = PathBuf::from(String::from_utf8_lossy(&root).trim());
        let root = root.canonicalize().unwrap_or(root);
        let mut repository = Repository {
            root,
            filters_off: Vec::new(),
            limit,
        };
        repository.filters_off = repository.filter_overrides()?;
        Ok(repository)
    }

    /// `-c` overrides that empty the clean, smudge and process commands of every filter driver
    /// the configuration defines (any scope: the repository's, a file it includes, the user's),
    /// which git then applies as no filter, and turn its `required` off (an emptied filter is no
    /// error). Only `git status` would run a filter (on a worktree file whose stat changed);
    /// bisect reads blobs raw.
    fn filter_overrides(&self) -> Result<Vec<OsString>, BisectError> {
        let listing = self
            .read_bytes(&["config", "--list", "-z"])
            .map_err(|why| BisectError::Git {
                what: format!("read the configuration of {}", self.root.display()),
                why,
            })?;
        let mut drivers: Vec<&[u8]> = Vec::new();
        // Records are `key\nvalue\0`; a key is `filter.<driver>.<variable>`, where only the
        // section and variable are lowercased and the driver may hold dots.
        for record in listing.split(|&b| b == 0) {
            let key = record.split(|&b| b == b'\n').next().unwrap_or_default();
            let Some(rest) = key.strip_prefix(b"filter.") else {
                continue;
            };
            let Some(dot) = rest.iter().rposition(|&b| b == b'.') else {
                continue;
            };
            let (driver, variable) = (&rest[..dot], &rest[dot + 1..]);
            if [&b"clean"[..], b"smudge", b"process"].contains(&variable)
                && !drivers.contains(&driver)
            {
                drivers.push(driver);
            }
        }
        let mut overrides = Vec::new();
        for driver in drivers {
            // `-c` splits at the first `=`: such a driver's key cannot be overridden.
            if driver.contains(&b'=') {
                return Err(BisectError::UnsafeConfig {
                    repo: self.root.clone(),
                    why: format!(
                        "it configures a filter named `{}`, whose commands cannot be turned off \
                         (the name holds `=`)",
                        String::from_utf8_lossy(driver)
                    ),
                });
            }
            for (variable, value) in [
                (&b"clean"[..], &b""[..]),
                (b"smudge", b""),
                (b"process", b""),
                (b"required", b"false"),
            ] {
                let setting = [b"filter.", driver, b".", variable, b"=", value].concat();
                overrides.push(OsString::from_vec(setting));
            }
        }
        Ok(overrides)
    }

    /// git in the repository's root, with the overrides of this module's documentation.
    pub(super) fn git(&self) -> Command {
        git_in(&self.root, &self.filters_off)
    }

    /// Runs git with `args`; its stdout, or what it said on failure.
    fn read_bytes(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = self.git();
        command.args(args);
        run_bounded(command, self.limit)
    }

    fn read(&self, args: &[&str]) -> Result<String, String> {
        self.read_bytes(args)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The full hash of the commit `rev` names.
    pub fn resolve(&self, rev: &str, flag: &'static str) -> Result<String, BisectError> {
        if rev.starts_with('-') {
            return Err(BisectError::UnknownRevision {
                flag,
                rev: rev.into(),
                repo: self.root.clone(),
            });
        }
        self.read(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| BisectError::UnknownRevision {
            flag,
            rev: rev.into(),
            repo: self.root.clone(),
        })
    }

    /// Is `ancestor` an ancestor of (or the same as) `commit`?
    pub fn is_ancestor(&self, ancestor: &str, commit: &str) -> bool {
        self.read_bytes(&["merge-base", "--is-ancestor", ancestor, commit])
            .is_ok()
    }

    /// The commits after `good` up to `bad`, oldest first, that are descendants of `good` and
    /// ancestors of `bad` (`--ancestry-path`), following first parents only when asked, and
    /// touching `paths` (relative to the root, "" for the root; empty: any).
    pub fn commits_between(
        &self,
        good: &str,
        bad: &str,
        first_parent: bool,
        paths: &[String],
    ) -> Result<Vec<String>, BisectError> {
        let range = format!("{good}..{bad}");
        let mut args = vec!["rev-list", "--topo-order", "--reverse", "--ancestry-path"];
        if first_parent {
            args.push("--first-parent");
        }
        args.push(&range);
        args.push("--");
        args.extend(pathspecs(paths));
        let text = self.read(&args).map_err(|why| BisectError::Git {
            what: format!("list the commits {range}"),
            why,
        })?;
        Ok(text.lines().map(str::to_string).collect())
    }

    /// The object id of `path` (a folder relative to the root, "" for the root) at `commit`;
    /// None when the commit has no such folder.
    pub fn tree_of(&self, commit: &str, path: &str) -> Option<String> {
        let spec = if path.is_empty() {
            format!("{commit}^{{tree}}")
        } else {
            format!("{commit}:{path}")
        };
        self.read(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
    }

    /// Hash, subject, author and author date of `commit`.
    pub fn info(&self, commit: &str) -> CommitInfo {
        let text = self
            .read(&[
                "show",
                "-s",
                "--no-show-signature",
                "--format=%H%x00%s%x00%an%x00%aI",
                commit,
            ])
            .unwrap_or_default();
        let mut fields = text.trim_end_matches('\n').split('\0');
        let mut next = || fields.next().unwrap_or_default().to_string();
        CommitInfo {
            hash: next(),
            subject: next(),
            author: next(),
            date: next(),
        }
    }

    /// The files under `paths` that `commit` changed against `parent`, and git's diff stat of them
    /// (plumbing: no external diff, no textconv).
    pub fn changes(&self, parent: &str, commit: &str, paths: &[String]) -> (Vec<String>, String) {
        let diff = |format: &'static str| {
            let mut args = vec![
                "diff-tree",
                "-r",
                "--no-commit-id",
                "--no-ext-diff",
                "--no-textconv",
                format,
                parent,
                commit,
                "--",
            ];
            args.extend(pathspecs(paths));
            self.read(&args).unwrap_or_default()
        };
        let files = diff("--name-only").lines().map(str::to_string).collect();
        (files, diff("--stat=100").trim_end().to_string())
    }

    /// Uncommitted changes under `paths` (`git status --porcelain` lines), untracked files
    /// included: what the user ran at their checkout is then no commit of the history. A status
    /// git cannot give (a broken index) is an error, never "nothing changed".
    pub fn uncommitted(&self, paths: &[String]) -> Result<Vec<String>, BisectError> {
        let mut args = vec![
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--ignore-submodules=all",
            "--",
        ];
        args.extend(pathspecs(paths));
        let text = self.read(&args).map_err(|why| BisectError::Git {
            what: format!(
                "list the uncommitted changes of {} (git status)",
                self.root.display()
            ),
            why,
        })?;
        Ok(text.lines().map(str::to_string).collect())
    }
}

/// `paths` as git pathspecs: the root ("") is `.` (git runs in the root; an empty pathspec is
/// refused).
fn pathspecs(paths: &[String]) -> impl Iterator<Item = &str> {
    paths
        .iter()
        .map(|p| if p.is_empty() { "." } else { p.as_str() })
}

/// git run in `dir` as this module's documentation says, with `overrides` (more `-c` settings).
fn git_in(dir: &Path, overrides: &[OsString]) -> Command {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    for setting in NO_REPOSITORY_COMMANDS {
        command.arg("-c").arg(setting);
    }
    for setting in overrides {
        command.arg("-c").arg(setting);
    }
    command.arg("--no-pager");
    command.envs(ENVIRONMENT.iter().copied());
    for variable in REMOVED_ENVIRONMENT {
        command.env_remove(variable);
    }
    command.stdin(Stdio::null());
    command
}

/// Runs `command`: its stdout, at most OUTPUT_LIMIT bytes, or the first line git wrote to stderr
/// when it failed (or why it was stopped).
pub(super) fn run_bounded(command: Command, limit: Duration) -> Result<Vec<u8>, String> {
    run_with(command, limit, None, |stdout| {
        let mut out = Vec::new();
        stdout
            .take(OUTPUT_LIMIT + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("cannot read git's output: {e}"))?;
        if out.len() as u64 > OUTPUT_LIMIT {
            return Err(format!(
                "git's output passed {} MiB; stopped",
                OUTPUT_LIMIT >> 20
            ));
        }
        Ok(out)
    })
}

/// What feeds a git's stdin.
pub(super) type Feed<'f> = Box<dyn FnOnce(ChildStdin) + Send + 'f>;

/// Runs `command` with `feed` writing its stdin (else it has none) and `read` reading its
/// stdout, each on a thread, and kills it past `limit`: a repository can make git wait for ever
/// (a configuration that includes a fifo). What `read` returned, or why it or git failed. A
/// `read` that stops early drops the pipe, which ends git (and so `feed`) too.
pub(super) fn run_with<T: Send>(
    mut command: Command,
    limit: Duration,
    feed: Option<Feed<'_>>,
    read: impl FnOnce(ChildStdout) -> Result<T, String> + Send,
) -> Result<T, String> {
    if feed.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    std::thread::scope(|scope| {
        if let (Some(feed), Some(stdin)) = (feed, stdin) {
            scope.spawn(move || feed(stdin));
        }
        // Its first 64 KiB: a git that writes more meets a closed pipe rather than a full one.
        let errors = scope.spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.take(64 << 10).read_to_end(&mut bytes);
            bytes
        });
        let reader = scope.spawn(move || read(stdout));
        let status = match child.wait_timeout(limit) {
            Ok(Some(status)) => Ok(status),
            finished => {
                let _ = child.kill();
                let _ = child.wait();
                Err(match finished {
                    Err(e) => format!("git: {e}"),
                    _ => format!("git ran past {} s and was stopped", limit.as_secs()),
                })
            }
        };
        let read = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let errors = errors.join().unwrap_or_default();
        match (status?, read) {
            (status, Ok(value)) if status.success() => Ok(value),
            (_, Ok(_)) => Err(first_line(&errors)),
            (status, Err(why)) if status.success() || errors.is_empty() => Err(why),
            (_, Err(why)) => Err(format!("{why} ({})", first_line(&errors))),
        }
    })
}

pub(super) fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("git failed without a message")
        .trim()
        .to_string()
}

/// The short form of a hash (12 characters), for messages.
pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_that_includes_a_fifo_stops_git_at_the_limit_instead_of_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("git")
            .args(["init", "-q"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let git_dir = dir.path().join(".git");
        let fifo = std::ffi::CString::new(git_dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let config = git_dir.join("config");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("{text}[include]\n\tpath = fifo\n")).unwrap();
        let started = std::time::Instant::now();
        let opened = Repository::open_with_limit(dir.path(), Duration::from_secs(2));
        let error = opened
            .expect_err("git cannot read its configuration")
            .to_string();
        assert!(
            error.contains("git ran past 2 s and was stopped"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
