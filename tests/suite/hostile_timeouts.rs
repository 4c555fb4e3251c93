//! Timeouts that no `Duration` can hold (issue 58, item 6): `--timeout 1e308` or `inf` on any
//! command that takes it, and `check.timeout: 1e300` in a spec, once panicked (exit 101) when a
//! wall-clock budget was derived from them. They are refused where they are read, with exit 2.

use crate::common;

use assert_cmd::Command;

/// Every command that takes `--timeout`, with the arguments it needs besides; none gets as far
/// as a build, so no nvcc runs.
fn commands(spec: &str) -> Vec<Vec<String>> {
    let with = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    vec![
        with(&["run", spec]),
        with(&["probe", spec]),
        with(&["sweep", spec, "--sizes", "31,63"]),
        with(&["shrink", spec]),
        with(&["bench", spec]),
        with(&[
            "bisect", spec, "--repo", ".", "--good", "HEAD", "--bad", "HEAD",
        ]),
    ]
}

#[test]
fn a_timeout_no_duration_holds_is_a_usage_error_on_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(dir.path());
    let spec = spec.to_str().unwrap();
    for value in ["1e308", "inf", "86401", "-1", "nan", "0"] {
        for args in commands(spec) {
            let output = Command::cargo_bin("repro")
                .unwrap()
                .args(&args)
                .arg("--timeout")
                .arg(value)
                .current_dir(dir.path())
                .timeout(std::time::Duration::from_secs(30))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(2),
                "repro {} --timeout {value}: {stderr}",
                args.join(" ")
            );
            assert!(stderr.contains("--timeout"), "{stderr}");
        }
    }
}

#[test]
fn the_longest_timeout_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(dir.path());
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, format!("{text}check: {{ timeout: 86400 }}\n")).unwrap();
    repro::spec::load(&spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_spec_timeout_no_duration_holds_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(dir.path());
    let text = std::fs::read_to_string(&spec).unwrap();
    for value in ["1e300", "86401", ".inf"] {
        let bad = format!("{text}check: {{ timeout: {value} }}\n");
        std::fs::write(&spec, &bad).unwrap();
        let error = repro::spec::load(&spec, &repro::machine::Machine)
            .expect_err(value)
            .to_string();
        assert!(
            error.contains("check.timeout") || error.contains("timeout"),
            "{error}"
        );
        assert!(error.contains("small_gemm.yaml:"), "{error}");
        let output = Command::cargo_bin("repro")
            .unwrap()
            .arg("scaffold")
            .arg(&spec)
            .arg("-o")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{value}");
    }
}
