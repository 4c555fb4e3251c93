// ---------------------------------------------------------------------------------------------
// repro harness runtime: the emulated reference by residues (reference.provider: emulated)
//
// The second way the emulated reference gets fp64 accuracy from int8 GEMMs (the Ozaki scheme in
// its Chinese-remainder form; the first, slices, is in emulated_slices.cuh). Each row of A (and
// each column of B) becomes an integer of W bits by its row's power of two:
//
//     a'_ik = a_ik * 2^(W_a - 1 - E_i),   |a'_ik| < 2^W_a,   exact for elements of width <= W_a
//
// and the exact integer product C' = A' B' is found from its residues modulo N small coprime
// moduli m_n (odd, at most 255, so that a residue in [-127, 127] is an int8): one int8 GEMM per
// modulus, exact in int32, reduced modulo m_n, then C' from its N residues (the Chinese
// remainder sum, in 32-bit limbs), which is exact when m_1 ... m_N > 2 K 2^(W_a + W_b). The
// output is C' times 2^(E_i + F_j + 2 - W_a - W_b), rounded once to fp64, then times alpha.
//
// Why a second scheme: slices cost S_a x S_b GEMMs for widths of 7 S bits, residues about
// (W_a + W_b + log2 K + 1) / 7.9 GEMMs: f32 rows of ~35 bits take 25 slice pairs or 11 moduli;
// bf16 rows of ~21 bits 9 slice pairs or 8 moduli. Narrow inputs (fp8, all-ones) take fewer
// GEMMs as slices. The plan (emulated_reference.cuh) weighs both.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <type_traits>

#include "emulated_analysis.cuh"

