//! One entry of a build cache (the runtime library, the capture library): `<root>/<key>/`,
//! written into a temporary folder and renamed into place, so a reader never sees half of one; a
//! lock per key makes a second build of the same key wait for the first instead of doing the
//! work again; an entry that exists but is not whole is removed and built again.

use std::path::Path;

use super::lock::FileLock;
use crate::engine_error::EngineError as Error;

/// The entry `root/key`: `whole(entry folder)` reads it when it is whole; otherwise `build` fills
/// a fresh temporary folder, which becomes the entry. Returns what `whole` read, and whether it
/// was built now. `what` names the entry in the message about a damaged one.
pub fn get_or_build<T>(
    root: &Path,
    key: &str,
    what: &str,
    whole: impl Fn(&Path) -> Option<T>,
    build: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<(T, bool), Error> {
    let entry = root.join(key);
    if let Some(found) = whole(&entry) {
        return Ok((found, false));
    }
    std::fs::create_dir_all(root).map_err(Error::io("create", root))?;
    let _lock = FileLock::acquire(&root.join(format!("{key}.lock")))?;
    // Whoever waited for the lock finds the entry the first builder made.
    if let Some(found) = whole(&entry) {
        return Ok((found, false));
    }
    if entry.exists() {
        eprintln!(
            "build: the cached {what} in {} is damaged; building it again",
            entry.display()
        );
        std::fs::remove_dir_all(&entry).map_err(Error::io("remove", &entry))?;
    }
    let staging = root.join(format!(".tmp-{key}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(Error::io("create", &staging))?;
    if let Err(e) = build(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    std::fs::rename(&staging, &entry).map_err(Error::io("write", &entry))?;
    let found = whole(&entry).ok_or_else(|| {
        Error::Internal(format!(
            "the {what} just built in {} does not read back",
            entry.display()
        ))
    })?;
    Ok((found, true))
}
