#pragma once
// Races between the generic proxy and the ASYNC PROXY (TMA) in shared memory: test kernels for a
// race checker that sees TMA loads and stores. One persistent, warp-specialized Hopper (sm_90a)
// bf16 GEMM with three planted defects whose races are in the ORDERING of the accesses, which a
// checker must see. Measured on the H200 (docs/gpu-validation.md, run 56, 100 launches per
// --stress mode): store_buffer_reused_early never showed in the numbers, load_stage_released_early
// showed in 1-4 of 5 invocations, no_proxy_fence in every one.
//
//   D[M, N] = A[M, K] @ B[K, N],  bf16 in and out, fp32 accumulation.
//
// A is row-major [M, K], B is stored as a row-major [N, K] matrix (column-major [K, N], a
// linear-layer weight), D is row-major [M, N]. All three are TMA descriptors (CUtensorMap, const
// __grid_constant__ parameters), encoded on the host:
//   map_a: dims {K, M} (innermost first), box {64, 128}, swizzle 128B   (as tma_gemm.cuh)
//   map_b: dims {K, N}, box {64, 128}, swizzle 128B                     (as tma_gemm.cuh)
//   map_d: dims {N, M}, box {128, 16} (BN columns x 16 rows: one strip), swizzle none: each
//          staging strip below is a dense row-major [16][BN] bf16 sub-tile, the box's layout
// TMA needs 16-byte row strides: K % 8 == 0 and N % 8 == 0. Otherwise any M, N, K >= 1: the loads
// zero-fill the parts of a box outside A and B, and the TMA store writes only the part of its box
// inside D, so partial tiles need no masking.
//
// Block: 9 warps, 288 threads. Warps 0-7 are the consumers (the math warps of tma_gemm.cuh, 2 x 4,
// 64 x 32 of the 128 x 128 tile each); warp 8 is the producer, whose lane 0 issues every TMA load.
// Persistent: CTA b computes the output tiles b, b + gridDim.x, ... in row-major tile order, the
// producer running ahead of the consumers through the same tile sequence.
//
// Main loop: a ring of Stages (A, B) stages (tma_gemm.cuh's TmaGemmShared: 128B-swizzled, each on
// a 1024-byte boundary) with two mbarriers per stage:
//   full[s]  (1 arrival + transaction bytes): the producer's arrive.expect_tx, then its two TMA
//            loads (cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes);
//            the consumers wait on it (mbarrier.try_wait.parity).
//   empty[s] (256 arrivals): every consumer thread arrives (mbarrier.arrive.release.cta) once it
//            has read the stage with its last ldmatrix; the producer waits on it (try_wait.parity,
//            parity one behind, so the first round passes at once) before loading into the stage.
// The consumers read each stage in 4 k16 slices (ldmatrix.x4 + mma.sync.m16n8k16).
//
// Epilogue, per tile, by the 256 consumer threads (the producer warp never touches the staging):
//   (1) thread 0 waits until every TMA store of the previous tile has finished READING its strip
//       (cp.async.bulk.wait_group.read 0);
//   (2) a named barrier (bar.sync 1, 256) holds the other consumers until thread 0 is past (1);
//   then for each of 4 steps j:
//   (3) every consumer warp writes its accumulators of rows 16 j .. 16 j + 15 of its 64-row half,
//       rounded to bf16, into that row block's strip (strips j and 4 + j: st.shared, 4 bytes a
//       store) and orders those generic writes before the async proxy's reads
//       (fence.proxy.async.shared::cta);
//   (4) a named barrier (bar.sync 2, 256): both strips are complete;
//   (5) thread 0 stores the two strips (cp.async.bulk.tensor.2d.global.shared::cta.bulk_group; a
//       strip that starts at or past row M is not stored) and commits them
//       (cp.async.bulk.commit_group), without waiting.
// The staging area is one 16-row strip per row block of the tile (8, 4 KiB each), so that a strip
// is written again only in the NEXT tile's epilogue, after that tile's whole main loop. At the
// end thread 0 waits for all its stores to complete (wait_group 0) before the CTA exits.
//
// Planted defects (RaceDefect; each one change, marked `PLANTED DEFECT`):
//   store_buffer_reused_early  step (2) is a __syncwarp() instead of the named barrier: only the
//       issuing thread's warp (warp 0) is held until thread 0's wait_group.read is done. Warps 1-7
//       write step 0's strips of the new tile, strip 0 (warps 1-3) and strip 4 (warps 4-7), with
//       nothing ordering those writes after the async reads of the previous tile's stores of the
//       same strips (a write-after-read race, generic write vs. async-proxy read). Steps 1-3 are
//       ordered: their writes follow step 0's bar.sync 2, which thread 0 reaches after its wait.
//       Hidden: strips 0 and 4 were stored a whole main loop earlier (K / 64 k-tiles, tens of us with
//       the examples' K = 3088, whose loads for k-tiles 4.. are issued after the stores); reading
//       4 KiB takes the TMA unit well under a microsecond. persistent_tma_store.cuh's earlier
//       whole-tile version, its buffer reused a main loop later, failed 0 of 204 invocations, 136
//       of them under bandwidth or l2 stress (docs/gpu-validation.md, runs 34-35).
//   load_stage_released_early  every consumer thread arrives on empty[s] BEFORE the ldmatrix
//       reads of the stage's last k16 slice instead of after them: the producer's next TMA load
//       into the stage is not ordered after those reads (a write-after-read race, async-proxy write
//       vs. ldmatrix). Hidden: the producer waits on empty[s] until the LAST consumer arrives, then
//       arms full[s] and issues two loads that must fetch 32 KiB from L2 or DRAM (hundreds of
//       cycles at the very least) before the first byte lands, while the last arriving warp reads
//       the slice with its next 6 ldmatrix, a few dozen cycles after its arrival.
//   no_proxy_fence             step (3) without fence.proxy.async.shared::cta: the staging writes
//       reach the barrier and the TMA store with nothing ordering the generic proxy's writes before
//       the async proxy's reads (a read-after-write race across proxies). Everything else as in
//       `none`, the wait and the named barrier of (1)-(2) included. Predicted hidden (the writes
//       done by the time every warp is past bar.sync and thread 0 has issued the store), it is
//       not: on the H200 random inputs failed in every invocation, in every --stress mode
//       (docs/gpu-validation.md, run 56): the TMA unit read stale strip contents.
//
// Launch: block (288, 1, 1); grid (CTAS, 1, 1) for any CTAS >= 1 (CTAs past the last tile do
// nothing); dynamic shared memory sizeof(async_race_kernels::AsyncRaceShared<128, 128, 64, 4>) +
// 1024 = 165888 + 1024 = 166912 bytes (the + 1024 is for rounding the base up to 1024 bytes, see
// tma_kernels::aligned_shared_storage; above 48 KiB, so cudaFuncAttributeMaxDynamicSharedMemorySize
// must be raised first). Argument order: async_race_gemm(map_a, map_b, map_d, M, N, K).
//
// Shared-memory layout (offsets from the 1024-aligned base, BM = BN = 128, BK = 64, Stages = 4):
//   pipe.stage[s].a   s * 32768           [128][64] bf16, 128B swizzle, 16 KiB (s = 0..3)
//   pipe.stage[s].b   s * 32768 + 16384   [128][64] bf16, 128B swizzle, 16 KiB
//   pipe.full[s]      131072 + 8 s        mbarrier (TmaGemmShared then pads to 132096)
//   empty[s]          132096 + 8 s        mbarrier
//   staging[r]        133120 + 4096 r     [16][128] bf16, dense, strip r = rows 16 r .. 16 r + 15
//                                         of the tile (r = 0..7); ends at 165888 = sizeof

