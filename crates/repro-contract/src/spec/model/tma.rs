//! `tma:` as written: a tiled TMA descriptor over a tensor, and the CUtensorMap enums
//! (swizzle, interleave, L2 promotion, out-of-bounds fill) with their names and C++ spellings,
//! shared with the encoded tensor maps a captured launch relocates (`kernel.relocate`).

use serde::{Deserialize, Serialize};

use super::tensors::Value;

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
