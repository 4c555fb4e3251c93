#!/usr/bin/env bash
# `repro flags --from-log` on large build logs (issue 17 item 7: it must be linear in the log's
# size; real logs of PyTorch or TensorRT-LLM extension builds are tens of MB).
#
#   cargo build --release && scripts/bench/flags-log.sh            # 1, 10 and 100 MB
#   FLAGS_LOG_SIZES="1 10" scripts/bench/flags-log.sh               # sizes in MB
#   REPRO=path/to/repro scripts/bench/flags-log.sh
#
# Each log is a synthetic `ninja -v` log of a torch-style CUDA extension build, the same bytes on
# every machine (no randomness: every varying part is a function of the line's index): nvcc lines
# with the flags torch's BuildExtension writes, each compiling another .cu file, between g++ lines,
# nvcc's warnings with their source excerpts and caret lines, and ninja's own status lines. All
# nvcc lines give the same harness flags, so repro answers with one extraction (exit 0) and the
# time measured is that of reading, splitting and comparing every line, not an error path.
# Nothing is compared against stored numbers; it prints what it measured.
set -euo pipefail
cd "$(dirname "$0")/../.."
repro=${REPRO:-$PWD/target/release/repro}
sizes=${FLAGS_LOG_SIZES:-"1 10 100"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -x "$repro" ]; then
  echo "no $repro: run \`cargo build --release\` first (or set REPRO)" >&2
  exit 2
fi

# log MB FILE: a deterministic ninja log of at least MB megabytes (1 MB = 2^20 bytes).
log() {
  awk -v target=$(($1 << 20)) '
    function emit(s) { print s; bytes += length(s) + 1 }
    BEGIN {
      torch = "/opt/venv/lib/python3.11/site-packages/torch/include"
      flags = "-DTORCH_EXTENSION_NAME=fused_gemm -DTORCH_API_INCLUDE_EXTENSION_H " \
        "-DPYBIND11_COMPILER_TYPE=\\\"_gcc\\\" -DPYBIND11_STDLIB=\\\"_libstdcpp\\\" " \
        "-DPYBIND11_BUILD_ABI=\\\"_cxxabi1011\\\" -I/src/fused_gemm/csrc/include " \
        "-isystem " torch " -isystem " torch "/torch/csrc/api/include " \
        "-isystem /usr/local/cuda/include -isystem /usr/include/python3.11 " \
        "-D_GLIBCXX_USE_CXX11_ABI=0 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ " \
        "-D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr " \
        "--compiler-options '\''-fPIC'\'' -O3 -std=c++17 --use_fast_math -lineinfo " \
        "-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80"
      total = 4096
      for (i = 1; bytes < target; i++) {
        n = (i * 7919) % 100003
        step = (i % total) + 1
        if (i % 5 == 0) {
          emit("[" step "/" total "] c++ -MMD -MF /build/obj/bind_" n ".o.d -fPIC -O3 -std=c++17 " \
            "-isystem " torch " -c -o /build/obj/bind_" n ".o /src/fused_gemm/csrc/bind_" n ".cpp")
          continue
        }
        emit("[" step "/" total "] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile " \
          "--dependency-output /build/obj/gemm_" n ".cuda.o.d " flags \
          " -c /src/fused_gemm/csrc/gemm_" n ".cu -o /build/obj/gemm_" n ".cuda.o")
        if (i % 3 == 0) {
          emit("/src/fused_gemm/csrc/gemm_" n ".cu(" (n % 900 + 10) "): warning #177-D: variable \"tile_" n "\" was declared but never referenced")
          emit("      int tile_" n " = blockIdx.x * 128;")
          emit("          ^")
          emit("")
          emit("Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"")
          emit("")
        }
        if (i % 11 == 0) {
          emit("ninja: job " i " finished in " (n % 97) "." (n % 10) "s")
        }
      }
      emit("[" total "/" total "] c++ /build/obj/gemm_1.cuda.o -shared -L/usr/local/cuda/lib64 -lcudart -o fused_gemm.so")
    }' >"$2"
}

printf '%8s %10s %10s %9s %10s\n' "size_MB" "lines" "nvcc" "seconds" "MB/s"
for mb in $sizes; do
  file="$work/build_${mb}MB.log"
  log "$mb" "$file"
  bytes=$(stat -c %s "$file")
  lines=$(wc -l <"$file")
  nvcc=$(grep -c 'bin/nvcc' "$file")
  start=$(date +%s.%N)
  if ! "$repro" flags --from-log "$file" >"$work/out.txt" 2>&1; then
    echo "repro flags failed on $file:" >&2
    head -20 "$work/out.txt" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v b="$bytes" -v l="$lines" -v n="$nvcc" -v s="$start" -v e="$end" 'BEGIN {
    t = e - s; mb = b / 1048576
    printf "%8.1f %10d %10d %9.2f %10.1f\n", mb, l, n, t, (t > 0 ? mb / t : 0)
  }'
done
