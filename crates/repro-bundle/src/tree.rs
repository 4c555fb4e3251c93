//! Which files a bundle may carry (docs/cli.md, `repro bundle`): a bundle goes to strangers, so
//! only files inside the spec's tree (its folder and the folders it names as include dirs), each
//! checked for what it claims to be, and copied from the file checked. A path that leads out of
//! the tree through a symlink, a special file, a `.npy` that is no NumPy file, a cubin that is
//! no ELF file: each is refused, naming the spec field or include dir that reached it.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::BundleError;
use crate::spec::dtype::DType;

/// Headers and parameter bytes are small; a larger one is not what the spec says it is.
const HEADER_LIMIT: u64 = 16 << 20;

/// What a file reached by the spec claims to be, checked before it is copied.
#[derive(Debug, Clone, Copy)]
pub enum Claim {
    /// `init: { file }`: a `.npy`, or a `.bin` of exactly the tensor's bytes.
    Input { dtype: DType, numel: i64 },
    /// An expected or production output: a `.npy`.
    Npy,
    /// `kind: replay`'s module: an ELF cubin (or a fatbinary holding cubins).
    Cubin,
    /// `kind: replay`'s parameter bytes: any regular file.
    Bytes,
    /// A header the build read, or `op: custom`'s: text.
    Header,
}

/// The spec's tree: the spec's folder and its include dirs, canonical.
pub struct Tree {
    pub spec_dir: PathBuf,
    pub roots: Vec<PathBuf>,
}

impl Tree {
    pub fn new(spec_dir: &Path, include_dirs: &[PathBuf]) -> Tree {
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let spec_dir = canonical(spec_dir);
        let mut roots = vec![spec_dir.clone()];
        roots.extend(include_dirs.iter().map(|d| canonical(d)));
        Tree { spec_dir, roots }
    }

    /// `path` as the sender knows it: relative to the spec's folder (`../kernels/x.cuh`). The
    /// listing and the README say it; relative, so no folder above the spec's goes in.
    pub fn origin(&self, path: &Path) -> String {
        let path = repro_text::paths::absolute(path);
        pathdiff::diff_paths(&path, &self.spec_dir)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// The file `path` (absolute, as the spec or nvcc named it) checked for the bundle: inside
    /// `area` (folders; the tree or a wider project folder) after every symlink is followed, a
    /// regular file, what `claim` says. Returns the resolved path to copy from.
    pub fn admit(
        &self,
        path: &Path,
        area: &[PathBuf],
        reached_by: &str,
        claim: Claim,
    ) -> Result<PathBuf, BundleError> {
        // `generated/x/../../d1/x.npy`, as an artifact's spec names it, is `d1/x.npy`.
        let path = &repro_text::paths::absolute(path);
        let refuse = |why: String, fix: &'static str| BundleError::Refused {
            file: self.origin(path),
            reached_by: reached_by.to_string(),
            why,
            fix,
        };
        let resolved = path.canonicalize().map_err(|e| {
            refuse(
                format!("cannot be resolved ({e})"),
                "fix the path, or the symlink",
            )
        })?;
        if !area.iter().any(|root| resolved.starts_with(root)) {
            let why = if area.iter().any(|root| path.starts_with(root)) {
                format!(
                    "it is, or lies below, a symlink that leads out of the spec's tree (to {})",
                    resolved.display()
                )
            } else {
                "it lies outside the spec's folder and its include dirs".to_string()
            };
            return Err(refuse(
                why,
                "copy the file into the spec's folder and point the spec at the copy",
            ));
        }
        let meta = std::fs::metadata(&resolved)
            .map_err(|e| refuse(format!("cannot be read ({e})"), "fix the path"))?;
        if !meta.is_file() {
            return Err(refuse(
                format!("it is {}", crate::file_kind::describe(&meta)),
                "name a regular file",
            ));
        }
        if let Err(why) = check_claim(&resolved, meta.len(), claim) {
            return Err(refuse(why, "name the right file, or rewrite it"));
        }
        Ok(resolved)
    }
}

