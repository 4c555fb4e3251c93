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
//
// Delay points (`--stress jitter`): a race between the kernel's own threads (a stage released
// before it is read, a flag set before the data) shows only when one side falls behind. Put
// `repro::delay<kUnderTest>(stage)` where a thread could be held up in production (just after an
// arrival, before a read):
//
//   repro::delay<kTraced>(0);   // stage 0: after arriving on empty[s], before reading stage s
//
// Under `--stress jitter` every second launch sleeps each warp that reaches a point a random
// 0..N ns (--jitter-ns N, default 2000; one draw per warp and call, so the warp stays converged);
// other launches, and every launch without jitter, pass it at the cost of a constant-cache load
// and a branch.
// The harness reports how often each point ran and how long it slept. Gated at compile time like
// the stages: with `false` (the instantiations that are not under test) the call is nothing.
// =====================================================================================================
#pragma once
#define REPRO_TRACE_CUH 1  // the harness wires --stress jitter to the delay points below

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

namespace repro {

constexpr int kDelayPoints = 16;

// Set by the harness before each launch: 0 passes every point (an unjittered launch).
struct DelaySettings {
  unsigned int max_ns;
  unsigned int seed;
};

// What the points did, per point, summed over the launch's warps.
struct DelayRecord {
  unsigned long long calls[kDelayPoints];
  unsigned long long slept_ns[kDelayPoints];
};

// In constant memory: a disabled point costs one constant-cache load (the same address for every
// thread: a broadcast) and a branch. A __device__ variable read volatile went to L2 at every call
// and, on the H200, held consumer warps back enough to show a planted race with no jitter at all.
static __constant__ DelaySettings g_delay_settings;
static __device__ DelayRecord g_delay_record;

// A delay point: under --stress jitter, this warp sleeps a random 0..max_ns nanoseconds.
template <bool Enabled = true>
__device__ __forceinline__ void delay(int point) {
  if constexpr (Enabled) {
    const unsigned int max_ns = g_delay_settings.max_ns;  // constant during a launch
    if (max_ns == 0 || point < 0 || point >= kDelayPoints) return;
    const unsigned int active = __activemask();
    const int leader = __ffs(active) - 1;
    const int lane = static_cast<int>(threadIdx.x % 32u);
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    // One draw per warp and call: the clock, the seed and the warp's place, mixed (splitmix64).
    unsigned long long x = now ^ (static_cast<unsigned long long>(g_delay_settings.seed) << 32) ^
                           (static_cast<unsigned long long>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))
                            << 12) ^
                           static_cast<unsigned long long>(threadIdx.x / 32u + 64u * static_cast<unsigned>(point));
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const unsigned int ns = __shfl_sync(active, static_cast<unsigned int>(x % (max_ns + 1ull)), leader);
    __nanosleep(ns);
    if (lane == leader) {
      atomicAdd(&g_delay_record.calls[point], 1ull);
      atomicAdd(&g_delay_record.slept_ns[point], static_cast<unsigned long long>(ns));
    }
  } else {
    (void)point;
  }
}

}  // namespace repro
