//! Which CUDA function a launch uses: the load call (`load_function("k")`, `get_func`), followed
//! through locals, struct fields, maps and `Arc`s; where a struct's fields and a map's entries get
//! their kernels in this file or, with `--search`, in the other files of the tree.

use syn::{Expr, Lit, Member};

use super::resolve::{FileCtx, Resolver};
use super::tables::Tables;
use super::walk::{
    ident_of, is_path_call, line_of, peel_kernel, peel_value, place_name, snippet, start, BindKind,
    FnInfo, VecMacro,
};
use super::MAX_DEPTH;

/// One kernel of several candidates, or why it is not one: the same name found more than once
/// counts once; different names are ambiguous.
fn one_kernel(what: &str, found: &[(String, String)]) -> Result<(String, String), String> {
    let mut found = found.to_vec();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.dedup_by(|a, b| a.0 == b.0);
    match found.len() {
        1 => Ok(found.remove(0)),
        _ => {
            let names: Vec<String> = found.iter().map(|s| format!("`{}`", s.0)).collect();
            Err(format!(
                "{what} is set to different kernels ({}): pick the one this launch runs",
                names.join(", ")
            ))
        }
    }
}

/// Where each struct field and map of the file gets its kernel functions; `origin` (a file
/// found by `--search`) is added to each "how".
pub(super) fn file_tables<'a>(
    ctx: &FileCtx<'a>,
    fns: &[FnInfo<'a>],
    origin: Option<&str>,
) -> Tables {
    let in_file = |how: String| match origin {
        Some(file) => format!("{how}, in {file}"),
        None => how,
    };
    let mut tables = Tables::default();
    for fun in fns {
        let r = Resolver::new(ctx, fun, 0);
        let sets = fun.field_inits.iter().map(|i| (&i.field, i.expr)).chain(
            fun.assigns
                .iter()
                .filter_map(|a| a.rhs.map(|rhs| (&a.member, rhs))),
        );
        for (field, expr) in sets {
            if let KernelRef {
                name: Some(name),
                how,
                ..
            } = r.kernel_ref(expr, 0)
            {
                tables.fields.entry(field.clone()).or_default().push((
                    name,
                    in_file(format!("{how}, stored in `{field}` by `{}`", fun.name)),
                ));
            }
        }
        for insert in &fun.inserts {
            let Some(load) = r.load_call(insert.value) else {
                continue;
            };
            let table = tables.maps.entry(insert.map.clone()).or_default();
            let key = r.str_value(insert.key, 0);
            match (key, r.kernel_ref(insert.value, 0)) {
                (
                    Some(key),
                    KernelRef {
                        name: Some(name),
                        how,
                        ..
                    },
                ) => table.entries.entry(key.clone()).or_default().push((
                    name,
                    in_file(format!(
                        "{how}, stored in `{}[\"{key}\"]` by `{}`",
                        insert.map, fun.name
                    )),
                )),
                _ => {
                    // `insert(name.to_string(), module.load_function(name)?)`: the key is the
                    // name the kernel was loaded by, whatever it is at run time.
                    let same = load
                        .name_arg
                        .is_some_and(|arg| snippet(peel_key(arg)) == snippet(peel_key(insert.key)));
                    let listed = if same {
                        r.loop_strings(peel_key(insert.key))
                    } else {
                        None
                    };
                    if let Some(names) = listed {
                        // `for name in KERNEL_NAMES`: exactly these keys, each its own kernel.
                        for name in names {
                            table.entries.entry(name.clone()).or_default().push((
                                name.clone(),
                                in_file(format!(
                                    "`{}` (line {}) with `{}` = \"{name}\", stored in `{}[\"{name}\"]` by `{}`",
                                    snippet(insert.value),
                                    line_of(insert.value),
                                    snippet(peel_key(insert.key)),
                                    insert.map,
                                    fun.name
                                )),
                            ));
                        }
                    } else if same && table.keyed_by_name.is_none() {
                        table.keyed_by_name = Some(in_file(format!(
                            "`{}` (line {}) keys each kernel of `{}` by the name it is loaded by",
                            snippet(insert.value),
                            line_of(insert.value),
                            insert.map
                        )));
                    }
                }
            }
        }
        // `Self { kernels: map }`: the map's entries are the field's.
        for init in &fun.field_inits {
            if let Some(local) = ident_of(init.expr) {
                if local != init.field {
                    if let Some(table) = tables.maps.remove(&local) {
                        let entries = table.entries.clone();
                        let keyed = table.keyed_by_name.clone();
                        tables.maps.insert(local, table);
                        let field = tables.maps.entry(init.field.clone()).or_default();
                        for (k, v) in entries {
                            field.entries.entry(k).or_default().extend(v);
                        }
                        if field.keyed_by_name.is_none() {
                            field.keyed_by_name = keyed;
                        }
                    }
                }
            }
        }
    }
    tables
}

