// ---------------------------------------------------------------------------------------------
// repro harness runtime: the int8 GEMM kernels of the emulated reference
//
// Sums of products of int8 planes (emulated_slices.cuh), step by step, folded into the fp64
// output level by level (slices) or into residue planes modulus by modulus (moduli,
// emulated_moduli.cuh): on sm_90a with wgmma (fed by cp.async here, by TMA in
// emulated_gemm_tma.cuh), elsewhere from sm_80 with mma.sync. emulated_reference.cuh plans the
// planes and says what the result guarantees; emulated_gemm_launch.cuh picks the kernel.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_slices.cuh"

namespace repro {

// -------------------------------------------------------------------------- the int8 GEMM
//
// A block computes 128 x 128 outputs with 8 warps (2 along M x 4 along N), a warp 64 x 32 as
// 4 x 4 tiles of mma.sync.m16n8k32.s8 (sm_80 and later), two blocks to an SM. The work is a
// sequence of steps, one 128-deep K tile of one slice pair each, ordered level by level (finest
// first), K tile by K tile, pair by pair: a table built on the host (EmulationSteps) gives each
// step's tile offsets and whether it ends a fold. A ring of 3 shared-memory stages filled by
// cp.async keeps two steps in flight.
//
// A fold adds the int32 accumulators, times the level's power of two, to the output in fp64
// (each thread its own outputs: no synchronization) and clears them; the last fold also scales
// by alpha * 2^(E_i + F_j + 2). Keeping the fp64 partial sums in the output rather than in
// registers halves the registers a thread needs, which is what lets two blocks share an SM.
//
// A tile row is 128 bytes; its eight 16-byte chunks are stored XOR-swizzled by the row (chunk
// c of row r at c ^ (r % 8)), so the 8 rows that one ldmatrix reads sit on different banks.
constexpr int kEmulatedTile = 128, kEmulatedThreads = 256, kEmulatedStages = 3;
constexpr size_t kEmulatedTileBytes = size_t(kEmulatedTile) * kEmulatedTileK;
constexpr size_t kEmulatedSharedBytes = size_t(kEmulatedStages) * 2 * kEmulatedTileBytes;
// int32 sums stay exact for 2^17 terms of |d d'| <= 127^2 (< 2^31): at most this many K tiles
// times pairs go into one accumulation.
constexpr int kTilePairsPerFold = (1 << 17) / kEmulatedTileK;

// int32 sums of at most 2^17 products of int8 planes in [-127, 127] (slices' digits, moduli's
// residues) stay exact: kTilePairsPerFold is what every fold plan relies on.
static_assert(int64_t(kTilePairsPerFold) * kEmulatedTileK * 127 * 127 < (int64_t(1) << 31),
              "an int32 sum of a fold's products could overflow");

// One step: the byte offsets of its A and B tiles from the batch's first plane (and, for the
// TMA kernels, the planes and the K tile as a tensor map's coordinates), and the fold that
// follows it: 0 none, else 1 + the level (slices: its weight 2^-7(level + 2)) or 1 + the modulus
// (moduli), negated for the last; `fresh` where the fold starts its sum (the first fold of
// slices, the first of each modulus) rather than adding to an earlier one.
struct EmulationStep {
  int64_t a_offset, b_offset;
  int a_plane, b_plane, k_tile;
  int fold, fresh;
};

struct EmulatedGemmArgs {
  SlicedOperand a, b;
  const EmulationStep* steps;  // device copy of the table
  int64_t step_count;
  double* out;  // [L][M][N]
  unsigned char* residues;  // moduli: [moduli][L][M][N], residues in [0, m); slices: null
  double alpha;
  int64_t M, N, outputs;  // outputs: L M N
};

__device__ inline unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

__device__ inline void copy_16_bytes_async(void* shared, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(shared)), "l"(global));
#else
  *reinterpret_cast<int4*>(shared) = *reinterpret_cast<const int4*>(global);
#endif
}

__device__ inline int swizzled(int row, int chunk) { return row * kEmulatedTileK + ((chunk ^ (row % 8)) << 4); }

// One 128 x 128-byte tile (rows `pitch` bytes apart) into shared memory: 1024 chunks, 4 a thread.
__device__ inline void copy_sliced_tile(signed char* tile, const signed char* source, int64_t pitch, int thread) {
#pragma unroll
  for (int c = thread; c < kEmulatedTile * (kEmulatedTileK / 16); c += kEmulatedThreads) {
    const int row = c / (kEmulatedTileK / 16), chunk = c % (kEmulatedTileK / 16);
    copy_16_bytes_async(tile + swizzled(row, chunk), source + row * pitch + chunk * 16);
  }
}

