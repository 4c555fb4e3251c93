#!/usr/bin/env bash
# Builds ./capture_app (next to this script) from capture_app.cu and kernels/tma_gemm.cuh.
#   ./build.sh [-o PATH]      (or OUT_BIN=PATH; NVCC=/path/to/nvcc to pick the compiler)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

out=${OUT_BIN:-$here/capture_app}
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out=${2:?-o needs a path}; shift 2 ;;
    *) echo "usage: $0 [-o PATH]" >&2; exit 2 ;;
  esac
done

# The compiler: $NVCC, else nvcc on PATH, else the repository's pinned toolchain
# (scripts/setup-toolchain.sh), else a system CUDA install.
nvcc=${NVCC:-}
if [[ -z "$nvcc" ]]; then
  for c in "$(command -v nvcc || true)" "$here/../../.toolchain/cuda/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    if [[ -n "$c" && -x "$c" ]]; then nvcc=$c; break; fi
  done
fi
[[ -n "$nvcc" ]] || { echo "build.sh: no nvcc (set NVCC, or run scripts/setup-toolchain.sh)" >&2; exit 1; }

# sm_90a: the kernel uses TMA and mbarrier transaction counts (Hopper). -lineinfo keeps source
# lines in the cubin for tools (compute-sanitizer, a capture's report) at no speed cost.
set -x
"$nvcc" -std=c++17 -O3 -arch=sm_90a -lineinfo -I"$repo/kernels" -o "$out" "$here/capture_app.cu"
