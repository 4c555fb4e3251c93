// ---------------------------------------------------------------------------------------------
// repro harness runtime: element types and exact conversions
//
// Every value crosses between the host's doubles and a tensor's storage through encode() and
// decode(). Conversions round to nearest, ties to even, straight from the double: going through
// float first would round twice and could land one ulp off in f16, bf16, tf32 and fp8. The Rust
// mirror (crates/repro-contract/src/inputs/convert.rs) implements the same functions bit for bit.
// Storage is little-endian, as on every host CUDA runs on.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "base.cuh"

namespace repro {

// The inverse of dtype_name.
inline bool parse_dtype(const std::string& name, DType* out) {
  for (DType dtype : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2,
                      DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::boolean}) {
    if (name == dtype_name(dtype)) {
      *out = dtype;
      return true;
    }
  }
  return false;
}


REPRO_HD inline bool dtype_is_float(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::f32:
    case DType::tf32:
    case DType::f16:
    case DType::bf16:
    case DType::e4m3:
    case DType::e5m2: return true;
    default: return false;
  }
}

// A binary floating-point format, described by its fields.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;  // explicit fraction bits
  int bias;
  // false for OCP FP8 E4M3FN: no infinity, S.1111.111 is its only NaN, and values beyond the
  // largest finite (448) saturate to it, as cvt.satfinite and __NV_SATFINITE do.
  bool has_infinity;
  // Where the format's bits sit inside storage: tf32 is an f32 whose low 13 fraction bits are 0.
  int storage_shift;
};

REPRO_HD inline FloatFormat float_format(DType dtype) {
  switch (dtype) {
    case DType::f64: return FloatFormat{11, 52, 1023, true, 0};
    case DType::f32: return FloatFormat{8, 23, 127, true, 0};
    case DType::tf32: return FloatFormat{8, 10, 127, true, 13};
    case DType::f16: return FloatFormat{5, 10, 15, true, 0};
    case DType::bf16: return FloatFormat{8, 7, 127, true, 0};
    case DType::e4m3: return FloatFormat{4, 3, 7, false, 0};
    case DType::e5m2: return FloatFormat{5, 2, 15, true, 0};
    default: return FloatFormat{0, 0, 0, false, 0};
  }
}

