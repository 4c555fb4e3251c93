//! The spec: reading a YAML file (version 1, docs/spec.md), checking what it means, and resolving
//! it into the numbers and names generation needs. Nothing is written anywhere until a spec has
//! passed here.

mod attention;
mod build;
mod check;
mod custom;
pub mod diagnostic;
mod document;
pub mod dtype;
pub mod environment;
pub mod expr;
mod gemm;
mod launch;
pub mod model;
pub mod names;
mod replay;
pub mod resolved;
mod scaled_grouped;
mod tensors;
mod tma;
mod trace;
pub mod validate;
pub mod yaml;

use std::path::{Path, PathBuf};

pub use diagnostic::{Diagnostic, Location, SpecErrors};
pub use environment::{CompileLine, Environment, Lookups};
pub use launch::MAX_LAUNCHES;
pub use model::Spec;
pub use replay::{MAX_PARAM_BYTES, TENSOR_MAP_TYPES};
pub use resolved::*;

/// Why a spec could not be loaded: unreadable, not a file, too large, or (the usual case) spanned
/// diagnostics. The binary maps each to its exit code (2, a usage error).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Spec(SpecErrors),

    #[error("cannot read spec {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is larger than {limit_mib} MiB; a spec is a short YAML file (is this the right path?)", path.display())]
    TooLarge { path: PathBuf, limit_mib: u64 },

    /// A spec path that names a fifo, a device or a folder: refused before reading, since a fifo
    /// with no writer would block the read forever and a device never ends.
    #[error("{} is {kind}, not a spec file; give the path of a YAML file", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
}

impl LoadError {
    /// Every way a spec fails to load is the user's to mend: a usage error (docs/cli.md).
    pub fn exit_code(&self) -> u8 {
        crate::exit::USAGE
    }
}

/// Largest spec file read. A spec is a page of YAML; the bound keeps `repro scaffold /dev/zero`
/// (or a spec path that names a large binary by mistake) from reading without end, while a pipe
/// (`repro scaffold <(generate-spec)`) still works.
pub const MAX_SPEC_BYTES: u64 = 16 << 20;

/// Reads, parses and validates the spec at `path`; `lookups` answers what only the layers above
/// spec know (crates/repro-flags/src/machine.rs for this machine).
pub fn load(path: &Path, lookups: &dyn Lookups) -> Result<ResolvedSpec, LoadError> {
    let text = read_spec_text(path)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    load_text(path, &text, &dir, lookups)
}

/// Parses spec text, looks up what it names relative to `dir` (the one step that reads the file
/// system, and asks `lookups`: [`Environment::gather`]), and validates it.
pub fn load_text(
    path: &Path,
    text: &str,
    dir: &Path,
    lookups: &dyn Lookups,
) -> Result<ResolvedSpec, LoadError> {
    let (spec, spans) =
        yaml::parse_spec(text).map_err(|d| LoadError::Spec(SpecErrors::new(path, text, d)))?;
    let environment = Environment::gather(&spec, dir, lookups);
    validate::validate(spec, &spans, path, &environment)
        .map_err(|diagnostics| LoadError::Spec(SpecErrors::new(path, text, diagnostics)))
}

/// The spec file's text: at most [`MAX_SPEC_BYTES`], and UTF-8, else an error that says where
/// the first byte that is not UTF-8 is.
fn read_spec_text(path: &Path) -> Result<String, LoadError> {
    let read_error = |source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    };
    use crate::file_kind::{read_regular, ReadError};
    let bytes = read_regular(path, MAX_SPEC_BYTES).map_err(|e| match e {
        ReadError::Io(source) => read_error(source),
        ReadError::NotAFile(kind) => LoadError::NotAFile {
            path: path.to_path_buf(),
            kind,
        },
        ReadError::TooLarge { .. } => LoadError::TooLarge {
            path: path.to_path_buf(),
            limit_mib: MAX_SPEC_BYTES >> 20,
        },
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let valid = e.utf8_error().valid_up_to();
        let before = std::str::from_utf8(&bytes[..valid]).expect("valid up to here");
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let location = Location {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        };
        let diagnostic = Diagnostic::new(
            location,
            format!(
                "the spec is not UTF-8 text: byte 0x{:02X} here is not UTF-8",
                bytes[valid]
            ),
        )
        .with_help(
            "save the file as UTF-8 (an editor set to Latin-1 or UTF-16 writes other bytes for \
             non-ASCII characters such as `é` or `µ`)",
        );
        LoadError::Spec(SpecErrors::new(
            path,
            &String::from_utf8_lossy(bytes),
            vec![diagnostic],
        ))
    })
}
