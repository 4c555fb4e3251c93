#!/usr/bin/env bash
# Makes the carried folder of a device call (scripts/gpu-call.sh's BUNDLE) on this machine, so
# that the call spends its device time on the GPU rather than on building: a device machine
# takes 70-140 s to build the runtime library before its first harness, and a call whose
# harnesses come built needs no repro binary at all.
#
#   scripts/gpu-bundle.sh DIR [--repro] [--drc] [--floor] [--floor-before REF] [SPEC.yaml ...]
#
#   --repro   DIR/repro.gz: target/release/repro, stripped (steps that run repro: capture,
#             examples, verdicts, campaign; the call then builds the runtime library first)
#   --drc     DIR/device_reference_check.gz: tests/cpp/device_reference_check.cu (`reference`,
#             `reference-parts`)
#   --floor   DIR/harnesses.tgz: the artifacts `floor` and the queue's `held` part run
#             (naive_gemm_f32 for gpu-queue.sh held, and scripts/bench/floor-specs.txt)
#   --floor-before REF
#             DIR/harnesses-before.tgz: the floor's artifacts as repro at git revision REF builds
#             them (a worktree, built into target-before/), for the floor's before/after table
#             without a repro binary on the device
#   SPEC...   DIR/prebuilt.tgz: their artifacts, for the `prebuilt` step (gpu-prebuilt.sh runs
#             each with --ones, random inputs and --probe)
#
# Artifacts are built with target/release/repro (built first) and this machine's nvcc: the
# device machine runs them as they are. Their spec.yaml hold absolute paths to the files they
# read (init files, reference files), under this tree: link the tree's path to the copy there
# (`ln -s "$PWD" /work/main`, see docs/gpu-validation.md) when a spec reads files.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/gpu-bundle.sh DIR [--repro] [--drc] [--floor] [--floor-before REF] [SPEC.yaml ...]}
shift
repro=false drc=false floor=false before_ref="" specs=()
while (($#)); do
  arg=$1
  shift
  case $arg in
    --repro) repro=true ;;
    --drc) drc=true ;;
    --floor) floor=true ;;
    --floor-before) before_ref=${1:?gpu-bundle: --floor-before needs a git revision}; shift ;;
    -*) echo "gpu-bundle: unknown option $arg" >&2; exit 2 ;;
    *) [[ -f $arg ]] || { echo "gpu-bundle: no spec $arg" >&2; exit 2; }; specs+=("$arg") ;;
  esac
done
mkdir -p "$dir"
cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# pack NAME SPEC...: each spec's artifact folder, without what the device does not run (the
# runtime's sources, the harness source, the CMake file), as DIR/NAME; built by $REPRO_BIN.
REPRO_BIN=target/release/repro
pack() {
  local name=$1 spec
  shift
  mkdir -p "$work/$name"
  for spec in "$@"; do
    "$REPRO_BIN" build "$spec" -o "$work/$name/$(basename "$spec" .yaml)" >"$work/$name.log" 2>&1 ||
      { cat "$work/$name.log" >&2; echo "gpu-bundle: $spec did not build" >&2; exit 1; }
  done
  tar czf "$dir/$name" -C "$work/$name" --exclude=runtime --exclude='*.cu' --exclude=CMakeLists.txt .
  echo "gpu-bundle: $dir/$name ($# artifacts, $(du -h "$dir/$name" | cut -f1))"
}

if $repro; then
  strip -o "$work/repro" target/release/repro && gzip -c "$work/repro" >"$dir/repro.gz"
  echo "gpu-bundle: $dir/repro.gz"
fi
if $drc; then
  nvcc=${NVCC:-.toolchain/cuda/bin/nvcc}
  includes=(-Icrates/repro-contract/runtime/include)
  for folder in crates/repro-contract/runtime/src/*/; do includes+=("-I$folder"); done
  "$nvcc" -std=c++17 -O2 "${includes[@]}" -gencode=arch=compute_90a,code=sm_90a \
    -o "$work/device_reference_check" tests/cpp/device_reference_check.cu
  gzip -c "$work/device_reference_check" >"$dir/device_reference_check.gz"
  echo "gpu-bundle: $dir/device_reference_check.gz"
fi
# The floor's specs, one a line (check-floor.sh reads the same list).
mapfile -t floor_specs <scripts/bench/floor-specs.txt
if $floor; then
  pack harnesses.tgz examples/naive_gemm_f32.yaml "${floor_specs[@]}"
fi
if [[ -n $before_ref ]]; then
  # The same specs (this tree's), built by repro as it was at REF.
  tree="$work/before-tree"
  git worktree add --detach --quiet "$tree" "$before_ref"
  trap 'git worktree remove --force "$tree" 2>/dev/null; rm -rf "$work"' EXIT
  CARGO_TARGET_DIR=$PWD/target-before cargo build --release --quiet --manifest-path "$tree/Cargo.toml"
  REPRO_BIN=$PWD/target-before/release/repro
  pack harnesses-before.tgz "${floor_specs[@]}"
  REPRO_BIN=target/release/repro
fi
if ((${#specs[@]})); then pack prebuilt.tgz "${specs[@]}"; fi
# A device call carries at most 64 MiB.
total=$(du -sm "$dir" | cut -f1)
if ((total > 60)); then echo "gpu-bundle: $dir holds $total MiB; a call carries 64 MiB at most" >&2; exit 1; fi
