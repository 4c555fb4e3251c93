// ---------------------------------------------------------------------------------------------
// repro harness runtime: the emulated reference's int8 GEMM on sm_90a, fed by TMA
//
// The same steps, folds and result as emulated_gemm_wgmma_kernel (emulated_gemm.cuh), with the
// work split the way Hopper's tensor cores are kept busy: a producer warpgroup whose one thread
// loads each step's two tiles with the tensor memory accelerator (one instruction a tile, no
// registers, completion counted by an mbarrier), and two consumer warpgroups that only issue
// wgmma and fold. The consumers keep one step's MMAs in flight while the next is issued, and a
// stage goes back to the producer as soon as the MMAs that read it are done.
//
// Why: the cp.async kernel reaches 29% of the int8 peak at 8192^3 (run 68): every thread both
// copies and multiplies, and every step waits for its MMAs and for a block-wide barrier. And a
// block streams 48 KiB a 128-deep step from L2, which at the int8 peak would be ~11 TB/s: with
// kClusterM = 2, two blocks on the same B tile (a cluster along M) each load half of it and
// multicast it to both, so each block fetches 32 KiB a step. Measured at 8192^3 on an H100
// (run 79): TMA alone 702-731 int8 TOPS, clusters of two 901-1025 (the default), clusters of
// four (16 KiB of B a block) 827-921. Before run 79 each consumer warp handed a stage back
// with a cluster-scope release, one block after the other, and clusters of two ran at 0.7x
// TMA alone.
//
// Synchronization, per stage s of kTmaStages:
//   full[s]   1 arrival (the producer's, with the stage's byte count) + the TMA's bytes: the
//             stage holds the step's tiles.
//   empty[s]  one arrival per consumer warp of every block in the cluster: no MMA reads the
//             stage any more, so any block of the cluster may write it again.
// Every phase wait names the parity of the phase it waits for: step i uses stage i % kTmaStages
// in its (i / kTmaStages)-th round.
//
// The slices are read through 3-D tensor maps [slice of batch][row][K] with 128-byte swizzle, the
// layout wgmma's descriptors read (wgmma_descriptor); rows past the operand's padding, which a
// cluster's rounding of the grid can ask for, arrive as zeros.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "driver.cuh"
#include "emulated_gemm.cuh"

namespace repro {

constexpr int kTmaStages = 4, kTmaThreads = 384;  // a producer warpgroup, two consumer warpgroups
constexpr int kTmaConsumerWarps = 8;
constexpr size_t kTmaSharedBytes = size_t(kTmaStages) * kWgmmaStageBytes + 2 * kTmaStages * sizeof(uint64_t) + 1024;
// Registers: the producer needs few, the consumers their 128 accumulators and the fold.
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;

// -------------------------------------------------------------------------- sm_90 primitives

__device__ inline void mbarrier_init(uint64_t* barrier, unsigned arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals));
#else
  (void)barrier, (void)arrivals;
#endif
}

// Makes the initialized barriers visible to the TMA unit and to the cluster's other blocks.
__device__ inline void mbarrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The producer's arrival, announcing how many bytes the stage's copies will bring.
__device__ inline void mbarrier_arrive_expecting(uint64_t* barrier, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
#else
  (void)barrier, (void)bytes;
#endif
}

// An arrival on this block's barrier where `arrive` (a predicate, not a branch: see release).
__device__ inline void mbarrier_arrive(uint64_t* barrier, bool arrive) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(int(arrive))
      : "memory");
#else
  (void)barrier, (void)arrive;
#endif
}

// An arrival on the barrier at the same place in block `rank` of the cluster, where `arrive`.
// The default .release.cta semantics, not .release.cluster: what the arrival hands back is a
// stage whose reads (by wgmma, waited for) are done, and nothing this thread wrote needs to be
// seen by the other block; a cluster-scope release is a fence on every warp's issue path.
__device__ inline void mbarrier_arrive_in_block(uint64_t* barrier, unsigned rank, bool arrive) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %2, 0;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(rank), "r"(int(arrive))
      : "memory");
#else
  (void)barrier, (void)rank, (void)arrive;
#endif
}

// Waits until the barrier's phase of this parity has completed.
__device__ inline void mbarrier_wait(uint64_t* barrier, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra LAB_WAIT;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
#else
  (void)barrier, (void)parity;
#endif
}

// One box of a 3-D tensor map into this block's shared memory, counted on `barrier`.
__device__ inline void tma_load(void* shared, const CUtensorMap* map, uint64_t* barrier, int x, int y, int z) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(barrier)), "r"(x), "r"(y), "r"(z)
      : "memory");
