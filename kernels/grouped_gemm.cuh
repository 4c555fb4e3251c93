#pragma once
// Grouped (mixture-of-experts) bf16 GEMMs in three layouts, fp32 accumulation,
// bf16 output rounded to nearest even. G groups ("experts"), each with its own
// B; every kernel is the smem-tiled, register-blocked GEMM of tiled_gemm.cuh
// (a block computes a BM x BN tile of D through BM x BK and BK x BN shared-
// memory tiles, each thread a TM x TN register tile), built from its blocks
// (TileShape, TileMap, stash_tile, accumulate_tile), with the group handling
// around it. Partial tiles on every edge are zero-filled on load and masked on
// store, so any sizes >= 1 are valid.
//
//   contiguous  A [M, K], group_index I: int32 [M] (I[m] = group of row m,
//               -1 for a padding row), B [G, K, N], D [M, N]:
//               D[m, :] = A[m, :] @ B[I[m]] for every row with I[m] >= 0.
//   masked      A [G, M, K], masked_m MM: int32 [G], B [G, K, N], D [G, M, N]
//               (M is M_max): D[g, m, :] = A[g, m, :] @ B[g] for m < MM[g].
//   k_grouped   A [M, K], k_sizes KS: int32 [G], B [K, N], D [G, M, N] (K is
//               K_total): group g's K range starts at KS[0] + ... + KS[g-1];
//               D[g] = A[:, Kg] @ B[Kg, :]; an empty group's D[g] is 0.
//
// One kernel per layout, each with a GroupDefect template parameter; every
// defect is marked with a "PLANTED DEFECT" comment where it acts, which explains it.
// Apart from its defect each kernel is correct; `GroupDefect::none` is the
// correct kernel. Launch shapes and argument orders are above each kernel and
// in README.md ("Grouped GEMM examples").

#include "tiled_gemm.cuh"

#include <cstddef>

namespace grouped_kernels {

// The planted defects. Each kernel accepts `none` and the defects listed
// above it (a static_assert refuses the others).
enum class GroupDefect { none, wrong_group_offset, store_spills, store_box_spills, short_k_range };

using bf16 = __nv_bfloat16;

// Global -> registers: this thread's share of the ROWS x COLS tile at (row0,
// col0) of a region of a row-major matrix: element (r, c) of the region is
// src[r * ld + c], and it exists for r < rows and c < cols. Elements outside
// read as zero. Unlike gemm_kernels::fetch_tile, the leading dimension is
// separate from the column count, so a region can be a column range of a
// wider matrix (a k_grouped group's K range).
template <int ROWS, int COLS, int kThreads>
__device__ __forceinline__ void fetch_region(bf16 (&v)[gemm_kernels::TileMap<ROWS, COLS, kThreads>::kCount],
                                             const bf16* __restrict__ src, size_t ld, int rows, int cols,
                                             int row0, int col0)
{
    using Map = gemm_kernels::TileMap<ROWS, COLS, kThreads>;
    const bf16 zero = __float2bfloat16_rn(0.0f);
    const int r = row0 + Map::first_row(), c = col0 + Map::col();
    const bool col_in = c < cols;
    // One pointer walked down the column, as in gemm_kernels::fetch_tile.
    const bf16* p = src + static_cast<size_t>(r) * ld + c;
#pragma unroll
    for (int s = 0; s < Map::kCount; ++s) {
        v[s] = (col_in && r + s * Map::kStep < rows) ? *p : zero;
        p += static_cast<size_t>(Map::kStep) * ld;
    }
}

// acc += A_region[m0 : m0 + BM, 0 : k_extent] @ B_region[0 : k_extent, n0 : n0 + BN],
// walking the first num_k_tiles K tiles of BK. A_region: a_rows x k_extent,
// leading dimension lda; B_region: k_extent x b_cols, leading dimension ldb.
// num_k_tiles is ceil(k_extent / BK) for the whole range (the caller passes
// it, so that a defect can pass another count). Every thread of the block
// must call it: it synchronizes.
template <class S>
__device__ __forceinline__ void accumulate_range(float (&acc)[S::TM][S::TN], bf16* As, bf16* Bs,
                                                 const bf16* __restrict__ A, size_t lda, int a_rows,
                                                 const bf16* __restrict__ B, size_t ldb, int b_cols,
                                                 int k_extent, int num_k_tiles, int m0, int n0)
{
    using MapA = gemm_kernels::TileMap<S::BM, S::BK, S::kThreads>;
    using MapB = gemm_kernels::TileMap<S::BK, S::BN, S::kThreads>;
    for (int kt = 0; kt < num_k_tiles; ++kt) {
        const int k0 = kt * S::BK;
        bf16 a[MapA::kCount], b[MapB::kCount];
        // Both global loads before either shared store, so they are in flight together.
        fetch_region<S::BM, S::BK, S::kThreads>(a, A, lda, a_rows, k_extent, m0, k0);
        fetch_region<S::BK, S::BN, S::kThreads>(b, B, ldb, k_extent, b_cols, k0, n0);
        gemm_kernels::stash_tile<S::BM, S::BK, S::kThreads, false>(As, a);
        gemm_kernels::stash_tile<S::BK, S::BN, S::kThreads, false>(Bs, b);
        __syncthreads();  // the whole tile is in shared memory before anyone reads it
        gemm_kernels::accumulate_tile<S>(As, Bs, acc);
        __syncthreads();  // everyone has read it before the next K tile overwrites it
    }
}

// Epilogue: D[m, n] = bf16(acc) for this thread's outputs of the tile at (m0,
// n0), D row-major with leading dimension ldd, for n < cols and the rows m
// for which row_ok(m) holds.
template <class S, class RowOk>
__device__ __forceinline__ void store_rows(bf16* __restrict__ D, size_t ldd, int cols, int m0, int n0,
                                           const float (&acc)[S::TM][S::TN], RowOk row_ok)
{
    const int row = m0 + gemm_kernels::micro_row<S>(), col = n0 + gemm_kernels::micro_col<S>();
#pragma unroll
    for (int i = 0; i < S::TM; ++i) {
        const int m = row + i;
        if (!row_ok(m)) continue;
#pragma unroll
        for (int j = 0; j < S::TN; ++j) {
            const int n = col + j;
            if (n >= cols) break;
            D[static_cast<size_t>(m) * ldd + n] = __float2bfloat16_rn(acc[i][j]);
        }
    }
}

template <class S>
__device__ __forceinline__ void clear(float (&acc)[S::TM][S::TN])
{
#pragma unroll
    for (int i = 0; i < S::TM; ++i) {
#pragma unroll
        for (int j = 0; j < S::TN; ++j) acc[i][j] = 0.0f;
    }
}

}  // namespace grouped_kernels

