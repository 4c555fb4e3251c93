//! `repro campaign` end to end. With a stand-in nvcc whose "harness" answers by its `--size`
//! options (M = 129 fails as `unwritten`, M = 7 hangs as the watchdog reports it, anything else
//! passes), and whose compile fails for a variant's flag: every run is recorded once, a failing
//! build does not stop the others, a second campaign runs nothing, a killed one (its last
//! records cut, a half-written line) runs exactly what is missing, a GPU held by another
//! campaign is refused, a machine without a GPU records nothing and says so. With the real
//! nvcc: the example campaign and a shape-specialized kernel's per-shape builds compile.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

use crate::common;

/// An nvcc stand-in: compiles fail when `-DSTANDIN_BROKEN` is among the flags; a harness
/// compile writes a script that logs each run to LOG and answers by the run's options, alone or
/// in a queue of runs.
fn stand_in_nvcc(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let harness = r#"#!/bin/sh
# One run: logs it, prints its report, and sets code, class and disposition.
answer() {
  echo "$1 CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >> 'LOG'
  [ -n "$STANDIN_RUN_SECONDS" ] && sleep "$STANDIN_RUN_SECONDS"
  if [ -n "$STANDIN_NO_GPU" ]; then
    echo 'no CUDA device available: no device is visible'; echo 'Disposition: Not run (no_device)'
    code=7; class=no_device; disposition='not run'; return
  fi
  case " $1 " in
    *" M=129 "*) echo 'D       relL2 4.1e-01  bad 33/561'; echo 'pattern unwritten: rows 128..128 never written'; echo 'Disposition: Failed (unwritten)'
      code=1; class=unwritten; disposition=failed; return;;
    *" M=7 "*) echo 'hang: the kernel did not finish within 10 s'; echo 'Disposition: Failed (hang)'
      code=5; class=hang; disposition=failed; return;;
    *" M=3 "*) echo $$ > "$STANDIN_PID_FILE"; exec sleep 60;;
  esac
  echo 'D       relL2 0.000e+00  bad 0/561'
  echo 'Disposition: Passed'
  code=0; class=ok; disposition=passed
}
# A queue of runs on standard input (repro holds the harness open: --queue - --json FILE), as
# the real harness speaks it: a line per run, its report a JSON line, a hang or no device ending
# the process.
if [ "$1" = --queue ]; then
  json=$4; : > "$json"; n=0
  while IFS= read -r line; do
    echo "queue   check $((n + 1)): $line"
    answer "$(printf '%s' "$line" | tr '\t' ' ')"
    printf '{"check":%d,"disposition":"%s","class":"%s","exit_code":%d,"message":""}\n' $n "$disposition" "$class" $code >> "$json"
    case $code in 0|1) ;; *) exit $code;; esac
    n=$((n + 1))
    echo "queue   end of check $n"
  done
  exit 0
fi
answer "$*"
exit $code
"#;
    let script = format!(
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release 0.0, V0.0.0 (campaign stand-in)'; exit 0; fi
out=; dep=; prev=; harness=
for a in "$@"; do
  case "$prev" in -o) out=$a;; -MF) dep=$a;; esac
  case "$a" in harness.cu) harness=1;; -DSTANDIN_BROKEN) echo 'harness.cu(12): error: the stand-in refuses this variant' >&2; exit 2;; esac
  prev=$a
done
if [ -z "$harness" ]; then echo placeholder > "$out"; exit 0; fi
cat > "$out" <<'HARNESS'
{harness}HARNESS
chmod +x "$out"
[ -n "$dep" ] && echo "$out: harness.cu" > "$dep"
exit 0
"#
    );
    let path = dir.join("nvcc-campaign");
    std::fs::write(&path, script.replace("LOG", &log.display().to_string())).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const CAMPAIGN: &str = r#"version: 1
name: small_check
specs:
  - spec: small_gemm.yaml
    sizes: { M: [1, 129, 7], N: [17] }
    modes: [ones, random]
    variants:
      - name: broken
        add_flags: [-DSTANDIN_BROKEN]
"#;

/// A temporary folder with the small spec, CAMPAIGN as campaign.yaml and the nvcc stand-in,
/// whose harnesses log their runs to `log`.
pub(crate) struct Setup {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) nvcc: PathBuf,
    pub(crate) log: PathBuf,
}

