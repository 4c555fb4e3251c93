//! The resolver of one launch site, inside its function: the file's context, name lookup at a
//! position, and the values of integer, float and bool expressions (literals, arithmetic,
//! constants, casts; a runtime value becomes a named size, never a guess).
//!
//! Below types.rs, kernels.rs, config.rs and site.rs, which extend the resolver: it may import
//! none of them (what it shares with them is in walk.rs, tables.rs and type_names.rs).

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use syn::{BinOp, Expr, Lit, Member, Type, UnOp};

use crate::skeleton::Value;

use super::tables::{Elsewhere, Tables};
use super::type_names::{first_type_arg, int_size_of, is_int_type, last_type_ident, type_segment};
use super::walk::{
    block_tail, ident_of, peel_paren, peel_value, snippet, start, BindKind, Binding, FnInfo, Pos,
    VecMacro,
};
use super::MAX_DEPTH;

pub(super) struct FileCtx<'a> {
    pub(super) file: &'a str,
    pub(super) consts: HashMap<String, Option<(&'a Expr, &'a Type)>>,
    pub(super) structs: Vec<(String, String, &'a Type)>,
    pub(super) vec_macros: &'a HashMap<usize, VecMacro>,
    /// Where this file stores its kernel functions.
    pub(super) tables: Tables,
    /// The same, from the other files of `--search DIR`: consulted when this file has nothing.
    pub(super) elsewhere: &'a Elsewhere,
}

/// An integer expression, resolved as far as the function allows.
#[derive(Debug, Clone)]
pub(super) enum Int {
    Const(i128),
    /// C++ text over sizes; each size appears as a marker (see [`marker`]) until registered.
    Sym {
        text: String,
        prec: u8,
        leaves: Vec<Leaf>,
    },
    Unknown(String),
}

const P_ADD: u8 = 1;
const P_MUL: u8 = 2;
const P_ATOM: u8 = 3;

/// A runtime value that becomes a size.
#[derive(Debug, Clone)]
pub(super) struct Leaf {
    /// The Rust expression it stands for (`n`, `self.m`, `a.len()`): one size per key.
    pub(super) key: String,
    /// The name it would like.
    pub(super) name: String,
    pub(super) value: Value,
}

pub(super) fn marker(key: &str) -> String {
    format!("\u{1}{key}\u{2}")
}

pub(super) fn leaf(key: String, name: String, value: Value) -> Int {
    Int::Sym {
        text: marker(&key),
        prec: P_ATOM,
        leaves: vec![Leaf { key, name, value }],
    }
}

