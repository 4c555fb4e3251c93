//! `repro run`: scaffold and build when stale, run the harness with the user's options, relay its
//! report and exit code, and say whether the spec's `expect:` was met.
//!
//! The harness has its own watchdog (exit 5 on a hung kernel). `repro` keeps a second, coarser
//! limit on the whole process, because a watchdog inside a process that is itself stuck (in the
//! driver, in a host loop of the kernel's own setup code) cannot fire.

pub mod bench;
pub use repro_contract::harness_options;
pub mod probe;
pub mod queue;
pub mod sanitize;
pub mod shrink;
pub mod sweep;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use repro_contract::report::{evidence_line, run_class, Disposition};
use wait_timeout::ChildExt;

use self::harness_options as opt;
use crate::build::{self, Variant};
use crate::engine_error::EngineError as Error;
use crate::plan::Plan;
use crate::spec::model::{Outcome, ReferenceProvider, Verdict};
use crate::spec::ResolvedSpec;
use repro_contract::exit;

/// What the harness feeds the kernel: its `--ones`, `--init` and `--seed`.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub ones: bool,
    /// `T=PATTERN` overrides, as the harness reads them.
    pub inits: Vec<String>,
    pub seed: Option<u64>,
}

impl Inputs {
    /// The harness's options for these inputs (the one place they are spelled for it).
    pub fn arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.ones {
            args.push(opt::ONES.flag());
        }
        for init in &self.inits {
            args.extend(opt::INIT.with(init));
        }
        if let Some(seed) = self.seed {
            args.extend(opt::SEED.with(seed));
        }
        args
    }
}

/// How the harness checks: `--repeat`, `--timeout`, `--reference`, and whether it may use the
/// artifact's reference cache. None leaves the spec's `check:` and `reference:` values.
#[derive(Debug, Clone, Default)]
pub struct Checks {
    pub repeat: Option<u32>,
    pub timeout: Option<f64>,
    pub reference: Option<ReferenceProvider>,
    /// Pass the artifact's `.repro/cache/reference/` (run and probe; sweep's many sizes do not).
    pub reference_cache: bool,
    /// `--stress MODE`, `--stress-sms N` and `--jitter-ns N` (docs/cli.md).
    pub stress: Option<crate::spec::model::StressMode>,
    pub stress_sms: Option<u32>,
    pub jitter_ns: Option<u32>,
}

impl Checks {
    /// The harness's options for these checks, the reference cache in `artifact` included (the
    /// one place they are spelled for it).
    pub fn arguments(&self, artifact: &std::path::Path) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(repeat) = self.repeat {
            args.extend(opt::REPEAT.with(repeat));
        }
        if let Some(timeout) = self.timeout {
            args.extend(opt::TIMEOUT.with(timeout));
        }
        if let Some(reference) = self.reference {
            args.extend(opt::REFERENCE.with(reference.name()));
        }
        if self.reference_cache {
            args.extend(reference_cache_arguments(artifact));
        }
        if let Some(stress) = self.stress {
            args.extend(opt::STRESS.with(stress.name()));
        }
        if let Some(sms) = self.stress_sms {
            args.extend(opt::STRESS_SMS.with(sms));
        }
        if let Some(ns) = self.jitter_ns {
            args.extend(opt::JITTER_NS.with(ns));
        }
        args
    }
}

/// Everything `repro run` does with a planned artifact besides the inputs and checks.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub inputs: Inputs,
    pub checks: Checks,
    /// Where the JSON report goes [default: the artifact's `.repro/run/report.json`].
    pub json: Option<std::path::PathBuf>,
    /// A folder for the inputs, outputs and reference as .npy files.
    pub dump: Option<std::path::PathBuf>,
    pub sanitize: Option<sanitize::Tool>,
    pub nvcc: Option<std::path::PathBuf>,
}

