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
//!
//! An argument is a tensor, a size or a value by its Rust type (`types`): cudarc buffers and raw
//! device pointers (`CUdeviceptr`, `device_ptr()`) are tensors, integers sizes. A builder takes
//! every argument by reference, so `.arg(&x)` with `x`'s type out of sight is a value TODO, never
//! a size; the argument tuple takes scalars by value, so a reference there is a tensor whatever
//! its type reads as (docs/cli.md, `repro import`).
//!
//! The parts: `report` (the public types: sites, arguments, errors, `--list` lines),
//! `files` (reading a source file safely, the `--search` folder), `walk` (the one syn pass
//! that records each function's bindings, assignments, pushes and launches), then the resolver
//! of one site: `resolve` (its core and integer/float/bool values), `types` (what an
//! argument's Rust type says), `kernels` (which CUDA function a launch uses, through fields,
//! maps and `--search`), `config` (grid, block and shared memory) and `site` (recognizing a
//! launch and assembling the site), over `tables` (where kernel functions are stored) and
//! `type_names` (what a type's own words say). This module holds the entry points.

mod config;
mod files;
mod kernels;
mod report;
mod resolve;
mod site;
mod tables;
mod type_names;
mod types;
mod walk;

use std::collections::HashMap;
use std::path::Path;

use syn::visit::Visit;

use super::skeleton::Skeleton;
use files::{read_source, search_files};
pub use report::{selectors, Arg, ArgKind, ImportError, LaunchForm, LaunchSite, SiteSummary};
use repro_text::did_you_mean;
use tables::Elsewhere;

use kernels::file_tables;
use resolve::{FileCtx, Resolver};
use tables::Tables;
use walk::{VecMacro, Walker};

/// How deep the resolver follows bindings and sub-expressions before it gives up.
pub(super) const MAX_DEPTH: usize = 64;
/// Bracket nesting beyond which a file is refused before parsing (syn recurses per level).
const MAX_NESTING: usize = 256;
/// The parser and the resolver run on a thread with this much stack (long operator chains
/// nest deeply in syn's tree).
const WORKER_STACK: usize = 256 << 20;
/// The largest Rust source file read (hand-written sources are far below; anything larger is a
/// generated or bundled file, or not a source file at all).
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// cudarc's `LaunchConfig::for_num_elems(n)`: block 1024, grid ceil(n / 1024), no shared memory.
pub(super) const FOR_NUM_ELEMS_BLOCK: i128 = 1024;

/// The launch forms searched for, for the "nothing found" message.
const FORMS: &str = "`stream.launch_builder(&f).arg(..).launch(cfg)` (and `launch_cooperative`), \
`let mut b = stream.launch_builder(&f); b.arg(..); b.launch(cfg)`, and the older \
`f.launch(cfg, (args..))` / `f.launch_on_stream(&stream, cfg, (args..))`";

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

pub(super) fn select(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_as_name_line_or_both() {
        assert_eq!(parse_selector("gemm"), (Some("gemm"), None));
        assert_eq!(parse_selector("gemm:88"), (Some("gemm"), Some(88)));
        assert_eq!(parse_selector("88"), (None, Some(88)));
        assert_eq!(parse_selector("a::b"), (Some("a::b"), None));
    }

    #[test]
    fn spec_names_from_kernel_names() {
        assert_eq!(spec_name("SgemmNaive"), "sgemmnaive");
        assert_eq!(spec_name("Ops::run-fast"), "ops_run_fast");
        assert_eq!(spec_name("__"), "imported");
    }

    #[test]
    fn nesting_is_bounded_before_parsing() {
        assert_eq!(too_deep("fn f() { (1) }"), None);
        let deep = format!("fn f() {{\n{}", "(".repeat(MAX_NESTING + 1));
        assert_eq!(too_deep(&deep), Some((2, MAX_NESTING)));
        let e = import_source("deep.rs", &deep, None).unwrap_err();
        assert!(matches!(e, ImportError::Parse { line: 2, .. }), "{e}");
    }

    #[test]
    fn a_file_without_launches_or_valid_rust() {
        let e = import_source("none.rs", "fn main() { f.launch_me(); }", None).unwrap_err();
        assert!(matches!(e, ImportError::NoLaunchSite { .. }), "{e}");
        let e = import_source("bad.rs", "fn main( {", None).unwrap_err();
        assert!(matches!(e, ImportError::Parse { .. }), "{e}");
    }
}
