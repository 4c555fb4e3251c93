//! A queue of checks in one harness process (the harness's `--queue`; docs/cli.md, "A queue of
//! checks"): the commands that run many checks of one instantiation (sweep, shrink, campaign)
//! pay for the process and the CUDA context once instead of per check.
//!
//! [`QueueSession`] holds a harness open on a queue read from its standard input and sends one
//! check at a time, reading its output up to `queue   end of check N` (its JSON report then a
//! line of the queue's report file); [`run_queue`] runs a list of checks through one session.
//! Isolation is kept by starting afresh:
//! a check that ends its process (a fault, a hang, a sticky CUDA error, a crash) is recorded with
//! its class and evidence, and a new process takes the rest of the queue, so no later check runs
//! in a context that faulted. A check that runs past its limit is killed with its process and
//! recorded as a hang. Every process finishes at least one check, so a queue of n checks starts
//! at most n processes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
/// The line the harness prints once a check is over and its context checked.
const END_MARKER: &str = "queue   end of check ";
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
/// harness refused is an error, as with run_quiet. The queue's report file is written in
/// `work_dir` and removed after. `prepare` may set up each harness process's command (its
/// environment, its end with the caller's).
pub fn run_queue(
    binary: &Path,
    shared: &[String],
    checks: &[Vec<String>],
    limit: Duration,
    work_dir: &Path,
    prepare: &dyn Fn(&mut Command),
    mut on_check: impl FnMut(CheckOutcome) -> Flow,
) -> Result<QueueStats, Error> {
    // Every word first: a queue that cannot be sent whole runs none of its checks.
    for word in checks.iter().flatten() {
        refuse_word(word)?;
    }
    let mut session = QueueSession::new(binary, shared, limit, work_dir, prepare)?;
    for (at, words) in checks.iter().enumerate() {
        // The next check goes out with this one, so that the harness may judge this one's host
        // cross-check while the next runs (the harness's deferred_check.cuh).
        let check = session.check_sending_next(words, checks.get(at + 1).map(Vec::as_slice))?;
        let no_device = check.outcome.code == exit::NO_DEVICE;
        if on_check(check) == Flow::Stop || no_device {
            break;
        }
    }
    Ok(QueueStats {
        processes: session.processes(),
    })
}

fn refuse_word(word: &str) -> Result<(), Error> {
    if word.is_empty() || word.contains(['\t', '\n', '\r']) {
        return Err(Error::QueueWord {
            word: word.to_string(),
        });
    }
    Ok(())
}

/// A harness held open on a queue read from its standard input (`--queue -`): each [`check`]
/// sends one check and waits for its result, so a search that decides its next check from the
/// last one's result (shrink's) still pays for one process and one context. A check that
/// ends the process is returned as it ended, and the next check starts a fresh process.
///
/// [`check`]: QueueSession::check
pub struct QueueSession<'a> {
    binary: PathBuf,
    shared: Vec<String>,
    limit: Duration,
    files: QueueFiles,
    prepare: &'a dyn Fn(&mut Command),
    live: Option<Live>,
    processes: usize,
    checks: usize,
}

/// The harness process of a session, while it runs.
struct Live {
    child: Child,
    /// The harness's standard input: a socket rather than a pipe, so that a line sent to a
    /// harness that has just died fails with an error instead of a SIGPIPE, which repro does not
    /// ignore (src/commands/mod.rs restores it, so that `repro ... | head` ends quietly).
    stdin: UnixStream,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    errors: std::thread::JoinHandle<String>,
    reports: ReportLines,
    /// The next check's index in this process.
    next: usize,
    /// A check's line sent before the last check's result came, not yet asked for.
    sent_ahead: Option<Vec<String>>,
}