REPRO_HD inline uint64_t double_bits(double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

REPRO_HD inline double double_from_bits(uint64_t bits) {
  double value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// The storage bits of each format's canonical (quiet, positive) NaN.
REPRO_HD inline uint64_t canonical_nan_bits(DType dtype) {
  switch (dtype) {
    case DType::f64: return 0x7FF8000000000000ull;
    case DType::f32:
    case DType::tf32: return 0x7FC00000u;
    case DType::f16: return 0x7E00u;
    case DType::bf16: return 0x7FC0u;
    case DType::e4m3: return 0x7Fu;
    case DType::e5m2: return 0x7Eu;
    default: return 0;
  }
}

// Rounds a finite or infinite double to a format narrower than f32's 24-bit significand
// (tf32, f16, bf16, e4m3, e5m2), to nearest, ties to even, in one step. Returns the format's
// bits (not yet shifted into storage). NaN is handled by the caller.
REPRO_HD inline uint64_t round_to_narrow_float(const FloatFormat& format, double value) {
  const int p = format.mantissa_bits;
  const uint64_t bits = double_bits(value);
  const uint64_t sign = (bits >> 63) << (format.exponent_bits + p);
  const uint64_t max_exponent_field = (uint64_t(1) << format.exponent_bits) - 1;
  const uint64_t infinity = max_exponent_field << p;
  // E4M3FN's largest finite is S.1111.110: S.1111.111 is NaN.
  const uint64_t max_finite = format.has_infinity ? infinity - 1 : infinity | ((uint64_t(1) << p) - 2);

  const int exponent_field = int((bits >> 52) & 0x7FF);
  uint64_t significand = bits & ((uint64_t(1) << 52) - 1);
  if (exponent_field == 0x7FF) return sign | (format.has_infinity ? infinity : max_finite);  // +-inf
  if (exponent_field == 0 && significand == 0) return sign;                                  // +-0

  // |value| = significand * 2^exponent with significand in [2^52, 2^53).
  int exponent;
  if (exponent_field == 0) {  // a double subnormal: normalize it
    exponent = -1074;
    while (significand < (uint64_t(1) << 52)) {
      significand <<= 1;
      --exponent;
    }
  } else {
    significand |= uint64_t(1) << 52;
    exponent = exponent_field - 1075;
  }

  // Representable values in the binade of |value| (or in the subnormal range, which shares the
  // lowest binade's spacing) are multiples of 2^quantum.
  const int min_exponent = 1 - format.bias;
  const int binade = exponent + 52 > min_exponent ? exponent + 52 : min_exponent;
  const int quantum = binade - p;
  const int shift = quantum - exponent;  // >= 52 - p > 0: bits of the double that round away
  uint64_t multiple = 0;                 // |value| rounded, in units of 2^quantum
  if (shift <= 54) {  // beyond that |value| is under a quarter of the smallest subnormal: 0
    multiple = significand >> shift;
    const uint64_t remainder = significand & ((uint64_t(1) << shift) - 1);
    const uint64_t half = uint64_t(1) << (shift - 1);
    if (remainder > half || (remainder == half && (multiple & 1))) ++multiple;
  }
  // In a normal binade `multiple` includes the implicit leading bit 2^p, which adds one to the
  // exponent field; below it the field is 0. Either way the encoding is this sum, and a rounding
  // carry into the next binade (multiple == 2^(p+1)) comes out right by itself.
  uint64_t magnitude = (uint64_t(binade - min_exponent) << p) + multiple;
  if (magnitude > max_finite) magnitude = format.has_infinity ? infinity : max_finite;
  return sign | magnitude;
}

REPRO_HD inline double narrow_float_value(const FloatFormat& format, uint64_t bits) {
  const int p = format.mantissa_bits;
  const bool negative = (bits >> (format.exponent_bits + p)) & 1;
  const uint64_t max_exponent_field = (uint64_t(1) << format.exponent_bits) - 1;
  const uint64_t exponent_field = (bits >> p) & max_exponent_field;
  const uint64_t fraction = bits & ((uint64_t(1) << p) - 1);
  const uint64_t all_fraction = (uint64_t(1) << p) - 1;
  // A normal value is a normal double: its fields moved, no arithmetic. (std::ldexp is a library
  // call on the host: the cross-check's decode of 2^20 sampled elements took 3 ms with it.)
  if (exponent_field != 0 && exponent_field != max_exponent_field)
    return double_from_bits((uint64_t(negative) << 63) | ((exponent_field - format.bias + 1023) << 52) |
                            (fraction << (52 - p)));
  if (exponent_field == max_exponent_field && (format.has_infinity || fraction == all_fraction)) {
    if (format.has_infinity && fraction == 0) return negative ? -HUGE_VAL : HUGE_VAL;
    return double_from_bits(0x7FF8000000000000ull);
  }
  const int min_exponent = 1 - format.bias;
  const double magnitude =
      exponent_field == 0
          ? std::ldexp(double(fraction), min_exponent - p)
          : std::ldexp(double(fraction | (uint64_t(1) << p)), int(exponent_field) - format.bias - p);
  return negative ? -magnitude : magnitude;
}

// Integers: round half to even, then clamp to the type's range; NaN becomes 0.
REPRO_HD inline double round_half_even(double value) {
  const double floor = std::floor(value);
  const double fraction = value - floor;  // exact
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(floor, 2.0) != 0.0)) return floor + 1.0;
  return floor;
}

REPRO_HD inline int64_t clamp_to_integer(double value, int64_t lo, int64_t hi) {
  if (std::isnan(value)) return 0;
  const double rounded = round_half_even(value);
  if (rounded <= double(lo)) return lo;
  if (rounded >= double(hi)) return hi;  // double(INT64_MAX) is 2^63, the first double past it
  return int64_t(rounded);
}

// The storage bits (in the low dtype_bytes bytes) of `value` converted to `dtype`.
REPRO_HD inline uint64_t encode_bits(DType dtype, double value) {
  if (dtype_is_float(dtype) && std::isnan(value)) return canonical_nan_bits(dtype);
  switch (dtype) {
    case DType::f64: return double_bits(value);
    case DType::f32: {
      const float single = static_cast<float>(value);  // IEEE conversion: nearest, ties to even
      uint32_t bits;
      memcpy(&bits, &single, sizeof bits);
      return bits;
    }
    case DType::tf32:
    case DType::f16:
    case DType::bf16:
    case DType::e4m3:
    case DType::e5m2: {
      const FloatFormat format = float_format(dtype);
      return round_to_narrow_float(format, value) << format.storage_shift;
    }
    case DType::i8: return uint64_t(clamp_to_integer(value, INT8_MIN, INT8_MAX)) & 0xFFu;
    case DType::u8: return uint64_t(clamp_to_integer(value, 0, UINT8_MAX));
    case DType::i32: return uint64_t(clamp_to_integer(value, INT32_MIN, INT32_MAX)) & 0xFFFFFFFFu;
    case DType::u32: return uint64_t(clamp_to_integer(value, 0, UINT32_MAX));
    case DType::i64: return uint64_t(clamp_to_integer(value, INT64_MIN, INT64_MAX));
    case DType::boolean: return value != 0.0 ? 1 : 0;  // NaN != 0: true, as in C++
  }
  return 0;
}

