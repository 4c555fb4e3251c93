//! Which of the spec's sizes the harness must compile in as constant expressions, and every place
//! that makes it so.
//!
//! A shape-specialized kernel (a JIT library's per-shape instantiation) takes sizes as template
//! parameters: `template_args: [N, K, 128]`, `setup: "using gemm_t = Gemm<N, K>;"`, or a prelude
//! alias. There the sizes must be `constexpr`, and `--size` cannot change them without a rebuild;
//! everywhere else they stay run-time values read from spec.yaml. The places are found by a small
//! C++ scan (comments and string literals skipped) rather than a parser: the text is verbatim
//! user C++ that only nvcc can parse, and a size named where a constant is needed is all we need
//! to know.

use crate::spec::ResolvedSpec;

/// One place in the spec's C++ that needs sizes as constants, and the sizes it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledSizeUse {
    /// Where, as the spec's field path: "kernel.template_args[1] (`K`)".
    pub place: String,
    /// The sizes named there, in order of first appearance.
    pub sizes: Vec<String>,
}

/// Every place that makes the spec's sizes compile-time constants, in spec order: each template
/// argument that names a size, sizes inside `<...>` in `kernel.setup`, sizes named anywhere in
/// `source.prelude` (namespace-scope C++, where only a constant can appear).
pub fn compiled_size_uses(spec: &ResolvedSpec) -> Vec<CompiledSizeUse> {
    let is_size = |id: &str| spec.sizes.contains_key(id);
    let mut uses = Vec::new();
    let launch_paths = launch_paths(spec);
    for (path, launch) in launch_paths.iter().zip(&spec.launches) {
        for (i, arg) in launch.template_args.iter().enumerate() {
            let sizes = named_sizes(arg, false, &is_size);
            if !sizes.is_empty() {
                uses.push(CompiledSizeUse {
                    place: format!("{path}.template_args[{i}] (`{}`)", arg.trim()),
                    sizes,
                });
            }
        }
        if let Some(setup) = &launch.setup {
            let sizes = named_sizes(setup, true, &is_size);
            if !sizes.is_empty() {
                uses.push(CompiledSizeUse {
                    place: format!("{path}.setup, inside <...>"),
                    sizes,
                });
            }
        }
    }
    if let Some(prelude) = &spec.prelude {
        let sizes = named_sizes(prelude, false, &is_size);
        if !sizes.is_empty() {
            uses.push(CompiledSizeUse {
                place: "source.prelude".into(),
                sizes,
            });
        }
    }
    uses
}

/// Each launch's field path, as the spec writes it: `kernel`, or `launches[i]`.
pub fn launch_paths(spec: &ResolvedSpec) -> Vec<String> {
    spec.document
        .launch_entries()
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

impl CompiledSizeUse {
    /// The sizes as a message lists them: `` `N`, `K` ``.
    pub fn names(&self) -> String {
        let names: Vec<String> = self.sizes.iter().map(|s| format!("`{s}`")).collect();
        names.join(", ")
    }
}

/// Why the spec's sizes must be compile-time constants, naming every use; `None` when they are
/// run-time values that `--size` can change without a rebuild.
pub fn sizes_fixed_reason(spec: &ResolvedSpec) -> Option<String> {
    let uses = compiled_size_uses(spec);
    if uses.is_empty() {
        return None;
    }
    let parts: Vec<String> = uses
        .iter()
        .map(|u| format!("{} uses {}", u.place, u.names()))
        .collect();
    Some(parts.join("; "))
}

/// The sizes `text` names, outside comments and string literals; with `in_template_arguments`,
/// only those inside a template argument list (`Name<...>`).
fn named_sizes(
    text: &str,
    in_template_arguments: bool,
    is_size: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let names = if in_template_arguments {
        template_argument_names(text)
    } else {
        tokens(text)
            .into_iter()
            .filter_map(|t| match t {
                Token::Name(name) => Some(name),
                _ => None,
            })
            .collect()
    };
    let mut found: Vec<String> = Vec::new();
    for name in names {
        if is_size(name) && !found.iter().any(|f| f == name) {
            found.push(name.to_string());
        }
    }
    found
}

/// The names inside template argument lists. Without knowing which names are templates, a `<`
/// after a name may be a less-than: a list counts only once its `>` closes it within the same
/// parentheses and statement, so `if (x < N)` or `x < N;` names no template argument.
fn template_argument_names(text: &str) -> Vec<&str> {
    struct OpenList<'a> {
        parens: usize,
        names: Vec<&'a str>,
    }
    let mut confirmed = Vec::new();
    let mut open: Vec<OpenList> = Vec::new();
    let mut parens = 0usize;
    let mut after_name = false;
    for token in tokens(text) {
        let is_name = matches!(token, Token::Name(_) | Token::Punct(b'>'));
        match token {
            Token::Name(name) => {
                if let Some(list) = open.last_mut() {
                    list.names.push(name);
                }
            }
            Token::Punct(b'<') if after_name => open.push(OpenList {
                parens,
                names: Vec::new(),
            }),
            Token::Punct(b'>') if open.last().is_some_and(|l| l.parens == parens) => {
                let list = open.pop().expect("checked");
                match open.last_mut() {
                    Some(outer) => outer.names.extend(list.names),
                    None => confirmed.extend(list.names),
                }
            }
            Token::Punct(b'(') => parens += 1,
            Token::Punct(b')') => {
                open.retain(|l| l.parens < parens);
                parens = parens.saturating_sub(1);
            }
            Token::Punct(b';' | b'{' | b'}') => open.clear(),
            _ => {}
        }
        after_name = is_name;
    }
    confirmed
}

