#!/usr/bin/env bash
# How `repro import cuda` reads a CUDA source, against the real preprocessor (issue 16), side by
# side in one run:
#
#   repro import FILE   `repro import cuda FILE --kernel NAME`: the hand-written lexer, macro
#                       expander and declaration reader on the one file, as a user points it at
#                       the file that declares the kernel
#   repro import TREE   the same on the file's folder (kernels/), every source in it scanned,
#                       as a user points it at a source tree
#   nvcc -E             the toolkit's preprocessor on the same file with the include directories
#                       it needs (-x cu -E -std=c++17 -arch=sm_90a): the alternative the issue
#                       names, and the size of what it hands on (every header expanded)
#
# Rows: every kernels/*.cuh (the kernel name is read off the file: its first `__global__`
# function, or its first `__device__` one for a file without a kernel), and one CUTLASS-heavy
# case: examples/cutlass_bf16_cooperative.yaml's `source:` (its includes and prelude, rendered by
# `repro scaffold` exactly as the harness gets them) written to a .cu file. That file declares no
# kernel itself; the kernel CUTLASS launches is `cutlass::device_kernel` (cutlass/device_kernel.h),
# so its "tree" is the .cu file next to a copy of the CUTLASS include folder (repro import does
# not follow symbolic links to folders), and nvcc -E gets -I for the CUTLASS headers.
#
# Times: the machine this was written on has 2 cores shared with other builds, so each cell
# gives the wall time and the CPU time (user + sys of the command and its children, from
# /usr/bin/time) per call, in milliseconds, averaged over the calls made in one timed loop:
# IMPORT_REPS calls of repro import (default 20: one takes milliseconds, under /usr/bin/time's
# 10 ms resolution), NVCC_REPS calls of nvcc -E (default 3). Compare the ratios within a run, not
# absolute times across runs. Nothing is compared against stored numbers.
#
#   CARGO_TARGET_DIR=/work/target-helper-import cargo build --release
#   REPRO=/work/target-helper-import/release/repro scripts/bench/import-preprocess.sh
#   IMPORT_REPS=50 NVCC_REPS=5 NVCC=/usr/local/cuda/bin/nvcc scripts/bench/import-preprocess.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
repro=${REPRO:-$root/target/release/repro}
nvcc=${NVCC:-$root/.toolchain/cuda/bin/nvcc}
cutlass=${CUTLASS_DIR:-$root/.toolchain/cutlass}
import_reps=${IMPORT_REPS:-20}
nvcc_reps=${NVCC_REPS:-3}
spec=examples/cutlass_bf16_cooperative.yaml
[[ -x "$repro" ]] || { echo "import-preprocess: no $repro: build it with cargo build --release (or set REPRO)" >&2; exit 2; }
[[ -x "$nvcc" ]] || { echo "import-preprocess: no $nvcc: run scripts/setup-toolchain.sh (or set NVCC)" >&2; exit 2; }
[[ -d "$cutlass/include/cutlass" ]] || { echo "import-preprocess: no CUTLASS headers in $cutlass (set CUTLASS_DIR)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "import-preprocess: needs /usr/bin/time (GNU time) for CPU times" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure OUT REPS CMD...: runs CMD REPS times in one /usr/bin/time (the loop's own cost is a
# few forks) and writes "wall_ms cpu_ms status" per call to OUT. @I@ in CMD's arguments becomes
# the call's index (repro import -o never writes over a file, so each call needs its own name).
# The status is the last call's exit code: a failed import is shown in the table, not hidden.
measure() {
  local out=$1 reps=$2 status wall user sys
  shift 2
  /usr/bin/time -f '%e %U %S' -o "$out.time" bash -c '
    reps=$1; shift; status=0
    for ((i = 0; i < reps; i++)); do
      status=0; "${@//@I@/$i}" >/dev/null 2>>"'"$out"'.err" || status=$?
    done
    exit "$status"' _ "$reps" "$@" && status=0 || status=$?
  # GNU time prints "Command exited with non-zero status N" above its line when CMD failed.
  read -r wall user sys < <(tail -1 "$out.time")
  awk -v w="$wall" -v u="$user" -v s="$sys" -v n="$reps" -v st="$status" \
    'BEGIN { printf "%.1f %.1f %d\n", 1000 * w / n, 1000 * (u + s) / n, st }' >"$out"
}

# cell FILE: "wall ms (cpu ms CPU)", and the exit status when the command failed.
cell() {
  local wall cpu status
  read -r wall cpu status <"$1"
  printf '%s ms (%s CPU)' "$wall" "$cpu"
  [[ $status == 0 ]] || printf ', EXIT %s' "$status"
}

# kernel_name FILE: the first __global__ function's name (the first __device__ one when there is
# no __global__), comments removed first (a header's comment may show a kernel's declaration).
# `__launch_bounds__(...)` may stand between `void` and the name, on the line above it.
kernel_name() {
  perl -0777 -ne '
    s{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g;
    my $bounds = qr/__launch_bounds__\s*(\((?:[^()]++|(?-1))*\))/;
    for my $kw ("__global__", "__device__") {
      if (/\b$kw\b(?:\s+(?:__forceinline__|inline|static|void|$bounds|[\w:<>]+))*?\s+(?:$bounds\s*)?(\w+)\s*\(/s) {
        print "$+\n"; exit;
      }
    }' "$1"
}

# The CUTLASS case: the harness's `source:` part, as repro renders it (up to the spec's own
# namespace), without the harness's runtime include; and its tree for repro import.
"$repro" scaffold "$spec" -o "$work/scaffold" >/dev/null
cutlass_cu=$work/cutlass_tree/cutlass_bf16_cooperative.cu
mkdir -p "$work/cutlass_tree"
sed -n '/^namespace repro_spec {/q; /^#include <repro\//d; p' "$work/scaffold/harness.cu" >"$cutlass_cu"
cp -r "$cutlass/include" "$work/cutlass_tree/include"

rows=()
for f in kernels/*.cuh; do
  name=$(kernel_name "$f")
  [[ -n "$name" ]] || { echo "import-preprocess: no __global__ or __device__ function found in $f" >&2; exit 1; }
  rows+=("$f|$name|kernels|-I$root/kernels")
done
rows+=("$cutlass_cu|device_kernel|$work/cutlass_tree|-I$cutlass/include -I$cutlass/tools/util/include")

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC'); repro $("$repro" --version | cut -d' ' -f2); $("$nvcc" --version | tail -1); averages of $import_reps imports and $nvcc_reps nvcc -E calls"
echo "cells:   wall milliseconds per call (user + sys CPU milliseconds per call)"
printf '\n| %s | %s | %s | %s | %s | %s | %s |\n' file kernel "repro import FILE" "repro import TREE" "nvcc -E" "nvcc -E output lines" "nvcc -E output MiB"
printf '|%s|%s|%s|%s|%s|%s|%s|\n' --- --- --- --- --- --- ---
n=0
for row in "${rows[@]}"; do
  IFS='|' read -r file name tree incs <<<"$row"
  n=$((n + 1))
  out=$work/out/$n
  mkdir -p "$out"
  if [[ $file == "$cutlass_cu" ]]; then
    file_cell="n/a (the .cu declares no kernel)"
  else
    measure "$out/file" "$import_reps" "$repro" import cuda "$file" --kernel "$name" -o "$out/file.@I@.yaml"
    file_cell=$(cell "$out/file")
  fi
  measure "$out/tree" "$import_reps" "$repro" import cuda "$tree" --kernel "$name" -o "$out/tree.@I@.yaml"
  read -r -a inc_args <<<"$incs"
  measure "$out/nvcc" "$nvcc_reps" "$nvcc" -x cu -E -std=c++17 -arch=sm_90a "${inc_args[@]}" "$file" -o "$out/pre.@I@.i"
  lines=$(wc -l <"$out/pre.0.i" 2>/dev/null || echo "-")
  mb=$(awk -v b="$(wc -c <"$out/pre.0.i" 2>/dev/null || echo 0)" 'BEGIN { printf "%.2f", b / 1048576 }')
  label=$([[ $file == "$cutlass_cu" ]] && echo "$spec source: (.cu)" || echo "$file")
  printf '| %s | `%s` | %s | %s | %s | %s | %s |\n' "$label" "$name" "$file_cell" "$(cell "$out/tree")" \
    "$(cell "$out/nvcc")" "$lines" "$mb"
done
# Why a failed cell failed: the first lines its command wrote to stderr.
for result in "$work"/out/*/{file,tree,nvcc}; do
  [[ -f $result ]] || continue
  read -r _ _ status <"$result"
  [[ $status == 0 ]] || head -3 "$result.err" | sed "s|^|  ${result#"$work/out/"}: |"
done

# What each reader hands on for the CUTLASS kernel's declaration: repro import names the file,
# the line and the macros it expanded; in nvcc -E's output the declaration is somewhere in the
# expanded text, with the macros gone (__global__ itself is spelled __attribute__((global))).
echo
echo "CUTLASS row, cutlass::device_kernel:"
sed -n 's/^# \(`cutlass::device_kernel`.*\)/  repro import: \1/p; s/^# \(macros expanded.*\)/  repro import: \1/p' "$work/out/$n/tree.0.yaml"
decl=$(grep -n 'void device_kernel(' "$work/out/$n/pre.0.i" | head -1)
echo "  nvcc -E: line ${decl%%:*} of $(wc -l <"$work/out/$n/pre.0.i"): ${decl#*:}"
echo "  nvcc -E: CUTLASS_GLOBAL / CUTLASS_GRID_CONSTANT occur $(grep -c -e CUTLASS_GLOBAL -e CUTLASS_GRID_CONSTANT "$work/out/$n/pre.0.i" || true) times; line markers (# N \"file\"): $(grep -c '^# [0-9]' "$work/out/$n/pre.0.i")"