#include "persistent_tma_store.cuh"  // tma_kernels (tma_gemm.cuh) and the TMA-store wrappers
#include "mbarrier_pipeline.cuh"     // pipeline_kernels::mbar_arrive (mbarrier.arrive.release.cta)

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace async_race_kernels {

enum class RaceDefect { none, store_buffer_reused_early, load_stage_released_early, no_proxy_fence };

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = 32 * kConsumerWarps;  // 256: the math warps
constexpr int kThreads = kConsumers + 32;        // + the producer warp
constexpr int kStripRows = 16;                   // rows of D per TMA store: map_d's box is BN x 16

constexpr uint32_t kStagingFreeBarrier = tma_store_kernels::kStagingBarrier;  // 1: step (2)
constexpr uint32_t kStripsReadyBarrier = 2;                                     // step (4)

// tma_gemm.cuh's ring (stages and full barriers), the empty barriers, and the staging strips: one
// per 16-row block of the tile, each 4 KiB and on a 1024-byte boundary (TMA wants 128).
template <int BM, int BN, int BK, int Stages>
struct AsyncRaceShared {
    tma_kernels::TmaGemmShared<BM, BN, BK, Stages> pipe;
    // empty[s] completes a phase when all 256 consumer threads have read stage s.
    alignas(8) uint64_t empty[Stages];
    alignas(1024) __nv_bfloat16 staging[BM / kStripRows][kStripRows * BN];
};

// acc += one k16 slice (k = 16 ks .. 16 ks + 15) of the stage, for this warp's 64 x 32 share:
// tma_gemm.cuh's mma_stage, one slice at a time, split into the ldmatrix reads (load) and the
// MMAs (mma) so that the release of the stage can sit between them.
template <int BM, int BN, int BK>
struct Slice {
    using W = tma_kernels::WarpTiling<BM, BN>;
    uint32_t a[W::kTilesM][4];
    uint32_t b[W::kTilesN][2];

    __device__ __forceinline__ void load(uint32_t a_base, uint32_t b_base, int ks)
    {
        using namespace tma_kernels;
        constexpr uint32_t kRowBytes = BK * sizeof(__nv_bfloat16);  // 128
        const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
        const int wm = (warp / W::kWarpsN) * W::WM, wn = (warp % W::kWarpsN) * W::WN;
        // tma_gemm.cuh's ldmatrix row and chunk per lane (the derivation is above WarpTiling).
        const int a_row = wm + (lane % 16), a_chunk = lane / 16;
        const int b_row = wn + (lane % 8) + 8 * (lane / 16), b_chunk = (lane / 8) % 2;
#pragma unroll
        for (int i = 0; i < W::kTilesM; ++i) {
            const uint32_t off = static_cast<uint32_t>(a_row + 16 * i) * kRowBytes + (2 * ks + a_chunk) * 16u;
            ldmatrix_x4(a[i], a_base + swizzle_offset<SmemSwizzle::B128>(off));
        }
#pragma unroll
        for (int j = 0; j < W::kTilesN; j += 2) {
            const uint32_t off = static_cast<uint32_t>(b_row + 8 * j) * kRowBytes + (2 * ks + b_chunk) * 16u;
            uint32_t r[4];
            ldmatrix_x4(r, b_base + swizzle_offset<SmemSwizzle::B128>(off));
            b[j][0] = r[0];
            b[j][1] = r[1];
            b[j + 1][0] = r[2];
            b[j + 1][1] = r[3];
        }
    }

    __device__ __forceinline__ void mma(float (&acc)[W::kTilesM][W::kTilesN][4]) const
    {
#pragma unroll
        for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
            for (int j = 0; j < W::kTilesN; ++j) tma_kernels::mma_bf16_16816(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
};

// A consumer thread's use of one landed stage: its 4 k16 slices, and its arrival on empty[s]
// once it has read the stage for the last time (after the last slice's ldmatrix, before that
// slice's MMAs, which work on registers only).
template <int BM, int BN, int BK, RaceDefect Defect>
__device__ __forceinline__ void consume_stage(
    const __nv_bfloat16* As, const __nv_bfloat16* Bs, uint64_t* empty,
    float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    constexpr int kSlices = BK / 16;
    const uint32_t a_base = tma_kernels::smem_u32(As), b_base = tma_kernels::smem_u32(Bs);
#pragma unroll
    for (int ks = 0; ks < kSlices; ++ks) {
        Slice<BM, BN, BK> slice;
        if constexpr (Defect == RaceDefect::load_stage_released_early) {
            // PLANTED DEFECT (load_stage_released_early): the stage is handed back one step too
            // soon, BEFORE the ldmatrix reads of its last k16 slice (they follow right below),
            // as if the slice's fragments were already in registers. Once the last consumer has
            // arrived, the producer may start the next TMA load into this stage while those reads
            // are still to come: nothing orders the async proxy's write after them. It would take
            // a warp stalled between this arrive and its next 6 ldmatrix for longer than the
            // producer's wake-up plus a 32 KiB L2/DRAM round trip to read the next k-tile's data.
            // Should be after slice.load(), as in RaceDefect::none.
            if (ks == kSlices - 1) pipeline_kernels::mbar_arrive(empty);
        }
        slice.load(a_base, b_base, ks);
        if constexpr (Defect != RaceDefect::load_stage_released_early) {
            // Empty: this thread's last read of the stage is done (release: the ldmatrix reads are
            // ordered before the arrival, and so before the producer's next load into the stage).
            if (ks == kSlices - 1) pipeline_kernels::mbar_arrive(empty);
        }
        slice.mma(acc);
    }
}

// The consumers' main loop of one tile: wait for each k-tile's stage, consume and release it.
// The producer issues exactly the same k-tiles in the same order, so both sides' PipelineStates
// agree on slot and parity from tile to tile.
template <int BM, int BN, int BK, int Stages, RaceDefect Defect>
__device__ __forceinline__ void consumer_mainloop(
    AsyncRaceShared<BM, BN, BK, Stages>& sh, int K, tma_kernels::PipelineState<Stages>& pipe,
    float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    using W = tma_kernels::WarpTiling<BM, BN>;
#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < W::kTilesN; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        }
    }
    const int k_tiles = (K + BK - 1) / BK;  // the last may be partial: TMA zero-fills past K
    for (int kt = 0; kt < k_tiles; ++kt) {
        tma_kernels::mbarrier_wait(&sh.pipe.full[pipe.stage], pipe.phase);  // k-tile kt has landed
        consume_stage<BM, BN, BK, Defect>(sh.pipe.stage[pipe.stage].a, sh.pipe.stage[pipe.stage].b,
                                          &sh.empty[pipe.stage], acc);
        pipe.advance();
    }
}

// The producer (one thread): every k-tile of every tile of this CTA, each into the next slot of
// the ring once the consumers have released it. The empty barrier's first phase is still running
// in the first round, so waiting for the parity before it (phase ^ 1) passes at once there.
template <int BM, int BN, int BK, int Stages>
__device__ __forceinline__ void producer_loop(AsyncRaceShared<BM, BN, BK, Stages>& sh, const CUtensorMap* map_a,
                                              const CUtensorMap* map_b, int M, int N, int K)
{
    using namespace tma_kernels;
    const int tiles_n = (N + BN - 1) / BN;
    const int tiles = ((M + BM - 1) / BM) * tiles_n;
    const int k_tiles = (K + BK - 1) / BK;
    PipelineState<Stages> pipe;
    for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
        const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; ++kt) {
            mbarrier_wait(&sh.empty[pipe.stage], pipe.phase ^ 1u);  // every consumer has read the slot
            issue_stage<BM, BN, BK, Stages, BM>(sh.pipe, pipe.stage, map_a, map_b, m0, n0, kt * BK);
            pipe.advance();
        }
    }
}

