#!/usr/bin/env bash
# Where a probe run's time goes, on a GPU machine: the probe suite of the tiled bf16 GEMM (the
# Llama-3.2-1B campaign's kernel) at some of that campaign's shapes, run as one queue in one
# process as a campaign runs them, each probe run's `probe_phases_ms` (operands expanded and
# sample-checked, right answers, launches, judging; summed over its probes) and `timings` from
# its report. Issue 60: a queued campaign is mostly its probe runs (docs/performance.md).
#
#   REPRO=target/release/repro scripts/bench/probe-phases.sh [SPEC] [SHAPES]   # SHAPES: M,N,K M,N,K ...
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
spec=${1:-examples/tiled_gemm_bf16.yaml}
read -r -a shapes <<<"${2:-1,3072,2048 16,3072,2048 128,2048,2048 512,8192,2048 2048,2048,8192 2048,16384,2048}"
dir=${BENCH_DIR:-$(mktemp -d)}
"$repro" build "$spec" -o "$dir/build" >/dev/null
queue=$dir/queue
{
  # A first probe run warms the process (its context and pools) and is not counted.
  printf -- '--probe\t--size\tM=64\t--size\tN=256\t--size\tK=256\n'
  for shape in "${shapes[@]}"; do
    IFS=, read -r m n k <<<"$shape"
    printf -- '--probe\t--size\tM=%s\t--size\tN=%s\t--size\tK=%s\n' "$m" "$n" "$k"
  done
} >"$queue"
code=0
"$dir/build/harness" --queue "$queue" --json "$queue.jsonl" >"$queue.log" 2>&1 || code=$?
if [[ $code -gt 1 ]]; then tail -n 30 "$queue.log"; exit "$code"; fi
python3 - "$queue.jsonl" "${shapes[*]}" <<'PY'
import json, sys
reports = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[1:]]
shapes = sys.argv[2].split()
print("| M, N, K | probes | probe run (ms) | of which the suite | operands | answers | launches | judging | the rest of the suite | inputs | reference |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for shape, r in zip(shapes, reports):
    t = r.get("timings", {})
    p = r.get("probe_phases_ms", {})
    suite = t.get("probes", 0) * 1e3
    parts = sum(p.get(k, 0) for k in ("operands", "answers", "launches", "judging"))
    print(f"| {shape} | {p.get('probes', 0):.0f} | {t.get('total', 0) * 1e3:.1f} | {suite:.1f} | {p.get('operands', 0):.1f} | "
          f"{p.get('answers', 0):.1f} | {p.get('launches', 0):.1f} | {p.get('judging', 0):.1f} | {suite - parts:.1f} | "
          f"{t.get('inputs', 0) * 1e3:.1f} | {t.get('reference', 0) * 1e3:.1f} |")
PY
echo "logs in $dir"
