//! A campaign's results folder: `results.jsonl` (one record per run, appended as runs end, so a
//! killed campaign loses only the runs in flight), `campaign.json` (what the campaign is: its
//! name, file and runs, for `--collect`), `reports/` (the harness reports of failing runs and
//! their heatmaps), `builds/` (one artifact per distinct build) and, for Slurm, `slurm/` and
//! `shards/`. One campaign writes a folder at a time (a lock); nothing in it is ever rewritten.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::file::Mode;
use super::CampaignError;
use crate::error::Error;

/// What one run showed: a line of results.jsonl (docs/campaign.md, "Results").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// `spec/variant/M=..,N=..,K=../mode`: what a resume or a collection matches runs by.
    pub key: String,
    pub campaign: String,
    pub spec: String,
    pub variant: String,
    pub sizes: IndexMap<String, i64>,
    pub mode: Mode,
    /// The harness's exit code (docs/cli.md); 3 for a build that failed.
    pub code: u8,
    /// `ok`, the failure's class (a probe's verdict), or what kept the run from saying anything
    /// about the kernel: `build_failed`, `no_device`, `refused`.
    pub verdict: String,
    /// The harness's `Disposition:` line, as printed.
    pub disposition: String,
    /// The report line that says what was seen.
    pub evidence: String,
    pub times: Times,
    /// The GPU the harness ran on, from its report (`null` when it found none).
    pub gpu: Option<serde_json::Value>,
    /// `GPU 0 #1` for the second worker on GPU 0; `slurm` for an array task.
    pub worker: String,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmTask>,
    /// When the run started (RFC 3339, UTC).
    pub started: String,
    /// The harness's JSON report, relative to the results folder (kept for failing runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

impl Record {
    /// Whether the run said something about the kernel: pass or a failure. A run that found no
    /// GPU did not, and a resume runs it again.
    pub fn is_settled(&self) -> bool {
        self.verdict != "no_device"
    }

    /// Whether this is a failure of the kernel (or of its build), not a pass or a run not made.
    pub fn is_failure(&self) -> bool {
        !matches!(self.verdict.as_str(), "ok" | "no_device")
    }
}

#[cfg(test)]
impl Record {
    /// A record of spec `s`, ones mode, with only its key and verdict said: for tests.
    pub fn example(key: &str, verdict: &str) -> Record {
        Record {
            key: key.into(),
            campaign: "c".into(),
            spec: "s".into(),
            variant: "default".into(),
            sizes: IndexMap::new(),
            mode: Mode::Ones,
            code: 0,
            verdict: verdict.into(),
            disposition: String::new(),
            evidence: String::new(),
            times: Times::default(),
            gpu: None,
            worker: "GPU 0".into(),
            host: "h".into(),
            slurm: None,
            started: String::new(),
            report: None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Times {
    /// Seconds the run's build took, shared by every run of that build (0 when cached).
    pub build_s: f64,
    /// Seconds the harness process took, start to end.
    pub run_s: f64,
    /// The harness's own stage times (context, inputs, reference, kernel, compare ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlurmTask {
    pub job: String,
    pub task: u32,
}

/// What `campaign.json` says of the campaign that owns a results folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignInfo {
    pub name: String,
    pub file: PathBuf,
    /// Every run's key, in the campaign's order.
    pub runs: Vec<String>,
}

pub const RESULTS_FILE: &str = "results.jsonl";
pub const INFO_FILE: &str = "campaign.json";

/// An open results folder: this campaign's lock on it, and its results file for appending.
pub struct ResultsDir {
    pub dir: PathBuf,
    results: Mutex<File>,
    _lock: crate::build::lock::NotedLock,
}

impl ResultsDir {
    /// Opens (creating) the folder for this campaign; an error when another campaign is writing
    /// there.
    pub fn open(dir: &Path) -> Result<ResultsDir, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        let dir = dir.canonicalize().map_err(Error::io("open", dir))?;
        let lock_path = dir.join(".lock");
        let lock = crate::build::lock::try_hold(&lock_path, &std::process::id().to_string())?
            .map_err(|holder| CampaignError::ResultsBusy {
                dir: dir.clone(),
                holder,
            })?;
        let path = dir.join(RESULTS_FILE);
        let results = append_file(&path)?;
        Ok(ResultsDir {
            dir,
            results: Mutex::new(results),
            _lock: lock,
        })
    }

    /// Appends one record as one line, flushed at once (a killed campaign keeps every whole line).
    pub fn append(&self, record: &Record) -> Result<(), Error> {
        let mut file = self.results.lock().unwrap_or_else(|e| e.into_inner());
        write_record(&mut file, &self.dir.join(RESULTS_FILE), record)
    }

    /// Writes `campaign.json` (a new file each time: it describes the campaign file as it is now).
    pub fn write_info(&self, info: &CampaignInfo) -> Result<(), Error> {
        let path = self.dir.join(INFO_FILE);
        let text = serde_json::to_string_pretty(info).expect("serializes");
        std::fs::write(&path, text).map_err(Error::io("write", &path))
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }
}

/// Writes `record` as one line of the JSON-lines file `file` (at `path`, for an error).
pub fn write_record(file: &mut File, path: &Path, record: &Record) -> Result<(), Error> {
    let line = serde_json::to_string(record).expect("a record always serializes");
    writeln!(file, "{line}").map_err(Error::io("write", path))
}

/// Opens a JSON-lines file for appending. A file a kill left ending mid-line gets its line ended
/// first, so that the next record starts a line of its own instead of joining the broken one.
pub fn append_file(path: &Path) -> Result<File, Error> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(Error::io("open", path))?;
    let length = file.metadata().map_err(Error::io("read", path))?.len();
    if length > 0 {
        use std::io::{Read, Seek, SeekFrom};
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(length - 1))
            .and_then(|_| file.read_exact(&mut last))
            .map_err(Error::io("read", path))?;
        if last[0] != b'\n' {
            writeln!(file).map_err(Error::io("write", path))?;
        }
    }
    Ok(file)
}

/// The records of a JSON-lines file, in order. A line that does not read (the end of a line cut
/// by a kill) is skipped with a warning; a missing file has none.
pub fn read_records(path: &Path) -> Result<Vec<Record>, Error> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", path)(e)),
    };
    let mut records = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(Error::io("read", path))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(r) => records.push(r),
            Err(e) => eprintln!(
                "warning: {}:{}: skipped a line that is not a run record ({e})",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(records)
}

/// The latest record of each key.
pub fn latest(records: Vec<Record>) -> HashMap<String, Record> {
    let mut by_key = HashMap::new();
    for r in records {
        by_key.insert(r.key.clone(), r);
    }
    by_key
}

pub fn read_info(dir: &Path) -> Result<CampaignInfo, Error> {
    let path = dir.join(INFO_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| CampaignError::NotResults {
        dir: dir.to_path_buf(),
        why: format!("{INFO_FILE}: {e}"),
    })?;
    serde_json::from_str(&text).map_err(|e| {
        CampaignError::NotResults {
            dir: dir.to_path_buf(),
            why: format!("{INFO_FILE}: {e}"),
        }
        .into()
    })
}

/// Now, as RFC 3339 in UTC to the second.
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// This machine's name, for the records (`uname -n`).
pub fn host() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most buffer.len() bytes into a buffer this function owns.
    let ok = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    if ok {
        String::from_utf8_lossy(&buffer[..end]).into_owned()
    } else {
        "unknown".into()
    }
}