namespace repro {

using Uint128 = unsigned __int128;

// At most this many moduli: their product is ~2^125, and C' fits 128 bits.
constexpr int kMaxModuli = 16;
// The integer widths a moduli plan can take: every 4 bits (kWidthThresholds has them), at most
// 52 so that a' is exact in a double and its residues come from double arithmetic.
constexpr int kMaxModuliWidth = 52, kModuliWidthStep = 4;

// Modulus n: odd, at most 255, pairwise coprime (255 = 3 5 17, 253 = 11 23, 247 = 13 19,
// 217 = 7 31, the others prime), largest first.
// (A switch, not a table: a table indexed at run time lives in a kernel's local memory.)
REPRO_HD inline int emulation_modulus(int n) {
  switch (n) {
    case 0: return 255;
    case 1: return 253;
    case 2: return 251;
    case 3: return 247;
    case 4: return 241;
    case 5: return 239;
    case 6: return 233;
    case 7: return 229;
    case 8: return 227;
    case 9: return 223;
    case 10: return 217;
    case 11: return 211;
    case 12: return 199;
    case 13: return 197;
    case 14: return 193;
    default: return 191;
  }
}

// m_1 ... m_count.
REPRO_HD inline Uint128 moduli_product(int count) {
  Uint128 product = 1;
  for (int n = 0; n < count; ++n) product *= Uint128(emulation_modulus(n));
  return product;
}

// The fewest moduli whose product exceeds 2 K 2^(a_bits + b_bits), the most |C'| can be (times
// two: C' is recovered in (-M/2, M/2)); 0 when more than kMaxModuli would be needed.
inline int moduli_needed(int a_bits, int b_bits, int64_t K) {
  int log_k = 0;
  while ((int64_t(1) << log_k) < K) ++log_k;
  const int bits = a_bits + b_bits + log_k + 1;  // 2 K 2^(a_bits + b_bits) <= 2^bits
  if (bits >= 127) return 0;
  const Uint128 bound = Uint128(1) << bits;
  for (int count = 1; count <= kMaxModuli; ++count)
    if (moduli_product(count) >= bound) return count;
  return 0;
}

// -------------------------------------------------------------------------- the residues

// The first `count` moduli and their reciprocals (rounded), worked out once for many elements
// (a slicing block keeps them in shared memory: an fp64 division per element and modulus would
// cost more than the rest of the pass).
struct ModuliTable {
  int count;
  double modulus[kMaxModuli], reciprocal[kMaxModuli];
};

REPRO_HD inline ModuliTable moduli_table(int count) {
  ModuliTable table;
  table.count = count;
  for (int n = 0; n < count; ++n)
    table.modulus[n] = double(emulation_modulus(n)), table.reciprocal[n] = 1.0 / table.modulus[n];
  return table;
}

// |x| as the integer a' of `bits` bits below its row's top (truncated toward zero: exact unless
// x is a residual).
REPRO_HD inline double residue_integer(double x, int top, int bits) {
  return top == kNoTop ? 0.0 : floor(ldexp(fabs(x), bits - 1 - top));
}

// a' modulo modulus n of `table`, in [-(m - 1) / 2, (m - 1) / 2], with x's sign. a' < 2^52, so
// a' / m is found within one of the truth in fp64 and corrected once; a' - q m is exact (an fma
// of integers below 2^53).
REPRO_HD inline signed char residue_digit(double a, bool negative, const ModuliTable& table, int n) {
  const double m = table.modulus[n];
  const double q = floor(a * table.reciprocal[n]);
  double r = fma(-q, m, a);
  if (r < 0) r += m;
  else if (r >= m) r -= m;
  int residue = int(r);
  if (residue > (int(m) - 1) / 2) residue -= int(m);
  return static_cast<signed char>(negative ? -residue : residue);
}

// -------------------------------------------------------------------------- the same, from bits
//
// An f32 or narrower float element, unscaled (analysis_format), as that integer straight from
// its fields in 32-bit integer arithmetic: a' = integer * 2^shift, the integer its significand
// (below 2^24) or, for an element wider than `bits` (a residual), the significand shifted down
// (truncated toward zero, as residue_integer). The slicing pass of such an operand makes its
// planes from these: the fp64 path (ldexp, floor, a division by each modulus in fp64 and a
// conversion to int) took ~330 instructions an element for 8 moduli (1.0 ms an operand at
// 8192^2 bf16, run 86, ncu).
struct ElementInteger {
  uint32_t integer = 0;  // below 2^24
  int shift = 0;         // >= 0; a' = integer * 2^shift < 2^bits
  bool negative = false;
};

REPRO_HD inline ElementInteger element_integer(const BitsFormat& f, uint64_t storage, int top, int bits) {
  const ElementFields fields = element_fields(f, storage);
  ElementInteger e;
  e.negative = fields.negative;
  // A zero row, or an Inf or NaN (the plan refuses operands that hold one): zero.
  if (top == kNoTop || !fields.finite) return e;
  const int shift = fields.q + bits - 1 - top;
  if (shift >= 0) e.integer = fields.integer, e.shift = shift;
  else e.integer = shift <= -32 ? 0u : fields.integer >> -shift;
  return e;
}

REPRO_HD inline uint64_t element_integer_value(const ElementInteger& e) { return uint64_t(e.integer) << e.shift; }

// What a slicing block keeps of modulus n: x mod m for x * m < 2^32 as x - m floor(x magic /
// 2^32), magic = ceil(2^32 / m) (exact there: the error x (magic - 2^32 / m) / 2^32 stays below
// 1 / m), and 2^s mod m for every shift s an integer below 2^52 can take.
struct ResidueModulus {
  uint32_t modulus = 1, magic = 0;
  unsigned char power[64] = {};  // 2^s mod m
};

REPRO_HD inline uint32_t reduce_small(uint32_t x, const ResidueModulus& r) {
#ifdef __CUDA_ARCH__
  const uint32_t q = __umulhi(x, r.magic);
#else
  const uint32_t q = uint32_t((uint64_t(x) * r.magic) >> 32);
#endif
  return x - q * r.modulus;
}

REPRO_HD inline ResidueModulus residue_modulus(int n) {
  ResidueModulus r;
  r.modulus = uint32_t(emulation_modulus(n));
  r.magic = uint32_t(0xFFFFFFFFu / r.modulus) + 1;  // m odd: ceil(2^32 / m)
  uint32_t power = 1;
  for (int s = 0; s < 64; ++s) r.power[s] = static_cast<unsigned char>(power), power = power * 2 % r.modulus;
  return r;
}

// residue_digit of the element: (integer mod m) (2^shift mod m) mod m, both products below 2^16.
REPRO_HD inline signed char element_residue_digit(const ElementInteger& e, const ResidueModulus& r) {
  const uint32_t residue = reduce_small(reduce_small(e.integer, r) * r.power[e.shift & 63], r);
  const int m = int(r.modulus), balanced = int(residue) > (m - 1) / 2 ? int(residue) - m : int(residue);
  return static_cast<signed char>(e.negative ? -balanced : balanced);
}

// x's residues modulo each modulus of `table` (the slicing pass takes them one modulus at a time).
REPRO_HD inline void residue_digits(double x, int top, int bits, const ModuliTable& table, signed char* digits) {
  const double a = residue_integer(x, top, bits);
  for (int n = 0; n < table.count; ++n) digits[n] = residue_digit(a, x < 0, table, n);
}

// -------------------------------------------------------------------------- reconstruction

// What the reconstruction needs of the first `count` moduli, worked out once on the host. With
// M = m_1 ... m_N and P_n = M / m_n, the integer X with residues r_n is
//
//     X = sum_n r_n c_n  (mod M),   c_n = P_n (P_n^-1 mod m_n)  (so c_n < M, and c_n / M = w_n,
//                                                                 w_n = (P_n^-1 mod m_n) / m_n)
//
// and X in [-(M - 1) / 2, (M - 1) / 2] is S - q M with S the sum and q the integer nearest S / M
// = sum_n r_n w_n. That sum is taken in fixed point, w_n rounded to 32 fraction bits (an integer
// multiply-add per modulus, where an fp64 one also took a conversion of r_n): within 16 x 2^8 x
// 2^-33 = 2^-21 of S / M, so q is off by one only where S / M is within that of a half, and one
// correction by M mends it.
// c_n and M as 32-bit limbs, least significant first: S is summed limb by limb in 64-bit
// registers (one multiply-add a limb and modulus: r_n c_nl < 2^40, 16 of them < 2^44) and the
// carries go up once at the end.
constexpr int kModuliLimbs = 4;
struct ModuliConstants {
  int count = 0;
  uint32_t weight_limbs[kMaxModuli][kModuliLimbs] = {};  // c_n
  uint32_t weight_fraction[kMaxModuli] = {};            // c_n / M in [0, 1), times 2^32, rounded
  uint32_t product_limbs[kModuliLimbs] = {};             // M
};

inline int inverse_modulo(int a, int m) {
  int t = 0, next_t = 1, r = m, next_r = a % m;
  while (next_r != 0) {
    const int q = r / next_r;
    const int t2 = t - q * next_t, r2 = r - q * next_r;
    t = next_t, next_t = t2, r = next_r, next_r = r2;
  }
  return t < 0 ? t + m : t;
}

inline ModuliConstants moduli_constants(int count) {
  ModuliConstants constants;
  constants.count = count;
  const Uint128 product = moduli_product(count);
  const auto limbs = [](Uint128 x, uint32_t* out) {
    for (int l = 0; l < kModuliLimbs; ++l) out[l] = uint32_t(x >> (32 * l));
  };
  limbs(product, constants.product_limbs);
  for (int n = 0; n < count; ++n) {
    const int m = emulation_modulus(n);
    const Uint128 others = product / Uint128(m);
    const int inverse = inverse_modulo(int(others % Uint128(m)), m);
    limbs(others * Uint128(inverse), constants.weight_limbs[n]);
    constants.weight_fraction[n] = uint32_t(((uint64_t(inverse) << 32) + uint64_t(m) / 2) / uint64_t(m));
  }
  return constants;
}

// The limbs the sum needs for kCount moduli: below four, S < kCount 2^8 M fits them, and S is
// exact (the self-test checks each count); with four, S is kept modulo 2^128 (16 moduli: M ~
// 2^125.9, S up to ~2^138), which loses nothing: X = S - q M lies in (-2^127, 2^127) before its
// correction (1.5 M < 2^127).
template <int kCount>
REPRO_HD constexpr int moduli_limbs() {
  return kCount <= 2 ? 1 : kCount <= 6 ? 2 : kCount <= 10 ? 3 : kModuliLimbs;
}

// The unsigned 128-bit integer x rounded once to the nearest double (ties to even): its top 64
// bits with a sticky bit for the rest convert with the one rounding.
REPRO_HD inline double uint128_to_double(Uint128 x) {
  const uint64_t high = uint64_t(x >> 64), low = uint64_t(x);
  if (high == 0) return double(low);
#ifdef __CUDA_ARCH__
  const int shift = 64 - __clzll(static_cast<long long>(high));  // the bits of `high`, 1 to 64
#else
  const int shift = 64 - __builtin_clzll(high);
#endif
  const uint64_t top = shift == 64 ? high | uint64_t(low != 0)
                                   : (high << (64 - shift)) | (low >> shift) | uint64_t((low << (64 - shift)) != 0);
  return ldexp(double(top), shift);
}

// The integer with residues r_n (each in [0, m_n)) modulo the first kCount moduli, in
// [-(M - 1) / 2, (M - 1) / 2], rounded once to a double (ModuliConstants says how). The count is
// a constant, so that the loops unroll and the sums stay in registers. Garner's mixed-radix
// digits, which this replaced, took ~700 instructions an output for 8 moduli (a modular
// multiply for each pair of moduli; 1.93 ms for 8192^2 outputs, run 86, ncu); this takes an
// integer multiply-add per limb and modulus, and one more per modulus for q (0.87 ms, run 88).
template <int kCount>
REPRO_HD inline double reconstruct_from_residues(const int* residues, const ModuliConstants& constants) {
  constexpr int kLimbs = moduli_limbs<kCount>();
  uint64_t sum[kLimbs] = {};
  uint64_t nearest = uint64_t(1) << 31;  // (S / M + 1/2) 2^32: below 2^45
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int n = 0; n < kCount; ++n) {
    const uint64_t r = uint64_t(residues[n]);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int l = 0; l < kLimbs; ++l) sum[l] += r * constants.weight_limbs[n][l];
    nearest += r * constants.weight_fraction[n];
  }
  Uint128 s = 0, product = 0;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int l = 0; l < kLimbs; ++l) {
    if (l + 1 < kLimbs) sum[l + 1] += sum[l] >> 32;
    s |= Uint128(uint32_t(sum[l])) << (32 * l);
    product |= Uint128(constants.product_limbs[l]) << (32 * l);
  }
  const uint64_t q = nearest >> 32;
  __int128 x = static_cast<__int128>(s - Uint128(q) * product);  // wraps modulo 2^128: exact
  const __int128 half = static_cast<__int128>(product / 2), modulus = static_cast<__int128>(product);
  if (x > half) x -= modulus;
  else if (x < -half) x += modulus;
  if constexpr (kCount <= 8) {
    return double(static_cast<int64_t>(x));  // |x| < M / 2 < 2^63: one rounding
  } else {
    return x < 0 ? -uint128_to_double(Uint128(-x)) : uint128_to_double(Uint128(x));
  }
}

