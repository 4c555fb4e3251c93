#!/usr/bin/env bash
# Remakes the fixtures of tests/gpu/replay_sequence.yaml and replay_sequence_mixed.yaml: each
# launch of kernels/replay_sequence.cuh compiled alone into a cubin, as a capture's module.cubin,
# and its parameter bytes as a capture's params.bin (little-endian, at the driver's parameter
# offsets). The addresses in them are production's, made up here: the harness rewrites every one
# (the specs' `relocate:`), so they only need to be where the kernels' pointers are.
#   scale_add(const float* X, float* W)                    16 bytes: X at 0, W at 8
#   square_add(const float* W, const float* X, float* Y)   24 bytes: W at 0, X at 8, Y at 16
# Run from anywhere; NVCC names the compiler (default: the project's toolchain, else nvcc).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
nvcc="${NVCC:-$repo/.toolchain/cuda/bin/nvcc}"
[ -x "$nvcc" ] || nvcc=nvcc
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "#include \"$here/../kernels/replay_sequence.cuh\"" > "$work/module.cu"
for launch in 1 2; do
  name=$([ "$launch" = 1 ] && echo scale_add || echo square_add)
  "$nvcc" -cubin -gencode=arch=compute_90a,code=sm_90a -O3 -DREPLAY_SEQUENCE_ONLY="$launch" \
    "$work/module.cu" -o "$here/$name.cubin"
done
# Production's (made-up) addresses: X at 0x7f0000000000, W at 0x7f0000100000, Y at 0x7f0000200000.
python3 - "$here" <<'PY'
import struct, sys
x, w, y = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000
open(f"{sys.argv[1]}/scale_add.params.bin", "wb").write(struct.pack("<QQ", x, w))
open(f"{sys.argv[1]}/square_add.params.bin", "wb").write(struct.pack("<QQQ", w, x, y))
PY
