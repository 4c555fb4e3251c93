// What loading cuBLAS at run time costs a harness, and what its DGEMM then takes, beside
// repro's own fp64 tensor-core GEMM (issue 60 point 5; docs/performance.md). cuBLAS is opened
// with dlopen, as the runtime would, with its few entry points declared here (no cuBLAS headers
// or link needed):
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -o cublas_loading scripts/bench/cublas_loading.cu -ldl
//   ./cublas_loading 1024,2048,4096
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using Handle = void*;
using CreateFn = int (*)(Handle*);
using DgemmFn = int (*)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int,
                        const double*, double*, int);

static double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (const char* p = argc > 1 ? argv[1] : "1024,2048,4096"; *p;) {
    sizes.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  auto t = std::chrono::steady_clock::now();
  cudaFree(nullptr);
  std::printf("context: %.1f ms\n", since(t));
  t = std::chrono::steady_clock::now();
  void* library = nullptr;
  const char* names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  const char* opened = nullptr;
  for (const char* name : names)
    if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) {
      opened = name;
      break;
    }
  if (library == nullptr) {
    std::printf("no cuBLAS: %s\n", dlerror());
    return 1;
  }
  std::printf("dlopen(%s): %.1f ms\n", opened, since(t));
  auto create = reinterpret_cast<CreateFn>(dlsym(library, "cublasCreate_v2"));
  auto dgemm = reinterpret_cast<DgemmFn>(dlsym(library, "cublasDgemm_v2"));
  t = std::chrono::steady_clock::now();
  Handle handle = nullptr;
  const int created = create(&handle);
  std::printf("cublasCreate: %.1f ms (status %d)\n", since(t), created);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int n : sizes) {
    double *a, *b, *c;
    cudaMalloc(&a, sizeof(double) * n * n);
    cudaMalloc(&b, sizeof(double) * n * n);
    cudaMalloc(&c, sizeof(double) * n * n);
    cudaMemset(a, 0, sizeof(double) * n * n);
    cudaMemset(b, 0, sizeof(double) * n * n);
    cudaDeviceSynchronize();
    const double one = 1, zero = 0;
    for (int round = 0; round < 4; ++round) {
      t = std::chrono::steady_clock::now();
      cudaEventRecord(start, 0);
      const int status = dgemm(handle, 0, 1, n, n, n, &one, b, n, a, n, &zero, c, n);
      cudaEventRecord(stop, 0);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      std::printf("DGEMM %d^3 call %d: %.3f ms by events, %.3f ms on the host's clock (status %d)\n", n, round + 1, ms,
                  since(t), status);
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  return 0;
}
