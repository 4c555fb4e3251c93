// Exercises crates/repro-contract/instrument/repro_capture.cuh without a GPU (built and run by
// tests/import_capture.rs): host tensors through repro::capture_host, a device-style call that
// must fail softly where there is no device, and the per-name call limit.
//
//   capture_demo          with REPRO_CAPTURE_DIR set: writes A (bf16, 5 x 3), B (f32, 3 x 4,
//                         captured through strides as a column-major view) and a second call of A;
//                         with a GPU also D, from a device buffer
#include <cuda_bf16.h>

#include <cstdio>
#include <vector>

#include "../../crates/repro-contract/instrument/repro_capture.cuh"

int main() {
  // A: bf16 [5, 3], A[m][k] = m + k / 4 (exact in bf16).
  std::vector<__nv_bfloat16> a(15);
  for (int m = 0; m < 5; ++m)
    for (int k = 0; k < 3; ++k) a[m * 3 + k] = __float2bfloat16_rn(float(m) + float(k) / 4.0f);
  repro::capture_host("A", a.data(), "bf16", {5, 3});
  // B: logical [3, 4] stored column-major: B[k][n] at n * 3 + k; B[k][n] = 10 k + n.
  std::vector<float> b(12);
  for (int k = 0; k < 3; ++k)
    for (int n = 0; n < 4; ++n) b[n * 3 + k] = float(10 * k + n);
  repro::capture_host("B", b.data(), "f32", {3, 4}, {1, 3});
  // A second call of A: captured only when REPRO_CAPTURE_LIMIT allows two.
  repro::capture_host("A", a.data(), "bf16", {5, 3});
  // The device path: a host pointer through cudaMemcpyAsync. Without a driver it must warn and go on.
  repro::capture("C", b.data(), {12}, 0);
  // With a GPU (scripts/gpu-check.sh trace): a real device buffer, on a stream of its own. D is
  // B's storage read as [4, 3] row-major: D[n][k] = 10 k + n.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    float* d = nullptr;
    cudaStream_t stream = nullptr;
    if (cudaStreamCreate(&stream) == cudaSuccess && cudaMalloc(&d, b.size() * sizeof(float)) == cudaSuccess &&
        cudaMemcpy(d, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess)
      repro::capture("D", d, {4, 3}, stream);
    cudaFree(d);
    cudaStreamDestroy(stream);
  }
  cudaGetLastError();
  std::printf("capture_demo done\n");
  return 0;
}
