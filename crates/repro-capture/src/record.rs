//! What the injection library (repro_inject.cpp) writes: `session.json`, how
//! the program's run went, and `capture.json`, the one recorded launch, or `window.json`, a
//! window of launches (one launch record each, the allocations they share listed once). Addresses are hex
//! strings (`"0x7f..."`): JSON numbers lose precision past 2^53.

use std::path::{Path, PathBuf};

use crate::file_kind::{read_regular, ReadError};

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
    /// A window's: the launch (from 1) before which it was copied, the first that pointed into it.
    #[serde(default)]
    pub first_launch: usize,
    /// A window's: the launches after which it had changed (from 1).
    #[serde(default)]
    pub written_by: Vec<usize>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CapturedModule {
    pub file: String,
    pub size: u64,
}

/// `window.json`: the launches of a window, each a launch record as `capture.json` holds one
/// (its `buffers` empty: they are the window's, below), in the order they were made.
#[derive(Debug, Clone, Deserialize)]
pub struct Window {
    pub window: WindowBounds,
    pub launches: Vec<Capture>,
    pub buffers: Vec<CapturedBuffer>,
    #[serde(default)]
    pub memory_operations: Vec<MemoryOperation>,
}

/// What asked for the window: `--kernel`, `--launch`, `--launches`, `--through`.
#[derive(Debug, Clone, Deserialize)]
pub struct WindowBounds {
    pub kernel: String,
    pub first: u64,
    #[serde(default)]
    pub launches: Option<u64>,
    #[serde(default)]
    pub through: Option<String>,
}

/// A memset or copy inside the window into an allocation it had already copied: its effect is
/// in the copies after it, but replaying the launches does not make it.
#[derive(Debug, Clone, Deserialize)]
pub struct MemoryOperation {
    pub api: String,
    pub buffer: usize,
    #[serde(default)]
    pub address: String,
    /// How many launches of the window had started before it.
    pub after_launch: u64,
}

impl Window {
    /// Launch `index` (from 0) as a capture of its own: its record with the window's buffers it
    /// points into (ids unchanged), so the one-launch code lays it out.
    pub fn launch(&self, index: usize) -> Capture {
        let mut capture = self.launches[index].clone();
        let used: std::collections::BTreeSet<usize> = capture
            .pointers
            .iter()
            .map(|p| p.buffer)
            .chain(capture.tensor_maps.iter().filter_map(|m| m.buffer))
            .collect();
        capture.buffers = self
            .buffers
            .iter()
            .filter(|b| used.contains(&b.id))
            .cloned()
            .collect();
        capture
    }
}

/// Largest JSON file of the library's read (a record lists a launch's parameters and buffers).
pub const MAX_RECORD_BYTES: u64 = 16 << 20;

/// Reads one of the library's JSON files; `None` when it does not exist. The raw folder is
/// written by the program being captured, so it is read with a bound and never through a link.
pub fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    if path.symlink_metadata().is_err() {
        return Ok(None);
    }
    let text = read_file(path, MAX_RECORD_BYTES)?;
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        format!(
            "{} is not what repro's injection library writes: {e}",
            path.display()
        )
    })
}

/// The file the library's record names `name` in the raw folder `raw`: a path inside it (no
/// `..`, not absolute), which the record, written by the captured program, could otherwise
/// point anywhere.
pub fn raw_file(raw: &Path, name: &str) -> Result<PathBuf, String> {
    let relative = Path::new(name);
    let inside = !name.is_empty()
        && relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        return Err(format!(
            "the capture record names the file {name:?}, which is not inside {}",
            raw.display()
        ));
    }
    Ok(raw.join(relative))
}

/// The whole file at `path`, at most `limit` bytes: a regular file, not a link (the library
/// writes none), never a fifo or a device.
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let cannot = |why: String| format!("cannot read {}: {why}", path.display());
    if path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(cannot(
            "it is a symbolic link, which repro's injection library never writes".into(),
        ));
    }
    read_regular(path, limit).map_err(|e| {
        cannot(match e {
            ReadError::Io(e) => e.to_string(),
            ReadError::NotAFile(what) => format!("it is {what}, not a regular file"),
            ReadError::TooLarge { bytes } => {
                format!("it has {bytes} bytes, more than the {limit} expected")
            }
        })
    })
}

/// Reads a buffer file of the capture, refusing one of the wrong size.
pub fn read_buffer(raw: &Path, file: &str, size: u64) -> Result<Vec<u8>, String> {
    let path = raw_file(raw, file)?;
    let bytes = read_file(&path, size)?;
    if bytes.len() as u64 != size {
        return Err(format!(
            "{} has {} bytes; the capture says {size}",
            path.display(),
            bytes.len()
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captured program writes the raw folder: a record naming a file outside it, a link, a
    /// fifo or a device is refused without reading it.
    #[test]
    fn raw_files_stay_in_the_raw_folder_and_are_read_with_a_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let raw = tmp.path();
        for name in ["../x.bin", "/etc/passwd", "buffers/../../x", ""] {
            assert!(raw_file(raw, name).is_err(), "{name}");
        }
        assert_eq!(
            raw_file(raw, "buffers/b0.before.bin").unwrap(),
            raw.join("buffers/b0.before.bin")
        );
        std::fs::write(raw.join("params.bin"), [1u8; 16]).unwrap();
        assert_eq!(read_file(&raw.join("params.bin"), 16).unwrap(), [1u8; 16]);
        assert!(read_file(&raw.join("params.bin"), 15)
            .unwrap_err()
            .contains("more than the 15 expected"));
        std::os::unix::fs::symlink("/dev/zero", raw.join("zero.bin")).unwrap();
        assert!(read_file(&raw.join("zero.bin"), 16)
            .unwrap_err()
            .contains("symbolic link"));
        let made = std::process::Command::new("mkfifo")
            .arg(raw.join("capture.json"))
            .status();
        assert!(made.unwrap().success());
        let err = read::<Capture>(&raw.join("capture.json")).unwrap_err();
        assert!(err.contains("a fifo"), "{err}");
        assert!(read::<Capture>(&raw.join("session.json"))
            .unwrap()
            .is_none());
    }
}
