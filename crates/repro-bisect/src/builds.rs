//! One harness per tested tree, built ahead: the include directories at a commit exported into
//! `.repro/bisect/trees/<key>/`, the spec's artifact for them in `.repro/bisect/artifacts/<key>/`
//! and its production build (only harness.cu compiles: the runtime library is cached for every
//! commit). A pool of `--jobs` threads builds the candidates the search will need next while the
//! current one runs; the key is the include directories' git tree ids, so a tree met twice (two
//! commits that did not change them) is built once, and the build cache answers for it in every
//! later bisect; a failed build is recorded (`.repro/bisect/failed/`, keyed by the artifact's
//! files and the nvcc) and not tried again.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::git::Repository;
use crate::build::Variant;
use crate::generate::artifact;
use crate::plan::Plan;
use crate::spec::ResolvedSpec;

/// What bisect builds from: the spec, and which of its include directories the repository holds.
pub struct Source {
    pub repo: Repository,
    pub spec: ResolvedSpec,
    /// (index into `spec.include_dirs`, its path relative to the repository's root).
    pub inside: Vec<(usize, String)>,
    /// bisect's folder, `<artifact>/.repro/bisect`.
    pub work: PathBuf,
    pub nvcc: Option<PathBuf>,
}

impl Source {
    /// The include directories' paths in the repository, each once.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.inside.iter().map(|(_, p)| p.clone()).collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// The key of `commit`'s include directories: a hash of their tree ids; Err(the folder) when
    /// one does not exist at that commit.
    pub fn tree_key(&self, commit: &str) -> Result<String, String> {
        let mut hasher = blake3::Hasher::new();
        for path in self.paths() {
            let tree = self
                .repo
                .tree_of(commit, &path)
                .ok_or_else(|| path.clone())?;
            hasher.update(path.as_bytes());
            hasher.update(&[0]);
            hasher.update(tree.as_bytes());
            hasher.update(&[0]);
        }
        Ok(hasher.finalize().to_hex()[..20].to_string())
    }

    /// Exports `commit`'s include directories (once per key), writes the artifact that reads
    /// them, and builds it; the harness binary and whether nvcc ran (the build cache may answer),
    /// or why it cannot be judged.
    fn build(&self, commit: &str, key: &str) -> Built {
        // What stops a build before nvcc runs (an export, a render) is no verdict on the tree.
        let before_nvcc = |why: String| Failure {
            why,
            compiled: false,
        };
        let trees = self.work.join("trees").join(key);
        // Beside the tree, not in it: the tree is the commit's files (a root include directory's
        // may hold any name).
        let complete = self.work.join("trees").join(format!("{key}.complete"));
        if !complete.is_file() {
            let _ = std::fs::remove_dir_all(&trees);
            self.repo
                .export(commit, &self.paths(), &trees)
                .map_err(|e| before_nvcc(e.to_string()))?;
            std::fs::write(&complete, commit).map_err(|e| before_nvcc(e.to_string()))?;
        }
        let mut spec = self.spec.clone();
        for (index, path) in &self.inside {
            spec.include_dirs[*index] = trees.join(path);
        }
        let dir = self.work.join("artifacts").join(key);
        let plan = Plan::for_spec(spec, dir).map_err(|e| before_nvcc(e.render()))?;
        let files = plan
            .artifact
            .as_ref()
            .expect("a plan of a spec has its files");
        if !artifact::is_current(files) {
            // bisect's own folder: nothing here is the user's to keep.
            artifact::write(files, &plan.spec.path, true).map_err(|e| before_nvcc(e.render()))?;
        }
        // A tree that nvcc refused with these very files fails again: said from the record.
        // What nvcc reads of the artifact: not its spec.yaml (read by the harness at run time)
        // or README.
        let mut fingerprint = blake3::Hasher::new();
        for file in files
            .files
            .iter()
            .filter(|f| f.name != "spec.yaml" && f.name != "README.md")
        {
            fingerprint.update(file.name.as_bytes());
            fingerprint.update(file.content.as_bytes());
        }
        fingerprint.update(format!("{:?}", self.nvcc).as_bytes());
        let failed = self
            .work
            .join("failed")
            .join(&fingerprint.finalize().to_hex()[..20]);
        if let Ok(why) = std::fs::read_to_string(&failed) {
            return Err(before_nvcc(why));
        }
        match crate::build::build_variant(&plan, self.nvcc.as_deref(), Variant::Production) {
            Ok(built) => Ok((
                built.binary.canonicalize().unwrap_or(built.binary),
                built.compiled,
            )),
            Err(crate::engine_error::EngineError::Build {
                first_error, code, ..
            }) => {
                let why = match first_error {
                    Some(line) => format!("nvcc exit {code}: {line}"),
                    None => format!("nvcc exit {code}"),
                };
                if let Some(folder) = failed.parent() {
                    let _ = std::fs::create_dir_all(folder);
                }
                let _ = std::fs::write(&failed, &why);
                Err(Failure {
                    why,
                    compiled: true,
                })
            }
            // No nvcc to run, a file that cannot be written: not recorded, tried again.
            Err(e) => Err(before_nvcc(e.render())),
        }
    }
}

