//! The two nvcc commands of an artifact (part of its plan): the runtime library (the runtime's own fixed flags) and
//! the harness (the production flags). One description, rendered into the artifact's build.sh
//! and CMakeLists.txt and executed by `repro build`, so the three never disagree.

use serde::Serialize;

use std::path::Path;

use crate::spec::{FlagGroup, ResolvedSpec};
use repro_text::paths::relative_to;

/// One group of nvcc arguments and where they came from (shown as a comment in build.sh).
#[derive(Debug, Clone, Serialize)]
pub struct ArgGroup {
    pub kind: ArgKind,
    pub origin: String,
    pub args: Vec<String>,
}

/// What a group of the harness's arguments is, for the build files that treat them differently
/// (CMakeLists.txt passes the production flags in one option of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgKind {
    /// `-std=...`, from build.std.
    Std,
    /// The production flags: build.flags, or those build.flags_from reads.
    Production,
    /// `-I...`, from source.include_dirs.
    IncludeDirs,
}

#[derive(Debug, Clone, Serialize)]
pub struct BuildCommand {
    pub arch: String,
    pub std: String,
    /// Production flags, grouped by where they came from (`build.flags_from`, `build.flags`).
    pub flag_groups: Vec<FlagGroup>,
    /// Include directories relative to the artifact folder.
    pub include_dirs: Vec<String>,
    /// The CUTLASS root relative to the artifact folder, when the kernel needs CUTLASS.
    pub cutlass: Option<String>,
    /// The production line's host compiler (`-ccbin X`): the runtime is built with it too, since
    /// the two must link, and it is part of the runtime's cache key.
    pub host_compiler: Vec<String>,
    /// `op: custom`, or an intermediate with a reference of its own: the user's references are a
    /// translation unit of their own (reference.cu), compiled like the runtime (its flags, never
    /// the production ones) into REFERENCE_OBJECT and linked into the harness.
    pub custom_reference: bool,
}

/// The harness executable's name inside the artifact folder.
pub const HARNESS_BINARY: &str = "harness";
pub const HARNESS_SOURCE: &str = "harness.cu";
/// The runtime's sources and headers inside the artifact folder.
pub const RUNTIME_DIR: &str = "runtime";
pub const RUNTIME_SOURCE: &str = "runtime/src/runtime.cu";
pub const RUNTIME_INCLUDE: &str = "runtime/include";
pub const RUNTIME_LIBRARY: &str = "librepro_runtime.a";
/// `op: custom` and intermediates' references: the glue that calls the user's references, and
/// its object.
pub const REFERENCE_SOURCE: &str = "reference.cu";
pub const REFERENCE_OBJECT: &str = ".repro/build/reference.o";

/// The runtime's own flags, the only ones it is ever compiled with: no fast-math, no production
/// `-D`, `-G`, `-maxrregcount` or `-Xptxas` can change a reference value, a conversion or a
/// comparison, or cripple the reference kernel. (The host reference's FMA contraction is turned
/// off in its source, whatever the flags.)
pub const RUNTIME_FLAGS: &[&str] = &["-std=c++17", "-O3"];

/// `-ccbin X`, `-ccbin=X`, `--compiler-bindir X`, `--compiler-bindir=X` among the flags.
fn host_compiler_flags(flags: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let f = &flags[i];
        if (f == "-ccbin" || f == "--compiler-bindir") && i + 1 < flags.len() {
            out.extend([f.clone(), flags[i + 1].clone()]);
            i += 1;
        } else if f.starts_with("-ccbin=") || f.starts_with("--compiler-bindir=") {
            out.push(f.clone());
        }
        i += 1;
    }
    out
}

impl BuildCommand {
    /// The build of `spec`'s harness in the artifact folder `dir`.
    pub fn new(spec: &ResolvedSpec, dir: &Path) -> Self {
        BuildCommand {
            arch: spec.build.arch.clone(),
            std: spec.build.std.clone(),
            flag_groups: spec.build.flag_groups.clone(),
            include_dirs: spec
                .include_dirs
                .iter()
                .map(|d| relative_to(d, dir))
                .collect(),
            cutlass: spec.cutlass.as_ref().map(|c| relative_to(c, dir)),
            host_compiler: host_compiler_flags(&spec.build.flags),
            custom_reference: matches!(spec.reference, crate::spec::Reference::Custom(_))
                || spec
                    .tensors
                    .iter()
                    .filter_map(|t| t.intermediate_reference.as_ref())
                    .any(|r| r.function().is_some()),
        }
    }

