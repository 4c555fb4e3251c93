//! `repro scaffold SPEC [-o DIR] [--force]`.

use std::path::PathBuf;

use clap::Args;

use crate::error::Error;

#[derive(Debug, Args)]
pub struct ScaffoldArgs {
    /// The spec file (YAML, docs/spec.md).
    pub spec: PathBuf,
    /// Where to write the artifact [default: generated/<name>/ beside the current directory].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Overwrite files edited by hand since they were generated.
    #[arg(long)]
    pub force: bool,
}

impl ScaffoldArgs {
    pub fn exec(self) -> Result<u8, Error> {
        crate::generate::command::scaffold(&self.spec, self.output.as_deref(), self.force)
    }
}