impl<'a> QueueSession<'a> {
    pub fn new(
        binary: &Path,
        shared: &[String],
        limit: Duration,
        work_dir: &Path,
        prepare: &'a dyn Fn(&mut Command),
    ) -> Result<QueueSession<'a>, Error> {
        for word in shared {
            refuse_word(word)?;
        }
        std::fs::create_dir_all(work_dir).map_err(Error::io("create", work_dir))?;
        Ok(QueueSession {
            binary: binary.to_path_buf(),
            shared: shared.to_vec(),
            limit,
            files: QueueFiles::new(work_dir),
            prepare,
            live: None,
            processes: 0,
            checks: 0,
        })
    }

    /// The harness processes started so far.
    pub fn processes(&self) -> usize {
        self.processes
    }

    /// Runs one check (its harness options) and returns how it ended.
    pub fn check(&mut self, words: &[String]) -> Result<CheckOutcome, Error> {
        self.check_sending_next(words, None)
    }

    /// Runs one check and returns how it ended, with `next` (the check the caller asks for
    /// after this one) sent to the harness before this one's result is read: a harness that
    /// sees another check waiting judges this one's host cross-check while that one runs. If
    /// this check ends its process, the next goes to the fresh one again.
    pub fn check_sending_next(
        &mut self,
        words: &[String],
        next: Option<&[String]>,
    ) -> Result<CheckOutcome, Error> {
        for word in words.iter().chain(next.into_iter().flatten()) {
            refuse_word(word)?;
        }
        if self.live.is_none() {
            self.live = Some(self.start()?);
            self.processes += 1;
        }
        let live = self.live.as_mut().expect("started above");
        let mut open = Open {
            local: live.next,
            text: String::new(),
            started: Instant::now(),
        };
        live.next += 1;
        let index = self.checks;
        self.checks += 1;
        // A harness that died before reading the line leaves the pipe closed: what it printed
        // and its exit say why, below.
        let sent = match live.sent_ahead.take() {
            Some(ahead) if ahead == words => Ok(()),
            Some(_) => Err(std::io::Error::other("a check was sent ahead out of order")),
            None => writeln!(live.stdin, "{}", words.join("\t")),
        }
        .and_then(|()| match next {
            Some(next) => {
                live.sent_ahead = Some(next.to_vec());
                writeln!(live.stdin, "{}", next.join("\t"))
            }
            None => Ok(()),
        })
        .and_then(|()| live.stdin.flush());
        // Whether the check ended with its end line (the process lives on) or with its process.
        let ended_with_its_line = sent.is_ok() && {
            loop {
                let left = self.limit.saturating_sub(open.started.elapsed());
                match live.lines.recv_timeout(left) {
                    Ok(line) => {
                        if end_marker_index(&line) == Some(open.local) {
                            break true;
                        }
                        if marker_index(&line).is_none() {
                            open.text.push_str(&line);
                            open.text.push('\n');
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let live = self.live.take().expect("live");
                        let mut child = live.child;
                        let _ = child.kill();
                        let _ = child.wait();
                        // Its pipes may be held open by what it started: the readers are left
                        // to end on their own rather than waited for.
                        drop((live.reader, live.errors));
                        return Ok(CheckOutcome {
                            index,
                            outcome: RunOutcome::killed_past(self.limit),
                            report: None,
                            report_json: None,
                            text: open.text,
                        });
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break false,
                }
            }
        };
        let mut outcome = if ended_with_its_line {
            let live = self.live.as_mut().expect("live");
            ended_check(open, &mut live.reports)?
        } else {
            self.ended_with_process(open)?
        };
        outcome.index = index;
        Ok(outcome)
    }

    fn start(&self) -> Result<Live, Error> {
        // The harness opens its report file by name: whatever stands there (a link planted in
        // a results folder someone else made, a report of an earlier process) goes first, so it
        // writes a file of its own rather than through a link.
        self.files.remove();
        let (stdin, theirs) = UnixStream::pair().map_err(|source| Error::Launch {
            path: self.binary.clone(),
            source,
        })?;
        let mut command = Command::new(&self.binary);
        command
            .args(&self.shared)
            .args(opt::QUEUE.with("-"))
            .args(opt::JSON.with(self.files.reports.display()))
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        (self.prepare)(&mut command);
        let mut child = command.spawn().map_err(|source| Error::Launch {
            path: self.binary.clone(),
            source,
        })?;
        // Our copy of the harness's end goes with the command, so the harness sees the end of
        // its input when `stdin` closes.
        drop(command);
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (sender, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
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
        Ok(Live {
            child,
            stdin,
            lines,
            reader,
            errors,
            reports: ReportLines::new(&self.files.reports),
            next: 0,
            sent_ahead: None,
        })
    }

    /// The check during which the harness process ended: its report, if it wrote one, says how
    /// it ended, else its exit and what it printed do. The next check starts a fresh process.
    fn ended_with_process(&mut self, mut open: Open) -> Result<CheckOutcome, Error> {
        let mut live = self.live.take().expect("live");
        drop(live.stdin);
        let status = match live
            .child
            .wait_timeout(Duration::from_secs(30))
            .map_err(|source| Error::Launch {
                path: self.binary.clone(),
                source,
            })? {
            Some(status) => Some(status),
            None => {
                let _ = live.child.kill();
                let _ = live.child.wait();
                None
            }
        };
        // What it printed after the check's last line read, before the pipe closed.
        while let Ok(line) = live.lines.try_recv() {
            open.text.push_str(&line);
            open.text.push('\n');
        }
        let _ = live.reader.join();
        while let Ok(line) = live.lines.try_recv() {
            open.text.push_str(&line);
            open.text.push('\n');
        }
        let error_text = live.errors.join().unwrap_or_default();
        let signal = status.and_then(|s| {
            use std::os::unix::process::ExitStatusExt;
            s.signal()
        });
        let code = status
            .and_then(|s| s.code())
            .and_then(|c| u8::try_from(c).ok());
        if code == Some(exit::USAGE) {
            return Err(Error::HarnessRefused {
                binary: self.binary.clone(),
                message: error_text.trim().to_string(),
            });
        }
        let mut last = ended_check(open, &mut live.reports)?;
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
            // The process died before the check's report: its exit code (a signal reads as a
            // fault) and whatever it printed say what happened.
            (None, None) => {
                let code = code.unwrap_or(exit::CUDA_ERROR);
                let evidence = match (signal, evidence_line(&last.text)) {
                    (Some(signal), _) => format!(
                        "the harness was ended by signal {signal} before this check's report"
                    ),
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
        Ok(last)
    }
}

impl Drop for QueueSession<'_> {
    /// The harness is told the queue is over (its standard input closes) and given a moment to
    /// end; one that does not is killed. Then the report file goes.
    fn drop(&mut self) {
        if let Some(live) = self.live.take() {
            let mut child = live.child;
            drop(live.stdin);
            // A check sent ahead that the caller no longer wants (it stopped the queue) is not
            // waited for.
            let wait = if live.sent_ahead.is_some() { 0 } else { 30 };
            if !matches!(child.wait_timeout(Duration::from_secs(wait)), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.files.remove();
    }
}

/// The queue's report file; unique per queue, so that workers sharing an artifact folder never
/// write each other's.
struct QueueFiles {
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
            reports: dir.join(format!("{stem}.jsonl")),
        }
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(&self.reports);
    }
}

/// One check while its process runs.
struct Open {
    local: usize,
    text: String,
    started: Instant,
}

/// `queue   end of check N` -> N - 1.
fn end_marker_index(line: &str) -> Option<usize> {
    let number: usize = line.strip_prefix(END_MARKER)?.trim().parse().ok()?;
    number.checked_sub(1)
}

/// `queue   check N of T: ...` or `queue   check N: ...` -> N - 1.
fn marker_index(line: &str) -> Option<usize> {
    let rest = line.strip_prefix(CHECK_MARKER)?;
    let number = rest.split_whitespace().next()?.trim_end_matches(':');
    number.parse::<usize>().ok()?.checked_sub(1)
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

    /// A link planted where a session's report file goes is removed, not written through.
    #[test]
    fn a_link_in_place_of_the_report_file_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("repro-queue-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        // A harness that empties its --json file, as the real one does, and says no device.
        let harness = dir.join("harness");
        std::fs::write(
            &harness,
            "#!/bin/sh\n: > \"$4\"\necho 'Disposition: Not run (no_device)'\nexit 7\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&harness, std::fs::Permissions::from_mode(0o755)).unwrap();
        let work = dir.join("work");
        let prepare = |_: &mut Command| {};
        let mut session =
            QueueSession::new(&harness, &[], Duration::from_secs(10), &work, &prepare).unwrap();
        std::os::unix::fs::symlink(&outside, &session.files.reports).unwrap();
        let check = session.check(&["--ones".to_string()]).unwrap();
        assert_eq!(check.outcome.code, exit::NO_DEVICE);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        drop(session);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn markers_name_their_check_from_zero() {
        assert_eq!(marker_index("queue   check 1 of 3: --ones"), Some(0));
        assert_eq!(marker_index("queue   check 12 of 30: --size M=1"), Some(11));
        assert_eq!(marker_index("queue   check 0 of 3:"), None);
        assert_eq!(marker_index("queue   3 checks: 3 passed, 0 failed"), None);
        assert_eq!(marker_index("D       relL2 0"), None);
        assert_eq!(marker_index("queue   check 4: --ones"), Some(3));
        assert_eq!(end_marker_index("queue   end of check 4"), Some(3));
        assert_eq!(end_marker_index("queue   end of check"), None);
    }
}
