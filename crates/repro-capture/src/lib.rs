//! `repro capture` (docs/cli.md, `repro capture`): runs the user's program unmodified under CUDA's tool-injection
//! interface, records one launch of the kernel it names, or a window of launches from it
//! (`--launches`, `--through`) (inject.rs builds the library, repro_inject.cpp is it, record.rs
//! reads what it wrote), and turns the record into a spec folder (layout.rs decides tensors and
//! arguments, write.rs writes them, sequence.rs a window's `launches:`), scaffolded in place so
//! that `repro run DIR` runs it.
//!
//! A crate of its own (README.md, "Layout"), above the engine, `repro-flags` (the machine that
//! answers the spec's lookups) and `repro-import` (the `--source` declaration parser and the
//! `.npy` descr table that `import capture` checks against); it fails with [`CaptureError`].

pub mod error;
pub mod inject;
pub mod layout;
pub mod record;
pub mod sequence;
pub mod tensor;
pub mod triton;
pub mod views;
pub mod write;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{file_kind, spec};
use repro_engine::{build, engine_error, plan};
use repro_flags::machine;
use repro_import as import;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine_error::EngineError;
pub use error::CaptureError;

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    pub kernel: String,
    pub launch: u64,
    pub output: PathBuf,
    pub max_bytes: u64,
    pub device: Option<u32>,
    pub stop: bool,
    pub source: Option<PathBuf>,
    /// `--launches`/`--through`: a window of launches; `None` records the one launch.
    pub window: Option<WindowRequest>,
    pub spec: write::SpecRequest,
    pub program: Vec<String>,
}

/// `--launches N` and/or `--through REGEX`: the window that starts at the recorded launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowRequest {
    /// N consecutive launches (any kernel), or with `through` the most the window may hold.
    pub launches: Option<u64>,
    /// The window ends with the first later launch whose demangled name matches.
    pub through: Option<String>,
}

impl WindowRequest {
    /// The window the flags ask for: `None` for the one launch (neither flag, or `--launches 1`),
    /// so that such a capture is the one-launch capture it always was.
    pub fn from_flags(
        launches: Option<u64>,
        through: Option<String>,
    ) -> Result<Option<Self>, String> {
        if let Some(n) = launches {
            if n == 0 || n > MAX_WINDOW_LAUNCHES {
                return Err(format!(
                    "--launches {n}: a window holds 1 to {MAX_WINDOW_LAUNCHES} launches (a spec's `launches:` holds at most {MAX_WINDOW_LAUNCHES})"
                ));
            }
        }
        if let Some(t) = &through {
            regex_check(t).map_err(|e| e.replace("--kernel", "--through"))?;
        }
        Ok(match (launches, through) {
            (None | Some(1), None) => None,
            (launches, through) => Some(WindowRequest { launches, through }),
        })
    }
}

/// The most launches a window may hold: a spec's `launches:` limit (docs/spec.md, `launches`).
pub const MAX_WINDOW_LAUNCHES: u64 = 64;

/// Largest cubin (or parameter file) copied from the raw folder: a module of a large library
/// is tens of MiB.
pub const MAX_CUBIN_BYTES: u64 = 1 << 30;

fn fail(message: impl Into<String>) -> CaptureError {
    CaptureError::Run(message.into())
}

