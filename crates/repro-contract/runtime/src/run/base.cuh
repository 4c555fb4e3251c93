// ---------------------------------------------------------------------------------------------
// repro runtime: base
//
// The runtime's own headers, one concern each, are compiled into the static library by
// runtime.cu, with the runtime's fixed flags (never the production ones). Each header may use
// what the headers it includes define. Everything lives in namespace repro; what harness.cu
// sees is include/repro/harness.h.
// ---------------------------------------------------------------------------------------------
#pragma once
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <dirent.h>
#include <sys/stat.h>
#include <utime.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <repro/harness.h>

// The input generators must give the same bits as `repro` itself (the Rust mirror in
// src/inputs). -ffast-math lets the host compiler reorder and fuse their arithmetic.
#if defined(__FAST_MATH__)
#warning "repro: host code built with -ffast-math; generated inputs may differ from repro's own"
#endif

// Host hot loops (reference GEMM) are compiled at -O3 even when the production flags give the
// host compiler less: a 1024^3 fp64 reference must take about a second, not ten.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDA_ARCH__)
#define REPRO_HOST_HOT __attribute__((optimize("O3")))
#else
#define REPRO_HOST_HOT
#endif

// REPRO_HD (harness.h) marks functions the device runs too: the input generators and the dtype
// conversions, so that inputs generated on the GPU are the host's bit for bit (device_inputs.cuh),
// and the element test, so that a comparison can run where the reference is (device_compare.cuh).
// Such functions use no std::max/std::min (constexpr host functions, callable on the device only
// under --expt-relaxed-constexpr).

namespace repro {

// Prints `message` and the disposition, writes the JSON report if one was asked for, and exits
// without running destructors (they could block on a wedged device). Defined in device.cuh.
[[noreturn]] inline void fatal(int exit_code, const char* cls, const std::string& message);

// printf into a std::string.
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(&text[0], text.size() + 1, format, args);
  va_end(args);
  return text;
}

// A number for people: integers without decimals, everything else with 6 significant digits.
inline std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return strprintf("%.0f", v);
  return strprintf("%.6g", v);
}

inline std::string join_path(const std::string& dir, const std::string& file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

// mkdir -p. Empty when every folder exists or was made; else what failed, for the caller to say
// (--dump and --emit-inputs stop on it, the reference cache goes without).
inline std::string make_directories(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = slash == std::string::npos ? dir : dir.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return strprintf("cannot create %s: %s", prefix.c_str(), std::strerror(errno));
    if (slash == std::string::npos) return "";
  }
}

// Where a usage error was found when it was not on the command line: "queue.txt line 3: " while
// a queue's lines are read (queue.cuh); empty otherwise.
inline std::string g_usage_context;

// What must happen before the process ends early (a fatal error, a usage error in a queue's
// line): a queued check whose report waits for its host cross-check is judged and printed, and
// the output held behind it released (deferred_check.cuh). Null when nothing waits.
inline void (*g_before_exit)() = nullptr;

inline void before_exit() {
  if (void (*hook)() = g_before_exit) {
    g_before_exit = nullptr;  // once: what it calls may end the process itself
    hook();
  }
}

// A moment the host would otherwise wait for the device (a check's own reference GEMM under way):
// work held back for such a moment is done now (deferred_check.cuh). Null when there is none.
inline void (*g_host_idle)() = nullptr;

inline void host_idle() {
  if (void (*hook)() = g_host_idle) hook();
}

