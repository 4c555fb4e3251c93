#pragma once
// fp8 grouped (MoE) GEMM on Hopper tensor cores, shaped like DeepGEMM's sm90 fp8 grouped GEMMs
// (issue 61): TMA loads into 128B-swizzled shared memory behind an mbarrier, wgmma (warpgroup
// MMA, e4m3 x e4m3 -> f32) for each K-block of 128, and DeepGEMM's "promotion": each K-block's
// tensor-core accumulator is multiplied by its two block scales and added into an f32
// accumulator kept in registers. bf16 out. The same arithmetic as fp8_grouped_gemm.cuh's
// readable CUDA-core kernel:
//
//   D[row, n] = sum over K-blocks kb of SA(row, kb) * SB[g](kb, n / 128)
//                 * sum over k in kb of A[row, k] * B[g][k, n]
//
// with g the row's group. Written for reading: one warpgroup, a two-stage pipeline, no warp
// specialization, no clusters, no TMA multicast, no persistent scheduler.
//
// Layouts (template parameter fp8_grouped::Layout):
//   contiguous  A e4m3 [M_total, K] row-major; group_index I [M_total] (DeepGEMM's m_indices:
//               each row's group, -1 for a padding row, never written); B e4m3 [G, K, N] stored
//               [G, N, K] (K contiguous, like expert weights); SA [M_total, KB] (per row of A);
//               SB [G, KB, NB]; D bf16 [M_total, N]. The rows of one group are contiguous and
//               each group's rows start on a multiple of kBlockM (64): every 64-row tile holds
//               the rows of one group, then (at the group's end) padding rows. The tile's group
//               is I at its first row; a tile whose first row is padding is skipped whole. A row
//               of another group inside a tile (input not aligned) is not written.
//   masked      A e4m3 [G, M_max, K]; masked_m MM [G] (rows m >= MM[g] are not written, and tiles
//               that start at or past MM[g] do nothing); B as above; SA [G, M_max, KB];
//               SB [G, KB, NB]; D bf16 [G, M_max, N].
// KB = ceil(K / 128), NB = ceil(N / 128): SA's block is [1, 128], SB's [128, 128].
//
// Scale formats (template parameter fp8_grouped::ScaleFormat): f32 (the elements are the
// scales), or ue8m0 packed four K-blocks to an int32 along K (byte kb % 4 of element kb / 4, the
// least significant first): SA then has ceil(KB / 4) elements a row, SB ceil(KB / 4) rows. The
// scales are read from global memory by every thread for its own rows, one K-block at a time.
//
// TMA descriptors (the spec's `tma:` entries, passed by value as __grid_constant__ CUtensorMap
// parameters; fp8 is described to the driver as bytes):
//   map_a  contiguous: A [M_total, K], box [64, 128]       -> driver dims {K, M_total}
//          masked:     A [G, M_max, K], box [1, 64, 128]   -> driver dims {K, M_max, G}
//   map_b  B [G, K, N] col_major, box [1, 128, 128]        -> driver dims {K, N, G}
//   both swizzle 128B (a box row is 128 fp8 = 128 bytes, the swizzle span), out-of-bounds fill
//   zeros. Being 3-D, B's box never reaches into the next expert: columns past N of expert g
//   (and, masked, A's rows past M_max of group g) come back as zeros. TMA needs 16-byte row
//   strides: K % 16 == 0. The last K-block may be partial (TMA zero-fills past K).
//
// Block tile kBlockM x kBlockN = 64 x 128, K-block kBlockK = 128, one warpgroup (128 threads).
// Shared memory: kStages = 2 stages of (A tile [64][128 B], B tile [128][128 B]), each on a
// 1024-byte boundary (the 128B swizzle repeats every 8 rows of 128 bytes), and one "full"
// mbarrier per stage. Per K-block kb:
//   1. every thread reads its scales for kb from global memory (before waiting: the loads
//      overlap the wait and the MMAs);
//   2. every thread waits for full[kb % 2] (thread 0 armed it with arrive.expect_tx for the
//      24 KiB the two TMA loads deliver, and issued them, two K-blocks earlier);
//   3. the warpgroup issues four wgmma.mma_async.m64n128k32.f32.e4m3.e4m3 (the 128 bytes of K
//      in 32-byte steps), the first with scale-d = 0 (D = A * B: the K-block's accumulator
//      starts from zero), then commit_group and wait_group 0;
//   4. __syncthreads(): no thread still waits for its wgmma to read the stage; thread 0 reuses
//      it for K-block kb + 2;
//   5. promotion: acc += block_acc * (SA(row, kb) * SB[g](kb, n0 / 128)), in f32 registers.
// Epilogue: bf16 (round to nearest even) straight from the registers, two adjacent columns a
// store when N is even (and D 4-byte aligned); rows not in the group and columns past N are not written.
//
// wgmma operands: both K-major (e4m3 wgmma has no transpose): A's tile rows are m, B's are n,
// each 128 bytes of K. Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
// start address >> 4 in bits 0-13, leading byte offset in bits 16-29 (unused by a swizzled
// K-major operand whose K extent, 32 bytes, lies inside one 128-byte swizzle row; set to 1),
// stride byte offset 1024 >> 4 in bits 32-45 (from one group of 8 rows to the next: 8 x 128 B),
// base offset 0 in bits 49-51 (every tile starts on a 1024-byte boundary), layout 1 = 128B
// swizzle in bits 62-63. The k-th 32-byte step of K adds 32 k bytes to the start address: the
// swizzle is a function of the address bits, the same for the TMA that wrote the tile and the
// wgmma that reads it.
//
// Accumulator fragment of wgmma m64nNk32 with f32 D (PTX ISA, "Matrix fragments for
// wgmma.mma_async", D of .m64nNk*): warp w of the warpgroup owns rows 16 w .. 16 w + 15; thread
// (lane) holds N / 2 = 64 floats, d[4 j + e] at row 16 w + lane / 4 + 8 (e / 2), column
// 8 j + 2 (lane % 4) + e % 2, j = 0 .. N / 8 - 1, e = 0 .. 3.
//
// Launch: block (128, 1, 1); grid (ceil(N / 128), ceil(M_total / 64), 1) for contiguous,
// (ceil(N / 128), ceil(M_max / 64), G) for masked; dynamic shared memory
// sizeof(fp8_grouped_wgmma::Shared) + 1024 (the kernel rounds the base up to 1024 bytes; 50176 +
// 1024 B, above 48 KiB, so the harness opts in). Arguments: (map_a, map_b, I or MM, SA, SB, D, M,
// N, K, G) with M = M_total or M_max.
//
// Only <cuda.h> (CUtensorMap), <cuda_bf16.h>, <cuda_fp8.h> and inline PTX; no CUTLASS/CuTe. The
// TMA and mbarrier wrappers are tma_gemm.cuh's, the scale decoding fp8_grouped_gemm.cuh's.

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "fp8_grouped_gemm.cuh"  // fp8_grouped::Layout, ScaleFormat, scale_a_of, scale_b_of
#include "tma_gemm.cuh"          // tma_kernels: mbarriers, TMA loads, aligned_shared_storage

