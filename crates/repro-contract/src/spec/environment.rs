//! Everything a spec learns from outside its own text, gathered in one place before validation:
//! which of its include directories exist, what its input files are, the production compile
//! line `build.flags_from` names, and where CUTLASS is. Validation (validate.rs) reads only the
//! spec and this value, so it touches no file system and answers the same for the same input;
//! a test can hand it an environment made up by hand.
//!
//! spec is the foundation: it reads no build log and looks for no toolchain itself. What only the
//! layers above know (the production compile line a build log holds, flags/; where this machine's
//! CUTLASS is, build/toolchain.rs) is asked of the caller through [`Lookups`], which whoever
//! loads a spec passes in (crates/repro-flags/src/machine.rs answers for this machine). This module may import
//! nothing of repro above spec.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::model::{InitPattern, KernelKind, Spec};

/// What a spec needs to know that only the layers above it can tell: the caller that loads a spec
/// answers (crates/repro-flags/src/machine.rs for this machine; a test may answer by hand).
pub trait Lookups {
    /// The production compile line in the build log, compile_commands.json or command file at
    /// `path`: the one `match_pattern` selects, with `hints` (the spec's includes and name) to
    /// pick among several. The error is the message to show, naming `path` as given.
    fn compile_line(
        &self,
        path: &Path,
        match_pattern: Option<&str>,
        hints: Vec<String>,
    ) -> Result<CompileLine, String>;
    /// The CUTLASS root this machine provides (the folder holding include/ and
    /// tools/util/include/), if any.
    fn cutlass_root(&self) -> Option<PathBuf>;
}

/// The parts of a production compile line that a spec takes: what `build.flags_from` gives.
#[derive(Debug, Clone, Default)]
pub struct CompileLine {
    /// Where the line is, e.g. `logs/build.log:42 (csrc/gemm.cu)`, with the log's path as given.
    pub origin: String,
    /// The target (`sm_90a`) from `-arch` or `-gencode`.
    pub arch: Option<String>,
    /// The C++ dialect (`c++17`) from `-std`.
    pub std: Option<String>,
    /// The flags the harness build keeps, in order.
    pub flags: Vec<String>,
    /// The line's include directories that exist on this machine, in order.
    pub include_dirs: Vec<PathBuf>,
    /// What the reading noticed, to pass on to the user.
    pub warnings: Vec<String>,
}

/// What the file system and the toolchain said about the paths a spec names.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The folder the spec's relative paths point from.
    pub dir: PathBuf,
    /// Each `source.include_dirs` entry, by position: the canonical folder, or `None` when it is
    /// not a folder.
    pub include_dirs: Vec<Option<PathBuf>>,
    /// Each input file an `init: { file }` names, and the files `reference.source`,
    /// `reference.expected` and an intermediate's `reference.source` or `reference.file` name, by
    /// the path as written.
    pub input_files: HashMap<String, InputFile>,
    /// What `build.flags_from` gave, when the spec has one.
    pub flags_from: Option<Result<FlagsFromLine, String>>,
    /// Where the CUTLASS headers come from.
    pub cutlass: Cutlass,
}

/// An input file as the file system answered for it.
#[derive(Debug, Clone, PartialEq)]
pub enum InputFile {
    /// A regular file, at this absolute path.
    Regular(PathBuf),
    /// Not usable: what it is, and the help line.
    Unusable {
        path: PathBuf,
        problem: String,
        help: &'static str,
    },
}

/// The production compile line read off `build.flags_from`.
#[derive(Debug, Clone)]
pub struct FlagsFromLine {
    pub extraction: CompileLine,
    /// The line's include directories that exist here and are not the CUDA toolkit's own
    /// (nvcc adds those itself, at a path that differs from machine to machine).
    pub include_dirs: Vec<PathBuf>,
    /// The log's absolute path, as the extraction's messages name it.
    pub path: PathBuf,
}

