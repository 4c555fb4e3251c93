//! `repro bundle`: the folder and the .tar.gz, what they hold, that nothing of this machine leaks
//! into them, and that the tarball builds elsewhere with nothing but nvcc.

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

/// `repro bundle SPEC -o OUT --no-run` with the real nvcc, run from `cwd`.
fn bundle_without_a_run(
    cwd: &std::path::Path,
    spec: &std::path::Path,
    out: &std::path::Path,
) -> assert_cmd::assert::Assert {
    common::bundle_command(cwd, spec, out, &common::nvcc()).assert()
}

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
    bundle_without_a_run(tmp.path(), &spec, &out)
        .code(2)
        .stderr(predicate::str::contains("never overwrites"));
    assert_eq!(
        std::fs::read_to_string(out.join("mine.txt")).unwrap(),
        "keep"
    );
}

/// A `.npy` of `n` u8 values `fill`.
fn u8_npy(path: &std::path::Path, n: usize, fill: u8) {
    let mut header = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(vec![fill; n]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// What `repro capture` writes for a replayed launch travels: the cubin and the parameter bytes
/// (`replay/`), production's outputs (`production/`), the inputs; the captured command keeps
/// its program's name and loses this machine's folders.
#[test]
fn a_replayed_capture_carries_its_cubin_parameters_and_production_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // An ELF header and nothing else: the bundle checks the magic, and is made with --no-run.
    std::fs::write(dir.join("module.cubin"), b"\x7fELF\x02\x01\x01").unwrap();
    std::fs::write(dir.join("params.bin"), [0u8; 16]).unwrap();
    u8_npy(&dir.join("inputs/buffer0.npy"), 64, 1);
    u8_npy(&dir.join("production/buffer1.before.npy"), 64, 0);
    u8_npy(&dir.join("production/buffer1.after.npy"), 64, 2);
    let spec = dir.join("capture.yaml");
    std::fs::write(
        &spec,
        format!(
            r#"version: 1
name: replayed
about: a replayed launch with production's outputs
tensors:
  buffer0: {{ dtype: u8, shape: [64], init: {{ file: inputs/buffer0.npy }} }}
  buffer1: {{ dtype: u8, shape: [64], output: true }}
kernel:
  kind: replay
  name: _Z6kernelPhS_
  cubin: module.cubin
  params: params.bin
  grid: [1, 1, 1]
  block: [64, 1, 1]
  relocate:
    - {{ at: 0, tensor: buffer0, offset: 0 }}
    - {{ at: 8, tensor: buffer1, offset: 0 }}
reference:
  op: file
  expected: {{ buffer1: production/buffer1.after.npy }}
build: {{ arch: sm_90a }}
capture:
  command: {}/bin/app --requests 3
  kernel: kernel(unsigned char*, unsigned char*)
  launch: 2
  config: 'Triton: BLOCK_M=64, note="a \ b", num_warps=4'
  source: {}/app/matmul.py:30
  before: {{ buffer1: production/buffer1.before.npy }}
  after: {{ buffer1: production/buffer1.after.npy }}
"#,
            dir.display(),
            dir.display()
        ),
    )
    .unwrap();
    let out = dir.join("bundle");
    bundle_without_a_run(dir, &spec, &out).success();
    for file in [
        "replay/module.cubin",
        "replay/params.bin",
        "production/buffer1.before.npy",
        "production/buffer1.after.npy",
        "inputs/buffer0.npy",
    ] {
        assert!(out.join(file).is_file(), "{file} is in the bundle");
    }
    let bundled = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    for line in [
        "cubin: replay/module.cubin",
        "params: replay/params.bin",
        "buffer1: production/buffer1.before.npy",
        "command: app --requests 3",
        "source: matmul.py:30",
    ] {
        assert!(bundled.contains(line), "`{line}` in:\n{bundled}");
    }
    // The config names the kernel in the report: a C++ string in harness.cu, which nvcc builds.
    common::build_with_nvcc(&out.join("spec.yaml"), &dir.join("built"));
    let harness = std::fs::read_to_string(dir.join("built/harness.cu")).unwrap();
    assert!(
        harness.contains(r#"kernel(unsigned char*, unsigned char*) [Triton: BLOCK_M=64, note=\"a \\ b\", num_warps=4]"#),
        "{harness}"
    );
    let here = dir.canonicalize().unwrap().display().to_string();
    assert!(
        !bundled.contains(&here),
        "no folder of this machine:\n{bundled}"
    );
}

/// A custom reference whose header includes one from a folder beside its own (a helper the kernel
/// shares): the bundle keeps both where the include finds them, and the bundled spec builds.
#[test]
fn a_custom_reference_keeps_the_headers_it_includes_from_beside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::custom_ops::write_op(dir.path(), "y(i) = kTwice * x(i); z(i) = x(i) + 1;");
    std::fs::create_dir_all(dir.path().join("shared")).unwrap();
    std::fs::write(
        dir.path().join("shared/factor.h"),
        "#pragma once\nconstexpr double kTwice = 2.0;\n",
    )
    .unwrap();
    let header = dir.path().join("refs/twice.h");
    let text = std::fs::read_to_string(&header).unwrap().replace(
        "#include <repro/reference.h>\n",
        "#include <repro/reference.h>\n#include \"../shared/factor.h\"\n",
    );
    std::fs::write(&header, text).unwrap();
    let out = dir.path().join("bundle");
    bundle_without_a_run(dir.path(), &spec, &out).success();
    for file in ["reference/refs/twice.h", "reference/shared/factor.h"] {
        assert!(out.join(file).is_file(), "{file} is in the bundle");
    }
    let bundled = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    assert!(
        bundled.contains("source: reference/refs/twice.h"),
        "{bundled}"
    );
    common::build_with_nvcc(&out.join("spec.yaml"), &dir.path().join("built"));
}

/// A kernel header that includes one from a folder beside its include dir (`../shared/...`): the
/// bundle puts it beside the include dir's copy, where the same include finds it, and builds.
#[test]
fn a_kernel_header_beside_the_include_dir_comes_with_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::custom_ops::write_op(dir.path(), "y(i) = 2 * x(i); z(i) = x(i) + 1;");
    std::fs::create_dir_all(dir.path().join("shared")).unwrap();
    std::fs::write(
        dir.path().join("shared/index.cuh"),
        "#pragma once\n__device__ inline int global_index() { return blockIdx.x * blockDim.x + threadIdx.x; }\n",
    )
    .unwrap();
    let kernel = dir.path().join("k/twice.cuh");
    let text = std::fs::read_to_string(&kernel)
        .unwrap()
        .replace(
            "#pragma once\n",
            "#pragma once\n#include \"../shared/index.cuh\"\n",
        )
        .replace("blockIdx.x * blockDim.x + threadIdx.x", "global_index()");
    std::fs::write(&kernel, text).unwrap();
    let out = dir.path().join("bundle");
    bundle_without_a_run(dir.path(), &spec, &out)
        .success()
        .stderr(predicate::str::contains("warning").not());
    for file in ["include/0/twice.cuh", "include/shared/index.cuh"] {
        assert!(out.join(file).is_file(), "{file} is in the bundle");
    }
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(!readme.contains("Not included"), "{readme}");
    common::build_with_nvcc(&out.join("spec.yaml"), &dir.path().join("built"));
}

/// A header further away than beside the include dir: the bundle cannot place it where the
/// kernel's include finds it, and says so to the sender, not only in the README.
#[test]
fn a_header_the_bundle_cannot_carry_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let spec = crate::custom_ops::write_op(&project, "y(i) = 2 * x(i); z(i) = x(i) + 1;");
    std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
    std::fs::write(
        dir.path().join("elsewhere/far.cuh"),
        "#pragma once\nconstexpr float kFar = 2.0f;\n",
    )
    .unwrap();
    let kernel = project.join("k/twice.cuh");
    let text = std::fs::read_to_string(&kernel).unwrap().replace(
        "#pragma once\n",
        "#pragma once\n#include \"../../elsewhere/far.cuh\"\n",
    );
    std::fs::write(&kernel, text).unwrap();
    let out = dir.path().join("bundle");
    bundle_without_a_run(&project, &spec, &out)
        .success()
        .stderr(predicate::str::contains(
            "warning: the build read headers the bundle cannot carry (outside the spec's include dirs, or the reference's project folder): far.cuh",
        ));
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("Not included"), "{readme}");
}
