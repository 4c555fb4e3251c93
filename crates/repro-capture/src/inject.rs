//! The injection library `repro capture` hands the CUDA driver (`CUDA_INJECTION64_PATH`): its
//! source is embedded in repro (repro_inject.cpp), compiled once with the host
//! C++ compiler against CUPTI and cached like the runtime library, under
//! `<cache>/inject/<key>/libreproinject.so`. The key is the source, the compiler's `--version`
//! and CUPTI's location: a second capture starts the program at once.
//!
//! CUPTI comes from the CUDA toolkit (`extras/CUPTI`), or the `nvidia-cuda-cupti` wheel the
//! project's toolchain script installs beside nvcc. The library calls the driver through
//! `dlsym` (no -lcuda: the driver that loads it is the one it calls).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::build::cache_entry::get_or_build;
use crate::build::{progress, runtime::cache_root, toolchain};
use crate::engine_error::EngineError as Error;

const SOURCE: &str = include_str!("repro_inject.cpp");
const LIBRARY: &str = "libreproinject.so";

/// CUPTI's headers and library.
#[derive(Debug, Clone)]
pub struct Cupti {
    pub include: PathBuf,
    pub library: PathBuf,
}

/// CUPTI beside the nvcc repro would use: the toolkit's `extras/CUPTI`, or the wheel layout
/// (`include/cupti.h`, `lib/libcupti.so.13`). `$CUPTI_DIR` (holding include/ and lib64/ or lib/)
/// comes first.
pub fn find_cupti() -> Result<Cupti, Error> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("CUPTI_DIR").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(dir));
    }
    if let Ok(nvcc) = toolchain::find_nvcc(None) {
        // nvcc is <root>/bin/nvcc.
        if let Some(root) = nvcc.path.parent().and_then(Path::parent) {
            roots.push(root.join("extras/CUPTI"));
            roots.push(root.to_path_buf());
        }
    }
    roots.push(PathBuf::from("/usr/local/cuda/extras/CUPTI"));
    for root in &roots {
        let include = root.join("include");
        if !include.join("cupti.h").is_file() {
            continue;
        }
        for lib in ["lib64", "lib"] {
            let dir = root.join(lib);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libcupti.so"))
                })
                .collect();
            // libcupti.so if present, else the shortest versioned name (libcupti.so.13).
            found.sort_by_key(|p| p.as_os_str().len());
            if let Some(library) = found.into_iter().next() {
                return Ok(Cupti { include, library });
            }
        }
    }
    Err(Error::Toolchain(format!(
        "repro capture needs CUPTI (cupti.h and libcupti.so) and found none; looked in {}\n\
         help: install the CUDA toolkit's CUPTI, run scripts/setup-toolchain.sh (the nvidia-cuda-cupti wheel), \
         or set $CUPTI_DIR",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The built library, from the cache or compiled now.
pub fn library() -> Result<PathBuf, Error> {
    let cupti = find_cupti()?;
    let compiler = toolchain::host_compiler().unwrap_or_else(|| PathBuf::from("c++"));
    let version = Command::new(&compiler)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    // cuda.h for the driver's types: the toolkit's include/ next to nvcc.
    let cuda_include = toolchain::find_nvcc(None)
        .ok()
        .and_then(|n| {
            n.path
                .parent()
                .and_then(Path::parent)
                .map(|r| r.join("include"))
        })
        .filter(|d| d.join("cuda.h").is_file());
    let mut hasher = blake3::Hasher::new();
    for part in [
        SOURCE,
        &compiler.display().to_string(),
        &version,
        &cupti.include.display().to_string(),
        &cupti.library.display().to_string(),
    ] {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    let key = hasher.finalize().to_hex()[..24].to_string();
    let whole = |entry: &Path| Some(entry.join(LIBRARY)).filter(|l| l.is_file());
    let (library, _compiled) = get_or_build(
        &cache_root().join("inject"),
        &key,
        "capture library",
        whole,
        |staging| {
            let source = staging.join("repro_inject.cpp");
            std::fs::write(&source, SOURCE).map_err(Error::io("write", &source))?;
            let library_dir = cupti.library.parent().unwrap_or(Path::new("/"));
            let mut args: Vec<String> = vec![
                "-std=c++17".into(),
                "-O2".into(),
                "-fPIC".into(),
                "-shared".into(),
                "-fvisibility=hidden".into(),
                format!("-I{}", cupti.include.display()),
            ];
            if let Some(dir) = &cuda_include {
                args.push(format!("-I{}", dir.display()));
            }
            args.extend([
                source.display().to_string(),
                cupti.library.display().to_string(),
                format!("-Wl,-rpath,{}", library_dir.display()),
                // The library's own copies of std:: templates, not the host program's.
                "-Wl,-Bsymbolic".into(),
                "-ldl".into(),
                "-lpthread".into(),
                "-o".into(),
                staging.join(LIBRARY).display().to_string(),
            ]);
            eprintln!("capture: {} {}", compiler.display(), args.join(" "));
            let (output, _seconds) = progress::run(
                "the capture library (CUPTI)",
                Command::new(&compiler).args(&args),
            )
            .map_err(Error::io("run", &compiler))?;
            if !output.status.success() {
                eprint!("{}", String::from_utf8_lossy(&output.stderr));
                return Err(Error::Toolchain(format!(
                    "the capture library did not compile ({}); the compiler's output is above",
                    output.status
                )));
            }
            Ok(())
        },
    )?;
    Ok(library)
}
