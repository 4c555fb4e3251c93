#!/usr/bin/env bash
# The hostile-file battery at length (issue 58): tests/suite/hostile_battery/ with many cases
# of each kind of file repro reads from someone else (spec, campaign and shapes files, results
# folder, capture folder, bisect repository, received bundle, spec to bundle), each in a jail of
# its own, through the binary. CI runs the same test in its short mode (12 cases a kind, as part
# of scripts/test.sh). Passes when no case panics (101), exits 70, outlives its limit, refuses
# without naming the file, changes anything outside its output folders, or carries the secret
# planted beside it into an output.
#
#   scripts/fuzz-hostile.sh                          # 200 cases a kind (bundles: 5, real nvcc)
#   REPRO_HOSTILE_CASES=1000 scripts/fuzz-hostile.sh
#
# The cases are seeded by their number: a failure names its kind and number, and reruns.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-toolchain.sh >/dev/null
export REPRO_CACHE_DIR=${REPRO_CACHE_DIR:-$PWD/target/repro-cache}
export REPRO_HOSTILE_CASES=${REPRO_HOSTILE_CASES:-200}
cargo test --locked --profile test-suite --test suite hostile_battery:: -- --nocapture 2>&1 |
  grep -E "cases, [0-9]+ problems|case [0-9]+ \(|test result|panicked"