/// Runs the harness (or the sanitizer around it), relaying its report line by line as it comes
/// and keeping the disposition for `expect:`. None when repro's own limit killed it.
pub(crate) fn relay(
    mut program: Command,
    args: &[String],
    limit: Duration,
    binary: &std::path::Path,
) -> Result<Option<(u8, Option<Disposition>)>, Error> {
    let launch_error = |source| Error::Launch {
        path: binary.to_path_buf(),
        source,
    };
    let mut child = program
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(launch_error)?;
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut disposition = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            if let Some(seen) = Disposition::from_line(&line) {
                disposition = Some(seen);
            }
        }
        disposition
    });
    let Some(status) = child.wait_timeout(limit).map_err(launch_error)? else {
        let _ = child.kill();
        let _ = child.wait();
        let _ = reader.join();
        println!(
            "hang: the harness process ran past repro's own limit of {:.0} s and was killed \
             (its watchdog should have fired first: the process is stuck outside a kernel wait)",
            limit.as_secs_f64()
        );
        println!("{}", Disposition::failed("hang").line());
        return Ok(None);
    };
    let disposition = reader.join().unwrap_or(None);
    let code = match status.code() {
        Some(c) => u8::try_from(c).unwrap_or(exit::CUDA_ERROR),
        None => {
            println!("fault: the harness was killed by a signal ({status})");
            exit::CUDA_ERROR
        }
    };
    Ok(Some((code, disposition)))
}

/// Builds the harness variant (cached by content) and says which happened; `note` follows the
/// build time (" (one build for every size)"). Returns the binary's absolute path.
pub(crate) fn build_harness(
    plan: &crate::plan::Plan,
    nvcc: Option<&std::path::Path>,
    variant: Variant,
    note: &str,
) -> Result<std::path::PathBuf, Error> {
    let built = build::build_variant(plan, nvcc, variant)?;
    if built.compiled {
        eprintln!("build: done in {:.1} s{note}", built.seconds);
    } else {
        eprintln!("build: up to date (cached; nvcc not called)");
    }
    Ok(built.binary.canonicalize().unwrap_or(built.binary))
}

/// What one quiet harness run showed: its exit code and its class (`ok` for a pass, the class in
/// `Failed (<class>)`, `hang` when repro's own limit stopped it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunOutcome {
    pub code: u8,
    pub class: String,
    /// The report's line that says what was seen (see [`evidence_line`]); empty when none.
    pub evidence: String,
}

impl RunOutcome {
    /// A harness repro killed past `limit` (its own watchdog could not end it).
    pub fn killed_past(limit: Duration) -> RunOutcome {
        RunOutcome {
            code: exit::HANG,
            class: "hang".into(),
            evidence: format!(
                "the harness ran past {:.0} s and was killed",
                limit.as_secs_f64()
            ),
        }
    }
}

/// A process that ended by itself: its status and what it printed.
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with its output captured, killing it past `limit` (then None). `program` is
/// what an error to start it names.
pub fn run_captured(
    mut command: Command,
    limit: Duration,
    program: &std::path::Path,
) -> Result<Option<Finished>, Error> {
    let launch_error = |source| Error::Launch {
        path: program.to_path_buf(),
        source,
    };
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(launch_error)?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let Some(status) = child.wait_timeout(limit).map_err(launch_error)? else {
        let _ = child.kill();
        let _ = child.wait();
        return Ok(None);
    };
    Ok(Some(Finished {
        status,
        stdout: reader.join().unwrap_or_default(),
        stderr: errors.join().unwrap_or_default(),
    }))
}

/// Runs the harness without relaying its report (sweep and shrink run it many times and print
/// a table instead). Exit 7 (no device) comes back as class `no_device`, for the caller to stop
/// on; a usage error (the harness refused its options) is an error.
pub fn run_quiet(
    binary: &std::path::Path,
    args: &[String],
    limit: Duration,
) -> Result<RunOutcome, Error> {
    let mut command = Command::new(binary);
    command.args(args);
    let Some(finished) = run_captured(command, limit, binary)? else {
        return Ok(RunOutcome::killed_past(limit));
    };
    let (status, text, error_text) = (finished.status, finished.stdout, finished.stderr);
    let code = status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(exit::CUDA_ERROR);
    if code == exit::NO_DEVICE {
        return Ok(RunOutcome {
            code,
            class: "no_device".into(),
            evidence: String::new(),
        });
    }
    if code == exit::USAGE {
        return Err(Error::HarnessRefused {
            binary: binary.to_path_buf(),
            message: error_text.trim().to_string(),
        });
    }
    let class = run_class(code, &text);
    let evidence = evidence_line(&text);
    Ok(RunOutcome {
        code,
        class,
        evidence,
    })
}

