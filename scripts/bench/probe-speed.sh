#!/usr/bin/env bash
# Issue 60's probe benchmark, side by side in one run on a GPU machine: `--probe` at Llama-3-8B's
# shapes (examples/campaigns/llama3_8b_shapes.csv, tensor-parallel degree 1: qkv, o, gate_up,
# down) with the CUTLASS sm90 bf16 GEMM of examples/cutlass_bf16_cooperative.yaml, by two repro
# binaries: REPRO (probe operands and answers made on the device) and OLD (an earlier build,
# e.g. one whose probes are made on the host). Each probe run is one harness process; its wall
# time and its report's phases (`timings`) are written one line per run, then the median per
# binary and the gate_up shape's time.
#
#   REPRO=target/release/repro OLD=old/repro scripts/bench/probe-speed.sh
#   M_VALUES='16 2048' OLD_M_VALUES='2048' ...   # token counts to probe (default 16 128 2048)
#
# Needs the CUTLASS headers (REPRO_CUTLASS_DIR or the toolchain's) and nvcc on PATH.
set -uo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
old=${OLD:-}
logs=${PROBE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
read -r -a m_values <<<"${M_VALUES:-16 128 2048}"
read -r -a old_m_values <<<"${OLD_M_VALUES:-${M_VALUES:-16 128 2048}}"
# (N, K) of the four layers at tensor-parallel degree 1.
pairs=("6144 4096" "4096 4096" "28672 4096" "4096 14336")
spec=examples/cutlass_bf16_cooperative.yaml

# $1 label, $2 binary, $3... token counts: one probe run per shape, a line per run in $logs/$1.tsv.
probe_all() {
  local label=$1 binary=$2
  shift 2
  local artifact=$logs/artifact-$label
  if ! "$binary" build "$spec" -o "$artifact" >"$logs/build-$label.log" 2>&1; then
    echo "build with $label failed: $logs/build-$label.log"
    tail -5 "$logs/build-$label.log"
    return 1
  fi
  : >"$logs/$label.tsv"
  for m in "$@"; do
    for pair in "${pairs[@]}"; do
      read -r n k <<<"$pair"
      local name=$label-$m-$n-$k
      local start end
      start=$(date +%s.%N)
      "$artifact/harness" --probe --size "M=$m" --size "N=$n" --size "K=$k" --json "$logs/$name.json" \
        >"$logs/$name.log" 2>&1
      local code=$?
      end=$(date +%s.%N)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$m" "$n" "$k" "$code" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')" \
        >>"$logs/$label.tsv"
    done
  done
}

probe_all new "$repro" "${m_values[@]}"
[[ -n "$old" ]] && probe_all old "$old" "${old_m_values[@]}"

python3 - "$logs" <<'PY'
import json, os, statistics, sys
logs = sys.argv[1]
for label in ("new", "old"):
    path = os.path.join(logs, label + ".tsv")
    if not os.path.exists(path):
        continue
    rows = [l.split("\t") for l in open(path).read().splitlines() if l]
    if not rows:
        continue
    print(f"{label}: M N K exit wall_s [phases from the report]")
    walls = []
    for _, m, n, k, code, wall in rows:
        walls.append(float(wall))
        phases = ""
        try:
            report = json.load(open(os.path.join(logs, f"{label}-{m}-{n}-{k}.json")))
            timings = report.get("timings", {})
            phases = " ".join(f"{key}={value:.3f}" for key, value in timings.items() if isinstance(value, (int, float)))
            phases += f" verdict={report.get('verdict')}"
        except (OSError, ValueError):
            phases = "(no report)"
        print(f"  {m:>5} {n:>6} {k:>6} exit {code} {float(wall):7.2f} s  {phases}")
    print(f"{label}: {len(walls)} probe runs, median {statistics.median(walls):.2f} s, max {max(walls):.2f} s")
PY
