//! One harness per tested tree, built ahead: the include directories at a commit exported into
//! `.repro/bisect/trees/<key>/`, the spec's artifact for them in `.repro/bisect/artifacts/<key>/`
//! and its production build (only harness.cu compiles: the runtime library is cached for every
//! commit). A pool of `--jobs` threads builds the candidates the search will need next while the
//! current one runs; the key is the include directories' git tree ids, so a tree met twice (two
//! commits that did not change them) is built once, and the build cache answers for it in every
//! later bisect; a failed build is recorded (`.repro/bisect/failed/`, keyed by the artifact's
//! files and the nvcc) and not tried again.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
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
            Err(crate::error::Error::Build {
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

/// The build pool: a queue the search fills (what it needs now at the front, what it may need
/// next behind), worked by `jobs` threads.
pub struct Pool<'a> {
    source: &'a Source,
    inner: Mutex<Inner>,
    changed: Condvar,
}

struct Inner {
    queue: VecDeque<(String, String)>,
    states: HashMap<String, State>,
    closed: bool,
    built: usize,
}

impl<'a> Pool<'a> {
    pub fn new(source: &'a Source) -> Pool<'a> {
        Pool {
            source,
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                states: HashMap::new(),
                closed: false,
                built: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// Asks for the build of `key` (from `commit`): first in line when `now`, else after
    /// what is asked already. Nothing when it is built or being built.
    pub fn request(&self, commit: &str, key: &str, now: bool) {
        let mut inner = self.inner.lock().expect("pool lock");
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

    /// Waits for the build of `key` (requested before).
    pub fn wait(&self, key: &str) -> (Built, f64) {
        let mut inner = self.inner.lock().expect("pool lock");
        loop {
            if let Some(State::Done(result, seconds)) = inner.states.get(key) {
                return (result.clone(), *seconds);
            }
            inner = self.changed.wait(inner).expect("pool lock");
        }
    }

    /// How many times nvcc ran (builds the cache answered aside).
    pub fn built(&self) -> usize {
        self.inner.lock().expect("pool lock").built
    }

    /// Lets the workers stop once the queue is empty (builds started ahead finish: their
    /// results are cached for the next bisect of this spec).
    pub fn close(&self) {
        let mut inner = self.inner.lock().expect("pool lock");
        inner.closed = true;
        inner.queue.clear();
        self.changed.notify_all();
    }

    /// A worker: builds what is queued until the pool is closed.
    pub fn work(&self) {
        loop {
            let (commit, key) = {
                let mut inner = self.inner.lock().expect("pool lock");
                loop {
                    if let Some(job) = inner.queue.pop_front() {
                        inner.states.insert(job.1.clone(), State::Running);
                        break job;
                    }
                    if inner.closed {
                        return;
                    }
                    inner = self.changed.wait(inner).expect("pool lock");
                }
            };
            let started = Instant::now();
            let result = self.source.build(&commit, &key);
            let seconds = started.elapsed().as_secs_f64();
            let mut inner = self.inner.lock().expect("pool lock");
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
