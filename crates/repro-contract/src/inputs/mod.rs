//! Input values, exactly as the generated harness makes them.
//!
//! The harness runtime (`crates/repro-contract/runtime/src/inputs/generators.cuh` and `dtype.cuh`)
//! generates every input tensor from its init pattern with a counter-based hash and converts it to
//! the tensor's dtype with round-to-nearest-even straight from `f64`. This module is the same
//! arithmetic in Rust, bit for bit, so `repro` knows the exact bits a harness feeds its kernel
//! without running it (to write them as `.npy`, to compute expected values, to shrink a failing
//! case). `tests/suite/runtime.rs` compiles the C++ runtime and checks the two agree on every
//! pattern and dtype.
//!
//! - [`generators`]: the init patterns (`ones`, `iota`, `uniform`, `normal`, ...) on logical
//!   row-major indices.
//! - [`convert`]: `f64` to and from a dtype's storage bits.
//! - [`tensor_storage_bits`]: a whole input tensor of a resolved spec.

pub mod convert;
pub mod generators;
pub mod npy;

pub use convert::{decode_bits, encode_bits, round_to};
pub use generators::{generate_value, stream_of, Generator, Init};

use crate::spec::model::ScaleFormat;
use crate::spec::{InitResolved, InitSource, ResolvedSpec, ScaleResolved, TensorSpecResolved};

impl Init {
    /// The generator a resolved spec gives a tensor; `None` for a file, whose values are the
    /// file's.
    pub fn from_resolved(init: &InitResolved) -> Option<Init> {
        let kind = match &init.source {
            InitSource::File(_) | InitSource::Values(_) | InitSource::Groups { .. } => return None,
            InitSource::Generator(generator) => *generator,
        };
        Some(Init {
            kind,
            p0: init.p0,
            p1: init.p1,
            seed: init.seed,
        })
    }
}

/// The bytes of a generated input tensor in logical row-major order, each element's storage
/// bits little-endian: exactly the payload of the `.npy` the harness writes for the tensor
/// (`--emit-inputs`, `--dump`), whatever its device layout.
///
/// # Panics
/// For a tensor initialized from a file: those bytes are the file's, not generated.
pub fn tensor_storage_bits(tensor: &TensorSpecResolved) -> Vec<u8> {
    let bytes = tensor.dtype.bytes();
    if let Some(values) = listed_values(&tensor.init.source, tensor.numel().max(0) as usize) {
        let mut out = Vec::with_capacity(values.len() * bytes);
        for v in values {
            out.extend_from_slice(&encode_bits(tensor.dtype, v).to_le_bytes()[..bytes]);
        }
        return out;
    }
    let init = Init::from_resolved(&tensor.init).unwrap_or_else(|| {
        panic!(
            "tensor {} is loaded from a file, not generated",
            tensor.name
        )
    });
    let shape: Vec<u64> = tensor.shape.iter().map(|&d| d as u64).collect();
    let stream = stream_of(&tensor.name);
    let numel: u64 = shape.iter().product();
    let mut out = Vec::with_capacity(numel as usize * bytes);
    for index in 0..numel {
        let bits = encode_bits(tensor.dtype, generate_value(&init, stream, index, &shape));
        out.extend_from_slice(&bits.to_le_bytes()[..bytes]);
    }
    out
}

/// The values of an init that lists them (`values:`, `groups:`) for a tensor of `numel`
/// elements, as the harness's read_listed_init makes them (generators.cuh); `None` for the
/// other inits. A `values:` list shorter than the tensor leaves the rest 0 (validation refuses
/// a list of the wrong length; the harness checks again at its run-time sizes).
pub fn listed_values(source: &InitSource, numel: usize) -> Option<Vec<f64>> {
    match source {
        InitSource::Values(values) => {
            let mut out = values.clone();
            out.resize(numel, 0.0);
            Some(out)
        }
        InitSource::Groups { rows, align } => {
            let mut out = Vec::with_capacity(numel);
            for (group, &count) in rows.iter().enumerate() {
                let align = (*align).max(1);
                let padded = (count + align - 1) / align * align;
                for row in 0..padded {
                    out.push(if row < count { group as f64 } else { -1.0 });
                }
            }
            out.resize(numel, -1.0);
            Some(out)
        }
        _ => None,
    }
}

