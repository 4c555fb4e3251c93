//! `repro`: standalone reproducers for CUDA GEMM kernels that compute wrong numbers.
//!
//! The flow is spec → artifact → build → run: [`spec`] reads and checks the YAML, [`generate`]
//! writes the harness artifact from the templates in `templates/`, [`build`] compiles it with the
//! production flags (cached), [`run`] executes it and relays its report and exit code.
//! [`inputs`] holds the input generators, bit-identical to the harness's own.
//! [`commands`] is the command line (docs/cli.md): each command's arguments, turned into the
//! plain values the modules above take.
//!
//! The engine (plan, generate, build, run, analyze) fails with [`engine_error::EngineError`] and
//! names no feature, command or [`machine`]; [`error::Error`] wraps it as it is.

pub mod commands;
pub mod doctor;
pub mod error;

// The layers below (crates/), under the names the modules above have always used: the contract,
// the async-race checker and the engine.
pub use repro_async_race as async_race;
pub use repro_contract::{check_mode, file_kind, inputs, spec};
pub use repro_engine::{analyze, build, engine_error, generate, plan, run};

// The features (crates/), each a crate above the engine, under their old names. `machine` (the
// spec's Lookups answered for this machine) lives with the flags, below every feature that loads
// a spec.
pub use repro_bisect as bisect;
pub use repro_bundle as bundle;
pub use repro_campaign as campaign;
pub use repro_capture as capture;
pub use repro_flags as flags;
pub use repro_flags::machine;

/// `repro import`'s readers, and under `command` the binary's command that writes what they read
/// (commands/import_write.rs), under the path it has always had.
pub mod import {
    pub use crate::commands::import_write as command;
    pub use repro_import::*;
}
