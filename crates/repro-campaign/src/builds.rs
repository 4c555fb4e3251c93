//! A campaign's builds: one artifact per distinct instantiation under the results' `builds/`,
//! compiled once for every run that needs it, several at a time on the host's cores. A build
//! that fails is that build's runs' result (`build_failed`, nvcc's first error as evidence), and
//! never stops the other builds.

use std::path::{Path, PathBuf};

use super::execute::{self, Job};
use super::file::{Campaign, Mode};
use super::results::Record;
use super::CampaignError;
use crate::build::{self, Variant};
use crate::engine_error::EngineError;
use crate::generate::artifact;
use crate::plan::Plan;

/// A build that succeeded.
#[derive(Debug, Clone)]
pub struct Built {
    pub binary: PathBuf,
    /// The artifact folder.
    pub dir: PathBuf,
    /// Seconds nvcc took (0 when the cache answered).
    pub seconds: f64,
}

/// One build to make: an instance, as the production or the `-lineinfo` variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildTask {
    pub instance: usize,
    pub variant: Variant,
}

/// The build a run needs.
fn task_of(run: &super::file::Run) -> BuildTask {
    BuildTask {
        instance: run.instance,
        variant: if run.key.mode == Mode::Sanitize {
            Variant::Lineinfo
        } else {
            Variant::Production
        },
    }
}

/// The builds `runs` need, each once, in the order of the first run that needs it (so the first
/// runs can start while later builds compile).
pub fn tasks(campaign: &Campaign, runs: &[usize]) -> Vec<BuildTask> {
    let mut tasks = Vec::new();
    for &r in runs {
        let task = task_of(&campaign.runs[r]);
        if !tasks.contains(&task) {
            tasks.push(task);
        }
    }
    tasks
}

/// Writes the instance's artifact under `results_dir/builds/` (where stale) and builds it.
/// Err is the evidence of a failed build (nvcc's first error line), with the seconds it took.
pub fn build(
    campaign: &Campaign,
    task: BuildTask,
    results_dir: &Path,
    nvcc: Option<&Path>,
) -> Result<Built, (String, f64)> {
    let instance = &campaign.instances[task.instance];
    let dir = results_dir.join("builds").join(&instance.id);
    let started = std::time::Instant::now();
    let outcome = (|| -> Result<build::Built, CampaignError> {
        // Folders of the results' own, not links planted to take the artifact elsewhere.
        super::folder::real_dir(&results_dir.join("builds"))?;
        super::folder::real_dir(&dir)?;
        let plan = Plan::for_spec(instance.spec.clone(), dir.clone())?;
        if let Some(files) = &plan.artifact {
            if !artifact::is_current(files) {
                artifact::write(files, &instance.spec.path, false)?;
            }
        }
        Ok(build::build_variant(&plan, nvcc, task.variant)?)
    })();
    match outcome {
        Ok(built) => Ok(Built {
            binary: built.binary.canonicalize().unwrap_or(built.binary),
            dir,
            seconds: if built.compiled { built.seconds } else { 0.0 },
        }),
        Err(CampaignError::Engine(EngineError::Build { first_error, .. })) => Err((
            first_error.unwrap_or_else(|| "nvcc failed (its output is above)".into()),
            started.elapsed().as_secs_f64(),
        )),
        Err(e) => Err((
            e.to_string().lines().next().unwrap_or("").to_string(),
            started.elapsed().as_secs_f64(),
        )),
    }
}

/// A build's outcome: what it made, or the evidence of its failure with the seconds it took.
pub type Outcome = Result<Built, (String, f64)>;

/// Makes `tasks` on `jobs` threads, first task first, handing each outcome to `done` (on the
/// thread that built it) the moment it is known: a local campaign starts that build's runs at
/// once, a Slurm submission gathers them.
pub fn build_all(
    campaign: &Campaign,
    tasks: &[BuildTask],
    results_dir: &Path,
    nvcc: Option<&Path>,
    jobs: usize,
    done: impl Fn(BuildTask, Outcome) + Sync,
) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, tasks.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&task) = tasks.get(i) else { break };
                done(task, build(campaign, task, results_dir, nvcc));
            });
        }
    });
}

/// What a finished build means for the runs of `pending` that need it: their jobs, or, when
/// it failed, their records.
pub fn runs_of(
    campaign: &Campaign,
    pending: &[usize],
    task: BuildTask,
    outcome: &Outcome,
    results_dir: &Path,
    sanitizer: Option<&(PathBuf, String)>,
) -> Result<Vec<Job>, Vec<Record>> {
    let runs = pending
        .iter()
        .map(|&r| &campaign.runs[r])
        .filter(|run| task_of(run) == task);
    match outcome {
        Ok(built) => Ok(runs
            .map(|run| execute::job(campaign, run, built, results_dir, sanitizer))
            .collect()),
        Err((evidence, seconds)) => Err(runs
            .map(|run| execute::build_failed(&run.key, &campaign.name, evidence, *seconds))
            .collect()),
    }
}
