#pragma once
// Planted defect: the epilogue writes rows 2i and 2i+1 of D into each other.
//
// tiled_gemm (bf16 in/out, fp32 accumulate, A and B row-major, no alpha/bias)
// with a hand-unrolled epilogue that writes the micro-tile two rows at a time
// and crosses the two accumulator rows.
//
// Symptom: D[m, :] = (A @ B)[m ^ 1, :]. With all-ones inputs every row of
// A @ B is the same, so the result is right (as long as M is even, see below);
// random inputs or a row-coded A (A[m, k] = f(m)) show the pairwise swap.
// If M is odd, the last row D[M-1, :] receives the accumulator of the
// out-of-range row M, which is 0 (A is zero-filled there): visible under --ones.
//
// Launch: as tiled_gemm (block (BM/TM)*(BN/TN), grid (ceil(N/BN), ceil(M/BM)),
// dynamic smem tiled_smem_bytes<__nv_bfloat16, BM, BN, BK>()).

#include "tiled_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
swap_rows_store(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    using namespace gemm_kernels;
    using S = TileShape<BM, BN, BK, TM, TN>;
    using T = __nv_bfloat16;
    static_assert(TM % 2 == 0, "the epilogue writes the micro-tile in pairs of rows");

    extern __shared__ __align__(16) unsigned char smem[];
    T* As = reinterpret_cast<T*>(smem);  // [BM][BK]
    T* Bs = As + BM * BK;                // [BK][BN]

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {};

    const int num_k_tiles = (K + BK - 1) / BK;
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        load_tiles<S, Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, kt * BK);
        __syncthreads();
        accumulate_tile<S>(As, Bs, acc);
        __syncthreads();
    }

    // Epilogue, two rows per step so the column index and its bound check are
    // shared by the pair. m is even: m0 is a multiple of BM and TM is even.
    const int row = m0 + micro_row<S>(), col = n0 + micro_col<S>();
#pragma unroll
    for (int i = 0; i < TM; i += 2) {
        const int m = row + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = col + j;
            if (n >= N) break;
            // PLANTED DEFECT: the accumulator rows are crossed: row m gets
            // acc[i + 1] and row m + 1 gets acc[i]. Invisible when all rows of
            // A @ B are equal (--ones), a row swap with random inputs.
            if (m < M) D[static_cast<size_t>(m) * N + n] = from_float<T>(acc[i + 1][j]);
            if (m + 1 < M) D[static_cast<size_t>(m + 1) * N + n] = from_float<T>(acc[i][j]);
        }
    }
}
