//! `repro bisect SPEC --repo DIR --good REV --bad REV` (docs/cli.md): the first commit of a
//! kernel library at which the spec fails the way it fails at `--bad`. The spec, its inputs,
//! reference and flags stay fixed; the include directories that lie inside the repository are
//! read from each tested commit (export.rs: written from git's objects byte for byte, never
//! checked out, the repository's own commands never run: git.rs); each tree is built once
//! (builds.rs) and judged by one harness run: the `--bad` class is bad, a pass is good, anything
//! else (a build break, another class, a hang when `--bad` does not hang) is skipped, as
//! `git bisect skip` would (search.rs). The answer (report.rs) goes to the report, `--json`
//! and the bundle.
//!
//! A crate of its own (README.md, "Layout"), above the engine and `repro-flags` (the machine that
//! answers the spec's lookups), below `repro-bundle`, whose README quotes the answer; it fails with
//! [`BisectError`].

pub mod builds;
pub mod error;
pub mod export;
pub mod git;
pub mod report;
pub mod search;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{check_mode, spec};
use repro_engine::{build, engine_error, generate, plan, run};
use repro_flags::machine;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use error::BisectError;

pub use crate::check_mode::Mode;
use crate::run::{run_quiet, Checks, RunOutcome};
use builds::{Pool, Source};
use report::{Answer, Tested};
use search::{Search, Verdict};

/// What `repro bisect` takes besides the spec.
#[derive(Debug, Clone)]
pub struct BisectOptions {
    pub repo: PathBuf,
    pub good: String,
    pub bad: String,
    /// Ones, random or probe; sanitize is refused (a commit is judged by one plain run's class).
    pub mode: Mode,
    /// The failure class that makes a commit bad [default: the class at `--bad`].
    pub class: Option<String>,
    /// Builds at once: the current candidate and those the search may need next.
    pub jobs: usize,
    pub first_parent: bool,
    /// Only commits touching these paths (relative to the repository) [default: the include
    /// directories inside it].
    pub paths: Vec<String>,
    pub timeout: Option<f64>,
    pub nvcc: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// The spec's artifact folder, under which bisect keeps its work [default: generated/<name>/].
    pub output: Option<PathBuf>,
}

/// Where the last bisect of an artifact left its answer (read by `repro bundle`).
pub fn result_path(artifact: &Path) -> PathBuf {
    artifact.join(".repro/bisect/result.json")
}

/// Runs the search; the exit code: 0 when the first bad commit is named, 1 when skipped commits
/// leave a few candidates.
pub fn bisect(spec_path: &Path, options: &BisectOptions) -> Result<u8, BisectError> {
    let started = Instant::now();
    if options.mode == Mode::Sanitize {
        return Err(BisectError::UnsupportedMode {
            mode: options.mode.name(),
        });
    }
    let spec = crate::plan::load_spec(spec_path, &crate::machine::Machine)?;
    let repo = git::Repository::open(&options.repo)?;
    let inside: Vec<(usize, String)> = spec
        .include_dirs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| builds::inside(d, &repo.root).map(|p| (i, p)))
        .collect();
    if inside.is_empty() {
        return Err(BisectError::NoIncludeDirInRepo {
            spec: spec.path.clone(),
            repo: repo.root.clone(),
            dirs: spec
                .include_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect(),
        });
    }
    if let Some(class) = &options.class {
        check_class(class)?;
    }
    let artifact = options
        .output
        .clone()
        .unwrap_or_else(|| crate::generate::default_dir(&spec));
    let source = Source {
        repo: repo.clone(),
        inside,
        work: repro_text::paths::absolute(&artifact.join(".repro/bisect")),
        nvcc: options.nvcc.clone(),
        spec,
    };
    let include_paths = source.paths();
    let dirty = repo.uncommitted(&include_paths)?;
    if !dirty.is_empty() {
        return Err(BisectError::Uncommitted {
            repo: repo.root.clone(),
            lines: dirty,
        });
    }
    let good = repo.resolve(&options.good, "--good")?;
    let bad = repo.resolve(&options.bad, "--bad")?;
    if good == bad || !repo.is_ancestor(&good, &bad) {
        return Err(BisectError::NotAncestor {
            good: options.good.clone(),
            bad: options.bad.clone(),
        });
    }
    let filter = if options.paths.is_empty() {
        include_paths.clone()
    } else {
        options.paths.clone()
    };
    let mut commits = repo.commits_between(&good, &bad, options.first_parent, &filter)?;
    // The search's bad end is --bad itself, whether or not it touched the paths.
    if commits.last() != Some(&bad) {
        commits.push(bad.clone());
    }
    std::fs::create_dir_all(&source.work).map_err(BisectError::io("create", &source.work))?;

    let pool = Pool::new(&source);
    let judge = Judge {
        source: &source,
        pool: &pool,
        mode: options.mode,
        timeout: options.timeout,
    };
    let answer = std::thread::scope(|scope| {
        for _ in 0..options.jobs.max(1) {
            scope.spawn(|| pool.work());
        }
        // However the search ends (a panic too), the workers stop once their builds are done:
        // the scope waits for them.
        let _closing = pool.closing();
        search(&judge, &commits, &good, &bad, options)
    })?;
    let answer = Answer {
        builds: pool.built(),
        wall_seconds: started.elapsed().as_secs_f64(),
        ..answer
    };
    print!("{}", answer.render());
    let json = serde_json::to_string_pretty(&answer).expect("the answer serializes");
    let result = result_path(&artifact);
    std::fs::write(&result, &json).map_err(BisectError::io("write", &result))?;
    if let Some(path) = &options.json {
        std::fs::write(path, &json).map_err(BisectError::io("write", path))?;
    }
    Ok(if answer.first_bad.is_some() { 0 } else { 1 })
}

