#pragma once
// Stream-K GEMM: a persistent kernel whose CTAs split the whole GEMM's K iterations evenly,
// with a semaphore-ordered fixup where a tile is shared ("the last segment's CTA finishes
// the tile"):
//   D[M, N] = alpha * (A[M, K] @ B[K, N]),  bf16 A and B (row-major), f32 D (row-major),
//   fp32 accumulation.
//
// Work: T = ceil_div(M, BM) * ceil_div(N, BN) output tiles, numbered row-major over (tile_m,
// tile_n), each of ITERS = ceil_div(K, BK) K iterations (one BM x BN x BK step; the last one
// may be a partial K tile, zero-filled past K). The W = T * ITERS iterations, tile by tile,
// are cut into gridDim.x contiguous ranges: CTA c covers global iterations
// [c * W / CTAS, (c + 1) * W / CTAS) (64-bit), so every CTA gets the same work to within one
// iteration and tiles straddle CTAs. A CTA walks its range tile by tile; the part of its range
// inside one tile is a segment, and for each segment it accumulates the segment's K iterations
// of that tile (tiled_gemm.cuh's load_tiles and accumulate_tile, a 4 x 4 register tile per
// thread, 256 threads).
//
//   - The segment holds the tile's LAST K iteration: the CTA is the tile's owner. The tile's
//     other segments belong to its peers, CTAs first_cta(tile) .. c - 1 (contiguous ranges:
//     the CTAs between the one holding the tile's first iteration and this one). The owner
//     waits until all of them have published their partials, then writes
//     D = alpha * (peers' partials in CTA order + its own): one fixed order, so D is the same
//     bits on every run.
//   - Otherwise the CTA is a peer: it writes its partial (the whole BM x BN tile, f32) to its
//     own slot workspace[c][BM * BN], then every thread __threadfence()s its stores,
//     __syncthreads(), and one thread atomicAdd()s the tile's counter.
//
// A CTA is a peer for at most one tile, so one workspace slot per CTA is enough: every segment
// of a range but the last runs to the end of its tile (the range goes on past it), and so holds
// that tile's last iteration. Only the last segment can stop short of its tile's end.
//
// Why the wait matters, and why its absence shows: CTA c is a peer for the LAST tile of its
// range, and the owner (c + 1, or a later CTA when a tile spans several ranges) has that tile
// FIRST in its range. The owner reaches the fixup after its own segment of the tile; the peer
// only after its whole range. So the owner normally arrives long before its peers have written
// and must wait for them; without the wait it reads a workspace they have not written yet
// (a race, decided by timing), not a rare interleaving. The price of this order: an owner goes
// on with the rest of its range only after its peers are done, and they in turn waited for
// theirs, so the CTAs' work after their first segment runs largely one CTA after another.
// A production kernel orders each range so that peers publish early (walking it from its end,
// for instance); here the order that makes the wait matter is the point, not the speed.
//
// Semaphores: tile_counters[t] counts the peers that have published their partials of tile t.
// The owner's thread 0 spins (volatile load) until it reaches the number of peers, fences, and
// the block synchronizes; the peers' partials are then read with ld.global.cg (L2, not a
// possibly stale L1 line). The kernel leaves the counters as it found them: having seen all
// its peers arrive, the owner stores 0 (no one else touches tile t's counter again in this
// call, since every peer has already added its 1). Production allocates the counters zeroed
// once and relies on that; the workspace needs no clearing (every slot is written before its
// counter is bumped).
//
// Deadlock: an owner waits only for lower-numbered CTAs, which never wait for it, so the waits
// form no cycle; but a waiting CTA holds its SM, so all CTAS CTAs must be resident at once
// (CTAS at most the number of CTAs the GPU runs concurrently: with this kernel's 8 KiB of shared
// memory and 256 threads, several per SM; keep CTAS small, e.g. up to twice the SM count). A
// spin on a peer that is never scheduled would hang, and the harness's watchdog would report it.
//
// Planted defects (StreamKDefect; each marked "PLANTED DEFECT" where it acts):
//   counters_not_reset: the owner does not set its tile's counter back to 0. The first call on
//     zeroed counters is right; after it every shared tile's counter holds its peer count, so
//     on the second call the owner's wait passes at once and it reads its peers' workspace
//     slots before they are written, whatever they hold: zeros where the workspace is made
//     afresh for every call (the examples), the previous call's partials in production, which
//     are right only if that call had the same inputs. Wrong from the second call on; only
//     state kept across calls shows it.
//   fixup_without_wait: the owner does not wait for its counter. It reads the peers' slots when
//     it gets there, usually before they are written: a race, wrong on most calls, in varying
//     places. (The owner still stores 0, possibly before its peers add theirs, so the counters
//     are left dirty too; nothing in this variant reads them.)
//
// Launch: block (256, 1, 1), grid (CTAS, 1, 1), no dynamic shared memory (static
// (BM + BN) * BK * 2 bytes), args (A, B, D, workspace, tile_counters, M, N, K, alpha):
// workspace f32 [CTAS, BM * BN] (contents need not be initialized), tile_counters int32 [T],
// zero before the first call (the kernel keeps them zero). BM * BN = 16 * 256 (e.g. 64 x 64).

