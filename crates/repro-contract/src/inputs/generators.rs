//! The init patterns (docs/spec.md, `inputs`): the Rust mirror of the harness runtime's
//! `crates/repro-contract/runtime/src/inputs/generators.cuh`, bit for bit.
//!
//! Every value is a pure function of (pattern, seed, tensor name, logical index):
//!
//! - counter hash `h(seed, stream, index, draw) = mix(mix(mix(mix(seed ^ SEED_SALT) ^ stream) ^
//!   index) ^ draw)`, `mix` = the splitmix64 finalizer, `stream` = FNV-1a 64 of the tensor name;
//! - `uniform`: `lo + (hi - lo) * u` with `u = (h >> 11) * 2^-53`;
//! - `int_uniform`: `lo + h mod (hi - lo + 1)`;
//! - `row_ramp`: 1 + the element's row (its second-to-last coordinate; a rank-1 tensor's index);
//! - `normal`: Marsaglia's polar method, draws `2j` and `2j + 1` for `j = 0, 1, ...`, with the
//!   natural log computed by [`deterministic_log`] (only `+ - * /`, so no libm differences).
//!
//! Rust never fuses `a * b + c` into an FMA on its own, so the plain expressions below round
//! exactly like the C++ (which blocks contraction explicitly).

pub use crate::init_patterns::Generator;

/// An init pattern with its parameters, laid out like the runtime's `repro::Init`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Init {
    pub kind: Generator,
    /// lo for `uniform` / `int_uniform`, the mean for `normal`.
    pub p0: f64,
    /// hi for `uniform` / `int_uniform`, the standard deviation for `normal`.
    pub p1: f64,
    pub seed: u64,
}

impl Init {
    /// The seed when the spec names none.
    pub const DEFAULT_SEED: u64 = 2024;

    /// `kind` with its default parameters (uniform `[-1, 1)`, int_uniform `[-4, 4]`,
    /// normal mean 0 std 1) and the default seed.
    pub fn new(kind: Generator) -> Init {
        let (p0, p1) = kind.default_parameters();
        Init {
            kind,
            p0,
            p1,
            seed: Init::DEFAULT_SEED,
        }
    }
}

/// The splitmix64 finalizer (Steele, Lea, Flood 2014).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64's golden-ratio increment; keeps seed 0 away from `mix64`'s fixed point 0.
pub const SEED_SALT: u64 = 0x9E37_79B9_7F4A_7C15;

/// The counter-based hash every random pattern draws from.
pub fn counter_hash(seed: u64, stream: u64, index: u64, draw: u64) -> u64 {
    mix64(mix64(mix64(mix64(seed ^ SEED_SALT) ^ stream) ^ index) ^ draw)
}

/// FNV-1a 64 of a tensor's name: tensors that share a seed still get different values.
pub fn stream_of(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The top 53 bits of a hash as an `f64` in `[0, 1)`.
fn unit_interval(hash: u64) -> f64 {
    (hash >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0) // 2^-53
}

/// `ln(x)` for a positive normal `x`, bit-identical on every machine: `x = m 2^e` with `m` in
/// `[sqrt(1/2), sqrt(2))`, `ln x = e ln 2 + 2 atanh(t)`, `t = (m - 1) / (m + 1)`, atanh by its
/// series to `t^22 / 23` (the rest is below 2^-53 relative for `|t| <= 0.1716`).
pub fn deterministic_log(x: f64) -> f64 {
    const SQRT_HALF: u64 = 0x3FE6_A09E_667F_3BCD;
    const LN_2: u64 = 0x3FE6_2E42_FEFA_39EF;
    const TERMS: i32 = 12;
    let bits = x.to_bits();
    let mut exponent = ((bits >> 52) & 0x7FF) as i32 - 1022;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1022u64 << 52)); // [0.5, 1)
    if m < f64::from_bits(SQRT_HALF) {
        m *= 2.0;
        exponent -= 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut series = 1.0 / f64::from(2 * TERMS - 1);
    for k in (0..TERMS - 1).rev() {
        series = 1.0 / f64::from(2 * k + 1) + t2 * series;
    }
    f64::from(exponent) * f64::from_bits(LN_2) + (2.0 * t) * series
}

/// Pairs of draws tried before the polar method gives up and returns the mean (rejection is
/// 21.5% likely per pair; 64 in a row never happens, the bound only makes the loop finite).
const MAX_NORMAL_PAIRS: u64 = 64;

