//! `repro run SPEC|DIR [--ones|--init T=PATTERN...] [--seed N] [--repeat N] [--timeout S]
//! [--sanitize TOOL] [--json FILE]`.

use std::path::PathBuf;

use clap::Args;

use super::options::{CheckArgs, InputArgs, Sanitizer, TargetArgs, ToolchainArgs};
use crate::error::Error;
use crate::run::RunOptions;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub inputs: InputArgs,
    #[command(flatten)]
    pub checks: CheckArgs,
    /// Write the whole report as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Run under compute-sanitizer (a -lineinfo build of the production flags); exit 6 on findings.
    #[arg(long, value_name = "TOOL", help_heading = "Checks")]
    pub sanitize: Option<Sanitizer>,
    /// Write inputs, outputs and the reference as .npy files into DIR.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub dump: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl RunArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let plan = self.target.prepare()?;
        let options = RunOptions {
            inputs: self.inputs.inputs(),
            checks: self.checks.checks(),
            json: self.json,
            dump: self.dump,
            sanitize: self.sanitize.map(|s| s.0),
            nvcc: self.toolchain.nvcc,
        };
        Ok(crate::run::run(&plan, &options)?)
    }
}
