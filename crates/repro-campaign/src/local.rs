//! A campaign on this machine: builds on the host's cores, ahead of the runs, and workers that
//! keep every chosen GPU busy (one per GPU, or more with `--workers-per-device`). Each run is a
//! harness process of its own, given its GPU by `CUDA_VISIBLE_DEVICES`. A run becomes ready the
//! moment its build is done; a worker takes the next ready run the moment it is free.

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
        let job = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if q.stopped {
                    return;
                }
                if let Some(job) = q.ready.pop_front() {
                    break job;
                }
                if q.builds_left == 0 {
                    return;
                }
                q = wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let worker = worker_label(device, slot, workers.per_device);
        let outcome = execute::execute(&job, &results.dir, device, &worker);
        if outcome.verdict == "no_device" {
            // Not recorded: it says nothing about the kernel, and a resume on a machine with a
            // GPU runs it.
            queue.lock().unwrap_or_else(|p| p.into_inner()).stopped = true;
            wake.notify_all();
            return;
        }
        record(&outcome);
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
