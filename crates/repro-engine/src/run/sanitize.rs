//! `repro run --sanitize TOOL`: the harness under NVIDIA's compute-sanitizer, and what it found,
//! summarized so that a thousand identical reports read as one line with a count.
//!
//! The harness is rebuilt as a `-lineinfo` variant (production flags otherwise unchanged) so that
//! reports name source lines. compute-sanitizer writes to its own log file, kept apart from the
//! harness's report, and is parsed here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The compute-sanitizer tools repro drives (`--sanitize` lists them with [`Tool::about`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Memcheck,
    Racecheck,
    Initcheck,
    Synccheck,
    /// repro's own checker (src/async_race/), not compute-sanitizer's: races with the async
    /// proxy (TMA, bulk copies, wgmma) that racecheck does not track.
    AsyncRace,
}

impl Tool {
    pub const ALL: [Tool; 5] = [
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Initcheck,
        Tool::Synccheck,
        Tool::AsyncRace,
    ];

    /// compute-sanitizer's name for the tool (`--tool NAME`), also repro's.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Initcheck => "initcheck",
            Tool::Synccheck => "synccheck",
            Tool::AsyncRace => "async-race",
        }
    }

    /// What the tool finds, in a line.
    pub fn about(self) -> &'static str {
        match self {
            Tool::Memcheck => {
                "Out-of-bounds and misaligned accesses, to global, shared and local memory"
            }
            Tool::Racecheck => "Shared-memory data races (hazards between threads of a block)",
            Tool::Initcheck => "Reads of device global memory that nothing wrote",
            Tool::Synccheck => {
                "Invalid uses of synchronization primitives (__syncthreads in divergent code...)"
            }
            Tool::AsyncRace => {
                "Shared-memory races with the async proxy (TMA loads and stores, bulk copies, wgmma) \
                 that racecheck does not track: repro's own checker, found by order, not by timing"
            }
        }
    }
}

/// What compute-sanitizer's exit code is when it found errors (any code the harness never uses).
pub const ERROR_EXIT_CODE: i32 = 86;

/// A sanitized run slows kernels down by one to two orders of magnitude; the watchdog allows for it.
pub const TIMEOUT_FACTOR: f64 = 20.0;

/// compute-sanitizer next to nvcc (`bin/compute-sanitizer` in the wheel layout), in the toolkit's
/// `compute-sanitizer/` folder, or on PATH.
pub fn find(nvcc: &Path) -> Option<PathBuf> {
    let bin = nvcc.parent()?;
    let mut candidates = vec![bin.join("compute-sanitizer")];
    if let Some(root) = bin.parent() {
        candidates.push(root.join("compute-sanitizer/compute-sanitizer"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("compute-sanitizer")));
    }
    candidates.push(PathBuf::from(
        "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
    ));
    candidates.into_iter().find(|c| c.is_file())
}

/// The sanitizer's command line before the program: the tool, an exit code that tells "found
/// errors" apart from the harness's own codes, output to `log`, and what each tool needs.
/// Options are only passed when this compute-sanitizer knows them (`help` is its `--help`).
pub fn arguments(tool: Tool, log: &Path, help: &str) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--tool".into(),
        tool.name().into(),
        "--error-exitcode".into(),
        ERROR_EXIT_CODE.to_string(),
        "--log-file".into(),
        log.display().to_string(),
        // Counted and summarized here, so let it report everything.
        "--print-limit".into(),
        "10000".into(),
        // Host backtraces are the harness's own launch code: noise in a kernel's report.
        "--show-backtrace".into(),
        "device".into(),
    ];
    let knows = |option: &str| help.contains(option);
    if tool == Tool::Memcheck && knows("--padding") {
        // Padding after each allocation turns a read just past the end of a buffer, which would
        // land in the next allocation unnoticed, into a reported out-of-bounds access.
        args.extend(["--padding".into(), "256".into()]);
    }
    // Hopper: check TMA (cp.async.bulk) and wgmma usage where this version can.
    for option in ["--check-bulk-copy", "--check-warpgroup-mma"] {
        if knows(option) {
            args.extend([option.into(), "yes".into()]);
        }
    }
    args
}

