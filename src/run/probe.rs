//! `repro probe`: the probe suite of DESIGN §6 in one harness process (`harness --probe`): ones,
//! K slices sized by the kernel's K tile, row and column codes, an identity-like B, and the
//! spec's random inputs, each run twice and compared exactly (random: against the fp64
//! reference). The harness prints a line per probe and a `verdict` line; repro relays them and
//! says whether the spec's `expect.verdict` was met.

use std::process::Command;
use std::time::Duration;

use super::relay;
use crate::build::Variant;
use crate::cli::ProbeArgs;
use crate::error::{exit, Error};
use crate::generate::command::prepare;

/// Launches of one probe run: ones, at most 16 K slices, 4 code probes and identity, twice
/// each, and the random probe three times.
const LAUNCHES: f64 = 2.0 * (1.0 + 16.0 + 4.0 + 1.0) + 3.0;

impl ProbeArgs {
    pub fn exec(self) -> Result<u8, Error> {
        if self.repeat.is_some_and(|r| r < 2) {
            return Err(Error::Usage(
                "--repeat for probes must be at least 2: each probe's runs are compared bitwise"
                    .into(),
            ));
        }
        super::check_timeout(self.timeout)?;
        let prepared = prepare(&self.target, self.output.as_deref())?;
        let binary = super::build_harness(
            &prepared,
            self.toolchain.nvcc.as_deref(),
            Variant::Production,
            "",
        )?;
        let spec = &prepared.spec;
        let mut args = vec!["--probe".to_string()];
        if let Some(seed) = self.seed {
            args.extend(["--seed".to_string(), seed.to_string()]);
        }
        if let Some(repeat) = self.repeat {
            args.extend(["--repeat".to_string(), repeat.to_string()]);
        }
        if let Some(timeout) = self.timeout {
            args.extend(["--timeout".to_string(), timeout.to_string()]);
        }
        if let Some(reference) = &self.reference {
            args.extend(["--reference".to_string(), reference.clone()]);
        }
        let report = super::report_path(self.json.as_deref(), &prepared.dir)?;
        args.extend(["--json".to_string(), report.to_string_lossy().into_owned()]);
        args.extend(super::reference_cache_arguments(
            &prepared.dir,
            self.no_reference_cache,
        ));
        let timeout = self.timeout.unwrap_or(spec.check.timeout);
        let r = &spec.reference;
        let flops = 2.0 * (r.l * r.m * r.n) as f64 * r.k as f64;
        // Every launch's watchdog, the host reference at a pessimistic 0.2 GFLOP/s, and the
        // host side of ~25 exact comparisons.
        let limit = Duration::from_secs_f64(
            60.0 + timeout * LAUNCHES + flops / 2e8 + (r.l * r.m * r.n) as f64 * 25.0 / 5e7,
        );
        let Some((code, disposition)) = relay(Command::new(&binary), &args, limit, &binary)? else {
            return Ok(exit::HANG);
        };
        if code == exit::MISMATCH {
            super::print_heatmap_path(&report)?;
        }
        if let Some(want) = spec.spec.expect.as_ref().and_then(|e| e.verdict) {
            if let Some(seen) = disposition.as_deref().and_then(super::disposition_class) {
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
}
