#pragma once
// D[M,N] = A[M,K] @ B[K,N] in f32, each 64 x 64 tile of D computed into shared memory by the
// block and written to global memory by one TMA store (cp.async.bulk.tensor), which clips the
// tile at D's edges. The kernel never sees D's pointer, only the descriptor over it: the shape of
// a persistent Hopper GEMM whose epilogue stores through TMA (issue 24 item 1: such an output
// used to be refused as "never passed to the kernel").
#include <cuda.h>
#include <cstdint>

__global__ void tma_store_gemm(const float* A, const float* B, const __grid_constant__ CUtensorMap map_d, int M, int N,
                               int K) {
  __shared__ alignas(128) float tile[64][64];
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64, m = m0 + r, n = n0 + c;
    float sum = 0.f;
    if (m < M && n < N)
      for (int k = 0; k < K; ++k) sum += A[m * K + k] * B[k * N + n];
    tile[r][c] = sum;
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
