//! What `repro bisect` asks of the kernel library's repository, through the `git` program: the
//! commits between two revisions, the trees of the include directories at each, a read-only
//! export of those trees, and the facts of the answer (subject, author date, changed files, diff
//! stat). Every call reads; none takes git's optional locks (`GIT_OPTIONAL_LOCKS=0`, so not even
//! `git status` refreshes the user's index), and nothing is ever checked out in the user's tree.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::BisectError;

/// A repository the user named with `--repo`.
#[derive(Debug, Clone)]
pub struct Repository {
    /// Its top-level folder, canonical.
    pub root: PathBuf,
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
        let not_a_repo = |why: String| BisectError::NotARepository {
            dir: dir.to_path_buf(),
            why,
        };
        if !dir.is_dir() {
            return Err(not_a_repo("no such folder".into()));
        }
        let output = git_in(dir)
            .args(["rev-parse", "--show-toplevel"])
            .output()
            .map_err(|e| not_a_repo(format!("cannot run git: {e}")))?;
        if !output.status.success() {
            return Err(not_a_repo(first_line(&output.stderr)));
        }
        let root = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        let root = root.canonicalize().unwrap_or(root);
        Ok(Repository { root })
    }

    fn git(&self) -> Command {
        git_in(&self.root)
    }

    /// Runs git with `args`; its stdout, or what it said on failure.
    fn read(&self, args: &[&str]) -> Result<String, String> {
        let output = self
            .git()
            .args(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(first_line(&output.stderr))
        }
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
        self.git()
            .args(["merge-base", "--is-ancestor", ancestor, commit])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The commits after `good` up to `bad`, oldest first, that are descendants of `good` and
    /// ancestors of `bad` (`--ancestry-path`), following first parents only when asked, and
    /// touching `paths` (relative to the root; empty: any).
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
        args.extend(paths.iter().map(String::as_str));
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

    /// Writes the files under `paths` at `commit` into `dest` (as `dest/<path>/...`), from git's
    /// object store: a read-only export (`git archive`), no worktree, no index.
    pub fn export(&self, commit: &str, paths: &[String], dest: &Path) -> Result<(), BisectError> {
        let failed = |why: String| BisectError::Git {
            what: format!("export {} at {}", paths.join(", "), short(commit)),
            why,
        };
        std::fs::create_dir_all(dest)
            .map_err(|e| failed(format!("cannot create {}: {e}", dest.display())))?;
        let mut child = self
            .git()
            .args(["archive", "--format=tar", commit, "--"])
            .args(paths)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run git: {e}")))?;
        let stdout = child.stdout.take().expect("piped");
        let unpacked = tar::Archive::new(stdout).unpack(dest);
        let output = child
            .wait_with_output()
            .map_err(|e| failed(format!("git archive: {e}")))?;
        if !output.status.success() {
            return Err(failed(first_line(&output.stderr)));
        }
        unpacked.map_err(|e| failed(format!("cannot unpack into {}: {e}", dest.display())))
    }

    /// Hash, subject, author and author date of `commit`.
    pub fn info(&self, commit: &str) -> CommitInfo {
        let text = self
            .read(&["show", "-s", "--format=%H%x00%s%x00%an%x00%aI", commit])
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

    /// The files under `paths` that `commit` changed against `parent`, and git's diff stat of them.
    pub fn changes(&self, parent: &str, commit: &str, paths: &[String]) -> (Vec<String>, String) {
        let mut names = vec!["diff", "--name-only", parent, commit, "--"];
        names.extend(paths.iter().map(String::as_str));
        let mut stat = vec!["diff", "--stat=100", parent, commit, "--"];
        stat.extend(paths.iter().map(String::as_str));
        let files = self
            .read(&names)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        (
            files,
            self.read(&stat).unwrap_or_default().trim_end().to_string(),
        )
    }

    /// Uncommitted changes under `paths` (`git status --porcelain` lines), untracked files
    /// included: what the user ran at their checkout is then no commit of the history.
    pub fn uncommitted(&self, paths: &[String]) -> Vec<String> {
        let mut args = vec!["status", "--porcelain", "--untracked-files=normal", "--"];
        args.extend(paths.iter().map(String::as_str));
        self.read(&args)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// git run in `dir`, reading only: no optional locks (status would otherwise refresh the
/// user's index), no pager, no prompt, and the user's configuration left as it is.
fn git_in(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .stdin(Stdio::null());
    command
}

fn first_line(bytes: &[u8]) -> String {
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
