//! Finding nvcc invocations in free text: build logs (ninja's `[3/7]` prefixes, make's
//! `cd DIR &&` and "Entering directory"), JIT logs (torch's "Emitting ninja build file", a Python
//! list repr of a subprocess's argv), lines behind logger prefixes, other tools' lines.
//!
//! A logical line is a physical line plus its continuations: a trailing backslash (joined as `sh`
//! does), where each continuation may repeat the logger's prefix (a timestamp of the same shape),
//! and indented `-option` lines that a logger wrapped at a fixed width. nvcc is recognized by the
//! basename of the program word (`nvcc`, `/usr/local/cuda/bin/nvcc`) anywhere in the line, so
//! wrappers (`ccache`, `VAR=value`, `cd DIR &&`) and prefixes need no list; prose that merely
//! mentions nvcc is weeded out later, because it compiles no source file.

use std::path::PathBuf;

use super::shell::{self, Mode};
use super::Invocation;

/// Programs that run the next word as the command.
const WRAPPERS: &[&str] = &[
    "ccache",
    "sccache",
    "buildcache",
    "distcc",
    "icecc",
    "env",
    "time",
    "nice",
];

/// An nvcc command inside a line.
pub(crate) struct Found {
    /// Byte offset where the program word starts; what precedes it is a prefix.
    pub start: usize,
    pub args: Vec<String>,
    pub unterminated: Option<char>,
}

/// True for a program word that is nvcc.
pub(crate) fn is_nvcc(word: &str) -> bool {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    !word.contains('=') && matches!(base, "nvcc" | "nvcc.exe")
}

fn is_wrapper(word: &str) -> bool {
    WRAPPERS.contains(&word.rsplit('/').next().unwrap_or(word))
}

/// `NAME=value` with a shell variable name.
fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let head = name.chars().next()?;
    let valid = (head.is_ascii_alphabetic() || head == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

/// The words from the program on, past wrappers and variable assignments.
pub(crate) fn skip_wrappers(words: &[String]) -> impl Iterator<Item = &String> {
    words
        .iter()
        .skip_while(|w| is_wrapper(w) || assignment(w).is_some())
}

/// The first nvcc command in `line` that has arguments.
pub(crate) fn find_command(line: &str) -> Option<Found> {
    // A handful of tries: real lines name nvcc once or twice, prose or garbage may not.
    for (idx, _) in line.match_indices("nvcc").take(16) {
        let after = &line[idx + 4..];
        let after = after.strip_prefix(".exe").unwrap_or(after);
        let ends = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',');
        if !after.chars().next().map_or(true, ends) {
            continue;
        }
        let start = line[..idx]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = line[start..].trim_start_matches(['(', '\'', '"']);
        let (words, unterminated) = if word.starts_with('[') {
            (python_list(word).unwrap_or_default(), None)
        } else {
            let split = shell::split(line[start..].trim_start_matches('('), Mode::Command);
            (split.words, split.unterminated)
        };
        if words.len() >= 2 && is_nvcc(&words[0]) {
            return Some(Found {
                start,
                args: words[1..].to_vec(),
                unterminated,
            });
        }
    }
    None
}

/// `['nvcc', '-c', 'x.cu']`: how Python logs a subprocess's argv (and JSON's `["nvcc", ...]`).
fn python_list(text: &str) -> Option<Vec<String>> {
    let mut chars = text.strip_prefix('[')?.chars().peekable();
    let mut items = Vec::new();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let quote = chars.next()?;
        if quote == ']' {
            return Some(items);
        }
        if quote != '\'' && quote != '"' {
            return None;
        }
        let mut item = String::new();
        loop {
            match chars.next()? {
                '\\' => item.push(match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    c => c,
                }),
                c if c == quote => break,
                c => item.push(c),
            }
        }
        items.push(item);
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next()? {
            ',' => {}
            ']' => return Some(items),
            _ => return None,
        }
    }
}

/// The invocation of a command found in `line`, with what its prefix says: `cd DIR &&`, and
/// `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS`, which nvcc splices into its arguments.
fn invocation(origin: String, line: &str, found: Found, dir: Option<&PathBuf>) -> Invocation {
    let words = shell::words(&line[..found.start]);
    let mut cd = None;
    for w in words
        .windows(3)
        .filter(|w| w[0] == "cd" && (w[2] == "&&" || w[2] == ";"))
    {
        cd = Some(PathBuf::from(&w[1]));
    }
    let directory = match cd {
        Some(d) if d.is_absolute() => Some(d),
        Some(d) => dir.map(|base| base.join(d)),
        None => dir.cloned(),
    };
    let (mut prepend, mut append) = (Vec::new(), Vec::new());
    for word in words.iter().rev() {
        match assignment(word) {
            Some(("NVCC_PREPEND_FLAGS", value)) => prepend = shell::words(value),
            Some(("NVCC_APPEND_FLAGS", value)) => append = shell::words(value),
            Some(_) => {}
            None if is_wrapper(word) => {}
            None => break,
        }
    }
    let warnings = found.unterminated.map(|q| {
        format!("{origin} ends inside a {q} quote (cut off by a logger?): options may be missing")
    });
    let mut inv = Invocation::new(origin, line.to_string(), found.args);
    (inv.directory, inv.prepend, inv.append) = (directory, prepend, append);
    inv.warnings.extend(warnings);
    inv
}