#include "tiled_gemm.cuh"

#include <cstddef>

namespace stream_k_kernels {

enum class StreamKDefect { none, counters_not_reset, fixup_without_wait };

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

// The split of the GEMM's K iterations over the CTAs. Host and device: a host emulation checks
// the arithmetic the kernel uses.
struct Partition {
    long long tiles_n;         // output tiles along N
    long long tiles;           // T
    long long iters_per_tile;  // ITERS = ceil_div(K, BK)
    long long work;            // W = T * ITERS
    int ctas;

    __host__ __device__ Partition(int M, int N, int K, int BM, int BN, int BK, int ctas_)
        : tiles_n((N + BN - 1) / BN),
          tiles(static_cast<long long>((M + BM - 1) / BM) * ((N + BN - 1) / BN)),
          iters_per_tile((K + BK - 1) / BK),
          work(tiles * iters_per_tile),
          ctas(ctas_)
    {
    }

    // CTA c covers global iterations [begin(c), begin(c + 1)); begin(ctas) = work.
    __host__ __device__ long long begin(int cta) const { return static_cast<long long>(cta) * work / ctas; }
    __host__ __device__ bool empty(int cta) const { return begin(cta + 1) == begin(cta); }

    // The CTA whose range holds the tile's first iteration, found by walking down from `owner`
    // (a CTA whose range holds a later iteration of the tile): the last CTA whose range begins
    // at or before it. The non-empty CTAs from there to owner - 1 are the tile's peers.
    __host__ __device__ int first_cta(long long tile, int owner) const
    {
        const long long tile_begin = tile * iters_per_tile;
        int cta = owner;
        while (cta > 0 && begin(cta) > tile_begin) --cta;
        return cta;
    }
};

template <int BM, int BN, int BK, StreamKDefect Defect>
__global__ void __launch_bounds__(kThreads)
gemm(const bf16* __restrict__ A, const bf16* __restrict__ B, float* __restrict__ D, float* __restrict__ workspace,
     int* __restrict__ tile_counters, int M, int N, int K, float alpha)
{
    using S = gemm_kernels::TileShape<BM, BN, BK, 4, 4>;
    static_assert(S::kThreads == kThreads, "a 4 x 4 register tile per thread: BM * BN must be 16 * 256");
    constexpr int kTileElements = BM * BN;

    __shared__ bf16 As[BM * BK];  // [BM][BK]
    __shared__ bf16 Bs[BK * BN];  // [BK][BN]

    const Partition part(M, N, K, BM, BN, BK, static_cast<int>(gridDim.x));
    const int cta = static_cast<int>(blockIdx.x);
    const long long range_end = part.begin(cta + 1);
    // This thread's elements of a tile: rows micro_row + i, columns micro_col + j.
    const int row = gemm_kernels::micro_row<S>(), col = gemm_kernels::micro_col<S>();

    for (long long iter = part.begin(cta); iter < range_end;) {
        const long long tile = iter / part.iters_per_tile;
        const long long tile_begin = tile * part.iters_per_tile, tile_end = tile_begin + part.iters_per_tile;
        const long long segment_end = min(range_end, tile_end);
        const int m0 = static_cast<int>(tile / part.tiles_n) * BM, n0 = static_cast<int>(tile % part.tiles_n) * BN;

        // This CTA's K iterations of the tile.
        float acc[S::TM][S::TN] = {};
        for (long long it = iter; it < segment_end; ++it) {
            const int k0 = static_cast<int>(it - tile_begin) * BK;
            gemm_kernels::load_tiles<S, gemm_kernels::Layout::RowMajor>(As, Bs, A, B, M, N, K, m0, n0, k0);
            __syncthreads();  // the whole tile is in shared memory before anyone reads it
            gemm_kernels::accumulate_tile<S>(As, Bs, acc);
            __syncthreads();  // everyone has read it before the next load overwrites it
        }

        if (segment_end < tile_end) {
            // Peer: this is the last segment of the range (see the header). Publish the partial,
            // the whole tile (rows and columns past M and N hold zeros the loads filled in).
            float* slot = workspace + static_cast<size_t>(cta) * kTileElements;
#pragma unroll
            for (int i = 0; i < S::TM; ++i) {
#pragma unroll
                for (int j = 0; j < S::TN; ++j) slot[(row + i) * BN + col + j] = acc[i][j];
            }
            __threadfence();  // each thread's stores reach the device scope before the signal...
            __syncthreads();  // ...and every thread's have before thread 0 gives it
            if (threadIdx.x == 0) atomicAdd(&tile_counters[tile], 1);
        } else {
            // Owner: add the peers' partials, in CTA order, then its own.
            const int first = part.first_cta(tile, cta);
            int peers = 0;
            for (int p = first; p < cta; ++p) peers += part.empty(p) ? 0 : 1;
            if (peers > 0) {
                if (threadIdx.x == 0) {
                    if constexpr (Defect != StreamKDefect::fixup_without_wait) {
                        const volatile int* counter = tile_counters + tile;
                        while (*counter < peers) {
                        }
                    }
                    // PLANTED DEFECT (fixup_without_wait): the loop above is left out, so the
                    // peers' slots below are read whenever the owner gets here, written or not.
                    __threadfence();  // the peers' partials are read after the counter was seen
                    if constexpr (Defect != StreamKDefect::counters_not_reset) {
                        // Every peer has added its 1 (the count reached `peers`, and only they
                        // add), so nobody touches this counter again in this call.
                        tile_counters[tile] = 0;
                    }
                    // PLANTED DEFECT (counters_not_reset): the store above is left out. The
                    // counter keeps `peers`, and the next call's wait on it passes at once.
                }
                __syncthreads();  // no thread reads a peer's slot before thread 0 saw the count
            }
            float total[S::TM][S::TN] = {};
            for (int p = first; p < cta; ++p) {
                if (part.empty(p)) continue;
                const float* slot = workspace + static_cast<size_t>(p) * kTileElements;
#pragma unroll
                for (int i = 0; i < S::TM; ++i) {
#pragma unroll
                    for (int j = 0; j < S::TN; ++j) total[i][j] += __ldcg(slot + (row + i) * BN + col + j);
                }
            }
#pragma unroll
            for (int i = 0; i < S::TM; ++i) {
                const int m = m0 + row + i;
                if (m >= M) break;
#pragma unroll
                for (int j = 0; j < S::TN; ++j) {
                    const int n = n0 + col + j;
                    if (n >= N) break;
                    D[static_cast<size_t>(m) * N + n] = alpha * (total[i][j] + acc[i][j]);
                }
            }
        }
        iter = segment_end;
    }
}

}  // namespace stream_k_kernels
