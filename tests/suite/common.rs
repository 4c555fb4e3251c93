//! Shared by the integration tests: the repo's paths, the real nvcc, and a small self-contained
//! spec + kernel written into a temporary folder.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The nvcc the tests compile with: `$NVCC`, else the project toolchain. CI installs the latter
/// with scripts/setup-toolchain.sh; a missing nvcc fails the test (it is never skipped).
pub fn nvcc() -> PathBuf {
    if let Some(p) = std::env::var_os("NVCC").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let local = repo().join(".toolchain/cuda/bin/nvcc");
    assert!(
        local.is_file(),
        "nvcc not found at {}: run scripts/setup-toolchain.sh (tests compile harnesses with the real nvcc)",
        local.display()
    );
    local
}

pub const SMALL_KERNEL: &str = r#"#pragma once
// D[M,N] = A[M,K] @ B[K,N], f32, one thread per output.
__global__ void small_gemm(const float* A, const float* B, float* D, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float sum = 0.f;
  for (int k = 0; k < K; ++k) sum += A[m * K + k] * B[k * N + n];
  D[m * N + n] = sum;
}
"#;

pub const SMALL_SPEC: &str = r#"version: 1
name: small_gemm
about: a one-thread-per-output f32 GEMM
sizes: { M: 33, N: 17, K: 9 }
source:
  include_dirs: [kernels]
  includes: [small_gemm.cuh]
tensors:
  A: { dtype: f32, shape: [M, K] }
  B: { dtype: f32, shape: [K, N], init: iota }
  D: { dtype: f32, shape: [M, N], output: true }
inputs: { init: uniform, range: [-1, 1], seed: 7 }
kernel:
  name: small_gemm
  args: [A, B, D, M, N, K]
  grid: ["ceil_div(N, 16)", "ceil_div(M, 16)", 1]
  block: [16, 16, 1]
reference: { op: gemm, a: A, b: B, out: D, tile: [16, 16] }
build: { arch: sm_90a, flags: [-O2] }
"#;

/// `repro build SPEC -o OUT` with the real nvcc, which must succeed; returns the harness's path.
/// `REPRO_TEST_ALL=1` (CI sets it, .ci/run): every example compiled, not one of each kind, and
/// the portability builds (an aarch64 host, the device reference's sm_80 and sm_75 paths), which
/// a developer's edit-build-test loop does not need and which cost a third of the suite's nvcc
/// time on two cores (docs/performance.md).
pub fn test_all() -> bool {
    std::env::var_os("REPRO_TEST_ALL").is_some_and(|v| v == "1")
}

pub fn build_with_nvcc(spec: &Path, out: &Path) -> PathBuf {
    assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .arg("build")
        .arg(spec)
        .arg("-o")
        .arg(out)
        .arg("--nvcc")
        .arg(nvcc())
        .assert()
        .success();
    out.join("harness")
}

/// Writes the small spec and its kernel into `dir`; returns the spec path.
pub fn write_small_spec(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join("kernels/small_gemm.cuh"), SMALL_KERNEL).unwrap();
    let spec = dir.join("small_gemm.yaml");
    std::fs::write(&spec, SMALL_SPEC).unwrap();
    spec
}

