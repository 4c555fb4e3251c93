//! POSIX shell word splitting, the way `sh -c` reads a logged command line.
//!
//! Build tools hand their command lines to `sh`, and logs print them that way. Anything simpler
//! than the shell's own rules loses or corrupts flags: `--compiler-options '-fPIC'`,
//! `-DNAME=\"value\"`, torch's `''"'"'-fPIC'"'"''`. Parameter expansion and command
//! substitution are not performed: logs show commands after expansion, so a `$` stays as it is.

/// What ends the words of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A command line: an unquoted `;`, `&`, `|`, `(` or `)` ends the command, `<`/`>`
    /// redirections are skipped with their targets, and an unquoted `#` starting a word starts a
    /// comment (so `nvcc ... 2>&1 | tee log` yields only nvcc's words).
    Command,
    /// Plain words (response files, `-Xcompiler` items): only blanks, quotes and backslashes
    /// are special.
    Words,
}

/// The words of a text.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Split {
    pub words: Vec<String>,
    /// The quote the text ended inside of (a line cut off by a logger), if any; the words up to
    /// there are returned, the open quote closed at the end.
    pub unterminated: Option<char>,
}

/// Splits `text` into words as `sh` would.
pub fn split(text: &str, mode: Mode) -> Split {
    fn end(out: &mut Split, word: &mut Option<String>, skip: &mut bool) {
        if let Some(w) = word.take() {
            if !std::mem::take(skip) {
                out.words.push(w);
            }
        }
    }
    let command = mode == Mode::Command;
    let mut out = Split::default();
    // Some(..) while inside a word (which may be empty: `''`).
    let mut word: Option<String> = None;
    // A redirection (`> file`, `2>&1`) swallows the next word.
    let mut skip = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => end(&mut out, &mut word, &mut skip),
            '\\' => match chars.next() {
                Some('\n') => {}
                next => word
                    .get_or_insert_with(String::new)
                    .push(next.unwrap_or('\\')),
            },
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        // Inside double quotes a backslash escapes only these.
                        Some('\\') if c == '"' => {
                            match chars.next_if(|n| "$`\"\\\n".contains(*n)) {
                                Some('\n') => {}
                                Some(n) => w.push(n),
                                None => w.push('\\'),
                            }
                        }
                        Some(n) => w.push(n),
                        None => {
                            out.unterminated = Some(c);
                            break;
                        }
                    }
                }
            }
            '#' if command && word.is_none() => break,
            ';' | '&' | '|' | '(' | ')' if command => break,
            '<' | '>' if command => {
                // `2>&1`: a file-descriptor number glued to the operator belongs to it.
                if word
                    .as_ref()
                    .is_some_and(|w| !w.is_empty() && w.chars().all(|d| d.is_ascii_digit()))
                {
                    word = None;
                }
                end(&mut out, &mut word, &mut skip);
                while chars.next_if(|n| matches!(n, '<' | '>' | '&')).is_some() {}
                skip = true;
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    end(&mut out, &mut word, &mut skip);
    out
}

/// The words of `text` in [`Mode::Words`].
pub fn words(text: &str) -> Vec<String> {
    split(text, Mode::Words).words
}
