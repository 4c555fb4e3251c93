//! A capture folder is read as hostile (docs/cli.md, `repro import capture`): a record's name,
//! shape, dtype and file are checked before anything is written, the manifest and the data files
//! are read with bounds and never through a link out of the folder, and what is written always
//! loads with the spec loader. Every folder here is made by the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The command, with a timeout: a capture folder that blocked a read would fail the test, not
/// hang it.
fn repro() -> assert_cmd::Command {
    let mut command = assert_cmd::Command::cargo_bin("repro").unwrap();
    command.timeout(Duration::from_secs(20));
    command
}

/// A version 1.0 `.npy` of f32 zeros of `shape`, as repro_capture.cuh writes it.
fn npy_f32(shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let tuple = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + 4 * shape.iter().product::<usize>(), 0);
    out
}

/// A capture folder `capture/` in a fresh tempdir holding X.0.npy (f32 [4, 3]) and D.0.npy (f32
/// [3]), and a manifest of `records` (one JSON object per line).
fn folder(records: &[String]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("capture");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("X.0.npy"), npy_f32(&[4, 3])).unwrap();
    std::fs::write(dir.join("D.0.npy"), npy_f32(&[3])).unwrap();
    std::fs::write(dir.join("manifest.jsonl"), records.join("\n") + "\n").unwrap();
    (tmp, dir)
}

/// A manifest record of f32 `[4, 3]` with `name` and `file` (JSON-escaped here).
fn record(name: &str, file: &str) -> String {
    record_shaped(name, file, "[4, 3]", "[3, 1]")
}

fn record_shaped(name: &str, file: &str, shape: &str, strides: &str) -> String {
    format!(
        r#"{{"name": {}, "call": 0, "file": {}, "dtype": "f32", "shape": {shape}, "strides": {strides}, "npy": "<f4"}}"#,
        serde_json::to_string(name).unwrap(),
        serde_json::to_string(file).unwrap()
    )
}

/// `repro import capture DIR -o OUT` must exit 2 with a message naming the manifest's line and
/// containing `said`, and write nothing.
fn refused(dir: &Path, line: usize, said: &str) {
    let out = dir.parent().unwrap().join("section.yaml");
    let output = repro()
        .args(["import", "capture"])
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let place = format!("{}:{line}: ", dir.join("manifest.jsonl").display());
    assert!(stderr.contains(&place), "{place} not in: {stderr}");
    assert!(stderr.contains(said), "{said:?} not in: {stderr}");
    assert!(!out.exists(), "a refused capture wrote {}", out.display());
}

#[test]
fn names_that_are_not_identifiers_are_refused() {
    // A line break would have added a tensor reading /etc/passwd, or a top-level reference.
    for name in [
        "X\n  evil: { dtype: u8, shape: [1], init: { file: /etc/passwd } }\n  Y",
        "X\nreference: { op: file }",
        "a: b",
        "*a",
        "&a",
        "",
        "2x",
    ] {
        let d = record_shaped("D", "D.0.npy", "[3]", "[1]");
        let (_tmp, dir) = folder(&[d, record(name, "X.0.npy")]);
        refused(&dir, 2, "cannot name a tensor: it is not a C++ identifier");
    }
    let (_tmp, dir) = folder(&[record("class", "X.0.npy")]);
    refused(&dir, 1, "`class` is a C++ keyword");
}

#[test]
fn shapes_must_be_positive_and_bounded() {
    for (shape, strides, said) in [
        ("[-4, 3]", "[3, 1]", "dimensions must be positive"),
        ("[0, 3]", "[3, 1]", "dimensions must be positive"),
        ("[4, 3]", "[-3, 1]", "is not a positive element count"),
        (
            "[4, 3, 1, 1, 1]",
            "[3, 1, 1, 1, 1]",
            "a tensor has 1 to 4 dimensions",
        ),
        (
            "[9223372036854775807, 2]",
            "[2, 1]",
            "spans more than 256 TiB",
        ),
    ] {
        let (_tmp, dir) = folder(&[record_shaped("X", "X.0.npy", shape, strides)]);
        refused(&dir, 1, said);
    }
    let (_tmp, dir) = folder(&[record("X", "X.0.npy").replace("\"f32\"", "\"f33\"")]);
    refused(&dir, 1, "dtype \"f33\" of `X` is not one repro knows");
}

#[test]
fn files_must_be_plain_names_of_regular_files_in_the_folder() {
    let not_a_name = "is not a file name";
    for file in ["../x.npy", "/etc/passwd", "sub/X.0.npy", "..", "X.0.npy\n"] {
        let (tmp, dir) = folder(&[record("X", file)]);
        std::fs::write(tmp.path().join("x.npy"), npy_f32(&[4, 3])).unwrap();
        refused(&dir, 1, not_a_name);
    }
    // A link out of the folder, to a device or to a real .npy beside it.
    let (tmp, dir) = folder(&[record("X", "Z.0.npy")]);
    std::os::unix::fs::symlink("/dev/zero", dir.join("Z.0.npy")).unwrap();
    refused(&dir, 1, "is a symbolic link out of the capture folder");
    let outside = tmp.path().join("outside.npy");
    std::fs::write(&outside, npy_f32(&[4, 3])).unwrap();
    let (_tmp, dir) = folder(&[record("X", "Y.0.npy")]);
    std::os::unix::fs::symlink(&outside, dir.join("Y.0.npy")).unwrap();
    refused(&dir, 1, "is a symbolic link out of the capture folder");
    // A fifo, a folder.
    let (_tmp, dir) = folder(&[record("X", "F.0.npy")]);
    assert!(Command::new("mkfifo")
        .arg(dir.join("F.0.npy"))
        .status()
        .unwrap()
        .success());
    refused(&dir, 1, "is a fifo, not a regular file");
    let (_tmp, dir) = folder(&[record("X", "G.0.npy")]);
    std::fs::create_dir(dir.join("G.0.npy")).unwrap();
    refused(&dir, 1, "is a folder, not a regular file");
}