// The epilogue of one tile: steps (1) to (5) of the header comment. Accumulator acc[i][j][2h + e]
// is element (wm + 16 i + g + 8 h, wn + 8 j + 2 t + e) of the tile (tma_gemm.cuh's fragment
// layout), so warp w's rows 16 i .. 16 i + 15 are all of strip 4 (w / 4) + i, written in step i.
template <int BM, int BN, RaceDefect Defect>
__device__ __forceinline__ void store_epilogue(
    __nv_bfloat16 (&staging)[BM / kStripRows][kStripRows * BN], const CUtensorMap* map_d, int M, int m0, int n0,
    const float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    using namespace tma_store_kernels;
    using W = tma_kernels::WarpTiling<BM, BN>;
    static_assert(W::kWarpsM == 2 && W::WM == 4 * kStripRows, "step i writes strips i and kTilesM + i");
    static_assert(W::kTilesM * kStripRows == W::WM, "a warp's m16 blocks are whole strips");

    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int wrow = warp / W::kWarpsN;  // 0: rows 0-63 (strips 0-3), 1: rows 64-127 (strips 4-7)
    const int col0 = (warp % W::kWarpsN) * W::WN + 2 * t;

    // (1) The previous tile's stores (issued a whole main loop ago) must be done reading the
    // strips. Only the thread that issued them can wait for them.
    if (threadIdx.x == 0) bulk_wait_group_read<0>();

    if constexpr (Defect == RaceDefect::store_buffer_reused_early) {
        // PLANTED DEFECT (store_buffer_reused_early): only the issuing thread's warp is held
        // until thread 0's wait is over; the named barrier that should hold warps 1-7 as well is
        // missing. They go on to write step 0's strips (0 and 4) of this tile with nothing
        // ordering those writes after the previous tile's TMA stores' reads of the same strips
        // (later steps are ordered by step 0's bar.sync 2, which thread 0 reaches after its
        // wait). Those stores were issued before this tile's main loop, whose later k-tiles they
        // precede in the same TMA unit, and read 4 KiB each: long done in practice. Should be
        // named_barrier_sync(kStagingFreeBarrier, kConsumers), as in RaceDefect::none.
        __syncwarp();
    } else {
        // (2) Nobody writes a strip before thread 0 is past its wait.
        named_barrier_sync(kStagingFreeBarrier, kConsumers);
    }

#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
        // (3) fp32 -> bf16 (round to nearest even) into strip 4 wrow + i, row g + 8 h. No masking:
        // rows past M and columns past N hold zeros (TMA zero-filled A and B there), and the store
        // clips them.
        __nv_bfloat16* strip = staging[wrow * W::kTilesM + i];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            __nv_bfloat16* row = strip + (g + 8 * h) * BN;
#pragma unroll
            for (int j = 0; j < W::kTilesN; ++j) {
                *reinterpret_cast<__nv_bfloat162*>(row + col0 + 8 * j) =
                    __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
        if constexpr (Defect == RaceDefect::no_proxy_fence) {
            // PLANTED DEFECT (no_proxy_fence): the fence between the staging writes (generic
            // proxy) and the TMA store's reads of them (async proxy) is missing; the barrier
            // below orders the writes for the other threads, not for the async proxy. The
            // writes are done by the time thread 0 issues the store, so the store reads them in
            // practice. Should be fence_proxy_async_shared(), as in RaceDefect::none.
        } else {
            fence_proxy_async_shared();  // these writes, before the async proxy's reads
        }

        // (4) Strips i and kTilesM + i are complete.
        named_barrier_sync(kStripsReadyBarrier, kConsumers);

        // (5) One thread stores them; they drain in the background. Coordinates innermost first:
        // (column n0, row m0 + 16 r). A strip that starts at or past row M (none of it in D) is
        // not stored.
        if (threadIdx.x == 0) {
#pragma unroll
            for (int hh = 0; hh < W::kWarpsM; ++hh) {
                const int r = hh * W::kTilesM + i;
                if (m0 + r * kStripRows < M) tma_store_2d(map_d, staging[r], n0, m0 + r * kStripRows);
            }
            bulk_commit_group();
        }
    }
}

}  // namespace async_race_kernels

