//! `repro import rust`: a spec skeleton from a cudarc kernel launch in Rust source.
//!
//! The file is parsed with `syn` (no macro expansion, no type checking). Each function is walked
//! once in source order, recording its bindings (`let`s, parameters, patterns, with their
//! scopes), field assignments (`cfg.shared_mem_bytes = ..`), `builder.arg(..)` pushes and
//! `.launch(..)` calls. A call is a launch site when
//!
//! - it is `.launch(cfg)` / `.launch_cooperative(cfg)` on a cudarc launch builder: chained
//!   (`stream.launch_builder(&f).arg(&a).launch(cfg)`) or a variable bound to
//!   `stream.launch_builder(&f)` whose arguments were pushed with `builder.arg(..)` (cudarc ≥ 0.13);
//! - or it has the older shape `f.launch(cfg, (args..))` / `f.launch_on_stream(&s, cfg, (args..))`
//!   where `f` is a CUDA function (`get_func`, `load_function`, a `CudaFunction`) or `cfg` a
//!   `LaunchConfig`.
//!
//! Anything else named `launch` is someone else's method and is left alone. Inside the function,
//! integer literals, simple arithmetic (`+ - * / %`, shifts and bit operations of constants,
//! `div_ceil`, `size_of::<T>()`), `as` casts and the file's `const`s are resolved; a value that
//! cannot be (a parameter, `a.len()`, a command-line argument) becomes a size named after the
//! variable whose value is a visible TODO. Nothing is guessed: an unknown stays a TODO.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{BinOp, Expr, GenericArgument, Lit, Member, Pat, PathArguments, RangeLimits, Type, UnOp};

use super::skeleton::{Skeleton, Tensor, Value};
use crate::spec::diagnostic::did_you_mean;
use crate::spec::names::identifier_problem;

/// How deep the resolver follows bindings and sub-expressions before it gives up.
const MAX_DEPTH: usize = 64;
/// Bracket nesting beyond which a file is refused before parsing (syn recurses per level).
const MAX_NESTING: usize = 256;
/// The parser and the resolver run on a thread with this much stack (long operator chains
/// nest deeply in syn's tree).
const WORKER_STACK: usize = 256 << 20;
/// The largest Rust source file read (hand-written sources are far below; anything larger is a
/// generated or bundled file, or not a source file at all).
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// cudarc's `LaunchConfig::for_num_elems(n)`: block 1024, grid ceil(n / 1024), no shared memory.
const FOR_NUM_ELEMS_BLOCK: i128 = 1024;

/// The launch forms searched for, for the "nothing found" message.
const FORMS: &str = "`stream.launch_builder(&f).arg(..).launch(cfg)` (and `launch_cooperative`), \
`let mut b = stream.launch_builder(&f); b.arg(..); b.launch(cfg)`, and the older \
`f.launch(cfg, (args..))` / `f.launch_on_stream(&stream, cfg, (args..))`";

// ---------------------------------------------------------------------------------------------
// What the importer reports
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

/// The launch sites of `path`: all of them, or those `kernel` selects. A selector is a kernel
/// name (`gemm`), a name and a line (`gemm:88`, for a kernel launched in several places), or a
/// line alone (`88`, for a site whose kernel name is not visible).
pub fn import(path: &Path, kernel: Option<&str>) -> Result<Vec<LaunchSite>, ImportError> {
    import_with_search(path, kernel, None)
}

/// [`import`], also looking for the kernels' load calls in the other Rust files under `search`
/// (a kernel held in a struct is usually loaded where the struct is built, often another file).
pub fn import_with_search(
    path: &Path,
    kernel: Option<&str>,
    search: Option<&Path>,
) -> Result<Vec<LaunchSite>, ImportError> {
    let source = read_source(path)?;
    let others = match search {
        Some(dir) => Some(search_files(dir, path)?),
        None => None,
    };
    let file = path.display().to_string();
    let sites = analyze_guarded(&file, &source, others)?;
    select(&file, sites, kernel)
}

/// The folders `--search` does not enter: build output, version control, dependencies.
fn skipped_search_folder(name: &str) -> bool {
    name.starts_with('.') || matches!(name, "target" | "node_modules" | "build")
}

/// At most this much Rust source is read under a `--search` folder.
const MAX_SEARCH_BYTES: u64 = 256 << 20;

