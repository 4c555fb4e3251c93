//! The lexer: C++ text to tokens, with comments, literals, line splices and preprocessor
//! directives handled, and the regions of `#if 0` (and the `#else` side of `#if 1`) dropped.
//! Also what the other parts need to turn tokens back into text ([`join`], [`type_key`]) and the
//! identifier rules ([`replace_word`]).

use std::rc::Rc;

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Ident,
    Number,
    Str,
    Char,
    Punct,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) kind: Kind,
    /// The token's text; a string literal's content without quotes or prefix.
    pub(super) text: String,
    pub(super) line: usize,
    /// Whitespace or a comment came before it.
    pub(super) space: bool,
    /// The outermost macro this token came out of.
    pub(super) from_macro: Option<Rc<str>>,
}

impl Token {
    pub(super) fn is(&self, text: &str) -> bool {
        self.kind != Kind::Str && self.kind != Kind::Char && self.text == text
    }

    pub(super) fn is_ident(&self) -> bool {
        self.kind == Kind::Ident
    }
}

#[derive(Debug)]
pub(super) struct Directive {
    /// Tokens after the `#`.
    pub(super) tokens: Vec<Token>,
    /// Macros that enclosing `#ifdef X` / `#if defined(X)` (or the `#else` of an `#ifndef X`)
    /// require to be defined.
    pub(super) requires: Vec<String>,
    /// How many code tokens came before it.
    code_pos: usize,
}

#[derive(Debug, Default)]
pub(super) struct Lexed {
    pub(super) code: Vec<Token>,
    pub(super) directives: Vec<Directive>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || (!c.is_ascii() && !c.is_whitespace())
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || (!c.is_ascii() && !c.is_whitespace())
}

const PUNCT3: &[&str] = &["...", "<<=", ">>=", "->*"];
const PUNCT2: &[&str] = &[
    "::", "->", "<<", "<=", ">=", "==", "!=", "&&", "||", "##", "++", "--", "+=", "-=", "*=", "/=",
    "%=", "&=", "|=", "^=", ".*",
];

struct Lexer<'a> {
    c: &'a [char],
    i: usize,
    line: usize,
}

