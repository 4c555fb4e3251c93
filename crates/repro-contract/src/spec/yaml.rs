//! All YAML handling: reading a spec into typed values, remembering where every value was
//! written (for error messages), and writing YAML back out: the resolved spec, and the one
//! scalar writer ([`scalar`]) every command that writes spec text by hand (`repro import`,
//! `repro capture`, `repro flags`) quotes its values with.
//!
//! Every YAML file repro reads (a spec, a campaign file) goes through [`parse_document`], which
//! also takes a leading UTF-8 byte order mark, as editors on Windows write one.
//!
//! serde_yaml gives typed deserialization with a location for *syntax and type* errors, but a
//! deserialized value forgets where it came from. Semantic errors ("tensor X is not declared")
//! need that place too, so the same text is also run through yaml-rust2's event parser to build a
//! [`SpanMap`] from value paths (`tensors.A.shape[1]`) to line and column.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, ScanError};

use super::diagnostic::{Diagnostic, Location};
use super::model::Spec;
use repro_text::did_you_mean;

/// Where each value (and each mapping key) of a YAML document was written.
#[derive(Debug, Default, Clone)]
pub struct SpanMap {
    values: HashMap<String, Location>,
    keys: HashMap<String, Location>,
}

impl SpanMap {
    /// The location of the value at `path` (`kernel.grid[0]`), or of its closest written parent.
    pub fn value(&self, path: &str) -> Location {
        self.lookup(&self.values, path)
    }

    /// The location of the key that introduces `path` (`tensors.A`), falling back like `value`.
    pub fn key(&self, path: &str) -> Location {
        match self.keys.get(path) {
            Some(loc) => *loc,
            None => self.value(path),
        }
    }

    fn lookup(&self, table: &HashMap<String, Location>, path: &str) -> Location {
        let mut p = path;
        loop {
            if let Some(loc) = table.get(p) {
                return *loc;
            }
            match p.rfind(['.', '[']) {
                Some(cut) => p = &p[..cut],
                None => {
                    return self
                        .values
                        .get("")
                        .copied()
                        .unwrap_or(Location { line: 1, column: 1 })
                }
            }
        }
    }
}

enum Frame {
    Map {
        path: String,
        key: Option<String>,
        /// The keys read so far, with where: a key given twice is refused, where serde would
        /// refuse it in a struct but let the later entry of a map (`sizes:`, `tensors:`)
        /// silently replace the earlier.
        seen: HashMap<String, Location>,
    },
    Seq {
        path: String,
        index: usize,
    },
}

/// Deepest nesting of mappings and sequences in a spec. A spec nests four or five levels; the
/// bound refuses `[[[[...]]]]` at once, where reading it to the end took quadratic time (100,000
/// levels: 34 s), and it is serde_yaml's own recursion limit, so both readers agree.
pub const MAX_DEPTH: usize = 128;

/// Most that aliases may add to a document, in bytes of expanded size (see [`NODE_SIZE`]). Each
/// `*alias` is a copy of its anchor's node, so a small text can stand for an enormous document
/// (a 107 KB spec using a 100 KB anchor 2,000 times took 31 s and 3.2 GB). Like other careful
/// YAML readers, repro bounds the expansion; a spec that shares a flag list or a shape a few
/// times stays far below it.
pub const MAX_ALIAS_EXPANSION: u64 = 4 << 20;

/// What one node counts for in the expanded size besides its text: roughly what a deserialized
/// value costs in memory, so that many tiny nodes (`[*a, *a, ...]` nested) count too.
const NODE_SIZE: u64 = 16;

/// A node being read: its anchor (0 for none) and the expanded size of what it holds so far.
struct Open {
    anchor: usize,
    size: u64,
}

#[derive(Default)]
struct SpanCollector {
    stack: Vec<Frame>,
    spans: SpanMap,
    /// Values still reading `TODO...` (left by `repro import`), with where they are.
    todos: Vec<(String, Location, String)>,
    /// The containers being read, for the expanded size of anchored nodes.
    open: Vec<Open>,
    /// The expanded size of each complete anchored node, by anchor id.
    anchors: HashMap<usize, u64>,
    /// What aliases added so far.
    expanded: u64,
    /// A bound of this module crossed: reading stops there.
    limit: Option<Diagnostic>,
    /// Keys given twice in one mapping.
    duplicates: Vec<Diagnostic>,
}

