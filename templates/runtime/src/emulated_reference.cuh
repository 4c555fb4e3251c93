// ---------------------------------------------------------------------------------------------
// repro harness runtime: the reference GEMM from int8 tensor cores (reference.provider: emulated)
//
// The fp64 tensor cores of a GPU like the H200 are ~30 times slower than its int8 ones, so the
// reference can be computed faster from int8 GEMMs whose products and sums are exact integers
// (the Ozaki scheme, in its slicing form). Each row of A (and each column of B) is scaled by a
// power of two to (-1, 1) and cut into S slices of 7 bits plus the element's sign:
//
//     a_ik = 2^(E_i + 1) * sum_t d_t,ik * 2^(-7 (t + 1)),     d_t,ik integers in [-127, 127]
//
// and the product is the sum over slice pairs (t, u) of int8 GEMMs d_t(A) * d_u(B), whose
// int32 sums are exact. Pairs with the same level t + u share a power of two, so a level is
// one int32 accumulation; the levels are added in fp64, finest first.
//
// Exact slices, no truncation: S is chosen per operand from the inputs themselves (an analysis
// pass finds, per row, the highest and the lowest set bit of every element), as the smallest S
// with 7 S >= (highest - lowest + 1). Every element is then represented exactly, every int32 sum
// is exact, and the only roundings are the fp64 additions of the levels (and of K chunks when
// K * pairs would overflow int32): for every output,
//
//     |emulated - exact| <= (F + 1) * 2^-53 * sum_k |a_ik b_kj|,  F = the number of fp64 folds
//
// (docs/tolerances.md). An all-ones or small-integer operand is one slice: its reference is one
// int8 GEMM. bf16 inputs take 2 slices when a row's values span less than 2^6, fp8 e4m3 one
// when they span 2^3. Where the inputs need more than kMaxEmulationSlices per operand (values
// spread over more than 2^48 in a row), or hold Inf or NaN, the reference is the fp64 tensor
// cores' instead, and the run says why.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device_reference.cuh"

namespace repro {

// Beyond 8 slices per operand (56 bits: every fp64-exact product of f32 inputs up to a 2^32
// spread in a row), the 64+ int8 GEMMs cost more than the fp64 tensor cores' one.
constexpr int kMaxEmulationSlices = 8;
constexpr int kEmulationSliceBits = 7;

// -------------------------------------------------------------------------- the analysis pass
//
// Per row i of the operand (A: m, B: n) and batch: the exponent of the highest set bit of any
// element (`top`) and of the lowest (`bottom`), as integers: x = m * 2^q with an integer m.
// Elements are read in the direction their memory is contiguous in: a warp walks K along a row
// when K is the contiguous axis, else 32 rows side by side.
constexpr int kExtentRows = 32;
constexpr int64_t kExtentChunk = 4096;  // K elements per block
constexpr int kNoTop = -100000, kNoBottom = 100000;

struct OperandExtent {
  int* top = nullptr;     // [batches][I]: highest set bit, kNoTop for a row of zeros
  int* bottom = nullptr;  // [batches][I]: lowest set bit, kNoBottom for a row of zeros
  int* nonfinite = nullptr;
};

__device__ inline void set_bit_range(double x, int* top, int* bottom) {
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(x));
  const int biased = int((bits >> 52) & 0x7FF);
  unsigned long long mantissa = bits & ((1ull << 52) - 1);
  int q = -1074;
  if (biased != 0) mantissa |= 1ull << 52, q = biased - 1075;
  *top = max(*top, q + 63 - __clzll(static_cast<long long>(mantissa)));
  *bottom = min(*bottom, q + __ffsll(static_cast<long long>(mantissa)) - 1);
}

