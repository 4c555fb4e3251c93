#!/usr/bin/env bash
# Build times of the loop users live in (issue 23), side by side in one run, for each spec given
# (default: examples/tiled_gemm_bf16.yaml and examples/cutlass_bf16_cooperative.yaml):
#
#   kernel alone     nvcc on a file that only includes the kernel (and the prelude) and takes the
#                    address of its instantiation, with the same production flags
#   runtime, cold    the first build of the runtime library (an empty runtime cache)
#   harness, warm    harness.cu rebuilt with the runtime cache warm (a comment appended to it)
#   warm run         `repro build` with nothing changed: must call nvcc zero times
#   ratio            harness, warm / kernel alone (target: <= 1.25)
#
# With BASELINE_REPRO=path/to/an/older/repro, the same spec is also built by it once
# (e.g. the single-translation-unit harness before the runtime library), for comparison.
#
#   scripts/bench/build-time.sh [SPEC...]     # uses target/release/repro; REPS=N repeats (default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
reps=${REPS:-2}
nvcc=$("$repro" doctor 2>/dev/null | sed -n 's/^nvcc *\([^ ]*\) .*/\1/p' | head -1)
[[ -x "$nvcc" ]] || { echo "build-time: no nvcc found by repro doctor" >&2; exit 1; }
specs=("$@")
[[ ${#specs[@]} -gt 0 ]] || specs=(examples/tiled_gemm_bf16.yaml examples/cutlass_bf16_cooperative.yaml)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seconds() { local start end; start=$(date +%s.%N); "$@" >/dev/null 2>&1; end=$(date +%s.%N); awk "BEGIN { printf \"%.1f\", $end - $start }"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $("$nvcc" --version | tail -1)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC'); repro $("$repro" --version | cut -d' ' -f2); $reps repetitions, medians"
printf '\n| %-28s | %12s | %13s | %13s | %8s | %5s |%s\n' spec "kernel alone" "runtime, cold" "harness, warm" "warm run" ratio "${BASELINE_REPRO:+ baseline harness |}"
printf '|%s|%s|%s|%s|%s|%s|%s\n' ------------------------------ -------------- --------------- --------------- ---------- ------- "${BASELINE_REPRO:+------------------|}"
for spec in "${specs[@]}"; do
  name=$(basename "$spec" .yaml)
  dir="$work/$name"
  export REPRO_CACHE_DIR="$work/cache-$name"
  "$repro" scaffold "$spec" -o "$dir" >/dev/null
  # The kernel alone: harness.cu up to the spec's own part (includes, prelude), and a main()
  # that takes the address of the instantiation; built with the harness's own arguments.
  python3 - "$dir/harness.cu" "$dir/kernel_alone.cu" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
head = text[: text.index("namespace repro_spec {")]
head = "\n".join(l for l in head.splitlines() if not l.startswith("#include <repro/"))
m = re.search(r"auto\* repro_kernel = &(.*);", text)
if m:
    target = m.group(1)
else:
    target = "cutlass::device_kernel<%s>" % re.search(r"Runner<(.*)> runner;", text).group(1)
open(sys.argv[2], "w").write(head + "\n#include <cstdio>\nint main() { std::printf(\"%%p\\n\", (void*)&%s); }\n" % target)
EOF
  # The harness's arguments, as repro runs them (printed by a build), without the runtime's parts.
  "$repro" build "$dir" 2>"$work/build.log" >/dev/null || { cat "$work/build.log"; exit 1; }
  runtime_cold=$(awk '/runtime library for .* compiled in/ { print $(NF-1) }' "$work/build.log")
  args=$(grep -a '^build: .* -o harness harness.cu' "$work/build.log" | sed -e 's/^build: [^ ]* //' -e 's/ (in .*)$//')
  read -r -a argv <<<"$args"
  kernel_args=()
  for a in "${argv[@]}"; do
    case "$a" in -Iruntime/include|harness|harness.cu|*librepro_runtime.a) ;; -o) kernel_args+=(-o kernel_alone) ;; *) kernel_args+=("$a") ;; esac
  done
  kernel_args+=(kernel_alone.cu)
  k=() h=()
  for _ in $(seq "$reps"); do
    k+=("$(cd "$dir" && seconds "$nvcc" "${kernel_args[@]}")")
    # A changed harness.cu (its content is the key; a touch is not a change).
    echo "// benchmark edit $RANDOM$RANDOM" >>"$dir/harness.cu"
    h+=("$(seconds "$repro" build "$dir")")
  done
  warm=$("$repro" build "$dir" 2>&1 | grep -c 'nvcc not called' || true)
  kt=$(median "${k[@]}") ht=$(median "${h[@]}")
  baseline=""
  if [[ -n "${BASELINE_REPRO:-}" ]]; then
    "$BASELINE_REPRO" scaffold "$spec" -o "$work/baseline-$name" >/dev/null 2>&1
    baseline=" $(seconds "$BASELINE_REPRO" build "$work/baseline-$name") s |"
  fi
  printf '| %-28s | %10s s | %11s s | %11s s | %8s | %5s |%s\n' "$name" "$kt" "${runtime_cold:-?}" "$ht" \
    "$([[ $warm == 1 ]] && echo "0 nvcc" || echo "NVCC RAN")" "$(awk "BEGIN { printf \"%.2f\", $ht / $kt }")" "$baseline"
done
