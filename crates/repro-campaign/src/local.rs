//! A campaign on this machine: builds on the host's cores, ahead of the runs, and workers that
//! keep every chosen GPU busy (one per GPU, or more with `--workers-per-device`). A worker takes
//! the ready runs of one instantiation, up to its share, and runs them as one queue of checks in
//! one harness process (execute_queue; a run that faults or hangs ends its process and the rest
//! go on in a fresh one), given its GPU by `CUDA_VISIBLE_DEVICES`. A run becomes ready the moment
//! its build is done; a worker takes the next ready runs the moment it is free.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use super::builds::{self, BuildTask};
use super::devices::Device;
use super::execute::{self, Job};
use super::file::Campaign;
use super::results::{Record, ResultsDir};
use super::CampaignError;

/// How a local campaign spreads its work.
#[derive(Debug, Clone)]
pub struct Workers {
    /// The GPUs to run on (`None`: one worker that lets the harness find its device).
    pub devices: Vec<Option<Device>>,
    pub per_device: usize,
    /// Builds at a time.
    pub build_jobs: usize,
    pub nvcc: Option<PathBuf>,
    /// compute-sanitizer and its `--help` text, when a run is in sanitize mode.
    pub sanitizer: Option<(PathBuf, String)>,
}

/// How the runs of a local campaign ended.
#[derive(Debug, Default)]
pub struct LocalOutcome {
    pub recorded: usize,
    /// A harness found no usable GPU: the workers stopped (the builds finished).
    pub no_device: bool,
    pub seconds: f64,
}

struct Queue {
    ready: VecDeque<Job>,
    builds_left: usize,
    stopped: bool,
}

/// The builds' end, however they end (a panic included): the workers wait for no more builds
/// once it is dropped.
struct BuildsOver<'a> {
    queue: &'a Mutex<Queue>,
    wake: &'a Condvar,
}

impl Drop for BuildsOver<'_> {
    fn drop(&mut self) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .builds_left = 0;
        self.wake.notify_all();
    }
}

/// Counts for the progress lines.
struct Progress {
    total: usize,
    done: AtomicUsize,
    failing: AtomicUsize,
    started: Instant,
}

impl Progress {
    fn line(&self, record: &Record) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        let failing = if record.is_failure() {
            self.failing.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            self.failing.load(Ordering::SeqCst)
        };
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = elapsed / done as f64 * (self.total - done.min(self.total)) as f64;
        let outcome = if record.verdict == "ok" {
            "pass".to_string()
        } else {
            format!("FAIL {}", super::folder::one_line(&record.verdict))
        };
        eprintln!(
            "[{done:>w$}/{}] {failing} failing, ETA {} | {} -> {outcome} ({:.2} s, {})",
            self.total,
            clock(eta),
            record.key,
            record.times.run_s,
            record.worker,
            w = self.total.to_string().len(),
        );
    }
}

/// `1h02m`, `3m05s`, `12s`.
pub fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Builds what `pending` needs and runs it on `workers`, recording each run in `results` as it
/// ends.
pub fn run(
    campaign: &Campaign,
    pending: &[usize],
    results: &ResultsDir,
    workers: &Workers,
) -> Result<LocalOutcome, CampaignError> {
    let tasks = builds::tasks(campaign, pending);
    let queue = Mutex::new(Queue {
        ready: VecDeque::new(),
        builds_left: tasks.len(),
        stopped: false,
    });
    let wake = Condvar::new();
    let progress = Progress {
        total: pending.len(),
        done: AtomicUsize::new(0),
        failing: AtomicUsize::new(0),
        started: Instant::now(),
    };
    let recorded = AtomicUsize::new(0);
    let errors: Mutex<Vec<CampaignError>> = Mutex::new(Vec::new());
    let record = |r: &Record| {
        progress.line(r);
        match results.append(r) {
            Ok(()) => {
                recorded.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => errors.lock().unwrap_or_else(|p| p.into_inner()).push(e),
        }
    };
    let slots: Vec<(Option<&Device>, usize)> = workers
        .devices
        .iter()
        .flat_map(|d| (0..workers.per_device.max(1)).map(move |i| (d.as_ref(), i)))
        .collect();
    let slots_count = slots.len();
    let batch_max = max_batch();
    // A build's runs are queued (or, the build failed, recorded) the moment it ends.
    let built = |task: BuildTask, outcome: builds::Outcome| {
        let runs = builds::runs_of(
            campaign,
            pending,
            task,
            &outcome,
            &results.dir,
            workers.sanitizer.as_ref(),
        );
        let failed = match runs {
            Ok(jobs) => {
                queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .ready
                    .extend(jobs);
                Vec::new()
            }
            Err(records) => records,
        };
        failed.iter().for_each(record);
        queue.lock().unwrap_or_else(|p| p.into_inner()).builds_left -= 1;
        wake.notify_all();
    };
    let work = |device: Option<&Device>, slot: usize| loop {
        let batch = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if q.stopped {
                    return;
                }
                if let Some(job) = q.ready.pop_front() {
                    break take_batch(job, &mut q.ready, slots_count, batch_max);
                }
                if q.builds_left == 0 {
                    return;
                }
                q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let worker = worker_label(device, slot, workers.per_device);
        let mut outcome_of = |r: Record| record(&r);
        if !execute::execute_queue(&batch, &results.dir, device, &worker, &mut outcome_of) {
            // The run without a device is not recorded: it says nothing about the kernel, and a
            // resume on a machine with a GPU runs it.
            queue.lock().unwrap_or_else(|p| p.into_inner()).stopped = true;
            wake.notify_all();
            return;
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _over = BuildsOver {
                queue: &queue,
                wake: &wake,
            };
            let nvcc = workers.nvcc.as_deref();
            builds::build_all(
                campaign,
                &tasks,
                &results.dir,
                nvcc,
                workers.build_jobs,
                built,
            );
        });
        for &(device, slot) in &slots {
            let work = &work;
            scope.spawn(move || work(device, slot));
        }
    });
    if let Some(e) = errors.into_inner().unwrap_or_else(|p| p.into_inner()).pop() {
        return Err(e);
    }
    let no_device = queue
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .stopped;
    Ok(LocalOutcome {
        recorded: recorded.into_inner(),
        no_device,
        seconds: progress.started.elapsed().as_secs_f64(),
    })
}

