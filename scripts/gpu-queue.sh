#!/usr/bin/env bash
# GPU check of the harness's queue of checks (--queue; docs/cli.md, "A queue of checks"):
#
#   same     every check of a list run as a queue in one process and each as a process of its own:
#            every report field that is not a time equal, every dumped tensor equal bit for bit
#   fault    `repro sweep` over sizes where one faults in the middle: that size a fault, the
#            others pass, the rest of the queue run by a fresh process
#   held     device references judged while the next check runs (deferred_check.cuh): the same
#            reports as processes, each check's text whole and in order, and a damaged
#            reference (REPRO_TEST_CORRUPT_REFERENCE) refused as its own check's fault, from a
#            file and from standard input
#   rate     the same checks as processes and as one queue: checks per second, side by side
#   campaign Llama-3.2-1B shapes (the first $SHAPES; $MODES, default "ones, random") as `repro campaign` with a
#            process per run (REPRO_CAMPAIGN_BATCH=1) and with queues: the same verdicts, runs/s
#
#   scripts/gpu-queue.sh [same] [held] [fault] [rate] [campaign]   # target/release/repro; logs in $QUEUE_LOGS
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
logs=${QUEUE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
parts=("$@")
wanted() { [[ ${#parts[@]} -eq 0 ]] || [[ " ${parts[*]} " == *" $1 "* ]]; }
failures=0
verdict() { if [[ $1 == 0 ]]; then echo "OK    $2"; else echo "FAIL  $2"; failures=$((failures + 1)); fi; }

# Every check of the list in $1 (one per line, options separated by tabs) against artifact $2:
# as one queue, and as processes of their own; then compared.
same() {
  local list=$1 artifact=$2 label=$3 out=$logs/same-$3
  rm -rf "$out" && mkdir -p "$out/queue" "$out/alone"
  local i=0 queue=$out/queue.txt
  : >"$queue"
  while IFS= read -r line; do
    # Outputs are dumped and compared bit for bit, except for probes, which choose their own
    # inputs and take no --dump (their per-probe results are in the report).
    local dump=(--dump "$out/alone/$i")
    if [[ $'\t'"$line"$'\t' == *$'\t--probe\t'* ]]; then
      dump=()
      printf '%s\n' "$line" >>"$queue"
    else
      printf '%s\t--dump\t%s\n' "$line" "$out/queue/$i" >>"$queue"
    fi
    IFS=$'\t' read -ra words <<<"$line"
    "$artifact/harness" "${words[@]}" "${dump[@]}" --json "$out/alone/$i.json" >"$out/alone/$i.log" 2>&1
    i=$((i + 1))
  done <"$list"
  "$artifact/harness" --queue "$queue" --json "$out/queue.jsonl" >"$out/queue.log" 2>&1
  echo "queue exit $?" >>"$out/queue.log"
  python3 - "$out" "$i" <<'PY'
import json, os, sys, filecmp
out, n = sys.argv[1], int(sys.argv[2])
# Times, and what names the run's own files, differ by nature; so do the bytes a stressor moved
# while the kernel ran (`stress.records[].bytes`: how far it got in that time); everything else
# must not.
timing = {"timings", "reference_seconds", "reference_kernel_ms", "reference_fetch_ms", "reference_check_ms", "check",
          "bytes"}
def is_time(k):
    return k in timing or k in ("ms", "kernel_ms") or k.endswith(("_ms", "_seconds", "_ns", "_s"))
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not is_time(k)}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
queue = [json.loads(l) for l in open(os.path.join(out, "queue.jsonl"))]
bad = 0
if len(queue) != n:
    print(f"  {len(queue)} queue reports for {n} checks"); bad += 1
for i in range(min(n, len(queue))):
    alone = json.load(open(os.path.join(out, "alone", f"{i}.json")))
    a, q = strip(alone), strip(queue[i])
    for key in sorted(set(a) | set(q)):
        if a.get(key) != q.get(key):
            print(f"  check {i}: `{key}` differs: alone {json.dumps(a.get(key))[:200]} queue {json.dumps(q.get(key))[:200]}"); bad += 1
    da, dq = os.path.join(out, "alone", str(i)), os.path.join(out, "queue", str(i))
    files = sorted(os.listdir(da)) if os.path.isdir(da) else []
    for f in files:
        if not os.path.exists(os.path.join(dq, f)) or not filecmp.cmp(os.path.join(da, f), os.path.join(dq, f), shallow=False):
            print(f"  check {i}: {f} differs"); bad += 1
    print(f"  check {i}: {alone.get('disposition')} ({alone.get('class')}), {len(files)} tensors compared")
sys.exit(1 if bad else 0)
PY
  verdict $? "same: $label, $i checks as one queue and as processes"
}

if wanted same; then
  "$repro" build examples/naive_gemm_f32.yaml -o "$logs/naive" >"$logs/build-naive.log" 2>&1
  printf '%s\n' '--ones' '--seed	5' '--size	M=129	--size	N=65	--ones' '--size	M=129	--size	N=65' \
    '--init	A=normal' '--repeat	3' '--stress	l2' '--reference	device' '--size	M=1	--size	N=1	--size	K=1' \
    '--ones	--size	K=4096' '--seed	5' >"$logs/naive-checks.txt"
  same "$logs/naive-checks.txt" "$logs/naive" naive_gemm_f32
  "$repro" build examples/tma_gemm_bf16.yaml -o "$logs/tma" >"$logs/build-tma.log" 2>&1
  printf '%s\n' '--ones' '--seed	7' '--repeat	2' '--ones' >"$logs/tma-checks.txt"
  same "$logs/tma-checks.txt" "$logs/tma" tma_gemm_bf16
  # A probe in a queue: its many launches and its verdict as a process of its own gives them.
  printf '%s\n' '--probe' '--ones' '--probe' >"$logs/probe-checks.txt"
  "$repro" build examples/k_tile_twice.yaml -o "$logs/ktt" >"$logs/build-ktt.log" 2>&1
  same "$logs/probe-checks.txt" "$logs/ktt" k_tile_twice_probe
fi

if wanted held; then
  # NAIVE_ARTIFACT: the naive GEMM's artifact built elsewhere (`repro build`), run as it is.
  if [[ -n ${NAIVE_ARTIFACT:-} ]]; then rm -rf "$logs/naive" && cp -r "$NAIVE_ARTIFACT" "$logs/naive"
  else "$repro" build examples/naive_gemm_f32.yaml -o "$logs/naive" >"$logs/build-naive.log" 2>&1; fi
  sizes=$'--size\tM=512\t--size\tN=512\t--size\tK=512'
  # Device references back to back (each judged at the next one's reference), one before a
  # check with none (judged at that check's end), and the last (judged at once).
  printf '%s\n' "--reference"$'\t'"device"$'\t'"$sizes" "--reference"$'\t'"device"$'\t'"--seed"$'\t'"9"$'\t'"$sizes" \
    "--ones" "--reference"$'\t'"device"$'\t'"$sizes"$'\t'"--repeat"$'\t'"2" "--reference"$'\t'"device"$'\t'"$sizes" \
    >"$logs/held-checks.txt"
  out=$logs/held && rm -rf "$out" && mkdir -p "$out/alone"
  i=0
  while IFS= read -r line; do
    IFS=$'\t' read -ra words <<<"$line"
    "$logs/naive/harness" "${words[@]}" --json "$out/alone/$i.json" >"$out/alone/$i.log" 2>&1
    i=$((i + 1))
  done <"$logs/held-checks.txt"
  "$logs/naive/harness" --queue "$logs/held-checks.txt" --json "$out/file.jsonl" >"$out/file.log" 2>&1
  echo "exit $?" >>"$out/file.log"
  "$logs/naive/harness" --queue - --json "$out/stdin.jsonl" <"$logs/held-checks.txt" >"$out/stdin.log" 2>&1
  echo "exit $?" >>"$out/stdin.log"
  REPRO_TEST_CORRUPT_REFERENCE=2 "$logs/naive/harness" --queue "$logs/held-checks.txt" --json "$out/corrupt-file.jsonl" \
    >"$out/corrupt-file.log" 2>&1
  echo "exit $?" >>"$out/corrupt-file.log"
  REPRO_TEST_CORRUPT_REFERENCE=2 "$logs/naive/harness" --queue - --json "$out/corrupt-stdin.jsonl" \
    <"$logs/held-checks.txt" >"$out/corrupt-stdin.log" 2>&1
  echo "exit $?" >>"$out/corrupt-stdin.log"
  python3 - "$out" "$i" <<'PY'
import json, os, re, sys
out, n = sys.argv[1], int(sys.argv[2])
bad = 0
def fail(message):
    global bad
    print("  " + message); bad += 1
def is_time(k):
    return k in ("timings", "check", "bytes") or k.endswith(("_ms", "_seconds", "_ns", "_s"))
def strip(v):
    if isinstance(v, dict): return {k: strip(x) for k, x in v.items() if not is_time(k)}
    if isinstance(v, list): return [strip(x) for x in v]
    return v
def checks_in_order(log, count):
    # Each check's text from its marker to its end line, none inside another's.
    lines = open(log).read().splitlines()
    marks = [(i, l) for i, l in enumerate(lines) if l.startswith("queue   check ") or l.startswith("queue   end of check ")]
    want = []
    for c in range(1, count + 1):
        want += [f"check {c}", f"end of check {c}"]
    got = [re.sub(r"^queue   ((end of )?check \d+).*", r"\1", l) for _, l in marks]
    return got == want[:len(got)], got, lines
for mode in ("file", "stdin"):
    log = os.path.join(out, f"{mode}.log")
    text = open(log).read()
    if not text.rstrip().endswith("exit 0"): fail(f"{mode}: the queue did not exit 0")
    ok, got, lines = checks_in_order(log, n)
    if not ok or len(got) != 2 * n: fail(f"{mode}: markers out of order: {got}")
    held = text.count("judged while the next check ran")
    # Checks 1, 2 and 4 have a check after them; the last is judged at once.
    if held != 3: fail(f"{mode}: {held} checks judged while the next ran, 3 expected")
    # A held check's text ends in its judgement, then its disposition.
    for i, l in enumerate(lines):
        if "judged while the next check ran" in l and not lines[i + 1].startswith("Disposition: Passed"):
            fail(f"{mode}: after a judgement: {lines[i + 1]!r}")
    queue = [json.loads(l) for l in open(os.path.join(out, f"{mode}.jsonl"))]
    if [q.get("check") for q in queue] != list(range(n)): fail(f"{mode}: reports {[q.get('check') for q in queue]}")
    for i in range(min(n, len(queue))):
        alone = json.load(open(os.path.join(out, "alone", f"{i}.json")))
        a, q = strip(alone), strip(queue[i])
        for key in sorted(set(a) | set(q)):
            if a.get(key) != q.get(key):
                fail(f"{mode} check {i}: `{key}` differs: alone {json.dumps(a.get(key))[:160]} queue {json.dumps(q.get(key))[:160]}")
        if "reference_check_ms" not in queue[i] and queue[i].get("reference_provider") == "device":
            fail(f"{mode} check {i}: no reference_check_ms")
    print(f"  {mode}: {len(queue)} reports, {held} judged while the next check ran")
for mode in ("file", "stdin"):
    log = os.path.join(out, f"corrupt-{mode}.log")
    text = open(log).read()
    reports = [json.loads(l) for l in open(os.path.join(out, f"corrupt-{mode}.jsonl"))]
    summary = [(r["check"], r["exit_code"]) for r in reports]
    if summary != [(0, 0), (1, 4)] or reports[1]["class"] != "fault": fail(f"corrupt {mode}: reports {summary}")
    if not text.rstrip().endswith("exit 4"): fail(f"corrupt {mode}: not exit 4")
    if "the device reference disagrees with the host" not in text: fail(f"corrupt {mode}: no disagreement said")
    if "queue   end of check 1" not in text or "queue   end of check 2" in text: fail(f"corrupt {mode}: end lines")
    if "queue   check 3" in text: fail(f"corrupt {mode}: check 3's held output came out")
    print(f"  corrupt {mode}: reports {summary}")
sys.exit(1 if bad else 0)
PY
  verdict $? "held: device references judged while the next check runs, from a file and standard input, and a damaged one refused"
fi

if wanted fault; then
  "$repro" sweep tests/gpu/queue_fault_at_m65.yaml -o "$logs/fault" --dims M --sizes 63,64,65,66,67 >"$logs/fault.log" 2>&1
  code=$?
  cat "$logs/fault.log"
  grep -Eq '^ +65 +FAIL fault' "$logs/fault.log" && [[ $code == 1 ]] &&
    [[ $(grep -Ec '^ +6[3467] +pass +pass' "$logs/fault.log") == 4 ]]
  verdict $? "fault: the size that faults is named, the sizes after it still run and pass (exit $code)"
fi

if wanted rate; then
  "$repro" build examples/naive_gemm_f32.yaml -o "$logs/naive" >"$logs/build-naive.log" 2>&1
  : >"$logs/rate.txt"
  for n in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    for size in 64 128 256; do
      printf -- '--ones\t--size\tM=%s\t--size\tN=%s\t--size\tK=%s\n--seed\t%s\t--size\tM=%s\t--size\tN=%s\t--size\tK=%s\n' \
        "$size" "$size" "$size" "$n" "$size" "$size" "$size" >>"$logs/rate.txt"
    done
  done
  checks=$(wc -l <"$logs/rate.txt")
  start=$EPOCHREALTIME
  while IFS= read -r line; do
    IFS=$'\t' read -ra words <<<"$line"
    "$logs/naive/harness" "${words[@]}" >/dev/null 2>&1
  done <"$logs/rate.txt"
  alone=$(python3 -c "print($EPOCHREALTIME - $start)")
  start=$EPOCHREALTIME
  "$logs/naive/harness" --queue "$logs/rate.txt" --json "$logs/rate.jsonl" >"$logs/rate-queue.log" 2>&1
  queue=$(python3 -c "print($EPOCHREALTIME - $start)")
  python3 -c "import sys; n,a,q=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]); print(f'rate  {n} checks (naive_gemm_f32, 64^3-256^3, ones and random): processes {a:.2f} s ({n/a:.1f}/s), one queue {q:.2f} s ({n/q:.1f}/s): {a/q:.1f}x')" "$checks" "$alone" "$queue" | tee "$logs/rate-result.txt"
  grep -c '"disposition":"passed"' "$logs/rate.jsonl" | sed 's/^/rate  queue checks passed: /'
fi
if wanted campaign; then
  dir=$logs/campaign
  rm -rf "$dir" && mkdir -p "$dir"
  { grep -v '^#' examples/campaigns/llama3_2_1b_shapes.csv | head -n $((1 + ${SHAPES:-40})); } >"$dir/shapes.csv"
  printf 'version: 1\nname: queue_bench\nspecs:\n  - spec: %s\n    shapes_file: shapes.csv\n    modes: [%s]\n' \
    "$PWD/examples/tiled_gemm_bf16.yaml" "${MODES:-ones, random}" >"$dir/campaign.yaml"
  # The build first, so that both timings are runs only.
  "$repro" build examples/tiled_gemm_bf16.yaml -o "$dir/build" >"$dir/build.log" 2>&1
  for how in process queue; do
    batch=64; [[ $how == process ]] && batch=1
    start=$EPOCHREALTIME
    REPRO_CAMPAIGN_BATCH=$batch "$repro" campaign "$dir/campaign.yaml" -o "$dir/$how" >"$dir/$how.log" 2>&1
    echo "exit $?" >>"$dir/$how.log"
    python3 -c "print($EPOCHREALTIME - $start)" >"$dir/$how.seconds"
  done
  python3 - "$dir" <<'PY'
import json, sys, os
d = sys.argv[1]
def load(how):
    recs = [json.loads(l) for l in open(os.path.join(d, how, "results.jsonl"))]
    return {r["key"]: r for r in recs}
p, q = load("process"), load("queue")
ps, qs = float(open(os.path.join(d, "process.seconds")).read()), float(open(os.path.join(d, "queue.seconds")).read())
run = lambda recs: sum(r["times"]["run_s"] for r in recs.values())
same = sorted(p) == sorted(q) and all(p[k]["verdict"] == q[k]["verdict"] for k in p)
print(f"campaign  {len(p)} runs as processes: {ps:.1f} s ({len(p)/ps:.1f} runs/s, runs {run(p):.1f} s); "
      f"{len(q)} as queues: {qs:.1f} s ({len(q)/qs:.1f} runs/s, runs {run(q):.1f} s): {ps/qs:.1f}x; verdicts the same: {same}")
for mode in sorted({r["mode"] for r in p.values()}):
    mean = lambda recs: sum(r["times"]["run_s"] for r in recs.values() if r["mode"] == mode) / max(1, sum(r["mode"] == mode for r in recs.values()))
    print(f"campaign  {mode}: mean run {mean(p):.3f} s as processes, {mean(q):.3f} s as queues")
verdicts = {}
for r in q.values():
    verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
print(f"campaign  verdicts: {verdicts}")
sys.exit(0 if same and len(p) > 0 else 1)
PY
  verdict $? "campaign: the same verdicts as a process per run"
fi
echo "gpu-queue: $failures failed; logs in $logs"
exit $((failures > 0))
