//! `repro bundle SPEC|DIR [-o PATH] [--no-run]`.

use std::path::PathBuf;

use clap::Args;

use super::options::ToolchainArgs;
use crate::error::Error;

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// The bundle folder; PATH.tar.gz is written beside it [default: bundles/<name>].
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Do not run the harness (no results.txt): for a machine without the GPU.
    #[arg(long)]
    pub no_run: bool,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl BundleArgs {
    pub fn exec(self) -> Result<u8, Error> {
        Ok(crate::bundle::bundle(
            &self.target,
            self.output.as_deref(),
            self.no_run,
            self.toolchain.nvcc(),
        )?)
    }
}
