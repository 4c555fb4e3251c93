#!/usr/bin/env bash
# The probe verdicts of issue 38 on the GPU machine: operand_layout (a TMA GEMM reading B from
# swapped coordinates), grouped spills told apart (zeros written, a store race, another group's
# product), the scale probes decoded per tile (scales read past the scale tensor's end) and the
# grouped GEMMs' group scale probes (issue 61), with the examples whose verdicts must not move
# beside them. Every case prints its full output; a
# table at the end says whether each exited as expected and printed the expected verdict line.
#
#   scripts/gpu-verdicts.sh 2>&1 | tee gpu-verdicts.log     # uses target/release/repro
#
# Artifacts go to a temporary folder (not generated/); logs to $GPU_VERDICT_LOGS (default: one).
# SECTIONS=D (or A,C) runs only those sections, where a device call's time is short.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
work=$(mktemp -d)
logs=${GPU_VERDICT_LOGS:-$work/logs}
mkdir -p "$logs"
rows=()
sections=${SECTIONS:-A,B,C,D}
# in_section X: whether section X was asked for.
in_section() { [[ ",$sections," == *",$1,"* ]]; }

# run_case LABEL EXPECTED_EXIT TEXT ARGS...: runs repro, prints its whole output, and adds a table
# row: ok when the exit code is EXPECTED_EXIT and the output contains TEXT.
run_case() {
  local label=$1 want=$2 says=$3 code ok log
  shift 3
  log="$logs/$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' '_').log"
  "$repro" "$@" >"$log" 2>&1
  code=$?
  ok=$([[ "$want" == "$code" ]] && grep -qF -- "$says" "$log" && echo yes || echo NO)
  printf '\n$ repro %s\n' "$*"
  cat "$log"
  printf -- '-> exit %s\n' "$code"
  rows+=("$(printf '| %-44s | %4s | %4s | %-3s | %s |' "$label" "$want" "$code" "$ok" "$says")")
}
# probe_case NAME EXPECTED_EXIT TEXT: `repro probe` of examples/NAME.yaml.
probe_case() { run_case "probe $1" "$2" "$3" probe "examples/$1.yaml" -o "$work/$1"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$repro" --version

# A. operand_layout: B tiles loaded at (n0, k0). The K loop's own defects keep k_coverage.
if in_section A; then
  run_case "tma_gemm_swapped_b_coords --ones" 1 "Disposition: Failed" run examples/tma_gemm_swapped_b_coords.yaml -o "$work/tma_gemm_swapped_b_coords" --ones
  probe_case tma_gemm_swapped_b_coords 1 "verdict operand_layout: B is read from the wrong place: the identity probe (B = I): whole columns are wrong and every other column is right: columns 64-127 of every 128-column tile"
  probe_case drop_last_k 1 "verdict k_coverage:"
  probe_case k_tile_twice 1 "verdict k_coverage:"
  probe_case tma_gemm_box_too_small 1 "verdict row_mapping:"
  probe_case tma_gemm_swizzle_mismatch 1 "verdict layout:"
  probe_case tma_gemm_bf16 0 "verdict ok:"
  probe_case mbarrier_pipeline_early_release 0 "verdict ok:"
fi

# B. Grouped spills: zeros written by the previous group's tile (deterministic, then racing the
# group's own store), another group's product stored over a group's rows; other group defects.
if in_section B; then
  run_case "grouped_masked_zero_spill --ones" 1 "Disposition: Failed" run examples/grouped_masked_zero_spill.yaml -o "$work/grouped_masked_zero_spill" --ones
  probe_case grouped_masked_zero_spill 1 "verdict group_mapping: group codes: group 1 rows 0-55 were written with zeros"
  run_case "grouped_masked_store_race --ones --repeat 8" 1 "Disposition: Failed" run examples/grouped_masked_store_race.yaml -o "$work/grouped_masked_store_race" --ones --repeat 8
  probe_case grouped_masked_store_race 1 "verdict group_mapping:"
  probe_case grouped_masked_spill 1 "verdict group_mapping: group codes: group 1 rows 0-55 hold group 0's product: they lie in the footprint of group 0's tile"
  probe_case grouped_contiguous_spill 1 "verdict group_mapping: group codes: rows 256-299 (group 0) hold group 1's product: they lie in the 128-row tile at rows 256-383"
  probe_case grouped_masked_wrong_group 1 "verdict group_mapping:"
  probe_case grouped_contiguous_wrong_group 1 "verdict group_mapping:"
  probe_case grouped_k_short 1 "verdict k_coverage:"
  probe_case grouped_masked 0 "verdict ok:"
fi

# C. Scale probes decoded per tile; scales read past SA's end, and memcheck seeing those reads.
if in_section C; then
  run_case "fp8_scaled_gemm_scale_rows_past_end --ones" 1 "Disposition: Failed" run examples/fp8_scaled_gemm_scale_rows_past_end.yaml -o "$work/fp8_scaled_gemm_scale_rows_past_end" --ones
  probe_case fp8_scaled_gemm_scale_rows_past_end 1 "verdict scale_mapping:"
  run_case "fp8_scaled_gemm_scale_rows_past_end memcheck" 6 "Failed (sanitizer)" run "$work/fp8_scaled_gemm_scale_rows_past_end" --ones --sanitize memcheck
  probe_case fp8_scaled_gemm_unswizzled_scales 1 "verdict scale_mapping: the plain probes pass with every scale 1; the scale probes fail: tile"
  probe_case fp8_scaled_gemm_ue8m0_byte_order 1 "verdict scale_mapping:"
  probe_case fp8_scaled_gemm 0 "verdict ok:"
fi

# D. Grouped GEMMs with block scales (issue 61): the group scale probes name which group's scales,
# which scale_a rows and which K blocks' bytes each group's rows used; the correct kernels stay ok.
if in_section D; then
  probe_case fp8_grouped_contiguous_previous_group_scales 1 "the group scale probes fail: rows 384-583 (group 1) used group 1's weights with group 0's scale_b blocks; rows 640-1049 (group 3) used group 3's weights with group 2's scale_b blocks"
  probe_case fp8_grouped_contiguous_scale_row_within_group 1 "the group scale probes fail: rows 384-583 (group 1) used scale_a rows 0-199 (the rows within the group) instead of 384-583; rows 640-1049 (group 3) used scale_a rows 0-409 (the rows within the group) instead of 640-1049"
  probe_case fp8_grouped_masked_ue8m0_byte_order_group_1 1 "the group scale probes fail: group 1 rows 0-199: K blocks 0-4 used the scale_a and scale_b of K blocks 3, 2, 1, 0, 3 (mod 4) instead of 0, 1, 2, 3, 0 (scale_a's and scale_b's packed ue8m0 bytes read in reverse order"
  probe_case fp8_grouped_contiguous 0 "verdict ok:"
  probe_case fp8_grouped_masked_ue8m0 0 "verdict ok:"
  probe_case fp8_grouped_masked_accumulate 0 "verdict ok:"
  # k_grouped_blocks: A's and B's blocks coded apart, the tail past the groups as group G.
  probe_case fp8_k_grouped_blocks_next_group_block 1 "verdict group_mapping: group codes: every group read from where its own block ends (its A and B taken to begin at k0(g) + k_g, read with its own row stride k_g): group 0 (k 256) read A rows 0-99 from group 1's block, rows 100-199 from group 2's block, and B columns 0-67 from group 1's block, columns 68-135 from group 2's block; group 1 (k 128) read group 2's A and B blocks; group 2 (k 384) read A rows 0-132 from group 3's block, row 133 from no single block (a mixture), rows 134-199 from the tail past the last group (k 1024-1407), and B columns 0-89 from group 3's block, column 90 from no single block (a mixture), columns 91-135 from the tail past the last group (k 1024-1407); group 3 (k 256) read its A and B from the tail past the last group (k 1024-1407)"
  probe_case fp8_k_grouped_blocks 0 "verdict ok:"
fi

# S. Operators of several kernels (issue 56): split-K (partials + reduce), stream-K with a
# persistent tile-counter intermediate, the attention backward as preprocess + main + dQ convert.
if in_section S; then
  for name in split_k_gemm stream_k_gemm flash_attention_backward_split; do
    run_case "$name --ones" 0 "Disposition: Passed" run "examples/$name.yaml" -o "$work/$name" --ones
    run_case "$name (random)" 0 "Disposition: Passed" run "examples/$name.yaml" -o "$work/$name"
  done
  probe_case split_k_gemm 0 "verdict ok:"
  probe_case split_k_gemm_drop_last_split 1 "verdict k_coverage:"
  probe_case split_k_gemm_bf16_partials 1 "verdict precision:"
  run_case "split_k_gemm_bf16_partials --ones" 0 "Disposition: Passed" run examples/split_k_gemm_bf16_partials.yaml -o "$work/split_k_gemm_bf16_partials" --ones
  # Right on the first call, wrong on the second: the counters it leaves behind.
  run_case "stream_k_gemm_counters_not_reset (random)" 1 "pattern state_across_calls: call 1 matches the reference; call 2 is the first wrong one" run examples/stream_k_gemm_counters_not_reset.yaml -o "$work/stream_k_gemm_counters_not_reset"
  run_case "stream_k_gemm_counters_not_reset --repeat 1" 0 "Disposition: Passed" run examples/stream_k_gemm_counters_not_reset.yaml -o "$work/stream_k_gemm_counters_not_reset" --repeat 1
  run_case "stream_k_gemm_fixup_without_wait --repeat 5" 1 "Disposition: Failed" run examples/stream_k_gemm_fixup_without_wait.yaml -o "$work/stream_k_gemm_fixup_without_wait" --repeat 5
  run_case "flash_attention_backward_split_preprocess_half_d" 1 "Disposition: Failed" run examples/flash_attention_backward_split_preprocess_half_d.yaml -o "$work/fabs_half_d"
  probe_case flash_attention_backward_split 0 "verdict ok:"
  run_case "stream_k_gemm --sanitize memcheck" 0 "Disposition: Passed" run examples/stream_k_gemm.yaml -o "$work/stream_k_gemm_memcheck" --ones --sanitize memcheck
  # Every launch of a sequence under the sanitizers; its sizes as a queue (sweep).
  run_case "split_k_gemm --sanitize memcheck" 0 "Disposition: Passed" run examples/split_k_gemm.yaml -o "$work/split_k_gemm_memcheck" --sanitize memcheck
  run_case "split_k_gemm --sanitize async-race" 0 "Disposition: Passed" run examples/split_k_gemm.yaml -o "$work/split_k_gemm_async_race" --ones --sanitize async-race
  run_case "sweep split_k_gemm" 0 "every size passes" sweep examples/split_k_gemm.yaml
  probe_case stream_k_gemm 0 "verdict ok:"
  # Every launch feature in one operator (a cluster, a device task, a size-specialized TMA store).
  run_case "operator_launches --ones" 0 "Disposition: Passed" run tests/gpu/operator_launches.yaml -o "$work/operator_launches" --ones
  run_case "operator_launches (random)" 0 "Disposition: Passed" run tests/gpu/operator_launches.yaml -o "$work/operator_launches"
  # The first launch whose result is wrong, from the intermediates' own references (workspace,
  # DELTA): the reduce with a right workspace, the preprocess with a wrong DELTA.
  run_case "split_k_gemm_drop_last_split: first wrong launch" 1 "launches launch 2 of 2 (split_k_kernels::reduce" run examples/split_k_gemm_drop_last_split.yaml -o "$work/split_k_gemm_drop_last_split"
  run_case "preprocess_half_d: first wrong launch" 1 "launches launch 1 of 3 (attention_kernels::flash_backward_preprocess" run examples/flash_attention_backward_split_preprocess_half_d.yaml -o "$work/fabs_half_d"
  # The same from a reference file (workspace.npy) over inputs from files; with --ones the file
  # holds other inputs' values, and the intermediate is not judged.
  run_case "split_k_gemm_file_reference (files)" 0 "Disposition: Passed" run examples/split_k_gemm_file_reference.yaml -o "$work/split_k_gemm_file_reference"
  run_case "split_k_gemm_file_reference --ones" 0 "Disposition: Passed" run examples/split_k_gemm_file_reference.yaml -o "$work/split_k_gemm_file_reference" --ones
  probe_case split_k_gemm_file_reference 0 "verdict ok:"
  run_case "file_reference_drop_last_split: first wrong launch" 1 "launches launch 2 of 2 (split_k_kernels::reduce<split_k_kernels::SplitKDefect::drop_last_split>): its input workspace matches the reference, its output D does not" run examples/split_k_gemm_file_reference_drop_last_split.yaml -o "$work/split_k_gemm_file_reference_drop_last_split"
  run_case "file_reference_drop_last_split --ones: not judged" 1 "launches not named: workspace's reference file holds its values for the spec's own inputs, and --ones changed them: not judged" run examples/split_k_gemm_file_reference_drop_last_split.yaml -o "$work/split_k_gemm_file_reference_drop_last_split" --ones
  probe_case split_k_gemm_file_reference_drop_last_split 1 "verdict k_coverage:"
fi

printf '\n| %-44s | %4s | %4s | %-3s | %s |\n' "case" "want" "exit" "ok" "expected text"
printf '%s\n' "${rows[@]}"
bad=$(printf '%s\n' "${rows[@]}" | grep -c '| NO  |')
echo "$(( ${#rows[@]} - bad )) as expected, $bad not; logs in $logs"