/// Whether `path` (a regular file of `len` bytes) is what `claim` says; why not, in words.
fn check_claim(path: &Path, len: u64, claim: Claim) -> Result<(), String> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match claim {
        Claim::Input { dtype, numel } => match extension {
            "npy" => check_npy(path),
            "bin" => {
                let want = numel.max(0) as u64 * dtype.bytes() as u64;
                if len == want {
                    Ok(())
                } else {
                    Err(format!(
                        "a .bin input holds the tensor's raw elements, {numel} {} of {} bytes = {want} bytes, but it has {len}",
                        dtype.name(),
                        dtype.bytes()
                    ))
                }
            }
            _ => Err("an input file is a .npy or a .bin".into()),
        },
        Claim::Npy => check_npy(path),
        Claim::Cubin => {
            let head = read_head(path, 4)?;
            // ELF, or a fatbinary (`cuModuleLoadData` takes both).
            if head == b"\x7fELF" || head == [0x50, 0xed, 0x55, 0xba] {
                Ok(())
            } else {
                Err("a cubin is an ELF file (it starts with \\x7fELF); this one is not".into())
            }
        }
        Claim::Bytes => Ok(()),
        Claim::Header => {
            let bytes =
                crate::file_kind::read_regular(path, HEADER_LIMIT).map_err(|e| match e {
                    crate::file_kind::ReadError::Io(e) => format!("cannot be read ({e})"),
                    crate::file_kind::ReadError::NotAFile(what) => format!("it is {what}"),
                    crate::file_kind::ReadError::TooLarge { bytes } => {
                        format!("{bytes} bytes is not a header's size")
                    }
                })?;
            if bytes.contains(&0) {
                Err("a header is text, and this file holds NUL bytes".into())
            } else {
                Ok(())
            }
        }
    }
}

/// The first `n` bytes of `path` (fewer if it is shorter), read without blocking.
fn read_head(path: &Path, n: usize) -> Result<Vec<u8>, String> {
    let file = open_regular(path).map_err(|e| format!("cannot be read ({e})"))?;
    let mut head = Vec::with_capacity(n);
    file.take(n as u64)
        .read_to_end(&mut head)
        .map_err(|e| format!("cannot be read ({e})"))?;
    Ok(head)
}

/// A `.npy` whose header reads (inputs::npy): its magic, a format version and a dictionary of
/// descr, fortran_order and shape.
fn check_npy(path: &Path) -> Result<(), String> {
    use crate::inputs::npy::{read_header, HeaderError};
    read_header(path).map(|_| ()).map_err(|error| match error {
        HeaderError::Unreadable(why) => why,
        HeaderError::NotNpy(why) => format!("it is not a NumPy .npy file ({why})"),
    })
}

/// `path` opened for reading without blocking (file_kind::open_regular), as an io error.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use crate::file_kind::ReadError;
    crate::file_kind::open_regular(path).map_err(|e| match e {
        ReadError::Io(e) => e,
        ReadError::NotAFile(kind) => std::io::Error::other(format!("{kind}, not a regular file")),
        ReadError::TooLarge { bytes } => std::io::Error::other(format!("{bytes} bytes")),
    })
}

/// `from` (a file [`Tree::admit`] checked) copied to `to`, its folders made first; the copy is
/// made from the opened file, which is checked to still be a regular one.
pub fn copy_checked(from: &Path, to: &Path) -> Result<(), BundleError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(BundleError::io("create", parent))?;
    }
    let mut source = open_regular(from).map_err(BundleError::io("read", from))?;
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(BundleError::io("create", to))?;
    std::io::copy(&mut source, &mut target).map_err(BundleError::io("copy", from))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_npy_needs_its_magic_and_a_dictionary_header() {
        let dir = std::env::temp_dir().join(format!("repro-npy-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.npy");
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }      \n";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0u8; 8]);
        std::fs::write(&good, &bytes).unwrap();
        assert_eq!(check_npy(&good), Ok(()));
        let text = dir.join("text.npy");
        std::fs::write(&text, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        assert!(check_npy(&text).unwrap_err().contains("magic"));
        let cut = dir.join("cut.npy");
        std::fs::write(&cut, &bytes[..20]).unwrap();
        assert!(check_npy(&cut).unwrap_err().contains("cut short"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
