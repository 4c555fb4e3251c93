// ---------------------------------------------------------------------------------------------
// repro harness runtime: an operand as int8 planes (reference.provider: emulated)
//
// After the analysis (emulated_analysis.cuh) and the plan: every element of the operand cut into
// 7-bit digits of its row's power of two (slices), or made an integer of the row and reduced
// modulo each modulus (emulated_moduli.cuh), stored K-contiguous for the int8 GEMM kernels
// (emulated_gemm.cuh).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_moduli.cuh"

namespace repro {

// -------------------------------------------------------------------------- the slicing pass
//
// planes[l][t][i][k] (int8, K contiguous, zero-padded to whole tiles): digit t of element (i, k)
// with the element's sign, or its residue modulo modulus t. A block turns a 64 x 64 tile: read
// in the source's contiguous direction into shared memory, written 4 bytes of K at a time.
constexpr int kSliceTile = 64;
constexpr int kMaxPlanes = kMaxModuli > kMaxEmulationSlices ? kMaxModuli : kMaxEmulationSlices;

struct SlicedOperand {
  signed char* data = nullptr;  // [batches][slices][Ip][Kp]
  int* top = nullptr;           // [batches][I]: the row's exponent E_i = top
  int slices = 0;               // planes: slices, or moduli
  int bits = 0;                 // what the planes hold exactly: 7 bits a slice, or the moduli's integer width
  bool residues = false;        // the planes are residues (emulated_moduli.cuh)
  int64_t batches = 1, Ip = 0, Kp = 0;
  REPRO_HD int64_t slice_stride() const { return Ip * Kp; }
  REPRO_HD int64_t batch_stride() const { return int64_t(slices) * Ip * Kp; }
};

// The digits of |x| * 2^-(top + 1) in [0, 1): 7 bits each, most significant first; exact
// (scaling by a power of two and taking off integer parts lose nothing). slice_fraction gives
// the fraction, and each next_slice_digit takes the next digit off it.
REPRO_HD inline double slice_fraction(double x, int top) { return top == kNoTop ? 0.0 : ldexp(fabs(x), -(top + 1)); }

REPRO_HD inline signed char next_slice_digit(double* fraction, bool negative) {
  *fraction *= 128.0;
  const double d = floor(*fraction);
  *fraction -= d;
  return static_cast<signed char>(negative ? -int(d) : int(d));
}

REPRO_HD inline void slice_digits(double x, int top, int slices, signed char* digits) {
  double fraction = slice_fraction(x, top);
  for (int t = 0; t < slices; ++t) digits[t] = next_slice_digit(&fraction, x < 0);
}

constexpr int kSliceThreads = 256, kSliceLoads = kSliceTile * kSliceTile / kSliceThreads;
static_assert(kEmulatedTileK % kSliceTile == 0, "the slicing grid covers Kp in whole tiles");

// kBits: the operand is read as bits (analysis_format), each element made its integer in 32-bit
// integer arithmetic (element_integer); else decoded, scaled and cut in fp64 (slice_fraction,
// residue_integer). A kernel each, as the analysis's passes.
template <typename Word, bool kBits>
__global__ void __launch_bounds__(kSliceThreads) slice_operand_kernel(DeviceMatrix source, int64_t i_stride,
                                                                      int64_t k_stride, int64_t I, int64_t K,
                                                                      ScaleOperand scale, BitsFormat format,
                                                                      bool k_contiguous, SlicedOperand out) {
  // The tile holds the elements' bits (half the shared memory of doubles) or their values.
  using Cell = std::conditional_t<kBits, uint32_t, double>;
  __shared__ Cell tile[kSliceTile][kSliceTile + 1];
  __shared__ ModuliTable moduli;              // the value path's moduli, for out.residues
  __shared__ ResidueModulus bits_moduli[kMaxModuli];  // the bits path's
  if (out.residues && int(threadIdx.x) < out.slices) {
    const int n = int(threadIdx.x);
    if constexpr (kBits) {
      bits_moduli[n] = residue_modulus(n);
    } else {
      moduli.modulus[n] = double(emulation_modulus(n)), moduli.reciprocal[n] = 1.0 / moduli.modulus[n];
      if (n == 0) moduli.count = out.slices;
    }
  }
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.y) * kSliceTile, k0 = int64_t(blockIdx.x) * kSliceTile;
  // Element e of the tile: consecutive threads on consecutive elements of the contiguous axis;
  // every load issued before any is decoded (for_row_elements says why).
  const auto at = [&](int j, int* r, int* c) {
    const int e = int(threadIdx.x) + j * kSliceThreads, fast = e % kSliceTile, slow = e / kSliceTile;
    *r = k_contiguous ? slow : fast, *c = k_contiguous ? fast : slow;
    return i0 + *r < I && k0 + *c < K;
  };
  uint64_t bits[kSliceLoads];
#pragma unroll
  for (int j = 0; j < kSliceLoads; ++j) {
    int r, c;
    bits[j] = at(j, &r, &c) ? load_word<Word>(source.data, l * source.batch_stride + (i0 + r) * i_stride + (k0 + c) * k_stride) : 0;
  }
#pragma unroll
  for (int j = 0; j < kSliceLoads; ++j) {
    int r, c;
    const bool inside = at(j, &r, &c);
    if constexpr (kBits) tile[r][c] = uint32_t(bits[j]);  // outside: 0, a zero of every format
    else tile[r][c] = inside ? decode_bits(source.dtype, bits[j]) * scale_at(scale, i0 + r, k0 + c) : 0.0;
  }
  __syncthreads();
  // Four elements of a row at a time, one plane after another: each plane's four digits are
  // made in registers and stored as one word (an array of every plane's digits per element
  // lived in local memory).
  signed char* base = out.data + l * out.batch_stride();
  for (int e = threadIdx.x; e < kSliceTile * (kSliceTile / 4); e += kSliceThreads) {
    const int r = e / (kSliceTile / 4), c = e % (kSliceTile / 4) * 4;
    const int64_t i = i0 + r;
    const int top = i < I ? out.top[l * I + i] : kNoTop;
    unsigned* word_at = reinterpret_cast<unsigned*>(base + i * out.Kp + k0 + c);
    const auto store = [&](auto digit_of) {  // digit_of(t, j): plane t's digit of element j
      for (int t = 0; t < out.slices; ++t) {
        unsigned word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) word |= unsigned(static_cast<unsigned char>(digit_of(t, j))) << (8 * j);
        *word_at = word;
        word_at += out.slice_stride() / 4;
      }
    };
    if constexpr (kBits) {
      ElementInteger element[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) element[j] = element_integer(format, tile[r][c + j], top, out.bits);
      if (out.residues) {
        store([&](int t, int j) { return element_residue_digit(element[j], bits_moduli[t]); });
      } else {
        // Digit t: bits [bits - 7 (t + 1), bits - 7 t) of a' (below 2^56), with the sign.
        store([&](int t, int j) {
          const int digit = int(element_integer_value(element[j]) >> (out.bits - kEmulationSliceBits * (t + 1))) & 127;
          return static_cast<signed char>(element[j].negative ? -digit : digit);
        });
      }
    } else {
      double value[4];  // the fraction (slices) or the integer a' (residues) of each element
      bool negative[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const double x = tile[r][c + j];
        negative[j] = x < 0;
        value[j] = out.residues ? residue_integer(x, top, out.bits) : slice_fraction(x, top);
      }
      // The slices' digits come off the fraction in order (next_slice_digit), plane by plane.
      store([&](int t, int j) {
        return out.residues ? residue_digit(value[j], negative[j], moduli, t) : next_slice_digit(&value[j], negative[j]);
      });
    }
  }
}

