//! What a campaign found, from its records: a table grouped by verdict (failures first, the
//! most frequent first), then every failing run with its evidence and the per-tile heatmap of
//! its report, then what is not run yet. Written to the terminal and to `summary.txt`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use super::folder::one_line;
use super::results::Record;
use repro_contract::exit;

/// Failing runs listed per verdict; the rest are in results.jsonl (a campaign over thousands of
/// shapes that all fail one way needs a few examples, not thousands of lines).
const LISTED: usize = 20;

/// The summary text and the exit code it means: 1 when a kernel failed, else 3 when a build
/// failed, else 2 when the harness refused a run's options, else 7 when runs are left that
/// found no GPU or never ran, else 0.
pub fn summarize(
    name: &str,
    keys: &[String],
    latest: &HashMap<String, Record>,
    results_dir: &Path,
) -> (String, u8) {
    let mut out = String::new();
    let mut by_verdict: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    let mut not_run = 0usize;
    for key in keys {
        match latest.get(key) {
            Some(r) => by_verdict.entry(r.verdict.as_str()).or_default().push(r),
            None => not_run += 1,
        }
    }
    let count = |pred: &dyn Fn(&Record) -> bool| -> usize {
        by_verdict.values().flatten().filter(|r| pred(r)).count()
    };
    let failing = count(&|r| r.is_failure());
    let passed = count(&|r| r.verdict == "ok");
    let no_device = count(&|r| r.verdict == "no_device");
    let _ = writeln!(
        out,
        "campaign {name}: {} runs: {passed} pass, {failing} fail, {} not run yet",
        keys.len(),
        not_run + no_device
    );
    // Failures first, the most frequent first; then passes; then runs that found no GPU.
    let mut groups: Vec<(&str, &Vec<&Record>)> =
        by_verdict.iter().map(|(v, rs)| (*v, rs)).collect();
    let rank = |v: &str| match v {
        "ok" => 1,
        "no_device" => 2,
        _ => 0,
    };
    groups.sort_by_key(|(v, rs)| (rank(v), std::cmp::Reverse(rs.len())));
    let _ = writeln!(out, "  {:<20} {:>6}  where", "verdict", "runs");
    for (verdict, records) in &groups {
        let mut specs: BTreeMap<String, usize> = BTreeMap::new();
        for r in records.iter() {
            *specs
                .entry(format!("{} {} {}", r.spec, r.variant, r.mode.name()))
                .or_default() += 1;
        }
        let mut where_text: Vec<String> = specs.iter().map(|(s, n)| format!("{s} ({n})")).collect();
        if where_text.len() > 4 {
            let more = where_text.len() - 4;
            where_text.truncate(4);
            where_text.push(format!("and {more} more"));
        }
        let label = match *verdict {
            "ok" => "pass".to_string(),
            "no_device" => "not run (no GPU)".to_string(),
            v => format!("FAIL {}", one_line(v)),
        };
        let _ = writeln!(
            out,
            "  {label:<20} {:>6}  {}",
            records.len(),
            where_text.join(", ")
        );
    }
    if not_run > 0 {
        let _ = writeln!(out, "  {:<20} {not_run:>6}", "not run yet");
    }
    if failing > 0 {
        let _ = writeln!(out, "failing runs ({failing}):");
        for (verdict, records) in groups.iter().filter(|(v, _)| rank(v) == 0) {
            let verdict = one_line(verdict);
            if records.len() > LISTED {
                let _ = writeln!(
                    out,
                    "  {verdict:<14} {} runs; the first {LISTED} (all in results.jsonl):",
                    records.len()
                );
            }
            for r in records.iter().take(LISTED) {
                let _ = writeln!(out, "  {verdict:<14} {}", one_line(&r.key));
                if !r.evidence.is_empty() {
                    let _ = writeln!(out, "  {:<14}   {}", "", one_line(&r.evidence));
                }
                if let Some(report) = &r.report {
                    // `reports/<run id>.json` (a record says nothing else), drawn only when it
                    // is a file there, not a link to one elsewhere.
                    let json = results_dir.join(report);
                    let is_file = std::fs::symlink_metadata(&json).is_ok_and(|m| m.is_file());
                    let heatmap = is_file
                        .then(|| {
                            crate::analyze::heatmap::write_for_report(&json)
                                .ok()
                                .flatten()
                        })
                        .flatten();
                    let _ = match heatmap {
                        Some(png) => writeln!(out, "  {:<14}   heatmap {}", "", png.display()),
                        None => writeln!(out, "  {:<14}   report {}", "", json.display()),
                    };
                }
            }
        }
    }
    for map in super::shape_map::maps(keys, latest) {
        out.push_str(&map.text());
        if let Some(png) = map.write_png(results_dir) {
            let _ = writeln!(out, "  picture {}", png.display());
        }
    }
    // A kernel's failure says most; a build that failed, then options the harness refused (a
    // shape its inputs cannot take), say something about the campaign instead.
    let failed = |verdict: &str| groups.iter().any(|(v, _)| *v == verdict);
    let code = if groups
        .iter()
        .any(|(v, _)| rank(v) == 0 && !matches!(*v, "build_failed" | "refused"))
    {
        exit::MISMATCH
    } else if failed("build_failed") {
        exit::BUILD
    } else if failed("refused") {
        exit::USAGE
    } else if not_run + no_device > 0 {
        exit::NO_DEVICE
    } else {
        exit::PASSED
    };
    (out, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(verdicts: &[&str], keys: usize) -> u8 {
        let latest: HashMap<String, Record> = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), Record::example(&i.to_string(), v)))
            .collect();
        let keys: Vec<String> = (0..keys).map(|i| i.to_string()).collect();
        summarize("c", &keys, &latest, Path::new(".")).1
    }

    #[test]
    fn the_exit_code_says_the_worst_that_happened() {
        assert_eq!(code_of(&["ok", "ok"], 2), exit::PASSED);
        assert_eq!(code_of(&["ok", "no_device"], 2), exit::NO_DEVICE);
        assert_eq!(code_of(&["ok"], 2), exit::NO_DEVICE, "a run never recorded");
        assert_eq!(code_of(&["ok", "refused", "no_device"], 3), exit::USAGE);
        assert_eq!(code_of(&["refused", "build_failed"], 2), exit::BUILD);
        assert_eq!(code_of(&["build_failed", "row_mapping"], 2), exit::MISMATCH);
        assert_eq!(code_of(&["hang"], 1), exit::MISMATCH);
    }

    #[test]
    fn failures_come_first_and_are_listed_with_their_evidence() {
        let mut latest = HashMap::new();
        for (key, verdict) in [
            ("a", "ok"),
            ("b", "unwritten"),
            ("c", "unwritten"),
            ("d", "hang"),
        ] {
            let mut r = Record::example(key, verdict);
            r.evidence = format!("evidence of {key}");
            latest.insert(key.to_string(), r);
        }
        let keys: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let (text, _) = summarize("c", &keys, &latest, Path::new("."));
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} not in\n{text}"));
        assert!(
            at("FAIL unwritten") < at("FAIL hang") && at("FAIL hang") < at("\n  pass "),
            "{text}"
        );
        assert!(at("failing runs (3):") < at("evidence of b"), "{text}");
        assert!(!text.contains("evidence of a"), "{text}");
    }
}
