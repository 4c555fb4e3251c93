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

// A usage or spec error found by the harness: exit 2.
[[noreturn]] inline void usage_error(const std::string& message) {
  std::fprintf(stderr, "error: %s%s\n(run with --help for the options)\n", g_usage_context.c_str(), message.c_str());
  std::fflush(stderr);
  std::_Exit(kExitUsage);
}

// Calls body(begin, end) on contiguous chunks of [0, count), one chunk per host core, and
// waits for all of them. Work below `min_chunk` items per thread stays on fewer threads.
template <typename Body>
void parallel_for(int64_t count, int64_t min_chunk, Body body) {
  if (count <= 0) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t by_size = (count + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1);
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(cores, by_size));
  if (threads == 1) {
    body(int64_t(0), count);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = count * t / threads;
    const int64_t end = count * (t + 1) / threads;
    workers.emplace_back([=] { body(begin, end); });
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace repro
