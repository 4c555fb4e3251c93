//! `repro import cuda PATH --kernel NAME`: find a `__global__` (or `__device__`) function in a CUDA
//! source tree and describe it as a spec [`Skeleton`](crate::skeleton::Skeleton).
//!
//! This is a careful scanner, not a C++ parser. Each file is lexed with comments, string and
//! character literals (raw strings included), line splices and preprocessor directives taken out
//! of the token stream; `#if 0` / `#if 1 ... #else` regions are dropped; object- and function-like
//! macros defined in the file or in the files it includes (found in the same tree) are expanded
//! (no `#`/`##`) when nvcc would see one definition: one under `#ifdef X` where neither the tree
//! nor nvcc defines X is set aside (and reported when the declaration uses the macro, since a -D
//! flag may define X), and of several the only one spelling CUDA keywords wins (`#ifdef
//! __CUDACC__`); a macro still ambiguous is left as written and reported. Then the namespace-scope
//! declarations are read with `()`, `[]`, `{}` and template `<>` nesting tracked (a `<` inside
//! parentheses is a comparison). Function bodies and class bodies are skipped as balanced braces.
//!
//! Which files: `root` itself when it is a file (whatever its extension), else every file under it
//! ending in `.cu .cuh .h .hpp .hh .cuhpp .inl`, in file-name order, not following symbolic links
//! to folders, skipping folders that hold build output or version control and never sources:
//! hidden folders (`.git`, `.hg`, `.svn`, `.venv`, `.cache`...), `build`, `build-*`,
//! `cmake-build-*`, `CMakeFiles`, `target`, `node_modules`, `__pycache__`, `dist`, `_deps` (CMake
//! FetchContent downloads). Vendored code (`third_party`, `external`, `3rdparty`) is scanned: a
//! kernel there is a legitimate target, and a copy that duplicates a project kernel shows up as
//! an ambiguity with both paths, which a narrower PATH resolves. A folder given as `root` is
//! scanned even when its own name is on that list.
//!
//! The parts, in the order a file goes through them: `lex` (tokens, directives, dead `#if`
//! regions), `macros` (the macro table and its expansion), `brackets` (nesting-aware search
//! over token slices), `declarations` (namespace-scope function declarations) reading types with
//! `types`, `tree` (which files, reading them, resolving includes), then `skeleton` (the
//! spec). This module holds the public types and [`find`], which merges what the scan found.

mod brackets;
mod declarations;
mod lex;
mod macros;
mod skeleton;
mod tree;
mod types;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

pub use self::skeleton::{skeleton, spec_dtype};
pub use self::tree::source_files;

use declarations::{FnKind, Found, TemplateHead};
use tree::{read_checked, Tree};

/// File name endings scanned under a folder.
pub const EXTENSIONS: &[&str] = &["cu", "cuh", "h", "hpp", "hh", "cuhpp", "inl"];

/// Why `repro import cuda` found nothing to import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{kernel}` is not a kernel name: {why}")]
    BadName { kernel: String, why: String },

    #[error("{}", not_found_message(kernel, root, *files_scanned, suggestions, host_functions))]
    NotFound {
        kernel: String,
        root: PathBuf,
        /// Source files read.
        files_scanned: usize,
        /// Similar `__global__` (then `__device__`) names, as `name (path:line)`, best first.
        suggestions: Vec<String>,
        /// `path:line` of functions with exactly that name that are neither `__global__` nor
        /// `__device__` (host code).
        host_functions: Vec<String>,
    },
}