/// The invocation of a command line given by the user: an nvcc command, or only its options.
pub(crate) fn command_line(text: &str, name: &str) -> Invocation {
    let found = find_command(text).unwrap_or_else(|| {
        // Only options, or nvcc without any.
        let split = shell::split(text, Mode::Command);
        let args = skip_wrappers(&split.words).skip_while(|w| is_nvcc(w));
        let (args, unterminated) = (args.cloned().collect(), split.unterminated);
        Found {
            start: 0,
            args,
            unterminated,
        }
    });
    invocation(name.to_string(), text, found, None)
}

/// Every nvcc command of a log, in order.
pub(crate) fn invocations(text: &str, name: &str) -> Vec<Invocation> {
    let lines: Vec<&str> = text.lines().collect();
    // make's "Entering directory" stack; torch's build folder.
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let number = i + 1;
        let line;
        (line, i) = logical_line(&lines, i);
        track_directory(&line, &mut dirs);
        if let Some(found) = find_command(&line) {
            out.push(invocation(
                format!("{name}:{number}"),
                &line,
                found,
                dirs.last(),
            ));
        }
    }
    out
}

/// Follows make's "Entering/Leaving directory" and torch's "Emitting ninja build file".
fn track_directory(line: &str, dirs: &mut Vec<PathBuf>) {
    let path_after = |marker: &str| {
        let rest = &line[line.find(marker)? + marker.len()..];
        let quotes = ['\'', '`', '"'];
        let path = rest
            .trim()
            .trim_matches(quotes)
            .trim_end_matches('.')
            .trim_end_matches(quotes);
        Some(PathBuf::from(path))
    };
    if let Some(dir) = path_after("Entering directory") {
        let dir = dirs.last().map_or(dir.clone(), |base| base.join(&dir));
        if dir.is_absolute() {
            dirs.push(dir);
        }
    } else if let Some(dir) = path_after("Leaving directory") {
        if dirs.last() == Some(&dir) {
            dirs.pop();
        }
    } else if let Some(file) = path_after("Emitting ninja build file") {
        dirs.extend(file.parent().filter(|p| p.is_absolute()).map(PathBuf::from));
    }
}

/// The logical line starting at `lines[start]`, and the index after it.
fn logical_line(lines: &[&str], start: usize) -> (String, usize) {
    let first = lines[start];
    let mut line = first.to_string();
    let mut has_nvcc = line.contains("nvcc");
    let mut next = start + 1;
    while let Some(cont) = lines.get(next) {
        let body = strip_log_prefix(first, cont);
        let trimmed = line.trim_end().len();
        let escapes = line[..trimmed]
            .chars()
            .rev()
            .take_while(|&c| c == '\\')
            .count();
        if escapes % 2 == 1 {
            // `sh` drops backslash-newline and joins the words around it.
            line.truncate(trimmed - 1);
            line.push_str(body);
        } else if has_nvcc && is_wrapped(body) {
            line.push(' ');
            line.push_str(body.trim_start());
        } else {
            break;
        }
        has_nvcc |= body.contains("nvcc");
        next += 1;
    }
    (line, next)
}

/// A logger's fixed-width wrap: an indented line that starts with an option.
fn is_wrapped(body: &str) -> bool {
    let rest = body.trim_start();
    let option = rest.strip_prefix("--").or_else(|| rest.strip_prefix('-'));
    rest.len() < body.len() && option.is_some_and(|o| o.starts_with(|c: char| c.is_alphabetic()))
}

/// `cont` without the logger prefix it shares with `first`: their common start (digits match
/// digits, so timestamps of one shape match) up to its last blank, unless that is all blanks.
fn strip_log_prefix<'a>(first: &str, cont: &'a str) -> &'a str {
    let mut end = 0;
    for (a, (i, b)) in first.chars().zip(cont.char_indices()) {
        if a != b && !(a.is_ascii_digit() && b.is_ascii_digit()) {
            break;
        }
        if b.is_whitespace() {
            end = i + b.len_utf8();
        }
    }
    if cont[..end].trim().is_empty() {
        cont
    } else {
        &cont[end..]
    }
}
