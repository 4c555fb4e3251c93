//! repro's harness contract: what `repro` and the harness it generates agree on, written once.
//!
//! - [`spec`]: the spec file (docs/spec.md): its model, its YAML (all of repro's YAML code is in
//!   `spec::yaml`), its validation with spanned errors, and the resolved spec generation reads.
//! - [`inputs`]: the input generators, bit for bit the harness runtime's own.
//! - [`init_patterns`]: the init patterns' one list, rendered into the runtime's generators.cuh.
//! - [`harness_options`]: every option the harness reads, and the table that renders its `--help`.
//! - [`check_mode`]: what one check runs (ones, random, probe, sanitize), for campaign and bisect.
//! - [`exit`]: the exit codes `repro` and the harness share (docs/cli.md).
//! - [`runtime`]: the harness runtime's C++ sources (`runtime/`, folders by concern; its README.md
//!   says what each holds), embedded as every artifact carries them, flat, in its `runtime/`.
//! - [`file_kind`]: the bounded, kind-checked reads of the user's files.
//!
//! Beside them, `instrument/` holds the two headers users put in their own code, the other side
//! of the harness's contract (docs/instrumenting.md): `repro_trace.cuh` writes the traced stages
//! the harness reads, `repro_capture.cuh` the capture folders `repro import` reads. No artifact
//! carries them.
//!
//! It may import only repro-text. What only the layers above know (the compile line a build log
//! holds, where CUTLASS is) reaches it through [`spec::Lookups`], which the caller implements;
//! Cargo refuses a dependency back up (README.md, "Layout").

pub mod check_mode;
pub mod exit;
pub mod file_kind;
pub mod harness_options;
pub mod init_patterns;
pub mod inputs;
pub mod report;
pub mod runtime;
pub mod spec;