__global__ void operand_extent_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t I, int64_t K,
                                      ScaleOperand scale, bool k_contiguous, OperandExtent extent) {
  __shared__ int rows_top[kExtentRows], rows_bottom[kExtentRows];
  if (threadIdx.x < kExtentRows) rows_top[threadIdx.x] = kNoTop, rows_bottom[threadIdx.x] = kNoBottom;
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.x) * kExtentRows, k0 = int64_t(blockIdx.y) * kExtentChunk;
  const int64_t k1 = min(K, k0 + kExtentChunk);
  bool nonfinite = false;
  for (int r = k_contiguous ? warp : lane; r < kExtentRows; r += k_contiguous ? warps : 32) {
    const int64_t i = i0 + r;
    if (i >= I) break;
    int top = kNoTop, bottom = kNoBottom;
    for (int64_t k = k0 + (k_contiguous ? lane : warp); k < k1; k += k_contiguous ? 32 : warps) {
      const double x =
          decode(source.dtype, source.data, l * source.batch_stride + i * i_stride + k * k_stride) * scale_at(scale, i, k);
      if (!isfinite(x)) nonfinite = true;
      else if (x != 0) set_bit_range(x, &top, &bottom);
    }
    atomicMax(&rows_top[r], top);
    atomicMin(&rows_bottom[r], bottom);
  }
  if (nonfinite) atomicExch(extent.nonfinite, 1);
  __syncthreads();
  const int64_t i = i0 + threadIdx.x;
  if (threadIdx.x < kExtentRows && i < I) {
    atomicMax(&extent.top[l * I + i], rows_top[threadIdx.x]);
    atomicMin(&extent.bottom[l * I + i], rows_bottom[threadIdx.x]);
  }
}

__global__ void fill_ints_kernel(int* out, int64_t count, int value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

// -------------------------------------------------------------------------- the slicing pass
//
// slices[l][t][i][k] (int8, K contiguous, zero-padded to whole tiles): digit t of element (i, k),
// with the element's sign. A block turns a 64 x 64 tile: read in the source's contiguous
// direction into shared memory, written 4 bytes of K at a time.
constexpr int kSliceTile = 64;

struct SlicedOperand {
  signed char* data = nullptr;  // [batches][slices][Ip][Kp]
  int* top = nullptr;           // [batches][I]: the row's exponent E_i = top
  int slices = 0;
  int64_t batches = 1, Ip = 0, Kp = 0;
  REPRO_HD int64_t slice_stride() const { return Ip * Kp; }
  REPRO_HD int64_t batch_stride() const { return int64_t(slices) * Ip * Kp; }
};

// The digits of |x| * 2^-(top + 1) in [0, 1): 7 bits each, most significant first; exact
// (scaling by a power of two and taking off integer parts lose nothing).
__device__ inline void slice_digits(double x, int top, int slices, signed char* digits) {
  double y = top == kNoTop ? 0.0 : ldexp(fabs(x), -(top + 1));
  const bool negative = x < 0;
  for (int t = 0; t < slices; ++t) {
    y *= 128.0;
    const double d = floor(y);
    y -= d;
    digits[t] = static_cast<signed char>(negative ? -int(d) : int(d));
  }
}

__global__ void slice_operand_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t I, int64_t K,
                                     ScaleOperand scale, bool k_contiguous, SlicedOperand out) {
  __shared__ double tile[kSliceTile][kSliceTile + 1];
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.y) * kSliceTile, k0 = int64_t(blockIdx.x) * kSliceTile;
  for (int e = threadIdx.x; e < kSliceTile * kSliceTile; e += blockDim.x) {
    const int fast = e % kSliceTile, slow = e / kSliceTile;
    const int r = k_contiguous ? slow : fast, c = k_contiguous ? fast : slow;
    const int64_t i = i0 + r, k = k0 + c;
    tile[r][c] = i < I && k < K ? decode(source.dtype, source.data, l * source.batch_stride + i * i_stride + k * k_stride) *
                                      scale_at(scale, i, k)
                                : 0.0;
  }
  __syncthreads();
  signed char* base = out.data + l * out.batch_stride();
  for (int e = threadIdx.x; e < kSliceTile * (kSliceTile / 4); e += blockDim.x) {
    const int r = e / (kSliceTile / 4), c = e % (kSliceTile / 4) * 4;
    const int64_t i = i0 + r;
    const int top = i < I ? out.top[l * I + i] : kNoTop;
    signed char digits[4][kMaxEmulationSlices];
    for (int j = 0; j < 4; ++j) slice_digits(tile[r][c + j], top, out.slices, digits[j]);
    for (int t = 0; t < out.slices; ++t) {
      const unsigned word = unsigned(static_cast<unsigned char>(digits[0][t])) |
                            unsigned(static_cast<unsigned char>(digits[1][t])) << 8 |
                            unsigned(static_cast<unsigned char>(digits[2][t])) << 16 |
                            unsigned(static_cast<unsigned char>(digits[3][t])) << 24;
      *reinterpret_cast<unsigned*>(base + t * out.slice_stride() + i * out.Kp + k0 + c) = word;
    }
  }
}

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
constexpr int kEmulatedTile = 128, kEmulatedTileK = 128, kEmulatedThreads = 256, kEmulatedStages = 3;
constexpr size_t kEmulatedTileBytes = size_t(kEmulatedTile) * kEmulatedTileK;
constexpr size_t kEmulatedSharedBytes = size_t(kEmulatedStages) * 2 * kEmulatedTileBytes;
// int32 sums stay exact for 2^17 terms of |d d'| <= 127^2 (< 2^31): at most this many K tiles
// times pairs go into one accumulation.
constexpr int kTilePairsPerFold = (1 << 17) / kEmulatedTileK;

