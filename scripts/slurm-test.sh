#!/usr/bin/env bash
# `repro campaign --slurm` against a real Slurm: slurmctld + slurmd from Debian's packages,
# configured and started on this machine (scripts/slurm/start.sh; one node, CPU-only, two
# stand-in GPUs so that `--gres=gpu:1` schedules). The builds are made here with the real nvcc,
# the runs go out as a job array of three tasks, and `--collect` merges what the tasks wrote.
# Without a GPU every harness exits 7, and the collection must record exactly that: one record
# per run, each `no_device` with exit 7, each from its array task; then a second submission
# sends only those runs again (a run that found no GPU is not settled), and a second
# collection takes the newer records.
#
#   scripts/slurm-test.sh            # needs root (apt, the daemons); CI runs it (.ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-toolchain.sh >/dev/null
export PATH=$PWD/.toolchain/cuda/bin:$PATH
export REPRO_CACHE_DIR=${REPRO_CACHE_DIR:-$PWD/target/repro-cache}
cargo build --locked --profile test-suite --bin repro 2>&1 | tail -1
repro=$PWD/target/test-suite/repro

work=$(mktemp -d)
state=$work/slurm
cleanup() { scripts/slurm/stop.sh "$state" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
eval "$(SLURM_TEST_PORT=${SLURM_TEST_PORT:-6917} scripts/slurm/start.sh "$state")"
sinfo -o '%N %T %c %G'

cat >"$work/campaign.yaml" <<EOF
version: 1
name: slurm_check
specs:
  - spec: $PWD/examples/tiled_gemm_bf16.yaml
    sizes: { M: [1, 129, 1000], N: [744] }
    modes: [ones, random]
  - spec: $PWD/examples/shape_specialized_gemm.yaml
    shapes: [{ M: 128, N: 256, K: 64 }, { M: 64, N: 128, K: 128 }]
    modes: [ones]
EOF
fail() { echo "slurm-test: FAILED: $*" >&2; exit 1; }
results=$work/results

# --wait: sbatch returns when the whole array has ended.
"$repro" campaign "$work/campaign.yaml" -o "$results" --slurm --shards 3 --slurm-arg=--wait |
  tee "$work/submit.log"
grep -q "submitted job array .*: 3 tasks, 8 runs" "$work/submit.log" || fail "submission"
set +e
"$repro" campaign --collect "$results" | tee "$work/collect.log"
code=${PIPESTATUS[0]}
set -e
[[ $code == 7 ]] || fail "--collect exited $code, not 7 (nothing could run)"

python3 - "$results" 3 <<'EOF'
import json, sys, pathlib
results, tasks = pathlib.Path(sys.argv[1]), int(sys.argv[2])
records = [json.loads(l) for l in (results / "results.jsonl").read_text().splitlines()]
keys = json.loads((results / "campaign.json").read_text())["runs"]
assert len(keys) == 8, keys
assert sorted(r["key"] for r in records) == sorted(keys), "one record per run"
for r in records:
    assert r["code"] == 7 and r["verdict"] == "no_device", r
    assert r["disposition"] == "Not run (no_device)", r
    assert r["slurm"]["job"] and r["worker"] == "slurm", r
assert len({r["slurm"]["task"] for r in records}) == tasks, "every task ran its shard"
print(f"slurm-test: {len(records)} records, all exit 7 (no_device), from {tasks} array tasks")
EOF

# A run that found no GPU is not settled: a second submission sends every run again, and the
# second collection adds the newer records (the summary takes the latest of each run).
"$repro" campaign "$work/campaign.yaml" -o "$results" --slurm --shards 2 --slurm-arg=--wait |
  tee "$work/submit2.log"
grep -q "submitted job array .*: 2 tasks, 8 runs" "$work/submit2.log" || fail "second submission"
"$repro" campaign --collect "$results" | tee "$work/collect2.log" || true
grep -q "collect 8 new records from 5 shard files" "$work/collect2.log" || fail "second collection"
"$repro" campaign --collect "$results" >"$work/collect3.log" || true
grep -q "collect 0 new records" "$work/collect3.log" || fail "collect is not idempotent"
[[ $(wc -l <"$results/results.jsonl") == 16 ]] || fail "results.jsonl should hold 16 records"
echo "slurm-test: passed"
