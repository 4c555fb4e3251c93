//! `repro campaign` given files someone else made (docs/campaign.md, "A results folder from
//! others"): a results folder with links planted in it, records whose names are paths, fifos,
//! endless and huge files, escape sequences, a shard line that is not UTF-8; campaign and shapes
//! files with sizes past `int`, columns and keys given twice, a name too long, a timeout no
//! process limit holds, and a shapes file of the most rows a campaign may hold. Each folder is
//! made by hand (no GPU, no build); nothing outside it may change, and every refusal is exit 2
//! naming the file and the place.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use assert_cmd::Command;
use serde_json::{json, Value};

use crate::common;

/// A results folder and, beside it, an `outside` folder whose files must never change.
struct Folder {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    results: PathBuf,
    outside: PathBuf,
}

impl Folder {
    fn new() -> Folder {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let results = root.join("results");
        let outside = root.join("outside");
        std::fs::create_dir_all(&results).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Folder {
            _tmp: tmp,
            root,
            results,
            outside,
        }
    }

    /// A file outside the folder, with content and an old mtime to compare after.
    fn outside_file(&self, name: &str) -> PathBuf {
        let path = self.outside.join(name);
        std::fs::write(&path, format!("{name} must not change\n")).unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        path
    }

    /// Every file outside, with content and mtime.
    fn outside_state(&self) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
        let mut all: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                (
                    p.clone(),
                    std::fs::read(&p).unwrap_or_default(),
                    meta.modified().unwrap(),
                )
            })
            .collect();
        all.sort();
        all
    }

    fn write_info(&self, keys: &[String]) {
        std::fs::write(
            self.results.join("campaign.json"),
            json!({"name": "hostile", "file": "/nowhere/c.yaml", "runs": keys}).to_string(),
        )
        .unwrap();
    }

    /// `records` as the lines of `relative` under the results folder.
    fn write_records(&self, relative: &str, records: &[Value]) {
        let path = self.results.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let lines: Vec<String> = records.iter().map(Value::to_string).collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn collect(&self) -> std::process::Output {
        Command::cargo_bin("repro")
            .unwrap()
            .current_dir(&self.root)
            .args(["campaign", "--collect"])
            .arg(&self.results)
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap()
    }
}

/// The failures of a test's cases, all of them said at its end (not only the first).
#[derive(Default)]
struct Checks(Vec<String>);

impl Checks {
    fn check(&mut self, ok: bool, what: impl std::fmt::Display) {
        if !ok {
            self.0.push(what.to_string());
        }
    }

    fn done(self) {
        assert!(self.0.is_empty(), "{}", self.0.join("\n----\n"));
    }
}

/// A record as a campaign writes it: its key made from its fields.
fn record(spec: &str, sizes: &[(&str, i64)], verdict: &str) -> Value {
    let text: Vec<String> = sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let sizes: serde_json::Map<String, Value> = sizes
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    json!({
        "key": format!("{spec}/default/{}/ones", text.join(",")),
        "campaign": "hostile",
        "spec": spec,
        "variant": "default",
        "sizes": sizes,
        "mode": "ones",
        "code": if verdict == "ok" { 0 } else { 1 },
        "verdict": verdict,
        "disposition": "",
        "evidence": "",
        "times": {"build_s": 0.0, "run_s": 0.1},
        "gpu": null,
        "worker": "slurm",
        "host": "node1",
        "started": "2026-01-01T00:00:00Z",
    })
}

/// Three shapes of spec `s`, M = 129 failing: enough for a shape map and its PNG.
fn failing_shapes(spec: &str) -> Vec<Value> {
    [1, 129, 256]
        .map(|m| {
            record(
                spec,
                &[("M", m), ("N", 8)],
                if m == 129 { "unwritten" } else { "ok" },
            )
        })
        .to_vec()
}

fn keys(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect()
}

