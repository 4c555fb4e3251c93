//! `repro import capture DIR`: the `tensors:` section of a spec from what `repro::capture`
//! (templates/instrument/repro_capture.cuh) wrote: one `manifest.jsonl` line per captured tensor,
//! each with its `.npy` file. Every tensor gets `init: { file: ... }`, so `repro run` replays the
//! production inputs; a capture made through non-packed strides keeps them, so the harness lays
//! the tensor out as production did.
//!
//! The manifest does not say which tensors a kernel writes, nor whether a capture was taken
//! before or after the launch: every record is name, call, file, dtype, shape, strides. So a
//! capture alone gives inputs only (no `reference:`). Told which captured tensors are outputs
//! captured after the launch ([`section_yaml`]), the section marks them `output: true` (no
//! `init`) and adds `reference: { op: file, expected: { D: <D's .npy> }, block: TODO }`: the
//! production outputs become the expected values.

use std::path::Path;

use serde::Deserialize;

use super::skeleton::{Value, BLOCK_TODO};
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
    section_yaml(entries, call, &[], files_at, dir_shown)
}

/// [`tensors_yaml`], with `outputs` naming the captured tensors the kernel writes, each captured
/// after the launch: those get `output: true` instead of an `init`, and a `reference:` of
/// `op: file` follows, its `expected` the outputs' captures (in the output's own dtype, which
/// the harness reads as it reads captured inputs) and its `block` a TODO. With no `outputs`, the tensors alone, as [`tensors_yaml`]. An output name that call
/// `call` did not capture is an error naming the captured ones.
pub fn section_yaml(
    entries: &[Captured],
    call: u32,
    outputs: &[String],
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
    let mut wanted: Vec<&str> = Vec::new();
    for name in outputs {
        if !chosen.iter().any(|e| &e.name == name) {
            let captured: Vec<&str> = chosen.iter().map(|e| e.name.as_str()).collect();
            return Err(format!(
                "no capture of `{name}` at call {call}; call {call} captured {}",
                captured.join(", ")
            ));
        }
        if !wanted.contains(&name.as_str()) {
            wanted.push(name);
        }
    }
    let mut out = format!(
        "# From `repro import capture {dir_shown}`: call {call} of each tensor repro::capture wrote.\n\
         # Sizes are as captured; name them under `sizes:` where the kernel's arguments use them.\n\
         # bf16 and fp8 files hold raw bits (numpy has no such types); the harness reads them as is.\n"
    );
    if !wanted.is_empty() {
        out.push_str(&format!(
            "# Outputs, captured after the launch: {}; their captures are the expected values of\n\
             # `reference: op: file` (capture them where production is right: the last good build, another GPU).\n",
            wanted.join(", ")
        ));
    }
    out.push_str("tensors:\n");
    let files_at = files_at.trim_end_matches('/');
    let file_of = |e: &Captured| {
        if files_at.is_empty() || files_at == "." {
            e.file.clone()
        } else {
            format!("{files_at}/{}", e.file)
        }
    };
    for e in &chosen {
        let strides = if e.strides == row_major(&e.shape) {
            String::new()
        } else {
            format!(", strides: {}", list(&e.strides))
        };
        let role = if wanted.contains(&e.name.as_str()) {
            ", output: true".to_string()
        } else {
            format!(", init: {{ file: {} }}", file_of(e))
        };
        out.push_str(&format!(
            "  {}: {{ dtype: {}, shape: {}{strides}{role} }}\n",
            e.name,
            e.dtype,
            list(&e.shape)
        ));
    }
    if !wanted.is_empty() {
        let expected: Vec<String> = wanted
            .iter()
            .filter_map(|name| chosen.iter().find(|e| e.name == *name))
            .map(|e| format!("{}: {}", e.name, Value::known(file_of(e)).render()))
            .collect();
        out.push_str(&format!(
            "reference:\n  op: file\n  expected: {{ {} }}\n  block: {}\n",
            expected.join(", "),
            Value::todo(BLOCK_TODO).render()
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

    #[test]
    fn outputs_become_the_expected_values_of_a_file_reference() {
        let mut d = entry("D", 0, vec![3], vec![1]);
        d.dtype = "f32".into();
        let entries = vec![entry("X", 0, vec![2, 3], vec![3, 1]), d];
        let yaml = section_yaml(&entries, 0, &["D".into()], "capture", "capture").unwrap();
        assert!(
            yaml.contains("  X: { dtype: bf16, shape: [2, 3], init: { file: capture/X.0.npy } }\n  D: { dtype: f32, shape: [3], output: true }\nreference:\n  op: file\n  expected: { D: capture/D.0.npy }\n  block: \"TODO: "),
            "{yaml}"
        );
        // A bf16 output's capture is its expected values as they are; a name given twice counts once.
        let yaml = section_yaml(&entries, 0, &["X".into(), "X".into()], ".", ".").unwrap();
        assert!(yaml.contains("  expected: { X: X.0.npy }\n"), "{yaml}");
        let err = section_yaml(&entries, 0, &["Y".into()], ".", ".").unwrap_err();
        assert_eq!(err, "no capture of `Y` at call 0; call 0 captured X, D");
        assert_eq!(
            section_yaml(&entries, 0, &[], ".", ".").unwrap(),
            tensors_yaml(&entries, 0, ".", ".").unwrap()
        );
    }
}
