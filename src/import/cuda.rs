//! `repro import cuda PATH --kernel NAME`: find a `__global__` (or `__device__`) function in a CUDA
//! source tree and describe it as a spec [`Skeleton`].
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

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use walkdir::WalkDir;

use super::skeleton::{Skeleton, Tensor, Value};
use crate::spec::names::identifier_problem;

/// File name endings scanned under a folder.
pub const EXTENSIONS: &[&str] = &["cu", "cuh", "h", "hpp", "hh", "cuhpp", "inl"];

/// Header endings: a kernel in one of these can be `#include`d as is.
const HEADER_EXTENSIONS: &[&str] = &["cuh", "h", "hpp", "hh", "cuhpp", "inl"];

/// The longest template argument list looked for.
const MAX_TEMPLATE_ARGUMENT_TOKENS: usize = 4096;

/// Files larger than this are not read (generated tables, embedded binaries).
const MAX_FILE_BYTES: u64 = 16 << 20;

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
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    Number,
    Str,
    Char,
    Punct,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// The token's text; a string literal's content without quotes or prefix.
    text: String,
    line: usize,
    /// Whitespace or a comment came before it.
    space: bool,
    /// The outermost macro this token came out of.
    from_macro: Option<Rc<str>>,
}

impl Token {
    fn is(&self, text: &str) -> bool {
        self.kind != Kind::Str && self.kind != Kind::Char && self.text == text
    }

    fn is_ident(&self) -> bool {
        self.kind == Kind::Ident
    }
}

#[derive(Debug)]
struct Directive {
    /// Tokens after the `#`.
    tokens: Vec<Token>,
    /// Macros that enclosing `#ifdef X` / `#if defined(X)` (or the `#else` of an `#ifndef X`)
    /// require to be defined.
    requires: Vec<String>,
    /// How many code tokens came before it.
    code_pos: usize,
}

#[derive(Debug, Default)]
struct Lexed {
    code: Vec<Token>,
    directives: Vec<Directive>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || (!c.is_ascii() && !c.is_whitespace())
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || (!c.is_ascii() && !c.is_whitespace())
}

const PUNCT3: &[&str] = &["...", "<<=", ">>=", "->*"];
const PUNCT2: &[&str] = &[
    "::", "->", "<<", "<=", ">=", "==", "!=", "&&", "||", "##", "++", "--", "+=", "-=", "*=", "/=",
    "%=", "&=", "|=", "^=", ".*",
];

struct Lexer<'a> {
    c: &'a [char],
    i: usize,
    line: usize,
}

