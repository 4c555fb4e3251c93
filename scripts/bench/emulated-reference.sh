#!/usr/bin/env bash
# Issue 35's benchmark, side by side in one run on a GPU machine: reference + comparison with the
# fp64 tensor cores (--reference device) and with the int8 emulation (--reference emulated), and
# a user's alternative, torch.matmul in float64 plus a comparison (torch_reference_peer.py).
#   - bf16 (tests/gpu/bench_tiled_bf16_8192 at 2048^3 to 16384^3 through --size);
#   - f16 and f32 at 8192^3 (tests/gpu/bench_tiled_f16_8192, tests/gpu/bench_tiled_f32_8192);
#   - fp8 e4m3 with ue8m0 block scales at 8192^3 (examples/fp8_scaled_gemm_ue8m0 through --size).
# Each case runs ROUNDS times (default 3), the providers interleaved; the table gives the
# median of each phase from the harness's own report (`timings`: reference, compare;
# `reference_kernel_ms`, `reference_fetch_ms`, `reference_check_ms`) and the engine the `ref`
# line names. The emulation runs once per int8 kernel in KERNELS (REPRO_EMULATED_KERNEL; default
# "wgmma tma tma_multicast": the cp.async kernel and the two fed by TMA) and scheme in SCHEMES
# (REPRO_EMULATED_SCHEME; default "slices auto": slices alone, and slices or residues by estimate).
# With AUTO=1, also `--reference auto` (what a spec gets by default: the emulation where its
# estimate is under 0.8 of the fp64 one, else the fp64 tensor cores).
#
#   REPRO=target/release/repro scripts/bench/emulated-reference.sh
#   CASES='bf16_8192 f32_*' ROUNDS=2 scripts/bench/emulated-reference.sh   # some cases only
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
rounds=${ROUNDS:-3}
read -r -a kernels <<<"${KERNELS:-wgmma tma tma_multicast}"
read -r -a schemes <<<"${SCHEMES:-slices auto}"
providers=(device)
[[ "${AUTO:-0}" == 1 ]] && providers+=(auto)
for kernel in "${kernels[@]}"; do
  for scheme in "${schemes[@]}"; do providers+=("emulated:$kernel:$scheme"); done
done
dir=$(mktemp -d)
cases=()
for size in 2048 4096 8192 16384; do cases+=("bf16_$size tests/gpu/bench_tiled_bf16_8192.yaml $size"); done
cases+=("f16_8192 tests/gpu/bench_tiled_f16_8192.yaml 8192")
cases+=("f32_8192 tests/gpu/bench_tiled_f32_8192.yaml 8192")
cases+=("e4m3_ue8m0_8192 examples/fp8_scaled_gemm_ue8m0.yaml 8192")
# CASES: space-separated globs over the labels above (default: all).
read -r -a case_globs <<<"${CASES:-*}"
chosen=()
for entry in "${cases[@]}"; do
  for glob in "${case_globs[@]}"; do
    # shellcheck disable=SC2053
    if [[ "${entry%% *}" == $glob ]]; then chosen+=("$entry"); break; fi
  done
done
cases=("${chosen[@]}")
for spec in tests/gpu/bench_tiled_bf16_8192.yaml tests/gpu/bench_tiled_f16_8192.yaml tests/gpu/bench_tiled_f32_8192.yaml \
  examples/fp8_scaled_gemm_ue8m0.yaml; do
  "$repro" build "$spec" >/dev/null
done
for round in $(seq 1 "$rounds"); do
  for entry in "${cases[@]}"; do
    read -r label spec size <<<"$entry"
    for provider in "${providers[@]}"; do
      code=0
      # The harness itself: `--size` is its option (repro run keeps the spec's sizes).
      emulation_env=()
      if [[ "$provider" == emulated:* ]]; then
        IFS=: read -r _ kernel scheme <<<"$provider"
        emulation_env=("REPRO_EMULATED_KERNEL=$kernel" "REPRO_EMULATED_SCHEME=$scheme")
      fi
      env "${emulation_env[@]}" "generated/$(basename "$spec" .yaml)/harness" --size M="$size" --size N="$size" \
        --size K="$size" --repeat 1 --reference "${provider%%:*}" --json "$dir/$label.$provider.$round.json" \
        >"$dir/$label.$provider.$round.log" 2>&1 || code=$?
      # Exit 0 or 1 both carry timings; anything else is a failure of the benchmark itself.
      if [[ $code -gt 1 ]]; then cat "$dir/$label.$provider.$round.log"; exit "$code"; fi
    done
  done
done
grep -h '^ref ' "$dir"/*.1.log
python3 - "$dir" "$rounds" "${providers[*]}" "${cases[@]}" <<'PY'
import json, statistics, sys
folder, rounds, providers = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
cases = [c.split()[0] for c in sys.argv[4:]]
print("| case | provider | reference (ms) | of which device kernels (ms) | cross-check's fetch (ms) | its recomputation beyond the GEMM (ms) | comparison (ms) | reference + comparison (ms) | engine |")
print("|---|---|---|---|---|---|---|---|---|")
for label in cases:
    for provider in providers:
        runs = [json.load(open(f"{folder}/{label}.{provider}.{r}.json")) for r in range(1, rounds + 1)]
        ref = statistics.median(r["timings"]["reference"] for r in runs) * 1e3
        cmp_ = statistics.median(r["timings"]["compare"] for r in runs) * 1e3
        kernel = statistics.median(r.get("reference_kernel_ms", float("nan")) for r in runs)
        fetch = statistics.median(r.get("reference_fetch_ms", float("nan")) for r in runs)
        check = statistics.median(r.get("reference_check_ms", float("nan")) for r in runs)
        engine = runs[0].get("reference_engine", "?")
        print(f"| {label} | {provider} | {ref:.1f} | {kernel:.1f} | {fetch:.1f} | {check:.1f} | {cmp_:.1f} | {ref + cmp_:.1f} | {engine} |")
PY
echo
echo "torch.matmul in float64 + a comparison, the same sizes (scripts/bench/torch_reference_peer.py):"
python3 scripts/bench/torch_reference_peer.py "$(printf '%s\n' "${cases[@]}" | awk '{print $3}' | sort -nu | paste -sd,)"
