//! `repro sweep`: one build, the harness run at many sizes (`--size NAME=VALUE`), a table of
//! size -> what `--ones` and random inputs show. Boundary bugs live at 1, at tile multiples ± 1
//! and just past them; the default set covers those for the spec's own tiles.

use std::time::Duration;

use std::path::Path;

use super::harness_options as opt;
use super::queue::{run_queue, Flow};
use super::{Checks, Inputs, RunOutcome};
use crate::build::Variant;
use crate::engine_error::EngineError as Error;
use crate::generate::compiled_sizes::sizes_fixed_reason;
use crate::plan::Plan;
use crate::spec::ResolvedSpec;
use repro_contract::exit;

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
    let out = spec.tensor(spec.reference.outputs()[0]);
    let rank = out.shape_text.len();
    out.shape_text[rank.saturating_sub(2)..]
        .iter()
        .filter(|t| spec.sizes.contains_key(t.as_str()))
        .cloned()
        .collect()
}

/// Checks that the harness takes `--size`, and that every name in `dims` is a declared size.
pub(crate) fn check_dims(
    spec: &ResolvedSpec,
    dims: &[String],
    command: &'static str,
) -> Result<(), Error> {
    if let Some(reason) = sizes_fixed_reason(spec) {
        return Err(Error::SizesFixed { command, reason });
    }
    if let Some(d) = dims.iter().find(|d| !spec.sizes.contains_key(*d)) {
        return Err(Error::UnknownSize {
            spec: spec.path.clone(),
            name: d.clone(),
            declared: spec.sizes.keys().cloned().collect(),
        });
    }
    if dims.is_empty() {
        return Err(Error::NoSizeToVary {
            spec: spec.path.clone(),
        });
    }
    Ok(())
}

/// The harness options of one quiet run in `artifact`: each size, `--ones` when asked, the
/// user's timeout (and no reference cache: a reference per size would only fill the disk).
pub fn run_arguments<'a>(
    sizes: impl IntoIterator<Item = (&'a str, i64)>,
    ones: bool,
    timeout: Option<f64>,
    artifact: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = sizes
        .into_iter()
        .flat_map(|(name, value)| opt::SIZE.with(format!("{name}={value}")))
        .collect();
    let inputs = Inputs {
        ones,
        ..Inputs::default()
    };
    let checks = Checks {
        timeout,
        ..Checks::default()
    };
    args.extend(inputs.arguments());
    args.extend(checks.arguments(artifact));
    args
}

/// What `repro sweep` takes besides the artifact.
#[derive(Debug, Clone, Default)]
pub struct SweepOptions {
    /// The sizes to run [default: [`default_sizes`] of the reference's tiles]; each at least 1.
    pub sizes: Vec<i64>,
    /// The spec sizes set to each value [default: [`output_dims`]].
    pub dims: Vec<String>,
    pub timeout: Option<f64>,
    pub nvcc: Option<std::path::PathBuf>,
}

/// The per-run limit: the watchdog for every launch plus a minute for context, reference, copies.
pub fn run_limit(spec: &ResolvedSpec, timeout: f64) -> Duration {
    super::limit_of(60.0 + timeout * f64::from(spec.check.repeat.max(1)) * 2.0)
}

fn cell(outcome: &RunOutcome) -> String {
    if outcome.class == "ok" {
        "pass".into()
    } else {
        format!("FAIL {}", outcome.class)
    }
}

/// Runs the harness at every size (one build) and tabulates `--ones` and random outcomes;
/// returns 0 when every size passes, 1 when some fail.
pub fn sweep(plan: &Plan, options: &SweepOptions) -> Result<u8, Error> {
    let spec = &plan.spec;
    let dims = if options.dims.is_empty() {
        output_dims(spec)
    } else {
        options.dims.clone()
    };
    check_dims(spec, &dims, "sweep")?;
    let sizes = if options.sizes.is_empty() {
        default_sizes(&spec.reference.block())
    } else {
        options.sizes.clone()
    };
    let binary = super::build_harness(
        plan,
        options.nvcc.as_deref(),
        Variant::Production,
        " (one build for every size)",
    )?;
    let limit = run_limit(spec, options.timeout.unwrap_or(spec.check.timeout));

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
    // Every size's two checks, --ones then random, in one queue: one process and one context
    // for the whole sweep (run/queue.rs), rows printed as each size's pair ends.
    let checks: Vec<Vec<String>> = sizes
        .iter()
        .flat_map(|&size| {
            [true, false].map(|ones| {
                let at_size = dims.iter().map(|d| (d.as_str(), size));
                run_arguments(at_size, ones, options.timeout, &plan.dir)
            })
        })
        .collect();
    let mut failing = Vec::new();
    let mut no_device = false;
    let mut ones: Option<RunOutcome> = None;
    run_queue(
        &binary,
        &[],
        &checks,
        limit,
        &plan.dir.join(".repro/queue"),
        &|_| {},
        |check| {
            if check.outcome.code == exit::NO_DEVICE {
                no_device = true;
                return Flow::Stop;
            }
            let Some(ones) = ones.take() else {
                ones = Some(check.outcome);
                return Flow::Continue;
            };
            let random = check.outcome;
            let size = sizes[check.index / 2];
            println!("{size:>8}  {:<24} {:<24}", cell(&ones), cell(&random));
            if ones.class != "ok" || random.class != "ok" {
                let class = if ones.class != "ok" {
                    &ones.class
                } else {
                    &random.class
                };
                failing.push(format!("{size} ({class})"));
            }
            Flow::Continue
        },
    )?;
    if no_device {
        println!("no usable CUDA device: the harness is built; a sweep needs a GPU to run it");
        return Ok(exit::NO_DEVICE);
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
