//! `repro campaign` (docs/campaign.md): a kernel checked over many shapes, modes and build
//! variants, on every GPU of a machine or on a Slurm cluster, resumably.
//!
//! - [`file`]: the campaign file, expanded into runs and distinct builds; [`shapes`]: shapes files.
//! - [`builds`]: one artifact and build per distinct instantiation, under the results folder.
//! - [`execute`]: one run as a harness process, turned into a record.
//! - [`local`]: builds ahead of runs, and a worker per GPU (`devices` chooses and locks them).
//! - [`slurm`]: the same runs as a job array, and the collection of its records.
//! - [`results`]: the results folder and its JSON-lines records; [`summary`]: what they add up
//!   to; [`shape_map`]: where in the shape space the failures are.
//!
//! A crate of its own (README.md, "Layout"), above the engine and `repro-flags` (the machine that
//! answers the spec's lookups); it names no other feature, and fails with [`CampaignError`].

pub mod builds;
pub mod devices;
mod error;
pub mod execute;
pub mod file;
pub mod folder;
pub mod local;
pub mod results;
pub mod shape_map;
pub mod shapes;
pub mod slurm;
pub mod summary;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{check_mode, file_kind, spec};
use repro_engine::{analyze, build, engine_error, generate, plan, run};
use repro_flags::machine;

use std::path::{Path, PathBuf};

pub use error::CampaignError;

use crate::engine_error::EngineError;
use file::{Campaign, Mode};
use results::{CampaignInfo, ResultsDir};

/// Where the runs go.
#[derive(Debug, Clone)]
pub enum Target {
    /// This machine's GPUs: `--devices`, workers per GPU, and whether a GPU another campaign
    /// holds may be shared.
    Local {
        devices: String,
        per_device: usize,
        share_devices: bool,
    },
    Slurm(slurm::Submit),
}

/// What `repro campaign FILE` takes.
#[derive(Debug, Clone)]
pub struct CampaignOptions {
    pub file: PathBuf,
    /// The results folder [default: campaigns/<name>/].
    pub output: Option<PathBuf>,
    pub target: Target,
    /// Builds at a time [default: the host's cores].
    pub build_jobs: Option<usize>,
    pub nvcc: Option<PathBuf>,
}

/// Runs (or submits) the runs of a campaign that are not recorded yet, then prints the summary;
/// returns the summary's exit code.
pub fn campaign(options: &CampaignOptions) -> Result<u8, CampaignError> {
    let campaign = file::load(&options.file)?;
    let dir = options
        .output
        .clone()
        .unwrap_or_else(|| local::default_dir(&campaign.name));
    let results = ResultsDir::open(&dir)?;
    if let Ok(info) = results::read_info(&results.dir) {
        if info.name != campaign.name {
            return Err(CampaignError::OtherCampaign {
                dir: results.dir.clone(),
                other: info.name,
                name: campaign.name,
            });
        }
    }
    let keys: Vec<String> = campaign.runs.iter().map(|r| r.key.text()).collect();
    results.write_info(&CampaignInfo {
        name: campaign.name.clone(),
        file: repro_text::paths::absolute(&options.file),
        runs: keys.clone(),
    })?;
    let recorded = results::latest(results::read_records(&results.path(results::RESULTS_FILE))?);
    let pending: Vec<usize> = (0..campaign.runs.len())
        .filter(|&i| !recorded.get(&keys[i]).is_some_and(|r| r.is_settled()))
        .collect();
    let builds = builds::tasks(&campaign, &pending).len();
    println!(
        "campaign {}: {} runs, {} recorded, {} to run ({} builds); results in {}",
        campaign.name,
        campaign.runs.len(),
        campaign.runs.len() - pending.len(),
        pending.len(),
        builds,
        results.dir.display()
    );
    if !pending.is_empty() {
        crate::build::toolchain::find_nvcc(options.nvcc.as_deref())?;
        let sanitizer = sanitizer_for(&campaign, &pending, options.nvcc.as_deref())?;
        let build_jobs = options
            .build_jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        match &options.target {
            Target::Local {
                devices,
                per_device,
                share_devices,
            } => {
                let whoami = format!(
                    "campaign {} (pid {}, results {})",
                    campaign.name,
                    std::process::id(),
                    results.dir.display()
                );
                let (chosen, locks) = devices::take(devices, *share_devices, &whoami)?;
                let names: Vec<String> = chosen
                    .iter()
                    .map(|d| {
                        d.as_ref()
                            .map_or("the default GPU".into(), |d| format!("GPU {}", d.label()))
                    })
                    .collect();
                println!(
                    "campaign {} worker{} on {}, {build_jobs} builds at a time",
                    chosen.len() * per_device,
                    if chosen.len() * per_device == 1 {
                        ""
                    } else {
                        "s"
                    },
                    names.join(", ")
                );
                let workers = local::Workers {
                    devices: chosen,
                    per_device: *per_device,
                    build_jobs,
                    nvcc: options.nvcc.clone(),
                    sanitizer,
                };
                let outcome = local::run(&campaign, &pending, &results, &workers)?;
                drop(locks);
                println!(
                    "campaign {} runs recorded in {}",
                    outcome.recorded,
                    local::clock(outcome.seconds)
                );
                if outcome.no_device {
                    print_summary(&campaign.name, &keys, &results)?;
                    return Err(CampaignError::NoDevice);
                }
            }
            Target::Slurm(submit) => {
                let jobs = build_for_slurm(
                    &campaign, &pending, &results, options, build_jobs, sanitizer,
                )?;
                if jobs.is_empty() {
                    println!("slurm   nothing to submit: every build failed");
                } else {
                    println!(
                        "{}",
                        slurm::submit(&campaign.name, jobs, &results.dir, submit)?
                    );
                    return Ok(repro_contract::exit::PASSED);
                }
            }
        }
    } else {
        println!("campaign every run is recorded (delete results.jsonl, or give --output another folder, to run them again)");
    }
    print_summary(&campaign.name, &keys, &results)
}

