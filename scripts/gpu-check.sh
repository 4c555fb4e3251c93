#!/usr/bin/env bash
# GPU validation, run on a machine with an NVIDIA GPU (our H200): every example with --ones and
# with random inputs, the race example with more repeats, the GPU-only harness checks (hang,
# device fault, wrong arch), the build cache, and the benchmark sizes. Ends with a table.
#
#   scripts/gpu-check.sh 2>&1 | tee gpu-check.log    # uses target/release/repro
#   scripts/gpu-check.sh build examples              # only some parts (see `wanted` below)
#
# Per-case logs, JSON reports and dumps go to $GPU_CHECK_LOGS (default: a temporary folder).
#
# Nothing here is compared against stored numbers: it prints what happened, and the table says
# whether each example showed what its spec's `expect:` says.
set -uo pipefail
cd "$(dirname "$0")/.."
repro=${REPRO:-$PWD/target/release/repro}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}  # for the C++ test programs
# The runtime's sources, for the C++ test programs that compile it: one -I per folder, since they
# include one another by bare name as the artifact holds them flat
# (crates/repro-contract/runtime/README.md).
runtime_includes=(-Icrates/repro-contract/runtime/include)
for folder in crates/repro-contract/runtime/src/*/; do runtime_includes+=("-I$folder"); done
logs=${GPU_CHECK_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
rows=()

section() { printf '\n==== %s\n' "$*"; }

# Which parts to run: all by default, or those named on the command line (cache flags arches build examples
# large checks sanitize custom races hopper probe sizes trace cutlass files reference emulated emulated-examples ops-bench bench
# capture attention campaign;
# `examples` skips the 2^31-element
# index_overflow examples unless `large` is named too), so a validation can be split over several device calls.
parts=("$@")
# EXAMPLES='fp8_*|grouped_*' limits the parts that loop over examples/ (examples, probe) to the
# specs whose name matches one of the |-separated globs.
examples_filter=${EXAMPLES:-*}
selected() { local pattern; IFS='|' read -ra patterns <<<"$examples_filter"; for pattern in "${patterns[@]}"; do
  # shellcheck disable=SC2053
  [[ "$1" == $pattern ]] && return 0; done; return 1; }
wanted() { [[ ${#parts[@]} -eq 0 ]] || [[ " ${parts[*]} " == *" $1 "* ]]; }

# run_case LABEL EXPECTED_EXIT ARGS...: runs repro, keeps the log, adds a table row.
# With SAYS set (SAYS='text' run_case ...), the output must also contain that text: an exit code
# alone cannot tell the error that was meant from any other one.
run_case() {
  local label=$1 want=$2 says=${SAYS:-}
  shift 2
  local log="$logs/$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' '_' | sed 's/__*/_/g').log" start end code
  start=$(date +%s.%N)
  "$repro" "$@" >"$log" 2>&1
  code=$?
  end=$(date +%s.%N)
  local disposition expect_line ok
  disposition=$(grep -a '^Disposition:' "$log" | tail -1 | sed 's/^Disposition: //')
  expect_line=$(grep -a '^expect ' "$log" | tail -1 | sed 's/^expect  //')
  ok=$([[ "$want" == "$code" ]] && { [[ -z "$says" ]] || grep -qF -- "$says" "$log"; } && echo yes || echo NO)
  # A mode the spec's expect: says nothing about ('?') is run and shown, not judged.
  [[ "$want" == '?' ]] && ok=-
  printf '$ repro %s\n' "$*"
  cat "$log"
  printf -- '-> exit %s (%s s)\n' "$code" "$(awk "BEGIN { printf \"%.2f\", $end - $start }")"
  rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "$label" "$want" "$code" "$ok" "${disposition:--}" "${expect_line:--}")")
}

# harness_case LABEL EXPECTED_EXIT TEXT HARNESS ARGS...: a harness run directly, for its options
# that `repro run` does not pass on (--check-device-inputs); the output must contain TEXT.
harness_case() {
  local label=$1 want=$2 says=$3
  shift 3
  local log="$logs/$(echo "$label" | tr -c 'A-Za-z0-9_.\n-' '_' | sed 's/__*/_/g').log" code ok disposition
  "$@" >"$log" 2>&1
  code=$?
  disposition=$(grep -a '^Disposition:' "$log" | tail -1 | sed 's/^Disposition: //')
  ok=$([[ "$want" == "$code" ]] && grep -qF -- "$says" "$log" && echo yes || echo NO)
  printf '$ %s\n' "$*"
  cat "$log"
  printf -- '-> exit %s\n' "$code"
  rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "$label" "$want" "$code" "$ok" "${disposition:--}" "-")")
}

expected_exit() {  # expected_exit SPEC MODE -> the exit code the spec's expect: implies
  local outcome
  outcome=$(sed -n 's/^expect:.*'"$2"': *\([a-z]*\).*/\1/p' "$1")
  case "$outcome" in pass) echo 0 ;; fail) echo 1 ;; fault) echo 4 ;; hang) echo 5 ;; *) echo '?' ;; esac
}

