//! Element types a spec can name, and what the harness needs to know about each.

use serde::{Deserialize, Serialize};

/// An element type of a tensor (docs/spec.md, `tensors`). `tf32` is stored as f32; the kernel
/// rounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F64,
    F32,
    Tf32,
    F16,
    Bf16,
    E4m3,
    E5m2,
    I8,
    U8,
    I32,
    U32,
    I64,
    Bool,
}

impl DType {
    pub const ALL: [DType; 13] = [
        DType::F64,
        DType::F32,
        DType::Tf32,
        DType::F16,
        DType::Bf16,
        DType::E4m3,
        DType::E5m2,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::Bool,
    ];

    /// The spelling used in specs and reports.
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::Tf32 => "tf32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::E4m3 => "e4m3",
            DType::E5m2 => "e5m2",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element in device memory.
    pub fn bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::Tf32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::E4m3 | DType::E5m2 | DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F64
                | DType::F32
                | DType::Tf32
                | DType::F16
                | DType::Bf16
                | DType::E4m3
                | DType::E5m2
        )
    }

    /// The C++ enumerator of `repro::DType` in the harness runtime.
    pub fn cpp_enumerator(self) -> &'static str {
        match self {
            DType::Bool => "repro::DType::boolean",
            _ => match self.name() {
                "f64" => "repro::DType::f64",
                "f32" => "repro::DType::f32",
                "tf32" => "repro::DType::tf32",
                "f16" => "repro::DType::f16",
                "bf16" => "repro::DType::bf16",
                "e4m3" => "repro::DType::e4m3",
                "e5m2" => "repro::DType::e5m2",
                "i8" => "repro::DType::i8",
                "u8" => "repro::DType::u8",
                "i32" => "repro::DType::i32",
                "u32" => "repro::DType::u32",
                _ => "repro::DType::i64",
            },
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
