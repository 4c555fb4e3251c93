#!/usr/bin/env bash
# `repro campaign` on a GPU machine (issue 37), from scripts/gpu-check.sh (part `campaign`):
#   1. tests/gpu/campaign_checks.yaml: every way a run can end, each run's record checked
#      (pass in four modes, a build that fails beside builds that do not, a kernel that fails
#      and the probe's verdict for it, a hang, a memcheck finding, per-shape builds);
#   2. two campaigns on one GPU: the second is refused while the first holds it;
#   3. a killed campaign resumes: no run is recorded twice, and it goes on where it stopped.
#
#   scripts/gpu-campaign.sh REPRO LOG_DIR
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repro=${1:?usage: scripts/gpu-campaign.sh REPRO LOG_DIR}
logs=${2:?usage: scripts/gpu-campaign.sh REPRO LOG_DIR}
mkdir -p "$logs"
passed=0 failed=0
check() {  # check LABEL CONDITION-EXIT-CODE
  if [[ $2 == 0 ]]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi
}

echo "== 1. tests/gpu/campaign_checks.yaml"
results=$logs/checks
rm -rf "$results"
"$repro" campaign tests/gpu/campaign_checks.yaml -o "$results" 2>"$logs/checks.stderr" | tee "$logs/checks.log"
code=${PIPESTATUS[0]}
tail -5 "$logs/checks.stderr"
[[ $code == 1 ]]; check "campaign_checks exits 1 (kernels fail)" $?
python3 - "$results" <<'EOF'
import json, sys, pathlib
results = pathlib.Path(sys.argv[1])
records = {}
for line in (results / "results.jsonl").read_text().splitlines():
    r = json.loads(line)
    records[r["key"]] = r
keys = json.loads((results / "campaign.json").read_text())["runs"]
problems = []
def want(prefix, verdicts, code=None):
    chosen = [r for k, r in records.items() if k.startswith(prefix)]
    if not chosen:
        problems.append(f"no records for {prefix}")
    for r in chosen:
        if r["verdict"] not in verdicts or (code is not None and r["code"] != code):
            problems.append(f"{r['key']}: {r['verdict']} (exit {r['code']}), wanted {verdicts}")
        print(f"  {r['key']:<58} {r['verdict']:<13} exit {r['code']}  {r['times']['run_s']:.2f} s  {r['evidence'][:70]}")
if set(keys) != set(records):
    problems.append(f"{len(keys)} runs but {len(records)} recorded")
want("tiled_gemm_bf16/default/", {"ok"}, 0)
want("tiled_gemm_bf16/broken/", {"build_failed"}, 3)
want("skip_last_m_tile/default/M=700,N=999,K=300/probe", {"unwritten"}, 1)
want("skip_last_m_tile/default/M=700,N=999,K=300/ones", {"unwritten", "mismatch", "tile_mismatch"}, 1)
want("barrier_never_arrived/", {"hang"}, 5)
want("csr_spmv_row_ptr_past/", {"sanitizer"}, 6)
want("shape_specialized_gemm/", {"ok"}, 0)
ran = [r for r in records.values() if r["verdict"] != "build_failed"]
names = {(r.get("gpu") or {}).get("name") for r in ran if r["verdict"] != "hang"}
print(f"  GPUs named in the records: {names}")
if None in names:
    problems.append("a record without its GPU")
heatmaps = [r for r in records.values() if r.get("report")]
drawn = [r for r in heatmaps if (results / r["report"]).with_suffix(".png").is_file()]
print(f"  failing runs with a report: {len(heatmaps)}, heatmaps drawn: {len(drawn)}")
for p in problems:
    print("  PROBLEM:", p)
sys.exit(1 if problems else 0)
EOF
check "every record of campaign_checks as its comment says" $?
grep -q "FAIL build_failed" "$results/summary.txt"; check "summary lists the failed build" $?
builds=$(find "$results/builds" -maxdepth 1 -mindepth 1 -type d | wc -l)
[[ $builds == 7 ]]; check "one build per instantiation (7 folders, found $builds)" $?

echo "== 2. a GPU another campaign holds"
held=$logs/held
rm -rf "$held" "$logs/second"
"$repro" campaign examples/campaigns/llama3_8b.yaml -o "$held" --devices 0 >"$logs/held.log" 2>&1 &
first=$!
sleep 8
"$repro" campaign tests/gpu/campaign_checks.yaml -o "$logs/second" --devices 0 >"$logs/second.log" 2>&1
code=$?
tail -3 "$logs/second.log"
[[ $code == 2 ]] && grep -q "is held by another repro campaign" "$logs/second.log"
check "a second campaign on the held GPU is refused (exit $code)" $?

echo "== 3. the first campaign killed, then resumed"
sleep 12
kill "$first"; wait "$first" 2>/dev/null
sleep 3  # the harness the kill orphaned ends its run
before=$(wc -l <"$held/results.jsonl")
echo "  killed after ~20 s with $before records"
timeout -s INT 30 "$repro" campaign examples/campaigns/llama3_8b.yaml -o "$held" --devices 0 >"$logs/resumed.log" 2>&1
head -2 "$logs/resumed.log"
after=$(wc -l <"$held/results.jsonl")
distinct=$(python3 -c "import json,sys; print(len({json.loads(l)['key'] for l in open(sys.argv[1])}))" "$held/results.jsonl")
echo "  resumed for 30 s: $after records, $distinct distinct runs"
grep -q "528 runs, $before recorded, $((528 - before)) to run" "$logs/resumed.log" && [[ $after -gt $before ]] && [[ $distinct == "$after" ]]
check "the resumed campaign runs only what was not recorded" $?

echo "gpu-campaign: $passed passed, $failed failed"
[[ $failed == 0 ]]