#[derive(Debug, PartialEq)]
enum Token<'a> {
    Name(&'a str),
    Number,
    /// One punctuation byte; `<<`, `->`, `>=` and `<=` are `Operator`, never brackets.
    Punct(u8),
    Operator,
}

/// C++ text as names, numbers and punctuation, with comments and string literals left out.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        match c {
            b'/' if next == Some(b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if next == Some(b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'"' | b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != c {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push(Token::Operator);
            }
            b'<' if matches!(next, Some(b'<' | b'=')) => {
                i += 2;
                out.push(Token::Operator);
            }
            b'-' | b'>' if next == Some(if c == b'-' { b'>' } else { b'=' }) => {
                i += 2;
                out.push(Token::Operator);
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.push(Token::Name(&text[start..i]));
            }
            c if c.is_ascii_digit() => {
                // A number with its suffix (128u, 1e3f, 0x1FULL) is no name.
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
                {
                    i += 1;
                }
                out.push(Token::Number);
            }
            c if c.is_ascii_whitespace() => i += 1,
            c => {
                i += 1;
                out.push(Token::Punct(c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes_in(text: &str, in_template_arguments: bool) -> Vec<String> {
        let is_size = |id: &str| ["M", "N", "K"].contains(&id);
        named_sizes(text, in_template_arguments, &is_size)
    }

    #[test]
    fn every_size_inside_template_arguments_is_found() {
        assert_eq!(
            sizes_in("using gemm_t = Gemm<N, K, 256, 128>;", true),
            ["N", "K"]
        );
        // Nested lists: the `>` of Cfg<N> does not end Gemm's list.
        assert_eq!(sizes_in("using G = Gemm<Cfg<N>, K>;", true), ["N", "K"]);
        assert_eq!(
            sizes_in("auto d = make<Layout<M>>(x);\nusing G = Gemm<K>;", true),
            ["M", "K"]
        );
    }

    #[test]
    fn sizes_outside_template_arguments_are_run_time_values() {
        assert!(sizes_in("int tiles = ceil_div(N, 128) * M;", true).is_empty());
        // A comparison or a shift is no template argument list.
        assert!(sizes_in("bool big = 3 < N; int s = 1 << K;", true).is_empty());
        assert!(sizes_in("if (x < N) { y = 1; }", true).is_empty());
        // A list the scan opened by mistake ends with the statement.
        assert!(sizes_in("bool b = x < 3; int y = N;", true).is_empty());
    }

    #[test]
    fn comments_and_strings_name_no_size() {
        assert!(sizes_in(
            "// N rows, K columns\n/* M */ const char* s = \"N\";",
            false
        )
        .is_empty());
        assert_eq!(sizes_in("// about N\nusing Cfg = Tile<K>;", false), ["K"]);
    }

    #[test]
    fn numbers_with_suffixes_are_no_names() {
        assert!(sizes_in("Gemm<128u, 1e3f, 0x1FULL>", true).is_empty());
    }
}
