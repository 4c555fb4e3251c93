//! Exit codes shared by `repro` and the generated harness (docs/cli.md), and repro's own
//! [`INTERNAL`]. The harness's constants (`kExitPassed`, ...) are rendered from these through
//! [`crate::harness_options::EXIT_CODES`].

pub const PASSED: u8 = 0;
pub const MISMATCH: u8 = 1;
pub const USAGE: u8 = 2;
pub const BUILD: u8 = 3;
pub const CUDA_ERROR: u8 = 4;
pub const HANG: u8 = 5;
pub const SANITIZER: u8 = 6;
pub const NO_DEVICE: u8 = 7;
/// A bug in repro (sysexits' EX_SOFTWARE): a template that does not render, a harness report
/// repro cannot read. Never the harness's own code.
pub const INTERNAL: u8 = 70;