impl SpanCollector {
    /// The path of the next value in the innermost container, or None when a key comes next.
    fn next_value_path(&mut self) -> Option<String> {
        match self.stack.last() {
            None => Some(String::new()),
            Some(Frame::Map { key: None, .. }) => None,
            Some(Frame::Map {
                path, key: Some(k), ..
            }) => Some(join(path, k)),
            Some(Frame::Seq { path, index }) => Some(format!("{path}[{index}]")),
        }
    }

    /// A node of `size` is complete inside the innermost container (or is the document).
    fn add_size(&mut self, anchor: usize, size: u64) {
        if anchor != 0 {
            self.anchors.insert(anchor, size);
        }
        if let Some(parent) = self.open.last_mut() {
            parent.size = parent.size.saturating_add(size);
        }
    }

    /// Checks the bounds for `event` before it is taken in; a crossed bound is kept in `limit`.
    fn check_limits(&mut self, event: &Event, loc: Location) {
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) if self.open.len() >= MAX_DEPTH => {
                self.limit = Some(too_deep(loc));
            }
            Event::Alias(id) => {
                // An alias inside its own anchor's node (a recursive alias) has no size yet;
                // serde_yaml refuses it.
                let size = self.anchors.get(id).copied().unwrap_or(NODE_SIZE);
                self.expanded = self.expanded.saturating_add(size);
                if self.expanded > MAX_ALIAS_EXPANSION {
                    self.limit = Some(
                        Diagnostic::new(
                            loc,
                            format!(
                                "aliases expand the spec by more than {} MiB",
                                MAX_ALIAS_EXPANSION >> 20
                            ),
                        )
                        .with_help(
                            "each `*alias` is a full copy of the node its `&anchor` names; \
                             write a large value once instead of repeating it through aliases",
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// A value in the innermost container is complete.
    fn advance(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Map { key, .. }) => *key = None,
            Some(Frame::Seq { index, .. }) => *index += 1,
            None => {}
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn location(mark: &Marker) -> Location {
    // yaml-rust2 lines are 1-based, columns 0-based.
    Location {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

impl MarkedEventReceiver for SpanCollector {
    fn on_event(&mut self, event: Event, mark: Marker) {
        let loc = location(&mark);
        match &event {
            Event::Scalar(text, _, anchor, _) => {
                self.add_size(*anchor, text.len() as u64 + NODE_SIZE)
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                self.open.push(Open {
                    anchor: *anchor,
                    size: NODE_SIZE,
                })
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some(done) = self.open.pop() {
                    self.add_size(done.anchor, done.size);
                }
            }
            Event::Alias(id) => {
                let size = self.anchors.get(id).copied().unwrap_or(NODE_SIZE);
                self.add_size(0, size);
            }
            _ => {}
        }
        match event {
            Event::Scalar(text, ..) => match self.next_value_path() {
                None => {
                    if let Some(Frame::Map { path, key, seen }) = self.stack.last_mut() {
                        if let Some(&first) = seen.get(&text) {
                            self.duplicates.push(duplicate_key(path, &text, loc, first));
                        } else {
                            seen.insert(text.clone(), loc);
                            self.spans.keys.insert(join(path, &text), loc);
                        }
                        *key = Some(text);
                    }
                }
                Some(path) => {
                    if text.trim_start().starts_with("TODO") {
                        self.todos.push((path.clone(), loc, text.clone()));
                    }
                    self.spans.values.insert(path, loc);
                    self.advance();
                }
            },
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                // A mapping used as a key has no useful path; name it by its position.
                let path = self
                    .next_value_path()
                    .unwrap_or_else(|| format!("<key at {}>", loc.line));
                self.spans.values.insert(path.clone(), loc);
                self.stack
                    .push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map {
                            path,
                            key: None,
                            seen: HashMap::new(),
                        }
                    } else {
                        Frame::Seq { path, index: 0 }
                    });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
                self.advance();
            }
            Event::Alias(_) => self.advance(),
            _ => {}
        }
    }
}

/// Reads the first document of `text` into `collector`, one event at a time, stopping at the
/// first bound crossed (nesting depth, alias expansion) so that a hostile text costs no more
/// than the bound. yaml-rust2's own `load` recurses once per nesting level and cannot stop early.
fn collect(text: &str, collector: &mut SpanCollector) -> Result<(), ScanError> {
    let mut parser = Parser::new_from_str(text);
    loop {
        let (event, mark) = parser.next_token()?;
        if matches!(event, Event::DocumentEnd | Event::StreamEnd) {
            return Ok(());
        }
        collector.check_limits(&event, location(&mark));
        if collector.limit.is_some() {
            return Ok(());
        }
        collector.on_event(event, mark);
    }
}

/// Whether `text` may define an anchor: `&name` where a node's properties can stand (C++ in a
/// prelude like `auto &x` reads as one too, which only costs a less detailed syntax message).
fn has_anchor(text: &str) -> bool {
    text.match_indices('&').any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + 1..].chars().next();
        before.map_or(true, |c| c.is_whitespace() || "[{,:-".contains(c))
            && after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
    })
}

/// The deepest nesting of `[`/`{` in `text`, counted as if no bracket were quoted: an upper bound
/// for its flow collections' depth where the text could not be parsed.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0);
    for c in text.chars() {
        match c {
            '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// `key` given a second time at `at` in the mapping at `path`, first at `first`.
fn duplicate_key(path: &str, key: &str, at: Location, first: Location) -> Diagnostic {
    let place = if path.is_empty() {
        String::new()
    } else {
        format!(" in `{path}`")
    };
    Diagnostic::new(at, format!("`{key}` is given twice{place}"))
        .with_also(format!("`{key}` is first given"), first)
        .with_help(format!(
            "keep one `{key}` (two entries that are both meant need two names): a mapping holds \
             each key once, and the later would silently replace the earlier"
        ))
}

fn too_deep(at: Location) -> Diagnostic {
    Diagnostic::new(at, format!("the spec nests deeper than {MAX_DEPTH} levels")).with_help(
        "a spec nests a few levels of mappings and lists: look for `[` or `{` never closed, or a \
         run of `- `",
    )
}

/// `text` without a leading UTF-8 byte order mark. YAML allows one at the start of a stream,
/// but serde_yaml reads it as part of the first key (`\u{feff}version`), which then is unknown
/// and `name` "missing". The mark is invisible and zero-width, so columns on the first line still
/// count as the reader sees them.
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses spec text: the typed spec and where each of its values was written.
pub fn parse_spec(text: &str) -> Result<(Spec, SpanMap), Vec<Diagnostic>> {
    parse_document(text)
}

/// Parses a YAML document of repro's (a spec, a campaign file) into `T`, with where each of its
/// values was written; the same bounds, duplicate-key refusal and error help for every file.
///
/// A value still reading `TODO...` is an error of its own, reported before anything else: it is
/// what `repro import` could not know, and no default may stand in for it.
pub fn parse_document<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<(T, SpanMap), Vec<Diagnostic>> {
    let text = without_bom(text);
    let mut collector = SpanCollector::default();
    let scanned = collect(text, &mut collector);
    if let Some(limit) = collector.limit {
        return Err(vec![limit]);
    }
    if let Err(e) = &scanned {
        let at = location(e.marker());
        // yaml-rust2's scanner reads ahead of its parser and stops at 256 levels of flow
        // collections itself, before the bound above sees the 129th.
        if e.info().contains("recursion limit") {
            return Err(vec![too_deep(at)]);
        }
        // A text the event parser rejects is reported by serde_yaml below, which says more. But
        // the bounds above were not checked to the end of it, and serde_yaml expands aliases
        // without a bound and takes quadratic time in deep nesting: where either may be in the
        // rest of the text, the event parser's error is the answer.
        if has_anchor(text) || flow_depth(text) > MAX_DEPTH {
            let help = "fix the YAML syntax here";
            return Err(vec![Diagnostic::new(at, e.info()).with_help(help)]);
        }
    }
    if !collector.todos.is_empty() {
        return Err(collector
            .todos
            .iter()
            .map(|(path, loc, todo)| {
                let what = todo.trim_start().trim_start_matches("TODO").trim_start_matches(':').trim();
                Diagnostic::new(*loc, format!("`{path}` is still a TODO: {what}"))
                    .with_help("replace it with the real value from the production code (repro import left it because it could not know it)")
            })
            .collect());
    }
    // Only where the whole text was read: a syntax error comes first, and serde_yaml says more
    // about it.
    if scanned.is_ok() && !collector.duplicates.is_empty() {
        return Err(collector.duplicates);
    }
    let document: T = serde_yaml::from_str(text).map_err(|e| vec![serde_diagnostic(&e)])?;
    Ok((document, collector.spans))
}

/// Turns a serde_yaml error into a diagnostic with a location and, for a misspelt field or
/// variant, the closest valid name.
fn serde_diagnostic(error: &serde_yaml::Error) -> Diagnostic {
    // libyaml's messages carry "at line L column C" for the problem and sometimes a second one
    // for where the construct began; the location goes to the `-->` line, the start to the hint.
    let full = error.to_string();
    let mut message = String::new();
    let mut starts = Vec::new();
    let mut rest = full.as_str();
    while let Some(at) = rest.find(" at line ") {
        message.push_str(&rest[..at]);
        let tail = &rest[at + " at line ".len()..];
        let end = tail.find([',', ')']).unwrap_or(tail.len());
        starts.push(tail[..end].replace(" column ", ", column "));
        rest = &tail[end..];
    }
    message.push_str(rest);
    let location = error
        .location()
        .map(|l| Location {
            line: l.line(),
            column: l.column(),
        })
        .unwrap_or(Location { line: 1, column: 1 });
    let mut diagnostic = Diagnostic::new(location, message.clone());
    if let Some(help) = unknown_name_help(&message) {
        diagnostic = diagnostic.with_help(help);
    } else if starts.len() > 1 {
        diagnostic = diagnostic.with_help(format!(
            "it begins at line {}; look for a missing bracket, quote or comma",
            starts[1]
        ));
    }
    diagnostic
}

/// For "unknown field `x`, expected one of `a`, `b`" (and the same for variants), a hint.
fn unknown_name_help(message: &str) -> Option<String> {
    let kind = if message.contains("unknown field `") {
        "field"
    } else if message.contains("unknown variant `") {
        "value"
    } else {
        return None;
    };
    let ticked: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    let (word, expected) = ticked.split_first()?;
    if expected.is_empty() {
        return Some(format!("this {kind} is not allowed here"));
    }
    match did_you_mean(word, expected.iter().copied()) {
        Some(best) => Some(format!("did you mean `{best}`?")),
        None => Some(format!("valid {kind}s here: {}", expected.join(", "))),
    }
}

/// The resolved spec as YAML, for the artifact's `spec.yaml`.
pub fn to_yaml(spec: &Spec) -> String {
    serde_yaml::to_string(spec).expect("a spec always serializes")
}

/// A `reference:` section given on a command line (`repro capture --reference '{op: gemm, a: A,
/// b: B, out: D}'`): checked against the spec's own type, so a misspelt field is refused there.
pub fn reference_from_text(text: &str) -> Result<super::model::ReferenceSpec, String> {
    serde_yaml::from_str(text).map_err(|e| {
        let message = e.to_string();
        match unknown_name_help(&message) {
            Some(help) => format!("{message} ({help})"),
            None => message,
        }
    })
}

/// A `reference:` section as block YAML, each line indented by two spaces.
pub fn reference_block(reference: &super::model::ReferenceSpec) -> String {
    serde_yaml::to_string(reference)
        .expect("a reference always serializes")
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

/// Where a scalar is written. In a flow collection (`[a, b]`, `{ k: v }`) a plain scalar ends at
/// `,`, `[`, `]`, `{` and `}`; in block context (`key: value`, `- item`) those are ordinary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Block,
    Flow,
}

/// `text` as a YAML scalar that reads back as exactly the string `text`, in `context`: plain
/// where plain style is unambiguous, else double-quoted with escapes. The one writer for text
/// repro puts into YAML by hand: a name or a path from a file someone else made may hold a line
/// break (which would start a new key), `: `, ` #`, a leading `*` or `&`, or read as a number or
/// a boolean; quoted, it stays the one string it is.
pub fn scalar(text: &str, context: Context) -> String {
    if plain_is_safe(text, context) {
        text.to_string()
    } else {
        double_quoted(text)
    }
}

/// Whether `text`, written plain in `context`, reads back as the string `text` in YAML 1.1 and
/// 1.2 alike. Printable ASCII only (a line break, a tab, a byte order mark or a Unicode line
/// separator is escaped instead), and never a quote or a backslash, which a reader might take
/// for escaping.
fn plain_is_safe(text: &str, context: Context) -> bool {
    let bytes = text.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    if !bytes.iter().all(|b| (b' '..=b'~').contains(b)) || text.contains(['"', '\\']) {
        return false;
    }
    // Neither a space nor an indicator can begin a plain scalar, except `-` before a character
    // that is not a space (`-O3`); `---` and `...` at a line's start end a document.
    let indicator = b" ?:,[]{}#&*!|>'%@`".contains(&first)
        || (first == b'-' && bytes.get(1).map_or(true, |&b| b == b' '))
        || text.starts_with("---")
        || text.starts_with("...");
    let flow_breaks = context == Context::Flow && text.contains([',', '[', ']', '{', '}']);
    !indicator
        && !flow_breaks
        && !text.ends_with([' ', ':'])
        && !text.contains(": ")
        && !text.contains(" #")
        && !reads_as_other_than_string(text)
}

/// Whether a plain `text` would read as something other than a string: a boolean or null (YAML
/// 1.1's `yes`, `no`, `on`, `off` too, but not `y` and `n`, which neither serde_yaml nor PyYAML
/// takes for booleans and which name tensors and sizes), a number ([`is_number`]), a date, or
/// one of YAML 1.1's `=` and `<<`.
fn reads_as_other_than_string(text: &str) -> bool {
    const WORDS: [&str; 9] = ["true", "false", "yes", "no", "on", "off", "null", "~", ""];
    let date = text.len() >= 8
        && text.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && text.as_bytes()[4] == b'-';
    WORDS.contains(&text.to_ascii_lowercase().as_str())
        || matches!(text, "=" | "<<")
        || date
        || is_number(text)
}

/// Whether plain `text` reads as a number in YAML 1.1 or 1.2: an integer (decimal, `0x`, `0o`,
/// `0b`, with `_` separators and 1.1's base-60 `1:20`), a float (`1.5`, `.5`, `1e5`), `.inf` or
/// `.nan`, each with an optional sign. Generous where the two versions differ (`1.2.3`): the
/// answer only decides whether to quote.
pub fn is_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let lower = unsigned.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf" | ".nan") {
        return true;
    }
    for (prefix, digits) in [
        ("0x", "0123456789abcdef_"),
        ("0o", "01234567_"),
        ("0b", "01_"),
    ] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            return !rest.is_empty() && rest.chars().all(|c| digits.contains(c));
        }
    }
    let mantissa_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || "_.:".contains(c)))
        .unwrap_or(unsigned.len());
    let (mantissa, exponent) = unsigned.split_at(mantissa_end);
    let exponent_ok = exponent.is_empty()
        || exponent
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['-', '+']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()));
    mantissa.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && mantissa.contains(|c: char| c.is_ascii_digit())
        && exponent_ok
}