/// The Rust files under `dir` (but `file` itself), read: (folder as given, [(path, text)]). A
/// file that cannot be read as a source file is noted on stderr and skipped.
fn search_files(dir: &Path, file: &Path) -> Result<(String, Vec<(String, String)>), ImportError> {
    let meta = std::fs::metadata(dir).map_err(|source| ImportError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(ImportError::SearchNotAFolder {
            path: dir.to_path_buf(),
        });
    }
    let own = std::fs::canonicalize(file).ok();
    let walk = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_dir()
                || !skipped_search_folder(&e.file_name().to_string_lossy())
        });
    let (mut found, mut total) = (Vec::new(), 0u64);
    for entry in walk.flatten() {
        let path = entry.path();
        if entry.file_type().is_dir() || path.extension().map_or(true, |e| e != "rs") {
            continue;
        }
        if own.is_some() && std::fs::canonicalize(path).ok() == own {
            continue;
        }
        match read_source(path) {
            Ok(text) => {
                total += text.len() as u64;
                if total > MAX_SEARCH_BYTES {
                    eprintln!(
                        "note: --search {}: stopped before {} after reading {} MiB of Rust",
                        dir.display(),
                        path.display(),
                        MAX_SEARCH_BYTES >> 20
                    );
                    break;
                }
                found.push((path.display().to_string(), text));
            }
            Err(e) => eprintln!("note: --search skipped {e}"),
        }
    }
    Ok((dir.display().to_string(), found))
}

/// The tables of the files `--search` read; files that do not parse are skipped (they say
/// nothing reliable about the kernels).
fn elsewhere_of(dir: String, files: &[(String, String)]) -> Elsewhere {
    let mut out = Elsewhere {
        dir: Some(dir),
        files: 0,
        tables: Tables::default(),
    };
    let none = Elsewhere::default();
    for (path, text) in files {
        if too_deep(text).is_some() {
            continue;
        }
        let Ok(ast) = syn::parse_file(text) else {
            eprintln!("note: --search skipped {path}: not valid Rust");
            continue;
        };
        out.files += 1;
        let mut walker = Walker::default();
        walker.visit_file(&ast);
        let vec_macros = HashMap::new();
        let ctx = FileCtx {
            file: path,
            consts: walker.consts,
            structs: walker.structs,
            vec_macros: &vec_macros,
            tables: Tables::default(),
            elsewhere: &none,
        };
        out.tables
            .merge(file_tables(&ctx, &walker.done, Some(path)));
    }
    out
}

/// What kind of thing a path is, when it is not a regular file ("a fifo").
pub(crate) fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a fifo";
        }
        if ty.is_char_device() || ty.is_block_device() {
            return "a device";
        }
        if ty.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Reads a Rust source file, refusing what is not one before reading it: a fifo or a device
/// (`/dev/zero` never ends, a fifo blocks until someone writes), or a file above
/// [`MAX_SOURCE_BYTES`]. The read itself is bounded too, for a file that grows after the check.
fn read_source(path: &Path) -> Result<String, ImportError> {
    use std::io::Read;
    let read_error = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    // The path's metadata first: opening a fifo for reading would block until a writer comes.
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(ImportError::NotAFile {
            path: path.to_path_buf(),
            kind: file_kind(&meta),
        });
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(ImportError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
        });
    }
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(ImportError::TooLarge {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // Valid up to here, so this prefix is text.
        let before = String::from_utf8_lossy(valid);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ImportError::NotUtf8 {
            file: path.display().to_string(),
            line,
            column,
        }
    })
}

/// [`import`] over source text; `file` names it in locations and messages.
pub fn import_source(
    file: &str,
    source: &str,
    kernel: Option<&str>,
) -> Result<Vec<LaunchSite>, ImportError> {
    let sites = analyze_guarded(file, source, None)?;
    select(file, sites, kernel)
}

/// Every launch site of `path`, for `--list`.
pub fn list(path: &Path) -> Result<Vec<SiteSummary>, ImportError> {
    Ok(import(path, None)?
        .iter()
        .map(LaunchSite::summary)
        .collect())
}