section "machine"
date -u '+%Y-%m-%d %H:%M:%S UTC'
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
"$nvcc" --version | tail -n 2
"$repro" --version
"$repro" doctor

if wanted cache; then
section "build cache (tiled_gemm_bf16): cold, then unchanged"
rm -rf generated/tiled_gemm_bf16/harness generated/tiled_gemm_bf16/.repro/build
TIMEFORMAT='  %R s wall'
echo "cold build:"; time "$repro" build examples/tiled_gemm_bf16.yaml 2>&1 | tail -n 1
echo "warm build:"; time "$repro" build examples/tiled_gemm_bf16.yaml 2>&1 | tail -n 1
echo "scaffold into a new folder:"; time "$repro" scaffold examples/tiled_gemm_bf16.yaml -o "$(mktemp -d)/a" >/dev/null

fi

if wanted arches; then
section "other GPUs: an sm_86 spec built as PTX (ARCH=compute_86 ./build.sh), run here through the JIT"
"$repro" scaffold tests/gpu/arch_sm86_ptx.yaml >/dev/null
(cd generated/arch_sm86_ptx && ARCH=compute_86 NVCC="$nvcc" bash build.sh >"$logs/arch_sm86_build.log" 2>&1) ||
  cat "$logs/arch_sm86_build.log"
harness_case "sm_86 spec as PTX: --ones" 0 'Disposition: Passed' generated/arch_sm86_ptx/harness --ones
harness_case "sm_86 spec as PTX: device reference" 0 'JIT-compiled from compute_86 PTX' generated/arch_sm86_ptx/harness --reference device
harness_case "sm_86 spec as PTX: host reference" 0 'Disposition: Passed' generated/arch_sm86_ptx/harness --reference host
fi

if wanted flags; then
section "production flags reach the kernel only (tests/gpu/flags_*.yaml): same reference bits, same comparison"
# flags_fast_math is flags_plain built with --use_fast_math -maxrregcount=32 -DNDEBUG=0.
for v in plain fast_math; do
  mkdir -p "$logs/flags_$v"
  SAYS='fp64 device GEMM' run_case "flags_$v: device reference, dumped" 0 run tests/gpu/flags_$v.yaml --reference device --dump "$logs/flags_$v/device" --json "$logs/flags_$v/device.json"
  SAYS='fp64 host GEMM' run_case "flags_$v: host reference, dumped" 0 run tests/gpu/flags_$v.yaml --reference host --dump "$logs/flags_$v/host" --no-reference-cache
  run_case "flags_$v: --ones" 0 run tests/gpu/flags_$v.yaml --ones --json "$logs/flags_$v/ones.json"
done
for where in device host; do
  if cmp "$logs/flags_plain/$where/D_reference.npy" "$logs/flags_fast_math/$where/D_reference.npy"; then
    echo "flags: the $where reference is the same bits with and without the production flags"; same=0
  else
    echo "flags: the $where reference DIFFERS"; same=1
  fi
  rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "flags: $where reference bits" 0 "$same" "$([[ $same == 0 ]] && echo yes || echo NO)" - -)")
done
for v in plain fast_math; do
  grep -a '^D ' "$logs/flags_${v}_--ones.log" 2>/dev/null || grep -a '^D ' "$logs"/flags_${v}*ones*.log | head -1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('flags_$v: reference kernel', r.get('reference_kernel_ms'), 'ms')" "$logs/flags_$v/device.json"
done
a=$(grep -ah '^D ' "$logs"/flags_plain*ones*.log | head -1); b=$(grep -ah '^D ' "$logs"/flags_fast_math*ones*.log | head -1)
rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "flags: --ones comparison line" 0 "$([[ "$a" == "$b" ]] && echo 0 || echo 1)" "$([[ "$a" == "$b" ]] && echo yes || echo NO)" - -)")
# Registers: the kernel under test follows -maxrregcount=32, the runtime's reference kernel not.
for v in plain fast_math; do
  echo "flags_$v: registers per kernel (cuobjdump -res-usage)"
  "$(dirname "$nvcc")/cuobjdump" -res-usage "generated/flags_$v/harness" 2>/dev/null | grep -a -A1 'Function' | grep -aE 'Function|REG' | paste - - | sed -E 's/.*Function ([^:]*):.*REG:([0-9]+).*/  \2 registers  \1/' | sort -u | head -20
done
kreg=$("$(dirname "$nvcc")/cuobjdump" -res-usage generated/flags_fast_math/harness | grep -a -A1 'register_tile_gemm' | grep -ao 'REG:[0-9]*' | head -1 | cut -d: -f2)
rreg=$("$(dirname "$nvcc")/cuobjdump" -res-usage generated/flags_fast_math/harness | grep -a -A1 'reference' | grep -ao 'REG:[0-9]*' | sort -t: -k2 -n | tail -1 | cut -d: -f2)
echo "flags_fast_math: kernel under test ${kreg:-?} registers (cap 32), largest runtime reference kernel ${rreg:-?}"
ok=$([[ -n "$kreg" && -n "$rreg" && $kreg -le 32 && $rreg -gt 32 ]] && echo yes || echo NO)
rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "flags: -maxrregcount kernel only" 0 "$([[ $ok == yes ]] && echo 0 || echo 1)" "$ok" "kernel ${kreg:-?}, reference ${rreg:-?}" -)")
fi

