//! The spec after validation: every name resolved, every shape a number, every default filled.
//! Generation and the build read only this.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::dtype::DType;
use super::model::{ExpectSpec, Generator, Lifetime, Spec};

#[derive(Debug, Clone)]
pub struct ResolvedSpec {
    pub name: String,
    /// `about:`, verbatim (a comment in harness.cu, the bundle's README).
    pub about: String,
    /// `source.includes`, verbatim, in order.
    pub includes: Vec<String>,
    /// `source.prelude`, verbatim.
    pub prelude: Option<String>,
    /// `expect:`, what the spec's author says the runs give.
    pub expect: Option<ExpectSpec>,
    /// This spec as a document with every resolved value spelled out (document.rs): what the
    /// artifact's spec.yaml holds, its paths made relative to the artifact.
    pub document: Spec,
    /// The spec file, as the user named it.
    pub path: PathBuf,
    /// The folder relative paths in the spec are resolved against.
    pub dir: PathBuf,
    pub sizes: IndexMap<String, i64>,
    pub tensors: Vec<TensorSpecResolved>,
    /// What runs for one call, in order: the one `kernel:`, or every entry of `launches:`.
    /// Never empty.
    pub launches: Vec<KernelLaunch>,
    pub tma: Vec<TmaDescriptor>,
    /// `trace:` stages as (stage index, name, role).
    pub trace: Vec<(u32, String, crate::spec::model::TraceRole)>,
    pub reference: Reference,
    pub check: CheckSettings,
    pub build: BuildSettings,
    /// Absolute include directories: the spec's, then those of a `flags_from` compile line.
    pub include_dirs: Vec<PathBuf>,
    /// The CUTLASS root (holding include/ and tools/util/include/) when the spec needs CUTLASS.
    pub cutlass: Option<PathBuf>,
    /// `capture:` of a spec `repro capture` wrote.
    pub capture: Option<CaptureResolved>,
    /// Things worth saying that do not stop generation (dropped production flags, missing
    /// include directories of a compile line...). Printed by every command that loads the spec.
    pub warnings: Vec<String>,
}

impl ResolvedSpec {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tensor(&self, index: usize) -> &TensorSpecResolved {
        &self.tensors[index]
    }

    /// The first launch: the only one unless the spec gives `launches:`.
    pub fn kernel(&self) -> &KernelLaunch {
        &self.launches[0]
    }

    /// An operator of several kernels (`launches:`), rather than one `kernel:`.
    pub fn is_sequence(&self) -> bool {
        self.document.kernel.is_none()
    }
}

#[derive(Debug, Clone)]
pub struct TensorSpecResolved {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// The shape as written (`[M, K]`), for comments and reports.
    pub shape_text: Vec<String>,
    /// In elements.
    pub strides: Vec<i64>,
    /// Explicit `strides:` as written (expressions), when the spec gives them.
    pub strides_text: Option<Vec<String>>,
    /// `layout: col_major` (packed strides with the last two dimensions swapped).
    pub col_major: bool,
    pub output: bool,
    /// `intermediate: true`: the operator's own state, made from `init` before every call or
    /// once per check; never an input of the reference, never compared.
    pub intermediate: Option<Lifetime>,
    /// An intermediate's own reference (`reference: { source, function }` or `{ file }`), for
    /// naming the first launch whose result is wrong; only intermediates have one.
    pub intermediate_reference: Option<IntermediateReference>,
    pub init: InitResolved,
}

/// An intermediate's own reference: what it should hold once the launch that produces it has run.
#[derive(Debug, Clone, PartialEq)]
pub enum IntermediateReference {
    /// A host function of the user's that is given every input (`repro::In`, in the spec's
    /// order) and then the intermediate (`repro::Out`); compiled into reference.cu.
    Function {
        /// The header, absolute.
        source: PathBuf,
        function: String,
    },
    /// A `.npy` (absolute path) holding the intermediate's values for the spec's own inputs
    /// only: the harness judges nothing with it when a run changes the inputs (`--ones`...).
    File(PathBuf),
}

impl IntermediateReference {
    /// The function reference's header and function; `None` for a file.
    pub fn function(&self) -> Option<(&Path, &str)> {
        match self {
            IntermediateReference::Function { source, function } => {
                Some((source.as_path(), function.as_str()))
            }
            IntermediateReference::File(_) => None,
        }
    }
}