/// The most runs one harness process takes at once. Each process costs its start and a CUDA
/// context (0.2-0.3 s): queues of 512 instead of 64 took the Llama-3.2-1B campaign's 507 runs
/// from 22.4 s to 19.7 s on one H100 (run 97, docs/performance.md). The workers still share a
/// campaign evenly (take_batch gives each no more than its share of what is ready), and memory
/// stays bounded however long a queue is (the harness reuses its buffers from check to check).
/// `REPRO_CAMPAIGN_BATCH` sets it (1: a process per run, as before queues; docs/campaign.md).
fn max_batch() -> usize {
    std::env::var("REPRO_CAMPAIGN_BATCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(512)
}

/// `first` and the ready runs of the same instantiation (the same harness binary, no sanitizer)
/// that one worker takes as one queue of checks: at most `max`, and no more than its
/// share of what is ready, so that the other workers get runs too.
fn take_batch(first: Job, ready: &mut VecDeque<Job>, workers: usize, max: usize) -> Vec<Job> {
    let mut batch = vec![first];
    if batch[0].sanitizer.is_some() {
        return batch;
    }
    let share = (ready.len() + 1).div_ceil(workers.max(1)).clamp(1, max);
    let mut i = 0;
    while batch.len() < share && i < ready.len() {
        if ready[i].sanitizer.is_none() && ready[i].binary == batch[0].binary {
            batch.extend(ready.remove(i));
        } else {
            i += 1;
        }
    }
    batch
}

/// `GPU 0`, `GPU 0 #2` for a second worker on it, `default GPU` when none was chosen.
fn worker_label(device: Option<&Device>, slot: usize, per_device: usize) -> String {
    let base = match device {
        Some(d) => format!("GPU {}", d.index),
        None => "default GPU".to_string(),
    };
    if per_device > 1 {
        format!("{base} #{}", slot + 1)
    } else {
        base
    }
}

/// The folder a campaign's results go to unless `--output` says: `campaigns/<name>/`.
pub fn default_dir(name: &str) -> PathBuf {
    Path::new("campaigns").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{Mode, RunKey};
    use indexmap::IndexMap;

    fn job(binary: &str, m: i64, sanitized: bool) -> Job {
        Job {
            key: RunKey {
                spec: "s".into(),
                variant: "default".into(),
                sizes: IndexMap::from([("M".to_string(), m)]),
                mode: Mode::Ones,
            },
            campaign: "c".into(),
            binary: PathBuf::from(binary),
            args: Vec::new(),
            sanitizer: sanitized.then(|| execute::Sanitizer {
                program: "compute-sanitizer".into(),
                args: Vec::new(),
                log: "log".into(),
            }),
            limit_s: 1.0,
            build_s: 0.0,
        }
    }

    fn sizes(batch: &[Job]) -> Vec<i64> {
        batch.iter().map(|j| j.key.sizes["M"]).collect()
    }

    #[test]
    fn a_batch_is_one_binarys_runs_up_to_a_workers_share() {
        let mut ready: VecDeque<Job> = [
            job("a", 2, false),
            job("b", 3, false),
            job("a", 4, true),
            job("a", 5, false),
            job("a", 6, false),
            job("a", 7, false),
        ]
        .into();
        // Two workers, seven runs: a share is four; b's run and the sanitized one stay.
        let batch = take_batch(job("a", 1, false), &mut ready, 2, 64);
        assert_eq!(sizes(&batch), [1, 2, 5, 6]);
        assert_eq!(sizes(&Vec::from(ready.clone())), [3, 4, 7]);
        // The cap holds whatever the share.
        let batch = take_batch(job("a", 0, false), &mut ready, 1, 2);
        assert_eq!(sizes(&batch), [0, 7]);
        // A sanitized run is a process of its own.
        let batch = take_batch(job("a", 9, true), &mut ready, 1, 64);
        assert_eq!(sizes(&batch), [9]);
    }
}