impl Lexer<'_> {
    fn at(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    /// Length of a line splice (backslash, optional `\r`, newline) at the cursor, if any.
    fn splice(&self) -> Option<usize> {
        if self.at(0) != Some('\\') {
            return None;
        }
        match (self.at(1), self.at(2)) {
            (Some('\n'), _) => Some(2),
            (Some('\r'), Some('\n')) => Some(3),
            _ => None,
        }
    }

    /// A quoted literal's body after the opening quote; stops at the closing quote or (unclosed)
    /// before the end of the line.
    fn quoted(&mut self, quote: char) -> String {
        let mut text = String::new();
        while let Some(c) = self.at(0) {
            if c == '\\' {
                if let Some(n) = self.splice() {
                    self.i += n;
                    self.line += 1;
                    continue;
                }
                text.push(c);
                if let Some(next) = self.at(1) {
                    if next != '\n' {
                        text.push(next);
                        self.i += 2;
                        continue;
                    }
                }
                self.i += 1;
                continue;
            }
            if c == quote {
                self.i += 1;
                break;
            }
            if c == '\n' {
                break;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    /// A raw string after `R"`; falls back to an ordinary string when the delimiter is malformed.
    fn raw(&mut self) -> String {
        let start = self.i;
        let mut delim = String::new();
        while let Some(c) = self.at(0) {
            if c == '(' {
                break;
            }
            if delim.len() >= 16 || c == ')' || c == '\\' || c == '"' || c.is_whitespace() {
                self.i = start;
                return self.quoted('"');
            }
            delim.push(c);
            self.i += 1;
        }
        if self.at(0) != Some('(') {
            self.i = start;
            return self.quoted('"');
        }
        self.i += 1;
        let close: Vec<char> = format!("){delim}\"").chars().collect();
        let mut text = String::new();
        while self.i < self.c.len() {
            if self.c[self.i..].starts_with(&close) {
                self.i += close.len();
                return text;
            }
            let c = self.c[self.i];
            if c == '\n' {
                self.line += 1;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    fn number(&mut self) -> String {
        let mut text = String::new();
        while let Some(c) = self.at(0) {
            let prev = text.chars().last();
            let part = c.is_ascii_alphanumeric()
                || c == '_'
                || c == '.'
                || ((c == '+' || c == '-') && matches!(prev, Some('e' | 'E' | 'p' | 'P')))
                // a digit separator: 1'000
                || (c == '\'' && self.at(1).is_some_and(|n| n.is_ascii_alphanumeric()));
            if !part {
                break;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    fn punct(&mut self) -> String {
        for group in [PUNCT3, PUNCT2] {
            for p in group {
                let n = p.chars().count();
                if self.i + n <= self.c.len()
                    && self.c[self.i..self.i + n].iter().copied().eq(p.chars())
                {
                    self.i += n;
                    return p.to_string();
                }
            }
        }
        let c = self.c[self.i];
        self.i += 1;
        c.to_string()
    }
}

/// Tokens of `text`, with comments and directives out of the code stream and `#if 0` regions
/// (and the `#else` side of `#if 1`) dropped. Never fails: malformed input gives some tokens.
fn lex(text: &str) -> Lexed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let chars: Vec<char> = text.chars().collect();
    let mut lx = Lexer {
        c: &chars,
        i: 0,
        line: 1,
    };
    let mut out = Lexed::default();
    let mut space = true;
    let mut line_start = true;
    let mut in_directive = false;
    while lx.i < chars.len() {
        let c = chars[lx.i];
        if let Some(n) = lx.splice() {
            lx.i += n;
            lx.line += 1;
            space = true;
            continue;
        }
        if c == '\n' {
            lx.i += 1;
            lx.line += 1;
            space = true;
            line_start = true;
            in_directive = false;
            continue;
        }
        if c.is_whitespace() {
            lx.i += 1;
            space = true;
            continue;
        }
        if c == '/' && lx.at(1) == Some('/') {
            lx.i += 2;
            while let Some(c) = lx.at(0) {
                if let Some(n) = lx.splice() {
                    lx.i += n;
                    lx.line += 1;
                } else if c == '\n' {
                    break;
                } else {
                    lx.i += 1;
                }
            }
            space = true;
            continue;
        }
        if c == '/' && lx.at(1) == Some('*') {
            lx.i += 2;
            while let Some(c) = lx.at(0) {
                if c == '*' && lx.at(1) == Some('/') {
                    lx.i += 2;
                    break;
                }
                if c == '\n' {
                    lx.line += 1;
                }
                lx.i += 1;
            }
            if lx.i > chars.len() {
                lx.i = chars.len();
            }
            space = true;
            continue;
        }
        if c == '#' && line_start && !in_directive {
            out.directives.push(Directive {
                tokens: Vec::new(),
                requires: Vec::new(),
                code_pos: out.code.len(),
            });
            in_directive = true;
            line_start = false;
            lx.i += 1;
            space = false;
            continue;
        }
        line_start = false;
        let line = lx.line;
        let (kind, text) = if is_ident_start(c) {
            let start = lx.i;
            while lx.at(0).is_some_and(is_ident_continue) {
                lx.i += 1;
            }
            let word: String = chars[start..lx.i].iter().collect();
            match (lx.at(0), word.as_str()) {
                (Some('"'), "R" | "LR" | "uR" | "UR" | "u8R") => {
                    lx.i += 1;
                    (Kind::Str, lx.raw())
                }
                (Some('"'), "L" | "u" | "U" | "u8") => {
                    lx.i += 1;
                    (Kind::Str, lx.quoted('"'))
                }
                (Some('\''), "L" | "u" | "U" | "u8") => {
                    lx.i += 1;
                    (Kind::Char, lx.quoted('\''))
                }
                _ => (Kind::Ident, word),
            }
        } else if c.is_ascii_digit() || (c == '.' && lx.at(1).is_some_and(|n| n.is_ascii_digit())) {
            (Kind::Number, lx.number())
        } else if c == '"' {
            lx.i += 1;
            (Kind::Str, lx.quoted('"'))
        } else if c == '\'' {
            lx.i += 1;
            (Kind::Char, lx.quoted('\''))
        } else {
            (Kind::Punct, lx.punct())
        };
        let token = Token {
            kind,
            text,
            line,
            space,
            from_macro: None,
        };
        space = false;
        if in_directive {
            if let Some(d) = out.directives.last_mut() {
                d.tokens.push(token);
            }
        } else {
            out.code.push(token);
        }
    }
    drop_dead_regions(&mut out);
    mark_guards(&mut out.directives);
    out
}

/// The macro a simple condition tests, and whether it must be defined: `#ifdef X`, `#ifndef X`,
/// `#if defined(X)`, `#if !defined X`; None for anything else.
fn simple_condition(d: &Directive) -> Option<(String, bool)> {
    let t: Vec<&str> = d
        .tokens
        .iter()
        .map(|t| t.text.as_str())
        .filter(|t| *t != "(" && *t != ")")
        .collect();
    match t.as_slice() {
        ["ifdef", x] | ["if", "defined", x] => Some((x.to_string(), true)),
        ["ifndef", x] | ["if", "!", "defined", x] => Some((x.to_string(), false)),
        _ => None,
    }
}

fn mark_guards(directives: &mut [Directive]) {
    let mut stack: Vec<Option<(String, bool)>> = Vec::new();
    for d in directives.iter_mut() {
        match directive_keyword(d) {
            "if" | "ifdef" | "ifndef" => stack.push(simple_condition(d)),
            "else" => {
                if let Some(Some((_, defined))) = stack.last_mut() {
                    *defined = !*defined;
                }
            }
            "elif" | "elifdef" | "elifndef" => {
                if let Some(top) = stack.last_mut() {
                    *top = None;
                }
            }
            "endif" => {
                stack.pop();
            }
            "define" => {
                d.requires = stack
                    .iter()
                    .flatten()
                    .filter(|(_, defined)| *defined)
                    .map(|(name, _)| name.clone())
                    .collect();
            }
            _ => {}
        }
    }
}

/// Whether nvcc (on Linux, with a GCC host compiler) may define `name` itself.
fn predefined(name: &str) -> bool {
    name != "__CUDACC_RTC__"
        && (name.starts_with("__CUDA")
            || name.starts_with("__NV")
            || matches!(
                name,
                "__cplusplus" | "__GNUC__" | "__linux__" | "__unix__" | "__x86_64__" | "__STDC__"
            ))
}

fn directive_keyword(d: &Directive) -> &str {
    d.tokens.first().map(|t| t.text.as_str()).unwrap_or("")
}

/// `#if 0`, `#if (0)`, `#if false` → Some(false); `#if 1` → Some(true); anything else None.
fn constant_condition(d: &Directive) -> Option<bool> {
    let rest: String = d
        .tokens
        .iter()
        .skip(1)
        .map(|t| t.text.as_str())
        .filter(|t| *t != "(" && *t != ")")
        .collect();
    match rest.as_str() {
        "0" | "false" => Some(false),
        "1" | "true" => Some(true),
        _ => None,
    }
}

fn drop_dead_regions(lexed: &mut Lexed) {
    #[derive(PartialEq)]
    enum Frame {
        Plain,
        /// `#if 1`: its `#else`/`#elif` side is dead.
        One,
    }
    let mut frames: Vec<Frame> = Vec::new();
    // (nesting inside the dead region, code position where it started, stops at #else/#elif)
    let mut skip: Option<(usize, usize, bool)> = None;
    let mut dead_code: Vec<(usize, usize)> = Vec::new();
    let mut dead_directive = vec![false; lexed.directives.len()];
    for (k, d) in lexed.directives.iter().enumerate() {
        let kw = directive_keyword(d);
        if let Some((nest, start, stops_at_else)) = skip.as_mut() {
            dead_directive[k] = true;
            match kw {
                "if" | "ifdef" | "ifndef" => *nest += 1,
                "endif" if *nest == 0 => {
                    dead_code.push((*start, d.code_pos));
                    skip = None;
                }
                "endif" => *nest -= 1,
                "else" | "elif" | "elifdef" | "elifndef" if *nest == 0 && *stops_at_else => {
                    dead_code.push((*start, d.code_pos));
                    skip = None;
                    frames.push(Frame::Plain);
                }
                _ => {}
            }
            continue;
        }
        match kw {
            "if" => match constant_condition(d) {
                Some(false) => skip = Some((0, d.code_pos, true)),
                Some(true) => frames.push(Frame::One),
                None => frames.push(Frame::Plain),
            },
            "ifdef" | "ifndef" => frames.push(Frame::Plain),
            "else" | "elif" | "elifdef" | "elifndef" if frames.last() == Some(&Frame::One) => {
                frames.pop();
                skip = Some((0, d.code_pos, false));
            }
            "endif" => {
                frames.pop();
            }
            _ => {}
        }
    }
    if let Some((_, start, _)) = skip {
        dead_code.push((start, lexed.code.len()));
    }
    if !dead_code.is_empty() {
        let mut keep = vec![true; lexed.code.len()];
        for (a, b) in dead_code {
            for flag in keep.iter_mut().take(b.min(lexed.code.len())).skip(a) {
                *flag = false;
            }
        }
        let mut k = 0;
        lexed.code.retain(|_| {
            k += 1;
            keep[k - 1]
        });
    }
    let mut k = 0;
    lexed.directives.retain(|_| {
        k += 1;
        !dead_directive[k - 1]
    });
}

// ---------------------------------------------------------------------------------------------
// Macros

#[derive(Debug, Clone)]
struct Macro {
    /// None for an object-like macro.
    params: Option<Vec<String>>,
    variadic: bool,
    body: Vec<Token>,
    /// False when the body stringizes or pastes (`#`, `##`): left unexpanded.
    expandable: bool,
    /// See [`Directive::requires`].
    requires: Vec<String>,
}

impl Macro {
    fn same(&self, other: &Macro) -> bool {
        self.params == other.params
            && self.variadic == other.variadic
            && self.body.len() == other.body.len()
            && self
                .body
                .iter()
                .zip(&other.body)
                .all(|(a, b)| a.text == b.text && a.kind == b.kind)
    }
}

#[derive(Debug, Clone)]
enum MacroEntry {
    Unique(Rc<Macro>),
    /// Several different definitions (`#ifdef` alternatives): not expanded.
    Ambiguous,
}

/// Words only nvcc's side of an `#ifdef __CUDACC__` alternative would spell.
const CUDA_WORDS: &[&str] = &["__global__", "__device__", "__host__", "__grid_constant__"];

/// A `#define`, as a name and a macro; None for anything malformed.
fn parse_define(d: &Directive) -> Option<(String, Macro)> {
    let t = &d.tokens;
    if t.len() < 2 || !t[0].is("define") || !t[1].is_ident() {
        return None;
    }
    let name = t[1].text.clone();
    let mut k = 2;
    let mut params = None;
    let mut variadic = false;
    if t.get(2).is_some_and(|p| p.is("(") && !p.space) {
        let mut names = Vec::new();
        k = 3;
        let mut closed = false;
        while k < t.len() {
            let tok = &t[k];
            k += 1;
            if tok.is(")") {
                closed = true;
                break;
            } else if tok.is("...") {
                variadic = true;
            } else if tok.is_ident() {
                if t.get(k).is_some_and(|n| n.is("...")) {
                    variadic = true; // GNU named variadic `args...`: treated as __VA_ARGS__
                    k += 1;
                } else {
                    names.push(tok.text.clone());
                }
            } else if !tok.is(",") {
                return None;
            }
        }
        if !closed {
            return None;
        }
        params = Some(names);
    }
    let body: Vec<Token> = t[k..].to_vec();
    let expandable = !body
        .iter()
        .any(|b| b.kind == Kind::Punct && (b.text == "#" || b.text == "##"));
    Some((
        name,
        Macro {
            params,
            variadic,
            body,
            expandable,
            requires: d.requires.clone(),
        },
    ))
}

/// The macros visible to one file: every distinct definition of each name.
#[derive(Debug, Default)]
struct MacroTable {
    definitions: HashMap<String, Vec<Rc<Macro>>>,
    entries: HashMap<String, MacroEntry>,
    /// Names with definitions dropped for their `#ifdef`: what the alternatives give.
    alternatives: HashMap<String, String>,
}

impl MacroTable {
    fn define(&mut self, name: &str, m: &Rc<Macro>) {
        let defs = self.definitions.entry(name.to_string()).or_default();
        if !defs.iter().any(|old| old.same(m)) {
            defs.push(m.clone());
        }
    }

    /// One entry per name. Of several different definitions, the only one that spells CUDA
    /// keywords is taken (nvcc defines `__CUDACC__`, so `#ifdef __CUDACC__ #define HD __host__
    /// __device__ #else #define HD #endif` means `__host__ __device__`); otherwise the name is
    /// ambiguous and left as written.
    /// Definitions under `#ifdef X` where nothing defines X (`CUTLASS_NAMESPACE`, `_MSC_VER`) are
    /// dropped first.
    fn finish(&mut self) {
        let defined: HashSet<String> = self.definitions.keys().cloned().collect();
        let possible = |m: &Macro| {
            m.requires
                .iter()
                .all(|r| defined.contains(r) || predefined(r))
        };
        let show = |m: &Macro| match join(&m.body) {
            b if b.is_empty() => "nothing".to_string(),
            b => format!("`{b}`"),
        };
        for (name, defs) in self.definitions.iter_mut() {
            let (kept, dropped): (Vec<Rc<Macro>>, Vec<Rc<Macro>>) =
                defs.drain(..).partition(|m| possible(m));
            if let (Some(here), false) = (kept.first(), dropped.is_empty()) {
                let others: Vec<String> = dropped
                    .iter()
                    .map(|m| {
                        let unset: Vec<&str> = m
                            .requires
                            .iter()
                            .filter(|r| !defined.contains(*r) && !predefined(r))
                            .map(String::as_str)
                            .collect();
                        format!("{} when {} is defined", show(m), unset.join(" and "))
                    })
                    .collect();
                self.alternatives.insert(
                    name.clone(),
                    format!("`{name}` is {} here, {}", show(here), others.join(", ")),
                );
            }
            *defs = kept;
        }
        for (name, defs) in &self.definitions {
            if defs.is_empty() {
                continue;
            }
            let entry = if defs.len() == 1 {
                MacroEntry::Unique(defs[0].clone())
            } else {
                let cuda: Vec<&Rc<Macro>> = defs
                    .iter()
                    .filter(|m| m.body.iter().any(|t| CUDA_WORDS.contains(&t.text.as_str())))
                    .collect();
                match cuda.as_slice() {
                    [only] => MacroEntry::Unique((*only).clone()),
                    _ => MacroEntry::Ambiguous,
                }
            };
            self.entries.insert(name.clone(), entry);
        }
        self.add_builtins();
    }

    /// Well-known CUTLASS/CuTe markers, for trees that use them without the library's headers.
    fn add_builtins(&mut self) {
        const BUILTINS: &[(&str, &str)] = &[
            ("CUTLASS_GLOBAL", "__global__ static"),
            ("CUTLASS_DEVICE", "__forceinline__ __device__"),
            ("CUTLASS_HOST_DEVICE", "__forceinline__ __device__ __host__"),
            ("CUTE_DEVICE", "__forceinline__ __device__"),
            ("CUTE_HOST_DEVICE", "__forceinline__ __host__ __device__"),
            ("CUTE_GRID_CONSTANT", "__grid_constant__"),
            ("CUTLASS_GRID_CONSTANT", "__grid_constant__"),
        ];
        for (name, body) in BUILTINS {
            if !self.entries.contains_key(*name) {
                let body = lex(body).code;
                let m = Macro {
                    params: None,
                    variadic: false,
                    body,
                    expandable: true,
                    requires: Vec::new(),
                };
                self.entries
                    .insert(name.to_string(), MacroEntry::Unique(Rc::new(m)));
            }
        }
    }
}

struct Expander<'a> {
    table: &'a MacroTable,
    budget: usize,
}

impl Expander<'_> {
    fn expand(&mut self, tokens: &[Token], active: &mut Vec<String>, depth: usize) -> Vec<Token> {
        let mut out = Vec::with_capacity(tokens.len());
        let mut i = 0;
        while i < tokens.len() {
            let tok = &tokens[i];
            i += 1;
            let m = match self.table.entries.get(&tok.text) {
                Some(MacroEntry::Unique(m))
                    if tok.is_ident()
                        && m.expandable
                        && depth < 32
                        && self.budget > 0
                        && !active.contains(&tok.text) =>
                {
                    m.clone()
                }
                _ => {
                    out.push(tok.clone());
                    continue;
                }
            };
            let origin: Rc<str> = tok
                .from_macro
                .clone()
                .unwrap_or_else(|| Rc::from(tok.text.as_str()));
            let place = |t: &Token, first: bool| Token {
                line: tok.line,
                space: if first { tok.space } else { t.space },
                from_macro: Some(origin.clone()),
                ..t.clone()
            };
            let replaced: Vec<Token> = match &m.params {
                None => m
                    .body
                    .iter()
                    .enumerate()
                    .map(|(k, t)| place(t, k == 0))
                    .collect(),
                Some(params) => {
                    let Some((args, next)) = macro_args(tokens, i) else {
                        out.push(tok.clone());
                        continue;
                    };
                    let named = params.len();
                    if args.len() < named && !(named == 1 && args.is_empty()) {
                        out.push(tok.clone());
                        continue;
                    }
                    let mut expanded_args: Vec<Vec<Token>> = Vec::new();
                    for a in args.iter() {
                        expanded_args.push(self.expand(a, active, depth + 1));
                    }
                    // What the substitution would produce, before producing it (`F(F(F(x)))`
                    // with `#define F(x) x x` doubles at every level).
                    let size: usize = m
                        .body
                        .iter()
                        .map(|b| match params.iter().position(|p| *p == b.text) {
                            Some(p) if b.is_ident() => expanded_args.get(p).map_or(0, Vec::len),
                            _ if b.is("__VA_ARGS__") => {
                                expanded_args.iter().skip(named).map(|a| a.len() + 1).sum()
                            }
                            _ => 1,
                        })
                        .sum();
                    if size >= self.budget {
                        self.budget = 0;
                        out.extend(tokens[i - 1..next].iter().cloned());
                        i = next;
                        continue;
                    }
                    let mut subst = Vec::new();
                    i = next;
                    for (k, b) in m.body.iter().enumerate() {
                        let index = if b.is_ident() {
                            params.iter().position(|p| *p == b.text)
                        } else {
                            None
                        };
                        if let Some(p) = index {
                            let arg = expanded_args.get(p).cloned().unwrap_or_default();
                            for (j, a) in arg.iter().enumerate() {
                                let mut a = place(a, false);
                                if j == 0 {
                                    a.space = if k == 0 { tok.space } else { b.space };
                                }
                                subst.push(a);
                            }
                        } else if b.is("__VA_ARGS__") && m.variadic {
                            for (j, arg) in expanded_args.iter().enumerate().skip(named) {
                                if j > named {
                                    subst.push(Token {
                                        kind: Kind::Punct,
                                        text: ",".into(),
                                        line: tok.line,
                                        space: false,
                                        from_macro: Some(origin.clone()),
                                    });
                                }
                                for a in arg {
                                    subst.push(place(a, false));
                                }
                            }
                        } else {
                            subst.push(place(b, k == 0));
                        }
                    }
                    subst
                }
            };
            self.budget = self.budget.saturating_sub(replaced.len() + 1);
            active.push(tok.text.clone());
            let again = self.expand(&replaced, active, depth + 1);
            active.pop();
            out.extend(again);
        }
        out
    }
}

/// A function-like macro's arguments starting at `tokens[i]` (which must be `(`), split at
/// top-level commas; and the index after the `)`.
fn macro_args(tokens: &[Token], i: usize) -> Option<(Vec<Vec<Token>>, usize)> {
    if !tokens.get(i)?.is("(") {
        return None;
    }
    let mut depth = 0usize;
    let mut args = vec![Vec::new()];
    let mut k = i + 1;
    while k < tokens.len() {
        let t = &tokens[k];
        k += 1;
        if t.is("(") {
            depth += 1;
        } else if t.is(")") {
            if depth == 0 {
                if args.len() == 1 && args[0].is_empty() {
                    args.clear();
                }
                return Some((args, k));
            }
            depth -= 1;
        } else if t.is(",") && depth == 0 {
            args.push(Vec::new());
            continue;
        }
        if let Some(last) = args.last_mut() {
            last.push(t.clone());
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Bracket-aware helpers over token slices

/// Index of the token closing the bracket opened at `open` (`(`, `[`, `{` or a template `<`),
/// with template `<>` only counted outside parentheses and brackets.
fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    // A `<` that is a comparison would otherwise scan to the end of the file, again and again.
    let limit = if tokens.get(open).is_some_and(|t| t.is("<")) {
        MAX_TEMPLATE_ARGUMENT_TOKENS
    } else {
        usize::MAX
    };
    let mut stack: Vec<&str> = Vec::new();
    for (k, t) in tokens.iter().enumerate().skip(open) {
        if k - open > limit {
            return None;
        }
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" | "[" | "{" => stack.push(if t.text == "(" {
                ")"
            } else if t.text == "[" {
                "]"
            } else {
                "}"
            }),
            "<" if !matches!(stack.last(), Some(&")") | Some(&"]")) => stack.push(">"),
            ">" if stack.last() == Some(&">") => {
                stack.pop();
            }
            ")" | "]" | "}" => {
                // Unclosed `<` (comparisons) are dropped on the way.
                while let Some(top) = stack.last() {
                    if *top == ">" {
                        stack.pop();
                    } else {
                        break;
                    }
                }
                if stack.last() == Some(&t.text.as_str()) {
                    stack.pop();
                } else if stack.is_empty() {
                    return None;
                }
            }
            _ => {}
        }
        if stack.is_empty() {
            return Some(k);
        }
    }
    None
}

/// Splits `tokens` at top-level commas (template `<>` counted outside parentheses).
fn split_top(tokens: &[Token]) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let mut stack: Vec<char> = Vec::new();
    let mut start = 0;
    for (k, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" => stack.push(')'),
            "[" => stack.push(']'),
            "{" => stack.push('}'),
            "<" if !matches!(stack.last(), Some(')') | Some(']')) => stack.push('>'),
            ">" if stack.last() == Some(&'>') => {
                stack.pop();
            }
            ")" | "]" | "}" => {
                let want = t.text.chars().next().unwrap_or(')');
                while stack.last() == Some(&'>') {
                    stack.pop();
                }
                if stack.last() == Some(&want) {
                    stack.pop();
                }
            }
            "," if stack.is_empty() => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// Index of the first top-level `=` (not inside brackets or template arguments).
fn top_level_eq(tokens: &[Token]) -> Option<usize> {
    let mut stack: Vec<char> = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" => stack.push(')'),
            "[" => stack.push(']'),
            "{" => stack.push('}'),
            "<" if !matches!(stack.last(), Some(')') | Some(']')) => stack.push('>'),
            ">" if stack.last() == Some(&'>') => {
                stack.pop();
            }
            ")" | "]" | "}" => {
                while stack.last() == Some(&'>') {
                    stack.pop();
                }
                stack.pop();
            }
            "=" if stack.is_empty() => return Some(k),
            _ => {}
        }
    }
    None
}

/// Tokens back to text on one line: a space wherever the source had whitespace or a comment.
fn join(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (k, t) in tokens.iter().enumerate() {
        if k > 0 && t.space {
            out.push(' ');
        }
        match t.kind {
            Kind::Str => {
                out.push('"');
                out.push_str(&t.text);
                out.push('"');
            }
            Kind::Char => {
                out.push('\'');
                out.push_str(&t.text);
                out.push('\'');
            }
            _ => out.push_str(&t.text),
        }
    }
    out
}

/// Type text normalized for comparison and lookup: words separated by one space, no space
/// around punctuation.
fn type_key(tokens: &[Token]) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    for t in tokens {
        let word = matches!(t.kind, Kind::Ident | Kind::Number);
        if word && prev_word {
            out.push(' ');
        }
        out.push_str(&t.text);
        prev_word = word;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Declarations

/// Identifiers followed by a parenthesized group that are never a function's name.
const NOT_A_NAME: &[&str] = &[
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "__attribute__",
    "__declspec",
    "__align__",
    "alignas",
    "decltype",
    "__decltype",
    "noexcept",
    "throw",
    "_Pragma",
    "__pragma",
    "sizeof",
    "alignof",
    "requires",
    "operator",
    "if",
    "while",
    "for",
    "switch",
    "return",
    "static_assert",
];

/// Words that qualify a parameter without changing what it is.
const PARAM_NOISE: &[&str] = &[
    "__restrict__",
    "__restrict",
    "restrict",
    "__grid_constant__",
    "register",
];

const CV: &[&str] = &["const", "volatile"];

const FUNDAMENTAL: &[&str] = &[
    "void", "bool", "char", "short", "int", "long", "signed", "unsigned", "float", "double",
    "wchar_t", "char8_t", "char16_t", "char32_t", "auto",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FnKind {
    Global,
    Device,
    Host,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TemplateHead {
    None,
    Primary,
    /// `template <> ...` (explicit specialization) or `template ...` / `extern template ...`
    /// (explicit instantiation): the explicit template arguments, verbatim.
    Explicit(String),
}

#[derive(Debug, Clone)]
struct Found {
    decl: KernelDecl,
    fn_kind: FnKind,
    template: TemplateHead,
    /// Normalized parameter and template-parameter types, for matching declarations with their
    /// definition.
    key: String,
}

#[derive(Debug, Default)]
struct Scan {
    found: Vec<Found>,
}

#[derive(Debug, Clone)]
enum Scope {
    Namespace(Option<String>),
    Linkage { c: bool },
}

/// Aliases (`using X = ...;`, `typedef ... X;`) by name: Some(text) when unique.
type Aliases = HashMap<String, Option<String>>;

fn add_alias(aliases: &mut Aliases, name: &str, value: Option<String>) {
    if value.as_deref().is_some_and(|v| v.is_empty() || v == name) {
        return;
    }
    match aliases.get(name) {
        None => {
            aliases.insert(name.to_string(), value);
        }
        Some(old) if *old == value => {}
        Some(_) => {
            aliases.insert(name.to_string(), None);
        }
    }
}

fn merge_aliases(into: &mut Aliases, from: &Aliases) {
    for (name, value) in from {
        add_alias(into, name, value.clone());
    }
}

fn collect_aliases(tokens: &[Token], aliases: &mut Aliases) {
    let mut add = |name: &str, value: String| add_alias(aliases, name, Some(value));
    let mut k = 0;
    while k < tokens.len() {
        let t = &tokens[k];
        if t.is("using")
            && tokens.get(k + 1).is_some_and(Token::is_ident)
            && tokens.get(k + 2).is_some_and(|e| e.is("="))
        {
            let end = (k + 3..tokens.len())
                .find(|&j| tokens[j].is(";") || tokens[j].is("{") || tokens[j].is("}"));
            if let Some(end) = end.filter(|&e| tokens[e].is(";")) {
                let value: Vec<Token> = tokens[k + 3..end]
                    .iter()
                    .filter(|t| !CV.contains(&t.text.as_str()))
                    .cloned()
                    .collect();
                add(&tokens[k + 1].text, type_key(&value));
                k = end;
            }
        } else if t.is("typedef") {
            let end = (k + 1..tokens.len())
                .find(|&j| tokens[j].is(";") || tokens[j].is("{") || tokens[j].is("}"));
            if let Some(end) = end.filter(|&e| tokens[e].is(";") && e >= k + 3) {
                let body = &tokens[k + 1..end];
                let plain = body
                    .iter()
                    .all(|t| t.is_ident() || t.is("::") || t.is("<") || t.is(">") || t.is(","));
                if plain && body.last().is_some_and(Token::is_ident) {
                    let value: Vec<Token> = body[..body.len() - 1]
                        .iter()
                        .filter(|t| !CV.contains(&t.text.as_str()))
                        .cloned()
                        .collect();
                    add(&body[body.len() - 1].text, type_key(&value));
                }
                k = end;
            }
        }
        k += 1;
    }
}

fn resolve_alias(text: &str, aliases: &Aliases) -> String {
    let mut current = text.to_string();
    for _ in 0..8 {
        let bare = current.trim_start_matches("::");
        let last = bare.rsplit("::").next().unwrap_or(bare);
        match aliases.get(bare).or_else(|| aliases.get(last)) {
            Some(Some(next)) if *next != current => current = next.clone(),
            _ => break,
        }
    }
    current
}

struct FileContext<'a> {
    path: &'a Path,
    aliases: &'a Aliases,
    ambiguous: &'a HashSet<String>,
    alternatives: &'a HashMap<String, String>,
}

/// Every namespace-scope function declaration in the (macro-expanded) tokens.
fn scan_tokens(tokens: &[Token], cx: &FileContext) -> Scan {
    let mut scan = Scan::default();
    let mut scopes: Vec<Scope> = Vec::new();
    let mut start = 0;
    let mut depth = 0usize;
    let mut braced = false; // the pending declaration contains a skipped { } (class, initializer)
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.kind != Kind::Punct {
            i += 1;
            continue;
        }
        match t.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            ";" if depth == 0 => {
                if !braced {
                    declaration(&tokens[start..i], None, &scopes, cx, &mut scan);
                }
                start = i + 1;
                braced = false;
            }
            "{" if depth == 0 => {
                let head = &tokens[start..i];
                if let Some(scope) = scope_head(head) {
                    scopes.push(scope);
                    start = i + 1;
                    braced = false;
                } else {
                    let end = brace_end(tokens, i);
                    if !braced && function_head(head).is_some() {
                        declaration(
                            head,
                            Some(&tokens[i..end.min(tokens.len())]),
                            &scopes,
                            cx,
                            &mut scan,
                        );
                        start = end + 1;
                    } else {
                        braced = true;
                    }
                    i = end;
                }
            }
            "}" if depth == 0 => {
                scopes.pop();
                start = i + 1;
                braced = false;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// Index of the `}` matching the `{` at `open` (braces only), or the last index.
fn brace_end(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        if t.is("{") && t.kind == Kind::Punct {
            depth += 1;
        } else if t.is("}") && t.kind == Kind::Punct {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return k;
            }
        }
    }
    tokens.len()
}

/// `namespace a::b {`, `inline namespace v1 {`, `namespace {`, `extern "C" {`.
fn scope_head(head: &[Token]) -> Option<Scope> {
    let words: Vec<&Token> = head.iter().filter(|t| !t.is("inline")).collect();
    match words.as_slice() {
        [ns] if ns.is("namespace") => Some(Scope::Namespace(None)),
        // `namespace a::b {`, or a name that is an unexpanded macro call
        [ns, rest @ ..] if ns.is("namespace") => {
            let name: Vec<Token> = rest.iter().map(|t| (*t).clone()).collect();
            Some(Scope::Namespace(Some(type_key(&name))))
        }
        [ext, lang] if ext.is("extern") && lang.kind == Kind::Str => Some(Scope::Linkage {
            c: lang.text == "C",
        }),
        _ => None,
    }
}

struct FnHead {
    /// Index of the function's name.
    name: usize,
    /// Index of the first token of a `ns::` qualifier before the name (== name when none).
    qualifier: usize,
    /// The `<` and `>` of explicit template arguments after the name (`gemm<float, 128>(`).
    targs: Option<(usize, usize)>,
    lparen: usize,
    rparen: usize,
}

/// Where the function declarator is in a declaration: the last top-level `name(...)` (or
/// `name<...>(...)`) that is not an attribute, `decltype` and the like, with no `=` before it.
fn function_head(tokens: &[Token]) -> Option<FnHead> {
    let mut k = 0;
    let mut best = None;
    // the last template argument list skipped: (its `<`, its `>`)
    let mut angle: Option<(usize, usize)> = None;
    while k < tokens.len() {
        let t = &tokens[k];
        if t.kind == Kind::Punct {
            match t.text.as_str() {
                "=" => break,
                "(" => {
                    let close = matching(tokens, k)?;
                    let (name, targs) = match angle {
                        Some((lt, gt)) if gt + 1 == k => (lt.checked_sub(1), Some((lt, gt))),
                        _ => (k.checked_sub(1), None),
                    };
                    if let Some(n) = name {
                        let named = tokens[n].is_ident()
                            && !NOT_A_NAME.contains(&tokens[n].text.as_str())
                            && !(n > 0 && (tokens[n - 1].is("operator") || tokens[n - 1].is("~")));
                        if named {
                            let mut q = n;
                            while q >= 2 && tokens[q - 1].is("::") && tokens[q - 2].is_ident() {
                                q -= 2;
                            }
                            best = Some(FnHead {
                                name: n,
                                qualifier: q,
                                targs,
                                lparen: k,
                                rparen: close,
                            });
                        }
                    }
                    k = close + 1;
                    continue;
                }
                "[" => {
                    k = matching(tokens, k).map_or(k + 1, |c| c + 1);
                    continue;
                }
                "<" if k > 0 && (tokens[k - 1].is_ident() || tokens[k - 1].is(">")) => {
                    match matching(tokens, k) {
                        Some(c) => {
                            angle = Some((k, c));
                            k = c + 1;
                        }
                        None => k += 1,
                    }
                    continue;
                }
                "{" | ";" => break,
                _ => {}
            }
        }
        k += 1;
    }
    best
}

/// Splits a leading `template <...>` head off a declaration.
fn template_head(tokens: &[Token]) -> (TemplateHead, Option<&[Token]>, &[Token]) {
    // Unexpanded macros before the head (`MY_EXPORT template <...>`) are skipped.
    let mut k = 0;
    while tokens.get(k).is_some_and(|t| {
        t.is_ident()
            && t.text
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }) {
        k += 1;
    }
    if !tokens
        .get(k)
        .is_some_and(|t| t.is("template") || t.is("extern"))
    {
        k = 0;
    }
    if tokens.get(k).is_some_and(|t| t.is("extern"))
        && tokens.get(k + 1).is_some_and(|t| t.is("template"))
    {
        k += 1;
    }
    if !tokens.get(k).is_some_and(|t| t.is("template")) {
        return (TemplateHead::None, None, tokens);
    }
    if tokens.get(k + 1).is_some_and(|t| t.is("<")) {
        let Some(close) = matching(tokens, k + 1) else {
            return (TemplateHead::None, None, &tokens[tokens.len()..]);
        };
        let params = &tokens[k + 2..close];
        let rest = &tokens[close + 1..];
        if params.is_empty() {
            return (TemplateHead::Explicit(String::new()), None, rest);
        }
        // a member template of a class template would follow; not at namespace scope
        return (TemplateHead::Primary, Some(params), rest);
    }
    (
        TemplateHead::Explicit(String::new()),
        None,
        &tokens[k + 1..],
    )
}

fn parse_template_params(tokens: &[Token]) -> Vec<TemplateParam> {
    let mut out = Vec::new();
    for part in split_top(tokens) {
        if part.is_empty() {
            continue;
        }
        let (decl, default) = match top_level_eq(part) {
            Some(eq) => (
                &part[..eq],
                Some(join(&part[eq + 1..])).filter(|d| !d.is_empty()),
            ),
            None => (part, None),
        };
        let pack = decl.iter().any(|t| t.is("..."));
        let words: Vec<&Token> = decl.iter().filter(|t| !t.is("...")).collect();
        let kind = if words.first().is_some_and(|t| t.is("template")) {
            TemplateParamKind::Template
        } else if words.len() <= 2
            && words
                .first()
                .is_some_and(|t| t.is("typename") || t.is("class"))
        {
            TemplateParamKind::Type
        } else {
            TemplateParamKind::Value(String::new())
        };
        let last = words.last().filter(|t| {
            t.is_ident()
                && !FUNDAMENTAL.contains(&t.text.as_str())
                && !t.is("typename")
                && !t.is("class")
        });
        let name = match (&kind, last) {
            (TemplateParamKind::Value(_), Some(_)) if words.len() < 2 => None,
            (_, Some(t)) => Some(t.text.clone()),
            _ => None,
        };
        let kind = match kind {
            TemplateParamKind::Value(_) => {
                let ty: Vec<Token> = decl
                    .iter()
                    .filter(|t| !t.is("...") && Some(&t.text) != name.as_ref())
                    .cloned()
                    .collect();
                TemplateParamKind::Value(join(&ty))
            }
            k => k,
        };
        out.push(TemplateParam {
            kind,
            name,
            default,
            pack,
        });
    }
    out
}

fn is_integer_type(key: &str) -> bool {
    let key = key.trim_start_matches("::").trim_start_matches("std::");
    const INTEGERS: &[&str] = &[
        "int8_t",
        "uint8_t",
        "int16_t",
        "uint16_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
        "size_t",
        "ssize_t",
        "ptrdiff_t",
        "intptr_t",
        "uintptr_t",
        "index_t",
        "long_index_t",
        "__int64",
    ];
    if INTEGERS.contains(&key) {
        return true;
    }
    let words: Vec<&str> = key.split(' ').collect();
    !words.is_empty()
        && words
            .iter()
            .all(|w| matches!(*w, "int" | "unsigned" | "signed" | "long" | "short"))
        && words.iter().any(|w| *w != "signed" || words.len() == 1)
}

fn is_float_type(key: &str) -> bool {
    matches!(
        key.trim_start_matches("::"),
        "float"
            | "double"
            | "long double"
            | "half"
            | "__half"
            | "__nv_bfloat16"
            | "nv_bfloat16"
            | "__bf16"
            | "cutlass::half_t"
            | "cutlass::bfloat16_t"
            | "cutlass::tfloat32_t"
    )
}

fn analyze_param(tokens: &[Token], template: &[TemplateParam], aliases: &Aliases) -> Param {
    let (decl, default) = match top_level_eq(tokens) {
        Some(eq) => (
            &tokens[..eq],
            Some(join(&tokens[eq + 1..])).filter(|d| !d.is_empty()),
        ),
        None => (tokens, None),
    };
    // Drop attributes and qualifiers that do not change what the parameter is.
    let mut core: Vec<Token> = Vec::new();
    let mut k = 0;
    while k < decl.len() {
        let t = &decl[k];
        if t.is_ident() && PARAM_NOISE.contains(&t.text.as_str()) {
            k += 1;
            continue;
        }
        if t.is_ident()
            && matches!(
                t.text.as_str(),
                "__attribute__" | "__align__" | "alignas" | "__declspec"
            )
            && decl.get(k + 1).is_some_and(|n| n.is("("))
        {
            k = matching(decl, k + 1).map_or(decl.len(), |c| c + 1);
            continue;
        }
        if t.is("[") && decl.get(k + 1).is_some_and(|n| n.is("[")) {
            k = matching(decl, k).map_or(decl.len(), |c| c + 1);
            continue;
        }
        core.push(t.clone());
        k += 1;
    }
    let text = join(decl);
    // Array declarators decay to pointers.
    let mut array = false;
    while core.last().is_some_and(|t| t.is("]")) {
        let open = (0..core.len()).rev().find(|&j| core[j].is("["));
        match open {
            Some(j) => {
                core.truncate(j);
                array = true;
            }
            None => break,
        }
    }
    if core.iter().any(|t| t.is("(")) {
        // function pointer or reference to array: `void (*fn)(int)`, `const float (&a)[4]`
        let name = core
            .iter()
            .position(|t| t.is("("))
            .and_then(|p| core[p..].iter().find(|t| t.is_ident()))
            .map(|t| t.text.clone());
        return Param {
            name,
            text,
            ty: ParamType::Other(type_key(&core)),
            default,
            element_macro: None,
        };
    }
    let name = match core.last() {
        Some(last)
            if last.is_ident()
                && !FUNDAMENTAL.contains(&last.text.as_str())
                && !CV.contains(&last.text.as_str())
                && core.len() >= 2
                && !core[core.len() - 2].is("::")
                && core[..core.len() - 1].iter().any(|t| {
                    !(CV.contains(&t.text.as_str())
                        || t.is("struct")
                        || t.is("typename")
                        || t.is("class")
                        || t.is("enum"))
                }) =>
        {
            let n = last.text.clone();
            core.pop();
            Some(n)
        }
        _ => None,
    };
    // pointer depth and references at top level (outside template arguments)
    let mut stars = usize::from(array);
    let mut first_star = None;
    let mut reference = false;
    let mut angle = 0usize;
    for (j, t) in core.iter().enumerate() {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "<" => angle += 1,
            ">" => angle = angle.saturating_sub(1),
            "*" if angle == 0 => {
                stars += 1;
                first_star.get_or_insert(j);
            }
            "&" | "&&" if angle == 0 => reference = true,
            _ => {}
        }
    }
    let whole = type_key(&core);
    if reference || stars >= 2 {
        return Param {
            name,
            text,
            ty: ParamType::Other(whole),
            default,
            element_macro: None,
        };
    }
    let pointee = &core[..first_star.unwrap_or(core.len())];
    let is_const = pointee.iter().any(|t| t.is("const"));
    let base: Vec<Token> = pointee
        .iter()
        .filter(|t| {
            !(CV.contains(&t.text.as_str()) || t.is("struct") || t.is("class") || t.is("enum"))
        })
        .cloned()
        .collect();
    let element = type_key(&base);
    let element_macro = match base.first().and_then(|t| t.from_macro.clone()) {
        Some(m) if base.iter().all(|t| t.from_macro.as_ref() == Some(&m)) => Some(m.to_string()),
        _ => None,
    };
    let resolved = resolve_alias(&element, aliases);
    let ty = if stars == 1 {
        ParamType::Pointer {
            resolved: (resolved != element).then_some(resolved),
            element,
            is_const,
        }
    } else if element.is_empty() {
        ParamType::Other(whole)
    } else if matches!(
        resolved.as_str(),
        "CUtensorMap" | "CUtensorMap_st" | "cute::TmaDescriptor" | "TmaDescriptor"
    ) {
        ParamType::TensorMap
    } else if template
        .iter()
        .any(|p| p.kind == TemplateParamKind::Type && p.name.as_deref() == Some(resolved.as_str()))
    {
        ParamType::TemplateValue(resolved)
    } else if resolved == "bool" {
        ParamType::Bool
    } else if is_integer_type(&resolved) {
        ParamType::Integer(element)
    } else if is_float_type(&resolved) {
        ParamType::Float(element)
    } else {
        ParamType::Other(whole)
    };
    Param {
        name,
        text,
        ty,
        default,
        element_macro,
    }
}

/// Reads one namespace-scope declaration; records it when it is a function.
fn declaration(
    tokens: &[Token],
    body: Option<&[Token]>,
    scopes: &[Scope],
    cx: &FileContext,
    scan: &mut Scan,
) {
    if tokens.is_empty() {
        return;
    }
    let (template, template_params, rest) = template_head(tokens);
    let Some(head) = function_head(rest) else {
        return;
    };
    let specs = &rest[..head.qualifier];
    let has = |w: &str| specs.iter().any(|t| t.is(w));
    let fn_kind = if has("__global__") {
        FnKind::Global
    } else if has("__device__") {
        FnKind::Device
    } else {
        FnKind::Host
    };
    let name = rest[head.name].text.clone();
    let explicit_args = head.targs.map(|(lt, gt)| join(&rest[lt + 1..gt]));
    let qualifier: Vec<String> = rest[head.qualifier..head.name]
        .iter()
        .filter(|t| t.is_ident())
        .map(|t| t.text.clone())
        .collect();
    let mut specifiers = Vec::new();
    let mut launch_bounds = None;
    let mut cluster_dims = None;
    let mut extern_c = scopes
        .iter()
        .any(|s| matches!(s, Scope::Linkage { c: true }));
    let mut k = 0;
    while k < specs.len() {
        let t = &specs[k];
        if t.is("extern") && specs.get(k + 1).is_some_and(|s| s.kind == Kind::Str) {
            extern_c = specs[k + 1].text == "C";
            k += 2;
            continue;
        }
        if t.is_ident() && specs.get(k + 1).is_some_and(|n| n.is("(")) {
            let close = matching(specs, k + 1).unwrap_or(specs.len().saturating_sub(1));
            let inner = join(specs.get(k + 2..close).unwrap_or(&[]));
            match t.text.as_str() {
                "__launch_bounds__" => launch_bounds = Some(inner),
                "__cluster_dims__" => cluster_dims = Some(inner),
                _ => {}
            }
            k = close + 1;
            continue;
        }
        if t.is_ident()
            && matches!(
                t.text.as_str(),
                "static"
                    | "inline"
                    | "__forceinline__"
                    | "__noinline__"
                    | "__inline__"
                    | "constexpr"
                    | "__host__"
            )
        {
            specifiers.push(t.text.clone());
        }
        k += 1;
    }
    let tparams = template_params
        .map(parse_template_params)
        .unwrap_or_default();
    let params: Vec<Param> = {
        let inner = &rest[head.lparen + 1..head.rparen];
        let parts = split_top(inner);
        if parts.len() == 1
            && (parts[0].is_empty() || (parts[0].len() == 1 && parts[0][0].is("void")))
        {
            Vec::new()
        } else {
            parts
                .into_iter()
                .map(|p| analyze_param(p, &tparams, cx.aliases))
                .collect()
        }
    };
    let dynamic_smem = body.map(|b| {
        b.windows(2).any(|w| {
            (w[0].is("extern") && w[1].is("__shared__"))
                || (w[0].is("__shared__") && w[1].is("extern"))
        }) || b
            .windows(3)
            .any(|w| w[0].is("extern") && w[2].is("__shared__"))
    });
    let mut namespaces: Vec<String> = scopes
        .iter()
        .filter_map(|s| match s {
            Scope::Namespace(Some(n)) => Some(n.clone()),
            _ => None,
        })
        .collect();
    namespaces.extend(qualifier);
    namespaces.push(name.clone());
    let qualified_name = namespaces.join("::");
    let decl_tokens = &tokens[..tokens.len() - rest.len() + head.rparen + 1];
    let mut macros: Vec<String> = Vec::new();
    for t in decl_tokens {
        if let Some(m) = &t.from_macro {
            if !macros.iter().any(|x| **x == **m) {
                macros.push(m.to_string());
            }
        }
    }
    let mut ambiguous_macros: Vec<String> = Vec::new();
    for t in decl_tokens {
        if t.is_ident() && cx.ambiguous.contains(&t.text) && !ambiguous_macros.contains(&t.text) {
            ambiguous_macros.push(t.text.clone());
        }
    }
    let macro_alternatives: Vec<(String, String)> = macros
        .iter()
        .filter_map(|m| cx.alternatives.get(m).map(|a| (m.clone(), a.clone())))
        .collect();
    // Declarations of one function match on their types, with template parameters by position.
    let positional = |text: &str| -> String {
        let mut s = text.to_string();
        for (k, p) in tparams.iter().enumerate() {
            if let Some(n) = &p.name {
                s = replace_word(&s, n, &format!("${k}"));
            }
        }
        s
    };
    let key = format!(
        "{}|{}|{}",
        tparams
            .iter()
            .map(|p| format!("{:?}{}", p.kind, p.pack))
            .collect::<Vec<_>>()
            .join(","),
        params
            .iter()
            .map(|p| positional(&param_key(p)))
            .collect::<Vec<_>>()
            .join(","),
        explicit_args.clone().unwrap_or_default(),
    );
    let template = match template {
        TemplateHead::Explicit(_) => TemplateHead::Explicit(explicit_args.unwrap_or_default()),
        t => t,
    };
    scan.found.push(Found {
        decl: KernelDecl {
            name,
            qualified_name,
            kind: if fn_kind == FnKind::Global {
                KernelKind::Global
            } else {
                KernelKind::Device
            },
            path: cx.path.to_path_buf(),
            line: rest[head.name].line,
            definition: body.is_some(),
            declared_at: Vec::new(),
            extern_c,
            specifiers,
            launch_bounds,
            cluster_dims,
            template_params: tparams,
            params,
            dynamic_smem,
            signature: join(decl_tokens),
            macros,
            ambiguous_macros,
            macro_alternatives,
            instantiations: Vec::new(),
        },
        fn_kind,
        template,
        key,
    });
}

fn param_key(p: &Param) -> String {
    match &p.ty {
        ParamType::Pointer {
            element, is_const, ..
        } => format!("{}{element}*", if *is_const { "const " } else { "" }),
        ParamType::Integer(t)
        | ParamType::Float(t)
        | ParamType::Other(t)
        | ParamType::TemplateValue(t) => t.clone(),
        ParamType::Bool => "bool".into(),
        ParamType::TensorMap => "CUtensorMap".into(),
    }
}

/// Replaces whole-word occurrences of `word` in `text`.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find(word) {
        let before_ok = rest[..pos]
            .chars()
            .last()
            .map_or(true, |c| !is_ident_continue(c));
        let after = &rest[pos + word.len()..];
        let after_ok = after.chars().next().map_or(true, |c| !is_ident_continue(c));
        out.push_str(&rest[..pos]);
        out.push_str(if before_ok && after_ok { with } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------------------------------------
// The tree

fn skipped_folder(name: &str) -> bool {
    name.starts_with('.')
        || matches!(
            name,
            "build" | "CMakeFiles" | "target" | "node_modules" | "__pycache__" | "dist" | "_deps"
        )
        || name.starts_with("build-")
        || name.starts_with("cmake-build-")
}

fn has_source_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e))
}

/// The source files under `root` (or `root` itself), in a deterministic order.
pub fn source_files(root: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let meta = std::fs::metadata(root).map_err(|source| ImportError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        // A file, or a fifo or device given by mistake: the reading says which.
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    let walk = WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_dir()
                || !skipped_folder(&e.file_name().to_string_lossy())
        });
    for entry in walk.flatten() {
        let path = entry.path();
        // Not only regular files: a fifo or device named like a source is noted when read.
        if entry.depth() > 0 && has_source_extension(path) && !path.is_dir() {
            files.push(path.to_path_buf());
        }
    }
    Ok(files)
}

fn read_lossy(path: &Path) -> Option<String> {
    read_checked(path).ok()
}

/// A source file's text, or why it was not read: not a regular file (a fifo blocks on open,
/// `/dev/zero` never ends), above [`MAX_FILE_BYTES`], or unreadable. The check comes before the
/// open, and the read is bounded too, for a file that grows after the check.
fn read_checked(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a source file",
            super::rust::file_kind(&meta)
        ));
    }
    let too_large = |bytes: u64| {
        format!(
            "{:.1} MiB, above the {} MiB read of a source file (a generated table or an embedded binary)",
            bytes as f64 / (1u64 << 20) as f64,
            MAX_FILE_BYTES >> 20
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Lexical normalization (`a/./b/../c` → `a/c`), no file system access.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c.as_os_str()),
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Include {
    name: String,
    quoted: bool,
}

fn includes_of(lexed: &Lexed) -> Vec<Include> {
    let mut out = Vec::new();
    for d in &lexed.directives {
        if !d
            .tokens
            .first()
            .is_some_and(|t| t.is("include") || t.is("include_next") || t.is("import"))
        {
            continue;
        }
        match d.tokens.get(1) {
            Some(t) if t.kind == Kind::Str => out.push(Include {
                name: t.text.clone(),
                quoted: true,
            }),
            Some(t) if t.is("<") => {
                let end = d
                    .tokens
                    .iter()
                    .position(|t| t.is(">"))
                    .unwrap_or(d.tokens.len());
                let name: String = d
                    .tokens
                    .get(2..end)
                    .unwrap_or(&[])
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect();
                if !name.is_empty() {
                    out.push(Include {
                        name,
                        quoted: false,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// What a file lends the files that include it: its macros, its aliases, the tree files it
/// includes.
#[derive(Debug, Default)]
struct FileInfo {
    macros: Vec<(String, Rc<Macro>)>,
    aliases: Aliases,
    includes: Vec<usize>,
}

/// The scanned files, with what each lends its includers cached (tokens are not kept).
struct Tree {
    files: Vec<PathBuf>,
    normalized: Vec<PathBuf>,
    by_path: HashMap<PathBuf, usize>,
    info: HashMap<usize, Rc<FileInfo>>,
    /// `#include` names without a `./`-relative hit, resolved by path suffix.
    by_suffix: HashMap<String, Option<usize>>,
}

impl Tree {
    fn new(files: Vec<PathBuf>) -> Tree {
        let normalized: Vec<PathBuf> = files.iter().map(|f| normalize(f)).collect();
        let by_path = normalized
            .iter()
            .enumerate()
            .map(|(k, f)| (f.clone(), k))
            .collect();
        Tree {
            files,
            normalized,
            by_path,
            info: HashMap::new(),
            by_suffix: HashMap::new(),
        }
    }

    fn info(&mut self, k: usize, lexed: Option<&Lexed>) -> Rc<FileInfo> {
        if let Some(i) = self.info.get(&k) {
            return i.clone();
        }
        let owned;
        let lexed = match lexed {
            Some(l) => l,
            None => {
                owned = lex(&read_lossy(&self.files[k]).unwrap_or_default());
                &owned
            }
        };
        let mut info = FileInfo::default();
        for d in &lexed.directives {
            if let Some((name, m)) = parse_define(d) {
                info.macros.push((name, Rc::new(m)));
            }
        }
        collect_aliases(&lexed.code, &mut info.aliases);
        for inc in includes_of(lexed) {
            if let Some(g) = self.resolve(k, &inc) {
                if g != k && !info.includes.contains(&g) {
                    info.includes.push(g);
                }
            }
        }
        let info = Rc::new(info);
        self.info.insert(k, info.clone());
        info
    }

    /// The tree file an `#include` in file `from` names, if any.
    fn resolve(&mut self, from: usize, inc: &Include) -> Option<usize> {
        let name = Path::new(&inc.name);
        if inc.quoted {
            if let Some(dir) = self.files[from].parent() {
                if let Some(&k) = self.by_path.get(&normalize(&dir.join(name))) {
                    return Some(k);
                }
            }
        }
        if let Some(hit) = self.by_suffix.get(&inc.name) {
            return *hit;
        }
        let suffix = normalize(name);
        let hit = if suffix.components().count() == 0 {
            None
        } else {
            self.normalized.iter().position(|f| f.ends_with(&suffix))
        };
        self.by_suffix.insert(inc.name.clone(), hit);
        hit
    }

    fn scan(&mut self, k: usize, text: &str) -> Scan {
        let lexed = lex(text);
        self.info.remove(&k);
        self.info(k, Some(&lexed));
        // File `k` and the tree files it includes, transitively (at most 256).
        let mut closure = vec![k];
        let mut queue = VecDeque::from([k]);
        while let Some(f) = queue.pop_front() {
            for &g in &self.info(f, None).includes {
                if !closure.contains(&g) && closure.len() < 256 {
                    closure.push(g);
                    queue.push_back(g);
                }
            }
        }
        let mut table = MacroTable::default();
        let mut aliases = Aliases::new();
        for &f in &closure {
            let info = self.info(f, None);
            for (name, m) in &info.macros {
                table.define(name, m);
            }
            merge_aliases(&mut aliases, &info.aliases);
        }
        table.finish();
        let ambiguous: HashSet<String> = table
            .entries
            .iter()
            .filter(|(_, e)| matches!(e, MacroEntry::Ambiguous))
            .map(|(n, _)| n.clone())
            .collect();
        let mut expander = Expander {
            table: &table,
            budget: 200_000 + 8 * lexed.code.len(),
        };
        let tokens = expander.expand(&lexed.code, &mut Vec::new(), 0);
        let cx = FileContext {
            path: &self.files[k],
            aliases: &aliases,
            ambiguous: &ambiguous,
            alternatives: &table.alternatives,
        };
        scan_tokens(&tokens, &cx)
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

// ---------------------------------------------------------------------------------------------
// Skeleton

/// The spec dtype of an element type, when it is one.
pub fn spec_dtype(element: &str) -> Option<&'static str> {
    let t = element.trim_start_matches("::");
    let t = t.strip_prefix("std::").unwrap_or(t);
    Some(match t {
        "float" => "f32",
        "double" => "f64",
        "half" | "__half" | "cutlass::half_t" => "f16",
        "__nv_bfloat16" | "nv_bfloat16" | "cutlass::bfloat16_t" | "__bf16" => "bf16",
        "cutlass::tfloat32_t" => "tf32",
        "__nv_fp8_e4m3" | "cutlass::float_e4m3_t" => "e4m3",
        "__nv_fp8_e5m2" | "cutlass::float_e5m2_t" => "e5m2",
        "int8_t" | "char" | "signed char" => "i8",
        "uint8_t" | "unsigned char" => "u8",
        "int" | "int32_t" | "signed" | "signed int" => "i32",
        "unsigned" | "unsigned int" | "uint32_t" => "u32",
        "int64_t" | "long long" | "long long int" | "signed long long" => "i64",
        "bool" => "bool",
        _ => return None,
    })
}

/// The scalar type of a CUDA vector type (`float4` → `float`, 4).
fn vector_type(element: &str) -> Option<(&'static str, u32)> {
    let (base, n) = element
        .trim_start_matches("::")
        .split_at(element.trim_end_matches(|c: char| c.is_ascii_digit()).len());
    let n: u32 = n.parse().ok()?;
    let scalar = match base {
        "float" => "f32",
        "double" => "f64",
        "half" | "__half" => "f16",
        "__nv_bfloat16" | "nv_bfloat16" => "bf16",
        "int" => "i32",
        "uint" => "u32",
        "char" => "i8",
        "uchar" => "u8",
        "longlong" => "i64",
        _ => return None,
    };
    (matches!(n, 2..=4) || (base == "longlong" && n <= 4)).then_some((scalar, n))
}

fn spec_name(kernel: &str) -> String {
    let mut s: String = kernel
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_matches('_').to_string();
    if s.is_empty() {
        "kernel".into()
    } else {
        s
    }
}

fn is_literal(text: &str) -> bool {
    let t = text.trim();
    let t = t
        .strip_prefix('-')
        .or_else(|| t.strip_prefix('+'))
        .unwrap_or(t)
        .trim();
    matches!(t, "true" | "false")
        || (t.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '\'' | '+' | '-')))
}

/// The value of a C++ integer literal (`42`, `-1`, `0x10`, `0b101`, `017`, `1'000`, `0u`, `8ull`).
fn integer_literal(text: &str) -> Option<i64> {
    let t = text.trim().replace('\'', "");
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest.trim().to_string()),
        None => (false, t.trim_start_matches('+').trim().to_string()),
    };
    let t = t.trim_end_matches(['u', 'U', 'l', 'L', 'z', 'Z']);
    let lower = t.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    if digits.is_empty() {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if negative { -v } else { v })
}

/// A spec name for a parameter: a C++ identifier the harness may use, unique among `used`.
fn usable_name(name: &str, used: &HashSet<String>) -> String {
    let trimmed = name.trim_start_matches('_');
    let mut candidates = vec![name.to_string()];
    if !trimmed.is_empty() && !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        candidates.push(trimmed.to_string());
        candidates.push(format!("{trimmed}_arg"));
        candidates.push(format!("arg_{trimmed}"));
    }
    for c in candidates {
        if identifier_problem(&c).is_none() && !used.contains(&c) {
            return c;
        }
    }
    (2..)
        .map(|k| format!("arg_{k}"))
        .find(|c| !used.contains(c))
        .unwrap_or_default()
}

/// Absolute form of `path` (no symbolic links resolved).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path)
        .map(|p| normalize(&p))
        .unwrap_or_else(|_| path.to_path_buf())
}

fn is_header(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| HEADER_EXTENSIONS.contains(&e))
}

/// CUDA toolkit and CUTLASS headers, which `repro` finds itself (some projects include them with
/// quotes).
fn library_header(name: &str) -> bool {
    let first = name.split('/').next().unwrap_or(name);
    matches!(
        first,
        "cutlass" | "cute" | "cub" | "thrust" | "cuda" | "nv" | "cooperative_groups" | "crt"
    ) || [
        "cuda",
        "cublas",
        "cufft",
        "curand",
        "cusparse",
        "cusolver",
        "nvrtc",
        "nvml",
        "mma.h",
        "vector_types",
        "device_",
    ]
    .iter()
    .any(|p| first.starts_with(p))
}

/// Include directories that the kernel's file and the local headers it includes need (beyond
/// its own folder), and the quoted includes that were found nowhere under the tree.
fn include_dirs_for(file: &Path, root: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let root_dir = absolute(if root.is_file() {
        root.parent().unwrap_or(Path::new("."))
    } else {
        root
    });
    let file = absolute(file);
    // The harness's -I list: the kernel's folder first.
    let mut dirs: Vec<PathBuf> = file.parent().map(Path::to_path_buf).into_iter().collect();
    let mut missing = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut tree: Option<Vec<PathBuf>> = None;
    let mut queue = VecDeque::from([file]);
    while let Some(f) = queue.pop_front() {
        if !seen.insert(f.clone()) || seen.len() > 256 {
            continue;
        }
        let Some(text) = read_lossy(&f) else { continue };
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        for inc in includes_of(&lex(&text)) {
            let own = dir.join(&inc.name);
            if inc.quoted && own.is_file() {
                queue.push_back(normalize(&own));
                continue;
            }
            if let Some(found) = dirs.iter().map(|d| d.join(&inc.name)).find(|p| p.is_file()) {
                queue.push_back(normalize(&found));
                continue;
            }
            // An ancestor of the including file, within the tree, that holds it; else any folder
            // of the tree that does (`include/lib/api.cuh` for "lib/api.cuh" from `src/`).
            let name = normalize(Path::new(&inc.name));
            let depth = name.components().count();
            let hit = dir
                .ancestors()
                .take_while(|a| a.starts_with(&root_dir))
                .find(|a| a.join(&inc.name).is_file())
                .map(Path::to_path_buf)
                .or_else(|| {
                    let files = tree.get_or_insert_with(|| {
                        source_files(&root_dir)
                            .unwrap_or_default()
                            .iter()
                            .map(|f| absolute(f))
                            .collect()
                    });
                    files
                        .iter()
                        // `<mma.h>` is CUDA's, not some folder's `mma.h`
                        .find(|f| (depth > 1 || (depth == 1 && inc.quoted)) && f.ends_with(&name))
                        .and_then(|f| f.ancestors().nth(depth))
                        .map(Path::to_path_buf)
                });
            match hit {
                Some(a) => {
                    queue.push_back(normalize(&a.join(&inc.name)));
                    dirs.push(a);
                }
                None if inc.quoted && !library_header(&inc.name) => {
                    let shown = format!("\"{}\"", inc.name);
                    if !missing.contains(&shown) {
                        missing.push(shown);
                    }
                }
                None => {}
            }
        }
    }
    (dirs, missing)
}

/// The first comma-separated argument of `a, b` (commas inside brackets do not count).
fn first_argument(args: &str) -> &str {
    let mut depth = 0i32;
    for (k, c) in args.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth <= 0 => return args[..k].trim(),
            _ => {}
        }
    }
    args.trim()
}

fn note_list(items: &[String]) -> String {
    items.join(", ")
}

/// The spec skeleton for `decl`, found under `root` (the PATH given to [`find`]). Reads the
/// kernel's file and the local headers it includes, to find the include directories they need.
pub fn skeleton(decl: &KernelDecl, root: &Path) -> Skeleton {
    let mut notes: Vec<String> = Vec::new();
    let file_name = decl
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let what = if decl.definition {
        "defined"
    } else {
        "declared"
    };
    notes.push(format!(
        "`{}` ({}) {what} at {}{}.",
        decl.qualified_name,
        if decl.kind == KernelKind::Global {
            "__global__"
        } else {
            "__device__"
        },
        decl.location(),
        if decl.declared_at.is_empty() {
            String::new()
        } else {
            format!("; also declared at {}", note_list(&decl.declared_at))
        }
    ));
    if decl.kind == KernelKind::Device {
        notes.push(format!(
            "`{}` is a __device__ function (no __global__ has that name): the spec has `kind: device`, so the harness generates a __global__ entry that calls it; give the launch the production context would make (often one CTA for a task body).",
            decl.name
        ));
    }
    if decl.name == "device_kernel" && decl.template_params.len() == 1 {
        notes.push("this is CUTLASS's generic `device_kernel<Operator>`: a CUTLASS 3 GEMM is better described with `kind: cutlass3` and its `GemmUniversal` type.".into());
    }

    // Template arguments.
    let tnames: Vec<String> = decl
        .template_params
        .iter()
        .filter_map(|p| p.name.clone())
        .collect();
    let mut template_args = Vec::new();
    let mut from_defaults = Vec::new();
    let mut left_to_default = Vec::new();
    let dependent = |default: &str| -> Vec<String> {
        tnames
            .iter()
            .filter(|n| replace_word(default, n, "\u{0}") != default)
            .cloned()
            .collect()
    };
    // Trailing parameters whose default depends on earlier ones are left out (C++ fills them in).
    let mut last = decl.template_params.len();
    while last > 0 {
        let p = &decl.template_params[last - 1];
        match &p.default {
            Some(d) if !dependent(d).is_empty() => {
                left_to_default.push(format!(
                    "{} = {d}",
                    p.name.as_deref().unwrap_or("(unnamed)")
                ));
                last -= 1;
            }
            _ => break,
        }
    }
    left_to_default.reverse();
    for (k, p) in decl.template_params.iter().take(last).enumerate() {
        let label = p.name.clone().unwrap_or_else(|| format!("#{}", k + 1));
        let kind = match &p.kind {
            TemplateParamKind::Type => "a type".to_string(),
            TemplateParamKind::Template => "a template".to_string(),
            TemplateParamKind::Value(t) if t.is_empty() => "a value".to_string(),
            TemplateParamKind::Value(t) => format!("`{t}`"),
        };
        let value = if p.pack {
            Value::todo(format!("template arguments of the pack {label} ({kind}; remove this entry if production passes none)"))
        } else {
            match &p.default {
                Some(d) => {
                    let deps = dependent(d);
                    if deps.is_empty() {
                        from_defaults.push(format!("{label} = {d}"));
                        Value::known(d.clone())
                    } else {
                        Value::todo(format!(
                            "template argument {label} (default `{d}`, which depends on {})",
                            deps.join(", ")
                        ))
                    }
                }
                None => Value::todo(format!("template argument {label} ({kind})")),
            }
        };
        template_args.push(value);
    }
    if !from_defaults.is_empty() {
        notes.push(format!(
            "template arguments from their defaults: {}; set them to the production instantiation.",
            note_list(&from_defaults)
        ));
    }
    if !left_to_default.is_empty() {
        notes.push(format!(
            "left to their defaults (they depend on earlier template arguments): {}.",
            note_list(&left_to_default)
        ));
    }
    if !decl.instantiations.is_empty() {
        let shown: Vec<String> = decl.instantiations.iter().take(5).cloned().collect();
        let more = decl.instantiations.len().saturating_sub(5);
        notes.push(format!(
            "explicit instantiations in the tree (production may use one of them): {}{}.",
            note_list(&shown),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }

    // Parameters.
    let mut used: HashSet<String> = HashSet::new();
    let mut tensors: Vec<Tensor> = Vec::new();
    let mut sizes: Vec<(String, Value)> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let mut outputs = Vec::new();
    let mut renamed = Vec::new();
    let mut tmaps = Vec::new();
    let mut defaulted_args = Vec::new();
    let mut dtype_from_default = Vec::new();
    let mut optional = Vec::new();
    let template_type = |t: &str| {
        decl.template_params
            .iter()
            .find(|p| p.kind == TemplateParamKind::Type && p.name.as_deref() == Some(t))
    };
    // Tensor names are taken first, so a size colliding with one gets the `_size` suffix.
    let mut names: Vec<String> = Vec::new();
    for (k, p) in decl.params.iter().enumerate() {
        let raw = p.name.clone().unwrap_or_else(|| format!("arg{k}"));
        if matches!(p.ty, ParamType::Pointer { .. }) {
            let n = usable_name(&raw, &used);
            used.insert(n.clone());
            names.push(n);
        } else {
            names.push(String::new());
        }
    }
    for (k, p) in decl.params.iter().enumerate() {
        if !names[k].is_empty() {
            continue;
        }
        let raw = p.name.clone().unwrap_or_else(|| format!("arg{k}"));
        let mut n = usable_name(&raw, &used);
        if used.contains(&raw) || (n != raw && used.contains(raw.trim_start_matches('_'))) {
            n = usable_name(&format!("{}_size", raw.trim_start_matches('_')), &used);
        }
        used.insert(n.clone());
        names[k] = n;
    }
    let unnamed: Vec<String> = decl
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| p.name.is_none())
        .map(|(k, _)| names[k].clone())
        .collect();
    if !unnamed.is_empty() {
        notes.push(format!(
            "the declaration leaves parameters unnamed; called here: {}.",
            note_list(&unnamed)
        ));
    }
    for (k, p) in decl.params.iter().enumerate() {
        let shown = p.name.clone().unwrap_or_else(|| names[k].clone());
        let name = names[k].clone();
        if p.name.as_deref().is_some_and(|n| n != name) {
            renamed.push(format!("{shown} -> {name}"));
        }
        match &p.ty {
            ParamType::Pointer { element, resolved, is_const } => {
                let target = resolved.as_deref().unwrap_or(element);
                let alternative = p.element_macro.as_ref().and_then(|m| {
                    decl.macro_alternatives.iter().find(|(n, _)| n == m)
                });
                let dtype = if let Some((_, what)) = alternative {
                    Value::todo(format!(
                        "dtype of {name}: {what}; the production flags decide"
                    ))
                } else if let Some(d) = spec_dtype(target) {
                    Value::known(d)
                } else if let Some(tp) = template_type(target) {
                    match tp.default.as_deref().map(|d| (d, spec_dtype(d))) {
                        Some((d, Some(dt))) => {
                            dtype_from_default.push(format!("{name} ({target} = {d})"));
                            Value::known(dt)
                        }
                        _ => Value::todo(format!("dtype of {target} (a template parameter)")),
                    }
                } else if target == "void" {
                    Value::todo(format!("dtype of {name} (`void*`: the signature does not say)"))
                } else if let Some((scalar, n)) = vector_type(target) {
                    Value::todo(format!(
                        "dtype of {name}: `{target}` packs {n} {scalar} values; use {scalar} and count {n} elements per `{target}` in the shape"
                    ))
                } else if decl.ambiguous_macros.iter().any(|m| m == target) {
                    Value::todo(format!("dtype of {name}: `{target}` is a macro with several definitions"))
                } else {
                    Value::todo(format!("dtype of {name}: `{target}` is not a type the importer maps to a spec dtype"))
                };
                if !is_const {
                    outputs.push(name.clone());
                }
                if p.default.as_deref().is_some_and(|d| matches!(d, "nullptr" | "NULL" | "0")) {
                    optional.push(name.clone());
                }
                tensors.push(Tensor {
                    name: name.clone(),
                    dtype,
                    shape: vec![Value::todo(format!("shape of {name}"))],
                    output: Some(!is_const),
                });
                args.push(Value::known(name));
            }
            ParamType::Integer(_) => {
                let value = match p.default.as_deref().map(|d| (d, integer_literal(d))) {
                    Some((d, Some(v))) => {
                        defaulted_args.push(format!("{shown} = {d}"));
                        Value::known(v.to_string())
                    }
                    Some((d, None)) => Value::todo(format!("value of {name} in the production launch (default `{d}`)")),
                    None => Value::todo(format!("value of {name} in the production launch")),
                };
                sizes.push((name.clone(), value));
                args.push(Value::known(name));
            }
            ParamType::Float(t) | ParamType::TemplateValue(t) => {
                let of = if matches!(p.ty, ParamType::TemplateValue(_)) {
                    format!("{t}, a template parameter")
                } else {
                    t.clone()
                };
                args.push(match &p.default {
                    Some(d) if is_literal(d) => {
                        defaulted_args.push(format!("{shown} = {d}"));
                        Value::known(d.clone())
                    }
                    Some(d) => Value::todo(format!("value of {shown} ({of}; default `{d}`)")),
                    None => Value::todo(format!("value of {shown} ({of})")),
                });
            }
            ParamType::Bool => args.push(match &p.default {
                Some(d) if is_literal(d) => {
                    defaulted_args.push(format!("{shown} = {d}"));
                    Value::known(d.clone())
                }
                _ => Value::todo(format!("value of {shown} (bool)")),
            }),
            ParamType::TensorMap => {
                tmaps.push(shown.clone());
                args.push(Value::todo(format!("TMA descriptor `{shown}`: the `tma:` section (Hopper support) builds it")));
            }
            ParamType::Other(t) => args.push(Value::todo(format!(
                "argument `{shown}` of type `{t}`: a C++ expression (build it in `kernel.setup` or `source.prelude`)"
            ))),
        }
    }
    if !outputs.is_empty() {
        notes.push(format!(
            "non-const pointers are taken as outputs: {}; drop `output: true` from any the kernel only reads.",
            note_list(&outputs)
        ));
    }
    if !optional.is_empty() {
        notes.push(format!(
            "{} default to a null pointer (optional buffers): if production passes none, replace the argument with nullptr and drop the tensor.",
            note_list(&optional)
        ));
    }
    if !dtype_from_default.is_empty() {
        notes.push(format!(
            "dtypes from template defaults: {}.",
            note_list(&dtype_from_default)
        ));
    }
    if !defaulted_args.is_empty() {
        notes.push(format!(
            "arguments from their defaults: {}.",
            note_list(&defaulted_args)
        ));
    }
    if !tmaps.is_empty() {
        notes.push(format!(
            "CUtensorMap parameters {}: describe each under `tma:` and add the global tensor it reads or writes under `tensors:` (it is not a kernel parameter).",
            note_list(&tmaps)
        ));
    }
    if !renamed.is_empty() {
        notes.push(format!(
            "renamed to be usable spec names: {}.",
            note_list(&renamed)
        ));
    }
    if !decl.macros.is_empty() {
        notes.push(format!(
            "macros expanded in the signature: {}.",
            note_list(&decl.macros)
        ));
    }
    if !decl.macro_alternatives.is_empty() {
        let what: Vec<String> = decl
            .macro_alternatives
            .iter()
            .map(|(_, a)| a.clone())
            .collect();
        notes.push(format!(
            "macros with other definitions under an #ifdef of a name the tree never defines (a -D flag may): {}.",
            what.join("; ")
        ));
    }
    if !decl.ambiguous_macros.is_empty() {
        notes.push(format!(
            "macros with several definitions (#ifdef alternatives) left as written: {}.",
            note_list(&decl.ambiguous_macros)
        ));
    }
    if decl.extern_c {
        notes.push("declared extern \"C\": no template arguments, unmangled name.".into());
    }
    if let Some(c) = &decl.cluster_dims {
        notes.push(format!(
            "declares __cluster_dims__({c}): the launch uses that cluster shape."
        ));
    }

    // Source.
    let (mut include_dirs, missing) = include_dirs_for(&decl.path, root);
    let own_dir = absolute(decl.path.parent().unwrap_or(Path::new(".")));
    include_dirs.retain(|d| *d != own_dir);
    include_dirs.insert(0, own_dir);
    if !is_header(&decl.path) {
        notes.push(format!(
            "{file_name} is not a header: including it compiles all of it into the harness (a `main`, other kernels); if that fails, move the kernel into a header."
        ));
    }
    if !decl.definition {
        notes.push(format!(
            "only a declaration was found (no body under {}): the harness needs the definition in an included file.",
            root.display()
        ));
    }
    if !missing.is_empty() {
        notes.push(format!(
            "local includes not found under {}: {}; add their folders to `include_dirs`.",
            root.display(),
            note_list(&missing)
        ));
    }

    // Launch.
    let axes = ["x", "y", "z"];
    let grid = axes.map(|a| Value::todo(format!("grid {a} of the production launch")));
    let block = axes.map(|a| match &decl.launch_bounds {
        Some(b) if a == "x" => Value::todo(format!(
            "block {a} of the production launch (__launch_bounds__({b}): at most {} threads in all)",
            first_argument(b)
        )),
        _ => Value::todo(format!("block {a} of the production launch")),
    });
    let smem = match decl.dynamic_smem {
        Some(false) => Value::known("0"),
        Some(true) => Value::todo("dynamic smem bytes of the production launch (the kernel declares extern __shared__)"),
        None => Value::todo("dynamic smem bytes of the production launch (only a declaration was seen; 0 if the kernel has no extern __shared__)"),
    };

    let notes = notes
        .into_iter()
        .map(|n| n.replace(['\n', '\r'], " "))
        .collect();
    Skeleton {
        name: spec_name(&decl.name),
        origin: decl.location(),
        includes: vec![file_name],
        include_dirs: include_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        sizes,
        tensors,
        kernel_name: decl.qualified_name.clone(),
        device_function: decl.kind == KernelKind::Device,
        template_args,
        args,
        grid,
        block,
        smem,
        notes,
    }
}