/// Everything needed to resolve inside one function for one launch site.
pub(super) struct Resolver<'r, 'a> {
    pub(super) ctx: &'r FileCtx<'a>,
    pub(super) fun: &'r FnInfo<'a>,
    /// The launch site's line, for "at the launch site" messages.
    site_line: usize,
    /// Keys of the integer variables passed as kernel arguments: they stay named sizes in
    /// grid/shape expressions even when their value is known.
    pub(super) preferred: HashSet<String>,
    /// False while computing the value of a size itself (names are kept only in expressions).
    keep_names: Cell<bool>,
}

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    pub(super) fn new(ctx: &'r FileCtx<'a>, fun: &'r FnInfo<'a>, site_line: usize) -> Self {
        Resolver {
            ctx,
            fun,
            site_line,
            preferred: HashSet::new(),
            keep_names: Cell::new(true),
        }
    }

    pub(super) fn at_site(&self) -> String {
        format!("at the launch site ({}:{})", self.ctx.file, self.site_line)
    }

    pub(super) fn binding(&self, name: &str, at: Pos) -> Option<&'r Binding<'a>> {
        self.fun
            .bindings
            .iter()
            .filter(|b| {
                b.name == name && b.visible <= at && b.scope_end.map_or(true, |end| at <= end)
            })
            .max_by_key(|b| b.visible)
    }

    pub(super) fn constant(&self, name: &str) -> Option<Option<(&'a Expr, &'a Type)>> {
        self.ctx.consts.get(name).copied()
    }

    /// The type of `self.field` (or of a field of that name, when only one struct has it).
    pub(super) fn field_type(&self, base: &Expr, field: &str) -> Option<&'a Type> {
        let is_self = matches!(peel_paren(base), Expr::Path(p) if p.path.is_ident("self"));
        if is_self {
            if let Some(owner) = &self.fun.self_ty {
                if let Some((_, _, ty)) = self
                    .ctx
                    .structs
                    .iter()
                    .find(|(s, f, _)| s == owner && f == field)
                {
                    return Some(ty);
                }
            }
        }
        let mut candidates = self.ctx.structs.iter().filter(|(_, f, _)| f == field);
        let first = candidates.next()?;
        let text = snippet(first.2);
        candidates
            .all(|(_, _, t)| snippet(*t) == text)
            .then_some(first.2)
    }
}

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    // ---- integers ---------------------------------------------------------------------------

    pub(super) fn int(&self, e: &'a Expr, depth: usize) -> Int {
        if depth > MAX_DEPTH {
            return Int::Unknown("nested too deeply".into());
        }
        let d = depth + 1;
        match e {
            Expr::Paren(p) => self.int(&p.expr, d),
            Expr::Group(g) => self.int(&g.expr, d),
            Expr::Try(t) => self.int(&t.expr, d),
            Expr::Reference(r) => self.int(&r.expr, d),
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => match i.base10_parse::<i128>() {
                    Ok(v) => Int::Const(v),
                    Err(_) => Int::Unknown(format!("`{i}` is out of range")),
                },
                _ => Int::Unknown(format!("`{}` is not an integer", snippet(e))),
            },
            Expr::Cast(c) => {
                if is_int_type(&c.ty) {
                    self.int(&c.expr, d)
                } else {
                    Int::Unknown(format!("`{}` is not an integer", snippet(e)))
                }
            }
            Expr::Unary(u) => match u.op {
                UnOp::Neg(_) => match self.int(&u.expr, d) {
                    Int::Const(v) => v
                        .checked_neg()
                        .map_or(Int::Unknown("overflow".into()), Int::Const),
                    Int::Sym { text, prec, leaves } => Int::Sym {
                        text: format!("-{}", wrap(&text, prec < P_ATOM)),
                        prec: P_MUL,
                        leaves,
                    },
                    unknown => unknown,
                },
                UnOp::Deref(_) => self.int(&u.expr, d),
                _ => Int::Unknown(format!("`{}` is not an integer", snippet(e))),
            },
            Expr::Binary(b) => {
                let (l, r) = (self.int(&b.left, d), self.int(&b.right, d));
                binary(&b.op, l, r)
            }
            Expr::MethodCall(m) => self.int_method(e, m, d),
            Expr::Call(c) => self.int_call(e, c, d),
            Expr::Path(p) => {
                if let Some(ident) = p.path.get_ident() {
                    return self.int_ident(&ident.to_string(), start(e), d);
                }
                let Some(last) = p.path.segments.last() else {
                    return Int::Unknown(snippet(e));
                };
                let last = last.ident.to_string();
                match self.constant(&last) {
                    Some(Some((expr, _))) => self.int(expr, d),
                    Some(None) => Int::Unknown(format!("`{last}` is defined more than once")),
                    None => match (type_segment(&p.path).as_deref(), last.as_str()) {
                        (Some(t), "BITS") => {
                            int_size_of(t).map_or(Int::Unknown(snippet(e)), |s| Int::Const(s * 8))
                        }
                        _ => Int::Unknown(format!("`{}` is not visible in this file", snippet(e))),
                    },
                }
            }
            Expr::Field(f) => {
                let name = match &f.member {
                    Member::Named(n) => n.to_string(),
                    Member::Unnamed(i) => format!("{}_{}", base_name(&f.base), i.index),
                };
                self.runtime_leaf(e, name)
            }
            Expr::Index(ix) => match &*ix.index {
                Expr::Lit(l) if matches!(l.lit, Lit::Int(_)) => {
                    let name = format!("{}_{}", base_name(&ix.expr), snippet(&*ix.index));
                    self.runtime_leaf(e, name)
                }
                _ => Int::Unknown(format!("`{}` is an indexed value", snippet(e))),
            },
            Expr::Block(b) => match block_tail(&b.block) {
                Some(t) => self.int(t, d),
                None => Int::Unknown(format!("`{}` is a block", snippet(e))),
            },
            _ => Int::Unknown(format!("`{}` is not simple arithmetic", snippet(e))),
        }
    }

    /// A runtime value (a field, `a.len()`) that becomes a size named `name`.
    fn runtime_leaf(&self, e: &Expr, name: String) -> Int {
        let key = snippet(e);
        let value = Value::todo(format!("value of `{key}` {}", self.at_site()));
        leaf(key, name, value)
    }

    fn int_method(&self, e: &'a Expr, m: &'a syn::ExprMethodCall, d: usize) -> Int {
        let method = m.method.to_string();
        let arg = |i: usize| m.args.iter().nth(i).map(|a| self.int(a, d));
        match (method.as_str(), m.args.len()) {
            ("unwrap" | "expect" | "try_into" | "into" | "clone" | "to_owned", _) => {
                self.int(&m.receiver, d)
            }
            ("div_ceil", 1) => ceil_div(self.int(&m.receiver, d), arg(0).unwrap_or(Int::Const(0))),
            ("len" | "count", 0) => {
                let name = format!("{}_{method}", base_name(&m.receiver));
                self.runtime_leaf(e, name)
            }
            ("min" | "max" | "pow" | "next_power_of_two" | "next_multiple_of", _) => {
                let receiver = self.int(&m.receiver, d);
                let other = arg(0);
                match (receiver, other) {
                    (Int::Const(a), Some(Int::Const(b))) => {
                        let v = match method.as_str() {
                            "min" => Some(a.min(b)),
                            "max" => Some(a.max(b)),
                            "pow" => u32::try_from(b).ok().and_then(|b| a.checked_pow(b)),
                            "next_multiple_of" if b > 0 => a
                                .checked_add(b - 1)
                                .map(|x| x / b)
                                .and_then(|x| x.checked_mul(b)),
                            _ => None,
                        };
                        v.map_or(Int::Unknown(snippet(e)), Int::Const)
                    }
                    (Int::Const(a), None) if method == "next_power_of_two" => u128::try_from(a)
                        .ok()
                        .and_then(|a| a.max(1).checked_next_power_of_two())
                        .and_then(|p| i128::try_from(p).ok())
                        .map_or(Int::Unknown(snippet(e)), Int::Const),
                    (Int::Unknown(why), _) | (_, Some(Int::Unknown(why))) => Int::Unknown(why),
                    _ => Int::Unknown(format!(
                        "`{}` of a runtime value (spec expressions have + - * / % and ceil_div)",
                        snippet(e)
                    )),
                }
            }
            _ => Int::Unknown(format!("`{}` is a method call", snippet(e))),
        }
    }

    fn int_call(&self, e: &'a Expr, c: &'a syn::ExprCall, d: usize) -> Int {
        let Expr::Path(p) = peel_paren(&c.func) else {
            return Int::Unknown(format!("`{}` is a call", snippet(e)));
        };
        let Some(last) = p.path.segments.last() else {
            return Int::Unknown(snippet(e));
        };
        let name = last.ident.to_string();
        match (name.as_str(), c.args.len()) {
            ("size_of", 0) => {
                let ty = first_type_arg(last).and_then(last_type_ident);
                match ty.as_deref().and_then(int_size_of) {
                    Some(s) => Int::Const(s),
                    None => Int::Unknown(format!("`{}`: size of an unknown type", snippet(e))),
                }
            }
            ("from" | "try_from", 1) => self.int(&c.args[0], d),
            ("max" | "min", 2) => match (self.int(&c.args[0], d), self.int(&c.args[1], d)) {
                (Int::Const(a), Int::Const(b)) => {
                    Int::Const(if name == "max" { a.max(b) } else { a.min(b) })
                }
                _ => Int::Unknown(format!("`{}` of a runtime value", snippet(e))),
            },
            _ => Int::Unknown(format!("`{}` is a call", snippet(e))),
        }
    }

    fn int_ident(&self, name: &str, at: Pos, d: usize) -> Int {
        let preferred = self.keep_names.get() && self.preferred.contains(name);
        let named = |value: Value| leaf(name.to_string(), name.to_string(), value);
        let at_site = self.at_site();
        if let Some(b) = self.binding(name, at) {
            return match (b.kind, b.init) {
                (BindKind::Let, Some(init)) => {
                    let todo = || {
                        Value::todo(format!(
                            "value of `{name}` (= `{}`, line {}) {at_site}",
                            snippet(init),
                            b.line
                        ))
                    };
                    if preferred {
                        match self.value_only(init, d) {
                            Int::Const(v) => named(Value::known(v.to_string())),
                            // `let n_i32 = n as i32;`: the same value as the size `n` (one
                            // size for the user to give, not two that must agree).
                            Int::Sym { text, prec, leaves }
                                if leaves.len() == 1 && text == marker(&leaves[0].key) =>
                            {
                                Int::Sym { text, prec, leaves }
                            }
                            _ => named(todo()),
                        }
                    } else {
                        match self.int(init, d) {
                            Int::Unknown(_) => named(todo()),
                            resolved => resolved,
                        }
                    }
                }
                (BindKind::Param, _) => named(Value::todo(format!(
                    "value of `{name}` (a parameter of `{}`) {at_site}",
                    self.fun.name
                ))),
                (BindKind::Reassigned, _) => named(Value::todo(format!(
                    "value of `{name}` (reassigned on line {}) {at_site}",
                    b.line
                ))),
                _ => named(Value::todo(format!(
                    "value of `{name}` (bound on line {}) {at_site}",
                    b.line
                ))),
            };
        }
        match self.constant(name) {
            Some(Some((expr, _))) if preferred => match self.value_only(expr, d) {
                Int::Const(v) => named(Value::known(v.to_string())),
                _ => named(Value::todo(format!("value of `{name}` {at_site}"))),
            },
            Some(Some((expr, _))) => self.int(expr, d),
            Some(None) => Int::Unknown(format!("`{name}` is defined more than once")),
            None => named(Value::todo(format!("value of `{name}` {at_site}"))),
        }
    }

    /// `e` evaluated as a number, without keeping argument names in it.
    fn value_only(&self, e: &'a Expr, d: usize) -> Int {
        let saved = self.keep_names.replace(false);
        let value = self.int(e, d);
        self.keep_names.set(saved);
        value
    }

    // ---- floats and booleans ----------------------------------------------------------------

    /// A C++ literal for a float known at compile time.
    pub(super) fn float(&self, e: &'a Expr, depth: usize) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        let d = depth + 1;
        match e {
            Expr::Paren(p) => self.float(&p.expr, d),
            Expr::Group(g) => self.float(&g.expr, d),
            Expr::Reference(r) => self.float(&r.expr, d),
            Expr::Lit(l) => match &l.lit {
                Lit::Float(f) => Some(cpp_float(f.base10_digits(), f.suffix() == "f32")),
                _ => None,
            },
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
                self.float(&u.expr, d).map(|v| format!("-{v}"))
            }
            Expr::Cast(c) => {
                let to = last_type_ident(&c.ty)?;
                if !matches!(to.as_str(), "f32" | "f64") {
                    return None;
                }
                let digits = match self.int(&c.expr, d) {
                    Int::Const(v) => v.to_string(),
                    _ => self.float(&c.expr, d)?.trim_end_matches('f').to_string(),
                };
                Some(cpp_float(&digits, to == "f32"))
            }
            Expr::Path(p) => {
                let ident = p.path.get_ident()?.to_string();
                if let Some(b) = self.binding(&ident, start(e)) {
                    return match (b.kind, b.init) {
                        (BindKind::Let, Some(init)) => self.float(init, d),
                        _ => None,
                    };
                }
                let (expr, _) = self.constant(&ident)??;
                self.float(expr, d)
            }
            _ => None,
        }
    }

    pub(super) fn boolean(&self, e: &'a Expr, depth: usize) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        match peel_value(e) {
            Expr::Lit(l) => match &l.lit {
                Lit::Bool(b) => Some(b.value),
                _ => None,
            },
            inner @ Expr::Path(p) => {
                let ident = p.path.get_ident()?.to_string();
                match self.binding(&ident, start(inner)) {
                    Some(Binding {
                        kind: BindKind::Let,
                        init: Some(init),
                        ..
                    }) => self.boolean(init, depth + 1),
                    Some(_) => None,
                    None => self.boolean(self.constant(&ident)??.0, depth + 1),
                }
            }
            _ => None,
        }
    }
}