// One step: the byte offsets of its A and B tiles from the batch's first slice, and the fold
// that follows it: 0 none, else 1 + the level (its weight 2^-7(level + 2)), negated for the last.
struct EmulationStep {
  int64_t a_offset, b_offset;
  int fold;
};

struct EmulatedGemmArgs {
  SlicedOperand a, b;
  const EmulationStep* steps;  // device copy of the table
  int64_t step_count;
  double* out;  // [L][M][N]
  double alpha;
  int64_t M, N;
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
  bool first_fold = true;
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
    const bool last = fold < 0;
    // 2^-7(level + 2): exact, and the int32 converts exactly.
    const double weight = ldexp(1.0, -kEmulationSliceBits * (abs(fold) - 1 + 2));
    const int* a_top = p.a.top + (p.a.batches == 1 ? 0 : l) * p.M;
    const int* b_top = p.b.top + (p.b.batches == 1 ? 0 : l) * p.N;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t m = m0 + warp_m + 16 * i + g + 8 * (e / 2), n = n0 + warp_n + 8 * j + 2 * t + e % 2;
          if (m < p.M && n < p.N) {
            double* out = p.out + (l * p.M + m) * p.N + n;
            double value = (first_fold ? 0.0 : *out) + double(acc[i][j][e]) * weight;
            if (last) {
              const int ea = a_top[m], eb = b_top[n];
              value = ea == kNoTop || eb == kNoTop ? 0.0 : p.alpha * ldexp(value, ea + eb + 2);
            }
            *out = value;
          }
          acc[i][j][e] = 0;
        }
    first_fold = false;
  }
}

// -------------------------------------------------------------------------- planning
//
// What the analysis found for one operand: the slices its rows need, and the buffers.
struct OperandAnalysis {
  OperandExtent extent;
  int64_t batches = 1;
  int slices = 0;       // the most any row needs (0: all zeros)
  int widest_bits = 0;  // that row's top - bottom + 1
  bool nonfinite = false;
};

// Runs the analysis of one operand on the device and reads back the rows' extents (a few KiB):
// the one point where the emulated reference waits for the GPU before its GEMM.
inline OperandAnalysis analyze_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t L,
                                       int64_t I, int64_t K, const ScaleOperand& scale) {
  OperandAnalysis analysis;
  analysis.batches = source.batch_stride == 0 ? 1 : L;
  const int64_t rows = analysis.batches * I;
  int* buffer = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(&buffer, size_t(2 * rows + 1) * sizeof(int)));
  analysis.extent = OperandExtent{buffer, buffer + rows, buffer + 2 * rows};
  fill_ints_kernel<<<pipeline_blocks(rows), kPipelineThreads>>>(analysis.extent.top, rows, kNoTop);
  fill_ints_kernel<<<pipeline_blocks(rows), kPipelineThreads>>>(analysis.extent.bottom, rows, kNoBottom);
  fill_ints_kernel<<<1, 1>>>(analysis.extent.nonfinite, 1, 0);
  REPRO_CUDA_CHECK(cudaGetLastError());
  const dim3 grid(unsigned(ceil_div(I, kExtentRows)), unsigned(std::max<int64_t>(1, ceil_div(K, kExtentChunk))),
                  unsigned(analysis.batches));
  // K is the contiguous axis when stepping along it moves less than stepping along the rows.
  const bool k_contiguous = std::llabs(k_stride) <= std::llabs(i_stride);
  operand_extent_kernel<<<grid, 256>>>(source, i_stride, k_stride, I, K, scale, k_contiguous, analysis.extent);
  REPRO_CUDA_CHECK(cudaGetLastError());
  std::vector<int> host(size_t(2 * rows + 1));
  REPRO_CUDA_CHECK(cudaMemcpy(host.data(), buffer, host.size() * sizeof(int), cudaMemcpyDeviceToHost));
  analysis.nonfinite = host.back() != 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int top = host[size_t(r)], bottom = host[size_t(rows + r)];
    if (top == kNoTop) continue;
    analysis.widest_bits = std::max(analysis.widest_bits, top - bottom + 1);
  }
  analysis.slices = (analysis.widest_bits + kEmulationSliceBits - 1) / kEmulationSliceBits;
  return analysis;
}