__device__ inline void load_matrix_x4(unsigned (&r)[4], const signed char* shared) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 { %0, %1, %2, %3 }, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(shared)));
#else
  (void)r, (void)shared;
#endif
}

// d += a * b for one 16 x 8 x 32 step of int8 (exact int32 sums).
__device__ inline void mma_s8_16x8x32(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, "
               "{ %0, %1, %2, %3 };\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;  // not reached: the host takes DMMA before sm_80
#endif
}

// A step's fold, worked out once for all of a thread's outputs (each fold unrolls over them).
struct Fold {
  bool fresh, last;
  double weight;         // slices: the level's 2^-7(level + 2)
  int modulus;           // moduli: the step's modulus
  unsigned char* plane;  // moduli: its residue plane
};

__device__ inline Fold fold_of(const EmulatedGemmArgs& p, int fold, bool fresh) {
  const int index = abs(fold) - 1;  // the level, or the modulus
  Fold f;
  f.fresh = fresh, f.last = fold < 0;
  f.weight = ldexp(1.0, -kEmulationSliceBits * (index + 2));
  f.modulus = p.residues != nullptr ? emulation_modulus(index) : 1;
  f.plane = p.residues != nullptr ? p.residues + index * p.outputs : nullptr;
  return f;
}

// The fold of one output's int32 sum (output (l, m, n); none outside the GEMM). Slices: the sum
// times the level's weight (exact, and the int32 converts exactly), added to what earlier folds
// left in the output; the last fold also scales by alpha * 2^(E_i + F_j + 2). Moduli: the sum
// modulo the step's modulus into its residue plane (emulated_moduli.cuh turns the planes into
// outputs). kResidues: p.residues is set (moduli); a template argument so that a fold's
// unrolled loop holds one scheme's code, not both.
template <bool kResidues>
__device__ __forceinline__ void fold_output(const EmulatedGemmArgs& p, const Fold& f, int sum, int64_t l, int64_t m,
                                            int64_t n) {
  if (m >= p.M || n >= p.N) return;
  const int64_t at = (l * p.M + m) * p.N + n;
  if constexpr (kResidues) {
    f.plane[at] = fold_residue(sum, f.modulus, f.fresh, f.fresh ? 0 : f.plane[at]);
    return;
  }
  double value = (f.fresh ? 0.0 : p.out[at]) + double(sum) * f.weight;
  if (f.last) {
    const int ea = p.a.top[(p.a.batches == 1 ? 0 : l) * p.M + m], eb = p.b.top[(p.b.batches == 1 ? 0 : l) * p.N + n];
    value = ea == kNoTop || eb == kNoTop ? 0.0 : p.alpha * ldexp(value, ea + eb + 2);
  }
  p.out[at] = value;
}

__global__ void __launch_bounds__(kEmulatedThreads, 2) emulated_gemm_kernel(EmulatedGemmArgs p) {
  extern __shared__ __align__(128) signed char emulated_stages[];  // [stage][a, b][128 rows][128 bytes]
  const int thread = threadIdx.x, lane = thread % 32, warp = thread / 32;
  const int warp_m = (warp / 4) * 64, warp_n = (warp % 4) * 32;
  const int64_t l = blockIdx.z, m0 = int64_t(blockIdx.y) * kEmulatedTile, n0 = int64_t(blockIdx.x) * kEmulatedTile;
  const signed char* a_base = p.a.data + (p.a.batches == 1 ? 0 : l) * p.a.batch_stride() + m0 * p.a.Kp;
  const signed char* b_base = p.b.data + (p.b.batches == 1 ? 0 : l) * p.b.batch_stride() + n0 * p.b.Kp;
  const auto fetch = [&](int64_t s) {
    const EmulationStep step = p.steps[s];
    signed char* stage = emulated_stages + (s % kEmulatedStages) * 2 * kEmulatedTileBytes;
    copy_sliced_tile(stage, a_base + step.a_offset, p.a.Kp, thread);
    copy_sliced_tile(stage + kEmulatedTileBytes, b_base + step.b_offset, p.b.Kp, thread);
  };
  for (int s = 0; s < kEmulatedStages - 1; ++s) {
    if (s < p.step_count) fetch(s);
    copy_commit();
  }
  // ldmatrix row addresses: A's four 8 x 16-byte matrices are rows 0-7 / 8-15 at K bytes 0-15 /
  // 16-31 of a 16 x 32 fragment; B's, n rows 0-7 at K 0-15 / 16-31, then n rows 8-15.
  const int a_row = lane % 16, a_chunk = lane / 16;
  const int b_row = lane % 8 + 8 * (lane / 16), b_chunk = (lane / 8) % 2;
  const int g = lane / 4, t = lane % 4;
  int acc[4][4][4] = {};  // the exact int32 sums since the last fold
  for (int64_t s = 0; s < p.step_count; ++s) {
    copy_wait<kEmulatedStages - 2>();
    __syncthreads();
    if (s + kEmulatedStages - 1 < p.step_count) fetch(s + kEmulatedStages - 1);
    copy_commit();
    const signed char* a_tile = emulated_stages + (s % kEmulatedStages) * 2 * kEmulatedTileBytes;
    const signed char* b_tile = a_tile + kEmulatedTileBytes;
#pragma unroll
    for (int k32 = 0; k32 < kEmulatedTileK / 32; ++k32) {
      unsigned a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) load_matrix_x4(a[i], a_tile + swizzled(warp_m + 16 * i + a_row, 2 * k32 + a_chunk));
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        unsigned r[4];
        load_matrix_x4(r, b_tile + swizzled(warp_n + 8 * j + b_row, 2 * k32 + b_chunk));
        b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_s8_16x8x32(acc[i][j], a[i], b[j][0], b[j][1]);
    }
    const int fold = p.steps[s].fold;
    if (fold == 0) continue;
    const Fold f = fold_of(p, fold, p.steps[s].fresh != 0);
    // (One loop with the scheme chosen per output: two unrolled loops spilled more here.)
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t m = m0 + warp_m + 16 * i + g + 8 * (e / 2), n = n0 + warp_n + 8 * j + 2 * t + e % 2;
          if (p.residues != nullptr) fold_output<true>(p, f, acc[i][j][e], l, m, n);
          else fold_output<false>(p, f, acc[i][j][e], l, m, n);
          acc[i][j][e] = 0;
        }
  }
}