/// Runs the program, records the launch, writes and scaffolds the spec folder. Returns the
/// program's exit code when the capture succeeded.
pub fn capture(mut request: CaptureRequest) -> Result<u8, CaptureError> {
    if let Some(existing) = std::env::var_os("CUDA_INJECTION64_PATH").filter(|v| !v.is_empty()) {
        return Err(fail(format!(
            "CUDA_INJECTION64_PATH is already set ({}): another tool (a profiler, a sanitizer) injects into CUDA; \
             run repro capture outside it",
            existing.to_string_lossy()
        )));
    }
    if let Err(e) = regex_check(&request.kernel) {
        return Err(fail(e));
    }
    if request.window.is_some() {
        sequence::refuse_unsupported(&request).map_err(fail)?;
    } else if let Some(view) = request.spec.views.iter().find(|v| v.launch.is_some()) {
        return Err(fail(format!(
            "--tensor {}: `launchK.` names a launch of a window (--launches, --through); one launch's view is NAME=...",
            view.text
        )));
    }
    let out = &request.output;
    if out.exists()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CaptureError::WouldOverwrite {
            path: out.clone(),
            command: "capture",
            fix: "pass an -o folder that does not exist yet, or is empty",
        });
    }
    let library = inject::library()?;
    let raw = out.join("raw");
    std::fs::create_dir_all(&raw).map_err(CaptureError::io("create", &raw))?;
    let raw = raw
        .canonicalize()
        .map_err(CaptureError::io("resolve", &raw))?;
    let (program, args) = request
        .program
        .split_first()
        .ok_or_else(|| fail("no program to run: give it after `--`"))?;
    eprintln!(
        "capture: running {} (recording launch {} of kernels matching `{}`{})",
        request.spec.command,
        request.launch,
        request.kernel,
        request
            .window
            .as_ref()
            .map(sequence::describe)
            .unwrap_or_default()
    );
    let mut command = Command::new(program);
    if let Some(window) = &request.window {
        if let Some(n) = window.launches {
            command.env("REPRO_CAPTURE_LAUNCHES", n.to_string());
        }
        if let Some(through) = &window.through {
            command.env("REPRO_CAPTURE_THROUGH", through);
        }
        command.env("REPRO_CAPTURE_WINDOW_MAX", MAX_WINDOW_LAUNCHES.to_string());
    }
    let status = command
        .args(args)
        .env("CUDA_INJECTION64_PATH", &library)
        .env("REPRO_CAPTURE_OUT", &raw)
        .env("REPRO_CAPTURE_KERNEL", &request.kernel)
        .env("REPRO_CAPTURE_LAUNCH", request.launch.to_string())
        .env("REPRO_CAPTURE_MAX_BYTES", request.max_bytes.to_string())
        .env(
            "REPRO_CAPTURE_DEVICE",
            request.device.map_or("-1".to_string(), |d| d.to_string()),
        )
        .env("REPRO_CAPTURE_STOP", if request.stop { "1" } else { "0" })
        .status()
        .map_err(|source| EngineError::Launch {
            path: PathBuf::from(program),
            source,
        })?;
    let exited = match status.code() {
        Some(code) => format!("exit status {code}"),
        None => "a signal".to_string(),
    };
    let session: Option<record::Session> = record::read(&raw.join("session.json")).map_err(fail)?;
    if request.window.is_some() {
        let window: Option<record::Window> =
            record::read(&raw.join("window.json")).map_err(fail)?;
        let Some(window) = window else {
            return Err(fail(no_capture(&request, session.as_ref(), &exited)));
        };
        // The record is the captured program's to write: a window the library would not have
        // written (none, or more launches than it records) is refused before anything is read
        // for it.
        if window.launches.is_empty() || window.launches.len() as u64 > MAX_WINDOW_LAUNCHES {
            return Err(fail(format!(
                "{}: a window of {} launches; repro's injection library records 1 to {MAX_WINDOW_LAUNCHES}",
                raw.join("window.json").display(),
                window.launches.len()
            )));
        }
        if !status.success() && !request.stop {
            eprintln!(
                "capture: the program ended with {exited} after the capture; the capture is kept"
            );
        }
        // What the library noted on the way (a launch in another context left out of the
        // window, a callback it could not enable): the window may then not be the operator.
        for note in session.iter().flat_map(|s| &s.notes) {
            eprintln!("capture: note: {note}");
        }
        return sequence::finish(&raw, out, &window, &request);
    }
    let capture: Option<record::Capture> = record::read(&raw.join("capture.json")).map_err(fail)?;
    let Some(capture) = capture else {
        return Err(fail(no_capture(&request, session.as_ref(), &exited)));
    };
    if !status.success() && !request.stop {
        eprintln!(
            "capture: the program ended with {exited} after the capture; the capture is kept"
        );
    }
    if let Some(error) = &capture.launch_error {
        eprintln!("capture: the recorded launch failed in production: {error}");
    }
    if let Some(source) = &request.source {
        request.spec.source = find_declaration(source, &capture.kernel.demangled)?;
    }
    request.spec.triton = triton_kernel(&raw, &capture);
    if let Some(t) = &request.spec.triton {
        eprintln!(
            "capture: a Triton kernel ({}{}), from {}",
            t.location
                .as_deref()
                .unwrap_or("its source location unknown"),
            t.options
                .triton_version
                .as_deref()
                .map(|v| format!(", Triton {v}"))
                .unwrap_or_default(),
            t.entry.display()
        );
        eprintln!("capture: its config: {}", t.config_text());
        for note in &t.notes {
            eprintln!("capture: note: {note}");
        }
    }
    let written = write::write(&raw, out, &capture, &request.spec).map_err(fail)?;
    scaffold(&raw, out, &written)
}

