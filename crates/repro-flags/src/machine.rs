//! This machine, as loading a spec asks about it: the production compile line a build log holds
//! (flags/) and where CUTLASS is (build/toolchain.rs). spec, the foundation, defines the question
//! ([`crate::spec::Lookups`]) and may not import flags or build; this module answers it, and every
//! caller that loads a spec from a file passes [`Machine`]. It owns no rule of its own: what a
//! compile line means is flags', what the spec makes of it is spec's.

use std::path::{Path, PathBuf};

use crate::spec::{CompileLine, Lookups};

/// The answers of this machine: its files and its toolchain.
#[derive(Debug, Clone, Copy, Default)]
pub struct Machine;

impl Lookups for Machine {
    fn compile_line(
        &self,
        path: &Path,
        match_pattern: Option<&str>,
        hints: Vec<String>,
    ) -> Result<CompileLine, String> {
        let selector = crate::Selector {
            match_pattern: match_pattern.map(str::to_string),
            hints,
        };
        let extraction = crate::read_input(path)
            .and_then(|input| crate::extract(&input, &selector))
            .map_err(|e| e.to_string())?;
        Ok(CompileLine {
            flags: extraction.kept_flags(),
            include_dirs: extraction
                .include_dirs
                .iter()
                .filter(|d| d.exists)
                .map(|d| d.path.clone())
                .collect(),
            origin: extraction.origin,
            arch: extraction.arch,
            std: extraction.std,
            warnings: extraction.warnings,
        })
    }

    fn cutlass_root(&self) -> Option<PathBuf> {
        crate::build::toolchain::find_cutlass()
            .and_then(|found| found.path.parent().map(Path::to_path_buf))
    }
}