// Calls f(std::integral_constant<int, count>()) for a count of moduli from 1 to kMaxModuli.
template <int kCount = 1, typename F>
inline auto with_moduli_count(int count, F&& f) {
  if constexpr (kCount == kMaxModuli) {
    return f(std::integral_constant<int, kCount>());
  } else {
    if (count == kCount) return f(std::integral_constant<int, kCount>());
    return with_moduli_count<kCount + 1>(count, f);
  }
}

// The same for the count `constants` holds (the host's checks).
inline double reconstruct_from_residues(const int* residues, const ModuliConstants& constants) {
  return with_moduli_count(constants.count, [&](auto count) {
    return reconstruct_from_residues<decltype(count)::value>(residues, constants);
  });
}

// A residue of the GEMM, its int32 sum `sum` modulo m, added to what an earlier K chunk left
// (`fresh`: none), as stored in a residue plane: in [0, m).
REPRO_HD inline unsigned char fold_residue(int sum, int m, bool fresh, unsigned char earlier) {
  int r = sum % m;
  if (r < 0) r += m;
  if (!fresh) r += int(earlier);
  return static_cast<unsigned char>(r >= m ? r - m : r);
}

// The outputs from the GEMMs' residue planes ([count][L][M][N]): each C' rounded once, times
// 2^(E_i + F_j + 2 - W_a - W_b) (exact), times alpha. A row or column of zeros gives 0.
struct ReconstructionArgs {
  const unsigned char* residues;
  const int *a_top, *b_top;      // [A's batches][M], [B's batches][N]
  int64_t a_batches, b_batches;  // 1: shared by every batch of the output
  int a_bits, b_bits;
  double alpha;
  double* out;
  int64_t L, M, N;
  ModuliConstants moduli;
};

