#!/usr/bin/env bash
# Real harness JSON reports, one per kind of run, for crates/repro-contract/src/report_tests.rs
# (its test `every_report_in_the_fixtures_folder_reads` parses each file of the folder): a plain
# GEMM (ones and random), a scaled GEMM, a grouped GEMM, attention, a custom op with several
# outputs, the probe suite, --bench, and an async-race run. Copies each report to
# crates/repro-contract/tests/fixtures/report/gpu-<label>.json; commit the ones you keep.
#
#   scripts/gpu-report-fixtures.sh 2>&1 | tee gpu-report-fixtures.log   # uses target/release/repro
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
work=$(mktemp -d)
out=crates/repro-contract/tests/fixtures/report
mkdir -p "$out"

# capture LABEL ARGS...: runs repro with --json, prints its output and exit code, and copies the
# report (when one was written).
capture() {
  local label=$1 json="$work/$1.json" code
  shift
  "$repro" "$@" -o "$work/artifact-$label" --json "$json"
  code=$?
  printf -- '-> %s: exit %s\n' "$label" "$code"
  if [[ -f "$json" ]]; then cp "$json" "$out/gpu-$label.json"; else echo "   (no report)"; fi
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$repro" --version
capture gemm-ones run examples/skip_last_m_tile.yaml --ones
capture gemm-random run examples/skip_last_m_tile.yaml
capture gemm-passed run examples/naive_gemm_f32.yaml
capture scaled run examples/fp8_scaled_gemm_ue8m0_byte_order.yaml --ones
capture grouped run examples/grouped_masked_wrong_group.yaml --ones
capture attention run examples/flash_attention_exp2_scale.yaml
capture custom-outputs run examples/layer_norm_affine_first_half.yaml
capture probe probe examples/k_tile_twice.yaml
capture probe-attention probe examples/flash_attention_causal_off_by_one.yaml
# repro bench --json writes repro's own table; the harness's report stays in the artifact (bench
# takes no -o: an artifact scaffolded here keeps generated/ as it is).
"$repro" scaffold examples/naive_gemm_bf16.yaml -o "$work/artifact-bench"
"$repro" bench "$work/artifact-bench"
printf -- '-> bench: exit %s\n' "$?"
cp "$work/artifact-bench/.repro/bench/report.json" "$out/gpu-bench.json" || echo "   (no report)"
capture async-race run examples/async_race_load_released_early.yaml --sanitize async-race
ls -l "$out"