fn wrap(text: &str, parens: bool) -> String {
    if parens {
        format!("({text})")
    } else {
        text.to_string()
    }
}

fn const_sym(v: i128) -> (String, u8) {
    if v < 0 {
        (format!("({v})"), P_ATOM)
    } else {
        (v.to_string(), P_ATOM)
    }
}

fn binary(op: &BinOp, l: Int, r: Int) -> Int {
    let (sym, prec) = match op {
        BinOp::Add(_) => ("+", P_ADD),
        BinOp::Sub(_) => ("-", P_ADD),
        BinOp::Mul(_) => ("*", P_MUL),
        BinOp::Div(_) => ("/", P_MUL),
        BinOp::Rem(_) => ("%", P_MUL),
        BinOp::Shl(_) => ("<<", 0),
        BinOp::Shr(_) => (">>", 0),
        BinOp::BitAnd(_) => ("&", 0),
        BinOp::BitOr(_) => ("|", 0),
        BinOp::BitXor(_) => ("^", 0),
        _ => return Int::Unknown("not integer arithmetic".into()),
    };
    match (l, r) {
        (Int::Unknown(why), _) | (_, Int::Unknown(why)) => Int::Unknown(why),
        (Int::Const(a), Int::Const(b)) => {
            let v = match op {
                BinOp::Add(_) => a.checked_add(b),
                BinOp::Sub(_) => a.checked_sub(b),
                BinOp::Mul(_) => a.checked_mul(b),
                BinOp::Div(_) => a.checked_div(b),
                BinOp::Rem(_) => a.checked_rem(b),
                BinOp::Shl(_) => u32::try_from(b)
                    .ok()
                    .filter(|s| *s < 64)
                    .and_then(|s| a.checked_mul(1i128 << s)),
                BinOp::Shr(_) => u32::try_from(b).ok().filter(|s| *s < 127).map(|s| a >> s),
                BinOp::BitAnd(_) => Some(a & b),
                BinOp::BitOr(_) => Some(a | b),
                BinOp::BitXor(_) => Some(a ^ b),
                _ => None,
            };
            v.map_or_else(
                || Int::Unknown(format!("`{a} {sym} {b}` overflows or divides by zero")),
                Int::Const,
            )
        }
        (l, r) if prec > 0 => {
            let (lt, lp, mut leaves) = sym_parts(l);
            let (rt, rp, rl) = sym_parts(r);
            leaves.extend(rl);
            Int::Sym {
                text: format!("{} {sym} {}", wrap(&lt, lp < prec), wrap(&rt, rp <= prec)),
                prec,
                leaves,
            }
        }
        _ => Int::Unknown(format!(
            "`{sym}` of a runtime value (spec expressions have + - * / % and ceil_div)"
        )),
    }
}