if wanted build; then
section "building every harness (in parallel)"
ls examples/*.yaml tests/gpu/*.yaml | xargs -P 8 -I{} sh -c '"$0" build "$1" >/dev/null 2>&1 || echo "build failed: $1"' "$repro" {}

fi

if wanted examples; then
section "examples"
for spec in examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  selected "$name" || continue
  # The 2^31-element examples take minutes a run on the host side: part `large`.
  [[ "$name" == index_overflow* ]] && ! wanted large && continue
  run_case "$name --ones" "$(expected_exit "$spec" ones)" run "$spec" --ones
  # The 2^31-element examples take about three minutes a run on the host side (comparison of
  # 2.1e9 outputs); --ones shows their fault and its fix, random inputs add nothing but time.
  [[ "$name" == index_overflow* ]] && continue
  run_case "$name (random)" "$(expected_exit "$spec" random)" run "$spec" --json "$logs/$name.json"
done
run_case "missing_sync --repeat 5" 1 run examples/missing_sync.yaml --repeat 5

fi

if wanted checks; then
section "harness checks: hang, fault, wrong arch, bad input"
SAYS='did not finish within 3 s' run_case "wait_forever (watchdog)" 5 run tests/gpu/wait_forever.yaml --ones
SAYS='device fault: cudaErrorIllegalAddress' run_case "write_out_of_bounds" 4 run tests/gpu/write_out_of_bounds.yaml --ones
SAYS='built for sm_80 but device 0' run_case "wrong_arch (sm_80 on sm_90)" 7 run tests/gpu/wrong_arch.yaml --ones
run_case "naive_gemm_f32 --init B=identity" 0 run examples/naive_gemm_f32.yaml --init B=identity
run_case "batched_gemm --ones" 0 run tests/gpu/batched_gemm.yaml --ones
run_case "batched_gemm (random)" 0 run tests/gpu/batched_gemm.yaml
run_case "naive_cluster (cluster 2x1x1)" 0 run tests/gpu/naive_cluster.yaml
SAYS='asks for 240000 B of dynamic shared memory' run_case "too_much_smem (240000 B)" 4 run tests/gpu/too_much_smem.yaml --ones
# The spec's own check settings, which no example sets: an element tolerance far below bf16's
# rounding fails a correct kernel's random inputs (--ones stays exact), and a stressor asked for in
# the spec runs on the SMs it names.
run_case "check_tolerance_override --ones" 0 run tests/gpu/check_tolerance_override.yaml --ones
run_case "check_tolerance_override (random: fails)" 1 run tests/gpu/check_tolerance_override.yaml
SAYS='stress  bandwidth on 16 of the' run_case "check_stress_from_spec" 0 run tests/gpu/check_stress_from_spec.yaml

fi

if wanted sanitize; then
section "compute-sanitizer (repro run --sanitize): findings named and counted, exit 6"
SAYS='Invalid __shared__ write' run_case "block_rowsum_smem_f32 --sanitize memcheck" 6 run examples/block_rowsum_smem_f32.yaml --ones --sanitize memcheck
SAYS='sanitize  memcheck: 0 errors' run_case "block_rowsum_f32 --sanitize memcheck" 0 run examples/block_rowsum_f32.yaml --ones --sanitize memcheck
# The under-request that runs silently (see the hopper part): memcheck must still see it.
SAYS='Invalid __shared__ write' run_case "block_rowsum_warps_smem_f32 --sanitize memcheck" 6 run examples/block_rowsum_warps_smem_f32.yaml --sanitize memcheck
# racecheck slows a kernel by orders of magnitude: the race example at a small size.
SAYS='Race between Write access and Read access' run_case "missing_sync_small --sanitize racecheck" 6 run tests/gpu/missing_sync_small.yaml --sanitize racecheck
SAYS='sanitize  initcheck: 0 errors' run_case "tiled_gemm_bf16 --sanitize initcheck" 0 run examples/tiled_gemm_bf16.yaml --sanitize initcheck
SAYS='sanitize  synccheck: 0 errors' run_case "tiled_gemm_f32 --sanitize synccheck" 0 run examples/tiled_gemm_f32.yaml --ones --sanitize synccheck
# The raw sanitizer logs come back (in $OUT) to become test fixtures for the parser.
for f in generated/*/.repro/build/sanitizer-*.log; do
  [[ -n "${OUT:-}" && -f "$f" ]] && cp "$f" "$OUT/$(basename "$(dirname "$(dirname "$(dirname "$f")")")")-$(basename "$f")"
done

fi