namespace fp8_grouped_wgmma {

using fp8_grouped::Layout;
using fp8_grouped::ScaleFormat;
using fp8_gemm::ScaleT;

constexpr int kBlockM = 64;                                  // one wgmma m64: one warpgroup's rows
constexpr int kBlockN = 128;                                 // the wgmma's n, and SB's block along N
constexpr int kBlockK = 128;                                 // the scales' K-block: 128 fp8 = 128 B
constexpr int kWgmmaK = 32;                                  // e4m3 wgmma's k (32 bytes)
constexpr int kStages = 2;                                   // K-blocks in flight
constexpr int kThreads = 128;                                // one warpgroup
constexpr int kAccumulators = kBlockM * kBlockN / kThreads;  // 64 f32 a thread

// The block's shared memory (placed by tma_kernels::aligned_shared_storage on a 1024-byte
// boundary): kStages (A, B) stages, each tile 1024-aligned as a 128B-swizzled TMA destination
// and wgmma operand must be, then the full barriers.
struct Shared {
    struct Stage {
        alignas(1024) uint8_t a[kBlockM * kBlockK];  // [64 rows][128 B of K], swizzled: 8 KiB
        alignas(1024) uint8_t b[kBlockN * kBlockK];  // [128 n][128 B of K], swizzled: 16 KiB
    };
    Stage stage[kStages];
    // full[s] completes a phase when the two TMA loads into stage[s] have landed: one arrival
    // (thread 0's arrive.expect_tx) plus the transaction bytes.
    alignas(8) uint64_t full[kStages];
};

// The bytes one stage's two loads deliver: whole boxes, always, since TMA counts (and writes) the
// zero-filled out-of-bounds part of a box too.
constexpr uint32_t kStageBytes = sizeof(Shared::Stage::a) + sizeof(Shared::Stage::b);
static_assert(kStageBytes == 24576, "a 64 x 128 A box and a 128 x 128 B box of bytes");

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_90a): wgmma and its fences.
// ---------------------------------------------------------------------------------------------

