//! A queue of checks in one harness process (the harness's `--queue`; docs/cli.md, "A queue of
//! checks"): the commands that run many checks of one instantiation (sweep, shrink, campaign,
//! bisect) pay for the process and the CUDA context once instead of per check.
//!
//! [`run_queue`] writes the checks into a queue file, starts the harness on it and follows its
//! output: each `queue   check N of T:` line opens a check, and the check before it is over, its
//! JSON report already a line of the queue's report file. Isolation is kept by starting afresh:
//! a check that ends its process (a fault, a hang, a sticky CUDA error, a crash) is recorded with
//! its class and evidence, and a new process takes the rest of the queue, so no later check runs
//! in a context that faulted. A check that runs past its limit is killed with its process and
//! recorded as a hang. Every process finishes at least one check, so a queue of n checks starts
//! at most n processes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use repro_contract::exit;
use repro_contract::report::{evidence_line, run_class, Report};
use wait_timeout::ChildExt;

use super::harness_options as opt;
use super::RunOutcome;
use crate::engine_error::EngineError as Error;

/// The line the harness prints before each check of a queue.
const CHECK_MARKER: &str = "queue   check ";
/// The harness's own lines about the queue (the marker, the summary, a context left faulted).
const QUEUE_LINE: &str = "queue   ";
/// What the harness prints when a check left an error in the context (queue.cuh).
const CONTEXT_ERROR: &str = "queue   the context holds an error after check";

/// One check of a queue, as it ended.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    /// Its index in the caller's list of checks.
    pub index: usize,
    /// Its exit code, class and evidence, as [`super::run_quiet`] gives them for a process of its
    /// own.
    pub outcome: RunOutcome,
    /// Its JSON report; None when the process died before writing it.
    pub report: Option<Report>,
    /// The report as the harness wrote it (one JSON line), for callers that keep it.
    pub report_json: Option<String>,
    /// What the harness printed for it.
    pub text: String,
}

/// What a queue cost: the harness processes it took (1 unless checks ended theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    pub processes: usize,
}

/// Whether to go on after a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Runs `checks` (each a check's harness options) in as few harness processes as isolation
/// allows: `shared` is given to every check on the command line, `limit` bounds each check.
/// `on_check` sees every check as it ends, in order; it may stop the queue. A check whose
/// process had no device ends the queue (class `no_device`, as run_quiet gives it); a check the
/// harness refused is an error, as with run_quiet. The queue's files are written in `work_dir`
/// and removed after. `prepare` may set up each harness process's command (its environment,
/// its end with the caller's).
pub fn run_queue(
    binary: &Path,
    shared: &[String],
    checks: &[Vec<String>],
    limit: Duration,
    work_dir: &Path,
    prepare: &dyn Fn(&mut Command),
    mut on_check: impl FnMut(CheckOutcome) -> Flow,
) -> Result<QueueStats, Error> {
    for word in checks.iter().flatten().chain(shared) {
        if word.is_empty() || word.contains(['\t', '\n', '\r']) {
            return Err(Error::QueueWord { word: word.clone() });
        }
    }
    std::fs::create_dir_all(work_dir).map_err(Error::io("create", work_dir))?;
    let files = QueueFiles::new(work_dir);
    let mut stats = QueueStats::default();
    let mut next = 0;
    let result = (|| {
        while next < checks.len() {
            stats.processes += 1;
            let process = run_process(binary, shared, &checks[next..], limit, &files, prepare)?;
            let ended = process.outcomes.len();
            debug_assert!(ended >= 1, "every process ends at least one check");
            for (local, mut outcome) in process.outcomes.into_iter().enumerate() {
                outcome.index = next + local;
                let no_device = outcome.outcome.code == exit::NO_DEVICE;
                if on_check(outcome) == Flow::Stop || no_device {
                    return Ok(());
                }
            }
            next += ended.max(1);
        }
        Ok(())
    })();
    files.remove();
    result.map(|()| stats)
}

/// The queue file and the report file of one queue; unique per queue, so that workers sharing
/// an artifact folder never write each other's.
struct QueueFiles {
    queue: PathBuf,
    reports: PathBuf,
}