/// The longest any harness process may run before repro kills it: a week.
pub const MAX_PROCESS_LIMIT: Duration = Duration::from_secs(7 * 86_400);

/// `seconds` as a process's time limit, saturating at [`MAX_PROCESS_LIMIT`]: every limit repro
/// derives (watchdog times repeats, references, a shard plan's number) goes through here, so no
/// number of seconds, huge, infinite or NaN, can make a `Duration` panic.
pub fn limit_of(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds)
        .map_or(MAX_PROCESS_LIMIT, |limit| limit.min(MAX_PROCESS_LIMIT))
}

/// Seconds the whole harness process may take: every launch's watchdog limit, plus time for the
/// host reference (at a pessimistic 0.2 GFLOP/s of fp64 on one core), plus a minute of slack
/// for context creation and transfers.
pub fn process_limit(spec: &ResolvedSpec, timeout: f64, repeat: u32) -> Duration {
    let (reference_seconds, _) = reference_work(spec);
    limit_of(60.0 + timeout * f64::from(repeat) * 2.0 + reference_seconds)
}

/// A pessimistic bound on the seconds one host reference takes, and the outputs it makes: a
/// GEMM's flops at 0.2 GFLOP/s on one core; a custom reference's work is its author's, so it
/// gets ten minutes (a file reference is only read).
pub fn reference_work(spec: &ResolvedSpec) -> (f64, i64) {
    let outputs: i64 = spec
        .reference
        .outputs()
        .iter()
        .map(|&i| spec.tensor(i).numel())
        .sum();
    let seconds = match &spec.reference {
        crate::spec::Reference::Gemm(r) => 2.0 * (r.l * r.m * r.n) as f64 * r.k as f64 / 2e8,
        crate::spec::Reference::Custom(_) => 600.0,
        crate::spec::Reference::File(_) => outputs as f64 * 8.0 / 1e8,
        // Two products of Q's rows with every key row of their head ([B, H, S, D], or
        // [H, total, D]: the keys of all sequences, pessimistic), at the GEMM's rate; the
        // backward pass does about five such products.
        crate::spec::Reference::Attention(a) => {
            let k = spec.tensor(a.k);
            let key_rows = k
                .shape
                .get(k.shape.len().saturating_sub(2))
                .copied()
                .unwrap_or(1);
            let products = if a.backward.is_some() { 10.0 } else { 4.0 };
            products * spec.tensor(a.q).numel() as f64 * key_rows as f64 / 2e8
        }
    };
    (seconds, outputs)
}

/// Where the harness writes its JSON report: the user's `--json FILE`, or the artifact's
/// `.repro/run/report.json`.
pub(crate) fn report_path(
    json: Option<&std::path::Path>,
    artifact: &std::path::Path,
) -> Result<std::path::PathBuf, Error> {
    match json {
        Some(p) => Ok(repro_text::paths::absolute(p)),
        None => state_path(artifact, "run", "report.json"),
    }
}

/// `<artifact>/.repro/<folder>/<file>`, absolute, with its folder created: where repro keeps
/// what its runs leave in an artifact (reports, timings; the build keeps `.repro/build`).
pub(crate) fn state_path(
    artifact: &std::path::Path,
    folder: &str,
    file: &str,
) -> Result<std::path::PathBuf, Error> {
    let dir = artifact.join(".repro").join(folder);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        action: "create",
        path: dir.clone(),
        source,
    })?;
    Ok(repro_text::paths::absolute(&dir.join(file)))
}

/// `--reference-cache DIR` for the harness: the artifact's `.repro/cache/reference/`, where a
/// reference computed once serves every rerun with the same operands (the kernel may change
/// between them; the reference does not).
fn reference_cache_arguments(artifact: &std::path::Path) -> Vec<String> {
    let dir = repro_text::paths::absolute(&artifact.join(".repro/cache/reference"));
    opt::REFERENCE_CACHE.with(dir.display()).to_vec()
}

/// After a mismatch: the per-tile heatmap as a PNG next to the report, and where it is.
pub(crate) fn print_heatmap_path(report: &std::path::Path) -> Result<(), Error> {
    if let Some(png) = crate::analyze::heatmap::write_for_report(report)? {
        println!("heatmap {}", png.display());
    }
    Ok(())
}

/// Where the async-race checker's harness writes its raw findings.
const ASYNC_RACE_FINDINGS: &str = ".repro/build/async-race-findings.jsonl";

