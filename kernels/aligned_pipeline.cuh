#pragma once
// A persistent, warp-specialized Hopper (sm_90a) bf16 GEMM laid out in shared memory as DeepGEMM's
// sm90_fp8_gemm_1d1d kernel is (issue 62): the correct baseline on which the async-race checker
// must give 0 findings.
//
//   D[M, N] = A[M, K] @ B[K, N],  bf16 in, fp32 accumulation, f32 out.
//
// A is row-major [M, K]; B is stored as a row-major [N, K] matrix (column-major [K, N], a
// linear-layer weight); D is row-major [M, N] f32. All three are TMA descriptors (CUtensorMap,
// const __grid_constant__ parameters) encoded on the host:
//   map_a: dims {K, M} (innermost first), box {64, 128}, swizzle 128B
//   map_b: dims {K, N}, box {64, BN}, swizzle 128B
//   map_d: dims {N, M}, box {BN, 64} (one math warpgroup's 64 rows), swizzle none
// TMA needs 16-byte row strides: K % 8 == 0 and N % 4 == 0. Otherwise any M, N, K >= 1: the loads
// zero-fill the parts of a box outside A and B, the stores write only the part inside D.
//
// Shared memory, as DeepGEMM's: a few static __shared__ variables (here the CTA's list of tiles),
// then `extern __shared__ __align__(1024) uint8_t smem[]`, which the compiler places on the next
// 1024-byte boundary of the CTA's window after them (the kernel checks it). Offsets from smem,
// BN = 136, 4 stages (Layout below):
//        0 -    255  the tensor-map area: DeepGEMM's k-grouped variant keeps its two CUtensorMaps
//                    here and edits them (tensormap_rewrite.cuh does). Unused in this kernel.
//      256 -  69887  D: the f32 epilogue tile, [128][136], dense (544-byte rows)
//    69888 - 135423  A stages: 4 x [128][64] bf16, 128B swizzle, 16 KiB each
//   135424 - 205055  B stages: 4 x [136][64] bf16, 128B swizzle, 17 KiB each
//   205056 - 205119  full[4], then empty[4]: mbarriers
// So, as in DeepGEMM's k-grouped kernel, the A and B stages start 256 bytes past a 1024-byte
// boundary, not on one: the 128B swizzle is a function of the address bits, the same for the TMA
// that writes a stage and the wgmma that reads it, so a stage needs only 128-byte rows aligned.
// This is what misled the async-race checker (issue 62): it took a wgmma operand to start at
// its 1024-byte swizzle atom, 256 bytes before the stage, inside D or the previous stage.
//
// Block: 384 threads, three warpgroups. Warpgroups 0 and 1 (warps 0-7) are the math warpgroups:
// warpgroup w computes rows 64 w .. 64 w + 63 of the 128 x BN tile with wgmma.mma_async
// m64n136k16 (bf16 in, f32 accumulators: 68 a thread), both operands read from shared memory
// through K-major 128B-swizzle descriptors. Warpgroup 2 is the TMA warpgroup: lane 0 of warp 8
// issues every load; warps 9-11 have nothing to do.
//
// Pipeline (a ring of Stages (A, B) stages), as DeepGEMM's:
//   full[s]  (1 arrival + transaction bytes): the producer waits for empty[s], arms full[s] with
//            arrive.expect_tx and issues the two TMA loads into stage s; the math threads wait on
//            full[s] (try_wait.parity).
//   empty[s] (8 arrivals, one per math warp): each math warpgroup issues its 4 wgmma of the stage
//            (wgmma.fence, 4 x mma_async, commit_group), waits for them (wait_group 0), and then
//            ONLY lane 0 of each math warp arrives on empty[s]. wait_group is warpgroup-wide
//            (.sync.aligned): when lane 0 is past it, the wgmma reads of its whole warpgroup are
//            done, so one arrival per warp releases the stage.
// Epilogue of each tile, per math warpgroup (named barrier 1 + w, 128 threads):
//   (1) the warpgroup's store thread (lane 0 of its first warp) waits until its previous TMA store
//       has read the warpgroup's rows of D (cp.async.bulk.wait_group.read 0), then bar.sync;
//   (2) every thread writes its 68 accumulators into D with st.shared.v2.f32 (as DeepGEMM's
//       ld_st.cuh), then fence.proxy.async.shared::cta, then bar.sync;
//   (3) the store thread stores the warpgroup's 64 rows with one TMA store and commits it.
// Persistent: CTA b computes the output tiles b, b + gridDim.x, ... in row-major tile order, at most
// kMaxTilesPerCta of them (the list lives in static shared memory; more traps).
//
// Launch: grid (CTAS, 1, 1), CTAS >= 1; block (384, 1, 1); dynamic shared memory
// aligned_pipeline_kernels::Layout<BN, Stages>::kBytes (205120 B for 136 and 4; above 48 KiB, so
// cudaFuncAttributeMaxDynamicSharedMemorySize must be raised first). No slack is added for
// alignment: as in DeepGEMM, the __align__(1024) of the declaration places the dynamic area.
// Arguments: aligned_pipeline_gemm<BN, Stages>(map_a, map_b, map_d, M, N, K).

