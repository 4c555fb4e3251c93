//! The one pass over the syntax tree: each function walked in source order, recording its
//! bindings with their scopes, field assignments, `.arg(..)` pushes, map inserts, struct field
//! initializers and `.launch(..)` calls; the file's constants and struct fields; and the small
//! helpers that see through wrappers (`&`, `?`, `.unwrap()`, `Arc::new`) to the value meant.
//!
//! The bottom of the importer: it imports none of its sibling files, which all read it.

use std::collections::HashMap;

use super::MAX_DEPTH;
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{BinOp, Expr, Member, Pat, Type, UnOp};

/// Line (1-based) and column (0-based, in chars) of a token.
pub(super) type Pos = (usize, usize);

fn pos_of(span: Span) -> Pos {
    let lc = span.start();
    (lc.line, lc.column)
}

pub(super) fn end_of(span: Span) -> Pos {
    let lc = span.end();
    (lc.line, lc.column)
}

pub(super) fn start<T: Spanned + ?Sized>(node: &T) -> Pos {
    pos_of(node.span())
}

pub(super) fn line_of<T: Spanned + ?Sized>(node: &T) -> usize {
    node.span().start().line
}

/// The source text of a node, whitespace collapsed and cut to a readable length.
pub(super) fn snippet<T: Spanned + ?Sized>(node: &T) -> String {
    let source = node.span().source_text().unwrap_or_default();
    // One line: a method chain broken over lines joins without a space before the `.`.
    let mut text = String::new();
    for line in source.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let tight =
            line.starts_with(['.', ')', ']', '?']) || text.ends_with(['(', '[']) || text.is_empty();
        if !tight {
            text.push(' ');
        }
        text.push_str(&line.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    const MAX: usize = 72;
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX - 1).collect();
        format!("{cut}…")
    } else {
        text
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BindKind {
    /// `let x = ..` (with `init` when the value expression is known).
    Let,
    /// A function parameter.
    Param,
    /// Bound by a pattern (closure/`for`/`match`/destructuring): no value known.
    Pattern,
    /// `x = ..` or `x += ..` after the `let`: no value known.
    Reassigned,
}

pub(super) struct Binding<'a> {
    pub(super) name: String,
    /// From here on the name refers to this binding ...
    pub(super) visible: Pos,
    /// ... until here (the end of the enclosing block, closure, loop or arm).
    pub(super) scope_end: Option<Pos>,
    pub(super) line: usize,
    pub(super) init: Option<&'a Expr>,
    pub(super) ty: Option<&'a Type>,
    pub(super) kind: BindKind,
}

/// `var.field = value` (value None: modified in a way that is not a plain assignment).
pub(super) struct FieldAssign<'a> {
    pub(super) var: String,
    pub(super) field: String,
    pub(super) pos: Pos,
    pub(super) line: usize,
    pub(super) value: Option<&'a Expr>,
    /// The member assigned, at any depth (`c` of `self.kernels.c = ..`), and its value: where
    /// a struct's kernel functions are set after construction.
    pub(super) member: String,
    pub(super) rhs: Option<&'a Expr>,
}

/// `map.insert(key, value)`: where a map of kernel functions is filled.
pub(super) struct MapInsert<'a> {
    /// The map's variable or field name (`kernels` of `self.kernels.insert(..)`).
    pub(super) map: String,
    pub(super) key: &'a Expr,
    pub(super) value: &'a Expr,
}

/// `var.arg(expr)` on a launch-builder variable (or anything else named `arg`).
pub(super) struct Push<'a> {
    pub(super) var: String,
    pub(super) pos: Pos,
    pub(super) expr: &'a Expr,
}

/// `Struct { field: expr }`: where a struct's kernel functions are set.
pub(super) struct FieldInit<'a> {
    pub(super) field: String,
    pub(super) expr: &'a Expr,
}

