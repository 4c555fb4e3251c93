//! `capture:` as written: where a spec written by `repro capture` came from, and production's
//! outputs before and after its launch.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

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
