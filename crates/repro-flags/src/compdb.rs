//! CMake's `compile_commands.json`: entries with `directory`, `file`, and either `command` (one
//! shell line) or `arguments` (the argv, taken as is). Only entries whose program is nvcc
//! (possibly behind `ccache`) are invocations; C++ entries of the same project are skipped.

use std::path::PathBuf;

use serde::Deserialize;

use super::log::{find_command, is_nvcc, skip_wrappers};
use super::{FlagsError, Invocation};

#[derive(Deserialize)]
struct Entry {
    directory: Option<String>,
    file: Option<String>,
    command: Option<String>,
    arguments: Option<Vec<String>>,
}

/// A JSON array of objects (or an empty one).
pub(crate) fn looks_like(text: &str) -> bool {
    let mut rest = text.trim_start().chars().filter(|c| !c.is_whitespace());
    rest.next() == Some('[') && matches!(rest.next(), Some('{' | ']'))
}

/// The nvcc entries, as "NAME entry N" (1-based, the order of the file).
pub(crate) fn invocations(text: &str, name: &str) -> Result<Vec<Invocation>, FlagsError> {
    let entries: Vec<Entry> = serde_json::from_str(text).map_err(|e| FlagsError::CompileCommands {
        name: name.to_string(),
        message: format!("{e} (expected an array of {{\"directory\", \"file\", \"command\" or \"arguments\"}} objects)"),
    })?;
    let mut out = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let origin = format!("{name} entry {}", i + 1);
        let (args, text, warnings) = match (entry.arguments, entry.command) {
            (Some(argv), _) => {
                let mut rest = skip_wrappers(&argv);
                if !rest.next().is_some_and(|p| is_nvcc(p)) {
                    continue;
                }
                let text = argv.join(" ");
                (rest.cloned().collect::<Vec<_>>(), text, Vec::new())
            }
            (None, Some(command)) => {
                let Some(found) = find_command(&command) else {
                    continue;
                };
                let warnings = found
                    .unterminated
                    .map(|q| format!("{origin}: the command ends inside a {q} quote"))
                    .into_iter()
                    .collect();
                (found.args, command, warnings)
            }
            (None, None) => continue,
        };
        let mut inv = Invocation::new(origin, text, args);
        (inv.directory, inv.file, inv.warnings) =
            (entry.directory.map(PathBuf::from), entry.file, warnings);
        out.push(inv);
    }
    Ok(out)
}