#else
  (void)shared, (void)map, (void)barrier, (void)x, (void)y, (void)z;
#endif
}

// The same box into the shared memory of every block in `blocks` (a bit per cluster rank), at
// the same offset, each counted on its own barrier at the same offset.
__device__ inline void tma_load_multicast(void* shared, const CUtensorMap* map, uint64_t* barrier, uint16_t blocks,
                                          int x, int y, int z) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, "
      "%5, %6}], [%2], %3;\n" ::"r"(shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(barrier)), "h"(blocks), "r"(x), "r"(y), "r"(z)
      : "memory");
#else
  (void)shared, (void)map, (void)barrier, (void)blocks, (void)x, (void)y, (void)z;
#endif
}

__device__ inline unsigned cluster_rank() {
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// Every thread of every block in the cluster.
__device__ inline void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// A warpgroup gives back registers (the producer) or takes them (the consumers).
template <int kRegisters>
__device__ inline void registers_release() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}
template <int kRegisters>
__device__ inline void registers_claim() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

// Keeps the compiler from moving reads of the accumulators above the wait for the MMAs that
// write them (the wgmma asm names them as outputs at its issue, not at its completion).
__device__ inline void accumulators_fence(int (&acc)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+r"(acc[i])::"memory");
}

// -------------------------------------------------------------------------- the kernel

template <int kClusterM>
__global__ void __launch_bounds__(kTmaThreads, 1)
    emulated_gemm_tma_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                             EmulatedGemmArgs p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) signed char tma_shared[];
  // The 128-byte swizzle repeats every 1024 bytes: the stages start on such a boundary (the same
  // offset in every block, which the multicast relies on).
  signed char* stages = tma_shared + ((1024 - shared_address(tma_shared) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + kTmaStages * kWgmmaStageBytes);
  uint64_t* empty = full + kTmaStages;
  const int thread = threadIdx.x, warpgroup = thread / 128;
  const unsigned rank = kClusterM == 1 ? 0u : cluster_rank();
  if (thread == 0) {
    for (int s = 0; s < kTmaStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kTmaConsumerWarps * kClusterM);
    }
    mbarrier_init_fence();
  }
  // The cluster's barriers are all initialized before any block multicasts into another.
  if (kClusterM > 1) cluster_sync();
  else __syncthreads();
  const int64_t l = blockIdx.z, m0 = int64_t(blockIdx.y) * kWgmmaTileM, n0 = int64_t(blockIdx.x) * kWgmmaTileN;

  if (warpgroup == 0) {
    registers_release<kProducerRegisters>();
    if (thread == 0) {
      // Tensor map z: the slice's index over all batches' slices.
      const int a_first = int((p.a.batches == 1 ? 0 : l) * p.a.slices), b_first = int((p.b.batches == 1 ? 0 : l) * p.b.slices);
      constexpr int kBRows = kWgmmaTileN / kClusterM;  // this block's share of the B tile
      for (int64_t s = 0; s < p.step_count; ++s) {
        const int stage = int(s % kTmaStages);
        if (s >= kTmaStages) mbarrier_wait(&empty[stage], unsigned((s / kTmaStages - 1) & 1));
        const EmulationStep step = p.steps[s];
        const int k = step.k_tile * kEmulatedTileK;
        signed char* a_tile = stages + stage * kWgmmaStageBytes;
        signed char* b_tile = a_tile + kWgmmaTileM * kEmulatedTileK;
        mbarrier_arrive_expecting(&full[stage], unsigned(kWgmmaStageBytes));
        tma_load(a_tile, &a_map, &full[stage], k, int(m0), a_first + step.a_plane);
        if (kClusterM == 1)
          tma_load(b_tile, &b_map, &full[stage], k, int(n0), b_first + step.b_plane);
        else
          tma_load_multicast(b_tile + rank * kBRows * kEmulatedTileK, &b_map, &full[stage],
                             uint16_t((1u << kClusterM) - 1), k, int(n0 + rank * kBRows), b_first + step.b_plane);
      }
    }
  } else {
    registers_claim<kConsumerRegisters>();
    const int consumer = warpgroup - 1, lane = thread % 32, warp = (thread % 128) / 32;
    // Hands stage `stage` back to the producers of every block in the cluster, once this warp's
    // MMAs that read it are done: lane r arrives for the warp at block r, all in one instruction.
    // A predicate rather than a branch, because ptxas serializes every wgmma of a kernel with a
    // divergent path among them.
    const auto release = [&](int stage) {
      __syncwarp();
      if (kClusterM == 1) mbarrier_arrive(&empty[stage], lane == 0);
      else mbarrier_arrive_in_block(&empty[stage], unsigned(lane % kClusterM), lane < kClusterM);
    };
    int acc[128];
    int accumulate = 0;  // 0: the next MMA starts the sums afresh (after a fold)
    int64_t unreleased = -1;  // the step whose MMAs may still be in flight, its stage not yet handed back
    for (int64_t s = 0; s < p.step_count; ++s) {
      const int stage = int(s % kTmaStages);
      mbarrier_wait(&full[stage], unsigned((s / kTmaStages) & 1));
      const signed char* a_tile = stages + stage * kWgmmaStageBytes + consumer * 64 * kEmulatedTileK;
      const signed char* b_tile = stages + stage * kWgmmaStageBytes + kWgmmaTileM * kEmulatedTileK;
      wgmma_k_step(acc, a_tile, b_tile, accumulate);
      const int fold = p.steps[s].fold;
      if (fold == 0) {
        // The previous step's MMAs are done (this one's may run on): its stage goes back.
        wgmma_wait<1>();
        if (unreleased >= 0) release(int(unreleased % kTmaStages));
        unreleased = s;
        continue;
      }
      wgmma_wait<0>();
      accumulators_fence(acc);
      if (unreleased >= 0) release(int(unreleased % kTmaStages));
      release(stage);
      unreleased = -1;
      fold_wgmma_accumulators(p, acc, l, m0 + consumer * 64 + 16 * warp, n0, lane, fold, p.steps[s].fresh != 0);
      accumulate = 0;
    }
    // The last step folds, so no MMA is in flight here; but ptxas cannot know that, and without
    // this wait it injects one of its own inside the loop (C7517).
    wgmma_wait<0>();
  }
  // No block leaves while another of its cluster may still arrive on its barriers. (The producer
  // warp's lanes come here apart, and barrier.cluster's .aligned form wants the warp together.)
  if (kClusterM > 1) {
    __syncwarp();
    cluster_sync();
  }
