//! `repro capture` without a GPU: the injection library builds against the toolchain's CUPTI,
//! a program that never initializes CUDA is named as such (exit 2), and a capture never writes
//! into a folder that holds something. The GPU runs are scripts/gpu-capture.sh.

use assert_cmd::Command;
use predicates::prelude::*;

fn repro() -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.env_remove("NVCC");
    cmd
}

#[test]
fn a_program_without_cuda_launches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    repro()
        .env_remove("CUDA_INJECTION64_PATH")
        .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
        .args(["capture", "--kernel", "gemm", "-o"])
        .arg(tmp.path().join("cap"))
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the program ended (exit status 0) without initializing CUDA",
        ));
}

#[test]
fn a_folder_that_holds_something_is_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("mine.txt"), "keep").unwrap();
    repro()
        .env_remove("CUDA_INJECTION64_PATH")
        .args(["capture", "--kernel", "gemm", "-o"])
        .arg(tmp.path())
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never overwrites it"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("mine.txt")).unwrap(),
        "keep"
    );
}

#[test]
fn a_profiler_that_already_injects_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    repro()
        .env("CUDA_INJECTION64_PATH", "/opt/nsight/libinjection.so")
        .args(["capture", "--kernel", "gemm", "-o"])
        .arg(tmp.path().join("cap"))
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "another tool (a profiler, a sanitizer) injects into CUDA",
        ));
}

#[test]
fn a_misspelt_reference_is_refused_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    repro()
        .env_remove("CUDA_INJECTION64_PATH")
        .args([
            "capture",
            "--kernel",
            "gemm",
            "--reference",
            "{op: gemm, a: A, b: B, outt: D}",
            "-o",
        ])
        .arg(tmp.path().join("cap"))
        .args(["--", "touch"])
        .arg(&marker)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown field `outt`"))
        .stderr(predicate::str::contains("did you mean `out`?"));
    assert!(!marker.exists(), "the program must not run");
    assert!(!tmp.path().join("cap").exists(), "nothing is written");
}

#[test]
fn a_malformed_tensor_view_is_refused_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    repro()
        .env_remove("CUDA_INJECTION64_PATH")
        .args(["capture", "--kernel", "gemm", "--tensor", "a_ptr=M, K", "-o"])
        .arg(tmp.path().join("cap"))
        .arg("--")
        .args(["touch"])
        .arg(&marker)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--tensor a_ptr=M, K: no `[` before the dimensions; the form is NAME=[DTYPE][DIM, ...][:col_major | :strides[S, ...]]",
        ));
    assert!(!marker.exists(), "the program must not run");
}
