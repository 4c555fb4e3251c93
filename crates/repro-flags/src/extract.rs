//! From one invocation to an [`Extraction`]: response files and `NVCC_*_FLAGS` spliced in, each
//! option read by the table in `nvcc`, and the rules for what an *executable*, single-file
//! harness build can keep.
//!
//! The rules: options that only shape the production build's outputs (`-c`, `-o`, dependency
//! files, `-shared`, `-fPIC`, libraries, `--threads`) are dropped; the target, the dialect and
//! include directories move into `arch`, `std` and `include_dirs`; everything else is kept,
//! unknown options too (losing a flag silently is worse than a build error). What can change
//! numerics or code generation and still has to go (`-rdc=true`, `-dc`, an MPI `-ccbin`,
//! extension-module macros) is dropped *with a warning*.

use std::path::{Component, Path, PathBuf};

use super::nvcc::{self, Kind, Parsed, Target};
use super::{shell, Extraction, Flag, FlagsError, IncludeDir, Invocation, Verdict};

const SOURCE_EXTS: &[&str] = &[
    "cu", "cpp", "cc", "cxx", "c", "c++", "C", "CPP", "ii", "i", "cui",
];
const OBJECT_EXTS: &[&str] = &["o", "obj", "a", "so", "lib", "dylib", "dll", "ptx", "cubin"];

/// Macros of a Python extension module build (torch's `BuildExtension`, pybind11). Rule: they
/// name and ABI-tag the module, and `TORCH_API_INCLUDE_EXTENSION_H` makes torch's headers pull in
/// `<torch/extension.h>`, hence `Python.h`, which a standalone harness has no path to. CUDA code
/// does not test them, so they are dropped, with a warning because a `-D` *could* matter. Every
/// other macro is kept (`-D__CUDA_NO_HALF_OPERATORS__` and friends change which operators exist).
const EXTENSION_MACROS: &[&str] = &[
    "TORCH_EXTENSION_NAME",
    "TORCH_API_INCLUDE_EXTENSION_H",
    "PYBIND11_COMPILER_TYPE",
    "PYBIND11_STDLIB",
    "PYBIND11_BUILD_ABI",
];
const EXTENSION_MACRO: &str = "names or ABI-tags a Python extension module (and \
     TORCH_API_INCLUDE_EXTENSION_H makes torch's headers include Python.h); put it in build.flags \
     if the kernel's headers test it";
const MPI_WRAPPERS: &[&str] = &[
    "mpicxx", "mpicc", "mpiCC", "mpic++", "mpiicpc", "mpiicpx", "mpiicx", "mpigxx", "oshcc",
    "oshCC", "oshc++", "oshcxx",
];
const MPI: &str = "an MPI compiler wrapper: it adds MPI's include paths and libraries for the \
     production binary; the harness uses nvcc's default host compiler (put `-ccbin <the compiler \
     it wraps>` into build.flags if that matters)";
const PIC: &[&str] = &["-fPIC", "-fpic", "-fPIE", "-fpie"];
const PIC_REASON: &str =
    "position-independent code is for the production shared object; the harness is an executable";
const HOST_FAST_MATH: &[&str] = &[
    "-ffast-math",
    "-Ofast",
    "-ffinite-math-only",
    "-funsafe-math-optimizations",
];
const HOST_LINK_ONLY: &[&str] = &[
    "-rdynamic",
    "-static",
    "-pie",
    "-no-pie",
    "-static-libstdc++",
    "-static-libgcc",
];
const RESPONSE_DEPTH: usize = 8;
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// The extension of a path's last component, as `Path::extension` reads it (none for `.hidden`
/// or `..`), without building a `Path`: it runs on every word of every line of a build log.
fn extension(path: &str) -> Option<&str> {
    let name = path.trim_end_matches('/').rsplit('/').next()?;
    match name.rsplit_once('.') {
        Some(("", _)) | None => None,
        Some(_) if name == ".." => None,
        Some((_, ext)) => Some(ext),
    }
}

/// A file nvcc compiles (by extension).
pub(crate) fn is_source(path: &str) -> bool {
    extension(path).is_some_and(|e| SOURCE_EXTS.contains(&e))
}

pub(crate) fn is_object(path: &str) -> bool {
    extension(path).is_some_and(|e| OBJECT_EXTS.contains(&e)) || path.contains(".so.")
}

