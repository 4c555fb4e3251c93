// ---------------------------------------------------------------------------------------------
// repro harness runtime: what an operand's rows need to be emulated exactly (reference.provider: emulated)
//
// The first pass of the emulated reference (emulated_reference.cuh says what it is and what it
// guarantees): per row of an operand (A's rows, B's columns, each along K), the exponents of its
// highest and lowest set bits, then how many elements need how many bits below their row's
// highest (their width): what the plan weighs before it cuts the operand into int8 planes
// (emulated_slices.cuh).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device_reference.cuh"

namespace repro {

// At most 8 slices per operand (56 bits): 64 int8 GEMMs already cost more than the fp64 tensor
// cores' one; elements that would need more go as residuals (emulated_residuals.cuh).
constexpr int kMaxEmulationSlices = 8;
constexpr int kEmulationSliceBits = 7;
// K of the slices is padded to whole K tiles of the GEMM kernels: 128 bytes, one swizzled row.
constexpr int kEmulatedTileK = 128;

// Device memory of the emulated reference (the analysis, the planes, the step table, residues,
// residuals), or exit 4 with the way out (take_scratch_or_exit).
inline void* allocate_emulation_bytes(size_t bytes, const char* what) {
  return take_scratch_or_exit(bytes, strprintf("the emulated reference, for %s,", what),
                              "rerun with --reference device");
}

// -------------------------------------------------------------------------- reading an operand
//
// Every pass reads the operand row by row (A's rows m, B's columns n, each along K), in the
// direction its memory is contiguous: a warp walks K along a row when K is the contiguous axis,
// else 32 rows side by side with the warps along K. A block takes kExtentRows rows and a chunk
// of kExtentChunk K. Each thread issues kRowLoads loads, at the element's width, before it
// decodes any: with one load in flight at a time (a decode of a run-time width between loads),
// the passes read at ~30 ps an element (run 68), a few percent of the memory's bandwidth.
constexpr int kExtentRows = 32;
constexpr int64_t kExtentChunk = 1024;  // K elements per block
constexpr int kRowLoads = 8;
constexpr int kAnalysisThreads = 256;
// Elements one thread of a pass sees in a block: the width pass counts them in 8-bit fields.
constexpr int kElementsPerThread = int(kExtentRows * kExtentChunk / kAnalysisThreads);
static_assert(kElementsPerThread < 256, "the width pass's 8-bit counts would overflow");
constexpr int kNoTop = -100000, kNoBottom = 100000;

// Which of a block's rows a thread reads (r = first_row, first_row + row_step, ...) and which K
// of each (the chunk's start + k_offset, then every k_step).
struct RowWalk {
  int first_row, row_step, k_offset, k_step;
};

__device__ inline RowWalk row_walk(bool k_contiguous) {
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), warps = int(blockDim.x / 32);
  return k_contiguous ? RowWalk{warp, warps, lane, 32} : RowWalk{lane, 32, warp, warps};
}

// Calls element(k, bits) with the storage bits of element k of the row whose element 0 is at
// `row_base`, for k = k_first, k_first + step, ... below k_end: kRowLoads loads at a time.
// Word: the unsigned type of the element's width (with_element_word).
template <typename Word, typename Element>
__device__ __forceinline__ void for_row_words(const DeviceMatrix& source, int64_t row_base, int64_t k_stride,
                                              int64_t k_first, int64_t k_end, int step, Element element) {
  for (int64_t k_run = k_first; k_run < k_end; k_run += int64_t(step) * kRowLoads) {
    Word bits[kRowLoads];  // at the element's width: a register each, where uint64_t took two
#pragma unroll
    for (int j = 0; j < kRowLoads; ++j) {
      const int64_t k = k_run + int64_t(j) * step;
      bits[j] = k < k_end ? Word(load_word<Word>(source.data, row_base + k * k_stride)) : Word(0);
    }
#pragma unroll
    for (int j = 0; j < kRowLoads; ++j) {
      const int64_t k = k_run + int64_t(j) * step;
      if (k < k_end) element(k, bits[j]);
    }
  }
}

// The same with x = the scaled value of element k of row i.
template <typename Word, typename Element>
__device__ __forceinline__ void for_row_elements(const DeviceMatrix& source, int64_t row_base, int64_t k_stride,
                                                 int64_t i, int64_t k_first, int64_t k_end, int step,
                                                 const ScaleOperand& scale, Element element) {
  for_row_words<Word>(source, row_base, k_stride, k_first, k_end, step, [&](int64_t k, uint64_t bits) {
    element(k, decode_bits(source.dtype, bits) * scale_at(scale, i, k));
  });
}

