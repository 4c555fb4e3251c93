//! What a Rust type's (or path's) own words say: its last identifier, whether it is an integer,
//! its size in bytes, its first type argument. Syntax only, below the resolver (resolve.rs) and
//! the argument typing (types.rs) that both read it; it imports neither.

use syn::{GenericArgument, PathArguments, Type};

pub(super) const INT_TYPES: &[&str] = &[
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
];

pub(super) fn int_size_of(rust: &str) -> Option<i128> {
    Some(match rust {
        "i8" | "u8" | "bool" | "F8E4M3" | "F8E5M2" => 1,
        "i16" | "u16" | "f16" | "bf16" => 2,
        "i32" | "u32" | "f32" => 4,
        "i64" | "u64" | "f64" | "usize" | "isize" => 8,
        "i128" | "u128" => 16,
        _ => return None,
    })
}

pub(super) fn last_type_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Reference(r) => last_type_ident(&r.elem),
        Type::Paren(p) => last_type_ident(&p.elem),
        Type::Group(g) => last_type_ident(&g.elem),
        _ => None,
    }
}

pub(super) fn is_int_type(ty: &Type) -> bool {
    last_type_ident(ty).is_some_and(|t| INT_TYPES.contains(&t.as_str()))
}

/// The first type argument of a path segment (`CudaView<'a, T>` → `T`).
pub(super) fn first_type_arg(seg: &syn::PathSegment) -> Option<&Type> {
    match &seg.arguments {
        PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

/// The second-to-last segment of a path (`bf16::from_f32` → `bf16`).
pub(super) fn type_segment(path: &syn::Path) -> Option<String> {
    let n = path.segments.len();
    (n >= 2).then(|| path.segments[n - 2].ident.to_string())
}