// Ends the process at once, with what before_exit() settles first.
[[noreturn]] inline void exit_now(int code) {
  before_exit();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

// A usage or spec error found by the harness: exit 2.
[[noreturn]] inline void usage_error(const std::string& message) {
  std::fprintf(stderr, "error: %s%s\n(run with --help for the options)\n", g_usage_context.c_str(), message.c_str());
  exit_now(kExitUsage);
}

// The host threads parallel_for runs its chunks on, made once and parked between calls: a
// thread made per call cost ~40 us each, 0.3-0.7 ms a call for 16 cores, and a check makes
// several calls (the cross-check's decodes and sums, the comparison's chunks); at 1024^3 those
// were most of the host's share of a check (docs/performance.md, the per-check floor). The pool
// is never destroyed (exit leaves its parked threads), and takes one call at a time: a call made
// while another runs (from another thread, or from inside a chunk) makes threads of its own.
class HostWorkers {
 public:
  static HostWorkers& instance() {
    static HostWorkers* workers = new HostWorkers();
    return *workers;
  }

  // Wakes the parked threads to spin for work that comes within kSpin: a caller about to wait
  // for data it will then split over the threads (the cross-check's copy back) calls it first,
  // so that the threads' waking overlaps the wait.
  void alert() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++alerts_;
    }
    wake_.notify_all();
  }

  // Runs chunk(t) for every t in [0, chunks) on up to `chunks` threads, this one among them;
  // false (nothing run) when the pool is taken.
  bool run(int64_t chunks, void (*call)(const void*, int64_t), const void* context) {
    std::unique_lock<std::mutex> taken(submit_, std::try_to_lock);
    if (!taken.owns_lock()) return false;
    {
      // A worker that woke late for the last call may still be reading its counter.
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return working_ == 0; });
      while (int64_t(threads_.size()) < chunks - 1) threads_.emplace_back([this] { serve(); });
      call_ = call, context_ = context, chunks_ = chunks, unfinished_ = chunks;
      remaining_.store(chunks);
      next_.store(0);
      ++generation_;
    }
    published_.store(generation_, std::memory_order_release);
    wake_.notify_all();
    work();
    spin_while([this] { return remaining_.load(std::memory_order_acquire) > 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return unfinished_ == 0 && working_ == 0; });
    return true;
  }

 private:
  HostWorkers() = default;

  // Spins, yielding, while `busy()` holds, for at most kSpin: a check calls parallel_for several
  // times in a row (the cross-check's decoding, then its sums), and a thread parked on a
  // condition variable took far longer to wake than the work of a chunk (the cross-check's
  // sample at 1024^3, about 2 ms of one core's work, took 0.8 ms on 16 cores in run 98).
  static constexpr std::chrono::microseconds kSpin{200};
  template <typename Busy>
  static void spin_while(Busy busy) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (busy() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }

  // Takes chunks until none is left; the last to finish one says so.
  void work() {
    for (int64_t t = next_.fetch_add(1); t < chunks_; t = next_.fetch_add(1)) {
      call_(context_, t);
      remaining_.fetch_sub(1, std::memory_order_acq_rel);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--unfinished_ == 0) done_.notify_one();
    }
  }

  // A worker counts itself in before it takes an index and out after: a call ends, and the
  // next begins, only when no worker is inside work(), so none takes an index of one call
  // from another's counter.
  void serve() {
    uint64_t seen = 0, alerts_seen = 0;
    for (;;) {
      spin_while([&] { return published_.load(std::memory_order_acquire) == seen; });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen || alerts_ != alerts_seen; });
        alerts_seen = alerts_;
        if (generation_ == seen) continue;  // woken ahead of work (alert): spin for it
        seen = generation_;
        ++working_;
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--working_ == 0 && unfinished_ == 0) done_.notify_one();
    }
  }

  std::mutex submit_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  void (*call_)(const void*, int64_t) = nullptr;
  const void* context_ = nullptr;
  int64_t chunks_ = 0, unfinished_ = 0, working_ = 0;  // chunks_ written only between calls
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0, alerts_ = 0;
  // What spinning threads read without the mutex: the generation published, chunks unfinished.
  std::atomic<uint64_t> published_{0};
  std::atomic<int64_t> remaining_{0};
};

// Calls body(begin, end) on contiguous chunks of [0, count), one chunk per host core, and
// waits for all of them. Work below `min_chunk` items per thread stays on fewer threads.
template <typename Body>
void parallel_for(int64_t count, int64_t min_chunk, Body body) {
  if (count <= 0) return;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t by_size = (count + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1);
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(cores, by_size));
  if (threads == 1) {
    body(int64_t(0), count);
    return;
  }
  const auto chunk = [&](int64_t t) { body(count * t / threads, count * (t + 1) / threads); };
  using Chunk = decltype(chunk);
  const auto call = [](const void* context, int64_t t) { (*static_cast<const Chunk*>(context))(t); };
  if (HostWorkers::instance().run(threads, call, &chunk)) return;
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int64_t t = 0; t < threads; ++t) workers.emplace_back([&chunk, t] { chunk(t); });
  for (std::thread& worker : workers) worker.join();
}

}  // namespace repro
