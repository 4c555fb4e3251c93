#pragma once
// Split-K GEMM as an operator of two kernels, run in order on one stream:
//   D[M, N] = alpha * (A[M, K] @ B[K, N]),  bf16 A and B (row-major), f32 D (row-major),
//   fp32 accumulation throughout.
//
//   1. partials: K is cut into SPLITS ranges of whole K tiles; block (x, y, s) computes the
//      BM x BN tile (y, x) of the product over split s's K range and stores it, f32, into
//      workspace[s][m][n] ([SPLITS, M, N]).
//   2. reduce:   D[m][n] = alpha * (workspace[0][m][n] + ... + workspace[SPLITS-1][m][n]),
//      summed in that fixed order, so the result is bit-for-bit the same from run to run (no
//      atomics on the values).
//
// Split s covers K columns [s * Ks, min(K, (s + 1) * Ks)) with
// Ks = ceil_div(ceil_div(K, SPLITS), BK) * BK: a whole number of K tiles, so only the last
// split can end in a partial K tile (zero-filled past K on load, as in tiled_gemm). When
// SPLITS * Ks overshoots K by a tile or more, the trailing splits are empty and store zeros:
// every workspace element of every split is written, and the reduction never reads anything a
// previous call left behind.
//
// The inner loop is tiled_gemm.cuh's (gemm_kernels::load_tiles and accumulate_tile, a 4 x 4
// register tile per thread, 256 threads for a 64 x 64 tile), with static shared memory.
//
// Planted defects (SplitKDefect; each marked "PLANTED DEFECT" where it acts). A defect acts in
// one of the two kernels; the other kernel accepts it and behaves as `none`, so one operator
// can pass the same value to both launches.
//   drop_last_split (reduce): sums the splits s < SPLITS - 1 only, the classic off-by-one of
//     a loop bound. The last split's K columns contribute nothing: with K = 1000 and 4 splits
//     (Ks = 256), --ones gives 768 instead of 1000, and the K-slice probes name the slices of
//     columns 768-999 as missing.
//   bf16_partials (partials): every partial is rounded to bf16 before it is stored, as a kernel
//     whose workspace is bf16 would. With all-ones inputs each partial is its split's length,
//     an integer exact in bf16's 8 significant bits for the sizes of the examples (128 and 16
//     at K = 400, 4 splits), so --ones passes; with random inputs each partial carries a bf16
//     rounding (relative 2^-9 at most) into an f32 output, about 200 times f32's own error: a
//     precision loss that only a tolerance tighter than bf16's sees.
//
// Launch (both kernels 256 threads, no dynamic shared memory):
//   partials<BM, BN, BK, Defect>: block (256, 1, 1), grid (ceil_div(N, BN), ceil_div(M, BM), SPLITS),
//     args (A, B, workspace, M, N, K, SPLITS); BM * BN = 16 * 256 (e.g. 64 x 64), BK with the
//     tiles' loads spread evenly over the threads (e.g. 32); static smem (BM + BN) * BK * 2 bytes.
//   reduce<Defect>: block (256, 1, 1), grid (ceil_div(M * N, 256), 1, 1) (any grid covers it:
//     grid-stride), args (workspace, D, M, N, SPLITS, alpha).

#include "tiled_gemm.cuh"

#include <cstddef>

namespace split_k_kernels {

enum class SplitKDefect { none, drop_last_split, bf16_partials };

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

// The K extent of one split: ceil(K / SPLITS), rounded up to whole K tiles of BK.
template <int BK>
__host__ __device__ constexpr int split_extent(int K, int splits)
{
    const int per_split = (K + splits - 1) / splits;
    return (per_split + BK - 1) / BK * BK;
}

template <int BM, int BN, int BK, SplitKDefect Defect>
__global__ void __launch_bounds__(kThreads)
partials(const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ workspace, int M, int N, int K,
         int SPLITS)
{
    using S = gemm_kernels::TileShape<BM, BN, BK, 4, 4>;
    static_assert(S::kThreads == kThreads, "a 4 x 4 register tile per thread: BM * BN must be 16 * 256");

    __shared__ bf16 As[BM * BK];  // [BM][BK]
    __shared__ bf16 Bs[BK * BN];  // [BK][BN]

    const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.x) * BN;
    const int split = static_cast<int>(blockIdx.z);
    const int extent = split_extent<BK>(K, SPLITS);
    // 64-bit: split * extent may pass K (an empty trailing split) by up to SPLITS tiles.
    const int k_begin = static_cast<int>(min(static_cast<long long>(split) * extent, static_cast<long long>(K)));
    const int k_end = static_cast<int>(min(static_cast<long long>(k_begin) + extent, static_cast<long long>(K)));

    float acc[S::TM][S::TN] = {};
    // The split's K tiles. extent is a multiple of BK, so a tile never crosses k_end except at
    // K, where load_tiles zero-fills the columns past K.
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        gemm_kernels::load_tiles<S, gemm_kernels::Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, k0);
        __syncthreads();  // the whole tile is in shared memory before anyone reads it
        gemm_kernels::accumulate_tile<S>(As, Bs, acc);
        __syncthreads();  // everyone has read it before the next load overwrites it
    }

    // Every element of the tile inside [M, N], an empty split's zeros included.
    float* out = workspace + static_cast<size_t>(split) * M * N;
    const int row = m0 + gemm_kernels::micro_row<S>(), col = n0 + gemm_kernels::micro_col<S>();
#pragma unroll
    for (int i = 0; i < S::TM; ++i) {
        const int m = row + i;
        if (m >= M) break;
#pragma unroll
        for (int j = 0; j < S::TN; ++j) {
            const int n = col + j;
            if (n >= N) break;
            float partial = acc[i][j];
            if constexpr (Defect == SplitKDefect::bf16_partials) {
                // PLANTED DEFECT: the partial rounded to bf16 (8 significant bits) before it
                // is stored, as if the workspace were bf16. Exact for small integers (--ones),
                // a relative error up to 2^-9 per partial for random inputs.
                partial = __bfloat162float(__float2bfloat16(partial));
            }
            out[static_cast<size_t>(m) * N + n] = partial;
        }
    }
}

template <SplitKDefect Defect>
__global__ void __launch_bounds__(kThreads)
reduce(const float* __restrict__ workspace, float* __restrict__ D, int M, int N, int SPLITS, float alpha)
{
    const size_t count = static_cast<size_t>(M) * N;
    // PLANTED DEFECT (drop_last_split): the bound SPLITS - 1 leaves out the last split, and
    // with it the K columns [(SPLITS - 1) * Ks, K).
    const int summed = Defect == SplitKDefect::drop_last_split ? SPLITS - 1 : SPLITS;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        float sum = 0.0f;
        // Split 0 first, then 1, ...: one fixed order, so D is the same bits on every run.
        for (int s = 0; s < summed; ++s) sum += workspace[static_cast<size_t>(s) * count + i];
        D[i] = alpha * sum;
    }
}

}  // namespace split_k_kernels