if wanted custom; then
section "kernels that are no GEMM (op: custom, op: file): iota inputs, several outputs, the sanitizer, file references"
# iota (every element its index) and int_uniform (small integers: the comparison is exact)
# inputs, NAME:INPUTS:IOTA_EXIT:INT_EXIT. column_sum_missed_tail passes iota: its tail holds the
# sums of columns 24 to the left, which differ by 24000 in 5e8 (5e-5, inside f32's 1e-4), while
# int_uniform's exact comparison catches it.
for case in column_sum:X:0:0 column_sum_missed_tail:X:0:1 rank_norm:X:0:0 rank_norm_wrong_stride:X:1:1 \
            stencil3x3:image:0:0 stencil3x3_border:image:1:1 csr_spmv:values,x:0:0 csr_spmv_row_ptr_past:values,x:1:1; do
  IFS=: read -r name inputs iota_exit int_exit <<<"$case"
  selected "$name" || continue
  for pattern in iota int_uniform; do
    inits=()
    IFS=, read -ra names <<<"$inputs"
    for input in "${names[@]}"; do inits+=(--init "$input=$pattern"); done
    run_case "$name ($pattern)" "$([[ $pattern == iota ]] && echo "$iota_exit" || echo "$int_exit")" run "examples/$name.yaml" "${inits[@]}"
  done
done
# every_dtype: a tensor of each dtype copied to an output of its own (the only spec with tf32,
# e5m2, i8, u8, u32, i64 or bool outputs), with the suite's probes too.
for spec in tests/gpu/two_outputs.yaml tests/gpu/two_outputs_tail.yaml tests/gpu/every_dtype.yaml; do
  name=$(basename "$spec" .yaml)
  run_case "$name --ones" "$(expected_exit "$spec" ones)" run "$spec" --ones
  run_case "$name (random)" "$(expected_exit "$spec" random)" run "$spec"
  run_case "probe $name" "$([[ $name == two_outputs_tail ]] && echo 1 || echo 0)" probe "$spec"
done
SAYS='the reference is NaN at z[17] where the kernel wrote' run_case "nan_reference (a broken reference)" 2 run tests/gpu/nan_reference.yaml
SAYS='Disposition: Passed' run_case "column_sum_file (op: file, NumPy)" 0 run tests/gpu/column_sum_file.yaml
SAYS='pattern boundary' run_case "column_sum_missed_tail_file (op: file)" 1 run tests/gpu/column_sum_missed_tail_file.yaml
SAYS='Race between' run_case "column_sum_no_sync --sanitize racecheck" 6 run examples/column_sum_no_sync.yaml --sanitize racecheck
SAYS='sanitize  racecheck: 0 errors' run_case "column_sum --sanitize racecheck" 0 run examples/column_sum.yaml --sanitize racecheck
SAYS='Invalid __global__ read' run_case "stencil3x3_border --sanitize memcheck" 6 run examples/stencil3x3_border.yaml --sanitize memcheck
SAYS='Invalid __global__ read' run_case "csr_spmv_row_ptr_past --sanitize memcheck" 6 run examples/csr_spmv_row_ptr_past.yaml --sanitize memcheck
SAYS='sanitize  memcheck: 0 errors' run_case "csr_spmv --sanitize memcheck" 0 run examples/csr_spmv.yaml --sanitize memcheck

fi

if wanted races; then
section "hidden races (issue 19): the correct kernels pass under every --stress mode; each planted race shows under its mode"
for spec in persistent_tma_store mbarrier_pipeline; do
  for mode in bandwidth l2 jitter; do
    SAYS="stress  $mode" run_case "$spec --stress $mode" 0 run examples/$spec.yaml --repeat 6 --stress $mode
  done
done
# Measured over 100 invocations each (docs/gpu-validation.md, runs 37-38): the TMA store's race
# shows under bandwidth (99%) and l2 (95%), the pipeline's under jitter (100%); neither without.
SAYS='under stress' run_case "persistent_tma_store_no_barrier probe --stress bandwidth" 1 probe examples/persistent_tma_store_no_barrier.yaml --stress bandwidth
SAYS='under stress' run_case "mbarrier_pipeline_early_release probe --stress jitter" 1 probe examples/mbarrier_pipeline_early_release.yaml --stress jitter
SAYS='no repro::delay points' run_case "column_sum --stress jitter (no delay points)" 2 run examples/column_sum.yaml --repeat 2 --stress jitter
fi

if wanted hopper; then
section "Hopper: TMA descriptors, kind: device, clusters, smem under-requests (f32 silent, f64 fault)"
for name in tma_gemm_bf16 tma_gemm_box_too_small tma_gemm_swizzle_mismatch tma_task_device \
            block_rowsum_warps_smem_f32 block_rowsum_warps_smem_f64; do
  spec=examples/$name.yaml
  run_case "$name --ones" "$(expected_exit "$spec" ones)" run "$spec" --ones
  run_case "$name (random)" "$(expected_exit "$spec" random)" run "$spec" --json "$logs/$name.json"
