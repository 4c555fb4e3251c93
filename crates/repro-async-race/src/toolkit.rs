//! The build side of the checker: an nvcc that runs the PTX rewrite between cicc and ptxas.
//!
//! nvcc finds ptxas on the PATH its `nvcc.profile` sets (the toolkit's own bin first). A copy of
//! nvcc in a folder of repro's cache, beside an `nvcc.profile` that names the real toolkit and
//! puts a folder holding `ptxas` (a link to this repro executable) first, is the same compiler
//! with one step added: repro, started as `ptxas`, rewrites the PTX file nvcc hands it in place
//! and runs the real ptxas with the arguments unchanged. nvcc's flags, its host compiler and
//! every other step are untouched; the rewritten PTX is also what the fatbinary embeds.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use super::error::AsyncRaceError as Error;

use super::ptx;

/// Environment of the wrapped ptxas: the real one, and where the site tables go.
pub const REAL_PTXAS: &str = "REPRO_ASYNC_RACE_PTXAS";
pub const SITES_DIR: &str = "REPRO_ASYNC_RACE_SITES";
/// Hooks the rewrite leaves out, comma-separated (docs/async-race.md, "Diagnosing the checker").
pub const SKIP: &str = "REPRO_ASYNC_RACE_SKIP";

/// A wrapped toolkit: its nvcc, and the environment its ptxas needs.
#[derive(Debug, Clone)]
pub struct WrappedNvcc {
    pub nvcc: PathBuf,
    pub real_ptxas: PathBuf,
}

