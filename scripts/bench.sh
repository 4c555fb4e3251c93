#!/usr/bin/env bash
# Time to a verdict, side by side (issue 9; the numbers in docs/performance.md come from here).
# Runs on a machine with an NVIDIA GPU, after `cargo build --release`:
#
#   scripts/bench.sh                  # sizes 1024 4096 8192
#   BENCH_SIZES="1024 4096" scripts/bench.sh
#
# For each size (M = N = K, bf16 inputs, the tiled example kernel of tests/gpu/bench_tiled_bf16_*):
#   - the naive host loop (scripts/bench/naive_host_gemm.cpp), the baseline;
#   - `repro run --repeat 1` with the fp64 reference on the host and on the device: the whole
#     wall time, the reference's share, and the harness's own phases (its `time` line); then a
#     rerun with the same operands, its reference read from the artifact's cache;
# then a warm run's overhead: the same harness run directly and through `repro run`.
# Nothing is compared against stored numbers; it prints what it measured.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
sizes=${BENCH_SIZES:-"1024 4096 8192"}
work=$(mktemp -d)

now() { date +%s.%N; }
elapsed() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }
# field REPORT EXPRESSION: a value from a harness's JSON report, e.g. timings.reference.
field() {
  python3 - "$1" "$2" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value.get(key) if isinstance(value, dict) else None
print("-" if value is None else ("%.3f" % value if isinstance(value, float) else value))
PY
}

echo "== machine"
date -u '+%Y-%m-%d %H:%M:%S UTC'
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$repro" --version

g++ -O3 -std=c++17 -pthread -o "$work/naive_host_gemm" scripts/bench/naive_host_gemm.cpp || exit 1

rows=()
for size in $sizes; do
  spec=tests/gpu/bench_tiled_bf16_$size.yaml
  "$repro" build "$spec" >/dev/null 2>&1 || { echo "build failed: $spec"; exit 1; }
  echo "== $size^3"
  naive_line=$("$work/naive_host_gemm" "$size")
  echo "$naive_line"
  naive=$(sed 's/.*: \([0-9.]*\) s,.*/\1/' <<<"$naive_line")
  row="| $size | $naive s"
  for provider in host device; do
    report="$work/$size-$provider.json"
    start=$(now)
    "$repro" run "$spec" --repeat 1 --reference "$provider" --no-reference-cache --json "$report" >"$work/$size-$provider.log" 2>&1
    code=$?
    wall=$(elapsed "$start" "$(now)")
    echo "-- --reference $provider: exit $code, $wall s wall"
    grep -E '^(ref|launch|time|Disposition)' "$work/$size-$provider.log"
    row+=" | $(field "$report" timings.reference) s | $wall s"
  done
  # A rerun with the same operands and the host reference: the reference comes from the
  # artifact's cache (the device path does not cache: it recomputes faster than a disk reads).
  rm -rf "generated/bench_tiled_bf16_$size/.repro/cache"
  "$repro" run "$spec" --repeat 1 --reference host >/dev/null 2>&1
  start=$(now)
  "$repro" run "$spec" --repeat 1 --reference host --json "$work/$size-cached.json" >"$work/$size-cached.log" 2>&1
  wall=$(elapsed "$start" "$(now)")
  echo "-- rerun, host reference from the cache: $wall s wall"
  grep -E '^(ref|time|Disposition)' "$work/$size-cached.log"
  row+=" | $wall s"
  # Issue 9's target: reference + comparison with the device provider, and its speed-up over the
  # naive loop.
  device_verdict=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) + float(sys.argv[2])))' \
    "$(field "$work/$size-device.json" timings.reference)" "$(field "$work/$size-device.json" timings.compare)")
  speedup=$(python3 -c 'import sys; print("%.0fx" % (float(sys.argv[1]) / float(sys.argv[2])))' "$naive" "$device_verdict")
  rows+=("$row | $(field "$work/$size-device.json" timings.compare) s | $device_verdict s ($speedup) | $(field "$work/$size-device.json" reference_kernel_ms) ms | $(field "$work/$size-device.json" timings.context) s |")
done

echo "== time to a verdict (repro run --repeat 1, random inputs, warm build)"
echo "| M = N = K | naive host loop | host reference | repro run, host reference | device reference (+ cross-check) | repro run, device path | repro run, host reference cached | comparison (device path) | device reference + comparison (vs naive) | of which packing + GEMM kernels | context |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"

echo "== a warm run's overhead: the 1024^3 harness directly, then through repro run (5 each, --ones)"
harness=generated/bench_tiled_bf16_1024/harness
for how in direct repro; do
  times=()
  for _ in 1 2 3 4 5; do
    start=$(now)
    if [[ $how == direct ]]; then
      "$harness" --ones --repeat 1 >/dev/null 2>&1
    else
      "$repro" run tests/gpu/bench_tiled_bf16_1024.yaml --ones --repeat 1 >/dev/null 2>&1
    fi
    times+=("$(elapsed "$start" "$(now)")")
  done
  echo "$how: ${times[*]} s (median $(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p) s)"
done
