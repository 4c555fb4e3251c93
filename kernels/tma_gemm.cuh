#pragma once
// Hopper (sm_90a) bf16 GEMM fed by TMA through an mbarrier pipeline:
//   D[M, N] = A[M, K] @ B[K, N],  bf16 in and out, fp32 accumulation.
// A is row-major [M, K]. B is logically [K, N] but stored column-major, i.e. as a row-major
// [N, K] matrix with K contiguous, like the weight of a linear layer (D = X @ W^T). D is
// row-major [M, N].
//
// The operands do not arrive as pointers but as two TMA descriptors (CUtensorMap), encoded on
// the host with cuTensorMapEncodeTiled and passed by value as __grid_constant__ parameters:
//   map_a: dims {K, M} (innermost first), row stride K * 2 bytes, box {BK, BoxRowsA}
//   map_b: dims {K, N}, row stride K * 2 bytes, box {BK, BN}
//   both: element strides 1, out-of-bounds fill zeros, swizzle 128B (BK = 64 bf16 = 128 B rows)
// TMA requires the row stride to be a multiple of 16 bytes, hence K % 8 == 0. Otherwise any
// M, N, K >= 1: TMA zero-fills the parts of a box outside the matrix (partial M, N and K tiles
// add nothing), and the stores to D are masked.
//
// One block computes one BM x BN tile of D with 8 warps. Shared memory is a ring of Stages
// (A tile, B tile) buffers, each with a "full" mbarrier: thread 0 arms the barrier with the
// number of bytes the two TMA loads will deliver and issues them; every thread waits on the
// barrier's phase, multiplies the stage with ldmatrix + mma.sync, and a __syncthreads() after
// the stage plays the "empty" barrier, after which thread 0 refills the slot with the k-tile
// Stages further on. No warp specialization, no clusters: the simplest pipeline that keeps
// Stages - 1 loads in flight behind the math.
//
// The kernel reads shared memory assuming the swizzle ReadSwizzle; the descriptors decide how
// TMA actually wrote it. They must agree (both 128B in the correct instantiation).
//
// Launch (correct instantiation tma_gemm<128, 128, 64, 4, 128, tma_kernels::SmemSwizzle::B128>):
//   block (256, 1, 1), grid (ceil(N / BN), ceil(M / BM), 1),
//   dynamic shared memory sizeof(tma_kernels::TmaGemmShared<BM, BN, BK, Stages>) + 1024 bytes
//   (133,120 B for 128 x 128 x 64 x 4: above 48 KiB, so cudaFuncAttributeMaxDynamicSharedMemorySize
//   must be raised first). The + 1024 is slack for the kernel's own rounding of the dynamic
//   shared memory base up to a 1024-byte boundary, see aligned_shared_storage().
//
// Planted defects, selected by template arguments of this same kernel (see `PLANTED DEFECT:`):
//   (a) BoxRowsA = 64 < BM = 128 with a descriptor box of {64, 64} for A: TMA writes only the
//       first 64 rows of each A stage, rows 64..127 keep whatever shared memory held before, so
//       rows 64..127 of every 128-row tile of D are wrong.
//   (b) ReadSwizzle = B128 with a descriptor encoded with swizzle none: the kernel reads the
//       16-byte k-chunks of row r from chunk c ^ (r % 8) where TMA left them at chunk c, i.e.
//       with K permuted differently per row.
//   (c) -DTMA_GEMM_SWAP_B_COORDS on the build line: B's box is asked for at (n0, k0) instead of
//       (k0, n0), so the B tile of output columns n0.. at K offset k0 holds B[n0 + k][k0 + n]
//       (zero where that is out of bounds): B read from the wrong place, which the probes name
//       `operand_layout` (examples/tma_gemm_swapped_b_coords.yaml).
//
// gemm_tile() (one output tile: mainloop + epilogue) is shared with the persistent task body
// in tma_task.cuh, which runs it for every tile in turn in one block; the pipeline's position
// (PipelineState) is passed in and out so the mbarrier phases stay consistent across tiles.
//
// Only <cuda.h> (for CUtensorMap), <cuda_bf16.h> and inline PTX; no CUTLASS/CuTe. Conversions go
// through intrinsics, so the header also builds with -D__CUDA_NO_BFLOAT16_CONVERSIONS__.

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