// ------------------------------------------------------------------ the int8 GEMM on sm_90a: wgmma
//
// The same steps and folds as emulated_gemm_kernel, on Hopper's warpgroup MMA: two warpgroups,
// each 64 x 256 outputs of a 128 x 256 block (wgmma.m64n256k32.s8, 128 int32 accumulators a
// thread), 4 stages of 48 KiB filled by cp.async in the 128-byte swizzle that wgmma's shared
// memory descriptors read (the same XOR of chunk and row as above, on 1024-byte aligned tiles).
// cp.async writes through the generic proxy and wgmma reads through the async proxy: every
// thread fences its completed copies (fence.proxy.async) before the barrier that releases the
// stage to the MMAs.
constexpr int kWgmmaTileM = 128, kWgmmaTileN = 256, kWgmmaStages = 4, kWgmmaPrefetch = kWgmmaStages - 1, kWgmmaThreads = 256;
constexpr size_t kWgmmaStageBytes = size_t(kWgmmaTileM + kWgmmaTileN) * kEmulatedTileK;
static_assert(kWgmmaTileM % kSliceTile == 0 && kWgmmaTileN % kSliceTile == 0,
              "the slicing grid covers the padded rows (slice_operand) in whole tiles");
constexpr size_t kWgmmaSharedBytes = size_t(kWgmmaStages) * kWgmmaStageBytes + 1024;  // + alignment

