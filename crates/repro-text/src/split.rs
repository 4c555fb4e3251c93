//! Splitting a comma-separated list at its top level: the commas inside `<>`, `()`, `[]` or `{}`
//! belong to an element. Owns no grammar beyond the brackets; imports nothing of repro.

/// Splits `text` at commas outside brackets: a demangled C++ parameter or template argument list
/// (capture), a PTX instruction's operands (async_race).
pub fn split_top_level(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}