#[test]
fn data_files_must_match_their_record() {
    // D.0.npy is [3]: not the [4, 3] the record says.
    let (_tmp, dir) = folder(&[record("X", "D.0.npy")]);
    refused(&dir, 1, "its .npy has shape [3], the record [4, 3]");
    let (_tmp, dir) = folder(&[record("X", "X.0.npy").replace("\"f32\"", "\"i64\"")]);
    refused(&dir, 1, "its .npy holds \"<f4\" elements, not i64");
    let (_tmp, dir) = folder(&[record("X", "X.0.npy")]);
    let mut cut = npy_f32(&[4, 3]);
    cut.truncate(cut.len() - 4);
    std::fs::write(dir.join("X.0.npy"), cut).unwrap();
    refused(&dir, 1, "holds 44 bytes of data after its header");
    let (_tmp, dir) = folder(&[record("X", "X.0.npy")]);
    std::fs::write(dir.join("X.0.npy"), vec![0u8; 48]).unwrap();
    refused(&dir, 1, "not a .npy file");
    let (_tmp, dir) = folder(&[record("X", "X.0.bin")]);
    std::fs::write(dir.join("X.0.bin"), vec![0u8; 40]).unwrap();
    refused(
        &dir,
        1,
        "has 40 bytes; f32 12 elements of shape [4, 3] take 48",
    );
    let (_tmp, dir) = folder(&[record("X", "X.0.npy"), record("X", "X.0.npy")]);
    refused(&dir, 2, "`X` call 0 is captured twice (first at line 1)");
}

/// A manifest that is a link to /dev/zero, or a fifo, is refused at once: it was read until
/// the allocator aborted, or blocked forever.
#[test]
fn the_manifest_is_read_with_a_bound() {
    let refused_manifest = |dir: &Path, said: &str| {
        let output = repro()
            .args(["import", "capture"])
            .arg(dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let manifest = format!("{}: ", dir.join("manifest.jsonl").display());
        assert!(stderr.contains(&manifest), "{stderr}");
        assert!(stderr.contains(said), "{said:?} not in: {stderr}");
    };
    let (_tmp, dir) = folder(&[]);
    std::fs::remove_file(dir.join("manifest.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("manifest.jsonl")).unwrap();
    refused_manifest(&dir, "is a symbolic link out of the capture folder");
    let (_tmp, dir) = folder(&[]);
    std::fs::remove_file(dir.join("manifest.jsonl")).unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.join("manifest.jsonl"))
        .status()
        .unwrap()
        .success());
    refused_manifest(&dir, "is a fifo, not a regular file");
    let (_tmp, dir) = folder(&[]);
    let big = std::fs::File::create(dir.join("manifest.jsonl")).unwrap();
    big.set_len(repro::import::capture::MAX_MANIFEST_BYTES + 1)
        .unwrap();
    refused_manifest(&dir, "is larger than the 16.0 MiB a manifest may have");
}

/// What `repro import capture` writes loads with the spec loader, once the spec's other
/// sections are around it: names YAML would read as booleans, and a capture folder whose path
/// holds a comma, a `#` and a colon, are quoted where they must be.
#[test]
fn every_import_loads_with_the_spec_loader() {
    for (folder_name, input, output) in [
        ("capture", "X", "D"),
        ("cap, v2 #1: x", "on", "yes"),
        ("-caps", "null_", "off"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(folder_name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("X.0.npy"), npy_f32(&[4, 3])).unwrap();
        std::fs::write(dir.join("D.0.npy"), npy_f32(&[3])).unwrap();
        std::fs::write(
            dir.join("manifest.jsonl"),
            format!(
                "{}\n{}\n",
                record(input, "X.0.npy"),
                record_shaped(output, "D.0.npy", "[3]", "[1]")
            ),
        )
        .unwrap();
        let section = tmp.path().join("section.yaml");
        repro()
            .args(["import", "capture", "--expected", output, "-o"])
            .arg(&section)
            .arg(&dir)
            .assert()
            .success();
        let text = std::fs::read_to_string(&section).unwrap();
        let todo = text
            .lines()
            .find(|l| l.starts_with("  block: \"TODO"))
            .unwrap_or_else(|| panic!("{text}"));
        let section_text = text.replace(todo, "  block: [3]");
        std::fs::create_dir(tmp.path().join("kernels")).unwrap();
        std::fs::write(
            tmp.path().join("kernels/k.cuh"),
            "#pragma once\n__global__ void k(const float* X, float* D) {}\n",
        )
        .unwrap();
        let spec = tmp.path().join("spec.yaml");
        std::fs::write(
            &spec,
            format!(
                "version: 1\nname: replay\nsource: {{ include_dirs: [kernels], includes: [k.cuh] }}\n{section_text}kernel:\n  name: k\n  args: [{input}, {output}]\n  grid: [1, 1, 1]\n  block: [32, 1, 1]\nbuild: {{ arch: sm_90a }}\n"
            ),
        )
        .unwrap();
        let loaded = repro::spec::load(&spec, &repro::machine::Machine)
            .unwrap_or_else(|e| panic!("{e}\n{}", std::fs::read_to_string(&spec).unwrap()));
        let names: Vec<&str> = loaded.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, [input, output]);
        assert_eq!(
            loaded.tensors[0].init.source,
            repro::spec::InitSource::File(dir.join("X.0.npy").canonicalize().unwrap()),
            "{text}"
        );
    }
}
