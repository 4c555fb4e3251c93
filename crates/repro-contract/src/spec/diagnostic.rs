//! Spec errors with a place: file, line and column, the offending source line, and a hint.
//!
//! Rendered the way rustc and `just` render theirs, because a kernel engineer reads these in a
//! terminal next to the YAML they just edited.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// A position in the spec file, 1-based like every editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// One problem found in a spec.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub message: String,
    pub location: Location,
    pub help: Option<String>,
    /// A second place the problem involves (where a key given twice was given first), with what
    /// it is; shown as `file:line:column` like the first, so an editor can jump to both.
    pub also: Option<(String, Location)>,
}

impl Diagnostic {
    pub fn new(location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            message: message.into(),
            location,
            help: None,
            also: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Names a second place: rendered `= note: {what} at file:line:column`.
    pub fn with_also(mut self, what: impl Into<String>, location: Location) -> Self {
        self.also = Some((what.into(), location));
        self
    }
}

/// Every problem found in one spec file, with the text needed to show where.
#[derive(Debug, Clone)]
pub struct SpecErrors {
    pub file: PathBuf,
    pub source: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl SpecErrors {
    pub fn new(file: &Path, source: &str, diagnostics: Vec<Diagnostic>) -> Self {
        SpecErrors {
            file: file.to_path_buf(),
            source: source.to_string(),
            diagnostics,
        }
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&str> = self.source.lines().collect();
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let Location { line, column } = d.location;
            writeln!(f, "error: {}", shown_message(&d.message))?;
            let gutter = line.to_string().len();
            writeln!(
                f,
                "{:gutter$}--> {}:{}:{}",
                "",
                self.file.display(),
                line,
                column
            )?;
            if let Some(text) = line.checked_sub(1).and_then(|l| lines.get(l)) {
                let (shown, caret_at) = excerpt(text, column);
                writeln!(f, "{:gutter$} |", "")?;
                writeln!(f, "{line} | {shown}")?;
                // Spaces written out, not a `{:width$}` padding: a width above 65,535 panics in
                // `fmt` (a flow mapping on one long line puts an error far to the right).
                writeln!(f, "{:gutter$} | {}^", "", " ".repeat(caret_at))?;
            }
            if let Some((what, at)) = &d.also {
                writeln!(
                    f,
                    "{:gutter$} = note: {} at {}:{}:{}",
                    "",
                    shown_message(what),
                    self.file.display(),
                    at.line,
                    at.column
                )?;
            }
            if let Some(help) = &d.help {
                writeln!(f, "{:gutter$} = help: {}", "", shown_message(help))?;
            }
        }
        let n = self.diagnostics.len();
        write!(
            f,
            "{} error{} in {}; nothing was written",
            n,
            if n == 1 { "" } else { "s" },
            self.file.display()
        )
    }
}

/// Longest source line shown whole; a longer one is shown around the column, so that a spec
/// written on one line (generated, or minified JSON, which is YAML too) still gets a readable
/// excerpt with the caret under the problem.
const EXCERPT_CHARS: usize = 120;

/// The part of `text` to show and the caret's offset in it, for a 1-based `column` counted in
/// characters (as both YAML parsers count). Control characters are shown escaped
/// ([`shown_char`]), the caret moved past their escapes.
fn excerpt(text: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = text.chars().collect();
    let at = column.saturating_sub(1).min(chars.len());
    let (start, end) = if chars.len() <= EXCERPT_CHARS {
        (0, chars.len())
    } else {
        let start = at.saturating_sub(EXCERPT_CHARS / 3);
        let end = (start + EXCERPT_CHARS).min(chars.len());
        (end.saturating_sub(EXCERPT_CHARS), end)
    };
    let (before, after) = (
        if start > 0 { "..." } else { "" },
        if end < chars.len() { "..." } else { "" },
    );
    let pieces: Vec<String> = chars[start..end]
        .iter()
        .map(|&c| match c {
            '\n' => "\\n".to_string(),
            c => shown_char(c),
        })
        .collect();
    let caret = pieces[..at - start]
        .iter()
        .map(|p| p.chars().count())
        .sum::<usize>();
    (
        format!("{before}{}{after}", pieces.concat()),
        caret + before.len(),
    )
}

/// Longest message, help or note shown whole. A message quotes what the spec wrote (an unknown
/// field's name, a value of the wrong type), and a hostile spec can make that a whole file: a
/// campaign that names /etc/passwd as its spec once printed all of it in "invalid type: string".
const MESSAGE_CHARS: usize = 1000;

/// `message` as a terminal may show it: control characters escaped (a spec's escape sequence
/// would retitle, recolour or clear the reader's terminal), and cut in the middle past
/// [`MESSAGE_CHARS`], saying how much was left out.
pub fn shown_message(message: &str) -> String {
    let message = shortened_quotes(message);
    let chars: Vec<char> = message.chars().collect();
    let piece = |range: &[char]| {
        let text: String = range.iter().collect();
        printable(&text).replace('\n', "\\n")
    };
    if chars.len() <= MESSAGE_CHARS {
        return piece(&chars);
    }
    let keep = MESSAGE_CHARS / 2;
    format!(
        "{} ... ({} characters left out) ... {}",
        piece(&chars[..keep]),
        chars.len() - 2 * keep,
        piece(&chars[chars.len() - keep..])
    )
}

/// Longest quoted value (`"..."`, as serde quotes what a spec wrote) a message shows whole.
const QUOTED_CHARS: usize = 80;

/// `message` with every double-quoted value longer than [`QUOTED_CHARS`] cut to its start and
/// its length: "invalid type: string" quotes a whole document when a file that is no spec (a
/// log, /etc/passwd) is read as one, and the reader needs to know what it was, not all of it.
fn shortened_quotes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4096));
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        // The closing quote: the next one not escaped by a backslash (Debug-quoted strings).
        let mut escaped = false;
        let close = after.char_indices().find(|&(_, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes
        });
        let Some((close, _)) = close else {
            out.push_str(after);
            return out;
        };
        let inner = &after[..close];
        let count = inner.chars().count();
        if count > QUOTED_CHARS {
            out.extend(inner.chars().take(QUOTED_CHARS - 20));
            out.push_str(&format!("...\" ({count} characters)"));
        } else {
            out.push_str(inner);
            out.push('"');
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// A character a terminal acts on rather than shows: a control character (an escape sequence
/// retitles, recolours or clears it; a carriage return overwrites the line) other than a newline
/// or a tab, and the marks that reorder text (U+202A-U+202E, U+2066-U+2069).
fn acted_on(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would act on written as its escape (`\u{1b}`):
/// text from a file (a spec, a campaign's record) is printed as it is, never acted on.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acted_on) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(shown_char).collect())
}

/// `text` on one line, escaped: for a field printed on a line of its own.
pub fn one_line(text: &str) -> String {
    printable(text).replace('\n', "\\n").replace('\t', "\\t")
}

/// One character as [`printable`] shows it.
fn shown_char(c: char) -> String {
    if acted_on(c) {
        c.escape_unicode().to_string()
    } else {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_never_reaches_the_terminal_raw() {
        let shown = shown_message("unknown field `a\u{1b}]0;x\u{7}b`, expected `c`");
        assert_eq!(shown, "unknown field `a\\u{1b}]0;x\\u{7}b`, expected `c`");
        let long = format!(
            "invalid type: string \"{}\", expected struct Spec",
            "x".repeat(5000)
        );
        let shown = shown_message(&long);
        assert!(shown.starts_with("invalid type: string \"xxxx"), "{shown}");
        assert!(
            shown.ends_with("...\" (5000 characters), expected struct Spec"),
            "{shown}"
        );
        assert!(shown.len() < 140, "{shown}");
        let escaped = "a \"say \\\"hi\\\"\" b";
        assert_eq!(shown_message(escaped), escaped);
        let cut = shown_message(&"y".repeat(3000));
        assert!(cut.contains("(2000 characters left out)"), "{cut}");
    }

    #[test]
    fn an_error_far_to_the_right_shows_its_surroundings() {
        let line = format!("flags: [{}BAD]", "x, ".repeat(30_000));
        let column = line.find("BAD").unwrap() + 1;
        let errors = SpecErrors::new(
            Path::new("wide.yaml"),
            &line,
            vec![Diagnostic::new(Location { line: 1, column }, "bad flag")],
        );
        let text = errors.to_string();
        assert!(
            text.contains(&format!("--> wide.yaml:1:{column}")),
            "{text}"
        );
        let shown: Vec<&str> = text.lines().collect();
        let (source, caret) = (shown[3], shown[4]);
        assert!(
            source.len() < 140 && source.starts_with("1 | ..."),
            "{source}"
        );
        assert_eq!(source.find("BAD"), caret.find('^'), "{source}\n{caret}");
    }

    #[test]
    fn short_lines_are_shown_whole() {
        assert_eq!(excerpt("a: [1, 2]", 5), ("a: [1, 2]".to_string(), 4));
        assert_eq!(excerpt("a: é", 99), ("a: é".to_string(), 4));
    }
}
