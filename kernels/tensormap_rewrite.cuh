#pragma once
// A k-grouped bf16 GEMM whose TMA warp rewrites its CTA's tensor maps in global memory at every
// group switch, as DeepGEMM's sm90_fp8_gemm_1d1d does for its k-grouped contiguous layout (the
// weight gradients of an MoE layer): the race class of issue 62's second section. The
// pipeline, math and epilogue are aligned_pipeline.cuh's.
//
//   D[g, M, N] = A[:, Kg] @ B[Kg, :]   for each group g,  bf16 in, fp32 accumulation, f32 out,
//
// Kg the g-th run of k_sizes[g] columns of K (group 0 first, no gaps). A is row-major [M, K], B is
// stored as a row-major [N, K] matrix (column-major [K, N]), D is [G, M, N] f32. The host encodes
// map_a over all of A (dims {K, M}, box {64, 128}, 128B swizzle), map_b over all of B (dims
// {K, N}, box {64, BN}, 128B swizzle) and map_d over D (dims {N, M, G}, box {BN, 64, 1}).
//
// Why the maps are rewritten: a k-tile that runs past the end of group g must read zeros, not
// the next group's columns, so every group loads through maps whose base is its first column
// and whose inner dimension is k_sizes[g] (TMA zero-fills past it). The TMA thread keeps a copy
// of each host-encoded map in the tensor-map area at the start of shared memory (as DeepGEMM),
// and at each group switch:
//   (1) tensormap.replace.tile.global_address and .global_dim (dimension 0) on the copies in
//       shared memory (tensormap.replace...shared::cta.b1024);
//   (2) copies the 128 bytes of each to the CTA's own maps in global memory (`workspace`, 256
//       bytes per CTA: map A then map B, 128-byte aligned), with generic loads and stores;
//   (3) fence.proxy.tensormap::generic.release.gpu, then fence.proxy.tensormap::generic.acquire.gpu
//       on each global map, and loads the group's k-tiles through the global maps.
// The k offsets of the groups live in static shared memory (s_k_offset, written by thread 0 before
// the block-wide barrier), before the 1024-aligned dynamic area.
//
// The race: the TMA unit reads a load's tensor map when it executes the load, some time after the
// thread issued it. The loads of group g - 1's last k-tiles were issued just before the switch;
// if the TMA unit reads their map after step (2) wrote the global copy, they fetch group g's data
// (another base address, another inner dimension) into group g - 1's stages. The variants
// (MapRewrite, a template argument):
//   no_drain              steps (1)-(3) right after the last load of the previous group: the
//                         race (DeepGEMM before its PR #343). PLANTED DEFECT.
//   drained               before (1), the TMA thread drains its TMA operations:
//                         cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0; and
//                         __syncwarp on its own lane (DeepGEMM's PR #343, whose review settled
//                         on __syncwarp(1 << lane_idx) as a scheduling barrier). The loads use
//                         mbarrier completion, which the PTX ISA puts in no bulk async-group; the
//                         wait relies on what CUTLASS's ptr-array kernels rely on too
//                         (cute::tma_desc_commit_group + tma_desc_wait_group, "wait until all TMA
//                         descriptor previously issued are safe to be modified"): once the wait
//                         returns, the TMA unit has read the maps of every earlier operation.
//   replace_then_drain    (1) first, then the drain, then (2)-(3): the replace "in the loads'
//                         commit group", DeepGEMM PR #375's argument that the drain of #343 is
//                         incomplete. Our reading of the PTX memory model: NOT a race.
//                         tensormap.replace is a weak memory operation on the whole 128-byte
//                         object it names, performed by the thread in program order; it is not a
//                         bulk async operation (commit_group batches only cp{.reduce}.async.bulk
//                         operations with bulk-group completion), so it joins no group. It writes the shared-memory copy, which no TMA load
//                         reads (every load reads the global copy). The global copy is written in
//                         (2), after wait_group.read 0, exactly as in `drained`; and the thread's
//                         own ld.shared of the copy in (2) follows its replace in program order
//                         (same thread, same bytes). So replace_then_drain is as correct as
//                         drained: 0 findings, numbers that pass.
//
// Launch: grid (CTAS, 1, 1), block (384, 1, 1), dynamic shared memory
// aligned_pipeline_kernels::Layout<BN, Stages>::kBytes; workspace: CTAS x 256 bytes, 128-byte
// aligned. G <= kMaxGroups. K offsets must keep the maps' base addresses 16-byte aligned: every
// k_sizes[g] a multiple of 8. Arguments:
// tensormap_rewrite_gemm<BN, Stages, Rewrite>(map_a, map_b, map_d, workspace, A, B, k_sizes, G, M, N).

