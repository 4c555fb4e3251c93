#!/usr/bin/env bash
# How often a race shows, without stress and under each --stress mode, side by side in one run
# (issue 19): N invocations of `repro run` (or `repro probe`: COMMAND=probe) per spec, option set
# and mode, each counted by its disposition. Run on the GPU machine, after `repro build` of every
# spec:
#
#   scripts/race-rates.sh 100 examples/persistent_tma_store_no_barrier.yaml examples/mbarrier_pipeline_early_release.yaml
#   MODES="none l2" REPEAT=6 COMMAND=probe scripts/race-rates.sh 20 examples/column_sum_no_sync.yaml
#   OPTIONS="--size K=64|--size K=64 --size CTAS=8" scripts/race-rates.sh 20 examples/persistent_tma_store_no_barrier.yaml
#
# OPTIONS is a |-separated list of option sets (words split on spaces; default: one empty set);
# every spec runs with each. Prints one table row per spec, option set and mode: invocations, how
# many failed with a class of wrong values, `nondeterministic` among them (the race showed: these
# kernels are right when it does not), how many failed otherwise (fault, timeout, build,
# reference, usage, or no disposition), how many passed, and
# the seconds they took.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
count=${1:?usage: scripts/race-rates.sh N SPEC...}
shift
modes=${MODES:-none bandwidth l2}
repeat=${REPEAT:-4}
command=${COMMAND:-run}
IFS='|' read -r -a option_sets <<<"${OPTIONS:-}"
[[ ${#option_sets[@]} -eq 0 ]] && option_sets=("")
printf '| spec | options | mode | %s | invocations | race shown | other failure | passed | seconds |\n' "$command"
printf '|---|---|---|---|---|---|---|---|---|\n'
for spec in "$@"; do
  for options in "${option_sets[@]}"; do
    read -r -a extra <<<"$options"
    for mode in $modes; do
      stress=()
      [[ "$mode" != none ]] && stress=(--stress "$mode")
      race=0 other=0 passed=0
      start=$(date +%s.%N)
      for ((i = 0; i < count; i++)); do
        disposition=$("$repro" "$command" "$spec" --repeat "$repeat" "${stress[@]}" "${extra[@]}" 2>&1 |
          grep -a '^Disposition:' | tail -1)
        case "$disposition" in
          *Passed*) passed=$((passed + 1)) ;;
          "" | *"(fault)"* | *"(timeout)"* | *"(build)"* | *"(reference)"* | *"(usage)"*) other=$((other + 1)) ;;
          *Failed*) race=$((race + 1)) ;;
          *) other=$((other + 1)) ;;
        esac
      done
      seconds=$(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $start }")
      printf '| %s | %s | %s | --repeat %s | %d | %d | %d | %d | %s |\n' "$(basename "$spec" .yaml)" "${options:--}" \
        "$mode" "$repeat" "$count" "$race" "$other" "$passed" "$seconds"
    done
  done
done
