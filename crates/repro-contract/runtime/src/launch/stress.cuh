// ---------------------------------------------------------------------------------------------
// repro harness runtime: stress (--stress MODE; spec check.stress), to provoke races that hide
//
// A race whose window is short (a TMA store still reading shared memory when the next tile's
// epilogue overwrites it) finishes in time on an idle GPU, run after run. It shows when the
// memory system is congested, as it is in production. Under stress, every second launch of the
// kernel under test runs beside a stressor kernel of the harness's own, on a second stream:
//
//   bandwidth  streams copies through a buffer four times the L2, so that the kernel's own loads
//              and stores wait on DRAM
//   l2         overwrites the L2 before the launch and, during it, reads and writes random lines
//              of a buffer twice the L2: the kernel's working set keeps being evicted
//   jitter     no stressor: the kernel's own repro::delay(point) calls (repro_trace.cuh, in a
//              copy of the kernel) sleep each warp a random 0..--jitter-ns nanoseconds, so that
//              one side of a race between the kernel's threads falls behind
//
// The stressor runs on the SMs the kernel leaves free (the grid's blocks are fewer than the SMs)
// or on --stress-sms N of them, one block per SM; a persistent kernel whose grid is
// repro::persistent_sm_count() gets N fewer CTAs on a stressed launch, so the stressor has its
// SMs. It stops when the kernel under test is done (a flag the test stream sets after it), or
// after the launch's timeout at the latest, so that a kernel waiting for every SM is delayed,
// never deadlocked. The unstressed launches in between stay the baseline: the report says
// whether outputs differed only under stress, and what each stressed launch had (SMs, bytes the
// stressor moved while the kernel ran).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device.cuh"

