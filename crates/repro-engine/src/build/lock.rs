//! An exclusive lock on a file, held until dropped (`flock`): two builds of one artifact, or of
//! one runtime cache key, take turns instead of compiling the same thing twice or tearing a
//! stamp. The kernel releases it if the process dies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::engine_error::EngineError as Error;

pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Waits until the lock on `path` (created if missing) is ours.
    pub fn acquire(path: &Path) -> Result<FileLock, Error> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(Error::io("open", path))?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        let try_now = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if try_now != 0 {
            eprintln!(
                "build: waiting for another build holding {}",
                path.display()
            );
            // SAFETY: as above.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(Error::io("lock", path)(std::io::Error::last_os_error()));
            }
        }
        Ok(FileLock { _file: file })
    }
}

/// A lock taken without waiting, its file holding a note on who holds it.
pub struct NotedLock {
    _file: File,
}

/// Longest note read back from a lock file held by another process.
const MAX_NOTE: u64 = 4096;

/// Takes the lock on the open file `file` at once and writes `note` into it (who
/// holds it, for the message of whoever finds it taken); `Err(note)` with the holder's note
/// when another process holds it. A campaign's GPUs and results folder are held this way; the
/// caller opens the file, as a folder others write to needs (no link followed, no fifo).
pub fn try_hold(mut file: File, note: &str) -> Result<NotedLock, String> {
    use std::io::{Read, Seek, Write};
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = Vec::new();
        let _ = (&mut file).take(MAX_NOTE).read_to_end(&mut holder);
        return Err(String::from_utf8_lossy(&holder).trim().to_string());
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    // The note only helps a message; the lock holds without it.
    let _ = write!(file, "{note}");
    Ok(NotedLock { _file: file })
}
