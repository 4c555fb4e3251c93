//! `repro import rust|cuda`: find the launch or the kernel, build the skeleton, write it where
//! asked (never over an existing file), with include dirs relative to where the spec goes.

use std::path::{Path, PathBuf};

use super::skeleton::Skeleton;
use crate::cli::{ImportArgs, ImportCommand};
use crate::error::{exit, Error};
use crate::generate::paths::relative_to;

impl ImportArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let (skeleton, output) = match self.command {
            ImportCommand::Rust {
                file,
                kernel,
                list,
                search,
                output,
            } => {
                let sites =
                    super::rust::import_with_search(&file, kernel.as_deref(), search.as_deref())
                        .map_err(|e| Error::Usage(e.to_string()))?;
                let selectors = super::rust::selectors(&sites);
                if list {
                    let listings: Vec<String> = sites
                        .iter()
                        .zip(&selectors)
                        .map(|(site, select)| site.listing(select))
                        .collect();
                    print!("{}", listings.join("\n"));
                    return Ok(exit::PASSED);
                }
                let site = match sites.as_slice() {
                    [one] => one,
                    _ => {
                        let listing: Vec<String> = sites
                            .iter()
                            .zip(&selectors)
                            .map(|(s, select)| format!("  {}   (--kernel {select})", s.summary()))
                            .collect();
                        return Err(Error::Usage(format!(
                            "{} has {} launch sites; pick one with --kernel NAME:\n{}",
                            file.display(),
                            sites.len(),
                            listing.join("\n")
                        )));
                    }
                };
                (super::rust::skeleton(site), output)
            }
            ImportCommand::Capture { dir, call, output } => {
                return capture(&dir, call, output.as_deref());
            }
            ImportCommand::Cuda {
                path,
                kernel,
                output,
            } => {
                let decls =
                    super::cuda::find(&path, &kernel).map_err(|e| Error::Usage(e.to_string()))?;
                let decl = match decls.as_slice() {
                    [one] => one,
                    _ => {
                        let listing: Vec<String> = decls
                            .iter()
                            .map(|d| format!("  {}  {}", d.location(), d.signature))
                            .collect();
                        return Err(Error::Usage(format!(
                            "`{kernel}` is declared {} times under {}; pass the file (or a narrower folder) as PATH:\n{}",
                            decls.len(),
                            path.display(),
                            listing.join("\n")
                        )));
                    }
                };
                (super::cuda::skeleton(decl, &path), output)
            }
        };
        write(skeleton, output.as_deref())
    }
}

/// `repro import capture`: the tensors section, with file paths relative to where it is written.
fn capture(dir: &Path, call: u32, output: Option<&Path>) -> Result<u8, Error> {
    let entries = super::capture::read_manifest(dir).map_err(Error::Usage)?;
    let base: PathBuf = output
        .and_then(|o| o.parent().map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let files_at = relative_to(dir, &base);
    let text = super::capture::tensors_yaml(&entries, call, &files_at, &dir.display().to_string())
        .map_err(Error::Usage)?;
    match output {
        None => print!("{text}"),
        Some(path) => {
            if path.exists() {
                return Err(Error::Usage(format!(
                    "{} exists; repro import never overwrites a file (choose another -o)",
                    path.display()
                )));
            }
            std::fs::write(path, &text).map_err(Error::io("write", path))?;
            println!(
                "wrote {} (paste its tensors into a spec, or add the spec's other sections around it)",
                path.display()
            );
        }
    }
    Ok(exit::PASSED)
}

fn write(mut skeleton: Skeleton, output: Option<&Path>) -> Result<u8, Error> {
    let base: PathBuf = output
        .and_then(|o| o.parent().map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    skeleton.include_dirs = skeleton
        .include_dirs
        .iter()
        .map(|d| relative_to(Path::new(d), &base))
        .collect();
    let text = skeleton.render();
    match output {
        None => print!("{text}"),
        Some(path) => {
            if path.exists() {
                return Err(Error::Usage(format!(
                    "{} exists; repro import never overwrites a spec (choose another -o)",
                    path.display()
                )));
            }
            std::fs::write(path, &text).map_err(Error::io("write", path))?;
            let todos = text.matches("\"TODO: ").count();
            println!(
                "wrote {} ({todos} TODO{} to fill in; `repro scaffold {}` names each one left)",
                path.display(),
                if todos == 1 { "" } else { "s" },
                path.display()
            );
        }
    }
    Ok(exit::PASSED)
}
