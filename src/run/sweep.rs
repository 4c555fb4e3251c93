//! `repro sweep`: one build, the harness run at many sizes (`--size NAME=VALUE`), a table of
//! size -> what `--ones` and random inputs show. Boundary bugs live at 1, at tile multiples ± 1
//! and just past them; the default set covers those for the spec's own tiles.

use std::time::Duration;

use super::{run_quiet, RunOutcome};
use crate::build::Variant;
use crate::cli::SweepArgs;
use crate::error::{exit, Error};
use crate::generate::command::prepare;
use crate::generate::context::sizes_fixed_reason;
use crate::spec::ResolvedSpec;

/// The sweep's sizes unless `--sizes` says: 1, 31, 63, 65, 127, 129, and each tile's first two
/// multiples ± 1.
pub fn default_sizes(tiles: &[i64]) -> Vec<i64> {
    let mut sizes = vec![1, 31, 63, 65, 127, 129];
    for &tile in tiles.iter().filter(|&&t| t > 1) {
        for multiple in [tile, 2 * tile] {
            sizes.extend([multiple - 1, multiple, multiple + 1]);
        }
    }
    sizes.retain(|&s| s >= 1);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The sizes that are the output's extents (the last two dimensions of the reference's output),
/// when written as a plain size name: what a sweep varies unless `--dims` says.
pub fn output_dims(spec: &ResolvedSpec) -> Vec<String> {
    let out = spec.tensor(spec.reference.out);
    let rank = out.shape_text.len();
    out.shape_text[rank.saturating_sub(2)..]
        .iter()
        .filter(|t| spec.sizes.contains_key(t.as_str()))
        .cloned()
        .collect()
}

/// Checks that the harness takes `--size`, and that every name in `dims` is a declared size.
pub(crate) fn check_dims(spec: &ResolvedSpec, dims: &[String], command: &str) -> Result<(), Error> {
    if let Some(reason) = sizes_fixed_reason(spec) {
        return Err(Error::Usage(format!(
            "repro {command} changes sizes at run time, but in this spec they are compile-time constants: {reason}; \
             make that template argument a kernel argument, or make a spec per size"
        )));
    }
    for d in dims {
        if !spec.sizes.contains_key(d) {
            let declared: Vec<&str> = spec.sizes.keys().map(String::as_str).collect();
            return Err(Error::Usage(format!(
                "`{d}` is not one of the spec's sizes ({})",
                declared.join(", ")
            )));
        }
    }
    if dims.is_empty() {
        return Err(Error::Usage(
            "no size to vary: the output's extents are not plain size names; name them with --dims"
                .into(),
        ));
    }
    Ok(())
}

/// The harness options of one quiet run: each size, `--ones` when asked, the user's timeout.
pub(crate) fn run_arguments<'a>(
    sizes: impl IntoIterator<Item = (&'a str, i64)>,
    ones: bool,
    timeout: Option<f64>,
) -> Vec<String> {
    let mut args: Vec<String> = sizes
        .into_iter()
        .flat_map(|(name, value)| ["--size".to_string(), format!("{name}={value}")])
        .collect();
    if ones {
        args.push("--ones".into());
    }
    if let Some(t) = timeout {
        args.extend(["--timeout".to_string(), t.to_string()]);
    }
    args
}

/// The per-run limit: the watchdog for every launch plus a minute for context, reference, copies.
pub(crate) fn run_limit(spec: &ResolvedSpec, timeout: f64) -> Duration {
    Duration::from_secs_f64(60.0 + timeout * f64::from(spec.check.repeat.max(1)) * 2.0)
}

fn cell(outcome: &RunOutcome) -> String {
    if outcome.class == "ok" {
        "pass".into()
    } else {
        format!("FAIL {}", outcome.class)
    }
}

impl SweepArgs {
    pub fn exec(self) -> Result<u8, Error> {
        super::check_timeout(self.timeout)?;
        let prepared = prepare(&self.target, self.output.as_deref())?;
        let spec = &prepared.spec;
        let dims = if self.dims.is_empty() {
            output_dims(spec)
        } else {
            self.dims.clone()
        };
        check_dims(spec, &dims, "sweep")?;
        let r = &spec.reference;
        let sizes = if self.sizes.is_empty() {
            default_sizes(&[r.tile_m, r.tile_n])
        } else {
            self.sizes.clone()
        };
        if let Some(bad) = sizes.iter().find(|&&s| s < 1) {
            return Err(Error::Usage(format!(
                "--sizes: {bad} is not a positive size"
            )));
        }
        let binary = super::build_harness(
            &prepared,
            self.toolchain.nvcc.as_deref(),
            Variant::Production,
            " (one build for every size)",
        )?;
        let limit = run_limit(spec, self.timeout.unwrap_or(spec.check.timeout));

        println!(
            "sweep   {} over {} = {}",
            spec.name(),
            dims.join(" = "),
            sizes
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("{:>8}  {:<24} {:<24}", "size", "--ones", "random");
        let mut failing = Vec::new();
        for &size in &sizes {
            let at_size = || dims.iter().map(move |d| (d.as_str(), size));
            let ones = run_quiet(
                &binary,
                &run_arguments(at_size(), true, self.timeout),
                limit,
            )?;
            if ones.code == exit::NO_DEVICE {
                println!(
                    "no usable CUDA device: the harness is built; a sweep needs a GPU to run it"
                );
                return Ok(exit::NO_DEVICE);
            }
            let random = run_quiet(
                &binary,
                &run_arguments(at_size(), false, self.timeout),
                limit,
            )?;
            println!("{size:>8}  {:<24} {:<24}", cell(&ones), cell(&random));
            if ones.class != "ok" || random.class != "ok" {
                let class = if ones.class != "ok" {
                    &ones.class
                } else {
                    &random.class
                };
                failing.push(format!("{size} ({class})"));
            }
        }
        if failing.is_empty() {
            println!("sweep   every size passes");
            Ok(exit::PASSED)
        } else {
            println!(
                "sweep   {} of {} sizes fail: {}",
                failing.len(),
                sizes.len(),
                failing.join(", ")
            );
            Ok(exit::MISMATCH)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::default_sizes;

    #[test]
    fn default_sizes_cover_tile_edges() {
        assert_eq!(
            default_sizes(&[128, 128]),
            vec![1, 31, 63, 65, 127, 128, 129, 255, 256, 257]
        );
        assert_eq!(
            default_sizes(&[64, 1]),
            vec![1, 31, 63, 64, 65, 127, 128, 129]
        );
    }
}
