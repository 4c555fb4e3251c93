//! The spec as written (version 1; every field is described in docs/spec.md): plain serde types,
//! unknown fields rejected. This file holds the top level (`Spec`, `source:`); each section's
//! types live in the file named for it, and everything is re-exported here, so callers name
//! `model::X` whatever file X is in.
//!
//! These types say what may be written, not whether it makes sense; `validate` checks meaning
//! and produces a [`crate::spec::ResolvedSpec`].

mod build;
mod capture;
mod check;
mod expect;
mod kernel;
mod reference;
mod tensors;
mod tma;
mod trace;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

pub use build::{BuildSpec, FlagsFrom};
pub use capture::CaptureSpec;
pub use check::{CheckSpec, StressMode};
pub use expect::{ExpectSpec, Outcome, Verdict};
pub use kernel::{KernelKind, KernelSpec, RelocationSpec, TensorMapSpec};
pub use reference::{
    CausalMask, GroupedLayout, ReferenceProvider, ReferenceSpec, ScaleFormat, ScaleSpec,
};
pub use tensors::{
    FileInit, Generator, GroupsInit, InitPattern, InputsSpec, Layout, TensorSpec, Value, ValuesInit,
};
pub use tma::{TmaInterleave, TmaL2Promotion, TmaOobFill, TmaSpec, TmaSwizzle};
pub use trace::{TraceRole, TraceStageSpec};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub version: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub about: String,
    #[serde(default)]
    pub sizes: IndexMap<String, i64>,
    #[serde(default)]
    pub source: SourceSpec,
    pub tensors: IndexMap<String, TensorSpec>,
    #[serde(default)]
    pub inputs: InputsSpec,
    /// CUtensorMap descriptors the harness encodes (cuTensorMapEncodeTiled), by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub tma: IndexMap<String, TmaSpec>,
    pub kernel: KernelSpec,
    /// Stages an instrumented kernel records with repro_trace.cuh, in stage-index order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<TraceStageSpec>,
    pub reference: ReferenceSpec,
    #[serde(default)]
    pub check: CheckSpec,
    #[serde(default)]
    pub build: BuildSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ExpectSpec>,
    /// A spec written by `repro capture`: provenance and production's own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSpec>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Relative to the spec file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_dirs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub includes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prelude: Option<String>,
}