/// `text` double-quoted: `"` and `\` escaped, and every character YAML does not print as itself
/// (control characters, line and paragraph separators, a byte order mark, U+FFFE/U+FFFF) as
/// `\uXXXX`, so the scalar stays on one line.
fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` made safe for the rest of a `# comment` line: a line break (which would end the
/// comment and make the rest YAML) or any other control character becomes a space.
pub fn comment(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_nested_values() {
        let text = "a:\n  b: [1, 2]\n  c:\n    - x: 3\n";
        let mut collector = SpanCollector::default();
        collect(text, &mut collector).unwrap();
        let spans = collector.spans;
        assert_eq!(
            spans.value("a.b[1]"),
            Location {
                line: 2,
                column: 10
            }
        );
        assert_eq!(spans.key("a.c"), Location { line: 3, column: 3 });
        assert_eq!(
            spans.value("a.c[0].x"),
            Location {
                line: 4,
                column: 10
            }
        );
        // An unknown path falls back to its closest parent.
        assert_eq!(spans.value("a.b[7]"), Location { line: 2, column: 6 });
    }

    #[test]
    fn a_key_is_a_duplicate_only_within_its_own_mapping() {
        let text = "a: { x: 1, y: 2 }\nb: { x: 3 }\nc:\n  - { x: 4 }\n  - { x: 5, x: 6 }\n";
        let mut collector = SpanCollector::default();
        collect(text, &mut collector).unwrap();
        let found: Vec<(String, Location)> = collector
            .duplicates
            .iter()
            .map(|d| (d.message.clone(), d.also.as_ref().unwrap().1))
            .collect();
        assert_eq!(
            found,
            [(
                "`x` is given twice in `c[1]`".to_string(),
                Location { line: 5, column: 7 }
            )]
        );
    }

    /// Every text reads back as itself, in a block mapping, a block list and flow collections;
    /// ordinary names, paths, flags and expressions stay plain.
    #[test]
    fn scalars_read_back_as_the_text_written() {
        let hostile = [
            "a\nb: c",
            "x\n- y",
            "a: b",
            "*a",
            "&a",
            "!tag",
            "%x",
            "@x",
            "`x",
            "|",
            ">",
            "'q'",
            "\"q\"",
            "a #b",
            "#c",
            "k:",
            " lead",
            "trail ",
            "",
            "-",
            "- x",
            "---",
            "...",
            "?",
            ":",
            "true",
            "False",
            "yes",
            "ON",
            "null",
            "~",
            "=",
            "<<",
            "128",
            "-1",
            "+2",
            "0x1F",
            "0o17",
            "0b101",
            "1_000",
            "1:20",
            "1.5",
            ".5",
            "1e5",
            "-.inf",
            ".NaN",
            "2024-01-01",
            "a,b",
            "[x]",
            "{y}",
            "tab\there",
            "back\\slash",
            "bom\u{feff}",
            "ls\u{2028}",
            "nel\u{85}",
            "é",
            "日本語: x",
            "🦀 #x",
            "no",
            "Off",
            "#",
            "'",
            "\"",
            "!",
            "- ",
            "a\r\nb",
            "del\u{7f}",
            "nul\u{0}",
        ];
        for text in hostile {
            for (context, wrap) in [
                (Context::Block, "k: {}\n"),
                (Context::Block, "- {}\n"),
                (Context::Flow, "[{}]\n"),
                (Context::Flow, "{ k: {} }\n"),
            ] {
                let written = scalar(text, context);
                assert!(!written.contains('\n'), "{text:?} -> {written}");
                let document = wrap.replace("{}", &written);
                let value: serde_yaml::Value = serde_yaml::from_str(&document)
                    .unwrap_or_else(|e| panic!("{text:?} as {document:?}: {e}"));
                let back = match &value {
                    serde_yaml::Value::Mapping(m) => m.get("k").cloned(),
                    serde_yaml::Value::Sequence(s) => s.first().cloned(),
                    _ => None,
                };
                assert_eq!(
                    back.as_ref().and_then(|v| v.as_str()),
                    Some(text),
                    "{text:?} as {document:?}"
                );
            }
        }
        for plain in [
            "M",
            "sm_90a",
            "c++17",
            "-O3",
            "--use_fast_math",
            "-Xcompiler=-Wall",
            "1.0f",
            "(n + 16 - 1) / 16",
            "capture/A.0.npy",
            "y",
            "n",
            "kernel(float*)",
            "a:b",
        ] {
            assert_eq!(scalar(plain, Context::Flow), plain);
        }
        assert_eq!(
            scalar("--diag-suppress=177,550", Context::Block),
            "--diag-suppress=177,550"
        );
        assert_eq!(
            scalar("ceil_div(N, 128)", Context::Flow),
            "\"ceil_div(N, 128)\""
        );
        assert_eq!(scalar("a\nb", Context::Block), "\"a\\u000ab\"");
        assert_eq!(comment("a\n- b\rc"), "a - b c");
    }

    #[test]
    fn a_leading_byte_order_mark_is_read_past() {
        #[derive(serde::Deserialize)]
        struct Named {
            name: String,
        }
        let (named, spans): (Named, SpanMap) =
            parse_document("\u{feff}name: x\n").unwrap_or_else(|d| panic!("{}", d[0].message));
        assert_eq!(named.name, "x");
        assert_eq!(spans.value("name"), Location { line: 1, column: 7 });
        let edited = rewrite_scalars("\u{feff}a: 1\n", &[("a".into(), "2".into())]).unwrap();
        assert_eq!(edited, "\u{feff}a: 2\n");
    }

    #[test]
    fn unknown_field_gets_a_suggestion() {
        let help = unknown_name_help("unknown field `dtyp`, expected one of `dtype`, `shape`");
        assert_eq!(help.as_deref(), Some("did you mean `dtype`?"));
    }
}

