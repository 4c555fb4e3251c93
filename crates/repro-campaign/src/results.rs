//! A campaign's results folder: `results.jsonl` (one record per run, appended as runs end, so a
//! killed campaign loses only the runs in flight), `campaign.json` (what the campaign is: its
//! name, file and runs, for `--collect`), `reports/` (the harness reports of failing runs and
//! their heatmaps), `builds/` (one artifact per distinct build) and, for Slurm, `slurm/` and
//! `shards/`. One campaign writes a folder at a time (a lock); nothing in it is ever rewritten.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::file::Mode;
use super::CampaignError;

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
/// The folders repro makes in a results folder.
pub const SUBFOLDERS: [&str; 5] = ["reports", "maps", "builds", "shards", "slurm"];
/// Largest results file (or shard file) read: a hundred thousand runs' records, resumed many
/// times over, are far less.
pub const MAX_RESULTS_BYTES: u64 = 512 << 20;
/// Longest record line read: a record is a few hundred bytes (its harness timings included).
const MAX_RECORD_LINE: usize = 1 << 20;
/// Largest campaign.json read: a hundred thousand run keys.
const MAX_INFO_BYTES: u64 = 64 << 20;
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
    pub fn open(dir: &Path) -> Result<ResultsDir, CampaignError> {
        std::fs::create_dir_all(dir).map_err(CampaignError::io("create", dir))?;
        let dir = dir.canonicalize().map_err(CampaignError::io("open", dir))?;
        let lock_path = dir.join(".lock");
        let lock_file = super::folder::open_lock(&lock_path)?;
        let lock = crate::build::lock::try_hold(lock_file, &std::process::id().to_string())
            .map_err(|holder| CampaignError::ResultsBusy {
                dir: dir.clone(),
                holder: super::folder::one_line(&holder),
            })?;
        // A folder planted in place of one repro writes into would take its files elsewhere.
        for sub in SUBFOLDERS {
            let path = dir.join(sub);
            if std::fs::symlink_metadata(&path).is_ok() {
                super::folder::real_dir(&path)?;
            }
        }
        let path = dir.join(RESULTS_FILE);
        let results = append_file(&path)?;
        Ok(ResultsDir {
            dir,
            results: Mutex::new(results),
            _lock: lock,
        })
    }

    /// Appends one record as one line, flushed at once (a killed campaign keeps every whole line).
    pub fn append(&self, record: &Record) -> Result<(), CampaignError> {
        let mut file = self.results.lock().unwrap_or_else(|e| e.into_inner());
        write_record(&mut file, &self.dir.join(RESULTS_FILE), record)
    }

    /// Writes `campaign.json` (a new file each time: it describes the campaign file as it is now).
    pub fn write_info(&self, info: &CampaignInfo) -> Result<(), CampaignError> {
        let path = self.dir.join(INFO_FILE);
        let text = serde_json::to_string_pretty(info).expect("serializes");
        super::folder::replace(&path, text.as_bytes())
    }

    /// `relative` (a folder repro makes here) as a folder of its own, made when missing.
    pub fn subfolder(&self, relative: &str) -> Result<PathBuf, CampaignError> {
        let path = self.dir.join(relative);
        super::folder::real_dir(&path)?;
        Ok(path)
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }
}

/// Writes `record` as one line of the JSON-lines file `file` (at `path`, for an error).
pub fn write_record(file: &mut File, path: &Path, record: &Record) -> Result<(), CampaignError> {
    let line = serde_json::to_string(record).expect("a record always serializes");
    writeln!(file, "{line}").map_err(CampaignError::io("write", path))
}

/// Opens a JSON-lines file for appending. A file a kill left ending mid-line gets its line ended
/// first, so that the next record starts a line of its own instead of joining the broken one.
pub fn append_file(path: &Path) -> Result<File, CampaignError> {
    let mut file = super::folder::open_append(path)?;
    let length = file
        .metadata()
        .map_err(CampaignError::io("read", path))?
        .len();
    if length > 0 {
        use std::io::{Read, Seek, SeekFrom};
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(length - 1))
            .and_then(|_| file.read_exact(&mut last))
            .map_err(CampaignError::io("read", path))?;
        if last[0] != b'\n' {
            writeln!(file).map_err(CampaignError::io("write", path))?;
        }
    }
    Ok(file)
}

/// The records of a JSON-lines file, in order. A line that does not read (the end of a line cut
/// by a kill, which may also cut a character in two) is skipped with a warning naming it; a
/// missing file has none. A record that reads but that no campaign makes (a spec name that is a
/// path, a report outside `reports/`) is refused, naming its line and field: such a file was
/// written by someone else.
pub fn read_records(path: &Path) -> Result<Vec<Record>, CampaignError> {
    let mut records = Vec::new();
    super::folder::for_each_line(path, MAX_RESULTS_BYTES, MAX_RECORD_LINE, |number, line| {
        let skipped = |why: String| {
            eprintln!(
                "warning: {}:{number}: skipped a line that is not a run record ({})",
                path.display(),
                super::folder::one_line(&why)
            )
        };
        let Some(line) = line else {
            skipped(format!("longer than {MAX_RECORD_LINE} bytes"));
            return Ok(());
        };
        let Ok(line) = std::str::from_utf8(line) else {
            skipped("not UTF-8 text".into());
            return Ok(());
        };
        if line.trim().is_empty() {
            return Ok(());
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => {
                if let Some((field, why)) = r.problem() {
                    return Err(super::folder::refused(
                        path,
                        Some(format!("{number}: field `{field}`")),
                        format!(
                            "{}; not a record repro writes, refused",
                            super::folder::one_line(&why)
                        ),
                    ));
                }
                records.push(r);
            }
            Err(e) => skipped(e.to_string()),
        }
        Ok(())
    })?;
    Ok(records)
}