done
SAYS='cluster (16,1,1)' run_case "naive_cluster16 (non-portable)" 0 run tests/gpu/naive_cluster16.yaml
# An output written only by TMA stores: the kernel gets map_d, never D's pointer (issue 24 item 1).
SAYS='tma     map_d = D' run_case "tma_store_only --ones" 0 run tests/gpu/tma_store_only.yaml --ones
run_case "tma_store_only (random)" 0 run tests/gpu/tma_store_only.yaml
# Every descriptor option no example sets (swizzle 32B/64B, L2 promotion, an element stride, a NaN
# fill, an interleave): box sums through each against the driver's rules; probe too (iota, codes).
SAYS='tma     map_interleaved = Y' run_case "tma_options --ones" 0 run tests/gpu/tma_options.yaml --ones
run_case "tma_options (random)" 0 run tests/gpu/tma_options.yaml
run_case "probe tma_options" 0 probe tests/gpu/tma_options.yaml
# Replayed launches in a sequence (kind: replay in launches:): two launches from two cubins, each
# its own module and bytes; then one built from source followed by a replayed one. --ones: Y = 10.
SAYS='square_add.cubin, 24 parameter bytes, 3 addresses' run_case "replay_sequence --ones" 0 run tests/gpu/replay_sequence.yaml --ones
run_case "replay_sequence (random)" 0 run tests/gpu/replay_sequence.yaml
run_case "replay_sequence_mixed --ones" 0 run tests/gpu/replay_sequence_mixed.yaml --ones
run_case "replay_sequence_mixed (random)" 0 run tests/gpu/replay_sequence_mixed.yaml

fi

if wanted probe; then
section "probe suite: every example with a verdict, repro probe (one harness process each)"
for spec in examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  selected "$name" || continue
  # (Comments first: "# no verdict: ..." after an expect is no verdict.)
  verdict=$(sed -n 's/#.*//; s/^expect:.*verdict: *\([a-z_]*\).*/\1/p' "$spec")
  [[ -z "$verdict" ]] && continue
  # The 2^31-element examples: a probe suite there is 25 launches of 4 GB outputs; run shows them.
  [[ "$name" == index_overflow* ]] && continue
  case "$verdict" in ok) want=0 ;; fault) want=4 ;; hang) want=5 ;; *) want=1 ;; esac
  SAYS='-> met' run_case "probe $name" "$want" probe "$spec" --json "$logs/probe-$name.json"
done

fi

if wanted sizes; then
section "sizes at run time: repro sweep (one build, many sizes) and repro shrink (smaller sizes, same failure)"
SAYS='every size passes' run_case "sweep tiled_gemm_bf16" 0 sweep examples/tiled_gemm_bf16.yaml
SAYS='every size passes' run_case "sweep tma_gemm_bf16 (M, N)" 0 sweep examples/tma_gemm_bf16.yaml
SAYS='sizes fail: 1 (unwritten)' run_case "sweep skip_last_m_tile" 1 sweep examples/skip_last_m_tile.yaml
for name in swap_rows_store skip_last_m_tile drop_last_k tma_gemm_box_too_small; do
  rm -f "examples/$name.shrunk"*.yaml
  SAYS='shrunk  ' run_case "shrink $name" 1 shrink "examples/$name.yaml"
  cat "examples/$name.shrunk.yaml" 2>/dev/null | grep -E '^(name|sizes):'
  # The shrunk spec, run as written: the same failure at its smaller sizes.
  [[ -f "examples/$name.shrunk.yaml" ]] && run_case "$name.shrunk (random)" 1 run "examples/$name.shrunk.yaml"
  rm -f "examples/$name.shrunk"*.yaml
done

fi

if wanted trace; then
section "in-kernel stage tracing (repro_trace.cuh): the stage each planted defect is in"
SAYS='trace   stage mma:' run_case "traced_mma_twice --ones" 1 run examples/traced_mma_twice.yaml --ones
SAYS='trace   stage load:' run_case "traced_load_twice --ones" 1 run examples/traced_load_twice.yaml --ones
SAYS='trace   stage epilogue:' run_case "traced_epilogue_half --ones" 1 run examples/traced_epilogue_half.yaml --ones
SAYS='trace   stage ok:' run_case "traced_padding --ones" 0 run examples/traced_padding.yaml --ones
SAYS='trace   stage load:' run_case "traced_padding_unpredicated --ones (false alarm)" 0 run examples/traced_padding_unpredicated.yaml --ones
# repro::capture on the device: a real device buffer captured and imported (tests/cpp/capture_demo.cu).
"$nvcc" -std=c++17 -o "$logs/capture_demo" tests/cpp/capture_demo.cu && mkdir -p "$logs/capture" &&
  REPRO_CAPTURE_DIR="$logs/capture" "$logs/capture_demo" && cat "$logs/capture/manifest.jsonl"