inline SlicedOperand slice_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t I,
                                   int64_t K, const ScaleOperand& scale, const OperandAnalysis& analysis, int slices) {
  SlicedOperand out;
  out.slices = slices;
  out.batches = analysis.batches;
  out.top = analysis.extent.top;
  out.Ip = ceil_div(I, kEmulatedTile) * kEmulatedTile;
  out.Kp = ceil_div(K, kEmulatedTileK) * kEmulatedTileK;
  const size_t bytes = size_t(out.batches * out.batch_stride());
  if (cudaMalloc(&out.data, std::max<size_t>(bytes, 1)) != cudaSuccess) {
    cudaGetLastError();
    fatal(kExitCudaError, "fault",
          strprintf("the emulated reference needs %.2f GiB of device memory for the int8 slices of an operand: rerun "
                    "with --reference device (the fp64 tensor cores need no slices)",
                    double(bytes) / (1 << 30)));
  }
  REPRO_CUDA_CHECK(cudaMemset(out.data, 0, bytes));  // the padding
  const bool k_contiguous = std::llabs(k_stride) <= std::llabs(i_stride);
  const dim3 grid(unsigned(ceil_div(K, kSliceTile)), unsigned(ceil_div(I, kSliceTile)), unsigned(out.batches));
  slice_operand_kernel<<<grid, 256>>>(source, i_stride, k_stride, I, K, scale, k_contiguous, out);
  REPRO_CUDA_CHECK(cudaGetLastError());
  return out;
}

// The slice counts of A and B (0 for an all-zero operand: one slice of zeros keeps the code
// one path) and, where emulation cannot be exact, why not.
struct EmulationPlan {
  int a_slices = 0, b_slices = 0;
  std::string refusal;  // empty: emulate
  int pairs() const { return a_slices * b_slices; }
  int levels() const { return a_slices + b_slices - 1; }
};

inline EmulationPlan plan_emulation(const OperandAnalysis& a, const OperandAnalysis& b) {
  EmulationPlan plan;
  plan.a_slices = std::max(1, a.slices);
  plan.b_slices = std::max(1, b.slices);
  if (a.nonfinite || b.nonfinite) {
    plan.refusal = strprintf("%s holds Inf or NaN, which int8 slices cannot carry", a.nonfinite ? "A" : "B");
  } else {
    for (const auto& [name, analysis] : {std::pair<const char*, const OperandAnalysis*>{"A", &a}, {"B", &b}})
      if (analysis->slices > kMaxEmulationSlices && plan.refusal.empty())
        plan.refusal = strprintf(
            "a row of %s spans %d bits (its largest value over its smallest nonzero bit), which needs %d int8 slices "
            "of %d bits; at most %d are used",
            name, analysis->widest_bits, analysis->slices, kEmulationSliceBits, kMaxEmulationSlices);
  }
  return plan;
}

// Whether this build of the runtime runs the int8 kernel on this GPU (sm_80 and later code).
inline bool emulation_supported() {
  cudaFuncAttributes attributes;
  REPRO_CUDA_CHECK(cudaFuncGetAttributes(&attributes, emulated_gemm_kernel));
  const int path = attributes.ptxVersion > 0 && attributes.ptxVersion != attributes.binaryVersion
                       ? attributes.ptxVersion
                       : attributes.binaryVersion;
  return path >= 80;
}