#include "persistent_tma_store.cuh"  // tma_kernels (TMA loads, mbarriers), tma_store_kernels (TMA store, bulk groups, bar.sync)

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace aligned_pipeline_kernels {

constexpr int kMathWarpgroups = 2;
constexpr int kMathThreads = 128 * kMathWarpgroups;  // 256: warps 0-7
constexpr int kMathWarps = kMathThreads / 32;        // 8: empty[s]'s arrival count
constexpr int kThreads = kMathThreads + 128;         // + the TMA warpgroup
constexpr int kBlockM = 64 * kMathWarpgroups;        // 128 rows: one m64 wgmma per warpgroup
constexpr int kBlockK = 64;                          // 64 bf16 = one 128-byte swizzle row
constexpr int kWgmmaN = 136;                         // the one wgmma shape written out below
constexpr int kAccumulators = 64 * kWgmmaN / 128;    // 68 f32 per thread
constexpr int kMaxTilesPerCta = 128;                 // the static tile list's length (1 KiB)
constexpr uint32_t kTensorMapArea = 256;             // smem[0, 256): DeepGEMM's two tensor maps

// Byte offsets of the dynamic shared memory (the table in the header comment).
template <int BN, int Stages>
struct Layout {
    static constexpr uint32_t kD = kTensorMapArea;
    static constexpr uint32_t kDBytes = kBlockM * BN * sizeof(float);
    static constexpr uint32_t kAStageBytes = kBlockM * kBlockK * sizeof(__nv_bfloat16);
    static constexpr uint32_t kBStageBytes = BN * kBlockK * sizeof(__nv_bfloat16);
    static constexpr uint32_t kA = kD + kDBytes;
    static constexpr uint32_t kB = kA + Stages * kAStageBytes;
    static constexpr uint32_t kBarriers = kB + Stages * kBStageBytes;
    static constexpr uint32_t kBytes = kBarriers + 2 * Stages * sizeof(uint64_t);  // full[], empty[]
    static_assert(kA % 128 == 0 && kAStageBytes % 1024 == 0 && kBStageBytes % 1024 == 0,
                  "every A and B stage starts on a 128-byte swizzle row, at one offset modulo 1024");
};

// Typed views of the dynamic shared memory.
template <int BN, int Stages>
struct Smem {
    using L = Layout<BN, Stages>;
    uint8_t* base;

    __device__ __forceinline__ CUtensorMap* tensor_map(int i) const { return reinterpret_cast<CUtensorMap*>(base) + i; }
    __device__ __forceinline__ float* d() const { return reinterpret_cast<float*>(base + L::kD); }
    __device__ __forceinline__ __nv_bfloat16* a(int s) const
    {
        return reinterpret_cast<__nv_bfloat16*>(base + L::kA + s * L::kAStageBytes);
    }
    __device__ __forceinline__ __nv_bfloat16* b(int s) const
    {
        return reinterpret_cast<__nv_bfloat16*>(base + L::kB + s * L::kBStageBytes);
    }
    __device__ __forceinline__ uint64_t* full(int s) const { return reinterpret_cast<uint64_t*>(base + L::kBarriers) + s; }
    __device__ __forceinline__ uint64_t* empty(int s) const { return full(Stages) + s; }
};

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_90a): the math side (wgmma), the arrival, the epilogue's vector store.
// ---------------------------------------------------------------------------------------------

