//! `repro import capture DIR`: the `tensors:` section of a spec from what `repro::capture`
//! (templates/instrument/repro_capture.cuh) wrote: one `manifest.jsonl` line per captured tensor,
//! each with its `.npy` file. Every tensor gets `init: { file: ... }`, so `repro run` replays the
//! production inputs; a capture made through non-packed strides keeps them, so the harness lays
//! the tensor out as production did.

use std::path::Path;

use serde::Deserialize;

use crate::spec::dtype::DType;

/// One line of `manifest.jsonl`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Captured {
    pub name: String,
    pub call: u32,
    pub file: String,
    pub dtype: String,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    /// The npy descr the data was written with (`<u2` for bf16: raw bits).
    pub npy: String,
}

/// Reads the manifest; a line that does not parse is an error naming the file and the line.
pub fn read_manifest(dir: &Path) -> Result<Vec<Captured>, String> {
    let path = dir.join("manifest.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {}: {e} (is this a REPRO_CAPTURE_DIR?)",
            path.display()
        )
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: Captured = serde_json::from_str(line)
            .map_err(|e| format!("{}:{}: not a capture record: {e}", path.display(), i + 1))?;
        if DType::from_name(&entry.dtype).is_none() {
            return Err(format!(
                "{}:{}: dtype `{}` is not one repro knows",
                path.display(),
                i + 1,
                entry.dtype
            ));
        }
        if entry.shape.is_empty() || entry.shape.len() != entry.strides.len() {
            return Err(format!(
                "{}:{}: `{}` has {} dimensions and {} strides",
                path.display(),
                i + 1,
                entry.name,
                entry.shape.len(),
                entry.strides.len()
            ));
        }
        out.push(entry);
    }
    if out.is_empty() {
        return Err(format!("{} lists no captures", path.display()));
    }
    Ok(out)
}

/// Packed row-major strides for `shape`.
fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1; shape.len()];
    for d in (1..shape.len()).rev() {
        strides[d - 1] = strides[d] * shape[d];
    }
    strides
}

fn list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The `tensors:` YAML for call `call` of every captured name, with files at `files_at` (the
/// capture folder as the spec will see it, relative to the spec's folder).
pub fn tensors_yaml(
    entries: &[Captured],
    call: u32,
    files_at: &str,
    dir_shown: &str,
) -> Result<String, String> {
    let chosen: Vec<&Captured> = entries.iter().filter(|e| e.call == call).collect();
    if chosen.is_empty() {
        let calls: std::collections::BTreeSet<u32> = entries.iter().map(|e| e.call).collect();
        return Err(format!(
            "no capture has call {call}; the manifest holds calls {}",
            calls
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut out = format!(
        "# From `repro import capture {dir_shown}`: call {call} of each tensor repro::capture wrote.\n\
         # Sizes are as captured; name them under `sizes:` where the kernel's arguments use them.\n\
         # bf16 and fp8 files hold raw bits (numpy has no such types); the harness reads them as is.\n\
         tensors:\n"
    );
    let files_at = files_at.trim_end_matches('/');
    for e in chosen {
        let strides = if e.strides == row_major(&e.shape) {
            String::new()
        } else {
            format!(", strides: {}", list(&e.strides))
        };
        let file = if files_at.is_empty() || files_at == "." {
            e.file.clone()
        } else {
            format!("{files_at}/{}", e.file)
        };
        out.push_str(&format!(
            "  {}: {{ dtype: {}, shape: {}{strides}, init: {{ file: {file} }} }}\n",
            e.name,
            e.dtype,
            list(&e.shape)
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, call: u32, shape: Vec<i64>, strides: Vec<i64>) -> Captured {
        Captured {
            name: name.into(),
            call,
            file: format!("{name}.{call}.npy"),
            dtype: "bf16".into(),
            shape,
            strides,
            npy: "<u2".into(),
        }
    }

    #[test]
    fn packed_tensors_need_no_strides_and_views_keep_theirs() {
        let entries = vec![
            entry("A", 0, vec![5, 3], vec![3, 1]),
            entry("B", 0, vec![3, 4], vec![1, 3]),
            entry("A", 1, vec![5, 3], vec![3, 1]),
        ];
        let yaml = tensors_yaml(&entries, 0, "capture", "capture").unwrap();
        assert!(
            yaml.contains("  A: { dtype: bf16, shape: [5, 3], init: { file: capture/A.0.npy } }\n"),
            "{yaml}"
        );
        assert!(yaml.contains("  B: { dtype: bf16, shape: [3, 4], strides: [1, 3], init: { file: capture/B.0.npy } }\n"), "{yaml}");
        assert!(!yaml.contains("A.1.npy"));
        let err = tensors_yaml(&entries, 7, ".", ".").unwrap_err();
        assert_eq!(err, "no capture has call 7; the manifest holds calls 0, 1");
    }
}
