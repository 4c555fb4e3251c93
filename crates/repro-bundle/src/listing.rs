//! The bundle's listing: every file it carries from the sender's machine, where it came from
//! (relative to the spec's folder) and why it is in; the headers left out and why. Printed before
//! the bundle is packed, and written into its README (docs/cli.md, `repro bundle`), so that the
//! sender sees what strangers will get, and the receiver where each file came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One file copied in.
pub struct Entry {
    /// Its path in the bundle (`include/0/gemm.cuh`).
    pub bundled: String,
    /// Its path on the sender's machine, relative to the spec's folder.
    pub origin: String,
    /// Why it is in: `kernel header (include dir kernels)`.
    pub why: String,
}

/// A header the build read that the bundle does not carry.
pub struct LeftOut {
    pub name: String,
    pub origin: String,
    pub why: String,
}

#[derive(Default)]
pub struct Listing {
    pub entries: Vec<Entry>,
    /// Headers of the receiver's own toolchain, counted by whose they are.
    pub toolchain: BTreeMap<&'static str, usize>,
    /// Headers the receiver must provide: outside the spec's tree, or with no place in the
    /// bundle where their include finds them.
    pub left_out: Vec<LeftOut>,
    /// Folders not treated as the toolkit's (they hold the spec's own files).
    pub notes: Vec<String>,
    /// Paths in the bundle taken so far, and the resolved file each holds: two files of one
    /// name (`d1/x.npy`, `d2/x.npy`) get two names.
    taken: BTreeMap<String, PathBuf>,
}

impl Listing {
    /// A free path below `folder` for the file `source` (resolved) named `name`: `folder/name`,
    /// or `folder/stem-2.ext`... when another file has it; the same path for the same file.
    pub fn place(&mut self, folder: &str, name: &str, source: &Path) -> String {
        let (stem, ext) = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
            _ => (name, String::new()),
        };
        for n in 1.. {
            let candidate = if n == 1 {
                format!("{folder}/{name}")
            } else {
                format!("{folder}/{stem}-{n}{ext}")
            };
            match self.taken.get(&candidate) {
                Some(held) if held == source => return candidate,
                Some(_) => continue,
                None => {
                    self.taken.insert(candidate.clone(), source.to_path_buf());
                    return candidate;
                }
            }
        }
        unreachable!("an unbounded range ends only by returning")
    }

    /// `bundled`, a copy of `source` (resolved), listed with its origin and why; false when it
    /// is already listed (another field names the same file): then only its why grows.
    pub fn add(&mut self, bundled: String, source: &Path, origin: String, why: String) -> bool {
        self.taken
            .entry(bundled.clone())
            .or_insert_with(|| source.to_path_buf());
        if let Some(e) = self.entries.iter_mut().find(|e| e.bundled == bundled) {
            e.why.push_str(&format!("; {why}"));
            return false;
        }
        self.entries.push(Entry {
            bundled,
            origin,
            why,
        });
        true
    }

    /// The left-out headers' names, for the warning.
    pub fn left_out_names(&self) -> Vec<String> {
        self.left_out.iter().map(|l| l.name.clone()).collect()
    }

    fn toolchain_line(&self) -> Option<String> {
        if self.toolchain.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .toolchain
            .iter()
            .map(|(whose, n)| format!("{n} of {whose}"))
            .collect();
        Some(format!(
            "headers left out as the receiver's own: {}",
            parts.join(", ")
        ))
    }

    /// The listing as `repro bundle` prints it, before packing.
    pub fn to_terminal(&self) -> String {
        let mut text = String::from(
            "bundle: the files it carries (path in the bundle <- origin, relative to the spec's folder: why)\n",
        );
        for e in &self.entries {
            text.push_str(&format!("  {} <- {}: {}\n", e.bundled, e.origin, e.why));
        }
        if let Some(line) = self.toolchain_line() {
            text.push_str(&format!("  {line}\n"));
        }
        for l in &self.left_out {
            text.push_str(&format!("  not carried: {}: {}\n", l.origin, l.why));
        }
        for note in &self.notes {
            text.push_str(&format!("  not left out as the toolkit's: {note}\n"));
        }
        text
    }

    /// The README's file list section.
    pub fn to_readme(&self) -> String {
        let mut text = String::from(
            "\n## Files from the sender's machine\n\nEach file copied in, where it was on the \
             sender's machine (relative to the spec's folder) and why it is in the bundle.\n\n\
             | in the bundle | origin | why |\n|---|---|---|\n",
        );
        for e in &self.entries {
            text.push_str(&format!(
                "| `{}` | `{}` | {} |\n",
                e.bundled, e.origin, e.why
            ));
        }
        if let Some(line) = self.toolchain_line() {
            text.push_str(&format!("\n{}.\n", capitalized(&line)));
        }
        text
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_files_of_one_name_get_two_names_and_one_file_keeps_one() {
        let mut listing = Listing::default();
        let a = Path::new("/p/d1/x.npy");
        let b = Path::new("/p/d2/x.npy");
        assert_eq!(listing.place("inputs", "x.npy", a), "inputs/x.npy");
        assert_eq!(listing.place("inputs", "x.npy", b), "inputs/x-2.npy");
        assert_eq!(listing.place("inputs", "x.npy", a), "inputs/x.npy");
        assert_eq!(listing.place("inputs", "x-2.npy", a), "inputs/x-2-2.npy");
    }
}