#include "aligned_pipeline.cuh"

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace tensormap_rewrite_kernels {

enum class MapRewrite { no_drain, drained, replace_then_drain };

constexpr int kMaxGroups = 16;

// ---------------------------------------------------------------------------------------------
// Tensor-map PTX (sm_90a), as DeepGEMM's ptx/tma.cuh names them.
// ---------------------------------------------------------------------------------------------

// The map's global address, in the copy in shared memory.
__device__ __forceinline__ void tensor_map_replace_global_addr_in_smem(CUtensorMap* smem_map, const void* address)
{
    asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" ::"r"(
                     tma_kernels::smem_u32(smem_map)),
                 "l"(reinterpret_cast<uint64_t>(address))
                 : "memory");
}

// The map's innermost global dimension (elements), in the copy in shared memory.
__device__ __forceinline__ void tensor_map_replace_inner_dim_in_smem(CUtensorMap* smem_map, uint32_t elements)
{
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;" ::"r"(
                     tma_kernels::smem_u32(smem_map)),
                 "r"(elements)
                 : "memory");
}

// This thread's generic writes of tensor maps, before later tensormap-proxy reads at gpu scope.
__device__ __forceinline__ void tensor_map_release_gpu()
{
    asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
}

// The 128 bytes of the map at `gmem_map`, as the tensormap proxy reads them, after the release.
__device__ __forceinline__ void tensor_map_acquire_gpu(const CUtensorMap* gmem_map)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(reinterpret_cast<uint64_t>(gmem_map))
                 : "memory");
}

// DeepGEMM PR #343's drain: every TMA operation this thread issued has read its sources (its
// tensor map included) once this returns. The __syncwarp names this lane only: the caller is one
// lane of the warp, and the barrier serves as a scheduling fence.
__device__ __forceinline__ void drain_tma_operations()
{
    tma_store_kernels::bulk_commit_group();
    tma_store_kernels::bulk_wait_group_read<0>();
    __syncwarp(1u << (threadIdx.x % 32));
}

// Steps (1)-(3) of the header comment for group g, whose columns start at `k_offset`.
template <MapRewrite Rewrite>
__device__ __forceinline__ void switch_group_maps(CUtensorMap* smem_map_a, CUtensorMap* smem_map_b,
                                                  CUtensorMap* gmem_map_a, CUtensorMap* gmem_map_b,
                                                  const __nv_bfloat16* A, const __nv_bfloat16* B, int k_offset,
                                                  int k_size)
{
    if constexpr (Rewrite == MapRewrite::drained) drain_tma_operations();
    // PLANTED DEFECT (no_drain): nothing above waits for the loads of the previous group's last
    // k-tiles, issued just before this; step (2) overwrites the global maps they read. Should be
    // drain_tma_operations(), as in MapRewrite::drained.
    // (1) The copies in shared memory: A and B stored with K innermost, so the group's first
    // column is k_offset elements in, and its inner dimension is k_size.
    tensor_map_replace_global_addr_in_smem(smem_map_a, A + k_offset);
    tensor_map_replace_inner_dim_in_smem(smem_map_a, static_cast<uint32_t>(k_size));
    tensor_map_replace_global_addr_in_smem(smem_map_b, B + k_offset);
    tensor_map_replace_inner_dim_in_smem(smem_map_b, static_cast<uint32_t>(k_size));
    // replace_then_drain: the drain after the replaces (which touch only the shared copies) and
    // before the global maps are written: see the header comment for why this is not a race.
    if constexpr (Rewrite == MapRewrite::replace_then_drain) drain_tma_operations();
    // (2) Into the CTA's global maps (128 bytes each, generic loads and stores).
    *gmem_map_a = *smem_map_a;
    *gmem_map_b = *smem_map_b;
    // (3) Publish to the tensormap proxy, and acquire before the next loads read them.
    tensor_map_release_gpu();
    tensor_map_acquire_gpu(gmem_map_a);
    tensor_map_acquire_gpu(gmem_map_b);
}

}  // namespace tensormap_rewrite_kernels