pub(crate) fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    common::write_small_spec(&root);
    std::fs::write(root.join("campaign.yaml"), CAMPAIGN).unwrap();
    let log = root.join("runs.log");
    let nvcc = stand_in_nvcc(&root, &log);
    Setup {
        _tmp: tmp,
        root,
        nvcc,
        log,
    }
}

fn campaign(s: &Setup, extra: &[&str]) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(&s.root)
        .env("REPRO_CACHE_DIR", s.root.join("cache"))
        .env("REPRO_GPU_LOCK_DIR", s.root.join("locks"))
        .env_remove("STANDIN_NO_GPU")
        .args([
            "campaign",
            "campaign.yaml",
            "-o",
            "results",
            "--devices",
            "0",
            "--nvcc",
        ])
        .arg(&s.nvcc)
        .args(extra);
    cmd
}

fn records(s: &Setup) -> Vec<serde_json::Value> {
    std::fs::read_to_string(s.root.join("results/results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn harness_runs(s: &Setup) -> usize {
    std::fs::read_to_string(&s.log).map_or(0, |t| t.lines().count())
}

#[test]
fn every_run_is_recorded_once_and_a_killed_campaign_resumes() {
    let s = setup();
    let out = campaign(&s, &[]).assert().code(1).get_output().clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = records(&s);
    assert_eq!(all.len(), 12, "{stdout}");
    let verdict = |key: &str| -> String {
        all.iter()
            .find(|r| r["key"] == key)
            .map(|r| r["verdict"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no record {key}"))
    };
    assert_eq!(verdict("small_gemm/default/M=1,N=17,K=9/ones"), "ok");
    assert_eq!(
        verdict("small_gemm/default/M=129,N=17,K=9/random"),
        "unwritten"
    );
    assert_eq!(verdict("small_gemm/default/M=7,N=17,K=9/ones"), "hang");
    assert_eq!(
        verdict("small_gemm/broken/M=1,N=17,K=9/ones"),
        "build_failed"
    );
    let failed_build = all.iter().find(|r| r["verdict"] == "build_failed").unwrap();
    assert_eq!(failed_build["code"], 3);
    assert!(failed_build["evidence"]
        .as_str()
        .unwrap()
        .contains("the stand-in refuses this variant"));
    let passed = all.iter().find(|r| r["verdict"] == "ok").unwrap();
    assert_eq!(passed["worker"], "GPU 0");
    assert_eq!(
        passed["sizes"],
        serde_json::json!({"M": 1, "N": 17, "K": 9})
    );
    assert!(passed["started"].as_str().unwrap().ends_with('Z'));
    // The broken variant's runs never started; the default's six did, each once, with its GPU.
    assert_eq!(harness_runs(&s), 6);
    // Failures first, the most frequent first; passes after.
    let table: Vec<&str> = stdout.lines().collect();
    let row = |label: &str| table.iter().position(|l| l.trim_start().starts_with(label));
    assert!(
        row("FAIL build_failed").unwrap() < row("pass").unwrap(),
        "{stdout}"
    );
    assert!(
        row("FAIL unwritten").unwrap() < row("pass").unwrap(),
        "{stdout}"
    );
    assert!(
        stdout.contains("campaign small_check: 12 runs: 2 pass, 10 fail"),
        "{stdout}"
    );
    assert!(s.root.join("results/summary.txt").is_file());
    // Where the failures sit among the shapes: M = 129 fails, M = 7 hangs, M = 1 passes.
    assert!(
        stdout.contains("shape map small_gemm default ones: M down\n  M=1    .\n  M=7    a\n  M=129  b\n  a hang (1), b unwritten (1), . pass\n"),
        "{stdout}"
    );
    assert!(s
        .root
        .join("results/maps/small_gemm__default__ones.png")
        .is_file());

    // Everything recorded: nothing runs again.
    let out = campaign(&s, &[]).assert().code(1).get_output().clone();
    assert!(String::from_utf8_lossy(&out.stdout).contains("every run is recorded"));
    assert_eq!(harness_runs(&s), 6);

    // Killed mid-way: the last two records never written, the one before cut in half.
    let path = s.root.join("results/results.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[..lines.len() - 3].join("\n");
    let cut = &lines[lines.len() - 3][..40];
    std::fs::write(&path, format!("{kept}\n{cut}")).unwrap();
    let missing = lines.len() - kept.lines().count();
    let before = harness_runs(&s);
    let out = campaign(&s, &[]).assert().code(1).get_output().clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped a line that is not a run record"),
        "{stderr}"
    );
    let rerun_builds = lines[lines.len() - 3..]
        .iter()
        .filter(|l| l.contains("build_failed"))
        .count();
    assert_eq!(harness_runs(&s) - before, missing - rerun_builds);
    let latest: std::collections::HashSet<String> = records(&s)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(latest.len(), 12);
}

#[test]
fn a_gpu_another_campaign_holds_is_refused_and_no_gpu_records_nothing() {
    let s = setup();
    // Another campaign holds GPU 0 (a lock taken the way repro takes it).
    let locks = s.root.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let held = std::fs::File::create(locks.join("0.lock")).unwrap();
    std::fs::write(locks.join("0.lock"), "campaign other (pid 1)").unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let out = campaign(&s, &[]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("GPU 0 (not listed: nvidia-smi found no GPU) is held by another repro campaign (campaign other (pid 1))"),
        "{stderr}"
    );
    assert_eq!(harness_runs(&s), 0);
    // Sharing it on purpose works.
    campaign(&s, &["--share-devices"]).assert().code(1);
    drop(held);

    let s = setup();
    let out = campaign(&s, &[])
        .env("STANDIN_NO_GPU", "1")
        .assert()
        .code(7)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no usable CUDA device: the builds are done"),
        "{stderr}"
    );
    // Only the failed builds are recorded: a run without a GPU says nothing about the kernel.
    assert!(records(&s).iter().all(|r| r["verdict"] == "build_failed"));
    // On a machine with one, the campaign resumes and runs them.
    campaign(&s, &[]).assert().code(1);
    assert_eq!(records(&s).len(), 12);
}

/// What `repro campaign FILE` says on stderr when it refuses FILE (exit 2).
fn refused(s: &Setup, file: &str) -> String {
    let out = Command::cargo_bin("repro")
        .unwrap()
        .current_dir(&s.root)
        .args(["campaign", file])
        .assert()
        .code(2)
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn campaign_file_errors_point_at_the_line() {
    let s = setup();
    let bad = CAMPAIGN
        .replace(
            "sizes: { M: [1, 129, 7], N: [17] }",
            "sizes: { M: [1, 129, 7], Q: [17] }",
        )
        .replace("modes: [ones, random]", "modes: [ones, randon]");
    std::fs::write(s.root.join("typo.yaml"), bad).unwrap();
    let stderr = refused(&s, "typo.yaml");
    assert!(stderr.contains("typo.yaml:6:"), "{stderr}");
    assert!(stderr.contains("unknown variant `randon`"), "{stderr}");
    assert!(stderr.contains("did you mean `random`?"), "{stderr}");

    let fixed = CAMPAIGN.replace("N: [17] }", "Q: [17] }");
    std::fs::write(s.root.join("size.yaml"), fixed).unwrap();
    insta::assert_snapshot!(
        "campaign_unknown_size",
        refused(&s, "size.yaml").replace(&s.root.display().to_string(), "[TMP]")
    );

    let twice = format!(
        "{CAMPAIGN}  - spec: small_gemm.yaml\n    variants:\n      - name: broken\n        add_flags: [-O1]\n"
    );
    std::fs::write(s.root.join("twice.yaml"), twice).unwrap();
    let stderr = refused(&s, "twice.yaml");
    assert!(
        stderr.contains(
            "variant `broken` of spec `small_gemm` is defined differently in an earlier entry"
        ) && stderr.contains("twice.yaml:12:"),
        "{stderr}"
    );

    std::fs::write(s.root.join("shapes.csv"), "M,N\n1,17\n2,x\n").unwrap();
    let with_file = CAMPAIGN.replace(
        "sizes: { M: [1, 129, 7], N: [17] }",
        "shapes_file: shapes.csv",
    );
    std::fs::write(s.root.join("file.yaml"), with_file).unwrap();
    let stderr = refused(&s, "file.yaml");
    assert!(
        stderr.contains("shapes.csv:3: `N` is `x`, not an integer"),
        "{stderr}"
    );
}

/// The real nvcc: the example campaign (one build for 528 runs) and a shape-specialized kernel
/// (one build per shape) compile; without a GPU the campaign ends with exit 7 and records nothing.
#[test]
fn real_builds_one_per_instantiation() {
    let tmp = tempfile::tempdir().unwrap();
    let examples = common::repo().join("examples");
    let file = tmp.path().join("real.yaml");
    std::fs::write(
        &file,
        format!(
            "version: 1\nname: real\nspecs:\n  - spec: {}\n    shapes_file: {}\n    modes: [ones, random, probe]\n  - spec: {}\n    shapes: [{{M: 128, N: 256, K: 64}}, {{M: 64, N: 128, K: 128}}]\n",
            examples.join("tiled_gemm_bf16.yaml").display(),
            examples.join("campaigns/llama3_8b_shapes.csv").display(),
            examples.join("shape_specialized_gemm.yaml").display(),
        ),
    )
    .unwrap();
    let out = Command::cargo_bin("repro")
        .unwrap()
        .current_dir(tmp.path())
        .env("REPRO_GPU_LOCK_DIR", tmp.path().join("locks"))
        .args(["campaign", "real.yaml", "-o", "results", "--nvcc"])
        .arg(common::nvcc())
        .assert()
        .code(7)
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("campaign real: 532 runs, 0 recorded, 532 to run (3 builds)"),
        "{stdout}"
    );
    let builds = tmp.path().join("results/builds");
    for id in [
        "tiled_gemm_bf16__default",
        "shape_specialized_gemm__default__M128_N256_K64",
        "shape_specialized_gemm__default__M64_N128_K128",
    ] {
        assert!(builds.join(id).join("harness").is_file(), "{id} not built");
    }
    let spec = std::fs::read_to_string(
        builds.join("shape_specialized_gemm__default__M64_N128_K128/spec.yaml"),
    )
    .unwrap();
    assert!(spec.contains("M: 64") && spec.contains("K: 128"), "{spec}");
}

#[test]
fn a_killed_campaign_takes_its_running_harness_with_it() {
    let s = setup();
    std::fs::write(
        s.root.join("slow.yaml"),
        "version: 1\nname: slow\nspecs:\n  - spec: small_gemm.yaml\n    sizes: { M: [3] }\n    modes: [ones]\n",
    )
    .unwrap();
    let pid_file = s.root.join("harness.pid");
    let mut campaign = std::process::Command::new(assert_cmd::cargo::cargo_bin("repro"))
        .current_dir(&s.root)
        .env("REPRO_CACHE_DIR", s.root.join("cache"))
        .env("REPRO_GPU_LOCK_DIR", s.root.join("locks"))
        .env("STANDIN_PID_FILE", &pid_file)
        .args([
            "campaign",
            "slow.yaml",
            "-o",
            "results",
            "--devices",
            "0",
            "--nvcc",
        ])
        .arg(&s.nvcc)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let waited = std::time::Instant::now();
    let harness: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(waited.elapsed().as_secs() < 60, "the harness never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    campaign.kill().unwrap();
    campaign.wait().unwrap();
    let gone = std::time::Instant::now();
    // SAFETY: kill with signal 0 only asks whether the process exists.
    while unsafe { libc::kill(harness, 0) } == 0 {
        // A zombie of a reaped-late parent counts as gone.
        let state = std::fs::read_to_string(format!("/proc/{harness}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        assert!(
            gone.elapsed().as_secs() < 10,
            "harness {harness} outlived its campaign"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// An nvidia-smi stand-in listing two GPUs, on a PATH of its own before the real one.
fn two_gpus(s: &Setup) -> std::ffi::OsString {
    stand_in_smi(s, &["GPU-aaaa-0000", "GPU-bbbb-1111"])
}

/// An nvidia-smi stand-in listing a GPU per UUID (indices 0, 1, ... in that order, each a
/// "Stand-in GPU"), on a PATH of its own before the real one.
pub(crate) fn stand_in_smi(s: &Setup, uuids: &[&str]) -> std::ffi::OsString {
    use std::os::unix::fs::PermissionsExt;
    let bin = s.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    let lines: String = uuids
        .iter()
        .enumerate()
        .map(|(i, uuid)| format!("echo '{i}, {uuid}, Stand-in GPU'\n"))
        .collect();
    std::fs::write(&smi, format!("#!/bin/sh\n{lines}")).unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = std::ffi::OsString::from(bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

#[test]
fn all_gpus_get_a_worker_each_and_a_held_one_is_left_out() {
    let s = setup();
    let path = two_gpus(&s);
    let run = |results: &str| {
        let mut cmd = Command::cargo_bin("repro").unwrap();
        cmd.current_dir(&s.root)
            .env("PATH", &path)
            .env("REPRO_CACHE_DIR", s.root.join("cache"))
            .env("REPRO_GPU_LOCK_DIR", s.root.join("locks"))
            .env("STANDIN_RUN_SECONDS", "0.3")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .args(["campaign", "campaign.yaml", "-o", results, "--nvcc"])
            .arg(&s.nvcc);
        cmd.assert().code(1).get_output().clone()
    };
    let out = run("both");
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("2 workers on GPU 0 (Stand-in GPU), GPU 1 (Stand-in GPU)"));
    let log = std::fs::read_to_string(&s.log).unwrap();
    // Each run's harness was given its worker's GPU, by UUID, and both GPUs got runs.
    assert!(log.contains("CUDA_VISIBLE_DEVICES=GPU-aaaa-0000"), "{log}");
    assert!(log.contains("CUDA_VISIBLE_DEVICES=GPU-bbbb-1111"), "{log}");

    // GPU 0 held by another campaign: `all` runs on GPU 1 alone and says why.
    let locks = s.root.join("locks");
    let held = std::fs::File::create(locks.join("GPU-aaaa-0000.lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    std::fs::write(&s.log, "").unwrap();
    let out = run("one");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("campaign skips GPU 0 (Stand-in GPU) is held by another repro campaign"),
        "{stderr}"
    );
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert_eq!(log.lines().count(), 6);
    assert!(
        log.lines()
            .all(|l| l.ends_with("CUDA_VISIBLE_DEVICES=GPU-bbbb-1111")),
        "{log}"
    );
    drop(held);
}

/// An sbatch stand-in that runs the array's tasks itself, one after another, in `--chdir`, as
/// Slurm would on its nodes, and prints a job id.
fn stand_in_sbatch(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("sbatch");
    std::fs::write(
        &path,
        r#"#!/bin/sh
last=; chdir=.; array=
for a in "$@"; do
  case "$a" in --chdir=*) chdir=${a#--chdir=};; --array=*) array=${a#--array=0-};; esac
  last=$a
done
i=0
while [ "$i" -le "$array" ]; do
  (cd "$chdir" && SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_JOB_ID=4242 sh "$last") >/dev/null 2>&1
  i=$((i + 1))
done
echo 4242
"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A Slurm campaign: built here, its runs run by the array's tasks into shards/, and collected
/// into results.jsonl. A submission folder planted as a link (dangling, so that it looks free)
/// is passed over, never written through.
#[test]
fn a_slurm_campaign_is_submitted_run_and_collected() {
    let s = setup();
    let outside = s.root.join("outside");
    std::fs::create_dir_all(s.root.join("results/slurm")).unwrap();
    std::os::unix::fs::symlink(&outside, s.root.join("results/slurm/submission-1")).unwrap();
    let sbatch = stand_in_sbatch(&s.root);
    let out = campaign(&s, &["--slurm", "--shards", "2", "--sbatch"])
        .arg(&sbatch)
        .assert()
        .code(0)
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("submitted job array 4242: 2 tasks, 6 runs"),
        "{stdout}"
    );
    assert!(!outside.exists(), "a plan was written through the link");
    assert!(s
        .root
        .join("results/slurm/submission-2/plan.json")
        .is_file());
    let out = Command::cargo_bin("repro")
        .unwrap()
        .current_dir(&s.root)
        .args(["campaign", "--collect", "results"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("collect 6 new records from 2 shard files"),
        "{stdout}"
    );
    assert_eq!(records(&s).len(), 12, "{stdout}");
    assert!(records(&s).iter().any(|r| r["worker"] == "slurm"));
}
