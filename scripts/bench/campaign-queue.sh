#!/usr/bin/env bash
# Issue 60's targets on a GPU machine, side by side in one run: one campaign (default the
# Llama-3.2-1B example: 169 shapes x ones, random, probe = 507 runs of the tiled bf16 GEMM) with
# one worker, first with a harness process per run (REPRO_CAMPAIGN_BATCH=1, the way before the
# queue), then with queues (the default), each in a fresh results folder; then a torch loop doing
# the same checks in one process (scripts/bench/campaign_torch_peer.py). nvidia-smi samples the
# GPU's utilization every 100 ms during each (the busy share is the mean of the samples).
#
#   REPRO=target/release/repro scripts/bench/campaign-queue.sh [CAMPAIGN] [SHAPES_CSV]
#   MODES=process,queue,torch ...   # which of the three to run, in this order (default all);
#                                    # queue@N: queues of at most N runs (REPRO_CAMPAIGN_BATCH=N)
#   PROCESS_LIMIT=300 ...            # stop the process-per-run campaign after 300 s
#   PROCESS_UNTIL=EPOCH_SECONDS ...  # or at that time
set -uo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
campaign=${1:-examples/campaigns/llama3_2_1b.yaml}
shapes=${2:-examples/campaigns/llama3_2_1b_shapes.csv}
modes=${MODES:-process,queue,torch}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
"$repro" build examples/tiled_gemm_bf16.yaml >/dev/null  # the runtime library, shared by both
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# $1 label, then the command: wall time, the busy share, the command's exit.
measure() {
  local label=$1
  shift
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$dir/util-$label.txt" &
  local sampler=$! start end code=0
  start=$(date +%s.%N)
  "$@" >"$dir/$label.log" 2>&1 || code=$?
  end=$(date +%s.%N)
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  local busy
  busy=$(awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "?" }' "$dir/util-$label.txt")
  printf '%s\t%s\t%s\t%s\n' "$label" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" "$busy" "$code" \
    >>"$dir/summary.tsv"
}

: >"$dir/summary.tsv"
# In the order MODES names them. PROCESS_LIMIT (seconds) stops the process-per-run campaign early
# where a call's time is short: its rate is then that of the runs it finished (the campaign
# interleaves the modes shape by shape, so a prefix has the whole mix).
for mode in ${modes//,/ }; do
  case $mode in
  process)
    limit=${PROCESS_LIMIT:-100000}
    [[ -n ${PROCESS_UNTIL:-} ]] && limit=$((PROCESS_UNTIL - $(date +%s)))
    measure process timeout -k 5 "$limit" env REPRO_CAMPAIGN_BATCH=1 \
      "$repro" campaign "$campaign" -o "$dir/process" --devices 0 --workers-per-device 1
    ;;
  queue) measure queue "$repro" campaign "$campaign" -o "$dir/queue" --devices 0 --workers-per-device 1 ;;
  queue@*)
    # queue@N: queues of at most N runs (REPRO_CAMPAIGN_BATCH; the default is 64).
    measure "queue-${mode#queue@}" env REPRO_CAMPAIGN_BATCH="${mode#queue@}" \
      "$repro" campaign "$campaign" -o "$dir/queue-${mode#queue@}" --devices 0 --workers-per-device 1 ;;
  torch) measure torch python3 scripts/bench/campaign_torch_peer.py "$shapes" ;;
  *) echo "unknown mode $mode (process, queue, torch)" >&2 ;;
  esac
done

python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = [l.split("\t") for l in open(os.path.join(d, "summary.tsv")).read().splitlines()]
print("| how | checks | wall (s) | checks / s | GPU busy | exit |")
print("|---|---|---|---|---|---|")
wall = {}
rates = {}
for label, seconds, busy, code in rows:
    results = os.path.join(d, label, "results.jsonl")
    if os.path.exists(results):
        records = [json.loads(l) for l in open(results)]
        checks = len(records)
        verdicts = {}
        for r in records:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        note = f" verdicts {verdicts}"
    else:
        log = open(os.path.join(d, label + ".log")).read()
        checks = next((int(w) for line in log.splitlines() if line.startswith("torch loop:")
                       for w in line.split()[2:3]), 0)
        note = ""
    wall[label] = float(seconds)
    rate = checks / float(seconds) if float(seconds) > 0 else 0
    rates[label] = rate
    print(f"| {label} | {checks} | {seconds} | {rate:.2f} | {busy} % | {code} |{note}")
if "process" in wall and "queue" in wall:
    print(f"queue against a process per run: {rates['queue'] / rates['process']:.1f}x the runs per second")
if "torch" in wall and "queue" in wall:
    print(f"queue against the torch loop: {wall['queue'] / wall['torch']:.1f}x its wall time")

def load(label):
    path = os.path.join(d, label, "results.jsonl")
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []

# A process-per-run campaign stopped early ran a prefix of the shapes, whose runs need not cost
# what the average run does: the ratio on the same runs (by key) compares like with like.
process, queue = load("process"), load("queue")
if process and queue:
    queued = {r["key"]: r for r in queue}
    same = [r for r in process if r["key"] in queued]
    p_s = sum(r["times"]["run_s"] for r in same)
    q_s = sum(queued[r["key"]]["times"]["run_s"] for r in same)
    if q_s > 0:
        print(f"the same {len(same)} runs: {p_s:.1f} s as processes, {q_s:.1f} s queued: {p_s / q_s:.1f}x")

# Where a queued run's time goes, per mode: the harness's own phases (its report's timings,
# summed over the runs, s) and what the campaign saw beyond them (process start, the queue's
# protocol, the driver).
for label in [row[0] for row in rows]:
    records = load(label)
    if not records:
        continue
    modes = {}
    for r in records:
        m = modes.setdefault(str(r["mode"]), {"runs": 0, "run_s": 0.0, "phases": {}})
        m["runs"] += 1
        m["run_s"] += r["times"]["run_s"]
        for phase, seconds in (r["times"].get("harness") or {}).items():
            if isinstance(seconds, (int, float)):
                m["phases"][phase] = m["phases"].get(phase, 0.0) + seconds
    phases = sorted({p for m in modes.values() for p in m["phases"]})
    runs_s = sum(r["times"]["run_s"] for r in records)
    print(f"\n{label}: seconds summed over the runs, per mode ({runs_s:.1f} s of the {wall[label]:.1f} s wall; "
          f"the rest is the campaign's own: its build, starting, recording)")
    print("| mode | runs | as the campaign saw them | " + " | ".join(phases) + " | beyond the harness's phases |")
    print("|---|---|---|" + "---|" * len(phases) + "---|")
    for mode, m in sorted(modes.items()):
        inside = sum(v for k, v in m["phases"].items() if k != "total")
        cells = " | ".join(f"{m['phases'].get(p, 0.0):.2f}" for p in phases)
        print(f"| {mode} | {m['runs']} | {m['run_s']:.2f} | {cells} | {m['run_s'] - m['phases'].get('total', inside):.2f} |")
PY
echo "logs in $dir"
