//! `kernel:` as written: what is launched (a `__global__`, a device function, a CUTLASS 3 GEMM,
//! or a captured module's machine code), its arguments and launch shape, and for `kind: replay`
//! the parameter bytes and where they hold addresses or CUtensorMaps to rewrite.

use serde::{Deserialize, Serialize};

use super::tensors::Value;
use super::tma::{TmaInterleave, TmaL2Promotion, TmaOobFill, TmaSwizzle};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    Global,
    Device,
    Cutlass3,
    /// The captured module's own machine code, launched with the captured parameter bytes
    /// (`repro capture`; docs/spec.md, `kind: replay`): no source needed.
    Replay,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    #[serde(default = "KernelSpec::default_kind")]
    pub kind: KernelKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub template_args: Vec<Value>,
    #[serde(default)]
    pub args: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smem: Option<Value>,
    /// `kind: replay`: the module's cubin, relative to the spec; `name` is the mangled symbol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<String>,
    /// `kind: replay`: the launch's parameter bytes as captured, relative to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
    /// `kind: replay`: where the parameter bytes hold a device address or a CUtensorMap, which
    /// the harness rewrites for its own buffers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relocate: Vec<RelocationSpec>,
}

/// One entry of `kernel.relocate`: at byte `at` of the parameters, the address of byte `offset`
/// of `tensor`, or (with `tensor_map`) a CUtensorMap encoded over that address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelocationSpec {
    pub at: u64,
    pub tensor: String,
    #[serde(default)]
    pub offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_map: Option<TensorMapSpec>,
}

/// A CUtensorMap as `cuTensorMapEncodeTiled` was called for it, in the driver's terms
/// (dimensions innermost first, strides in bytes for dimensions 1..).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorMapSpec {
    /// `CU_TENSOR_MAP_DATA_TYPE_*` without the prefix, lowercase (`bfloat16`, `float32`...).
    pub data_type: String,
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
    #[serde(rename = "box")]
    pub box_dims: Vec<u32>,
    pub element_strides: Vec<u32>,
    #[serde(default)]
    pub interleave: TmaInterleave,
    #[serde(default)]
    pub swizzle: TmaSwizzle,
    #[serde(default)]
    pub l2_promotion: TmaL2Promotion,
    #[serde(default)]
    pub oob_fill: TmaOobFill,
}

impl KernelSpec {
    fn default_kind() -> KernelKind {
        KernelKind::Global
    }
}