namespace tma_kernels {

// The shared-memory swizzle the kernel assumes when it computes ldmatrix addresses, named after
// CUtensorMapSwizzle: TMA permutes the 16-byte chunks of each 32/64/128-byte span by XOR with
// address bits above the span (see swizzle_offset).
enum class SmemSwizzle { None, B32, B64, B128 };

// The block's shared memory. One stage holds the A tile ([BM][BK], k contiguous) and the B tile
// ([BN][BK], k contiguous), each on a 1024-byte boundary: a 128B-swizzled TMA destination must be
// 1024-byte aligned, because the swizzle pattern is a function of the smem address bits 4..9 and
// repeats every 1024 bytes (8 rows of 128 bytes). The full barriers follow the stages.
//
// alignas(1024) only aligns the members relative to the start of the struct; where the struct
// itself lands is up to aligned_shared_storage(), which rounds the dynamic shared memory base
// up to 1024 bytes. That is why the launch asks for sizeof(TmaGemmShared) + 1024 bytes.
template <int BM, int BN, int BK, int Stages>
struct TmaGemmShared {
    struct Stage {
        alignas(1024) __nv_bfloat16 a[BM * BK];
        alignas(1024) __nv_bfloat16 b[BN * BK];
    };
    Stage stage[Stages];
    // full[s] completes a phase when the two TMA loads into stage[s] have landed. One arrival
    // (thread 0's arrive.expect_tx) plus the transaction bytes complete it.
    alignas(8) uint64_t full[Stages];
};

// Position of the pipeline: the ring slot the next k-tile goes through, and the parity of the
// phase of that slot's full barrier that the k-tile will complete. Slot s is used by k-tiles
// s, s + Stages, s + 2 Stages, ... (counted from the barriers' initialization, across output
// tiles), and its barrier completes one phase per use: phase 0, 1, 0, 1, ... So the parity flips
// each time the slot index wraps around.
template <int Stages>
struct PipelineState {
    int stage = 0;
    uint32_t phase = 0;

    __device__ __forceinline__ void advance()
    {
        if (++stage == Stages) {
            stage = 0;
            phase ^= 1u;
        }
    }
};

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_90). Shared-memory operands are 32-bit shared-window addresses.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Makes the barrier initializations visible to the async proxy (the TMA unit signals the
// barriers through complete_tx, which is not an ordinary shared-memory access), before any
// thread issues a load against them. fence.mbarrier_init exists only with .release.cluster; a
// block launched without clusters is a cluster of one.
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n"
                 "fence.proxy.async.shared::cta;" ::
                     : "memory");
}