impl TensorSpecResolved {
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum InitSource {
    Generator(Generator),
    /// Absolute path of a `.npy` or `.bin` file.
    File(PathBuf),
    /// Every element's value, in logical row-major order.
    Values(Vec<f64>),
    /// A contiguous group index: each group's rows, padded with -1 to a multiple of `align`.
    Groups {
        rows: Vec<i64>,
        align: i64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct InitResolved {
    pub source: InitSource,
    /// range lo / mean
    pub p0: f64,
    /// range hi / std
    pub p1: f64,
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum KernelArg {
    /// A tensor, passed as a typed device pointer.
    Tensor(usize),
    /// A named size, passed as `int`.
    Size(String),
    /// A `tma:` descriptor, passed as a `CUtensorMap` by value.
    Tma(usize),
    /// Verbatim C++.
    Expr(String),
}

/// A `tma:` entry checked against the hardware rules, in the driver's terms: dimensions
/// innermost first (the tensor's dimensions ordered by stride), strides in bytes.
#[derive(Debug, Clone)]
pub struct TmaDescriptor {
    pub name: String,
    pub tensor: usize,
    /// `CU_TENSOR_MAP_DATA_TYPE_*`.
    pub data_type: &'static str,
    /// The tensor's dimension behind each driver dimension (innermost first).
    pub order: Vec<usize>,
    pub dims: Vec<i64>,
    /// Bytes between consecutive entries of driver dimensions 1.. (rank - 1 values).
    pub strides_bytes: Vec<i64>,
    pub box_dims: Vec<i64>,
    pub element_strides: Vec<i64>,
    pub swizzle: crate::spec::model::TmaSwizzle,
    pub interleave: crate::spec::model::TmaInterleave,
    pub l2_promotion: crate::spec::model::TmaL2Promotion,
    pub oob_fill: crate::spec::model::TmaOobFill,
}

/// How the harness launches the kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchKind {
    /// A `__global__` function, through cudaLaunchKernelEx with the spec's grid/block/cluster/smem.
    Global,
    /// A `__device__` function (template), called from a `__global__` entry the harness
    /// generates; launched like `Global`.
    Device,
    /// A CUTLASS 3.x `GemmUniversal` type, through CUTLASS's `GemmUniversalAdapter`.
    Cutlass3 { gemm: String },
    /// A captured module's machine code and parameter bytes (`repro capture`); `name` is the
    /// mangled symbol.
    Replay(ReplayLaunch),
}

/// `kind: replay`: what the harness loads and how it rewrites the captured parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayLaunch {
    /// Absolute paths.
    pub cubin: PathBuf,
    pub params: PathBuf,
    /// The parameter bytes' length, when the file could be read.
    pub params_size: u64,
    pub relocations: Vec<Relocation>,
}

/// At byte `at` of the parameters: the address of byte `offset` of tensor `tensor`, or a
/// CUtensorMap encoded over that address.
#[derive(Debug, Clone, PartialEq)]
pub struct Relocation {
    pub at: u64,
    pub tensor: usize,
    pub offset: u64,
    pub tensor_map: Option<crate::spec::model::TensorMapSpec>,
}

/// `capture:`: production's outputs before and after its launch (absolute paths).
#[derive(Debug, Clone, Default)]
pub struct CaptureResolved {
    pub before: Vec<(usize, PathBuf)>,
    pub after: Vec<(usize, PathBuf)>,
}

#[derive(Debug, Clone)]
pub struct KernelLaunch {
    pub kind: LaunchKind,
    /// The function (global) or kernel type (cutlass3).
    pub name: String,
    pub template_args: Vec<String>,
    pub args: Vec<KernelArg>,
    pub setup: Option<String>,
    /// C++ expressions.
    pub grid: [String; 3],
    pub block: [String; 3],
    pub cluster: Option<[String; 3]>,
    pub smem: String,
}

impl KernelLaunch {
    /// `name<targs>` as the harness names the instantiation.
    pub fn instantiation(&self) -> String {
        if self.template_args.is_empty() {
            self.name.clone()
        } else {
            format!("{}<{}>", self.name, self.template_args.join(", "))
        }
    }
}

/// What the kernel's outputs are compared with (docs/spec.md, `reference`).
#[derive(Debug, Clone)]
pub enum Reference {
    /// `op: gemm` and `op: grouped_gemm`: the fp64 GEMM of the runtime, on the host or the device.
    Gemm(ReferenceGemm),
    /// `op: custom`: the user's host C++ function, in its own translation unit.
    Custom(ReferenceCustom),
    /// `op: file`: expected outputs saved as `.npy`.
    File(ReferenceFile),
    /// `op: attention` and `op: attention_backward`: the runtime's fp64 attention forward or
    /// backward pass, on the host.
    Attention(ReferenceAttention),
}

impl Reference {
    /// The GEMM, for the ops that are one.
    pub fn gemm(&self) -> Option<&ReferenceGemm> {
        match self {
            Reference::Gemm(g) => Some(g),
            _ => None,
        }
    }

    /// The outputs the reference judges, in the spec's tensor order.
    pub fn outputs(&self) -> Vec<usize> {
        match self {
            Reference::Gemm(g) => vec![g.out],
            Reference::Custom(c) => c.outputs.clone(),
            Reference::File(f) => f.expected.iter().map(|(i, _)| *i).collect(),
            Reference::Attention(a) => {
                let mut outputs: Vec<usize> = match a.backward {
                    Some(g) => vec![g.dq, g.dk, g.dv],
                    None => std::iter::once(a.out).chain(a.lse).collect(),
                };
                outputs.sort_unstable();
                outputs
            }
        }
    }

    /// The unit errors are localized by in the first output: the GEMM's output tile, or the
    /// custom op's `block` (empty: none given).
    pub fn block(&self) -> Vec<i64> {
        match self {
            Reference::Gemm(g) => vec![g.tile_m, g.tile_n],
            Reference::Custom(c) => c.block.clone(),
            Reference::File(f) => f.block.clone(),
            Reference::Attention(a) => a.block.clone(),
        }
    }

    /// `reference.op` as written.
    pub fn op(&self) -> &'static str {
        match self {
            Reference::Gemm(g) if g.grouped.is_some() => "grouped_gemm",
            Reference::Gemm(_) => "gemm",
            Reference::Custom(_) => "custom",
            Reference::File(_) => "file",
            Reference::Attention(a) if a.backward.is_some() => "attention_backward",
            Reference::Attention(_) => "attention",
        }
    }
}

/// `op: custom`: `function` in the header `source` computes every output from the inputs.
#[derive(Debug, Clone)]
pub struct ReferenceCustom {
    /// The header, absolute.
    pub source: PathBuf,
    pub function: String,
    /// Every tensor marked `output: true`, in the spec's order.
    pub outputs: Vec<usize>,
    /// `reference.block`, in the first output's index order (empty: not given).
    pub block: Vec<i64>,
    /// `reference.upstream`: each output that is computed from other outputs, with them (tensor
    /// indices, as written); no output is its own upstream, directly or through others.
    pub upstream: Vec<(usize, Vec<usize>)>,
}

/// `op: file`: each output's expected values in a `.npy` (absolute paths).
#[derive(Debug, Clone)]
pub struct ReferenceFile {
    pub expected: Vec<(usize, PathBuf)>,
    pub block: Vec<i64>,
}

/// `op: attention`: tensor indices, the mask and the scale (None: 1 / sqrt(head dim)).
#[derive(Debug, Clone)]
pub struct ReferenceAttention {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub out: usize,
    pub lse: Option<usize>,
    pub cu_seqlens_q: Option<usize>,
    pub cu_seqlens_k: Option<usize>,
    pub causal: crate::spec::model::CausalMask,
    pub softmax_scale: Option<f64>,
    pub block: Vec<i64>,
    /// `op: attention_backward`: `out` is then the forward's output, an input.
    pub backward: Option<AttentionGradients>,
}

/// `op: attention_backward`'s other tensors: the output's gradient in, q's, k's and v's out.
#[derive(Debug, Clone, Copy)]
pub struct AttentionGradients {
    pub d_out: usize,
    pub dq: usize,
    pub dk: usize,
    pub dv: usize,
}

#[derive(Debug, Clone)]
pub struct ReferenceGemm {
    pub a: usize,
    pub b: usize,
    pub out: usize,
    pub c: Option<usize>,
    pub bias: Option<usize>,
    /// `scale_a` / `scale_b`: a scaled GEMM (docs/spec.md, "Scaled GEMMs").
    pub scale_a: Option<ScaleResolved>,
    pub scale_b: Option<ScaleResolved>,
    /// `op: grouped_gemm`. Then `l` is the group count G, `m` A's rows (M_total, M_max or M) and
    /// `k` A's K (K_total for k_grouped).
    pub grouped: Option<GroupedResolved>,
    pub alpha: f64,
    pub beta: f64,
    /// `accumulate: true`: the kernel adds into `out`, which the harness fills with `c` before
    /// each launch.
    pub accumulate: bool,
    pub batched: bool,
    pub l: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub tile_m: i64,
    pub tile_n: i64,
    /// The kernel's K tile, when the spec gives one (`tile: [m, n, k]`): the probes' K slices.
    pub tile_k: Option<i64>,
    pub provider: crate::spec::model::ReferenceProvider,
}

/// A scale operand: `tensor` holds one scale per `block` of its operand.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleResolved {
    pub tensor: usize,
    pub block: [i64; 2],
    pub format: crate::spec::model::ScaleFormat,
    /// ue8m0 in an i32 tensor: four K blocks per element.
    pub packed: bool,
}

/// A grouped GEMM's layout and the tensor that describes its groups (group_index, masked_m or
/// k_sizes).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedResolved {
    pub layout: crate::spec::model::GroupedLayout,
    pub metadata: usize,
}

#[derive(Debug, Clone)]
pub struct CheckSettings {
    /// None: the harness picks the default for the output dtype.
    pub rel_l2: Option<f64>,
    pub rtol: Option<f64>,
    pub atol: Option<f64>,
    pub repeat: u32,
    pub timeout: f64,
}

#[derive(Debug, Clone)]
pub struct BuildSettings {
    pub arch: String,
    pub cc_major: u32,
    pub cc_minor: u32,
    /// `sm_90a`-style targets run only on exactly that compute capability.
    pub arch_specific: bool,
    pub std: String,
    /// Every production flag, in order (the `flags_from` line's, then `build.flags`).
    pub flags: Vec<String>,
    /// The same flags grouped by where they came from, for build.sh's comments.
    pub flag_groups: Vec<FlagGroup>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlagGroup {
    /// e.g. `build.flags` or `build.flags_from: logs/build.log:42 (csrc/gemm.cu)`.
    pub origin: String,
    pub flags: Vec<String>,
}