/// A map key with what does not change its text removed (`&`, `.to_string()`, `String::from`).
fn peel_key(mut e: &Expr) -> &Expr {
    for _ in 0..MAX_DEPTH {
        e = match peel_value(e) {
            Expr::MethodCall(m)
                if m.args.is_empty()
                    && matches!(
                        m.method.to_string().as_str(),
                        "to_string" | "to_owned" | "into" | "as_str"
                    ) =>
            {
                &m.receiver
            }
            Expr::Call(c) if c.args.len() == 1 && is_path_call(c, &["from"]) => &c.args[0],
            other => return other,
        };
    }
    e
}

/// A cudarc call that loads a CUDA function, and its name argument.
struct LoadCall<'a> {
    call: &'a syn::ExprMethodCall,
    name_arg: Option<&'a Expr>,
}

pub(super) struct KernelRef {
    pub(super) name: Option<String>,
    pub(super) how: String,
    /// The names the kernel function is held by on the way from the launch to its load call:
    /// the local, the struct field, the map key (`--kernel` takes any of them).
    pub(super) handles: Vec<String>,
    /// The field or map key among them (a local is named in `handles` only): what `--list`
    /// says the kernel is held in.
    pub(super) holder: Option<String>,
}

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    // ---- kernel names -----------------------------------------------------------------------

    /// The cudarc call that loads a CUDA function by name, when `e` is one (under `?`,
    /// `.unwrap()`, `Arc::new(..)`...): `module.load_function("k")`, `get_function`, `get_fn`,
    /// `load_func` (the last string argument), or the older `dev.get_func("module", "k")`.
    fn load_call(&self, e: &'a Expr) -> Option<LoadCall<'a>> {
        let Expr::MethodCall(m) = peel_kernel(e) else {
            return None;
        };
        let name_arg = match m.method.to_string().as_str() {
            "load_function" | "get_function" | "get_fn" => m.args.first(),
            "get_func" => m.args.iter().nth(1),
            "load_func" => m
                .args
                .iter()
                .rev()
                .find(|a| self.str_value(a, 0).is_some())
                .or(m.args.last()),
            _ => return None,
        };
        Some(LoadCall { call: m, name_arg })
    }

    pub(super) fn kernel_ref(&self, e: &'a Expr, depth: usize) -> KernelRef {
        let unknown = |how: String| KernelRef {
            name: None,
            how,
            handles: Vec::new(),
            holder: None,
        };
        if depth > MAX_DEPTH {
            return unknown("the kernel function is bound too many times over".into());
        }
        if let Some(load) = self.load_call(e) {
            let call = Expr::MethodCall(load.call.clone());
            let (text, line) = (snippet(&call), line_of(load.call));
            let Some(arg) = load.name_arg else {
                return unknown(format!("`{text}` (line {line}) names no kernel"));
            };
            return match self.str_value(arg, depth + 1) {
                Some(name) => KernelRef {
                    name: Some(name),
                    how: format!("`{text}` (line {line})"),
                    handles: Vec::new(),
                    holder: None,
                },
                None => unknown(format!(
                    "`{text}` (line {line}) does not name it with a string literal or a `const`"
                )),
            };
        }
        let e = peel_kernel(e);
        match e {
            Expr::MethodCall(m) if m.method == "get" && m.args.len() == 1 => {
                self.map_ref(&m.receiver, &m.args[0], e)
            }
            Expr::Index(ix) => self.map_ref(&ix.expr, &ix.index, e),
            Expr::MethodCall(_) => {
                unknown(format!("the kernel function comes from `{}`", snippet(e)))
            }
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.segments[0].ident.to_string();
                let mut found = match self.binding(&name, start(e)) {
                    Some(b) => match (b.kind, b.init) {
                        (BindKind::Let, Some(init)) => self.kernel_ref(init, depth + 1),
                        (BindKind::Param, _) => unknown(format!(
                            "the kernel function `{name}` is a parameter of `{}`: look at its callers for the `load_function(\"..\")` it comes from",
                            self.fun.name
                        )),
                        _ => unknown(format!(
                            "the kernel function `{name}` (line {}) is not bound to a `load_function(\"..\")`",
                            b.line
                        )),
                    },
                    None => unknown(format!(
                        "the kernel function `{name}` is not bound in `{}`",
                        self.fun.name
                    )),
                };
                found.handles.insert(0, name);
                found
            }
            Expr::Field(f) => {
                let Member::Named(field) = &f.member else {
                    return unknown(format!("the kernel function is `{}`", snippet(e)));
                };
                let field = field.to_string();
                let mut found = match self.field_kernel(&field) {
                    Some(Ok((name, how))) => KernelRef {
                        name: Some(name),
                        how,
                        handles: Vec::new(),
                        holder: None,
                    },
                    Some(Err(why)) => unknown(why),
                    None => unknown(self.not_found_where(
                        &format!("the kernel function is `{}`", snippet(e)),
                        &format!(
                            "`{field}: ..load_function(\"..\")` or `.{field} = ..load_function(\"..\")`"
                        ),
                        &format!(
                            "where {} is built (the value its field `{field}` gets)",
                            self.owner_of(&f.base)
                        ),
                    )),
                };
                found.handles.insert(0, field.clone());
                found.holder.get_or_insert(field);
                found
            }
            _ => unknown(format!("the kernel function is `{}`", snippet(e))),
        }
    }

    /// `map[key]` or `map.get(key)`: the kernel the map holds under `key`.
    fn map_ref(&self, map: &'a Expr, key: &'a Expr, whole: &'a Expr) -> KernelRef {
        let key_text = self.str_value(key, 0);
        // The handle a user has: the key, or the last segment of a non-string key
        // (`Kernel::BiasGrad` → `BiasGrad`).
        let handle = key_text.clone().or_else(|| match peel_key(key) {
            Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        });
        let unknown = |how: String| KernelRef {
            name: None,
            how,
            handles: handle.iter().cloned().collect(),
            holder: handle.clone(),
        };
        let Some(map_name) = place_name(map) else {
            return unknown(format!("the kernel function is `{}`", snippet(whole)));
        };
        let tables = [
            Some(&self.ctx.tables),
            self.ctx
                .elsewhere
                .dir
                .as_ref()
                .map(|_| &self.ctx.elsewhere.tables),
        ];
        for table in tables.into_iter().flatten() {
            let Some(entries) = table.maps.get(&map_name) else {
                continue;
            };
            if let Some(found) = key_text.as_ref().and_then(|k| entries.entries.get(k)) {
                return match one_kernel(
                    &format!("`{map_name}[\"{}\"]`", key_text.as_deref().unwrap_or("")),
                    found,
                ) {
                    Ok((name, how)) => KernelRef {
                        name: Some(name),
                        how,
                        handles: handle.iter().cloned().collect(),
                        holder: handle.clone(),
                    },
                    Err(why) => unknown(why),
                };
            }
            if let (Some(key), Some(how)) = (&key_text, &entries.keyed_by_name) {
                return KernelRef {
                    name: Some(key.clone()),
                    how: format!("the key `\"{key}\"` of `{map_name}`: {how}"),
                    handles: handle.iter().cloned().collect(),
                    holder: handle.clone(),
                };
            }
        }
        let key_shown = match &key_text {
            Some(k) => format!("\"{k}\""),
            None => snippet(key),
        };
        unknown(self.not_found_where(
            &format!(
                "the kernel function is `{}`, the entry {key_shown} of the map `{map_name}`",
                snippet(whole)
            ),
            &format!("`{map_name}.insert({key_shown}, ..load_function(\"..\"))`"),
            &format!("where `{map_name}` is filled (the name loaded for {key_shown})"),
        ))
    }

    /// What a field lookup found: this file first, then `--search`.
    fn field_kernel(&self, field: &str) -> Option<Result<(String, String), String>> {
        let what = format!("field `{field}`");
        if let Some(found) = self.ctx.tables.fields.get(field) {
            return Some(one_kernel(&what, found));
        }
        self.ctx.elsewhere.dir.as_ref()?;
        let found = self.ctx.elsewhere.tables.fields.get(field)?;
        Some(one_kernel(&what, found))
    }

    /// "X, and no Y was found in this file (nor under DIR): look Z": a TODO that says where
    /// the kernel's name is.
    fn not_found_where(&self, what: &str, looked_for: &str, look: &str) -> String {
        match &self.ctx.elsewhere.dir {
            Some(dir) => format!(
                "{what}, and no {looked_for} was found in this file nor in the {} other Rust files under {dir}: look {look} and write the name given to `load_function`",
                self.ctx.elsewhere.files
            ),
            None => format!(
                "{what}, and no {looked_for} was found in this file: look {look} and write the name given to `load_function`, or rerun with --search DIR (the crate's src/) to search the other files"
            ),
        }
    }

    /// "`Linear`" for `self` in `impl Linear`, else "the value of `x`".
    fn owner_of(&self, base: &Expr) -> String {
        let is_self = matches!(peel_value(base), Expr::Path(p) if p.path.is_ident("self"));
        match (&self.fun.self_ty, is_self) {
            (Some(ty), true) => format!("`{ty}`"),
            _ => format!("`{}`", snippet(base)),
        }
    }

    /// The strings a `for` loop variable takes, when its loop runs over a visible list of
    /// literals (`for name in ["a", "b"]`, `for name in KERNEL_NAMES`, `.iter()` of one).
    fn loop_strings(&self, var: &'a Expr) -> Option<Vec<String>> {
        let ident = ident_of(var)?;
        let b = self.binding(&ident, start(var))?;
        let index = self.fun.bindings.iter().position(|x| std::ptr::eq(x, b))?;
        let (_, iter) = self.fun.loop_vars.iter().find(|(i, _)| *i == index)?;
        self.str_list(iter, 0)
    }

    fn str_list(&self, e: &'a Expr, depth: usize) -> Option<Vec<String>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match peel_value(e) {
            Expr::MethodCall(m)
                if m.args.is_empty()
                    && matches!(
                        m.method.to_string().as_str(),
                        "iter" | "into_iter" | "copied" | "cloned"
                    ) =>
            {
                self.str_list(&m.receiver, depth + 1)
            }
            Expr::Array(a) => a
                .elems
                .iter()
                .map(|x| self.str_value(x, depth + 1))
                .collect(),
            Expr::Macro(mac) => match self
                .ctx
                .vec_macros
                .get(&(&mac.mac as *const syn::Macro as usize))
            {
                Some(VecMacro::List(items)) => {
                    items.iter().map(|x| self.str_value(x, depth + 1)).collect()
                }
                _ => None,
            },
            inner @ Expr::Path(p) => {
                let last = p.path.segments.last()?.ident.to_string();
                if p.path.get_ident().is_some() {
                    if let Some(b) = self.binding(&last, start(inner)) {
                        return match (b.kind, b.init) {
                            (BindKind::Let, Some(init)) => self.str_list(init, depth + 1),
                            _ => None,
                        };
                    }
                }
                let (expr, _) = self.constant(&last)??;
                self.str_list(expr, depth + 1)
            }
            _ => None,
        }
    }

    /// A string known at compile time: a literal, a `const`, or a `let` of one.
    fn str_value(&self, e: &'a Expr, depth: usize) -> Option<String> {
        if depth > MAX_DEPTH {
            return None;
        }
        match peel_value(e) {
            Expr::Lit(l) => match &l.lit {
                Lit::Str(s) => Some(s.value()),
                _ => None,
            },
            Expr::MethodCall(m)
                if matches!(
                    m.method.to_string().as_str(),
                    "to_string" | "as_str" | "into" | "to_owned"
                ) =>
            {
                self.str_value(&m.receiver, depth + 1)
            }
            Expr::Call(c) if c.args.len() == 1 && is_path_call(c, &["from"]) => {
                self.str_value(&c.args[0], depth + 1)
            }
            Expr::Path(p) => {
                let last = p.path.segments.last()?.ident.to_string();
                if p.path.get_ident().is_some() {
                    if let Some(b) = self.binding(&last, start(e)) {
                        return match (b.kind, b.init) {
                            (BindKind::Let, Some(init)) => self.str_value(init, depth + 1),
                            _ => None,
                        };
                    }
                }
                let (expr, _) = self.constant(&last)??;
                self.str_value(expr, depth + 1)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rust::import_source;

    #[test]
    fn one_kernel_of_several_findings() {
        let found = |names: &[&str]| -> Vec<(String, String)> {
            names
                .iter()
                .map(|n| (n.to_string(), format!("at {n}")))
                .collect()
        };
        assert_eq!(
            one_kernel("`f`", &found(&["k", "k"])),
            Ok(("k".into(), "at k".into()))
        );
        let e = one_kernel("`f`", &found(&["b", "a"])).unwrap_err();
        assert_eq!(
            e,
            "`f` is set to different kernels (`a`, `b`): pick the one this launch runs"
        );
    }

    #[test]
    fn map_keys_lose_what_does_not_change_their_text() {
        let key = |t: &str| snippet(peel_key(&syn::parse_str::<Expr>(t).unwrap()));
        assert_eq!(key("&\"gemm\".to_string()"), "\"gemm\"");
        assert_eq!(key("String::from(\"gemm\")"), "\"gemm\"");
        assert_eq!(key("name"), "name");
    }

    fn kernel_of(src: &str) -> (Option<String>, String) {
        let site = import_source("t.rs", src, None).unwrap().remove(0);
        (site.kernel, site.kernel_source)
    }

    #[test]
    fn a_kernel_through_a_local_a_field_and_a_map() {
        let local = "fn run(s: &CudaStream, m: &CudaModule, cfg: LaunchConfig) {\n  let f = Arc::new(m.load_function(\"saxpy\").unwrap());\n  unsafe { s.launch_builder(&f).launch(cfg) }.unwrap();\n}\n";
        assert_eq!(kernel_of(local).0.as_deref(), Some("saxpy"));
        let field = "struct Ops { gemm: CudaFunction }\nfn new(m: &CudaModule) -> Ops { Ops { gemm: m.load_function(\"sgemm\").unwrap() } }\nimpl Ops { fn run(&self, s: &CudaStream, cfg: LaunchConfig) { unsafe { s.launch_builder(&self.gemm).launch(cfg) }.unwrap(); } }\n";
        assert_eq!(kernel_of(field).0.as_deref(), Some("sgemm"));
        let map = "fn run(s: &CudaStream, m: &CudaModule, cfg: LaunchConfig) {\n  let mut k = HashMap::new();\n  k.insert(\"add\", m.load_function(\"vec_add\").unwrap());\n  unsafe { s.launch_builder(&k[\"add\"]).launch(cfg) }.unwrap();\n}\n";
        assert_eq!(kernel_of(map).0.as_deref(), Some("vec_add"));
        let unknown = "fn run(s: &CudaStream, f: &CudaFunction, cfg: LaunchConfig) { unsafe { s.launch_builder(f).launch(cfg) }.unwrap(); }\n";
        let (kernel, how) = kernel_of(unknown);
        assert_eq!(kernel, None);
        assert!(!how.is_empty());
    }
}
