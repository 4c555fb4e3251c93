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
for e in flash_attention flash_attention_causal_off_by_one flash_attention_exp2_scale flash_attention_kv_head_modulo flash_attention_tile_race flash_attention_varlen; do
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