REPRO_HD inline double decode_bits(DType dtype, uint64_t bits) {
  switch (dtype) {
    case DType::f64: return double_from_bits(bits);
    case DType::f32:
    case DType::tf32: {  // the kernel rounds tf32 operands itself; storage holds a full f32
      const uint32_t low = uint32_t(bits);
      float single;
      memcpy(&single, &low, sizeof single);
      return single;
    }
    case DType::f16:
    case DType::bf16:
    case DType::e4m3:
    case DType::e5m2: return narrow_float_value(float_format(dtype), bits);
    case DType::i8: return double(int8_t(uint8_t(bits)));
    case DType::u8: return double(uint8_t(bits));
    case DType::i32: return double(int32_t(uint32_t(bits)));
    case DType::u32: return double(uint32_t(bits));
    case DType::i64: return double(int64_t(bits));
    case DType::boolean: return (bits & 0xFF) != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

// One load or store of the element's width, not a byte loop: on the device a memcpy of a
// run-time size is a loop of byte loads, and every device pass over an output (the comparison,
// the input generators) spent most of its time there. On the device, elements are naturally
// aligned (buffers come from cudaMalloc, offsets count whole elements); the host copies a
// fixed width, which compiles to one load and assumes nothing about alignment or aliasing.
template <typename Word>
REPRO_HD inline uint64_t load_word(const void* storage, int64_t element) {
#ifdef __CUDA_ARCH__
  return static_cast<const Word*>(storage)[element];
#else
  Word word;
  memcpy(&word, static_cast<const unsigned char*>(storage) + element * int64_t(sizeof(Word)), sizeof(Word));
  return word;
#endif
}

template <typename Word>
REPRO_HD inline void store_word(void* storage, int64_t element, uint64_t bits) {
  const Word word = Word(bits);
#ifdef __CUDA_ARCH__
  static_cast<Word*>(storage)[element] = word;
#else
  memcpy(static_cast<unsigned char*>(storage) + element * int64_t(sizeof(Word)), &word, sizeof(Word));
#endif
}

REPRO_HD inline uint64_t load_bits(DType dtype, const void* storage, int64_t element) {
  switch (dtype_bytes(dtype)) {
    case 1: return load_word<uint8_t>(storage, element);
    case 2: return load_word<uint16_t>(storage, element);
    case 4: return load_word<uint32_t>(storage, element);
    default: return load_word<uint64_t>(storage, element);
  }
}

REPRO_HD inline void store_bits(DType dtype, void* storage, int64_t element, uint64_t bits) {
  switch (dtype_bytes(dtype)) {
    case 1: return store_word<uint8_t>(storage, element, bits);
    case 2: return store_word<uint16_t>(storage, element, bits);
    case 4: return store_word<uint32_t>(storage, element, bits);
    default: return store_word<uint64_t>(storage, element, bits);
  }
}

// Element `element` (counted in elements, not bytes) of `storage`, as a double.
REPRO_HD inline double decode(DType dtype, const void* storage, int64_t element) {
  return decode_bits(dtype, load_bits(dtype, storage, element));
}

REPRO_HD inline void encode(DType dtype, void* storage, int64_t element, double value) {
  store_bits(dtype, storage, element, encode_bits(dtype, value));
}

// The value `dtype` holds for `value`.
REPRO_HD inline double round_to(DType dtype, double value) { return decode_bits(dtype, encode_bits(dtype, value)); }

// The spacing of representable values of `dtype` in the binade of |value| (subnormal spacing
// below the smallest normal); 1 for integer types; NaN for a non-finite value.
REPRO_HD inline double ulp_at(DType dtype, double value) {
  if (!dtype_is_float(dtype)) return 1.0;
  if (!std::isfinite(value)) return double_from_bits(0x7FF8000000000000ull);
  const FloatFormat format = float_format(dtype);
  const int min_exponent = 1 - format.bias;
  int exponent = min_exponent;
  if (value != 0.0) {
    std::frexp(value, &exponent);  // |value| = f * 2^exponent, f in [0.5, 1)
    exponent -= 1;
  }
  return std::ldexp(1.0, (exponent > min_exponent ? exponent : min_exponent) - format.mantissa_bits);
}

// Poison: every byte 0xFF. That is a NaN in every float format (the only NaN of E4M3FN) and -1
// or the maximum of an integer type, so an output the kernel never wrote stands out.
inline void fill_poison(DType dtype, void* storage, int64_t count) {
  std::memset(storage, 0xFF, size_t(count) * dtype_bytes(dtype));
}

// Whether an element's storage bits are the poison pattern (every bit set).
REPRO_HD inline bool is_poison_bits(DType dtype, uint64_t bits) {
  const size_t bytes = dtype_bytes(dtype);
  return bits == (bytes == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * bytes)) - 1);
}

REPRO_HD inline bool is_poison(DType dtype, const void* storage, int64_t element) {
  return is_poison_bits(dtype, load_bits(dtype, storage, element));
}

}  // namespace repro
