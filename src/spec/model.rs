//! The spec as written (version 1; every field is described in docs/spec.md): plain serde types,
//! unknown fields rejected.
//!
//! These types say what may be written, not whether it makes sense; `validate` checks meaning
//! and produces a [`crate::spec::ResolvedSpec`].

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::dtype::DType;

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

/// A dimension, stride or launch value: an integer, or text (a size name, an expression).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Value {
    /// The value as C++ source text.
    pub fn to_cpp(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(x) => format!("{x:?}"),
            Value::Text(t) => t.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    RowMajor,
    ColMajor,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitPattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `init:` — a generator name, or `{ file: PATH }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InitPattern {
    Generator(Generator),
    File(FileInit),
    /// `{ values: [...] }`: every element, in logical row-major order (masked_m, k_sizes).
    Values(ValuesInit),
    /// `{ groups: [rows...], align: A }`: a contiguous grouped GEMM's group index.
    Groups(GroupsInit),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesInit {
    #[serde(serialize_with = "integers_as_integers")]
    pub values: Vec<f64>,
}

/// Whole numbers as integers (`- 200`, not `- 200.0`): the resolved spec.yaml is read by people.
fn integers_as_integers<S: serde::Serializer>(
    values: &[f64],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = serializer.serialize_seq(Some(values.len()))?;
    for &v in values {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            seq.serialize_element(&(v as i64))?;
        } else {
            seq.serialize_element(&v)?;
        }
    }
    seq.end()
}

/// Group g's rows get index g, each group's run padded with -1 rows to a multiple of `align`,
/// from row 0 in group order; the rows after the last group's padding are -1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsInit {
    pub groups: Vec<i64>,
    #[serde(default = "GroupsInit::default_align")]
    pub align: i64,
}

impl GroupsInit {
    fn default_align() -> i64 {
        1
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileInit {
    /// `.npy`, or `.bin` raw in the tensor's dtype; relative to the spec file.
    pub file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    Ones,
    Zeros,
    Iota,
    Identity,
    Uniform,
    IntUniform,
    Normal,
    RowRamp,
}

impl Generator {
    pub fn name(self) -> &'static str {
        match self {
            Generator::Ones => "ones",
            Generator::Zeros => "zeros",
            Generator::Iota => "iota",
            Generator::Identity => "identity",
            Generator::Uniform => "uniform",
            Generator::IntUniform => "int_uniform",
            Generator::Normal => "normal",
            Generator::RowRamp => "row_ramp",
        }
    }
}

/// The default init for every non-output tensor that names none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsSpec {
    #[serde(default = "InputsSpec::default_init")]
    pub init: InitPattern,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl InputsSpec {
    fn default_init() -> InitPattern {
        InitPattern::Generator(Generator::Uniform)
    }
}

impl Default for InputsSpec {
    fn default() -> Self {
        InputsSpec {
            init: InputsSpec::default_init(),
            range: None,
            mean: None,
            std: None,
            seed: None,
        }
    }
}

/// One `tma:` entry: a tiled TMA descriptor over one of the spec's tensors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmaSpec {
    pub tensor: String,
    /// Box extent per logical dimension, in the tensor's `shape` order.
    #[serde(rename = "box")]
    pub box_dims: Vec<Value>,
    /// Traversal step per logical dimension (1..8), `shape` order; all 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element_strides: Option<Vec<Value>>,
    #[serde(default)]
    pub swizzle: TmaSwizzle,
    #[serde(default)]
    pub interleave: TmaInterleave,
    #[serde(default)]
    pub l2_promotion: TmaL2Promotion,
    #[serde(default)]
    pub oob_fill: TmaOobFill,
}

/// The shared-memory swizzle TMA writes with (CUtensorMapSwizzle).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TmaSwizzle {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "32B")]
    B32,
    #[serde(rename = "64B")]
    B64,
    #[serde(rename = "128B")]
    B128,
}

impl TmaSwizzle {
    /// The span the swizzle permutes 16-byte chunks within; 0 for none.
    pub fn span_bytes(self) -> i64 {
        match self {
            TmaSwizzle::None => 0,
            TmaSwizzle::B32 => 32,
            TmaSwizzle::B64 => 64,
            TmaSwizzle::B128 => 128,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TmaSwizzle::None => "none",
            TmaSwizzle::B32 => "32B",
            TmaSwizzle::B64 => "64B",
            TmaSwizzle::B128 => "128B",
        }
    }

    pub fn cpp(self) -> &'static str {
        match self {
            TmaSwizzle::None => "CU_TENSOR_MAP_SWIZZLE_NONE",
            TmaSwizzle::B32 => "CU_TENSOR_MAP_SWIZZLE_32B",
            TmaSwizzle::B64 => "CU_TENSOR_MAP_SWIZZLE_64B",
            TmaSwizzle::B128 => "CU_TENSOR_MAP_SWIZZLE_128B",
        }
    }
}

/// Interleaved global layouts such as NC/8HWC8 (CUtensorMapInterleave).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TmaInterleave {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "16B")]
    B16,
    #[serde(rename = "32B")]
    B32,
}

impl TmaInterleave {
    pub fn name(self) -> &'static str {
        match self {
            TmaInterleave::None => "none",
            TmaInterleave::B16 => "16B",
            TmaInterleave::B32 => "32B",
        }
    }

    pub fn cpp(self) -> &'static str {
        match self {
            TmaInterleave::None => "CU_TENSOR_MAP_INTERLEAVE_NONE",
            TmaInterleave::B16 => "CU_TENSOR_MAP_INTERLEAVE_16B",
            TmaInterleave::B32 => "CU_TENSOR_MAP_INTERLEAVE_32B",
        }
    }
}

/// L2 fetch granularity (CUtensorMapL2promotion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TmaL2Promotion {
    #[default]
    #[serde(rename = "none")]
    None,
    #[serde(rename = "64B")]
    B64,
    #[serde(rename = "128B")]
    B128,
    #[serde(rename = "256B")]
    B256,
}

impl TmaL2Promotion {
    pub fn name(self) -> &'static str {
        match self {
            TmaL2Promotion::None => "none",
            TmaL2Promotion::B64 => "64B",
            TmaL2Promotion::B128 => "128B",
            TmaL2Promotion::B256 => "256B",
        }
    }

    pub fn cpp(self) -> &'static str {
        match self {
            TmaL2Promotion::None => "CU_TENSOR_MAP_L2_PROMOTION_NONE",
            TmaL2Promotion::B64 => "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
            TmaL2Promotion::B128 => "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
            TmaL2Promotion::B256 => "CU_TENSOR_MAP_L2_PROMOTION_L2_256B",
        }
    }
}

/// What out-of-bounds elements of a box read as (CUtensorMapFloatOOBfill): zero, or a NaN
/// that FMA treats as zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TmaOobFill {
    #[default]
    None,
    Nan,
}

impl TmaOobFill {
    pub fn name(self) -> &'static str {
        match self {
            TmaOobFill::None => "none (zeros)",
            TmaOobFill::Nan => "nan (NaN request, zero FMA)",
        }
    }

    pub fn cpp(self) -> &'static str {
        match self {
            TmaOobFill::None => "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
            TmaOobFill::Nan => "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA",
        }
    }
}

/// One `trace:` entry: a stage the kernel records (repro_trace::Stage), and what it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStageSpec {
    pub name: String,
    pub role: TraceRole,
    /// The index the kernel records the stage under [default: its position in the list].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
}

/// What a traced stage holds, which fixes its right absmax under --ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceRole {
    /// An operand as the MMA consumes it: 1.
    Operand,
    /// The accumulator after the K loop: K.
    Accumulator,
    /// The output value before the store: alpha * K.
    Output,
}

impl TraceRole {
    pub fn name(self) -> &'static str {
        match self {
            TraceRole::Operand => "operand",
            TraceRole::Accumulator => "accumulator",
            TraceRole::Output => "output",
        }
    }
}

/// `reference.provider`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceProvider {
    #[default]
    Auto,
    Device,
    /// fp64-accurate GEMMs from int8 tensor-core slices (docs/tolerances.md).
    Emulated,
    Host,
}

impl ReferenceProvider {
    pub fn name(self) -> &'static str {
        match self {
            ReferenceProvider::Auto => "auto",
            ReferenceProvider::Device => "device",
            ReferenceProvider::Emulated => "emulated",
            ReferenceProvider::Host => "host",
        }
    }

    fn is_auto(&self) -> bool {
        *self == ReferenceProvider::Auto
    }
}

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

/// `capture:`: where the spec came from (`repro capture`) and what production's launch did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    /// The program that was run, as a shell would show it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// The kernel's demangled name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
    /// Which launch of the matching kernels (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<u64>,
    /// The config the kernel was compiled with, when the capture can tell (a Triton kernel's
    /// `BLOCK_M=64, num_warps=4`): the report names it, so a bug report says which one failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
    /// Where the kernel is written, likewise (`matmul.py:30`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Each output's contents before production's launch (a `.npy`): the run starts its
    /// outputs from these instead of the poison, as production did.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub before: IndexMap<String, String>,
    /// Each output as production's launch left it: the first launch is compared bit for bit.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub after: IndexMap<String, String>,
}

impl KernelSpec {
    fn default_kind() -> KernelKind {
        KernelKind::Global
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceSpec {
    pub op: String,
    /// The GEMM ops' operands and output (empty: not given; `op: custom` and `op: file` have none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub a: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub b: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub out: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// The kernel's output tile [tile_m, tile_n] (and optionally tile_k), for localization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<Vec<i64>>,
    /// Where the fp64 reference runs: auto (by size), device, emulated (int8 tensor cores), host.
    #[serde(default, skip_serializing_if = "ReferenceProvider::is_auto")]
    pub provider: ReferenceProvider,
    /// `op: gemm`: block scales of A, per `[block_m, block_k]` block (docs/spec.md,
    /// "Scaled GEMMs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_a: Option<ScaleSpec>,
    /// `op: gemm`: block scales of B, per `[block_k, block_n]` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_b: Option<ScaleSpec>,
    /// `op: grouped_gemm`: how the groups are laid out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<GroupedLayout>,
    /// `layout: contiguous`: the i32 group of every row of A, -1 for a padding row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_index: Option<String>,
    /// `layout: masked`: the i32 count of valid rows of every group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masked_m: Option<String>,
    /// `layout: k_grouped`: the i32 K extent of every group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_sizes: Option<String>,
    /// `op: custom`: the header holding the host C++ reference, relative to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `op: custom`: the reference function in `source`, one parameter per tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// `op: file`: each output's expected values, a `.npy` relative to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<IndexMap<String, String>>,
    /// `op: custom` and `op: file`: the launch's block of outputs, in the output's index order
    /// (the role `tile` has for a GEMM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Vec<i64>>,
    /// `op: attention`: the query, key and value tensors ([B, H, S, D], or [H, total, D] with
    /// variable lengths); the output is `out`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v: Option<String>,
    /// `op: attention`: the log-sum-exp output [B, Hq, Sq], natural log, scale applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lse: Option<String>,
    /// `op: attention`: the causal mask and its alignment when Sq != Sk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal: Option<CausalMask>,
    /// `op: attention`: the scale of Q K^T before the softmax (default 1 / sqrt(head dim)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softmax_scale: Option<f64>,
    /// `op: attention` with variable lengths: i32 [B + 1] offsets of each sequence's rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cu_seqlens_q: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cu_seqlens_k: Option<String>,
    /// `op: attention_backward`: the forward's output and the output's gradient (inputs), and
    /// the gradients of q, k and v (outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub o: Option<String>,
    #[serde(default, rename = "do", skip_serializing_if = "Option::is_none")]
    pub d_out: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dq: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dk: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dv: Option<String>,
}

/// `op: attention`'s `causal:`: which keys each query sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CausalMask {
    /// Every key.
    None,
    /// Query i sees keys 0..=i.
    TopLeft,
    /// Query i sees keys 0..=i + Sk - Sq (FlashAttention 2's convention when Sq != Sk).
    BottomRight,
}

impl CausalMask {
    pub fn name(self) -> &'static str {
        match self {
            CausalMask::None => "none",
            CausalMask::TopLeft => "top_left",
            CausalMask::BottomRight => "bottom_right",
        }
    }
}

/// `scale_a:` / `scale_b:` of a scaled GEMM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSpec {
    pub tensor: String,
    /// The block one scale covers, in the operand's logical order ([M, K] for A, [K, N] for B).
    pub block: Vec<i64>,
    #[serde(default, skip_serializing_if = "ScaleFormat::is_f32")]
    pub format: ScaleFormat,
}

/// How a scale tensor's elements encode their scales.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleFormat {
    /// The elements are the scales (f32, or any float dtype).
    #[default]
    F32,
    /// 8-bit powers of two, 2^(e - 127): one per u8 element, or four per i32 (DeepGEMM's packing).
    Ue8m0,
}

impl ScaleFormat {
    fn is_f32(&self) -> bool {
        *self == ScaleFormat::F32
    }
}

/// `op: grouped_gemm`'s `layout:` (docs/spec.md, "Grouped GEMMs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupedLayout {
    /// A [M_total, K] with a group per row, B [G, K, N], D [M_total, N].
    Contiguous,
    /// A [G, M_max, K] with a row count per group, B [G, K, N], D [G, M_max, N].
    Masked,
    /// A [M, K_total] and B [K_total, N] split along K per group, D [G, M, N].
    KGrouped,
}

impl GroupedLayout {
    pub fn name(self) -> &'static str {
        match self {
            GroupedLayout::Contiguous => "contiguous",
            GroupedLayout::Masked => "masked",
            GroupedLayout::KGrouped => "k_grouped",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_l2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Every second launch beside a stressor kernel, so that races with a short window show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress: Option<StressMode>,
    /// With `stress`: the stressor's SMs (default: those the kernel's grid leaves free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress_sms: Option<u32>,
}

/// `check.stress` and `--stress` (docs/spec.md, `check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum StressMode {
    /// No stressor.
    None,
    /// Copies streamed through a buffer four times the L2 on a second stream: DRAM congestion.
    Bandwidth,
    /// The L2 overwritten before the launch and thrashed by random lines during it.
    L2,
    /// Random sleeps at the kernel's repro::delay points (repro_trace.cuh): no stressor kernel.
    Jitter,
}

impl StressMode {
    pub fn name(self) -> &'static str {
        match self {
            StressMode::None => "none",
            StressMode::Bandwidth => "bandwidth",
            StressMode::L2 => "l2",
            StressMode::Jitter => "jitter",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSpec {
    /// Default `sm_90a`, or the arch of the `flags_from` compile line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Default `c++17`, or the standard of the `flags_from` compile line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags_from: Option<FlagsFrom>,
}

/// `flags_from: LOG` or `flags_from: { file: LOG, match: PATTERN }`: a build log,
/// compile_commands.json or a file holding one nvcc command line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlagsFrom {
    pub file: String,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_pattern: Option<String>,
}

impl<'de> Deserialize<'de> for FlagsFrom {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            file: String,
            #[serde(rename = "match")]
            match_pattern: Option<String>,
        }
        struct FlagsFromVisitor;
        impl<'de> serde::de::Visitor<'de> for FlagsFromVisitor {
            type Value = FlagsFrom;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a log file path, or { file: PATH, match: PATTERN }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FlagsFrom, E> {
                Ok(FlagsFrom {
                    file: v.to_string(),
                    match_pattern: None,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<FlagsFrom, A::Error> {
                let t = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(FlagsFrom {
                    file: t.file,
                    match_pattern: t.match_pattern,
                })
            }
        }
        deserializer.deserialize_any(FlagsFromVisitor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Hang,
    Fault,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Hang => "hang",
            Outcome::Fault => "fault",
        }
    }
}

/// Verdict classes (docs/cli.md, "Verdict classes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Scale,
    KCoverage,
    RowMapping,
    ColMapping,
    Layout,
    /// An operand (A or B) read from the wrong place: most K slices read zeros or foreign data,
    /// and the identity probe fails in column blocks (B) or row blocks (A). Named by the probe
    /// suite only: it takes the K slice probes to tell from a K loop's defect.
    OperandLayout,
    Boundary,
    Unwritten,
    Nonfinite,
    Nondeterministic,
    Scattered,
    Precision,
    Fault,
    Hang,
    ScaleMapping,
    GroupMapping,
    Mask,
    HeadMapping,
    SoftmaxScale,
    Lse,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Scale => "scale",
            Verdict::KCoverage => "k_coverage",
            Verdict::RowMapping => "row_mapping",
            Verdict::ColMapping => "col_mapping",
            Verdict::Layout => "layout",
            Verdict::OperandLayout => "operand_layout",
            Verdict::Boundary => "boundary",
            Verdict::Unwritten => "unwritten",
            Verdict::Nonfinite => "nonfinite",
            Verdict::Nondeterministic => "nondeterministic",
            Verdict::Scattered => "scattered",
            Verdict::Precision => "precision",
            Verdict::Fault => "fault",
            Verdict::Hang => "hang",
            Verdict::ScaleMapping => "scale_mapping",
            Verdict::GroupMapping => "group_mapping",
            Verdict::Mask => "mask",
            Verdict::HeadMapping => "head_mapping",
            Verdict::SoftmaxScale => "softmax_scale",
            Verdict::Lse => "lse",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ones: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

// Hand-written visitors instead of `#[serde(untagged)]`: untagged enums fail with "data did not
// match any variant", which tells a user nothing. These say what was expected.

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl serde::de::Visitor<'_> for ValueVisitor {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string (a size name or a C++ expression)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom(format!("{v} does not fit a 64-bit integer")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Text(v.to_string()))
            }
            // `template_args: [MyEnum::A, true]`: YAML reads the bool; C++ wants its spelling.
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for InitPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InitVisitor;
        impl<'de> serde::de::Visitor<'de> for InitVisitor {
            type Value = InitPattern;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a generator (ones, zeros, iota, identity, uniform, int_uniform, normal, row_ramp), { file: PATH }, { values: [...] } or { groups: [...], align: N }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<InitPattern, E> {
                Generator::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(InitPattern::Generator)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<InitPattern, A::Error> {
                // One struct with every form's keys, so that a misspelt key is still an error,
                // then exactly one form.
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct InitMap {
                    file: Option<String>,
                    values: Option<Vec<f64>>,
                    groups: Option<Vec<i64>>,
                    align: Option<i64>,
                }
                let m = InitMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let custom = |why: &str| <A::Error as serde::de::Error>::custom(why);
                if m.align.is_some() && m.groups.is_none() {
                    return Err(custom("`align` belongs to `{ groups: [...], align: N }`"));
                }
                match (m.file, m.values, m.groups) {
                    (Some(file), None, None) => Ok(InitPattern::File(FileInit { file })),
                    (None, Some(values), None) => Ok(InitPattern::Values(ValuesInit { values })),
                    (None, None, Some(groups)) => Ok(InitPattern::Groups(GroupsInit {
                        groups,
                        align: m.align.unwrap_or_else(GroupsInit::default_align),
                    })),
                    (None, None, None) => Err(custom(
                        "an init map takes `file`, `values` or `groups` (with `align`)",
                    )),
                    _ => Err(custom(
                        "an init map takes one of `file`, `values` and `groups`, not several",
                    )),
                }
            }
        }
        deserializer.deserialize_any(InitVisitor)
    }
}
