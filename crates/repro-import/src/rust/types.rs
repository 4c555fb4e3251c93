//! What an argument's Rust type says about it as a kernel argument: a device buffer of some
//! element type (and its length when the host data is visible), a scalar of some dtype, or
//! something else; from annotations, constructors, `memcpy_stod` and `alloc_zeros::<T>`.

use syn::{BinOp, Expr, GenericArgument, Lit, Member, RangeLimits, Type, UnOp};

use super::resolve::Resolver;
use super::type_names::{first_type_arg, last_type_ident, type_segment, INT_TYPES};
use super::walk::{
    block_tail, is_device_ptr_call, peel_paren, peel_value, snippet, start, BindKind, Binding,
    VecMacro,
};
use super::MAX_DEPTH;

/// What the Rust type of an expression says about it as a kernel argument.
#[derive(Clone)]
pub(super) enum Ty<'a> {
    /// A device buffer (`CudaSlice`, `CudaView`, `CudaViewMut`, or a raw `CUdeviceptr`).
    Buffer {
        elem: Elem,
        len: Len<'a>,
        /// Writable (`&mut`, `CudaViewMut`), read-only (`&`, `CudaView`), or not known.
        mutable: Option<bool>,
        /// A view of another buffer (its length is not the allocation's).
        view: bool,
        /// A raw device pointer (`CUdeviceptr`, `device_ptr()`): the kernel gets its value, so
        /// a `&` around it says nothing about writing; `device_ptr_mut` does.
        raw: bool,
    },
    Int(String),
    Float(String),
    Bool,
    /// Host data (a `Vec`, an array, a slice).
    Host,
    /// Some other type, described so that "`x` is {description}" reads.
    Other(String),
    Unknown,
}

#[derive(Debug, Clone)]
pub(super) enum Elem {
    Dtype(&'static str),
    /// A generic parameter of the function.
    Generic(String),
    /// A Rust type with no spec dtype.
    Unsupported(String),
    Unknown(String),
}

#[derive(Clone, Copy)]
pub(super) enum Len<'a> {
    Expr(&'a Expr),
    Count(usize),
    Unknown,
}

fn dtype_of(rust: &str) -> Option<&'static str> {
    Some(match rust {
        "f32" => "f32",
        "f64" => "f64",
        "f16" => "f16",
        "bf16" => "bf16",
        "i32" => "i32",
        "u32" => "u32",
        "i64" => "i64",
        "u8" => "u8",
        "i8" => "i8",
        "bool" => "bool",
        "F8E4M3" | "f8e4m3" => "e4m3",
        "F8E5M2" | "f8e5m2" => "e5m2",
        _ => return None,
    })
}

const FLOAT_TYPES: &[&str] = &["f32", "f64", "f16", "bf16"];

