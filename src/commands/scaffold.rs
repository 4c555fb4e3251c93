//! `repro scaffold SPEC [-o DIR] [--force]`.

use std::path::PathBuf;

use clap::Args;

use crate::error::{exit, Error};
use crate::generate::{artifact, file_list};
use crate::plan::Plan;

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
    /// Writes the spec's artifact, over hand edits only with `--force` (which keeps them aside).
    pub fn exec(self) -> Result<u8, Error> {
        let plan =
            Plan::for_spec_file(&self.spec, self.output.as_deref(), &crate::machine::Machine)?;
        let files = plan.artifact.as_ref().expect("a spec's plan has its files");
        let summary = artifact::write(files, &plan.spec.path, self.force)?;
        let dir = plan.dir.display();
        if let Some(saved) = &summary.saved {
            println!("{dir}: your edited files were kept in {}", saved.display());
        }
        if summary.written.is_empty() {
            println!("{dir}: up to date ({} files)", summary.unchanged.len());
        } else {
            println!("{dir}: wrote {}", file_list(&summary.written));
        }
        println!("next: repro build {dir}   or   repro run {dir} --ones");
        Ok(exit::PASSED)
    }
}
