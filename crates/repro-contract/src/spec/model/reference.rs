//! `reference:` as written: the op the output is checked against and its operands, where the
//! fp64 reference runs, and each op's own fields (scaled GEMMs' scales, grouped GEMMs' layout,
//! attention's mask), one struct for every op.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

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
    /// `op: gemm` and `op: grouped_gemm`: the kernel adds its product into `out`, which starts
    /// as `c` (copied into it before each launch, where outputs are otherwise poisoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulate: Option<bool>,
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
    /// `op: custom`: the outputs each output is computed from (`{ Y: [Mean, Rstd] }`): a wrong
    /// output is also judged against its reference computed from the kernel's own upstream
    /// outputs, which tells the first wrong output from those that only follow from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<IndexMap<String, Vec<String>>>,
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

impl ReferenceSpec {
    /// The outputs an op with named operands judges (`gemm` and `grouped_gemm`: `out`;
    /// `attention`: `out` and `lse`; `attention_backward`: `dq`, `dk`, `dv`); `None` for the ops
    /// that judge every tensor marked `output: true` (`custom`, `file`).
    pub fn named_outputs(&self) -> Option<Vec<&str>> {
        fn named<'a>(fields: &[Option<&'a String>]) -> Vec<&'a str> {
            fields
                .iter()
                .flatten()
                .map(|s| s.as_str())
                .filter(|s| !s.is_empty())
                .collect()
        }
        match self.op.as_str() {
            "gemm" | "grouped_gemm" => Some(named(&[Some(&self.out)])),
            "attention" => Some(named(&[Some(&self.out), self.lse.as_ref()])),
            "attention_backward" => Some(named(&[
                self.dq.as_ref(),
                self.dk.as_ref(),
                self.dv.as_ref(),
            ])),
            _ => None,
        }
    }
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
    /// k_grouped with each group's operands stored as blocks (DeepGEMM's k-grouped weight
    /// gradient): A and B flat, group g's A an [M, k_g] row-major block at M * (the K before
    /// g), its B an [N, k_g] block at N * (the K before g); D [G, M, N].
    KGroupedBlocks,
}

impl GroupedLayout {
    /// Whether the groups split K (one A and one B, a K range per group, D [G, M, N]).
    pub fn splits_k(self) -> bool {
        matches!(
            self,
            GroupedLayout::KGrouped | GroupedLayout::KGroupedBlocks
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupedLayout::Contiguous => "contiguous",
            GroupedLayout::Masked => "masked",
            GroupedLayout::KGrouped => "k_grouped",
            GroupedLayout::KGroupedBlocks => "k_grouped_blocks",
        }
    }
}