    /// SASS for exactly this target: a bare `-arch=sm_XXa` would add a plain compute_XX pass,
    /// in which kernels that guard wgmma only by `__CUDA_ARCH__ >= 900` fail in ptxas.
    pub fn gencode(&self) -> String {
        gencode(&self.arch)
    }

    /// The harness's arguments after the arch, grouped by origin: the standard, the production
    /// flags, include dirs, CUTLASS. build.sh writes the arch and the runtime's include dir and
    /// library itself, since `ARCH` and `CUTLASS_DIR` may override them there.
    pub fn groups(&self) -> Vec<ArgGroup> {
        let mut groups = vec![ArgGroup {
            kind: ArgKind::Std,
            origin: "build.std".into(),
            args: vec![format!("-std={}", self.std)],
        }];
        for group in self.flag_groups.iter().filter(|g| !g.flags.is_empty()) {
            groups.push(ArgGroup {
                kind: ArgKind::Production,
                origin: group.origin.clone(),
                args: group.flags.clone(),
            });
        }
        if !self.include_dirs.is_empty() {
            groups.push(ArgGroup {
                kind: ArgKind::IncludeDirs,
                origin: "source.include_dirs, relative to this folder".into(),
                args: self.include_dirs.iter().map(|d| format!("-I{d}")).collect(),
            });
        }
        groups
    }

    /// The production flags, in the order [`groups`](Self::groups) gives them to nvcc.
    pub fn production_flags(&self) -> Vec<String> {
        self.groups()
            .into_iter()
            .filter(|g| g.kind == ArgKind::Production)
            .flat_map(|g| g.args)
            .collect()
    }

    /// Every argument of the harness build, linking `library` (exec form, the spec's own arch).
    pub fn arguments(&self, library: &str) -> Vec<String> {
        let mut args = vec![self.gencode()];
        args.extend(self.groups().into_iter().flat_map(|g| g.args));
        if let Some(root) = &self.cutlass {
            args.push(format!("-I{root}/include"));
            args.push(format!("-I{root}/tools/util/include"));
        }
        args.push(format!("-I{RUNTIME_INCLUDE}"));
        args.extend(["-o".into(), HARNESS_BINARY.into(), HARNESS_SOURCE.into()]);
        if self.custom_reference {
            args.push(REFERENCE_OBJECT.into());
        }
        args.push(library.into());
        args
    }

    /// `op: custom` or intermediates' references: every argument of the reference object's build (run in the artifact
    /// folder): the runtime's flags, its headers, the harness's host compiler (they link).
    pub fn reference_arguments(&self, output: &str) -> Vec<String> {
        let mut args = vec![self.gencode()];
        args.extend(RUNTIME_FLAGS.iter().map(|f| f.to_string()));
        args.extend(self.host_compiler.iter().cloned());
        args.extend([
            format!("-I{RUNTIME_INCLUDE}"),
            "-c".into(),
            "-o".into(),
            output.into(),
            REFERENCE_SOURCE.into(),
        ]);
        args
    }

    /// Every argument of the runtime library's build into `output` (run in the artifact folder).
    pub fn runtime_arguments(&self, output: &str) -> Vec<String> {
        let mut args = vec![self.gencode()];
        args.extend(RUNTIME_FLAGS.iter().map(|f| f.to_string()));
        args.extend(self.host_compiler.iter().cloned());
        args.extend([
            format!("-I{RUNTIME_INCLUDE}"),
            "--lib".into(),
            "-o".into(),
            output.into(),
            RUNTIME_SOURCE.into(),
        ]);
        args
    }
}

/// `-gencode=arch=compute_90a,code=sm_90a` for `sm_90a`; `compute_86` alone embeds PTX only.
pub fn gencode(arch: &str) -> String {
    let digits = arch
        .trim_start_matches("sm_")
        .trim_start_matches("compute_");
    format!("-gencode=arch=compute_{digits},code={arch}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_compiler() {
        let flags: Vec<String> = ["-O3", "-ccbin", "g++-12", "--compiler-bindir=/x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            host_compiler_flags(&flags),
            vec!["-ccbin", "g++-12", "--compiler-bindir=/x"]
        );
    }

    #[test]
    fn gencodes() {
        assert_eq!(gencode("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
        assert_eq!(
            gencode("compute_86"),
            "-gencode=arch=compute_86,code=compute_86"
        );
    }
}