// -------------------------------------------------------------------------- bits, not values
//
// What the analysis asks of an element (its highest and lowest set bits) is a property of its
// value that a binary float's fields give directly: without a scale, an f32 or narrower float
// element is read as bits, in 32-bit integer arithmetic, not decoded to a double first (with the
// decode, a pass over 8192^2 bf16 elements took 0.55 ms, 15 times what reading them costs: run
// 78, ncu). Scaled operands, integers and f64 take the decode.

// The fields of a float format of at most 32 bits, for element_bit_range: zero `exponent_max`
// when the operand is read as values (analysis_format).
struct BitsFormat {
  uint32_t exponent_max = 0, mantissa_mask = 0;  // the exponent field's all-ones, the fraction's mask
  int mantissa_bits = 0, bias = 0;
  int sign_bit = 0;  // the sign's position: above the exponent field
  bool has_infinity = true;
};

inline BitsFormat analysis_format(DType dtype, const ScaleOperand& scale) {
  BitsFormat format;
  if (scale.data != nullptr || !dtype_is_float(dtype) || dtype_bytes(dtype) > 4) return format;
  // tf32 operands are stored as full f32 (the kernel rounds them itself): read as f32.
  const FloatFormat f = float_format(dtype == DType::tf32 ? DType::f32 : dtype);
  format.exponent_max = (1u << f.exponent_bits) - 1, format.mantissa_mask = (1u << f.mantissa_bits) - 1;
  format.mantissa_bits = f.mantissa_bits, format.bias = f.bias, format.has_infinity = f.has_infinity;
  format.sign_bit = f.mantissa_bits + f.exponent_bits;
  return format;
}

// An element read as bits (analysis_format), its fields decoded in integer arithmetic: finite or
// not, and its magnitude as integer * 2^q (integer 0 for a zero). What the analysis's passes
// (element_bit_range, element_width) and the slicing's (element_integer) all start from.
struct ElementFields {
  bool finite = false, negative = false;
  uint32_t integer = 0;  // the significand with its implicit bit: below 2^24
  int q = 0;
};

REPRO_HD inline ElementFields element_fields(const BitsFormat& f, uint64_t storage) {
  const uint32_t bits = uint32_t(storage);
  const uint32_t exponent = (bits >> f.mantissa_bits) & f.exponent_max, fraction = bits & f.mantissa_mask;
  ElementFields e;
  e.finite = !(exponent == f.exponent_max && (f.has_infinity || fraction == f.mantissa_mask));
  e.negative = ((bits >> f.sign_bit) & 1) != 0;
  e.integer = exponent == 0 ? fraction : fraction | (f.mantissa_mask + 1);
  e.q = (exponent == 0 ? 1 : int(exponent)) - f.bias - f.mantissa_bits;
  return e;
}

// The exponents of a nonzero integer's highest and lowest set bits.
REPRO_HD inline int highest_bit(uint32_t x) {
#ifdef __CUDA_ARCH__
  return 31 - __clz(int(x));
#else
  return 31 - __builtin_clz(x);
#endif
}
REPRO_HD inline int lowest_bit(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __ffs(int(x)) - 1;
#else
  return __builtin_ctz(x);
#endif
}

// For a finite element: true, and its highest and lowest set bits' exponents (kNoTop and
// kNoBottom for a zero); false for an Inf or NaN. The same as set_bit_range of its value.
REPRO_HD inline bool element_bit_range(const BitsFormat& f, uint64_t storage, int* top, int* lowest) {
  const ElementFields e = element_fields(f, storage);
  if (!e.finite) return false;
  *top = kNoTop, *lowest = kNoBottom;
  if (e.integer != 0) *top = e.q + highest_bit(e.integer), *lowest = e.q + lowest_bit(e.integer);
  return true;
}

// Runs launch(Word()) with the unsigned integer type of `dtype`'s width: the passes are compiled
// once per width, so that their loads are plain loads of it.
template <typename Launch>
inline void with_element_word(DType dtype, Launch&& launch) {
  switch (dtype_bytes(dtype)) {
    case 1: launch(uint8_t()); break;
    case 2: launch(uint16_t()); break;
    case 4: launch(uint32_t()); break;
    default: launch(uint64_t()); break;
  }
}

// Runs launch(Word(), kBits) for a pass that reads an operand: kBits (std::true_type) where
// `format` reads it as bits (analysis_format: floats of at most 32 bits, unscaled), else
// std::false_type and the values.
template <typename Launch>
inline void with_operand_reading(DType dtype, const BitsFormat& format, Launch&& launch) {
  with_element_word(dtype, [&](auto word) {
    if constexpr (sizeof(word) <= 4)
      if (format.exponent_max != 0) return launch(word, std::true_type());
    launch(word, std::false_type());
  });
}

