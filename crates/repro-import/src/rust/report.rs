//! What the importer reports: the launch sites with their arguments and configuration, the
//! one-line summaries `--list` prints, the selectors that pick a site, and the errors.

use std::fmt;
use std::path::PathBuf;

use super::FORMS;
use crate::skeleton::{Tensor, Value};

use super::MAX_SOURCE_BYTES;

/// Which cudarc API a launch site uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchForm {
    /// `let mut b = stream.launch_builder(&f); b.arg(&x); b.launch(cfg)` (cudarc ≥ 0.13).
    Builder,
    /// `stream.launch_builder(&f).arg(&x).launch(cfg)` (cudarc ≥ 0.13).
    Chained,
    /// `f.launch(cfg, (&x, n))` or `f.launch_on_stream(&s, cfg, (..))` (cudarc < 0.13).
    Tuple,
}

impl fmt::Display for LaunchForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LaunchForm::Builder => "launch builder",
            LaunchForm::Chained => "chained launch builder",
            LaunchForm::Tuple => "launch with an argument tuple",
        })
    }
}

/// One kernel argument of a launch site, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The Rust expression as written (whitespace collapsed).
    pub rust: String,
    pub kind: ArgKind,
}

/// What an argument becomes in the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// A device buffer: the name of one of [`LaunchSite::tensors`].
    Tensor(String),
    /// An integer: the name of one of [`LaunchSite::sizes`].
    Size(String),
    /// Anything else: a C++ expression, or a TODO when it could not be written.
    Expr(Value),
}

impl Arg {
    /// The entry of `kernel.args`.
    pub fn spec_value(&self) -> Value {
        match &self.kind {
            ArgKind::Tensor(name) | ArgKind::Size(name) => Value::known(name.clone()),
            ArgKind::Expr(value) => value.clone(),
        }
    }
}

/// A cudarc kernel launch found in a Rust file, with everything resolved that could be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSite {
    /// The kernel's name, when a string literal (or a `const`) names it.
    pub kernel: Option<String>,
    /// Where the name came from, or why it is not known.
    pub kernel_source: String,
    /// The names the kernel function is held by at the launch, outermost first: the local, the
    /// struct field (`bias_grad_p1_kernel` of `&self.bias_grad_p1_kernel`), the map key.
    /// `--kernel` takes any of them.
    pub handles: Vec<String>,
    /// The struct field or map key among `handles` (what `--list` says the kernel is held in).
    pub holder: Option<String>,
    /// The file as the caller named it.
    pub file: String,
    /// Line (1-based) and column (1-based) of the `launch` call.
    pub line: usize,
    pub column: usize,
    /// The lines the launch expression spans (a chained launch starts at its
    /// `stream.launch_builder(..)`): `--kernel NAME:LINE` takes any of them.
    pub lines: (usize, usize),
    /// The enclosing function (`Type::method` inside an `impl`).
    pub function: String,
    pub form: LaunchForm,
    /// Launched with `launch_cooperative`.
    pub cooperative: bool,
    pub args: Vec<Arg>,
    pub tensors: Vec<Tensor>,
    /// Named integers, in order of first use.
    pub sizes: Vec<(String, Value)>,
    pub grid: [Value; 3],
    pub block: [Value; 3],
    pub smem: Value,
    /// What was resolved and what was not, for the top of the spec.
    pub notes: Vec<String>,
}

impl LaunchSite {
    /// `file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// One line for `--list` and for "which one?" messages.
    pub fn summary(&self) -> SiteSummary {
        SiteSummary {
            kernel: self.kernel.clone(),
            handle: self
                .holder
                .clone()
                .or_else(|| self.handles.first().cloned()),
            held: self.holder.is_some(),
            location: self.location(),
            line: self.line,
            function: self.function.clone(),
            form: self.form,
            cooperative: self.cooperative,
        }
    }

    /// Whether `--kernel NAME[:LINE]` (or `LINE`) picks this site: NAME is the kernel's CUDA
    /// name or a name it is held by (field, local, map key); LINE any line of the launch.
    pub fn matches(&self, name: Option<&str>, line: Option<usize>) -> bool {
        name.map_or(true, |n| {
            self.kernel.as_deref() == Some(n) || self.handles.iter().any(|h| h == n)
        }) && line.map_or(true, |l| (self.lines.0..=self.lines.1).contains(&l))
    }