// ---------------------------------------------------------------------------
// contiguous: D[m, :] = A[m, :] @ B[I[m]], B [G, K, N] (group g at g * K * N).
//
// A block computes the BM x BN tile at (blockIdx.y * BM, blockIdx.x * BN).
// The kernel does NOT need the tile-aligned layout (groups padded to a
// multiple of BM): a tile may hold the tail of one group, padding, and the
// head of the next. It reads I for its BM rows, lists the groups of its rows
// in row order (one entry per run of equal group ids; -1 rows, rows past M,
// and ids outside [0, G) are skipped), and makes one pass per listed group:
// the whole K loop against that group's B, then a store of the rows of that
// group only. With a BM-aligned layout every tile is one pass. A tile with no
// group rows (only padding) stores nothing: its rows stay as they were.
//
// Defects: none, wrong_group_offset, store_spills (both need a tile that
// holds two groups, i.e. groups not aligned to BM, to show).
//
// Launch: block ((BM/TM)*(BN/TN), 1, 1), grid (ceil(N/BN), ceil(M/BM), 1),
// dynamic smem (BM*BK + BK*BN) * 2 bytes (16384 for 128x128x32), plus
// 2 * BM * 4 + 4 bytes of static smem (ptxas reports 1040 for BM = 128).
// Args: (A, B, group_index, D, M, N, K, G), M = M_total.
template <int BM, int BN, int BK, int TM, int TN,
          grouped_kernels::GroupDefect Defect = grouped_kernels::GroupDefect::none>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