// x 2^e, rounded once (as ldexp): a multiply by 2^e where 2^e is a normal double (exact, or one
// rounding into the subnormals), ldexp beyond (its general path cost ~20 instructions an output).
__device__ inline double scale_by_power_of_two(double x, int e) {
  if (e >= -1022 && e <= 1023) return x * __hiloint2double((e + 1023) << 20, 0);
  return ldexp(x, e);
}

// A block's threads along one output row (no division per output to find its row), kCount
// moduli.
template <int kCount>
__global__ void moduli_reconstruct_kernel(ReconstructionArgs p) {
  const int64_t outputs = p.L * p.M * p.N;
  for (int64_t row = blockIdx.y; row < p.L * p.M; row += gridDim.y) {
    const int64_t l = row / p.M, m = row % p.M;
    const int ea = p.a_top[(p.a_batches == 1 ? 0 : l) * p.M + m];
    const int64_t b_row = (p.b_batches == 1 ? 0 : l) * p.N;
    for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < p.N; n += int64_t(gridDim.x) * blockDim.x) {
      const int64_t at = row * p.N + n;
      const int eb = p.b_top[b_row + n];
      if (ea == kNoTop || eb == kNoTop) {
        p.out[at] = 0.0;
        continue;
      }
      int residues[kCount];
#pragma unroll
      for (int k = 0; k < kCount; ++k) residues[k] = p.residues[k * outputs + at];
      const double value = reconstruct_from_residues<kCount>(residues, p.moduli);
      p.out[at] = p.alpha * scale_by_power_of_two(value, ea + eb + 2 - p.a_bits - p.b_bits);
    }
  }
}

// Starts the reconstruction of every output from its residue planes, on the default stream.
inline void launch_moduli_reconstruction(const ReconstructionArgs& p) {
  const dim3 grid(unsigned(std::min<int64_t>(ceil_div(p.N, kPipelineThreads), 1024)),
                  unsigned(std::min<int64_t>(p.L * p.M, 65535)));
  with_moduli_count(p.moduli.count, [&](auto count) {
    moduli_reconstruct_kernel<decltype(count)::value><<<grid, kPipelineThreads>>>(p);
  });
}

}  // namespace repro
