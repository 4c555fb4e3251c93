//! Compiling a harness: the runtime library (built once per key into a user cache, runtime.rs)
//! and the kernel's translation unit, harness.cu, with the production flags, linked together.
//! A content-hash cache makes an unchanged build cost no nvcc call at all.
//!
//! The harness's cache key covers the nvcc binary, every argument (the runtime library's path
//! among them, which names its key), the library's content, and the content of every file the
//! last compile read (nvcc's own dependency list: harness.cu, the kernel headers, CUDA's
//! headers). Editing a kernel header therefore rebuilds; touching nothing does not. A file that
//! changes while nvcc runs leaves the build unstamped, so the next build compiles again.
pub mod cache_entry;
pub mod lock;
pub mod progress;
pub mod runtime;
pub mod toolchain;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::engine_error::EngineError as Error;
use crate::plan::command::{HARNESS_BINARY, REFERENCE_OBJECT};
use crate::plan::Plan;
use lock::FileLock;

const BUILD_DIR: &str = ".repro/build";

/// Which executable to build from the artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `harness`: exactly the production flags (what build.sh builds).
    Production,
    /// `.repro/build/harness-lineinfo`: the production flags plus `-lineinfo`, so that
    /// compute-sanitizer reports name source lines. Built and cached on its own.
    Lineinfo,
    /// `.repro/build/harness-async-race`: the Lineinfo variant built by the async-race
    /// checker's nvcc (src/async_race/toolkit.rs: the PTX rewritten between cicc and ptxas)
    /// with its device runtime force-included. Its site tables go to ASYNC_RACE_SITES.
    AsyncRace,
}

/// Where the AsyncRace variant's compile leaves the rewrite's site tables.
pub const ASYNC_RACE_SITES: &str = ".repro/build/async-race-sites";

