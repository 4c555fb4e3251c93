//! The queue runner (crates/repro-engine/src/run/queue.rs) against a stand-in harness that
//! speaks the `--queue` protocol (markers, one JSON line per check) and ends its process the ways
//! a real one does: a fault with its report written, a crash without one, a hang, no device. The
//! real harness's side is checked on the GPU (scripts/gpu-queue.sh); here, what repro makes of
//! each ending: every check recorded once, in order, with its class, and the rest of the queue
//! run by a fresh process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use repro::run::queue::{run_queue, CheckOutcome, Flow};

/// A harness that reads its queue from standard input (`--queue -`, as repro holds it) and runs
/// each line by its first word: `pass`, `fail` (a mismatch),
/// `fault` (fatal: its report, then exit 4), `crash` (killed by a signal, no report), `hang`
/// (sleeps past any limit), `nodevice`, `taint` (passes, then says its context holds an error),
/// `held` (a check whose host cross-check the real harness judges while the next check runs: its
/// disposition and end line wait for the next check's line, and it fails as `not_sent_ahead`
/// when that line does not come within 5 s).
fn stand_in_harness(dir: &Path) -> PathBuf {
    let path = dir.join("harness");
    std::fs::write(
        &path,
        r#"#!/usr/bin/env bash
queue= json=
while [[ $# -gt 0 ]]; do
  case $1 in --queue) queue=$2; shift 2;; --json) json=$2; shift 2;; *) shift;; esac
done
[[ $queue == - ]] || exit 2
echo started >> "$(dirname "$0")/processes"
: > "$json"
report() { printf '{"check":%d,"name":"x","disposition":"%s","class":"%s","exit_code":%d,"message":""}\n' "$1" "$2" "$3" "$4" >> "$json"; }
i=0 pending= have_pending=
while true; do
  if [[ -n $have_pending ]]; then line=$pending have_pending=; else IFS= read -r line || break; fi
  word=${line%%$'\t'*}
  echo "queue   check $((i + 1)): $line"
  echo "D       relL2 0.000e+00  max_abs 0  ratio 1.0000  bad 0/4  nan 0  unwritten 0"
  case $word in
    pass|taint) echo "Disposition: Passed"; report "$i" passed ok 0;;
    held)
      echo "ref     fp64 device GEMM ...; host cross-check of its outputs: ... judged below"
      if IFS= read -r -t 5 pending; then
        have_pending=1
        echo "ref     host cross-check of 4096 outputs, judged while the next check ran"
        echo "Disposition: Passed"; report "$i" passed ok 0
      else
        echo "Disposition: Failed (not_sent_ahead)"; report "$i" failed not_sent_ahead 1
      fi;;
    fail) echo "pattern row_mapping: rows 1-2 wrong"; echo "Disposition: Failed (row_mapping)"; report "$i" failed row_mapping 1;;
    fault) echo "device fault: an illegal address"; echo "Disposition: Failed (fault)"; report "$i" failed fault 4; exit 4;;
    crash) kill -SEGV $$;;
    hang) sleep 30;;
    nodevice) echo "Disposition: Not run (no_device)"; report "$i" "not run" no_device 7; exit 7;;
  esac
  if [[ $word == taint ]]; then
    echo "queue   the context holds an error after check $((i + 1)): cudaErrorIllegalAddress (an illegal memory access)"
    exit 4
  fi
  echo "queue   end of check $((i + 1))"
  i=$((i + 1))
done
echo "queue   $i checks"
exit 0
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn run(words: &[&str], limit: Duration) -> (Vec<CheckOutcome>, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let harness = stand_in_harness(dir.path());
    let checks: Vec<Vec<String>> = words
        .iter()
        .map(|w| vec![w.to_string(), "--size".into(), "M=8".into()])
        .collect();
    let mut seen = Vec::new();
    let stats = run_queue(
        &harness,
        &[],
        &checks,
        limit,
        &dir.path().join("work"),
        &|_| {},
        |check| {
            seen.push(check);
            Flow::Continue
        },
    )
    .unwrap();
    let processes = std::fs::read_to_string(dir.path().join("processes"))
        .unwrap()
        .lines()
        .count();
    let left = std::fs::read_dir(dir.path().join("work")).unwrap().count();
    // (the session's report file goes when the session does)
    assert_eq!(stats.processes, processes);
    (seen, processes, left)
}

fn classes(seen: &[CheckOutcome]) -> Vec<(usize, String, u8)> {
    seen.iter()
        .map(|c| (c.index, c.outcome.class.clone(), c.outcome.code))
        .collect()
}

#[test]
fn a_queue_that_ends_well_takes_one_process() {
    let (seen, processes, left) = run(&["pass", "fail", "pass"], Duration::from_secs(20));
    assert_eq!(
        classes(&seen),
        [
            (0, "ok".to_string(), 0),
            (1, "row_mapping".to_string(), 1),
            (2, "ok".to_string(), 0)
        ]
    );
    assert_eq!(
        seen[1].outcome.evidence,
        "pattern row_mapping: rows 1-2 wrong"
    );
    assert!(seen.iter().all(|c| c.report.is_some()));
    assert_eq!(processes, 1);
    assert_eq!(left, 0, "the queue's files are removed");
}

