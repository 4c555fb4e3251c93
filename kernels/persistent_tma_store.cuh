#pragma once
// A persistent Hopper (sm_90a) bf16 GEMM whose epilogue leaves through a TMA store:
//   D[M, N] = A[M, K] @ B[K, N],  bf16 in and out, fp32 accumulation.
// A is row-major [M, K], B is stored as a row-major [N, K] matrix (column-major [K, N], a
// linear-layer weight), D is row-major [M, N]. All three arrive as TMA descriptors
// (CUtensorMap, const __grid_constant__ parameters), encoded on the host:
//   map_a: dims {K, M} (innermost first), box {64, 128}, swizzle 128B   (as tma_gemm.cuh)
//   map_b: dims {K, N}, box {64, 128}, swizzle 128B                     (as tma_gemm.cuh)
//   map_d: dims {N, M}, box {128, 32} (BN columns x 32 rows: one sub-tile), swizzle none: the
//          staging buffers below are dense row-major [32][BN] bf16 sub-tiles, the box's layout
// TMA needs 16-byte row strides: K % 8 == 0 and N % 8 == 0. Otherwise any M, N, K >= 1: the
// loads zero-fill the parts of a box outside A and B, and the TMA store writes only the part of
// its box that lies inside D (TMA clips stores at the tensor's bounds), so partial tiles need no
// masking anywhere.
//
// Persistent: the grid is a runtime number of CTAs (the spec's CTAS, usually fewer than the
// tiles), and CTA b computes the output tiles b, b + gridDim.x, b + 2 gridDim.x, ... in
// row-major tile order. The main loop of one tile is tma_gemm.cuh's (the same TMA + mbarrier
// ring of 4 stages, ldmatrix + mma.sync.m16n8k16, 8 warps as 2 x 4), with one PipelineState
// carried from tile to tile as in tma_task.cuh. The epilogue leaves as CUTLASS's sm90 TMA
// epilogue does: in sub-tiles of 32 rows, through a ring of StagingBuffers (2) shared-memory
// buffers, so that sub-tile s + 2 reuses the buffer that sub-tile s's store may still be reading.
// For each of the tile's 4 sub-tiles:
//
//   (1) thread 0 waits until the store that last read this sub-tile's buffer is done READING it
//       (cp.async.bulk.wait_group.read StagingBuffers - 1: the newest store may go on);
//   (2) a named barrier (bar.sync 1, 256) holds the other 255 threads until thread 0 is past
//       that wait: nobody overwrites the buffer while the store still reads it;
//   (3) the 4 warps whose accumulators hold the sub-tile's rows write them, rounded to bf16, into
//       the buffer and make those generic-proxy writes visible to the async proxy
//       (fence.proxy.async);
//   (4) __syncthreads(): the whole sub-tile is in the buffer;
//   (5) thread 0 issues the TMA store of the buffer to the sub-tile's place in D
//       (cp.async.bulk.tensor.2d.global.shared::cta.bulk_group) and commits it as a bulk group;
//       nobody waits for it here.
// At the very end thread 0 waits for its last store to complete (wait_group 0) before the CTA
// exits and its shared memory goes away.
//
// PLANTED DEFECT (tma_store_kernels::StoreDefect::no_store_barrier): step (2) is missing. Only
// thread 0 (one thread of warp 0) waits for the store; the warps that write sub-tile s + 2 go
// straight on to step (3) and may overwrite the buffer while the TMA unit still reads sub-tile
// s out of it, so part of sub-tile s in D gets the values of sub-tile s + 2, 64 rows further
// down the tile: a 32-row band of D holding its neighbour's values. Upstream's fix was exactly
// this one named barrier.
//
// Why the defect hides: between the store of sub-tile s and the first write of s + 2 lie the
// writes of sub-tile s + 1 (16 four-byte stores per thread of 4 warps) and a __syncthreads():
// a few hundred cycles, against the time the TMA unit needs to read 8 KiB of shared memory,
// which is shorter unless the memory system pushes back on the store's writes to global memory.
// compute-sanitizer's racecheck does not see the async proxy's reads at all. Congestion that
// holds the store's drain shows it: on the H200, 0 of 100 invocations without stress, 99 of 100
// under --stress bandwidth, 95 under l2 (docs/gpu-validation.md, run 38).
//
// Delay points (Delays = true): repro::delay<Delays>(0) just before each sub-tile's writes
// (repro_trace.cuh; --stress jitter sleeps the warps there). A thread-timing perturbation cannot
// lengthen the async store (0 of 100 under jitter): this is where a user would try jitter
// first, and the measure of what it does not find. Disabled, a point is one constant-cache load
// and a branch; a costlier one here widened the window enough to hide the race (run 36).
//
// Launch: block (256, 1, 1); grid (CTAS, 1, 1) for any CTAS >= 1 (CTAs past the last tile do
// nothing); dynamic shared memory sizeof(tma_store_kernels::PersistentShared<128, 128, 64, 4, 2>)
// + 1024 bytes (the + 1024 is for rounding the base up to 1024 bytes, see
// tma_kernels::aligned_shared_storage; above 48 KiB, so cudaFuncAttributeMaxDynamicSharedMemorySize
// must be raised first). Argument order: persistent_tma_store(map_a, map_b, map_d, M, N, K).

