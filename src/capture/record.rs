//! What the injection library (templates/capture/repro_inject.cpp) writes: `session.json`, how
//! the program's run went, and `capture.json`, the one recorded launch. Addresses are hex
//! strings (`"0x7f..."`): JSON numbers lose precision past 2^53.

use std::path::Path;

use serde::Deserialize;

/// `session.json`: rewritten at every change of state and when the program exits.
#[derive(Debug, Clone, Deserialize)]
pub struct Session {
    pub status: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub launches_seen: u64,
    #[serde(default)]
    pub matched: u64,
    #[serde(default)]
    pub kernels: Vec<SeenKernel>,
    #[serde(default)]
    pub refused: Option<Refusal>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SeenKernel {
    pub name: String,
    pub launches: u64,
}

/// `--max-bytes` refused the copy: the buffers the launch reaches.
#[derive(Debug, Clone, Deserialize)]
pub struct Refusal {
    pub total: u64,
    pub max_bytes: u64,
    pub buffers: Vec<RefusedBuffer>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RefusedBuffer {
    pub base: String,
    pub size: u64,
}

/// `capture.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Capture {
    pub kernel: CapturedKernel,
    pub launch_number: u64,
    #[serde(default)]
    pub api: String,
    pub device: CapturedDevice,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u64,
    #[serde(default)]
    pub cluster: Option<[u32; 3]>,
    pub params: CapturedParams,
    #[serde(default)]
    pub pointers: Vec<CapturedPointer>,
    #[serde(default)]
    pub tensor_maps: Vec<CapturedTensorMap>,
    pub buffers: Vec<CapturedBuffer>,
    #[serde(default)]
    pub module: Option<CapturedModule>,
    #[serde(default)]
    pub module_note: Option<String>,
    #[serde(default)]
    pub launch_result: String,
    #[serde(default)]
    pub launch_error: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedKernel {
    pub mangled: String,
    pub demangled: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedDevice {
    pub ordinal: i64,
    pub name: String,
    pub cc: [u32; 2],
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedParams {
    pub file: String,
    pub size: u64,
    pub layout: Vec<ParamSlot>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ParamSlot {
    pub index: usize,
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedPointer {
    pub param: usize,
    /// Byte offset in the parameter bytes.
    pub offset: u64,
    pub buffer: usize,
    pub byte_offset: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedTensorMap {
    pub param: usize,
    pub offset: u64,
    pub kind: String,
    pub data_type: u32,
    pub rank: u32,
    pub buffer: Option<usize>,
    #[serde(default)]
    pub byte_offset: u64,
    pub dims: Vec<u64>,
    pub strides: Vec<u64>,
    #[serde(rename = "box")]
    pub box_dims: Vec<u32>,
    pub element_strides: Vec<u32>,
    pub interleave: u32,
    pub swizzle: u32,
    pub l2_promotion: u32,
    pub oob_fill: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedBuffer {
    pub id: usize,
    pub size: u64,
    #[serde(default)]
    pub managed: bool,
    /// `None` when the copy failed (`error` says why).
    pub before: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    pub after: Option<String>,
    #[serde(default)]
    pub changed_bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedModule {
    pub file: String,
    pub size: u64,
}

/// Reads one of the library's JSON files; `None` when it does not exist.
pub fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "{} is not what repro's injection library writes: {e}",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
