//! A campaign on a Slurm cluster, through Slurm itself rather than a scheduler of our own:
//! the builds are made here, on the submitting host (a login node has the toolkit; compute
//! nodes need only the driver), the runs are split into shards, and one `sbatch --array`
//! submits a task per shard, each asking for its GPU with `--gres`. A task runs
//! `repro campaign --run-shard PLAN --shard N`, which reads everything it needs from the plan
//! and appends its records to `shards/` in the results folder (a shared file system);
//! `repro campaign --collect DIR` merges them into results.jsonl.
//!
//! Nothing a spec or the campaign file says reaches a shell: the task script holds two paths
//! of repro's own, quoted, and sbatch's options are passed as separate arguments.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::execute::{self, Job};
use super::results::{self, Record, SlurmTask};
use super::CampaignError;
use repro_text::quote::shell_quote;

/// How to submit.
#[derive(Debug, Clone)]
pub struct Submit {
    /// Array tasks [default: one per 25 runs, at most 64].
    pub shards: Option<usize>,
    /// `--gres` of each task; None asks for none.
    pub gres: Option<String>,
    /// More sbatch options, verbatim (`--partition=gpu`, `--time=01:00:00`, `--wait`).
    pub extra: Vec<String>,
    /// The sbatch program.
    pub sbatch: PathBuf,
}

/// What the array's tasks run: written once per submission, read by each task.
#[derive(Debug, Serialize, Deserialize)]
pub struct ShardPlan {
    pub results_dir: PathBuf,
    /// Which submission of this results folder (1, 2, ...): names the shard files.
    pub submission: u32,
    pub shards: Vec<Vec<Job>>,
}

/// The default number of shards for `runs` runs: a task's start costs seconds on a cluster, so
/// a task takes a handful of runs; but not more than 64 tasks, which most clusters start at once.
fn default_shards(runs: usize) -> usize {
    runs.div_ceil(25).clamp(1, 64)
}