#include "tma_gemm.cuh"
#include "../crates/repro-contract/instrument/repro_trace.cuh"

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace tma_store_kernels {

enum class StoreDefect { none, no_store_barrier };

constexpr int kSubtileRows = 32;  // rows of D per TMA store: the map_d box is BN x 32

// The pipeline of tma_gemm.cuh (4 stages of A and B tiles, each 1024-byte aligned, and their
// full barriers), then the epilogue's staging ring: StagingBuffers sub-tiles of kSubtileRows x BN
// bf16, row-major and dense, as the unswizzled TMA store box reads them. Its own memory: the main
// loop never touches it, so the only writers are the epilogues and the only reader is the TMA
// store.
template <int BM, int BN, int BK, int Stages, int StagingBuffers = 2>
struct PersistentShared {
    tma_kernels::TmaGemmShared<BM, BN, BK, Stages> pipe;
    alignas(1024) __nv_bfloat16 staging[StagingBuffers][kSubtileRows * BN];  // 128-byte aligned for TMA
};

// ---------------------------------------------------------------------------------------------
// PTX wrappers for the store side of TMA (sm_90). Shared-memory operands are 32-bit
// shared-window addresses (tma_kernels::smem_u32).
// ---------------------------------------------------------------------------------------------

// Orders this thread's earlier generic-proxy writes to shared memory (st.shared) before later
// async-proxy accesses (the TMA unit reading the buffer). Every thread that wrote the buffer
// runs it before the barrier that precedes the store.
__device__ __forceinline__ void fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One 2-D TMA store: the box of `map` whose first element is (inner, outer) = (c0, c1) is
// written from shared memory at src (laid out as the descriptor says: here dense row-major,
// unswizzled). Elements of the box outside the tensor are not written. Completion is tracked
// per thread in bulk async-groups: the store joins the thread's current group, closed by
// bulk_commit_group().
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(tma_kernels::smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit_group()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most `Pending` of this thread's committed bulk groups still READ their source:
// afterwards their shared-memory source may be overwritten (their global writes may still be
// on the way). Only the thread that issued the stores can wait for them.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}

// Waits until at most `Pending` of this thread's committed bulk groups are incomplete, their
// writes to global memory included.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group()
{
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(Pending) : "memory");
}

// bar.sync on a barrier of its own (0 is __syncthreads()'s), for `threads` threads (a multiple
// of 32).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

constexpr uint32_t kStagingBarrier = 1;  // named barrier id of step (2)

// ---------------------------------------------------------------------------------------------
// The main loop of one BM x BN tile at (m0, n0): tma_gemm.cuh's gemm_tile without its epilogue.
// Same phase bookkeeping: the tile issues and waits for exactly its own k-tiles, so the ring is
// drained on return and `pipe` names the slot and parity the next tile starts with. The
// __syncthreads() after each k-tile is the ring's "empty" barrier; it orders nothing about the
// staging buffer, which only the epilogue and the TMA store touch.
// ---------------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int Stages>
__device__ __forceinline__ void mainloop_tile(
    tma_kernels::TmaGemmShared<BM, BN, BK, Stages>& sh, const CUtensorMap* map_a, const CUtensorMap* map_b, int K,
    int m0, int n0, tma_kernels::PipelineState<Stages>& pipe,
    float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    using namespace tma_kernels;
    using W = WarpTiling<BM, BN>;
    static_assert(BK * sizeof(__nv_bfloat16) == 128,
                  "one tile row is one 128-byte TMA box row (BK = 64 bf16): the swizzle math assumes it");
    static_assert(BM <= 256 && BN <= 256, "TMA boxes have at most 256 rows");

    const int k_tiles = (K + BK - 1) / BK;  // the last may be partial: TMA zero-fills past K

    if (threadIdx.x == 0) {
        int s = pipe.stage;
        for (int i = 0; i < Stages && i < k_tiles; ++i) {
            issue_stage<BM, BN, BK, Stages, BM>(sh, s, map_a, map_b, m0, n0, i * BK);
            s = s + 1 == Stages ? 0 : s + 1;
        }
    }

#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < W::kTilesN; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        }
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        mbarrier_wait(&sh.full[pipe.stage], pipe.phase);  // k-tile kt has landed
        mma_stage<BM, BN, BK, SmemSwizzle::B128>(sh.stage[pipe.stage].a, sh.stage[pipe.stage].b, acc);
        __syncthreads();  // every warp is done with the slot: it may be refilled
        if (threadIdx.x == 0 && kt + Stages < k_tiles) {
            issue_stage<BM, BN, BK, Stages, BM>(sh, pipe.stage, map_a, map_b, m0, n0, (kt + Stages) * BK);
        }
        pipe.advance();
    }
}

