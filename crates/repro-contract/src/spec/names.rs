//! Which names a spec may give its tensors and sizes.
//!
//! Tensor and size names become C++ identifiers in the harness (local variables in the launch
//! function, visible to `kernel.setup`), so they must be identifiers, must not be keywords, and
//! must not shadow what the harness itself defines.

const CPP_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// Names the harness defines in the scope where tensors and sizes live.
const HARNESS_NAMES: &[&str] = &[
    "main",
    "std",
    "ceil_div",
    "dim3",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "cudaStream_t",
    "half",
    "nv_bfloat16",
];

pub fn is_cpp_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `name` cannot name a tensor or size, if it cannot.
pub fn identifier_problem(name: &str) -> Option<String> {
    if !is_cpp_identifier(name) {
        return Some(format!(
            "`{name}` is not a C++ identifier (letters, digits and `_`, not starting with a digit)"
        ));
    }
    if CPP_KEYWORDS.contains(&name) {
        return Some(format!("`{name}` is a C++ keyword"));
    }
    if HARNESS_NAMES.contains(&name) || name.starts_with("repro") {
        return Some(format!(
            "`{name}` collides with a name the harness defines (reserved: {}, and every name starting with `repro`)",
            HARNESS_NAMES.join(", ")
        ));
    }
    // The C++ standard reserves these for the implementation.
    if name.starts_with("__")
        || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()))
    {
        return Some(format!(
            "`{name}` is reserved by C++ (leading `__` or `_` + capital)"
        ));
    }
    None
}

/// A spec name (the output directory): `[a-z0-9_]+`.
pub fn is_spec_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(identifier_problem("A").is_none());
        assert!(identifier_problem("bias_2").is_none());
        assert!(identifier_problem("2A").is_some());
        assert!(identifier_problem("class").is_some());
        assert!(identifier_problem("repro_out").is_some());
        assert!(identifier_problem("__x").is_some());
        assert!(is_spec_name("tiled_gemm_bf16"));
        assert!(!is_spec_name("Tiled-GEMM"));
    }
}