// The grid of a pass over an operand of `batches` x I rows of K.
inline dim3 row_pass_grid(int64_t batches, int64_t I, int64_t K) {
  return dim3(unsigned(ceil_div(I, kExtentRows)), unsigned(std::max<int64_t>(1, ceil_div(K, kExtentChunk))),
              unsigned(batches));
}

// K is the contiguous axis when stepping along it moves less than stepping along the rows.
inline bool k_is_contiguous(int64_t i_stride, int64_t k_stride) { return std::llabs(k_stride) <= std::llabs(i_stride); }

// -------------------------------------------------------------------------- the analysis pass
//
// Per row i of the operand (A: m, B: n) and batch: the exponent of the highest set bit of any
// element (`top`) and of the lowest (`bottom`), as integers: x = m * 2^q with an integer m.
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

// kBits: the operand is read as bits (analysis_format), else as values; a kernel each, so that
// neither way holds the other's registers.
template <typename Word, bool kBits>
__global__ void operand_extent_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t I, int64_t K,
                                      ScaleOperand scale, BitsFormat format, bool k_contiguous,
                                      OperandExtent extent) {
  __shared__ int rows_top[kExtentRows], rows_bottom[kExtentRows];
  if (threadIdx.x < kExtentRows) rows_top[threadIdx.x] = kNoTop, rows_bottom[threadIdx.x] = kNoBottom;
  __syncthreads();
  const RowWalk walk = row_walk(k_contiguous);
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.x) * kExtentRows, k0 = int64_t(blockIdx.y) * kExtentChunk;
  const int64_t k1 = min(K, k0 + kExtentChunk);
  bool nonfinite = false;
  for (int r = walk.first_row; r < kExtentRows; r += walk.row_step) {
    const int64_t i = i0 + r;
    if (i >= I) break;
    int top = kNoTop, bottom = kNoBottom;
    const int64_t row_base = l * source.batch_stride + i * i_stride;
    if constexpr (kBits) {
      for_row_words<Word>(source, row_base, k_stride, k0 + walk.k_offset, k1, walk.k_step, [&](int64_t, uint64_t bits) {
        int element_top, element_bottom;
        if (!element_bit_range(format, bits, &element_top, &element_bottom)) nonfinite = true;
        else top = max(top, element_top), bottom = min(bottom, element_bottom);
      });
    } else {
      for_row_elements<Word>(source, row_base, k_stride, i, k0 + walk.k_offset, k1, walk.k_step, scale,
                             [&](int64_t, double x) {
                               if (!isfinite(x)) nonfinite = true;
                               else if (x != 0) set_bit_range(x, &top, &bottom);
                             });
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

// How many bits element x needs to be exact in its row (top: the row's highest bit): from the
// top down to the element's lowest set bit; 0 for a zero. Counted per operand, in bins between
// the widths a plan can take (kWidthThresholds), so that the plan can take fewer bits than the
// widest row needs and carry the few elements beyond as residuals.
REPRO_HD inline int width_needed(double x, int top) {
  if (x == 0 || top == kNoTop) return 0;
#ifdef __CUDA_ARCH__
  const uint64_t bits = static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  const int biased = int((bits >> 52) & 0x7FF);
  uint64_t mantissa = bits & ((uint64_t(1) << 52) - 1);
  int q = -1074;  // x = mantissa * 2^q
  if (biased != 0) mantissa |= uint64_t(1) << 52, q = biased - 1075;
#ifdef __CUDA_ARCH__
  const int lowest = q + __ffsll(static_cast<long long>(mantissa)) - 1;
#else
  const int lowest = q + __builtin_ctzll(mantissa);
#endif
  return top - lowest + 1;
}

// width_needed of the element of storage bits `storage`, read as bits (analysis_format); 0 for
// a zero, an Inf or a NaN (the plan refuses operands that hold the latter).
REPRO_HD inline int element_width(const BitsFormat& f, uint64_t storage, int top) {
  // The lowest bit alone (the width pass runs this for every element).
  const ElementFields e = element_fields(f, storage);
  if (!e.finite || e.integer == 0 || top == kNoTop) return 0;
  return top - (e.q + lowest_bit(e.integer)) + 1;
}

// The widths the plans choose between: whole slices (7 bits each, emulated_reference.cuh) and
// every 4 bits (the integers of the moduli, emulated_moduli.cuh), up to 56.
constexpr int kWidthThresholdCount = 20;
REPRO_HD constexpr int width_threshold(int t) {
  constexpr int kThresholds[kWidthThresholdCount] = {4, 7, 8, 12, 14, 16, 20, 21, 24, 28,
                                                     32, 35, 36, 40, 42, 44, 48, 49, 52, 56};
  return kThresholds[t];
}
// Bin b holds the widths above b thresholds: bin 0 zeros and widths up to 4, the last beyond 56.
constexpr int kNeedBins = kWidthThresholdCount + 1;

// The thresholds are the multiples of 4 and of 7 up to 56, so the count of them below a width w
// is (w-1)/4 + (w-1)/7 - (w-1)/28 (the multiples of 28 counted once): a few multiplies, where
// a comparison with each of the 20 took most of the width pass's instructions per element.
// The self-test compares it with the thresholds, width by width (test_width_bin).
REPRO_HD inline int width_bin(int width) {
  if (width <= 0) return 0;
  if (width > width_threshold(kWidthThresholdCount - 1)) return kWidthThresholdCount;
  const int below = width - 1;
  return below / 4 + below / 7 - below / 28;
}

// Four blocks an SM (64 registers a thread): with two (its registers uncapped) the pass kept 16
// warps an SM and issued 1.9 instructions a cycle (run 86, ncu).
template <typename Word, bool kBits>
__global__ void __launch_bounds__(kAnalysisThreads, 4)
    slice_need_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t I, int64_t K, ScaleOperand scale,
                      BitsFormat format, bool k_contiguous, const int* tops, unsigned long long* counts) {
  __shared__ unsigned long long block_counts[kNeedBins];
  // width_bin of widths 0-56 from a table (a load, where its divisions took ~10 instructions).
  constexpr int kLastWidth = width_threshold(kWidthThresholdCount - 1);
  __shared__ unsigned char bin_of_width[kLastWidth + 1];
  if (threadIdx.x < kNeedBins) block_counts[threadIdx.x] = 0;
  if (threadIdx.x <= kLastWidth) bin_of_width[threadIdx.x] = static_cast<unsigned char>(width_bin(int(threadIdx.x)));
  __syncthreads();
  const auto bin_of = [&](int width) {
    return width > kLastWidth ? kWidthThresholdCount : int(bin_of_width[width > 0 ? width : 0]);
  };
  const RowWalk walk = row_walk(k_contiguous);
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.x) * kExtentRows, k0 = int64_t(blockIdx.y) * kExtentChunk;
  const int64_t k1 = min(K, k0 + kExtentChunk);
  // Counted in registers first: nearly every element falls in one or two bins, and an atomic
  // per element on those two shared words cost more than the rest of the pass (run 68). Eight
  // bins of 8 bits to a register (a thread sees at most kElementsPerThread < 256 elements), and
  // one add per register and element, where a register per bin took an add per bin.
  uint64_t packed[3] = {0, 0, 0};  // bins 0-7, 8-15, 16-20
  for (int r = walk.first_row; r < kExtentRows; r += walk.row_step) {
    const int64_t i = i0 + r;
    if (i >= I) break;
    const int top = tops[l * I + i];
    const auto count = [&](int bin) {
      const uint64_t one = uint64_t(1) << (8 * (bin & 7));
#pragma unroll
      for (int w = 0; w < 3; ++w) packed[w] += (bin >> 3) == w ? one : 0;
    };
    const int64_t row_base = l * source.batch_stride + i * i_stride;
    if constexpr (kBits) {
      for_row_words<Word>(source, row_base, k_stride, k0 + walk.k_offset, k1, walk.k_step,
                          [&](int64_t, uint64_t bits) { count(bin_of(element_width(format, bits, top))); });
    } else {
      for_row_elements<Word>(source, row_base, k_stride, i, k0 + walk.k_offset, k1, walk.k_step, scale,
                             [&](int64_t, double x) { count(isfinite(x) ? width_bin(width_needed(x, top)) : 0); });
    }
  }
#pragma unroll
  for (int bin = 1; bin < kNeedBins; ++bin) {
    const unsigned long long n = (packed[bin >> 3] >> (8 * (bin & 7))) & 0xFF;
    if (n != 0) atomicAdd(&block_counts[bin], n);
  }
  __syncthreads();
  if (threadIdx.x < kNeedBins && block_counts[threadIdx.x] != 0) atomicAdd(&counts[threadIdx.x], block_counts[threadIdx.x]);
}