impl Variant {
    /// What the progress line calls the compile.
    fn label(self) -> &'static str {
        match self {
            Variant::Production | Variant::Lineinfo => "harness.cu with the production flags",
            Variant::AsyncRace => {
                "harness.cu with the production flags, instrumented for async-race"
            }
        }
    }

    fn binary(self) -> &'static str {
        match self {
            Variant::Production => HARNESS_BINARY,
            Variant::Lineinfo => ".repro/build/harness-lineinfo",
            Variant::AsyncRace => ".repro/build/harness-async-race",
        }
    }

    fn stamp(self) -> &'static str {
        match self {
            Variant::Production => ".repro/build/stamp.json",
            Variant::Lineinfo => ".repro/build/stamp-lineinfo.json",
            Variant::AsyncRace => ".repro/build/stamp-async-race.json",
        }
    }

    fn depfile(self) -> &'static str {
        match self {
            Variant::Production => ".repro/build/harness.d",
            Variant::Lineinfo => ".repro/build/harness-lineinfo.d",
            Variant::AsyncRace => ".repro/build/harness-async-race.d",
        }
    }

    fn arguments(self, production: Vec<String>) -> Vec<String> {
        match self {
            Variant::Production => production,
            Variant::Lineinfo
                if production
                    .iter()
                    .any(|a| a == "-lineinfo" || a == "--generate-line-info") =>
            {
                production
            }
            Variant::Lineinfo => {
                // Before `-o harness harness.cu LIBRARY`, which the exec form always ends with.
                let mut args = production;
                let at = args.iter().rposition(|a| a == "-o").unwrap_or(args.len());
                args.insert(at, "-lineinfo".into());
                args
            }
            Variant::AsyncRace => {
                let mut args = Variant::Lineinfo.arguments(production);
                let at = args.iter().rposition(|a| a == "-o").unwrap_or(args.len());
                // The checker's hooks and its host side, in harness.cu's own translation unit:
                // the rewrite calls them from the kernel's PTX.
                args.splice(
                    at..at,
                    ["-include".to_string(), "repro/async_race.cuh".to_string()],
                );
                args
            }
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    key: String,
    /// Files the last compile read, relative to the artifact folder or absolute.
    inputs: Vec<String>,
}

/// What a build did.
#[derive(Debug)]
pub struct Built {
    pub binary: PathBuf,
    /// False when the cache answered and nvcc was not called.
    pub compiled: bool,
    pub seconds: f64,
}

fn key_of(nvcc: &Path, args: &[String], dir: &Path, inputs: &[String]) -> Option<String> {
    let mut hasher = blake3::Hasher::new();
    let meta = std::fs::metadata(nvcc).ok()?;
    hasher.update(nvcc.to_string_lossy().as_bytes());
    hasher.update(&meta.len().to_le_bytes());
    if let Ok(modified) = meta.modified() {
        hasher.update(format!("{modified:?}").as_bytes());
    }
    for a in args {
        hasher.update(a.as_bytes());
        hasher.update(&[0]);
    }
    for input in inputs {
        let content = std::fs::read(dir.join(input)).ok()?;
        hasher.update(input.as_bytes());
        hasher.update(&(content.len() as u64).to_le_bytes());
        hasher.update(&content);
    }
    Some(hasher.finalize().to_hex().to_string())
}

/// The prerequisites of a make-style dependency file written by `nvcc -MD -MF`.
pub fn parse_depfile(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let Some((_, rest)) = joined.split_once(": ") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Builds the harness in `dir` unless the cache says it is current.
pub fn build(plan: &Plan, nvcc_override: Option<&Path>) -> Result<Built, Error> {
    build_variant(plan, nvcc_override, Variant::Production)
}

/// Prints what a compile printed (captured while a spinner ran), stdout then stderr.
pub(crate) fn print_output(output: &std::process::Output) {
    use std::io::Write;
    let _ = std::io::stdout().write_all(&output.stdout);
    let _ = std::io::stderr().write_all(&output.stderr);
}

/// The inputs of the last compile that changed after `since` (while nvcc ran).
fn changed_since(dir: &Path, inputs: &[String], since: SystemTime) -> Vec<String> {
    inputs
        .iter()
        .filter(|input| {
            std::fs::metadata(dir.join(input))
                .and_then(|m| m.modified())
                .map_or(true, |modified| modified >= since)
        })
        .cloned()
        .collect()
}

/// Whether the binary is current: its stamp's key matches the key of the inputs the stamp lists.
fn current(dir: &Path, binary: &Path, stamp_path: &Path, nvcc: &Path, args: &[String]) -> bool {
    if !binary.is_file() {
        return false;
    }
    std::fs::read_to_string(stamp_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Stamp>(&t).ok())
        .is_some_and(|stamp| {
            key_of(nvcc, args, dir, &stamp.inputs).as_deref() == Some(stamp.key.as_str())
        })
}

/// Builds one variant of the harness unless the cache says it is current. nvcc writes to a
/// temporary name that replaces the binary only when the build succeeded: a failed build keeps
/// the previous good one (and its stamp is gone, so nothing mistakes it for current). Two builds
/// of one artifact take turns (a lock in .repro/build/), and the second finds the first's work.
pub fn build_variant(
    plan: &Plan,
    nvcc_override: Option<&Path>,
    variant: Variant,
) -> Result<Built, Error> {
    let dir = &plan.dir;
    let nvcc = toolchain::find_nvcc(nvcc_override)?;
    let command = &plan.command;
    // The async-race variant compiles with the wrapped nvcc (same toolkit, one step added),
    // whose ptxas writes the site tables into a folder of this compile's own.
    let mut environment = Vec::new();
    let mut fresh_dir = None;
    let compiler = match variant {
        Variant::AsyncRace => {
            let wrapped = crate::async_race::toolkit::wrap(&nvcc.path, &runtime::cache_root())?;
            let sites = repro_text::paths::absolute(&dir.join(ASYNC_RACE_SITES));
            environment = crate::async_race::toolkit::environment(&wrapped, &sites);
            fresh_dir = Some(sites);
            wrapped.nvcc
        }
        _ => nvcc.path.clone(),
    };
    std::fs::create_dir_all(dir.join(BUILD_DIR))
        .map_err(Error::io("create", dir.join(BUILD_DIR)))?;
    let _lock = FileLock::acquire(&dir.join(BUILD_DIR).join("lock"))?;
    let library = runtime::library(&nvcc.path, command, dir)?;
    let library_path = library.path.to_string_lossy().into_owned();
    let mut linked = vec![library_path];
    if command.custom_reference {
        reference_object(plan, &nvcc.path)?;
        linked.push(REFERENCE_OBJECT.into());
    }
    let args = variant.arguments(command.arguments(&linked[0]));
    let compile = CachedCompile {
        dir,
        nvcc: &compiler,
        args: &args,
        output: variant.binary(),
        stamp: variant.stamp(),
        depfile: variant.depfile(),
        marker: "started",
        label: variant.label(),
        linked,
        environment,
        fresh_dir,
    };
    let seconds = compile.run(|output| Error::Build {
        dir: dir.clone(),
        code: exit_text(output),
        command: format!("{} {}", compiler.display(), args.join(" ")),
        first_error: first_error_line(output),
    })?;
    Ok(Built {
        binary: dir.join(variant.binary()),
        compiled: seconds.is_some(),
        seconds: seconds.unwrap_or(0.0),
    })
}

/// `op: custom` or intermediates' references: reference.cu (the calls of the user's reference
/// functions, which includes their headers) compiled with the runtime's flags into REFERENCE_OBJECT, cached like the harness. A
/// reference that does not compile is exit 3 with nvcc's message, which names the header.
fn reference_object(plan: &Plan, nvcc: &Path) -> Result<(), Error> {
    let dir = &plan.dir;
    let args = plan.command.reference_arguments(REFERENCE_OBJECT);
    let compile = CachedCompile {
        dir,
        nvcc,
        args: &args,
        output: REFERENCE_OBJECT,
        stamp: REFERENCE_STAMP,
        depfile: REFERENCE_DEPFILE,
        marker: "started-reference",
        label: "the custom reference with the runtime's flags",
        linked: Vec::new(),
        environment: Vec::new(),
        fresh_dir: None,
    };
    compile.run(|output| {
        // Every reference reference.cu calls: op: custom's, then the intermediates' own.
        let (mut headers, mut functions) = (Vec::new(), Vec::new());
        for (source, function) in crate::generate::context::user_references(&plan.spec) {
            let header = repro_text::paths::relative_to(source, dir);
            if !headers.contains(&header) {
                headers.push(header);
            }
            functions.push(function.to_string());
        }
        Error::ReferenceBuild {
            header: headers.join(", "),
            function: functions.join("`, `"),
            code: exit_text(output),
            command: format!("{} {}", nvcc.display(), args.join(" ")),
        }
    })?;
    Ok(())
}

/// nvcc's exit code as the error says it.
fn exit_text(output: &std::process::Output) -> String {
    output
        .status
        .code()
        .map_or("signal".into(), |c| c.to_string())
}

/// One nvcc call of a build, cached: skipped when its stamp's key still matches (the arguments
/// and every file the last compile read, per nvcc's dependency list, plus `linked`).
struct CachedCompile<'a> {
    dir: &'a Path,
    nvcc: &'a Path,
    args: &'a [String],
    /// What `-o` names, relative to `dir`; nvcc writes `OUTPUT.partial`, renamed on success.
    output: &'a str,
    stamp: &'a str,
    depfile: &'a str,
    /// The file whose time marks the compile's start (start_marker).
    marker: &'a str,
    /// The progress line's words.
    label: &'a str,
    /// Files the output is linked from (the runtime library, the reference's object): their
    /// content is part of the key.
    linked: Vec<String>,
    /// Extra environment for nvcc (the async-race checker's ptxas wrapper needs its own).
    environment: Vec<(&'static str, std::ffi::OsString)>,
    /// A folder the compile writes besides its output (the rewrite's site tables), emptied
    /// before nvcc runs so that it holds this compile's files only; kept when the cache answers.
    fresh_dir: Option<PathBuf>,
}

impl CachedCompile<'_> {
    /// Compiles unless current; Some(seconds) when nvcc ran, None when the cache answered.
    /// A failed compile removes its partial output and becomes `failed(nvcc's output)`.
    fn run(
        self,
        failed: impl FnOnce(&std::process::Output) -> Error,
    ) -> Result<Option<f64>, Error> {
        let (dir, nvcc) = (self.dir, self.nvcc);
        let target = dir.join(self.output);
        let stamp_path = dir.join(self.stamp);
        // The environment nvcc gets is part of the key, as its arguments are.
        let mut keyed = self.args.to_vec();
        keyed.extend(
            self.environment
                .iter()
                .map(|(k, v)| format!("{k}={}", v.to_string_lossy())),
        );
        if current(dir, &target, &stamp_path, nvcc, &keyed) {
            return Ok(None);
        }
        let _ = std::fs::remove_file(&stamp_path);
        let partial = format!("{}.partial", self.output);
        eprintln!(
            "build: {} {} (in {})",
            nvcc.display(),
            self.args.join(" "),
            dir.display()
        );
        let started = start_marker(dir, self.marker)?;
        if let Some(fresh) = &self.fresh_dir {
            let _ = std::fs::remove_dir_all(fresh);
            std::fs::create_dir_all(fresh).map_err(Error::io("create", fresh))?;
        }
        let (output, seconds) = progress::run(
            self.label,
            Command::new(nvcc)
                .current_dir(dir)
                .args(with_output(self.args, &partial))
                .args(["-MD", "-MF", self.depfile])
                .envs(self.environment.iter().map(|(k, v)| (*k, v.as_os_str()))),
        )
        .map_err(|e| Error::Toolchain(format!("cannot start {}: {e}", nvcc.display())))?;
        print_output(&output);
        if !output.status.success() {
            let _ = std::fs::remove_file(dir.join(&partial));
            return Err(failed(&output));
        }
        std::fs::rename(dir.join(&partial), &target).map_err(Error::io("write", &target))?;
        let mut inputs = std::fs::read_to_string(dir.join(self.depfile))
            .map(|t| parse_depfile(&t))
            .unwrap_or_default();
        inputs.extend(self.linked);
        let changed = changed_since(dir, &inputs, started);
        if !changed.is_empty() {
            eprintln!(
                "build: {} changed while nvcc ran; {} is not marked current, and the next build compiles again",
                changed.join(", "),
                self.output
            );
        } else if let Some(key) = key_of(nvcc, &keyed, dir, &inputs) {
            let stamp =
                serde_json::to_string_pretty(&Stamp { key, inputs }).expect("stamp serializes");
            std::fs::write(&stamp_path, stamp).map_err(Error::io("write", &stamp_path))?;
        }
        Ok(Some(seconds))
    }
}

const REFERENCE_STAMP: &str = ".repro/build/stamp-reference.json";
const REFERENCE_DEPFILE: &str = ".repro/build/reference.d";

/// The first line of a failed compile's output that says `error`.
pub(crate) fn first_error_line(output: &std::process::Output) -> Option<String> {
    [&output.stderr, &output.stdout].iter().find_map(|bytes| {
        String::from_utf8_lossy(bytes)
            .lines()
            .find(|l| l.contains("error"))
            .map(|l| l.trim().to_string())
    })
}

/// The moment a compile starts, as the modification time of a marker file `name` in the build
/// folder: anything nvcc reads that changes after it was maybe read before the change. A file's
/// time comes from the same (coarse) clock as the inputs' own: the system clock can be ahead of
/// a write that follows it. The marker is written again once that clock has ticked, so that an
/// input written just before the compile (an artifact rendered a moment ago) is older than it,
/// not of the same tick, which would count as changed while nvcc ran.
fn start_marker(dir: &Path, name: &str) -> Result<SystemTime, Error> {
    let marker = dir.join(BUILD_DIR).join(name);
    let write = || -> Result<Option<SystemTime>, Error> {
        std::fs::write(&marker, b"").map_err(Error::io("write", &marker))?;
        Ok(std::fs::metadata(&marker).and_then(|m| m.modified()).ok())
    };
    let Some(first) = write()? else {
        return Ok(SystemTime::now());
    };
    // A tick is a few milliseconds; a clock that does not move in 50 ms is not waited for.
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(1));
        if let Some(now) = write()? {
            if now > first {
                return Ok(now);
            }
        }
    }
    Ok(first)
}

/// The same arguments with nvcc's output file (`-o X`) replaced.
fn with_output(args: &[String], output: &str) -> Vec<String> {
    let mut out = args.to_vec();
    if let Some(i) = out.iter().position(|a| a == "-o") {
        if i + 1 < out.len() {
            out[i + 1] = output.to_string();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse_depfile;

    #[test]
    fn depfile() {
        let text =
            "harness : harness.cu \\\n    /usr/include/a.h \\\n    ../../kernels/my\\ dir/x.cuh\n";
        assert_eq!(
            parse_depfile(text),
            vec![
                "harness.cu",
                "/usr/include/a.h",
                "../../kernels/my dir/x.cuh"
            ]
        );
    }
}