/// The response files a word names by itself: `@file`, `--options-file=a,b`, `-optf=a`.
fn response_glued(word: &str) -> Option<&str> {
    if let Some(file) = word.strip_prefix('@').filter(|f| !f.is_empty()) {
        return Some(file);
    }
    let (name, files) = word.split_once('=')?;
    let dashed = name.starts_with('-');
    (dashed && matches!(name.trim_start_matches('-'), "options-file" | "optf")).then_some(files)
}

/// `--options-file FILE` / `-optf FILE`.
fn response_separate(word: &str) -> bool {
    matches!(
        word,
        "--options-file" | "-options-file" | "-optf" | "--optf"
    )
}

/// Words of one origin: the line itself (None), a response file, or an environment variable.
pub(crate) struct Segment {
    pub from: Option<String>,
    pub words: Vec<String>,
}

/// The invocation's words with response files expanded in place and nvcc's environment flags
/// around them, as runs of one origin each.
pub(crate) fn expand(inv: &Invocation, base: Option<&Path>) -> Result<Vec<Segment>, FlagsError> {
    let env = |name: &str, words: &[String]| Segment {
        from: Some(name.into()),
        words: words.into(),
    };
    let mut out = vec![env("NVCC_PREPEND_FLAGS", &inv.prepend)];
    expand_into(inv, base, &inv.args, None, 0, &mut out)?;
    out.push(env("NVCC_APPEND_FLAGS", &inv.append));
    out.retain(|s| !s.words.is_empty());
    Ok(out)
}

fn expand_into(
    inv: &Invocation,
    base: Option<&Path>,
    words: &[String],
    from: Option<String>,
    depth: usize,
    out: &mut Vec<Segment>,
) -> Result<(), FlagsError> {
    if depth > RESPONSE_DEPTH {
        let origin = inv.origin.clone();
        return Err(FlagsError::ResponseDepth {
            origin,
            depth: RESPONSE_DEPTH,
        });
    }
    let mut run = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        i += 1;
        let files = match response_glued(word) {
            Some(files) => files,
            None if response_separate(word) && i < words.len() => {
                i += 1;
                &words[i - 1]
            }
            None => {
                run.push(word.clone());
                continue;
            }
        };
        out.push(Segment {
            from: from.clone(),
            words: std::mem::take(&mut run),
        });
        // nvcc takes a comma-separated list of option files.
        for file in files.split(',').filter(|f| !f.is_empty()) {
            let text = read_response(inv, base, file)?;
            let from = Some(file.to_string());
            expand_into(inv, base, &shell::words(&text), from, depth + 1, out)?;
        }
    }
    out.push(Segment { from, words: run });
    Ok(())
}

