//! The files of a results folder, opened as someone else may have planted them: a results folder
//! sits on a cluster's shared file system, and `--collect` reads what array tasks (or anyone able
//! to write there) left in it (docs/campaign.md, "A results folder from others"). No link is
//! followed, inside the folder or at its files; nothing but a regular file is read (a fifo would
//! block, `/dev/zero` never ends), and every read is bounded. A file is replaced by writing a new
//! one beside it and renaming it over the old, so a link planted in its place is replaced, never
//! written through.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::CampaignError;

/// What to do about a folder's file that is not what repro writes there.
const HELP: &str = "a results folder holds only the files and folders repro writes; remove what \
                    is not one of them (or collect a copy of the folder made without it)";

/// The error for `path` (with `place`, a line or a field, when there is one).
pub fn refused(path: &Path, place: Option<String>, why: impl Into<String>) -> CampaignError {
    refused_with(path, place, why, HELP)
}

/// [`refused`] with its own help.
pub fn refused_with(
    path: &Path,
    place: Option<String>,
    why: impl Into<String>,
    help: &str,
) -> CampaignError {
    let place = match place {
        Some(p) => format!("{}:{p}", path.display()),
        None => path.display().to_string(),
    };
    CampaignError::Unsafe {
        place,
        why: why.into(),
        help: help.into(),
    }
}

/// What a path found in the folder is, without following it: a link, a fifo... None when it is a
/// regular file.
fn not_a_file(meta: &std::fs::Metadata) -> Option<&'static str> {
    if meta.file_type().is_symlink() {
        return Some("a symbolic link");
    }
    (!meta.is_file()).then(|| crate::file_kind::describe(meta))
}

/// Opens `path` with `options`, never through a link and never blocking on a fifo; refuses
/// anything but a regular file, and, for a file opened to write, one with other names (a hard
/// link to a file elsewhere). Ok(None) when it is missing and not created.
fn open(
    path: &Path,
    options: &mut std::fs::OpenOptions,
    writes: bool,
) -> Result<Option<File>, CampaignError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let meta = file.metadata().map_err(CampaignError::io("read", path))?;
    if let Some(what) = not_a_file(&meta) {
        return Err(refused(path, None, format!("{what}, not a file; refused")));
    }
    #[cfg(unix)]
    if writes {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(refused(
                path,
                None,
                "a file with other names (a hard link); refused, as writing it would change them",
            ));
        }
    }
    Ok(Some(file))
}

/// Why `path` did not open: O_NOFOLLOW on a link fails with ELOOP; a fifo or device opens
/// (non-blocking) and is refused after the open, but one opened to write may fail first (ENXIO):
/// name what it is.
fn open_error(path: &Path, e: std::io::Error) -> CampaignError {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if let Some(what) = not_a_file(&meta) {
            return refused(path, None, format!("{what}, not a file; refused"));
        }
    }
    CampaignError::io("open", path)(e)
}

/// `path` opened for appending (created when missing, as a new file of ours).
pub fn open_append(path: &Path) -> Result<File, CampaignError> {
    let file = open(
        path,
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true),
        true,
    )?;
    Ok(file.expect("created when missing"))
}

/// `path` opened for reading; None when it is missing.
pub fn open_read(path: &Path) -> Result<Option<File>, CampaignError> {
    open(path, std::fs::OpenOptions::new().read(true), false)
}

/// `path` opened for reading and writing (created when missing): a lock file, whose note is
/// rewritten by whoever holds it.
pub fn open_lock(path: &Path) -> Result<File, CampaignError> {
    let file = open(
        path,
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true),
        true,
    )?;
    Ok(file.expect("created when missing"))
}

