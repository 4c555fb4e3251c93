//! The last steps of a bundle: the check that no folder of this machine is named in its text,
//! and the `.tar.gz`, written as a new file (never over one the user has).

use std::path::Path;

use super::BundleError;
use crate::engine_error::EngineError;

/// A text file larger than this is data (an input written as text?), not something repro or the
/// sender wrote: not searched.
const TEXT_LIMIT: u64 = 16 << 20;

/// Refuses a bundle whose files name this machine's home folder or current folder (the spec's
/// own text, `about:` naming a log under $HOME, is copied in), naming the file and line; the
/// bundle's own folder named in a file is a bug in repro.
pub fn check_leaks(dir: &Path, spec: &Path) -> Result<(), BundleError> {
    let mut needles: Vec<(String, &'static str)> = Vec::new();
    needles.push((
        dir.to_string_lossy().into_owned(),
        "the bundle's own folder",
    ));
    if let Ok(cwd) = std::env::current_dir() {
        needles.push((cwd.to_string_lossy().into_owned(), "the current folder"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        needles.push((
            home.to_string_lossy().into_owned(),
            "this machine's home folder",
        ));
    }
    // "/" would match everything.
    needles.retain(|(n, _)| n.trim_end_matches('/').len() > 1);
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    // The files the sender's text goes into first: the message names the one to fix.
    files.sort_by_key(|f| !matches!(f.file_name().and_then(|n| n.to_str()), Some("spec.yaml")));
    for path in files {
        let Ok(bytes) = crate::file_kind::read_regular(&path, TEXT_LIMIT) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        for (needle, what) in &needles {
            let Some(line) = text.lines().position(|l| names_folder(l, needle)) else {
                continue;
            };
            let file = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            if *what == "the bundle's own folder" {
                return Err(EngineError::Internal(format!(
                    "the bundle's {file}, line {}, names the folder it was written in",
                    line + 1
                ))
                .into());
            }
            // The bundled spec.yaml is the spec resolved: the line to mend is in the spec as
            // the sender wrote it.
            let written = (file == "spec.yaml")
                .then(|| std::fs::read_to_string(spec).ok())
                .flatten()
                .and_then(|text| text.lines().position(|l| names_folder(l, needle)))
                .map(|at| format!(" (from {}, line {})", spec.display(), at + 1))
                .unwrap_or_default();
            return Err(BundleError::Leak {
                file,
                line: line + 1,
                written,
                what,
                needle: needle.clone(),
                fix: "it comes from the spec's own text (about:, capture.command, a config or \
                      source string), copied into the bundle for strangers to read: write it \
                      without this machine's folders (a relative path, or a name), then bundle \
                      again",
            });
        }
    }
    Ok(())
}

/// Whether `line` names the folder `folder` or a path below it: `/home/al` is not named by
/// `/home/alice` nor by `/x/home/al`.
fn names_folder(line: &str, folder: &str) -> bool {
    let part_of_a_name = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    line.match_indices(folder).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        // A sentence's full stop after the folder is not part of its name.
        let after = line[at + folder.len()..]
            .trim_start_matches('.')
            .chars()
            .next();
        !before.is_some_and(|c| part_of_a_name(c) || c == '/') && !after.is_some_and(part_of_a_name)
    })
}

/// `dir` packed as `name/` into `tarball`, a new file: an existing one is never written over.
pub fn pack(dir: &Path, name: &str, tarball: &Path) -> Result<(), BundleError> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tarball)
        .map_err(BundleError::io("create", tarball))?;
    let written = write_tar(file, dir, name).map_err(BundleError::io("pack", tarball));
    if written.is_err() {
        // The file is this run's own, half written.
        let _ = std::fs::remove_file(tarball);
    }
    written
}

fn write_tar(file: std::fs::File, dir: &Path, name: &str) -> std::io::Result<()> {
    let encoder = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut archive = tar::Builder::new(encoder);
    // Every file in the bundle is a copy; a link would be packed as the file it points at.
    archive.follow_symlinks(false);
    archive.append_dir_all(name, dir)?;
    archive.into_inner()?.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::names_folder;

    #[test]
    fn a_folder_is_named_by_itself_and_paths_below_it_only() {
        assert!(names_folder("see /home/al/logs/run.log", "/home/al"));
        assert!(names_folder("'/home/al'", "/home/al"));
        assert!(names_folder("/home/al", "/home/al"));
        assert!(!names_folder("see /home/alice/x", "/home/al"));
        assert!(!names_folder("/x/home/al/y", "/home/al"));
        assert!(!names_folder("/home/al.bak", "/home/al"));
        assert!(names_folder("my home is /home/al.", "/home/al"));
    }
}
