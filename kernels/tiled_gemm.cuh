#pragma once
// Shared-memory tiled GEMM with 2-D register blocking:
//   D[M, N] = alpha * (A[M, K] @ B[K, N]) + bias[N],  fp32 accumulation.
// A and D are row-major; B is row-major or column-major (LayoutB). T is
// __nv_bfloat16 (bf16 in and out), __half (f16) or float (f32 in and out); bias
// is fp32 and optional (nullptr for none).
//
// Each block computes one BM x BN tile of D. K is walked in BK-wide tiles: the
// block stages the A tile (BM x BK) and the B tile (BK x BN) in dynamic shared
// memory, then every thread accumulates its TM x TN micro-tile of D from them in
// registers. Partial tiles on every edge are zero-filled on load and masked on
// store, so any M, N, K >= 1 is valid.
//
// Launch: block ((BM / TM) * (BN / TN), 1, 1), grid (ceil(N / BN), ceil(M / BM), 1),
//         dynamic shared memory tiled_smem_bytes<T, BM, BN, BK>() bytes; above
//         48 KiB the kernel needs cudaFuncAttributeMaxDynamicSharedMemorySize.
//
// TileShape, load_tiles (fetch_tiles + store_tiles), accumulate_tile and
// store_tile are the building blocks that the planted-defect variants in this
// directory reuse.

#include "gemm_common.cuh"

#include <cstddef>

namespace gemm_kernels {

// Block tile BM x BN, K step BK, per-thread micro-tile TM x TN.
template <int BM_, int BN_, int BK_, int TM_, int TN_>
struct TileShape {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
    static constexpr int kThreadsN = BN / TN;  // threads along N
    static constexpr int kThreads = (BM / TM) * kThreadsN;

    static_assert(BM % TM == 0 && BN % TN == 0, "the micro-tile must divide the block tile");
};

// Dynamic shared memory one block needs: one A tile and one B tile.
template <typename T, int BM, int BN, int BK>
constexpr int tiled_smem_bytes()
{
    return (BM * BK + BK * BN) * static_cast<int>(sizeof(T));
}

// Origin of this thread's micro-tile inside the block tile: thread t owns rows
// [micro_row, micro_row + TM) and columns [micro_col, micro_col + TN).
template <class S>
__device__ __forceinline__ int micro_row() { return static_cast<int>(threadIdx.x) / S::kThreadsN * S::TM; }
template <class S>
__device__ __forceinline__ int micro_col() { return static_cast<int>(threadIdx.x) % S::kThreadsN * S::TN; }

// A thread's share of a ROWS x COLS tile of a row-major matrix: kCount
// elements in one column of the tile, the first in row first_row(), each next
// one kStep rows further down. Consecutive threads take consecutive columns,
// so every load instruction of a warp reads contiguous memory.
template <int ROWS, int COLS, int kThreads>
struct TileMap {
    static_assert(kThreads % COLS == 0 && ROWS % (kThreads / COLS) == 0,
                  "the block's threads must cover whole rows of the tile, evenly");
    static constexpr int kStep = kThreads / COLS;
    static constexpr int kCount = ROWS / kStep;

