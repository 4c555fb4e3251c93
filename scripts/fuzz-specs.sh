#!/usr/bin/env bash
# The spec fuzz test at length (issue 17, "Verified"): tests/suite/spec_fuzz.rs with ≥ 10,000 mutated
# example specs (and as many random YAML texts) through the loader, in a release build, then every
# 10th mutated spec through the binary (`repro scaffold`), with the distribution of exit codes.
# Passes when nothing panics (exit 101), nothing runs past 5 s (the test's own limit; `timeout 5`
# for the binary, exit 124), and every spec error exits 2 and names FILE:LINE:COLUMN.
#
#   scripts/fuzz-specs.sh                   # 12,000 cases
#   FUZZ_CASES=50000 scripts/fuzz-specs.sh
#
# The cases are deterministic (seeded in the test), so a failure reproduces by rerunning.
set -uo pipefail
cd "$(dirname "$0")/.."
cases=${FUZZ_CASES:-12000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet || exit 1
repro=${CARGO_TARGET_DIR:-target}/release/repro

echo "== in process: $cases mutated specs and $cases random YAML texts (cargo test --release)"
REPRO_FUZZ_CASES=$cases REPRO_FUZZ_DUMP=$work/cases \
  cargo test --release --quiet --test suite spec_fuzz:: -- --nocapture >"$work/test.log" 2>&1
status=$?
grep -E "cases|test result|panicked|took|outside|without a place" "$work/test.log"
if [ $status -ne 0 ]; then
  tail -40 "$work/test.log"
  echo "FAIL: the fuzz test failed" >&2
  exit 1
fi

# The dumped specs, laid out like the repository so that `../kernels` and the examples' own
# folders resolve.
ln -s "$PWD/kernels" "$work/cases/kernels"
for d in examples/*/; do
  ln -s "$PWD/$d" "$work/cases/examples/$(basename "$d")"
done

echo "== through the binary: repro scaffold on every 10th mutated spec"
declare -A codes=()
unlocated=0
total=0
for spec in "$work"/cases/examples/case_*.yaml; do
  out="$work/out/$(basename "$spec" .yaml)"
  timeout 5 "$repro" scaffold "$spec" -o "$out" >/dev/null 2>"$work/stderr"
  code=$?
  codes[$code]=$((${codes[$code]:-0} + 1))
  total=$((total + 1))
  if [ $code -eq 2 ] && ! grep -qE -- "--> .*:[0-9]+:[0-9]+$" "$work/stderr"; then
    unlocated=$((unlocated + 1))
    echo "exit 2 without FILE:LINE:COLUMN for $spec:" && head -3 "$work/stderr"
  fi
  if [ $code -ne 0 ] && [ $code -ne 2 ]; then
    echo "exit $code for $spec:" && tail -5 "$work/stderr"
  fi
  rm -rf "$out"
done
line="$total specs:"
for code in $(printf '%s\n' "${!codes[@]}" | sort -n); do
  line+=" exit $code: ${codes[$code]},"
done
echo "${line%,}; ${unlocated} errors without a place"

bad=$(( ${codes[101]:-0} + ${codes[124]:-0} + unlocated ))
for code in "${!codes[@]}"; do
  [ "$code" -ne 0 ] && [ "$code" -ne 2 ] && [ "$code" -ne 101 ] && [ "$code" -ne 124 ] && bad=$((bad + ${codes[$code]}))
done
if [ $bad -ne 0 ]; then
  echo "FAIL: $bad cases panicked, hung or exited other than 0 and 2 (or without a place)" >&2
  exit 1
fi
echo "PASS: 0 panics, nothing over 5 s, every error exit 2 with FILE:LINE:COLUMN"
