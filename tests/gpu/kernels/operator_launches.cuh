#pragma once
// Kernels of tests/gpu/operator_launches.yaml: the pieces of an operator of three launches that
// between them use every launch feature a sequence may (docs/spec.md, `launches`). Launch 1 is
// naive_gemm<float> (kernels/naive_gemm.cuh) into an intermediate W = A @ B; then these two:
//   add_bias_task   a __device__ task body (`kind: device`): W[m, n] += bias[n];
//   store_rows_tma  a __global__ specialized on the column count: each 64 x 64 tile of W copied
//                   through shared memory and written to D by one TMA store, so that D is reached
//                   only through its descriptor (the spec's `tma:` entry).
#include <cuda.h>
#include <cstdint>

namespace operator_kernels {

// One task: every element of W, strided over the CTA's threads.
__device__ void add_bias_task(float* W, const float* bias, int M, int columns) {
  for (int64_t i = threadIdx.x + int64_t(blockIdx.x) * blockDim.x; i < int64_t(M) * columns;
       i += int64_t(gridDim.x) * blockDim.x)
    W[i] += bias[i % columns];
}

template <int Columns>
__global__ void store_rows_tma(const float* W, const __grid_constant__ CUtensorMap map_d, int M) {
  __shared__ alignas(128) float tile[64][64];
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64, m = m0 + r, n = n0 + c;
    tile[r][c] = m < M && n < Columns ? W[int64_t(m) * Columns + n] : 0.f;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // The generic-proxy writes above must be visible to the async proxy that TMA reads with.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(&tile[0][0]));
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(&map_d),
                 "r"(n0), "r"(m0), "r"(smem)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
  }
}

}  // namespace operator_kernels