/// An nvcc wrapper that logs each call's arguments to `log` (a line per call, each argument
/// followed by `|`, the line written at once so that concurrent builds never interleave their
/// lines), so a test can count nvcc invocations and see exactly what they were given.
pub fn counting_nvcc(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("nvcc-counting");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nline=$(printf '%s|' \"$@\"); printf '%s\\n' \"$line\" >> '{log}'\nexec '{}' \"$@\"\n",
            nvcc().display(),
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// An nvcc stand-in that compiles nothing, for tests of what repro and build.sh do around nvcc
/// (which arguments, how often, what is cached): it logs its arguments like the counting one,
/// answers `--version` as a toolkit of its own (so its libraries have their own cache key in the
/// runtime cache), and for a compile writes a placeholder at `-o` (its own bytes each time, as a
/// real rebuild's archive) and a dependency file at `-MF`, after a second: long enough for two
/// builds started together to overlap.
pub fn stand_in_nvcc(dir: &Path, log: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("nvcc-stand-in");
    let script = r#"#!/bin/sh
line=$(printf '%s|' "$@"); printf '%s\n' "$line" >> 'LOG'
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release 0.0, V0.0.0 (stand-in)'; exit 0; fi
out=; dep=; prev=
for a in "$@"; do case "$prev" in -o) out=$a;; -MF) dep=$a;; esac; prev=$a; done
sleep 1
echo "compiled by the stand-in at $(date +%s%N)" > "$out"
if [ -n "$dep" ]; then echo "$out: harness.cu" > "$dep"; fi
"#;
    std::fs::write(&wrapper, script.replace("LOG", &log.display().to_string())).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// How many times nvcc compiled harness.cu (version queries and runtime library builds, which
/// the runtime cache makes depend on what ran before, are not counted).
pub fn calls(log: &Path) -> usize {
    logged_calls(log)
        .iter()
        .filter(|l| l.contains("|harness.cu|"))
        .count()
}

/// The argument lines the counting wrapper logged for compiles (`nvcc --version` left out).
pub fn logged_calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l != "--version|")
        .map(str::to_string)
        .collect()
}

/// Runs `harness --emit-inputs` into `dir` and checks every input it wrote against repro's own
/// generator for `spec` (the harness reads its inits from the artifact's spec.yaml at run time).
pub fn assert_emitted_inputs_match(harness: &Path, spec: &Path, dir: &Path) {
    let status = std::process::Command::new(harness)
        .arg("--emit-inputs")
        .arg(dir)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{} --emit-inputs: {status}",
        harness.display()
    );
    let loaded =
        repro::spec::load(spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
    for (index, tensor) in loaded.tensors.iter().enumerate().filter(|(_, t)| !t.output) {
        let npy = std::fs::read(dir.join(format!("{}.npy", tensor.name))).unwrap();
        // An input from a file holds the file's elements (a C-order .npy: its data, after the
        // header), not a generator's.
        let expected = match &tensor.init.source {
            repro::spec::InitSource::File(path) => {
                let bytes = std::fs::read(path).unwrap();
                let header = repro::inputs::npy::read_header(path)
                    .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
                assert!(!header.fortran_order, "{}", path.display());
                bytes[header.data_offset as usize..].to_vec()
            }
            _ => repro::inputs::input_bits(&loaded, index),
        };
        assert_eq!(
            &npy[npy.len() - expected.len()..],
            &expected[..],
            "{}: tensor {} differs from repro's generator",
            harness.display(),
            tensor.name
        );
    }
}

/// A spec text loaded as `bad.yaml` in examples/ (so `../kernels` resolves), for the spec-error
/// tests.
pub fn load_spec_text(text: &str) -> Result<repro::spec::ResolvedSpec, repro::spec::LoadError> {
    repro::spec::load_text(
        Path::new("bad.yaml"),
        text,
        &repo().join("examples"),
        &repro::machine::Machine,
    )
}

/// The rendered error for `text`, which must fail with exit code 2.
pub fn spec_error_for(text: &str) -> String {
    match load_spec_text(text) {
        Ok(_) => panic!("spec unexpectedly valid:\n{text}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "spec errors exit 2");
            e.to_string()
        }
    }
}

/// `repro bundle SPEC -o OUT --no-run --nvcc NVCC`, run from `cwd`.
pub fn bundle_command(cwd: &Path, spec: &Path, out: &Path, nvcc: &Path) -> assert_cmd::Command {
    let mut command = assert_cmd::Command::cargo_bin("repro").unwrap();
    command
        .current_dir(cwd)
        .arg("bundle")
        .arg(spec)
        .arg("-o")
        .arg(out)
        .arg("--no-run")
        .arg("--nvcc")
        .arg(nvcc);
    command
}
