//! Writing a whole file so that no reader ever sees half of it: into a new file beside it, then
//! renamed over it. Owns only that sequence; the new file's name and what an error says are the
//! caller's. Imports nothing of repro.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Which step of [`replace_file`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// Creating `partial` as a new file.
    #[error("cannot create {}: {source}", partial.display())]
    Create {
        partial: PathBuf,
        source: std::io::Error,
    },
    /// Writing the new file, or renaming it over the target.
    #[error("cannot write: {0}")]
    Write(std::io::Error),
}

impl ReplaceError {
    /// The I/O error, whichever step it came from.
    pub fn into_source(self) -> std::io::Error {
        match self {
            ReplaceError::Create { source, .. } | ReplaceError::Write(source) => source,
        }
    }
}

/// Writes `bytes` as the file `path`: into `partial`, a new file beside it, renamed over `path`.
/// A file or link already at `partial` (left by a killed process, or planted) is removed first
/// and the new one created, never opened as it is, so nothing is written through a link; the
/// rename then replaces whatever is at `path`, a link included, and follows nothing. A failed
/// write leaves no partial file behind.
pub fn replace_file(path: &Path, partial: &Path, bytes: &[u8]) -> Result<(), ReplaceError> {
    let _ = std::fs::remove_file(partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(partial)
        .map_err(|source| ReplaceError::Create {
            partial: partial.to_path_buf(),
            source,
        })?;
    let written = file.write_all(bytes).and_then(|_| file.flush());
    drop(file);
    if let Err(e) = written.and_then(|_| std::fs::rename(partial, path)) {
        let _ = std::fs::remove_file(partial);
        return Err(ReplaceError::Write(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_planted_link_is_replaced_not_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let outside = dir.join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let (path, partial) = (dir.join("file"), dir.join("file.partial"));
        std::os::unix::fs::symlink(&outside, &partial).unwrap();
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        replace_file(&path, &partial, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert!(std::fs::symlink_metadata(&partial).is_err());
    }

    #[test]
    fn a_failed_rename_leaves_no_partial_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("a-folder/inside")).unwrap();
        let partial = dir.join("partial");
        let error = replace_file(&dir.join("a-folder"), &partial, b"x").unwrap_err();
        assert!(matches!(error, ReplaceError::Write(_)), "{error}");
        assert!(std::fs::symlink_metadata(&partial).is_err());
    }
}