// The wgmma shared-memory descriptor of a K-major, 128B-swizzled tile whose rows are 128 bytes
// (64 bf16): start address >> 4 (bits 0-13), leading byte offset 16 B (bits 16-29, unused by a
// swizzled K-major layout), stride byte offset 1024 B between groups of 8 rows (bits 32-45), base
// offset 0 (as DeepGEMM's, its tiles 256 bytes past a 1024-byte boundary), layout type 1 = 128B
// swizzle (bits 62-63). Moving
// along K inside the 128-byte row is adding to the start address, as DeepGEMM's make_smem_desc.
__device__ __forceinline__ uint64_t smem_desc_k128(const void* tile)
{
    const uint64_t address = tma_kernels::smem_u32(tile);
    return ((address & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) |
           (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int Pending>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// Keeps the compiler from moving accesses of an accumulator across the wgmma fences and waits
// (the asm of mma_async names them as outputs at its issue, not at its completion).
__device__ __forceinline__ void fence_operand(float& r)
{
    asm volatile("" : "+f"(r)::"memory");
}

#define REPRO_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])

// d += A (64 x 16, K-major in shared memory) * B (16 x 136, K-major: B's rows are n), issued by a
// whole warpgroup. Accumulator 4 j + e of a thread is row 16 (warp % 4) + lane / 4 + 8 (e / 2),
// column 8 j + 2 (lane % 4) + e % 2 of the warpgroup's 64 x 136 block.
__device__ __forceinline__ void wgmma_m64n136k16_bf16(float (&d)[kAccumulators], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %70, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n136k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
        "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, "
        "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, "
        "%61, %62, %63, %64, %65, %66, %67}, "
        "%68, %69, p, 1, 1, 0, 0;\n"
        "}\n"
        : REPRO_F4(0), REPRO_F4(4), REPRO_F4(8), REPRO_F4(12), REPRO_F4(16), REPRO_F4(20), REPRO_F4(24),
          REPRO_F4(28), REPRO_F4(32), REPRO_F4(36), REPRO_F4(40), REPRO_F4(44), REPRO_F4(48), REPRO_F4(52),
          REPRO_F4(56), REPRO_F4(60), REPRO_F4(64)
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

#undef REPRO_F4

// One arrival on an mbarrier, as DeepGEMM's ClusterTransactionBarrier::arrive (release.cta by
// default): the caller's earlier accesses are ordered before it for whoever waits on the phase.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(tma_kernels::smem_u32(bar)) : "memory");
}

// As DeepGEMM's ptx::st_shared(float2*): a 64-bit shared-window address.
__device__ __forceinline__ void st_shared_v2(float* p, float x, float y)
{
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"l"(__cvta_generic_to_shared(p)), "f"(x), "f"(y) : "memory");
}

// A 3-D TMA store (the grouped kernel's D [G, M, N]); the 2-D one is tma_store_kernels'.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(tma_kernels::smem_u32(src)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

// ---------------------------------------------------------------------------------------------
// The roles. Both sides walk the same tiles and k-tiles in the same order, so their
// PipelineStates agree on slot and parity throughout.
// ---------------------------------------------------------------------------------------------

// The one thread, once, before the block-wide barrier: every full barrier for one arrival (the
// producer's arrive.expect_tx), every empty barrier for one arrival per math warp.
template <int BN, int Stages>
__device__ __forceinline__ void init_barriers(const Smem<BN, Stages>& sm)
{
#pragma unroll
    for (int s = 0; s < Stages; ++s) {
        tma_kernels::mbarrier_init(sm.full(s), 1);
        tma_kernels::mbarrier_init(sm.empty(s), kMathWarps);
    }
    tma_kernels::fence_barrier_init();  // visible to the TMA unit's complete_tx
}

// Producer (lane 0 of warp 8): the k-tiles of one output tile at (m0, n0), each into the next slot
// once both math warpgroups have released it. empty[s]'s first phase is still running in the
// first round, so waiting for the parity before it (phase ^ 1) passes at once there.
template <int BN, int Stages>
__device__ __forceinline__ void load_tile(const Smem<BN, Stages>& sm, tma_kernels::PipelineState<Stages>& pipe,
                                          const CUtensorMap* map_a, const CUtensorMap* map_b, int m0, int n0,
                                          int k_tiles)
{
    using L = Layout<BN, Stages>;
    for (int kt = 0; kt < k_tiles; ++kt) {
        tma_kernels::mbarrier_wait(sm.empty(pipe.stage), pipe.phase ^ 1u);
        uint64_t* full = sm.full(pipe.stage);
        // Whole boxes, always: TMA counts the zero-filled out-of-bounds part of a box too.
        tma_kernels::mbarrier_arrive_expect_tx(full, L::kAStageBytes + L::kBStageBytes);
        tma_kernels::tma_load_2d(sm.a(pipe.stage), map_a, full, kt * kBlockK, m0);
        tma_kernels::tma_load_2d(sm.b(pipe.stage), map_b, full, kt * kBlockK, n0);
        pipe.advance();
    }
}

// A math warpgroup's main loop of one tile: acc = its 64 rows of A times B, over k_tiles k-tiles.
template <int BN, int Stages>
__device__ __forceinline__ void mma_tile(const Smem<BN, Stages>& sm, tma_kernels::PipelineState<Stages>& pipe,
                                         int k_tiles, float (&acc)[kAccumulators])
{
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int wg = warp / 4;
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
        tma_kernels::mbarrier_wait(sm.full(pipe.stage), pipe.phase);  // k-tile kt has landed
        const __nv_bfloat16* a = sm.a(pipe.stage) + wg * 64 * kBlockK;  // this warpgroup's 64 rows
        const __nv_bfloat16* b = sm.b(pipe.stage);
#pragma unroll
        for (int i = 0; i < kAccumulators; ++i) fence_operand(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBlockK / 16; ++k) {  // k16 steps: 32 bytes along each 128-byte row
            wgmma_m64n136k16_bf16(acc, smem_desc_k128(a + 16 * k), smem_desc_k128(b + 16 * k));
        }
        wgmma_commit();
#pragma unroll
        for (int i = 0; i < kAccumulators; ++i) fence_operand(acc[i]);
        wgmma_wait<0>();
        // Empty: the warpgroup's reads of the stage are done (wait_group above); one arrival per
        // warp, from lane 0, as DeepGEMM's empty_barrier_arrive.
        if (lane == 0) mbarrier_arrive(sm.empty(pipe.stage));
        pipe.advance();
    }
}

// A math warpgroup's epilogue of one tile: steps (1) to (3) of the header comment. `group` < 0:
// D is 2-D [M, N] (map_d 2-D); otherwise D is [G, M, N] and this is group `group`'s output.
template <int BN, int Stages>
__device__ __forceinline__ void store_tile(const Smem<BN, Stages>& sm, const CUtensorMap* map_d,
                                           const float (&acc)[kAccumulators], int M, int m0, int n0, int group)
{
    using namespace tma_store_kernels;
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int wg = warp / 4;
    const uint32_t barrier = 1 + wg;  // named barrier of this warpgroup (0 is __syncthreads()'s)
    const bool store_thread = warp % 4 == 0 && lane == 0;
    float* rows = sm.d() + wg * 64 * BN;  // the warpgroup's 64 rows of the D tile

    // (1) The previous tile's store of these rows has read them.
    if (store_thread) bulk_wait_group_read<0>();
    named_barrier_sync(barrier, 128);

    // (2) Accumulators into D, two adjacent columns per store.
    const int r = 16 * (warp % 4) + lane / 4, c = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        st_shared_v2(rows + r * BN + 8 * j + c, acc[4 * j], acc[4 * j + 1]);
        st_shared_v2(rows + (r + 8) * BN + 8 * j + c, acc[4 * j + 2], acc[4 * j + 3]);
    }
    fence_proxy_async_shared();  // these generic writes, before the TMA store's reads
    named_barrier_sync(barrier, 128);

    // (3) One store of the 64 rows (clipped at D's edges); it drains in the background. Rows
    // wholly past M are not stored.
    if (store_thread && m0 + wg * 64 < M) {
        if (group < 0) {
            tma_store_2d(map_d, rows, n0, m0 + wg * 64);
        } else {
            tma_store_3d(map_d, rows, n0, m0 + wg * 64, group);
        }
        bulk_commit_group();
    }
}