__device__ __forceinline__ void mbarrier_inval(uint64_t* bar)
{
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Thread 0's one arrival for the phase, announcing that `bytes` more bytes will land on the
// barrier (complete_tx) before the phase may complete. Issued before the loads, so the pending
// transaction count never has to go below zero.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Blocks until the phase of parity `parity` has completed (acquire: the TMA-written data is
// visible afterwards). try_wait gives up after a hardware time limit, hence the loop.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity)
{
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n"
            "  .reg .pred p;\n"
            "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "  selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// Pulls the descriptor into the TMA unit's cache ahead of the first load; a hint only.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// One 2-D TMA load: the box of `map` whose first element is (inner, outer) = (c0, c1), written to
// shared memory at dst (laid out and swizzled as the descriptor says), its bytes counted against
// `bar`. `map` is the generic address of a __grid_constant__ kernel parameter (or of a descriptor
// in global/constant memory), which the instruction accepts directly.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// The same for a 3-D descriptor: the box whose first element is (c0, c1, c2), innermost first.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// Four 8x8 b16 matrices: lanes 8i .. 8i+7 give the 16-byte rows of matrix i; r[i] of lane l
// receives elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// c += a (16x16, row) * b (16x8, col), bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
        " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------------------------
// Shared-memory layout and swizzle
// ---------------------------------------------------------------------------------------------

// Where the 16-byte chunk at unswizzled byte offset `off` of a tile actually is, for a tile
// that starts on a 1024-byte boundary (so offset bits = address bits). TMA's patterns, applied
// to the address: 128B XORs bits 4..6 (the chunk within a 128-byte span) with bits 7..9, 64B
// bits 4..5 with 7..8, 32B bit 4 with bit 7. With 128-byte rows, bits 7..9 are row % 8, so under
// 128B chunk c of row r sits at chunk c ^ (r % 8).
template <SmemSwizzle S>
__device__ __forceinline__ uint32_t swizzle_offset(uint32_t off)
{
    if constexpr (S == SmemSwizzle::B128) {
        return off ^ (((off >> 7) & 7u) << 4);
    } else if constexpr (S == SmemSwizzle::B64) {
        return off ^ (((off >> 7) & 3u) << 4);
    } else if constexpr (S == SmemSwizzle::B32) {
        return off ^ (((off >> 7) & 1u) << 4);
    } else {
        return off;
    }
}

// The block's TmaGemmShared, placed at the first 1024-byte boundary of dynamic shared memory.
// The CUDA programming model only promises 16-byte alignment for `extern __shared__` (the
// __align__ on the declaration is not a guarantee for the dynamic window, and static shared
// memory in the same kernel shifts it), so the kernel rounds up itself and the launch gives
// 1024 bytes of slack for it. No byte of it is initialized here: see PLANTED DEFECT (a).
template <class Shared>
__device__ __forceinline__ Shared& aligned_shared_storage()
{
    extern __shared__ __align__(16) unsigned char tma_dynamic_smem[];
    const uint32_t pad = (1024u - (smem_u32(tma_dynamic_smem) & 1023u)) & 1023u;
    return *reinterpret_cast<Shared*>(tma_dynamic_smem + pad);
}

// Thread 0 initializes every full barrier for one arrival per phase and prefetches the
// descriptors; the fences and the __syncthreads() publish the barriers to the TMA unit and to
// every thread before anyone waits on them or loads against them. The whole block calls it.
template <class Shared>
__device__ __forceinline__ void init_pipeline(Shared& sh, const CUtensorMap* map_a, const CUtensorMap* map_b)
{
    constexpr int kStages = static_cast<int>(sizeof(sh.full) / sizeof(sh.full[0]));
    if (threadIdx.x == 0) {
        prefetch_tensor_map(map_a);
        prefetch_tensor_map(map_b);
#pragma unroll
        for (int s = 0; s < kStages; ++s) mbarrier_init(&sh.full[s], 1);
        fence_barrier_init();
    }
    __syncthreads();
}

// Ends the barriers' lives so that the memory may serve as something else (the next task of a
// persistent kernel). The __syncthreads() makes sure no thread still waits on them.
template <class Shared>
__device__ __forceinline__ void release_pipeline(Shared& sh)
{
    constexpr int kStages = static_cast<int>(sizeof(sh.full) / sizeof(sh.full[0]));
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < kStages; ++s) mbarrier_inval(&sh.full[s]);
    }
    __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// Fragment index math (mma.m16n8k16, bf16; g = lane / 4, t = lane % 4)
//
//   A fragment (16 x 16, row):  a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
//                               a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//   B fragment (16 x 8, col):   b0 = B[k = 2t, 2t+1][n = g]   b1 = B[k = 2t+8, 2t+9][n = g]
//   C fragment (16 x 8, f32):   c0, c1 = C[g][2t, 2t+1]       c2, c3 = C[g+8][2t, 2t+1]
//
// ldmatrix.x4 hands r[i] of lane l the elements 2 (l % 4), 2 (l % 4) + 1 of row l / 4 = g of
// matrix i, where matrix i's rows are the addresses from lanes 8i .. 8i+7. So:
//
//   A (smem [m][k], k contiguous): matrix 0 = rows 0-7, k 0-7 -> a0; matrix 1 = rows 8-15,
//     k 0-7 -> a1; matrix 2 = rows 0-7, k 8-15 -> a2; matrix 3 = rows 8-15, k 8-15 -> a3.
//     Lane l therefore addresses row (l % 16), k-chunk (l / 16): lanes 0-7 rows 0-7 chunk 0,
//     lanes 8-15 rows 8-15 chunk 0, lanes 16-23 rows 0-7 chunk 1, lanes 24-31 rows 8-15 chunk 1.
//
//   B (smem [n][k], k contiguous, which is the "col" operand as it stands: no .trans): row g of
//     an 8x8 matrix is n = g, its elements 2t, 2t+1 are k = 2t, 2t+1, exactly b0's. One x4 covers
//     two n8 blocks: matrix 0 = n 0-7, k 0-7 -> b0 of block 0; matrix 1 = n 0-7, k 8-15 -> b1 of
//     block 0; matrix 2 = n 8-15, k 0-7 -> b0 of block 1; matrix 3 = n 8-15, k 8-15 -> b1 of
//     block 1. Lane l addresses n = (l % 8) + 8 (l / 16), k-chunk (l / 8) % 2.
//
// Every address is the unswizzled offset row * 128 + chunk * 16 (128-byte rows: BK = 64 bf16),
// passed through swizzle_offset. Under 128B the eight rows of one 8x8 matrix read chunks
// c ^ (row % 8), eight different 16-byte columns of the 128-byte line: all 32 banks once, no
// conflicts. (Unswizzled, all eight would hit the same four banks: an 8-way conflict.)
//
// Warps: 8 of them as 2 (M) x 4 (N); warp w owns rows (w / 4) * BM/2 .. + BM/2 and columns
// (w % 4) * BN/4 .. + BN/4 of the tile, i.e. 64 x 32 for 128 x 128: 4 m16 x 4 n8 mma tiles,
// 64 fp32 accumulators per thread. Accumulator acc[i][j][2h + e] is
// D[m0 + wm + 16 i + g + 8 h][n0 + wn + 8 j + 2 t + e].
// ---------------------------------------------------------------------------------------------

template <int BM, int BN>
struct WarpTiling {
    static constexpr int kWarpsM = 2, kWarpsN = 4;
    static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
    static constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;  // one warp's share of the tile
    static constexpr int kTilesM = WM / 16, kTilesN = WN / 8;    // its m16 x n8 mma tiles
    static_assert(WM % 16 == 0, "a warp's rows must be whole m16 tiles");
    static_assert(WN % 16 == 0, "a warp's columns must be whole pairs of n8 tiles (one ldmatrix.x4 each)");
};

// acc += the stage's A tile times its B tile, for this warp's 64 x 32 share.
template <int BM, int BN, int BK, SmemSwizzle ReadSwizzle>
__device__ __forceinline__ void mma_stage(const __nv_bfloat16* As, const __nv_bfloat16* Bs,
                                          float (&acc)[WarpTiling<BM, BN>::kTilesM][WarpTiling<BM, BN>::kTilesN][4])
{
    using W = WarpTiling<BM, BN>;
    constexpr uint32_t kRowBytes = BK * sizeof(__nv_bfloat16);  // 128
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int wm = (warp / W::kWarpsN) * W::WM, wn = (warp % W::kWarpsN) * W::WN;
    const uint32_t a_base = smem_u32(As), b_base = smem_u32(Bs);

    // This lane's ldmatrix row and chunk within each 16-row (A) / 16-column (B) block, as
    // derived above; only the block origin and the k step change inside the loops.
    const int a_row = wm + (lane % 16), a_chunk = lane / 16;
    const int b_row = wn + (lane % 8) + 8 * (lane / 16), b_chunk = (lane / 8) % 2;

#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {  // k16 steps: chunks 2 ks and 2 ks + 1
        uint32_t a[W::kTilesM][4];
#pragma unroll
        for (int i = 0; i < W::kTilesM; ++i) {
            const uint32_t off = static_cast<uint32_t>(a_row + 16 * i) * kRowBytes + (2 * ks + a_chunk) * 16u;
            ldmatrix_x4(a[i], a_base + swizzle_offset<ReadSwizzle>(off));
        }
        uint32_t b[W::kTilesN][2];
#pragma unroll
        for (int j = 0; j < W::kTilesN; j += 2) {
            const uint32_t off = static_cast<uint32_t>(b_row + 8 * j) * kRowBytes + (2 * ks + b_chunk) * 16u;
            uint32_t r[4];
            ldmatrix_x4(r, b_base + swizzle_offset<ReadSwizzle>(off));
            b[j][0] = r[0];
            b[j][1] = r[1];
            b[j + 1][0] = r[2];
            b[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
            for (int j = 0; j < W::kTilesN; ++j) mma_bf16_16816(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
}

// Thread 0: arm stage `s`'s full barrier and issue the k-tile that starts at k0 into it.
template <int BM, int BN, int BK, int Stages, int BoxRowsA>
__device__ __forceinline__ void issue_stage(TmaGemmShared<BM, BN, BK, Stages>& sh, int s, const CUtensorMap* map_a,
                                            const CUtensorMap* map_b, int m0, int n0, int k0)
{
    // The bytes the two loads deliver: whole boxes, always, because TMA writes (and counts) the
    // zero-filled out-of-bounds part of a box too. Counted from the descriptor's box, BoxRowsA,
    // not from the tile height BM: with (a)'s 64-row box the phase completes on the 64 rows that
    // do arrive, and the kernel runs (wrongly) instead of waiting forever for bytes that never come.
    constexpr uint32_t kTxBytes = static_cast<uint32_t>((BoxRowsA * BK + BN * BK) * sizeof(__nv_bfloat16));
    mbarrier_arrive_expect_tx(&sh.full[s], kTxBytes);
    // PLANTED DEFECT (a), where it bites: with BoxRowsA = 64 this load writes rows 0..63 of the
    // [BM = 128][BK] A stage and nothing ever writes rows 64..127, which mma_stage reads anyway.
    tma_load_2d(sh.stage[s].a, map_a, &sh.full[s], k0, m0);
#if defined(TMA_GEMM_SWAP_B_COORDS)
    // PLANTED DEFECT (c), set by a -D on the build line: B's tile coordinates swapped. The box
    // is asked for at (n0, k0) instead of (k0, n0): its K coordinate is the tile's column and its
    // N coordinate the K offset, so only the K tiles whose offset is below N land in bounds (the
    // rest come back zero-filled), and those hold B's values from the wrong place.
    tma_load_2d(sh.stage[s].b, map_b, &sh.full[s], n0, k0);
#else
    tma_load_2d(sh.stage[s].b, map_b, &sh.full[s], k0, n0);
#endif
}

// One BM x BN output tile at (m0, n0): the whole K loop and the epilogue, run by all 256 threads
// of the block. `pipe` is the pipeline's position on entry (where the barriers were left by the
// previous tile, or a fresh PipelineState after init_pipeline) and is advanced past this tile's
// k-tiles on exit.
//
// Barrier phase bookkeeping across tiles: the tile issues loads only for its own k-tiles, and
// waits for every one of them, so the ring is drained when it returns: each slot's barrier has
// completed exactly the phases that were waited on, and no load is in flight. The next tile
// therefore starts issuing at the same position it starts consuming (pipe), and the parity that
// pipe carries is the one of the next phase of pipe.stage's barrier. A k-tile count that is not a
// multiple of Stages simply leaves the next tile starting mid-ring with the slots' parities
// staggered, which PipelineState tracks (it advances once per k-tile, whatever tile it is in).
// The __syncthreads() after the last k-tile also guarantees that no thread still reads a stage
// when thread 0 refills it for the next tile (the epilogue touches only registers and D).
template <int BM, int BN, int BK, int Stages, int BoxRowsA, SmemSwizzle ReadSwizzle>
__device__ __forceinline__ void gemm_tile(TmaGemmShared<BM, BN, BK, Stages>& sh, const CUtensorMap* map_a,
                                          const CUtensorMap* map_b, __nv_bfloat16* __restrict__ D, int M, int N,
                                          int K, int m0, int n0, PipelineState<Stages>& pipe)
{
    using W = WarpTiling<BM, BN>;
    static_assert(BK * sizeof(__nv_bfloat16) == 128,
                  "one tile row is one 128-byte TMA box row (BK = 64 bf16): the swizzle math assumes it");
    static_assert(BoxRowsA >= 1 && BoxRowsA <= BM && BoxRowsA <= 256, "the A box must fit the A stage");
    static_assert(BN <= 256, "TMA boxes have at most 256 rows");
    static_assert(Stages >= 1, "at least one stage");

    const int k_tiles = (K + BK - 1) / BK;  // the last one may be partial: TMA zero-fills past K

    // Prologue: fill the ring. Slot (pipe.stage + i) % Stages takes k-tile i; that is the slot
    // the consumer loop below reaches at its i-th step.
    if (threadIdx.x == 0) {
        int s = pipe.stage;
        for (int i = 0; i < Stages && i < k_tiles; ++i) {
            issue_stage<BM, BN, BK, Stages, BoxRowsA>(sh, s, map_a, map_b, m0, n0, i * BK);
            s = s + 1 == Stages ? 0 : s + 1;
        }
    }

    float acc[W::kTilesM][W::kTilesN][4];
#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < W::kTilesN; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        }
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        // Full: k-tile kt has landed in slot pipe.stage.
        mbarrier_wait(&sh.full[pipe.stage], pipe.phase);
        // PLANTED DEFECT (b), where it bites: ReadSwizzle is what the addresses assume, the
        // descriptor is what TMA did; with B128 here and swizzle none in the descriptor, chunk c
        // of row r is read from chunk c ^ (r % 8).
        mma_stage<BM, BN, BK, ReadSwizzle>(sh.stage[pipe.stage].a, sh.stage[pipe.stage].b, acc);
        // Empty: every warp is done reading the slot, so it may be overwritten. This is also what
        // keeps a fast warp from waiting on a phase two ahead of a slow one: no thread passes
        // here before all have waited on this phase, and the refill below is the next phase.
        __syncthreads();
        if (threadIdx.x == 0 && kt + Stages < k_tiles) {
            issue_stage<BM, BN, BK, Stages, BoxRowsA>(sh, pipe.stage, map_a, map_b, m0, n0, (kt + Stages) * BK);
        }
        pipe.advance();
    }

    // Epilogue: fp32 -> bf16 (round to nearest even), straight from the registers; rows past M and
    // columns past N are skipped. Pairs of adjacent columns go out as one 4-byte store when the
    // pair is whole and 4-byte aligned (N even and D 4-byte aligned).
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    const int g = lane / 4, t = lane % 4;
    const int row0 = m0 + (warp / W::kWarpsN) * W::WM + g;
    const int col0 = n0 + (warp % W::kWarpsN) * W::WN + 2 * t;
    const bool pairs = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(D) % 4 == 0);
#pragma unroll
    for (int i = 0; i < W::kTilesM; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = row0 + 16 * i + 8 * h;
            if (m >= M) continue;
            __nv_bfloat16* row = D + static_cast<size_t>(m) * N;
#pragma unroll
            for (int j = 0; j < W::kTilesN; ++j) {
                const int n = col0 + 8 * j;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (pairs && n + 1 < N) {
                    *reinterpret_cast<__nv_bfloat162*>(row + n) = __floats2bfloat162_rn(v0, v1);
                } else {
                    if (n < N) row[n] = __float2bfloat16_rn(v0);
                    if (n + 1 < N) row[n + 1] = __float2bfloat16_rn(v1);
                }
            }
        }
    }
}

}  // namespace tma_kernels