fn text(output: &std::process::Output) -> (i32, String, String) {
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn links_planted_in_a_results_folder_are_not_written_through() {
    // Each of repro's own names, planted as a link to a file outside; the shards hold records,
    // so a collection appends and summarizes.
    let mut c = Checks::default();
    for planted in [".lock", "results.jsonl", "summary.txt", "maps", "reports"] {
        let f = Folder::new();
        let shapes = failing_shapes("s");
        f.write_info(&keys(&shapes));
        f.write_records("shards/1-0.jsonl", &shapes);
        let target = if planted == "maps" || planted == "reports" {
            f.outside.clone()
        } else {
            f.outside_file("target")
        };
        let before = f.outside_state();
        symlink(&target, f.results.join(planted)).unwrap();
        let (code, stdout, stderr) = text(&f.collect());
        let said = format!("{planted}: exit {code}\n{stdout}{stderr}");
        c.check(
            f.outside_state() == before,
            format!("written through: {said}"),
        );
        if planted == "summary.txt" {
            // Replaced, not followed: the link itself is now the summary.
            let replaced = f
                .results
                .join(planted)
                .symlink_metadata()
                .is_ok_and(|m| m.is_file());
            c.check(code == 1 && replaced, &said);
        } else {
            let named = stderr.contains(&format!("{planted}: a symbolic link"));
            c.check(code == 2 && named, &said);
        }
    }
    c.done();
}

#[test]
fn records_naming_paths_are_refused_at_their_line_and_field() {
    let f = Folder::new();
    let mut c = Checks::default();
    let absolute = f.outside.join("x").display().to_string();
    for spec in ["../../outside/x", absolute.as_str()] {
        let shapes = failing_shapes(spec);
        f.write_info(&keys(&shapes));
        f.write_records("shards/1-0.jsonl", &[record("s", &[("M", 2)], "ok")]);
        f.write_records("results.jsonl", &shapes);
        let before = f.outside_state();
        let (code, stdout, stderr) = text(&f.collect());
        let said = format!("{spec}: exit {code}\n{stdout}{stderr}");
        c.check(
            f.outside_state() == before,
            format!("written outside: {said}"),
        );
        c.check(
            code == 2 && stderr.contains("results.jsonl:1: field `spec`"),
            &said,
        );
    }
    // A report path out of reports/: its heatmap would be drawn beside it.
    std::fs::write(
        f.outside.join("r.json"),
        json!({"output": {"shape": [1, 256, 256], "tile": [128, 128], "bad_per_tile": [1, 0, 0, 1]}})
            .to_string(),
    )
    .unwrap();
    let mut bad = record("s", &[("M", 129)], "unwritten");
    bad["report"] = json!("../outside/r.json");
    f.write_info(&keys(std::slice::from_ref(&bad)));
    f.write_records("results.jsonl", &[record("s", &[("M", 1)], "ok"), bad]);
    let before = f.outside_state();
    let (code, stdout, stderr) = text(&f.collect());
    let said = format!("report: exit {code}\n{stdout}{stderr}");
    c.check(
        f.outside_state() == before,
        format!("written outside: {said}"),
    );
    c.check(
        code == 2 && stderr.contains("results.jsonl:2: field `report`"),
        &said,
    );
    c.done();
}

#[test]
fn a_planted_partial_heatmap_is_replaced_not_followed() {
    let f = Folder::new();
    let id = "0123456789abcdef";
    std::fs::create_dir_all(f.results.join("reports")).unwrap();
    std::fs::write(
        f.results.join(format!("reports/{id}.json")),
        json!({"output": {"shape": [1, 256, 256], "tile": [128, 128], "bad_per_tile": [1, 0, 0, 1]}})
            .to_string(),
    )
    .unwrap();
    let target = f.outside_file("target");
    symlink(
        &target,
        f.results.join(format!("reports/{id}.heatmap.png.partial")),
    )
    .unwrap();
    let mut bad = record("s", &[("M", 129)], "unwritten");
    bad["report"] = json!(format!("reports/{id}.json"));
    f.write_info(&keys(std::slice::from_ref(&bad)));
    f.write_records("results.jsonl", &[bad]);
    let before = f.outside_state();
    let (code, stdout, stderr) = text(&f.collect());
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(f.outside_state(), before);
    let png = std::fs::read(f.results.join(format!("reports/{id}.heatmap.png"))).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{stdout}");
}

#[test]
fn fifos_and_endless_files_are_refused_without_blocking() {
    let mut c = Checks::default();
    for (planted, kind) in [
        ("results.jsonl", "fifo"),
        ("shards/1-0.jsonl", "fifo"),
        ("campaign.json", "fifo"),
        ("results.jsonl", "zero"),
        ("shards/1-0.jsonl", "zero"),
        ("campaign.json", "zero"),
    ] {
        let f = Folder::new();
        let shapes = failing_shapes("s");
        f.write_info(&keys(&shapes));
        f.write_records("shards/1-1.jsonl", &shapes);
        let path = f.results.join(planted);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        let what = if kind == "fifo" {
            "a fifo"
        } else {
            "a symbolic link"
        };
        if kind == "fifo" {
            assert!(std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success());
        } else {
            symlink("/dev/zero", &path).unwrap();
        }
        let started = Instant::now();
        let (code, stdout, stderr) = text(&f.collect());
        c.check(
            started.elapsed() < Duration::from_secs(30)
                && code == 2
                && stderr.contains(&format!("{planted}: {what}, not a file; refused")),
            format!("{planted} {kind}: exit {code}\n{stdout}{stderr}"),
        );
    }
    // A regular file past the bound (sparse: no disk spent) is refused, not read.
    let f = Folder::new();
    let shapes = failing_shapes("s");
    f.write_info(&keys(&shapes));
    let huge = std::fs::File::create(f.results.join("shards/1-0.jsonl")).unwrap_or_else(|_| {
        std::fs::create_dir_all(f.results.join("shards")).unwrap();
        std::fs::File::create(f.results.join("shards/1-0.jsonl")).unwrap()
    });
    huge.set_len(600 << 20).unwrap();
    let (code, _, stderr) = text(&f.collect());
    c.check(
        code == 2 && stderr.contains("1-0.jsonl: larger than 512.0 MiB"),
        format!("huge: exit {code}\n{stderr}"),
    );
    c.done();
}

#[test]
fn what_a_record_says_reaches_the_terminal_escaped_and_a_bad_line_is_named() {
    let f = Folder::new();
    let mut shapes = failing_shapes("s");
    shapes[1]["evidence"] = json!("rows \u{1b}]0;owned\u{7}\u{1b}[2J never written\r");
    shapes[1]["verdict"] = json!("unwritten\u{1b}[31m");
    f.write_info(&keys(&shapes));
    // One shard: a record, a line that is not UTF-8, two more records.
    let path = f.results.join("shards/1-0.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut bytes = shapes[0].to_string().into_bytes();
    bytes.extend_from_slice(b"\n{\"key\": \"\xff\xfe\"}\n");
    for r in &shapes[1..] {
        bytes.extend_from_slice(r.to_string().as_bytes());
        bytes.push(b'\n');
    }
    std::fs::write(&path, bytes).unwrap();
    let (code, stdout, stderr) = text(&f.collect());
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("1-0.jsonl:2: skipped a line that is not a run record (not UTF-8 text)"),
        "{stderr}"
    );
    assert!(stdout.contains("collect 3 new records"), "{stdout}");
    let summary = std::fs::read_to_string(f.results.join("summary.txt")).unwrap();
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("summary.txt", &summary),
    ] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'),
            "{what} holds a raw control character:\n{text:?}"
        );
    }
    assert!(summary.contains("never written\\u{d}"), "{summary}");
}

