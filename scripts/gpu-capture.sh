#!/usr/bin/env bash
# repro capture on the GPU machine (issue 20): the capture app (rebuilt from source, correct and
# defective, and replayed), and PyTorch's torch.matmul replayed from cuBLAS's machine code.
# Usage: scripts/gpu-capture.sh REPRO_BINARY OUT_DIR. Each case's log goes to OUT_DIR/<case>.log.
set -uo pipefail
repro=$(realpath "$1"); out=$2; root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
step() { local name=$1; shift; echo "== $name: $*"; ( "$@" ) > "$out/$name.log" 2>&1; echo "   exit $?"; tail -n 25 "$out/$name.log"; }
"$root/examples/capture_app/build.sh" -o "$work/capture_app" || exit 1
step app-run "$work/capture_app"
step global-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" -o "$work/global" -- "$work/capture_app"
step global-run "$repro" run "$work/global"
step defect-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" \
  --reference '{op: gemm, a: A, b: B, out: D, tile: [128, 128, 64]}' -o "$work/defect" -- "$work/capture_app" --defect
step defect-run "$repro" run "$work/defect"
step defect-probe "$repro" probe "$work/defect"
step replay-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --replay -o "$work/replay" -- "$work/capture_app" --defect
step replay-run "$repro" run "$work/replay"
step never "$repro" capture --kernel 'no_such_kernel' -o "$work/never" -- "$work/capture_app"
step matmul-capture "$repro" capture --kernel 'gemm|nvjet|xmma|Kernel' -o "$work/matmul" -- python3 "$root/examples/capture_torch/matmul.py"
step matmul-run "$repro" run "$work/matmul"
step ext-capture "$repro" capture --kernel 'scaled_add<' --launch 2 --source "$root/examples/capture_torch" -o "$work/ext" -- python3 "$root/examples/capture_torch/extension.py"
step ext-run "$repro" run "$work/ext"
for d in global defect replay matmul ext; do cp "$work/$d/capture.yaml" "$out/$d.capture.yaml" 2>/dev/null; cp "$work/$d/raw/session.json" "$out/$d.session.json" 2>/dev/null; done
