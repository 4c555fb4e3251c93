//! `repro bench`: time the kernel with device events (`harness --bench`: warm-up launches, then
//! timed ones; median, min, max), for one spec or for several side by side (`--variants`), at
//! the spec's sizes or over `--sizes` (one build per spec). Nothing is checked while timing:
//! `repro run` says whether the kernel is right.

use std::path::{Path, PathBuf};
use std::time::Duration;

use repro_contract::report::{Bench, Report, Verbatim};
use serde_json::{json, Value};

use super::harness_options as opt;
use super::sweep::{check_dims, output_dims, run_arguments};
use crate::build::Variant;
use crate::engine_error::EngineError as Error;
use crate::plan::{prepare, Plan};
use repro_contract::exit;

/// One spec to time: its artifact, its built harness, its name.
struct Contender {
    plan: Plan,
    binary: PathBuf,
}

/// What one timing run gave: the harness's `bench` report member, or why there is none.
enum Timing {
    /// Typed for the table, and as written for `--json`.
    Measured(Verbatim<Bench>),
    Failed {
        code: u8,
        class: String,
    },
}

impl Timing {
    fn median_ms(&self) -> Option<f64> {
        match self {
            Timing::Measured(bench) => bench.value.median_ms,
            Timing::Failed { .. } => None,
        }
    }

    /// "0.6180 ms [0.6102, 0.6311]  3474 GFLOP/s", or "FAIL fault (exit 4)".
    fn cell(&self) -> String {
        match self {
            Timing::Measured(bench) => {
                let b = &bench.value;
                let median = b.median_ms.unwrap_or(f64::NAN);
                let flops = b.flops.unwrap_or(0.0);
                format!(
                    "{median:.4} ms [{:.4}, {:.4}] {:>7.0} GFLOP/s",
                    b.min_ms.unwrap_or(f64::NAN),
                    b.max_ms.unwrap_or(f64::NAN),
                    flops / (median * 1e-3) * 1e-9
                )
            }
            Timing::Failed { code, class } => format!("FAIL {class} (exit {code})"),
        }
    }
}

/// What `repro bench` times, and how.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The spec (or artifact) timed first; the others are compared with it.
    pub target: PathBuf,
    pub variants: Vec<PathBuf>,
    /// Sizes to time, each at least 1 [default: the spec's own sizes].
    pub sizes: Vec<i64>,
    /// The spec sizes set to each value of `sizes` [default: the output's extents].
    pub dims: Vec<String>,
    pub warmup: u32,
    /// Timed launches, at least 1.
    pub repeat: u32,
    pub flush_l2: bool,
    pub ones: bool,
    pub timeout: Option<f64>,
    pub json: Option<PathBuf>,
    pub nvcc: Option<PathBuf>,
}

impl BenchOptions {
    /// Builds every spec, times each at each size, prints the table; returns the worst exit code.
    pub fn bench(&self, lookups: &dyn crate::spec::Lookups) -> Result<u8, Error> {
        let specs: Vec<&Path> = std::iter::once(self.target.as_path())
            .chain(self.variants.iter().map(PathBuf::as_path))
            .collect();
        let mut contenders = Vec::new();
        for path in specs {
            let plan = prepare(path, None, lookups)?;
            let dims = self.dims_for(&plan);
            if !self.sizes.is_empty() {
                check_dims(&plan.spec, &dims, "bench")?;
            }
            let binary =
                super::build_harness(&plan, self.nvcc.as_deref(), Variant::Production, "")?;
            contenders.push(Contender { plan, binary });
        }

        let sizes: Vec<Option<i64>> = if self.sizes.is_empty() {
            vec![None]
        } else {
            self.sizes.iter().copied().map(Some).collect()
        };
        // One spec at its own size: the harness's report as it comes, like `repro run`.
        if contenders.len() == 1 && sizes == [None] {
            return self.relay_one(&contenders[0]);
        }

        println!(
            "bench   median kernel time [min, max] of {} launches after {} warm-up, {}{}",
            self.repeat,
            self.warmup,
            if self.flush_l2 {
                "L2 flushed before each"
            } else {
                "L2 not flushed"
            },
            if self.ones { ", all-ones operands" } else { "" }
        );
        let name_width = contenders
            .iter()
            .map(|c| c.plan.spec.name().len())
            .max()
            .unwrap_or(0)
            .max(8);
        let mut results = Vec::new();
        let mut worst = exit::PASSED;
        for &size in &sizes {
            if let Some(size) = size {
                println!(
                    "size    {} = {size}",
                    self.dims_for(&contenders[0].plan).join(" = ")
                );
            }
            let mut first_median = None;
            for (index, contender) in contenders.iter().enumerate() {
                let timing = self.time(contender, size)?;
                if let Timing::Failed { code, .. } = &timing {
                    if *code == exit::NO_DEVICE {
                        println!(
                            "no usable CUDA device: the harnesses are built; timing needs a GPU"
                        );
                        return Ok(exit::NO_DEVICE);
                    }
                    if worst == exit::PASSED {
                        worst = *code;
                    }
                }
                if index == 0 {
                    first_median = timing.median_ms();
                }
                let relative = match (first_median, timing.median_ms()) {
                    (Some(first), Some(m)) if index > 0 => format!(
                        "  {:.2}x the time of {}",
                        m / first,
                        contenders[0].plan.spec.name()
                    ),
                    _ => String::new(),
                };
                println!(
                    "  {:<name_width$}  {}{relative}",
                    contender.plan.spec.name(),
                    timing.cell()
                );
                results.push(self.result_json(contender, size, &timing));
            }
        }
        if let Some(path) = &self.json {
            self.write_json(path, results)?;
        }
        Ok(worst)
    }

