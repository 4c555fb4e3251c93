//! `repro run --sanitize async-race`: a shared-memory race checker that sees the async proxy
//! (TMA loads and stores, bulk copies, wgmma), which compute-sanitizer's racecheck does not.
//!
//! [`ptx`] rewrites the kernel's PTX with calls to the device runtime
//! (templates/runtime/include/repro/async_race.cuh); [`toolkit`] puts that rewrite between cicc
//! and ptxas without changing the build's flags; [`report`] names the findings' source lines.

pub mod ptx;
pub mod report;
pub mod toolkit;
