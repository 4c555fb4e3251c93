//! The nvcc command line of a harness build: one list of arguments, rendered into the artifact's
//! build.sh and CMakeLists.txt and executed by `repro build`, so the three never disagree.

use serde::Serialize;

use std::path::Path;

use crate::generate::paths::relative_to;
use crate::spec::{FlagGroup, ResolvedSpec};

/// One group of nvcc arguments and where they came from (shown as a comment in build.sh).
#[derive(Debug, Clone, Serialize)]
pub struct ArgGroup {
    pub origin: String,
    pub args: Vec<String>,
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
}

/// Which form of the command: the one `repro build` executes, or build.sh's, where `ARCH` and
/// `CUTLASS_DIR` may override the spec's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Exec,
    Shell,
}

/// The harness executable's name inside the artifact folder.
pub const HARNESS_BINARY: &str = "harness";
pub const HARNESS_SOURCE: &str = "harness.cu";

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
        }
    }

    /// The arguments, grouped by origin.
    pub fn groups(&self, form: Form) -> Vec<ArgGroup> {
        // build.sh passes "${ARCH}" so the shell expands it: strip the prefix there too.
        let (arch, digits) = match form {
            Form::Shell => ("${ARCH}", "${ARCH#sm_}"),
            Form::Exec => (self.arch.as_str(), self.arch.trim_start_matches("sm_")),
        };
        let mut groups = vec![
            ArgGroup {
                origin: "build.arch: SASS for exactly this target (a bare -arch=sm_XXa would add a plain compute_XX pass, DESIGN §7)".into(),
                args: vec![format!("-gencode=arch=compute_{digits},code={arch}")],
            },
            ArgGroup { origin: "build.std".into(), args: vec![format!("-std={}", self.std)] },
        ];
        for group in self.flag_groups.iter().filter(|g| !g.flags.is_empty()) {
            groups.push(ArgGroup {
                origin: group.origin.clone(),
                args: group.flags.clone(),
            });
        }
        if !self.include_dirs.is_empty() {
            groups.push(ArgGroup {
                origin: "source.include_dirs, relative to this folder".into(),
                args: self.include_dirs.iter().map(|d| format!("-I{d}")).collect(),
            });
        }
        if let Some(root) = &self.cutlass {
            let root = match form {
                Form::Shell => format!("${{CUTLASS_DIR:-{root}}}"),
                Form::Exec => root.clone(),
            };
            groups.push(ArgGroup {
                origin: "CUTLASS/CuTe headers (CUTLASS_DIR overrides; repro doctor says which)"
                    .into(),
                args: vec![
                    format!("-I{root}/include"),
                    format!("-I{root}/tools/util/include"),
                ],
            });
        }
        groups.push(ArgGroup {
            origin: "the harness: one translation unit, one executable".into(),
            args: vec!["-o".into(), HARNESS_BINARY.into(), HARNESS_SOURCE.into()],
        });
        groups
    }

    /// Every argument for the spec's own arch, in order.
    pub fn arguments(&self) -> Vec<String> {
        self.groups(Form::Exec)
            .into_iter()
            .flat_map(|g| g.args)
            .collect()
    }
}

/// Quotes an argument for a POSIX shell when it needs it.
pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+,./:@%^".contains(c));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("-O3"), "-O3");
        assert_eq!(shell_quote("-DNAME=a b"), "'-DNAME=a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
