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
pub use capture::{CaptureSpec, CaptureWindow};
pub use check::{CheckSpec, StressMode};
pub use expect::{ExpectSpec, Outcome, Verdict};
pub use kernel::{KernelKind, KernelSpec, RelocationSpec, TensorMapSpec};
pub use reference::{
    CausalMask, GroupedLayout, ReferenceProvider, ReferenceSpec, ScaleFormat, ScaleSpec,
};
pub use tensors::{
    FileInit, Generator, GroupsInit, InitPattern, InputsSpec, IntermediateReferenceSpec, Layout,
    Lifetime, TensorSpec, Value, ValuesInit,
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
    /// The one launch of a single-kernel spec; `launches:` gives several instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSpec>,
    /// An operator of several kernels: each entry a launch as `kernel:` writes one, run in
    /// order on one stream for every call (docs/spec.md, `launches`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<KernelSpec>,
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

impl Spec {
    /// The launches as written, each with the path its errors name: `kernel` alone, or
    /// `launches[i]`.
    pub fn launch_entries(&self) -> Vec<(String, &KernelSpec)> {
        match &self.kernel {
            Some(kernel) => vec![("kernel".to_string(), kernel)],
            None => self
                .launches
                .iter()
                .enumerate()
                .map(|(i, k)| (format!("launches[{i}]"), k))
                .collect(),
        }
    }

    /// The first launch as written (the only one unless `launches:`), if any.
    pub fn first_launch(&self) -> Option<&KernelSpec> {
        self.kernel.as_ref().or(self.launches.first())
    }

    /// Every launch as written, mutably, in the order of [`Spec::launch_entries`]: what an
    /// artifact's spec.yaml points at its own copies of files.
    pub fn launch_entries_mut(&mut self) -> Vec<&mut KernelSpec> {
        match &mut self.kernel {
            Some(kernel) => vec![kernel],
            None => self.launches.iter_mut().collect(),
        }
    }

    /// The first launch, mutably: what a campaign variant's `template_args` rewrite.
    pub fn first_launch_mut(&mut self) -> Option<&mut KernelSpec> {
        match &mut self.kernel {
            Some(kernel) => Some(kernel),
            None => self.launches.first_mut(),
        }
    }
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