namespace repro {

enum class StressMode { none, bandwidth, l2, jitter };

inline const char* stress_mode_name(StressMode mode) {
  switch (mode) {
    case StressMode::bandwidth: return "bandwidth";
    case StressMode::l2: return "l2";
    case StressMode::jitter: return "jitter";
    case StressMode::none: break;
  }
  return "none";
}

inline bool parse_stress_mode(const std::string& text, StressMode* mode) {
  for (StressMode m : {StressMode::none, StressMode::bandwidth, StressMode::l2, StressMode::jitter})
    if (text == stress_mode_name(m)) return *mode = m, true;
  return false;
}

// What one stressed launch had.
struct StressRecord {
  int sms = 0;                  // the stressor's blocks, one per SM
  double bytes = 0;             // what it moved while it ran
  double stressor_ms = 0;       // how long it ran
  std::string where;            // "on the 112 SMs the grid (20 blocks) leaves free"
  bool collected = false;       // the launch is over and the fields above are filled
  // jitter: the delay points' calls and nanoseconds slept during the launch, per point.
  unsigned long long delay_calls[kDelayPointCount] = {};
  unsigned long long delay_slept_ns[kDelayPointCount] = {};
};

struct StressState {
  StressMode mode = StressMode::none;
  int requested_sms = 0;        // --stress-sms N (0: the SMs the kernel leaves free)
  double timeout_seconds = 10;  // the launch's watchdog: the stressor never outlives it
  unsigned jitter_ns = 2000;    // --jitter-ns N: a delay point sleeps 0..N ns
  // The kernel's delay points (HarnessSpec::set_delays, read_delays); null without them.
  void (*set_delays)(cudaStream_t stream, unsigned max_ns, unsigned seed) = nullptr;
  void (*read_delays)(unsigned long long* calls, unsigned long long* slept_ns) = nullptr;
  unsigned jitter_seed = 0x5EED;
  // Set up on the first stressed launch.
  cudaStream_t stream = nullptr;
  void* buffer = nullptr;
  size_t buffer_bytes = 0;
  unsigned long long* moved = nullptr;       // device: bytes, summed by the stressor's blocks
  unsigned long long* stressor_ns = nullptr; // device: how long block 0 ran
  // The stop flag, host-mapped: set by a host function the test stream runs after the kernel
  // (no SM needed), and by the host before it waits for the stressor, whichever comes first.
  volatile int* stop = nullptr;
  int* stop_device = nullptr;
  volatile int* started = nullptr;           // host-mapped: set by the stressor when it runs
  int* started_device = nullptr;
  int sm_count = 0, l2_bytes = 0;
  size_t stressor_smem = 0;
  // Per launch of the kernel under test, in order: stressed or not (launch_kernel asks).
  long long launches = 0;
  long long in_sequence = 0;  // launches since the run or probe began: its first is unstressed
  bool current_stressed = false;
  int current_sms = 0;
  unsigned last_grid_blocks = 0;  // the previous launch's grid: the stressor's SMs are the rest
  std::vector<StressRecord> records;
};

inline StressState& stress_state() {
  static StressState state;
  return state;
}

inline bool stress_enabled() { return stress_state().mode != StressMode::none; }

// A new check of a queue (queue.cuh): the state a process of its own starts with, keeping only
// what stress_setup made on the device (the stream, the buffers, the host-mapped flags).
inline void stress_begin_check() {
  StressState& s = stress_state();
  StressState fresh;
  fresh.stream = s.stream;
  fresh.buffer = s.buffer;
  fresh.buffer_bytes = s.buffer_bytes;
  fresh.moved = s.moved;
  fresh.stressor_ns = s.stressor_ns;
  fresh.stop = s.stop;
  fresh.stop_device = s.stop_device;
  fresh.started = s.started;
  fresh.started_device = s.started_device;
  fresh.sm_count = s.sm_count;
  fresh.l2_bytes = s.l2_bytes;
  fresh.stressor_smem = s.stressor_smem;
  s = fresh;
}

__device__ inline unsigned long long stress_clock_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Whether the stressor should stop: one thread per block reads the host-mapped flag (and the
// clock) and tells the others through shared memory, so that a poll is one read per block.
__device__ inline bool stress_should_stop(const volatile int* stop, volatile int* block_stop,
                                          unsigned long long begin, unsigned long long max_ns) {
  if (threadIdx.x == 0 && (*stop || stress_clock_ns() - begin > max_ns)) *block_stop = 1;
  return *block_stop != 0;
}

// Streams copies through `buffer` (its first half into its second and back) until stopped.
__global__ void stress_bandwidth_kernel(float4* buffer, size_t count, const volatile int* stop, int* started,
                                        unsigned long long* moved, unsigned long long* ran_ns,
                                        unsigned long long max_ns) {
  const unsigned long long begin = stress_clock_ns();
  __shared__ volatile int block_stop;
  if (threadIdx.x == 0) block_stop = 0, *reinterpret_cast<volatile int*>(started) = 1;
  __syncthreads();
  const size_t half = count / 2;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x, step = size_t(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (unsigned pass = 0;; ++pass) {
    const size_t from = pass % 2 ? half : 0, to = pass % 2 ? 0 : half;
    for (size_t i = first, n = 0; i < half; i += step, ++n) {
      float4 v = buffer[from + i];
      v.x += 1.0f;
      buffer[to + i] = v;
      local += 2 * sizeof(float4);
      if ((n & 63) == 63 && stress_should_stop(stop, &block_stop, begin, max_ns)) goto done;
    }
    if (stress_should_stop(stop, &block_stop, begin, max_ns)) break;
  }
done:
  atomicAdd(moved, local);
  if (blockIdx.x == 0 && threadIdx.x == 0) *ran_ns = stress_clock_ns() - begin;
}

// Reads and writes random 128-byte lines of `buffer` (twice the L2) until stopped.
__global__ void stress_l2_kernel(float4* buffer, size_t count, const volatile int* stop, int* started,
                                 unsigned long long* moved, unsigned long long* ran_ns, unsigned long long max_ns) {
  const unsigned long long begin = stress_clock_ns();
  __shared__ volatile int block_stop;
  if (threadIdx.x == 0) block_stop = 0, *reinterpret_cast<volatile int*>(started) = 1;
  __syncthreads();
  const size_t lines = count / 8;  // 8 float4 per 128-byte line
  unsigned long long state = (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) * 0x9E3779B97F4A7C15ull + 1;
  unsigned long long local = 0;
  for (unsigned n = 0;; ++n) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift
    float4* line = buffer + (state % lines) * 8;
    float4 v = line[threadIdx.x % 8];
    v.y += 1.0f;
    line[threadIdx.x % 8] = v;
    local += 2 * sizeof(float4);
    if ((n & 255) == 255 && stress_should_stop(stop, &block_stop, begin, max_ns)) break;
  }
  atomicAdd(moved, local);
  if (blockIdx.x == 0 && threadIdx.x == 0) *ran_ns = stress_clock_ns() - begin;
}

// Runs on the test stream once the kernel under test is done.
inline void CUDART_CB stress_stop_host(void* state) { *static_cast<StressState*>(state)->stop = 1; }

inline void stress_setup(StressState& s) {
  // The buffer's size follows the mode; a queue of checks (queue.cuh) may change modes between
  // checks, and a check gets the buffer a process of its own would.
  const auto buffer_bytes = [&] {
    return size_t(std::max(s.l2_bytes, 1 << 20)) * (s.mode == StressMode::bandwidth ? 4 : 2);
  };
  if (s.stream != nullptr) {
    if (s.buffer_bytes == buffer_bytes()) return;
    REPRO_CUDA_CHECK(cudaFree(s.buffer));
    s.buffer_bytes = buffer_bytes();
    REPRO_CUDA_CHECK(cudaMalloc(&s.buffer, s.buffer_bytes));
    REPRO_CUDA_CHECK(cudaMemset(s.buffer, 0, s.buffer_bytes));
    return;
  }
  const int device = current_device().ordinal;
  REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&s.sm_count, cudaDevAttrMultiProcessorCount, device));
  REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&s.l2_bytes, cudaDevAttrL2CacheSize, device));
  REPRO_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  s.buffer_bytes = buffer_bytes();
  REPRO_CUDA_CHECK(cudaMalloc(&s.buffer, s.buffer_bytes));
  REPRO_CUDA_CHECK(cudaMemset(s.buffer, 0, s.buffer_bytes));
  REPRO_CUDA_CHECK(cudaMalloc(&s.moved, sizeof(unsigned long long)));
  REPRO_CUDA_CHECK(cudaMalloc(&s.stressor_ns, sizeof(unsigned long long)));
  int* stop = nullptr;
  REPRO_CUDA_CHECK(cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped));
  s.stop = stop;
  REPRO_CUDA_CHECK(cudaHostGetDevicePointer(&s.stop_device, stop, 0));
  int* started = nullptr;
  REPRO_CUDA_CHECK(cudaHostAlloc(&started, sizeof(int), cudaHostAllocMapped));
  s.started = started;
  REPRO_CUDA_CHECK(cudaHostGetDevicePointer(&s.started_device, started, 0));
  // One block per SM: more than half of an SM's shared memory keeps a second block off it.
  int smem_per_sm = 0;
  REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  s.stressor_smem = std::min(size_t(smem_per_sm) / 2 + 1024, current_device().smem_optin_bytes);
  for (const void* kernel : {reinterpret_cast<const void*>(&stress_bandwidth_kernel),
                             reinterpret_cast<const void*>(&stress_l2_kernel)})
    REPRO_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(s.stressor_smem)));
}

