#!/usr/bin/env bash
# Triton kernels through `repro capture` on the GPU machine (issue 38, part 2): an autotuned
# matmul and a row softmax (examples/capture_triton/), each replayed from its cubin bit for bit,
# then judged as the op it is (--tensor views, --reference), with a planted defect in each; and
# (issue 59) a decoding kernel whose q, k, v, cu_seqlens and o share one caching-allocator
# segment, judged with a view on its output alone.
# Usage: scripts/gpu-triton.sh REPRO_BINARY OUT_DIR. Each step's log goes to OUT_DIR/<step>.log.
set -uo pipefail
repro=$(realpath "$1"); out=$2; root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"; work=$(mktemp -d); ex=$root/examples/capture_triton
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
# Triton's autotuner launches every candidate many times before the first real launch, a count
# that depends on timing. With its choice kept on disk (TRITON_CACHE_AUTOTUNING=1), a later run
# launches production's config only, so --launch 1 is production's first launch.
export TRITON_CACHE_DIR=$work/triton-cache TRITON_CACHE_AUTOTUNING=1
step() { local name=$1; shift; echo "== $name: $*"; ( "$@" ) > "$out/$name.log" 2>&1; echo "   exit $?"; tail -n 30 "$out/$name.log"; }
session() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('session: launches', d['launches_seen'], 'matched', d['matched'])" "$1/raw/session.json"; }
gemm_views=(--tensor 'a_ptr=[M, K]' --tensor 'b_ptr=[K, N]' --tensor 'c_ptr=[M, N]'
            --reference '{op: gemm, a: a_ptr, b: b_ptr, out: c_ptr, tile: [64, 128, 32]}')
softmax_views=(--tensor 'x_ptr=[300, n_cols]' --tensor 'y_ptr=[300, n_cols]'
               --reference "{op: custom, source: $ex/softmax_reference.h, function: softmax_rows, block: [1, 1000]}")

step mm-warm python3 "$ex/matmul.py"
step mm-capture "$repro" capture --kernel matmul_kernel -o "$work/mm" -- python3 "$ex/matmul.py"
step mm-session session "$work/mm"
step mm-run "$repro" run "$work/mm"
step mm-gemm-capture "$repro" capture --kernel matmul_kernel -o "$work/mm-gemm" "${gemm_views[@]}" -- python3 "$ex/matmul.py"
step mm-gemm-run "$repro" run "$work/mm-gemm"
step mm-gemm-ones "$repro" run "$work/mm-gemm" --ones
step mm-gemm-probe "$repro" probe "$work/mm-gemm"
step kmask-warm python3 "$ex/matmul.py" --defect kmask
step kmask-capture "$repro" capture --kernel matmul_kernel -o "$work/kmask" "${gemm_views[@]}" -- python3 "$ex/matmul.py" --defect kmask
step kmask-run "$repro" run "$work/kmask"
step kmask-ones "$repro" run "$work/kmask" --ones
step kmask-probe "$repro" probe "$work/kmask"
step sm-capture "$repro" capture --kernel softmax_kernel -o "$work/sm" -- python3 "$ex/softmax.py"
step sm-run "$repro" run "$work/sm"
step sm-op-capture "$repro" capture --kernel softmax_kernel -o "$work/sm-op" "${softmax_views[@]}" -- python3 "$ex/softmax.py"
step sm-op-run "$repro" run "$work/sm-op"
step sm-op-probe "$repro" probe "$work/sm-op"
step mask-capture "$repro" capture --kernel softmax_kernel -o "$work/mask" "${softmax_views[@]}" -- python3 "$ex/softmax.py" --defect mask
step mask-run "$repro" run "$work/mask"
step mask-probe "$repro" probe "$work/mask"
# Issue 59: five parameters in one segment. seg-capture: q, k, v, cu_seqlens inputs of their own,
# o the only output; seg-run: o reproduced bit for bit, then checked against o.npy (torch's).
# seg-whole-capture: without the view, exit 2 naming the five parameters and the --tensor each needs.
seg_reference='{op: file, expected: {o: o.npy}, block: [1, 64]}'
step seg-capture "$repro" capture --kernel decode_kernel -o "$work/seg" --tensor 'o=[8, 64]' --reference "$seg_reference" -- python3 "$ex/shared_segment.py" --expected "$work/seg/o.npy"
step seg-spec grep -E '^  (q|k|v|cu_seqlens|o): |output: true|tensor: ' "$work/seg/capture.yaml"
step seg-run "$repro" run "$work/seg"
step seg-whole-capture "$repro" capture --kernel decode_kernel -o "$work/seg-whole" --reference "$seg_reference" -- python3 "$ex/shared_segment.py" --expected "$work/seg-whole/o.npy"
step mm-memcheck "$repro" run "$work/mm-gemm" --sanitize memcheck
step mm-bundle "$repro" bundle "$work/kmask" -o "$work/bundle-kmask"
for d in mm mm-gemm kmask sm sm-op mask seg; do cp "$work/$d/capture.yaml" "$out/$d.capture.yaml" 2>/dev/null; done
find "$TRITON_CACHE_DIR" -name '*.autotune.json' -exec cp {} "$out/" \; 2>/dev/null