// One block per BM x BN tile of D. Block of 256 threads (8 warps, 2 x 4); grid
// (ceil(N / BN), ceil(M / BM), 1); dynamic smem sizeof(TmaGemmShared<BM, BN, BK, Stages>) + 1024.
//
// BoxRowsA must equal the row count of map_a's box; BM = BoxRowsA in the correct kernel.
// PLANTED DEFECT (a): tma_gemm<128, 128, 64, 4, 64, B128> with map_a's box {64, 64}: the A box
// covers half the tile's rows. The kernel neither checks BoxRowsA against BM nor clears the
// stages (it must not: the stale rows are the symptom), so rows 64..127 of each A stage are
// read as whatever shared memory held.
// PLANTED DEFECT (b): tma_gemm<128, 128, 64, 4, 128, B128> run with descriptors encoded with
// CU_TENSOR_MAP_SWIZZLE_NONE (for a 128-byte inner box the driver accepts only none or 128B, so
// none is the one possible mismatch): the reads undo a swizzle that was never applied.
template <int BM, int BN, int BK, int Stages, int BoxRowsA, tma_kernels::SmemSwizzle ReadSwizzle>
__global__ void __launch_bounds__(256) tma_gemm(const __grid_constant__ CUtensorMap map_a,
                                               const __grid_constant__ CUtensorMap map_b,
                                               __nv_bfloat16* D, int M, int N, int K)
{
    using namespace tma_kernels;
    using Shared = TmaGemmShared<BM, BN, BK, Stages>;
    static_assert(WarpTiling<BM, BN>::kThreads == 256, "the kernel is written for 8 warps");

    Shared& sh = aligned_shared_storage<Shared>();
    // &map_a: the generic address of a __grid_constant__ parameter is the parameter itself
    // (no local copy), which is what TMA needs to read the descriptor from.
    init_pipeline(sh, &map_a, &map_b);

    PipelineState<Stages> pipe;
    gemm_tile<BM, BN, BK, Stages, BoxRowsA, ReadSwizzle>(sh, &map_a, &map_b, D, M, N, K,
                                                         static_cast<int>(blockIdx.y) * BM,
                                                         static_cast<int>(blockIdx.x) * BN, pipe);
}
