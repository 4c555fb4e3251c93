//! A commit's include directories written out of git's object store byte for byte: the tree
//! listed raw (`git ls-tree -r -z`) and each blob read raw (`git cat-file --batch`), so that no
//! attribute of the repository applies: no filter command runs, no `export-subst` or `ident`
//! rewrite, no end-of-line conversion; the bytes built are the commit's. The tree is someone
//! else's (docs/cli.md, `repro bisect`): every path is checked (relative, no empty, `.` or `..`
//! component, under a folder asked for), entries and bytes are bounded, nothing is written over
//! what exists, and a symbolic link is kept only when it resolves inside the exported tree
//! (else it is left out, with a warning naming it).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::error::BisectError;
use super::git::{run_bounded, run_with, short, Feed, Repository};

/// The most entries (files, links) one export writes.
const MAX_ENTRIES: usize = 1_000_000;
/// The most bytes one export writes (a kernel library's headers are megabytes).
const MAX_BYTES: u64 = 4 << 30;
/// The longest link target written (Linux's PATH_MAX).
const MAX_LINK: u64 = 4096;

/// What a tree entry is, by its git mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File {
        executable: bool,
    },
    Link,
    /// A submodule's commit (gitlink): an empty folder, as `git archive` writes it.
    Submodule,
}

#[derive(Debug)]
struct Entry {
    kind: Kind,
    oid: String,
    /// Relative to the repository's root, checked.
    path: PathBuf,
}

impl Repository {
    /// Writes the files under `paths` (folders relative to the root, "" for the root) at `commit`
    /// into `dest` (as `dest/<path>/...`), as this module's documentation says. `dest` is
    /// bisect's own, fresh folder.
    pub fn export(&self, commit: &str, paths: &[String], dest: &Path) -> Result<(), BisectError> {
        let failed = |why: String| BisectError::Git {
            what: format!(
                "export {} at {}",
                paths
                    .iter()
                    .map(|p| if p.is_empty() { "the root" } else { p })
                    .collect::<Vec<_>>()
                    .join(", "),
                short(commit)
            ),
            why,
        };
        let entries = self.list_tree(commit, paths).map_err(failed)?;
        let io = |what: &str, path: &Path, e: std::io::Error| {
            failed(format!("cannot {what} {}: {e}", path.display()))
        };
        std::fs::create_dir_all(dest).map_err(|e| io("create", dest, e))?;
        // Every folder first, while no link exists: none is then made through a link.
        for entry in &entries {
            let folder = match entry.kind {
                Kind::Submodule => dest.join(&entry.path),
                _ => match entry.path.parent() {
                    Some(parent) => dest.join(parent),
                    None => continue,
                },
            };
            std::fs::create_dir_all(&folder).map_err(|e| io("create", &folder, e))?;
        }
        let links = self.write_blobs(&entries, dest).map_err(failed)?;
        // Links last: a link never replaces what exists, and its folders are real folders.
        let mut written = Vec::new();
        for (entry, target) in links {
            let at = dest.join(&entry.path);
            std::os::unix::fs::symlink(OsString::from_vec(target.clone()), &at)
                .map_err(|e| io("write the link", &at, e))?;
            written.push((entry, target));
        }
        // A link is kept when it resolves inside `dest`; removing one may leave another (through
        // it) pointing nowhere, so until none is removed.
        let inside = dest.canonicalize().map_err(|e| io("read", dest, e))?;
        loop {
            let before = written.len();
            written.retain(|(entry, target)| {
                let at = dest.join(&entry.path);
                if at.canonicalize().is_ok_and(|p| p.starts_with(&inside)) {
                    return true;
                }
                let _ = std::fs::remove_file(&at);
                eprintln!(
                    "warning: {}: {} at {} is a symbolic link to `{}`, which leads out of the \
                     exported tree (or nowhere); bisect left it out",
                    self.root.display(),
                    entry.path.display(),
                    short(commit),
                    String::from_utf8_lossy(target)
                );
                false
            });
            if written.len() == before {
                return Ok(());
            }
        }
    }