/// `compute-sanitizer --help`, to learn which options this version has.
pub fn help_text(sanitizer: &Path) -> String {
    Command::new(sanitizer)
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// One kind of problem at one place, with how often it was reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `Invalid __shared__ write of size 4 bytes`, `Race reported between ...`.
    pub kind: String,
    /// The kernel, as the sanitizer names it (without the `+0x1a0` offset).
    pub kernel: Option<String>,
    /// `kernels/block_rowsum.cuh:42`, when the build has line info.
    pub location: Option<String>,
    /// `shared`, `global`, `local`, when the report says.
    pub space: Option<String>,
    /// Races: the other side of the hazard (`Read access in kernel(...) at file.cu:15`).
    pub partner: Option<String>,
    /// Races: the hazards racecheck counted over the grouped reports.
    pub hazards: usize,
    pub count: usize,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// `ERROR SUMMARY: N errors`, or racecheck's `RACECHECK SUMMARY: ... (N errors, ...)`.
    pub error_summary: Option<usize>,
    /// `ERROR SUMMARY: N errors were not printed`: reports past the print limit.
    pub not_printed: usize,
    /// Known false-positive classes recognized in the findings, said out loud.
    pub notes: Vec<String>,
}

impl Report {
    pub fn error_count(&self) -> usize {
        self.error_summary
            .unwrap_or_else(|| self.findings.iter().map(|f| f.count).sum())
    }
}

