#!/usr/bin/env bash
# Fresh machine to first verdict: installs the CUDA toolchain into .toolchain/ (PyPI wheels, no
# system changes), builds repro, and runs the bundled tiled bf16 GEMM example: all-ones first,
# then seeded random inputs against the fp64 reference. On a machine without a GPU the harness
# is still built, and the run says so and exits 7.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup-toolchain.sh || exit 3
cargo build --release --quiet || exit 3
spec=${1:-examples/tiled_gemm_bf16.yaml}
target/release/repro run "$spec" --ones
code=$?
if [[ $code -eq 7 ]]; then
  echo "quickstart: no CUDA device here; the harness is built in generated/$(basename "$spec" .yaml)/ and runs on any sm_90 machine (./harness --ones)"
  exit 7
fi
target/release/repro run "$spec"
