//! `repro bench SPEC|DIR [--variants SPEC,...] [--sizes LIST] [--dims NAMES] [--flush-l2]`.

use std::path::PathBuf;

use clap::Args;

use super::options::{at_least_one_timed_launch, positive_size, TimeoutArgs, ToolchainArgs};
use crate::error::Error;
use crate::run::bench::BenchOptions;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// More specs to time beside TARGET, one column each (e.g. thread-, warp- and block-per-row kernels).
    #[arg(
        long,
        value_name = "SPEC",
        value_delimiter = ',',
        help_heading = "Bench"
    )]
    pub variants: Vec<PathBuf>,
    /// Sizes to time, comma-separated, one row each [default: the spec's own sizes].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = positive_size,
        allow_negative_numbers = true,
        help_heading = "Bench"
    )]
    pub sizes: Vec<i64>,
    /// The spec sizes set to each value of --sizes, comma-separated [default: the output's extents].
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        help_heading = "Bench"
    )]
    pub dims: Vec<String>,
    /// Untimed launches first (clocks, caches, lazy module loading).
    #[arg(long, value_name = "N", default_value_t = 5, help_heading = "Bench")]
    pub warmup: u32,
    /// Timed launches; the median, min and max are over these.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        value_parser = at_least_one_timed_launch,
        help_heading = "Bench"
    )]
    pub repeat: u32,
    /// Write over a buffer twice the L2's size before each timed launch: cold-cache times.
    #[arg(long, help_heading = "Bench")]
    pub flush_l2: bool,
    /// Time on all-ones operands instead of the spec's inputs.
    #[arg(long, help_heading = "Inputs")]
    pub ones: bool,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
    /// Write every measurement (each launch's time too) as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl BenchArgs {
    pub fn exec(self) -> Result<u8, Error> {
        Ok(BenchOptions {
            target: self.target,
            variants: self.variants,
            sizes: self.sizes,
            dims: self.dims,
            warmup: self.warmup,
            repeat: self.repeat,
            flush_l2: self.flush_l2,
            ones: self.ones,
            timeout: self.timeout.timeout,
            json: self.json,
            nvcc: self.toolchain.nvcc,
        }
        .bench(&crate::machine::Machine)?)
    }
}
