//! `repro import`: spec skeletons from real code — a cudarc launch site in Rust ([`rust`], parsed
//! with syn) or a `__global__` declaration in a CUDA source tree ([`cuda`], found with walkdir).
//! Both fill a [`skeleton::Skeleton`]; what they cannot know stays a visible TODO. And the
//! `tensors:` of a spec from tensors captured in production ([`capture`]).

pub mod capture;
// The command that writes an imported skeleton is the binary's (commands/import_write.rs); under
// its old name for the test suite.
pub use crate::commands::import_write as command;
pub mod cuda;
pub mod rust;
pub mod skeleton;
