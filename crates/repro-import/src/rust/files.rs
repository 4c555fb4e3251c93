//! Reading Rust sources: one file, refused before it is opened when it is not a regular file or
//! too large, and the Rust files under a `--search` folder (build output and version control
//! skipped, the total read bounded).

use std::path::Path;

use super::report::ImportError;
use super::MAX_SOURCE_BYTES;

/// The folders `--search` does not enter: build output, version control, dependencies.
fn skipped_search_folder(name: &str) -> bool {
    name.starts_with('.') || matches!(name, "target" | "node_modules" | "build")
}

/// At most this much Rust source is read under a `--search` folder.
const MAX_SEARCH_BYTES: u64 = 256 << 20;

/// The Rust files under `dir` (but `file` itself), read: (folder as given, [(path, text)]). A
/// file that cannot be read as a source file is noted on stderr and skipped.
pub(super) fn search_files(
    dir: &Path,
    file: &Path,
) -> Result<(String, Vec<(String, String)>), ImportError> {
    let meta = std::fs::metadata(dir).map_err(|source| ImportError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(ImportError::SearchNotAFolder {
            path: dir.to_path_buf(),
        });
    }
    let own = std::fs::canonicalize(file).ok();
    let walk = walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_dir()
                || !skipped_search_folder(&e.file_name().to_string_lossy())
        });
    let (mut found, mut total) = (Vec::new(), 0u64);
    for entry in walk.flatten() {
        let path = entry.path();
        if entry.file_type().is_dir() || path.extension().map_or(true, |e| e != "rs") {
            continue;
        }
        if own.is_some() && std::fs::canonicalize(path).ok() == own {
            continue;
        }
        match read_source(path) {
            Ok(text) => {
                total += text.len() as u64;
                if total > MAX_SEARCH_BYTES {
                    eprintln!(
                        "note: --search {}: stopped before {} after reading {} MiB of Rust",
                        dir.display(),
                        path.display(),
                        MAX_SEARCH_BYTES >> 20
                    );
                    break;
                }
                found.push((path.display().to_string(), text));
            }
            Err(e) => eprintln!("note: --search skipped {e}"),
        }
    }
    Ok((dir.display().to_string(), found))
}

/// Reads a Rust source file, refusing what is not one before reading it: a fifo or a device
/// (`/dev/zero` never ends, a fifo blocks until someone writes), or a file above
/// [`MAX_SOURCE_BYTES`] (the one bounded read of [`crate::file_kind::read_regular`]).
pub(super) fn read_source(path: &Path) -> Result<String, ImportError> {
    use crate::file_kind::{read_regular, ReadError};
    let bytes = read_regular(path, MAX_SOURCE_BYTES).map_err(|e| match e {
        ReadError::Io(source) => ImportError::Read {
            path: path.to_path_buf(),
            source,
        },
        ReadError::NotAFile(kind) => ImportError::NotAFile {
            path: path.to_path_buf(),
            kind,
        },
        ReadError::TooLarge { bytes } => ImportError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        },
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // Valid up to here, so this prefix is text.
        let before = String::from_utf8_lossy(valid);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ImportError::NotUtf8 {
            file: path.display().to_string(),
            line,
            column,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_regular_file_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            crate::file_kind::describe(&std::fs::metadata(dir.path()).unwrap()),
            "a folder"
        );
        let e = read_source(dir.path()).unwrap_err();
        assert!(
            matches!(
                e,
                ImportError::NotAFile {
                    kind: "a folder",
                    ..
                }
            ),
            "{e}"
        );
        let big = dir.path().join("big.rs");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 1)
            .unwrap();
        let e = read_source(&big).unwrap_err();
        assert!(
            matches!(e, ImportError::TooLarge { bytes, .. } if bytes == MAX_SOURCE_BYTES + 1),
            "{e}"
        );
        assert!(matches!(
            read_source(&dir.path().join("no.rs")),
            Err(ImportError::Read { .. })
        ));
    }

    #[test]
    fn invalid_utf8_is_located() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latin1.rs");
        std::fs::write(&path, b"fn main() {}\n// caf\xe9\n").unwrap();
        let e = read_source(&path).unwrap_err();
        assert!(
            matches!(
                e,
                ImportError::NotUtf8 {
                    line: 2,
                    column: 7,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn search_reads_the_other_rust_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "main.rs",
            "src/ops.rs",
            "src/notes.txt",
            "target/gen.rs",
            ".git/x.rs",
        ] {
            let path = root.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "fn f() {}").unwrap();
        }
        let (shown, files) = search_files(root, &root.join("main.rs")).unwrap();
        assert_eq!(shown, root.display().to_string());
        let names: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(names, [root.join("src/ops.rs").display().to_string()]);
        let e = search_files(&root.join("main.rs"), &root.join("main.rs")).unwrap_err();
        assert!(matches!(e, ImportError::SearchNotAFolder { .. }), "{e}");
        assert!(skipped_search_folder(".cargo") && skipped_search_folder("node_modules"));
        assert!(!skipped_search_folder("src"));
    }
}