#[test]
fn every_way_a_process_ends_is_recorded_and_the_rest_runs_in_a_fresh_one() {
    let (seen, processes, _) = run(
        &["pass", "fault", "pass", "crash", "pass", "taint", "pass"],
        Duration::from_secs(20),
    );
    assert_eq!(
        classes(&seen),
        [
            (0, "ok".to_string(), 0),
            (1, "fault".to_string(), 4),
            (2, "ok".to_string(), 0),
            (3, "fault".to_string(), 4),
            (4, "ok".to_string(), 0),
            (5, "fault".to_string(), 4),
            (6, "ok".to_string(), 0),
        ]
    );
    // The fault wrote its report; the crash could not; the tainted context is named.
    assert!(seen[1].report.is_some());
    assert!(seen[3].report.is_none());
    assert!(
        seen[3].outcome.evidence.contains("signal 11"),
        "{:?}",
        seen[3].outcome
    );
    assert!(
        seen[5]
            .outcome
            .evidence
            .contains("the context holds an error after check"),
        "{:?}",
        seen[5].outcome
    );
    assert_eq!(
        processes, 4,
        "one process, and a fresh one after each of three ends"
    );
}

/// The next check's line goes out before a check's result is read, so that the harness may
/// hold a check back until it has the next one to run; a check that ends its process takes the
/// line sent ahead with it, and the fresh process is sent it again.
#[test]
fn the_next_check_is_sent_before_the_last_ones_result() {
    let (seen, processes, _) = run(
        &["held", "held", "pass", "held", "fault", "held", "pass"],
        Duration::from_secs(20),
    );
    assert_eq!(
        classes(&seen),
        [
            (0, "ok".to_string(), 0),
            (1, "ok".to_string(), 0),
            (2, "ok".to_string(), 0),
            (3, "ok".to_string(), 0),
            (4, "fault".to_string(), 4),
            (5, "ok".to_string(), 0),
            (6, "ok".to_string(), 0),
        ]
    );
    assert!(
        seen[0].text.contains("judged while the next check ran"),
        "{}",
        seen[0].text
    );
    assert!(!seen[0].text.contains("queue   check"), "{}", seen[0].text);
    assert_eq!(processes, 2, "one process, and a fresh one after the fault");
}

#[test]
fn a_check_past_its_limit_is_a_hang_and_the_queue_goes_on() {
    let (seen, processes, _) = run(&["pass", "hang", "pass"], Duration::from_secs(2));
    assert_eq!(
        classes(&seen),
        [
            (0, "ok".to_string(), 0),
            (1, "hang".to_string(), 5),
            (2, "ok".to_string(), 0)
        ]
    );
    assert_eq!(processes, 2);
}

#[test]
fn no_device_ends_the_queue() {
    let (seen, processes, _) = run(&["nodevice", "pass", "pass"], Duration::from_secs(20));
    assert_eq!(classes(&seen), [(0, "no_device".to_string(), 7)]);
    assert_eq!(processes, 1);
}

#[test]
fn a_word_a_queue_cannot_carry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let harness = stand_in_harness(dir.path());
    let error = run_queue(
        &harness,
        &[],
        &[vec!["--init".into(), "A=file:a\tb.npy".into()]],
        Duration::from_secs(5),
        dir.path(),
        &|_| {},
        |_| Flow::Continue,
    )
    .unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("tab or a line break"), "{error}");
}

/// The real harness's side that needs no GPU: every line of a queue read and checked before the
/// first check (a bad one named by its line), and the first check's JSON line (with `check`)
/// written even when it finds no device.
#[test]
fn the_harness_reads_its_queue_before_any_check() {
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::write_small_spec(dir.path());
    let harness = crate::common::build_with_nvcc(&spec, &dir.path().join("artifact"));
    let queue = dir.path().join("queue.txt");
    let harness_run = |queue_text: &str| {
        std::fs::write(&queue, queue_text).unwrap();
        let json = dir.path().join("reports.jsonl");
        let output = std::process::Command::new(&harness)
            .arg("--queue")
            .arg(&queue)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            std::fs::read_to_string(&json).unwrap_or_default(),
        )
    };

    let (code, stdout, stderr, _) = harness_run("--ones\n# a comment\n--seed\tlots\n");
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("queue.txt line 3: --seed takes a number, not `lots`"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("queue   check"),
        "no check runs before every line is read"
    );

    let (code, _, stderr, _) = harness_run("--ones\n--json\tother.json\n");
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("line 2: --json belongs to the whole run"),
        "{stderr}"
    );

    let (code, _, stderr, _) = harness_run("--ones\n--size\tM=8\t\t--ones\n");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("line 2: an empty option"), "{stderr}");

    // From standard input each line is read when it comes, so a bad line ends the queue there.
    let output = std::process::Command::new(&harness)
        .args(["--queue", "-"])
        .stdin(
            std::fs::File::open({
                std::fs::write(&queue, "# nothing but a comment\n--seed\tlots\n").unwrap();
                &queue
            })
            .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--queue - line 2: --seed takes a number"),
        "{stderr}"
    );

    // This machine has no GPU: the first check ends the queue as `Not run`, its line written.
    let (code, stdout, _, json) = harness_run("--ones\n\n--seed\t3\n");
    assert_eq!(code, Some(7), "{stdout}");
    assert!(
        stdout.starts_with("queue   check 1 of 2: --ones\n"),
        "{stdout}"
    );
    let report =
        repro_contract::report::Report::from_json(json.lines().next().unwrap().as_bytes()).unwrap();
    assert_eq!(report.check, Some(0));
    assert_eq!(report.class, "no_device");
    assert_eq!(json.lines().count(), 1);
}