/// The search proper, from the checks of both ends to the answer (its build count and wall time
/// filled in by the caller).
fn search(
    judge: &Judge,
    commits: &[String],
    good: &str,
    bad: &str,
    options: &BisectOptions,
) -> Result<Answer, BisectError> {
    let repo = &judge.source.repo;
    // The ends first: --bad names the class searched for, --good must pass.
    println!(
        "bisect  {} commits after --good {}, up to --bad {}; {} mode",
        commits.len(),
        git::short(good),
        git::short(bad),
        options.mode.name()
    );
    let at_bad = judge.test(bad, true)?;
    let class = match (&at_bad.run, &options.class) {
        (Ok(run), Some(class)) if &run.class == class => class.clone(),
        (Ok(run), None) if run.class != "ok" => run.class.clone(),
        (run, class) => {
            return Err(BisectError::BadPasses {
                rev: options.bad.clone(),
                class: class.clone(),
                what: describe(run),
            })
        }
    };
    progress("--bad", bad, &at_bad, &class, None, repo);
    let at_good = judge.test(good, true)?;
    match &at_good.run {
        Ok(run) if run.class == "ok" => {}
        run => {
            return Err(BisectError::GoodFails {
                rev: options.good.clone(),
                what: describe(run),
            })
        }
    }
    progress("--good", good, &at_good, &class, None, repo);

    let mut search = Search::new(commits.len());
    let mut tested: Vec<Tested> = Vec::new();
    let mut by_index: Vec<Option<Tested>> = vec![None; commits.len()];
    by_index[commits.len() - 1] = Some(at_bad.record(&class));
    while let Some(index) = search.next() {
        // Build ahead what the search may need next (this candidate first).
        for (rank, next) in search.upcoming(options.jobs.max(1)).into_iter().enumerate() {
            judge.prefetch(&commits[next], rank == 0);
        }
        let steps = search.steps_left();
        let result = judge.test(&commits[index], false)?;
        let record = result.record(&class);
        search.record(index, record.verdict);
        progress(
            &format!("~{steps} left"),
            &commits[index],
            &result,
            &class,
            Some(record.verdict),
            repo,
        );
        tested.push(record.clone());
        by_index[index] = Some(record);
    }
    let mut answer = Answer {
        spec: judge.source.spec.path.display().to_string(),
        repo: repo.root.display().to_string(),
        good: good.into(),
        bad: bad.into(),
        mode: options.mode.name().into(),
        class: class.clone(),
        first_bad: None,
        candidates: Vec::new(),
        at_first_bad: None,
        at_parent: None,
        changed_files: Vec::new(),
        diff_stat: String::new(),
        commits_in_range: commits.len(),
        tested,
        builds: 0,
        wall_seconds: 0.0,
    };
    match search.answer() {
        search::Answer::Found(index) => {
            let commit = &commits[index];
            answer.first_bad = Some(repo.info(commit));
            answer.at_first_bad = by_index[index].clone();
            answer.at_parent = if index == 0 {
                Some(at_good.record(&class))
            } else {
                by_index[index - 1].clone()
            };
            let parent = format!("{commit}^");
            let (files, stat) = repo.changes(&parent, commit, &judge.source.paths());
            answer.changed_files = files;
            answer.diff_stat = stat;
        }
        search::Answer::Ambiguous(indices) => {
            answer.candidates = indices.iter().map(|&i| repo.info(&commits[i])).collect();
        }
    }
    Ok(answer)
}

