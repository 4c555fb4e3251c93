//! `f64` to and from a dtype's storage bits: the Rust mirror of the harness runtime's
//! `encode_bits` / `decode_bits` (`crates/repro-contract/runtime/src/inputs/dtype.cuh`).
//!
//! Floats round to nearest, ties to even, in one step from the `f64`. Going through `f32` first
//! (as the `half` crate's `f16::from_f64` does on some targets, and as its software fallback does
//! by dropping the low 32 bits of the significand) rounds twice and can land one ulp off, so the
//! narrow formats are rounded here by hand. OCP FP8 E4M3FN has no infinity: values beyond ±448
//! saturate to ±448. E5M2 and the 16-bit formats overflow to infinity. NaN becomes each format's
//! canonical quiet NaN. Integers round half to even, then clamp to their range; NaN becomes 0.

use crate::spec::dtype::DType;

/// The fields of a binary floating-point format.
#[derive(Debug, Clone, Copy)]
struct FloatFormat {
    exponent_bits: u32,
    /// Explicit fraction bits.
    mantissa_bits: u32,
    bias: i32,
    /// `false` for E4M3FN: no infinity, `S.1111.111` is its only NaN.
    has_infinity: bool,
    /// Where the format's bits sit in storage: tf32 is an f32 with 13 zero low bits.
    storage_shift: u32,
}

fn narrow_format(dtype: DType) -> Option<FloatFormat> {
    let (exponent_bits, mantissa_bits, bias, has_infinity, storage_shift) = match dtype {
        DType::Tf32 => (8, 10, 127, true, 13),
        DType::F16 => (5, 10, 15, true, 0),
        DType::Bf16 => (8, 7, 127, true, 0),
        DType::E4m3 => (4, 3, 7, false, 0),
        DType::E5m2 => (5, 2, 15, true, 0),
        _ => return None,
    };
    Some(FloatFormat {
        exponent_bits,
        mantissa_bits,
        bias,
        has_infinity,
        storage_shift,
    })
}

/// The storage bits of each float format's canonical (quiet, positive) NaN; 0 for the others.
pub fn canonical_nan_bits(dtype: DType) -> u64 {
    match dtype {
        DType::F64 => 0x7FF8_0000_0000_0000,
        DType::F32 | DType::Tf32 => 0x7FC0_0000,
        DType::F16 => 0x7E00,
        DType::Bf16 => 0x7FC0,
        DType::E4m3 => 0x7F,
        DType::E5m2 => 0x7E,
        _ => 0,
    }
}

/// Rounds a non-NaN `f64` to a format with a significand narrower than f32's, nearest-even, in
/// one step. Returns the format's own bits (not yet shifted into storage).
fn round_to_narrow_float(format: FloatFormat, value: f64) -> u64 {
    let p = format.mantissa_bits;
    let bits = value.to_bits();
    let sign = (bits >> 63) << (format.exponent_bits + p);
    let max_exponent_field = (1u64 << format.exponent_bits) - 1;
    let infinity = max_exponent_field << p;
    // E4M3FN's largest finite is S.1111.110: S.1111.111 is NaN.
    let max_finite = if format.has_infinity {
        infinity - 1
    } else {
        infinity | ((1u64 << p) - 2)
    };
    // Where values beyond max_finite go: infinity, or saturation in E4M3FN.
    let overflow = if format.has_infinity {
        infinity
    } else {
        max_finite
    };

    let exponent_field = ((bits >> 52) & 0x7FF) as i32;
    let mut significand = bits & ((1u64 << 52) - 1);
    if exponent_field == 0x7FF {
        return sign | overflow;
    }
    if exponent_field == 0 && significand == 0 {
        return sign;
    }

    // |value| = significand * 2^exponent with significand in [2^52, 2^53).
    let mut exponent;
    if exponent_field == 0 {
        exponent = -1074;
        while significand < (1u64 << 52) {
            significand <<= 1;
            exponent -= 1;
        }
    } else {
        significand |= 1u64 << 52;
        exponent = exponent_field - 1075;
    }

    // Representable values in the binade of |value| (and in the subnormal range, which shares
    // the lowest binade's spacing) are multiples of 2^quantum.
    let min_exponent = 1 - format.bias;
    let binade = (exponent + 52).max(min_exponent);
    let quantum = binade - p as i32;
    let shift = (quantum - exponent) as u32; // >= 52 - p > 0
    let mut multiple = 0u64;
    if shift <= 54 {
        multiple = significand >> shift;
        let remainder = significand & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if remainder > half || (remainder == half && multiple & 1 == 1) {
            multiple += 1;
        }
    }
    // In a normal binade `multiple` carries the implicit bit 2^p into the exponent field, and a
    // rounding carry into the next binade comes out right by itself.
    let magnitude = (((binade - min_exponent) as u64) << p) + multiple;
    sign | if magnitude > max_finite {
        overflow
    } else {
        magnitude
    }
}