# The captured values, read back: A (bf16 as uint16), B (column-major view), C (a host pointer
# through cudaMemcpyAsync), D (a cudaMalloc buffer on its own stream); then the import.
python3 - "$logs/capture" <<'PY'
import sys, numpy as np
d = sys.argv[1]
a = (np.load(d + "/A.0.npy").astype(np.uint32) << 16).view(np.float32)
want_a = np.array([[m + k / 4 for k in range(3)] for m in range(5)], np.float32)
want_b = np.array([[10 * k + n for n in range(4)] for k in range(3)], np.float32)
checks = {"A": (a, want_a), "B": (np.load(d + "/B.0.npy"), want_b),
          "C": (np.load(d + "/C.0.npy"), want_b.T.reshape(12)), "D": (np.load(d + "/D.0.npy"), want_b.T)}
for name, (got, want) in checks.items():
    print(f"capture {name}: {got.dtype} {got.shape} {'equal' if np.array_equal(got, want) else 'DIFFERENT'}: {got.tolist()}")
PY
SAYS='init: { file:' run_case "import capture (device buffers)" 0 import capture "$logs/capture"

fi

if wanted cutlass; then
section "CUTLASS: a layout pasted wrong, a problem TMA cannot take, grouped scales CUTLASS would read elsewhere"
SAYS="the kernel's StrideB fixes the stride of mode K" run_case "cutlass_layout_mismatch" 2 run tests/gpu/cutlass_layout_mismatch.yaml --ones
SAYS='1998 B, not a multiple of the 16 B' run_case "cutlass_unaligned (N = 999)" 2 run tests/gpu/cutlass_unaligned.yaml --ones
SAYS='an MN-major SFA steps' run_case "cutlass_grouped_scales_mn_major (masked SA, MN-major SFA)" 2 run tests/gpu/cutlass_grouped_scales_mn_major.yaml --ones

fi

if wanted files; then
section "inputs from files: --dump, then the same inputs back as .npy and as raw .bin"
run_case "tiled_gemm_f32 --seed 5 --dump" 0 run examples/tiled_gemm_f32.yaml --seed 5 --dump "$logs/dump"
ls -l "$logs/dump"
python3 -c "import numpy as np, sys; np.load(sys.argv[1]).tofile(sys.argv[2])" "$logs/dump/A.npy" "$logs/dump/A.bin"
run_case "tiled_gemm_f32 A.npy B.npy" 0 run examples/tiled_gemm_f32.yaml --init "A=file:$logs/dump/A.npy" --init "B=file:$logs/dump/B.npy"
run_case "tiled_gemm_f32 A.bin B.npy" 0 run examples/tiled_gemm_f32.yaml --init "A=file:$logs/dump/A.bin" --init "B=file:$logs/dump/B.npy"
grep -h '^D ' "$logs"/tiled_gemm_f32_*seed_5*.log "$logs"/tiled_gemm_f32_A.*.log

fi

if wanted cutlass; then
section "CUTLASS (cutlass_bf16_cooperative): repro run cold (builds first), then warm (cached build)"
rm -rf generated/cutlass_bf16_cooperative/harness generated/cutlass_bf16_cooperative/.repro/build
echo "cold run:"; time "$repro" run examples/cutlass_bf16_cooperative.yaml --ones 2>&1 | grep -E '^(build|Disposition)'
echo "warm run:"; time "$repro" run examples/cutlass_bf16_cooperative.yaml --ones 2>&1 | grep -E '^(build|Disposition)'

fi

if wanted reference; then
section "the device reference (tests/cpp/device_reference_check.cu): every output against the host's; a damaged one refused"
# Built here unless given (DEVICE_REFERENCE_CHECK: a binary built elsewhere with the same nvcc).
check_exe=${DEVICE_REFERENCE_CHECK:-}
if [[ -z "$check_exe" ]]; then
  check_exe="$logs/device_reference_check"
  "$nvcc" -std=c++17 -O2 "${runtime_includes[@]}" -gencode=arch=compute_90a,code=sm_90a \
    -o "$check_exe" tests/cpp/device_reference_check.cu
fi
harness_case "device reference = host, 9 cases" 0 '9 passed, 0 failed' "$check_exe"
harness_case "device reference damaged: refused" 4 'the device reference disagrees with the host' "$check_exe" corrupt
harness_case "device reference = host: scaled, batched scaled, grouped" 0 '6 passed, 0 failed' "$check_exe" ops
# cuBLAS's DGEMM (reference/cublas_gemm.cuh) for every GEMM of the same cases, then for none.
harness_case "cuBLAS reference = host, 9 cases" 0 'cuBLAS' env REPRO_CUBLAS=all "$check_exe"
harness_case "cuBLAS reference = host, 9 cases: all pass" 0 '9 passed, 0 failed' env REPRO_CUBLAS=all "$check_exe"
harness_case "cuBLAS reference damaged: refused" 4 'the device reference disagrees with the host' env REPRO_CUBLAS=all "$check_exe" corrupt
harness_case "cuBLAS reference = host: scaled, batched scaled, grouped" 0 '6 passed, 0 failed' env REPRO_CUBLAS=all "$check_exe" ops
harness_case "own kernel at 1024^3 too (REPRO_CUBLAS=off)" 0 '9 passed, 0 failed' env REPRO_CUBLAS=off "$check_exe"
harness_case "device comparison = host's, timed" 0 '4 passed, 0 failed' "$check_exe" compare
# A reference too large for the device (60000 x 300000 doubles: 134 GiB): said, with the way out.
"$repro" build examples/index_overflow_fixed.yaml >/dev/null 2>&1
harness_case "device reference out of memory" 4 'rerun with --reference host' \
  generated/index_overflow_fixed/harness --size M=60000 --size N=300000 --reference device

