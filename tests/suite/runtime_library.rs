//! The runtime as a library (issue 23): one build per cache key, shared by every artifact, safe
//! under concurrent builds, rebuilt when damaged; and a harness.cu built with production flags
//! that change the C++ ABI or the language standard still links with it.
//!
//! The cache's own logic is tested with an nvcc stand-in that compiles nothing, so that a cold
//! cache costs no real runtime build here; every other test builds through the same cache with
//! the real nvcc (the first of them into the suite's empty cache).

use crate::common;

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

/// How many runtime library builds the counting nvcc saw.
fn runtime_builds(log: &Path) -> usize {
    common::logged_calls(log)
        .iter()
        .filter(|l| l.contains("|--lib|"))
        .count()
}

/// A second spec beside the small one (another name, other flags, the same runtime key).
fn write_second_spec(dir: &Path) -> std::path::PathBuf {
    let text = common::SMALL_SPEC
        .replacen("\nname: small_gemm\n", "\nname: small_gemm_two\n", 1)
        .replace("flags: [-O2]", "flags: [-O3, --use_fast_math]");
    let path = dir.join("small_gemm_two.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn build(spec: &Path, out: &Path, nvcc: &Path, cache: &Path) -> Command {
    let mut command = Command::cargo_bin("repro").unwrap();
    command
        .env("REPRO_CACHE_DIR", cache)
        .arg("build")
        .arg(spec)
        .arg("-o")
        .arg(out)
        .arg("--nvcc")
        .arg(nvcc);
    command
}

#[test]
fn the_runtime_is_built_once_shared_and_rebuilt_when_damaged() {
    let tmp = tempfile::tempdir().unwrap();
    let first = common::write_small_spec(tmp.path());
    let second = write_second_spec(tmp.path());
    let cache = tmp.path().join("cache");
    let log = tmp.path().join("nvcc.log");
    let nvcc = common::stand_in_nvcc(tmp.path(), &log);

    // Two specs built at the same time into an empty cache: one runtime build, both harnesses.
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| build(&first, &tmp.path().join("a"), &nvcc, &cache).output());
        let b = scope.spawn(|| build(&second, &tmp.path().join("b"), &nvcc, &cache).output());
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert!(a.status.success(), "{a:?}");
    assert!(b.status.success(), "{b:?}");
    assert_eq!(
        runtime_builds(&log),
        1,
        "two builds of one key: one waits for the other"
    );
    assert_eq!(common::calls(&log), 2);
    assert!(tmp.path().join("a/harness").is_file() && tmp.path().join("b/harness").is_file());

    // doctor lists the entry.
    Command::cargo_bin("repro")
        .unwrap()
        .env("REPRO_CACHE_DIR", &cache)
        .arg("doctor")
        .assert()
        .stdout(predicate::str::contains("1 built runtime library"))
        .stdout(predicate::str::contains("sm_90a"));

    // A damaged library is rebuilt, and the harness relinked against it.
    let entry = std::fs::read_dir(cache.join("runtime"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::write(entry.join("librepro_runtime.a"), b"damaged").unwrap();
    build(&first, &tmp.path().join("a"), &nvcc, &cache)
        .assert()
        .success()
        .stderr(predicate::str::contains("damaged"));
    assert_eq!(runtime_builds(&log), 2);
    assert_eq!(
        common::calls(&log),
        3,
        "the library is part of the harness's key"
    );
}

#[test]
fn production_flags_that_change_the_abi_still_link() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "build: { arch: sm_90a, flags: [-O2] }",
        "build: { arch: sm_90a, std: c++20, flags: [-O2, -D_GLIBCXX_USE_CXX11_ABI=0, --use_fast_math, -maxrregcount=32, -DNDEBUG=0] }",
    );
    std::fs::write(&spec, text).unwrap();
    let out = tmp.path().join("art");
    common::build_with_nvcc(&spec, &out);
    // It runs as far as a machine without a GPU allows: its inputs are repro's own values.
    common::assert_emitted_inputs_match(&out.join("harness"), &spec, &tmp.path().join("inputs"));
}

/// The suite's shared runtime cache (`REPRO_CACHE_DIR`, which scripts/test.sh sets), or one in
/// `dir` when the tests run without it.
fn shared_cache(dir: &Path) -> std::path::PathBuf {
    std::env::var_os("REPRO_CACHE_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| dir.join("cache"), std::path::PathBuf::from)
}

/// An nvcc stand-in that appends a line to harness.cu while it compiles it (as an editor saving
/// during a long build would), then hands its arguments to the stand-in that compiles nothing
/// (what is tested is repro's stamp, not the compile).
fn editing_nvcc(dir: &Path, log: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("nvcc-editing");
    let stand_in = common::stand_in_nvcc(dir, log);
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = harness.cu ]; then \
             echo '// saved during the build' >> harness.cu; fi; done\n\
             exec '{}' \"$@\"\n",
            stand_in.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[test]
fn a_file_edited_during_the_build_is_not_stamped_current() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    // The runtime cache the suite shares (scripts/test.sh sets it): this test needs no cold one.
    let cache = shared_cache(tmp.path());
    let log = tmp.path().join("nvcc.log");
    build(&spec, &out, &editing_nvcc(tmp.path(), &log), &cache)
        .assert()
        .success()
        .stderr(predicate::str::contains("changed while nvcc ran"));
    assert_eq!(common::calls(&log), 1);
    // The next build must not say "up to date": what is on disk is not what was compiled.
    Command::cargo_bin("repro")
        .unwrap()
        .env("REPRO_CACHE_DIR", &cache)
        .arg("build")
        .arg(&out)
        .arg("--nvcc")
        .arg(common::stand_in_nvcc(tmp.path(), &log))
        .assert()
        .success()
        .stdout(predicate::str::contains("up to date").not());
    assert_eq!(common::calls(&log), 2);
}

#[test]
fn two_builds_of_one_artifact_take_turns_and_compile_once() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    let cache = shared_cache(tmp.path());
    let log = tmp.path().join("nvcc.log");
    let nvcc = common::stand_in_nvcc(tmp.path(), &log);
    // Scaffold first, so that both builds work on the same artifact folder.
    Command::cargo_bin("repro")
        .unwrap()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let run = || {
        Command::cargo_bin("repro")
            .unwrap()
            .env("REPRO_CACHE_DIR", &cache)
            .arg("build")
            .arg(&out)
            .arg("--nvcc")
            .arg(&nvcc)
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(run);
        let b = scope.spawn(run);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    assert_eq!(
        common::calls(&log),
        1,
        "the second build waits and finds the first's work"
    );
    let stamp = std::fs::read_to_string(out.join(".repro/build/stamp.json")).unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&stamp).is_ok(),
        "a torn stamp: {stamp}"
    );
}