fn sym_parts(i: Int) -> (String, u8, Vec<Leaf>) {
    match i {
        Int::Const(v) => {
            let (t, p) = const_sym(v);
            (t, p, Vec::new())
        }
        Int::Sym { text, prec, leaves } => (text, prec, leaves),
        Int::Unknown(why) => (why, P_ATOM, Vec::new()),
    }
}

fn ceil_div(a: Int, b: Int) -> Int {
    match (a, b) {
        (Int::Unknown(why), _) | (_, Int::Unknown(why)) => Int::Unknown(why),
        (Int::Const(a), Int::Const(b)) if b > 0 && a >= 0 => a
            .checked_add(b - 1)
            .map_or(Int::Unknown("overflow".into()), |x| Int::Const(x / b)),
        (Int::Const(_), Int::Const(_)) => {
            Int::Unknown("`div_ceil` by zero or of a negative".into())
        }
        (a, b) => {
            let (at, _, mut leaves) = sym_parts(a);
            let (bt, _, bl) = sym_parts(b);
            leaves.extend(bl);
            Int::Sym {
                text: format!("ceil_div({at}, {bt})"),
                prec: P_ATOM,
                leaves,
            }
        }
    }
}

fn cpp_float(digits: &str, f32: bool) -> String {
    let mut out = digits.to_string();
    if !out.contains(['.', 'e', 'E']) {
        out.push_str(".0");
    }
    if f32 {
        out.push('f');
    }
    out
}

