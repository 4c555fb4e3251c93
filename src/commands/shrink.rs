//! `repro shrink SPEC|DIR [--max-runs N]`.

use clap::Args;

use super::options::{TargetArgs, TimeoutArgs, ToolchainArgs};
use crate::error::Error;
use crate::run::shrink::ShrinkOptions;

#[derive(Debug, Args)]
#[command(mut_arg("target", |a| a.help(
    "A failing spec file (the smaller spec is written next to it), or an artifact directory"
)))]
pub struct ShrinkArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Stop after this many harness runs.
    #[arg(long, value_name = "N", default_value_t = 200, help_heading = "Shrink",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_runs: u64,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl ShrinkArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let plan = self.target.prepare()?;
        let options = ShrinkOptions {
            max_runs: usize::try_from(self.max_runs).unwrap_or(usize::MAX),
            timeout: self.timeout.timeout,
            nvcc: self.toolchain.nvcc,
        };
        Ok(crate::run::shrink::shrink(&plan, &options)?)
    }
}