impl Record {
    /// The field of a record that no campaign writes, and why: every name is a spec's kind of
    /// name (they name files: the shape maps), every size a positive `int`, the key the one its
    /// fields make, the report a file of `reports/`.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let name_problem = |name: &str| -> Option<String> {
            if !crate::spec::names::is_spec_name(name) {
                Some(format!(
                    "`{name}` is not a name (lowercase letters, digits and `_`)"
                ))
            } else if name.len() > crate::spec::validate::MAX_SPEC_NAME {
                Some(format!(
                    "a name of {} characters; at most {}",
                    name.len(),
                    crate::spec::validate::MAX_SPEC_NAME
                ))
            } else {
                None
            }
        };
        if let Some(why) = name_problem(&self.spec) {
            return Some(("spec", why));
        }
        if let Some(why) = name_problem(&self.variant) {
            return Some(("variant", why));
        }
        for (name, &value) in &self.sizes {
            if let Some(why) = crate::spec::names::identifier_problem(name) {
                return Some(("sizes", format!("size name {why}")));
            }
            if !(1..=i64::from(i32::MAX)).contains(&value) {
                return Some((
                    "sizes",
                    format!("{name} = {value}: not a size from 1 to 2^31-1"),
                ));
            }
        }
        let key = super::file::RunKey {
            spec: self.spec.clone(),
            variant: self.variant.clone(),
            sizes: self.sizes.clone(),
            mode: self.mode,
        };
        if self.key != key.text() {
            return Some((
                "key",
                format!(
                    "`{}` is not the key of its own fields (`{}`)",
                    self.key,
                    key.text()
                ),
            ));
        }
        if let Some(report) = &self.report {
            let id = report
                .strip_prefix("reports/")
                .and_then(|r| r.strip_suffix(".json"));
            if !id.is_some_and(|id| {
                id.len() == 16
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            }) {
                return Some((
                    "report",
                    format!("`{report}` is not a report of the folder's reports/"),
                ));
            }
        }
        None
    }
}

/// The latest record of each key.
pub fn latest(records: Vec<Record>) -> HashMap<String, Record> {
    let mut by_key = HashMap::new();
    for r in records {
        by_key.insert(r.key.clone(), r);
    }
    by_key
}

pub fn read_info(dir: &Path) -> Result<CampaignInfo, CampaignError> {
    let path = dir.join(INFO_FILE);
    let not_results = |why: String| -> CampaignError {
        CampaignError::NotResults {
            dir: dir.to_path_buf(),
            why: format!("{INFO_FILE}: {}", super::folder::one_line(&why)),
        }
    };
    let bytes =
        super::folder::read(&path, MAX_INFO_BYTES)?.ok_or_else(|| not_results("missing".into()))?;
    let info: CampaignInfo =
        serde_json::from_slice(&bytes).map_err(|e| not_results(e.to_string()))?;
    if !crate::spec::names::is_spec_name(&info.name)
        || info.name.len() > crate::spec::validate::MAX_SPEC_NAME
    {
        return Err(super::folder::refused(
            &path,
            Some("field `name`".into()),
            format!(
                "`{}` is not a campaign name (lowercase letters, digits and `_`, at most {} of them)",
                super::folder::one_line(&info.name),
                crate::spec::validate::MAX_SPEC_NAME
            ),
        ));
    }
    if info.runs.len() > super::file::MAX_RUNS {
        return Err(super::folder::refused(
            &path,
            Some("field `runs`".into()),
            format!(
                "{} runs, more than a campaign may hold ({})",
                info.runs.len(),
                super::file::MAX_RUNS
            ),
        ));
    }
    Ok(info)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as a campaign writes it, changed by `change`: the field it says is wrong.
    fn problem_of(change: impl FnOnce(&mut Record)) -> Option<&'static str> {
        let mut r = Record::example("s/default/M=1/ones", "ok");
        r.sizes.insert("M".into(), 1);
        r.report = Some("reports/0123456789abcdef.json".into());
        change(&mut r);
        r.problem().map(|(field, _)| field)
    }

    #[test]
    fn a_record_no_campaign_writes_says_which_field() {
        assert_eq!(problem_of(|_| {}), None);
        assert_eq!(problem_of(|r| r.spec = "../x".into()), Some("spec"));
        assert_eq!(problem_of(|r| r.spec = "a".repeat(129)), Some("spec"));
        assert_eq!(problem_of(|r| r.variant = "/abs".into()), Some("variant"));
        let bad_name = |r: &mut Record| {
            r.sizes = IndexMap::from([("M/..".to_string(), 1)]);
        };
        assert_eq!(problem_of(bad_name), Some("sizes"));
        let too_big = |r: &mut Record| {
            r.sizes.insert("M".into(), 1 << 31);
        };
        assert_eq!(problem_of(too_big), Some("sizes"));
        assert_eq!(
            problem_of(|r| r.key = "s/default/M=2/ones".into()),
            Some("key")
        );
        for report in [
            "../r.json",
            "/tmp/r.json",
            "reports/../../r.json",
            "reports/0123.json",
        ] {
            assert_eq!(
                problem_of(|r| r.report = Some(report.into())),
                Some("report"),
                "{report}"
            );
        }
    }
}
