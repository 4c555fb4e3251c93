//! Tests of report.rs: the reports under tests/fixtures/report (their README says which the
//! runtime wrote), the disposition line, and the classes against the runtime and docs/cli.md.

use super::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Report::from_json(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_run_without_a_device_has_only_what_came_before_it() {
    let report = fixture("no_device.json");
    assert_eq!(report.disposition, ReportDisposition::NotRun);
    assert_eq!(report.class, "no_device");
    assert_eq!(report.exit_code, crate::exit::NO_DEVICE);
    assert_eq!(report.message, "no usable CUDA device");
    assert_eq!(report.name.as_deref(), Some("naive_gemm_bf16"));
    assert_eq!(report.sizes.as_deref(), Some("M=64 N=64 K=64"));
    assert_eq!(report.device, None);
    assert_eq!(report.output, None);
}

#[test]
fn a_hang_keeps_its_comparison_and_unknown_members_are_ignored() {
    // The runtime's own output; its `spec` member is the self-test's, unknown here.
    let report = fixture("hang_selftest.json");
    assert_eq!(report.disposition, ReportDisposition::Failed);
    assert_eq!((report.class.as_str(), report.exit_code), ("hang", 5));
    let output = report.output.expect("the comparison");
    assert_eq!((output.count, output.bad, output.nan), (4, 3, 1));
    assert_eq!(output.tiles.shape, [1, 2, 2]);
    assert_eq!(output.tiles.bad_per_tile, [0, 1, 1, 1]);
    let got: Vec<&Got> = output.first_mismatches.iter().map(|m| &m.got).collect();
    assert_eq!(
        got,
        [
            &Got::Value(Some(2.0)),
            &Got::Value(None),
            &Got::Poison(PoisonMarker::Poison)
        ]
    );
    assert_eq!(output.first_mismatches[2].index, [0, 1, 1]);
}

#[test]
fn a_failed_gemm_run_reads_member_for_member() {
    let report = fixture("gemm_random_boundary.json");
    assert_eq!(report.class, "unwritten");
    assert_eq!(report.mode.as_deref(), Some("reference"));
    let device = report.device.expect("device");
    assert_eq!(device.value.sm_count, 132);
    assert_eq!(device.value.compute_capability, "9.0");
    // The copy keeps the harness's integers as integers.
    assert_eq!(device.json["sm_count"].to_string(), "132");
    let timings = report.timings.expect("timings");
    assert_eq!(
        timings.value.keys().collect::<Vec<_>>(),
        [
            "compare",
            "context",
            "inputs",
            "kernel",
            "reference",
            "total"
        ]
    );
    let output = report.output.expect("output");
    assert_eq!(output.ratio, None, "a ratio that is not finite is null");
    assert_eq!(output.tiles.tile, [64, 64]);
    assert_eq!(report.tolerance.map(|t| t.exact), Some(false));
    assert_eq!(report.launch.map(|l| l.grid), Some([2, 3, 1]));
    assert_eq!(report.repeat_wrong, Some(0));
    assert_eq!(report.reference_provider.as_deref(), Some("device"));
}

#[test]
fn a_traced_ones_run_reads_its_trace() {
    let report = fixture("gemm_ones_traced.json");
    assert_eq!(report.mode.as_deref(), Some("ones"));
    let trace = report.trace.expect("trace");
    assert_eq!(trace[1].role, "accumulator");
    assert_eq!(trace[1].seen, 128);
    assert_eq!(report.trace_stage.as_deref(), Some("mma"));
    assert!(report.production.is_some() && report.tma.is_some());
}

#[test]
fn a_probe_run_reads_its_probes_and_verdict() {
    let report = fixture("probe_k_coverage.json");
    assert_eq!(report.verdict.as_deref(), Some("k_coverage"));
    let probes = report.probes.expect("probes");
    assert_eq!(probes[0].class.as_deref(), Some("scale"));
    assert_eq!(probes[1].class, None, "a passing probe has no class");
    let report = fixture("attention_probe_mask.json");
    let probes = report.probes.expect("probes");
    assert!(probes[0].note.is_some());
    assert_eq!(
        Class::parse(&report.class),
        Some(Class::Verdict(Verdict::Mask))
    );
}

#[test]
fn a_custom_op_reads_every_output() {
    let report = fixture("custom_two_outputs.json");
    let outputs = report.outputs.expect("outputs");
    assert_eq!(
        outputs
            .iter()
            .map(|o| o.tensor.as_str())
            .collect::<Vec<_>>(),
        ["y", "mean"]
    );
    assert_eq!(report.first_wrong_output.as_deref(), Some("mean"));
    assert_eq!(report.output.map(|o| o.tiles.shape), Some([1, 1, 1024]));
    assert_eq!(report.reference_op.as_deref(), Some("layer_norm"));
}

#[test]
fn a_bench_run_reads_its_timings_and_keeps_them_as_written() {
    let report = fixture("bench_timed.json");
    assert_eq!(report.disposition, ReportDisposition::Timed);
    let bench = report.bench.expect("bench");
    assert_eq!(bench.value.median_ms, Some(0.618));
    assert_eq!(bench.value.repeat, 100);
    assert_eq!(bench.json["flops"].to_string(), "68719476736");
}

#[test]
fn a_report_the_async_race_checker_rewrote_still_reads() {
    let report = fixture("async_race_rewritten.json");
    assert_eq!(report.disposition, ReportDisposition::Failed);
    assert!(report.async_race.is_some());
}

#[test]
fn a_report_missing_a_member_it_always_has_is_refused_naming_it() {
    let text = r#"{"name": "x", "disposition": "failed", "exit_code": 1, "message": ""}"#;
    let error = Report::from_json(text.as_bytes()).unwrap_err();
    assert!(matches!(error, ReportError::NotAReport(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with("not a harness report (missing field `class`"),
        "{message}"
    );
    // A comparison missing a member: named too.
    let text = r#"{"disposition": "failed", "class": "x", "exit_code": 1, "message": "",
                   "output": {"tensor": "D"}}"#;
    let message = Report::from_json(text.as_bytes()).unwrap_err().to_string();
    assert!(message.contains("missing field `passed`"), "{message}");
    // A member of another type than the harness writes.
    let text = r#"{"disposition": "failed", "class": "x", "exit_code": "1", "message": ""}"#;
    let message = Report::from_json(text.as_bytes()).unwrap_err().to_string();
    assert!(message.contains("invalid type: string \"1\""), "{message}");
    let error = Report::from_json(b"{\"disposition\": ").unwrap_err();
    assert!(matches!(error, ReportError::NotJson(_)), "{error:?}");
    assert!(error.to_string().starts_with("not JSON ("), "{error}");
}

#[test]
fn the_tile_counts_read_without_the_rest_of_the_report() {
    let minimal = br#"{"output": {"shape": [1, 256, 256], "tile": [128, 128], "bad_per_tile": [1, 0, 0, 1]}}"#;
    let tiles = TileReport::from_json(minimal).and_then(|r| r.output);
    assert_eq!(tiles.map(|t| t.bad_per_tile), Some(vec![1, 0, 0, 1]));
    assert_eq!(
        TileReport::from_json(b"{}"),
        Some(TileReport { output: None })
    );
    assert_eq!(
        TileReport::from_json(br#"{"output": {"shape": [1, 2]}}"#),
        None
    );
    assert_eq!(TileReport::from_json(b"not json"), None);
}

#[test]
fn disposition_lines_read_and_print_alike() {
    for (text, class) in [
        ("Passed", Some("ok")),
        ("Failed (row_mapping)", Some("row_mapping")),
        ("Not run (no_device)", None),
        ("Timed (not checked)", None),
        ("Done, more or less", None),
    ] {
        let disposition = Disposition::from_text(text);
        assert_eq!(disposition.to_string(), text);
        assert_eq!(disposition.class(), class, "{text}");
    }
    assert_eq!(
        Disposition::from_text("Failed (hang)"),
        Disposition::Failed("hang".into())
    );
    assert_eq!(
        Disposition::from_text("Failed (hang"),
        Disposition::Other("Failed (hang".into())
    );
    assert_eq!(Disposition::from_line("pattern scale: ..."), None);
    let output = "Disposition: Failed (scale)\nmore\nDisposition: Passed\ntail\n";
    assert_eq!(Disposition::last_in(output), Some(Disposition::Passed));
    assert_eq!(Disposition::last_in("D relL2 ...\n"), None);
}

#[test]
fn every_class_reads_back_by_its_name() {
    for name in verdict_names_in_docs() {
        let class = Class::parse(&name).unwrap_or_else(|| panic!("{name}"));
        assert!(matches!(class, Class::Verdict(_)), "{name}");
        assert_eq!(class.name(), name);
    }
    for (class, name) in Class::OTHERS {
        assert_eq!(Class::parse(name), Some(class));
        assert_eq!(class.name(), name);
    }
    assert_eq!(Class::parse("Scale"), None);
    assert_eq!(Class::parse("trace"), None);
}

/// The repository's root.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The classes of docs/cli.md's "Verdict classes" table: one per row, `| \`name\` | ...`.
fn verdict_names_in_docs() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/cli.md")).expect("docs/cli.md");
    let start = text.find("\n## Verdict classes").expect("the section");
    let section = &text[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect()
}

/// The table of docs/cli.md and [`Verdict`] name the same classes.
#[test]
fn the_documented_verdict_classes_are_the_enum() {
    let documented = verdict_names_in_docs();
    let typed: BTreeSet<String> = documented
        .iter()
        .filter(|n| matches!(Class::parse(n), Some(Class::Verdict(_))))
        .cloned()
        .collect();
    assert_eq!(typed, documented, "a documented class Verdict lacks");
    // And no verdict is undocumented: Verdict has no list of its own, so count its names.
    let variants = include_str!("spec/model/expect.rs");
    let start = variants.find("pub enum Verdict {").expect("enum Verdict");
    let body = &variants[start..start + variants[start..].find("\n}").expect("its end")];
    let count = body
        .lines()
        .map(str::trim)
        .filter(|l| l.ends_with(',') && !l.starts_with("//"))
        .count();
    assert_eq!(count, documented.len(), "Verdict's variants vs docs/cli.md");
}

/// The runtime's sources (`runtime/src/`, in folders by concern: crate::runtime::FILES).
fn runtime_sources() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = crate::runtime::FILES
        .iter()
        .filter(|f| f.source_path.starts_with("runtime/src/"))
        .map(|f| root().join("crates/repro-contract").join(f.source_path))
        .collect();
    files.sort();
    files
}

/// The class names the runtime writes: each `{"name", evidence}` a classifier returns
/// (`return {"x", ...}`, `Pattern{"x", ...}`) and each class that `fatal`, `conclude` and
/// `write_json_report` are given as a literal. trace.cuh's stages are no classes (they go to
/// `trace_stage`).
fn classes_in_runtime() -> BTreeSet<String> {
    let literal_after = |text: &str, at: usize| -> Option<String> {
        let rest = &text[at..];
        let open = rest.find('"')?;
        if rest[..open].contains([';', ')', '{', ',']) {
            return None;
        }
        let name = &rest[open + 1..open + 1 + rest[open + 1..].find('"')?];
        (!name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .then(|| name.to_string())
    };
    let mut names = BTreeSet::new();
    for path in runtime_sources() {
        if path.file_name().is_some_and(|n| n == "trace.cuh") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("runtime source");
        for opener in ["return {", "Pattern{"] {
            for (at, _) in text.match_indices(opener) {
                names.extend(literal_after(&text, at + opener.len()));
            }
        }
        // The class is the argument after the exit code (`fatal(kExitHang, "hang", ...)`);
        // write_json_report's comes after the disposition.
        for (call, commas) in [("fatal(", 1), ("conclude(", 1), ("write_json_report(", 2)] {
            for (at, _) in text.match_indices(call) {
                let args = &text[at + call.len()..];
                let mut start = Some(0);
                for _ in 0..commas {
                    start = start.and_then(|s| {
                        let comma = args[s..].find(',')?;
                        (!args[s..s + comma].contains([';', ')'])).then_some(s + comma + 1)
                    });
                }
                if let Some(start) = start {
                    names.extend(literal_after(&text, at + call.len() + start));
                }
            }
        }
    }
    names
}

/// Every class the runtime can write is a [`Class`] (of the harness's: `sanitizer` and `race`
/// are repro's own), and every verdict class is one the runtime writes.
#[test]
fn the_runtimes_classes_are_the_enums() {
    let written = classes_in_runtime();
    for name in &written {
        let class = Class::parse(name)
            .unwrap_or_else(|| panic!("the runtime writes class `{name}`, which Class lacks"));
        assert!(
            !matches!(class, Class::Sanitizer | Class::Race),
            "`{name}` is repro's"
        );
    }
    for name in verdict_names_in_docs() {
        assert!(
            written.contains(&name),
            "no runtime source writes class `{name}`"
        );
    }
    for name in ["reference", "no_device", "timed", "hang", "fault", "ok"] {
        assert!(written.contains(name), "{name} not found: {written:?}");
    }
}

#[test]
fn a_run_without_a_disposition_line_is_ok_or_a_fault_by_its_exit_code() {
    assert_eq!(run_class(1, "x\nDisposition: Failed (scale)\n"), "scale");
    assert_eq!(run_class(0, "Disposition: Passed\n"), "ok");
    assert_eq!(run_class(0, "no line\n"), "ok");
    assert_eq!(run_class(4, "no line\n"), "fault");
    assert_eq!(run_class(7, "Disposition: Not run (no_device)\n"), "fault");
}

#[test]
fn the_evidence_line_prefers_the_pattern_then_a_fault_then_the_comparison() {
    let run = "D       relL2 1.0e+00  max_abs 64  ratio 2.0000  bad 4/4\n\
               pattern scale: every output is 2.000x the reference\n\
               Disposition: Failed (scale)\n";
    assert_eq!(
        evidence_line(run),
        "pattern scale: every output is 2.000x the reference"
    );
    let fault = "D  relL2 0\nfault: illegal address\nDisposition: Failed (fault)\n";
    assert_eq!(evidence_line(fault), "fault: illegal address");
    assert_eq!(
        evidence_line("D       relL2 0.000e+00  bad 0/4\nDisposition: Passed\n"),
        "D relL2 0.000e+00 bad 0/4"
    );
    assert_eq!(evidence_line("Disposition: Passed\n"), "");
}

/// Every report in the fixtures folder reads, those scripts/gpu-report-fixtures.sh adds
/// (`gpu-*.json`) included.
#[test]
fn every_report_in_the_fixtures_folder_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|x| x == "json") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let report = fixture(&name);
            assert!(
                Class::parse(&report.class).is_some(),
                "{name}: {}",
                report.class
            );
            read += 1;
        }
    }
    assert!(read >= 9, "{read} reports in {}", dir.display());
}

#[test]
fn repros_own_disposition_lines_are_the_harness_form() {
    assert_eq!(
        Disposition::failed("race").line(),
        "Disposition: Failed (race)"
    );
    assert_eq!(
        Disposition::from_line(&Disposition::not_run("build failed").line()),
        Some(Disposition::NotRun("build failed".into()))
    );
}
