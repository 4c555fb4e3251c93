//! Writing an artifact to disk without losing hand edits.
//!
//! Each artifact keeps `.repro/manifest.json`: the hash of every file as repro last wrote it.
//! A file whose content no longer matches its hash was edited by a person; `repro scaffold`
//! refuses to overwrite it (unless `--force`) and shows the diff instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Artifact;
use crate::engine_error::EngineError as Error;

pub const STATE_DIR: &str = ".repro";
const MANIFEST: &str = ".repro/manifest.json";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub generator: String,
    /// The spec the artifact was generated from, relative to the artifact folder.
    pub spec: String,
    /// blake3 of each file as generated.
    pub files: BTreeMap<String, String>,
}

impl Manifest {
    pub fn read(dir: &Path) -> Option<Manifest> {
        let text = std::fs::read_to_string(dir.join(MANIFEST)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

fn hash(content: &str) -> String {
    blake3::hash(content.as_bytes()).to_hex().to_string()
}

/// How each file of an artifact stands against what is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// Not on disk yet.
    New,
    /// On disk, identical.
    Current,
    /// On disk as repro wrote it, but the spec (or repro) now generates something else.
    Stale,
    /// On disk and changed by hand since repro wrote it.
    Edited,
}

pub struct FileStatus {
    pub name: &'static str,
    pub state: FileState,
    pub on_disk: Option<String>,
}

pub fn status(artifact: &Artifact) -> Vec<FileStatus> {
    let manifest = Manifest::read(&artifact.dir).unwrap_or_default();
    artifact
        .files
        .iter()
        .map(|f| {
            let on_disk = std::fs::read_to_string(artifact.dir.join(f.name)).ok();
            let state = match &on_disk {
                None => FileState::New,
                Some(text) if *text == f.content => FileState::Current,
                Some(text) if manifest.files.get(f.name) == Some(&hash(text)) => FileState::Stale,
                Some(_) => FileState::Edited,
            };
            FileStatus {
                name: f.name,
                state,
                on_disk,
            }
        })
        .collect()
}

/// True when every file on disk is exactly what the spec generates now.
pub fn is_current(artifact: &Artifact) -> bool {
    status(artifact)
        .iter()
        .all(|s| s.state == FileState::Current)
}

/// Unified diff from the file on disk to what would be generated.
pub fn unified_diff(name: &str, on_disk: &str, generated: &str) -> String {
    similar::TextDiff::from_lines(on_disk, generated)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{name} (on disk)"),
            &format!("{name} (generated now)"),
        )
        .to_string()
}

/// What `write` did, for the command's summary line.
#[derive(Debug, Default)]
pub struct WriteSummary {
    pub written: Vec<&'static str>,
    pub unchanged: Vec<&'static str>,
    /// Where `--force` kept the hand-edited files it replaced.
    pub saved: Option<PathBuf>,
}

/// Writes the artifact. Files edited by hand are only overwritten with `force`; otherwise nothing
/// at all is written and the error carries the diffs.
pub fn write(artifact: &Artifact, spec_path: &Path, force: bool) -> Result<WriteSummary, Error> {
    let statuses = status(artifact);
    let edited: Vec<&FileStatus> = statuses
        .iter()
        .filter(|s| s.state == FileState::Edited)
        .collect();
    if !edited.is_empty() && !force {
        let diff = edited
            .iter()
            .map(|s| {
                let generated = &artifact
                    .files
                    .iter()
                    .find(|f| f.name == s.name)
                    .expect("same list")
                    .content;
                unified_diff(s.name, s.on_disk.as_deref().unwrap_or(""), generated)
            })
            .collect::<Vec<_>>()
            .join("\n");
        return Err(Error::UserEdited {
            dir: artifact.dir.clone(),
            files: edited.iter().map(|s| s.name.to_string()).collect(),
            diff,
        });
    }
    let dir = &artifact.dir;
    // A folder on the way that is a dangling symlink or a file makes create_dir_all answer "File
    // exists (os error 17)", which names neither the path nor the problem: say which it is.
    if let Some(blocked) = dir
        .ancestors()
        .find(|p| p.symlink_metadata().is_ok())
        .filter(|p| !p.is_dir())
    {
        let what = match std::fs::read_link(blocked) {
            Ok(target) if !blocked.exists() => format!(
                "is a symbolic link to {}, which does not exist",
                target.display()
            ),
            _ => "is not a folder".to_string(),
        };
        return Err(Error::OutputBlocked {
            dir: dir.clone(),
            blocked: blocked.to_path_buf(),
            what,
        });
    }
    std::fs::create_dir_all(dir.join(STATE_DIR))
        .map_err(Error::io("create", dir.join(STATE_DIR)))?;
    let mut summary = WriteSummary::default();
    // --force replaces hand edits, but never loses them: each edited file is kept first.
    if !edited.is_empty() {
        let saved = save_aside(dir, &edited)?;
        summary.saved = Some(saved);
    }
    for (file, st) in artifact.files.iter().zip(&statuses) {
        if st.state == FileState::Current {
            summary.unchanged.push(file.name);
            continue;
        }
        write_atomically(&dir.join(file.name), &file.content, file.executable)?;
        summary.written.push(file.name);
    }
    let manifest = Manifest {
        generator: format!("repro {}", env!("CARGO_PKG_VERSION")),
        spec: repro_text::paths::relative_to(spec_path, dir),
        files: artifact
            .files
            .iter()
            .map(|f| (f.name.to_string(), hash(&f.content)))
            .collect(),
    };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serializes") + "\n";
    write_atomically(&dir.join(MANIFEST), &text, false)?;
    Ok(summary)
}

/// Copies the edited files into `.repro/edited/<n>/`, a new folder each time.
fn save_aside(dir: &Path, edited: &[&FileStatus]) -> Result<PathBuf, Error> {
    let root = dir.join(STATE_DIR).join("edited");
    let mut n = 1;
    while root.join(n.to_string()).exists() {
        n += 1;
    }
    let target = root.join(n.to_string());
    std::fs::create_dir_all(&target).map_err(Error::io("create", &target))?;
    for s in edited {
        let text = s.on_disk.as_deref().unwrap_or("");
        write_atomically(&target.join(s.name), text, false)?;
    }
    Ok(target)
}

/// Write to a temporary file and rename, so an interrupted scaffold never leaves half a file.
fn write_atomically(path: &Path, content: &str, executable: bool) -> Result<(), Error> {
    let tmp: PathBuf = path.with_extension("repro-tmp");
    // The runtime's files live in runtime/src/ and runtime/include/repro/.
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("create", parent))?;
    }
    std::fs::write(&tmp, content).map_err(Error::io("write", &tmp))?;
    #[cfg(unix)]
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .map_err(Error::io("chmod", &tmp))?;
    }
    #[cfg(not(unix))]
    let _ = executable;
    std::fs::rename(&tmp, path).map_err(Error::io("write", path))
}