fn normal_value(mean: f64, std: f64, seed: u64, stream: u64, index: u64) -> f64 {
    for pair in 0..MAX_NORMAL_PAIRS {
        let v1 = 2.0 * unit_interval(counter_hash(seed, stream, index, 2 * pair)) - 1.0;
        let v2 = 2.0 * unit_interval(counter_hash(seed, stream, index, 2 * pair + 1)) - 1.0;
        let s = v1 * v1 + v2 * v2;
        if s > 0.0 && s < 1.0 {
            let factor = (-2.0 * deterministic_log(s) / s).sqrt();
            return mean + std * (v1 * factor);
        }
    }
    mean
}

/// The value of element `logical_index` (row-major over the logical `shape`, whatever the
/// storage layout) of a tensor named by `stream` ([`stream_of`]), before rounding to its dtype.
pub fn generate_value(init: &Init, stream: u64, logical_index: u64, shape: &[u64]) -> f64 {
    match init.kind {
        Generator::Ones => 1.0,
        Generator::Zeros => 0.0,
        Generator::Iota => logical_index as f64,
        Generator::Identity => {
            let rank = shape.len();
            let columns = shape[rank - 1];
            let column = logical_index % columns;
            let row = if rank >= 2 {
                (logical_index / columns) % shape[rank - 2]
            } else {
                0
            };
            if row == column {
                1.0
            } else {
                0.0
            }
        }
        Generator::Uniform => {
            let u = unit_interval(counter_hash(init.seed, stream, logical_index, 0));
            init.p0 + (init.p1 - init.p0) * u
        }
        Generator::IntUniform => {
            let span = (init.p1 - init.p0) as u64 + 1;
            init.p0 + (counter_hash(init.seed, stream, logical_index, 0) % span) as f64
        }
        Generator::Normal => normal_value(init.p0, init.p1, init.seed, stream, logical_index),
        Generator::RowRamp => {
            let rank = shape.len();
            let row = if rank >= 2 {
                (logical_index / shape[rank - 1]) % shape[rank - 2]
            } else {
                logical_index
            };
            (row + 1) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_their_reference_values() {
        assert_eq!(stream_of(""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(stream_of("a"), 0xAF63_DC4C_8601_EC8C);
        assert_eq!(stream_of("foobar"), 0x8594_4171_F739_67E8);
        assert_eq!(mix64(SEED_SALT), 0xE220_A839_7B1D_CDAF); // splitmix64(0)'s first output
    }

    #[test]
    fn log_agrees_with_libm() {
        let mut x = 1e-300_f64;
        while x < 1e300 {
            let want = x.ln();
            let error = (deterministic_log(x) - want).abs() / want.abs().max(1e-300);
            assert!(
                error <= 4.5e-16,
                "ln({x}): {} vs {want}",
                deterministic_log(x)
            );
            x *= 1.37;
        }
        assert_eq!(deterministic_log(1.0), 0.0);
    }

    #[test]
    fn patterns_have_their_shape() {
        let matrix = [3, 4];
        let identity: String = (0..12)
            .map(|i| {
                if generate_value(&Init::new(Generator::Identity), 0, i, &matrix) == 1.0 {
                    '1'
                } else {
                    '0'
                }
            })
            .collect();
        assert_eq!(identity, "100001000010");
        let vector: Vec<f64> = (0..3)
            .map(|i| generate_value(&Init::new(Generator::Identity), 0, i, &[3]))
            .collect();
        assert_eq!(vector, [1.0, 0.0, 0.0]);
        assert_eq!(
            generate_value(&Init::new(Generator::Iota), 0, 11, &matrix),
            11.0
        );

        let uniform = Init::new(Generator::Uniform);
        let values: Vec<f64> = (0..10_000)
            .map(|i| generate_value(&uniform, stream_of("A"), i, &[10_000]))
            .collect();
        assert!(values.iter().all(|v| (-1.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.03, "{mean}");
        assert_ne!(
            values[0],
            generate_value(&uniform, stream_of("B"), 0, &[10_000])
        );

        let ints = Init::new(Generator::IntUniform);
        let mut seen = [false; 9];
        for i in 0..1000 {
            let v = generate_value(&ints, 1, i, &[1000]);
            assert_eq!(v, v.floor());
            seen[(v + 4.0) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));

        let normal = Init {
            p0: 10.0,
            p1: 0.5,
            ..Init::new(Generator::Normal)
        };
        let n = 20_000;
        let values: Vec<f64> = (0..n)
            .map(|i| generate_value(&normal, 7, i, &[n]))
            .collect();
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64).sqrt();
        assert!(
            (mean - 10.0).abs() < 0.02 && (std - 0.5).abs() < 0.02,
            "{mean} {std}"
        );
    }
}