pub(super) struct FnInfo<'a> {
    pub(super) name: String,
    pub(super) self_ty: Option<String>,
    pub(super) generics: Vec<String>,
    pub(super) bindings: Vec<Binding<'a>>,
    pub(super) assigns: Vec<FieldAssign<'a>>,
    pub(super) pushes: Vec<Push<'a>>,
    pub(super) launches: Vec<&'a syn::ExprMethodCall>,
    pub(super) field_inits: Vec<FieldInit<'a>>,
    pub(super) inserts: Vec<MapInsert<'a>>,
    /// `for x in EXPR`: the binding (an index into `bindings`) and what it iterates over.
    pub(super) loop_vars: Vec<(usize, &'a Expr)>,
}

#[derive(Default)]
pub(super) struct Walker<'a> {
    /// Enclosing `impl` blocks: self type name and generic parameters.
    impls: Vec<(String, Vec<String>)>,
    stack: Vec<FnInfo<'a>>,
    pub(super) done: Vec<FnInfo<'a>>,
    /// Constants of the file by name (None: defined more than once).
    pub(super) consts: HashMap<String, Option<(&'a Expr, &'a Type)>>,
    /// (struct, field, type) of every named struct field.
    pub(super) structs: Vec<(String, String, &'a Type)>,
    pub(super) vec_macros: Vec<&'a syn::Macro>,
}

fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        Type::Reference(r) => type_name(&r.elem),
        _ => "impl".to_string(),
    }
}

impl<'a> Walker<'a> {
    fn begin_fn(&mut self, sig: &'a syn::Signature, body: &'a syn::Block) {
        let (self_ty, mut generics) = match self.impls.last() {
            Some((t, g)) => (Some(t.clone()), g.clone()),
            None => (None, Vec::new()),
        };
        generics.extend(sig.generics.type_params().map(|p| p.ident.to_string()));
        let name = match &self_ty {
            Some(t) => format!("{t}::{}", sig.ident),
            None => sig.ident.to_string(),
        };
        let body_start = start(body);
        let body_end = end_of(body.span());
        let mut bindings = Vec::new();
        for input in &sig.inputs {
            if let syn::FnArg::Typed(pt) = input {
                let mut idents = Vec::new();
                pat_idents(&pt.pat, &mut idents);
                let simple = matches!(&*pt.pat, Pat::Ident(_));
                for ident in idents {
                    bindings.push(Binding {
                        name: ident.to_string(),
                        visible: body_start,
                        scope_end: Some(body_end),
                        line: line_of(ident),
                        init: None,
                        ty: simple.then_some(&*pt.ty),
                        kind: BindKind::Param,
                    });
                }
            }
        }
        self.stack.push(FnInfo {
            name,
            self_ty,
            generics,
            bindings,
            assigns: Vec::new(),
            pushes: Vec::new(),
            launches: Vec::new(),
            field_inits: Vec::new(),
            inserts: Vec::new(),
            loop_vars: Vec::new(),
        });
    }

    fn end_fn(&mut self) {
        if let Some(f) = self.stack.pop() {
            self.done.push(f);
        }
    }

    fn function(&mut self, sig: &'a syn::Signature, body: &'a syn::Block) {
        self.begin_fn(sig, body);
        self.visit_block(body);
        self.end_fn();
    }

    fn bind(&mut self, binding: Binding<'a>) {
        if let Some(f) = self.stack.last_mut() {
            f.bindings.push(binding);
        }
    }

    fn mark(&self) -> usize {
        self.stack.last().map_or(0, |f| f.bindings.len())
    }

    /// Bindings made since `from` go out of scope at `end`.
    fn close_scope(&mut self, from: usize, end: Pos) {
        if let Some(f) = self.stack.last_mut() {
            for b in f.bindings.iter_mut().skip(from) {
                if b.scope_end.is_none() {
                    b.scope_end = Some(end);
                }
            }
        }
    }

