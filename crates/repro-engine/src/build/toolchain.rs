//! Finding the CUDA toolchain (docs/cli.md, `repro doctor`): nvcc from `--nvcc`, `$NVCC`, `PATH`,
//! `$CUDA_HOME`, `/usr/local/cuda`, then the project-local `.toolchain/` that
//! scripts/setup-toolchain.sh fills from PyPI wheels; and the CUTLASS headers that come with it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine_error::EngineError as Error;

/// Where a tool was found, and by which rule.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub how: String,
}

/// The `.toolchain` folders worth looking at: above the working directory, above the `repro`
/// executable (so an installed binary in target/ finds its checkout's toolchain), and the
/// checkout repro was built from.
fn local_toolchains() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    let mut push_ancestors = |start: Option<PathBuf>| {
        if let Some(start) = start {
            for dir in start.ancestors() {
                roots.push(dir.join(".toolchain"));
            }
        }
    };
    push_ancestors(std::env::current_dir().ok());
    push_ancestors(
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf)),
    );
    push_ancestors(Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))));
    let mut seen = std::collections::HashSet::new();
    roots.retain(|r| seen.insert(r.clone()) && r.is_dir());
    roots
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Finds nvcc: `--nvcc`, `$NVCC`, `PATH`, `$CUDA_HOME`, `/usr/local/cuda`, then `.toolchain/`.
pub fn find_nvcc(explicit: Option<&Path>) -> Result<Found, Error> {
    if let Some(p) = explicit {
        return if p.is_file() {
            // Absolute: nvcc runs in the artifact's folder, not where the user typed the path.
            Ok(Found {
                path: repro_text::paths::absolute(p),
                how: "--nvcc".into(),
            })
        } else {
            Err(Error::Toolchain(format!(
                "--nvcc {}: no such file",
                p.display()
            )))
        };
    }
    if let Some(p) = std::env::var_os("NVCC").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        let resolved = if p.components().count() == 1 {
            on_path(&p.to_string_lossy())
        } else {
            Some(repro_text::paths::absolute(&p))
        };
        return match resolved.filter(|p| p.is_file()) {
            Some(path) => Ok(Found {
                path,
                how: "$NVCC".into(),
            }),
            None => Err(Error::Toolchain(format!(
                "$NVCC is {} but no such file exists",
                p.display()
            ))),
        };
    }
    if let Some(path) = on_path("nvcc") {
        return Ok(Found {
            path,
            how: "PATH".into(),
        });
    }
    if let Some(home) = std::env::var_os("CUDA_HOME").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(home).join("bin/nvcc");
        if path.is_file() {
            return Ok(Found {
                path,
                how: "$CUDA_HOME".into(),
            });
        }
    }
    let system = PathBuf::from("/usr/local/cuda/bin/nvcc");
    if system.is_file() {
        return Ok(Found {
            path: system,
            how: "/usr/local/cuda".into(),
        });
    }
    for root in local_toolchains() {
        let path = root.join("cuda/bin/nvcc");
        if path.is_file() {
            return Ok(Found {
                path,
                how: "project toolchain (scripts/setup-toolchain.sh)".into(),
            });
        }
    }
    Err(Error::Toolchain(
        "nvcc not found (looked at --nvcc, $NVCC, PATH, $CUDA_HOME, /usr/local/cuda and the project's .toolchain/)\n\
         help: run scripts/setup-toolchain.sh to install nvcc and the CUDA headers from PyPI into .toolchain/, \
         or point $NVCC at your nvcc"
            .into(),
    ))
}

/// CUTLASS/CuTe headers: `$CUTLASS_DIR`, then the project toolchain's nvidia-cutlass wheel.
pub fn find_cutlass() -> Option<Found> {
    if let Some(dir) = std::env::var_os("CUTLASS_DIR").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        let include = if dir.join("include/cutlass").is_dir() {
            dir.join("include")
        } else {
            dir.clone()
        };
        if include.join("cutlass/cutlass.h").is_file() {
            return Some(Found {
                path: include,
                how: "$CUTLASS_DIR".into(),
            });
        }
    }
    local_toolchains().into_iter().find_map(|root| {
        let include = root.join("cutlass/include");
        include.join("cutlass/cutlass.h").is_file().then(|| Found {
            path: include,
            how: "project toolchain (nvidia-cutlass wheel)".into(),
        })
    })
}

/// `4.2.0` from cutlass/version.h.
pub fn cutlass_version(include: &Path) -> Option<String> {
    let text = std::fs::read_to_string(include.join("cutlass/version.h")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("#define CUTLASS_{name} ")))
            .map(|v| v.trim().to_string())
    };
    Some(format!(
        "{}.{}.{}",
        field("MAJOR")?,
        field("MINOR")?,
        field("PATCH")?
    ))
}

/// What identifies an nvcc for the runtime cache: its whole `--version` text (release, build and
/// date), so that a wrapper script or a second copy of the same toolkit shares the entries of
/// the nvcc it runs; an nvcc that does not answer `--version` is known by its path alone.
pub fn nvcc_identity(nvcc: &Path) -> String {
    Command::new(nvcc)
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success() && !out.stdout.is_empty())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_else(|| format!("path {}", nvcc.display()))
}

/// The last line of `nvcc --version` that names the release (`Cuda compilation tools, release 13.0, V13.0.88`).
pub fn nvcc_version(nvcc: &Path) -> Option<String> {
    let out = Command::new(nvcc).arg("--version").output().ok()?;
    release_line(&String::from_utf8_lossy(&out.stdout))
}

/// The line of `nvcc --version`'s text that names the release.
pub fn release_line(version_text: &str) -> Option<String> {
    version_text
        .lines()
        .find(|l| l.contains("release"))
        .map(|l| l.trim().to_string())
}

/// The host C++ compiler nvcc will drive unless `-ccbin` says otherwise, as the `cc` crate
/// resolves it for this host (honouring `$CXX`).
pub fn host_compiler() -> Option<PathBuf> {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    cc::Build::new()
        .cpp(true)
        .cargo_metadata(false)
        .target(&triple)
        .host(&triple)
        .opt_level(0)
        .try_get_compiler()
        .ok()
        .map(|tool| tool.path().to_path_buf())
}
