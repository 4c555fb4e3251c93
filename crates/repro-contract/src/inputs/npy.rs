//! The header of a `.npy` file someone else made (a bundle's input, a capture's tensor): read
//! without reading the data, through a non-blocking open of a regular file, and bounded, so a
//! file that claims to be `.npy` is checked for what it is before anything trusts it.

use std::io::Read;
use std::path::Path;

use crate::file_kind::{open_regular, ReadError};

/// Longest header taken (NumPy writes a few hundred bytes; format 2 allows 4 GiB).
pub const MAX_HEADER_BYTES: u64 = 1 << 16;

/// What a `.npy` header says.
#[derive(Debug, PartialEq)]
pub struct Header {
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<i64>,
    /// Where the data starts.
    pub data_offset: u64,
}

/// Why [`read_header`] gave no header; each caller says it in its own words after the file's
/// name.
#[derive(Debug, PartialEq)]
pub enum HeaderError {
    /// The file could not be opened or read: missing, a fifo, a folder.
    Unreadable(String),
    /// It was read and is no `.npy`: why (no magic, a header cut short...).
    NotNpy(&'static str),
}

/// The header of the `.npy` at `path`.
pub fn read_header(path: &Path) -> Result<Header, HeaderError> {
    let file = open_regular(path).map_err(|e| {
        HeaderError::Unreadable(match e {
            ReadError::Io(e) => format!("cannot be read: {e}"),
            ReadError::NotAFile(kind) => format!("is {kind}, not a regular file"),
            ReadError::TooLarge { bytes } => format!("is too large ({bytes} bytes)"),
        })
    })?;
    let mut bytes = Vec::new();
    file.take(12 + MAX_HEADER_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| HeaderError::Unreadable(format!("cannot be read: {e}")))?;
    parse_header(&bytes)
}

/// The `.npy` header at the start of `bytes` (format versions 1 to 3).
pub fn parse_header(bytes: &[u8]) -> Result<Header, HeaderError> {
    let bad = |why: &'static str| Err(HeaderError::NotNpy(why));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return bad("no \\x93NUMPY magic");
    }
    let (length, start) = match bytes[6] {
        1 => (u64::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10u64),
        2 | 3 if bytes.len() >= 12 => (
            u64::from(u32::from_le_bytes([
                bytes[8], bytes[9], bytes[10], bytes[11],
            ])),
            12,
        ),
        _ => return bad("an unknown format version"),
    };
    if length > MAX_HEADER_BYTES {
        return bad("a header longer than 64 KiB");
    }
    let end = (start + length) as usize;
    let Some(text) = bytes
        .get(start as usize..end)
        .and_then(|h| std::str::from_utf8(h).ok())
    else {
        return bad("its header is cut short or not text");
    };
    let value = |key: &str| {
        let at = text.find(&format!("'{key}'"))? + key.len() + 2;
        Some(text[at..].trim_start().strip_prefix(':')?.trim_start())
    };
    let descr = value("descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split_once('\''))
        .map(|(d, _)| d.to_string());
    let fortran_order = value("fortran_order").map(|v| v.starts_with("True"));
    let shape = value("shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split_once(')'))
        .and_then(|(dims, _)| {
            dims.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| d.parse::<i64>().ok())
                .collect::<Option<Vec<i64>>>()
        });
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran_order, shape) else {
        return bad("its header has no descr, fortran_order or shape");
    };
    Ok(Header {
        descr,
        fortran_order,
        shape,
        data_offset: start + length,
    })
}
