//! Option groups that several commands share, flattened into their argument structs, and the
//! value parsers that refuse out-of-range values before anything runs. Each group turns itself
//! into the plain options of the code it drives (`run::Inputs`, `run::Checks`) in one place,
//! and those render the harness's own options (crates/repro-engine/src/run/mod.rs).

use std::path::{Path, PathBuf};

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use crate::error::Error;
use crate::plan::{prepare, Plan};
use crate::run::sanitize::Tool;
use crate::spec::model::ReferenceProvider;

/// What a command works on: a spec (its artifact written when stale) or an artifact folder.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
}

impl TargetArgs {
    /// Loads the target; for a spec, writes its artifact when stale.
    pub fn prepare(&self) -> Result<Plan, Error> {
        Ok(prepare(
            &self.target,
            self.output.as_deref(),
            &crate::machine::Machine,
        )?)
    }
}

#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Toolchain")]
pub struct ToolchainArgs {
    /// The nvcc to use [default: $NVCC, PATH, $CUDA_HOME, /usr/local/cuda, then the project's .toolchain].
    #[arg(long, value_name = "PATH", global = true)]
    pub nvcc: Option<PathBuf>,
}

impl ToolchainArgs {
    pub fn nvcc(&self) -> Option<&Path> {
        self.nvcc.as_deref()
    }
}

/// The inputs `repro run` feeds the kernel.
#[derive(Debug, Args)]
#[command(next_help_heading = "Inputs")]
pub struct InputArgs {
    /// All-ones operands (C and bias zero): every output must equal alpha*K exactly.
    #[arg(long)]
    pub ones: bool,
    /// Override one tensor's init: T=ones|zeros|iota|identity|uniform[:LO:HI]|int_uniform[:LO:HI]|normal[:MEAN:STD]|row_ramp|file:PATH
    #[arg(long = "init", value_name = "T=PATTERN")]
    pub inits: Vec<String>,
    /// Seed for every random tensor.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

impl InputArgs {
    pub fn inputs(&self) -> crate::run::Inputs {
        crate::run::Inputs {
            ones: self.ones,
            inits: self.inits.clone(),
            seed: self.seed,
        }
    }
}

/// `--timeout`: run, probe, sweep, shrink and bench all take it, with the same meaning.
#[derive(Debug, Args)]
#[command(next_help_heading = "Checks")]
pub struct TimeoutArgs {
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    // Negative numbers reach the parser, which says why they are refused.
    #[arg(long, value_name = "S", value_parser = positive_seconds, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
}

/// How the harness checks the kernel (run and probe).
#[derive(Debug, Args)]
#[command(next_help_heading = "Checks")]
pub struct CheckArgs {
    /// Launch N times and compare the outputs bitwise [default: check.repeat].
    #[arg(long, value_name = "N", value_parser = at_least_one_launch)]
    pub repeat: Option<u32>,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
    /// Where the fp64 reference runs: a GEMM's (emulated: from int8 tensor cores), or attention's forward [default: reference.provider, else auto: by size].
    #[arg(long, value_name = "WHERE")]
    pub reference: Option<Reference>,
    /// Compute the reference even when a run with the same operands left one in .repro/cache/.
    #[arg(long)]
    pub no_reference_cache: bool,
    /// Every second launch beside a stressor on a second stream (DRAM traffic: bandwidth; a
    /// thrashed L2: l2), or with random sleeps at the kernel's repro::delay points (jitter), so
    /// that races with a short window show [default: check.stress].
    #[arg(long, value_name = "MODE")]
    pub stress: Option<Stress>,
    /// With --stress bandwidth or l2: the stressor's SMs [default: those the kernel's grid leaves
    /// free].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub stress_sms: Option<u32>,
    /// With --stress jitter: a delay point sleeps a random 0 to N ns [default: 2000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub jitter_ns: Option<u32>,
}

impl CheckArgs {
    pub fn checks(&self) -> crate::run::Checks {
        crate::run::Checks {
            repeat: self.repeat,
            timeout: self.timeout.timeout,
            reference: self.reference.map(|r| r.0),
            reference_cache: !self.no_reference_cache,
            stress: self.stress.map(|s| s.0),
            stress_sms: self.stress_sms,
            jitter_ns: self.jitter_ns,
        }
    }
}

/// `--repeat` of run: 0 launches would check nothing.
fn at_least_one_launch(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(0) => Err("0 would not run the kernel; use 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// `--repeat` of probe: each probe's launches are compared with each other.
pub(super) fn at_least_two_launches(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n < 2 => {
            Err("probes take at least 2: each probe's runs are compared bitwise".into())
        }
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// `--repeat` of bench: the median is over the timed launches.
pub(super) fn at_least_one_timed_launch(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(0) => Err("bench needs at least 1 timed launch".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if crate::spec::validate::is_timeout(seconds) {
        Ok(seconds)
    } else if crate::spec::validate::is_positive(seconds) {
        Err(format!(
            "above the longest watchdog limit, {} seconds (a day)",
            crate::spec::validate::MAX_TIMEOUT_SECONDS
        ))
    } else {
        Err("not a positive number of seconds".into())
    }
}

/// One value of `--sizes`.
pub(super) fn positive_size(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(n) if n < 1 => Err(format!("{n} is not a positive size")),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

// The values the command line offers, in the order `--help` lists them. The enums are the core's
// own (the contract's, for the spec's, wrapped here since clap's trait and the enum are both
// another crate's); only their spelling on the command line lives here.

/// `--reference`'s value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference(pub ReferenceProvider);

impl ValueEnum for Reference {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Reference(ReferenceProvider::Host),
            Reference(ReferenceProvider::Device),
            Reference(ReferenceProvider::Emulated),
            Reference(ReferenceProvider::Auto),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

/// `--sanitize`'s value: a [`Tool`] of the engine's, offered to clap from the engine's own list
/// of tools, names and help lines (clap's trait cannot be implemented on the engine's type here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sanitizer(pub Tool);

impl ValueEnum for Sanitizer {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [Sanitizer; Tool::ALL.len()] = {
            let mut all = [Sanitizer(Tool::ALL[0]); Tool::ALL.len()];
            let mut i = 1;
            while i < all.len() {
                all[i] = Sanitizer(Tool::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

/// `--stress`'s value: a [`StressMode`](crate::spec::model::StressMode), offered to clap from
/// the contract's own list of modes, names and help lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stress(pub crate::spec::model::StressMode);

impl ValueEnum for Stress {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::spec::model::StressMode;
        const ALL: [Stress; 4] = [
            Stress(StressMode::None),
            Stress(StressMode::Bandwidth),
            Stress(StressMode::L2),
            Stress(StressMode::Jitter),
        ];
        const _: () = assert!(ALL.len() == StressMode::ALL.len());
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.help()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// `--init`'s help lists the contract's init patterns (crate::spec::model::Generator), as
    /// the harness's own `--help` does.
    #[test]
    fn init_help_lists_every_pattern() {
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            inputs: InputArgs,
        }
        let command = Wrapper::command();
        let init = command
            .get_arguments()
            .find(|a| a.get_id() == "inits")
            .expect("--init");
        let forms: Vec<String> = crate::spec::model::Generator::ALL
            .iter()
            .map(|g| g.form())
            .collect();
        assert_eq!(
            init.get_help().map(|h| h.to_string()),
            Some(format!(
                "Override one tensor's init: T={}|file:PATH",
                forms.join("|")
            ))
        );
    }
}
