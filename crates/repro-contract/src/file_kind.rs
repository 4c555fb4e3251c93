//! What a path that is not a regular file is, in words ("a fifo", "a device"), for the errors
//! that refuse it before reading: a fifo blocks its reader and `/dev/zero` never ends, so spec
//! inputs and source files are checked by kind first. One wording for every such message, and
//! one bounded read ([`read_regular`]) for the files read whole.

use std::io::Read;
use std::path::Path;

/// `meta`'s kind when it is not a regular file: a folder, a fifo, a device, a socket.
pub fn describe(meta: &std::fs::Metadata) -> &'static str {
    let ty = meta.file_type();
    if ty.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a fifo";
        }
        if ty.is_char_device() || ty.is_block_device() {
            return "a device";
        }
        if ty.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Why [`read_regular`] read nothing. The caller names the file and says what to do.
#[derive(Debug)]
pub enum ReadError {
    /// The file system's error (missing, permissions...).
    Io(std::io::Error),
    /// Not a regular file: what it is, in [`describe`]'s words.
    NotAFile(&'static str),
    /// Above the limit: the file's size, or at least the bytes seen before the read stopped.
    TooLarge { bytes: u64 },
}

/// The whole content of the regular file at `path`, at most `limit` bytes. Anything else is
/// refused without blocking and without reading past the limit: a fifo (opening one for
/// reading waits for a writer, and reading it may never end), a device (`/dev/zero` never ends,
/// `/dev/random` neither), a folder, or a file larger than `limit`. The kind is checked on the
/// path, then again on the opened file (which is opened non-blocking, so a path turned into a
/// fifo in between cannot hang the open), and the read itself stops at `limit + 1` bytes, for a
/// file that grows after the check.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let meta = std::fs::metadata(path).map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(describe(&meta)));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { bytes: meta.len() });
    }
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// `path` opened for reading if it is a regular file: opened non-blocking (a path turned into a
/// fifo since any check cannot hang the open), then checked on the opened file. Reads nothing.
pub fn open_regular(path: &Path) -> Result<std::fs::File, ReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(ReadError::Io)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(describe(&meta)));
    }
    Ok(file)
}

/// `bytes` in MiB with one decimal, for "12.5 MiB, above the 16 MiB ..." messages.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_regular(&path, 5).unwrap(), b"12345");
        assert!(matches!(
            read_regular(&path, 4),
            Err(ReadError::TooLarge { bytes: 5 })
        ));
        assert!(matches!(
            read_regular(dir.path(), 5),
            Err(ReadError::NotAFile("a folder"))
        ));
        assert!(matches!(
            read_regular(&dir.path().join("missing"), 5),
            Err(ReadError::Io(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn refuses_devices_and_fifos_without_blocking() {
        assert!(matches!(
            read_regular(Path::new("/dev/zero"), 1 << 20),
            Err(ReadError::NotAFile("a device"))
        ));
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        assert!(matches!(
            read_regular(&fifo, 1 << 20),
            Err(ReadError::NotAFile("a fifo"))
        ));
    }
}
