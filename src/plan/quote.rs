//! Quoting for the places a spec's values are written into code: a POSIX shell word (build.sh),
//! a CMake quoted argument (CMakeLists.txt), a comment line. Each keeps a value inert: no spec
//! value ever becomes shell or CMake code.

/// Quotes an argument for a POSIX shell so that it stays one inert word: anything but plain
/// characters is single-quoted (`$`, backticks, `\` and newlines included), a `'` inside closed,
/// escaped and reopened.
pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+,./:@%".contains(c));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// A CMake quoted argument (`"..."`) whose content is exactly `arg`: `\`, `"` and `$` escaped (so
/// neither `${VAR}` nor `$ENV{...}` expands), `;` as `$<SEMICOLON>` (so a list never splits it),
/// and newlines, tabs and carriage returns as their escapes (so nothing leaves the argument).
pub fn cmake_quote(arg: &str) -> String {
    let mut out = String::from("\"");
    for c in arg.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("\\$"),
            ';' => out.push_str("$<SEMICOLON>"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text for one comment line of a script or C++ file: control characters (a newline would end
/// the comment and make the rest code) become spaces.
pub fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("-O3"), "-O3");
        assert_eq!(shell_quote("-DNAME=a b"), "'-DNAME=a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_quote("-DROOT=${HOME}$(touch /tmp/x)"),
            "'-DROOT=${HOME}$(touch /tmp/x)'"
        );
        assert_eq!(shell_quote("`id`"), "'`id`'");
    }

    #[test]
    fn cmake_quoting() {
        assert_eq!(cmake_quote("-O3"), "\"-O3\"");
        assert_eq!(cmake_quote("-DA=x\\"), "\"-DA=x\\\\\"");
        assert_eq!(
            cmake_quote(") \nexecute_process(COMMAND touch /tmp/x) #"),
            "\") \\nexecute_process(COMMAND touch /tmp/x) #\""
        );
        assert_eq!(cmake_quote("${HOME};a"), "\"\\${HOME}$<SEMICOLON>a\"");
    }
}
