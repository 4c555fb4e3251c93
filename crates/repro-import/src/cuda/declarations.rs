//! Namespace-scope declarations: walking the macro-expanded tokens of one file with namespaces
//! and `extern "C"` blocks tracked, finding each function declarator, its `template <...>` head
//! and specifiers (`__global__`, `__launch_bounds__`...), and recording `__global__`,
//! `__device__` and host functions as [`Found`].

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::brackets::{matching, split_top};
use super::lex::{join, replace_word, type_key, Kind, Token};
use super::types::{analyze_param, parse_template_params, Aliases};
use super::{KernelDecl, KernelKind, Param, ParamType};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FnKind {
    Global,
    Device,
    Host,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TemplateHead {
    None,
    Primary,
    /// `template <> ...` (explicit specialization) or `template ...` / `extern template ...`
    /// (explicit instantiation): the explicit template arguments, verbatim.
    Explicit(String),
}

#[derive(Debug, Clone)]
pub(super) struct Found {
    pub(super) decl: KernelDecl,
    pub(super) fn_kind: FnKind,
    pub(super) template: TemplateHead,
    /// Normalized parameter and template-parameter types, for matching declarations with their
    /// definition.
    pub(super) key: String,
}

#[derive(Debug, Default)]
pub(super) struct Scan {
    pub(super) found: Vec<Found>,
}

#[derive(Debug, Clone)]
enum Scope {
    Namespace(Option<String>),
    Linkage { c: bool },
}

pub(super) struct FileContext<'a> {
    pub(super) path: &'a Path,
    pub(super) aliases: &'a Aliases,
    pub(super) ambiguous: &'a HashSet<String>,
    pub(super) alternatives: &'a HashMap<String, String>,
}

