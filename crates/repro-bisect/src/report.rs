//! bisect's answer: what it prints, the JSON it writes (`--json`, and always
//! `<artifact>/.repro/bisect/result.json`, which `repro bundle` reads for its "introduced by"
//! line), and the one line a bundle shows.

use serde::{Deserialize, Serialize};

use super::git::{short, CommitInfo};
use super::search::Verdict;

/// One tested commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tested {
    pub commit: String,
    pub verdict: Verdict,
    /// The run's class (`ok`, `mismatch`...), or `build` / `missing` when it could not run.
    pub class: String,
    /// The report line that says what was seen, or why the commit was skipped.
    pub evidence: String,
    /// Seconds nvcc's build took here; None when a cache answered (or nothing was built).
    pub build_seconds: Option<f64>,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    pub spec: String,
    pub repo: String,
    pub good: String,
    pub bad: String,
    pub mode: String,
    /// The failure class searched for.
    pub class: String,
    /// The first bad commit, when the search could name one.
    pub first_bad: Option<CommitInfo>,
    /// When skipped commits leave it open: the commits it could be (the last one is bad).
    pub candidates: Vec<CommitInfo>,
    /// The verdict at the first bad commit and at the last good one before it.
    pub at_first_bad: Option<Tested>,
    pub at_parent: Option<Tested>,
    /// Files under the include directories the first bad commit changed, and git's diff stat.
    pub changed_files: Vec<String>,
    pub diff_stat: String,
    pub commits_in_range: usize,
    pub tested: Vec<Tested>,
    /// nvcc builds this bisect ran (results of earlier ones are reused without a build).
    pub builds: usize,
    pub wall_seconds: f64,
}

impl Answer {
    pub fn skipped(&self) -> Vec<&Tested> {
        self.tested
            .iter()
            .filter(|t| t.verdict == Verdict::Skip)
            .collect()
    }

    /// The report's closing lines.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |t: &Tested| {
            if t.evidence.is_empty() {
                t.class.clone()
            } else {
                format!("{}: {}", t.class, t.evidence)
            }
        };
        match &self.first_bad {
            Some(c) => {
                out.push_str(&format!(
                    "bisect  first bad commit: {} {}\n",
                    c.hash, c.subject
                ));
                out.push_str(&format!("        author {}, {}\n", c.author, c.date));
            }
            None => {
                out.push_str(&format!(
                    "bisect  the first bad commit is one of {} (skipped commits between the last good and the first bad):\n",
                    self.candidates.len()
                ));
                for c in &self.candidates {
                    out.push_str(&format!("        {} {}\n", short(&c.hash), c.subject));
                }
            }
        }
        if let Some(t) = &self.at_first_bad {
            out.push_str(&format!("        at it:     {}\n", line(t)));
        }
        if let Some(t) = &self.at_parent {
            out.push_str(&format!(
                "        before it: {} ({})\n",
                line(t),
                short(&t.commit)
            ));
        }
        if !self.changed_files.is_empty() {
            out.push_str("        changed under the include directories:\n");
            for l in self.diff_stat.lines() {
                out.push_str(&format!("          {}\n", l.trim()));
            }
        }
        let skipped = self.skipped();
        if !skipped.is_empty() {
            out.push_str(&format!("        skipped {}:\n", skipped.len()));
            for t in skipped {
                out.push_str(&format!("          {} {}\n", short(&t.commit), line(t)));
            }
        }
        out.push_str(&format!(
            "        {} commits in range, {} tested, {} builds, {:.1} s\n",
            self.commits_in_range,
            self.tested.len(),
            self.builds,
            self.wall_seconds
        ));
        out
    }

    /// The line a bug report's bundle shows.
    pub fn introduced_by(&self) -> Option<String> {
        let c = self.first_bad.as_ref()?;
        Some(format!(
            "{} \"{}\" ({}, {}), found by repro bisect between {} and {} ({} mode, class `{}`)",
            short(&c.hash),
            c.subject,
            c.author,
            c.date,
            short(&self.good),
            short(&self.bad),
            self.mode,
            self.class
        ))
    }
}
