//! The spec: reading a YAML file (DESIGN §3, version 1), checking what it means, and resolving it
//! into the numbers and names generation needs. Nothing is written anywhere until a spec has
//! passed here.

pub mod diagnostic;
pub mod dtype;
pub mod expr;
pub mod model;
pub mod names;
pub mod resolved;
mod tma;
pub mod validate;
pub mod yaml;

use std::path::Path;

pub use diagnostic::{Diagnostic, Location, SpecErrors};
pub use model::Spec;
pub use resolved::*;

use crate::error::Error;

/// Reads, parses and validates the spec at `path`.
pub fn load(path: &Path) -> Result<ResolvedSpec, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadSpec {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    load_text(path, &text, &dir)
}

/// Parses and validates spec text; `dir` is where its relative paths point from.
pub fn load_text(path: &Path, text: &str, dir: &Path) -> Result<ResolvedSpec, Error> {
    let (spec, spans) =
        yaml::parse_spec(text).map_err(|d| Error::Spec(SpecErrors::new(path, text, d)))?;
    validate::validate(spec, &spans, path, dir)
        .map_err(|diagnostics| Error::Spec(SpecErrors::new(path, text, diagnostics)))
}