/// A finished build: the harness and whether nvcc ran, or why there is none.
pub type Built = Result<(PathBuf, bool), Failure>;

/// A build that failed: nvcc's first error (or what else stopped it), and whether nvcc ran this
/// time (false when the failure of the same files was recorded before, or nvcc never ran).
#[derive(Debug, Clone)]
pub struct Failure {
    pub why: String,
    pub compiled: bool,
}

/// A build's state in the pool.
#[derive(Debug, Clone)]
enum State {
    Queued,
    Running,
    /// The binary or why not, and the seconds the build took (export, render, nvcc).
    Done(Built, f64),
}

/// What a pool worker runs: a commit's and key's build.
type BuildFn<'a> = Box<dyn Fn(&str, &str) -> Built + Send + Sync + 'a>;

/// The build pool: a queue the search fills (what it needs now at the front, what it may need
/// next behind), worked by `jobs` threads. Nobody waits on it forever: a build that panics
/// breaks the pool (every wait then panics with its message: a bug, exit 101), and the search
/// holds a `Closing` that lets the workers go however it ends, a panic included.
pub struct Pool<'a> {
    build: BuildFn<'a>,
    inner: Mutex<Inner>,
    changed: Condvar,
}

struct Inner {
    queue: VecDeque<(String, String)>,
    states: HashMap<String, State>,
    closed: bool,
    built: usize,
    /// A build panicked, with this message.
    broken: Option<String>,
}

/// Closes its pool when dropped.
pub struct Closing<'p, 'a>(&'p Pool<'a>);