// The 1024-byte alignment the layout needs, checked once: the __align__(1024) of the declaration
// is what puts the dynamic area there, past the static __shared__ variables.
__device__ __forceinline__ void check_alignment(const uint8_t* smem)
{
    if ((tma_kernels::smem_u32(smem) & 1023u) != 0) __trap();
}

}  // namespace aligned_pipeline_kernels

// Persistent warp-specialized GEMM (see the header comment). BN = 136, any Stages >= 1 whose
// layout fits (4 in the example).
template <int BN, int Stages>
__global__ void __launch_bounds__(aligned_pipeline_kernels::kThreads, 1)
    aligned_pipeline_gemm(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                          const __grid_constant__ CUtensorMap map_d, int M, int N, int K)
{
    using namespace aligned_pipeline_kernels;
    static_assert(BN == kWgmmaN, "the wgmma written out is m64n136k16");
    static_assert(Stages >= 1, "at least one stage");

    // Static shared memory first: the CTA's tiles (m0, n0), written by thread 0 before the
    // block-wide barrier, read by every role after it.
    __shared__ int2 s_tiles[kMaxTilesPerCta];
    __shared__ int s_tile_count;
    // Then the dynamic area, on the next 1024-byte boundary.
    extern __shared__ __align__(1024) uint8_t smem[];
    const Smem<BN, Stages> sm{smem};

    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    if (threadIdx.x == 0) {
        check_alignment(smem);
        const int tiles_n = (N + BN - 1) / BN, tiles = ((M + kBlockM - 1) / kBlockM) * tiles_n;
        int count = 0;
        for (int t = static_cast<int>(blockIdx.x); t < tiles; t += static_cast<int>(gridDim.x)) {
            if (count == kMaxTilesPerCta) __trap();  // launch more CTAs
            s_tiles[count++] = make_int2((t / tiles_n) * kBlockM, (t % tiles_n) * BN);
        }
        s_tile_count = count;
    }
    if (warp == kMathWarps && lane == 0) {
        tma_kernels::prefetch_tensor_map(&map_a);
        tma_kernels::prefetch_tensor_map(&map_b);
        tma_kernels::prefetch_tensor_map(&map_d);
        init_barriers(sm);
    }
    __syncthreads();  // the last block-wide barrier: the roles part here

    const int k_tiles = (K + kBlockK - 1) / kBlockK;  // the last may be partial: TMA zero-fills past K
    if (warp >= kMathWarps) {
        // The TMA warpgroup: lane 0 of its first warp issues every load. Every load is waited for
        // by the math warpgroups, so none is in flight when the CTA exits.
        if (warp == kMathWarps && lane == 0) {
            tma_kernels::PipelineState<Stages> pipe;
            for (int i = 0; i < s_tile_count; ++i) load_tile(sm, pipe, &map_a, &map_b, s_tiles[i].x, s_tiles[i].y, k_tiles);
        }
        return;
    }

    tma_kernels::PipelineState<Stages> pipe;
    float acc[kAccumulators];
    for (int i = 0; i < s_tile_count; ++i) {
        mma_tile(sm, pipe, k_tiles, acc);
        store_tile(sm, &map_d, acc, M, s_tiles[i].x, s_tiles[i].y, -1);
    }
    // The last stores must have read D before the CTA's shared memory goes, and written D before
    // the kernel's end means D is written.
    if (warp % 4 == 0 && lane == 0) tma_store_kernels::bulk_wait_group<0>();
}