#[test]
fn a_record_without_a_size_its_spec_has_elsewhere_is_mapped_apart() {
    let f = Folder::new();
    let mut all = failing_shapes("s");
    all.push(record("s", &[("N", 8)], "hang"));
    f.write_info(&keys(&all));
    f.write_records("results.jsonl", &all);
    let (code, stdout, stderr) = text(&f.collect());
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("shape map s default ones: M down"),
        "{stdout}"
    );
}

/// A campaign of spec small_gemm with `entry` (YAML lines of its one `specs:` entry, indented
/// four spaces) and the campaign's own `top` lines: what `repro campaign` says of it, which
/// must be a refusal (exit 2) holding every one of `said`.
fn refused_campaign(c: &mut Checks, top: &str, entry: &str, files: &[(&str, &str)], said: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    common::write_small_spec(tmp.path());
    for (name, body) in files {
        std::fs::write(tmp.path().join(name), body).unwrap();
    }
    std::fs::write(
        tmp.path().join("c.yaml"),
        format!("version: 1\n{top}specs:\n  - spec: small_gemm.yaml\n{entry}"),
    )
    .unwrap();
    let out = Command::cargo_bin("repro")
        .unwrap()
        .current_dir(tmp.path())
        .env("REPRO_GPU_LOCK_DIR", tmp.path().join("locks"))
        .args([
            "campaign",
            "c.yaml",
            "-o",
            "results",
            "--nvcc",
            "/nonexistent/nvcc",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let (code, stdout, stderr) = text(&out);
    c.check(
        code == 2 && said.iter().all(|s| stderr.contains(s)),
        format!("expected {said:?}: exit {code}\n{stdout}{stderr}"),
    );
}

#[test]
fn campaign_and_shapes_files_are_checked_as_a_spec_is() {
    let mut c = Checks::default();
    let c = &mut c;
    refused_campaign(
        c,
        "name: c\ntimeout: 1e308\n",
        "",
        &[],
        &["c.yaml:3:", "timeout 1e308"],
    );
    refused_campaign(
        c,
        "name: c\ntimeout: .inf\n",
        "",
        &[],
        &["c.yaml:3:", "timeout inf"],
    );
    let long = format!("name: {}\n", "a".repeat(10_000));
    refused_campaign(c, &long, "", &[], &["c.yaml:2:", "10000 characters long"]);
    let big = "    sizes: { M: [3000000000] }\n";
    refused_campaign(
        c,
        "name: c\n",
        big,
        &[],
        &["c.yaml:5:", "does not fit the `int`"],
    );
    refused_campaign(
        c,
        "name: c\n",
        "    shapes_file: s.csv\n",
        &[("s.csv", "M,N\n1,2\n2147483648,3\n")],
        &["s.csv:3: M = 2147483648 does not fit"],
    );
    refused_campaign(
        c,
        "name: c\n",
        "    shapes_file: s.csv\n",
        &[("s.csv", "# sizes\nM,N,M\n1,2,3\n")],
        &["s.csv:2: column `M` is given twice"],
    );
    refused_campaign(
        c,
        "name: c\n",
        "    shapes_file: s.jsonl\n",
        &[("s.jsonl", "{\"M\": 1}\n{\"M\": 1, \"N\": 2, \"M\": 3}\n")],
        &["s.jsonl:2: `M` is given twice"],
    );
    std::mem::take(c).done();
}

#[test]
fn fifos_as_campaign_or_shapes_files_are_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["fifo.yaml", "s.csv"] {
        assert!(std::process::Command::new("mkfifo")
            .arg(tmp.path().join(name))
            .status()
            .unwrap()
            .success());
    }
    common::write_small_spec(tmp.path());
    std::fs::write(
        tmp.path().join("c.yaml"),
        "version: 1\nname: c\nspecs:\n  - spec: small_gemm.yaml\n    shapes_file: s.csv\n",
    )
    .unwrap();
    let mut c = Checks::default();
    for (file, said) in [("fifo.yaml", "fifo.yaml"), ("c.yaml", "s.csv is a fifo")] {
        let out = Command::cargo_bin("repro")
            .unwrap()
            .current_dir(tmp.path())
            .args([
                "campaign",
                file,
                "-o",
                "results",
                "--nvcc",
                "/nonexistent/nvcc",
            ])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let (code, stdout, stderr) = text(&out);
        c.check(
            code == 2 && stderr.contains(said),
            format!("{file}: exit {code}\n{stdout}{stderr}"),
        );
        // The shapes file that cannot be read is the campaign file's to mend, at its line.
        c.check(
            file != "c.yaml" || stderr.contains("c.yaml:5:18"),
            format!("{file}: no place in the campaign file\n{stderr}"),
        );
    }
    c.done();
}

/// The most shapes a campaign may hold, read in about a second (it was 48 s: every row's line
/// was counted from the file's start), and a file past the limit refused at the first row past
/// it, not read to its end.
#[test]
fn a_shapes_file_of_the_most_rows_reads_in_linear_time_and_stops_at_the_limit() {
    let mut c = Checks::default();
    let rows: String = (1..=100_000).map(|i| format!("{i},8\n")).collect();
    let started = Instant::now();
    refused_campaign(
        &mut c,
        "name: c\n",
        "    shapes_file: s.csv\n    modes: [ones, random]\n",
        &[("s.csv", &format!("M,N\n{rows}"))],
        &["200000 runs, more than"],
    );
    let took = started.elapsed();
    c.check(took < Duration::from_secs(10), format!("took {took:?}"));
    // Past the limit, a bad row at the end is never reached.
    refused_campaign(
        &mut c,
        "name: c\n",
        "    shapes_file: s.csv\n",
        &[("s.csv", &format!("M,N\n{rows}1,8\nx,8\n"))],
        &["s.csv:100002: more shapes than a campaign may hold"],
    );
    let json: String = (1..=100_001).map(|i| format!("{{\"M\": {i}}}\n")).collect();
    refused_campaign(
        &mut c,
        "name: c\n",
        "    shapes_file: s.jsonl\n",
        &[("s.jsonl", &format!("{json}{{\"M\": x}}\n"))],
        &["s.jsonl:100001: more shapes than a campaign may hold"],
    );
    c.done();
}

/// The GPU lock folder is shared by every user of a machine: a lock file another user planted
/// as a link is refused, not truncated, and so is a folder that is a link or that any user may
/// rewrite.
#[test]
fn gpu_lock_files_planted_as_links_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    common::write_small_spec(tmp.path());
    std::fs::write(
        tmp.path().join("c.yaml"),
        "version: 1\nname: c\nspecs:\n  - spec: small_gemm.yaml\n    modes: [ones]\n",
    )
    .unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("target");
    std::fs::write(&target, "must not change\n").unwrap();
    let shared = tmp.path().join("locks");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    symlink(&target, shared.join("0.lock")).unwrap();
    let open_dir = tmp.path().join("open");
    std::fs::create_dir_all(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let linked = tmp.path().join("linked");
    symlink(&outside, &linked).unwrap();
    let mut c = Checks::default();
    for (dir, said) in [
        (&shared, "0.lock: a symbolic link"),
        (&open_dir, "not sticky"),
        (&linked, "folder is a symbolic link"),
    ] {
        let out = Command::cargo_bin("repro")
            .unwrap()
            .current_dir(tmp.path())
            .env("REPRO_GPU_LOCK_DIR", dir)
            .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
            .args([
                "campaign",
                "c.yaml",
                "-o",
                "results",
                "--devices",
                "0",
                "--nvcc",
            ])
            .arg(common::nvcc())
            .timeout(Duration::from_secs(300))
            .output()
            .unwrap();
        let (code, stdout, stderr) = text(&out);
        let unchanged = std::fs::read_to_string(&target).unwrap() == "must not change\n"
            && std::fs::read_dir(&outside).unwrap().count() == 1;
        c.check(
            code == 2 && stderr.contains(said) && unchanged,
            format!(
                "{}: exit {code}, outside unchanged: {unchanged}\n{stdout}{stderr}",
                dir.display()
            ),
        );
    }
    c.done();
}