/// `repro run` on a planned artifact: build (a -lineinfo variant under a sanitizer), run the
/// harness with `options`, relay its report; returns the exit code.
pub fn run(plan: &Plan, options: &RunOptions) -> Result<u8, Error> {
    let variant = match options.sanitize {
        Some(sanitize::Tool::AsyncRace) => Variant::AsyncRace,
        Some(_) => Variant::Lineinfo,
        None => Variant::Production,
    };
    let binary = build_harness(plan, options.nvcc.as_deref(), variant, "")?;
    let spec = &plan.spec;
    let mut checks = options.checks.clone();
    let mut timeout = checks.timeout.unwrap_or(spec.check.timeout);
    let mut async_race_findings = None;
    if options.sanitize.is_some() {
        // Kernels run 10-100x slower under a sanitizer or instrumented (each hooked instruction
        // costs a call), and one launch is what a check of accesses and order needs.
        timeout *= sanitize::TIMEOUT_FACTOR;
        checks.timeout.get_or_insert(timeout);
        checks.repeat.get_or_insert(1);
    }
    let (program, sanitizer_log) = match options.sanitize {
        None => (Command::new(&binary), None),
        Some(sanitize::Tool::AsyncRace) => {
            // The instrumented harness itself, told where to write its findings.
            let findings = repro_text::paths::absolute(&plan.dir.join(ASYNC_RACE_FINDINGS));
            let _ = std::fs::remove_file(&findings);
            eprintln!(
                "sanitize: async-race (the kernel's PTX instrumented; findings {})",
                findings.display()
            );
            let mut command = Command::new(&binary);
            command.env("REPRO_ASYNC_RACE_OUT", &findings);
            async_race_findings = Some(findings);
            (command, None)
        }
        Some(tool) => {
            let nvcc = build::toolchain::find_nvcc(options.nvcc.as_deref())?;
            let sanitizer = sanitize::find(&nvcc.path).ok_or_else(|| {
                Error::Toolchain(format!(
                    "compute-sanitizer not found (looked next to {}, in its toolkit's compute-sanitizer/ folder and on PATH); \
                     it ships with the CUDA toolkit",
                    nvcc.path.display()
                ))
            })?;
            let log = plan
                .dir
                .join(format!(".repro/build/sanitizer-{}.log", tool.name()));
            let _ = std::fs::remove_file(&log);
            let log = repro_text::paths::absolute(&log);
            let mut command = Command::new(&sanitizer);
            command
                .args(sanitize::arguments(
                    tool,
                    &log,
                    &sanitize::help_text(&sanitizer),
                ))
                .arg(&binary);
            eprintln!(
                "sanitize: {} --tool {} (log {})",
                sanitizer.display(),
                tool.name(),
                log.display()
            );
            (command, Some((tool, log)))
        }
    };
    let repeat = checks.repeat.unwrap_or(spec.check.repeat);
    let mut harness_args = options.inputs.arguments();
    harness_args.extend(checks.arguments(&plan.dir));
    if let Some(dump) = &options.dump {
        harness_args.extend(opt::DUMP.with(repro_text::paths::absolute(dump).display()));
    }
    // The JSON report always: the heatmap is drawn from it.
    let report = report_path(options.json.as_deref(), &plan.dir)?;
    harness_args.extend(opt::JSON.with(report.display()));
    let limit = process_limit(spec, timeout, repeat);
    let (code, disposition) = match relay(program, &harness_args, limit, &binary)? {
        Some(outcome) => outcome,
        None => return Ok(exit::HANG),
    };
    if let Some(findings) =
        async_race_findings.filter(|_| code != exit::NO_DEVICE && code != exit::USAGE)
    {
        let sites = plan.dir.join(build::ASYNC_RACE_SITES);
        let found = crate::async_race::report::load(&findings, &sites);
        print!("{}", crate::async_race::report::render(&found));
        crate::async_race::report::add_to_json(&report, &found)?;
        if !found.races.is_empty() {
            println!("{}", Disposition::failed("race").line());
            return Ok(exit::SANITIZER);
        }
    }
    if let Some((tool, log)) = sanitizer_log {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let report = sanitize::parse(&text);
        print!("{}", sanitize::render(tool, &report));
        if report.error_count() > 0 {
            println!("{}", Disposition::failed("sanitizer").line());
            return Ok(exit::SANITIZER);
        }
        // No findings: compute-sanitizer's own exit code is not the harness's.
        if code == sanitize::ERROR_EXIT_CODE as u8 {
            return Ok(exit::SANITIZER);
        }
    }
    if code == exit::MISMATCH {
        print_heatmap_path(&report)?;
    }
    report_expectation(spec, &options.inputs, code, disposition.as_ref());
    Ok(code)
}

