//! The launch configuration: `LaunchConfig { grid_dim, block_dim, shared_mem_bytes }`,
//! `for_num_elems`, grid and block as `(x, y, z)` tuples (through `let`s), and the config's fields
//! assigned after its `let` (`cfg.shared_mem_bytes = ..`).

use syn::{Expr, Member};

use crate::skeleton::Value;

use super::resolve::{Int, Resolver};
use super::site::SiteState;
use super::walk::{
    line_of, peel_paren, peel_value, snippet, start, BindKind, Binding, FieldAssign,
};
use super::{FOR_NUM_ELEMS_BLOCK, MAX_DEPTH};

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    // ---- launch configs ---------------------------------------------------------------------

    pub(super) fn config(&self, e: &'a Expr, depth: usize, site: &mut SiteState) -> Config {
        let todo_all = |why: String| Config::todo(&why);
        if depth > MAX_DEPTH {
            return todo_all("the launch config is bound too many times over".into());
        }
        let d = depth + 1;
        let e = peel_value(e);
        match e {
            Expr::Struct(s)
                if s.path
                    .segments
                    .last()
                    .is_some_and(|x| x.ident == "LaunchConfig") =>
            {
                let mut config = match &s.rest {
                    Some(rest) => self.config(rest, d, site),
                    None => Config::todo("missing from the `LaunchConfig { .. }`"),
                };
                config.how = format!("`LaunchConfig {{ .. }}` (line {})", line_of(e));
                for fv in &s.fields {
                    if let Member::Named(field) = &fv.member {
                        self.config_field(&mut config, &field.to_string(), Some(&fv.expr), 0, site);
                    }
                }
                config
            }
            Expr::Call(c) => {
                let is_for_num_elems = matches!(peel_paren(&c.func), Expr::Path(p)
                    if p.path.segments.last().is_some_and(|x| x.ident == "for_num_elems"));
                if !is_for_num_elems || c.args.len() != 1 {
                    return todo_all(format!(
                        "the launch config comes from `{}` (line {})",
                        snippet(e),
                        line_of(e)
                    ));
                }
                let n = &c.args[0];
                let grid_x = match self.int(n, d) {
                    Int::Const(v) if (0..=i128::from(u32::MAX)).contains(&v) => Value::known(
                        ((v + FOR_NUM_ELEMS_BLOCK - 1) / FOR_NUM_ELEMS_BLOCK).to_string(),
                    ),
                    Int::Sym { text, leaves, .. } => Value::known(format!(
                        "ceil_div({}, {FOR_NUM_ELEMS_BLOCK})",
                        site.finish(&text, &leaves)
                    )),
                    _ => Value::todo(format!(
                        "grid x of `{}`: ceil_div(n, 1024) for n = `{}` {}",
                        snippet(e),
                        snippet(n),
                        self.at_site()
                    )),
                };
                Config {
                    grid: [grid_x, Value::known("1"), Value::known("1")],
                    block: [
                        Value::known(FOR_NUM_ELEMS_BLOCK.to_string()),
                        Value::known("1"),
                        Value::known("1"),
                    ],
                    smem: Value::known("0"),
                    how: format!(
                        "`{}` (line {}), by cudarc's rule (block 1024, grid ceil(n / 1024), smem 0)",
                        snippet(e),
                        line_of(e)
                    ),
                }
            }
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.segments[0].ident.to_string();
                let Some(b) = self.binding(&name, start(e)) else {
                    return todo_all(format!(
                        "the launch config `{name}` is not bound in `{}`",
                        self.fun.name
                    ));
                };
                let mut config = match (b.kind, b.init) {
                    (BindKind::Let, Some(init)) => self.config(init, d, site),
                    (BindKind::Param, _) => {
                        return todo_all(format!(
                            "the launch config `{name}` is a parameter of `{}`",
                            self.fun.name
                        ))
                    }
                    _ => {
                        return todo_all(format!(
                            "the launch config `{name}` (line {}) is not a visible `LaunchConfig`",
                            b.line
                        ))
                    }
                };
                config.how = format!("`{name}` = {}", config.how);
                // Assignments to its fields between the `let` and the launch.
                let at = start(e);
                let mut assigns: Vec<&FieldAssign> = self
                    .fun
                    .assigns
                    .iter()
                    .filter(|a| a.var == name && a.pos >= b.visible && a.pos < at)
                    .collect();
                assigns.sort_by_key(|a| a.pos);
                for a in assigns {
                    self.config_field(&mut config, &a.field, a.value, a.line, site);
                    config.how.push_str(&format!(
                        "; then `{name}.{}` is set on line {}",
                        a.field, a.line
                    ));
                }
                config
            }
            _ => todo_all(format!(
                "the launch config is `{}` (line {})",
                snippet(e),
                line_of(e)
            )),
        }
    }

    /// Sets one `LaunchConfig` field from its expression (None: modified in an unknown way on
    /// line `line`).
    fn config_field(
        &self,
        config: &mut Config,
        field: &str,
        value: Option<&'a Expr>,
        line: usize,
        site: &mut SiteState,
    ) {
        let Some(value) = value else {
            let why = format!("`{field}` is modified on line {line}");
            match field {
                "grid_dim" => config.grid = todo3("grid", &why),
                "block_dim" => config.block = todo3("block", &why),
                "shared_mem_bytes" => config.smem = Value::todo(format!("smem: {why}")),
                _ => {}
            }
            return;
        };
        match field {
            "grid_dim" => config.grid = self.dims("grid", value, 0, site),
            "block_dim" => config.block = self.dims("block", value, 0, site),
            "shared_mem_bytes" => {
                config.smem = self.int_value(value, site, |why| {
                    format!("smem: `{}` ({why})", snippet(value))
                })
            }
            _ => {}
        }
    }

    fn dims(&self, what: &str, e: &'a Expr, depth: usize, site: &mut SiteState) -> [Value; 3] {
        if depth > MAX_DEPTH {
            return todo3(what, "bound too many times over");
        }
        match peel_value(e) {
            Expr::Tuple(t) if t.elems.len() == 3 => {
                let mut out = todo3(what, "");
                for (i, (x, slot)) in t.elems.iter().zip(out.iter_mut()).enumerate() {
                    let axis = ["x", "y", "z"][i];
                    *slot = self.int_value(x, site, |why| {
                        format!("{what} {axis}: `{}` ({why}) {}", snippet(x), self.at_site())
                    });
                }
                out
            }
            inner @ Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.segments[0].ident.to_string();
                match self.binding(&name, start(inner)) {
                    Some(Binding {
                        kind: BindKind::Let,
                        init: Some(init),
                        ..
                    }) => self.dims(what, init, depth + 1, site),
                    _ => todo3(
                        what,
                        &format!("`{name}` is not a visible `(x, y, z)` {}", self.at_site()),
                    ),
                }
            }
            other => todo3(
                what,
                &format!(
                    "`{}` is not an `(x, y, z)` tuple {}",
                    snippet(other),
                    self.at_site()
                ),
            ),
        }
    }

    /// An integer as a spec value: a number, an expression over sizes, or a TODO.
    fn int_value(
        &self,
        e: &'a Expr,
        site: &mut SiteState,
        todo: impl FnOnce(&str) -> String,
    ) -> Value {
        match self.int(e, 0) {
            Int::Const(v) => Value::known(v.to_string()),
            Int::Sym { text, leaves, .. } => Value::known(site.finish(&text, &leaves)),
            Int::Unknown(why) => Value::todo(todo(&why)),
        }
    }
}