// The descriptor of a K-major, 128B-swizzled operand tile with 128-byte rows, starting at `tile`
// (see the header comment for the fields).
__device__ __forceinline__ uint64_t smem_desc_k_major_128b(const void* tile)
{
    const uint64_t address = tma_kernels::smem_u32(tile);
    return ((address & 0x3FFFF) >> 4)               // start address
           | (uint64_t(16 >> 4) << 16)              // leading byte offset (unused here)
           | (uint64_t(1024 >> 4) << 32)            // stride byte offset: 8 rows of 128 B
           | (uint64_t(1) << 62);                   // 128B swizzle; base offset 0
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_wait_all()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Keeps the compiler from moving an access of an accumulator register across the wgmma fences
// and waits: the asm of mma_async names the registers as outputs when it is issued, but the
// tensor cores write them until wait_group returns.
__device__ __forceinline__ void fence_operand(float& r)
{
    asm volatile("" : "+f"(r)::"memory");
}

#define REPRO_WGMMA_F8(i)                                                                              \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])

// d (64 x 128 f32, the fragment of the header comment) = A (64 x 32 e4m3, K-major in shared
// memory) * B (32 x 128 e4m3, K-major: B's rows are n) + (accumulate ? d : 0), issued by the
// whole warpgroup. imm-scale-a = imm-scale-b = 1 (no negation); e4m3 takes no transpose flags.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[kAccumulators], uint64_t desc_a, uint64_t desc_b,
                                                      bool accumulate)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1;\n"
        "}\n"
        : REPRO_WGMMA_F8(0), REPRO_WGMMA_F8(8), REPRO_WGMMA_F8(16), REPRO_WGMMA_F8(24), REPRO_WGMMA_F8(32),
          REPRO_WGMMA_F8(40), REPRO_WGMMA_F8(48), REPRO_WGMMA_F8(56)
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

#undef REPRO_WGMMA_F8

// Thread 0: arm stage s's full barrier and load K-block kb of the tile into it.
template <Layout L>
__device__ __forceinline__ void issue_stage(Shared& sh, int s, const CUtensorMap* map_a, const CUtensorMap* map_b,
                                            int m0, int n0, int g, int kb)
{
    uint64_t* full = &sh.full[s];
    tma_kernels::mbarrier_arrive_expect_tx(full, kStageBytes);
    const int k0 = kb * kBlockK;
    if constexpr (L == Layout::contiguous) {
        tma_kernels::tma_load_2d(sh.stage[s].a, map_a, full, k0, m0);  // A [M_total, K]: (k, row)
    } else {
        tma_kernels::tma_load_3d(sh.stage[s].a, map_a, full, k0, m0, g);  // A [G, M_max, K]: (k, row, g)
    }
    tma_kernels::tma_load_3d(sh.stage[s].b, map_b, full, k0, n0, g);  // B stored [G, N, K]: (k, n, g)
}

}  // namespace fp8_grouped_wgmma

namespace fp8_grouped {

// The grouped GEMM of the header comment. One block per 64 x 128 tile of one group's output.
template <Layout L, ScaleFormat F>
__global__ void __launch_bounds__(fp8_grouped_wgmma::kThreads, 1)
    fp8_grouped_wgmma_gemm(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                           const int32_t* __restrict__ groups, const ScaleT<F>* __restrict__ SA,
                           const ScaleT<F>* __restrict__ SB, __nv_bfloat16* __restrict__ D, int M, int N, int K,
                           int G)
{
    using namespace fp8_grouped_wgmma;
    const int n0 = static_cast<int>(blockIdx.x) * kBlockN;
    const int m0 = static_cast<int>(blockIdx.y) * kBlockM;

    // The tile's group, and the end of its rows (masked: the group's row count). A tile with
    // nothing to compute returns before anything is initialized (the whole block returns).
    int g = 0;
    int rows_end = M;
    if constexpr (L == Layout::contiguous) {
        if (m0 >= M) return;
        g = groups[m0];
        if (g < 0 || g >= G) return;  // the tile starts with padding, so it is all padding
    } else {
        g = static_cast<int>(blockIdx.z);
        rows_end = min(groups[g], M);
        if (m0 >= rows_end) return;  // past masked_m (an empty group: every tile)
    }

    Shared& sh = tma_kernels::aligned_shared_storage<Shared>();
    if (threadIdx.x == 0) {
        tma_kernels::prefetch_tensor_map(&map_a);
        tma_kernels::prefetch_tensor_map(&map_b);
#pragma unroll
        for (int s = 0; s < kStages; ++s) tma_kernels::mbarrier_init(&sh.full[s], 1);
        tma_kernels::fence_barrier_init();
    }
    __syncthreads();

    const int num_kb = fp8_gemm::div_up(K, kBlockK);
    const int num_nb = fp8_gemm::div_up(N, kBlockN);
    // Scale elements per row of SA and per K-block row of SB: one per K-block, or one per four.
    const int kb_elements = F == ScaleFormat::f32 ? num_kb : fp8_gemm::div_up(num_kb, 4);

    // Prologue: K-blocks 0 .. kStages - 1 into stages 0 .. kStages - 1.
    if (threadIdx.x == 0) {
        for (int kb = 0; kb < kStages && kb < num_kb; ++kb) issue_stage<L>(sh, kb, &map_a, &map_b, m0, n0, g, kb);
    }

    // This thread's two rows of the tile (the accumulator fragment), as rows of the group, and
    // their scale rows: SA follows A's rows.
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int row[2] = {m0 + 16 * warp + lane / 4, m0 + 16 * warp + lane / 4 + 8};
    const ScaleT<F>* sa_row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        // A row past M (a partial last tile) has no scales; its outputs are never stored.
        const int r = row[h] < M ? row[h] : M - 1;
        const size_t a_row = L == Layout::contiguous ? static_cast<size_t>(r) : static_cast<size_t>(g) * M + r;
        sa_row[h] = SA + a_row * kb_elements;
    }
    const ScaleT<F>* sb_group = SB + static_cast<size_t>(g) * kb_elements * num_nb;
    const int nb = n0 / kBlockN;