// How many SMs a stressed launch gives the stressor, and the words for it.
inline int stress_sms(const StressState& s, std::string* where) {
  if (s.requested_sms > 0) {
    const int sms = std::min(s.requested_sms, s.sm_count - 1);
    *where = strprintf("on %d of the %d SMs (--stress-sms or check.stress_sms)", sms, s.sm_count);
    return std::max(sms, 1);
  }
  const int free_sms = s.sm_count - int(std::min<unsigned>(s.last_grid_blocks, unsigned(s.sm_count)));
  if (free_sms > 0) {
    *where = strprintf("on the %d SMs the grid (%u blocks) leaves free of %d", free_sms, s.last_grid_blocks,
                       s.sm_count);
    return free_sms;
  }
  const int shared = std::max(1, s.sm_count / 8);
  *where = strprintf("on %d of the %d SMs, shared with the kernel: its grid (%u blocks) leaves none free (give a "
                     "persistent kernel repro::persistent_sm_count() CTAs and --stress-sms N to free N)",
                     shared, s.sm_count, s.last_grid_blocks);
  return shared;
}

// Before a launch of the kernel under test: every second launch is stressed. A stressed one
// starts the stressor and waits (a second at most) until it runs, so that the kernel under test
// starts into the congestion.
inline void stress_collect();