// The step table: levels finest first, then K tiles, then the level's pairs; a fold after a
// level's last step and within a level every kTilePairsPerFold tile-pairs. `folds` counts them.
inline std::vector<EmulationStep> emulation_steps(const EmulationPlan& plan, const SlicedOperand& a,
                                                  const SlicedOperand& b, int* folds) {
  std::vector<EmulationStep> steps;
  const int64_t k_tiles = a.Kp / kEmulatedTileK;
  *folds = 0;
  for (int level = plan.levels() - 1; level >= 0; --level) {
    const int first_t = std::max(0, level - (plan.b_slices - 1)), last_t = std::min(plan.a_slices - 1, level);
    const int64_t tiles_per_fold = std::max(1, kTilePairsPerFold / (last_t - first_t + 1));
    for (int64_t k_tile = 0; k_tile < k_tiles; ++k_tile)
      for (int t = first_t; t <= last_t; ++t) {
        EmulationStep step{t * a.slice_stride() + k_tile * kEmulatedTileK,
                           (level - t) * b.slice_stride() + k_tile * kEmulatedTileK, 0};
        if (t == last_t && (k_tile == k_tiles - 1 || (k_tile + 1) % tiles_per_fold == 0)) {
          step.fold = 1 + level;
          ++*folds;
        }
        steps.push_back(step);
      }
  }
  if (!steps.empty()) steps.back().fold = -steps.back().fold;
  return steps;
}

// Starts the emulated GEMM from the sliced operands; returns the step table's device copy (the
// launch frees it with the other scratch buffers) and sets `roundings` (the bound's factor: one
// per fold, one for alpha).
inline EmulationStep* launch_emulated_gemm(const GemmProblem& p, const EmulationPlan& plan, const SlicedOperand& a,
                                           const SlicedOperand& b, double* out, int* roundings) {
  int folds = 0;
  const std::vector<EmulationStep> steps = emulation_steps(plan, a, b, &folds);
  *roundings = folds + 1;
  EmulatedGemmArgs args;
  args.a = a, args.b = b, args.out = out, args.alpha = p.alpha;
  args.M = p.M, args.N = p.N, args.step_count = int64_t(steps.size());
  EmulationStep* device_steps = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(&device_steps, std::max<size_t>(1, steps.size()) * sizeof(EmulationStep)));
  REPRO_CUDA_CHECK(
      cudaMemcpy(device_steps, steps.data(), steps.size() * sizeof(EmulationStep), cudaMemcpyHostToDevice));
  args.steps = device_steps;
  if (steps.empty()) {  // K = 0: the product is 0
    fill_doubles_kernel<<<pipeline_blocks(p.L * p.M * p.N), kPipelineThreads>>>(out, p.L * p.M * p.N, 0.0);
    REPRO_CUDA_CHECK(cudaGetLastError());
    return device_steps;
  }
  const dim3 grid(unsigned(b.Ip / kEmulatedTile), unsigned(a.Ip / kEmulatedTile), unsigned(p.L));
  REPRO_CUDA_CHECK(cudaFuncSetAttribute(emulated_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(kEmulatedSharedBytes)));
  emulated_gemm_kernel<<<grid, kEmulatedThreads, kEmulatedSharedBytes>>>(args);
  REPRO_CUDA_CHECK(cudaGetLastError());
  return device_steps;
}

// -------------------------------------------------------------------------- which reference
//
// reference.provider device: the fp64 tensor cores; emulated: int8 slices unless the inputs
// need too many (then the fp64 tensor cores, and the run says why); auto: int8 slices where
// they cost less than the fp64 GEMM.
enum class ReferenceMethod { dmma, emulated, automatic };

inline ReferenceMethod reference_method(const std::string& provider) {
  if (provider == "emulated") return ReferenceMethod::emulated;
  if (provider == "device") return ReferenceMethod::dmma;
  return ReferenceMethod::automatic;
}

// What auto weighs, measured on the H200 (docs/performance.md, `erc speed`): the fp64 tensor
// cores do 1.9e13 multiply-adds a second; this int8 kernel 1.9e14 per slice pair; the analysis
// and slicing take ~0.5 ms plus ~22 ps per operand element. auto emulates when that estimate is
// under 0.8 of the fp64 one (a margin for the noise of shared machines), and skips the analysis
// where even one slice pair would not be.
constexpr double kDmmaMacsPerSecond = 1.9e13, kEmulatedMacsPerSecondPerPair = 1.9e14;
constexpr double kEmulationFixedSeconds = 0.5e-3, kEmulationSecondsPerElement = 22e-12;