pub(super) struct Config {
    pub(super) grid: [Value; 3],
    pub(super) block: [Value; 3],
    pub(super) smem: Value,
    /// Where it came from, for the notes.
    pub(super) how: String,
}

impl Config {
    fn todo(why: &str) -> Config {
        Config {
            grid: todo3("grid", why),
            block: todo3("block", why),
            smem: Value::todo(format!("smem: {why}")),
            how: why.to_string(),
        }
    }
}

fn todo3(what: &str, why: &str) -> [Value; 3] {
    ["x", "y", "z"].map(|axis| Value::todo(format!("{what} {axis}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rust::{import_source, LaunchSite};

    fn site(body: &str) -> LaunchSite {
        let src = format!("const BLOCK: u32 = 128;\nfn run(s: &CudaStream, f: &CudaFunction, n: usize) {{\n{body}\n  unsafe {{ s.launch_builder(f).arg(&n).launch(cfg) }}.unwrap();\n}}\n");
        import_source("t.rs", &src, None).unwrap().remove(0)
    }

    #[test]
    fn a_config_literal() {
        let s = site("  let cfg = LaunchConfig { grid_dim: ((n as u32).div_ceil(BLOCK), 2, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 4 * 64 };");
        let known = |v: [&str; 3]| v.map(Value::known);
        assert_eq!(s.grid, known(["ceil_div(n, 128)", "2", "1"]));
        assert_eq!(s.block, known(["128", "1", "1"]));
        assert_eq!(s.smem, Value::known("256"));
    }

    #[test]
    fn for_num_elems_and_a_field_assigned_later() {
        let s = site("  let mut cfg = LaunchConfig::for_num_elems(n as u32);\n  cfg.shared_mem_bytes = 1024;");
        // cudarc's own rule: 1024 threads, as many blocks as that needs.
        let known = |v: [&str; 3]| v.map(Value::known);
        assert_eq!(s.grid, known(["ceil_div(n, 1024)", "1", "1"]));
        assert_eq!(s.block, known(["1024", "1", "1"]));
        assert_eq!(s.smem, Value::known("1024"));
    }

    #[test]
    fn an_unknown_config_is_a_todo_per_axis() {
        let t = todo3("grid", "why");
        assert_eq!(t[2], Value::todo("grid z: why"));
        let s = site("  let cfg = make_config();");
        assert!(s
            .grid
            .iter()
            .chain(&s.block)
            .all(|v| matches!(v, Value::Todo(_))));
    }
}