inline void stress_before_launch(cudaStream_t test_stream) {
  StressState& s = stress_state();
  stress_collect();  // the previous stressed launch's record, now that it is over
  s.current_stressed = s.mode != StressMode::none && s.in_sequence % 2 == 1;
  ++s.launches, ++s.in_sequence;
  if (s.mode == StressMode::jitter) {
    // Every launch sets the points: 0 (pass) for the unjittered ones, after a jittered one.
    s.set_delays(test_stream, s.current_stressed ? s.jitter_ns : 0u, s.jitter_seed++);
    if (s.current_stressed) {
      StressRecord record;
      record.where = strprintf("at the kernel's repro::delay points, 0 to %u ns per warp and call", s.jitter_ns);
      s.records.push_back(record);
    }
    return;
  }
  if (!s.current_stressed) return;
  stress_setup(s);
  StressRecord record;
  s.current_sms = stress_sms(s, &record.where);
  record.sms = s.current_sms;
  s.records.push_back(record);
  REPRO_CUDA_CHECK(cudaMemsetAsync(s.moved, 0, sizeof(unsigned long long), s.stream));
  REPRO_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  *s.stop = 0;
  *s.started = 0;
  // l2: the L2 overwritten between launches too, on the test stream before the kernel.
  if (s.mode == StressMode::l2) REPRO_CUDA_CHECK(cudaMemsetAsync(s.buffer, 0x5A, s.buffer_bytes, test_stream));
  const unsigned long long max_ns = (unsigned long long)(s.timeout_seconds * 1e9);
  const size_t count = s.buffer_bytes / sizeof(float4);
  float4* buffer = static_cast<float4*>(s.buffer);
  if (s.mode == StressMode::bandwidth)
    stress_bandwidth_kernel<<<s.current_sms, 1024, s.stressor_smem, s.stream>>>(
        buffer, count, s.stop_device, s.started_device, s.moved, s.stressor_ns, max_ns);
  else
    stress_l2_kernel<<<s.current_sms, 1024, s.stressor_smem, s.stream>>>(buffer, count, s.stop_device,
                                                                          s.started_device, s.moved, s.stressor_ns,
                                                                          max_ns);
  REPRO_CUDA_CHECK(cudaGetLastError());
  const double begin = wall_seconds();
  while (*s.started == 0 && wall_seconds() - begin < 1.0) std::this_thread::yield();
}

// After the launch is queued: the test stream stops the stressor once the kernel is done.
inline void stress_after_launch(cudaStream_t test_stream) {
  StressState& s = stress_state();
  if (!s.current_stressed || s.mode == StressMode::jitter) return;
  REPRO_CUDA_CHECK(cudaLaunchHostFunc(test_stream, stress_stop_host, &s));
}

// After the kernel under test finished (the watchdog saw it): what the stressor did.
inline void stress_collect() {
  StressState& s = stress_state();
  if (!s.current_stressed || s.records.empty() || s.records.back().collected) return;
  s.records.back().collected = true;
  if (s.mode == StressMode::jitter) {
    s.read_delays(s.records.back().delay_calls, s.records.back().delay_slept_ns);
    return;
  }
  *s.stop = 1;  // the kernel under test is done by now (the watchdog saw it)
  REPRO_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  unsigned long long moved = 0, ran_ns = 0;
  REPRO_CUDA_CHECK(cudaMemcpy(&moved, s.moved, sizeof moved, cudaMemcpyDeviceToHost));
  REPRO_CUDA_CHECK(cudaMemcpy(&ran_ns, s.stressor_ns, sizeof ran_ns, cudaMemcpyDeviceToHost));
  s.records.back().bytes = double(moved);
  s.records.back().stressor_ms = double(ran_ns) * 1e-6;
}

// A run's (or a probe's) launches begin: the first is the unstressed baseline the others are
// compared with.
inline void stress_new_sequence() { stress_state().in_sequence = 0; }

// Whether the launch just made was stressed.
inline bool last_launch_stressed() { return stress_state().current_stressed; }

// The jitter line: per delay point that ran, its calls and the time its warps slept; or that no
// point ran, which makes the mode a no-op (a gate left false, a point on a path never taken).
inline void report_jitter(const StressState& s, const unsigned long long* calls, const unsigned long long* slept) {
  std::string points;
  for (int p = 0; p < kDelayPointCount; ++p) {
    if (calls[p] == 0) continue;
    points += strprintf("%spoint %d ran %llu times, slept %.2f ms in all (mean %.0f ns)", points.empty() ? "" : "; ",
                        p, calls[p], double(slept[p]) * 1e-6, double(slept[p]) / double(calls[p]));
  }
  std::printf("stress  jitter %s: %zu of %lld launches jittered; %s\n", s.records.front().where.c_str(),
              s.records.size(), s.launches,
              points.empty() ? "NO delay point ran: the kernel includes repro_trace.cuh but reached no "
                               "repro::delay<true>(point), so nothing was perturbed (a gate left false, or a "
                               "point on a path no warp takes)"
                             : points.c_str());
}

