#pragma once
// D[M,N] = A[M,K] @ B[K,N] (bf16 in and out, f32 accumulate), each thread computing a TM x TN
// block of outputs in registers. No __launch_bounds__, so -maxrregcount applies to it: the
// flags_* specs (scripts/gpu-check.sh, part `flags`) check that a production register cap
// reaches this kernel and not the runtime's reference kernel.
#include <cuda_bf16.h>

template <int TM, int TN>
__global__ void register_tile_gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* D, int M, int N,
                                   int K) {
  const int m0 = (blockIdx.y * blockDim.y + threadIdx.y) * TM;
  const int n0 = (blockIdx.x * blockDim.x + threadIdx.x) * TN;
  float acc[TM][TN] = {};
  for (int k = 0; k < K; ++k) {
    float a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = m0 + i < M ? __bfloat162float(A[(m0 + i) * K + k]) : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = n0 + j < N ? __bfloat162float(B[k * N + n0 + j]) : 0.f;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      if (m0 + i < M && n0 + j < N) D[(m0 + i) * N + n0 + j] = __float2bfloat16(acc[i][j]);
}