/// Says what was written and scaffolds the folder, so that `repro run DIR` runs it.
fn scaffold(raw: &Path, out: &Path, written: &write::Written) -> Result<u8, CaptureError> {
    // The raw buffer copies are now the .npy files.
    let _ = std::fs::remove_dir_all(raw.join("buffers"));
    eprintln!(
        "capture: wrote {} (kind: {}{}) and {} tensors",
        written.spec.display(),
        written.kind,
        written
            .replay_reason
            .as_deref()
            .map(|r| format!(", because {r}"))
            .unwrap_or_default(),
        written.tensors.len()
    );
    let plan = crate::plan::prepare(&written.spec, Some(out), &crate::machine::Machine)?;
    eprintln!(
        "capture: `repro run {}` runs it; `repro probe {}` once its reference is the op's",
        plan.dir.display(),
        plan.dir.display()
    );
    Ok(0)
}

/// What Triton's cache holds for the captured cubin, when Triton compiled it. The program ran
/// with this process's environment, so its `TRITON_CACHE_DIR` is ours.
pub(crate) fn triton_kernel(raw: &Path, capture: &record::Capture) -> Option<triton::TritonKernel> {
    let module = capture.module.as_ref()?;
    let path = record::raw_file(raw, &module.file).ok()?;
    let cubin = record::read_file(&path, MAX_CUBIN_BYTES).ok()?;
    let dirs = triton::cache_dirs(|name| std::env::var(name).ok());
    triton::find(&cubin, &capture.kernel.mangled, &dirs)
}

/// The regex is the library's (ECMAScript), so only what would surely fail is refused here.
pub(crate) fn regex_check(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err(
            "--kernel is empty: give a pattern of the kernel's demangled name, e.g. 'tma_gemm<'"
                .into(),
        );
    }
    if pattern.contains('\0') || pattern.len() > 4096 {
        return Err("--kernel: not a usable pattern".into());
    }
    Ok(())
}