inline double dmma_seconds(const GemmProblem& p) { return double(p.L) * p.M * p.N * p.K / kDmmaMacsPerSecond; }

inline double emulation_seconds(const GemmProblem& p, int pairs) {
  const double elements = double(p.L) * double(p.M + p.N) * double(p.K);
  return kEmulationFixedSeconds + elements * kEmulationSecondsPerElement +
         pairs * double(p.L) * p.M * p.N * p.K / kEmulatedMacsPerSecondPerPair;
}

inline bool emulation_pays(const GemmProblem& p, int pairs) { return emulation_seconds(p, pairs) < 0.8 * dmma_seconds(p); }

inline std::string emulation_engine(const EmulationPlan& plan, int roundings) {
  return strprintf("int8 tensor cores, exact slices: A %d x B %d = %d int8 GEMM%s, error <= %d * 2^-53 of sum |a b|",
                   plan.a_slices, plan.b_slices, plan.pairs(), plan.pairs() == 1 ? "" : "s", roundings);
}

// Starts the reference GEMM (alpha A B + beta C + bias) from the operands' device copies, on the
// default stream; see launch_dmma_reference_gemm for `into`. The emulation's analysis waits for
// the GPU once (a few KiB of row extents); the GEMMs run while the caller goes on.
inline ReferenceGemmLaunch launch_reference_gemm(const GemmProblem& p, ReferenceMethod method,
                                                 double* into = nullptr) {
  ReferenceGemmLaunch launch;
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.start));
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.stop));
  REPRO_CUDA_CHECK(cudaEventRecord(launch.start));
  std::string not_emulated;
  if (method == ReferenceMethod::automatic && !emulation_pays(p, 1)) {
    // Too small for even one int8 GEMM to beat the fp64 one: no analysis.
  } else if (method != ReferenceMethod::dmma) {
    if (!emulation_supported()) {
      not_emulated = "the int8 mma.sync it needs runs on sm_80 and later";
    } else {
      const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
      const ScaleOperand scale_a = problem_scales(p, true, true), scale_b = problem_scales(p, false, true);
      const OperandAnalysis a_rows = analyze_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, scale_a);
      const OperandAnalysis b_rows = analyze_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, scale_b);
      launch.scratch = {a_rows.extent.top, b_rows.extent.top};  // each the start of its analysis buffer
      const EmulationPlan plan = plan_emulation(a_rows, b_rows);
      if (!plan.refusal.empty()) {
        not_emulated = plan.refusal;
      } else if (method == ReferenceMethod::automatic && !emulation_pays(p, plan.pairs())) {
        not_emulated = strprintf("auto: not emulated, A needs %d and B %d int8 slices (%d GEMMs: ~%.1f ms against "
                                 "~%.1f ms in fp64)",
                                 plan.a_slices, plan.b_slices, plan.pairs(), 1e3 * emulation_seconds(p, plan.pairs()),
                                 1e3 * dmma_seconds(p));
      } else {
        const SlicedOperand a_slices = slice_operand(a, a.row_stride, a.col_stride, p.M, p.K, scale_a, a_rows, plan.a_slices);
        const SlicedOperand b_slices = slice_operand(b, b.col_stride, b.row_stride, p.N, p.K, scale_b, b_rows, plan.b_slices);
        launch.scratch.push_back(a_slices.data);
        launch.scratch.push_back(b_slices.data);
        launch.out = into != nullptr ? into : allocate_reference_doubles(p.L * p.M * p.N, "its output");
        if (p.L * p.M * p.N > 0)
          launch.scratch.push_back(launch_emulated_gemm(p, plan, a_slices, b_slices, launch.out, &launch.roundings));
        launch.emulated = true;
        launch.engine = emulation_engine(plan, launch.roundings);
      }
    }
  }
  if (!launch.emulated) {
    launch_dmma_reference_gemm(p, into, &launch);
    if (!not_emulated.empty()) {
      if (method == ReferenceMethod::emulated) launch.fallback = not_emulated;
      else launch.engine += "; " + not_emulated;
    }
  }
  launch_reference_epilogue(p, launch.out);
  REPRO_CUDA_CHECK(cudaEventRecord(launch.stop));
  return launch;
}

}  // namespace repro
