#pragma once
// Planted defect: the last, partial M tile of D is never written.
//
// tiled_gemm (bf16 in/out, fp32 accumulate, A and B row-major, no alpha/bias)
// with an early exit for blocks past the end of D (there when the grid is
// rounded up, e.g. for a tile rasterization) that tests the wrong end of the
// tile.
//
// Symptom: when BM does not divide M, rows [BM * floor(M / BM), M) of D keep
// whatever was there before the launch (the harness's poison); every other
// element is right. Same under --ones and random inputs.
//
// Launch: as tiled_gemm (block (BM/TM)*(BN/TN), grid (ceil(N/BN), ceil(M/BM)),
// dynamic smem tiled_smem_bytes<__nv_bfloat16, BM, BN, BK>()).

#include "tiled_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
skip_last_m_tile(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                 __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    using namespace gemm_kernels;
    using S = TileShape<BM, BN, BK, TM, TN>;
    using T = __nv_bfloat16;

    extern __shared__ __align__(16) unsigned char smem[];
    T* As = reinterpret_cast<T*>(smem);  // [BM][BK]
    T* Bs = As + BM * BK;                // [BK][BN]

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // Blocks whose tile lies past the end of D have nothing to do. (The exit is
    // block-uniform and comes before any __syncthreads, so it cannot deadlock.)
    // PLANTED DEFECT: this tests whether the whole tile fits (m0 + BM > M)
    // instead of whether it starts inside D (m0 >= M), so the block owning the
    // partial last M tile exits too and those rows are never written.
    if (m0 + BM > M) return;

    float acc[TM][TN] = {};
    const int num_k_tiles = (K + BK - 1) / BK;
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        load_tiles<S, Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, kt * BK);
        __syncthreads();
        accumulate_tile<S>(As, Bs, acc);
        __syncthreads();
    }

    store_tile<S>(D, acc, M, N, m0, n0, 1.0f, nullptr);
}
