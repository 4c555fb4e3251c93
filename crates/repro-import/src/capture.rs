//! `repro import capture DIR`: the `tensors:` section of a spec from what `repro::capture`
//! (crates/repro-contract/instrument/repro_capture.cuh) wrote: one `manifest.jsonl` line per captured tensor,
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
//!
//! A capture folder may come from another machine or another person, so it is read as hostile
//! (docs/cli.md, `repro import capture`): every record's name, dtype, shape and strides are
//! checked as the spec loader checks a tensor's, its file must be a file of the folder itself
//! (a plain name, a regular file, no link out) whose size and `.npy` header match the record, and
//! the manifest is read with a bound. What is written is quoted by the one YAML writer, so a
//! record cannot add a key or a file the manifest did not name as a capture.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::skeleton::{Value, BLOCK_TODO};
use crate::file_kind::{describe, mib, read_regular, ReadError};
use crate::inputs::npy::HeaderError;
use crate::spec::dtype::DType;
use crate::spec::names::{identifier_problem, is_cpp_identifier};
use crate::spec::validate::MAX_TENSOR_BYTES;
use crate::spec::yaml::{comment, scalar, Context};

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

/// The manifest's name in a capture folder.
pub const MANIFEST: &str = "manifest.jsonl";

/// Largest manifest read: a record is about 120 bytes, so this is over 100,000 captures, and
/// `/dev/zero` or a huge file named by mistake costs nothing.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Reads the manifest of the capture folder `dir` and checks every record and its file. The
/// first problem is an error naming the manifest, the line, and what to do.
pub fn read_manifest(dir: &Path) -> Result<Vec<Captured>, String> {
    let folder = Folder::open(dir)?;
    let path = dir.join(MANIFEST);
    let bytes = folder
        .regular_file(MANIFEST)
        .and_then(|_| read_regular(&path, MAX_MANIFEST_BYTES).map_err(read_problem))
        .map_err(|why| format!("{}: {why} (is this a REPRO_CAPTURE_DIR?)", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "{}: not UTF-8 text; repro::capture writes one JSON record per line",
            path.display()
        )
    })?;
    let mut out = Vec::new();
    let mut lines: HashMap<(String, u32), usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let entry: Captured =
            serde_json::from_str(line).map_err(|e| format!("{at}: not a capture record: {e}"))?;
        check_record(&entry).map_err(|why| format!("{at}: {why}"))?;
        folder
            .check_data(&entry)
            .map_err(|why| format!("{at}: {why}"))?;
        if let Some(first) = lines.insert((entry.name.clone(), entry.call), i + 1) {
            return Err(format!(
                "{at}: `{}` call {} is captured twice (first at line {first}); keep one record per tensor and call",
                entry.name, entry.call
            ));
        }
        out.push(entry);
    }
    if out.is_empty() {
        return Err(format!("{} lists no captures", path.display()));
    }
    Ok(out)
}

/// What a [`read_regular`] refusal says about a file.
fn read_problem(error: ReadError) -> String {
    match error {
        ReadError::Io(e) => format!("cannot be read: {e}"),
        ReadError::NotAFile(what) => format!("is {what}, not a regular file"),
        ReadError::TooLarge { bytes } => format!(
            "is larger than the {} a manifest may have ({})",
            mib(MAX_MANIFEST_BYTES),
            mib(bytes)
        ),
    }
}

/// A record's name, dtype, shape and strides, checked as the spec loader checks a tensor's
/// (docs/spec.md, `tensors`), since they become one.
fn check_record(e: &Captured) -> Result<(), String> {
    let fix_name = "the name becomes the spec's tensor name: capture the tensor under a C++ identifier (repro::capture's name argument)";
    if !is_cpp_identifier(&e.name) {
        return Err(format!(
            "the name {:?} cannot name a tensor: it is not a C++ identifier (letters, digits and `_`, not starting with a digit); {fix_name}",
            e.name
        ));
    }
    if let Some(problem) = identifier_problem(&e.name) {
        return Err(format!(
            "the name cannot name a tensor: {problem}; {fix_name}"
        ));
    }
    let name = &e.name;
    let Some(dtype) = DType::from_name(&e.dtype) else {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        return Err(format!(
            "dtype {:?} of `{name}` is not one repro knows (one of {})",
            e.dtype,
            known.join(", ")
        ));
    };
    if !(1..=4).contains(&e.shape.len()) || e.shape.len() != e.strides.len() {
        return Err(format!(
            "`{name}` has {} dimensions and {} strides; a tensor has 1 to 4 dimensions, and a stride for each",
            e.shape.len(),
            e.strides.len()
        ));
    }
    if e.shape.iter().any(|&d| d <= 0) {
        return Err(format!(
            "`{name}` has shape {}; dimensions must be positive (a capture holds at least one element)",
            list(&e.shape)
        ));
    }
    if let Some(s) = e.strides.iter().find(|&&s| s <= 0) {
        return Err(format!(
            "`{name}` has strides {}; stride {s} is not a positive element count",
            list(&e.strides)
        ));
    }
    let too_big = || {
        format!(
            "`{name}` of shape {} and strides {} spans more than {} TiB; no GPU holds it: check the record",
            list(&e.shape),
            list(&e.strides),
            MAX_TENSOR_BYTES >> 40
        )
    };
    data_bytes(e, dtype).ok_or_else(too_big)?;
    let last = e
        .shape
        .iter()
        .zip(&e.strides)
        .try_fold(0i64, |sum, (&d, &s)| {
            sum.checked_add((d - 1).checked_mul(s)?)
        });
    let span = last.and_then(|l| (l + 1).checked_mul(dtype.bytes() as i64));
    if span.map_or(true, |b| b > MAX_TENSOR_BYTES) {
        return Err(too_big());
    }
    Ok(())
}