// -------------------------------------------------------------------------- what the analysis found
//
// What the analysis found for one operand: its rows' extents (the buffers), how many elements
// need how many slices, and the widest row (for the message when it cannot be emulated).
struct OperandAnalysis {
  OperandExtent extent;
  int64_t batches = 1;
  int widest_bits = 0;  // the most any row spans: top - bottom + 1
  bool nonfinite = false;
  std::vector<int64_t> need_counts;  // [kNeedBins]: how many elements need a width of that bin

  // The elements that `bits` bits below their row's top leave inexact: the residuals
  // (emulated_residuals.cuh). `bits`: one of kWidthThresholds.
  int64_t beyond_bits(int bits) const {
    int64_t count = 0;
    for (int b = width_bin(bits) + 1; b < kNeedBins; ++b) count += need_counts[size_t(b)];
    return count;
  }
  // The same for `slices` slices of 7 bits.
  int64_t beyond(int slices) const { return beyond_bits(kEmulationSliceBits * slices); }
};

// Runs the analysis of one operand on the device and reads back the rows' extents (a few KiB)
// and the count of elements per number of slices they need: the one point where the emulated
// reference waits for the GPU before its GEMM.
inline OperandAnalysis analyze_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t L,
                                       int64_t I, int64_t K, const ScaleOperand& scale) {
  OperandAnalysis analysis;
  analysis.batches = source.batch_stride == 0 ? 1 : L;
  const int64_t rows = analysis.batches * I;
  // One buffer, read back in one copy: the rows' tops, their bottoms, the non-finite flag, then
  // (8-byte aligned) the counts per width bin. Its start is the rows' tops (the launch frees it).
  const size_t extent_bytes = size_t(2 * rows + 1) * sizeof(int);
  const size_t counts_offset = (extent_bytes + 7) / 8 * 8;
  const size_t bytes = counts_offset + kNeedBins * sizeof(unsigned long long);
  unsigned char* buffer = static_cast<unsigned char*>(allocate_emulation_bytes(bytes, "the analysis of an operand"));
  int* extent = reinterpret_cast<int*>(buffer);
  unsigned long long* counts = reinterpret_cast<unsigned long long*>(buffer + counts_offset);
  analysis.extent = OperandExtent{extent, extent + rows, extent + 2 * rows};
  fill_kernel<int><<<pipeline_blocks(rows), kPipelineThreads>>>(analysis.extent.top, rows, kNoTop);
  fill_kernel<int><<<pipeline_blocks(rows), kPipelineThreads>>>(analysis.extent.bottom, rows, kNoBottom);
  REPRO_CUDA_CHECK(cudaMemset(buffer + size_t(2 * rows) * sizeof(int), 0, bytes - size_t(2 * rows) * sizeof(int)));
  REPRO_CUDA_CHECK(cudaGetLastError());
  const dim3 grid = row_pass_grid(analysis.batches, I, K);
  const bool k_contiguous = k_is_contiguous(i_stride, k_stride);
  const BitsFormat format = analysis_format(source.dtype, scale);
  const auto launch = [&](auto word, auto bits) {
    using Word = decltype(word);
    constexpr bool kBits = decltype(bits)::value;
    operand_extent_kernel<Word, kBits>
        <<<grid, kAnalysisThreads>>>(source, i_stride, k_stride, I, K, scale, format, k_contiguous, analysis.extent);
    REPRO_CUDA_CHECK(cudaGetLastError());
    slice_need_kernel<Word, kBits><<<grid, kAnalysisThreads>>>(source, i_stride, k_stride, I, K, scale, format,
                                                               k_contiguous, analysis.extent.top, counts);
    REPRO_CUDA_CHECK(cudaGetLastError());
  };
  with_operand_reading(source.dtype, format, launch);
  std::vector<unsigned char> host(bytes);
  REPRO_CUDA_CHECK(cudaMemcpy(host.data(), buffer, bytes, cudaMemcpyDeviceToHost));
  std::vector<int> extents(size_t(2 * rows + 1));
  std::memcpy(extents.data(), host.data(), extent_bytes);
  std::vector<unsigned long long> host_counts(kNeedBins);
  std::memcpy(host_counts.data(), host.data() + counts_offset, kNeedBins * sizeof(unsigned long long));
  analysis.need_counts.assign(host_counts.begin(), host_counts.end());
  analysis.nonfinite = extents.back() != 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int top = extents[size_t(r)], bottom = extents[size_t(rows + r)];
    if (top == kNoTop) continue;
    analysis.widest_bits = std::max(analysis.widest_bits, top - bottom + 1);
  }
  return analysis;
}

}  // namespace repro