fi

if wanted emulated; then
section "the emulated reference (issue 35): the accuracy battery, kernel speed, every GEMM example's verdict with it"
erc=${EMULATED_REFERENCE_CHECK:-}
if [[ -z "$erc" ]]; then
  erc="$logs/emulated_reference_check"
  "$nvcc" -std=c++17 -O2 "${runtime_includes[@]}" -gencode=arch=compute_90a,code=sm_90a \
    -o "$erc" tests/cpp/emulated_reference_check.cu
fi
harness_case "emulated reference: accuracy battery" 0 '21 passed, 0 failed' "$erc"
# The int8 kernels run the same steps and folds: the same bits on awkward shapes, then each one's
# time. A deadlock in a pipeline of barriers would hang: bounded.
harness_case "emulated int8 kernels: same bits" 0 'every kernel gives the same bits' timeout -s KILL 300 "$erc" kernels
for kernel in wgmma tma; do  # tma_multicast: the default, above
  harness_case "emulated reference, $kernel: battery" 0 '21 passed, 0 failed' \
    env REPRO_EMULATED_KERNEL=$kernel timeout -s KILL 300 "$erc"
done
# Each scheme alone (auto, the default, weighs both): slices, and the residues
# (emulated_moduli.cuh) wherever they fit.
for scheme in slices moduli; do
  harness_case "emulated reference, $scheme: battery" 0 '21 passed, 0 failed' \
    env REPRO_EMULATED_SCHEME=$scheme timeout -s KILL 300 "$erc"
done
harness_case "emulated reference: kernel speed" 0 '| 16384 | f32 |' "$erc" speed
fi

# The examples with the emulated reference, also on their own (`emulated-examples`), so that a
# validation can run them in a device call of their own.
if wanted emulated || wanted emulated-examples; then
section "the emulated reference: every GEMM example's verdict with it"
# Every GEMM example (op gemm, grouped_gemm) with random inputs and the emulated reference: the
# verdict its spec expects, with the engine the ref line names.
for spec in examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  selected "$name" || continue
  [[ "$name" == index_overflow* ]] && continue
  grep -qE 'op: *(gemm|grouped_gemm)([ ,}]|$)' "$spec" || continue
  # A run that reaches the comparison names the engine; a hang or a fault ends before it.
  want=$(expected_exit "$spec" random)
  says=$([[ "$want" == 0 || "$want" == 1 ]] && echo 'int8 tensor cores' || echo '')
  SAYS="$says" run_case "$name --reference emulated" "$want" run "$spec" --reference emulated --json "$logs/$name.emulated.json"
done
# Ill-scaled inputs: A of tests/gpu/ill_scaled_a.npy, values (0.5 .. 1.5) * 2^e with e uniform
# in [-60, 60] (f32, [3, 130, 75]): most elements beyond the slices, carried as residuals.
SAYS='residual elements' run_case "ill-scaled inputs: residuals" 0 \
  run tests/gpu/batched_gemm.yaml --reference emulated --init "A=file:$PWD/tests/gpu/ill_scaled_a.npy"
# What no slices can carry falls back and says so: A of tests/gpu/inf_a.npy holds one +Inf
# (uniform [-1, 1] elsewhere).
SAYS='not emulated: A holds Inf or NaN' run_case "an Inf in A: falls back" 0 \
  run tests/gpu/batched_gemm.yaml --reference emulated --init "A=file:$PWD/tests/gpu/inf_a.npy"
fi

if wanted ops-bench; then
section "benchmarks of the scaled and grouped references (issue 22): scripts/bench/scaled-grouped.sh"
REPRO="$repro" scripts/bench/scaled-grouped.sh

fi

if wanted bench; then
section "benchmarks: the fp64 reference on the host and on the device, 1024^3 to 8192^3; repro bench"
for size in 1024 4096 8192; do
  "$repro" build "tests/gpu/bench_tiled_bf16_$size.yaml" >/dev/null 2>&1
  for provider in host device; do
    SAYS="fp64 $provider GEMM" run_case "bench_tiled_bf16_$size --reference $provider" 0 \
      run "tests/gpu/bench_tiled_bf16_$size.yaml" --repeat 1 --reference "$provider" --no-reference-cache
  done