// The report's `stress` lines and member: the mode, how many launches it stressed, and what
// they had.
inline void report_stress() {
  stress_collect();
  const StressState& s = stress_state();
  if (s.mode == StressMode::none) return;
  JsonWriter w;
  w.begin_object();
  w.field("mode", std::string(stress_mode_name(s.mode)));
  w.field("launches", s.launches);
  w.field("stressed", int64_t(s.records.size()));
  if (s.mode == StressMode::jitter) w.field("jitter_ns", int64_t(s.jitter_ns));
  w.key("records").begin_array();
  double bytes = 0, ms = 0;
  unsigned long long calls[kDelayPointCount] = {}, slept[kDelayPointCount] = {};
  for (const StressRecord& r : s.records) {
    w.begin_object();
    if (s.mode == StressMode::jitter) {
      unsigned long long launch_calls = 0, launch_slept = 0;
      for (int p = 0; p < kDelayPointCount; ++p) {
        calls[p] += r.delay_calls[p], slept[p] += r.delay_slept_ns[p];
        launch_calls += r.delay_calls[p], launch_slept += r.delay_slept_ns[p];
      }
      w.field("delay_calls", int64_t(launch_calls));
      w.field("slept_ns", int64_t(launch_slept));
    } else {
      w.field("sms", r.sms);
      w.field("bytes", r.bytes);
      w.field("stressor_ms", r.stressor_ms);
    }
    w.end_object();
    bytes += r.bytes, ms += r.stressor_ms;
  }
  w.end_array();
  w.end_object();
  report_set("stress", w.str());
  if (s.records.empty()) {
    std::printf("stress  %s: no launch was stressed (every second launch is: --repeat 2 or more)\n",
                stress_mode_name(s.mode));
    return;
  }
  if (s.mode == StressMode::jitter) {
    report_jitter(s, calls, slept);
    return;
  }
  const StressRecord& r = s.records.front();
  std::string each;
  for (size_t i = 0; i < s.records.size() && i < 8; ++i)
    each += strprintf("%s%.2f", i ? ", " : "", s.records[i].stressor_ms);
  std::printf("stress  %s %s: %zu of %lld launches stressed; the stressor moved %.2f GB in %.2f ms (%.0f GB/s; ms per "
              "stressed launch: %s%s)\n",
              stress_mode_name(s.mode), r.where.c_str(), s.records.size(), s.launches, bytes * 1e-9, ms,
              ms > 0 ? bytes / (ms * 1e-3) * 1e-9 : 0.0, each.c_str(), s.records.size() > 8 ? ", ..." : "");
}

// Run-to-run differences against the first (unstressed) launch, split by whether the later
// launch was stressed: a race that shows only under stress is what the mode is for.
struct StressSplit {
  int64_t unstressed_runs = 0, stressed_runs = 0;
  int64_t unstressed = 0, stressed = 0;  // the most outputs any such run differed in
  void add(bool under_stress, int64_t differences) {
    (under_stress ? stressed_runs : unstressed_runs) += 1;
    int64_t& most = under_stress ? stressed : unstressed;
    most = std::max(most, differences);
  }
  // "only under stress", "also without stress", "in no run": for the report.
  std::string verdict() const {
    if (stressed == 0 && unstressed == 0) return "no launch differed from the first, stressed or not";
    if (unstressed == 0)
      return strprintf("outputs differed only under stress: up to %lld in the %lld stressed launches, none in the %lld "
                       "unstressed ones",
                       (long long)stressed, (long long)stressed_runs, (long long)unstressed_runs);
    return strprintf("outputs differed without stress too: up to %lld in the %lld unstressed launches, %lld in the %lld "
                     "stressed ones",
                     (long long)unstressed, (long long)unstressed_runs, (long long)stressed, (long long)stressed_runs);
  }
  void report() const {
    if (!stress_enabled() || stressed_runs == 0) return;
    std::printf("stress  %s\n", verdict().c_str());
    JsonWriter w;
    w.begin_object();
    w.field("stressed_runs", stressed_runs);
    w.field("unstressed_runs", unstressed_runs);
    w.field("stressed_differences", stressed);
    w.field("unstressed_differences", unstressed);
    w.field("only_under_stress", stressed > 0 && unstressed == 0);
    w.end_object();
    report_set("stress_differences", w.str());
  }
};

}  // namespace repro
