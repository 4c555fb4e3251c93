//! Spec errors with a place: file, line and column, the offending source line, and a hint.
//!
//! Rendered the way rustc and `just` render theirs, because a kernel engineer reads these in a
//! terminal next to the YAML they just edited.

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
}

impl Diagnostic {
    pub fn new(location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            message: message.into(),
            location,
            help: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
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
            writeln!(f, "error: {}", d.message)?;
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
                writeln!(f, "{:gutter$} |", "")?;
                writeln!(f, "{line} | {text}")?;
                let caret_at = column.saturating_sub(1).min(text.len());
                writeln!(f, "{:gutter$} | {:caret_at$}^", "", "")?;
            }
            if let Some(help) = &d.help {
                writeln!(f, "{:gutter$} = help: {help}", "")?;
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

/// The closest candidate to `word`, if one is close enough to be a plausible typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