// `tile`: the rows are padded to whole tiles of the GEMM kernels (A: 128, B: 256; multiples of
// kSliceTile). `slices` planes of 7-bit digits, or with `moduli_bits` > 0, of residues of
// integers of that width modulo the first `slices` moduli.
//
// The grid covers the padding too (Ip and Kp are whole slicing tiles), whose blocks write zero
// digits: no memset of the planes first (0.36-0.43 ms an operand at 8192^2, run 79, ncu), and
// no byte the GEMMs read is left as the allocation found it.
inline SlicedOperand slice_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t I,
                                   int64_t K, const ScaleOperand& scale, const OperandAnalysis& analysis, int slices,
                                   int64_t tile, int moduli_bits = 0) {
  SlicedOperand out;
  out.slices = slices;
  out.residues = moduli_bits > 0;
  out.bits = out.residues ? moduli_bits : kEmulationSliceBits * slices;
  out.batches = analysis.batches;
  out.top = analysis.extent.top;
  out.Ip = ceil_div(I, tile) * tile;
  out.Kp = ceil_div(K, kEmulatedTileK) * kEmulatedTileK;
  const size_t bytes = size_t(out.batches * out.batch_stride());
  out.data = static_cast<signed char*>(allocate_emulation_bytes(bytes, "the int8 planes of an operand"));
  const dim3 grid(unsigned(out.Kp / kSliceTile), unsigned(out.Ip / kSliceTile), unsigned(out.batches));
  const BitsFormat format = analysis_format(source.dtype, scale);
  with_operand_reading(source.dtype, format, [&](auto word, auto read_bits) {
    slice_operand_kernel<decltype(word), decltype(read_bits)::value><<<grid, kSliceThreads>>>(
        source, i_stride, k_stride, I, K, scale, format, k_is_contiguous(i_stride, k_stride), out);
  });
  REPRO_CUDA_CHECK(cudaGetLastError());
  return out;
}

}  // namespace repro