/// The bytes of `e`'s logical elements, when they fit the spec's bound.
fn data_bytes(e: &Captured, dtype: DType) -> Option<u64> {
    let elements = e.shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d))?;
    let bytes = elements.checked_mul(dtype.bytes() as i64)?;
    (bytes <= MAX_TENSOR_BYTES).then_some(bytes as u64)
}

/// Whether `name` is a file name alone: no folder, no `..`, nothing a path could hide.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// The capture folder: files are looked up in it and never followed out of it.
struct Folder {
    dir: PathBuf,
    /// The folder with every link resolved: where a link's target must lie.
    canonical: PathBuf,
}

impl Folder {
    fn open(dir: &Path) -> Result<Folder, String> {
        let canonical = std::fs::canonicalize(dir).map_err(|e| {
            format!(
                "cannot read {}: {e} (is this a REPRO_CAPTURE_DIR?)",
                dir.join(MANIFEST).display()
            )
        })?;
        if !canonical.is_dir() {
            return Err(format!(
                "{} is not a folder; give the REPRO_CAPTURE_DIR repro::capture wrote into",
                dir.display()
            ));
        }
        Ok(Folder {
            dir: dir.to_path_buf(),
            canonical,
        })
    }

    /// `name` in the folder, and its size: a regular file, reached through no link that leads
    /// out of the folder. Else what it is, in words.
    fn regular_file(&self, name: &str) -> Result<(PathBuf, u64), String> {
        let path = self.dir.join(name);
        let own = std::fs::symlink_metadata(&path).map_err(|e| format!("cannot be read: {e}"))?;
        if own.file_type().is_symlink() {
            let target = std::fs::canonicalize(&path)
                .map_err(|e| format!("is a symbolic link that leads nowhere ({e})"))?;
            if target.parent() != Some(self.canonical.as_path()) {
                return Err(format!(
                    "is a symbolic link out of the capture folder (to {}); copy the file into the folder",
                    target.display()
                ));
            }
        }
        let meta = std::fs::metadata(&path).map_err(|e| format!("cannot be read: {e}"))?;
        if !meta.is_file() {
            return Err(format!(
                "is {}, not a regular file; a capture is a .npy or .bin file",
                describe(&meta)
            ));
        }
        Ok((path, meta.len()))
    }