    /// The entries under `paths` at `commit`, their paths checked.
    fn list_tree(&self, commit: &str, paths: &[String]) -> Result<Vec<Entry>, String> {
        let mut command = self.git();
        command.args(["ls-tree", "-r", "-z", "--full-tree", commit, "--"]);
        command.args(paths.iter().map(|p| if p.is_empty() { "." } else { p }));
        let listing = run_bounded(command, self.limit)?;
        let mut entries = Vec::new();
        for record in listing.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            if entries.len() == MAX_ENTRIES {
                return Err(format!("the tree holds more than {MAX_ENTRIES} entries"));
            }
            entries.push(parse_entry(record, paths)?);
        }
        Ok(entries)
    }

    /// Writes the files of `entries` (read by one `git cat-file --batch`); the links' targets,
    /// to be written once every file is.
    fn write_blobs<'e>(
        &self,
        entries: &'e [Entry],
        dest: &Path,
    ) -> Result<Vec<(&'e Entry, Vec<u8>)>, String> {
        let blobs: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.kind != Kind::Submodule)
            .collect();
        let mut command = self.git();
        command.args(["cat-file", "--batch", "--buffer"]);
        let oids: Vec<&str> = blobs.iter().map(|e| e.oid.as_str()).collect();
        let feed: Feed = Box::new(move |mut stdin| {
            for oid in oids {
                // A git that stopped reading (it failed, or was stopped) ends this.
                if writeln!(stdin, "{oid}").is_err() {
                    return;
                }
            }
        });
        run_with(command, self.limit, Some(feed), |stdout| {
            read_blobs(&mut BufReader::new(stdout), &blobs, dest)
        })
    }
}

/// One `ls-tree -z` record, `<mode> <type> <oid>\t<path>`, with its path checked against `paths`.
fn parse_entry(record: &[u8], paths: &[String]) -> Result<Entry, String> {
    let shown = || String::from_utf8_lossy(record).into_owned();
    let tab = record
        .iter()
        .position(|&b| b == b'\t')
        .ok_or_else(|| format!("git ls-tree wrote `{}`, not an entry", shown()))?;
    let (meta, path) = (&record[..tab], &record[tab + 1..]);
    let meta = String::from_utf8_lossy(meta);
    let fields: Vec<&str> = meta.split(' ').collect();
    let [mode, _, oid] = fields[..] else {
        return Err(format!("git ls-tree wrote `{}`, not an entry", shown()));
    };
    if oid.is_empty() || !oid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("git ls-tree wrote `{}`, not an entry", shown()));
    }
    let kind = match mode {
        "120000" => Kind::Link,
        "160000" => Kind::Submodule,
        // 100644, 100755 (and 100664 of old trees).
        _ if mode.len() == 6 && mode.starts_with("100") => Kind::File {
            executable: u32::from_str_radix(mode, 8).is_ok_and(|m| m & 0o111 != 0),
        },
        _ => return Err(format!("the tree's entry `{}` has mode {mode}", shown())),
    };
    Ok(Entry {
        kind,
        oid: oid.to_string(),
        path: checked_path(path, paths)?,
    })
}

/// `raw` (a path in the tree) as a relative path that stays in the exported folder and lies
/// under one of `paths`. git writes no such tree, but a tree is only bytes.
fn checked_path(raw: &[u8], paths: &[String]) -> Result<PathBuf, String> {
    let shown = String::from_utf8_lossy(raw);
    if raw.is_empty()
        || raw
            .split(|&b| b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return Err(format!(
            "the tree holds the path `{shown}`, which could lead out of the exported folder"
        ));
    }
    let under = |folder: &String| {
        folder.is_empty()
            || raw == folder.as_bytes()
            || (raw.starts_with(folder.as_bytes()) && raw.get(folder.len()) == Some(&b'/'))
    };
    if !paths.iter().any(under) {
        return Err(format!(
            "git listed `{shown}`, which is under none of {}",
            paths.join(", ")
        ));
    }
    Ok(PathBuf::from(OsString::from_vec(raw.to_vec())))
}

