#pragma once
// Planted defect: the first K tile is accumulated twice.
//
// tiled_gemm (bf16 in/out, fp32 accumulate, A and B row-major, no alpha/bias)
// with the first K tile peeled out of the main loop, as left behind by a
// refactor from a software-pipelined version whose prologue filled the first
// stage. The main loop was not moved on to start at the second tile.
//
// Symptom: D = A @ B + A[:, 0:BK] @ B[0:BK, :]. With all-ones inputs every
// output is K + BK instead of K (for K >= BK), a uniform over-count; a K-slice
// probe shows that the extra contribution comes from slice [0, BK) alone, i.e.
// K coverage.
//
// Launch: as tiled_gemm (block (BM/TM)*(BN/TN), grid (ceil(N/BN), ceil(M/BM)),
// dynamic smem tiled_smem_bytes<__nv_bfloat16, BM, BN, BK>()).

#include "tiled_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
k_tile_twice(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
             __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    using namespace gemm_kernels;
    using S = TileShape<BM, BN, BK, TM, TN>;
    using T = __nv_bfloat16;

    extern __shared__ __align__(16) unsigned char smem[];
    T* As = reinterpret_cast<T*>(smem);  // [BM][BK]
    T* Bs = As + BM * BK;                // [BK][BN]

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {};

    // Prologue: the first K tile, peeled out of the main loop.
    load_tiles<S, Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, 0);
    __syncthreads();
    accumulate_tile<S>(As, Bs, acc);
    __syncthreads();

    const int num_k_tiles = (K + BK - 1) / BK;
    // PLANTED DEFECT: the loop should start at kt = 1; the prologue already
    // accumulated tile 0, so it is added a second time. Under --ones every
    // output is K + BK; with random inputs the error is A[:, 0:BK] @ B[0:BK, :].
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        load_tiles<S, Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, kt * BK);
        __syncthreads();
        accumulate_tile<S>(As, Bs, acc);
        __syncthreads();
    }

    store_tile<S>(D, acc, M, N, m0, n0, 1.0f, nullptr);
}