/// One line saying whether the run showed what the spec's `expect:` says it should.
fn report_expectation(
    spec: &ResolvedSpec,
    inputs: &Inputs,
    code: u8,
    disposition: Option<&Disposition>,
) {
    let Some(expect) = &spec.expect else {
        return;
    };
    // Only the two documented modes have expectations; a run with --init overrides is neither.
    if !inputs.inits.is_empty() {
        return;
    }
    let (mode, wanted) = if inputs.ones {
        ("ones", expect.ones)
    } else {
        ("random", expect.random)
    };
    let Some(wanted) = wanted else { return };
    let got = match code {
        exit::PASSED => Outcome::Pass,
        exit::MISMATCH => Outcome::Fail,
        exit::HANG => Outcome::Hang,
        exit::CUDA_ERROR => Outcome::Fault,
        _ => return, // no device, usage: nothing was observed
    };
    let verdict = expect.verdict.filter(|_| got != Outcome::Pass);
    // A pass has no class to compare (the verdict is only checked on failures).
    let observed_class = disposition
        .and_then(Disposition::class)
        .filter(|&c| c != "ok");
    let class_note = match (verdict, observed_class) {
        (Some(want), Some(seen)) if want.name() == seen => {
            format!(", class {seen} as expected")
        }
        // Which K slice or which rows went wrong is known only from the probe suite's
        // controlled inputs (docs/cli.md, `repro probe`); one run shows the pattern of its errors.
        (
            Some(
                want @ (Verdict::KCoverage
                | Verdict::OperandLayout
                | Verdict::RowMapping
                | Verdict::ColMapping
                | Verdict::Layout),
            ),
            Some(seen),
        ) => format!(
            ", pattern {seen} (the spec's verdict {} is one the probe suite names)",
            want.name()
        ),
        (Some(want), Some(seen)) => {
            format!(", class {seen} (spec expects {})", want.name())
        }
        _ => String::new(),
    };
    let met = if got == wanted { "met" } else { "NOT met" };
    println!(
        "expect  {mode}: {} (spec: {}) -> {met}{class_note}",
        got.name(),
        wanted.name()
    );
}

#[cfg(test)]
mod tests {
    use super::{Checks, Inputs};
    use crate::spec::model::ReferenceProvider;
    use std::path::Path;

    #[test]
    fn options_are_spelled_as_the_harness_reads_them() {
        let inputs = Inputs {
            ones: true,
            inits: vec!["A=iota".into(), "B=file:b.npy".into()],
            seed: Some(3),
        };
        assert_eq!(
            inputs.arguments(),
            [
                "--ones",
                "--init",
                "A=iota",
                "--init",
                "B=file:b.npy",
                "--seed",
                "3"
            ]
        );
        let checks = Checks {
            repeat: Some(2),
            timeout: Some(1.5),
            reference: Some(ReferenceProvider::Host),
            reference_cache: false,
            stress: Some(crate::spec::model::StressMode::L2),
            stress_sms: Some(12),
            jitter_ns: Some(500),
        };
        assert_eq!(
            checks.arguments(Path::new("art")),
            [
                "--repeat",
                "2",
                "--timeout",
                "1.5",
                "--reference",
                "host",
                "--stress",
                "l2",
                "--stress-sms",
                "12",
                "--jitter-ns",
                "500"
            ]
        );
        // Nothing given: the spec's own values, and no option at all.
        assert!(Inputs::default().arguments().is_empty());
        assert!(Checks::default().arguments(Path::new("art")).is_empty());
        let cached = Checks {
            reference_cache: true,
            ..Checks::default()
        }
        .arguments(Path::new("art"));
        assert_eq!(cached[0], "--reference-cache");
        assert!(
            cached[1].ends_with("art/.repro/cache/reference"),
            "{cached:?}"
        );
    }
}