/// Reads `cat-file --batch`'s answers for `blobs`, in order: each file written (never over an
/// existing one), each link's target kept.
fn read_blobs<'e>(
    reader: &mut impl BufRead,
    blobs: &[&'e Entry],
    dest: &Path,
) -> Result<Vec<(&'e Entry, Vec<u8>)>, String> {
    let mut links = Vec::new();
    let mut total = 0u64;
    for entry in blobs {
        let shown = entry.path.display();
        let mut header = Vec::new();
        reader
            .by_ref()
            .take(512)
            .read_until(b'\n', &mut header)
            .map_err(|e| format!("cannot read git cat-file: {e}"))?;
        let header = String::from_utf8_lossy(&header);
        let fields: Vec<&str> = header.trim_end_matches('\n').split(' ').collect();
        let size = match fields[..] {
            [oid, "blob", size] if oid == entry.oid => size.parse::<u64>().ok(),
            [oid, "missing"] if oid == entry.oid => {
                return Err(format!("{shown}: object {oid} is missing"))
            }
            _ => None,
        }
        .ok_or_else(|| format!("{shown}: git cat-file answered `{}`", header.trim_end()))?;
        total += size;
        if total > MAX_BYTES {
            return Err(format!(
                "the files pass {} GiB; not a kernel library's headers",
                MAX_BYTES >> 30
            ));
        }
        let mut content = reader.by_ref().take(size);
        match entry.kind {
            Kind::File { executable } => {
                let at = dest.join(&entry.path);
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(if executable { 0o755 } else { 0o644 })
                    .open(&at)
                    .map_err(|e| format!("cannot write {}: {e}", at.display()))?;
                let copied = std::io::copy(&mut content, &mut file)
                    .map_err(|e| format!("cannot write {}: {e}", at.display()))?;
                if copied != size {
                    return Err(format!(
                        "{shown}: git cat-file stopped after {copied} bytes"
                    ));
                }
            }
            Kind::Link if size <= MAX_LINK => {
                let mut target = Vec::new();
                content
                    .read_to_end(&mut target)
                    .map_err(|e| format!("cannot read git cat-file: {e}"))?;
                if target.len() as u64 != size {
                    return Err(format!("{shown}: git cat-file stopped"));
                }
                links.push((*entry, target));
            }
            Kind::Link => {
                return Err(format!(
                    "{shown}: a symbolic link whose target is {size} bytes long"
                ))
            }
            Kind::Submodule => unreachable!("submodules are not read"),
        }
        let mut newline = [0u8];
        reader
            .read_exact(&mut newline)
            .map_err(|e| format!("cannot read git cat-file: {e}"))?;
        if newline != *b"\n" {
            return Err(format!("{shown}: git cat-file's answer is out of step"));
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_could_leave_the_folder_or_lies_outside_those_asked_for_is_refused() {
        let paths = vec!["include".to_string()];
        for raw in [
            &b"include/../../etc/passwd"[..],
            b"include/./x.h",
            b"include//x.h",
            b"/etc/passwd",
            b"",
            b"..",
        ] {
            assert!(checked_path(raw, &paths).is_err(), "{raw:?}");
        }
        assert!(checked_path(b"includes/x.h", &paths).is_err());
        assert!(checked_path(b"other/x.h", &paths).is_err());
        assert_eq!(
            checked_path(b"include/a/x.h", &paths).unwrap(),
            Path::new("include/a/x.h")
        );
        // The root asks for everything.
        assert!(checked_path(b"x.h", &[String::new()]).is_ok());
        assert!(checked_path(b"../x.h", &[String::new()]).is_err());
    }

    #[test]
    fn entries_are_read_by_mode_and_an_odd_record_is_refused() {
        let paths = vec![String::new()];
        let oid = "9c906245633e539e89376c210cc1d14c19c0531c";
        let entry = |mode: &str| parse_entry(format!("{mode} blob {oid}\tx").as_bytes(), &paths);
        assert_eq!(
            entry("100755").unwrap().kind,
            Kind::File { executable: true }
        );
        assert_eq!(
            entry("100644").unwrap().kind,
            Kind::File { executable: false }
        );
        assert_eq!(entry("120000").unwrap().kind, Kind::Link);
        assert!(entry("040000").is_err());
        assert!(parse_entry(b"100644 blob HEAD:x\tx", &paths).is_err());
        assert!(parse_entry(b"100644 blob", &paths).is_err());
    }
}
