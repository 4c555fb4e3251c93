// ---------------------------------------------------------------------------------------------
// repro harness runtime: timing the kernel (--bench; `repro bench`, docs/cli.md)
//
// Device events around each launch, as every launch of this harness is timed, but with the
// conditions a timing needs and a check does not: warm-up launches first (clocks ramp up, the
// instruction cache and TLBs fill, lazy module loading happens), then N timed launches, each
// waited for on its own so one launch's tail never overlaps the next one's events. With
// --flush-l2, a write over a buffer twice the L2's size runs before every timed launch (outside
// its events), so each launch reads its operands from HBM as a cold production call would; without
// it, operands that fit stay in L2 between launches and the times are the warm, best case.
//
// Bench mode checks nothing: no reference, no comparison, outputs not poisoned between
// launches. `repro run` is what says whether the kernel is right.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "probe_group_scales.cuh"

namespace repro {

struct BenchOptions {
  int warmup = 5;
  int repeat = 20;
  bool flush_l2 = false;
};

struct BenchResult {
  std::vector<double> ms;  // each timed launch, in order
  double median = 0, min = 0, max = 0, mean = 0;
  size_t flush_bytes = 0;  // the buffer written before each timed launch (0: no flush)
};

// Median, min, max and mean of the timed launches.
inline void summarize(BenchResult& r) {
  std::vector<double> sorted = r.ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  r.median = 0.5 * (sorted[(n - 1) / 2] + sorted[n / 2]);
  r.min = sorted.front();
  r.max = sorted.back();
  double sum = 0;
  for (double v : sorted) sum += v;
  r.mean = sum / double(n);
}

inline BenchResult bench_kernel(SpecInfo& spec, const BenchOptions& options, cudaStream_t stream,
                                cudaEvent_t start, cudaEvent_t stop, double timeout, Launch* launch) {
  BenchResult r;
  void* flush = nullptr;
  if (options.flush_l2) {
    int l2_bytes = 0;
    REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, current_device().ordinal));
    r.flush_bytes = 2 * size_t(std::max(l2_bytes, 1 << 20));
    REPRO_CUDA_CHECK(cudaMalloc(&flush, r.flush_bytes));
  }
  for (int run = 0; run < options.warmup + options.repeat; ++run) {
    const bool timed = run >= options.warmup;
    if (timed && flush != nullptr) REPRO_CUDA_CHECK(cudaMemsetAsync(flush, run & 0xFF, r.flush_bytes, stream));
    *launch = launch_kernel(spec, spec.tensors, stream, start, stop);
    wait_for_kernel(stop, timeout, launch->label, describe(*launch));
    if (!timed) continue;
    float ms = 0;
    REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    r.ms.push_back(ms);
  }
  if (flush != nullptr) REPRO_CUDA_CHECK(cudaFree(flush));
  summarize(r);
  return r;
}

// The report: a line for people, a `bench` member for repro bench and scripts. For a GEMM the
// rate is 2*L*M*N*K flops over the median; the bytes are every tensor's storage once (a lower
// bound on the traffic, so the bandwidth is one too).
inline void report_bench(const BenchResult& r, const BenchOptions& options, const SpecInfo& spec) {
  const GemmOperands& g = spec.gemm;
  const double flops =
      spec.custom.op == ReferenceOp::gemm ? 2.0 * double(g.L) * double(g.M) * double(g.N) * double(g.K) : 0.0;
  double bytes = 0;
  for (const Tensor& t : spec.tensors) bytes += double(t.storage_bytes());
  const double seconds = r.median * 1e-3;
  std::printf("bench   kernel median %.4f ms  min %.4f  max %.4f  mean %.4f  (%d timed launches after %d warm-up, %s)\n",
              r.median, r.min, r.max, r.mean, options.repeat, options.warmup,
              r.flush_bytes ? strprintf("L2 flushed before each (%zu MB written)", r.flush_bytes >> 20).c_str()
                            : "L2 not flushed");
  if (spec.custom.op == ReferenceOp::gemm)
    std::printf("bench   %.1f GFLOP/s (2*L*M*N*K = %.3g flop), %.1f GB/s over the tensors' %.3g bytes\n",
                flops / seconds * 1e-9, flops, bytes / seconds * 1e-9, bytes);
  else  // a kernel that is no GEMM: its flops are its own; the bytes are still a lower bound
    std::printf("bench   %.1f GB/s over the tensors' %.3g bytes\n", bytes / seconds * 1e-9, bytes);
  JsonWriter w;
  w.begin_object();
  w.field("median_ms", r.median);
  w.field("min_ms", r.min);
  w.field("max_ms", r.max);
  w.field("mean_ms", r.mean);
  w.field("warmup", options.warmup);
  w.field("repeat", options.repeat);
  w.field("flush_l2", options.flush_l2);
  w.field("flops", flops);
  w.field("bytes", bytes);
  w.key("ms").begin_array();
  for (double ms : r.ms) w.value(ms);
  w.end_array();
  w.end_object();
  report_set("bench", w.str());
}

}  // namespace repro
