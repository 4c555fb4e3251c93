//! Real inputs captured in production and replayed:
//! crates/repro-contract/instrument/repro_capture.cuh compiled with the real nvcc into a small
//! program (tests/cpp/capture_demo.cu) that captures host tensors (a bf16 one and a column-major
//! f32 view), `repro import capture` turning its manifest into a spec's tensors, and the harness
//! built from that spec generating exactly the captured values. No GPU needed; the device path of
//! the header must fail softly without one. And, without nvcc, a hand-written capture of a column
//! sum whose output, captured after the launch, becomes the expected values of `reference: op:
//! file`.

use crate::common;

use std::path::Path;
use std::process::Command;

use assert_cmd::prelude::*;
use predicates::prelude::*;

fn repro() -> Command {
    Command::cargo_bin("repro").unwrap()
}

/// The data bytes of a version 1.0 .npy file (after its header).
fn npy_data(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[10 + header..].to_vec()
}

fn npy_header(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    String::from_utf8_lossy(&bytes[10..10 + header]).into_owned()
}

#[test]
fn captured_tensors_become_a_spec_that_replays_them() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = tmp.path().join("capture_demo");
    let status = Command::new(common::nvcc())
        .args(["-std=c++17", "-O1", "-o"])
        .arg(&demo)
        .arg(common::repo().join("tests/cpp/capture_demo.cu"))
        .status()
        .expect("run nvcc");
    assert!(
        status.success(),
        "the capture header must compile with nvcc"
    );

    // Off without REPRO_CAPTURE_DIR: nothing written, nothing said.
    Command::new(&demo)
        .env_remove("REPRO_CAPTURE_DIR")
        .current_dir(tmp.path())
        .assert()
        .success()
        .stderr(predicate::str::is_empty());

    let dir = tmp.path().join("capture");
    std::fs::create_dir(&dir).unwrap();
    let run = Command::new(&demo)
        .env("REPRO_CAPTURE_DIR", &dir)
        .env("REPRO_CAPTURE_LIMIT", "2")
        .assert()
        .success()
        .stdout(predicate::str::contains("capture_demo done"));
    // Where there is no device, the device-path capture says so and the program goes on.
    if !Path::new("/dev/nvidia0").exists() {
        run.stderr(predicate::str::contains(
            "repro::capture: C: copying from the device failed",
        ));
    }
    let manifest = std::fs::read_to_string(dir.join("manifest.jsonl")).unwrap();
    assert!(manifest.contains(r#"{"name": "A", "call": 0, "file": "A.0.npy", "dtype": "bf16", "shape": [5, 3], "strides": [3, 1], "npy": "<u2"}"#), "{manifest}");
    assert!(
        manifest.contains(r#""name": "A", "call": 1"#),
        "REPRO_CAPTURE_LIMIT=2 allows a second call"
    );
    assert!(manifest.contains(r#""name": "B", "call": 0, "file": "B.0.npy", "dtype": "f32", "shape": [3, 4], "strides": [1, 3]"#));
    assert!(npy_header(&dir.join("A.0.npy"))
        .contains("'descr': '<u2', 'fortran_order': False, 'shape': (5, 3)"));
    // B's file holds the logical [3, 4] values, B[k][n] = 10 k + n, whatever the storage order.
    let b: Vec<f32> = npy_data(&dir.join("B.0.npy"))
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(
        b,
        vec![0., 1., 2., 3., 10., 11., 12., 13., 20., 21., 22., 23.]
    );

    // The tensors section, paths relative to where it is written.
    let section = tmp.path().join("tensors.yaml");
    repro()
        .args(["import", "capture"])
        .arg(&dir)
        .arg("-o")
        .arg(&section)
        .assert()
        .success();
    let tensors = std::fs::read_to_string(&section).unwrap();
    assert!(
        tensors.contains("  A: { dtype: bf16, shape: [5, 3], init: { file: capture/A.0.npy } }"),
        "{tensors}"
    );
    assert!(
        tensors.contains(
            "  B: { dtype: f32, shape: [3, 4], strides: [1, 3], init: { file: capture/B.0.npy } }"
        ),
        "{tensors}"
    );
    repro()
        .args(["import", "capture"])
        .arg(&dir)
        .arg("-o")
        .arg(&section)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never overwrites"));
    repro()
        .args(["import", "capture"])
        .arg(&dir)
        .args(["--call", "5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "no capture has call 5; the manifest holds calls 0, 1",
        ));

    // A spec around those tensors; its harness must generate exactly the captured values.
    std::fs::create_dir(tmp.path().join("kernels")).unwrap();
    std::fs::write(
        tmp.path().join("kernels/mixed.cuh"),
        "#pragma once\n#include <cuda_bf16.h>\n__global__ void mixed(const __nv_bfloat16* A, const float* B, float* D, int M, int N, int K) {}\n",
    )
    .unwrap();
    let spec = tmp.path().join("replay.yaml");
    let captured_tensors = tensors
        .lines()
        .filter(|l| l.starts_with("  "))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nname: replay\nsizes: {{ M: 5, N: 4, K: 3 }}\nsource: {{ include_dirs: [kernels], includes: [mixed.cuh] }}\ntensors:\n{captured_tensors}\n  D: {{ dtype: f32, shape: [M, N], output: true }}\nkernel:\n  name: mixed\n  args: [A, B, D, M, N, K]\n  grid: [1, 1, 1]\n  block: [32, 1, 1]\nreference: {{ op: gemm, a: A, b: B, out: D }}\nbuild: {{ arch: sm_90a, flags: [-O2] }}\n"
        ),
    )
    .unwrap();
    let out = tmp.path().join("art");
    common::build_with_nvcc(&spec, &out);
    let emitted = tmp.path().join("emitted");
    Command::new(out.join("harness"))
        .arg("--emit-inputs")
        .arg(&emitted)
        .assert()
        .success();
    assert_eq!(
        npy_data(&emitted.join("A.npy")),
        npy_data(&dir.join("A.0.npy"))
    );
    assert_eq!(
        npy_data(&emitted.join("B.npy")),
        npy_data(&dir.join("B.0.npy"))
    );
}

/// A capture of a column sum (tests/fixtures/import/capture/column_sum/, written by hand in the
/// format of repro_capture.cuh): X [4, 3] captured before the launch, D [3] after it.
const COLUMN_SUM: &str = "tests/fixtures/import/capture/column_sum";

#[test]
fn outputs_captured_after_the_launch_become_a_file_reference() {
    let dir = Path::new(COLUMN_SUM);
    let entries = repro::import::capture::read_manifest(dir).unwrap();
    // The manifest does not say which tensors are outputs: without being told, inputs only,
    // and no reference at all.
    let tensors = repro::import::capture::tensors_yaml(&entries, 0, "capture", "capture").unwrap();
    assert!(!tensors.contains("reference:"), "{tensors}");
    assert!(
        tensors.contains("  D: { dtype: f32, shape: [3], init: { file: capture/D.0.npy } }"),
        "{tensors}"
    );
    // Told that D is the output: D is written, its capture the expected values.
    let section =
        repro::import::capture::section_yaml(&entries, 0, &["D".into()], "capture", COLUMN_SUM)
            .unwrap();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&section).unwrap();
    assert_eq!(
        yaml["reference"]["expected"]["D"],
        serde_yaml::Value::from("capture/D.0.npy")
    );
    assert_eq!(
        yaml["tensors"]["D"]["output"],
        serde_yaml::Value::from(true)
    );
    insta::assert_snapshot!("column_sum_capture", section);
    let err =
        repro::import::capture::section_yaml(&entries, 1, &["D".into()], ".", ".").unwrap_err();
    assert_eq!(err, "no capture has call 1; the manifest holds calls 0");

    // The command: paths relative to where the section is written.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("section.yaml");
    let absolute = std::path::absolute(dir).unwrap();
    repro::import::command::capture_with_outputs(&absolute, 0, &["D".into()], Some(&out)).unwrap();
    let written = std::fs::read_to_string(&out).unwrap();
    let shown = repro_text::paths::relative_to(&absolute, tmp.path());
    assert!(
        written.contains(&format!("  expected: {{ D: {shown}/D.0.npy }}\n")),
        "{written}"
    );
    assert!(
        written.contains(&format!(
            "  X: {{ dtype: f32, shape: [4, 3], init: {{ file: {shown}/X.0.npy }} }}\n"
        )),
        "{written}"
    );
    let err = repro::import::command::capture_with_outputs(
        &absolute,
        0,
        &["Y".into()],
        Some(&tmp.path().join("other.yaml")),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("no capture of `Y` at call 0; call 0 captured X, D"),
        "{err}"
    );

    // `repro import capture` itself has no way to name the outputs: tensors only.
    repro()
        .args(["import", "capture"])
        .arg(dir)
        .assert()
        .success()
        .stdout(predicate::str::contains("reference:").not());
}