/// Where the CUTLASS headers come from, for a spec that needs them.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Cutlass {
    /// The spec does not include CUTLASS or CuTe.
    #[default]
    NotNeeded,
    /// One of the spec's own include_dirs holds them.
    InSpec,
    /// `$CUTLASS_DIR` or the project's toolchain: the root holding include/ and tools/util/include/.
    Found(PathBuf),
    /// Needed and nowhere to be found.
    Missing,
}

impl Environment {
    /// Looks up everything `spec` names, relative to `dir`, asking `lookups` what only the layers
    /// above spec know. Never fails: what is missing is recorded, and validation reports it at
    /// the field that named it.
    pub fn gather(spec: &Spec, dir: &Path, lookups: &dyn Lookups) -> Environment {
        let include_dirs = spec
            .source
            .include_dirs
            .iter()
            .map(|d| dir.join(d).canonicalize().ok().filter(|p| p.is_dir()))
            .collect();
        let mut input_files = HashMap::new();
        for t in spec.tensors.values() {
            if let Some(InitPattern::File(f)) = &t.init {
                input_files
                    .entry(f.file.clone())
                    .or_insert_with(|| input_file(&dir.join(&f.file)));
            }
        }
        if let InitPattern::File(f) = &spec.inputs.init {
            input_files
                .entry(f.file.clone())
                .or_insert_with(|| input_file(&dir.join(&f.file)));
        }
        // `op: custom`'s header, `op: file`'s expected outputs and the headers or files of
        // intermediates' own references, looked up the same way.
        let reference = &spec.reference;
        let intermediate_files = spec.tensors.values().flat_map(|t| {
            let reference = t.reference.as_ref();
            let source = reference.and_then(|r| r.source.as_ref());
            source
                .into_iter()
                .chain(reference.and_then(|r| r.file.as_ref()))
        });
        for file in reference
            .source
            .iter()
            .chain(reference.expected.iter().flat_map(|e| e.values()))
            .chain(intermediate_files)
        {
            input_files
                .entry(file.clone())
                .or_insert_with(|| input_file(&dir.join(file)));
        }
        // `kind: replay`'s module and parameter bytes, and a capture's production outputs.
        let capture = spec
            .capture
            .iter()
            .flat_map(|c| c.before.values().chain(c.after.values()));
        let replay = spec
            .launch_entries()
            .into_iter()
            .flat_map(|(_, k)| k.cubin.iter().chain(k.params.iter()));
        for file in replay.chain(capture) {
            input_files
                .entry(file.clone())
                .or_insert_with(|| input_file(&dir.join(file)));
        }
        let flags_from = spec.build.flags_from.as_ref().map(|from| {
            let path = dir.join(&from.file);
            let mut hints: Vec<String> = spec.source.includes.clone();
            hints.push(spec.name.clone());
            lookups
                .compile_line(&path, from.match_pattern.as_deref(), hints)
                .map(|extraction| FlagsFromLine {
                    include_dirs: extraction
                        .include_dirs
                        .iter()
                        .filter(|d| !is_cuda_toolkit_include(d))
                        .cloned()
                        .collect(),
                    extraction,
                    path: path.clone(),
                })
                // Named as the spec names it: the message is the same on every machine.
                .map_err(|e| e.replace(&path.display().to_string(), &from.file))
        });
        let cutlass = if !needs_cutlass(spec) {
            Cutlass::NotNeeded
        } else if spec
            .source
            .include_dirs
            .iter()
            .any(|d| dir.join(d).join("cutlass/cutlass.h").is_file())
        {
            Cutlass::InSpec
        } else {
            match lookups.cutlass_root() {
                Some(root) => Cutlass::Found(root),
                None => Cutlass::Missing,
            }
        };
        Environment {
            dir: dir.to_path_buf(),
            include_dirs,
            input_files,
            flags_from,
            cutlass,
        }
    }
}

