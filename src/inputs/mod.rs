//! Input values, exactly as the generated harness makes them.
//!
//! The harness runtime (`templates/harness/runtime/generators.cuh` and `dtype.cuh`) generates
//! every input tensor from its init pattern with a counter-based hash and converts it to the
//! tensor's dtype with round-to-nearest-even straight from `f64`. This module is the same
//! arithmetic in Rust, bit for bit, so `repro` knows the exact bits a harness feeds its kernel
//! without running it (to write them as `.npy`, to compute expected values, to shrink a failing
//! case). `tests/suite/runtime.rs` compiles the C++ runtime and checks the two agree on every pattern
//! and dtype.
//!
//! - [`generators`]: the init patterns (`ones`, `iota`, `uniform`, `normal`, ...) on logical
//!   row-major indices.
//! - [`convert`]: `f64` to and from a dtype's storage bits.
//! - [`tensor_storage_bits`]: a whole input tensor of a resolved spec.

pub mod convert;
pub mod generators;

pub use convert::{decode_bits, encode_bits, round_to};
pub use generators::{generate_value, stream_of, Init, InitKind};

use crate::spec::model::Generator;
use crate::spec::{InitResolved, InitSource, TensorSpecResolved};

impl Init {
    /// The generator a resolved spec gives a tensor; `None` for a file, whose values are the
    /// file's.
    pub fn from_resolved(init: &InitResolved) -> Option<Init> {
        let kind = match &init.source {
            InitSource::File(_) => return None,
            InitSource::Generator(generator) => match generator {
                Generator::Ones => InitKind::Ones,
                Generator::Zeros => InitKind::Zeros,
                Generator::Iota => InitKind::Iota,
                Generator::Identity => InitKind::Identity,
                Generator::Uniform => InitKind::Uniform,
                Generator::IntUniform => InitKind::IntUniform,
                Generator::Normal => InitKind::Normal,
            },
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
    let init = Init::from_resolved(&tensor.init).unwrap_or_else(|| {
        panic!(
            "tensor {} is loaded from a file, not generated",
            tensor.name
        )
    });
    let shape: Vec<u64> = tensor.shape.iter().map(|&d| d as u64).collect();
    let stream = stream_of(&tensor.name);
    let bytes = tensor.dtype.bytes();
    let numel: u64 = shape.iter().product();
    let mut out = Vec::with_capacity(numel as usize * bytes);
    for index in 0..numel {
        let bits = encode_bits(tensor.dtype, generate_value(&init, stream, index, &shape));
        out.extend_from_slice(&bits.to_le_bytes()[..bytes]);
    }
    out
}
