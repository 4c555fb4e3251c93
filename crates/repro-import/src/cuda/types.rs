//! What the tokens of a parameter or a template parameter mean: name, default, and the kind of
//! type (a buffer pointer, an integer or float scalar, a TMA descriptor...), after the `using` /
//! `typedef` aliases of the file and the headers it includes.

use std::collections::HashMap;

use super::brackets::{matching, split_top, top_level_eq};
use super::lex::{join, type_key, Kind, Token};
use super::{Param, ParamType, TemplateParam, TemplateParamKind};

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

/// Aliases (`using X = ...;`, `typedef ... X;`) by name: Some(text) when unique.
pub(super) type Aliases = HashMap<String, Option<String>>;

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

pub(super) fn merge_aliases(into: &mut Aliases, from: &Aliases) {
    for (name, value) in from {
        add_alias(into, name, value.clone());
    }
}

pub(super) fn collect_aliases(tokens: &[Token], aliases: &mut Aliases) {
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

pub(super) fn parse_template_params(tokens: &[Token]) -> Vec<TemplateParam> {
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

pub(super) fn analyze_param(
    tokens: &[Token],
    template: &[TemplateParam],
    aliases: &Aliases,
) -> Param {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::lex::lex;

    fn param_with(text: &str, template: &[TemplateParam], aliases: &Aliases) -> Param {
        analyze_param(&lex(text).code, template, aliases)
    }

    fn param(text: &str) -> Param {
        param_with(text, &[], &Aliases::new())
    }

    fn pointer(element: &str, is_const: bool) -> ParamType {
        ParamType::Pointer {
            element: element.into(),
            resolved: None,
            is_const,
        }
    }

    #[test]
    fn buffers() {
        let p = param("const float* __restrict__ a");
        assert_eq!(
            (p.name.as_deref(), p.ty),
            (Some("a"), pointer("float", true))
        );
        assert_eq!(param("float out[]").ty, pointer("float", false));
        assert_eq!(param("half2 *x").ty, pointer("half2", false));
        assert_eq!(param("float const* p").ty, pointer("float", true));
    }

    #[test]
    fn scalars_with_defaults() {
        let p = param("int n = 4");
        assert_eq!(p.ty, ParamType::Integer("int".into()));
        assert_eq!(
            (p.name.as_deref(), p.default.as_deref()),
            (Some("n"), Some("4"))
        );
        assert_eq!(
            param("unsigned long long c").ty,
            ParamType::Integer("unsigned long long".into())
        );
        assert_eq!(
            param("const std::size_t s").ty,
            ParamType::Integer("std::size_t".into())
        );
        assert_eq!(
            param("__nv_bfloat16 alpha").ty,
            ParamType::Float("__nv_bfloat16".into())
        );
        assert_eq!(param("bool flag").ty, ParamType::Bool);
        assert_eq!(
            param("const __grid_constant__ CUtensorMap tmap").ty,
            ParamType::TensorMap
        );
    }

    #[test]
    fn unnamed_parameters() {
        let p = param("int");
        assert_eq!((p.name, p.ty), (None, ParamType::Integer("int".into())));
        assert_eq!(param("const float*").name, None);
        assert_eq!(param("unsigned int").name, None);
    }

    #[test]
    fn other_types_are_kept_as_written() {
        let f = param("void (*fn)(int)");
        assert_eq!(f.name.as_deref(), Some("fn"));
        assert!(matches!(f.ty, ParamType::Other(_)));
        assert_eq!(param("float** pp").ty, ParamType::Other("float**".into()));
        assert_eq!(
            param("const Params& p").ty,
            ParamType::Other("const Params&".into())
        );
        assert_eq!(param("Params p").ty, ParamType::Other("Params".into()));
    }

    #[test]
    fn template_type_values() {
        let t = parse_template_params(&lex("typename T").code);
        assert_eq!(
            param_with("T alpha", &t, &Aliases::new()).ty,
            ParamType::TemplateValue("T".into())
        );
    }

    #[test]
    fn aliases_resolve_element_and_scalar_types() {
        let mut aliases = Aliases::new();
        collect_aliases(
            &lex("using real = float; typedef const double dbl; using idx = ns::index_t;").code,
            &mut aliases,
        );
        assert_eq!(
            param_with("real* x", &[], &aliases).ty,
            ParamType::Pointer {
                element: "real".into(),
                resolved: Some("float".into()),
                is_const: false
            }
        );
        assert_eq!(
            param_with("dbl d", &[], &aliases).ty,
            ParamType::Float("dbl".into())
        );
        assert_eq!(resolve_alias("lib::real", &aliases), "float");
        // Two different definitions of one name: neither is taken.
        add_alias(&mut aliases, "real", Some("double".into()));
        assert_eq!(resolve_alias("real", &aliases), "real");
        // Cycles stop.
        let mut cycle = Aliases::new();
        add_alias(&mut cycle, "a", Some("b".into()));
        add_alias(&mut cycle, "b", Some("a".into()));
        assert_eq!(resolve_alias("a", &cycle), "a");
    }

    #[test]
    fn template_parameters() {
        let t = parse_template_params(
            &lex("typename T, int BM = 128, typename... Ts, template <typename> class C, bool = true, class U = Tile<T, 4>").code,
        );
        let shown: Vec<(TemplateParamKind, Option<&str>, Option<&str>, bool)> = t
            .iter()
            .map(|p| {
                (
                    p.kind.clone(),
                    p.name.as_deref(),
                    p.default.as_deref(),
                    p.pack,
                )
            })
            .collect();
        use TemplateParamKind::*;
        assert_eq!(
            shown,
            [
                (Type, Some("T"), None, false),
                (Value("int".into()), Some("BM"), Some("128"), false),
                (Type, Some("Ts"), None, true),
                (Template, Some("C"), None, false),
                (Value("bool".into()), None, Some("true"), false),
                (Type, Some("U"), Some("Tile<T, 4>"), false),
            ]
        );
    }

    #[test]
    fn integer_and_float_type_names() {
        for t in [
            "int",
            "unsigned",
            "signed",
            "long long",
            "unsigned short",
            "std::int64_t",
            "::size_t",
        ] {
            assert!(is_integer_type(t), "{t}");
        }
        for t in ["float", "char", "signed signed x", "bool"] {
            assert!(!is_integer_type(t), "{t}");
        }
        assert!(is_float_type("::cutlass::half_t"));
        assert!(!is_float_type("int"));
    }
}
