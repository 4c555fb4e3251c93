#pragma once
// An instrumented copy of a small smem-tiled bf16 GEMM, D[M, N] = alpha * A[M, K] @ B[K, N]
// (row-major, fp32 accumulation, bf16 out), recording four stages with repro_trace.cuh:
//
//   stage 0  A as the inner product consumes it (the shared-memory tile)    --ones: 1
//   stage 1  B likewise                                                      --ones: 1
//   stage 2  the accumulator after the K loop                                --ones: K
//   stage 3  the output value before the store                               --ones: alpha * K
//
// Each variant plants one defect (TraceDefect) so that the trace names its stage; the `trace:`
// of the traced_* specs declares the four stages. 64 x 64 tiles, K step 16, 256 threads, 4 x 4
// outputs per thread. Launch: block (256, 1, 1), grid (ceil(N / 64), ceil(M / 64), 1), no
// dynamic shared memory.
//
// The tile loads do not zero-fill rows past M (or columns past N): those shared-memory slots keep
// whatever they held, which is harmless (their results are never stored) but is exactly what an
// unpredicated absmax would trip over. `Predicated` picks whether the operand probes leave them out.

#include <cuda_bf16.h>

#include "../crates/repro-contract/instrument/repro_trace.cuh"

namespace traced_kernels {

enum class TraceDefect {
  None,
  LoadTwice,    // PLANTED DEFECT: A is doubled on its way into shared memory (a load/TMA-path bug)
  MmaTwice,     // PLANTED DEFECT: every product is accumulated twice (an MMA over-count)
  EpilogueHalf  // PLANTED DEFECT: the epilogue scales by alpha / 2 (an epilogue bug)
};

template <TraceDefect Defect, bool Predicated, bool Traced>
__global__ void __launch_bounds__(256) traced_gemm(const __nv_bfloat16* __restrict__ A,
                                                   const __nv_bfloat16* __restrict__ B, __nv_bfloat16* __restrict__ D,
                                                   int M, int N, int K, float alpha) {
  constexpr int BM = 64, BN = 64, BK = 16;
  __shared__ float As[BM][BK + 1];
  __shared__ float Bs[BK][BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // Shared memory is not cleared between uses: in a persistent kernel these tiles would hold the
  // previous task's data. Emulated here, so that the stale padding rows hold a value no operand
  // has (a fresh launch would otherwise often find zeros, or the ones of an earlier block).
  for (int e = threadIdx.x; e < BM * (BK + 1); e += 256) (&As[0][0])[e] = 1.0e9f;
  for (int e = threadIdx.x; e < BK * BN; e += 256) (&Bs[0][0])[e] = 1.0e9f;
  __syncthreads();

  repro_trace::Stage<Traced> stage_a(0), stage_b(1), stage_acc(2), stage_out(3);
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    // A tile: 64 x 16; B tile: 16 x 64; four elements each per thread. Rows past M and columns
    // past N are left as they are (stale); K past the end is zero, as the sum needs.
    for (int e = threadIdx.x; e < BM * BK; e += 256) {
      const int r = e / BK, c = e % BK, m = m0 + r, k = k0 + c;
      if (m < M) {
        float a = k < K ? __bfloat162float(A[size_t(m) * K + k]) : 0.0f;
        if constexpr (Defect == TraceDefect::LoadTwice) a *= 2.0f;  // PLANTED DEFECT
        As[r][c] = a;
      }
    }
    for (int e = threadIdx.x; e < BK * BN; e += 256) {
      const int r = e / BN, c = e % BN, k = k0 + r, n = n0 + c;
      if (n < N) Bs[r][c] = k < K ? __bfloat162float(B[size_t(k) * N + n]) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < BK; ++kk) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) {
        const int r = ty + 16 * i, c = tx + 16 * i;
        a[i] = As[r][kk];
        b[i] = Bs[kk][c];
        // Stage 0/1: the operands as consumed. Without the predicate the stale padding rows
        // (and columns) count too.
        const bool real_a = !Predicated || (m0 + r < M && k0 + kk < K);
        const bool real_b = !Predicated || (n0 + c < N && k0 + kk < K);
        // Every thread of a row of the block reads the same a[i]: one records it.
        if (tx == 0) stage_a.see(a[i], m0 + r, k0 + kk, real_a);
        if (ty == 0) stage_b.see(b[i], k0 + kk, n0 + c, real_b);
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          acc[i][j] += a[i] * b[j];
          if constexpr (Defect == TraceDefect::MmaTwice) acc[i][j] += a[i] * b[j];  // PLANTED DEFECT
        }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      const bool real = m < M && n < N;
      stage_acc.see(acc[i][j], m, n, real);
      float out = alpha * acc[i][j];
      if constexpr (Defect == TraceDefect::EpilogueHalf) out *= 0.5f;  // PLANTED DEFECT
      stage_out.see(out, m, n, real);
      if (real) D[size_t(m) * N + n] = __float2bfloat16_rn(out);
    }
  stage_a.flush();
  stage_b.flush();
  stage_acc.flush();
  stage_out.flush();
}

}  // namespace traced_kernels
