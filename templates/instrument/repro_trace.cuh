// =====================================================================================================
// repro_trace.cuh: in-kernel stage tracing, for an instrumented copy of a kernel under test.
//
// Each named stage (an operand as the MMA consumes it, the accumulator, the output before the
// store) records the largest |value| it saw (atomicMax on the float's bits: |x| orders like its
// bits) and its first few values with their coordinates, into a __device__ buffer the repro
// harness reads after the launch (`trace:` in the spec). Under --ones every stage's right value
// is known (operands 1, accumulator K, output alpha*K), so the report can say which stage went
// wrong first.
//
//   #include "repro_trace.cuh"
//   constexpr bool kTraced = BM == 128 && KStages == 4;   // compile-time: only the instantiation
//                                                          // under test carries the probes
//   repro_trace::Stage<kTraced> acc_stage(2);            // stage 2 of the spec's `trace:`
//   acc_stage.see(acc, m, n, m < M && n < N);             // the predicate leaves out padding
//   acc_stage.flush();                                    // one atomic per thread, not per value
//
// Why a compile-time gate: a runtime flag read by every thread of a persistent or pipelined
// kernel changes its timing and register use, and races with the kernel itself; an `if constexpr`
// on the template parameters compiles the probes into exactly one instantiation and leaves every
// other one as it was. Why the predicate: rows past the real M in a clamped tile hold stale
// values, and an absmax over them is the classic false alarm.
// =====================================================================================================
#pragma once

#include <cuda_runtime.h>

namespace repro_trace {

constexpr int kMaxStages = 16;
constexpr int kMaxSamples = 8;

struct StageRecord {
  unsigned int absmax_bits;  // bits of the largest |value| (0 = nothing seen)
  unsigned int seen;         // values recorded (saturating at 2^32 - 1 is not a concern here)
  unsigned int samples;      // how many of `value` below are filled
  float value[kMaxSamples];
  int row[kMaxSamples], col[kMaxSamples];
};

// One buffer per translation unit: the harness is one translation unit, and reads it by name.
static __device__ StageRecord g_stages[kMaxStages];

// A thread's view of one stage: keeps its own maximum and hands it over in flush().
template <bool Enabled>
struct Stage {
  int index;
  float local_max = 0.0f;
  unsigned int local_seen = 0;

  __device__ explicit Stage(int stage) : index(stage) {}

  // Records `value` at (row, col) when `keep` (false for padding).
  __device__ void see(float value, int row, int col, bool keep = true) {
    if constexpr (Enabled) {
      if (!keep || index < 0 || index >= kMaxStages) return;
      const float magnitude = fabsf(value);
      // NaN compares false: keep it visible by taking its bits, which order above every float.
      if (!(magnitude <= local_max)) local_max = magnitude;
      ++local_seen;
      StageRecord& r = g_stages[index];
      if (r.samples < kMaxSamples) {
        const unsigned int slot = atomicAdd(&r.samples, 1u);
        if (slot < kMaxSamples) {
          r.value[slot] = value;
          r.row[slot] = row;
          r.col[slot] = col;
        }
      }
    } else {
      (void)value, (void)row, (void)col, (void)keep;
    }
  }

  __device__ void flush() {
    if constexpr (Enabled) {
      if (local_seen == 0 || index < 0 || index >= kMaxStages) return;
      atomicMax(&g_stages[index].absmax_bits, __float_as_uint(local_max));
      atomicAdd(&g_stages[index].seen, local_seen);
      local_seen = 0;
    }
  }
};

}  // namespace repro_trace
