//! `repro import`: spec skeletons from real code — a cudarc launch site in Rust ([`rust`], parsed
//! with syn) or a `__global__` declaration in a CUDA source tree ([`cuda`], found with walkdir).
//! Both fill a [`skeleton::Skeleton`]; what they cannot know stays a visible TODO. And the
//! `tensors:` of a spec from tensors captured in production ([`capture`]).

pub mod capture;
pub mod cuda;
pub mod rust;
pub mod skeleton;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{file_kind, inputs, spec};
