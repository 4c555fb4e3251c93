#!/usr/bin/env bash
# Issue 22's reference benchmarks, side by side in one run on a GPU machine:
#   - reference + comparison of an fp8 block-scaled GEMM at 8192^3 (tests/gpu/bench_fp8_scaled_8192)
#     against the plain bf16 GEMM at the same size (tests/gpu/bench_tiled_bf16_8192): target <= 1.2x;
#   - reference + comparison of a grouped GEMM, 8 groups, 8192 rows, N 4096, K 7168
#     (tests/gpu/bench_grouped_8x8192): target <= 100 ms.
# Each spec runs ROUNDS times (default 3), interleaved; the table gives the median of each phase
# from the harness's own report (`timings`: reference, compare; `reference_kernel_ms`).
#
#   REPRO=target/release/repro scripts/bench/scaled-grouped.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
rounds=${ROUNDS:-3}
dir=$(mktemp -d)
specs=(bench_tiled_bf16_8192 bench_fp8_scaled_8192 bench_grouped_8x8192)
for spec in "${specs[@]}"; do "$repro" build "tests/gpu/$spec.yaml" >/dev/null; done
for round in $(seq 1 "$rounds"); do
  for spec in "${specs[@]}"; do
    # Exit 0 or 1 both carry timings; anything else is a failure of the benchmark itself.
    code=0
    "$repro" run "tests/gpu/$spec.yaml" --repeat 1 --json "$dir/$spec.$round.json" >"$dir/$spec.$round.log" 2>&1 || code=$?
    if [[ $code -gt 1 ]]; then cat "$dir/$spec.$round.log"; exit "$code"; fi
  done
done
grep -h '^ref \|^D ' "$dir"/*.1.log
python3 - "$dir" "$rounds" "${specs[@]}" <<'PY'
import json, statistics, sys
folder, rounds, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for spec in specs:
    runs = [json.load(open(f"{folder}/{spec}.{r}.json")) for r in range(1, rounds + 1)]
    ref = statistics.median(r["timings"]["reference"] for r in runs) * 1e3
    cmp_ = statistics.median(r["timings"]["compare"] for r in runs) * 1e3
    kernel = statistics.median(r.get("reference_kernel_ms", float("nan")) for r in runs)
    rows[spec] = (ref, cmp_, kernel, runs[0].get("disposition", "?"))
print(f"| spec | reference (ms) | of which device kernels (ms) | comparison (ms) | reference + comparison (ms) |")
print("|---|---|---|---|---|")
for spec, (ref, cmp_, kernel, _) in rows.items():
    print(f"| `{spec}` | {ref:.1f} | {kernel:.1f} | {cmp_:.1f} | {ref + cmp_:.1f} |")
plain = sum(rows["bench_tiled_bf16_8192"][:2])
scaled = sum(rows["bench_fp8_scaled_8192"][:2])
grouped = sum(rows["bench_grouped_8x8192"][:2])
print(f"\nscaled fp8 / plain bf16 (reference + comparison): {scaled / plain:.2f}x (target <= 1.2x)")
print(f"grouped, 8 x 1024 rows, N 4096, K 7168: {grouped:.1f} ms (target <= 100 ms)")
PY
