// repro runtime: the kernel's delay points (--stress jitter; repro_trace.cuh's repro::delay).
//
// Included by harness.cu after the kernel, so that it sees whether the kernel included
// repro_trace.cuh: the delay points' settings and record are __device__ variables of the
// kernel's translation unit, which only harness.cu can reach by name. The runtime gets two
// function pointers (HarnessSpec::set_delays, read_delays), or none when the kernel has no
// delay points, and then refuses --stress jitter with the reason.
#pragma once

#include <cuda_runtime.h>

#include "harness.h"

namespace repro {

#if defined(REPRO_TRACE_CUH)
static_assert(repro::kDelayPoints == kDelayPointCount, "repro: repro_trace.cuh and the runtime disagree");

inline void set_delay_points(cudaStream_t stream, unsigned max_ns, unsigned seed) {
  // Ordered on the test stream (after the previous launch, before the next), and waited for:
  // the host values are locals.
  const DelaySettings settings = {max_ns, seed};
  const DelayRecord zero = {};
  REPRO_CUDA_CHECK(cudaMemcpyToSymbolAsync(g_delay_settings, &settings, sizeof settings, 0, cudaMemcpyHostToDevice, stream));
  REPRO_CUDA_CHECK(cudaMemcpyToSymbolAsync(g_delay_record, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, stream));
  REPRO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

inline void read_delay_points(unsigned long long* calls, unsigned long long* slept_ns) {
  DelayRecord record;
  REPRO_CUDA_CHECK(cudaMemcpyFromSymbol(&record, g_delay_record, sizeof record));
  for (int i = 0; i < kDelayPoints; ++i) calls[i] = record.calls[i], slept_ns[i] = record.slept_ns[i];
}
#endif

// Gives the runtime the kernel's delay points, if it has any.
inline void wire_delay_points(HarnessSpec& spec) {
#if defined(REPRO_TRACE_CUH)
  spec.set_delays = &set_delay_points;
  spec.read_delays = &read_delay_points;
#else
  (void)spec;
#endif
}

}  // namespace repro