fn turbofish_type(m: &syn::ExprMethodCall) -> Option<&Type> {
    m.turbofish.as_ref()?.args.iter().find_map(|g| match g {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    // ---- types ------------------------------------------------------------------------------

    fn ty_of_type(&self, ty: &'a Type) -> Ty<'a> {
        match ty {
            Type::Reference(r) => match self.ty_of_type(&r.elem) {
                Ty::Buffer {
                    elem,
                    len,
                    view,
                    raw,
                    mutable,
                } => Ty::Buffer {
                    elem,
                    len,
                    mutable: if raw {
                        mutable
                    } else {
                        Some(r.mutability.is_some())
                    },
                    view,
                    raw,
                },
                other => other,
            },
            Type::Paren(p) => self.ty_of_type(&p.elem),
            Type::Group(g) => self.ty_of_type(&g.elem),
            Type::Slice(_) | Type::Array(_) => Ty::Host,
            Type::Path(p) => {
                let Some(seg) = p.path.segments.last() else {
                    return Ty::Unknown;
                };
                let id = seg.ident.to_string();
                match id.as_str() {
                    "CudaSlice" | "CudaView" | "CudaViewMut" => Ty::Buffer {
                        elem: first_type_arg(seg).map_or(
                            Elem::Unknown(format!("`{}` has no element type", snippet(ty))),
                            |t| self.elem_of_type(t),
                        ),
                        len: Len::Unknown,
                        mutable: match id.as_str() {
                            "CudaView" => Some(false),
                            "CudaViewMut" => Some(true),
                            _ => None,
                        },
                        view: id != "CudaSlice",
                        raw: false,
                    },
                    // cudarc's raw device pointer (a `u64` alias): a buffer whose element type
                    // and length the pointer does not carry.
                    "CUdeviceptr" => Ty::Buffer {
                        elem: Elem::Unknown("a raw `CUdeviceptr` has no element type".into()),
                        len: Len::Unknown,
                        mutable: None,
                        view: false,
                        raw: true,
                    },
                    "Arc" | "Rc" | "Box" => first_type_arg(seg).map_or(
                        Ty::Other(format!("of Rust type `{}`", snippet(ty))),
                        |inner| self.ty_of_type(inner),
                    ),
                    "Vec" => Ty::Host,
                    "bool" => Ty::Bool,
                    t if INT_TYPES.contains(&t) => Ty::Int(id),
                    t if FLOAT_TYPES.contains(&t) => Ty::Float(id),
                    t if self.fun.generics.iter().any(|g| g == t) => {
                        Ty::Other(format!("of the generic type `{t}` of `{}`", self.fun.name))
                    }
                    _ => Ty::Other(format!("of Rust type `{}`", snippet(ty))),
                }
            }
            _ => Ty::Other(format!("of Rust type `{}`", snippet(ty))),
        }
    }

    fn elem_of_type(&self, ty: &Type) -> Elem {
        let Some(id) = last_type_ident(ty) else {
            return Elem::Unknown(format!("`{}` is not a spec dtype", snippet(ty)));
        };
        if let Some(d) = dtype_of(&id) {
            Elem::Dtype(d)
        } else if self.fun.generics.contains(&id) {
            Elem::Generic(id)
        } else if INT_TYPES.contains(&id.as_str()) || matches!(id.as_str(), "char") {
            Elem::Unsupported(id)
        } else {
            Elem::Unknown(format!("`{}` is not a spec dtype", snippet(ty)))
        }
    }

    pub(super) fn ty_of(&self, e: &'a Expr, depth: usize) -> Ty<'a> {
        if depth > MAX_DEPTH {
            return Ty::Unknown;
        }
        let d = depth + 1;
        match e {
            Expr::Paren(p) => self.ty_of(&p.expr, d),
            Expr::Group(g) => self.ty_of(&g.expr, d),
            Expr::Try(t) => self.ty_of(&t.expr, d),
            Expr::Reference(r) => match self.ty_of(&r.expr, d) {
                Ty::Buffer {
                    elem,
                    len,
                    view,
                    raw,
                    mutable,
                } => Ty::Buffer {
                    elem,
                    len,
                    mutable: if raw {
                        mutable
                    } else {
                        Some(r.mutability.is_some())
                    },
                    view,
                    raw,
                },
                other => other,
            },
            Expr::Unary(u) => match u.op {
                UnOp::Not(_) => match self.ty_of(&u.expr, d) {
                    Ty::Bool => Ty::Bool,
                    Ty::Int(t) => Ty::Int(t),
                    _ => Ty::Unknown,
                },
                _ => self.ty_of(&u.expr, d),
            },
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => Ty::Int(if i.suffix().is_empty() {
                    "{integer}".into()
                } else {
                    i.suffix().into()
                }),
                Lit::Float(f) => Ty::Float(if f.suffix().is_empty() {
                    "f64".into()
                } else {
                    f.suffix().into()
                }),
                Lit::Bool(_) => Ty::Bool,
                _ => Ty::Other(format!("the literal `{}`", snippet(e))),
            },
            Expr::Cast(c) => self.ty_of_type(&c.ty),
            Expr::Binary(b) => match b.op {
                BinOp::Eq(_)
                | BinOp::Ne(_)
                | BinOp::Lt(_)
                | BinOp::Le(_)
                | BinOp::Gt(_)
                | BinOp::Ge(_)
                | BinOp::And(_)
                | BinOp::Or(_) => Ty::Bool,
                _ => match self.ty_of(&b.left, d) {
                    t @ (Ty::Int(_) | Ty::Float(_)) => t,
                    _ => self.ty_of(&b.right, d),
                },
            },
            Expr::Path(p) => {
                let Some(last) = p.path.segments.last() else {
                    return Ty::Unknown;
                };
                let last = last.ident.to_string();
                if p.path.get_ident().is_some() {
                    if let Some(b) = self.binding(&last, start(e)) {
                        return self.binding_ty(b, d);
                    }
                }
                match self.constant(&last) {
                    Some(Some((_, ty))) => self.ty_of_type(ty),
                    _ => match type_segment(&p.path) {
                        Some(t) if INT_TYPES.contains(&t.as_str()) => Ty::Int(t),
                        Some(t) if FLOAT_TYPES.contains(&t.as_str()) => Ty::Float(t),
                        _ => Ty::Unknown,
                    },
                }
            }
            Expr::Field(f) => match &f.member {
                Member::Named(n) => self
                    .field_type(&f.base, &n.to_string())
                    .map_or(Ty::Unknown, |t| self.ty_of_type(t)),
                // `buf.device_ptr(&stream).0`: the pointer of cudarc's (pointer, guard) pair.
                Member::Unnamed(i) if i.index == 0 && is_device_ptr_call(&f.base) => {
                    self.ty_of(&f.base, d)
                }
                Member::Unnamed(_) => Ty::Unknown,
            },
            Expr::MethodCall(m) => self.ty_of_method(m, d),
            Expr::Call(c) => {
                let Expr::Path(p) = peel_paren(&c.func) else {
                    return Ty::Unknown;
                };
                let last = p.path.segments.last().map(|s| s.ident.to_string());
                if last.as_deref() == Some("size_of") {
                    return Ty::Int("usize".into());
                }
                match type_segment(&p.path) {
                    Some(t) if INT_TYPES.contains(&t.as_str()) => Ty::Int(t),
                    Some(t) if FLOAT_TYPES.contains(&t.as_str()) => Ty::Float(t),
                    _ => Ty::Unknown,
                }
            }
            Expr::Macro(m) if m.mac.path.segments.last().is_some_and(|s| s.ident == "vec") => {
                Ty::Host
            }
            Expr::Array(_) | Expr::Repeat(_) => Ty::Host,
            Expr::Block(b) => block_tail(&b.block).map_or(Ty::Unknown, |t| self.ty_of(t, d)),
            Expr::Unsafe(u) => block_tail(&u.block).map_or(Ty::Unknown, |t| self.ty_of(t, d)),
            _ => Ty::Unknown,
        }
    }

    fn binding_ty(&self, b: &'r Binding<'a>, d: usize) -> Ty<'a> {
        let from_init = match (b.kind, b.init) {
            (BindKind::Let, Some(init)) => Some(self.ty_of(init, d)),
            _ => None,
        };
        let Some(ty) = b.ty else {
            return from_init.unwrap_or(Ty::Unknown);
        };
        match (self.ty_of_type(ty), from_init) {
            // The annotation gives the type, the initializer may show the length.
            (
                Ty::Buffer {
                    elem,
                    mutable,
                    view,
                    raw,
                    ..
                },
                Some(Ty::Buffer { len, elem: e2, .. }),
            ) => Ty::Buffer {
                elem: match elem {
                    Elem::Unknown(_) => e2,
                    known => known,
                },
                len,
                mutable,
                view,
                raw,
            },
            (annotated, _) => annotated,
        }
    }

    fn ty_of_method(&self, m: &'a syn::ExprMethodCall, d: usize) -> Ty<'a> {
        let method = m.method.to_string();
        match method.as_str() {
            "unwrap" | "expect" | "clone" | "to_owned" | "as_ref" => self.ty_of(&m.receiver, d),
            "alloc_zeros" | "alloc" | "alloc_zeros_async" | "alloc_async" => Ty::Buffer {
                elem: turbofish_type(m).map_or(
                    Elem::Unknown(format!(
                        "`{method}` is called without `::<T>` and the binding has no type"
                    )),
                    |t| self.elem_of_type(t),
                ),
                len: m.args.first().map_or(Len::Unknown, Len::Expr),
                mutable: None,
                view: false,
                raw: false,
            },
            "htod_copy" | "htod_sync_copy" | "memcpy_stod" | "clone_htod" | "htod_copy_async" => {
                match m.args.first() {
                    Some(host) => {
                        let (elem, len) = self.host_of(host, d);
                        Ty::Buffer {
                            elem,
                            len,
                            mutable: None,
                            view: false,
                            raw: false,
                        }
                    }
                    None => Ty::Unknown,
                }
            }
            "slice" | "try_slice" | "as_view" | "slice_mut" | "try_slice_mut" | "as_view_mut" => {
                match self.ty_of(&m.receiver, d) {
                    Ty::Buffer { elem, .. } => Ty::Buffer {
                        elem,
                        len: Len::Unknown,
                        mutable: Some(method.ends_with("_mut")),
                        view: true,
                        raw: false,
                    },
                    _ => Ty::Unknown,
                }
            }
            // The buffer's raw device pointer (cudarc's `DevicePtr`; since 0.16 with a guard
            // beside it, which a pattern or `.0` takes apart): still that buffer, for the kernel.
            "device_ptr" | "device_ptr_mut" => match self.ty_of(&m.receiver, d) {
                Ty::Buffer { elem, len, .. } => Ty::Buffer {
                    elem,
                    len,
                    mutable: Some(method == "device_ptr_mut"),
                    view: false,
                    raw: true,
                },
                _ => Ty::Buffer {
                    elem: Elem::Unknown(format!(
                        "the Rust type of `{}` is not visible here",
                        snippet(&m.receiver)
                    )),
                    len: Len::Unknown,
                    mutable: Some(method == "device_ptr_mut"),
                    view: false,
                    raw: true,
                },
            },
            "len" | "count" => Ty::Int("usize".into()),
            "div_ceil" | "min" | "max" | "pow" | "saturating_sub" | "next_power_of_two"
            | "next_multiple_of" => self.ty_of(&m.receiver, d),
            "try_into" | "into" => Ty::Unknown,
            _ => Ty::Unknown,
        }
    }

    /// Element type and length of host data copied to the device.
    fn host_of(&self, e: &'a Expr, depth: usize) -> (Elem, Len<'a>) {
        let unknown = || {
            (
                Elem::Unknown(format!(
                    "the element type of the host data `{}` is not visible",
                    snippet(e)
                )),
                Len::Unknown,
            )
        };
        if depth > MAX_DEPTH {
            return unknown();
        }
        let d = depth + 1;
        match peel_value(e) {
            Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "to_vec" | "as_slice" | "into" | "as_mut_slice"
                ) =>
            {
                self.host_of(&m.receiver, d)
            }
            Expr::MethodCall(m) if m.method == "collect" => {
                let elem = turbofish_type(m)
                    .and_then(|t| match t {
                        Type::Path(p) => p.path.segments.last().and_then(first_type_arg),
                        _ => None,
                    })
                    .map(|t| self.elem_of_type(t));
                let (len, mapped) = iter_source(&m.receiver);
                let elem = elem.unwrap_or_else(|| match mapped {
                    Some(body) => self.scalar_elem(body, d),
                    None => unknown().0,
                });
                (elem, len)
            }
            Expr::Macro(mac) => {
                match self
                    .ctx
                    .vec_macros
                    .get(&(&mac.mac as *const syn::Macro as usize))
                {
                    Some(VecMacro::Repeat(x, n)) => (self.scalar_elem(x, d), Len::Expr(n)),
                    Some(VecMacro::List(items)) => (
                        items
                            .first()
                            .map_or(unknown().0, |x| self.scalar_elem(x, d)),
                        Len::Count(items.len()),
                    ),
                    None => unknown(),
                }
            }
            Expr::Repeat(r) => (self.scalar_elem(&r.expr, d), Len::Expr(&r.len)),
            Expr::Array(a) => (
                a.elems
                    .first()
                    .map_or(unknown().0, |x| self.scalar_elem(x, d)),
                Len::Count(a.elems.len()),
            ),
            inner @ Expr::Path(p) => {
                let Some(ident) = p.path.get_ident() else {
                    return unknown();
                };
                let Some(b) = self.binding(&ident.to_string(), start(inner)) else {
                    return unknown();
                };
                let (init_elem, len) = match (b.kind, b.init) {
                    (BindKind::Let, Some(init)) => self.host_of(init, d),
                    _ => unknown(),
                };
                let annotated = b.ty.and_then(host_elem_type).map(|t| self.elem_of_type(t));
                let elem = match (annotated, init_elem) {
                    (Some(Elem::Unknown(_)) | None, e) => e,
                    (Some(a), _) => a,
                };
                let len = match (len, b.ty) {
                    (Len::Unknown, Some(Type::Array(a))) => Len::Expr(&a.len),
                    (len, _) => len,
                };
                (elem, len)
            }
            _ => unknown(),
        }
    }

    /// The spec dtype of a scalar expression (an element of host data).
    fn scalar_elem(&self, e: &'a Expr, depth: usize) -> Elem {
        let unknown = || {
            Elem::Unknown(format!(
                "the element type of `{}` is not visible",
                snippet(e)
            ))
        };
        if depth > MAX_DEPTH {
            return unknown();
        }
        let d = depth + 1;
        match peel_value(e) {
            Expr::Lit(l) => match &l.lit {
                Lit::Float(f) if f.suffix().is_empty() => Elem::Unknown(format!(
                    "`{}` has no type suffix (f64 unless its use makes it f32)",
                    snippet(e)
                )),
                Lit::Int(i) if i.suffix().is_empty() => Elem::Unknown(format!(
                    "`{}` has no type suffix (i32 unless its use says otherwise)",
                    snippet(e)
                )),
                Lit::Float(f) => suffix_elem(f.suffix()),
                Lit::Int(i) => suffix_elem(i.suffix()),
                Lit::Bool(_) => Elem::Dtype("bool"),
                _ => unknown(),
            },
            Expr::Cast(c) => self.elem_of_type(&c.ty),
            Expr::Unary(u) => self.scalar_elem(&u.expr, d),
            Expr::Binary(b) => match self.scalar_elem(&b.left, d) {
                Elem::Unknown(_) => self.scalar_elem(&b.right, d),
                known => known,
            },
            Expr::Call(c) => match peel_paren(&c.func) {
                Expr::Path(p) => type_segment(&p.path)
                    .and_then(|t| dtype_of(&t))
                    .map_or_else(unknown, Elem::Dtype),
                _ => unknown(),
            },
            Expr::MethodCall(m) => match turbofish_type(m) {
                Some(t) => self.elem_of_type(t),
                None => unknown(),
            },
            inner @ Expr::Path(p) => {
                if p.path.segments.len() >= 2 {
                    return type_segment(&p.path)
                        .and_then(|t| dtype_of(&t))
                        .map_or_else(unknown, Elem::Dtype);
                }
                match self.ty_of(inner, d) {
                    Ty::Int(t) | Ty::Float(t) => dtype_of(&t).map_or_else(unknown, Elem::Dtype),
                    Ty::Bool => Elem::Dtype("bool"),
                    _ => unknown(),
                }
            }
            _ => unknown(),
        }
    }
}

fn suffix_elem(suffix: &str) -> Elem {
    match dtype_of(suffix) {
        Some(d) => Elem::Dtype(d),
        None => Elem::Unsupported(suffix.to_string()),
    }
}

/// `T` of an annotation `Vec<T>`, `[T; N]`, `&[T]`, `Box<[T]>`.
fn host_elem_type(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Reference(r) => host_elem_type(&r.elem),
        Type::Slice(s) => Some(&s.elem),
        Type::Array(a) => Some(&a.elem),
        Type::Path(p) => {
            let seg = p.path.segments.last()?;
            let inner = first_type_arg(seg)?;
            match seg.ident.to_string().as_str() {
                "Vec" => Some(inner),
                "Box" | "Arc" | "Rc" => host_elem_type(inner),
                _ => None,
            }
        }
        _ => None,
    }
}

/// For `(0..n).map(|i| body).collect()`: the length `n` and the mapped element expression.
fn iter_source(mut e: &Expr) -> (Len<'_>, Option<&Expr>) {
    let mut mapped = None;
    for _ in 0..MAX_DEPTH {
        match peel_paren(e) {
            Expr::MethodCall(m) => {
                match m.method.to_string().as_str() {
                    "map" => {
                        if let Some(Expr::Closure(c)) = m.args.first() {
                            mapped = Some(match &*c.body {
                                Expr::Block(b) => match b.block.stmts.last() {
                                    Some(syn::Stmt::Expr(t, None)) => t,
                                    _ => &*c.body,
                                },
                                body => body,
                            });
                        }
                    }
                    "into_iter" | "iter" | "cloned" | "copied" => {}
                    _ => return (Len::Unknown, mapped),
                }
                e = &m.receiver;
            }
            Expr::Range(r) if matches!(r.limits, RangeLimits::HalfOpen(_)) => {
                let from_zero = match r.start.as_deref().map(peel_paren) {
                    None => true,
                    Some(Expr::Lit(l)) => matches!(&l.lit, Lit::Int(i) if i.base10_digits() == "0"),
                    _ => false,
                };
                return match (&r.end, from_zero) {
                    (Some(end), true) => (Len::Expr(end), mapped),
                    _ => (Len::Unknown, mapped),
                };
            }
            _ => return (Len::Unknown, mapped),
        }
    }
    (Len::Unknown, mapped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rust::import_source;
    use crate::rust::type_names::{int_size_of, is_int_type};

    fn ty(text: &str) -> Type {
        syn::parse_str(text).unwrap()
    }

    #[test]
    fn rust_scalar_types() {
        assert_eq!(dtype_of("f32"), Some("f32"));
        assert_eq!(dtype_of("F8E4M3"), Some("e4m3"));
        assert_eq!(dtype_of("usize"), None);
        assert_eq!(int_size_of("usize"), Some(8));
        assert_eq!(int_size_of("bf16"), Some(2));
        assert_eq!(int_size_of("String"), None);
        assert!(is_int_type(&ty("u32")));
        assert!(!is_int_type(&ty("f32")));
        assert_eq!(
            last_type_ident(&ty("&mut cudarc::driver::CudaSlice<f32>")).as_deref(),
            Some("CudaSlice")
        );
        assert_eq!(last_type_ident(&ty("[f32; 4]")), None);
    }

    #[test]
    fn element_types_of_host_and_device_annotations() {
        let elem = |t: &str| host_elem_type(&ty(t)).and_then(last_type_ident);
        assert_eq!(elem("Vec<f32>").as_deref(), Some("f32"));
        assert_eq!(elem("&[u8]").as_deref(), Some("u8"));
        assert_eq!(elem("[f64; 3]").as_deref(), Some("f64"));
        assert_eq!(elem("f32"), None);
        let slice = ty("CudaSlice<'a, half::bf16>");
        let Type::Path(p) = &slice else { panic!() };
        let arg = first_type_arg(p.path.segments.last().unwrap());
        assert_eq!(arg.and_then(last_type_ident).as_deref(), Some("bf16"));
    }

    #[test]
    fn buffer_dtypes_and_lengths_from_constructors() {
        let src = "fn run(stream: &CudaStream, f: &CudaFunction, n: usize, host: &[f64]) {\n    let a = stream.alloc_zeros::<f32>(n).unwrap();\n    let b = stream.memcpy_stod(&vec![0u8; 1024]).unwrap();\n    let c = stream.memcpy_stod(host).unwrap();\n    let cfg = LaunchConfig::for_num_elems(n as u32);\n    unsafe { stream.launch_builder(f).arg(&a).arg(&b).arg(&c).launch(cfg) }.unwrap();\n}\n";
        let sites = import_source("t.rs", src, None).unwrap();
        let t: Vec<String> = sites[0]
            .tensors
            .iter()
            .map(|t| format!("{} {:?} {:?}", t.name, t.dtype, t.shape))
            .collect();
        assert_eq!(
            t,
            [
                "a Known(\"f32\") [Known(\"n\")]",
                "b Known(\"u8\") [Known(\"1024\")]",
                // A slice parameter: its length is not visible here.
                "c Known(\"f64\") [Todo(\"shape of `c` (e.g. [M, K])\")]",
            ]
        );
    }
}