// A K-major operand in shared memory, 128-byte rows swizzled in 8-row (1024-byte) groups.
__device__ inline uint64_t wgmma_descriptor(const void* shared) {
  const uint64_t address = shared_address(shared);
  return ((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ inline void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most `kPending` committed groups of this warpgroup's MMAs are in flight.
template <int kPending>
__device__ inline void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
__device__ inline void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// d (+)= A * B for one 64 x 256 x 32 step of int8 on a warpgroup (wgmma, sm_90a): A and B
// from shared memory through their descriptors; `accumulate` 0 starts the sums afresh.
__device__ inline void wgmma_s8_64x256x32(int (&d)[128], uint64_t a_descriptor, uint64_t b_descriptor,
                                          int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p;\n"
      "}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
      : "l"(a_descriptor), "l"(b_descriptor), "r"(accumulate));
#else
  (void)d, (void)a_descriptor, (void)b_descriptor, (void)accumulate;
#endif
}

// One 128-deep K step of a warpgroup's 64 x 256 sums: four wgmma from a stage (the warpgroup's
// 64 rows of A at `a_tile`, B's 256 at `b_tile`), committed as one group. `accumulate` 0 starts
// the sums afresh (after a fold); it is 1 after.
__device__ __forceinline__ void wgmma_k_step(int (&acc)[128], const signed char* a_tile, const signed char* b_tile,
                                             int& accumulate) {
  wgmma_fence();
#pragma unroll
  for (int k32 = 0; k32 < kEmulatedTileK / 32; ++k32) {
    wgmma_s8_64x256x32(acc, wgmma_descriptor(a_tile + 32 * k32), wgmma_descriptor(b_tile + 32 * k32), accumulate);
    accumulate = 1;
  }
  wgmma_commit();
}

// Whether this build has the wgmma kernel's body (sm_90a code).
__global__ void wgmma_available_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

// Folds a warpgroup's m64n256 int32 sums (fold_output); wgmma's layout: accumulator 4j + e of
// a thread is row 16 warp + g (+ 8 for e >= 2) and column 8j + 2q + e % 2, g = lane / 4,
// q = lane % 4. `warp_m`: the first output row of this warp's 16.
__device__ __forceinline__ void fold_wgmma_accumulators(const EmulatedGemmArgs& p, const int (&acc)[128], int64_t l,
                                                        int64_t warp_m, int64_t n0, int lane, int fold, bool fresh) {
  const int g = lane / 4, q = lane % 4;
  const Fold f = fold_of(p, fold, fresh);
  const auto fold_all = [&](auto residues) {
#pragma unroll
    for (int j = 0; j < 32; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        fold_output<decltype(residues)::value>(p, f, acc[4 * j + e], l, warp_m + g + 8 * (e / 2),
                                               n0 + 8 * j + 2 * q + e % 2);
  };
  if (p.residues != nullptr) fold_all(std::true_type());
  else fold_all(std::false_type());
}

__global__ void __launch_bounds__(kWgmmaThreads, 1) emulated_gemm_wgmma_kernel(EmulatedGemmArgs p) {
  extern __shared__ __align__(128) signed char wgmma_shared[];
  // wgmma's 128-byte swizzle repeats every 1024 bytes: the stages start on such a boundary.
  signed char* stages = wgmma_shared + ((1024 - shared_address(wgmma_shared) % 1024) % 1024);
  const int thread = threadIdx.x, warpgroup = thread / 128, lane = thread % 32, warp = (thread % 128) / 32;
  const int64_t l = blockIdx.z, m0 = int64_t(blockIdx.y) * kWgmmaTileM, n0 = int64_t(blockIdx.x) * kWgmmaTileN;
  const signed char* a_base = p.a.data + (p.a.batches == 1 ? 0 : l) * p.a.batch_stride() + m0 * p.a.Kp;
  const signed char* b_base = p.b.data + (p.b.batches == 1 ? 0 : l) * p.b.batch_stride() + n0 * p.b.Kp;
  const auto fetch = [&](int64_t s) {
    const EmulationStep step = p.steps[s];
    signed char* stage = stages + (s % kWgmmaStages) * kWgmmaStageBytes;
    constexpr int kChunks = (kWgmmaTileM + kWgmmaTileN) * (kEmulatedTileK / 16);
#pragma unroll
    for (int c = thread; c < kChunks; c += kWgmmaThreads) {
      const int row = c / (kEmulatedTileK / 16), chunk = c % (kEmulatedTileK / 16);
      const signed char* source = row < kWgmmaTileM
                                      ? a_base + step.a_offset + row * p.a.Kp
                                      : b_base + step.b_offset + (row - kWgmmaTileM) * p.b.Kp;
      copy_16_bytes_async(stage + swizzled(row, chunk), source + chunk * 16);
    }
  };
  // Copies run kWgmmaPrefetch steps ahead; a stage is refilled only after the barrier that
  // follows the MMAs that read it.
  for (int s = 0; s < kWgmmaPrefetch; ++s) {
    if (s < p.step_count) fetch(s);
    copy_commit();
  }
  int acc[128];
  int accumulate = 0;  // 0: the next MMA starts the sums afresh (after a fold)
  for (int64_t s = 0; s < p.step_count; ++s) {
    copy_wait<kWgmmaPrefetch - 1>();
    fence_proxy_async();
    __syncthreads();  // every thread's copies of step s are in, and every MMA of step s - 1 done
    if (s + kWgmmaPrefetch < p.step_count) fetch(s + kWgmmaPrefetch);
    copy_commit();
    const signed char* stage = stages + (s % kWgmmaStages) * kWgmmaStageBytes;
    const signed char* a_tile = stage + warpgroup * 64 * kEmulatedTileK;
    const signed char* b_tile = stage + kWgmmaTileM * kEmulatedTileK;
    wgmma_k_step(acc, a_tile, b_tile, accumulate);
    // Waiting for this step's MMAs here (rather than a step later, which measured no faster:
    // ptxas then waits anyway before the accumulators are reused) frees its stage at once.
    wgmma_wait<0>();
    const int fold = p.steps[s].fold;
    if (fold == 0) continue;
    fold_wgmma_accumulators(p, acc, l, m0 + warpgroup * 64 + 16 * warp, n0, lane, fold, p.steps[s].fresh != 0);
    accumulate = 0;
  }
}

}  // namespace repro