    float acc[kAccumulators];        // the promoted sum over K-blocks
    float block_acc[kAccumulators];  // one K-block's tensor-core accumulator
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] = block_acc[i] = 0.0f;

    for (int kb = 0; kb < num_kb; ++kb) {
        const int s = kb % kStages;
        const uint32_t parity = static_cast<uint32_t>(kb / kStages) & 1u;  // the phase of full[s] this K-block completes

        // 1. The K-block's scales.
        const float sb = fp8_grouped::scale_b_of<F>(sb_group, kb, nb, num_nb, false);
        const float scale0 = fp8_grouped::scale_a_of<F>(sa_row[0], kb, false) * sb;
        const float scale1 = fp8_grouped::scale_a_of<F>(sa_row[1], kb, false) * sb;

        // 2. K-block kb has landed in stage s.
        tma_kernels::mbarrier_wait(&sh.full[s], parity);

        // 3. block_acc = A tile * B tile over the 128 bytes of K, in four k32 steps.
#pragma unroll
        for (int i = 0; i < kAccumulators; ++i) fence_operand(block_acc[i]);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBlockK / kWgmmaK; ++k) {
            wgmma_m64n128k32_e4m3(block_acc, smem_desc_k_major_128b(sh.stage[s].a + k * kWgmmaK),
                                  smem_desc_k_major_128b(sh.stage[s].b + k * kWgmmaK), k > 0);
        }
        wgmma_commit();
        wgmma_wait_all();
#pragma unroll
        for (int i = 0; i < kAccumulators; ++i) fence_operand(block_acc[i]);

        // 4. Every thread is past its wait_group: the stage has been read; refill it.
        __syncthreads();
        if (threadIdx.x == 0 && kb + kStages < num_kb) {
            issue_stage<L>(sh, s, &map_a, &map_b, m0, n0, g, kb + kStages);
        }

        // 5. Promotion: d[4 j + e] is at row row[e / 2].
#pragma unroll
        for (int j = 0; j < kAccumulators / 4; ++j) {
            acc[4 * j + 0] += block_acc[4 * j + 0] * scale0;
            acc[4 * j + 1] += block_acc[4 * j + 1] * scale0;
            acc[4 * j + 2] += block_acc[4 * j + 2] * scale1;
            acc[4 * j + 3] += block_acc[4 * j + 3] * scale1;
        }
    }

    // Epilogue: the group's rows only (contiguous: I[row] == g, so no padding row; masked: below
    // masked_m), columns below N.
    // With N even (and D 4-byte aligned) row * N + n is even for even n: 4-byte aligned pairs.
    const bool pairs = N % 2 == 0 && reinterpret_cast<uintptr_t>(D) % 4 == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row[h];
        if (r >= rows_end) continue;
        if constexpr (L == Layout::contiguous) {
            if (groups[r] != g) continue;
        }
        const size_t d_row = L == Layout::contiguous ? static_cast<size_t>(r) : static_cast<size_t>(g) * M + r;
        __nv_bfloat16* out = D + d_row * N;
#pragma unroll
        for (int j = 0; j < kAccumulators / 4; ++j) {
            const int n = n0 + 8 * j + 2 * (lane % 4);
            const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
            if (pairs && n + 1 < N) {
                *reinterpret_cast<__nv_bfloat162*>(out + n) = __floats2bfloat162_rn(v0, v1);
            } else {
                if (n < N) out[n] = __float2bfloat16_rn(v0);
                if (n + 1 < N) out[n + 1] = __float2bfloat16_rn(v1);
            }
        }
    }
}

}  // namespace fp8_grouped