/// The spec skeleton of one launch site.
pub fn skeleton(site: &LaunchSite) -> Skeleton {
    let kernel_name = match &site.kernel {
        Some(name) => name.clone(),
        None => format!(
            "TODO: the kernel's name ({}; launched at {})",
            site.kernel_source,
            site.location()
        ),
    };
    let mut notes = site.notes.clone();
    let header = match &site.kernel {
        Some(name) => format!("`{name}`"),
        None => "the kernel".to_string(),
    };
    notes.push(format!(
        "source.includes is empty: add the header that declares {header} (and its folder to include_dirs)."
    ));
    Skeleton {
        name: spec_name(site.kernel.as_deref().unwrap_or(&site.function)),
        origin: site.location(),
        includes: Vec::new(),
        include_dirs: Vec::new(),
        sizes: site.sizes.clone(),
        tensors: site.tensors.clone(),
        kernel_name,
        // A Rust launch site (cudarc) launches a __global__ kernel.
        device_function: false,
        template_args: Vec::new(),
        args: site.args.iter().map(Arg::spec_value).collect(),
        grid: site.grid.clone(),
        block: site.block.clone(),
        smem: site.smem.clone(),
        notes,
    }
}

/// A spec name (`[a-z0-9_]+`) from a kernel or function name.
fn spec_name(from: &str) -> String {
    let mut out = String::new();
    for c in from.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_string();
    if out.is_empty() {
        "imported".to_string()
    } else {
        out
    }
}

fn select(
    file: &str,
    sites: Vec<LaunchSite>,
    selector: Option<&str>,
) -> Result<Vec<LaunchSite>, ImportError> {
    if sites.is_empty() {
        return Err(ImportError::NoLaunchSite {
            file: file.to_string(),
        });
    }
    let Some(selector) = selector.map(str::trim) else {
        return Ok(sites);
    };
    let (name, line) = parse_selector(selector);
    let picked: Vec<LaunchSite> = sites
        .iter()
        .filter(|s| s.matches(name, line))
        .cloned()
        .collect();
    if !picked.is_empty() {
        return Ok(picked);
    }
    let names: Vec<&str> = sites
        .iter()
        .flat_map(|s| s.kernel.iter().chain(&s.handles))
        .map(String::as_str)
        .collect();
    let suggestion = match name {
        Some(n) if line.is_some() && names.contains(&n) => Some(
            // The name exists, the line does not: suggest the name's own sites.
            sites
                .iter()
                .find(|s| s.matches(Some(n), None))
                .map(|s| format!("{n}:{}", s.line))
                .unwrap_or_default(),
        ),
        Some(n) => did_you_mean(n, names.iter().copied()).map(str::to_string),
        None => None,
    };
    Err(ImportError::NoSuchKernel {
        file: file.to_string(),
        wanted: selector.to_string(),
        suggestion,
        sites: sites.iter().map(LaunchSite::summary).collect(),
    })
}

/// `NAME`, `NAME:LINE` or `LINE`.
fn parse_selector(selector: &str) -> (Option<&str>, Option<usize>) {
    if let Ok(line) = selector.parse::<usize>() {
        return (None, Some(line));
    }
    if let Some((name, line)) = selector.rsplit_once(':') {
        if let Ok(line) = line.trim().parse::<usize>() {
            return (Some(name.trim()), Some(line));
        }
    }
    (Some(selector), None)
}

/// Parses and resolves on a worker thread with a large stack; a panic there (a bug) becomes an
/// error, never a crash of `repro`.
fn analyze_guarded(
    file: &str,
    source: &str,
    others: Option<(String, Vec<(String, String)>)>,
) -> Result<Vec<LaunchSite>, ImportError> {
    if let Some((line, column)) = too_deep(source) {
        return Err(ImportError::Parse {
            file: file.to_string(),
            line,
            column,
            message: format!("brackets nest more than {MAX_NESTING} deep"),
        });
    }
    let (owned_file, owned_source) = (file.to_string(), source.to_string());
    let worker = std::thread::Builder::new()
        .name("repro-import-rust".into())
        .stack_size(WORKER_STACK)
        .spawn(move || {
            let elsewhere = match others {
                Some((dir, files)) => elsewhere_of(dir, &files),
                None => Elsewhere::default(),
            };
            analyze(&owned_file, &owned_source, &elsewhere)
        });
    match worker {
        Ok(handle) => handle.join().unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the importer panicked".into());
            Err(ImportError::Internal {
                file: file.to_string(),
                message,
            })
        }),
        Err(_) => Err(ImportError::Internal {
            file: file.to_string(),
            message: "cannot start the parser's thread".into(),
        }),
    }
}

