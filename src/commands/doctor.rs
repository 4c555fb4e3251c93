//! `repro doctor [--nvcc PATH]`.

use clap::Args;

use super::options::ToolchainArgs;
use crate::error::Error;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl DoctorArgs {
    pub fn exec(self) -> Result<u8, Error> {
        crate::doctor::doctor(self.toolchain.nvcc())
    }
}
