#!/usr/bin/env bash
# op: attention on the GPU machine (issue 21): every flash_attention example with --ones, with
# its seeded inputs and under `repro probe`; the tile race under compute-sanitizer racecheck;
# then the backward pass (op: attention_backward) and its race.
# Usage: scripts/gpu-attention.sh REPRO_BINARY OUT_DIR. Each case's log goes to OUT_DIR/<case>.log.
set -uo pipefail
repro=$(realpath "$1"); out=$2; root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
step() { local name=$1; shift; echo "== $name: $*"; ( "$@" ) > "$out/$name.log" 2>&1; echo "   exit $?"; grep -E "^(verdict|probe |Disposition|pattern|production|O |LSE |ref )" "$out/$name.log" | head -n 16; }
for e in flash_attention flash_attention_causal_off_by_one flash_attention_exp2_scale flash_attention_kv_head_modulo flash_attention_tile_race flash_attention_lse_log2 flash_attention_varlen; do
  step "$e-ones" "$repro" run "$root/examples/$e.yaml" -o "$work/$e" --ones
  step "$e-random" "$repro" run "$work/$e"
  step "$e-probe" "$repro" probe "$work/$e"
done
step tile-race-racecheck "$repro" run "$work/flash_attention_tile_race" --sanitize racecheck
step correct-racecheck "$repro" run "$work/flash_attention" --sanitize racecheck
# The backward pass (op: attention_backward): the custom ops' probes, and its race.
for e in flash_attention_backward flash_attention_backward_race; do
  step "$e-ones" "$repro" run "$root/examples/$e.yaml" -o "$work/$e" --ones
  step "$e-random" "$repro" run "$work/$e" --repeat 4
  step "$e-probe" "$repro" probe "$work/$e"
done
step backward-race-racecheck "$repro" run "$work/flash_attention_backward_race" --sanitize racecheck
# The device reference (attention_device.cuh). First: does it give the host's numbers? Each spec
# is run with the reference on the host and on the device, both dumped, and the two references
# compared element by element (the kernel's outputs too: the same kernel on the same inputs).
compare_references() {
  python3 - "$1" "$2" <<'PY'
import sys, pathlib, numpy as np
host, device = map(pathlib.Path, sys.argv[1:])
for h in sorted(host.glob('*_reference.npy')):
    a, b = np.load(h), np.load(device / h.name)
    finite = np.isfinite(a)
    same_inf = bool(np.array_equal(np.isfinite(a), np.isfinite(b)) and np.array_equal(a[~finite], b[~finite]))
    diff = np.abs(a[finite] - b[finite])
    rel = diff / np.maximum(np.abs(a[finite]), 1e-300)
    print(f"{h.name}: {a.size} values, {int((a != b).sum())} differ in bits, max |host - device| {diff.max() if diff.size else 0:.3e}, "
          f"max relative {rel.max() if rel.size else 0:.3e}, infinities alike: {same_inf}")
for o in sorted(host.glob('*.npy')):
    if o.name.endswith('_reference.npy'): continue
    print(f"{o.name}: host run and device run {'bit for bit alike' if np.load(o).tobytes() == np.load(device / o.name).tobytes() else 'DIFFER'}")
PY
}
for spec in examples/flash_attention.yaml examples/flash_attention_varlen.yaml examples/flash_attention_kv_head_modulo.yaml tests/gpu/attention_d256.yaml; do
  e=$(basename "$spec" .yaml)
  step "$e-reference-host" "$repro" run "$root/$spec" -o "$work/ref-$e" --reference host --dump "$work/ref-$e-host"
  step "$e-reference-device" "$repro" run "$work/ref-$e" --reference device --dump "$work/ref-$e-device"
  step "$e-reference-compare" compare_references "$work/ref-$e-host" "$work/ref-$e-device"
  cat "$out/$e-reference-compare.log"
done
# The probes' references on the device: the verdicts must not change.
step causal-off-by-one-probe-device "$repro" probe "$work/flash_attention_causal_off_by_one" --reference device
step exp2-scale-probe-device "$repro" probe "$work/flash_attention_exp2_scale" --reference device
# The production size (batch 8, 32/8 heads, 4096 tokens, head dim 128): auto chooses the device.
step production-run "$repro" run "$root/tests/gpu/attention_production.yaml" -o "$work/production"
grep -E "^(ref|time|launch) " "$out/production-run.log"
# repro probe at that size: every probe's reference on the device.
step production-probe "$repro" probe "$work/production"
# Host against device at 1/64 of that size (batch 1, 4/1 heads), side by side in one run.
for where in host device host device; do
  step "production-1-64-$where" "$work/production/harness" --size B=1 --size HQ=4 --size HK=1 --reference "$where"
  grep -E "^(ref|time) " "$out/production-1-64-$where.log"
done
