#!/usr/bin/env bash
# The async-race checker (issue 36) on the GPU machine: `repro run --sanitize async-race` on the
# race kernels (each must be named, with its kind), their correct versions, our other TMA
# kernels and CUTLASS sm90 GEMMs (each must give 0 races); then how often the planted races show
# in the numbers under each --stress mode; then the checker's cost beside no tool and racecheck.
#
#   CUTLASS_DIR=... scripts/gpu-async-race.sh [checks] [rates] [cost] 2>&1 | tee async-race.log
#
# Every case prints its whole output; a table at the end says whether each exited as expected
# and printed the expected line. Artifacts go to a temporary folder.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
work=$(mktemp -d)
sections=${*:-checks rates cost}
rows=()
wanted() { [[ " $sections " == *" $1 "* ]]; }

# run_case LABEL EXPECTED_EXIT TEXT ARGS...: runs repro, prints its output, adds a table row.
run_case() {
  local label=$1 want=$2 says=$3 code ok log
  shift 3
  log="$work/$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' '_').log"
  local start=$SECONDS
  timeout "${CASE_TIMEOUT:-300}" "$repro" "$@" >"$log" 2>&1
  code=$?
  ok=$([[ "$want" == "$code" ]] && grep -qF -- "$says" "$log" && echo yes || echo NO)
  printf '\n$ repro %s\n' "$*"
  cat "$log"
  printf -- '-> exit %s in %s s\n' "$code" "$((SECONDS - start))"
  rows+=("$(printf '| %-48s | %4s | %4s | %-3s | %s |' "$label" "$want" "$code" "$ok" "$says")")
}
check() { run_case "async-race $1" "$2" "$3" run "examples/$1.yaml" -o "$work/$1" --sanitize async-race --ones; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$repro" --version

if wanted quick; then
  check async_race_store_reused_early 6 "is not waited for before the write"
  check async_race_load_released_early 6 "the stage was released before the access"
  check async_race_no_proxy_fence 6 "no fence.proxy.async between the write and the store"
  check async_race_gemm 0 "sanitize  async-race: 0 races"
  check persistent_tma_store 0 "sanitize  async-race: 0 races"
  check tma_gemm_bf16 0 "sanitize  async-race: 0 races"
  check async_race_aligned_pipeline 0 "sanitize  async-race: 0 races"
fi

if wanted checks; then
  echo "== planted races: each named on its first run"
  check async_race_store_reused_early 6 "is not waited for before the write"
  check async_race_load_released_early 6 "the stage was released before the access"
  check async_race_no_proxy_fence 6 "no fence.proxy.async between the write and the store"
  check persistent_tma_store_no_barrier 6 "is not waited for before the write"
  echo "== issue 62: tensor maps rewritten in global memory while loads through them may be in flight"
  check tensormap_rewrite_no_drain 6 "tensor map"
  echo "== correct kernels: 0 races"
  check async_race_gemm 0 "sanitize  async-race: 0 races"
  check persistent_tma_store 0 "sanitize  async-race: 0 races"
  check tma_gemm_bf16 0 "sanitize  async-race: 0 races"
  check cutlass_bf16_cooperative 0 "sanitize  async-race: 0 races"
  check cutlass_bf16_pingpong 0 "sanitize  async-race: 0 races"
  check cutlass_fp8_e4m3 0 "sanitize  async-race: 0 races"
  echo "== issue 62: DeepGEMM's layout (static smem, then extern __align__(1024); one empty arrival per math warp)"
  check async_race_aligned_pipeline 0 "sanitize  async-race: 0 races"
  echo "== issue 62: the tensor-map rewrite after the drain (DeepGEMM PR #343), and with tensormap.replace"
  echo "   before the drain (PR #375's case: not a race by our reading of the PTX model, see the spec)"
  check tensormap_rewrite_drained 0 "sanitize  async-race: 0 races"
  check tensormap_rewrite_same_group 0 "sanitize  async-race: 0 races"
  echo "== a second run of a planted race: the same finding (order, not timing)"
  check async_race_store_reused_early 6 "is not waited for before the write"
  echo "== generic-proxy stores into an mbarrier ring (no async proxy: racecheck's domain)"
  check mbarrier_pipeline 0 "sanitize  async-race: 0 races"
fi

if wanted rates; then
  echo "== how often the planted races show in the numbers: 5 invocations x 20 launches per mode"
  MODES="none bandwidth l2 jitter" REPEAT=20 scripts/race-rates.sh 5 \
    examples/async_race_store_reused_early.yaml examples/async_race_load_released_early.yaml \
    examples/async_race_no_proxy_fence.yaml
  echo "== issue 62: the tensor-map rewrite without the drain, and its drained control (no delay points: no jitter)"
  MODES="none bandwidth l2" REPEAT=20 scripts/race-rates.sh 5 \
    examples/tensormap_rewrite_no_drain.yaml examples/tensormap_rewrite_drained.yaml
fi

if wanted cost; then
  echo "== cost at 4096^3 (async_race_gemm, 132 CTAs): no tool, racecheck, async-race; one launch each"
  big=tests/gpu/async_race_gemm_4096.yaml
  run_case "4096^3 no tool" 0 "Disposition: Passed" run "$big" -o "$work/big" --ones --repeat 1
  run_case "4096^3 racecheck" 0 "racecheck" run "$big" -o "$work/big" --ones --sanitize racecheck
  run_case "4096^3 async-race" 0 "sanitize  async-race: 0 races" run "$big" -o "$work/big" --ones --sanitize async-race
  echo "== 4096 x 4096 x 512 fp8 (CUTLASS) under async-race: within 60 s"
  run_case "fp8 4096x4096x512 async-race" 0 "sanitize  async-race: 0 races" run tests/gpu/cutlass_fp8_4096x4096x512.yaml -o "$work/fp8" --ones --sanitize async-race
fi

printf '\n| case | want | exit | ok | expected line |\n|---|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
