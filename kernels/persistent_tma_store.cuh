#pragma once
// A persistent Hopper (sm_90a) bf16 GEMM whose epilogue leaves through a TMA store:
//   D[M, N] = A[M, K] @ B[K, N],  bf16 in and out, fp32 accumulation.
// A is row-major [M, K], B is stored as a row-major [N, K] matrix (column-major [K, N], a
// linear-layer weight), D is row-major [M, N]. All three arrive as TMA descriptors
// (CUtensorMap, const __grid_constant__ parameters), encoded on the host:
//   map_a: dims {K, M} (innermost first), box {64, 128}, swizzle 128B   (as tma_gemm.cuh)
//   map_b: dims {K, N}, box {64, 128}, swizzle 128B                     (as tma_gemm.cuh)
//   map_d: dims {N, M}, box {128, 128} (BN columns x BM rows), swizzle none: the staging
//          buffer below is a dense row-major [BM][BN] bf16 tile, exactly the box's layout
// TMA needs 16-byte row strides: K % 8 == 0 and N % 8 == 0. Otherwise any M, N, K >= 1: the
// loads zero-fill the parts of a box outside A and B, and the TMA store writes only the part of
// its box that lies inside D (TMA clips stores at the tensor's bounds), so partial tiles need no
// masking anywhere.
//
// Persistent: the grid is a runtime number of CTAs (the spec's CTAS, usually fewer than the
// tiles), and CTA b computes the output tiles b, b + gridDim.x, b + 2 gridDim.x, ... in
// row-major tile order. The main loop of one tile is tma_gemm.cuh's (the same TMA + mbarrier
// ring of 4 stages, ldmatrix + mma.sync.m16n8k16, 8 warps as 2 x 4), with one PipelineState
// carried from tile to tile as in tma_task.cuh. The epilogue is new:
//
//   (1) thread 0 waits until the previous tile's TMA store has finished READING the staging
//       buffer (cp.async.bulk.wait_group.read 0); the first tile of a CTA has none to wait for;
//   (2) a named barrier (bar.sync 1, 256) holds the other 255 threads until thread 0 is past
//       that wait: nobody overwrites the buffer while the store still reads it;
//   (3) every thread writes its fp32 accumulators, rounded to bf16, into the staging buffer and
//       makes those generic-proxy writes visible to the async proxy (fence.proxy.async);
//   (4) __syncthreads(): the whole tile is in the buffer;
//   (5) thread 0 issues the TMA store of the buffer to the tile's place in D
//       (cp.async.bulk.tensor.2d.global.shared::cta.bulk_group) and commits it as a bulk group;
//       nobody waits for it here: it drains while the next tile's main loop runs.
// At the very end thread 0 waits for its last store to complete (wait_group 0) before the CTA
// exits and its shared memory goes away.
//
// PLANTED DEFECT (tma_store_kernels::StoreDefect::no_store_barrier): step (2) is missing. Only
// thread 0 (one thread of warp 0) waits for the previous store; warps 1..7 (and the rest of warp
// 0) go straight on to step (3) and may write the next tile's values into the staging buffer
// while the TMA unit still reads the previous tile out of it, so part of the PREVIOUS tile of D
// gets the NEXT tile's values (or its zeros, where the next tile is partial). Upstream's fix was
// exactly this one named barrier.
//
// Why the defect hides: the store of tile t is issued at the end of tile t and the buffer is
// next written at the end of tile t + 1, a whole main loop later: ceil(K / 64) k-tiles (49 at
// K = 3088), tens of microseconds, against the microsecond or so the TMA unit needs to read
// 32 KiB of shared memory. Worse (for the reproducer), the next tile's first TMA loads are issued
// by the same thread after the store, so unless the memory system pushes back on the store's
// writes, its reads are done long before the loads even return. Repetition, random inputs,
// `repro probe` and compute-sanitizer's racecheck (which does not see the async proxy's reads)
// are all expected to pass it. What should show it is congestion that stalls the store's
// drain for a whole main loop (a memory-bandwidth or L2 stress running beside the kernel), a
// very short main loop (small K) together with such stress, or fewer CTAs (more tiles, so more
// windows, per CTA).
//
// Launch: block (256, 1, 1); grid (CTAS, 1, 1) for any CTAS >= 1 (CTAs past the last tile do
// nothing); dynamic shared memory sizeof(tma_store_kernels::PersistentShared<128, 128, 64, 4>)
// + 1024 bytes = (131072 + 1024 + 32768) + 1024 = 165888 B (the + 1024 is for rounding the base
// up to 1024 bytes, see tma_kernels::aligned_shared_storage; above 48 KiB, so
// cudaFuncAttributeMaxDynamicSharedMemorySize must be raised first). Argument order:
// persistent_tma_store(map_a, map_b, map_d, M, N, K).

