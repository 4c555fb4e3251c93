#!/usr/bin/env bash
# One device call of a session, cut into named steps that each run under what is left of a
# deadline, so that a call taken back or cut short still returns what finished. The repro
# binaries come gzipped in a carried folder (BUNDLE, default .gpu-bundles: repro.gz, and
# repro-before.gz for the before/after tables); everything the steps print goes to $OUT:
# summary.txt (one line a step: exit, seconds), logs.tgz (logs/STEP.log), and the per-case logs
# in cases.tgz: three files, where a device call brings back eight at most.
#
#   DEADLINE=470 STEPS=examples,reference,floor bash scripts/gpu-call.sh
#
# Steps (STEPS names them, in the order they run; default all, in this order):
#   prebuilt   gpu-prebuilt.sh over the artifact folders in $BUNDLE/prebuilt.tgz
#   erc        the emulated reference's accuracy battery, built here ($BUNDLE/erc.gz)
#   examples   gpu-check.sh examples probe over $EXAMPLES (default: the grouped fp8 examples)
#   reference  gpu-check.sh reference (the device reference's op cases)
#   floor      bench/check-floor.sh, before and after binaries side by side (FLOOR_QUEUE=1: as queues;
#              VARIANTS: the after artifacts again under other environments, see check-floor.sh)
#   cublas     bench/cublas_dgemm_cost.py at 1024, 2048, 4096
#   cublas-load  bench/cublas_loading.cu: cuBLAS opened at run time by a C++ process, and its DGEMM
#   queue      gpu-queue.sh $QUEUE_PARTS (default: same held)
#   capture    gpu-capture.sh (WINDOWS_ONLY=1: the windows of launches alone)
#   reference-parts  device_reference_check parts: the fp64 reference's packing and cuBLAS timed apart
#   probe-phases  bench/probe-phases.sh: where a probe run's time goes
#   verdicts   gpu-verdicts.sh, sections $SECTIONS (default D: the grouped scale probes)
#   campaign-before  bench/campaign-queue.sh's queues with the before binary
#   campaign   bench/campaign-queue.sh queue, torch, then a process-per-run slice of $PROCESS_LIMIT s
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
deadline=$((start + ${DEADLINE:-470}))
bundle=${BUNDLE:-.gpu-bundles}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out/logs" /tmp/bin /tmp/cases
steps=${STEPS:-prebuilt,erc,examples,reference,floor,cublas,probe-phases,verdicts,campaign-before,campaign}
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$summary"
# The host's cores, as the harness's thread pool sees them (hardware_concurrency) and as it may run.
echo "host: $(getconf _NPROCESSORS_ONLN) cores online, $(nproc) usable by this process" | tee -a "$summary"

# device_reference_check.gz: tests/cpp/device_reference_check.cu built here with the same nvcc
# (its compile is most of the `reference` step's time there).
for name in repro repro-before device_reference_check erc; do
  [[ -f $bundle/$name.gz ]] && gunzip -c "$bundle/$name.gz" >/tmp/bin/$name && chmod +x /tmp/bin/$name
done
export REPRO=/tmp/bin/repro
# harnesses.tgz: artifact folders built on the dev machine (`repro build`), for the queue's
# `held` part and the floor, run without building here (no runtime library to build first).
if [[ -f $bundle/harnesses.tgz ]]; then
  mkdir -p /tmp/harnesses && tar xzf "$bundle/harnesses.tgz" -C /tmp/harnesses
  export NAIVE_ARTIFACT=/tmp/harnesses/naive_gemm_f32 PREBUILT=/tmp/harnesses
fi
# harnesses-before.tgz: the floor's artifacts as an earlier repro builds them (gpu-bundle.sh
# --floor-before), the floor's `before` rows.
if [[ -f $bundle/harnesses-before.tgz ]]; then
  mkdir -p /tmp/harnesses-before && tar xzf "$bundle/harnesses-before.tgz" -C /tmp/harnesses-before
  export PREBUILT_BEFORE=/tmp/harnesses-before
fi
# cutlass-include.tgz: CUTLASS's include/ and tools/util/include from the project toolchain (the
# machine has no CUTLASS headers), for the CUTLASS examples.
if [[ -f $bundle/cutlass-include.tgz ]]; then
  mkdir -p /tmp/cutlass && tar xzf "$bundle/cutlass-include.tgz" -C /tmp/cutlass && export CUTLASS_DIR=/tmp/cutlass
fi

# The runtime library each binary builds on first use (about a minute each): both at once.
warm() { "$1" build examples/tiled_gemm_bf16.yaml -o "/tmp/warm-$(basename "$1")" >"/tmp/cases/warm-$(basename "$1").log" 2>&1; }
t0=$(date +%s)
[[ -x /tmp/bin/repro ]] && warm /tmp/bin/repro &
[[ -x /tmp/bin/repro-before ]] && warm /tmp/bin/repro-before &
wait
echo "warm: $(($(date +%s) - t0)) s" | tee -a "$summary"

