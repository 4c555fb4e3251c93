//! Kernels specialized on their sizes, as JIT libraries instantiate them per shape: the sizes a
//! template argument, `kernel.setup`'s `<...>` or the prelude uses are compiled in as constant
//! expressions, the harness builds with the real nvcc whatever the template parameter's type
//! (`int`, `uint32_t`, `size_t`), and every use is named where `--size` is refused.

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

const SPECIALIZED_KERNEL: &str = r#"#pragma once
#include <cstddef>
#include <cstdint>
// D[M,N] = A[M,K] @ B[K,N], f32, specialized on all three sizes, each of another type.
template <int kM, uint32_t kN, size_t kK>
struct Shape {
  static constexpr uint32_t kBlocksN = (kN + 15) / 16;
  static constexpr int kBlocksM = (kM + 15) / 16;
};
template <int kM, uint32_t kN, size_t kK>
__global__ void specialized_gemm(const float* A, const float* B, float* D) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= kM || n >= int(kN)) return;
  float sum = 0.f;
  for (size_t k = 0; k < kK; ++k) sum += A[m * kK + k] * B[k * kN + n];
  D[m * kN + n] = sum;
}
"#;

fn specialized_spec(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join("kernels/specialized_gemm.cuh"), SPECIALIZED_KERNEL).unwrap();
    // The kernel's name first: the spec's own `name:` line is replaced after it.
    let text = common::SMALL_SPEC
        .replace(
            "  name: small_gemm\n",
            "  name: specialized_gemm\n  template_args: [M, N, K]\n  setup: |\n    using S = Shape<M, N, K>;  // N < 2^32\n",
        )
        .replace("name: small_gemm", "name: specialized_gemm")
        .replace("small_gemm.cuh", "specialized_gemm.cuh")
        .replace("args: [A, B, D, M, N, K]", "args: [A, B, D]")
        .replace(
            r#"grid: ["ceil_div(N, 16)", "ceil_div(M, 16)", 1]"#,
            r#"grid: ["S::kBlocksN", "S::kBlocksM", 1]"#,
        );
    let spec = dir.join("specialized_gemm.yaml");
    std::fs::write(&spec, text).unwrap();
    spec
}

#[test]
fn a_kernel_specialized_on_its_sizes_builds_with_nvcc() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = specialized_spec(tmp.path());
    let out = tmp.path().join("art");
    common::build_with_nvcc(&spec, &out);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for expected in [
        "constexpr int M = 33;",
        "constexpr int N = 17;",
        "constexpr int K = 9;",
        // Every use, each template argument by its index: not only the first.
        "//   kernel.template_args[0] (`M`): `M`",
        "//   kernel.template_args[1] (`N`): `N`",
        "//   kernel.template_args[2] (`K`): `K`",
        "//   kernel.setup, inside <...>: `M`, `N`, `K`",
    ] {
        assert!(harness.contains(expected), "{expected}\n{harness}");
    }
    // The launch reads no run-time size that would shadow the constants.
    assert!(
        !harness.contains("static_cast<int>(repro_sizes["),
        "{harness}"
    );

    // The harness refuses --size before it needs a device, naming why.
    Command::new(out.join("harness"))
        .args(["--size", "K=8"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "kernel.template_args[2] (`K`) uses `K`",
        ));
}

#[test]
fn every_compiled_in_use_is_named_where_sizes_would_change() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = specialized_spec(tmp.path());
    for command in ["sweep", "shrink"] {
        Command::cargo_bin("repro")
            .unwrap()
            .arg(command)
            .arg(&spec)
            .arg("-o")
            .arg(tmp.path().join("art"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "in this spec they are compile-time constants: kernel.template_args[0] (`M`) uses `M`; \
                 kernel.template_args[1] (`N`) uses `N`; kernel.template_args[2] (`K`) uses `K`; \
                 kernel.setup, inside <...> uses `M`, `N`, `K`",
            ));
    }
}

#[test]
fn sizes_the_setup_uses_only_at_run_time_stay_run_time_values() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "  name: small_gemm\n",
        "  name: small_gemm\n  setup: |\n    // K rows; a <K> in a comment is no template argument\n    const bool tall = N < M;\n    static_cast<void>(tall);\n",
    );
    std::fs::write(&spec, text).unwrap();
    let out = tmp.path().join("art");
    Command::cargo_bin("repro")
        .unwrap()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    assert!(
        harness.contains("const int K = static_cast<int>(repro_sizes[2]);"),
        "{harness}"
    );
    assert!(!harness.contains("constexpr int K"), "{harness}");
}