#include "tma_gemm.cuh"

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace tma_store_kernels {

enum class StoreDefect { none, no_store_barrier };

// The pipeline of tma_gemm.cuh (4 stages of A and B tiles, each 1024-byte aligned, and their
// full barriers), then the epilogue's staging buffer: one BM x BN bf16 tile, row-major and
// dense, as the unswizzled TMA store box reads it. Its own memory: the main loop never touches
// it, so the only writers are the epilogues and the only reader is the TMA store.
template <int BM, int BN, int BK, int Stages>
struct PersistentShared {
    tma_kernels::TmaGemmShared<BM, BN, BK, Stages> pipe;
    alignas(1024) __nv_bfloat16 staging[BM * BN];  // 128-byte alignment is what TMA needs
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

// The epilogue of one tile: steps (1) to (5) of the header comment. Accumulator acc[i][j][2h + e]
// is element (wm + 16 i + g + 8 h, wn + 8 j + 2 t + e) of the tile (tma_gemm.cuh's fragment
// layout), so each thread writes bf16 pairs, four bytes at a time, into the staging buffer.
template <int BM, int BN, StoreDefect Defect>
__device__ __forceinline__ void store_epilogue(
    __nv_bfloat16* staging, const CUtensorMap* map_d, int m0, int n0,
    const float (&acc)[tma_kernels::WarpTiling<BM, BN>::kTilesM][tma_kernels::WarpTiling<BM, BN>::kTilesN][4])
{
    using W = tma_kernels::WarpTiling<BM, BN>;

    // (1) The previous tile's store, if any, must be done reading the buffer. Only the thread
    // that issued the store can wait for it.
    if (threadIdx.x == 0) bulk_wait_group_read<0>();

    if constexpr (Defect == StoreDefect::none) {
        // (2) Nobody writes the buffer before thread 0 is past its wait.
        named_barrier_sync(kStagingBarrier, W::kThreads);
    } else {
        // PLANTED DEFECT: the barrier of step (2) is missing. Thread 0 waits for the previous
        // store to finish reading the buffer, and nobody waits for thread 0: warps 1..7 (and
        // lanes 1..31 of warp 0) write this tile's values below while the TMA unit may still be
        // reading the previous tile's. Harmless whenever that store drained during this tile's
        // main loop, which is always, unless the memory system holds the store back for that
        // long. racecheck cannot see it: the reader is the async proxy. Should be
        // named_barrier_sync(kStagingBarrier, W::kThreads), as in StoreDefect::none.
    }

    // (3) fp32 -> bf16 (round to nearest even) into the dense [BM][BN] buffer. No masking: rows
    // past M and columns past N hold zeros (TMA zero-filled A and B there) and the store clips
    // them.
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int row0 = (warp / W::kWarpsN) * W::WM + g;
    const int col0 = (warp % W::kWarpsN) * W::WN + 2 * t;
#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            __nv_bfloat16* row = staging + (row0 + 16 * i + 8 * h) * BN;
#pragma unroll
            for (int j = 0; j < W::kTilesN; ++j) {
                *reinterpret_cast<__nv_bfloat162*>(row + col0 + 8 * j) =
                    __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
    }
    fence_proxy_async_shared();

    // (4) The whole tile is in the buffer (and visible to the async proxy).
    __syncthreads();

    // (5) One thread stores it; it drains in the background. Coordinates innermost first:
    // (column n0, row m0).
    if (threadIdx.x == 0) {
        tma_store_2d(map_d, staging, n0, m0);
        bulk_commit_group();
    }
}

}  // namespace tma_store_kernels

// Persistent GEMM, grid (CTAS, 1, 1), block (256, 1, 1), dynamic smem
// sizeof(tma_store_kernels::PersistentShared<BM, BN, BK, Stages>) + 1024. Written for
// BM = BN = 128, BK = 64 (the main loop of tma_gemm.cuh), any Stages >= 1 (4 in the examples).
// PLANTED DEFECT with Defect = StoreDefect::no_store_barrier: see store_epilogue.
template <int BM, int BN, int BK, int Stages, tma_store_kernels::StoreDefect Defect>
__global__ void __launch_bounds__(256, 1) persistent_tma_store(const __grid_constant__ CUtensorMap map_a,
                                                               const __grid_constant__ CUtensorMap map_b,
                                                               const __grid_constant__ CUtensorMap map_d, int M,
                                                               int N, int K)
{
    using namespace tma_kernels;
    using namespace tma_store_kernels;
    using Shared = PersistentShared<BM, BN, BK, Stages>;
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
        store_epilogue<BM, BN, Defect>(sh.staging, &map_d, m0, n0, acc);
    }

    // The last store must have read the buffer before the CTA's shared memory is released, and
    // its writes are waited for as well, so that the kernel's end means D is written.
    if (threadIdx.x == 0) bulk_wait_group<0>();
}
