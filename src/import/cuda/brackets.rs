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
