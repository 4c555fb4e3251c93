//! repro's engine: spec → artifact → build → run. [`plan`] computes one build of a spec once (its
//! folder, files and nvcc commands), [`generate`] renders and writes the artifact from the
//! templates in `templates/`, [`build`] compiles it with the production flags (cached), [`run`]
//! executes it and relays its report and exit code, [`analyze`] reads what it left. Every failure
//! is an [`engine_error::EngineError`], which the command-level error wraps as it is.
//!
//! It may import the contract (repro-contract), the text layer (repro-text) and the async-race
//! checker (repro-async-race), never a feature or the binary above it (README.md, "Layout"):
//! Cargo refuses a dependency back up. What only the layers above know (the compile line a build
//! log holds) reaches it through `spec::Lookups`, which the caller passes.

pub mod analyze;
pub mod build;
pub mod engine_error;
pub mod generate;
pub mod plan;
pub mod run;

// The layers below, under the names the modules above have always used.
pub use repro_async_race as async_race;
pub use repro_contract::{file_kind, inputs, spec};