#else
  (void)a_map, (void)b_map, (void)p;
#endif
}

// -------------------------------------------------------------------------- the launch

// The tensor map of an operand's slices: [batches x slices][Ip][Kp] bytes, boxes of `box_rows`
// rows of one 128-byte K tile, swizzled as wgmma reads them.
inline CUtensorMap slices_tensor_map(const SlicedOperand& slices, int box_rows) {
  static const auto encode = driver_function<PFN_cuTensorMapEncodeTiled_v12000>(
      "cuTensorMapEncodeTiled", 12000, "the emulated reference's TMA kernel (a CUDA 12+ driver has it)");
  const cuuint64_t dims[3] = {cuuint64_t(slices.Kp), cuuint64_t(slices.Ip), cuuint64_t(slices.batches * slices.slices)};
  const cuuint64_t strides[2] = {cuuint64_t(slices.Kp), cuuint64_t(slices.slice_stride())};
  const cuuint32_t box[3] = {cuuint32_t(kEmulatedTileK), cuuint32_t(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  const CUresult result = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, slices.data, dims, strides, box,
                                 element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    fatal(kExitCudaError, "fault",
          strprintf("the emulated reference's TMA kernel: cuTensorMapEncodeTiled failed on int8 slices of %lld x %lld "
                    "x %lld bytes: %s (rerun with --reference device)",
                    (long long)(slices.batches * slices.slices), (long long)slices.Ip, (long long)slices.Kp,
                    cu_result_name(result).c_str()));
  return map;
}

// Starts the TMA kernel, one block a 128 x 256 output tile, clusters of kClusterM blocks along M
// (the grid rounded up to whole clusters: the extra rows read zeros and write nothing).
template <int kClusterM>
inline void launch_tma_emulated_gemm(const EmulatedGemmArgs& args, int64_t L) {
  const CUtensorMap a_map = slices_tensor_map(args.a, kWgmmaTileM);
  const CUtensorMap b_map = slices_tensor_map(args.b, kWgmmaTileN / kClusterM);
  const int64_t m_tiles = ceil_div(args.a.Ip / kWgmmaTileM, int64_t(kClusterM)) * kClusterM;
  REPRO_CUDA_CHECK(cudaFuncSetAttribute(emulated_gemm_tma_kernel<kClusterM>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(kTmaSharedBytes)));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(args.b.Ip / kWgmmaTileN), unsigned(m_tiles), unsigned(L));
  config.blockDim = dim3(kTmaThreads);
  config.dynamicSmemBytes = kTmaSharedBytes;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1, cluster.val.clusterDim.y = kClusterM, cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  REPRO_CUDA_CHECK(cudaLaunchKernelEx(&config, emulated_gemm_tma_kernel<kClusterM>, a_map, b_map, args));
}

}  // namespace repro