/// One commit's result: the run's outcome, or why it could not run (a build error, a missing
/// include directory), and the build's seconds when it was built here.
#[derive(Debug, Clone)]
struct Judged {
    commit: String,
    run: Result<RunOutcome, Skipped>,
    build: Build,
}

/// How a commit's harness came to be.
#[derive(Debug, Clone, Copy)]
enum Build {
    /// An earlier run of the same harness and inputs answered: no run.
    ResultCached,
    /// The build cache had the harness (the same tree built by an earlier bisect).
    UpToDate,
    Compiled(f64),
    /// Nothing to build (an include directory missing at the commit).
    None,
}

/// Why a commit could not be run.
#[derive(Debug, Clone)]
struct Skipped {
    class: String,
    why: String,
}

impl Judged {
    fn record(&self, bad_class: &str) -> Tested {
        let (verdict, class, evidence) = match &self.run {
            Ok(run) if run.class == "ok" => {
                (Verdict::Good, run.class.clone(), run.evidence.clone())
            }
            Ok(run) if run.class == bad_class => {
                (Verdict::Bad, run.class.clone(), run.evidence.clone())
            }
            Ok(run) => (
                Verdict::Skip,
                run.class.clone(),
                format!("another class than `{bad_class}`: {}", run.evidence),
            ),
            Err(skipped) => (Verdict::Skip, skipped.class.clone(), skipped.why.clone()),
        };
        Tested {
            commit: self.commit.clone(),
            verdict,
            class,
            evidence,
            build_seconds: match self.build {
                Build::Compiled(s) => Some(s),
                _ => None,
            },
        }
    }
}

fn describe(run: &Result<RunOutcome, Skipped>) -> String {
    match run {
        Ok(r) if r.evidence.is_empty() => format!("class `{}`", r.class),
        Ok(r) => format!("class `{}`: {}", r.class, r.evidence),
        Err(s) => s.why.clone(),
    }
}

/// A progress line per test: where the search is, the commit, how it was judged.
fn progress(
    step: &str,
    commit: &str,
    result: &Judged,
    class: &str,
    verdict: Option<Verdict>,
    repo: &git::Repository,
) {
    let info = repo.info(commit);
    let built = match result.build {
        Build::Compiled(s) => format!("built in {s:.1} s"),
        Build::UpToDate => "build up to date".into(),
        Build::ResultCached => "result cached".into(),
        Build::None => "not built".into(),
    };
    let verdict = verdict.unwrap_or_else(|| result.record(class).verdict);
    let what = describe(&result.run);
    println!(
        "bisect  [{step}] {} {} ({built}): {} ({what})",
        git::short(commit),
        truncate(&info.subject, 60),
        match verdict {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Skip => "skip",
        },
    );
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(chars).collect::<String>())
    }
}

/// A class `--class` may name: one of the verdict classes (docs/cli.md), `race` or `sanitizer`.
fn check_class(class: &str) -> Result<(), BisectError> {
    use crate::spec::model::Verdict;
    use repro_contract::report::Class;
    let named = match Class::parse(class) {
        Some(Class::Verdict(verdict)) => verdict != Verdict::Ok,
        Some(Class::Race | Class::Sanitizer) => true,
        Some(Class::Reference | Class::NoDevice | Class::Timed) | None => false,
    };
    if named {
        return Ok(());
    }
    Err(BisectError::UnknownClass {
        class: class.into(),
    })
}

/// The longest a harness run may take before it is killed: any number of seconds (a huge or
/// infinite `--timeout` or `check.timeout`, a NaN) saturates at a week (run::limit_of).
fn run_limit(seconds: f64) -> Duration {
    crate::run::limit_of(seconds)
}

/// Judges commits: a build from the pool (the build cache answers for a known tree), then a run
/// or the recorded result of the same harness and spec.
struct Judge<'a> {
    source: &'a Source,
    pool: &'a Pool<'a>,
    mode: Mode,
    timeout: Option<f64>,
}