impl Drop for Closing<'_, '_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl<'a> Pool<'a> {
    pub fn new(source: &'a Source) -> Pool<'a> {
        Pool::with(Box::new(move |commit, key| source.build(commit, key)))
    }

    fn with(build: BuildFn<'a>) -> Pool<'a> {
        Pool {
            build,
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                states: HashMap::new(),
                closed: false,
                built: 0,
                broken: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// The pool's state. A thread that panicked holding the lock changed nothing half-way (each
    /// hold is a few map and queue operations), so a poisoned lock is used as it is: a second
    /// panic would hide the first, or stop a `Closing` from letting the workers go.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A guard that closes the pool when dropped.
    pub fn closing(&self) -> Closing<'_, 'a> {
        Closing(self)
    }

    /// Asks for the build of `key` (from `commit`): first in line when `now`, else after
    /// what is asked already. Nothing when it is built or being built.
    pub fn request(&self, commit: &str, key: &str, now: bool) {
        let mut inner = self.lock();
        match inner.states.get(key) {
            Some(State::Queued) if now => {
                inner.queue.retain(|(_, k)| k != key);
                inner.queue.push_front((commit.into(), key.into()));
            }
            Some(_) => return,
            None => {
                inner.states.insert(key.into(), State::Queued);
                let entry = (commit.to_string(), key.to_string());
                if now {
                    inner.queue.push_front(entry);
                } else {
                    inner.queue.push_back(entry);
                }
            }
        }
        self.changed.notify_all();
    }

    /// Waits for the build of `key` (requested before). Panics when a build panicked: the pool
    /// is broken, and what the search waits for may never come.
    pub fn wait(&self, key: &str) -> (Built, f64) {
        let mut inner = self.lock();
        loop {
            if let Some(State::Done(result, seconds)) = inner.states.get(key) {
                return (result.clone(), *seconds);
            }
            if let Some(why) = inner.broken.clone() {
                drop(inner);
                panic!("a bisect build panicked: {why}");
            }
            inner = self
                .changed
                .wait(inner)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// How many times nvcc ran (builds the cache answered aside).
    pub fn built(&self) -> usize {
        self.lock().built
    }

    /// Lets the workers stop once the queue is empty (builds started ahead finish: their
    /// results are cached for the next bisect of this spec).
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.queue.clear();
        self.changed.notify_all();
    }

    /// A worker: builds what is queued until the pool is closed.
    pub fn work(&self) {
        loop {
            let (commit, key) = {
                let mut inner = self.lock();
                loop {
                    if let Some(job) = inner.queue.pop_front() {
                        inner.states.insert(job.1.clone(), State::Running);
                        break job;
                    }
                    if inner.closed {
                        return;
                    }
                    inner = self
                        .changed
                        .wait(inner)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            let started = Instant::now();
            // A panic here would leave the build `Running` and its waiter waiting: the pool is
            // broken instead, and every waiter told (the panic hook has printed it already).
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| (self.build)(&commit, &key)));
            let seconds = started.elapsed().as_secs_f64();
            let mut inner = self.lock();
            let result = match result {
                Ok(result) => result,
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "(no message)".into());
                    inner.broken = Some(format!("{} ({why})", super::git::short(&commit)));
                    inner.closed = true;
                    inner.queue.clear();
                    self.changed.notify_all();
                    return;
                }
            };
            if matches!(result, Ok((_, true)) | Err(Failure { compiled: true, .. })) {
                inner.built += 1; // nvcc ran (a failed build too)
            }
            inner.states.insert(key, State::Done(result, seconds));
            self.changed.notify_all();
        }
    }
}

/// `path` relative to `root` when it lies inside it (both canonical).
pub fn inside(path: &Path, root: &Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    path.strip_prefix(root)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Runs `body` on a thread; whether it panicked, or None when it had not ended after 30 s
    /// (it hangs).
    fn panics_within_30_s(body: impl FnOnce() + Send + 'static) -> Option<bool> {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(body));
            let _ = sender.send(outcome.is_err());
        });
        receiver.recv_timeout(Duration::from_secs(30)).ok()
    }

    #[test]
    fn a_build_that_panics_ends_the_wait_for_it_with_a_panic_not_a_hang() {
        let outcome = panics_within_30_s(|| {
            let pool = Pool::with(Box::new(|_, _| panic!("a build bug")));
            std::thread::scope(|scope| {
                let _closing = pool.closing();
                for _ in 0..2 {
                    scope.spawn(|| pool.work());
                }
                pool.request("c0ffee", "tree-a", true);
                pool.request("c0ffee", "tree-b", false);
                let _ = pool.wait("tree-b");
            });
        });
        assert_eq!(outcome, Some(true));
    }

    #[test]
    fn a_search_that_panics_lets_the_workers_go() {
        let outcome = panics_within_30_s(|| {
            let pool = Pool::with(Box::new(|_, _| {
                Err(Failure {
                    why: "no nvcc".into(),
                    compiled: false,
                })
            }));
            std::thread::scope(|scope| {
                let _closing = pool.closing();
                scope.spawn(|| pool.work());
                pool.request("c0ffee", "tree-a", true);
                assert!(pool.wait("tree-a").0.is_err());
                panic!("a search bug");
            });
        });
        assert_eq!(outcome, Some(true));
    }
}
