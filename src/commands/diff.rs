//! `repro diff DIR|SPEC`.

use std::path::PathBuf;

use clap::Args;

use crate::error::{exit, Error};
use crate::generate::artifact::{self, FileState};
use crate::plan::{load_spec, Plan};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// An artifact directory (holding spec.yaml), or a spec file (compared with its default artifact).
    pub target: PathBuf,
}

impl DiffArgs {
    /// The artifact (or a spec's default artifact) against what its spec generates now. Exit 0
    /// when they match, 1 when they differ (like `diff`).
    pub fn exec(self) -> Result<u8, Error> {
        let target = &self.target;
        let plan = if target.is_dir() {
            // The artifact against the spec that made it (its manifest names it).
            let manifest = artifact::Manifest::read(target).ok_or_else(|| Error::NoManifest {
                dir: target.to_path_buf(),
            })?;
            Plan::for_spec(
                load_spec(&target.join(&manifest.spec), &crate::machine::Machine)?,
                target.to_path_buf(),
            )?
        } else {
            Plan::for_spec_file(target, None, &crate::machine::Machine)?
        };
        let files = plan.artifact.as_ref().expect("a spec's plan has its files");
        let mut differs = false;
        for (status, file) in artifact::status(files).iter().zip(&files.files) {
            match status.state {
                FileState::Current => {}
                FileState::New => {
                    differs = true;
                    println!("{}: not on disk", file.name);
                }
                FileState::Stale | FileState::Edited => {
                    differs = true;
                    if status.state == FileState::Edited {
                        println!("# {} was edited by hand", file.name);
                    }
                    let on_disk = status.on_disk.as_deref().unwrap_or("");
                    print!(
                        "{}",
                        artifact::unified_diff(file.name, on_disk, &file.content)
                    );
                }
            }
        }
        if !differs {
            println!(
                "{}: matches {}",
                plan.dir.display(),
                plan.spec.path.display()
            );
        }
        Ok(if differs {
            exit::MISMATCH
        } else {
            exit::PASSED
        })
    }
}