    /// The sizes --sizes sets in this spec: --dims, else the output's extents.
    fn dims_for(&self, plan: &Plan) -> Vec<String> {
        if self.dims.is_empty() {
            output_dims(&plan.spec)
        } else {
            self.dims.clone()
        }
    }

    /// The harness options of one timing run.
    fn harness_arguments(&self, plan: &Plan, size: Option<i64>, report: &Path) -> Vec<String> {
        let dims = self.dims_for(plan);
        let at_size = size
            .into_iter()
            .flat_map(|value| dims.iter().map(move |d| (d.as_str(), value)));
        let mut args = run_arguments(at_size, self.ones, self.timeout, &plan.dir);
        args.push(opt::BENCH.flag());
        args.extend(opt::WARMUP.with(self.warmup));
        args.extend(opt::REPEAT.with(self.repeat));
        args.extend(opt::JSON.with(report.display()));
        if self.flush_l2 {
            args.push(opt::FLUSH_L2.flag());
        }
        args
    }

    /// The whole process's limit: every launch's watchdog plus a minute for context and inputs.
    fn limit(&self, plan: &Plan) -> Duration {
        let timeout = self.timeout.unwrap_or(plan.spec.check.timeout);
        super::limit_of(60.0 + timeout * f64::from(self.warmup + self.repeat))
    }

    fn report_path(plan: &Plan) -> Result<PathBuf, Error> {
        super::state_path(&plan.dir, "bench", "report.json")
    }

    fn time(&self, contender: &Contender, size: Option<i64>) -> Result<Timing, Error> {
        let report = Self::report_path(&contender.plan)?;
        // A report left by an earlier run must not pass for this one's.
        let _ = std::fs::remove_file(&report);
        let args = self.harness_arguments(&contender.plan, size, &report);
        let outcome = super::run_quiet(&contender.binary, &args, self.limit(&contender.plan))?;
        if outcome.code != exit::PASSED {
            return Ok(Timing::Failed {
                code: outcome.code,
                class: outcome.class,
            });
        }
        read_bench(&report).map(Timing::Measured)
    }

    fn relay_one(&self, contender: &Contender) -> Result<u8, Error> {
        let report = Self::report_path(&contender.plan)?;
        let _ = std::fs::remove_file(&report);
        let args = self.harness_arguments(&contender.plan, None, &report);
        let limit = self.limit(&contender.plan);
        let Some((code, _)) = super::relay(
            std::process::Command::new(&contender.binary),
            &args,
            limit,
            &contender.binary,
        )?
        else {
            return Ok(exit::HANG);
        };
        if let Some(path) = &self.json {
            let timing = if code == exit::PASSED {
                Timing::Measured(read_bench(&report)?)
            } else {
                Timing::Failed {
                    code,
                    class: "failed".into(),
                }
            };
            self.write_json(path, vec![self.result_json(contender, None, &timing)])?;
        }
        Ok(code)
    }

    fn result_json(&self, contender: &Contender, size: Option<i64>, timing: &Timing) -> Value {
        let mut result = json!({
            "spec": contender.plan.spec.name(),
            "size": size,
            "dims": if size.is_some() { self.dims_for(&contender.plan) } else { Vec::new() },
        });
        match timing {
            Timing::Measured(bench) => result["bench"] = bench.json.clone(),
            Timing::Failed { code, class } => {
                result["exit"] = json!(code);
                result["class"] = json!(class);
            }
        }
        result
    }

    fn write_json(&self, path: &Path, results: Vec<Value>) -> Result<(), Error> {
        let document = json!({
            "warmup": self.warmup,
            "repeat": self.repeat,
            "flush_l2": self.flush_l2,
            "ones": self.ones,
            "results": results,
        });
        let text = serde_json::to_string_pretty(&document).expect("a JSON value serializes");
        std::fs::write(path, text + "\n").map_err(|source| Error::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The `bench` member of a harness report.
fn read_bench(report: &Path) -> Result<Verbatim<Bench>, Error> {
    let text = std::fs::read_to_string(report).map_err(|source| Error::Io {
        action: "read",
        path: report.to_path_buf(),
        source,
    })?;
    let harness = Report::from_json(text.as_bytes()).map_err(|e| Error::HarnessReport {
        path: report.to_path_buf(),
        why: e.to_string(),
    })?;
    harness.bench.ok_or_else(|| Error::HarnessReport {
        path: report.to_path_buf(),
        why: "it has no `bench` member".into(),
    })
}