/// 2^e for e in the normal exponent range of f64.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

fn narrow_float_value(format: FloatFormat, bits: u64) -> f64 {
    let p = format.mantissa_bits;
    let negative = (bits >> (format.exponent_bits + p)) & 1 == 1;
    let max_exponent_field = (1u64 << format.exponent_bits) - 1;
    let exponent_field = (bits >> p) & max_exponent_field;
    let all_fraction = (1u64 << p) - 1;
    let fraction = bits & all_fraction;
    if exponent_field == max_exponent_field && (format.has_infinity || fraction == all_fraction) {
        if format.has_infinity && fraction == 0 {
            return if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        return f64::NAN;
    }
    let min_exponent = 1 - format.bias;
    let magnitude = if exponent_field == 0 {
        fraction as f64 * pow2(min_exponent - p as i32)
    } else {
        (fraction | (1u64 << p)) as f64 * pow2(exponent_field as i32 - format.bias - p as i32)
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Round half to even, then clamp to `[lo, hi]`; NaN is 0.
fn clamp_to_integer(value: f64, lo: i64, hi: i64) -> i64 {
    if value.is_nan() {
        return 0;
    }
    let rounded = value.round_ties_even();
    if rounded <= lo as f64 {
        lo
    } else if rounded >= hi as f64 {
        hi // `i64::MAX as f64` is 2^63, the first f64 past it
    } else {
        rounded as i64
    }
}

/// The storage bits (in the low `dtype.bytes()` bytes) of `value` converted to `dtype`.
pub fn encode_bits(dtype: DType, value: f64) -> u64 {
    if dtype.is_float() && value.is_nan() {
        return canonical_nan_bits(dtype);
    }
    if let Some(format) = narrow_format(dtype) {
        return round_to_narrow_float(format, value) << format.storage_shift;
    }
    match dtype {
        DType::F64 => value.to_bits(),
        DType::F32 => u64::from((value as f32).to_bits()), // IEEE: nearest, ties to even
        DType::I8 => clamp_to_integer(value, i8::MIN.into(), i8::MAX.into()) as u64 & 0xFF,
        DType::U8 => clamp_to_integer(value, 0, u8::MAX.into()) as u64,
        DType::I32 => {
            clamp_to_integer(value, i32::MIN.into(), i32::MAX.into()) as u64 & 0xFFFF_FFFF
        }
        DType::U32 => clamp_to_integer(value, 0, u32::MAX.into()) as u64,
        DType::I64 => clamp_to_integer(value, i64::MIN, i64::MAX) as u64,
        DType::Bool => u64::from(value != 0.0), // NaN != 0: true, as in C++
        DType::Tf32 | DType::F16 | DType::Bf16 | DType::E4m3 | DType::E5m2 => {
            unreachable!("narrow formats above")
        }
    }
}

/// The value of storage bits `bits` (the low `dtype.bytes()` bytes) of `dtype`.
pub fn decode_bits(dtype: DType, bits: u64) -> f64 {
    match dtype {
        DType::F64 => f64::from_bits(bits),
        // The kernel rounds tf32 operands itself; storage holds a full f32.
        DType::F32 | DType::Tf32 => f64::from(f32::from_bits(bits as u32)),
        DType::F16 | DType::Bf16 | DType::E4m3 | DType::E5m2 => {
            narrow_float_value(narrow_format(dtype).expect("a narrow float"), bits)
        }
        DType::I8 => f64::from(bits as u8 as i8),
        DType::U8 => f64::from(bits as u8),
        DType::I32 => f64::from(bits as u32 as i32),
        DType::U32 => f64::from(bits as u32),
        DType::I64 => bits as i64 as f64,
        DType::Bool => f64::from(u8::from(bits & 0xFF != 0)),
    }
}

/// The value `dtype` holds for `value`.
pub fn round_to(dtype: DType, value: f64) -> f64 {
    decode_bits(dtype, encode_bits(dtype, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> f64 {
        // "1.0p-11"-style helper: mantissa * 2^exponent.
        let (m, e) = s.split_once('p').expect("p");
        m.parse::<f64>().expect("mantissa") * 2f64.powi(e.parse().expect("exponent"))
    }

    #[test]
    fn rounds_ties_to_even_without_double_rounding() {
        assert_eq!(encode_bits(DType::F16, 1.0 + hex("1p-11")), 0x3C00);
        assert_eq!(encode_bits(DType::F16, 1.0 + hex("3p-11")), 0x3C02);
        // Via f32 this would become the tie 1 + 2^-11 and then round down to 1.
        assert_eq!(
            encode_bits(DType::F16, 1.0 + hex("1p-11") + hex("1p-40")),
            0x3C01
        );
        assert_eq!(
            encode_bits(DType::Bf16, 1.0 + hex("1p-8") + hex("1p-30")),
            0x3F81
        );
        assert_eq!(
            encode_bits(DType::Tf32, 1.0 + hex("1p-11") + hex("1p-40")),
            0x3F80_2000
        );
        assert_eq!(round_to(DType::Bf16, 1002.0), 1000.0);
        assert_eq!(round_to(DType::Bf16, 1006.0), 1008.0);
    }

    #[test]
    fn subnormals_overflow_and_saturation() {
        assert_eq!(encode_bits(DType::F16, hex("1p-24")), 0x0001);
        assert_eq!(encode_bits(DType::F16, hex("1p-25")), 0x0000);
        assert_eq!(encode_bits(DType::F16, -hex("1p-30")), 0x8000);
        assert_eq!(encode_bits(DType::F16, 65519.0), 0x7BFF);
        assert_eq!(encode_bits(DType::F16, 65520.0), 0x7C00);
        assert_eq!(encode_bits(DType::E4m3, 464.0), 0x7E);
        assert_eq!(encode_bits(DType::E4m3, f64::NEG_INFINITY), 0xFE);
        assert_eq!(encode_bits(DType::E5m2, 61440.0), 0x7C);
        assert_eq!(encode_bits(DType::E4m3, hex("1p-9")), 0x01);
        assert_eq!(decode_bits(DType::E4m3, 0x7E), 448.0);
        assert!(decode_bits(DType::E4m3, 0x7F).is_nan());
        assert_eq!(decode_bits(DType::E4m3, 0x78), 256.0);
        assert_eq!(decode_bits(DType::E5m2, 0x7C), f64::INFINITY);
    }

    #[test]
    fn nan_is_canonical() {
        for dtype in DType::ALL.into_iter().filter(|d| d.is_float()) {
            assert_eq!(
                encode_bits(dtype, -f64::NAN),
                canonical_nan_bits(dtype),
                "{dtype}"
            );
            assert!(
                decode_bits(dtype, canonical_nan_bits(dtype)).is_nan(),
                "{dtype}"
            );
        }
    }

    #[test]
    fn integers_round_half_even_and_clamp() {
        assert_eq!(round_to(DType::I32, 2.5), 2.0);
        assert_eq!(round_to(DType::I32, 3.5), 4.0);
        assert_eq!(round_to(DType::I32, -2.5), -2.0);
        assert_eq!(encode_bits(DType::I8, 300.0), 0x7F);
        assert_eq!(encode_bits(DType::I8, -1.0), 0xFF);
        assert_eq!(encode_bits(DType::U8, -3.0), 0);
        assert_eq!(encode_bits(DType::I64, 1e19), i64::MAX as u64);
        assert_eq!(encode_bits(DType::I64, -1e19), i64::MIN as u64);
        assert_eq!(encode_bits(DType::I32, f64::NAN), 0);
        assert_eq!(decode_bits(DType::I8, 0x80), -128.0);
        assert_eq!(encode_bits(DType::Bool, 0.5), 1);
        assert_eq!(encode_bits(DType::Bool, -0.0), 0);
    }

    #[test]
    fn every_narrow_encoding_round_trips() {
        for dtype in [DType::F16, DType::Bf16, DType::E4m3, DType::E5m2] {
            for bits in 0..(1u64 << (8 * dtype.bytes())) {
                let value = decode_bits(dtype, bits);
                let expected = if value.is_nan() {
                    canonical_nan_bits(dtype)
                } else {
                    bits
                };
                assert_eq!(encode_bits(dtype, value), expected, "{dtype} {bits:#x}");
            }
        }
    }
}
