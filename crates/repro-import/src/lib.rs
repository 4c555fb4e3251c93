//! `repro import`: spec skeletons from real code — a cudarc launch site in Rust ([`rust`], parsed
//! with syn) or a `__global__` declaration in a CUDA source tree ([`cuda`], found with walkdir).
//! Both fill a [`skeleton::Skeleton`]; what they cannot know stays a visible TODO. And the
//! `tensors:` of a spec from tensors captured in production ([`capture`]).
//!
//! A crate of its own (README.md, "Layout"), on the contract alone. The capture feature writes
//! what `import capture` reads and reuses the CUDA declaration parser, so it sits above this crate
//! (the `.npy` descr table both use is here, in [`capture`]); a dependency back on it would be a
//! cycle, which Cargo refuses. The command that writes a skeleton is the binary's.

pub mod capture;
pub mod cuda;
pub mod rust;
pub mod skeleton;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{file_kind, inputs, spec};