/// The bytes of input `index` of `spec` as the harness makes them (its `.npy` payload): the
/// tensor's generator ([`tensor_storage_bits`]), except for a ue8m0 scale tensor, whose bytes
/// are exponents made from its init (the runtime's `fill_ue8m0_scales` in scales.cuh): every
/// byte 127 (1.0), then per scale block 127 for `ones` and 127 + (h mod 7) - 3 for the random
/// patterns, h the counter hash of the tensor's seed and stream at block (g * i_blocks +
/// i_block) * k_blocks + k_block (g: the group of a grouped GEMM's [G, ...] scales, the batch of a
/// batched GEMM's [L, ...], else 0), draw
/// 0; four K blocks to an i32 element when packed.
pub fn input_bits(spec: &ResolvedSpec, index: usize) -> Vec<u8> {
    let tensor = &spec.tensors[index];
    let Some(r) = spec.reference.gemm() else {
        return tensor_storage_bits(tensor);
    };
    let scale = [(&r.scale_a, true), (&r.scale_b, false)]
        .into_iter()
        .find_map(|(s, is_a)| s.as_ref().filter(|s| s.tensor == index).map(|s| (s, is_a)));
    match scale {
        Some((s, is_a)) if s.format == ScaleFormat::Ue8m0 => {
            ue8m0_scale_bits(tensor, s, is_a, r.m, r.n, r.k)
        }
        _ => tensor_storage_bits(tensor),
    }
}

fn ue8m0_scale_bits(
    tensor: &TensorSpecResolved,
    s: &ScaleResolved,
    is_a: bool,
    m: i64,
    n: i64,
    k: i64,
) -> Vec<u8> {
    let bytes = tensor.dtype.bytes();
    let mut out = vec![127u8; tensor.numel().max(0) as usize * bytes];
    let random = match &tensor.init.source {
        InitSource::Generator(Generator::Ones) => false,
        InitSource::Generator(_) => true,
        // A file or a list: the bytes as given (not generated here).
        _ => return tensor_storage_bits(tensor),
    };
    let (i_extent, block_i, block_k) = if is_a {
        (m, s.block[0], s.block[1])
    } else {
        (n, s.block[1], s.block[0])
    };
    let (i_blocks, k_blocks) = (
        (i_extent + block_i - 1) / block_i,
        (k + block_k - 1) / block_k,
    );
    let stream = stream_of(&tensor.name);
    // A grouped GEMM's scales of one operand per group: [G, rows, columns] (a batched GEMM's per
    // batch: [L, ...]), the groups' blocks numbered on from one group to the next.
    let rank = tensor.shape.len();
    let groups = if rank == 3 { tensor.shape[0] } else { 1 };
    let (rows, columns) = (tensor.shape[rank - 2], tensor.shape[rank - 1]);
    for group in 0..groups {
        for ib in 0..i_blocks {
            for kb in 0..k_blocks {
                let k_index = if s.packed { kb / 4 } else { kb };
                let (row, col) = if is_a { (ib, k_index) } else { (k_index, ib) };
                let byte = if random {
                    let block = (group * i_blocks + ib) * k_blocks + kb;
                    let h = generators::counter_hash(tensor.init.seed, stream, block as u64, 0);
                    (127 + (h % 7) as i64 - 3) as u8
                } else {
                    127
                };
                let element = ((group * rows + row) * columns + col) as usize * bytes;
                out[element + if s.packed { (kb % 4) as usize } else { 0 }] = byte;
            }
        }
    }
    out
}