impl QueueFiles {
    fn new(dir: &Path) -> QueueFiles {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let stem = format!(
            "queue-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        QueueFiles {
            queue: dir.join(format!("{stem}.txt")),
            reports: dir.join(format!("{stem}.jsonl")),
        }
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(&self.queue);
        let _ = std::fs::remove_file(&self.reports);
    }
}

/// The checks one process ended, in order, from the first of the checks it was given.
struct ProcessEnd {
    outcomes: Vec<CheckOutcome>,
}

/// One check while its process runs.
struct Open {
    local: usize,
    text: String,
    started: Instant,
}

fn run_process(
    binary: &Path,
    shared: &[String],
    checks: &[Vec<String>],
    limit: Duration,
    files: &QueueFiles,
    prepare: &dyn Fn(&mut Command),
) -> Result<ProcessEnd, Error> {
    let text: String = checks.iter().map(|words| words.join("\t") + "\n").collect();
    std::fs::write(&files.queue, text).map_err(Error::io("write", &files.queue))?;
    let mut command = Command::new(binary);
    command
        .args(shared)
        .args(opt::QUEUE.with(files.queue.display()))
        .args(opt::JSON.with(files.reports.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    prepare(&mut command);
    let launch_error = |source| Error::Launch {
        path: binary.to_path_buf(),
        source,
    };
    let mut child = command.spawn().map_err(launch_error)?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        // Bounded: a harness that floods stderr cannot fill repro's memory.
        let _ = stderr.take(1 << 20).read_to_string(&mut text);
        text
    });

    let mut reports = ReportLines::new(&files.reports);
    let mut outcomes = Vec::new();
    let mut open = Open {
        local: 0,
        text: String::new(),
        started: Instant::now(),
    };
    let mut killed = false;
    loop {
        let left = limit.saturating_sub(open.started.elapsed());
        match received.recv_timeout(left) {
            Ok(line) => {
                if let Some(local) = marker_index(&line) {
                    if local > open.local {
                        let done = std::mem::replace(
                            &mut open,
                            Open {
                                local,
                                text: String::new(),
                                started: Instant::now(),
                            },
                        );
                        outcomes.push(ended_check(done, &mut reports)?);
                    }
                } else {
                    open.text.push_str(&line);
                    open.text.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                killed = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = match child
        .wait_timeout(Duration::from_secs(30))
        .map_err(launch_error)?
    {
        Some(status) => Some(status),
        None => {
            let _ = child.kill();
            killed = true;
            None
        }
    };
    let _ = child.wait();
    let signal = status.and_then(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.signal()
    });
    let code = status
        .and_then(|s| s.code())
        .and_then(|c| u8::try_from(c).ok());

    // A killed harness's pipes may be held open by what it started: its readers are left to end
    // on their own rather than waited for.
    if killed {
        drop((reader, errors));
        outcomes.push(CheckOutcome {
            index: open.local,
            outcome: RunOutcome {
                code: exit::HANG,
                class: "hang".into(),
                evidence: format!(
                    "the harness ran past {:.0} s on this check and was killed",
                    limit.as_secs_f64()
                ),
            },
            report: None,
            report_json: None,
            text: open.text,
        });
        return Ok(ProcessEnd { outcomes });
    }
    let _ = reader.join();
    let error_text = errors.join().unwrap_or_default();
    if code == Some(exit::USAGE) {
        return Err(Error::HarnessRefused {
            binary: binary.to_path_buf(),
            message: error_text.trim().to_string(),
        });
    }
    let mut last = ended_check(open, &mut reports)?;
    let context_error = last
        .text
        .lines()
        .find(|l| l.starts_with(CONTEXT_ERROR))
        .map(str::to_string);
    match (&last.report, context_error) {
        // The check's kernel left the context faulted after its report: it is the fault's.
        (_, Some(line)) => {
            last.outcome = RunOutcome {
                code: exit::CUDA_ERROR,
                class: "fault".into(),
                evidence: line,
            };
        }
        (Some(_), None) => {}
        // The process died before the check's report: its exit code (a signal reads as a fault)
        // and whatever it printed say what happened.
        (None, None) => {
            let code = code.unwrap_or(exit::CUDA_ERROR);
            let evidence = match (signal, evidence_line(&last.text)) {
                (Some(signal), _) => {
                    format!("the harness was ended by signal {signal} before this check's report")
                }
                (None, e) if e.is_empty() => {
                    error_text.lines().last().unwrap_or_default().to_string()
                }
                (None, e) => e,
            };
            last.outcome = RunOutcome {
                code,
                class: run_class(code, &last.text),
                evidence,
            };
        }
    }
    outcomes.push(last);
    Ok(ProcessEnd { outcomes })
}

/// `queue   check N of T: ...` -> N - 1.
fn marker_index(line: &str) -> Option<usize> {
    let rest = line.strip_prefix(CHECK_MARKER)?;
    let number: usize = rest.split_whitespace().next()?.parse().ok()?;
    number.checked_sub(1)
}

/// A check whose process went on to the next, or ended: its report, if written, says how it
/// ended; without one, what it printed does (the caller mends a missing report's code).
fn ended_check(open: Open, reports: &mut ReportLines) -> Result<CheckOutcome, Error> {
    let (report, report_json) = match reports.take(open.local)? {
        Some((report, json)) => (Some(report), Some(json)),
        None => (None, None),
    };
    let text = open.text;
    let text_without_queue_lines: String = text
        .lines()
        .filter(|l| !l.starts_with(QUEUE_LINE))
        .map(|l| format!("{l}\n"))
        .collect();
    let code = report.as_ref().map_or(exit::CUDA_ERROR, |r| r.exit_code);
    let outcome = if code == exit::NO_DEVICE {
        RunOutcome {
            code,
            class: "no_device".into(),
            evidence: String::new(),
        }
    } else {
        RunOutcome {
            code,
            class: run_class(code, &text_without_queue_lines),
            evidence: evidence_line(&text_without_queue_lines),
        }
    };
    Ok(CheckOutcome {
        index: open.local,
        outcome,
        report,
        report_json,
        text,
    })
}

/// The queue's report file, read as it grows: each complete line is one check's report.
struct ReportLines {
    path: PathBuf,
    offset: u64,
    partial: String,
    by_check: BTreeMap<usize, (Report, String)>,
}

impl ReportLines {
    fn new(path: &Path) -> ReportLines {
        ReportLines {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
            by_check: BTreeMap::new(),
        }
    }

    /// Check `local`'s report, typed and as written, reading what was appended since the last
    /// call.
    fn take(&mut self, local: usize) -> Result<Option<(Report, String)>, Error> {
        self.read_new()?;
        Ok(self.by_check.remove(&local))
    }

    fn read_new(&mut self) -> Result<(), Error> {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Ok(()); // not written yet: the harness died before its first report
        };
        file.seek(SeekFrom::Start(self.offset))
            .map_err(Error::io("read", &self.path))?;
        let mut appended = String::new();
        let read = file
            .read_to_string(&mut appended)
            .map_err(Error::io("read", &self.path))?;
        self.offset += read as u64;
        self.partial.push_str(&appended);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            let report = Report::from_json(line.trim_end().as_bytes()).map_err(|e| {
                Error::HarnessReport {
                    path: self.path.clone(),
                    why: e.to_string(),
                }
            })?;
            let Some(check) = report.check else {
                return Err(Error::HarnessReport {
                    path: self.path.clone(),
                    why: "a queue's report line without its `check`".into(),
                });
            };
            self.by_check
                .insert(check as usize, (report, line.trim_end().to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_their_check_from_zero() {
        assert_eq!(marker_index("queue   check 1 of 3: --ones"), Some(0));
        assert_eq!(marker_index("queue   check 12 of 30: --size M=1"), Some(11));
        assert_eq!(marker_index("queue   check 0 of 3:"), None);
        assert_eq!(marker_index("queue   3 checks: 3 passed, 0 failed"), None);
        assert_eq!(marker_index("D       relL2 0"), None);
    }
}