/// Parses compute-sanitizer's text output.
///
/// A report is a header line (`========= Invalid __shared__ write of size 4 bytes`) followed by
/// indented detail lines (`=========     at kernel(...)+0x1a0 in file.cu:42`, `by thread`,
/// `Address ... is out of bounds`); reports end at a bare `=========`.
pub fn parse(text: &str) -> Report {
    let mut report = Report::default();
    let mut current: Option<Finding> = None;
    let flush = |current: &mut Option<Finding>, report: &mut Report| {
        if let Some(f) = current.take() {
            match report.findings.iter_mut().find(|g| {
                g.kind == f.kind
                    && g.kernel == f.kernel
                    && g.location == f.location
                    && g.space == f.space
                    && g.partner == f.partner
            }) {
                Some(g) => {
                    g.count += 1;
                    g.hazards += f.hazards;
                }
                None => report.findings.push(f),
            }
        }
    };
    for raw in text.lines() {
        let Some(body) = raw.strip_prefix("=========") else {
            continue;
        };
        if body.trim().is_empty() {
            flush(&mut current, &mut report);
            continue;
        }
        let detail = body.starts_with("     ");
        let line = body.trim();
        if !detail {
            flush(&mut current, &mut report);
            if let Some(rest) = line.strip_prefix("ERROR SUMMARY:") {
                // Two forms: `ERROR SUMMARY: 23473 errors`, then, past the print limit,
                // `ERROR SUMMARY: 13473 errors were not printed. Use --print-limit ...`.
                let count = rest.split_whitespace().next().and_then(|n| n.parse().ok());
                if rest.contains("not printed") {
                    report.not_printed = count.unwrap_or(0);
                } else {
                    report.error_summary = count;
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("RACECHECK SUMMARY:") {
                // `8 hazards displayed (8 errors, 0 warnings)`: the errors are what counts.
                if report.error_summary.is_none() {
                    report.error_summary = rest
                        .split_once('(')
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .and_then(|n| n.parse().ok());
                }
                continue;
            }
            if is_banner(line) {
                continue;
            }
            let kind = line.strip_prefix("Error: ").unwrap_or(line);
            current = Some(match race_header(kind) {
                // `Race reported between Write access at k(...)+0x90 in k.cu:12`
                Some((access, site)) => {
                    let (kernel, location) = split_site(site);
                    Finding {
                        kind: format!("Race between {access}"),
                        kernel: Some(kernel),
                        location,
                        // racecheck checks shared memory only
                        space: Some("shared".into()),
                        partner: None,
                        hazards: 0,
                        count: 1,
                    }
                }
                None => Finding {
                    space: space_of(kind),
                    kind: kind.to_string(),
                    kernel: None,
                    location: None,
                    partner: None,
                    hazards: 0,
                    count: 1,
                },
            });
        } else if let Some(f) = current.as_mut() {
            if let Some(rest) = line.strip_prefix("at ") {
                if f.kernel.is_none() {
                    let (kernel, location) = split_site(rest);
                    f.kernel = Some(kernel);
                    f.location = location;
                }
            } else if let Some(rest) = line.strip_prefix("and ") {
                if f.kind.starts_with("Race between ") {
                    race_partner(f, rest);
                } else if f.kernel.is_none() {
                    let (kernel, location) = split_site(rest);
                    f.kernel = Some(kernel);
                    f.location = location;
                }
            } else if f.space.is_none() {
                f.space = space_of(line);
            }
        }
    }
    flush(&mut current, &mut report);
    let racecheck_async = report.findings.iter().any(|f| {
        f.kind.contains("Race")
            && (f.kind.contains("bulk") || f.kind.contains("mbarrier") || f.kind.contains("async"))
    });
    if racecheck_async {
        report.notes.push(
            "racecheck reports hazards on shared memory filled by TMA (cp.async.bulk) and ordered by mbarriers; \
             versions that do not model the async proxy report these falsely: check each against the barrier waits"
                .into(),
        );
    }
    report
}

/// `Race reported between Write access at SITE` -> (`Write access`, SITE).
fn race_header(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("Race reported between ")?;
    rest.split_once(" at ")
}

/// One `and Read access at SITE [N hazards]` line of a race report: the other side of the
/// hazard. A report can list several; their distinct source lines are kept, in order.
fn race_partner(f: &mut Finding, rest: &str) {
    let (access, site) = rest.split_once(" at ").unwrap_or((rest, ""));
    let (site, hazards) = match site.rsplit_once(" [") {
        Some((s, tail)) => (
            s,
            tail.split_whitespace()
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(1),
        ),
        None => (site, 1),
    };
    f.hazards += hazards;
    let (kernel, location) = split_site(site);
    let place = location.unwrap_or_else(|| "an unknown line".into());
    if !f.kind.contains(" and ") {
        f.kind = format!("{} and {access}", f.kind);
    }
    match &mut f.partner {
        None => f.partner = Some(format!("{access} in {kernel} at {place}")),
        Some(existing) => {
            if !existing.split(", ").any(|p| p == place)
                && !existing.ends_with(&format!(" at {place}"))
            {
                existing.push_str(&format!(", {place}"));
            }
        }
    }
}

/// Lines that are the tool speaking, not a finding.
fn is_banner(line: &str) -> bool {
    line.starts_with("COMPUTE-SANITIZER")
        || line.starts_with("RACECHECK SUMMARY")
        || line.starts_with("LEAK SUMMARY")
        || line.starts_with("Saved host backtrace")
        || line.starts_with("Host Frame")
        || line.starts_with("Device Frame")
        || line.starts_with("Target application returned an error")
        || line.starts_with("Program hit")
}

/// `kernel(args)+0x1a0 in /path/file.cu:42` -> (`kernel(args)`, `file.cu:42`).
fn split_site(site: &str) -> (String, Option<String>) {
    let (function, location) = match site.rsplit_once(" in ") {
        Some((f, l)) => (f, Some(l.trim().to_string())),
        None => (site, None),
    };
    let function = match function.rfind("+0x") {
        Some(cut) => &function[..cut],
        None => function,
    };
    (function.trim().to_string(), location)
}

fn space_of(text: &str) -> Option<String> {
    for (marker, space) in [
        ("__shared__", "shared"),
        ("__global__", "global"),
        ("__local__", "local"),
        ("shared memory", "shared"),
        ("global memory", "global"),
    ] {
        if text.contains(marker) {
            return Some(space.to_string());
        }
    }
    None
}

/// The summary printed after the harness's own report.
pub fn render(tool: Tool, report: &Report) -> String {
    let mut out = String::new();
    let errors = report.error_count();
    out.push_str(&format!(
        "sanitize  {}: {} error{}\n",
        tool.name(),
        errors,
        if errors == 1 { "" } else { "s" }
    ));
    for f in &report.findings {
        out.push_str(&format!("  {:>6} x {}", f.count, f.kind));
        if f.hazards > 0 {
            out.push_str(&format!(", {} hazards", f.hazards));
        }
        if let Some(s) = &f.space {
            out.push_str(&format!(" [{s} memory]"));
        }
        if let Some(k) = &f.kernel {
            out.push_str(&format!("\n           in {k}"));
        }
        if let Some(l) = &f.location {
            out.push_str(&format!(" at {l}"));
        }
        if let Some(p) = &f.partner {
            out.push_str(&format!("\n           with {p}"));
        }
        out.push('\n');
    }
    let listed: usize = report.findings.iter().map(|f| f.count).sum();
    if listed < errors {
        let not_printed = if report.not_printed > 0 {
            format!(" ({} past the print limit)", report.not_printed)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  note: the counts above cover the {listed} reports printed; the sanitizer counted {errors}{not_printed}\n"
        ));
    }
    for note in &report.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    if tool == Tool::Racecheck {
        out.push_str(RACECHECK_BLIND_SPOT);
    }
    out
}

/// What racecheck does not check, said after every racecheck summary: a TMA store still reading
/// shared memory when other warps overwrite it is a race racecheck never reports, so "0 errors"
/// must not read as "no race" (issue 19).
const RACECHECK_BLIND_SPOT: &str =
    "  note: racecheck checks shared-memory accesses by threads; hazards with the asynchronous \
     proxy (TMA loads and stores, cp.async.bulk) are not checked, so 0 errors is no proof that a \
     TMA pipeline or epilogue waits where it must; repeated runs (--repeat) and probes can still \
     show such a race\n";

#[cfg(test)]
mod tests {
    use super::*;

    const MEMCHECK: &str = "========= COMPUTE-SANITIZER
========= Invalid __shared__ write of size 4 bytes
=========     at void block_rowsum<float>(const float *, const float *, float *, int, int)+0x2c0 in /work/kernels/block_rowsum.cuh:41
=========     by thread (32,0,0) in block (7,0,0)
=========     Address 0x80 is out of bounds
=========     and is 96 bytes after the nearest allocation at 0x0 of size 32 bytes
=========
========= Invalid __shared__ write of size 4 bytes
=========     at void block_rowsum<float>(const float *, const float *, float *, int, int)+0x2c0 in /work/kernels/block_rowsum.cuh:41
=========     by thread (33,0,0) in block (7,0,0)
=========     Address 0x84 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
";

    #[test]
    fn groups_identical_reports() {
        let report = parse(MEMCHECK);
        assert_eq!(report.error_summary, Some(2));
        assert_eq!(report.findings.len(), 1);
        let f = &report.findings[0];
        assert_eq!(f.count, 2);
        assert_eq!(f.kind, "Invalid __shared__ write of size 4 bytes");
        assert_eq!(f.space.as_deref(), Some("shared"));
        assert_eq!(
            f.kernel.as_deref(),
            Some("void block_rowsum<float>(const float *, const float *, float *, int, int)")
        );
        assert_eq!(
            f.location.as_deref(),
            Some("/work/kernels/block_rowsum.cuh:41")
        );
        assert!(render(Tool::Memcheck, &report)
            .starts_with("sanitize  memcheck: 2 errors\n       2 x Invalid __shared__ write"));
    }

    #[test]
    fn racecheck_and_clean_runs() {
        let race = "========= Error: Race reported between Write access at void k(float *)+0x90 in k.cu:12\n=========     and Read access at void k(float *)+0xd0 in k.cu:15 [512 hazards]\n=========\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
        let report = parse(race);
        assert_eq!(report.findings.len(), 1);
        assert_eq!(
            report.findings[0].kind,
            "Race between Write access and Read access"
        );
        assert_eq!(report.findings[0].hazards, 512);
        assert_eq!(
            report.findings[0].partner.as_deref(),
            Some("Read access in void k(float *) at k.cu:15")
        );
        assert_eq!(report.error_count(), 1);
        let clean = parse("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
        assert_eq!(clean.error_count(), 0);
        assert!(clean.findings.is_empty());
        // A clean racecheck says what it did not check; other tools have no such blind spot.
        let text = render(Tool::Racecheck, &clean);
        assert!(
            text.starts_with("sanitize  racecheck: 0 errors\n"),
            "{text}"
        );
        assert!(
            text.contains("hazards with the asynchronous proxy (TMA loads and stores, cp.async.bulk) are not checked"),
            "{text}"
        );
        assert!(!render(Tool::Memcheck, &clean).contains("asynchronous proxy"));
    }

    // Recorded on the H200 (compute-sanitizer of CUDA 13.0, 2026-11-29; docs/gpu-validation.md
    // run 12). The memcheck logs are excerpts: the first reports and the closing summary lines.
    const RECORDED_MEMCHECK: &str =
        include_str!("../../../../tests/fixtures/sanitizer/memcheck_block_rowsum_warps_f32.log");
    const RECORDED_RACECHECK: &str =
        include_str!("../../../../tests/fixtures/sanitizer/racecheck_missing_sync_small.log");
    const RECORDED_CLEAN: [&str; 2] = [
        include_str!("../../../../tests/fixtures/sanitizer/initcheck_clean.log"),
        include_str!("../../../../tests/fixtures/sanitizer/synccheck_clean.log"),
    ];

    #[test]
    fn recorded_memcheck_past_the_print_limit() {
        let report = parse(RECORDED_MEMCHECK);
        // The total, not the "were not printed" line that follows it.
        assert_eq!(report.error_summary, Some(23473));
        assert_eq!(report.not_printed, 13473);
        assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
        let f = &report.findings[0];
        assert_eq!(f.kind, "Invalid __shared__ write of size 4 bytes");
        assert_eq!(f.location.as_deref(), Some("block_rowsum.cuh:80"));
        assert_eq!(f.space.as_deref(), Some("shared"));
        assert_eq!(
            f.kernel.as_deref(),
            Some("void block_rowsum_warps<float>(const T1 *, const T1 *, T1 *, int, int)")
        );
        let text = render(Tool::Memcheck, &report);
        assert!(
            text.starts_with("sanitize  memcheck: 23473 errors\n"),
            "{text}"
        );
        assert!(
            text.contains("the sanitizer counted 23473 (13473 past the print limit)"),
            "{text}"
        );
    }

    #[test]
    fn recorded_racecheck_groups_by_the_two_sides() {
        let report = parse(RECORDED_RACECHECK);
        assert_eq!(
            report.error_summary,
            Some(8),
            "RACECHECK SUMMARY: ... (8 errors, ...)"
        );
        assert_eq!(report.findings.iter().map(|f| f.count).sum::<usize>(), 8);
        // Two writers (the A and the B tile stash), each racing with the reads of the tiles.
        assert_eq!(report.findings.len(), 2, "{:#?}", report.findings);
        for f in &report.findings {
            assert_eq!(f.kind, "Race between Write access and Read access");
            assert_eq!(f.location.as_deref(), Some("tiled_gemm.cuh:99"));
            assert_eq!(f.space.as_deref(), Some("shared"));
            assert!(f.kernel.as_deref().unwrap().contains("stash_tile"));
            let partner = f.partner.as_deref().unwrap();
            assert!(
                partner.starts_with("Read access in void gemm_kernels::accumulate_tile"),
                "{partner}"
            );
            assert!(f.hazards > 0);
        }
        let text = render(Tool::Racecheck, &report);
        assert!(
            text.starts_with("sanitize  racecheck: 8 errors\n"),
            "{text}"
        );
        assert!(text.contains("at tiled_gemm.cuh:169"), "{text}");
        assert!(!text.contains("note: the counts"), "{text}");
    }

    #[test]
    fn recorded_clean_runs() {
        for log in RECORDED_CLEAN {
            let report = parse(log);
            assert_eq!(report.error_count(), 0);
            assert!(report.findings.is_empty());
        }
    }

    #[test]
    fn options_follow_the_installed_version() {
        let old = arguments(
            Tool::Memcheck,
            Path::new("/tmp/log"),
            "--tool --error-exitcode",
        );
        assert!(!old.contains(&"--padding".to_string()));
        let new = arguments(
            Tool::Memcheck,
            Path::new("/tmp/log"),
            "--padding --check-bulk-copy",
        );
        assert!(new.windows(2).any(|w| w == ["--padding", "256"]));
        assert!(new.windows(2).any(|w| w == ["--check-bulk-copy", "yes"]));
        let race = arguments(Tool::Racecheck, Path::new("/tmp/log"), "--padding");
        assert!(!race.contains(&"--padding".to_string()));
    }
}
