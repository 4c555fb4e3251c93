//! `repro import rust|cuda`: find the launch or the kernel, build the skeleton, write it where
//! asked (never over an existing file), with include dirs relative to where the spec goes.

use std::path::{Path, PathBuf};

use crate::error::{exit, Error};
use crate::import::skeleton::Skeleton;
use repro_text::paths::relative_to;

/// `repro import rust`: the skeleton of the launch site in `file` (of `kernel` when it launches
/// several), with `search` the folder where the kernels may be loaded; or, with `list`, the
/// launch sites found.
pub fn rust(
    file: &Path,
    kernel: Option<&str>,
    list: bool,
    search: Option<&Path>,
    output: Option<&Path>,
) -> Result<u8, Error> {
    let sites = crate::import::rust::import_with_search(file, kernel, search)?;
    let selectors = crate::import::rust::selectors(&sites);
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
            return Err(Error::AmbiguousLaunch {
                file: file.to_path_buf(),
                count: sites.len(),
                listing: listing.join("\n"),
            });
        }
    };
    write(crate::import::rust::skeleton(site), output)
}

/// `repro import cuda`: the skeleton of the `__global__` (or `__device__`) `kernel` found under
/// `path`.
pub fn cuda(path: &Path, kernel: &str, output: Option<&Path>) -> Result<u8, Error> {
    let decls = crate::import::cuda::find(path, kernel)?;
    let decl = match decls.as_slice() {
        [one] => one,
        _ => {
            let listing: Vec<String> = decls
                .iter()
                .map(|d| format!("  {}  {}", d.location(), d.signature))
                .collect();
            return Err(Error::AmbiguousKernel {
                kernel: kernel.to_string(),
                path: path.to_path_buf(),
                count: decls.len(),
                listing: listing.join("\n"),
            });
        }
    };
    write(crate::import::cuda::skeleton(decl, path), output)
}

/// `repro import capture`: the tensors section, with file paths relative to where it is written.
pub fn capture(dir: &Path, call: u32, output: Option<&Path>) -> Result<u8, Error> {
    capture_with_outputs(dir, call, &[], output)
}

/// [`capture`], with `outputs` naming the captured tensors the kernel writes (captured after the
/// launch): they become `output: true` and the expected values of a `reference: op: file`
/// (see [`crate::import::capture::section_yaml`]). The manifest itself cannot say which they are.
pub fn capture_with_outputs(
    dir: &Path,
    call: u32,
    outputs: &[String],
    output: Option<&Path>,
) -> Result<u8, Error> {
    let capture_error = |message| Error::CaptureFolder {
        dir: dir.to_path_buf(),
        message,
    };
    let entries = crate::import::capture::read_manifest(dir).map_err(capture_error)?;
    let base: PathBuf = output
        .and_then(|o| o.parent().map(Path::to_path_buf))
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let files_at = relative_to(dir, &base);
    let text = crate::import::capture::section_yaml(
        &entries,
        call,
        outputs,
        &files_at,
        &dir.display().to_string(),
    )
    .map_err(capture_error)?;
    match output {
        None => print!("{text}"),
        Some(path) => {
            write_new(path, &text)?;
            let what = if outputs.is_empty() {
                "tensors"
            } else {
                "tensors and reference"
            };
            println!(
                "wrote {} (paste its {what} into a spec, or add the spec's other sections around it)",
                path.display()
            );
        }
    }
    Ok(exit::PASSED)
}

/// Writes `text` to `path`, which must not exist: not even as a link, which a plain write would
/// follow to whatever file it names.
fn write_new(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write;
    let would_overwrite = || Error::WouldOverwrite {
        path: path.to_path_buf(),
        command: "import",
        fix: "choose another -o",
    };
    if path.symlink_metadata().is_ok() {
        return Err(would_overwrite());
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => would_overwrite(),
            _ => Error::io("write", path)(e),
        })?;
    file.write_all(text.as_bytes())
        .map_err(Error::io("write", path))
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
            write_new(path, &text)?;
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
