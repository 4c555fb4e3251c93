//! `repro sweep SPEC|DIR [--sizes LIST] [--dims NAMES]`.

use clap::Args;

use super::options::{positive_size, TargetArgs, TimeoutArgs, ToolchainArgs};
use crate::error::Error;
use crate::run::sweep::SweepOptions;

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Sizes to run, comma-separated [default: 1,31,63,65,127,129 and the tiles' multiples ± 1].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = positive_size,
        allow_negative_numbers = true,
        help_heading = "Sweep"
    )]
    pub sizes: Vec<i64>,
    /// The spec's sizes set to each value, comma-separated [default: the output's extents, e.g. M,N].
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        help_heading = "Sweep"
    )]
    pub dims: Vec<String>,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl SweepArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let plan = self.target.prepare()?;
        let options = SweepOptions {
            sizes: self.sizes,
            dims: self.dims,
            timeout: self.timeout.timeout,
            nvcc: self.toolchain.nvcc,
        };
        Ok(crate::run::sweep::sweep(&plan, &options)?)
    }
}