done
# The device reference on the harder cases: batches, alpha, beta*C, bias, a column-major B, fp8.
SAYS='fp64 device GEMM' run_case "batched_gemm --reference device" 0 run tests/gpu/batched_gemm.yaml --reference device
SAYS='fp64 device GEMM' run_case "cutlass_fp8_e4m3 --reference device" 0 run examples/cutlass_fp8_e4m3.yaml --reference device
# The device path: inputs made on the device (every element against the host generator: bf16;
# f32 with normal and int_uniform inits, batched, column-major; e4m3), the comparison on the
# device, and failing kernels still located (the host analysis on copies).
for spec in tests/gpu/bench_tiled_bf16_1024.yaml tests/gpu/batched_gemm.yaml examples/cutlass_fp8_e4m3.yaml; do
  name=$(basename "$spec" .yaml)
  "$repro" build "$spec" >/dev/null 2>&1
  harness_case "$name: device inputs, all" 0 'bit for bit (every element' "generated/$name/harness" --reference device --check-device-inputs
done
SAYS='compare on the device' run_case "tiled_gemm_bf16 --reference device" 0 run examples/tiled_gemm_bf16.yaml --reference device
SAYS='compare on the device, then' run_case "skip_last_m_tile --reference device" 1 run examples/skip_last_m_tile.yaml --reference device
SAYS='pattern row_mapping' run_case "swap_rows_store --reference device" 1 run examples/swap_rows_store.yaml --reference device
SAYS='pattern nondeterministic' run_case "missing_sync --reference device" 1 run examples/missing_sync.yaml --reference device --repeat 5
SAYS='pattern scattered' run_case "k_tile_twice --reference device" 1 run examples/k_tile_twice.yaml --reference device
# The reference cache (host reference; the device path recomputes instead): the first run
# stores, a rerun reads, another seed computes anew.
rm -rf generated/bench_tiled_bf16_4096/.repro/cache
SAYS='cached for reruns' run_case "reference cache: first run stores" 0 run tests/gpu/bench_tiled_bf16_4096.yaml --repeat 1 --reference host
SAYS='fp64 reference from the cache' run_case "reference cache: the rerun reads it" 0 run tests/gpu/bench_tiled_bf16_4096.yaml --repeat 1 --reference host
SAYS='cached for reruns' run_case "reference cache: --seed 7 computes anew" 0 run tests/gpu/bench_tiled_bf16_4096.yaml --repeat 1 --reference host --seed 7
# repro bench: one spec (the harness's report), variants over sizes (a table), cold L2, a hang.
SAYS='GFLOP/s' run_case "bench tiled_gemm_bf16" 0 bench examples/tiled_gemm_bf16.yaml
SAYS='the time of tiled_gemm_bf16' run_case "bench tiled vs naive, 1024-4096" 0 bench examples/tiled_gemm_bf16.yaml \
  --variants examples/naive_gemm_bf16.yaml --sizes 1024,2048,4096 --dims M,N,K
SAYS='L2 flushed before each' run_case "bench CUTLASS coop vs pingpong, cold L2" 0 bench examples/cutlass_bf16_cooperative.yaml \
  --variants examples/cutlass_bf16_pingpong.yaml --sizes 4096,8192 --dims M,N,K --flush-l2 --json "$logs/bench-cutlass.json"
SAYS='FAIL hang (exit 5)' run_case "bench of a kernel that hangs" 5 bench tests/gpu/wait_forever.yaml \
  --variants tests/gpu/batched_gemm.yaml --sizes 64 --dims M --warmup 0 --repeat 1
# repro's own overhead on a warm run: the same harness run directly, then through repro.
TIMEFORMAT='  %R s wall'
echo "harness directly:"; time generated/bench_tiled_bf16_1024/harness --ones --repeat 1 >/dev/null
echo "through repro run:"; time "$repro" run tests/gpu/bench_tiled_bf16_1024.yaml --ones --repeat 1 >/dev/null 2>&1

fi

# repro capture (issue 20) and attention (issue 21) keep their own scripts, whose logs go under
# $logs; their cases print there rather than in the table below.
if wanted capture; then
section "capture: scripts/gpu-capture.sh"
scripts/gpu-capture.sh "$repro" "$logs/capture"
fi
if wanted attention; then
section "attention: scripts/gpu-attention.sh"
scripts/gpu-attention.sh "$repro" "$logs/attention"
fi
if wanted campaign; then
section "campaigns (issue 37): scripts/gpu-campaign.sh"
code=0
scripts/gpu-campaign.sh "$repro" "$logs/campaign" || code=$?
rows+=("$(printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |' "campaign checks" 0 "$code" "$([[ $code == 0 ]] && echo yes || echo NO)" "-" "-")")
fi

section "summary"
printf '| %-32s | %4s | %4s | %-3s | %-28s | %s |\n' "case" "want" "exit" "ok" "disposition" "expect (from the spec)"
printf '|%s|%s|%s|%s|%s|%s|\n' "----------------------------------" "------" "------" "-----" "------------------------------" "---"
printf '%s\n' "${rows[@]}"
bad=$(printf '%s\n' "${rows[@]}" | grep -c '| NO  |')
echo "$(( ${#rows[@]} - bad )) passed, $bad failed"
