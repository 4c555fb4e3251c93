//! `repro probe`: the probe suite (docs/cli.md, `repro probe`) in one harness process (`harness --probe`): ones,
//! K slices sized by the kernel's K tile, row and column codes, an identity-like B, and the
//! spec's random inputs, each run twice and compared exactly (random: against the fp64
//! reference). The harness prints a line per probe and a `verdict` line; repro relays them and
//! says whether the spec's `expect.verdict` was met.

use std::process::Command;
use std::time::Duration;

use super::harness_options as opt;
use super::{relay, Checks, Inputs};
use crate::build::Variant;
use crate::engine_error::EngineError as Error;
use crate::plan::Plan;
use repro_contract::exit;
use repro_contract::report::Disposition;

/// What `repro probe` takes besides the artifact.
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// The random probe's seed.
    pub seed: Option<u64>,
    /// `repeat` is launches per probe (at least 2: they are compared bitwise).
    pub checks: Checks,
    pub json: Option<std::path::PathBuf>,
    pub nvcc: Option<std::path::PathBuf>,
}

/// Launches of one probe run: ones, at most 16 K slices, 4 code probes and identity, twice
/// each, and the random probe three times.
const LAUNCHES: f64 = 2.0 * (1.0 + 16.0 + 4.0 + 1.0) + 3.0;

/// Seconds a probe process may take: every launch's watchdog, the host references, and the
/// host side of ~25 exact comparisons.
pub fn process_limit(spec: &crate::spec::ResolvedSpec, timeout: f64) -> Duration {
    let (reference_seconds, outputs) = super::reference_work(spec);
    super::limit_of(
        60.0 + timeout * LAUNCHES + reference_seconds * 8.0 + outputs as f64 * 25.0 / 5e7,
    )
}

/// Runs the probe suite on a planned artifact and relays its verdict; returns the exit code.
pub fn probe(plan: &Plan, options: &ProbeOptions) -> Result<u8, Error> {
    let binary = super::build_harness(plan, options.nvcc.as_deref(), Variant::Production, "")?;
    let spec = &plan.spec;
    let mut args = vec![opt::PROBE.flag()];
    let inputs = Inputs {
        seed: options.seed,
        ..Inputs::default()
    };
    args.extend(inputs.arguments());
    args.extend(options.checks.arguments(&plan.dir));
    let report = super::report_path(options.json.as_deref(), &plan.dir)?;
    args.extend(opt::JSON.with(report.display()));
    let timeout = options.checks.timeout.unwrap_or(spec.check.timeout);
    let limit = process_limit(spec, timeout);
    let Some((code, disposition)) = relay(Command::new(&binary), &args, limit, &binary)? else {
        return Ok(exit::HANG);
    };
    if code == exit::MISMATCH {
        super::print_heatmap_path(&report)?;
    }
    if let Some(want) = spec.expect.as_ref().and_then(|e| e.verdict) {
        if let Some(seen) = disposition.as_ref().and_then(Disposition::class) {
            let met = if seen == want.name() {
                "met"
            } else {
                "NOT met"
            };
            println!("expect  verdict: {seen} (spec: {}) -> {met}", want.name());
        }
    }
    Ok(code)
}