/// Every namespace-scope function declaration in the (macro-expanded) tokens.
pub(super) fn scan_tokens(tokens: &[Token], cx: &FileContext) -> Scan {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::lex::lex;

    /// The functions of `text` (no macros, no aliases).
    fn scan(text: &str) -> Vec<Found> {
        let (aliases, ambiguous, alternatives) = Default::default();
        let cx = FileContext {
            path: Path::new("t.cuh"),
            aliases: &aliases,
            ambiguous: &ambiguous,
            alternatives: &alternatives,
        };
        scan_tokens(&lex(text).code, &cx).found
    }

    #[test]
    fn a_templated_global_in_namespaces() {
        let found = scan(
            "namespace a { namespace b {\ntemplate <typename T, int N = 4>\n__global__ void __launch_bounds__(256, 2)\nk(const T* x, int n) { extern __shared__ float s[]; }\n} }",
        );
        let [f] = found.as_slice() else {
            panic!("{found:?}")
        };
        let d = &f.decl;
        assert_eq!(f.fn_kind, FnKind::Global);
        assert_eq!(f.template, TemplateHead::Primary);
        assert_eq!(
            (d.name.as_str(), d.qualified_name.as_str()),
            ("k", "a::b::k")
        );
        assert_eq!(
            (d.line, d.definition, d.dynamic_smem),
            (4, true, Some(true))
        );
        assert_eq!(d.launch_bounds.as_deref(), Some("256, 2"));
        assert_eq!(d.template_params.len(), 2);
        assert_eq!(d.template_params[1].default.as_deref(), Some("4"));
        assert_eq!(d.params.len(), 2);
        assert_eq!(
            d.signature,
            "template <typename T, int N = 4> __global__ void __launch_bounds__(256, 2) k(const T* x, int n)"
        );
    }

    #[test]
    fn host_device_and_declarations_only() {
        let found = scan("void host(int);\n__device__ float dev(float x);\nstatic __forceinline__ __device__ int f(int a) { return a; }");
        let kinds: Vec<(FnKind, bool)> = found
            .iter()
            .map(|f| (f.fn_kind, f.decl.definition))
            .collect();
        assert_eq!(
            kinds,
            [
                (FnKind::Host, false),
                (FnKind::Device, false),
                (FnKind::Device, true)
            ]
        );
        assert_eq!(found[2].decl.specifiers, ["static", "__forceinline__"]);
        assert_eq!(found[1].decl.dynamic_smem, None);
        assert_eq!(found[2].decl.dynamic_smem, Some(false));
    }

    #[test]
    fn extern_c_blocks_and_declarations() {
        let found = scan("extern \"C\" { __global__ void c(float* p) {} }\nextern \"C\" __global__ void d();\n__global__ void e();");
        let c: Vec<(&str, bool)> = found
            .iter()
            .map(|f| (f.decl.name.as_str(), f.decl.extern_c))
            .collect();
        assert_eq!(c, [("c", true), ("d", true), ("e", false)]);
    }

    #[test]
    fn explicit_instantiations_and_specializations() {
        let found = scan("template __global__ void k<float>(float*);\ntemplate <> __global__ void k<int>(int* p) {}\nextern template __global__ void k<double>(double*);");
        let heads: Vec<&TemplateHead> = found.iter().map(|f| &f.template).collect();
        assert_eq!(
            heads,
            [
                &TemplateHead::Explicit("float".into()),
                &TemplateHead::Explicit("int".into()),
                &TemplateHead::Explicit("double".into()),
            ]
        );
    }

    #[test]
    fn class_bodies_and_initializers_are_skipped() {
        let found = scan("struct S { __device__ void m(); };\nint table[] = {1, 2};\nauto x = f(1);\n__global__ void after() {}");
        let names: Vec<&str> = found.iter().map(|f| f.decl.name.as_str()).collect();
        assert_eq!(names, ["after"]);
    }

    #[test]
    fn the_declarator_is_the_last_named_call_before_an_equals() {
        let code = lex("__global__ void __launch_bounds__(128) ns::k<int, 2>(float* a)").code;
        let head = function_head(&code).unwrap();
        assert_eq!(code[head.name].text, "k");
        assert_eq!(code[head.qualifier].text, "ns");
        let (lt, gt) = head.targs.unwrap();
        assert_eq!((code[lt].text.as_str(), code[gt].text.as_str()), ("<", ">"));
        assert_eq!(code[head.rparen].text, ")");
        assert!(function_head(&lex("int x = f(1)").code).is_none());
        assert!(function_head(&lex("decltype(a) b").code).is_none());
        assert!(function_head(&lex("bool operator()(int)").code).is_none());
    }

    #[test]
    fn the_template_head_is_split_off() {
        let code = lex("MY_EXPORT template <typename T> void f(T);").code;
        let (head, params, rest) = template_head(&code);
        assert_eq!(head, TemplateHead::Primary);
        assert_eq!(params.map(|p| p.len()), Some(2));
        assert!(rest[0].is("void"));
        let code = lex("void f();").code;
        assert_eq!(template_head(&code).0, TemplateHead::None);
    }

    #[test]
    fn scopes() {
        let scope = |t: &str| scope_head(&lex(t).code);
        assert!(matches!(scope("namespace"), Some(Scope::Namespace(None))));
        assert!(
            matches!(scope("inline namespace a::v1"), Some(Scope::Namespace(Some(n))) if n == "a::v1")
        );
        assert!(matches!(
            scope("extern \"C\""),
            Some(Scope::Linkage { c: true })
        ));
        assert!(matches!(
            scope("extern \"C++\""),
            Some(Scope::Linkage { c: false })
        ));
        assert!(scope("struct S").is_none());
    }

    #[test]
    fn declarations_of_one_function_share_a_key() {
        let found = scan("template <typename T> __global__ void k(T* a, int n);\ntemplate <typename U> __global__ void k(U* b, int m) {}\n__global__ void k(float* a, int n);");
        assert_eq!(found[0].key, found[1].key);
        assert_ne!(found[0].key, found[2].key);
    }
}
