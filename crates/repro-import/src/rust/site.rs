//! One launch site: recognizing a launch call (builder or older form), classifying each argument
//! (buffer, size, scalar), and the names, sizes and tensors the site's spec gets.

use std::collections::HashMap;

use syn::spanned::Spanned;
use syn::{Expr, Member, UnOp};

use crate::skeleton::{Tensor, Value};
use crate::spec::names::identifier_problem;

use super::report::{Arg, ArgKind, LaunchForm, LaunchSite};
use super::resolve::{
    base_name, is_runtime_leaf, marker, nameable_ident, strip_int_wrappers, FileCtx, Int, Leaf,
    Resolver,
};
use super::type_names::last_type_ident;
use super::types::{Elem, Len, Ty};
use super::walk::{
    end_of, ident_of, line_of, peel_paren, peel_refs, peel_value, snippet, start, BindKind, FnInfo,
    Push,
};
use super::MAX_DEPTH;

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    // ---- the launch site ----------------------------------------------------------------------

    pub(super) fn site(
        ctx: &'r FileCtx<'a>,
        fun: &'r FnInfo<'a>,
        call: &'a syn::ExprMethodCall,
    ) -> Option<LaunchSite> {
        let (line, column) = start(&call.method);
        let mut r = Resolver::new(ctx, fun, line);
        let found = r.recognize(call)?;
        let mut site = SiteState::default();

        // Integer variables passed as arguments keep their names everywhere.
        for arg in &found.args {
            let (inner, _) = peel_refs(arg);
            if matches!(r.ty_of(inner, 0), Ty::Int(_)) {
                if let Some(key) = nameable_ident(strip_int_wrappers(inner)) {
                    r.preferred.insert(key);
                }
            }
        }

        let kernel = r.kernel_ref(found.function, 0);
        let args: Vec<Arg> = found
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| r.classify(a, i, found.form, &mut site))
            .collect();
        let config = r.config(found.config, 0, &mut site);

        let mut notes = vec![format!(
            "cudarc launch in `{}` ({}): `{}`.",
            fun.name,
            found.form,
            snippet(call)
        )];
        notes.push(match &kernel.name {
            Some(name) => format!("Kernel `{name}`: from {}.", kernel.how),
            None => format!("Kernel name not found: {}.", kernel.how),
        });
        let resolved: Vec<String> = site
            .sizes
            .iter()
            .filter_map(|(name, _, v)| match v {
                Value::Known(v) => Some(format!("{name} = {v}")),
                Value::Todo(_) => None,
            })
            .collect();
        if !resolved.is_empty() {
            notes.push(format!(
                "Resolved in `{}`: {}.",
                fun.name,
                resolved.join(", ")
            ));
        }
        let unresolved: Vec<&str> = site
            .sizes
            .iter()
            .filter(|(_, _, v)| matches!(v, Value::Todo(_)))
            .map(|(name, _, _)| name.as_str())
            .collect();
        if !unresolved.is_empty() {
            notes.push(format!(
                "Not known inside `{}` (sizes left as TODO): {}.",
                fun.name,
                unresolved.join(", ")
            ));
        }
        notes.push(format!("grid/block/smem from {}.", config.how));
        if !site.tensors.is_empty() {
            notes.push(
                "Tensor shapes: a launch site does not show them; where the allocation length was visible the tensor is 1-D with that length. Give each its real shape (e.g. [M, K])."
                    .into(),
            );
        }
        if found.cooperative {
            notes.push(
                "cudarc launches it with `launch_cooperative`; the harness launches normally, which is only right if the kernel does not sync the whole grid."
                    .into(),
            );
        }

        let first_line = match found.form {
            // The builder variable's `let` starts the launch.
            LaunchForm::Builder => line_of(found.function).min(line),
            _ => line_of(call),
        };
        let mut handles = kernel.handles;
        handles.dedup();
        let holder = kernel.holder;
        Some(LaunchSite {
            kernel: kernel.name,
            kernel_source: kernel.how,
            handles,
            holder,
            file: ctx.file.to_string(),
            line,
            column: column + 1,
            lines: (first_line, end_of(call.span()).0.max(line)),
            function: fun.name.clone(),
            form: found.form,
            cooperative: found.cooperative,
            args,
            tensors: site.tensors.into_iter().map(|(_, t)| t).collect(),
            sizes: site
                .sizes
                .into_iter()
                .map(|(name, _, value)| (name, value))
                .collect(),
            grid: config.grid,
            block: config.block,
            smem: config.smem,
            notes,
        })
    }

    /// Whether `call` is a kernel launch, and its parts.
    fn recognize(&self, call: &'a syn::ExprMethodCall) -> Option<Found<'a>> {
        let method = call.method.to_string();
        let at = start(&call.method);
        let cooperative = method == "launch_cooperative";
        if matches!(method.as_str(), "launch" | "launch_cooperative") && call.args.len() == 1 {
            // The builder API: unwind `.arg(..)` calls down to the builder.
            let mut chained = Vec::new();
            let mut r = &*call.receiver;
            loop {
                match peel_paren(r) {
                    Expr::MethodCall(m) if m.method == "arg" && m.args.len() == 1 => {
                        chained.push(&m.args[0]);
                        r = &m.receiver;
                    }
                    other => {
                        r = other;
                        break;
                    }
                }
            }
            chained.reverse();
            let base = peel_refs(r).0;
            if let Expr::MethodCall(m) = base {
                if m.method == "launch_builder" && m.args.len() == 1 {
                    return Some(Found {
                        form: LaunchForm::Chained,
                        function: &m.args[0],
                        args: chained,
                        config: &call.args[0],
                        cooperative,
                    });
                }
            }
            let var = ident_of(base)?;
            let b = self.binding(&var, at)?;
            let builder = match (b.kind, b.init.map(peel_value)) {
                (BindKind::Let, Some(Expr::MethodCall(m)))
                    if m.method == "launch_builder" && m.args.len() == 1 =>
                {
                    &m.args[0]
                }
                _ => return None,
            };
            let mut pushes: Vec<&Push> = self
                .fun
                .pushes
                .iter()
                .filter(|p| p.var == var && p.pos >= b.visible && p.pos < at)
                .collect();
            pushes.sort_by_key(|p| p.pos);
            return Some(Found {
                form: LaunchForm::Builder,
                function: builder,
                args: pushes.iter().map(|p| p.expr).collect(),
                config: &call.args[0],
                cooperative,
            });
        }
        // The older API: `f.launch(cfg, (args..))`, `f.launch_on_stream(&s, cfg, (args..))`.
        let n = call.args.len();
        let tuple_form = (matches!(method.as_str(), "launch" | "launch_cooperative") && n == 2)
            || (method == "launch_on_stream" && n == 3);
        if !tuple_form {
            return None;
        }
        let config = &call.args[n - 2];
        let params = self.tuple_elems(&call.args[n - 1])?;
        let function = &*call.receiver;
        let is_kernel = self.kernel_ref(function, 0).name.is_some()
            || self.is_cuda_function(function)
            || self.is_config(config, 0);
        is_kernel.then_some(Found {
            form: LaunchForm::Tuple,
            function,
            args: params,
            config,
            cooperative,
        })
    }

    fn tuple_elems(&self, e: &'a Expr) -> Option<Vec<&'a Expr>> {
        match peel_paren(e) {
            Expr::Tuple(t) => Some(t.elems.iter().collect()),
            inner @ Expr::Path(p) => {
                let b = self.binding(&p.path.get_ident()?.to_string(), start(inner))?;
                match (b.kind, b.init.map(peel_paren)) {
                    (BindKind::Let, Some(Expr::Tuple(t))) => Some(t.elems.iter().collect()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn is_cuda_function(&self, e: &'a Expr) -> bool {
        let e = peel_value(e);
        let ty = match e {
            Expr::Path(p) => p
                .path
                .get_ident()
                .and_then(|i| self.binding(&i.to_string(), start(e)))
                .and_then(|b| b.ty),
            Expr::Field(f) => match &f.member {
                Member::Named(n) => self.field_type(&f.base, &n.to_string()),
                Member::Unnamed(_) => None,
            },
            _ => None,
        };
        ty.and_then(last_type_ident)
            .is_some_and(|t| t == "CudaFunction")
    }

    fn is_config(&self, e: &'a Expr, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let e = peel_value(e);
        match e {
            Expr::Struct(s) => s
                .path
                .segments
                .last()
                .is_some_and(|x| x.ident == "LaunchConfig"),
            Expr::Call(c) => matches!(peel_paren(&c.func), Expr::Path(p)
                if p.path.segments.iter().any(|s| s.ident == "LaunchConfig")),
            Expr::Path(p) => {
                let Some(ident) = p.path.get_ident() else {
                    return false;
                };
                match self.binding(&ident.to_string(), start(e)) {
                    Some(b) => {
                        b.ty.and_then(last_type_ident)
                            .is_some_and(|t| t == "LaunchConfig")
                            || (b.kind == BindKind::Let
                                && b.init.is_some_and(|i| self.is_config(i, depth + 1)))
                    }
                    None => false,
                }
            }
            _ => false,
        }
    }

    // ---- arguments --------------------------------------------------------------------------

    fn classify(&self, e: &'a Expr, index: usize, form: LaunchForm, site: &mut SiteState) -> Arg {
        let rust = snippet(e);
        let (inner, outer_ref) = peel_refs(e);
        let ty = self.ty_of(inner, 0);
        let kind = match ty {
            Ty::Buffer {
                elem,
                len,
                mutable,
                view,
                raw,
            } => {
                let output = if raw {
                    mutable
                } else {
                    outer_ref.or(mutable)
                };
                ArgKind::Tensor(self.tensor(inner, index, elem, len, view, output, site))
            }
            // The argument tuple passes scalars by value, so a reference there is a device
            // buffer, whatever the resolver read its type as (a raw pointer kept in a `u64`).
            Ty::Int(t) if form == LaunchForm::Tuple && outer_ref.is_some() => {
                let why = format!(
                    "`{}` reads as {t}, but an argument tuple passes scalars by value: a reference there is a device buffer",
                    snippet(inner)
                );
                ArgKind::Tensor(self.tensor(
                    inner,
                    index,
                    Elem::Unknown(why),
                    Len::Unknown,
                    false,
                    outer_ref,
                    site,
                ))
            }
            Ty::Int(_) => {
                let core = strip_int_wrappers(inner);
                match (nameable_ident(core).is_some() || is_runtime_leaf(core), self.int(core, 0)) {
                    (true, Int::Sym { text, leaves, .. })
                        if leaves.len() == 1 && text == marker(&leaves[0].key) =>
                    {
                        ArgKind::Size(site.size(&leaves[0]))
                    }
                    (_, Int::Const(v)) => ArgKind::Expr(Value::known(v.to_string())),
                    (_, Int::Sym { text, leaves, .. }) => {
                        ArgKind::Expr(Value::known(site.finish(&text, &leaves)))
                    }
                    (_, Int::Unknown(why)) => ArgKind::Expr(Value::todo(format!(
                        "argument {index} `{rust}`: an integer that could not be resolved ({why})"
                    ))),
                }
            }
            Ty::Float(t) => ArgKind::Expr(match self.float(inner, 0) {
                Some(v) if matches!(t.as_str(), "f32" | "f64") => Value::known(v),
                _ => Value::todo(format!(
                    "value of `{}` ({t}) {}",
                    snippet(inner),
                    self.at_site()
                )),
            }),
            Ty::Bool => ArgKind::Expr(match self.boolean(inner, 0) {
                Some(b) => Value::known(b.to_string()),
                None => Value::todo(format!(
                    "value of `{}` (bool) {}",
                    snippet(inner),
                    self.at_site()
                )),
            }),
            Ty::Host => ArgKind::Expr(Value::todo(format!(
                "argument {index} `{rust}` is host data (a Vec or slice), which a kernel cannot take"
            ))),
            Ty::Other(t) => ArgKind::Expr(Value::todo(format!(
                "argument {index} `{rust}` is {t}: write the C++ expression the kernel receives"
            ))),
            Ty::Unknown => {
                // A `&mut` argument is a buffer; so is a `&` one in the tuple form, which
                // passes scalars by value.
                let buffer = outer_ref == Some(true)
                    || (form == LaunchForm::Tuple && outer_ref == Some(false));
                if buffer {
                    let why = format!("the Rust type of `{}` is not visible here", snippet(inner));
                    ArgKind::Tensor(self.tensor(
                        inner,
                        index,
                        Elem::Unknown(why),
                        Len::Unknown,
                        false,
                        outer_ref,
                        site,
                    ))
                } else {
                    ArgKind::Expr(Value::todo(format!(
                        "argument {index} `{rust}`: its Rust type is not visible here (a device buffer is a tensor, an integer a size, anything else a C++ expression)"
                    )))
                }
            }
        };
        Arg { rust, kind }
    }

    #[allow(clippy::too_many_arguments)]
    fn tensor(
        &self,
        inner: &'a Expr,
        index: usize,
        elem: Elem,
        len: Len<'a>,
        view: bool,
        output: Option<bool>,
        site: &mut SiteState,
    ) -> String {
        let (key, want) =
            tensor_base(inner).unwrap_or_else(|| (snippet(inner), format!("arg{index}")));
        let shown = key.clone();
        let dtype = match elem {
            Elem::Dtype(d) => Value::known(d),
            Elem::Generic(g) => Value::todo(format!(
                "dtype of `{shown}`: its element type is the generic `{g}` of `{}`",
                self.fun.name
            )),
            Elem::Unsupported(t) => {
                Value::todo(format!("dtype of `{shown}`: Rust `{t}` has no spec dtype"))
            }
            Elem::Unknown(why) => Value::todo(format!("dtype of `{shown}`: {why}")),
        };
        let unknown_shape = |extra: String| {
            vec![Value::todo(format!(
                "shape of `{shown}` (e.g. [M, K]){extra}"
            ))]
        };
        let shape = if view {
            unknown_shape(format!("; it is passed as the view `{}`", snippet(inner)))
        } else {
            match len {
                Len::Count(n) => vec![Value::known(n.to_string())],
                Len::Expr(x) => match self.int(x, 0) {
                    Int::Const(v) => vec![Value::known(v.to_string())],
                    Int::Sym { text, leaves, .. } => {
                        vec![Value::known(site.finish(&text, &leaves))]
                    }
                    Int::Unknown(_) => {
                        unknown_shape(format!("; allocated with length `{}`", snippet(x)))
                    }
                },
                Len::Unknown => unknown_shape(String::new()),
            }
        };
        site.tensor(key, &want, dtype, shape, output)
    }
}

/// The parts of a recognized launch.
struct Found<'a> {
    form: LaunchForm,
    /// The expression that denotes the CUDA function.
    function: &'a Expr,
    args: Vec<&'a Expr>,
    config: &'a Expr,
    cooperative: bool,
}

/// The buffer an argument names: its key (the Rust expression of the buffer) and a name.
fn tensor_base(e: &Expr) -> Option<(String, String)> {
    match peel_paren(e) {
        Expr::Path(p) => {
            let ident = p.path.get_ident()?;
            Some((ident.to_string(), ident.to_string()))
        }
        f @ Expr::Field(_) => Some((snippet(f), base_name(f))),
        Expr::MethodCall(m)
            if matches!(
                m.method.to_string().as_str(),
                "slice"
                    | "slice_mut"
                    | "try_slice"
                    | "try_slice_mut"
                    | "as_view"
                    | "as_view_mut"
                    | "unwrap"
                    | "expect"
                    | "clone"
            ) =>
        {
            tensor_base(peel_refs(&m.receiver).0)
        }
        Expr::Try(t) => tensor_base(&t.expr),
        Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => tensor_base(&u.expr),
        ix @ Expr::Index(_) => Some((snippet(ix), base_name(ix))),
        _ => None,
    }
}

#[derive(Default)]
pub(super) struct SiteState {
    /// (name, key, value), in order of first use.
    sizes: Vec<(String, String, Value)>,
    /// (key, tensor).
    tensors: Vec<(String, Tensor)>,
    /// Every name given out → its key.
    names: HashMap<String, String>,
}

impl SiteState {
    /// A unique, valid C++ name for `key`, as close to `want` as possible.
    fn name_for(&mut self, want: &str, key: &str) -> String {
        let base = valid_name(want);
        for i in 1.. {
            let candidate = if i == 1 {
                base.clone()
            } else {
                format!("{base}_{i}")
            };
            match self.names.get(&candidate) {
                Some(k) if k == key => return candidate,
                Some(_) => continue,
                None => {
                    self.names.insert(candidate.clone(), key.to_string());
                    return candidate;
                }
            }
        }
        unreachable!("an unbounded counter always finds a free name")
    }

    fn size(&mut self, leaf: &Leaf) -> String {
        if let Some((name, _, _)) = self.sizes.iter().find(|(_, k, _)| *k == leaf.key) {
            return name.clone();
        }
        let name = self.name_for(&leaf.name, &format!("size {}", leaf.key));
        self.sizes
            .push((name.clone(), leaf.key.clone(), leaf.value.clone()));
        name
    }

    /// Registers the sizes of a symbolic expression and writes their names into it.
    pub(super) fn finish(&mut self, text: &str, leaves: &[Leaf]) -> String {
        let mut out = text.to_string();
        for leaf in leaves {
            let name = self.size(leaf);
            out = out.replace(&marker(&leaf.key), &name);
        }
        out
    }

    fn tensor(
        &mut self,
        key: String,
        want: &str,
        dtype: Value,
        shape: Vec<Value>,
        output: Option<bool>,
    ) -> String {
        if let Some((_, t)) = self.tensors.iter_mut().find(|(k, _)| *k == key) {
            // The same buffer twice: written if either use writes it.
            t.output = match (t.output, output) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), _) | (_, Some(false)) => Some(false),
                _ => None,
            };
            return t.name.clone();
        }
        let name = self.name_for(want, &format!("tensor {key}"));
        self.tensors.push((
            key,
            Tensor {
                name: name.clone(),
                dtype,
                shape,
                output,
            },
        ));
        name
    }
}

/// `want` made a valid spec name for a tensor or size.
fn valid_name(want: &str) -> String {
    let cleaned: String = want
        .trim_start_matches("r#")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = if cleaned.is_empty() || cleaned.starts_with(|c: char| c.is_ascii_digit()) {
        format!("v_{cleaned}")
    } else {
        cleaned
    };
    if identifier_problem(&name).is_some() {
        name = format!("{name}_");
    }
    if identifier_problem(&name).is_some() {
        name = format!("v_{}", name.trim_start_matches('_'));
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rust::import_source;

    #[test]
    fn spec_names_from_rust_names() {
        assert_eq!(valid_name("r#type"), "type");
        assert_eq!(valid_name("0x"), "v_0x");
        assert_eq!(valid_name("a.b"), "a_b");
        assert_eq!(valid_name("n"), "n");
    }

    #[test]
    fn the_buffer_an_argument_names() {
        let base = |t: &str| tensor_base(&syn::parse_str::<Expr>(t).unwrap());
        assert_eq!(base("self.out"), Some(("self.out".into(), "out".into())));
        assert_eq!(base("(x)"), Some(("x".into(), "x".into())));
        assert_eq!(base("buf.slice(0..n)"), Some(("buf".into(), "buf".into())));
        assert_eq!(base("1 + 2"), None);
    }

    #[test]
    fn arguments_are_classified_in_order() {
        let src = "fn run(s: &CudaStream, f: &CudaFunction, n: usize, cfg: LaunchConfig) {\n  let x = s.alloc_zeros::<f32>(n).unwrap();\n  let mut b = s.launch_builder(f);\n  b.arg(&x);\n  b.arg(&n);\n  b.arg(&2.5f32);\n  b.arg(&true);\n  unsafe { b.launch(cfg) }.unwrap();\n}\n";
        let site = import_source("t.rs", src, None).unwrap().remove(0);
        let args: Vec<String> = site
            .args
            .iter()
            .map(|a| format!("{} {:?}", a.rust, a.kind))
            .collect();
        assert_eq!(
            args,
            [
                "&x Tensor(\"x\")",
                "&n Size(\"n\")",
                "&2.5f32 Expr(Known(\"2.5f\"))",
                "&true Expr(Known(\"true\"))",
            ]
        );
        assert_eq!(site.form, LaunchForm::Builder);
        let sizes: Vec<&str> = site.sizes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(sizes, ["n"]);
    }

    #[test]
    fn the_older_launch_form() {
        let src = "fn run(dev: &CudaDevice, n: u32) {\n  let f = dev.get_func(\"m\", \"k\").unwrap();\n  let cfg = LaunchConfig::for_num_elems(n);\n  unsafe { f.launch(cfg, (n,)) }.unwrap();\n}\n";
        let site = import_source("t.rs", src, None).unwrap().remove(0);
        assert_eq!(site.kernel.as_deref(), Some("k"));
        assert_eq!(site.form, LaunchForm::Tuple);
        assert_eq!(site.args.len(), 1);
    }

    #[test]
    fn one_name_per_key_and_unique_names() {
        let mut st = SiteState::default();
        let a = st.name_for("x", "self.x");
        let b = st.name_for("x", "other.x");
        let again = st.name_for("x", "self.x");
        assert_eq!(a, again);
        assert_ne!(a, b);
    }
}
