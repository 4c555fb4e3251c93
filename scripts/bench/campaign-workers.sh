#!/usr/bin/env bash
# Issue 37's measurement on a GPU machine: one campaign (default the Llama-3.2-1B example: 169
# shapes x ones/random/probe = 507 runs of the tiled bf16 GEMM, one build) run to the end with
# 1, then 2 workers on one GPU (WORKERS="1 2"), each in a fresh results folder. While it runs,
# nvidia-smi samples the GPU's utilization every 100 ms: the busy share is the mean of those
# samples (the fraction of time a kernel was executing). The table gives, per configuration:
# wall time, runs per second, busy share, the build's seconds, and the mean run's cost split as
# the harness reports it (context, inputs + uploads, reference, launches, compare, report) and
# the rest of its process (start, exit, driver teardown).
#
#   REPRO=target/release/repro scripts/bench/campaign-workers.sh [CAMPAIGN]
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
campaign=${1:-examples/campaigns/llama3_2_1b.yaml}
workers=${WORKERS:-1 2}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
# The runtime library is built once for every configuration (its cache is shared); the harness
# build is each configuration's own (a fresh results folder), as in a first campaign.
"$repro" build examples/tiled_gemm_bf16.yaml >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for w in $workers; do
  out=$dir/workers-$w
  rm -rf "$out"
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$dir/util-$w.txt" &
  sampler=$!
  start=$(date +%s.%N)
  code=0
  "$repro" campaign "$campaign" -o "$out" --devices 0 --workers-per-device "$w" \
    >"$dir/campaign-$w.log" 2>&1 || code=$?
  end=$(date +%s.%N)
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  python3 - "$out" "$dir/util-$w.txt" "$w" "$start" "$end" "$code" <<'EOF'
import json, sys, statistics
out, util_file, workers, start, end, code = sys.argv[1:]
wall = float(end) - float(start)
records = [json.loads(l) for l in open(f"{out}/results.jsonl")]
util = [float(x) for x in open(util_file).read().split() if x.replace('.', '', 1).isdigit()]
busy = statistics.mean(util) if util else float("nan")
builds = {}
for r in records:
    builds.setdefault(r["variant"], r["times"]["build_s"])
stages = ["context", "inputs", "uploads", "reference", "launches", "compare", "report"]
mean = lambda xs: sum(xs) / len(xs) if xs else 0.0
run_s = mean([r["times"]["run_s"] for r in records])
# The harness's own phases (ones and random runs report them; a probe run does not).
timed = [r for r in records if r["times"].get("harness")]
parts = {s: mean([float(r["times"]["harness"].get(s, 0.0)) for r in timed]) for s in stages}
timed_run = mean([r["times"]["run_s"] for r in timed])
verdicts = {}
for r in records:
    verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
gpus = {(r.get("gpu") or {}).get("name") for r in records}
print(f"workers={workers} exit={code} runs={len(records)} wall={wall:.1f}s runs/s={len(records)/wall:.2f} "
      f"busy={busy:.1f}% build={sum(builds.values()):.1f}s mean_run={run_s:.3f}s verdicts={verdicts} gpu={gpus}")
print(f"  ones/random runs ({len(timed)}): mean {timed_run:.3f}s = "
      + " ".join(f"{s} {parts[s]:.3f}" for s in stages)
      + f" + process start/exit {timed_run - sum(parts.values()):.3f}")
by_mode = {}
for r in records:
    by_mode.setdefault(r["mode"], []).append(r["times"]["run_s"])
print("  mean run by mode: " + " ".join(f"{m}={mean(v):.3f}s" for m, v in sorted(by_mode.items())))
EOF
done
echo "logs and results in $dir"