// Persistent warp-specialized GEMM, grid (CTAS, 1, 1), block (288, 1, 1), dynamic smem
// sizeof(async_race_kernels::AsyncRaceShared<BM, BN, BK, Stages>) + 1024. Written for BM = BN =
// 128, BK = 64 (tma_gemm.cuh's tiles), any Stages >= 1 (4 in the examples).
// PLANTED DEFECTS with Defect != RaceDefect::none: see consume_stage (load_stage_released_early)
// and store_epilogue (store_buffer_reused_early, no_proxy_fence).
template <int BM, int BN, int BK, int Stages, async_race_kernels::RaceDefect Defect>
__global__ void __launch_bounds__(async_race_kernels::kThreads, 1)
    async_race_gemm(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_d, int M, int N, int K)
{
    using namespace tma_kernels;
    using namespace async_race_kernels;
    using Shared = AsyncRaceShared<BM, BN, BK, Stages>;
    using W = WarpTiling<BM, BN>;
    static_assert(W::kThreads == kConsumers, "the math is written for 8 consumer warps");
    static_assert(BM == 128 && BN == 128 && BK == 64, "tma_gemm.cuh's 128 x 128 x 64 tiles");
    static_assert(Stages >= 1, "at least one stage");

    Shared& sh = aligned_shared_storage<Shared>();
    if (threadIdx.x == 0) {
        prefetch_tensor_map(&map_d);
#pragma unroll
        for (int s = 0; s < Stages; ++s) mbarrier_init(&sh.empty[s], kConsumers);
    }
    // Thread 0 also initializes the full barriers and fences all of them (fence.mbarrier_init,
    // which covers this thread's earlier inits too); ends in a __syncthreads() of all 288, the
    // last block-wide barrier: after it the producer warp goes its own way.
    init_pipeline(sh.pipe, &map_a, &map_b);

    if (threadIdx.x >= kConsumers) {
        // Producer warp: lane 0 issues the loads, the other lanes have nothing to do. Every load
        // it issues is waited for by the consumers, so none is in flight when the CTA exits.
        if (threadIdx.x == kConsumers) producer_loop<BM, BN, BK, Stages>(sh, &map_a, &map_b, M, N, K);
        return;
    }

    const int tiles_n = (N + BN - 1) / BN;
    const int tiles = ((M + BM - 1) / BM) * tiles_n;
    PipelineState<Stages> pipe;
    float acc[W::kTilesM][W::kTilesN][4];
    // The trip count depends on blockIdx alone: every consumer reaches every named barrier.
    for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
        const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        consumer_mainloop<BM, BN, BK, Stages, Defect>(sh, K, pipe, acc);
        store_epilogue<BM, BN, Defect>(sh.staging, &map_d, M, m0, n0, acc);
    }

    // The last stores must have read their strips before the CTA's shared memory is released, and
    // their writes are waited for as well, so that the kernel's end means D is written.
    if (threadIdx.x == 0) tma_store_kernels::bulk_wait_group<0>();
}
