//! One run of a campaign: the harness (or compute-sanitizer around it) as a process of its own,
//! with a mode's options and a limit on the whole process, turned into a [`Record`]. A [`Job`]
//! holds everything a run needs, so that a Slurm task on another node runs it from the shard
//! plan alone (no campaign file, spec or toolkit there).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::builds::Built;
use super::devices::Device;
use super::file::{Campaign, Mode, Run, RunKey};
use super::results::{self, Record, Times};
use crate::run::harness_options as opt;
use crate::run::sanitize;
use repro_contract::exit;
use repro_contract::report::{evidence_line, run_class, Disposition, Report};

/// A run, ready to start: the harness binary, its options, and its limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub key: RunKey,
    pub campaign: String,
    pub binary: PathBuf,
    /// The harness's options (`--json` comes with the results folder).
    pub args: Vec<String>,
    /// compute-sanitizer, with its options, before the binary (sanitize mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<Sanitizer>,
    /// Seconds the whole process may take; past it, the process is killed and the run is a hang.
    pub limit_s: f64,
    /// Seconds the run's build took.
    pub build_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sanitizer {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
}

/// The results folder's name for a run's files: a hash of its key (keys hold `/` and `=`).
pub fn run_id(key: &RunKey) -> String {
    blake3::hash(key.text().as_bytes()).to_hex()[..16].to_string()
}

/// Where a run's harness report goes, relative to the results folder.
pub fn report_relative(key: &RunKey) -> String {
    format!("reports/{}.json", run_id(key))
}

/// The job of `run`, whose build is `built`. `sanitizer` is compute-sanitizer with its `--help`
/// text (found once per campaign), for sanitize mode.
pub fn job(
    campaign: &Campaign,
    run: &Run,
    built: &Built,
    results_dir: &Path,
    sanitizer: Option<&(PathBuf, String)>,
) -> Job {
    let spec = &campaign.instances[run.instance].spec;
    // The campaign file's timeout is checked against the bound when read; a spec's own is
    // bounded here too, so that no limit below overflows.
    let timeout = campaign
        .timeout
        .unwrap_or(spec.check.timeout)
        .min(crate::spec::validate::MAX_TIMEOUT_SECONDS);
    let sizes = run
        .size_arguments
        .iter()
        .map(|(name, value)| (name.as_str(), *value));
    let mode = run.key.mode;
    // Sanitize mode sets its own, longer watchdog below.
    let watchdog = campaign.timeout.filter(|_| mode != Mode::Sanitize);
    let mut args =
        crate::run::sweep::run_arguments(sizes, mode == Mode::Ones, watchdog, &built.dir);
    let mut limit = crate::run::sweep::run_limit(spec, timeout);
    let mut wrapper = None;
    match mode {
        Mode::Ones | Mode::Random => {}
        Mode::Probe => {
            args.insert(0, opt::PROBE.flag());
            limit = crate::run::probe::process_limit(spec, timeout);
        }
        Mode::Sanitize => {
            // As `repro run --sanitize memcheck` runs it: one launch, a watchdog that allows
            // for the slowdown.
            let slow = timeout * sanitize::TIMEOUT_FACTOR;
            args.extend(opt::TIMEOUT.with(slow));
            args.extend(opt::REPEAT.with(1));
            limit = crate::run::process_limit(spec, slow, 1);
            if let Some((program, help)) = sanitizer {
                let log = results_dir.join(format!("reports/{}.sanitizer.log", run_id(&run.key)));
                wrapper = Some(Sanitizer {
                    program: program.clone(),
                    args: sanitize::arguments(sanitize::Tool::Memcheck, &log, help),
                    log,
                });
            }
        }
    }
    Job {
        key: run.key.clone(),
        campaign: campaign.name.clone(),
        binary: built.binary.clone(),
        args,
        sanitizer: wrapper,
        limit_s: limit.as_secs_f64(),
        build_s: built.seconds,
    }
}