/// Where bracket nesting first exceeds [`MAX_NESTING`] (counting naively, strings included: an
/// upper bound no real file comes near).
fn too_deep(source: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let (mut line, mut column) = (1, 0);
    for c in source.chars() {
        column += 1;
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '\n' => {
                line += 1;
                column = 0;
            }
            _ => {}
        }
    }
    None
}

fn analyze(
    file: &str,
    source: &str,
    elsewhere: &Elsewhere,
) -> Result<Vec<LaunchSite>, ImportError> {
    let ast = syn::parse_file(source).map_err(|e| {
        let start = e.span().start();
        let mut message = e.to_string();
        if message == "cannot parse string into token stream" {
            // proc-macro2's lexer error says no more than this.
            message = "cannot split the file into tokens: an unclosed or mismatched bracket, or an unterminated string, char or comment, near here".into();
        }
        ImportError::Parse {
            file: file.to_string(),
            line: start.line.max(1),
            column: start.column + 1,
            message,
        }
    })?;
    let mut walker = Walker::default();
    walker.visit_file(&ast);
    let vec_macros: HashMap<usize, VecMacro> = walker
        .vec_macros
        .iter()
        .filter_map(|m| {
            syn::parse2::<VecMacro>(m.tokens.clone())
                .ok()
                .map(|v| (*m as *const syn::Macro as usize, v))
        })
        .collect();
    let mut ctx = FileCtx {
        file,
        consts: walker.consts,
        structs: walker.structs,
        vec_macros: &vec_macros,
        tables: Tables::default(),
        elsewhere,
    };
    ctx.tables = file_tables(&ctx, &walker.done, None);
    let mut sites = Vec::new();
    for fun in &walker.done {
        for call in &fun.launches {
            if let Some(site) = Resolver::site(&ctx, fun, call) {
                sites.push(site);
            }
        }
    }
    sites.sort_by_key(|s| (s.line, s.column));
    Ok(sites)
}

// ---------------------------------------------------------------------------------------------
// Walking the file
// ---------------------------------------------------------------------------------------------

/// Line (1-based) and column (0-based, in chars) of a token.
type Pos = (usize, usize);

fn pos_of(span: Span) -> Pos {
    let lc = span.start();
    (lc.line, lc.column)
}

fn end_of(span: Span) -> Pos {
    let lc = span.end();
    (lc.line, lc.column)
}

fn start<T: Spanned + ?Sized>(node: &T) -> Pos {
    pos_of(node.span())
}

fn line_of<T: Spanned + ?Sized>(node: &T) -> usize {
    node.span().start().line
}

/// The source text of a node, whitespace collapsed and cut to a readable length.
fn snippet<T: Spanned + ?Sized>(node: &T) -> String {
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
enum BindKind {
    /// `let x = ..` (with `init` when the value expression is known).
    Let,
    /// A function parameter.
    Param,
    /// Bound by a pattern (closure/`for`/`match`/destructuring): no value known.
    Pattern,
    /// `x = ..` or `x += ..` after the `let`: no value known.
    Reassigned,
}

struct Binding<'a> {
    name: String,
    /// From here on the name refers to this binding ...
    visible: Pos,
    /// ... until here (the end of the enclosing block, closure, loop or arm).
    scope_end: Option<Pos>,
    line: usize,
    init: Option<&'a Expr>,
    ty: Option<&'a Type>,
    kind: BindKind,
}

/// `var.field = value` (value None: modified in a way that is not a plain assignment).
struct FieldAssign<'a> {
    var: String,
    field: String,
    pos: Pos,
    line: usize,
    value: Option<&'a Expr>,
    /// The member assigned, at any depth (`c` of `self.kernels.c = ..`), and its value: where
    /// a struct's kernel functions are set after construction.
    member: String,
    rhs: Option<&'a Expr>,
}

/// `map.insert(key, value)`: where a map of kernel functions is filled.
struct MapInsert<'a> {
    /// The map's variable or field name (`kernels` of `self.kernels.insert(..)`).
    map: String,
    key: &'a Expr,
    value: &'a Expr,
}