/// compute-sanitizer and its `--help` text when a pending run is in sanitize mode.
fn sanitizer_for(
    campaign: &Campaign,
    pending: &[usize],
    nvcc: Option<&Path>,
) -> Result<Option<(PathBuf, String)>, CampaignError> {
    if !pending
        .iter()
        .any(|&r| campaign.runs[r].key.mode == Mode::Sanitize)
    {
        return Ok(None);
    }
    let nvcc = crate::build::toolchain::find_nvcc(nvcc)?;
    let sanitizer = crate::run::sanitize::find(&nvcc.path).ok_or_else(|| {
        EngineError::Toolchain(format!(
            "sanitize mode needs compute-sanitizer (looked next to {} and on PATH); it ships with the CUDA toolkit",
            nvcc.path.display()
        ))
    })?;
    let help = crate::run::sanitize::help_text(&sanitizer);
    Ok(Some((sanitizer, help)))
}

/// The builds of `pending`, made here several at a time, and the jobs of the runs whose build
/// succeeded; the runs of a failed build are recorded as such.
fn build_for_slurm(
    campaign: &Campaign,
    pending: &[usize],
    results: &ResultsDir,
    options: &CampaignOptions,
    build_jobs: usize,
    sanitizer: Option<(PathBuf, String)>,
) -> Result<Vec<execute::Job>, CampaignError> {
    let tasks = builds::tasks(campaign, pending);
    let outcomes = std::sync::Mutex::new(Vec::new());
    let nvcc = options.nvcc.as_deref();
    builds::build_all(
        campaign,
        &tasks,
        &results.dir,
        nvcc,
        build_jobs,
        |task, outcome| {
            outcomes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((task, outcome))
        },
    );
    let mut jobs = Vec::new();
    for (task, outcome) in outcomes.into_inner().unwrap_or_else(|p| p.into_inner()) {
        let dir = &results.dir;
        match builds::runs_of(campaign, pending, task, &outcome, dir, sanitizer.as_ref()) {
            Ok(built) => jobs.extend(built),
            Err(failed) => {
                for record in &failed {
                    results.append(record)?;
                }
            }
        }
    }
    Ok(jobs)
}

/// Prints the summary of what `results` holds for `keys`, writes it to summary.txt, and returns
/// its exit code.
fn print_summary(name: &str, keys: &[String], results: &ResultsDir) -> Result<u8, CampaignError> {
    let latest = results::latest(results::read_records(&results.path(results::RESULTS_FILE))?);
    let (text, code) = summary::summarize(name, keys, &latest, &results.dir);
    print!("{text}");
    println!("results {}", results.path(results::RESULTS_FILE).display());
    folder::replace(&results.path("summary.txt"), text.as_bytes())?;
    Ok(code)
}

/// `repro campaign --collect DIR`: the shard records merged into results.jsonl, and the summary.
pub fn collect(dir: &Path) -> Result<u8, CampaignError> {
    let info = results::read_info(dir)?;
    let results = ResultsDir::open(dir)?;
    let (added, files) = slurm::collect(&results)?;
    println!("collect {added} new records from {files} shard files");
    print_summary(&info.name, &info.runs, &results)
}