    /// `e`'s file: a plain `.npy` or `.bin` name in the folder, a regular file whose size (and
    /// `.npy` header) match the record. Read no further than the header.
    fn check_data(&self, e: &Captured) -> Result<(), String> {
        let file = &e.file;
        let name = &e.name;
        if !is_plain_file_name(file) {
            return Err(format!(
                "file {file:?} of `{name}` is not a file name: the manifest names each capture's file by its name alone (`{name}.{}.npy`), beside {MANIFEST}",
                e.call
            ));
        }
        let npy = file.ends_with(".npy");
        if !npy && !file.ends_with(".bin") {
            return Err(format!(
                "file {file:?} of `{name}` is neither .npy nor .bin, the two a spec's `init: {{ file }}` takes"
            ));
        }
        let (path, size) = self
            .regular_file(file)
            .map_err(|why| format!("file {file:?} of `{name}` {why}"))?;
        let dtype = DType::from_name(&e.dtype).expect("checked by check_record");
        let data = data_bytes(e, dtype).expect("checked by check_record");
        if !npy {
            if size != data {
                return Err(format!(
                    "file {file:?} of `{name}` has {size} bytes; {} {} elements of shape {} take {data}",
                    e.dtype,
                    data / dtype.bytes() as u64,
                    list(&e.shape)
                ));
            }
            return Ok(());
        }
        let header = crate::inputs::npy::read_header(&path).map_err(|error| {
            let why = match error {
                HeaderError::Unreadable(why) => why,
                HeaderError::NotNpy(why) => format!("not a .npy file ({why})"),
            };
            format!("file {file:?} of `{name}`: {why}")
        })?;
        if header.fortran_order {
            return Err(format!(
                "file {file:?} of `{name}`: its .npy is in Fortran order; repro::capture writes logical row-major order"
            ));
        }
        let mismatch = |what: String| {
            Err(format!(
                "file {file:?} of `{name}`: {what}; capture the tensor again, or correct its record"
            ))
        };
        if !npy_descr_accepted(dtype, &header.descr) {
            return mismatch(format!(
                "its .npy holds {:?} elements, not {} (written as {:?})",
                header.descr,
                e.dtype,
                npy_descr(dtype)
            ));
        }
        if header.shape != e.shape {
            return mismatch(format!(
                "its .npy has shape {}, the record {}",
                list(&header.shape),
                list(&e.shape)
            ));
        }
        if size.checked_sub(header.data_offset) != Some(data) {
            return mismatch(format!(
                "its .npy holds {} bytes of data after its header; shape {} of {} takes {data}",
                size.saturating_sub(header.data_offset),
                list(&e.shape),
                e.dtype
            ));
        }
        Ok(())
    }
}

/// The descr repro and repro_capture.cuh write for `dtype` (crates/repro-contract/runtime/src/inputs/npy.cuh has the same
/// table). Here, below the capture that writes with it (capture/write.rs), because this reader
/// checks against it.
pub fn npy_descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "<f8",
        DType::F32 | DType::Tf32 => "<f4",
        DType::F16 => "<f2",
        DType::Bf16 => "<u2",
        DType::E4m3 | DType::E5m2 | DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
    }
}

/// Whether a `.npy` of `descr` holds `dtype`'s bytes, as the harness decides
/// (crates/repro-contract/runtime/src/inputs/npy.cuh, `npy_descr_accepted`): the descr repro writes, or a raw-bit
/// carrier for bf16 and fp8; a one-byte type's byte order does not matter.
fn npy_descr_accepted(dtype: DType, descr: &str) -> bool {
    let mut descr = descr.to_string();
    if descr.len() == 3
        && descr.ends_with('1')
        && (descr.starts_with('<') || descr.starts_with('='))
    {
        descr.replace_range(..1, "|");
    }
    let alternatives: &[&str] = match dtype {
        DType::Bf16 => &["|V2", "<V2", "<i2"],
        DType::E4m3 | DType::E5m2 => &["|V1", "|i1"],
        _ => &[],
    };
    descr == npy_descr(dtype) || alternatives.contains(&descr.as_str())
}

/// Packed row-major strides for `shape`.
fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (1..shape.len()).rev() {
        // Bounded by check_record; saturating only keeps a bad record from panicking here.
        strides[d - 1] = strides[d].saturating_mul(shape[d]);
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
    // Records not read by [`read_manifest`] are held to the same rules: nothing unchecked is
    // written into the YAML, and no file outside the folder.
    for e in &chosen {
        check_record(e)?;
        if !is_plain_file_name(&e.file) {
            return Err(format!(
                "file {:?} of `{}` is not a file name",
                e.file, e.name
            ));
        }
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
    let dir_shown = comment(dir_shown);
    let mut out = format!(
        "# From `repro import capture {dir_shown}`: call {call} of each tensor repro::capture wrote.\n\
         # Sizes are as captured; name them under `sizes:` where the kernel's arguments use them.\n\
         # bf16 and fp8 files hold raw bits (numpy has no such types); the harness reads them as is.\n"
    );
    if !wanted.is_empty() {
        out.push_str(&format!(
            "# Outputs, captured after the launch: {}; their captures are the expected values of\n\
             # `reference: op: file` (capture them where production is right: the last good build, another GPU).\n",
            comment(&wanted.join(", "))
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
            format!(", init: {{ file: {} }}", scalar(&file_of(e), Context::Flow))
        };
        out.push_str(&format!(
            "  {}: {{ dtype: {}, shape: {}{strides}{role} }}\n",
            scalar(&e.name, Context::Block),
            scalar(&e.dtype, Context::Flow),
            list(&e.shape)
        ));
    }
    if !wanted.is_empty() {
        let expected: Vec<String> = wanted
            .iter()
            .filter_map(|name| chosen.iter().find(|e| e.name == *name))
            .map(|e| {
                let name = scalar(&e.name, Context::Flow);
                format!("{name}: {}", scalar(&file_of(e), Context::Flow))
            })
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