    fn bind_pat(
        &mut self,
        pat: &'a Pat,
        init: Option<&'a Expr>,
        ty: Option<&'a Type>,
        visible: Pos,
    ) {
        match pat {
            Pat::Ident(pi) if pi.subpat.is_none() => self.bind(Binding {
                name: pi.ident.to_string(),
                visible,
                scope_end: None,
                line: line_of(&pi.ident),
                init,
                ty,
                kind: if init.is_some() {
                    BindKind::Let
                } else {
                    BindKind::Pattern
                },
            }),
            Pat::Type(pt) => self.bind_pat(&pt.pat, init, Some(&pt.ty), visible),
            Pat::Paren(pp) => self.bind_pat(&pp.pat, init, ty, visible),
            // `let (ptr, _guard) = buf.device_ptr(&stream)` (cudarc ≥ 0.16): the pointer is the
            // call's (the types resolver reads it as the buffer); the guard is nothing to us.
            Pat::Tuple(pt) if pt.elems.len() == 2 && init.is_some_and(is_device_ptr_call) => {
                let mut elems = pt.elems.iter();
                if let Some(first) = elems.next() {
                    self.bind_pat(first, init, None, visible);
                }
                for rest in elems {
                    self.bind_pat(rest, None, None, visible);
                }
            }
            Pat::Tuple(pt) => {
                let inits = match init.map(peel_paren) {
                    Some(Expr::Tuple(t)) if t.elems.len() == pt.elems.len() => Some(t),
                    _ => None,
                };
                let tys = match ty {
                    Some(Type::Tuple(t)) if t.elems.len() == pt.elems.len() => Some(t),
                    _ => None,
                };
                for (i, p) in pt.elems.iter().enumerate() {
                    let init = inits.and_then(|t| t.elems.iter().nth(i));
                    let ty = tys.and_then(|t| t.elems.iter().nth(i));
                    self.bind_pat(p, init, ty, visible);
                }
            }
            other => {
                let mut idents = Vec::new();
                pat_idents(other, &mut idents);
                for ident in idents {
                    self.bind(Binding {
                        name: ident.to_string(),
                        visible,
                        scope_end: None,
                        line: line_of(ident),
                        init: None,
                        ty: None,
                        kind: BindKind::Pattern,
                    });
                }
            }
        }
    }

    /// `target = value` or `target op= value` (value None).
    fn assigned(&mut self, target: &'a Expr, value: Option<&'a Expr>, whole: Span) {
        let Some(f) = self.stack.last_mut() else {
            return;
        };
        match peel_paren(target) {
            Expr::Path(p) => {
                if let Some(name) = p.path.get_ident() {
                    let name = name.to_string();
                    let ty = f
                        .bindings
                        .iter()
                        .rev()
                        .find(|b| b.name == name)
                        .and_then(|b| b.ty);
                    f.bindings.push(Binding {
                        name,
                        visible: end_of(whole),
                        scope_end: None,
                        line: whole.start().line,
                        init: None,
                        ty,
                        kind: BindKind::Reassigned,
                    });
                }
            }
            Expr::Field(field) => {
                // `var.field = v` is a plain assignment; `var.field.x = v` modifies `field`.
                let mut chain = vec![field];
                let mut base = &*field.base;
                while let Expr::Field(inner) = peel_paren(base) {
                    chain.push(inner);
                    base = &*inner.base;
                }
                let (Some(outer), Expr::Path(root)) = (chain.last(), peel_paren(base)) else {
                    return;
                };
                let (Some(var), Member::Named(first)) = (root.path.get_ident(), &outer.member)
                else {
                    return;
                };
                let member = match &field.member {
                    Member::Named(m) => m.to_string(),
                    Member::Unnamed(i) => i.index.to_string(),
                };
                f.assigns.push(FieldAssign {
                    var: var.to_string(),
                    field: first.to_string(),
                    pos: pos_of(whole),
                    line: whole.start().line,
                    value: if chain.len() == 1 { value } else { None },
                    member,
                    rhs: value,
                });
            }
            _ => {}
        }
    }
}