    __device__ static int first_row() { return static_cast<int>(threadIdx.x) / COLS; }
    __device__ static int col() { return static_cast<int>(threadIdx.x) % COLS; }
};

// Global -> registers: this thread's share of the ROWS x COLS tile at (row0,
// col0) of a row-major [rows, cols] matrix. Elements outside the matrix read
// as zero, so a partial tile adds nothing to the accumulator.
template <int ROWS, int COLS, int kThreads, typename T>
__device__ __forceinline__ void fetch_tile(T (&v)[TileMap<ROWS, COLS, kThreads>::kCount], const T* __restrict__ src,
                                           int rows, int cols, int row0, int col0)
{
    using Map = TileMap<ROWS, COLS, kThreads>;
    const T zero = from_float<T>(0.0f);
    const int r = row0 + Map::first_row(), c = col0 + Map::col();
    // One pointer walked down the column: indexing every element from src
    // instead made nvcc 13.0 keep kCount addresses live across the whole K
    // loop (about 190 instead of 120 registers for bf16 128x128x32, and
    // spills for f32 with BK = 64).
    const T* p = src + static_cast<size_t>(r) * cols + c;
#pragma unroll
    for (int s = 0; s < Map::kCount; ++s) {
        v[s] = (r + s * Map::kStep < rows && c < cols) ? *p : zero;
        p += static_cast<size_t>(Map::kStep) * cols;
    }
}

// Registers -> shared memory: the tile fetched above into dst, stored as
// [ROWS][COLS] or, when kTranspose, as [COLS][ROWS].
template <int ROWS, int COLS, int kThreads, bool kTranspose, typename T>
__device__ __forceinline__ void stash_tile(T* dst, const T (&v)[TileMap<ROWS, COLS, kThreads>::kCount])
{
    using Map = TileMap<ROWS, COLS, kThreads>;
    const int r = Map::first_row(), c = Map::col();
#pragma unroll
    for (int s = 0; s < Map::kCount; ++s) {
        const int row = r + s * Map::kStep;
        dst[kTranspose ? c * ROWS + row : row * COLS + c] = v[s];
    }
}

// One thread's share of an A tile and a B tile, held in registers between the
// global load and the shared-memory store. The A tile is BM x BK of A. The B
// tile is read as it is stored: BK x BN of a row-major B, or BN x BK of the
// row-major [N, K] matrix that a column-major B is.
template <class S, Layout LayoutB, typename T>
struct TileRegs {
    static constexpr bool kBRowMajor = LayoutB == Layout::RowMajor;
    using MapA = TileMap<S::BM, S::BK, S::kThreads>;
    using MapB = TileMap<kBRowMajor ? S::BK : S::BN, kBRowMajor ? S::BN : S::BK, S::kThreads>;
    T a[MapA::kCount];
    T b[MapB::kCount];
};

// Global -> registers: the K tile that starts at k0, i.e. A[m0 : m0 + BM, k0 : k0 + BK]
// and B[k0 : k0 + BK, n0 : n0 + BN].
template <class S, Layout LayoutB, typename T>
__device__ __forceinline__ void fetch_tiles(TileRegs<S, LayoutB, T>& regs, const T* __restrict__ A,
                                            const T* __restrict__ B, int M, int N, int K, int m0, int n0, int k0)
{
    fetch_tile<S::BM, S::BK, S::kThreads>(regs.a, A, M, K, m0, k0);
    if constexpr (LayoutB == Layout::RowMajor) {
        fetch_tile<S::BK, S::BN, S::kThreads>(regs.b, B, K, N, k0, n0);
    } else {
        fetch_tile<S::BN, S::BK, S::kThreads>(regs.b, B, N, K, n0, k0);
    }
}

// Registers -> shared memory: As is [BM][BK] and Bs is [BK][BN], whatever B's
// layout in global memory (a column-major B tile is transposed on the way).
template <class S, Layout LayoutB, typename T>
__device__ __forceinline__ void store_tiles(T* As, T* Bs, const TileRegs<S, LayoutB, T>& regs)
{
    stash_tile<S::BM, S::BK, S::kThreads, false>(As, regs.a);
    if constexpr (LayoutB == Layout::RowMajor) {
        stash_tile<S::BK, S::BN, S::kThreads, false>(Bs, regs.b);
    } else {
        stash_tile<S::BN, S::BK, S::kThreads, true>(Bs, regs.b);
    }
}

// Stage the K tile that starts at k0 into shared memory. All of a thread's
// global loads are issued before its first shared-memory store, so they are in
// flight together.
template <class S, Layout LayoutB, typename T>
__device__ __forceinline__ void load_tiles(T* As, T* Bs, const T* __restrict__ A, const T* __restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0)
{
    TileRegs<S, LayoutB, T> regs;
    fetch_tiles<S, LayoutB>(regs, A, B, M, N, K, m0, n0, k0);
    store_tiles<S, LayoutB>(As, Bs, regs);
}

// acc[i][j] += sum over the staged K tile of As[micro_row + i][kk] * Bs[kk][micro_col + j].
template <class S, typename T>
__device__ __forceinline__ void accumulate_tile(const T* As, const T* Bs, float (&acc)[S::TM][S::TN])
{
    const int row = micro_row<S>(), col = micro_col<S>();

#pragma unroll
    for (int kk = 0; kk < S::BK; ++kk) {
        // Each operand is read from shared memory once per kk and reused TN (TM)
        // times from registers: the point of register blocking.
        float a[S::TM], b[S::TN];
#pragma unroll
        for (int i = 0; i < S::TM; ++i) a[i] = to_float(As[(row + i) * S::BK + kk]);
#pragma unroll
        for (int j = 0; j < S::TN; ++j) b[j] = to_float(Bs[kk * S::BN + col + j]);
#pragma unroll
        for (int i = 0; i < S::TM; ++i) {
#pragma unroll
            for (int j = 0; j < S::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
}

// Epilogue: D[m0 + micro_row + i, n0 + micro_col + j] = alpha * acc[i][j] + bias[n],
// skipping elements outside D.
template <class S, typename T>
__device__ __forceinline__ void store_tile(T* __restrict__ D, const float (&acc)[S::TM][S::TN], int M, int N,
                                           int m0, int n0, float alpha, const float* __restrict__ bias)
{
    const int row = m0 + micro_row<S>(), col = n0 + micro_col<S>();

#pragma unroll
    for (int i = 0; i < S::TM; ++i) {
        const int m = row + i;
        if (m >= M) break;
#pragma unroll
        for (int j = 0; j < S::TN; ++j) {
            const int n = col + j;
            if (n >= N) break;
            float v = alpha * acc[i][j];
            if (bias != nullptr) v += bias[n];
            D[static_cast<size_t>(m) * N + n] = from_float<T>(v);
        }
    }
}

}  // namespace gemm_kernels

// __launch_bounds__(threads, 1): one resident block per SM is enough, which
// lets ptxas use up to 255 registers; with the thread count alone it capped
// some variants at 128 registers and spilled.
template <typename T, int BM, int BN, int BK, int TM, int TN,
          gemm_kernels::Layout LayoutB = gemm_kernels::Layout::RowMajor>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
tiled_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ D,
           int M, int N, int K, float alpha, const float* __restrict__ bias)
{
    using namespace gemm_kernels;
    using S = TileShape<BM, BN, BK, TM, TN>;

    // Sized by the launch (tiled_smem_bytes), so one kernel serves every tile
    // shape and may go past the 48 KiB static limit.
    extern __shared__ __align__(16) unsigned char smem[];
    T* As = reinterpret_cast<T*>(smem);  // [BM][BK]
    T* Bs = As + BM * BK;                // [BK][BN]

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {};

    const int num_k_tiles = (K + BK - 1) / BK;  // the last one may be partial
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        load_tiles<S, LayoutB>(As, Bs, A, B, M, N, K, m0, n0, kt * BK);
        __syncthreads();  // the whole tile is in shared memory before anyone reads it
        accumulate_tile<S>(As, Bs, acc);
        __syncthreads();  // everyone has finished reading it before the next load overwrites it
    }

    store_tile<S>(D, acc, M, N, m0, n0, alpha, bias);
}
