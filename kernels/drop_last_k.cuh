#pragma once
// Planted defect: the last, partial K tile is never accumulated.
//
// tiled_gemm (bf16 in/out, fp32 accumulate, A and B row-major, no alpha/bias)
// with the K-tile count computed by truncating division, a bug that stays
// hidden as long as every K tested is a multiple of BK.
//
// Symptom: D = A[:, 0:K'] @ B[0:K', :] with K' = BK * floor(K / BK). With
// all-ones inputs every output is K' (K = 1000, BK = 32: 992 instead of 1000);
// with random inputs the relative error is about sqrt((K - K') / K), which a
// loose bf16 tolerance may let through while the exact --ones check does not.
//
// Launch: as tiled_gemm (block (BM/TM)*(BN/TN), grid (ceil(N/BN), ceil(M/BM)),
// dynamic smem tiled_smem_bytes<__nv_bfloat16, BM, BN, BK>()).

#include "tiled_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
drop_last_k(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
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

    // PLANTED DEFECT: K / BK rounds down, so when BK does not divide K the
    // last K - BK * (K / BK) columns of A (rows of B) are never loaded. It
    // should be (K + BK - 1) / BK; load_tiles already zero-fills the overhang.
    const int num_k_tiles = K / BK;
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        load_tiles<S, Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, kt * BK);
        __syncthreads();
        accumulate_tile<S>(As, Bs, acc);
        __syncthreads();
    }

    store_tile<S>(D, acc, M, N, m0, n0, 1.0f, nullptr);
}