/// A job's record, for a run that never started because its build failed.
pub fn build_failed(job_key: &RunKey, campaign: &str, evidence: &str, build_s: f64) -> Record {
    let mut record = blank(job_key, campaign, "build");
    record.code = exit::BUILD;
    record.verdict = "build_failed".into();
    record.disposition = Disposition::not_run("build failed").to_string();
    record.evidence = evidence.to_string();
    record.times.build_s = build_s;
    record
}

fn blank(key: &RunKey, campaign: &str, worker: &str) -> Record {
    Record {
        key: key.text(),
        campaign: campaign.to_string(),
        spec: key.spec.clone(),
        variant: key.variant.clone(),
        sizes: key.sizes.clone(),
        mode: key.mode,
        code: 0,
        verdict: String::new(),
        disposition: String::new(),
        evidence: String::new(),
        times: Times::default(),
        gpu: None,
        worker: worker.to_string(),
        host: results::host(),
        slurm: None,
        started: results::now(),
        report: None,
    }
}

/// Runs `job` on `device` (None: the GPUs the process was given, as in a Slurm task) and says
/// what it showed. The report is kept, under `results_dir`, only when the run failed.
pub fn execute(job: &Job, results_dir: &Path, device: Option<&Device>, worker: &str) -> Record {
    let mut record = blank(&job.key, &job.campaign, worker);
    record.times.build_s = job.build_s;
    let report_rel = report_relative(&job.key);
    let report = results_dir.join(&report_rel);
    // The harness writes its report (and compute-sanitizer its log) under reports/: a folder of
    // the results' own, never a link planted in its place, which would take them elsewhere.
    if let Err(e) = super::folder::real_dir(&results_dir.join("reports")) {
        record.code = exit::USAGE;
        record.verdict = "refused".into();
        record.disposition = Disposition::not_run("results folder refused").to_string();
        record.evidence = e.to_string().lines().next().unwrap_or("").to_string();
        return record;
    }
    let _ = std::fs::remove_file(&report);
    let mut command = match &job.sanitizer {
        Some(s) => {
            let _ = std::fs::remove_file(&s.log);
            let mut c = Command::new(&s.program);
            c.args(&s.args).arg(&job.binary);
            c
        }
        None => Command::new(&job.binary),
    };
    command
        .args(&job.args)
        .args(opt::JSON.with(report.display()));
    if let Some(d) = device {
        command.env("CUDA_VISIBLE_DEVICES", &d.visible_as);
    }
    end_with_parent(&mut command);
    let started = Instant::now();
    // A shard plan is a file a task reads from a shared folder: any number may stand there.
    let limit = crate::run::limit_of(job.limit_s);
    let finished = crate::run::run_captured(command, limit, &job.binary);
    record.times.run_s = started.elapsed().as_secs_f64();
    match finished {
        Err(e) => {
            record.code = exit::CUDA_ERROR;
            record.verdict = "fault".into();
            record.disposition = Disposition::failed("fault").to_string();
            record.evidence = e.to_string();
        }
        Ok(None) => {
            record.code = exit::HANG;
            record.verdict = "hang".into();
            record.disposition = Disposition::failed("hang").to_string();
            record.evidence = format!(
                "the process ran past repro's limit of {:.0} s and was killed",
                job.limit_s
            );
        }
        Ok(Some(f)) => {
            let code = f
                .status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(exit::CUDA_ERROR);
            record.code = code;
            record.disposition = Disposition::last_in(&f.stdout)
                .map(|d| d.to_string())
                .unwrap_or_default();
            record.evidence = evidence_line(&f.stdout);
            record.verdict = match code {
                exit::NO_DEVICE => "no_device".into(),
                exit::USAGE => {
                    record.evidence = f.stderr.lines().next().unwrap_or("").trim().to_string();
                    "refused".into()
                }
                _ => run_class(code, &f.stdout),
            };
            if let Some(s) = &job.sanitizer {
                judge_sanitizer(&mut record, s);
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(&report) {
        // Copied as the harness wrote them (Verbatim): results.jsonl keeps its numbers.
        if let Ok(harness) = Report::from_json(text.as_bytes()) {
            record.gpu = harness.device.map(|d| d.json);
            record.times.harness = harness.timings.map(|t| t.json);
        }
        if record.is_failure() {
            record.report = Some(report_rel);
        } else {
            let _ = std::fs::remove_file(&report);
        }
    }
    record
}

/// Runs `jobs`, runs of one instantiation (one binary, no sanitizer), as one queue of checks in
/// as few harness processes as isolation allows (docs/cli.md, "A queue of checks"): the process
/// and the CUDA context are paid once, not per run. Each run's [`Record`] goes to `record` as it
/// ends and reads as [`execute`]'s would. When the queue cannot run (the harness refused it),
/// the runs left are executed one by one, which records why. False when a harness found no
/// device (nothing more is recorded then).
pub fn execute_queue(
    jobs: &[Job],
    results_dir: &Path,
    device: Option<&Device>,
    worker: &str,
    mut record: impl FnMut(Record),
) -> bool {
    let reports = results_dir.join("reports");
    let one_by_one = |jobs: &[Job], record: &mut dyn FnMut(Record)| {
        for job in jobs {
            let r = execute(job, results_dir, device, worker);
            if r.verdict == "no_device" {
                return false;
            }
            record(r);
        }
        true
    };
    let Some(first) = jobs.first() else {
        return true;
    };
    if jobs.len() == 1 || super::folder::real_dir(&reports).is_err() {
        return one_by_one(jobs, &mut record);
    }
    let checks: Vec<Vec<String>> = jobs.iter().map(|j| j.args.clone()).collect();
    let limit = crate::run::limit_of(jobs.iter().map(|j| j.limit_s).fold(0.0, f64::max));
    let prepare = |command: &mut Command| {
        if let Some(d) = device {
            command.env("CUDA_VISIBLE_DEVICES", &d.visible_as);
        }
        end_with_parent(command);
    };
    let mut done = 0;
    let mut no_device = false;
    // Each run starts when the one before it in the queue ended (the first, with the process).
    let mut last = Instant::now();
    let mut started = results::now();
    let queued = crate::run::queue::run_queue(
        &first.binary,
        &[],
        &checks,
        limit,
        &reports,
        &prepare,
        |check| {
            let job = &jobs[check.index];
            if check.outcome.code == exit::NO_DEVICE {
                no_device = true;
                return crate::run::queue::Flow::Stop;
            }
            let mut r = blank(&job.key, &job.campaign, worker);
            r.started = std::mem::replace(&mut started, results::now());
            r.times.build_s = job.build_s;
            r.times.run_s = last.elapsed().as_secs_f64();
            last = Instant::now();
            r.code = check.outcome.code;
            r.verdict = check.outcome.class;
            r.evidence = check.outcome.evidence;
            r.disposition = match Disposition::last_in(&check.text) {
                Some(d) => d.to_string(),
                None if r.verdict == "hang" => Disposition::failed("hang").to_string(),
                None => String::new(),
            };
            if let Some(report) = check.report {
                r.gpu = report.device.map(|d| d.json);
                r.times.harness = report.timings.map(|t| t.json);
            }
            if let (true, Some(json)) = (r.is_failure(), check.report_json) {
                let rel = report_relative(&job.key);
                if super::folder::replace(&results_dir.join(&rel), format!("{json}\n").as_bytes())
                    .is_ok()
                {
                    r.report = Some(rel);
                }
            }
            done += 1;
            record(r);
            crate::run::queue::Flow::Continue
        },
    );
    match queued {
        _ if no_device => false,
        Ok(_) => true,
        Err(_) => one_by_one(&jobs[done..], &mut record),
    }
}

/// The run's process is killed when the campaign's process dies (`kill`, a Slurm cancellation):
/// an orphaned harness would hold its GPU, unseen, while the next campaign takes it. Ctrl-C
/// reaches the harness anyway (the terminal signals the whole process group).
fn end_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe, as a pre_exec hook must be; it touches no memory.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

/// Sanitize mode: findings in the log make the run a `sanitizer` failure, whatever the
/// comparison said.
fn judge_sanitizer(record: &mut Record, sanitizer: &Sanitizer) {
    let text = std::fs::read_to_string(&sanitizer.log).unwrap_or_default();
    let report = sanitize::parse(&text);
    if report.error_count() > 0 {
        record.code = exit::SANITIZER;
        record.verdict = "sanitizer".into();
        record.disposition = Disposition::failed("sanitizer").to_string();
        record.evidence = report
            .findings
            .first()
            .map(|f| format!("{} ({} reports)", f.kind, f.count))
            .unwrap_or_else(|| format!("{} errors", report.error_count()));
    } else if i32::from(record.code) == sanitize::ERROR_EXIT_CODE {
        record.code = exit::SANITIZER;
        record.verdict = "sanitizer".into();
    } else if record.verdict != "no_device" {
        let _ = std::fs::remove_file(&sanitizer.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;

    /// A job whose "harness" is the shell script `body`.
    fn job_of(dir: &Path, body: &str, limit_s: f64) -> Job {
        use std::os::unix::fs::PermissionsExt;
        let binary = dir.join("harness");
        std::fs::write(&binary, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        Job {
            key: RunKey {
                spec: "s".into(),
                variant: "default".into(),
                sizes: IndexMap::from([("M".to_string(), 1)]),
                mode: Mode::Ones,
            },
            campaign: "c".into(),
            binary,
            args: Vec::new(),
            sanitizer: None,
            limit_s,
            build_s: 0.0,
        }
    }

    #[test]
    fn a_process_past_its_limit_is_killed_and_recorded_as_a_hang() {
        let tmp = tempfile::tempdir().unwrap();
        let job = job_of(tmp.path(), "exec sleep 30", 0.3);
        let started = Instant::now();
        let record = execute(&job, tmp.path(), None, "GPU 0");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert_eq!((record.code, record.verdict.as_str()), (exit::HANG, "hang"));
        assert!(record.evidence.contains("killed"), "{}", record.evidence);
    }

    #[test]
    fn any_limit_a_plan_holds_is_a_limit() {
        // A shard plan is read from a shared folder: its limit may be any number.
        let tmp = tempfile::tempdir().unwrap();
        for limit in [1e308, f64::INFINITY, f64::NAN, -1.0] {
            let job = job_of(tmp.path(), "exit 0", limit);
            let record = execute(&job, tmp.path(), None, "GPU 0");
            assert_eq!(record.verdict, "ok", "limit {limit}");
        }
    }

    #[test]
    fn the_disposition_names_the_verdict_and_refusals_say_why() {
        let tmp = tempfile::tempdir().unwrap();
        let failing = job_of(
            tmp.path(),
            "echo 'pattern row_mapping: rows swapped'; echo 'Disposition: Failed (row_mapping)'; exit 1",
            10.0,
        );
        let record = execute(&failing, tmp.path(), None, "GPU 0");
        assert_eq!((record.code, record.verdict.as_str()), (1, "row_mapping"));
        assert_eq!(record.disposition, "Failed (row_mapping)");
        assert_eq!(record.evidence, "pattern row_mapping: rows swapped");
        let refused = job_of(
            tmp.path(),
            "echo 'error: --size Q=1: no size Q' >&2; exit 2",
            10.0,
        );
        let record = execute(&refused, tmp.path(), None, "GPU 0");
        assert_eq!((record.code, record.verdict.as_str()), (2, "refused"));
        assert_eq!(record.evidence, "error: --size Q=1: no size Q");
        let killed = job_of(tmp.path(), "kill -SEGV $$", 10.0);
        let record = execute(&killed, tmp.path(), None, "GPU 0");
        assert_eq!(
            (record.code, record.verdict.as_str()),
            (exit::CUDA_ERROR, "fault")
        );
    }
}
