//! The folders whose headers a bundle leaves out because the receiver has their own: the CUDA
//! toolkit that built the harness, the host compiler's and C library's, CUTLASS's. Actual
//! folders, found by asking the nvcc that built (`nvcc --dryrun` prints its `TOP=` and include
//! folders, through any wrapper script; and where the build found `cuda_runtime.h`, for a wrapper
//! that hides `--dryrun`), not guessed from where the nvcc command lies: a wrapper
//! in `~/bin` would make the home folder "the toolkit", and every kernel header under it would
//! be left out. A folder that holds the spec's own files is never one of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::spec::ResolvedSpec;

/// Whose headers a left-out folder holds, as the listing and the README say it.
pub const TOOLKIT: &str = "the CUDA toolkit";
pub const HOST: &str = "the host compiler and C library";
pub const CUTLASS: &str = "CUTLASS";

pub struct Toolkit {
    /// Each folder (lexical and canonical forms both) and whose it is.
    roots: Vec<(PathBuf, &'static str)>,
    /// Folders that looked like the toolkit's but hold the spec's own files: not left out.
    pub not_toolkit: Vec<String>,
}

impl Toolkit {
    pub fn find(spec: &ResolvedSpec, nvcc: &Path, tree_roots: &[PathBuf]) -> Toolkit {
        let mut found: Vec<(PathBuf, &'static str)> = vec![
            ("/usr/include".into(), HOST),
            ("/usr/lib".into(), HOST),
            ("/usr/local/cuda".into(), TOOLKIT),
        ];
        found.extend(nvcc_folders(nvcc).into_iter().map(|p| (p, TOOLKIT)));
        // nvcc itself, symlinks followed: `<root>/bin/nvcc` when it is the toolkit's own.
        if let Some(root) = nvcc
            .canonicalize()
            .ok()
            .and_then(|n| Some(n.parent()?.parent()?.to_path_buf()))
            .filter(|r| r.join("include/cuda_runtime.h").is_file())
        {
            found.push((root, TOOLKIT));
        }
        if let Some(home) = std::env::var_os("CUDA_HOME").filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            if home.join("include/cuda_runtime.h").is_file() {
                found.push((home, TOOLKIT));
            }
        }
        found.extend(spec.cutlass.iter().map(|c| (c.clone(), CUTLASS)));
        // CUTLASS given through the spec's own include_dirs is the receiver's to provide too.
        found.extend(
            spec.include_dirs
                .iter()
                .filter(|d| d.join("cutlass/cutlass.h").is_file())
                .map(|d| (d.clone(), CUTLASS)),
        );
        let mut roots = Vec::new();
        let mut not_toolkit = Vec::new();
        for (root, whose) in found {
            let lexical = repro_text::paths::absolute(&root);
            let canonical = root.canonicalize().unwrap_or_else(|_| lexical.clone());
            // A folder above the spec or one of its include dirs would swallow the kernel's own
            // headers (a CUTLASS include dir is the exception: it is the include dir itself).
            let swallows = tree_roots.iter().any(|t| {
                (t.starts_with(&lexical) || t.starts_with(&canonical))
                    && !(whose == CUTLASS && (*t == lexical || *t == canonical))
            });
            if swallows {
                not_toolkit.push(format!(
                    "{} (it holds the spec's own files)",
                    root.display()
                ));
                continue;
            }
            roots.push((lexical, whose));
            roots.push((canonical, whose));
        }
        Toolkit { roots, not_toolkit }
    }

    /// The CUDA toolkit's include folders among the headers nvcc read: each folder holding a
    /// `cuda_runtime.h` beside a `crt/` folder, unless it holds the spec's own files.
    pub fn include_folders_in(&self, read: &[PathBuf], tree_roots: &[PathBuf]) -> Vec<PathBuf> {
        read.iter()
            .filter(|h| h.file_name().is_some_and(|n| n == "cuda_runtime.h"))
            .filter_map(|h| h.parent())
            .filter(|dir| dir.join("crt").is_dir())
            .filter(|dir| !tree_roots.iter().any(|t| t.starts_with(dir)))
            .map(Path::to_path_buf)
            .collect()
    }

    /// Whose folder holds `path` (lexical), if any: the lexical path or the resolved one.
    pub fn whose(&self, path: &Path) -> Option<&'static str> {
        let hit = |p: &Path| {
            self.roots
                .iter()
                .find(|(root, _)| p.starts_with(root))
                .map(|(_, whose)| *whose)
        };
        hit(path).or_else(|| hit(&path.canonicalize().ok()?))
    }
}

/// The toolkit folders the nvcc at `nvcc` uses, as `nvcc --dryrun` prints them: `TOP=` (the
/// toolkit root) and the `-I`/`-isystem` folders of `INCLUDES=` and `SYSTEM_INCLUDES=`. Empty
/// when nvcc does not answer: the caller has other ways.
fn nvcc_folders(nvcc: &Path) -> Vec<PathBuf> {
    let Ok(output) = Command::new(nvcc)
        .args(["--dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"])
        .output()
    else {
        return Vec::new();
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    dryrun_folders(&text)
}

fn dryrun_folders(text: &str) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for line in text.lines() {
        let Some(setting) = line.strip_prefix("#$ ") else {
            continue;
        };
        if let Some(top) = setting.strip_prefix("TOP=") {
            folders.push(PathBuf::from(top.trim().trim_matches('"')));
        } else if let Some(list) = setting
            .strip_prefix("INCLUDES=")
            .or_else(|| setting.strip_prefix("SYSTEM_INCLUDES="))
        {
            let words: Vec<&str> = list
                .split_whitespace()
                .map(|w| w.trim_matches('"'))
                .collect();
            for (i, word) in words.iter().enumerate() {
                if let Some(dir) = word.strip_prefix("-I").filter(|d| !d.is_empty()) {
                    folders.push(PathBuf::from(dir));
                } else if *word == "-isystem" {
                    if let Some(dir) = words.get(i + 1) {
                        folders.push(PathBuf::from(dir));
                    }
                }
            }
        }
    }
    folders.retain(|f| f.is_absolute());
    folders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvcc_dryrun_names_the_toolkit_root_and_its_include_folders() {
        let text = "#$ _TARGET_DIR_=\n#$ TOP=/opt/cuda/bin/..\n\
                    #$ INCLUDES=\"-I/opt/cuda/bin/..//include\"  \n\
                    #$ SYSTEM_INCLUDES=\"-isystem\" \"/opt/cuda/bin/..//include/cccl\"  \n\
                    #$ cicc --something\n";
        assert_eq!(
            dryrun_folders(text),
            vec![
                PathBuf::from("/opt/cuda/bin/.."),
                PathBuf::from("/opt/cuda/bin/..//include"),
                PathBuf::from("/opt/cuda/bin/..//include/cccl"),
            ]
        );
    }
}