/// `var.arg(expr)` on a launch-builder variable (or anything else named `arg`).
struct Push<'a> {
    var: String,
    pos: Pos,
    expr: &'a Expr,
}

/// `Struct { field: expr }`: where a struct's kernel functions are set.
struct FieldInit<'a> {
    field: String,
    expr: &'a Expr,
}

struct FnInfo<'a> {
    name: String,
    self_ty: Option<String>,
    generics: Vec<String>,
    bindings: Vec<Binding<'a>>,
    assigns: Vec<FieldAssign<'a>>,
    pushes: Vec<Push<'a>>,
    launches: Vec<&'a syn::ExprMethodCall>,
    field_inits: Vec<FieldInit<'a>>,
    inserts: Vec<MapInsert<'a>>,
    /// `for x in EXPR`: the binding (an index into `bindings`) and what it iterates over.
    loop_vars: Vec<(usize, &'a Expr)>,
}

#[derive(Default)]
struct Walker<'a> {
    /// Enclosing `impl` blocks: self type name and generic parameters.
    impls: Vec<(String, Vec<String>)>,
    stack: Vec<FnInfo<'a>>,
    done: Vec<FnInfo<'a>>,
    /// Constants of the file by name (None: defined more than once).
    consts: HashMap<String, Option<(&'a Expr, &'a Type)>>,
    /// (struct, field, type) of every named struct field.
    structs: Vec<(String, String, &'a Type)>,
    vec_macros: Vec<&'a syn::Macro>,
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
fn place_name(e: &Expr) -> Option<String> {
    match peel_value(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        Expr::Field(f) => match &f.member {
            Member::Named(n) => Some(n.to_string()),
            Member::Unnamed(_) => None,
        },
        _ => None,
    }
}

fn ident_of(e: &Expr) -> Option<String> {
    match peel_paren(e) {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

fn peel_paren(mut e: &Expr) -> &Expr {
    loop {
        match e {
            Expr::Paren(p) => e = &p.expr,
            Expr::Group(g) => e = &g.expr,
            _ => return e,
        }
    }
}

/// The tail expression of a block that is nothing but that expression.
fn block_tail(b: &syn::Block) -> Option<&Expr> {
    match b.stmts.as_slice() {
        [syn::Stmt::Expr(e, None)] => Some(e),
        _ => None,
    }
}

/// Strips what does not change which value an expression denotes: parentheses, `?`,
/// `.unwrap()`, `.expect(..)`, `.clone()`, references, derefs, single-expression blocks.
fn peel_value(mut e: &Expr) -> &Expr {
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
fn peel_kernel(mut e: &Expr) -> &Expr {
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
fn peel_refs(e: &Expr) -> (&Expr, Option<bool>) {
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
enum VecMacro {
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

// ---------------------------------------------------------------------------------------------
// Resolving
// ---------------------------------------------------------------------------------------------

struct FileCtx<'a> {
    file: &'a str,
    consts: HashMap<String, Option<(&'a Expr, &'a Type)>>,
    structs: Vec<(String, String, &'a Type)>,
    vec_macros: &'a HashMap<usize, VecMacro>,
    /// Where this file stores its kernel functions.
    tables: Tables,
    /// The same, from the other files of `--search DIR`: consulted when this file has nothing.
    elsewhere: &'a Elsewhere,
}

/// Where kernel functions are stored, and which kernel each holds: (kernel name, how found).
#[derive(Debug, Default)]
struct Tables {
    /// Struct field → what it is set to: `Struct { field: module.load_function("k")? }`, the
    /// shorthand `Struct { field }` of a `let` so bound, or `x.field = module.load_function(..)`.
    fields: HashMap<String, Vec<(String, String)>>,
    /// Map (variable or field) → its entries.
    maps: HashMap<String, MapTable>,
}

#[derive(Debug, Default)]
struct MapTable {
    /// `map.insert("key", module.load_function("k")?)`: key → kernel.
    entries: HashMap<String, Vec<(String, String)>>,
    /// `map.insert(name.to_string(), module.load_function(name)?)`: every key is the kernel's
    /// own name (where that insert is).
    keyed_by_name: Option<String>,
}

impl Tables {
    fn merge(&mut self, other: Tables) {
        for (field, found) in other.fields {
            self.fields.entry(field).or_default().extend(found);
        }
        for (map, table) in other.maps {
            let mine = self.maps.entry(map).or_default();
            for (key, found) in table.entries {
                mine.entries.entry(key).or_default().extend(found);
            }
            if mine.keyed_by_name.is_none() {
                mine.keyed_by_name = table.keyed_by_name;
            }
        }
    }
}

/// What `--search DIR` found in the other Rust files under DIR.
#[derive(Debug, Default)]
pub struct Elsewhere {
    /// The folder searched (None: no `--search`).
    dir: Option<String>,
    /// Rust files read and parsed there.
    files: usize,
    tables: Tables,
}

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
fn file_tables<'a>(ctx: &FileCtx<'a>, fns: &[FnInfo<'a>], origin: Option<&str>) -> Tables {
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

/// `f(..)` where the called path ends in one of `names` (`String::from`, `Arc::new`).
fn is_path_call(c: &syn::ExprCall, names: &[&str]) -> bool {
    matches!(peel_paren(&c.func), Expr::Path(p)
        if p.path.segments.last().is_some_and(|s| names.iter().any(|n| s.ident == n)))
}

/// A cudarc call that loads a CUDA function, and its name argument.
struct LoadCall<'a> {
    call: &'a syn::ExprMethodCall,
    name_arg: Option<&'a Expr>,
}

struct KernelRef {
    name: Option<String>,
    how: String,
    /// The names the kernel function is held by on the way from the launch to its load call:
    /// the local, the struct field, the map key (`--kernel` takes any of them).
    handles: Vec<String>,
    /// The field or map key among them (a local is named in `handles` only): what `--list`
    /// says the kernel is held in.
    holder: Option<String>,
}

/// An integer expression, resolved as far as the function allows.
#[derive(Debug, Clone)]
enum Int {
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
struct Leaf {
    /// The Rust expression it stands for (`n`, `self.m`, `a.len()`): one size per key.
    key: String,
    /// The name it would like.
    name: String,
    value: Value,
}

fn marker(key: &str) -> String {
    format!("\u{1}{key}\u{2}")
}

fn leaf(key: String, name: String, value: Value) -> Int {
    Int::Sym {
        text: marker(&key),
        prec: P_ATOM,
        leaves: vec![Leaf { key, name, value }],
    }
}

/// What the Rust type of an expression says about it as a kernel argument.
#[derive(Clone)]
enum Ty<'a> {
    /// A device buffer (`CudaSlice`, `CudaView`, `CudaViewMut`).
    Buffer {
        elem: Elem,
        len: Len<'a>,
        /// Writable (`&mut`, `CudaViewMut`), read-only (`&`, `CudaView`), or not known.
        mutable: Option<bool>,
        /// A view of another buffer (its length is not the allocation's).
        view: bool,
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
enum Elem {
    Dtype(&'static str),
    /// A generic parameter of the function.
    Generic(String),
    /// A Rust type with no spec dtype.
    Unsupported(String),
    Unknown(String),
}

#[derive(Clone, Copy)]
enum Len<'a> {
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

const INT_TYPES: &[&str] = &[
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
];
const FLOAT_TYPES: &[&str] = &["f32", "f64", "f16", "bf16"];

fn int_size_of(rust: &str) -> Option<i128> {
    Some(match rust {
        "i8" | "u8" | "bool" | "F8E4M3" | "F8E5M2" => 1,
        "i16" | "u16" | "f16" | "bf16" => 2,
        "i32" | "u32" | "f32" => 4,
        "i64" | "u64" | "f64" | "usize" | "isize" => 8,
        "i128" | "u128" => 16,
        _ => return None,
    })
}

fn last_type_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Reference(r) => last_type_ident(&r.elem),
        Type::Paren(p) => last_type_ident(&p.elem),
        Type::Group(g) => last_type_ident(&g.elem),
        _ => None,
    }
}

fn is_int_type(ty: &Type) -> bool {
    last_type_ident(ty).is_some_and(|t| INT_TYPES.contains(&t.as_str()))
}

/// The first type argument of a path segment (`CudaView<'a, T>` → `T`).
fn first_type_arg(seg: &syn::PathSegment) -> Option<&Type> {
    match &seg.arguments {
        PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

fn turbofish_type(m: &syn::ExprMethodCall) -> Option<&Type> {
    m.turbofish.as_ref()?.args.iter().find_map(|g| match g {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// The second-to-last segment of a path (`bf16::from_f32` → `bf16`).
fn type_segment(path: &syn::Path) -> Option<String> {
    let n = path.segments.len();
    (n >= 2).then(|| path.segments[n - 2].ident.to_string())
}

/// Everything needed to resolve inside one function for one launch site.
struct Resolver<'r, 'a> {
    ctx: &'r FileCtx<'a>,
    fun: &'r FnInfo<'a>,
    /// The launch site's line, for "at the launch site" messages.
    site_line: usize,
    /// Keys of the integer variables passed as kernel arguments: they stay named sizes in
    /// grid/shape expressions even when their value is known.
    preferred: HashSet<String>,
    /// False while computing the value of a size itself (names are kept only in expressions).
    keep_names: Cell<bool>,
}

impl<'r, 'a: 'r> Resolver<'r, 'a> {
    fn new(ctx: &'r FileCtx<'a>, fun: &'r FnInfo<'a>, site_line: usize) -> Self {
        Resolver {
            ctx,
            fun,
            site_line,
            preferred: HashSet::new(),
            keep_names: Cell::new(true),
        }
    }

    fn at_site(&self) -> String {
        format!("at the launch site ({}:{})", self.ctx.file, self.site_line)
    }

    fn binding(&self, name: &str, at: Pos) -> Option<&'r Binding<'a>> {
        self.fun
            .bindings
            .iter()
            .filter(|b| {
                b.name == name && b.visible <= at && b.scope_end.map_or(true, |end| at <= end)
            })
            .max_by_key(|b| b.visible)
    }

    fn constant(&self, name: &str) -> Option<Option<(&'a Expr, &'a Type)>> {
        self.ctx.consts.get(name).copied()
    }

    /// The type of `self.field` (or of a field of that name, when only one struct has it).
    fn field_type(&self, base: &Expr, field: &str) -> Option<&'a Type> {
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

    fn kernel_ref(&self, e: &'a Expr, depth: usize) -> KernelRef {
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

    // ---- integers ---------------------------------------------------------------------------

    fn int(&self, e: &'a Expr, depth: usize) -> Int {
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
    fn float(&self, e: &'a Expr, depth: usize) -> Option<String> {
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

    fn boolean(&self, e: &'a Expr, depth: usize) -> Option<bool> {
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

    // ---- types ------------------------------------------------------------------------------

    fn ty_of_type(&self, ty: &'a Type) -> Ty<'a> {
        match ty {
            Type::Reference(r) => match self.ty_of_type(&r.elem) {
                Ty::Buffer {
                    elem, len, view, ..
                } => Ty::Buffer {
                    elem,
                    len,
                    mutable: Some(r.mutability.is_some()),
                    view,
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

    fn ty_of(&self, e: &'a Expr, depth: usize) -> Ty<'a> {
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
                    elem, len, view, ..
                } => Ty::Buffer {
                    elem,
                    len,
                    mutable: Some(r.mutability.is_some()),
                    view,
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
                    },
                    _ => Ty::Unknown,
                }
            }
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

    // ---- launch configs ---------------------------------------------------------------------

    fn config(&self, e: &'a Expr, depth: usize, site: &mut SiteState) -> Config {
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

    // ---- the launch site ----------------------------------------------------------------------

    fn site(
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
            } => {
                let output = outer_ref.or(mutable);
                ArgKind::Tensor(self.tensor(inner, index, elem, len, view, output, site))
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

struct Config {
    grid: [Value; 3],
    block: [Value; 3],
    smem: Value,
    /// Where it came from, for the notes.
    how: String,
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

/// Removes what does not change an integer's value: casts, parentheses, `try_into().unwrap()`.
fn strip_int_wrappers(mut e: &Expr) -> &Expr {
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
fn nameable_ident(e: &Expr) -> Option<String> {
    ident_of(e)
}

/// A field, `x.len()` or `x[0]`: a runtime value that becomes a size of its own.
fn is_runtime_leaf(e: &Expr) -> bool {
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
fn base_name(e: &Expr) -> String {
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

// ---------------------------------------------------------------------------------------------
// Names, sizes and tensors of one site
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct SiteState {
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
    fn finish(&mut self, text: &str, leaves: &[Leaf]) -> String {
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