# step NAME COMMAND...: runs the command under what is left of the deadline (less 15 s to pack
# up), and notes its exit and time.
step() {
  local name=$1 left code t
  shift
  left=$((deadline - $(date +%s) - 15))
  if ((left < 20)); then echo "$name: skipped, ${left} s left" | tee -a "$summary"; return 0; fi
  t=$(date +%s)
  timeout --kill-after=5 "$left" "$@" >"$out/logs/$name.log" 2>&1
  code=$?
  echo "$name: exit $code, $(($(date +%s) - t)) s" | tee -a "$summary"
}

# run_step NAME: the step of that name (see the list at the top).
run_step() {
  case $1 in
  prebuilt)
    # prebuilt.tgz: artifact folders built here (`repro build SPEC -o DIR`), run by gpu-prebuilt.sh.
    [[ -f $bundle/prebuilt.tgz ]] || return 0
    mkdir -p /tmp/prebuilt && tar xzf "$bundle/prebuilt.tgz" -C /tmp/prebuilt
    step prebuilt env PREBUILT_LOGS=/tmp/cases/prebuilt bash scripts/gpu-prebuilt.sh /tmp/prebuilt ;;
  erc)
    # erc.gz: tests/cpp/emulated_reference_check.cu built here; its accuracy battery.
    [[ -x /tmp/bin/erc ]] && step erc /tmp/bin/erc ;;
  examples)
    step examples env GPU_CHECK_LOGS=/tmp/cases/examples \
      EXAMPLES="${EXAMPLES:-fp8_grouped_*|fp8_k_grouped_*|fp8_batched_*|tiled_gemm_bf16|naive_gemm_f32}" \
      bash scripts/gpu-check.sh examples probe ;;
  reference)
    [[ -x /tmp/bin/device_reference_check ]] && export DEVICE_REFERENCE_CHECK=/tmp/bin/device_reference_check
    step reference env GPU_CHECK_LOGS=/tmp/cases/reference bash scripts/gpu-check.sh reference ;;
  floor)
    if [[ -x /tmp/bin/repro-before ]]; then
      step floor env REPRO_BEFORE=/tmp/bin/repro-before ROUNDS="${ROUNDS:-3}" QUEUE="${FLOOR_QUEUE:-}" bash scripts/bench/check-floor.sh
    else
      step floor env ROUNDS="${ROUNDS:-3}" QUEUE="${FLOOR_QUEUE:-}" bash scripts/bench/check-floor.sh
    fi ;;
  cublas) step cublas python3 scripts/bench/cublas_dgemm_cost.py 1024,2048,4096 ;;
  cublas-load)
    step cublas-load bash -c '"${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a \
      -o /tmp/bin/cublas_loading scripts/bench/cublas_loading.cu -ldl && /tmp/bin/cublas_loading 1024,2048,4096 &&
      echo "a second process:" && /tmp/bin/cublas_loading 1024' ;;
  capture) step capture bash scripts/gpu-capture.sh /tmp/bin/repro /tmp/cases/capture ;;
  queue) step queue env QUEUE_LOGS=/tmp/cases/queue bash scripts/gpu-queue.sh ${QUEUE_PARTS:-same held} ;;
  reference-parts)
    [[ -x /tmp/bin/device_reference_check ]] && step reference-parts /tmp/bin/device_reference_check parts 1024,2048,4096 ;;
  probe-phases) step probe-phases bash scripts/bench/probe-phases.sh ;;
  verdicts) step verdicts env SECTIONS="${SECTIONS:-D}" GPU_VERDICT_LOGS=/tmp/cases/verdicts bash scripts/gpu-verdicts.sh ;;
  campaign-before)
    # The same campaign's queues with the before binary, for a side-by-side.
    [[ -x /tmp/bin/repro-before ]] && step campaign-before env REPRO=/tmp/bin/repro-before MODES=queue bash scripts/bench/campaign-queue.sh ;;
  campaign)
    step campaign env MODES="${CAMPAIGN_MODES:-queue,torch,process}" PROCESS_LIMIT="${PROCESS_LIMIT:-40}" bash scripts/bench/campaign-queue.sh ;;
  *) echo "$1: no such step" | tee -a "$summary" ;;
  esac
}

# In the order STEPS names them.
for name in ${steps//,/ }; do run_step "$name"; done

tar czf "$out/cases.tgz" -C /tmp cases 2>/dev/null
echo "total: $(($(date +%s) - start)) s" | tee -a "$summary"
# One file for the steps' logs: a call brings back eight files at most.
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