grouped_gemm_contiguous(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                        const int* __restrict__ group_index, __nv_bfloat16* __restrict__ D,
                        int M, int N, int K, int G)
{
    using namespace grouped_kernels;
    using S = gemm_kernels::TileShape<BM, BN, BK, TM, TN>;
    static_assert(Defect == GroupDefect::none || Defect == GroupDefect::wrong_group_offset ||
                      Defect == GroupDefect::store_spills,
                  "grouped_gemm_contiguous: defect must be none, wrong_group_offset or store_spills");

    extern __shared__ __align__(16) unsigned char smem[];
    bf16* As = reinterpret_cast<bf16*>(smem);  // [BM][BK]
    bf16* Bs = As + BM * BK;                   // [BK][BN]
    __shared__ int s_row_group[BM];            // group of each row of the tile, -1 for none
    __shared__ int s_runs[BM];                 // the tile's groups, in row order
    __shared__ int s_num_runs;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    for (int r = threadIdx.x; r < BM; r += blockDim.x) {
        const int m = m0 + r;
        const int g = m < M ? group_index[m] : -1;
        s_row_group[r] = (g >= 0 && g < G) ? g : -1;  // an id outside [0, G) is treated as padding
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        // O(BM) by one thread, once per tile: noise next to the K loop.
        int n = 0, last = -1;
        for (int r = 0; r < BM; ++r) {
            const int g = s_row_group[r];
            if (g >= 0 && g != last) s_runs[n++] = g;
            if (g >= 0) last = g;
        }
        s_num_runs = n;
    }
    __syncthreads();
    const int num_runs = s_num_runs;  // the same in every thread, so the passes below are uniform
    const int num_k_tiles = (K + BK - 1) / BK;

    for (int p = 0; p < num_runs; ++p) {
        const int g = s_runs[p];
        int b_group = g;
        if constexpr (Defect == GroupDefect::wrong_group_offset) {
            // PLANTED DEFECT: the B pointer of every pass is the tile's FIRST
            // group's: written as if it were loop-invariant (it is, for the
            // BM-aligned layout, where every tile is one pass), so in a tile
            // that holds two groups the second group's rows are computed with
            // the first group's weights, and stored as that group's rows. Should
            // be the pass's own group, s_runs[p].
            b_group = s_runs[0];
        }
        const bf16* Bg = B + static_cast<size_t>(b_group) * K * N;

        float acc[TM][TN];
        clear<S>(acc);
        accumulate_range<S>(acc, As, Bs, A, K, M, Bg, N, N, K, num_k_tiles, m0, n0);

        if constexpr (Defect == GroupDefect::store_spills) {
            // PLANTED DEFECT: the dense GEMM's store, masked by m < M alone:
            // every pass writes all the tile's rows, not only its group's. A
            // pass's spill into the later groups' rows is overwritten by their
            // own passes (same block, in order), but the tile's LAST pass
            // overwrites the rows of every earlier group in the tile with
            // A[m] @ B[last group]. Invisible while groups are BM-aligned (one
            // pass per tile; padding rows are not compared). Should store the
            // rows with s_row_group[m - m0] == g only.
            store_rows<S>(D, N, N, m0, n0, acc, [&](int m) { return m < M; });
        } else {
            store_rows<S>(D, N, N, m0, n0, acc, [&](int m) { return m < M && s_row_group[m - m0] == g; });
        }
    }
}

// ---------------------------------------------------------------------------
// masked: D[g, m, :] = A[g, m, :] @ B[g] for m < masked_m[g]; A [G, M, K],
// B [G, K, N], D [G, M, N], M = M_max.
//
// One block per (N tile, group): it walks the group's M tiles in order,
// m0 = 0, BM, ... while m0 < min(masked_m[g], M), so the tiles wholly past
// masked_m[g] are never computed (a group with masked_m[g] = 0 exits at once)
// and the grid's G * ceil(N/BN) blocks cover all G * ceil(M/BM) * ceil(N/BN)
// tiles. A computed tile stores its rows below M (rows masked_m[g] .. M-1 of
// that tile are computed too; they are not part of the result).
//
// Largest groups first: the walks are as long as ceil(masked_m[g] / BM), so
// grid slot y runs the group of rank y in masked_m, descending (ties by group
// index), and the longest walks start first when the grid does not fit at
// once. Every block computes that permutation itself (O(G^2), G small).
//
// Defects: none, wrong_group_offset, store_spills, store_box_spills.
//
// Launch: block ((BM/TM)*(BN/TN), 1, 1), grid (ceil(N/BN), G, 1), dynamic
// smem (BM*BK + BK*BN) * 2 bytes (16384 for 128x128x32), plus one int of
// static smem (ptxas reports 16 bytes).
// Args: (A, B, masked_m, D, M, N, K, G), M = M_max.
template <int BM, int BN, int BK, int TM, int TN,
          grouped_kernels::GroupDefect Defect = grouped_kernels::GroupDefect::none>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
