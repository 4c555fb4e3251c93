//! `repro diff DIR|SPEC`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Error;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// An artifact directory (holding spec.yaml), or a spec file (compared with its default artifact).
    pub target: PathBuf,
}

impl DiffArgs {
    pub fn exec(self) -> Result<u8, Error> {
        crate::generate::command::diff(&self.target)
    }
}
