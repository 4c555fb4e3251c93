#pragma once
// A shape-specialized bf16 GEMM, instantiated per problem shape as JIT kernel libraries do:
//   D[M, N] = A[M, K] @ B[K, N],  fp32 accumulation, bf16 out.
// N and K are template parameters (the weights' shape is known when the library compiles the
// kernel); M, the token count, is a run-time argument. The parameter types differ on purpose:
// uint32_t (as a persistent fp8 GEMM from a public library declares SHAPE_N, SHAPE_K), size_t
// (the config's byte counts), int (the block tile), so a harness must pass every size as a
// constant expression that converts to each without narrowing.
//
// A is row-major; B is column-major ([N, K] in memory, a linear layer's weight); D is row-major.
// Each block computes one BLOCK_M x BLOCK_N tile of D, walking K in BLOCK_K steps through
// shared memory; every thread owns (BLOCK_M * BLOCK_N) / kThreads outputs. Edges are zero-filled
// on load and masked on store, so any M >= 1 and any SHAPE_N, SHAPE_K >= 1 are valid.
//
// Launch: block (ShapeGemmConfig<...>::kThreads), grid (kTilesN, ceil(M / BLOCK_M)), dynamic
// shared memory ShapeGemmConfig<...>::kSmemBytes.

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace shape_gemm {

// What the host needs to launch one instantiation: the library's side of the JIT contract.
template <uint32_t SHAPE_N, size_t SHAPE_K, int BLOCK_M, int BLOCK_N, int BLOCK_K>
struct ShapeGemmConfig {
    static constexpr int kThreads = 256;
    static constexpr uint32_t kTilesN = (SHAPE_N + BLOCK_N - 1) / BLOCK_N;
    static constexpr size_t kTilesK = (SHAPE_K + BLOCK_K - 1) / BLOCK_K;
    static constexpr size_t kSmemBytes = size_t(BLOCK_M + BLOCK_N) * BLOCK_K * sizeof(__nv_bfloat16);
    static_assert((BLOCK_M * BLOCK_N) % kThreads == 0, "every thread owns the same number of outputs");
};

template <uint32_t SHAPE_N, uint32_t SHAPE_K, int BLOCK_M, int BLOCK_N, int BLOCK_K>
__global__ void __launch_bounds__(256)
    gemm_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                __nv_bfloat16* __restrict__ D, int M) {
    using Config = ShapeGemmConfig<SHAPE_N, SHAPE_K, BLOCK_M, BLOCK_N, BLOCK_K>;
    constexpr int kPerThread = BLOCK_M * BLOCK_N / Config::kThreads;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* a_tile = reinterpret_cast<__nv_bfloat16*>(smem);  // [BLOCK_M][BLOCK_K]
    __nv_bfloat16* b_tile = a_tile + BLOCK_M * BLOCK_K;                // [BLOCK_N][BLOCK_K]

    const int m0 = blockIdx.y * BLOCK_M;
    const int n0 = blockIdx.x * BLOCK_N;
    float acc[kPerThread] = {};

    for (uint32_t k0 = 0; k0 < SHAPE_K; k0 += BLOCK_K) {
        // Stage both tiles; out-of-range elements are zero, so they add nothing.
        for (int i = threadIdx.x; i < BLOCK_M * BLOCK_K; i += Config::kThreads) {
            const int m = m0 + i / BLOCK_K, k = k0 + i % BLOCK_K;
            a_tile[i] = (m < M && k < int(SHAPE_K)) ? A[size_t(m) * SHAPE_K + k] : __float2bfloat16(0.f);
        }
        for (int i = threadIdx.x; i < BLOCK_N * BLOCK_K; i += Config::kThreads) {
            const int n = n0 + i / BLOCK_K, k = k0 + i % BLOCK_K;
            b_tile[i] = (n < int(SHAPE_N) && k < int(SHAPE_K)) ? B[size_t(n) * SHAPE_K + k] : __float2bfloat16(0.f);
        }
        __syncthreads();
        for (int j = 0; j < kPerThread; ++j) {
            const int out = threadIdx.x + j * Config::kThreads;
            const int row = out / BLOCK_N, col = out % BLOCK_N;
            float sum = 0.f;
            for (int k = 0; k < BLOCK_K; ++k)
                sum += __bfloat162float(a_tile[row * BLOCK_K + k]) * __bfloat162float(b_tile[col * BLOCK_K + k]);
            acc[j] += sum;
        }
        __syncthreads();  // the next stage overwrites both tiles
    }
    for (int j = 0; j < kPerThread; ++j) {
        const int out = threadIdx.x + j * Config::kThreads;
        const int m = m0 + out / BLOCK_N, n = n0 + out % BLOCK_N;
        if (m < M && n < int(SHAPE_N)) D[size_t(m) * SHAPE_N + n] = __float2bfloat16(acc[j]);
    }
}

}  // namespace shape_gemm