grouped_gemm_masked(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                    const int* __restrict__ masked_m, __nv_bfloat16* __restrict__ D,
                    int M, int N, int K, int G)
{
    using namespace grouped_kernels;
    using S = gemm_kernels::TileShape<BM, BN, BK, TM, TN>;
    static_assert(Defect == GroupDefect::none || Defect == GroupDefect::wrong_group_offset ||
                      Defect == GroupDefect::store_spills || Defect == GroupDefect::store_box_spills,
                  "grouped_gemm_masked: defect must be none, wrong_group_offset, store_spills or store_box_spills");

    extern __shared__ __align__(16) unsigned char smem[];
    bf16* As = reinterpret_cast<bf16*>(smem);  // [BM][BK]
    bf16* Bs = As + BM * BK;                   // [BK][BN]
    __shared__ int s_group;

    const int slot = blockIdx.y;
    if (slot >= G) return;  // whole block: nothing has synchronized yet
    const int n0 = blockIdx.x * BN;

    // The group of rank `slot`: ranks are a permutation of 0 .. G-1, so
    // exactly one thread writes s_group.
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
        const int mg = min(max(masked_m[g], 0), M);
        int rank = 0;
        for (int h = 0; h < G; ++h) {
            const int mh = min(max(masked_m[h], 0), M);
            rank += (mh > mg || (mh == mg && h < g)) ? 1 : 0;
        }
        if (rank == slot) s_group = g;
    }
    __syncthreads();
    const int g = s_group;
    const int rows_g = min(max(masked_m[g], 0), M);

    int b_group = g;
    if constexpr (Defect == GroupDefect::wrong_group_offset) {
        // PLANTED DEFECT: B is indexed by the grid slot instead of the group
        // the slot was given. Right while the slots are in group order (no
        // sorting, or masked_m already descending); with the sort, every group
        // whose rank differs from its index is computed with the weights of
        // the group whose index is its rank, and stored as its own rows.
        // Should be b_group = g, as A and D are.
        b_group = slot;
    }
    const bf16* Ag = A + static_cast<size_t>(g) * M * K;
    const bf16* Bg = B + static_cast<size_t>(b_group) * K * N;
    bf16* Dg = D + static_cast<size_t>(g) * M * N;

    // The rows of group g's A and D that exist for the loads and the store.
    int row_end = M;
    if constexpr (Defect == GroupDefect::store_spills) {
        // PLANTED DEFECT: group g's A and D are addressed as rows
        // g*M .. G*M - 1 of the flat [G*M, K] and [G*M, N] matrices, and
        // bounded by the flat matrix's end (as the dense GEMM's loader and
        // store would) instead of the group's end, M. When M is not a multiple
        // of BM, the group's last M tile (computed when masked_m[g] > its
        // first row) reads group g+1's first rows of A and writes
        // A[g+1, r] @ B[g] over D[g+1, r], r < ceil(M/BM)*BM - M. The last
        // group's bound is M, so nothing goes past the end of A or D.
        //
        // The spill races with group g+1's own block, which writes the right
        // values into the same rows at the end of ITS first tile. The spilling
        // block writes them at the end of its last tile, one tile or more
        // later: as long as both blocks start together (the whole grid fits
        // on the GPU at once), the spill comes last and stays. The outcome
        // depends on that timing: a block of group g+1 that started more than
        // a tile's compute time after group g's (a GPU shared with other
        // work, a grid larger than one wave) would write last and hide it.
        row_end = (G - g) * M;
    }

    // The rows the store may write: the loads' bound, but for store_box_spills.
    int store_end = row_end;
    if constexpr (Defect == GroupDefect::store_box_spills) {
        // PLANTED DEFECT: the loads of A are bounded by the group's M (rows
        // past it read as zeros), but the store writes the tile's whole box
        // down to the end of the flat [G*M, N] output, as a TMA store of a
        // BM-row box over the flat D would (its bound is the tensor's, not
        // the group's). When M is not a multiple of BM, the group's last
        // M tile writes the accumulators of its zero rows, exact zeros, over
        // D[g+1, r], r < ceil(M/BM)*BM - M: the next group's first rows come
        // out 0 (written, not the poison). Like store_spills, the zeros race
        // with group g+1's own store of those rows and win while group g's
        // last tile is stored after group g+1's first. Should be M.
        store_end = (G - g) * M;
    }

    const int num_k_tiles = (K + BK - 1) / BK;
    for (int m0 = 0; m0 < rows_g; m0 += BM) {  // the tiles wholly past masked_m[g] are never computed
        float acc[TM][TN];
        clear<S>(acc);
        accumulate_range<S>(acc, As, Bs, Ag, K, row_end, Bg, N, N, K, num_k_tiles, m0, n0);
        store_rows<S>(Dg, N, N, m0, n0, acc, [&](int m) { return m < store_end; });
    }
}