/// Writes the plan and task script of a new submission of `jobs`, submits the array and
/// returns what to tell the user.
pub fn submit(
    name: &str,
    jobs: Vec<Job>,
    results_dir: &Path,
    options: &Submit,
) -> Result<String, CampaignError> {
    // Folders of the results' own: a link planted in place of one (a dangling one included,
    // which `exists` would call free) is refused, not written through.
    let slurm_dir = results_dir.join("slurm");
    super::folder::real_dir(&slurm_dir)?;
    super::folder::real_dir(&results_dir.join("shards"))?;
    let submission = (1..)
        .find(|k| std::fs::symlink_metadata(slurm_dir.join(format!("submission-{k}"))).is_err())
        .expect("a free number");
    let dir = slurm_dir.join(format!("submission-{submission}"));
    super::folder::real_dir(&dir)?;
    let count = options
        .shards
        .unwrap_or_else(|| default_shards(jobs.len()))
        .clamp(1, jobs.len().max(1));
    let mut shards: Vec<Vec<Job>> = (0..count).map(|_| Vec::new()).collect();
    let runs = jobs.len();
    for (i, job) in jobs.into_iter().enumerate() {
        shards[i % count].push(job);
    }
    let plan = ShardPlan {
        results_dir: results_dir.to_path_buf(),
        submission,
        shards,
    };
    let plan_path = dir.join("plan.json");
    super::folder::replace(
        &plan_path,
        serde_json::to_string(&plan).expect("serializes").as_bytes(),
    )?;
    let repro =
        std::env::current_exe().map_err(CampaignError::io("find", "repro's own executable"))?;
    let script = dir.join("task.sh");
    let text = format!(
        "#!/bin/sh\n# One task of repro campaign {name}'s job array (submission {submission}): runs shard\n\
         # $SLURM_ARRAY_TASK_ID of plan.json and appends its records to the results' shards/.\n\
         exec {} campaign --run-shard {} --shard \"$SLURM_ARRAY_TASK_ID\"\n",
        shell_quote(&repro.display().to_string()),
        shell_quote(&plan_path.display().to_string()),
    );
    super::folder::replace(&script, text.as_bytes())?;
    let mut sbatch = Command::new(&options.sbatch);
    sbatch
        .arg("--parsable")
        .arg(format!("--job-name=repro-{name}"))
        .arg(format!("--array=0-{}", count - 1))
        .arg(format!("--output={}/task-%a.out", dir.display()))
        .arg(format!("--chdir={}", results_dir.display()));
    if let Some(gres) = &options.gres {
        sbatch.arg(format!("--gres={gres}"));
    }
    sbatch.args(&options.extra).arg(&script);
    let output = sbatch.output().map_err(|e| CampaignError::Submit {
        why: format!("{}: {e}", options.sbatch.display()),
        help: "run it where Slurm's sbatch is on PATH (a login node), or name it with --sbatch"
            .into(),
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(CampaignError::Submit {
            why: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            help: "check the partition, --gres and --slurm-arg options against `sinfo`".into(),
        });
    }
    // `--parsable` prints `jobid` or `jobid;cluster`; with `--wait` the job has ended too.
    let job = stdout
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    super::folder::replace(&dir.join("job"), job.as_bytes())?;
    Ok(format!(
        "slurm   submitted job array {job}: {count} tasks, {runs} runs (plan {})\n\
         slurm   when it ends: repro campaign --collect {}",
        plan_path.display(),
        results_dir.display()
    ))
}

/// Largest shard plan read: a hundred thousand jobs of a few hundred bytes each.
const MAX_PLAN_BYTES: u64 = 256 << 20;

/// An array task: runs shard `shard` of the plan at `plan_path`, appending a record per run to
/// `shards/<submission>-<shard>.jsonl`; a task started again (requeued) skips what it recorded.
pub fn run_shard(plan_path: &Path, shard: usize) -> Result<u8, CampaignError> {
    let bad = |why: String| -> CampaignError {
        CampaignError::ShardPlan {
            path: plan_path.to_path_buf(),
            why,
        }
    };
    let bytes = crate::file_kind::read_regular(plan_path, MAX_PLAN_BYTES).map_err(|e| {
        bad(match e {
            crate::file_kind::ReadError::Io(e) => e.to_string(),
            crate::file_kind::ReadError::NotAFile(what) => format!("{what}, not a plan"),
            crate::file_kind::ReadError::TooLarge { bytes } => format!(
                "{}, larger than a plan of {} runs",
                crate::file_kind::mib(bytes),
                super::file::MAX_RUNS
            ),
        })
    })?;
    let plan: ShardPlan = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let jobs = plan.shards.get(shard).ok_or_else(|| {
        bad(format!(
            "no shard {shard} (the plan has {})",
            plan.shards.len()
        ))
    })?;
    let shards = plan.results_dir.join("shards");
    super::folder::real_dir(&shards)?;
    let out = shards.join(format!("{}-{shard}.jsonl", plan.submission));
    let done: std::collections::HashSet<String> = results::read_records(&out)?
        .into_iter()
        .map(|r| r.key)
        .collect();
    let mut file = results::append_file(&out)?;
    let task = SlurmTask {
        job: std::env::var("SLURM_ARRAY_JOB_ID")
            .or_else(|_| std::env::var("SLURM_JOB_ID"))
            .unwrap_or_default(),
        task: shard as u32,
    };
    let pending: Vec<Job> = jobs
        .iter()
        .filter(|j| !done.contains(&j.key.text()))
        .cloned()
        .collect();
    let mut write = |mut record: Record| -> Result<(), CampaignError> {
        record.slurm = Some(task.clone());
        results::write_record(&mut file, &out, &record)?;
        println!(
            "{} -> {} ({:.2} s)",
            record.key, record.verdict, record.times.run_s
        );
        Ok(())
    };
    // One build's runs, next to each other in the plan, run as one queue of checks in one
    // harness process (docs/campaign.md); a sanitize run is a process of its own.
    let mut start = 0;
    while start < pending.len() {
        let queueable = |j: &Job| j.sanitizer.is_none() && j.binary == pending[start].binary;
        let mut end = start + 1;
        if queueable(&pending[start]) {
            while end < pending.len() && queueable(&pending[end]) {
                end += 1;
            }
        }
        let mut recorded = 0;
        let mut failed = None;
        let found_device = execute::execute_queue(
            &pending[start..end],
            &plan.results_dir,
            None,
            "slurm",
            |record| {
                if failed.is_none() {
                    failed = write(record).err();
                    recorded += 1;
                }
            },
        );
        if let Some(e) = failed {
            return Err(e);
        }
        if !found_device {
            // A task without a GPU records every run it was given as not run, one by one, as it
            // always has (the queue stops at the first).
            for job in &pending[start + recorded..] {
                write(execute::execute(job, &plan.results_dir, None, "slurm"))?;
            }
            break;
        }
        start = end;
    }
    Ok(repro_contract::exit::PASSED)
}

/// Most shard files `--collect` reads.
const MAX_SHARD_FILES: usize = 1_000_000;

/// Merges every shard file of the results folder into results.jsonl: a record is added once
/// (by key, start time and host). Returns how many were added.
pub fn collect(results: &results::ResultsDir) -> Result<(usize, usize), CampaignError> {
    let existing = results::read_records(&results.path(results::RESULTS_FILE))?;
    let identity = |r: &Record| format!("{}|{}|{}", r.key, r.started, r.host);
    let mut known: std::collections::HashSet<String> = existing.iter().map(identity).collect();
    let shards_dir = results.path("shards");
    // A task per shard, 100,000 shards at most per submission: a bound far above any real folder.
    let mut files: Vec<PathBuf> = super::folder::files_in(&shards_dir, "jsonl", MAX_SHARD_FILES)?;
    // In submission order, so that a later submission's record of a key is the latest.
    let number = |p: &PathBuf| -> (u64, u64) {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let mut parts = stem.split('-').map(|n| n.parse().unwrap_or(u64::MAX));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    };
    files.sort_by_key(number);
    let mut added = 0;
    for file in &files {
        for record in results::read_records(file)? {
            if known.insert(identity(&record)) {
                results.append(&record)?;
                added += 1;
            }
        }
    }
    Ok((added, files.len()))
}
