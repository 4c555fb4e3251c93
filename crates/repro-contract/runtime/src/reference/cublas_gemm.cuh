// ---------------------------------------------------------------------------------------------
// repro harness runtime: cuBLAS's DGEMM for the fp64 device reference, opened at run time
//
// The device reference packs its operands into fp64 copies (device_reference.cuh) and multiplies
// them; cuBLAS's DGEMM does that multiplication 1.9-4x faster than repro's own fp64 tensor-core
// kernel on an H100 (docs/performance.md, "The per-check floor"). The harness links the CUDA
// runtime alone (a bundle builds with nvcc and nothing else), so cuBLAS is opened with dlopen
// where it is installed, its four entry points declared here; where it is not, or
// REPRO_CUBLAS=off, repro's own kernel computes the GEMM as before. What computed a reference is
// in the report's `reference_engine`.
//
// Opening it costs more than it saves one check: on an H100 (run 102) dlopen took 0.41 s,
// cublasCreate 0.03 s and the first DGEMM 0.10 s (its kernels loaded), where the GEMM of a
// 4096^3 check takes 2.2 ms by cuBLAS against 3.9 by repro's kernel. So a process of one check
// keeps repro's kernel, and a queue of checks (run/queue.cuh: campaigns, sweeps, bisects) takes
// cuBLAS for every GEMM from kCublasMinimumProducts on, the library opened on a thread of its
// own from the first check that needs it (start_loading_cublas, before its context and inputs).
// A queued check's reference may therefore differ from the same check's alone in the last bits
// (another summation order, both within the fp64 bound of docs/tolerances.md): its verdict and
// outputs are the same, `reference_engine` says which ran, and the error figures measured
// against the reference may differ past their 15th digit.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <dlfcn.h>

#include <future>

#include "device_inputs.cuh"

namespace repro {

// The GEMMs, counted in multiply-adds (L * M * N * K), from which cuBLAS computes a queued
// check's reference: 1024^3. Below it the GEMM takes under 0.3 ms either way.
constexpr double kCublasMinimumProducts = double(int64_t(1) << 30);

// cuBLAS's v2 entry points, as its header declares them: a handle is an opaque pointer, an
// operation an int (CUBLAS_OP_N 0, CUBLAS_OP_T 1), a status an int (CUBLAS_STATUS_SUCCESS 0).
struct CublasEntryPoints {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;                // cublasCreate_v2
  int (*version)(Handle, int*) = nullptr;          // cublasGetVersion_v2
  int (*set_stream)(Handle, cudaStream_t) = nullptr;  // cublasSetStream_v2
  int (*gemm_strided_batched)(Handle, int, int, int, int, int, const double*, const double*, int, long long,
                              const double*, int, long long, const double*, double*, int, long long,
                              int) = nullptr;  // cublasDgemmStridedBatched
};

// The library once opened: its entry points and handle, or why it is not there.
struct CublasLibrary {
  CublasEntryPoints entry;
  CublasEntryPoints::Handle handle = nullptr;
  std::string name;     // "cuBLAS 13.0.2 (libcublas.so.13)"
  std::string why_not;  // empty when usable
};

// REPRO_CUBLAS: unset or empty, cuBLAS in a queue from kCublasMinimumProducts on; `off`, never;
// `all`, for every GEMM, a check alone too (what tests/cpp/device_reference_check.cu checks it
// with); anything else, the library file to open, as unset.
inline std::string cublas_setting() {
  const char* setting = std::getenv("REPRO_CUBLAS");
  return setting != nullptr ? setting : "";
}

// Opens cuBLAS: the file REPRO_CUBLAS names, else the soname of this CUDA major version and then
// the unversioned name, on the loader's path.
inline CublasLibrary open_cublas() {
  CublasLibrary library;
  const std::string setting = cublas_setting();
  if (setting == "off") {
    library.why_not = "REPRO_CUBLAS=off";
    return library;
  }
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  std::vector<std::string> names;
  if (!setting.empty() && setting != "all") names.push_back(setting);
  else names = {strprintf("libcublas.so.%d", runtime_version / 1000), "libcublas.so"};
  void* opened = nullptr;
  std::string file;
  for (const std::string& name : names)
    if ((opened = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      file = name;
      break;
    }
  if (opened == nullptr) {
    const char* error = dlerror();
    library.why_not = strprintf("cuBLAS could not be opened (%s)", error != nullptr ? error : names.back().c_str());
    return library;
  }
  CublasEntryPoints& e = library.entry;
  e.create = reinterpret_cast<decltype(e.create)>(dlsym(opened, "cublasCreate_v2"));
  e.version = reinterpret_cast<decltype(e.version)>(dlsym(opened, "cublasGetVersion_v2"));
  e.set_stream = reinterpret_cast<decltype(e.set_stream)>(dlsym(opened, "cublasSetStream_v2"));
  e.gemm_strided_batched = reinterpret_cast<decltype(e.gemm_strided_batched)>(dlsym(opened, "cublasDgemmStridedBatched"));
  if (e.create == nullptr || e.version == nullptr || e.set_stream == nullptr || e.gemm_strided_batched == nullptr) {
    library.why_not = strprintf("%s lacks cublasCreate_v2, cublasSetStream_v2 or cublasDgemmStridedBatched", file.c_str());
    return library;
  }
  if (const int status = e.create(&library.handle); status != 0) {
    library.why_not = strprintf("cublasCreate_v2 of %s returned status %d", file.c_str(), status);
    library.handle = nullptr;
    return library;
  }
  // Its stream, once: the default one, where every reference GEMM runs (set for each GEMM, it
  // cost each check's reference the call and the reset of the handle's workspace it brings).
  e.set_stream(library.handle, 0);
  int version = 0;
  e.version(library.handle, &version);
  library.name = strprintf("cuBLAS %d.%d.%d (%s)", version / 10000, version / 100 % 100, version % 100, file.c_str());
  return library;
}

// The process's one load of cuBLAS: started at most once, waited for by every reference that
// uses it. The library stays open until the process ends.
class CublasLoader {
 public:
  static CublasLoader& instance() {
    static CublasLoader* loader = new CublasLoader();  // never destroyed: a fatal exit may still be loading
    return *loader;
  }
  void start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!loaded_.valid()) loaded_ = std::async(std::launch::async, open_cublas).share();
  }
  // The library, loaded (waiting for it if need be).
  const CublasLibrary& wait() {
    start();
    std::shared_future<CublasLibrary> loaded;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      loaded = loaded_;
    }
    return loaded.get();
  }

 private:
  CublasLoader() = default;
  std::mutex mutex_;
  std::shared_future<CublasLibrary> loaded_;
};

