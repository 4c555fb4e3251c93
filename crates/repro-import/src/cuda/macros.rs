//! Macros: `#define`s parsed from directives, the table of those visible to one file (one
//! definition per name when nvcc would see one), and the expander that substitutes object- and
//! function-like macros (no `#`/`##`) in the code tokens.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::lex::{join, lex, Directive, Kind, Token};

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

// ---------------------------------------------------------------------------------------------
// Macros

#[derive(Debug, Clone)]
pub(super) struct Macro {
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
pub(super) enum MacroEntry {
    Unique(Rc<Macro>),
    /// Several different definitions (`#ifdef` alternatives): not expanded.
    Ambiguous,
}

/// Words only nvcc's side of an `#ifdef __CUDACC__` alternative would spell.
const CUDA_WORDS: &[&str] = &["__global__", "__device__", "__host__", "__grid_constant__"];

/// A `#define`, as a name and a macro; None for anything malformed.
pub(super) fn parse_define(d: &Directive) -> Option<(String, Macro)> {
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
pub(super) struct MacroTable {
    definitions: HashMap<String, Vec<Rc<Macro>>>,
    pub(super) entries: HashMap<String, MacroEntry>,
    /// Names with definitions dropped for their `#ifdef`: what the alternatives give.
    pub(super) alternatives: HashMap<String, String>,
}

impl MacroTable {
    pub(super) fn define(&mut self, name: &str, m: &Rc<Macro>) {
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
    pub(super) fn finish(&mut self) {
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

pub(super) struct Expander<'a> {
    pub(super) table: &'a MacroTable,
    pub(super) budget: usize,
}

impl Expander<'_> {
    pub(super) fn expand(
        &mut self,
        tokens: &[Token],
        active: &mut Vec<String>,
        depth: usize,
    ) -> Vec<Token> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's own macros, finished as for a scan.
    fn table(text: &str) -> (MacroTable, Vec<Token>) {
        let lexed = lex(text);
        let mut table = MacroTable::default();
        for d in &lexed.directives {
            if let Some((name, m)) = parse_define(d) {
                table.define(&name, &Rc::new(m));
            }
        }
        table.finish();
        (table, lexed.code)
    }

    fn expanded(text: &str) -> String {
        let (table, code) = table(text);
        let mut expander = Expander {
            table: &table,
            budget: 10_000,
        };
        join(&expander.expand(&code, &mut Vec::new(), 0))
    }

    #[test]
    fn object_and_function_like_macros() {
        let text =
            "#define N 128\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\nint x = MAX(N, f(1, 2));";
        assert_eq!(
            expanded(text),
            "int x = ((128) > (f(1, 2)) ? (128) : (f(1, 2)));"
        );
    }

    #[test]
    fn a_function_like_macro_without_arguments_stays() {
        assert_eq!(expanded("#define F(x) x\nint F;"), "int F;");
        // `#define F (x)` (space before the parenthesis) is object-like.
        assert_eq!(expanded("#define F (x)\nF(1)"), "(x)(1)");
    }

    #[test]
    fn variadic_and_named_variadic_macros() {
        assert_eq!(
            expanded("#define CALL(f, ...) f(__VA_ARGS__)\nCALL(g, 1, 2)"),
            // Each argument keeps the space it had in the call.
            "g( 1, 2)"
        );
        assert_eq!(
            expanded("#define CALL(f, args...) f(__VA_ARGS__)\nCALL(g, 1)"),
            "g( 1)"
        );
    }

    #[test]
    fn self_reference_and_paste_are_left_alone() {
        assert_eq!(expanded("#define A A + 1\nA"), "A + 1");
        assert_eq!(expanded("#define CAT(a, b) a ## b\nCAT(x, y)"), "CAT(x, y)");
        assert_eq!(expanded("#define STR(a) #a\nSTR(x)"), "STR(x)");
    }

    #[test]
    fn exponential_expansion_stops_at_the_budget() {
        let text = "#define F(x) x x\nF(F(F(F(F(F(F(F(F(F(F(F(F(F(F(F(1))))))))))))))))";
        let out = expanded(text);
        assert!(out.len() < 100_000, "{} bytes", out.len());
    }

    #[test]
    fn expanded_tokens_remember_their_macro_and_the_call_line() {
        let (table, code) = table("#define REAL float\n\nREAL x;");
        let out = Expander {
            table: &table,
            budget: 100,
        }
        .expand(&code, &mut Vec::new(), 0);
        assert_eq!(out[0].text, "float");
        assert_eq!(out[0].from_macro.as_deref(), Some("REAL"));
        assert_eq!(out[0].line, 3);
        assert_eq!(out[1].from_macro, None);
    }

    #[test]
    fn of_two_definitions_the_one_spelling_cuda_keywords_wins() {
        let text = "#ifdef __CUDACC__\n#define HD __host__ __device__\n#else\n#define HD\n#endif\nHD void f();";
        assert_eq!(expanded(text), "__host__ __device__ void f();");
    }

    #[test]
    fn two_plain_definitions_are_ambiguous() {
        let text = "#ifdef USE_DOUBLE\n#define REAL double\n#else\n#define REAL float\n#endif\n#define USE_DOUBLE\nREAL x;";
        let (table, _) = table(text);
        assert!(matches!(
            table.entries.get("REAL"),
            Some(MacroEntry::Ambiguous)
        ));
        assert_eq!(expanded(text), "REAL x;");
    }

    #[test]
    fn a_definition_under_an_ifdef_of_a_name_never_defined_is_set_aside() {
        let text =
            "#ifdef USE_DOUBLE\n#define REAL double\n#else\n#define REAL float\n#endif\nREAL x;";
        assert_eq!(expanded(text), "float x;");
        let (table, _) = table(text);
        assert_eq!(
            table.alternatives.get("REAL").map(String::as_str),
            Some("`REAL` is `float` here, `double` when USE_DOUBLE is defined")
        );
    }

    #[test]
    fn cutlass_markers_are_known_without_the_library() {
        assert_eq!(
            expanded("CUTLASS_GLOBAL void k();"),
            "__global__ static void k();"
        );
        // The tree's own definition wins over the built-in one.
        assert_eq!(
            expanded("#define CUTLASS_GLOBAL __global__\nCUTLASS_GLOBAL void k();"),
            "__global__ void k();"
        );
    }

    #[test]
    fn nvcc_predefines_cuda_and_compiler_names_but_not_rtc() {
        assert!(predefined("__CUDACC__"));
        assert!(predefined("__CUDA_ARCH__"));
        assert!(predefined("__NVCC__"));
        assert!(predefined("__GNUC__"));
        assert!(!predefined("__CUDACC_RTC__"));
        assert!(!predefined("_MSC_VER"));
    }

    #[test]
    fn macro_arguments_split_at_top_level_commas() {
        let code = lex("(a, f(b, c), ) rest").code;
        let (args, next) = macro_args(&code, 0).unwrap();
        let args: Vec<String> = args.iter().map(|a| join(a)).collect();
        assert_eq!(args, ["a", "f(b, c)", ""]);
        assert_eq!(code[next].text, "rest");
        assert_eq!(macro_args(&lex("()").code, 0).unwrap().0.len(), 0);
        assert!(macro_args(&lex("(a, b").code, 0).is_none());
        assert!(macro_args(&lex("a").code, 0).is_none());
    }

    #[test]
    fn malformed_defines_are_ignored() {
        let lexed = lex("#define\n#define 1 x\n#define F(a, 1) a\n#define G(a\n");
        assert!(lexed.directives.iter().all(|d| parse_define(d).is_none()));
    }
}
