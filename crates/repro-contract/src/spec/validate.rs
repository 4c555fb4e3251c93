//! What a spec means, checked before anything is written: names declared, shapes that fit the
//! reference, launch values, build settings. Every problem is collected (not just the first)
//! with the place it was written.
//!
//! This file holds the driver ([`validate`]), the [`Validator`] every check reports through, and
//! the header (`version`, `name`). Each section's checks live in the file of its concept, all as
//! methods of [`Validator`]: sizes and tensors in tensors.rs, `source` and `build` in build.rs,
//! `kernel` in launch.rs (`kind: replay` in replay.rs), `tma` in tma.rs, `trace` in trace.rs, the
//! reference in gemm.rs (`op: gemm` and the dispatch over ops), scaled_grouped.rs, attention.rs
//! and custom.rs, and `check` in check.rs.

use std::cmp::Ordering;
use std::path::Path;

use super::diagnostic::Diagnostic;
use super::environment::{Cutlass, Environment};
use super::model::Spec;
use super::names::is_spec_name;
use super::resolved::ResolvedSpec;
use super::yaml::SpanMap;

pub use super::tensors::{packed_strides, MAX_TENSOR_BYTES};

pub(super) struct Validator<'a> {
    pub(super) spec: &'a Spec,
    spans: &'a SpanMap,
    pub(super) environment: &'a Environment,
    errors: Vec<Diagnostic>,
    pub(super) warnings: Vec<String>,
}

/// Checks `spec` against its text's spans and what `environment` found, and resolves it. Pure:
/// every fact from outside the text comes in `environment` (environment.rs gathers it).
pub fn validate(
    spec: Spec,
    spans: &SpanMap,
    path: &Path,
    environment: &Environment,
) -> Result<ResolvedSpec, Vec<Diagnostic>> {
    let mut v = Validator {
        spec: &spec,
        spans,
        environment,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    v.header();
    let sizes = v.sizes();
    let tensors = v.tensors(&sizes);
    let include_dirs = v.source();
    let tma = v.tma(&sizes, &tensors);
    let trace = v.trace();
    let launches = v.launches(&sizes, &tensors, &tma);
    let reference = v.reference(&tensors);
    let check = v.check();
    let capture = v.capture(&tensors);
    let (build, log_include_dirs) = v.build();
    let mut include_dirs = include_dirs;
    for dir in log_include_dirs {
        if !include_dirs.contains(&dir) {
            include_dirs.push(dir);
        }
    }
    let (errors, warnings) = (v.errors, v.warnings);
    match (launches, reference, build) {
        (Some(launches), Some(reference), Some(build)) if errors.is_empty() => {
            let mut resolved = ResolvedSpec {
                name: spec.name.clone(),
                about: spec.about.clone(),
                includes: spec.source.includes.clone(),
                prelude: spec.source.prelude.clone(),
                expect: spec.expect.clone(),
                document: spec.clone(),
                path: path.to_path_buf(),
                dir: environment.dir.clone(),
                sizes,
                tensors,
                launches,
                tma,
                trace,
                reference,
                check,
                build,
                include_dirs,
                capture,
                warnings,
                // CUTLASS from the spec's own include_dirs wins; otherwise $CUTLASS_DIR or the
                // project's toolchain, added to the build by repro.
                cutlass: match &environment.cutlass {
                    Cutlass::Found(root) => Some(root.clone()),
                    _ => None,
                },
            };
            resolved.document = super::document::resolved_document(&spec, &resolved);
            Ok(resolved)
        }
        _ => Err(errors),
    }
}

/// Longest spec name. The name is a folder name (`generated/<name>/`), which common filesystems
/// limit to 255 bytes; repro derives longer ones from it (`repro shrink` writes `<name>_shrunk`,
/// and again for a shrunk spec), so the bound leaves room for those.
pub const MAX_SPEC_NAME: usize = 128;

impl<'a> Validator<'a> {
    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) -> &mut Diagnostic {
        let loc = self.spans.value(path);
        self.errors.push(Diagnostic::new(loc, message));
        self.errors.last_mut().expect("just pushed")
    }

    pub(super) fn key_error(&mut self, path: &str, message: impl Into<String>) -> &mut Diagnostic {
        let loc = self.spans.key(path);
        self.errors.push(Diagnostic::new(loc, message));
        self.errors.last_mut().expect("just pushed")
    }

    fn header(&mut self) {
        if self.spec.version != 1 {
            self.error(
                "version",
                format!("spec version {} is not supported", self.spec.version),
            )
            .help = Some("this repro reads `version: 1`".into());
        }
        if !is_spec_name(&self.spec.name) {
            self.error("name", format!("`{}` is not a valid spec name", self.spec.name)).help =
                Some("names are lowercase letters, digits and `_` ([a-z0-9_]+); the name is the output folder".into());
        } else if self.spec.name.len() > MAX_SPEC_NAME {
            self.error(
                "name",
                format!(
                    "the spec name is {} characters long; at most {MAX_SPEC_NAME}",
                    self.spec.name.len()
                ),
            )
            .help = Some(format!(
                "the name is the output folder (generated/<name>/, bundles/<name>/), and a folder \
                 name has at most 255 bytes on common filesystems; repro also derives names from \
                 it (`<name>_shrunk`), so keep it under {MAX_SPEC_NAME}"
            ));
        }
    }
}

/// True for a positive number (NaN is not).
pub fn is_positive(x: f64) -> bool {
    x.partial_cmp(&0.0) == Some(Ordering::Greater)
}

/// The longest watchdog limit repro takes for one launch, in seconds: a day. A launch that runs
/// longer is hung for anything a reproducer is for, and the bound keeps every wall-clock budget
/// derived from it (a multiple of it, per repeat and per probe launch) a finite `Duration`:
/// `1e308` or `inf` would overflow one and panic.
pub const MAX_TIMEOUT_SECONDS: f64 = 86_400.0;

/// True for a watchdog limit repro takes: positive and at most [`MAX_TIMEOUT_SECONDS`].
pub fn is_timeout(seconds: f64) -> bool {
    is_positive(seconds) && seconds <= MAX_TIMEOUT_SECONDS
}