impl Judge<'_> {
    /// Where the result of a run of `binary` (built in the artifact of tree `key`) is kept: keyed
    /// by the binary's bytes, the artifact's spec.yaml (the harness reads its inputs' settings
    /// from it), the mode and the timeout, so that an edited spec or header is never answered
    /// from an old run.
    fn result_file(&self, binary: &Path, key: &str) -> Option<PathBuf> {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&std::fs::read(binary).ok()?);
        let spec = self
            .source
            .work
            .join("artifacts")
            .join(key)
            .join("spec.yaml");
        hasher.update(&std::fs::read(spec).ok()?);
        hasher.update(format!("{} {:?}", self.mode.name(), self.timeout).as_bytes());
        Some(
            self.source
                .work
                .join("results")
                .join(format!("{}.json", &hasher.finalize().to_hex()[..24])),
        )
    }

    /// Queues `commit`'s build (a build the cache answers costs no nvcc call).
    fn prefetch(&self, commit: &str, now: bool) {
        if let Ok(key) = self.source.tree_key(commit) {
            self.pool.request(commit, &key, now);
        }
    }

    /// `commit`'s result. An end (`--good`, `--bad`) is always run again: a result cached by an
    /// earlier bisect may be from another machine or driver.
    fn test(&self, commit: &str, end: bool) -> Result<Judged, BisectError> {
        let key = match self.source.tree_key(commit) {
            Ok(key) => key,
            Err(path) => {
                return Ok(Judged {
                    commit: commit.into(),
                    run: Err(Skipped {
                        class: "missing".into(),
                        why: format!("{path} does not exist at this commit"),
                    }),
                    build: Build::None,
                })
            }
        };
        self.pool.request(commit, &key, true);
        let (built, seconds) = self.pool.wait(&key);
        let build = match &built {
            Ok((_, false))
            | Err(builds::Failure {
                compiled: false, ..
            }) => Build::UpToDate,
            _ => Build::Compiled(seconds),
        };
        let binary = match built {
            Ok((binary, _)) => binary,
            Err(failure) => {
                return Ok(Judged {
                    commit: commit.into(),
                    run: Err(Skipped {
                        class: "build".into(),
                        why: failure
                            .why
                            .lines()
                            .next()
                            .unwrap_or("the build failed")
                            .to_string(),
                    }),
                    build,
                })
            }
        };
        let cache = self.result_file(&binary, &key);
        if let (false, Some(run)) = (
            end,
            cache
                .as_ref()
                .and_then(|c| std::fs::read_to_string(c).ok())
                .and_then(|t| serde_json::from_str::<RunOutcome>(&t).ok()),
        ) {
            return Ok(Judged {
                commit: commit.into(),
                run: Ok(run),
                build: Build::ResultCached,
            });
        }
        let outcome = self.run(&binary, &key)?;
        if outcome.class == "no_device" {
            return Err(BisectError::NoDevice);
        }
        if let Some(cache) = cache {
            if let Some(dir) = cache.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&cache, serde_json::to_string(&outcome).expect("serializes"));
        }
        Ok(Judged {
            commit: commit.into(),
            run: Ok(outcome),
            build,
        })
    }

    fn run(&self, binary: &Path, key: &str) -> Result<RunOutcome, BisectError> {
        let spec = &self.source.spec;
        let artifact = self.source.work.join("artifacts").join(key);
        let mut args: Vec<String> = self
            .mode
            .harness_flag()
            .map(|o| o.flag())
            .into_iter()
            .collect();
        let checks = Checks {
            timeout: self.timeout,
            ..Checks::default()
        };
        args.extend(checks.arguments(&artifact));
        let timeout = self.timeout.unwrap_or(spec.check.timeout);
        let (reference_seconds, _) = crate::run::reference_work(spec);
        let launches = if self.mode == Mode::Probe {
            50.0
        } else {
            f64::from(spec.check.repeat.max(1))
        };
        let seconds = 60.0 + timeout * launches * 2.0 + reference_seconds * 8.0;
        Ok(run_quiet(binary, &args, run_limit(seconds))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_limit_from_any_number_of_seconds_is_a_duration_of_at_most_a_week() {
        assert_eq!(run_limit(90.0), Duration::from_secs(90));
        for seconds in [1e308, f64::INFINITY, f64::MAX, f64::NAN, -1.0, 1e9] {
            assert_eq!(
                run_limit(seconds),
                crate::run::MAX_PROCESS_LIMIT,
                "{seconds}"
            );
        }
    }

    /// The contract's mode list holds sanitize, which `--mode` does not offer: a caller that
    /// passes it anyway is told so before anything is read.
    #[test]
    fn sanitize_mode_is_refused() {
        let options = BisectOptions {
            repo: PathBuf::from("/nonexistent/repo"),
            good: "a".into(),
            bad: "b".into(),
            mode: Mode::Sanitize,
            class: None,
            jobs: 1,
            first_parent: false,
            paths: Vec::new(),
            timeout: None,
            nvcc: None,
            json: None,
            output: None,
        };
        let error = bisect(Path::new("/nonexistent/spec.yaml"), &options).unwrap_err();
        assert!(
            matches!(error, BisectError::UnsupportedMode { mode: "sanitize" }),
            "{error}"
        );
        assert_eq!(error.exit_code(), repro_contract::exit::USAGE);
    }
}
