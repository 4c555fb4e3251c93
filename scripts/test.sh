#!/usr/bin/env bash
# The test suite (the README's test command; CI runs it with REPRO_TEST_ALL=1, which compiles
# every example's harness instead of one of each kind, and the portability builds). Needs the CUDA toolchain: tests
# compile harnesses with the real nvcc, and a missing nvcc is a failure, not a skip. Installs it
# into .toolchain/ first if it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-toolchain.sh
# The tests' runtime libraries are cached inside the clone, never in the user's cache.
export REPRO_CACHE_DIR=${REPRO_CACHE_DIR:-$PWD/target/repro-cache}
cargo test --locked --profile test-suite "$@"
