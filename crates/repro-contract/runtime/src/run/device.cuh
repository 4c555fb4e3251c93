// ---------------------------------------------------------------------------------------------
// repro harness runtime: the device, the watchdog, and how the process ends
// ---------------------------------------------------------------------------------------------
#pragma once

#include "report.cuh"

namespace repro {

inline std::string g_argv0 = "./harness";
inline std::string g_command_line = "./harness";  // the whole command, shell-quoted, for hints

inline std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,+@%", c) != nullptr;
  });
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline void set_command_line(int argc, char** argv) {
  if (argc < 1) return;
  g_argv0 = argv[0];
  g_command_line = shell_quote(argv[0]);
  for (int i = 1; i < argc; ++i) g_command_line += " " + shell_quote(argv[i]);
}

// Seconds on a monotonic clock, for durations.
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prints the final line, "Disposition: Passed", "Disposition: Failed (<cls>)", or, when there was
// no device to run on, "Disposition: Not run (no_device)" (nothing about the kernel is known, so
// it must not read as a failure); writes the JSON report if --json asked for one, and returns
// exit_code: main ends with `return conclude(...)`.
inline int conclude(int exit_code, const std::string& cls, const std::string& message) {
  const char* disposition = exit_code == kExitPassed ? "passed" : exit_code == kExitNoDevice ? "not run" : "failed";
  FinishedReport report = finished_report(exit_code, disposition, cls, message);
  report.disposition_line = exit_code == kExitPassed     ? std::string("Disposition: Passed")
                            : exit_code == kExitNoDevice ? "Disposition: Not run (" + cls + ")"
                                                         : "Disposition: Failed (" + cls + ")";
  // A queued check whose reference is judged while the next check runs: both wait for that.
  if (g_report_held != nullptr) {
    *g_report_held = std::move(report);
    return exit_code;
  }
  std::printf("%s\n", report.disposition_line.c_str());
  std::fflush(stdout);
  if (g_reports_waiting != nullptr) g_reports_waiting->push_back(std::move(report));
  else emit_json_report(report);
  return exit_code;
}

// The end of a --bench run: the kernel was timed, not checked, so the disposition says neither
// passed nor failed.
inline int conclude_timed() {
  std::printf("Disposition: Timed (not checked)\n");
  std::fflush(stdout);
  write_json_report(kExitPassed, "timed", "timed", "");
  return kExitPassed;
}

// For a run that cannot go on (fault, hang, CUDA error): the message, the disposition, the
// report, and an exit that runs no destructors or atexit handlers, since those would
// synchronize with a device that may never answer.
// A queued check held back until its cross-check is judged is settled first, as its own
// (before_exit, base.cuh), and this check's report then follows it, never held.
[[noreturn]] inline void fatal(int exit_code, const char* cls, const std::string& message) {
  before_exit();
  g_report_held = nullptr;
  std::printf("%s\n", message.c_str());
  conclude(exit_code, cls, message);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(exit_code);
}

struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int runtime_version = 0, driver_version = 0;  // as CUDA encodes them: 13000 is 13.0
  int sm_count = 0;
  size_t smem_optin_bytes = 0;  // the most dynamic shared memory a block can opt into
  int regs_per_block = 0;       // registers one block may use in total
  size_t global_mem_bytes = 0;
};

// 13000 -> "13.0"
inline std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "NVIDIA H200 sm_90 | runtime 13.0 driver 13.0"
inline std::string device_summary(const DeviceInfo& d) {
  return strprintf("%s sm_%d%d | runtime %s driver %s", d.name.c_str(), d.cc_major, d.cc_minor,
                   cuda_version_text(d.runtime_version).c_str(), cuda_version_text(d.driver_version).c_str());
}