// The epilogue of one tile: steps (1) to (5) of the header comment, once per sub-tile.
// Accumulator acc[i][j][2h + e] is element (wm + 16 i + g + 8 h, wn + 8 j + 2 t + e) of the tile
// (tma_gemm.cuh's fragment layout), so each thread writes bf16 pairs, four bytes at a time; the
// rows 16 i .. 16 i + 15 of a warp's 64 lie in one sub-tile of 32.
template <int BM, int BN, int StagingBuffers, StoreDefect Defect, bool Delays>
__device__ __forceinline__ void store_epilogue(
    __nv_bfloat16 (&staging)[StagingBuffers][kSubtileRows * BN], const CUtensorMap* map_d, int m0, int n0,
    const float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    using W = tma_kernels::WarpTiling<BM, BN>;
    static_assert(BM % kSubtileRows == 0 && W::WM % kSubtileRows == 0, "sub-tiles of whole warp row blocks");
    static_assert(StagingBuffers >= 1, "at least one staging buffer");
    constexpr int kSubtiles = BM / kSubtileRows;

    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row0 = (warp / W::kWarpsN) * W::WM;  // the warp's first row of the tile
    const int col0 = (warp % W::kWarpsN) * W::WN + 2 * t;

#pragma unroll
    for (int sub = 0; sub < kSubtiles; ++sub) {
        __nv_bfloat16* buffer = staging[sub % StagingBuffers];

        // (1) The store that last read this buffer (StagingBuffers sub-tiles ago, maybe in the
        // previous tile) must be done reading it. Only the thread that issued it can wait.
        if (threadIdx.x == 0) bulk_wait_group_read<StagingBuffers - 1>();

        if constexpr (Defect == StoreDefect::none) {
            // (2) Nobody writes the buffer before thread 0 is past its wait.
            named_barrier_sync(kStagingBarrier, W::kThreads);
        } else {
            // PLANTED DEFECT: the barrier of step (2) is missing. Thread 0 waits for the store
            // to finish reading the buffer, and nobody waits for thread 0: the warps writing this
            // sub-tile (warps 4..7 for sub-tiles 2 and 3, which reuse the buffers of 0 and 1) may
            // overwrite it while the TMA unit still reads it. Harmless whenever that store read
            // its 8 KiB during the previous sub-tile's writes, which is nearly always. racecheck
            // cannot see it: the reader is the async proxy. Should be
            // named_barrier_sync(kStagingBarrier, W::kThreads), as in StoreDefect::none.
        }

        repro::delay<Delays>(0);  // --stress jitter: a warp may fall behind here

        // (3) fp32 -> bf16 (round to nearest even) into the dense [32][BN] buffer, by the warps
        // whose rows these are. No masking: rows past M and columns past N hold zeros (TMA
        // zero-filled A and B there) and the store clips them.
#pragma unroll
        for (int i = 0; i < W::kTilesM; ++i) {
            if ((warp_row0 + 16 * i) / kSubtileRows != sub) continue;  // warp-uniform
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                __nv_bfloat16* row = buffer + (warp_row0 + 16 * i + 8 * h + g - sub * kSubtileRows) * BN;
#pragma unroll
                for (int j = 0; j < W::kTilesN; ++j) {
                    *reinterpret_cast<__nv_bfloat162*>(row + col0 + 8 * j) =
                        __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                }
            }
        }
        fence_proxy_async_shared();

        // (4) The whole sub-tile is in the buffer (and visible to the async proxy).
        __syncthreads();

        // (5) One thread stores it; it drains in the background. Coordinates innermost first:
        // (column n0, row m0 + 32 sub).
        if (threadIdx.x == 0) {
            tma_store_2d(map_d, buffer, n0, m0 + sub * kSubtileRows);
            bulk_commit_group();
        }
    }
}

}  // namespace tma_store_kernels