// Persistent k-grouped GEMM (see the header comment). For each group in turn, CTA b computes the
// output tiles b, b + gridDim.x, ... of D[g] (row-major tile order). BN = 136.
template <int BN, int Stages, tensormap_rewrite_kernels::MapRewrite Rewrite>
__global__ void __launch_bounds__(aligned_pipeline_kernels::kThreads, 1)
    tensormap_rewrite_gemm(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                           const __grid_constant__ CUtensorMap map_d, uint8_t* workspace, const __nv_bfloat16* A,
                           const __nv_bfloat16* B, const int* k_sizes, int G, int M, int N)
{
    using namespace aligned_pipeline_kernels;
    using namespace tensormap_rewrite_kernels;
    static_assert(BN == kWgmmaN, "the wgmma written out is m64n136k16");

    // Static shared memory first: where each group's columns start (s_k_offset[G] is the end).
    __shared__ int s_k_offset[kMaxGroups + 1];
    extern __shared__ __align__(1024) uint8_t smem[];
    const Smem<BN, Stages> sm{smem};

    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    if (threadIdx.x == 0) {
        check_alignment(smem);
        if (G > kMaxGroups) __trap();
        s_k_offset[0] = 0;
        for (int g = 0; g < G; ++g) s_k_offset[g + 1] = s_k_offset[g] + k_sizes[g];
    }
    if (warp == kMathWarps && lane == 0) {
        tma_kernels::prefetch_tensor_map(&map_d);
        init_barriers(sm);
    }
    __syncthreads();  // the last block-wide barrier: the roles part here

    const int tiles_n = (N + BN - 1) / BN, tiles = ((M + kBlockM - 1) / kBlockM) * tiles_n;
    const int first_tile = static_cast<int>(blockIdx.x), tile_step = static_cast<int>(gridDim.x);
    if (warp >= kMathWarps) {
        if (warp == kMathWarps && lane == 0) {
            // The TMA thread: its copies of the host-encoded maps (shared memory, edited at each
            // switch) and its CTA's maps in global memory (what the loads read).
            CUtensorMap* smem_map_a = sm.tensor_map(0);
            CUtensorMap* smem_map_b = sm.tensor_map(1);
            CUtensorMap* gmem_map_a = reinterpret_cast<CUtensorMap*>(workspace + 256 * blockIdx.x);
            CUtensorMap* gmem_map_b = gmem_map_a + 1;
            *smem_map_a = map_a;
            *smem_map_b = map_b;
            tma_kernels::PipelineState<Stages> pipe;
            for (int g = 0; g < G; ++g) {
                const int k_size = s_k_offset[g + 1] - s_k_offset[g];
                const int k_tiles = (k_size + kBlockK - 1) / kBlockK;
                if (k_tiles == 0 || first_tile >= tiles) continue;  // no loads in this group
                switch_group_maps<Rewrite>(smem_map_a, smem_map_b, gmem_map_a, gmem_map_b, A, B, s_k_offset[g], k_size);
                for (int t = first_tile; t < tiles; t += tile_step) {
                    load_tile(sm, pipe, gmem_map_a, gmem_map_b, (t / tiles_n) * kBlockM, (t % tiles_n) * BN, k_tiles);
                }
            }
        }
        return;
    }

    tma_kernels::PipelineState<Stages> pipe;
    float acc[kAccumulators];
    for (int g = 0; g < G; ++g) {
        const int k_tiles = (s_k_offset[g + 1] - s_k_offset[g] + kBlockK - 1) / kBlockK;
        for (int t = first_tile; t < tiles; t += tile_step) {
            mma_tile(sm, pipe, k_tiles, acc);  // a group of no columns: acc = 0
            store_tile(sm, &map_d, acc, M, (t / tiles_n) * kBlockM, (t % tiles_n) * BN, g);
        }
    }
    if (warp % 4 == 0 && lane == 0) tma_store_kernels::bulk_wait_group<0>();
}