inline std::string device_json(const DeviceInfo& d) {
  JsonWriter w;
  w.begin_object();
  w.field("ordinal", d.ordinal);
  w.field("name", d.name);
  w.field("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor));
  w.field("runtime", cuda_version_text(d.runtime_version));
  w.field("driver", cuda_version_text(d.driver_version));
  w.field("sm_count", d.sm_count);
  w.field("smem_optin_bytes", d.smem_optin_bytes);
  w.field("global_mem_bytes", d.global_mem_bytes);
  w.end_object();
  return w.str();
}

// Finds the current device and checks that this build's code can run on it. The build targets
// sm_<built_cc_major><built_cc_minor>, with the "a" suffix when arch_specific: arch-specific
// code (wgmma, setmaxnreg) runs only on exactly that compute capability; plain SASS runs on the
// same major version with an equal or higher minor. Prints why and returns kExitNoDevice when
// there is no usable device; returns 0 with `info` filled otherwise. The runtime and driver
// versions are filled in either way.
inline int require_device(DeviceInfo* info, int built_cc_major, int built_cc_minor, bool arch_specific,
                          bool ptx = false) {
  // These two need no device; they fail only on a null pointer.
  (void)cudaRuntimeGetVersion(&info->runtime_version);
  (void)cudaDriverGetVersion(&info->driver_version);  // 0 when no driver is installed
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    std::printf("no CUDA device available: %s (%s); the harness was built and can run elsewhere\n",
                cudaGetErrorName(status), cudaGetErrorString(status));
    return kExitNoDevice;
  }
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::string why = visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : "";
    std::printf("no CUDA device available: no device is visible%s; the harness was built and can run elsewhere\n",
                why.c_str());
    return kExitNoDevice;
  }
  REPRO_CUDA_CHECK(cudaGetDevice(&info->ordinal));
  cudaDeviceProp prop;
  REPRO_CUDA_CHECK(cudaGetDeviceProperties(&prop, info->ordinal));
  info->name = prop.name;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->smem_optin_bytes = prop.sharedMemPerBlockOptin;
  info->regs_per_block = prop.regsPerBlock;
  info->global_mem_bytes = prop.totalGlobalMem;

  // PTX is JIT-compiled by the driver for the device at hand: any later capability runs it.
  const bool runs = ptx              ? prop.major * 10 + prop.minor >= built_cc_major * 10 + built_cc_minor
                    : arch_specific ? (prop.major == built_cc_major && prop.minor == built_cc_minor)
                                    : (prop.major == built_cc_major && prop.minor >= built_cc_minor);
  if (!runs) {
    const std::string built = strprintf("sm_%d%d%s", built_cc_major, built_cc_minor, arch_specific ? "a" : "");
    const std::string where =
        arch_specific ? strprintf("arch-specific %s code runs only on compute capability %d.%d", built.c_str(),
                                  built_cc_major, built_cc_minor)
                      : strprintf("%s code runs on compute capability %d.%d to %d.x", built.c_str(), built_cc_major,
                                  built_cc_minor, built_cc_major);
    std::printf("built for %s but device %d (%s) is sm_%d%d: %s; rebuild with ARCH=sm_%d%d%s or run it on such a GPU\n",
                built.c_str(), info->ordinal, prop.name, prop.major, prop.minor, where.c_str(), prop.major, prop.minor,
                arch_specific ? "a" : "");
    return kExitNoDevice;
  }
  return 0;
}

// Waits for `done`, an event the launch recorded on its stream right behind the kernel, with a
// watchdog: polling, not cudaEventSynchronize, so that a kernel that never finishes is reported
// as a hang after timeout_s instead of blocking forever. A hang exits with kExitHang, an error
// from the device (illegal address, trap, ...) with kExitCudaError. kernel_label and launch_text
// ("grid (3,4,1) block (256,1,1) ...") go into the message.
inline void wait_for_kernel(cudaEvent_t done, double timeout_s, const std::string& kernel_label,
                            const std::string& launch_text) {
  // A queued check held back for its cross-check is judged before this one's kernel is waited
  // for: its result must not wait on a kernel that may hang (deferred_check.cuh).
  host_idle();
  const auto device_fault = [&](cudaError_t status) {
    fatal(kExitCudaError, "fault",
          strprintf("device fault: %s (%s) in kernel %s %s. Next: find the faulting access with compute-sanitizer %s",
                    cudaGetErrorName(status), cudaGetErrorString(status), kernel_label.c_str(), launch_text.c_str(),
                    g_command_line.c_str()));
  };
  cudaError_t status;
  const double start = wall_seconds();
  // Ask without sleeping for the first 2 ms, then nap, backing off to spare the CPU. (A first
  // nap of 200 us slept ~0.25 ms past kernels of tens of microseconds: a probe suite's 50
  // launches at small sizes spent a fifth of their time asleep.)
  constexpr double kSpinSeconds = 0.002;
  int nap_us = 100;
  while ((status = cudaEventQuery(done)) != cudaSuccess) {
    if (status != cudaErrorNotReady) device_fault(status);
    if (wall_seconds() - start > timeout_s) {
      fatal(kExitHang, "hang",
            strprintf("hang: kernel %s did not finish within %s s (%s). The process is exiting; the GPU context is "
                      "torn down with it. Next: see where the warps wait, in cuda-gdb (build with -lineinfo, or "
                      "-G for variables):\n  cuda-gdb -ex run --args %s\n  then Ctrl-C once it hangs, and: "
                      "info cuda kernels; info cuda warps; thread apply all bt",
                      kernel_label.c_str(), format_value(timeout_s).c_str(), launch_text.c_str(),
                      g_command_line.c_str()));
    }
    if (wall_seconds() - start < kSpinSeconds) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
    nap_us = std::min(nap_us * 2, 10000);
  }
}

// ------------------------------------------------------------ the runtime's own device memory
//
// Scratch of the runtime's passes (index lists, gathers, partial sums, packed operands, the
// reference's values) is stream-ordered on the default stream, from the device's memory pool:
// cudaFree waits for the whole device and cudaMalloc costs tens of microseconds, and a check
// made about a dozen such pairs, a probe suite hundreds (docs/performance.md, the per-check
// floor). The pool keeps up to kScratchKeptBytes of what was freed for the next request and
// gives the rest back at the next synchronization; an allocation that fails first empties the
// pool and tries again (trim_scratch_pool), so scratch never keeps memory a tensor needs.
// Everything that uses scratch runs on the default stream, which orders it after the pool's
// allocation and before its free.
constexpr uint64_t kScratchKeptBytes = uint64_t(256) << 20;

