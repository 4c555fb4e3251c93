#pragma once
// A batched f32 GEMM with every term of the reference: D[l] = alpha * A[l] @ B[l] + beta * C[l] + bias,
// B column-major ([K, N] logical, stored as [N, K] per batch). One thread per output, blockIdx.z = batch.
__global__ void batched_gemm(const float* A, const float* B, const float* C, const float* bias, float* D,
                             int L, int M, int N, int K, float alpha, float beta) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  const int l = blockIdx.z;
  if (l >= L || m >= M || n >= N) return;
  const float* a = A + (size_t(l) * M + m) * K;
  const float* b = B + (size_t(l) * N + n) * K;  // column n of B[l] is contiguous
  float sum = 0.f;
  for (int k = 0; k < K; ++k) sum = fmaf(a[k], b[k], sum);
  const size_t out = (size_t(l) * M + m) * N + n;
  D[out] = alpha * sum + beta * C[out] + bias[n];
}
