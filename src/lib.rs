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

pub mod bisect;
pub mod bundle;
pub mod campaign;
pub mod capture;
pub mod commands;
pub mod doctor;
pub mod error;
pub mod flags;
pub mod import;

// The spec's Lookups, answered for this machine: with the flags, below every feature that loads a
// spec.
pub use flags::machine;

// The layers below (crates/), under the names the modules above have always used: the contract,
// the async-race checker and the engine.
pub use repro_async_race as async_race;
pub use repro_contract::{check_mode, file_kind, inputs, spec};
pub use repro_engine::{analyze, build, engine_error, generate, plan, run};
