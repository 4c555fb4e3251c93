//! Bracket-aware searches over token slices: the closing bracket, top-level commas, the
//! top-level `=`. Template `<>` count only outside parentheses and brackets, where a `<` is more
//! likely a comparison.

use super::lex::{Kind, Token};

/// The longest template argument list looked for.
const MAX_TEMPLATE_ARGUMENT_TOKENS: usize = 4096;

// ---------------------------------------------------------------------------------------------
// Bracket-aware helpers over token slices

/// Index of the token closing the bracket opened at `open` (`(`, `[`, `{` or a template `<`),
/// with template `<>` only counted outside parentheses and brackets.
pub(super) fn matching(tokens: &[Token], open: usize) -> Option<usize> {
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
pub(super) fn split_top(tokens: &[Token]) -> Vec<&[Token]> {
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
pub(super) fn top_level_eq(tokens: &[Token]) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::lex::{join, lex};

    fn parts(text: &str) -> Vec<String> {
        split_top(&lex(text).code).iter().map(|p| join(p)).collect()
    }

    #[test]
    fn matching_brackets_of_each_kind() {
        let code = lex("f(a, (b), [c], {d}) x").code;
        assert_eq!(matching(&code, 1), Some(15));
        assert_eq!(code[16].text, "x");
        assert_eq!(matching(&code, 4), Some(6));
        assert_eq!(matching(&lex("(a").code, 0), None);
        assert_eq!(matching(&lex("(a]").code, 0), None);
    }

    #[test]
    fn template_angles_count_outside_parentheses_only() {
        let code = lex("A<B<int>, (x < y)> z").code;
        let close = matching(&code, 1).unwrap();
        assert_eq!(join(&code[close + 1..]), "z");
        assert_eq!(close, code.len() - 2);
        // `>>` is one token, so a nested template closes with a space in C++03 style only.
        let nested = lex("A<B<int> > z").code;
        assert_eq!(matching(&nested, 1), Some(6));
        // An unclosed `<` inside parentheses (a comparison) does not hide the `)`.
        let call = lex("(a < b) c").code;
        assert_eq!(matching(&call, 0), Some(4));
    }

    #[test]
    fn a_comparison_is_not_searched_to_the_end_of_the_file() {
        let mut text = String::from("a < b ;");
        text.push_str(&" x".repeat(MAX_TEMPLATE_ARGUMENT_TOKENS + 10));
        let code = lex(&text).code;
        assert_eq!(matching(&code, 1), None);
    }

    #[test]
    fn split_at_top_level_commas() {
        assert_eq!(
            parts("std::pair<int, float> p, f(a, b) q, int r[2][3]"),
            ["std::pair<int, float> p", "f(a, b) q", "int r[2][3]"]
        );
        assert_eq!(parts(""), [""]);
        assert_eq!(
            parts("bool b = (x < y), int z"),
            ["bool b = (x < y)", "int z"]
        );
    }

    #[test]
    fn the_first_top_level_equals() {
        let code = lex("A<(1 == 2)> x = y = 3").code;
        let eq = top_level_eq(&code).unwrap();
        assert_eq!(join(&code[..eq]), "A<(1 == 2)> x");
        assert_eq!(top_level_eq(&lex("f(a = 1)").code), None);
    }
}