/// What to say when no launch was recorded.
fn no_capture(request: &CaptureRequest, session: Option<&record::Session>, exited: &str) -> String {
    let Some(s) = session else {
        return format!(
            "the program ended ({exited}) without initializing CUDA: the capture library was never loaded, so no kernel launched \
             (is this the program that launches `{}`?)",
            request.kernel
        );
    };
    match s.status.as_str() {
        "cupti_busy" => {
            return "CUPTI is taken by another subscriber: a tool around the program (nsys, ncu, compute-sanitizer) \
                    or the program's own CUPTI use. Capture the program without the tool, or with its CUPTI use turned off"
                .to_string()
        }
        "cupti_error" | "bad_environment" => return format!("the capture library could not start: {}", s.message),
        // A window that grew past its bound, or could not be recorded: the library says which.
        "window_too_long" | "window_broken" => return format!("{}; nothing was written", s.message),
        _ => {}
    }
    if let (Some(r), Some(_)) = (&s.refused, &request.window) {
        return format!(
            "{}; raise --max-bytes if the disk holds twice that ({} allocations: {})",
            s.message,
            r.buffers.len(),
            r.buffers
                .iter()
                .take(8)
                .map(|b| format!("{} bytes at {}", b.size, b.base))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if request.window.is_some()
        && !s.message.is_empty()
        && s.status == "attached"
        && s.matched >= request.launch
    {
        // The window opened and the program ended inside it.
        return s.message.clone();
    }
    if let Some(r) = &s.refused {
        let sizes: Vec<String> = r
            .buffers
            .iter()
            .map(|b| format!("{} bytes at {}", b.size, b.base))
            .collect();
        return format!(
            "launch {} reaches {} bytes of device memory ({}), more than --max-bytes {}; raise --max-bytes if the disk holds twice that",
            request.launch,
            r.total,
            sizes.join(", "),
            r.max_bytes
        );
    }
    let seen: Vec<String> = s
        .kernels
        .iter()
        .take(20)
        .map(|k| format!("  {} ({} launches)", k.name, k.launches))
        .collect();
    format!(
        "the program ended ({exited}) after {} launches, {} of them of kernels matching `{}`: launch {} never came.{}{}{}",
        s.launches_seen,
        s.matched,
        request.kernel,
        request.launch,
        if seen.is_empty() { String::new() } else { format!("\nkernels it launched:\n{}", seen.join("\n")) },
        if s.message.is_empty() { String::new() } else { format!("\n{}", s.message) },
        // Launches on another device than --device's, a managed buffer...: why nothing matched.
        s.notes.iter().take(5).map(|n| format!("\nnote: {n}")).collect::<String>()
    )
}

/// The kernel's declaration under `--source`, by the demangled name's function name.
fn find_declaration(
    source: &Path,
    demangled: &str,
) -> Result<Option<(crate::import::cuda::KernelDecl, PathBuf)>, CaptureError> {
    let Some(parsed) = layout::parse_demangled(demangled) else {
        eprintln!(
            "capture: `{demangled}` is no function name to look up under --source; replaying it"
        );
        return Ok(None);
    };
    let found = crate::import::cuda::find(source, &parsed.name)?;
    let arity: Vec<_> = found
        .into_iter()
        .filter(|d| d.params.len() == parsed.params.len())
        .collect();
    match arity.as_slice() {
        [one] => Ok(Some((one.clone(), source.to_path_buf()))),
        [] => {
            eprintln!(
                "capture: no declaration of `{}` with {} parameters under {}; replaying it",
                parsed.name,
                parsed.params.len(),
                source.display()
            );
            Ok(None)
        }
        many => {
            eprintln!("capture: {} declarations of `{}` under {}; replaying it (narrow --source to one file)", many.len(), parsed.name, source.display());
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(window: Option<WindowRequest>) -> CaptureRequest {
        CaptureRequest {
            kernel: "partials".into(),
            launch: 2,
            output: PathBuf::from("cap"),
            max_bytes: 1000,
            device: None,
            stop: false,
            source: None,
            window,
            spec: write::SpecRequest::default(),
            program: vec!["./app".into()],
        }
    }

    fn session(json: &str) -> record::Session {
        serde_json::from_str(json).unwrap()
    }

    /// Neither flag, or `--launches 1`, is the one-launch capture it always was.
    #[test]
    fn one_launch_is_no_window() {
        assert_eq!(WindowRequest::from_flags(None, None), Ok(None));
        assert_eq!(WindowRequest::from_flags(Some(1), None), Ok(None));
        assert_eq!(
            WindowRequest::from_flags(Some(3), None),
            Ok(Some(WindowRequest {
                launches: Some(3),
                through: None
            }))
        );
        assert_eq!(
            WindowRequest::from_flags(Some(1), Some("reduce".into())),
            Ok(Some(WindowRequest {
                launches: Some(1),
                through: Some("reduce".into())
            }))
        );
        assert!(WindowRequest::from_flags(Some(65), None)
            .unwrap_err()
            .contains("a window holds 1 to 64 launches"));
        assert!(WindowRequest::from_flags(None, Some(String::new()))
            .unwrap_err()
            .contains("--through is empty"));
    }

    /// The library's refusals of a window (too long, over --max-bytes, the program ended inside
    /// it) are said in its words, with what to change.
    #[test]
    fn a_refused_window_says_why() {
        let window = Some(WindowRequest {
            launches: None,
            through: Some("reduce".into()),
        });
        let too_long = session(
            r#"{"status": "window_too_long", "message": "the window held 64 launches (the most a window may hold) and none of them after the first matched 'reduce'", "matched": 2}"#,
        );
        let said = no_capture(&request(window.clone()), Some(&too_long), "exit status 0");
        assert!(
            said.contains("none of them after the first matched 'reduce'; nothing was written"),
            "{said}"
        );
        let refused = session(
            r#"{"status": "refused", "message": "launch 2 of the window (reduce) brings the window's allocations to 2, of 2048 bytes in all, over REPRO_CAPTURE_MAX_BYTES=1000",
                "matched": 2, "refused": {"total": 2048, "max_bytes": 1000, "buffers": [{"base": "0x7f00", "size": 1024}, {"base": "0x7f80", "size": 1024}]}}"#,
        );
        let said = no_capture(&request(window.clone()), Some(&refused), "exit status 0");
        for says in [
            "launch 2 of the window (reduce)",
            "raise --max-bytes",
            "1024 bytes at 0x7f80",
        ] {
            assert!(said.contains(says), "{says}: {said}");
        }
        let ended = session(
            r#"{"status": "attached", "message": "the program exited inside the window, after 1 of its launches (none of them matching 'reduce'); nothing was written", "matched": 2}"#,
        );
        let said = no_capture(&request(window), Some(&ended), "exit status 0");
        assert!(
            said.starts_with("the program exited inside the window"),
            "{said}"
        );
        // One launch's refusal is as it was.
        let said = no_capture(&request(None), Some(&refused), "exit status 0");
        assert!(
            said.starts_with("launch 2 reaches 2048 bytes of device memory"),
            "{said}"
        );
    }
}