// Whether a reference GEMM of this size takes cuBLAS when it is there: in a queue of checks from
// kCublasMinimumProducts on, or for every GEMM with REPRO_CUBLAS=all.
inline bool cublas_computes(int64_t L, int64_t M, int64_t N, int64_t K) {
  static const std::string setting = cublas_setting();
  if (setting == "off") return false;
  if (setting == "all") return true;
  return g_queue_check >= 0 && double(L) * double(M) * double(N) * double(K) >= kCublasMinimumProducts;
}

// Starts opening cuBLAS on a thread of its own when a GEMM of this size will need it.
inline void start_loading_cublas(int64_t L, int64_t M, int64_t N, int64_t K) {
  if (cublas_computes(L, M, N, K)) CublasLoader::instance().start();
}

// out[l][m][n] = alpha * sum_k a[l][k][m] * b[l][k][n] from packed operands (A as [L][Kp][Mp],
// B as [L][Kp][Np], K-major: device_reference.cuh), on the default stream, by cuBLAS; false (and
// nothing launched, `engine` saying why) when cuBLAS is not there or the sizes do not fit its
// 32-bit dimensions; K is at least 1 (with K 0 repro's own kernel writes the zeros). In
// cuBLAS's column-major terms the row-major [M][N] output is the N x M matrix B^T A, with B's
// copy an N x K matrix (leading dimension Np) and A's an M x K one (Mp) taken transposed.
inline bool cublas_reference_gemm(const double* a, int64_t a_batch_stride, const double* b, int64_t b_batch_stride,
                                  double* out, double alpha, int64_t L, int64_t M, int64_t N, int64_t K, int64_t Mp,
                                  int64_t Np, std::string* engine) {
  constexpr int64_t kLimit = INT32_MAX;
  if (M > kLimit || N > kLimit || K > kLimit || Mp > kLimit || Np > kLimit || L > kLimit) {
    *engine += " (not cuBLAS: a dimension beyond its 32-bit ones)";
    return false;
  }
  const CublasLibrary& library = CublasLoader::instance().wait();
  if (!library.why_not.empty()) {
    *engine += " (not cuBLAS: " + library.why_not + ")";
    return false;
  }
  const double beta = 0.0;
  const int status = library.entry.gemm_strided_batched(
      library.handle, /*transa*/ 0, /*transb*/ 1, int(N), int(M), int(K), &alpha, b, int(Np), b_batch_stride, a,
      int(Mp), a_batch_stride, &beta, out, int(N), M * N, int(L));
  if (status != 0)
    fatal(kExitCudaError, "fault",
          strprintf("the device reference's GEMM failed: %s's cublasDgemmStridedBatched returned status %d "
                    "(rerun with REPRO_CUBLAS=off for repro's own GEMM, or --reference host)",
                    library.name.c_str(), status));
  *engine = library.name + " DGEMM";
  return true;
}

}  // namespace repro