    /// The site as `--list` shows it: a heading line, then where the kernel's name came from,
    /// the launch configuration and each argument with what it becomes in the spec. `select`
    /// is what `--kernel` takes to pick it (see [`selectors`]).
    pub fn listing(&self, select: &str) -> String {
        let shown = |v: &Value| match v {
            Value::Known(text) => text.clone(),
            Value::Todo(_) => "TODO".to_string(),
        };
        let dims =
            |d: &[Value; 3]| format!("[{}]", d.iter().map(shown).collect::<Vec<_>>().join(", "));
        let mut out = format!("{}\n", self.summary());
        out.push_str(&format!("  --kernel {select}\n"));
        match &self.kernel {
            Some(_) => out.push_str(&format!("  kernel   from {}\n", self.kernel_source)),
            None => out.push_str(&format!("  kernel   TODO: {}\n", self.kernel_source)),
        }
        out.push_str(&format!("  grid     {}\n", dims(&self.grid)));
        out.push_str(&format!("  block    {}\n", dims(&self.block)));
        out.push_str(&format!("  smem     {}\n", shown(&self.smem)));
        if self.args.is_empty() {
            out.push_str("  args     none\n");
        }
        let width = self
            .args
            .iter()
            .map(|a| a.rust.chars().count())
            .max()
            .unwrap_or(0);
        for (i, a) in self.args.iter().enumerate() {
            let what = match &a.kind {
                ArgKind::Tensor(name) => {
                    let t = self.tensors.iter().find(|t| &t.name == name);
                    let dtype = t.map_or("TODO".into(), |t| shown(&t.dtype));
                    let shape = t.map_or("[TODO]".into(), |t| {
                        format!(
                            "[{}]",
                            t.shape.iter().map(shown).collect::<Vec<_>>().join(", ")
                        )
                    });
                    let role = match t.and_then(|t| t.output) {
                        Some(true) => ", written",
                        Some(false) => ", read",
                        None => "",
                    };
                    format!("tensor {name}: {dtype} {shape}{role}")
                }
                ArgKind::Size(name) => {
                    match self.sizes.iter().find(|(n, _)| n == name).map(|(_, v)| v) {
                        Some(Value::Known(v)) => format!("size {name} = {v}"),
                        _ => format!("size {name} = TODO"),
                    }
                }
                ArgKind::Expr(v) => format!("value {}", shown(v)),
            };
            let label = if i == 0 { "  args" } else { "" };
            out.push_str(&format!(
                "{label:<9}{i:>2}  {:<width$}  -> {what}\n",
                a.rust
            ));
        }
        out
    }
}

/// For each site, the shortest `--kernel` that picks it alone: the kernel's name, a name it is
/// held by, either with the line, or the line.
pub fn selectors(sites: &[LaunchSite]) -> Vec<String> {
    sites
        .iter()
        .map(|site| {
            let names: Vec<&str> = site
                .kernel
                .iter()
                .chain(&site.handles)
                .map(String::as_str)
                .collect();
            let alone = |name: Option<&str>, line: Option<usize>| {
                sites.iter().filter(|s| s.matches(name, line)).count() == 1
            };
            names
                .iter()
                .find(|n| alone(Some(n), None))
                .map(|n| n.to_string())
                .or_else(|| {
                    names
                        .iter()
                        .find(|n| alone(Some(n), Some(site.line)))
                        .map(|n| format!("{n}:{}", site.line))
                })
                .unwrap_or_else(|| site.line.to_string())
        })
        .collect()
}

/// A launch site as `repro import rust --list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSummary {
    pub kernel: Option<String>,
    /// The field or map key the kernel function is held in, else the local it is bound to.
    pub handle: Option<String>,
    /// `handle` is a field or map key (shown as "held in").
    pub held: bool,
    /// `file:line`.
    pub location: String,
    pub line: usize,
    pub function: String,
    pub form: LaunchForm,
    pub cooperative: bool,
}