/// Every identifier a pattern binds.
fn pat_idents<'a>(pat: &'a Pat, out: &mut Vec<&'a syn::Ident>) {
    struct Idents<'a, 'o>(&'o mut Vec<&'a syn::Ident>);
    impl<'a> Visit<'a> for Idents<'a, '_> {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(&p.ident);
            visit::visit_pat_ident(self, p);
        }
        fn visit_expr(&mut self, _: &'a Expr) {}
    }
    Idents(out).visit_pat(pat);
}

impl<'a> Visit<'a> for Walker<'a> {
    fn visit_item_impl(&mut self, i: &'a syn::ItemImpl) {
        let generics = i
            .generics
            .type_params()
            .map(|p| p.ident.to_string())
            .collect();
        self.impls.push((type_name(&i.self_ty), generics));
        visit::visit_item_impl(self, i);
        self.impls.pop();
    }

    fn visit_item_trait(&mut self, t: &'a syn::ItemTrait) {
        self.impls.push((t.ident.to_string(), Vec::new()));
        visit::visit_item_trait(self, t);
        self.impls.pop();
    }

    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        // A function nested in another is its own scope, not a method of the enclosing impl.
        let impls = std::mem::take(&mut self.impls);
        self.function(&f.sig, &f.block);
        self.impls = impls;
    }

    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.function(&f.sig, &f.block);
    }

    fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.function(&f.sig, body);
        }
    }

    fn visit_item_const(&mut self, c: &'a syn::ItemConst) {
        let entry = self.consts.entry(c.ident.to_string());
        entry
            .and_modify(|v| *v = None)
            .or_insert(Some((&c.expr, &c.ty)));
    }

    fn visit_impl_item_const(&mut self, c: &'a syn::ImplItemConst) {
        let entry = self.consts.entry(c.ident.to_string());
        entry
            .and_modify(|v| *v = None)
            .or_insert(Some((&c.expr, &c.ty)));
    }

    fn visit_item_static(&mut self, s: &'a syn::ItemStatic) {
        if matches!(s.mutability, syn::StaticMutability::None) {
            let entry = self.consts.entry(s.ident.to_string());
            entry
                .and_modify(|v| *v = None)
                .or_insert(Some((&s.expr, &s.ty)));
        }
    }

    fn visit_item_struct(&mut self, s: &'a syn::ItemStruct) {
        if let syn::Fields::Named(fields) = &s.fields {
            for field in &fields.named {
                if let Some(ident) = &field.ident {
                    self.structs
                        .push((s.ident.to_string(), ident.to_string(), &field.ty));
                }
            }
        }
    }

    fn visit_macro(&mut self, m: &'a syn::Macro) {
        if m.path.segments.last().is_some_and(|s| s.ident == "vec") {
            self.vec_macros.push(m);
        }
    }

    fn visit_local(&mut self, l: &'a syn::Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        let span = l.span();
        // `let Some(x) = .. else { .. }` binds through a pattern: no plain value.
        let init = l
            .init
            .as_ref()
            .filter(|i| i.diverge.is_none())
            .map(|i| &*i.expr);
        self.bind_pat(&l.pat, init, None, end_of(span));
    }

    fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
        let pos = start(&p.ident);
        self.bind(Binding {
            name: p.ident.to_string(),
            visible: pos,
            scope_end: None,
            line: line_of(&p.ident),
            init: None,
            ty: None,
            kind: BindKind::Pattern,
        });
        visit::visit_pat_ident(self, p);
    }

    fn visit_pat_type(&mut self, p: &'a syn::PatType) {
        if let Pat::Ident(pi) = &*p.pat {
            let pos = start(&pi.ident);
            self.bind(Binding {
                name: pi.ident.to_string(),
                visible: pos,
                scope_end: None,
                line: line_of(&pi.ident),
                init: None,
                ty: Some(&p.ty),
                kind: BindKind::Pattern,
            });
        } else {
            visit::visit_pat_type(self, p);
        }
    }

    fn visit_block(&mut self, b: &'a syn::Block) {
        let mark = self.mark();
        visit::visit_block(self, b);
        self.close_scope(mark, end_of(b.span()));
    }

    fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
        let mark = self.mark();
        visit::visit_expr_closure(self, c);
        self.close_scope(mark, end_of(c.span()));
    }

    fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
        let mark = self.mark();
        // The iterable first: the loop variable is not visible in it.
        self.visit_expr(&f.expr);
        let before = self.mark();
        self.visit_pat(&f.pat);
        if let (Pat::Ident(_), Some(fun)) = (&*f.pat, self.stack.last_mut()) {
            for index in before..fun.bindings.len() {
                fun.loop_vars.push((index, &*f.expr));
            }
        }
        self.visit_block(&f.body);
        self.close_scope(mark, end_of(f.span()));
    }

    fn visit_expr_if(&mut self, i: &'a syn::ExprIf) {
        let mark = self.mark();
        visit::visit_expr_if(self, i);
        self.close_scope(mark, end_of(i.span()));
    }

    fn visit_expr_while(&mut self, w: &'a syn::ExprWhile) {
        let mark = self.mark();
        visit::visit_expr_while(self, w);
        self.close_scope(mark, end_of(w.span()));
    }

    fn visit_arm(&mut self, a: &'a syn::Arm) {
        let mark = self.mark();
        visit::visit_arm(self, a);
        self.close_scope(mark, end_of(a.span()));
    }

    fn visit_expr_assign(&mut self, a: &'a syn::ExprAssign) {
        visit::visit_expr_assign(self, a);
        self.assigned(&a.left, Some(&a.right), a.span());
    }

    fn visit_expr_binary(&mut self, b: &'a syn::ExprBinary) {
        visit::visit_expr_binary(self, b);
        if is_compound_assign(&b.op) {
            self.assigned(&b.left, None, b.span());
        }
    }

    fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
        let method = m.method.to_string();
        if method == "arg" && m.args.len() == 1 {
            if let Some(var) = ident_of(chain_root(&m.receiver)) {
                if let Some(f) = self.stack.last_mut() {
                    f.pushes.push(Push {
                        var,
                        pos: start(&m.method),
                        expr: &m.args[0],
                    });
                }
            }
        }
        if method == "insert" && m.args.len() == 2 {
            if let Some(map) = place_name(&m.receiver) {
                if let Some(f) = self.stack.last_mut() {
                    f.inserts.push(MapInsert {
                        map,
                        key: &m.args[0],
                        value: &m.args[1],
                    });
                }
            }
        }
        if matches!(
            method.as_str(),
            "launch" | "launch_cooperative" | "launch_on_stream"
        ) {
            if let Some(f) = self.stack.last_mut() {
                f.launches.push(m);
            }
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_struct(&mut self, s: &'a syn::ExprStruct) {
        if let Some(f) = self.stack.last_mut() {
            for fv in &s.fields {
                if let Member::Named(ident) = &fv.member {
                    f.field_inits.push(FieldInit {
                        field: ident.to_string(),
                        expr: &fv.expr,
                    });
                }
            }
        }
        visit::visit_expr_struct(self, s);
    }
}