/// CUTLASS kernels, and kernels that include CUTLASS or CuTe headers, build against CUTLASS.
fn needs_cutlass(spec: &Spec) -> bool {
    spec.first_launch().map(|k| k.kind) == Some(KernelKind::Cutlass3)
        || spec
            .source
            .includes
            .iter()
            .any(|i| i.starts_with("cutlass/") || i.starts_with("cute/"))
}

/// `/usr/local/cuda/include`, `/usr/local/cuda-13.0/targets/x86_64-linux/include` and the like.
fn is_cuda_toolkit_include(dir: &Path) -> bool {
    dir.join("cuda_runtime.h").is_file() && dir.join("crt").is_dir()
}

/// Whether `path` is a regular file (after symlinks), else what it is and what to do. An input
/// file is read whole, so a fifo would block and `/dev/zero` would never end.
fn input_file(path: &Path) -> InputFile {
    let relative = "paths are relative to the spec file";
    let not_regular = "give a .npy or .bin file: a fifo, a device such as /dev/zero or a folder \
                       has no size to check against the tensor's shape, and reading it may never end";
    let unusable = |problem: String, help| InputFile::Unusable {
        path: path.to_path_buf(),
        problem,
        help,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => InputFile::Regular(path.to_path_buf()),
        Ok(m) => unusable(
            format!("is not a regular file ({})", crate::file_kind::describe(&m)),
            not_regular,
        ),
        Err(_) if path.symlink_metadata().is_ok() => unusable(
            "is a symbolic link to a file that does not exist".into(),
            relative,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            unusable("does not exist".into(), relative)
        }
        Err(e) => unusable(format!("cannot be read: {e}"), relative),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"version: 1
name: pure
sizes: { M: 8, N: 8, K: 8 }
source: { include_dirs: [kernels], includes: [k.cuh] }
tensors:
  A: { dtype: f32, shape: [M, K], init: { file: a.npy } }
  B: { dtype: f32, shape: [K, N] }
  D: { dtype: f32, shape: [M, N], output: true }
kernel: { name: k, args: [A, B, D], grid: [1, 1, 1], block: [8, 8, 1] }
reference: { op: gemm, a: A, b: B, out: D }
"#;

    fn validate(environment: &Environment) -> Result<crate::spec::ResolvedSpec, Vec<String>> {
        let (spec, spans) = crate::spec::yaml::parse_spec(SPEC).expect("parses");
        crate::spec::validate::validate(spec, &spans, Path::new("pure.yaml"), environment)
            .map_err(|d| d.iter().map(|d| d.message.clone()).collect())
    }

    /// Validation believes the environment and looks at nothing else: paths that exist nowhere
    /// resolve when the environment says they do, and fail when it says they do not.
    #[test]
    fn validation_reads_only_the_environment() {
        let mut environment = Environment {
            dir: PathBuf::from("/nowhere"),
            include_dirs: vec![Some(PathBuf::from("/nowhere/kernels"))],
            ..Environment::default()
        };
        environment.input_files.insert(
            "a.npy".into(),
            InputFile::Regular(PathBuf::from("/nowhere/a.npy")),
        );
        let resolved = validate(&environment).expect("valid in this environment");
        assert_eq!(resolved.include_dirs, [PathBuf::from("/nowhere/kernels")]);
        assert_eq!(
            resolved.tensors[0].init.source,
            crate::spec::InitSource::File("/nowhere/a.npy".into())
        );

        environment.include_dirs = vec![None];
        environment.input_files.insert(
            "a.npy".into(),
            InputFile::Unusable {
                path: PathBuf::from("/nowhere/a.npy"),
                problem: "does not exist".into(),
                help: "",
            },
        );
        let errors = validate(&environment).expect_err("invalid in this one");
        let said = |text: &str| errors.iter().any(|e| e.contains(text));
        assert!(said("include directory `/nowhere/kernels` does not exist"));
        assert!(said(
            "input file `/nowhere/a.npy` for tensor `A` does not exist"
        ));
    }

    #[test]
    fn gather_records_what_is_missing_without_failing() {
        let (spec, _) = crate::spec::yaml::parse_spec(SPEC).expect("parses");
        struct Nothing;
        impl Lookups for Nothing {
            fn compile_line(
                &self,
                _: &Path,
                _: Option<&str>,
                _: Vec<String>,
            ) -> Result<CompileLine, String> {
                unreachable!("the spec has no flags_from")
            }
            fn cutlass_root(&self) -> Option<PathBuf> {
                unreachable!("the spec needs no CUTLASS")
            }
        }
        let environment = Environment::gather(&spec, Path::new("/nonexistent-repro-dir"), &Nothing);
        assert_eq!(environment.include_dirs, [None]);
        assert!(matches!(
            environment.input_files.get("a.npy"),
            Some(InputFile::Unusable { problem, .. }) if problem == "does not exist"
        ));
        assert_eq!(environment.cutlass, Cutlass::NotNeeded);
        assert!(environment.flags_from.is_none());
    }

    /// The compile line and CUTLASS come from the caller's answers, not from files spec reads:
    /// a log that exists nowhere gives the flags the lookups say it holds, named as the spec
    /// names it, and a CUTLASS kernel finds the root they give.
    #[test]
    fn build_logs_and_cutlass_are_what_the_caller_answers() {
        struct Told;
        impl Lookups for Told {
            fn compile_line(
                &self,
                path: &Path,
                match_pattern: Option<&str>,
                hints: Vec<String>,
            ) -> Result<CompileLine, String> {
                assert_eq!(path, Path::new("/nowhere/logs/build.log"));
                assert_eq!(match_pattern, Some("gemm.cu"));
                assert_eq!(hints, ["cutlass/gemm.h", "pure"]);
                Ok(CompileLine {
                    origin: "/nowhere/logs/build.log:7 (gemm.cu)".into(),
                    arch: Some("sm_80".into()),
                    std: Some("c++20".into()),
                    flags: vec!["-O3".into()],
                    include_dirs: Vec::new(),
                    warnings: vec!["a flag was dropped".into()],
                })
            }
            fn cutlass_root(&self) -> Option<PathBuf> {
                Some(PathBuf::from("/told/cutlass"))
            }
        }
        let text = SPEC
            .replace("includes: [k.cuh]", "includes: [cutlass/gemm.h]")
            .replace(
                "kernel:",
                "build: { flags_from: { file: logs/build.log, match: gemm.cu } }\nkernel:",
            );
        let (spec, spans) = crate::spec::yaml::parse_spec(&text).expect("parses");
        let mut environment = Environment::gather(&spec, Path::new("/nowhere"), &Told);
        assert_eq!(
            environment.cutlass,
            Cutlass::Found(PathBuf::from("/told/cutlass"))
        );
        environment.include_dirs = vec![Some(PathBuf::from("/nowhere/kernels"))];
        environment.input_files.insert(
            "a.npy".into(),
            InputFile::Regular(PathBuf::from("/nowhere/a.npy")),
        );
        let resolved =
            crate::spec::validate::validate(spec, &spans, Path::new("pure.yaml"), &environment)
                .unwrap_or_else(|d| {
                    panic!("{:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>())
                });
        assert_eq!(
            (resolved.build.arch.as_str(), resolved.build.std.as_str()),
            ("sm_80", "c++20")
        );
        assert_eq!(resolved.build.flags, ["-O3"]);
        assert_eq!(
            resolved.build.flag_groups[0].origin,
            "build.flags_from: logs/build.log:7 (gemm.cu)"
        );
        assert_eq!(resolved.cutlass, Some(PathBuf::from("/told/cutlass")));
        assert_eq!(resolved.warnings, ["logs/build.log: a flag was dropped"]);
    }
}