inline bool scratch_pool_ready() {
  static const bool ready = [] {
    int device = 0, supported = 0;
    cudaMemPool_t pool = nullptr;
    uint64_t kept = kScratchKeptBytes;
    const bool usable = cudaGetDevice(&device) == cudaSuccess &&
                        cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess &&
                        supported != 0 && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
                        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &kept) == cudaSuccess;
    cudaGetLastError();  // a device without pools is no error: scratch is then cudaMalloc's
    return usable;
  }();
  return ready;
}

// Gives back everything the pool keeps, once the device is done with it.
inline void trim_scratch_pool() {
  if (!scratch_pool_ready()) return;
  int device = 0;
  cudaMemPool_t pool = nullptr;
  cudaDeviceSynchronize();
  if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
    cudaMemPoolTrimTo(pool, 0);
  cudaGetLastError();
}

// `bytes` (at least one) of scratch, or null, the error cleared, when the device has not that much.
inline void* try_take_scratch(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  void* pointer = nullptr;
  if (!scratch_pool_ready()) {
    if (cudaMalloc(&pointer, bytes) == cudaSuccess) return pointer;
    cudaGetLastError();
    return nullptr;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (cudaMallocAsync(&pointer, bytes, 0) == cudaSuccess) return pointer;
    cudaGetLastError();
    if (attempt == 0) trim_scratch_pool();
  }
  return nullptr;
}

template <typename T = void>
inline T* take_scratch(size_t bytes) {
  void* pointer = try_take_scratch(bytes);
  if (pointer == nullptr) REPRO_CUDA_CHECK(cudaErrorMemoryAllocation);
  return static_cast<T*>(pointer);
}

// Scratch back to the pool once the default stream's work before this call is done; null is
// ignored.
inline void give_back_scratch(const void* pointer) {
  if (pointer == nullptr) return;
  if (scratch_pool_ready()) cudaFreeAsync(const_cast<void*>(pointer), 0);
  else cudaFree(const_cast<void*>(pointer));
}

// ------------------------------------------------------------------ page-locked host blocks
//
// What the device copies to the host while the host goes on: a copy into pageable memory
// returns only when it is done, so the host's cross-check sample (reference_cross_check.cuh) is
// copied into page-locked blocks instead. cudaHostAlloc maps and locks its pages (about a
// millisecond a MiB), so blocks given back are kept for the next check of a queue, up to
// kPinnedKeptBytes in all; a block is reused for a request of at most its size and at least half.
constexpr size_t kPinnedKeptBytes = size_t(64) << 20;

class PinnedBlocks {
 public:
  static PinnedBlocks& instance() {
    static PinnedBlocks* blocks = new PinnedBlocks();  // never destroyed: blocks outlive exit's order
    return *blocks;
  }

  // `bytes` (at least one) of page-locked host memory, or of plain memory where the host will
  // not lock that much (copies into it then wait, as before page-locked blocks), or null when
  // it has neither.
  unsigned char* take(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < kept_.size(); ++i)
        if (kept_[i].bytes >= bytes && kept_[i].bytes / 2 <= bytes) {
          const Block block = kept_[i];
          kept_.erase(kept_.begin() + int64_t(i));
          kept_bytes_ -= block.bytes;
          in_use_.emplace_back(block);
          return block.data;
        }
    }
    void* data = nullptr;
    bool locked = true;
    if (cudaHostAlloc(&data, bytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();  // no sticky error: the context is fine
      data = std::malloc(bytes);
      locked = false;
      if (data == nullptr) return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_.push_back(Block{static_cast<unsigned char*>(data), bytes, locked});
    return static_cast<unsigned char*>(data);
  }

  // A block back, once nothing copies into or out of it any more; null is ignored.
  void give_back(unsigned char* data) {
    if (data == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < in_use_.size(); ++i) {
      if (in_use_[i].data != data) continue;
      const Block block = in_use_[i];
      in_use_.erase(in_use_.begin() + int64_t(i));
      if (block.locked && kept_bytes_ + block.bytes <= kPinnedKeptBytes) {
        kept_.push_back(block);
        kept_bytes_ += block.bytes;
      } else if (block.locked) {
        cudaFreeHost(block.data);
      } else {
        std::free(block.data);
      }
      return;
    }
  }

 private:
  struct Block {
    unsigned char* data;
    size_t bytes;
    bool locked;  // cudaHostAlloc's, else malloc's
  };
  PinnedBlocks() = default;
  std::mutex mutex_;
  std::vector<Block> in_use_, kept_;  // the blocks in use, and those kept for reuse
  size_t kept_bytes_ = 0;
};

}  // namespace repro