/// The whole of `path`, at most `limit` bytes; None when it is missing.
pub fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, CampaignError> {
    let Some(file) = open_read(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(CampaignError::io("read", path))?;
    if bytes.len() as u64 > limit {
        return Err(refused(
            path,
            None,
            format!("larger than {}; refused", crate::file_kind::mib(limit)),
        ));
    }
    Ok(Some(bytes))
}

/// Calls `each(line_number, line)` for every line of `path` (nothing when it is missing). A line
/// longer than `max_line` bytes is passed as None (its bytes are skipped, never held); a file
/// longer than `limit` bytes is refused when the read reaches the limit.
pub fn for_each_line(
    path: &Path,
    limit: u64,
    max_line: usize,
    mut each: impl FnMut(usize, Option<&[u8]>) -> Result<(), CampaignError>,
) -> Result<(), CampaignError> {
    let Some(file) = open_read(path)? else {
        return Ok(());
    };
    let size = file
        .metadata()
        .map_err(CampaignError::io("read", path))?
        .len();
    if size > limit {
        return Err(refused(
            path,
            None,
            format!("larger than {}; refused", crate::file_kind::mib(limit)),
        ));
    }
    let mut reader = BufReader::new(file.take(limit + 1));
    let (mut total, mut number) = (0u64, 0usize);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut too_long = false;
        let mut ended = false;
        let mut any = false;
        while !ended {
            let buffer = reader.fill_buf().map_err(CampaignError::io("read", path))?;
            if buffer.is_empty() {
                break;
            }
            any = true;
            let (used, found) = match buffer.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buffer.len(), false),
            };
            let content = &buffer[..if found { used - 1 } else { used }];
            if !too_long && line.len() + content.len() <= max_line {
                line.extend_from_slice(content);
            } else {
                too_long = true;
                line.clear();
            }
            reader.consume(used);
            total += used as u64;
            ended = found;
        }
        if total > limit {
            return Err(refused(
                path,
                None,
                format!("larger than {}; refused", crate::file_kind::mib(limit)),
            ));
        }
        if !any {
            return Ok(());
        }
        number += 1;
        each(number, (!too_long).then_some(line.as_slice()))?;
    }
}

/// Makes sure `dir` is a folder of its own, not a link, creating it when missing.
pub fn real_dir(dir: &Path) -> Result<(), CampaignError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(meta) => Err(refused(
            dir,
            None,
            format!(
                "{}, not a folder; refused",
                not_a_file(&meta).unwrap_or("a file")
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => real_dir(dir),
            Err(e) => Err(CampaignError::io("create", dir)(e)),
        },
        Err(e) => Err(CampaignError::io("read", dir)(e)),
    }
}

/// Writes `bytes` as the file `path`: into a new file beside it, renamed over it, so that a
/// reader never sees half of it and a link in its place is replaced rather than followed.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), CampaignError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    repro_text::replace_file(path, &partial, bytes).map_err(|e| match e {
        repro_text::ReplaceError::Create { partial, source } => open_error(&partial, source),
        repro_text::ReplaceError::Write(source) => CampaignError::io("write", path)(source),
    })
}

// What a record says is printed through the spec errors' escaping, one rule for every text
// from a file that reaches a terminal.
pub use crate::spec::diagnostic::{one_line, printable};

/// The files of `dir` whose names end in `.extension`, in no order; `dir` is a real folder (or
/// missing: none) and every file a regular one, else refused. At most `limit` of them.
pub fn files_in(dir: &Path, extension: &str, limit: usize) -> Result<Vec<PathBuf>, CampaignError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CampaignError::io("read", dir)(e)),
        Ok(meta) if !meta.is_dir() => {
            return Err(refused(
                dir,
                None,
                format!(
                    "{}, not a folder; refused",
                    not_a_file(&meta).unwrap_or("a file")
                ),
            ))
        }
        Ok(_) => {}
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(CampaignError::io("read", dir))? {
        let entry = entry.map_err(CampaignError::io("read", dir))?;
        let path = entry.path();
        if path.extension().and_then(|x| x.to_str()) != Some(extension) {
            continue;
        }
        let meta = entry.metadata().map_err(CampaignError::io("read", &path))?;
        if let Some(what) = not_a_file(&meta) {
            return Err(refused(&path, None, format!("{what}, not a file; refused")));
        }
        files.push(path);
        if files.len() > limit {
            return Err(refused(
                dir,
                None,
                format!("more than {limit} .{extension} files; refused"),
            ));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain µ text"), "plain µ text");
        assert_eq!(printable("a\u{1b}[2Jb\r"), "a\\u{1b}[2Jb\\u{d}");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(one_line("a\nb"), "a\\nb");
    }

    #[test]
    fn long_lines_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, format!("ab\n{}\ncd", "x".repeat(100))).unwrap();
        let mut seen = Vec::new();
        for_each_line(&path, 1000, 10, |n, l| {
            seen.push((n, l.map(|l| String::from_utf8_lossy(l).into_owned())));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [(1, Some("ab".into())), (2, None), (3, Some("cd".into()))]
        );
        assert!(for_each_line(&path, 50, 10, |_, _| Ok(())).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn links_and_special_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(open_append(&link).is_err());
        assert!(read(&link, 100).is_err());
        replace(&link, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read(&zero, 100).is_err());
        assert!(read(Path::new("/dev/zero"), 100).is_err());
    }
}
