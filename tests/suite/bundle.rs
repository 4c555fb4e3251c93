//! `repro bundle`: the folder and the .tar.gz, what they hold, that nothing of this machine leaks
//! into them, and that the tarball builds elsewhere with nothing but nvcc.

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn a_bundle_unpacks_and_builds_on_another_path() {
    let sender = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(sender.path());
    // The kernel's folder is called `cuda/`: its headers are the kernel's, not the toolkit's.
    std::fs::rename(sender.path().join("kernels"), sender.path().join("cuda")).unwrap();
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("include_dirs: [kernels]", "include_dirs: [cuda]");
    std::fs::write(&spec, text).unwrap();
    let out = sender.path().join("out/small");
    Command::cargo_bin("repro")
        .unwrap()
        .current_dir(sender.path())
        .arg("bundle")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(common::nvcc())
        .assert()
        .success()
        .stdout(predicate::str::contains("small.tar.gz"));

    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    let mut lines = readme.lines();
    assert_eq!(
        lines.next(),
        Some("./build.sh"),
        "the README starts with the two commands"
    );
    assert_eq!(lines.next(), Some("./harness --ones && ./harness"));
    let env = std::fs::read_to_string(out.join("env.txt")).unwrap();
    assert!(env.contains("release 13.0"), "{env}");
    let results = std::fs::read_to_string(out.join("results.txt")).unwrap();
    assert!(results.contains("$ ./harness --ones"), "{results}");
    assert!(out.join("results.json").is_file());
    assert!(
        out.join("include/0/small_gemm.cuh").is_file(),
        "the kernel's header is in the bundle"
    );
    // Every other header nvcc read is the toolkit's: nothing is left for the receiver to find.
    assert!(!readme.contains("Not included"), "{readme}");
    assert!(
        !out.join("harness").exists(),
        "sources only: the receiver builds"
    );

    // Nothing of the sender's machine: not the folder the spec was in, not the home folder.
    let sender_path = sender
        .path()
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for entry in walkdir::WalkDir::new(&out)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
    {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        assert!(
            !text.contains(&sender_path),
            "{} leaks {sender_path}",
            entry.path().display()
        );
        if let Some(home) = std::env::var_os("HOME").filter(|h| h.len() > 1) {
            let home = home.to_string_lossy().into_owned();
            assert!(
                !text.contains(&format!("{home}/")),
                "{} leaks the home folder",
                entry.path().display()
            );
        }
    }

    // The receiver: another path, the tarball, nvcc.
    let receiver = tempfile::tempdir().unwrap();
    let tarball = std::fs::File::open(out.with_extension("tar.gz")).unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(tarball))
        .unpack(receiver.path())
        .unwrap();
    let unpacked = receiver.path().join("small_gemm");
    std::process::Command::new("bash")
        .arg("build.sh")
        .current_dir(&unpacked)
        .env("NVCC", common::nvcc())
        .status()
        .unwrap()
        .success()
        .then_some(())
        .expect("build.sh builds the unpacked bundle");
    assert!(unpacked.join("harness").is_file());
}

#[test]
fn an_existing_bundle_is_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("taken");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("mine.txt"), "keep").unwrap();
    Command::cargo_bin("repro")
        .unwrap()
        .current_dir(tmp.path())
        .arg("bundle")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--no-run")
        .arg("--nvcc")
        .arg(common::nvcc())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never overwrites"));
    assert_eq!(
        std::fs::read_to_string(out.join("mine.txt")).unwrap(),
        "keep"
    );
}