/// Removes what does not change an integer's value: casts, parentheses, `try_into().unwrap()`.
pub(super) fn strip_int_wrappers(mut e: &Expr) -> &Expr {
    for _ in 0..MAX_DEPTH {
        e = match e {
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Cast(c) if is_int_type(&c.ty) => &c.expr,
            Expr::Try(t) => &t.expr,
            Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "try_into" | "into" | "unwrap" | "expect"
                ) =>
            {
                &m.receiver
            }
            Expr::Call(c) if c.args.len() == 1 => match peel_paren(&c.func) {
                Expr::Path(p)
                    if p.path
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "from" || s.ident == "try_from") =>
                {
                    &c.args[0]
                }
                _ => return e,
            },
            _ => return e,
        };
    }
    e
}

/// A plain variable's name.
pub(super) fn nameable_ident(e: &Expr) -> Option<String> {
    ident_of(e)
}

/// A field, `x.len()` or `x[0]`: a runtime value that becomes a size of its own.
pub(super) fn is_runtime_leaf(e: &Expr) -> bool {
    match peel_paren(e) {
        Expr::Field(_) => true,
        Expr::MethodCall(m) => {
            m.args.is_empty() && matches!(m.method.to_string().as_str(), "len" | "count")
        }
        Expr::Index(ix) => matches!(&*ix.index, Expr::Lit(l) if matches!(l.lit, Lit::Int(_))),
        _ => false,
    }
}

