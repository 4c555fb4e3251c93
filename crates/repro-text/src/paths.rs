//! Path arithmetic for artifacts: everything written into an artifact is relative to the
//! artifact's own folder, so the folder can be moved, committed and bundled. Lexical only (the
//! folder may not exist yet); imports nothing of repro.

use std::path::{Component, Path, PathBuf};

/// `path` made absolute against the current directory, with `.` and `..` removed lexically
/// (the folder may not exist yet, so no canonicalize).
pub fn absolute(path: &Path) -> PathBuf {
    let joined = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `target` relative to `base` (both made absolute), with `/` separators; absolute when the two
/// share no folder below the root (`/usr/local/cuda/include` stays as it is).
pub fn relative_to(target: &Path, base: &Path) -> String {
    let (target, base) = (absolute(target), absolute(base));
    fn first(p: &Path) -> Option<Component<'_>> {
        p.components().find(|c| matches!(c, Component::Normal(_)))
    }
    let rel = if first(&target) == first(&base) {
        pathdiff::diff_paths(&target, &base).unwrap_or_else(|| target.clone())
    } else {
        target.clone()
    };
    let text = rel.to_string_lossy().replace('\\', "/");
    if text.is_empty() {
        ".".into()
    } else {
        text
    }
}
