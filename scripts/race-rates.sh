#!/usr/bin/env bash
# How often a race shows, without stress and under each --stress mode, side by side in one run
# (issue 19): N invocations of `repro run` (or `repro probe`: COMMAND=probe) per spec and mode,
# each counted by its disposition. Run on the GPU machine, after `repro build` of every spec:
#
#   scripts/race-rates.sh 100 examples/persistent_tma_store_no_barrier.yaml examples/mbarrier_pipeline_early_release.yaml
#   MODES="none l2" REPEAT=6 COMMAND=probe scripts/race-rates.sh 20 examples/column_sum_no_sync.yaml
#
# Prints one table row per spec and mode: invocations, how many said nondeterministic (the race
# showed), how many failed otherwise, how many passed, and the seconds they took.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
count=${1:?usage: scripts/race-rates.sh N SPEC...}
shift
modes=${MODES:-none bandwidth l2}
repeat=${REPEAT:-4}
command=${COMMAND:-run}
printf '| spec | mode | %s | invocations | race shown | other failure | passed | seconds |\n' "$command"
printf '|---|---|---|---|---|---|---|---|\n'
for spec in "$@"; do
  for mode in $modes; do
    stress=()
    [[ "$mode" != none ]] && stress=(--stress "$mode")
    race=0 other=0 passed=0
    start=$(date +%s.%N)
    for ((i = 0; i < count; i++)); do
      disposition=$("$repro" "$command" "$spec" --repeat "$repeat" "${stress[@]}" 2>&1 | grep -a '^Disposition:' | tail -1)
      case "$disposition" in
        *nondeterministic*) race=$((race + 1)) ;;
        *Passed*) passed=$((passed + 1)) ;;
        *) other=$((other + 1)) ;;
      esac
    done
    seconds=$(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $start }")
    printf '| %s | %s | --repeat %s | %d | %d | %d | %d | %s |\n' "$(basename "$spec" .yaml)" "$mode" "$repeat" \
      "$count" "$race" "$other" "$passed" "$seconds"
  done
done