fn is_compound_assign(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// The receiver under a chain of `.arg(..)` calls.
fn chain_root(mut e: &Expr) -> &Expr {
    loop {
        match peel_paren(e) {
            Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => e = &m.receiver,
            other => return other,
        }
    }
}

/// The name of the place an expression denotes: a variable (`kernels`) or the last field of a
/// field chain (`kernels` of `self.ops.kernels`).
pub(super) fn place_name(e: &Expr) -> Option<String> {
    match peel_value(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        Expr::Field(f) => match &f.member {
            Member::Named(n) => Some(n.to_string()),
            Member::Unnamed(_) => None,
        },
        _ => None,
    }
}

pub(super) fn ident_of(e: &Expr) -> Option<String> {
    match peel_paren(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

pub(super) fn peel_paren(mut e: &Expr) -> &Expr {
    loop {
        match e {
            Expr::Paren(p) => e = &p.expr,
            Expr::Group(g) => e = &g.expr,
            _ => return e,
        }
    }
}

/// `f(..)` where the called path ends in one of `names` (`String::from`, `Arc::new`).
pub(super) fn is_path_call(c: &syn::ExprCall, names: &[&str]) -> bool {
    matches!(peel_paren(&c.func), Expr::Path(p)
        if p.path.segments.last().is_some_and(|s| names.iter().any(|n| s.ident == n)))
}

/// `buf.device_ptr(..)` or `buf.device_ptr_mut(..)`: cudarc's raw pointer of a buffer.
pub(super) fn is_device_ptr_call(e: &Expr) -> bool {
    matches!(peel_paren(e), Expr::MethodCall(m) if m.method == "device_ptr" || m.method == "device_ptr_mut")
}

/// The tail expression of a block that is nothing but that expression.
pub(super) fn block_tail(b: &syn::Block) -> Option<&Expr> {
    match b.stmts.as_slice() {
        [syn::Stmt::Expr(e, None)] => Some(e),
        _ => None,
    }
}

/// Strips what does not change which value an expression denotes: parentheses, `?`,
/// `.unwrap()`, `.expect(..)`, `.clone()`, references, derefs, single-expression blocks.
pub(super) fn peel_value(mut e: &Expr) -> &Expr {
    for _ in 0..MAX_DEPTH {
        e = match e {
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Try(t) => &t.expr,
            Expr::Reference(r) => &r.expr,
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => &u.expr,
            Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "unwrap" | "expect" | "clone" | "to_owned" | "as_ref"
                ) =>
            {
                &m.receiver
            }
            Expr::Block(b) => match block_tail(&b.block) {
                Some(t) => t,
                None => return e,
            },
            Expr::Unsafe(u) => match block_tail(&u.block) {
                Some(t) => t,
                None => return e,
            },
            _ => return e,
        };
    }
    e
}

/// [`peel_value`], and what wraps a kernel function without changing which one it is:
/// `Arc::new(f)`, `Rc::new`, `Box::new`, `Arc::clone(&f)`, `Some(f)`, `.ok_or(..)?`,
/// `.context(..)?`.
pub(super) fn peel_kernel(mut e: &Expr) -> &Expr {
    for _ in 0..MAX_DEPTH {
        e = match peel_value(e) {
            Expr::Call(c)
                if c.args.len() == 1 && is_path_call(c, &["new", "clone", "from", "Some"]) =>
            {
                &c.args[0]
            }
            Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "ok_or"
                        | "ok_or_else"
                        | "context"
                        | "with_context"
                        | "wrap_err"
                        | "unwrap_or_else"
                ) =>
            {
                &m.receiver
            }
            other => return other,
        };
    }
    e
}

/// An argument with its outer references removed, and the outermost one's mutability.
pub(super) fn peel_refs(e: &Expr) -> (&Expr, Option<bool>) {
    let mut outer = None;
    let mut e = e;
    for _ in 0..MAX_DEPTH {
        match e {
            Expr::Paren(p) => e = &p.expr,
            Expr::Group(g) => e = &g.expr,
            Expr::Reference(r) => {
                outer.get_or_insert(r.mutability.is_some());
                e = &r.expr;
            }
            _ => break,
        }
    }
    (e, outer)
}

/// The contents of `vec![x; n]` or `vec![a, b, c]`.
pub(super) enum VecMacro {
    Repeat(Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
}

impl Parse for VecMacro {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Ok(VecMacro::List(Vec::new()));
        }
        let first: Expr = input.parse()?;
        if input.peek(syn::Token![;]) {
            input.parse::<syn::Token![;]>()?;
            let len: Expr = input.parse()?;
            return Ok(VecMacro::Repeat(Box::new(first), Box::new(len)));
        }
        let mut items = vec![first];
        while input.peek(syn::Token![,]) {
            input.parse::<syn::Token![,]>()?;
            if input.is_empty() {
                break;
            }
            items.push(input.parse()?);
        }
        Ok(VecMacro::List(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(text: &str) -> Expr {
        syn::parse_str(text).unwrap()
    }

    fn walked(source: &str) -> Walker<'static> {
        // Leaked: the walker borrows the tree for the test's lifetime.
        let ast: &'static syn::File = Box::leak(Box::new(syn::parse_file(source).unwrap()));
        let mut walker = Walker::default();
        walker.visit_file(ast);
        walker
    }

    #[test]
    fn functions_record_bindings_with_scopes_pushes_and_launches() {
        let w = walked(
            "const N: usize = 4;\nconst N2: u32 = 1;\nconst N2: u32 = 2;\nstruct K { f: CudaFunction }\nimpl K {\n  fn run(&self, n: usize) {\n    let cfg = LaunchConfig::for_num_elems(n as u32);\n    { let inner = 1; }\n    let mut b = stream.launch_builder(&self.f);\n    b.arg(&n);\n    for (i, _) in xs.iter().enumerate() {}\n    unsafe { b.launch(cfg) }.unwrap();\n  }\n}\n",
        );
        assert!(w.consts.get("N").is_some_and(Option::is_some));
        // Defined twice: not a constant the resolver may use.
        assert!(w.consts.get("N2").is_some_and(Option::is_none));
        assert_eq!(w.structs.len(), 1);
        assert_eq!(
            (w.structs[0].0.as_str(), w.structs[0].1.as_str()),
            ("K", "f")
        );
        let [f] = w.done.as_slice() else { panic!() };
        assert_eq!(f.name, "K::run");
        assert_eq!(f.self_ty.as_deref(), Some("K"));
        let kinds: Vec<(&str, BindKind)> = f
            .bindings
            .iter()
            .map(|b| (b.name.as_str(), b.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("n", BindKind::Param),
                ("cfg", BindKind::Let),
                ("inner", BindKind::Let),
                ("b", BindKind::Let),
                ("i", BindKind::Pattern),
            ]
        );
        // `inner` is visible only inside its block.
        let inner = &f.bindings[2];
        assert_eq!(inner.scope_end.map(|e| e.0), Some(8));
        assert_eq!(f.bindings[1].scope_end.map(|e| e.0), Some(13));
        assert_eq!(f.pushes.len(), 1);
        assert_eq!(f.pushes[0].var, "b");
        assert_eq!(f.launches.len(), 1);
    }

    #[test]
    fn peeling_wrappers() {
        let e = expr("(&mut x.clone()).unwrap()");
        assert_eq!(snippet(peel_value(&e)), "x");
        let k = expr("Arc::new(module.load_function(\"k\").unwrap())");
        assert_eq!(snippet(peel_kernel(&k)), "module.load_function(\"k\")");
        let c = expr("stream.launch_builder(&f).arg(&a).arg(&b)");
        assert_eq!(snippet(chain_root(&c)), "stream.launch_builder(&f)");
        assert_eq!(
            place_name(&expr("self.ops.kernels")).as_deref(),
            Some("kernels")
        );
        assert_eq!(place_name(&expr("kernels")).as_deref(), Some("kernels"));
        let refs = expr("&mut &y");
        let (inner, mutable) = peel_refs(&refs);
        assert_eq!((snippet(inner).as_str(), mutable), ("y", Some(true)));
    }

    #[test]
    fn snippets_are_one_short_line() {
        let e = expr("stream\n    .launch_builder(&f)\n    .arg(&a)");
        assert_eq!(snippet(&e), "stream.launch_builder(&f).arg(&a)");
        let long = expr(&format!("f({})", "a + ".repeat(40) + "a"));
        let s = snippet(&long);
        assert_eq!(s.chars().count(), 72);
        assert!(s.ends_with('…'));
    }
}
