#pragma once
// Planted defect: no barrier between reading a K tile and overwriting it.
//
// tiled_gemm (bf16 in/out, fp32 accumulate, A and B row-major, no alpha/bias)
// taken one usual step further: register prefetch. The global loads of tile
// kt + 1 are issued before tile kt is computed, so their latency hides behind
// the FMAs, and the prefetched values go to shared memory after the compute.
// The barrier between the compute and that store was left out, since "the
// loop already syncs after the store".
//
// Symptom: a shared-memory race. A warp that finishes computing tile kt at once
// writes tile kt + 1 over it, while slower warps of the block are still reading
// tile kt, so they mix in operands of the next tile. Which products go wrong
// depends on warp timing: with random inputs the result is wrong and differs
// from run to run. With all-ones inputs every full tile holds the same values,
// so when BK divides K the race cannot change the result and --ones passes
// (when it does not, the zero-filled overhang of the last tile can leak into
// the one before, and --ones fails now and then).
//
// Why the prefetch matters for the reproducer: in the plain tiled_gemm loop a
// warp's next shared-memory store waits for its global loads, which takes
// longer than warps of a block drift apart, so the same missing barrier there
// almost never shows. Here the store follows the compute at once. Seen on an
// H200 with <64, 64, 16, 4, 4> at M = 999, N = 1001, K = 960: every run wrong,
// relL2 about 0.12 against the fp64 reference, about 85% of outputs different
// between two runs.
//
// Launch: as tiled_gemm (block (BM/TM)*(BN/TN), grid (ceil(N/BN), ceil(M/BM)),
// dynamic smem tiled_smem_bytes<__nv_bfloat16, BM, BN, BK>()).

#include "tiled_gemm.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
missing_sync(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
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

    TileRegs<S, Layout::RowMajor, T> next;  // the prefetched tile
    fetch_tiles<S, Layout::RowMajor>(next, A, B, M, N, K, m0, n0, 0);
    store_tiles<S, Layout::RowMajor>(As, Bs, next);
    __syncthreads();

    const int num_k_tiles = (K + BK - 1) / BK;
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        const bool has_next = kt + 1 < num_k_tiles;  // block-uniform
        if (has_next) fetch_tiles<S, Layout::RowMajor>(next, A, B, M, N, K, m0, n0, (kt + 1) * BK);

        accumulate_tile<S>(As, Bs, acc);

        if (has_next) {
            // PLANTED DEFECT: a __syncthreads() belongs here, before the store.
            // Without it a warp that is done with tile kt overwrites As/Bs while
            // other warps of the block may still be reading tile kt.
            store_tiles<S, Layout::RowMajor>(As, Bs, next);
            __syncthreads();  // the new tile is complete before anyone reads it
        }
    }

    store_tile<S>(D, acc, M, N, m0, n0, 1.0f, nullptr);
}