/// Makes (once per toolkit) the wrapped nvcc under `cache` for the real `nvcc`.
pub fn wrap(nvcc: &Path, cache: &Path) -> Result<WrappedNvcc, Error> {
    let real_nvcc = nvcc.canonicalize().map_err(Error::io("resolve", nvcc))?;
    let bin = real_nvcc
        .parent()
        .expect("nvcc is in a folder")
        .to_path_buf();
    let profile_path = bin.join("nvcc.profile");
    let profile =
        std::fs::read_to_string(&profile_path).map_err(Error::io("read", &profile_path))?;
    let metadata = std::fs::metadata(&real_nvcc).map_err(Error::io("inspect", &real_nvcc))?;
    let repro = std::env::current_exe().map_err(Error::io("locate", "repro"))?;
    // This repro's own identity too: another repro may rewrite differently, and the harness
    // cache keys on the (wrapped) nvcc's path.
    let own = std::fs::metadata(&repro).map_err(Error::io("inspect", &repro))?;
    let key = blake3::hash(
        format!(
            "{}\n{}\n{:?}\n{}\n{}\n{}\n{:?}",
            real_nvcc.display(),
            metadata.len(),
            metadata.modified().ok(),
            profile,
            repro.display(),
            own.len(),
            own.modified().ok()
        )
        .as_bytes(),
    )
    .to_hex()[..16]
        .to_string();
    let root = cache.join("async-race").join(key);
    let shadow_bin = root.join("bin");
    let wrappers = root.join("wrappers");
    let shadow_nvcc = shadow_bin.join("nvcc");
    let result = WrappedNvcc {
        nvcc: shadow_nvcc.clone(),
        real_ptxas: bin.join("ptxas"),
    };
    if shadow_nvcc.is_file() && wrappers.join("ptxas").exists() {
        return Ok(result);
    }
    let partial = cache.join("async-race").join(format!(
        "{}.partial-{}",
        root.file_name().unwrap().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(partial.join("bin")).map_err(Error::io("write", &partial))?;
    std::fs::create_dir_all(partial.join("wrappers")).map_err(Error::io("write", &partial))?;
    let copied = partial.join("bin/nvcc");
    if std::fs::hard_link(&real_nvcc, &copied).is_err() {
        std::fs::copy(&real_nvcc, &copied).map_err(Error::io("write", &copied))?;
    }
    // nvcc looks for crt/ (link.stub) beside itself.
    if bin.join("crt").is_dir() {
        std::os::unix::fs::symlink(bin.join("crt"), partial.join("bin/crt"))
            .map_err(Error::io("write", &partial))?;
    }
    std::os::unix::fs::symlink(&repro, partial.join("wrappers/ptxas"))
        .map_err(Error::io("write", &partial))?;
    let profile = wrapped_profile(&profile, &bin, &root.join("wrappers"));
    let profile_out = partial.join("bin/nvcc.profile");
    std::fs::write(&profile_out, profile).map_err(Error::io("write", &profile_out))?;
    match std::fs::rename(&partial, &root) {
        Ok(()) => {}
        // Another repro made it meanwhile: theirs is as good.
        Err(_) if shadow_nvcc.is_file() => {
            let _ = std::fs::remove_dir_all(&partial);
        }
        Err(e) => return Err(Error::io("write", &root)(e)),
    }
    Ok(result)
}

/// The real profile with `$(_HERE_)` made the real bin folder, and the wrappers first on PATH.
fn wrapped_profile(profile: &str, bin: &Path, wrappers: &Path) -> String {
    let mut out = profile.replace("$(_HERE_)", &bin.display().to_string());
    out.push_str(&format!("\nPATH += {}:\n", wrappers.display()));
    out
}

/// Environment for a build with the wrapped nvcc: where its ptxas finds the real one and puts
/// the site tables, and the hooks to leave out (`REPRO_ASYNC_RACE_SKIP`, a diagnosis aid) when
/// repro was given them, so that they are part of the build's cache key.
pub fn environment(wrapped: &WrappedNvcc, sites: &Path) -> Vec<(&'static str, OsString)> {
    let mut environment = vec![
        (REAL_PTXAS, wrapped.real_ptxas.clone().into_os_string()),
        (SITES_DIR, sites.as_os_str().to_os_string()),
    ];
    if let Some(skip) = std::env::var_os(SKIP).filter(|s| !s.is_empty()) {
        environment.push((SKIP, skip));
    }
    environment
}

/// Is this process the ptxas wrapper (started through the `ptxas` link, with its environment)?
pub fn is_ptxas_wrapper() -> bool {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    Path::new(&arg0).file_name().is_some_and(|n| n == "ptxas")
        && std::env::var_os(REAL_PTXAS).is_some()
}

/// As ptxas: rewrites each PTX input that holds the checker's hooks (the harness; the runtime
/// library and anything else pass untouched), writes its site table, runs the real ptxas.
pub fn ptxas_main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let real = std::env::var_os(REAL_PTXAS)
        .map(PathBuf::from)
        .unwrap_or_default();
    let sites = std::env::var_os(SITES_DIR).map(PathBuf::from);
    for input in args.iter().filter(|a| a.ends_with(".ptx")) {
        let path = Path::new(input);
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if !text.contains("repro_race_access(") || text.contains("// repro async-race site") {
            continue;
        }
        let Some(sites) = &sites else { continue };
        let _ = std::fs::create_dir_all(sites);
        let module = std::fs::read_dir(sites).map(|d| d.count()).unwrap_or(0) as u8;
        let skip: Vec<String> = std::env::var(SKIP)
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let rewrite = ptx::instrument_except(&text, module, &skip);
        if let Err(e) = std::fs::write(path, &rewrite.ptx) {
            eprintln!(
                "repro (ptxas wrapper): cannot write {}: {e}",
                path.display()
            );
            return ExitCode::from(1);
        }
        let table = sites.join(format!(
            "{}.sites.json",
            path.file_stem().unwrap_or_default().to_string_lossy()
        ));
        let json = serde_json::to_string(&rewrite.sites).unwrap_or_default();
        if let Err(e) = std::fs::write(&table, json) {
            eprintln!(
                "repro (ptxas wrapper): cannot write {}: {e}",
                table.display()
            );
            return ExitCode::from(1);
        }
    }
    match Command::new(&real).args(&args).status() {
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("repro (ptxas wrapper): cannot run {}: {e}", real.display());
            ExitCode::from(1)
        }
    }
}
