//! The runtime library cache: `librepro_runtime.a` built once per key and shared by every
//! artifact on the machine, in `$REPRO_CACHE_DIR` or `$XDG_CACHE_HOME/repro` or
//! `~/.cache/repro`, under `runtime/<key>/`.
//!
//! The key covers what must match for the library to be the one a fresh build would make and
//! to link with the harness: the runtime's sources (as the artifact holds them), the nvcc's
//! `--version` (not its path: a wrapper or a second copy of one toolkit shares entries), the
//! arch, and the host compiler (`-ccbin` and its `--version`). Entries are made as every build
//! cache entry is (cache_entry.rs: staged, renamed, one builder per key); one whose library no
//! longer has the hash it was stored with is rebuilt.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::{progress, toolchain};
use crate::engine_error::EngineError as Error;
use crate::plan::command::{BuildCommand, RUNTIME_DIR, RUNTIME_LIBRARY};

/// What an entry records besides the library, and checks it by.
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    pub library_blake3: String,
    pub nvcc: String,
    pub nvcc_version: String,
    pub arch: String,
    pub host_compiler: String,
    pub build_seconds: f64,
}

const ENTRY: &str = "entry.json";

/// The cache's root folder.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("REPRO_CACHE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("repro");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/repro")
}

/// The runtime's files in the artifact, relative, sorted: what is hashed and compiled.
fn runtime_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let root = dir.join(RUNTIME_DIR);
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
        let entry = entry.map_err(|e| Error::RuntimeSources {
            dir: root.clone(),
            why: format!("cannot read the runtime sources: {e}"),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let content = std::fs::read(entry.path()).map_err(Error::io("read", entry.path()))?;
        let name = entry
            .path()
            .strip_prefix(dir)
            .unwrap_or(entry.path())
            .to_string_lossy()
            .into_owned();
        files.push((name, content));
    }
    if files.is_empty() {
        return Err(Error::RuntimeSources {
            dir: root,
            why: "holds no runtime sources".into(),
        });
    }
    Ok(files)
}

/// The host compiler nvcc drives for this build, as text for the key: the `-ccbin` flags and the
/// first line of that compiler's `--version`.
fn host_compiler_identity(command: &BuildCommand) -> String {
    let program = command
        .host_compiler
        .iter()
        .enumerate()
        .find_map(|(i, f)| {
            f.strip_prefix("-ccbin=")
                .or_else(|| f.strip_prefix("--compiler-bindir="))
                .map(str::to_string)
                .or_else(|| {
                    (f == "-ccbin" || f == "--compiler-bindir")
                        .then(|| command.host_compiler.get(i + 1).cloned())
                        .flatten()
                })
        })
        .map(PathBuf::from)
        .or_else(toolchain::host_compiler)
        .unwrap_or_else(|| PathBuf::from("c++"));
    let version = Command::new(&program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "{} | {} | {}",
        command.host_compiler.join(" "),
        program.display(),
        version
    )
}

/// A built runtime library.
#[derive(Debug)]
pub struct Library {
    pub path: PathBuf,
    /// False when the cache answered.
    pub compiled: bool,
}

fn hash_file(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(blake3::hash(&bytes).to_hex().to_string())
}

/// The entry in `entry_dir` when it is whole: its library has the hash it was stored with.
fn valid_entry(entry_dir: &Path) -> Option<PathBuf> {
    let entry: Entry =
        serde_json::from_str(&std::fs::read_to_string(entry_dir.join(ENTRY)).ok()?).ok()?;
    let library = entry_dir.join(RUNTIME_LIBRARY);
    (hash_file(&library)? == entry.library_blake3).then_some(library)
}

/// The runtime library for `command`'s build of the artifact in `dir`: from the cache, or built
/// into it now.
pub fn library(nvcc: &Path, command: &BuildCommand, dir: &Path) -> Result<Library, Error> {
    let files = runtime_files(dir)?;
    // One `nvcc --version` call: its whole text is the key's part, its release line the entry's.
    let nvcc_identity = toolchain::nvcc_identity(nvcc);
    let nvcc_version = toolchain::release_line(&nvcc_identity).unwrap_or_else(|| "unknown".into());
    let host = host_compiler_identity(command);
    let mut hasher = blake3::Hasher::new();
    for (name, content) in &files {
        hasher.update(name.as_bytes());
        hasher.update(&(content.len() as u64).to_le_bytes());
        hasher.update(content);
    }
    for part in [
        &nvcc_identity,
        &command.gencode(),
        &host,
        &crate::plan::command::RUNTIME_FLAGS.join(" "),
    ] {
        hasher.update(part.as_bytes());
        hasher.update(&[0]);
    }
    let key = hasher.finalize().to_hex()[..24].to_string();
    let (path, compiled) = super::cache_entry::get_or_build(
        &cache_root().join("runtime"),
        &key,
        "runtime",
        valid_entry,
        |staging| {
            let staged_library = staging.join(RUNTIME_LIBRARY);
            let args = command.runtime_arguments(&staged_library.to_string_lossy());
            eprintln!(
                "build: {} {} (in {})",
                nvcc.display(),
                args.join(" "),
                dir.display()
            );
            let (output, seconds) = progress::run(
                &format!("the runtime library for {}", command.arch),
                Command::new(nvcc).current_dir(dir).args(&args),
            )
            .map_err(|e| Error::Toolchain(format!("cannot start {}: {e}", nvcc.display())))?;
            super::print_output(&output);
            if !output.status.success() {
                return Err(Error::Build {
                    dir: dir.to_path_buf(),
                    code: output
                        .status
                        .code()
                        .map_or("signal".into(), |c| c.to_string()),
                    command: format!("{} {}", nvcc.display(), args.join(" ")),
                    first_error: super::first_error_line(&output),
                });
            }
            let entry = Entry {
                library_blake3: hash_file(&staged_library).ok_or_else(|| {
                    Error::Toolchain(format!(
                        "nvcc succeeded but wrote no {}",
                        staged_library.display()
                    ))
                })?,
                nvcc: nvcc.to_string_lossy().into_owned(),
                nvcc_version,
                arch: command.arch.clone(),
                host_compiler: host,
                build_seconds: seconds,
            };
            let entry_path = staging.join(ENTRY);
            std::fs::write(
                &entry_path,
                serde_json::to_string_pretty(&entry).expect("an entry serializes"),
            )
            .map_err(Error::io("write", &entry_path))
        },
    )?;
    Ok(Library { path, compiled })
}

/// The cache's entries, for `repro doctor`: folder, entry (when readable), library size.
pub fn entries() -> Vec<(PathBuf, Option<Entry>, u64)> {
    let root = cache_root().join("runtime");
    let Ok(read) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out: Vec<_> = read
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            let dir = e.path();
            let entry = std::fs::read_to_string(dir.join(ENTRY))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            let size = std::fs::metadata(dir.join(RUNTIME_LIBRARY)).map_or(0, |m| m.len());
            (dir, entry, size)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
