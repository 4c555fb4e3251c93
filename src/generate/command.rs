//! `repro scaffold` and `repro diff`, and the "scaffold if stale" step of build and run.

use std::path::{Path, PathBuf};

use super::artifact::{self, FileState};
use crate::error::{exit, Error};
use crate::spec::{self, ResolvedSpec};

/// What a command was pointed at, made ready: a spec with its (current) artifact, or an artifact
/// folder used as it is on disk (hand edits and all).
pub struct Prepared {
    pub spec: ResolvedSpec,
    pub dir: PathBuf,
}

/// Loads a spec for a command, telling the user (on stderr) what the spec resolved with warnings.
fn load_spec(path: &Path) -> Result<ResolvedSpec, Error> {
    let spec = spec::load(path)?;
    for warning in &spec.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(spec)
}

/// A folder holding `spec.yaml` is an artifact; anything else is a spec file.
pub fn is_artifact_dir(path: &Path) -> bool {
    path.is_dir() && path.join("spec.yaml").is_file()
}

/// The files written, the runtime's as one entry: `harness.cu, runtime/ (25 files), spec.yaml`.
fn file_list(names: &[&str]) -> String {
    let runtime = names.iter().filter(|n| n.starts_with("runtime/")).count();
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !name.starts_with("runtime/") {
            out.push(name.to_string());
        } else if !out.iter().any(|o| o.starts_with("runtime/")) {
            out.push(format!(
                "runtime/ ({runtime} file{})",
                if runtime == 1 { "" } else { "s" }
            ));
        }
    }
    out.join(", ")
}

/// Loads the target; for a spec, writes its artifact when stale (never over hand edits).
pub fn prepare(target: &Path, output: Option<&Path>) -> Result<Prepared, Error> {
    if target.is_dir() {
        if !is_artifact_dir(target) {
            return Err(Error::NotAnArtifact {
                dir: target.to_path_buf(),
            });
        }
        let spec = load_spec(&target.join("spec.yaml"))?;
        return Ok(Prepared {
            spec,
            dir: target.to_path_buf(),
        });
    }
    let spec = load_spec(target)?;
    let dir = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| super::default_dir(&spec));
    let artifact = super::render(&spec, &dir)?;
    if !artifact::is_current(&artifact) {
        let summary = artifact::write(&artifact, &spec.path, false)?;
        eprintln!(
            "scaffold: wrote {} in {}",
            file_list(&summary.written),
            dir.display()
        );
    }
    Ok(Prepared { spec, dir })
}

/// `repro scaffold`: writes the artifact of the spec at `spec_path` into `output` [default:
/// generated/<name>/], over hand edits only when `force`.
pub fn scaffold(spec_path: &Path, output: Option<&Path>, force: bool) -> Result<u8, Error> {
    let spec = load_spec(spec_path)?;
    let dir = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| super::default_dir(&spec));
    let artifact = super::render(&spec, &dir)?;
    let summary = artifact::write(&artifact, &spec.path, force)?;
    if let Some(saved) = &summary.saved {
        println!(
            "{}: your edited files were kept in {}",
            dir.display(),
            saved.display()
        );
    }
    if summary.written.is_empty() {
        println!(
            "{}: up to date ({} files)",
            dir.display(),
            summary.unchanged.len()
        );
    } else {
        println!("{}: wrote {}", dir.display(), file_list(&summary.written));
    }
    println!(
        "next: repro build {0}   or   repro run {0} --ones",
        dir.display()
    );
    Ok(exit::PASSED)
}

/// `repro diff`: the artifact `target` (or a spec's default artifact) against what its spec
/// generates now. Exit 0 when they match, 1 when they differ (like `diff`).
pub fn diff(target: &Path) -> Result<u8, Error> {
    let (spec_path, dir) = if target.is_dir() {
        let manifest = artifact::Manifest::read(target).ok_or_else(|| Error::NoManifest {
            dir: target.to_path_buf(),
        })?;
        (target.join(&manifest.spec), target.to_path_buf())
    } else {
        let spec = load_spec(target)?;
        let dir = super::default_dir(&spec);
        (target.to_path_buf(), dir)
    };
    let spec = load_spec(&spec_path)?;
    let artifact = super::render(&spec, &dir)?;
    let mut differs = false;
    for (status, file) in artifact::status(&artifact).iter().zip(&artifact.files) {
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
                print!(
                    "{}",
                    artifact::unified_diff(
                        file.name,
                        status.on_disk.as_deref().unwrap_or(""),
                        &file.content
                    )
                );
            }
        }
    }
    if !differs {
        println!("{}: matches {}", dir.display(), spec_path.display());
    }
    Ok(if differs {
        exit::MISMATCH
    } else {
        exit::PASSED
    })
}