impl Lexer<'_> {
    fn at(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    /// Length of a line splice (backslash, optional `\r`, newline) at the cursor, if any.
    fn splice(&self) -> Option<usize> {
        if self.at(0) != Some('\\') {
            return None;
        }
        match (self.at(1), self.at(2)) {
            (Some('\n'), _) => Some(2),
            (Some('\r'), Some('\n')) => Some(3),
            _ => None,
        }
    }

    /// A quoted literal's body after the opening quote; stops at the closing quote or (unclosed)
    /// before the end of the line.
    fn quoted(&mut self, quote: char) -> String {
        let mut text = String::new();
        while let Some(c) = self.at(0) {
            if c == '\\' {
                if let Some(n) = self.splice() {
                    self.i += n;
                    self.line += 1;
                    continue;
                }
                text.push(c);
                if let Some(next) = self.at(1) {
                    if next != '\n' {
                        text.push(next);
                        self.i += 2;
                        continue;
                    }
                }
                self.i += 1;
                continue;
            }
            if c == quote {
                self.i += 1;
                break;
            }
            if c == '\n' {
                break;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    /// A raw string after `R"`; falls back to an ordinary string when the delimiter is malformed.
    fn raw(&mut self) -> String {
        let start = self.i;
        let mut delim = String::new();
        while let Some(c) = self.at(0) {
            if c == '(' {
                break;
            }
            if delim.len() >= 16 || c == ')' || c == '\\' || c == '"' || c.is_whitespace() {
                self.i = start;
                return self.quoted('"');
            }
            delim.push(c);
            self.i += 1;
        }
        if self.at(0) != Some('(') {
            self.i = start;
            return self.quoted('"');
        }
        self.i += 1;
        let close: Vec<char> = format!("){delim}\"").chars().collect();
        let mut text = String::new();
        while self.i < self.c.len() {
            if self.c[self.i..].starts_with(&close) {
                self.i += close.len();
                return text;
            }
            let c = self.c[self.i];
            if c == '\n' {
                self.line += 1;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    fn number(&mut self) -> String {
        let mut text = String::new();
        while let Some(c) = self.at(0) {
            let prev = text.chars().last();
            let part = c.is_ascii_alphanumeric()
                || c == '_'
                || c == '.'
                || ((c == '+' || c == '-') && matches!(prev, Some('e' | 'E' | 'p' | 'P')))
                // a digit separator: 1'000
                || (c == '\'' && self.at(1).is_some_and(|n| n.is_ascii_alphanumeric()));
            if !part {
                break;
            }
            text.push(c);
            self.i += 1;
        }
        text
    }

    fn punct(&mut self) -> String {
        for group in [PUNCT3, PUNCT2] {
            for p in group {
                let n = p.chars().count();
                if self.i + n <= self.c.len()
                    && self.c[self.i..self.i + n].iter().copied().eq(p.chars())
                {
                    self.i += n;
                    return p.to_string();
                }
            }
        }
        let c = self.c[self.i];
        self.i += 1;
        c.to_string()
    }
}

/// Tokens of `text`, with comments and directives out of the code stream and `#if 0` regions
/// (and the `#else` side of `#if 1`) dropped. Never fails: malformed input gives some tokens.
pub(super) fn lex(text: &str) -> Lexed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let chars: Vec<char> = text.chars().collect();
    let mut lx = Lexer {
        c: &chars,
        i: 0,
        line: 1,
    };
    let mut out = Lexed::default();
    let mut space = true;
    let mut line_start = true;
    let mut in_directive = false;
    while lx.i < chars.len() {
        let c = chars[lx.i];
        if let Some(n) = lx.splice() {
            lx.i += n;
            lx.line += 1;
            space = true;
            continue;
        }
        if c == '\n' {
            lx.i += 1;
            lx.line += 1;
            space = true;
            line_start = true;
            in_directive = false;
            continue;
        }
        if c.is_whitespace() {
            lx.i += 1;
            space = true;
            continue;
        }
        if c == '/' && lx.at(1) == Some('/') {
            lx.i += 2;
            while let Some(c) = lx.at(0) {
                if let Some(n) = lx.splice() {
                    lx.i += n;
                    lx.line += 1;
                } else if c == '\n' {
                    break;
                } else {
                    lx.i += 1;
                }
            }
            space = true;
            continue;
        }
        if c == '/' && lx.at(1) == Some('*') {
            lx.i += 2;
            while let Some(c) = lx.at(0) {
                if c == '*' && lx.at(1) == Some('/') {
                    lx.i += 2;
                    break;
                }
                if c == '\n' {
                    lx.line += 1;
                }
                lx.i += 1;
            }
            if lx.i > chars.len() {
                lx.i = chars.len();
            }
            space = true;
            continue;
        }
        if c == '#' && line_start && !in_directive {
            out.directives.push(Directive {
                tokens: Vec::new(),
                requires: Vec::new(),
                code_pos: out.code.len(),
            });
            in_directive = true;
            line_start = false;
            lx.i += 1;
            space = false;
            continue;
        }
        line_start = false;
        let line = lx.line;
        let (kind, text) = if is_ident_start(c) {
            let start = lx.i;
            while lx.at(0).is_some_and(is_ident_continue) {
                lx.i += 1;
            }
            let word: String = chars[start..lx.i].iter().collect();
            match (lx.at(0), word.as_str()) {
                (Some('"'), "R" | "LR" | "uR" | "UR" | "u8R") => {
                    lx.i += 1;
                    (Kind::Str, lx.raw())
                }
                (Some('"'), "L" | "u" | "U" | "u8") => {
                    lx.i += 1;
                    (Kind::Str, lx.quoted('"'))
                }
                (Some('\''), "L" | "u" | "U" | "u8") => {
                    lx.i += 1;
                    (Kind::Char, lx.quoted('\''))
                }
                _ => (Kind::Ident, word),
            }
        } else if c.is_ascii_digit() || (c == '.' && lx.at(1).is_some_and(|n| n.is_ascii_digit())) {
            (Kind::Number, lx.number())
        } else if c == '"' {
            lx.i += 1;
            (Kind::Str, lx.quoted('"'))
        } else if c == '\'' {
            lx.i += 1;
            (Kind::Char, lx.quoted('\''))
        } else {
            (Kind::Punct, lx.punct())
        };
        let token = Token {
            kind,
            text,
            line,
            space,
            from_macro: None,
        };
        space = false;
        if in_directive {
            if let Some(d) = out.directives.last_mut() {
                d.tokens.push(token);
            }
        } else {
            out.code.push(token);
        }
    }
    drop_dead_regions(&mut out);
    mark_guards(&mut out.directives);
    out
}

/// The macro a simple condition tests, and whether it must be defined: `#ifdef X`, `#ifndef X`,
/// `#if defined(X)`, `#if !defined X`; None for anything else.
fn simple_condition(d: &Directive) -> Option<(String, bool)> {
    let t: Vec<&str> = d
        .tokens
        .iter()
        .map(|t| t.text.as_str())
        .filter(|t| *t != "(" && *t != ")")
        .collect();
    match t.as_slice() {
        ["ifdef", x] | ["if", "defined", x] => Some((x.to_string(), true)),
        ["ifndef", x] | ["if", "!", "defined", x] => Some((x.to_string(), false)),
        _ => None,
    }
}

fn mark_guards(directives: &mut [Directive]) {
    let mut stack: Vec<Option<(String, bool)>> = Vec::new();
    for d in directives.iter_mut() {
        match directive_keyword(d) {
            "if" | "ifdef" | "ifndef" => stack.push(simple_condition(d)),
            "else" => {
                if let Some(Some((_, defined))) = stack.last_mut() {
                    *defined = !*defined;
                }
            }
            "elif" | "elifdef" | "elifndef" => {
                if let Some(top) = stack.last_mut() {
                    *top = None;
                }
            }
            "endif" => {
                stack.pop();
            }
            "define" => {
                d.requires = stack
                    .iter()
                    .flatten()
                    .filter(|(_, defined)| *defined)
                    .map(|(name, _)| name.clone())
                    .collect();
            }
            _ => {}
        }
    }
}

fn directive_keyword(d: &Directive) -> &str {
    d.tokens.first().map(|t| t.text.as_str()).unwrap_or("")
}

/// `#if 0`, `#if (0)`, `#if false` → Some(false); `#if 1` → Some(true); anything else None.
fn constant_condition(d: &Directive) -> Option<bool> {
    let rest: String = d
        .tokens
        .iter()
        .skip(1)
        .map(|t| t.text.as_str())
        .filter(|t| *t != "(" && *t != ")")
        .collect();
    match rest.as_str() {
        "0" | "false" => Some(false),
        "1" | "true" => Some(true),
        _ => None,
    }
}

fn drop_dead_regions(lexed: &mut Lexed) {
    #[derive(PartialEq)]
    enum Frame {
        Plain,
        /// `#if 1`: its `#else`/`#elif` side is dead.
        One,
    }
    let mut frames: Vec<Frame> = Vec::new();
    // (nesting inside the dead region, code position where it started, stops at #else/#elif)
    let mut skip: Option<(usize, usize, bool)> = None;
    let mut dead_code: Vec<(usize, usize)> = Vec::new();
    let mut dead_directive = vec![false; lexed.directives.len()];
    for (k, d) in lexed.directives.iter().enumerate() {
        let kw = directive_keyword(d);
        if let Some((nest, start, stops_at_else)) = skip.as_mut() {
            dead_directive[k] = true;
            match kw {
                "if" | "ifdef" | "ifndef" => *nest += 1,
                "endif" if *nest == 0 => {
                    dead_code.push((*start, d.code_pos));
                    skip = None;
                }
                "endif" => *nest -= 1,
                "else" | "elif" | "elifdef" | "elifndef" if *nest == 0 && *stops_at_else => {
                    dead_code.push((*start, d.code_pos));
                    skip = None;
                    frames.push(Frame::Plain);
                }
                _ => {}
            }
            continue;
        }
        match kw {
            "if" => match constant_condition(d) {
                Some(false) => skip = Some((0, d.code_pos, true)),
                Some(true) => frames.push(Frame::One),
                None => frames.push(Frame::Plain),
            },
            "ifdef" | "ifndef" => frames.push(Frame::Plain),
            "else" | "elif" | "elifdef" | "elifndef" if frames.last() == Some(&Frame::One) => {
                frames.pop();
                skip = Some((0, d.code_pos, false));
            }
            "endif" => {
                frames.pop();
            }
            _ => {}
        }
    }
    if let Some((_, start, _)) = skip {
        dead_code.push((start, lexed.code.len()));
    }
    if !dead_code.is_empty() {
        let mut keep = vec![true; lexed.code.len()];
        for (a, b) in dead_code {
            for flag in keep.iter_mut().take(b.min(lexed.code.len())).skip(a) {
                *flag = false;
            }
        }
        let mut k = 0;
        lexed.code.retain(|_| {
            k += 1;
            keep[k - 1]
        });
    }
    let mut k = 0;
    lexed.directives.retain(|_| {
        k += 1;
        !dead_directive[k - 1]
    });
}

/// Tokens back to text on one line: a space wherever the source had whitespace or a comment.
pub(super) fn join(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (k, t) in tokens.iter().enumerate() {
        if k > 0 && t.space {
            out.push(' ');
        }
        match t.kind {
            Kind::Str => {
                out.push('"');
                out.push_str(&t.text);
                out.push('"');
            }
            Kind::Char => {
                out.push('\'');
                out.push_str(&t.text);
                out.push('\'');
            }
            _ => out.push_str(&t.text),
        }
    }
    out
}

/// Type text normalized for comparison and lookup: words separated by one space, no space
/// around punctuation.
pub(super) fn type_key(tokens: &[Token]) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    for t in tokens {
        let word = matches!(t.kind, Kind::Ident | Kind::Number);
        if word && prev_word {
            out.push(' ');
        }
        out.push_str(&t.text);
        prev_word = word;
    }
    out
}

/// Replaces whole-word occurrences of `word` in `text`.
pub(super) fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find(word) {
        // The character before the match may already be in `out` (a match skipped inside a
        // longer identifier ends right there, as the first `T` of `TT`).
        let before_ok = rest[..pos]
            .chars()
            .last()
            .or_else(|| out.chars().last())
            .map_or(true, |c| !is_ident_continue(c));
        let after = &rest[pos + word.len()..];
        let after_ok = after.chars().next().map_or(true, |c| !is_ident_continue(c));
        out.push_str(&rest[..pos]);
        out.push_str(if before_ok && after_ok { with } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(tokens: &[Token]) -> Vec<&str> {
        tokens.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn tokens_of_each_kind_with_comments_out() {
        let lexed = lex("a /* c */ b // rest\n\"s\\\"q\" 'x' 1'000 0x1p-3 ->* ... R\"d(r)\"aw)d\"");
        assert_eq!(
            texts(&lexed.code),
            ["a", "b", "s\\\"q", "x", "1'000", "0x1p-3", "->*", "...", "r)\"aw"]
        );
        let kinds: Vec<Kind> = lexed.code.iter().map(|t| t.kind).collect();
        use Kind::*;
        assert_eq!(
            kinds,
            [Ident, Ident, Str, Char, Number, Number, Punct, Punct, Str]
        );
        // The comment counts as whitespace: `b` is spaced, the first token too.
        assert!(lexed.code[1].space);
        assert_eq!(lexed.code[2].line, 2);
    }

    #[test]
    fn a_string_token_is_not_the_punctuation_it_spells() {
        let lexed = lex("\"(\" (");
        assert!(!lexed.code[0].is("("));
        assert!(lexed.code[1].is("("));
    }

    #[test]
    fn directives_leave_the_code_stream_with_their_splices() {
        let lexed = lex("#define X \\\n  1\nint y; # pragma once\n#include \"a.h\"\n");
        assert_eq!(texts(&lexed.code), ["int", "y", ";", "#", "pragma", "once"]);
        let first: Vec<&str> = texts(&lexed.directives[0].tokens);
        assert_eq!(first, ["define", "X", "1"]);
        assert_eq!(lexed.directives[0].code_pos, 0);
        assert_eq!(texts(&lexed.directives[1].tokens), ["include", "a.h"]);
        // The splice still counts as a line: `int` is on line 3.
        assert_eq!(lexed.code[0].line, 3);
    }

    #[test]
    fn if_0_regions_and_the_else_of_if_1_are_dropped() {
        let text =
            "a\n#if 0\nb\n#if X\nc\n#endif\n#else\nd\n#endif\n#if (1)\ne\n#else\nf\n#endif\ng\n";
        let lexed = lex(text);
        assert_eq!(texts(&lexed.code), ["a", "d", "e", "g"]);
        // The directives of the dead regions are gone too.
        assert!(lexed
            .directives
            .iter()
            .all(|d| d.tokens.get(1).map_or(true, |t| !t.is("X"))));
    }

    #[test]
    fn an_unknown_condition_keeps_both_sides() {
        let lexed = lex("#if FOO > 2\na\n#else\nb\n#endif\n");
        assert_eq!(texts(&lexed.code), ["a", "b"]);
    }

    #[test]
    fn a_define_records_the_ifdefs_it_needs() {
        let text = "#ifdef A\n#ifndef B\n#define X 1\n#else\n#define Y 2\n#endif\n#endif\n#if defined(C)\n#define Z\n#endif\n";
        let lexed = lex(text);
        let requires: Vec<(String, Vec<String>)> = lexed
            .directives
            .iter()
            .filter(|d| directive_keyword(d) == "define")
            .map(|d| (d.tokens[1].text.clone(), d.requires.clone()))
            .collect();
        assert_eq!(
            requires,
            [
                ("X".to_string(), vec!["A".to_string()]),
                ("Y".to_string(), vec!["A".to_string(), "B".to_string()]),
                ("Z".to_string(), vec!["C".to_string()]),
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_and_unclosed_things_do_not_stop_the_lexer() {
        let lexed = lex("\u{feff}int x = \"open\n/* never closed");
        assert_eq!(texts(&lexed.code), ["int", "x", "=", "open"]);
    }

    #[test]
    fn tokens_back_to_text() {
        let code = lex("const  float *__restrict__ a , \"s\" ,'c'").code;
        assert_eq!(join(&code), "const float *__restrict__ a , \"s\" ,'c'");
        let ty = lex("unsigned   long long * const").code;
        assert_eq!(type_key(&ty), "unsigned long long*const");
    }

    #[test]
    fn replace_word_respects_identifier_boundaries() {
        assert_eq!(replace_word("T* T_ (T) xT", "T", "$0"), "$0* T_ ($0) xT");
        assert_eq!(replace_word("", "T", "x"), "");
        // A word repeated inside a longer identifier is no word.
        assert_eq!(replace_word("TT T", "T", "$0"), "TT $0");
        assert_eq!(replace_word("TTT", "T", "$0"), "TTT");
    }
}
