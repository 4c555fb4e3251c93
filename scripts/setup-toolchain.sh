#!/usr/bin/env bash
# Installs a CUDA compiler, the CUDA runtime and headers, CUPTI (for `repro capture`), the
# CUTLASS/CuTe headers, CMake and Ninja (the tests configure and build the artifacts'
# CMakeLists.txt with both of CMake's generators) from PyPI wheels into .toolchain/ inside the
# repository. No system changes; idempotent; a second run with everything in place returns in
# well under a second.
#
# Versions are pinned so every machine (developer, CI, the bug-report receiver) compiles with the
# same nvcc. 13.0 matches the CUDA 13.0 driver of the H200 machines we validate on; newer 13.x
# compilers also work there through minor-version compatibility.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/.toolchain"
stamp="$dest/.installed"

packages=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-cupti==13.0.85
  nvidia-cutlass==4.2.0.0
  cmake==3.31.6
  ninja==1.13.2
)
want="${packages[*]}"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dest/cuda/bin/nvcc" ]]; then
  echo "toolchain: up to date in $dest"
  exit 0
fi

python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "setup-toolchain: python3 with pip is required" >&2; exit 1; }

echo "toolchain: installing ${#packages[@]} wheels into $dest (about 300 MB)"
rm -rf "$dest.partial"
# --no-deps: the wheels we need are headers and binaries; nvidia-cutlass's Python dependencies
# (numpy, scipy, cuda-python...) are not needed for its headers.
PIP_DISABLE_PIP_VERSION_CHECK=1 "$python" -m pip install --quiet --no-deps --no-compile \
  --root-user-action=ignore --target "$dest.partial/site" "${packages[@]}"

# The nvcc wheel's nvcc.profile links from $(TOP)/lib64, the wheels ship lib/: give it the
# layout a regular toolkit has, so nvcc links the static runtime with no extra -L flags.
cuda="$dest.partial/site/nvidia/cu13"
ln -s lib "$cuda/lib64"
ln -s site/nvidia/cu13 "$dest.partial/cuda"
ln -s site/cutlass_library/source "$dest.partial/cutlass"
ln -s site/cmake/data "$dest.partial/cmake"

rm -rf "$dest"
mv "$dest.partial" "$dest"
# The links are relative, so the move keeps them valid.
echo "$want" > "$stamp"
"$dest/cuda/bin/nvcc" --version | tail -n 2
echo "toolchain: nvcc at $dest/cuda/bin/nvcc, CUTLASS at $dest/cutlass/include, cmake at $dest/cmake/bin/cmake, ninja at $dest/site/bin/ninja"
