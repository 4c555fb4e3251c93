//! `repro probe SPEC|DIR [--seed N] [--repeat N] [--timeout S] [--json FILE]`.

use std::path::PathBuf;

use clap::Args;

use super::options::{at_least_two_launches, CheckArgs, TargetArgs, ToolchainArgs};
use crate::error::Error;
use crate::run::probe::ProbeOptions;

// The checks of `repro run`, said of probes: each probe's launches are compared with each other,
// so at least 2 of them, and only the random probe has a reference to compute.
#[derive(Debug, Args)]
#[command(
    mut_arg("repeat", |a| a
        .help("Launches per probe, compared bitwise (at least 2) [default: check.repeat]")
        .value_parser(at_least_two_launches)),
    mut_arg("reference", |a| a.help(
        "Where the random probe's fp64 reference runs [default: reference.provider, else by size]"
    )),
)]
pub struct ProbeArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Seed for the random probe's inputs.
    #[arg(long, value_name = "N", help_heading = "Inputs")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub checks: CheckArgs,
    /// Write the probes and the verdict as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl ProbeArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let plan = self.target.prepare()?;
        let options = ProbeOptions {
            seed: self.seed,
            checks: self.checks.checks(),
            json: self.json,
            nvcc: self.toolchain.nvcc,
        };
        Ok(crate::run::probe::probe(&plan, &options)?)
    }
}
