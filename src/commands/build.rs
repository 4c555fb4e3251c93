//! `repro build SPEC|DIR`.

use clap::Args;

use super::options::{TargetArgs, ToolchainArgs};
use crate::error::{exit, Error};

#[derive(Debug, Args)]
#[command(mut_arg("target", |a| a.help(
    "A spec file, or an artifact directory (holding spec.yaml and harness.cu)"
)))]
pub struct BuildArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl BuildArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let plan = self.target.prepare()?;
        let built = crate::build::build(&plan, self.toolchain.nvcc())?;
        if built.compiled {
            println!("built {} in {:.1} s", built.binary.display(), built.seconds);
        } else {
            println!(
                "{} is up to date (cached; nvcc not called)",
                built.binary.display()
            );
        }
        Ok(exit::PASSED)
    }
}