fn not_found_message(
    kernel: &str,
    root: &Path,
    files_scanned: usize,
    suggestions: &[String],
    host_functions: &[String],
) -> String {
    let files = match files_scanned {
        0 => format!(
            "no CUDA source file ({}) was found there",
            EXTENSIONS
                .iter()
                .map(|e| format!(".{e}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        1 => "1 file scanned".to_string(),
        n => format!("{n} files scanned; build and version-control folders skipped"),
    };
    let mut out = format!(
        "no `__global__` or `__device__` function named `{kernel}` under {} ({files})",
        root.display()
    );
    if !host_functions.is_empty() {
        out.push_str(&format!(
            "\nnote: `{kernel}` is declared as a host function (not __global__ or __device__) at {}",
            host_functions.join(", ")
        ));
    }
    if suggestions.is_empty() {
        if files_scanned > 0 {
            out.push_str("\nnote: no similar kernel name was found");
        }
    } else {
        out.push_str(&format!("\nhelp: did you mean {}?", suggestions.join(", ")));
    }
    out
}

/// `__global__` or `__device__`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// A `__global__` kernel: the spec's default `kind: global`.
    Global,
    /// A `__device__` function (a task body) found because no `__global__` has that name: the
    /// spec needs `kernel.kind: device`.
    Device,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TemplateParamKind {
    /// `typename T`, `class T`
    Type,
    /// `int BM`, `bool B`, `auto V`: the type as written.
    Value(String),
    /// `template <typename> class C`
    Template,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateParam {
    pub kind: TemplateParamKind,
    /// None for an unnamed parameter (`typename = void`).
    pub name: Option<String>,
    /// The default, verbatim (`128`, `TileCfg<BM, 64>`).
    pub default: Option<String>,
    /// A parameter pack (`typename... Ts`).
    pub pack: bool,
}

/// How a kernel parameter's type reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamType {
    /// A pointer or array to one element type: a buffer. `element` is the pointee as written
    /// (cv-qualifiers dropped), `resolved` the same after `using`/`typedef` aliases when that
    /// differs.
    Pointer {
        element: String,
        resolved: Option<String>,
        is_const: bool,
    },
    /// An integer scalar (`int`, `int64_t`, `size_t`, `unsigned`...): a size.
    Integer(String),
    /// A floating-point scalar (`float`, `double`, `half`, `__nv_bfloat16`...).
    Float(String),
    Bool,
    /// A `CUtensorMap` (TMA descriptor) by value.
    TensorMap,
    /// A template type parameter by value (`T alpha`).
    TemplateValue(String),
    /// Anything else (struct by value, reference, pointer to pointer, function pointer): the type
    /// as written.
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// None when the declaration leaves the parameter unnamed.
    pub name: Option<String>,
    /// The parameter as written, on one line, without comments or default.
    pub text: String,
    pub ty: ParamType,
    /// The default argument, verbatim.
    pub default: Option<String>,
    /// The macro the element type (or scalar type) came out of, when it was one (`ACC* partial`).
    pub element_macro: Option<String>,
}

/// One kernel declaration (or definition) found in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDecl {
    /// The name as declared.
    pub name: String,
    /// With its enclosing named namespaces (`hopper::tma_gemm`): what the harness calls.
    pub qualified_name: String,
    pub kind: KernelKind,
    /// The file, as reached from the `root` given to [`find`].
    pub path: PathBuf,
    /// 1-based line of the function's name.
    pub line: usize,
    /// Whether this is a definition (has a body); when a definition and declarations were all
    /// found, the definition is kept and the declarations are listed in `declared_at`.
    pub definition: bool,
    /// Other declarations of the same function (`path:line`).
    pub declared_at: Vec<String>,
    /// Declared `extern "C"` (or inside an `extern "C" { }` block).
    pub extern_c: bool,
    /// Declaration specifiers other than the return type, in order (`static`, `__forceinline__`...).
    pub specifiers: Vec<String>,
    /// The arguments of `__launch_bounds__(...)`, verbatim.
    pub launch_bounds: Option<String>,
    /// The arguments of `__cluster_dims__(...)`, verbatim.
    pub cluster_dims: Option<String>,
    pub template_params: Vec<TemplateParam>,
    pub params: Vec<Param>,
    /// Whether the body declares `extern __shared__` (dynamic shared memory); None without a body.
    pub dynamic_smem: Option<bool>,
    /// The declaration on one line, comments dropped, macros expanded.
    pub signature: String,
    /// Macros expanded inside the declaration, as `NAME`.
    pub macros: Vec<String>,
    /// Macros used in the declaration that have several definitions, so were left as written.
    pub ambiguous_macros: Vec<String>,
    /// Macros expanded in the declaration that have other definitions under an `#ifdef X` where
    /// nothing in the tree defines X (the production flags may): (name, what each gives).
    pub macro_alternatives: Vec<(String, String)>,
    /// Explicit instantiations and specializations of this template found in the tree, as
    /// `name<args> (path:line)`.
    pub instantiations: Vec<String>,
}

impl KernelDecl {
    /// `path:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.path.display(), self.line)
    }

    /// A declaration that comes from no C++ source (a Triton kernel's signature): its name,
    /// where it is written and its parameters, nothing else.
    pub fn foreign(
        name: &str,
        kind: KernelKind,
        path: PathBuf,
        line: usize,
        params: Vec<Param>,
    ) -> Self {
        KernelDecl {
            name: name.to_string(),
            qualified_name: name.to_string(),
            kind,
            path,
            line,
            definition: true,
            declared_at: Vec::new(),
            extern_c: true,
            specifiers: Vec::new(),
            launch_bounds: None,
            cluster_dims: None,
            template_params: Vec::new(),
            signature: format!(
                "{name}({})",
                params
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            params,
            dynamic_smem: None,
            macros: Vec::new(),
            ambiguous_macros: Vec::new(),
            macro_alternatives: Vec::new(),
            instantiations: Vec::new(),
        }
    }
}

/// Every `__global__` and `__device__` function declared at namespace scope in `text` (one file,
/// its own macros only), in order, declarations and definitions alike. For tests and tools.
pub fn declarations_in(path: &Path, text: &str) -> Vec<KernelDecl> {
    let mut tree = Tree::new(vec![path.to_path_buf()]);
    tree.scan(0, text)
        .found
        .into_iter()
        .filter(|f| f.fn_kind != FnKind::Host)
        .map(|f| f.decl)
        .collect()
}

fn check_name(kernel: &str) -> Result<(), ImportError> {
    let bad = |why: &str| {
        Err(ImportError::BadName {
            kernel: kernel.to_string(),
            why: why.to_string(),
        })
    };
    if kernel.contains('<') {
        return bad("give the name without template arguments (they go in `kernel.template_args`)");
    }
    let parts: Vec<&str> = kernel.trim_start_matches("::").split("::").collect();
    let ident = |p: &&str| {
        let mut c = p.chars();
        c.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if parts.iter().all(ident) {
        Ok(())
    } else {
        bad("expected a C++ function name, optionally namespace-qualified (`gemm`, `ns::gemm`)")
    }
}

/// Finds the `__global__` functions named `kernel` under `root` (a file or a folder); when none
/// has that name, the `__device__` functions of that name ([`KernelKind::Device`]). `kernel` may
/// be namespace-qualified (`hopper::tma_gemm`). Declarations and the definition of one function
/// count once (the definition is returned, the declarations listed in `declared_at`); explicit
/// instantiations and specializations of a template are listed in its `instantiations`. Several
/// results mean the name is ambiguous (overloads, or copies in several files).
pub fn find(root: &Path, kernel: &str) -> Result<Vec<KernelDecl>, ImportError> {
    check_name(kernel)?;
    let wanted = kernel.trim_start_matches("::");
    let short = wanted.rsplit("::").next().unwrap_or(wanted).to_string();
    let files = source_files(root)?;
    let mut tree = Tree::new(files.clone());
    let mut all: Vec<Found> = Vec::new();
    let mut scanned = 0;
    for (k, path) in files.iter().enumerate() {
        let text = match read_checked(path) {
            Ok(text) => text,
            Err(why) if path.as_path() == root => {
                // The file named on the command line: nothing else to search.
                return Err(ImportError::Io {
                    path: root.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
                });
            }
            Err(why) => {
                // Said, not fatal: one odd file in a tree must not stop the search.
                eprintln!("note: skipped {}: {why}", path.display());
                continue;
            }
        };
        scanned += 1;
        if !(text.contains(&short) || text.contains("__global__") || text.contains("GLOBAL")) {
            continue;
        }
        all.extend(tree.scan(k, &text).found);
    }
    // `hopper::tma_gemm` names `hopper::v2::tma_gemm` (an inline namespace) too: the components
    // asked for must appear in order in the qualified name.
    let wanted_parts: Vec<&str> = wanted.split("::").collect();
    let matches_name = |d: &KernelDecl| {
        if d.name != short {
            return false;
        }
        let mut have = d.qualified_name.split("::");
        wanted_parts.iter().all(|w| have.any(|h| h == *w))
    };
    for kind in [FnKind::Global, FnKind::Device] {
        let named: Vec<&Found> = all
            .iter()
            .filter(|f| f.fn_kind == kind && matches_name(&f.decl))
            .collect();
        if named.is_empty() {
            continue;
        }
        let mut result = merge(&named);
        if result.is_empty() {
            continue;
        }
        for d in &mut result {
            d.kind = if kind == FnKind::Global {
                KernelKind::Global
            } else {
                KernelKind::Device
            };
        }
        return Ok(result);
    }
    let host_functions = all
        .iter()
        .filter(|f| f.fn_kind == FnKind::Host && matches_name(&f.decl))
        .map(|f| f.decl.location())
        .collect();
    Err(ImportError::NotFound {
        kernel: kernel.to_string(),
        root: root.to_path_buf(),
        files_scanned: scanned,
        suggestions: suggestions(&short, &all),
        host_functions,
    })
}

/// Groups declarations, definitions and explicit instantiations of one function into one result.
fn merge(named: &[&Found]) -> Vec<KernelDecl> {
    let primaries: Vec<&Found> = named
        .iter()
        .copied()
        .filter(|f| !matches!(f.template, TemplateHead::Explicit(_)))
        .collect();
    let explicit: Vec<&Found> = named
        .iter()
        .copied()
        .filter(|f| matches!(f.template, TemplateHead::Explicit(_)))
        .collect();
    // Only specializations/instantiations seen: report them as they are.
    let primaries = if primaries.is_empty() {
        explicit.clone()
    } else {
        primaries
    };
    let mut groups: Vec<Vec<&Found>> = Vec::new();
    for f in &primaries {
        // Every definition is its own result; declarations join the group with their key.
        let joined = groups.iter_mut().find(|g| {
            g[0].key == f.key
                && g[0].decl.qualified_name == f.decl.qualified_name
                && !(g.iter().any(|x| x.decl.definition) && f.decl.definition)
        });
        match joined {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    // A declaration group without a definition joins a definition group of the same key.
    let mut results = Vec::new();
    let defined: Vec<usize> = (0..groups.len())
        .filter(|&g| groups[g].iter().any(|f| f.decl.definition))
        .collect();
    let mut extra_decls: HashMap<usize, Vec<&Found>> = HashMap::new();
    let mut dropped = vec![false; groups.len()];
    for g in 0..groups.len() {
        if defined.contains(&g) {
            continue;
        }
        let same: Vec<usize> = defined
            .iter()
            .copied()
            .filter(|&d| {
                groups[d][0].key == groups[g][0].key
                    && groups[d][0].decl.qualified_name == groups[g][0].decl.qualified_name
            })
            .collect();
        if let [only] = same.as_slice() {
            extra_decls
                .entry(*only)
                .or_default()
                .extend(groups[g].iter().copied());
            dropped[g] = true;
        }
    }
    for (g, group) in groups.iter().enumerate() {
        if dropped[g] {
            continue;
        }
        let mut members: Vec<&Found> = group.clone();
        members.extend(extra_decls.get(&g).into_iter().flatten().copied());
        let main = members
            .iter()
            .find(|f| f.decl.definition)
            .copied()
            .unwrap_or(members[0]);
        let mut decl = main.decl.clone();
        for other in &members {
            if std::ptr::eq(*other, main) {
                continue;
            }
            decl.declared_at.push(other.decl.location());
            fill_defaults(&mut decl, &other.decl);
        }
        if !matches!(main.template, TemplateHead::Explicit(_)) {
            for e in &explicit {
                if let TemplateHead::Explicit(args) = &e.template {
                    if e.decl.qualified_name == decl.qualified_name || e.decl.name == decl.name {
                        let what = if args.is_empty() {
                            decl.name.clone()
                        } else {
                            format!("{}<{args}>", decl.name)
                        };
                        decl.instantiations
                            .push(format!("{what} ({})", e.decl.location()));
                    }
                }
            }
        }
        results.push(decl);
    }
    results
}

/// Defaults (and parameter names) that only a declaration spells out.
fn fill_defaults(decl: &mut KernelDecl, other: &KernelDecl) {
    for (mine, theirs) in decl.template_params.iter_mut().zip(&other.template_params) {
        if mine.default.is_none() {
            mine.default = theirs.default.clone();
        }
        if mine.name.is_none() {
            mine.name = theirs.name.clone();
        }
    }
    for (mine, theirs) in decl.params.iter_mut().zip(&other.params) {
        if mine.default.is_none() {
            mine.default = theirs.default.clone();
        }
        if mine.name.is_none() {
            mine.name = theirs.name.clone();
        }
    }
    if decl.launch_bounds.is_none() {
        decl.launch_bounds = other.launch_bounds.clone();
    }
    if decl.cluster_dims.is_none() {
        decl.cluster_dims = other.cluster_dims.clone();
    }
    for m in &other.macros {
        if !decl.macros.contains(m) {
            decl.macros.push(m.clone());
        }
    }
}

fn suggestions(short: &str, all: &[Found]) -> Vec<String> {
    let lower = short.to_lowercase();
    let mut scored: Vec<(f64, usize, String, String)> = Vec::new();
    let mut seen = HashSet::new();
    for (rank, kind) in [FnKind::Global, FnKind::Device].into_iter().enumerate() {
        for f in all.iter().filter(|f| f.fn_kind == kind) {
            let name = f.decl.name.to_lowercase();
            if !seen.insert(f.decl.qualified_name.clone()) {
                continue;
            }
            // Point at the definition when there is one.
            let f = all
                .iter()
                .find(|g| {
                    g.fn_kind == kind
                        && g.decl.qualified_name == f.decl.qualified_name
                        && g.decl.definition
                })
                .unwrap_or(f);
            let mut score = strsim::normalized_damerau_levenshtein(&lower, &name)
                .max(strsim::jaro_winkler(&lower, &name) - 0.1);
            let part_of = |long: &str, short: &str| {
                short.len() >= 3 && 2 * short.len() >= long.len() && long.contains(short)
            };
            if (name.len() >= 3 && lower.len() >= 3 && name.contains(&lower))
                || part_of(&lower, &name)
            {
                score = score.max(0.8);
            }
            if score >= 0.6 {
                let what = if kind == FnKind::Device {
                    " (__device__)"
                } else {
                    ""
                };
                scored.push((
                    score,
                    rank,
                    format!("`{}`{what}", f.decl.qualified_name),
                    f.decl.location(),
                ));
            }
        }
    }
    scored.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.total_cmp(&a.0)));
    scored
        .into_iter()
        .take(5)
        .map(|(_, _, name, at)| format!("{name} ({at})"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(text: &str) -> Vec<Found> {
        Tree::new(vec![PathBuf::from("t.cuh")]).scan(0, text).found
    }

    fn merged(all: &[Found], name: &str) -> Vec<KernelDecl> {
        let named: Vec<&Found> = all.iter().filter(|f| f.decl.name == name).collect();
        merge(&named)
    }

    #[test]
    fn kernel_names() {
        for ok in ["gemm", "ns::gemm", "::a::b::_k2"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["gemm<float>", "not a name", "1abc", "ns::", ""] {
            assert!(
                matches!(check_name(bad), Err(ImportError::BadName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_declaration_joins_its_definition_and_lends_its_defaults() {
        let all = scanned(
            "__global__ void k(float* x, int n = 4);\n__global__ void k(float* x, int) {}\n",
        );
        let [d] = merged(&all, "k").try_into().unwrap();
        assert!(d.definition);
        assert_eq!(d.line, 2);
        assert_eq!(d.declared_at, ["t.cuh:1"]);
        assert_eq!(d.params[1].default.as_deref(), Some("4"));
        assert_eq!(d.params[1].name.as_deref(), Some("n"));
    }

    #[test]
    fn overloads_stay_apart() {
        let all = scanned("__global__ void k(float* x) {}\n__global__ void k(double* x) {}\n__global__ void k(double* y);\n");
        let found = merged(&all, "k");
        let lines: Vec<(usize, Vec<String>)> = found
            .iter()
            .map(|d| (d.line, d.declared_at.clone()))
            .collect();
        assert_eq!(lines, [(1, vec![]), (2, vec!["t.cuh:3".to_string()])]);
    }

    #[test]
    fn explicit_instantiations_are_listed_on_the_template() {
        let all = scanned("template <typename T> __global__ void t(T* p) {}\ntemplate __global__ void t<float>(float*);\ntemplate __global__ void t<half>(half*);\n");
        let [d] = merged(&all, "t").try_into().unwrap();
        assert_eq!(d.line, 1);
        assert_eq!(
            d.instantiations,
            ["t<float> (t.cuh:2)", "t<half> (t.cuh:3)"]
        );
        // Only instantiations seen: they are the results.
        let only = scanned("template __global__ void u<int>(int*);\n");
        assert_eq!(merged(&only, "u").len(), 1);
    }

    #[test]
    fn similar_names_globals_first() {
        let all = scanned("__global__ void gemm_kernel() {}\n__device__ void gemm_tile() {}\n__global__ void reduce() {}\n");
        let s = suggestions("gemm", &all);
        assert_eq!(
            s,
            [
                "`gemm_kernel` (t.cuh:1)",
                "`gemm_tile` (__device__) (t.cuh:2)"
            ]
        );
        assert!(suggestions("zzz", &all).is_empty());
    }

    #[test]
    fn not_found_says_what_was_scanned() {
        let none = not_found_message("k", Path::new("src"), 0, &[], &[]);
        assert_eq!(none, "no `__global__` or `__device__` function named `k` under src (no CUDA source file (.cu .cuh .h .hpp .hh .cuhpp .inl) was found there)");
        let some = not_found_message(
            "k",
            Path::new("src"),
            3,
            &["`kk` (a.cu:1)".into()],
            &["b.cu:2".into()],
        );
        assert!(some.contains("(3 files scanned; build and version-control folders skipped)"));
        assert!(some.contains(
            "\nnote: `k` is declared as a host function (not __global__ or __device__) at b.cu:2"
        ));
        assert!(some.ends_with("\nhelp: did you mean `kk` (a.cu:1)?"));
    }

    #[test]
    fn declarations_in_keeps_device_and_global_only() {
        let found = declarations_in(
            Path::new("x.cu"),
            "void h();\n__device__ void d();\n__global__ void g();\n",
        );
        let names: Vec<(&str, KernelKind)> =
            found.iter().map(|d| (d.name.as_str(), d.kind)).collect();
        assert_eq!(
            names,
            [("d", KernelKind::Device), ("g", KernelKind::Global)]
        );
    }
}
