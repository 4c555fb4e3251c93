//! An exclusive lock on a file, held until dropped (`flock`): two builds of one artifact, or of
//! one runtime cache key, take turns instead of compiling the same thing twice or tearing a
//! stamp. The kernel releases it if the process dies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::Error;

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