impl SiteSummary {
    /// What `--kernel` takes to pick exactly this site (`NAME:LINE`, or `LINE` when the kernel's
    /// name is not known).
    pub fn selector(&self) -> String {
        match self.kernel.as_ref().or(self.handle.as_ref()) {
            Some(name) => format!("{name}:{}", self.line),
            None => self.line.to_string(),
        }
    }
}

impl fmt::Display for SiteSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kernel = match (&self.kernel, &self.handle) {
            (Some(name), _) => name.clone(),
            (None, Some(handle)) => format!("{handle} (CUDA name not known)"),
            (None, None) => "(kernel name not known)".to_string(),
        };
        let coop = if self.cooperative {
            ", cooperative"
        } else {
            ""
        };
        let held = match (&self.kernel, &self.handle) {
            (Some(name), Some(handle)) if self.held && name != handle => {
                format!(", held in `{handle}`")
            }
            _ => String::new(),
        };
        write!(
            f,
            "{kernel}  {}  (in `{}`, {}{coop}{held})",
            self.location, self.function, self.form
        )
    }
}

/// Why `repro import rust` produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{} is {kind}, not a Rust source file; pass the .rs file that holds the launch",
        path.display()
    )]
    NotAFile { path: PathBuf, kind: &'static str },

    #[error(
        "{} is {:.1} MiB; repro import rust reads Rust source files up to {} MiB: pass the .rs file that holds the launch (not a generated or bundled one)",
        path.display(),
        *bytes as f64 / (1u64 << 20) as f64,
        MAX_SOURCE_BYTES >> 20
    )]
    TooLarge { path: PathBuf, bytes: u64 },

    #[error("{file}:{line}:{column}: not UTF-8 text, so not a Rust source file; pass the .rs file that holds the launch")]
    NotUtf8 {
        file: String,
        line: usize,
        column: usize,
    },

    #[error("{file}:{line}:{column}: not valid Rust: {message}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("no cudarc kernel launch found in {file}; looked for {FORMS}")]
    NoLaunchSite { file: String },

    #[error("{}", no_such_kernel(file, wanted, suggestion.as_deref(), sites))]
    NoSuchKernel {
        file: String,
        wanted: String,
        suggestion: Option<String>,
        sites: Vec<SiteSummary>,
    },

    #[error(
        "--search {}: not a folder; give the folder of the crate's sources (e.g. src/)",
        path.display()
    )]
    SearchNotAFolder { path: PathBuf },

    #[error("internal error while importing {file}: {message}")]
    Internal { file: String, message: String },
}

fn no_such_kernel(
    file: &str,
    wanted: &str,
    suggestion: Option<&str>,
    sites: &[SiteSummary],
) -> String {
    let mut out = format!("no launch of kernel `{wanted}` in {file}");
    if let Some(s) = suggestion {
        out.push_str(&format!(" (did you mean `{s}`?)"));
    }
    out.push_str("; its launch sites (pick one with --kernel NAME, or NAME:LINE):");
    for site in sites {
        out.push_str(&format!("\n  {site}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rust::import_source;

    #[test]
    fn each_site_gets_the_shortest_selector_that_picks_it_alone() {
        let src = "fn run(s: &CudaStream, m: &CudaModule, cfg: LaunchConfig) {\n  let a = m.load_function(\"a\").unwrap();\n  let b = m.load_function(\"b\").unwrap();\n  unsafe { s.launch_builder(&a).launch(cfg) }.unwrap();\n  unsafe { s.launch_builder(&a).launch(cfg) }.unwrap();\n  unsafe { s.launch_builder(&b).launch(cfg) }.unwrap();\n}\n";
        let sites = import_source("t.rs", src, None).unwrap();
        assert_eq!(selectors(&sites), ["a:4", "a:5", "b"]);
        assert!(sites[2].matches(Some("b"), None));
        assert!(sites[0].matches(None, Some(4)));
        assert!(!sites[0].matches(Some("a"), Some(5)));
        assert_eq!(sites[2].location(), "t.rs:6");
    }
}