/// A response file, relative to the invocation's directory, then to the input's folder, then to
/// the current directory.
fn read_response(inv: &Invocation, base: Option<&Path>, file: &str) -> Result<String, FlagsError> {
    let mut tried: Vec<PathBuf> = Vec::new();
    for dir in [inv.directory.as_deref(), base, Some(Path::new(""))]
        .into_iter()
        .flatten()
    {
        let candidate = dir.join(file);
        if tried.contains(&candidate) {
            continue;
        }
        // Only regular files: a named pipe or /dev/zero would never end.
        let readable = |m: std::fs::Metadata| m.is_file() && m.len() <= MAX_RESPONSE_BYTES;
        if candidate.metadata().is_ok_and(readable) {
            if let Ok(bytes) = std::fs::read(&candidate) {
                return Ok(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        tried.push(candidate);
    }
    let (origin, file) = (inv.origin.clone(), file.to_string());
    Err(FlagsError::ResponseFile {
        origin,
        file,
        tried,
    })
}

/// Reads the invocation's options into an extraction (without `others`).
pub(crate) fn analyze(inv: &Invocation, base: Option<&Path>) -> Result<Extraction, FlagsError> {
    let mut b = Builder {
        e: Extraction {
            origin: inv.origin.clone(),
            source_file: inv.file.clone(),
            directory: inv.directory.clone(),
            warnings: inv.warnings.clone(),
            ..Extraction::default()
        },
        targets: Vec::new(),
        arch_option: None,
        code_option: None,
        warnings: Vec::new(),
        device_libs: Vec::new(),
        unknown_open: false,
    };
    for segment in expand(inv, base)? {
        for parsed in nvcc::parse(&segment.words) {
            b.option(parsed, &segment.from);
        }
    }
    Ok(b.finish())
}

/// What the harness does with one option: verdict, its arguments, the reason.
type Decision = (Verdict, Vec<String>, Option<String>);

fn keep(arg: String) -> Decision {
    (Verdict::Kept, vec![arg], None)
}

fn drop(reason: impl Into<String>) -> Decision {
    (Verdict::Dropped, Vec::new(), Some(reason.into()))
}

fn moved(reason: impl Into<String>) -> Decision {
    (Verdict::Moved, Vec::new(), Some(reason.into()))
}

struct Builder {
    e: Extraction,
    /// Every target named by `-gencode`, and those of `-arch`/`-code` (resolved at the end).
    targets: Vec<String>,
    arch_option: Option<String>,
    code_option: Option<Vec<String>>,
    /// Warnings about single options, in order (dropped ones are summarized in `finish`).
    warnings: Vec<String>,
    /// Device libraries the production build links (`-lnvshmem_device`, `-lcudadevrt`).
    device_libs: Vec<String>,
    /// The last flag is an unknown option that a following plain word may be the value of.
    unknown_open: bool,
}

impl Builder {
    fn option(&mut self, p: Parsed, from: &Option<String>) {
        let unknown_open = std::mem::take(&mut self.unknown_open);
        let (decision, codegen) = match p.spec {
            Some(spec) => (self.known(spec, p.value.clone(), &p.words[0]), spec.codegen),
            None => {
                let word = p.words[0].as_str();
                match self.e.flags.last_mut() {
                    // Most likely the value of the unknown option before it: kept together.
                    Some(last) if unknown_open && !word.starts_with('-') && !is_object(word) => {
                        last.original.push(word.to_string());
                        return last.normalized.push(word.to_string());
                    }
                    _ => {
                        let decision = self.unknown(word);
                        // Only options repro keeps without knowing them may matter.
                        let codegen = decision.0 == Verdict::Kept;
                        (decision, codegen)
                    }
                }
            }
        };
        let (verdict, normalized, reason) = decision;
        // A host-compiler list is only dropped when it held nothing but -fPIC/-fPIE.
        let only_pic =
            verdict == Verdict::Dropped && p.spec.is_some_and(|s| s.kind == Kind::Forward(None));
        self.e.flags.push(Flag {
            original: p.words,
            normalized,
            verdict,
            reason,
            affects_codegen: codegen && !only_pic,
            from: from.clone(),
        });
    }

    /// An option of the table.
    fn known(&mut self, spec: &nvcc::Spec, value: Option<String>, word: &str) -> Decision {
        let canonical = spec.canonical;
        let Some(value) = value else {
            return match spec.kind {
                Kind::Drop(reason) => drop(reason),
                _ if spec.arity == nvcc::Arity::Bare => keep(canonical.into()),
                _ => {
                    let reason = "expects a value and none follows (a cut-off line?)";
                    self.warnings.push(format!("dropped `{word}`: {reason}"));
                    drop(reason)
                }
            };
        };
        match spec.kind {
            Kind::Keep => keep(match spec.arity {
                nvcc::Arity::Bool => format!("{canonical}={}", value.to_ascii_lowercase()),
                nvcc::Arity::Glued => format!("{canonical}{value}"),
                _ => format!("{canonical}={value}"),
            }),
            Kind::Drop(reason) => {
                if canonical == "-l" && (value.ends_with("_device") || value == "cudadevrt") {
                    self.device_libs.push(format!("-l{value}"));
                }
                drop(reason)
            }
            Kind::Arch(target) => {
                let named = match target {
                    Target::Arch => vec![value.clone()],
                    Target::Code => nvcc::target_list(&value),
                    Target::Gencode => match nvcc::gencode_targets(&value) {
                        (arch, code) if code.is_empty() => arch.into_iter().collect(),
                        (_, code) => code,
                    },
                };
                match target {
                    Target::Arch => self.arch_option = Some(value),
                    Target::Code => self.code_option = Some(named.clone()),
                    Target::Gencode => self.targets.extend(named.iter().cloned()),
                }
                moved(format!(
                    "the GPU target ({}) is carried by build.arch",
                    named.join(", ")
                ))
            }
            Kind::Std => {
                self.e.std = Some(value);
                moved("the dialect is carried by build.std")
            }
            Kind::Include(system) => {
                self.include(&value, system);
                moved("carried by source.include_dirs")
            }
            Kind::Define if EXTENSION_MACROS.contains(&value.split('=').next().unwrap_or("")) => {
                drop(EXTENSION_MACRO)
            }
            Kind::Define => keep(format!("-D{value}")),
            Kind::Forward(Some(reason)) => drop(reason),
            Kind::Forward(None) => self.forward(canonical, &value),
            Kind::HostCompiler => {
                if MPI_WRAPPERS.contains(&value.rsplit('/').next().unwrap_or(&value)) {
                    return drop(MPI);
                }
                if Path::new(&value).is_absolute() && !Path::new(&value).exists() {
                    self.warnings.push(format!(
                        "host compiler `-ccbin {value}` does not exist on this machine: the \
                         harness build will fail; install it or override -ccbin in build.flags"
                    ));
                }
                keep(format!("{canonical}={value}"))
            }
            Kind::Rdc if value.eq_ignore_ascii_case("false") => keep("-rdc=false".into()),
            Kind::Rdc => drop(nvcc::RDC),
            Kind::OptionsFile => drop("names no response file"),
        }
    }

    /// `-Xcompiler a,b` and the like: -fPIC/-fPIE leave the host compiler's list.
    fn forward(&mut self, canonical: &str, value: &str) -> Decision {
        let host = canonical == "-Xcompiler";
        let (pic, kept): (Vec<String>, Vec<String>) = nvcc::forward_items(value)
            .into_iter()
            .partition(|i| host && PIC.contains(&i.as_str()));
        for item in kept
            .iter()
            .filter(|i| host && HOST_FAST_MATH.contains(&i.as_str()))
        {
            self.host_fast_math(item);
        }
        let reason = (!pic.is_empty()).then(|| format!("removed {}: {PIC_REASON}", pic.join(", ")));
        match kept.is_empty() {
            true => (Verdict::Dropped, Vec::new(), reason),
            false => (
                Verdict::Kept,
                vec![format!("{canonical}={}", nvcc::join_items(&kept))],
                reason,
            ),
        }
    }

    /// Positional words and options the table does not know.
    fn unknown(&mut self, word: &str) -> Decision {
        if !word.starts_with('-') || word == "-" {
            if is_source(word) {
                self.e.source_file.get_or_insert_with(|| word.to_string());
                return drop("the source file; the harness compiles its own harness.cu");
            }
            if is_object(word) {
                return drop("an object or library of the production link");
            }
            let reason = "neither an option nor a source or object file";
            self.warnings.push(format!("dropped `{word}`: {reason}"));
            return drop(reason);
        }
        if word.starts_with("-Wl,") || HOST_LINK_ONLY.contains(&word) {
            return drop("a host linker option for the production binary");
        }
        if PIC.contains(&word) {
            return drop(PIC_REASON);
        }
        if HOST_FAST_MATH.contains(&word) {
            self.host_fast_math(word);
        }
        self.e.notes.push(format!(
            "kept `{word}` as written: not an nvcc option repro knows; check that the harness \
             build wants it"
        ));
        self.unknown_open = true;
        let reason = "not an nvcc option repro knows; kept as written";
        (Verdict::Kept, vec![word.to_string()], Some(reason.into()))
    }

    fn host_fast_math(&mut self, item: &str) {
        self.warnings.push(format!(
            "host `{item}` applies to the harness's host code too: its fp64 reference and its \
             NaN/Inf checks (-ffinite-math-only lets the compiler assume there are none)"
        ));
    }

    fn include(&mut self, value: &str, system: bool) {
        let raw = Path::new(value);
        let (path, known) = match &self.e.directory {
            _ if raw.is_absolute() => (raw.to_path_buf(), true),
            Some(dir) => (dir.join(raw), true),
            None => (raw.to_path_buf(), false),
        };
        let path: PathBuf = path
            .components()
            .filter(|c| *c != Component::CurDir)
            .collect();
        if !known {
            self.warnings.push(format!(
                "include dir `{value}` is relative and the input does not say where the build \
                 ran; list it in source.include_dirs relative to the spec"
            ));
        }
        if !self.e.include_dirs.iter().any(|d| d.path == path) {
            let exists = known && path.is_dir();
            self.e.include_dirs.push(IncludeDir {
                path,
                system,
                exists,
            });
        }
    }

    fn finish(mut self) -> Extraction {
        self.resolve_arch();
        let e = &mut self.e;
        match e.std.as_deref() {
            None => e.notes.push(
                "the line sets no -std: nvcc used its host compiler's default (C++17 for GCC 11 \
                 and later); build.std decides for the harness"
                    .into(),
            ),
            Some(s) if !s.starts_with("c++") => e.notes.push(format!("`{s}` is not an nvcc -std")),
            Some(_) => {}
        }
        let kept = e.kept_flags();
        if kept.iter().any(|f| f == "--use_fast_math") {
            let implied = "--ftz=true --prec-div=false --prec-sqrt=false --fmad=true";
            e.notes.push(format!("--use_fast_math implies {implied}"));
        }
        if let Some(werror) = kept.iter().find(|f| f.starts_with("-Werror")) {
            e.notes.push(format!(
                "kept `{werror}`: the harness's own code is compiled with it too"
            ));
        }
        // Dropped options that can change code generation: one warning per reason.
        let mut dropped: Vec<(String, Vec<String>)> = Vec::new();
        for f in e
            .flags
            .iter()
            .filter(|f| f.verdict == Verdict::Dropped && f.affects_codegen)
        {
            let (reason, shown) = (f.reason.clone().unwrap_or_default(), f.original.join(" "));
            match dropped.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, list)) => list.push(shown),
                None => dropped.push((reason, vec![shown])),
            }
        }
        for (reason, list) in dropped {
            let list = list.join("`, `");
            e.warnings.push(format!(
                "dropped `{list}`, which can change code generation: {reason}"
            ));
        }
        if !self.device_libs.is_empty() {
            e.warnings.push(format!(
                "the production build links device code from {}: kernels that call into it need \
                 -rdc=true and the library, which the harness does not link; stub or inline \
                 those calls",
                self.device_libs.join(", ")
            ));
        }
        e.warnings.append(&mut self.warnings);
        let missing: Vec<String> = e
            .include_dirs
            .iter()
            .filter(|d| !d.exists && d.path.is_absolute())
            .map(|d| d.path.display().to_string())
            .collect();
        if !missing.is_empty() {
            e.warnings.push(format!(
                "include dirs missing on this machine: {}; the harness build needs the kernel's \
                 headers (copy them, or point source.include_dirs at them)",
                missing.join(", ")
            ));
        }
        self.e
    }

    /// The SASS target: from `-code` (else `-arch`) and every `-gencode`; the highest when
    /// several; PTX-only lines give the SASS target of their highest virtual architecture.
    fn resolve_arch(&mut self) {
        let e = &mut self.e;
        match (&self.code_option, &self.arch_option) {
            (Some(code), _) => self.targets.extend(code.iter().cloned()),
            (None, Some(a)) if matches!(a.as_str(), "native" | "all" | "all-major") => {
                e.notes
                    .push(format!("`-arch={a}` names no fixed target; set build.arch"));
            }
            (None, Some(arch)) => self.targets.push(arch.clone()),
            (None, None) => {}
        }
        // (real, number, a > f > plain, "90a")
        let parse = |t: &String| {
            let (kind, rest) = t.split_once('_')?;
            let digits = rest.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let rank = ["", "f", "a"]
                .iter()
                .position(|s| *s == &rest[digits.len()..])?;
            Some((
                kind == "sm",
                digits.parse::<u32>().ok()?,
                rank,
                rest.to_string(),
            ))
        };
        let mut real: Vec<_> = self
            .targets
            .iter()
            .filter_map(parse)
            .filter(|t| t.0)
            .collect();
        real.sort_by_key(|t| (t.1, t.2));
        real.dedup();
        let virtuals = self.targets.iter().filter_map(parse).filter(|t| !t.0);
        if let Some((.., best)) = real.last() {
            e.arch = Some(format!("sm_{best}"));
            if real.len() > 1 {
                let all: Vec<String> = real.iter().map(|t| format!("sm_{}", t.3)).collect();
                e.notes.push(format!(
                    "the line builds SASS for {}; the harness takes the highest, sm_{best} (set \
                     build.arch to the GPU you run on)",
                    all.join(", ")
                ));
            }
        } else if let Some((.., best)) = virtuals.max_by_key(|t| (t.1, t.2)) {
            e.arch = Some(format!("sm_{best}"));
            e.notes.push(format!(
                "the line embeds only PTX (compute_{best}), JIT-compiled by the driver; the \
                 harness builds SASS for sm_{best} ahead of time"
            ));
        } else if self.arch_option.is_none() {
            e.notes
                .push("the line names no GPU target (nvcc's default); set build.arch".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::extension;
    use std::path::Path;

    #[test]
    fn extension_reads_like_path_extension() {
        for path in [
            "k.cu",
            "/src/k.cu",
            "a.b.cu",
            "dir.d/k",
            ".hidden",
            "..",
            ".",
            "foo.",
            "/",
            "",
            "k.cu/",
            "obj/k.cu.o",
            "lib.so.1",
            "C:\\src\\k.cu",
        ] {
            let want = Path::new(path).extension().and_then(|e| e.to_str());
            assert_eq!(extension(path), want, "{path:?}");
        }
    }
}
