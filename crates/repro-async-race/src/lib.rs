//! `repro run --sanitize async-race`: a shared-memory race checker that sees the async proxy
//! (TMA loads and stores, bulk copies, wgmma), which compute-sanitizer's racecheck does not.
//!
//! [`hooks`] says which call to the device runtime (crates/repro-contract/runtime/include/repro/
//! async_race.cuh) each PTX instruction gets; [`ptx`] parses a module and writes those calls;
//! [`toolkit`] puts that rewrite between cicc and ptxas without changing the build's flags;
//! [`report`] names the findings' source lines.
//!
//! It imports nothing of repro's ([`error`] is its own), so the engine's build and run can use it
//! from below: none of its files may import the engine, a feature or the commands.

pub mod error;
pub mod hooks;
pub mod instruction;
pub mod ptx;
pub mod report;
pub mod toolkit;
