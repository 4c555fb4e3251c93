#!/usr/bin/env bash
# Harnesses built on another machine with the same nvcc (`repro build SPEC -o DIR`, then the
# folders packed), run here without repro: where building takes longer than a device call can
# spare (CUTLASS's kernels compile for minutes) or the machine lacks the headers. Each folder's
# harness runs --ones, with its random inputs and --probe, and a table says what came out beside
# what its spec's `expect:` asks. A folder named in EXPECT_EXIT_2 (name=text) is a spec the
# harness must refuse (exit 2) with that text in its output.
#
#   scripts/gpu-prebuilt.sh DIR          # DIR holds one artifact folder per spec
set -uo pipefail
root=${1:?a folder of artifact folders}
logs=${PREBUILT_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
rows=()
# expect MODE FOLDER: what the spec's expect says for ones, random or verdict ('?' when silent);
# the artifact's spec.yaml writes it as a block (`expect:` then indented lines), a spec as
# written may use the flow form on one line.
expect() {
  local block
  block=$(awk '/^expect:/ { on = 1; print; next } on && /^ / { print; next } { on = 0 }' "$2/spec.yaml" 2>/dev/null)
  [[ $block =~ $1:\ *([a-z_]+) ]] && echo "${BASH_REMATCH[1]}" || echo '?'
}
for dir in "$root"/*/; do
  name=$(basename "$dir")
  [[ -x $dir/harness ]] || continue
  refusal=$(tr ' ' '\n' <<<"${EXPECT_EXIT_2:-}" | grep "^$name=" | cut -d= -f2- | tr '_' ' ')
  for mode in ones random probe; do
    case $mode in ones) args=(--ones) ;; random) args=() ;; probe) args=(--probe) ;; esac
    log="$logs/$name.$mode.log"
    (cd "$dir" && ./harness "${args[@]}" --json "$logs/$name.$mode.json") >"$log" 2>&1
    code=$?
    printf '$ %s/harness %s\n' "$name" "${args[*]}"
    cat "$log"
    printf -- '-> exit %s\n\n' "$code"
    disposition=$(grep -a '^Disposition:' "$log" | tail -1 | sed 's/^Disposition: //')
    verdict=$(grep -a '^verdict ' "$log" | tail -1 | cut -c1-90)
    if [[ -n $refusal ]]; then
      want="2, says: $refusal"
      ok=$([[ $code == 2 ]] && grep -qF -- "$refusal" "$log" && echo yes || echo NO)
    else
      case $mode in
      ones | random) want=$(expect "$mode" "$dir") ;;
      probe) want=$(expect verdict "$dir") ;;
      esac
      case $want in
      pass | ok) ok=$([[ $code == 0 ]] && echo yes || echo NO) ;;
      '?') ok=- ;;
      *) ok=$([[ $code == 1 ]] && { [[ $mode != probe ]] || grep -qa "^verdict $want" "$log"; } && echo yes || echo NO) ;;
      esac
    fi
    rows+=("| $name | $mode | $want | $code | $ok | ${disposition:--} | ${verdict:--} |")
    [[ -n $refusal ]] && break
  done
done
echo "| spec | mode | expected | exit | ok | disposition | verdict |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "$(printf '%s\n' "${rows[@]}" | grep -c '| yes |') as expected, $(printf '%s\n' "${rows[@]}" | grep -c '| NO |') not"