// ---------------------------------------------------------------------------
// k_grouped: D[g] = A[:, Kg] @ B[Kg, :], Kg = [k_begin(g), k_begin(g) + KS[g]),
// k_begin(g) = KS[0] + ... + KS[g-1]; A [M, K], B [K, N], D [G, M, N],
// K = K_total >= sum(KS). A group's K range is clamped to [0, K), so k_sizes
// that do not fit read nothing out of bounds. An empty group's D[g] is 0 (the
// block still stores its tile).
//
// Block (x, y, z) computes the BM x BN tile (y*BM, x*BN) of D[z]. Group
// starts need not be multiples of BK: the K tiles are counted from each
// group's own start.
//
// Defects: none, short_k_range, wrong_group_offset.
//
// Launch: block ((BM/TM)*(BN/TN), 1, 1), grid (ceil(N/BN), ceil(M/BM), G),
// dynamic smem (BM*BK + BK*BN) * 2 bytes (16384 for 128x128x32), no static.
// Args: (A, B, k_sizes, D, M, N, K, G), K = K_total.
template <int BM, int BN, int BK, int TM, int TN,
          grouped_kernels::GroupDefect Defect = grouped_kernels::GroupDefect::none>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), 1)
grouped_gemm_k_grouped(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                       const int* __restrict__ k_sizes, __nv_bfloat16* __restrict__ D,
                       int M, int N, int K, int G)
{
    using namespace grouped_kernels;
    using S = gemm_kernels::TileShape<BM, BN, BK, TM, TN>;
    static_assert(Defect == GroupDefect::none || Defect == GroupDefect::short_k_range ||
                      Defect == GroupDefect::wrong_group_offset,
                  "grouped_gemm_k_grouped: defect must be none, short_k_range or wrong_group_offset");

    extern __shared__ __align__(16) unsigned char smem[];
    bf16* As = reinterpret_cast<bf16*>(smem);  // [BM][BK]
    bf16* Bs = As + BM * BK;                   // [BK][BN]

    const int g = blockIdx.z;
    if (g >= G) return;  // whole block
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // Every thread sums the sizes before it (G small; the loads are uniform).
    int k_begin = 0;
    if constexpr (Defect == GroupDefect::wrong_group_offset) {
        // PLANTED DEFECT: the prefix sum runs through g inclusive (h <= g),
        // so group g starts where group g+1 does. It reads the next group's
        // K range instead of its own, for as many columns as its own size
        // (the last group reads past the sum, into columns no group owns).
        // Should be h < g.
        for (int h = 0; h <= g; ++h) k_begin += max(k_sizes[h], 0);
    } else {
        for (int h = 0; h < g; ++h) k_begin += max(k_sizes[h], 0);
    }
    k_begin = min(k_begin, K);
    const int k_len = min(max(k_sizes[g], 0), K - k_begin);

    int num_k_tiles = (k_len + BK - 1) / BK;  // the last one may be partial
    if constexpr (Defect == GroupDefect::short_k_range) {
        // PLANTED DEFECT: the group's K-tile count rounds down, so a group
        // whose size is not a multiple of BK loses its last k_len % BK
        // columns (the partial tile at the end of its range); a group of a
        // whole number of K tiles is right. Should be (k_len + BK - 1) / BK:
        // the loads already zero-fill past the group's range.
        num_k_tiles = k_len / BK;
    }

    float acc[TM][TN];
    clear<S>(acc);
    accumulate_range<S>(acc, As, Bs, A + k_begin, K, M, B + static_cast<size_t>(k_begin) * N, N, N, k_len,
                        num_k_tiles, m0, n0);
    store_rows<S>(D + static_cast<size_t>(g) * M * N, N, N, m0, n0, acc, [&](int m) { return m < M; });
}