/// A short name for the value an expression reads (`self.cfg.m` → `m`, `dims.0` → `dims_0`).
pub(super) fn base_name(e: &Expr) -> String {
    match peel_value(e) {
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .map_or("v".into(), |s| s.ident.to_string()),
        Expr::Field(f) => match &f.member {
            Member::Named(n) => n.to_string(),
            Member::Unnamed(i) => format!("{}_{}", base_name(&f.base), i.index),
        },
        Expr::MethodCall(m) => base_name(&m.receiver),
        Expr::Index(ix) => base_name(&ix.expr),
        _ => "v".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(text: &str) -> BinOp {
        syn::parse_str(text).unwrap()
    }

    fn sym(name: &str) -> Int {
        leaf(name.into(), name.into(), Value::todo(name))
    }

    /// The expression text, with size markers shown as their keys.
    fn text(i: &Int) -> String {
        match i {
            Int::Const(v) => v.to_string(),
            Int::Sym { text, .. } => text.replace(['\u{1}', '\u{2}'], ""),
            Int::Unknown(why) => format!("unknown: {why}"),
        }
    }

    #[test]
    fn constant_arithmetic_folds() {
        assert_eq!(text(&binary(&op("+"), Int::Const(2), Int::Const(3))), "5");
        assert_eq!(
            text(&binary(&op("<<"), Int::Const(1), Int::Const(10))),
            "1024"
        );
        assert_eq!(text(&binary(&op("^"), Int::Const(6), Int::Const(3))), "5");
        assert!(text(&binary(&op("/"), Int::Const(1), Int::Const(0))).contains("divides by zero"));
        assert!(text(&binary(&op("<<"), Int::Const(1), Int::Const(64))).starts_with("unknown"));
        assert!(text(&binary(&op("&&"), Int::Const(1), Int::Const(1))).starts_with("unknown"));
    }

    #[test]
    fn runtime_values_keep_precedence_with_the_fewest_parentheses() {
        let n_plus_1 = binary(&op("+"), sym("n"), Int::Const(1));
        assert_eq!(text(&n_plus_1), "n + 1");
        let times = binary(&op("*"), n_plus_1.clone(), Int::Const(4));
        assert_eq!(text(&times), "(n + 1) * 4");
        let minus = binary(&op("-"), sym("m"), n_plus_1);
        assert_eq!(text(&minus), "m - (n + 1)");
        assert_eq!(
            text(&binary(&op("*"), sym("a"), Int::Const(-2))),
            "a * (-2)"
        );
        // Shifts of a runtime value have no spec expression.
        assert!(text(&binary(&op("<<"), sym("n"), Int::Const(1))).starts_with("unknown"));
        let Int::Sym { leaves, .. } = binary(&op("*"), sym("a"), sym("b")) else {
            panic!()
        };
        assert_eq!(
            leaves.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn ceil_div_of_constants_and_sizes() {
        assert_eq!(text(&ceil_div(Int::Const(1000), Int::Const(256))), "4");
        assert_eq!(text(&ceil_div(Int::Const(1024), Int::Const(256))), "4");
        assert!(text(&ceil_div(Int::Const(1), Int::Const(0))).starts_with("unknown"));
        assert_eq!(
            text(&ceil_div(sym("n"), Int::Const(256))),
            "ceil_div(n, 256)"
        );
    }

    #[test]
    fn float_literals_in_cpp() {
        assert_eq!(cpp_float("2", true), "2.0f");
        assert_eq!(cpp_float("1e-3", false), "1e-3");
        assert_eq!(cpp_float("0.5", false), "0.5");
    }

    #[test]
    fn wrappers_and_names_of_runtime_values() {
        let e: Expr = syn::parse_str("(n as u32).try_into().unwrap()").unwrap();
        assert!(matches!(strip_int_wrappers(&e), Expr::Path(p) if p.path.is_ident("n")));
        let name = |t: &str| base_name(&syn::parse_str::<Expr>(t).unwrap());
        assert_eq!(name("self.cfg.m"), "m");
        assert_eq!(name("dims.0"), "dims_0");
        assert!(is_runtime_leaf(&syn::parse_str::<Expr>("a.len()").unwrap()));
        assert!(!is_runtime_leaf(&syn::parse_str::<Expr>("a + 1").unwrap()));
    }
}
