//! `capture:` as written: where a spec written by `repro capture` came from, and production's
//! outputs before and after its launch (or its window of launches).

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
    /// A window of launches (`repro capture --launches`/`--through`): what asked for it and each
    /// launch's kernel. Informative, as `command` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<CaptureWindow>,
    /// Each output's contents before production's launch (a `.npy`): the run starts its
    /// outputs from these instead of the poison, as production did.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub before: IndexMap<String, String>,
    /// Each output as production's launch left it: the first launch is compared bit for bit.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub after: IndexMap<String, String>,
}

/// `capture.window`: the launches `repro capture` recorded as the spec's `launches:`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureWindow {
    /// `--kernel`: the pattern whose `capture.launch`-th match opened the window.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
    /// `--launches`: how many launches it held (with `through`, the most it could).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<u64>,
    /// `--through`: the pattern of the launch that closed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
    /// Each launch's demangled kernel name, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<String>,
}