// Persistent GEMM, grid (CTAS, 1, 1), block (256, 1, 1), dynamic smem
// sizeof(tma_store_kernels::PersistentShared<BM, BN, BK, Stages, StagingBuffers>) + 1024. Written
// for BM = BN = 128, BK = 64 (the main loop of tma_gemm.cuh), any Stages >= 1 (4 in the
// examples), any StagingBuffers >= 1 (2 in the examples).
// PLANTED DEFECT with Defect = StoreDefect::no_store_barrier: see store_epilogue.
template <int BM, int BN, int BK, int Stages, tma_store_kernels::StoreDefect Defect, int StagingBuffers = 2,
          bool Delays = false>
__global__ void __launch_bounds__(256, 1) persistent_tma_store(const __grid_constant__ CUtensorMap map_a,
                                                               const __grid_constant__ CUtensorMap map_b,
                                                               const __grid_constant__ CUtensorMap map_d, int M,
                                                               int N, int K)
{
    using namespace tma_kernels;
    using namespace tma_store_kernels;
    using Shared = PersistentShared<BM, BN, BK, Stages, StagingBuffers>;
    using W = WarpTiling<BM, BN>;
    static_assert(W::kThreads == 256, "the kernel is written for 8 warps");
    static_assert(Stages >= 1, "at least one stage");

    Shared& sh = aligned_shared_storage<Shared>();
    if (threadIdx.x == 0) prefetch_tensor_map(&map_d);
    init_pipeline(sh.pipe, &map_a, &map_b);  // ends in a __syncthreads()

    const int tiles_n = (N + BN - 1) / BN;
    const int tiles = ((M + BM - 1) / BM) * tiles_n;

    PipelineState<Stages> pipe;
    float acc[W::kTilesM][W::kTilesN][4];
    // The trip count depends on blockIdx alone: every thread reaches every barrier.
    for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
        const int m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
        mainloop_tile<BM, BN, BK, Stages>(sh.pipe, &map_a, &map_b, K, m0, n0, pipe, acc);
        store_epilogue<BM, BN, StagingBuffers, Defect, Delays>(sh.staging, &map_d, m0, n0, acc);
    }

    // The last store must have read the buffer before the CTA's shared memory is released, and
    // its writes are waited for as well, so that the kernel's end means D is written.
    if (threadIdx.x == 0) bulk_wait_group<0>();
}