/// The spec text with some plain scalars replaced in place (`sizes.M` -> `129`), everything
/// else (comments, layout, quoting of other values) kept as written. `repro shrink` writes the
/// smaller spec this way, so the user's spec reads the same apart from the numbers it changed.
pub fn rewrite_scalars(text: &str, edits: &[(String, String)]) -> Result<String, String> {
    // A byte order mark is kept as written, and left out of the columns the edits count.
    let bom = if text.len() != without_bom(text).len() {
        "\u{feff}"
    } else {
        ""
    };
    let text = without_bom(text);
    let mut collector = SpanCollector::default();
    if collect(text, &mut collector).is_err() || collector.limit.is_some() {
        return Err("the spec is not valid YAML".into());
    }
    let spans = collector.spans;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // Right to left within a line, so earlier columns stay valid.
    let mut located: Vec<(Location, &str, &str)> = Vec::new();
    for (path, value) in edits {
        let Some(loc) = spans.values.get(path.as_str()) else {
            return Err(format!("`{path}` is not written in the spec"));
        };
        located.push((*loc, path, value));
    }
    located.sort_by_key(|(loc, _, _)| std::cmp::Reverse((loc.line, loc.column)));
    for (loc, path, value) in located {
        let line = lines
            .get_mut(loc.line.saturating_sub(1))
            .ok_or_else(|| format!("`{path}`: no line {}", loc.line))?;
        let chars: Vec<char> = line.chars().collect();
        let start = loc.column.saturating_sub(1).min(chars.len());
        let end = start
            + chars[start..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '-')
                .count();
        if end == start {
            return Err(format!("`{path}` is not a plain scalar"));
        }
        let mut rewritten: String = chars[..start].iter().collect();
        rewritten.push_str(value);
        rewritten.extend(&chars[end..]);
        *line = rewritten;
    }
    let mut out = bom.to_string() + &lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod rewrite_tests {
    use super::rewrite_scalars;

    #[test]
    fn replaces_values_and_keeps_everything_else() {
        let text = "version: 1\nname: big_gemm   # the name\nsizes: { M: 1000, N: 744, K: 520 }  # odd sizes\n";
        let out = rewrite_scalars(
            text,
            &[
                ("sizes.M".into(), "129".into()),
                ("sizes.K".into(), "8".into()),
                ("name".into(), "big_gemm_shrunk".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "version: 1\nname: big_gemm_shrunk   # the name\nsizes: { M: 129, N: 744, K: 8 }  # odd sizes\n"
        );
        assert!(rewrite_scalars(text, &[("sizes.Q".into(), "1".into())]).is_err());
    }
}
