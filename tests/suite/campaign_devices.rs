//! `repro campaign` across several GPUs, without any: an nvidia-smi stand-in lists a pool of
//! four and the nvcc stand-in's harness logs each run with the `CUDA_VISIBLE_DEVICES` it was
//! given (tests/suite/campaign.rs). `--devices all` puts a worker on each GPU, every one of them
//! still running near the end, with the same verdicts as one GPU gives; `CUDA_VISIBLE_DEVICES`
//! set when the campaign starts confines it, each harness seeing one GPU; `--devices 1,3` runs
//! on those two. Nothing here measures how a campaign scales on real GPUs.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;

use assert_cmd::Command;

use crate::campaign::{setup, stand_in_smi, Setup};

const POOL: [&str; 4] = [
    "GPU-aaaa-0000",
    "GPU-bbbb-1111",
    "GPU-cccc-2222",
    "GPU-dddd-3333",
];

/// 32 runs of one build: M = 7 hangs (its harness process ends and a fresh one goes on),
/// M = 129 fails as `unwritten`, the rest pass.
const CAMPAIGN: &str = r#"version: 1
name: pool
specs:
  - spec: small_gemm.yaml
    sizes: { M: [1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 129], N: [17] }
    modes: [ones, random]
"#;
const RUNS: usize = 32;

/// The pool, its campaign file and a fresh log.
fn pool() -> (Setup, OsString) {
    let s = setup();
    std::fs::write(s.root.join("pool.yaml"), CAMPAIGN).unwrap();
    let path = stand_in_smi(&s, &POOL);
    (s, path)
}

/// `repro campaign pool.yaml -o RESULTS --devices DEVICES` on the pool, each stand-in run taking
/// `seconds`, started without `CUDA_VISIBLE_DEVICES` unless the caller sets it.
fn campaign(s: &Setup, path: &OsString, results: &str, devices: &str, seconds: &str) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(&s.root)
        .env("PATH", path)
        .env("REPRO_CACHE_DIR", s.root.join("cache"))
        .env("REPRO_GPU_LOCK_DIR", s.root.join("locks"))
        .env("STANDIN_RUN_SECONDS", seconds)
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("REPRO_CAMPAIGN_BATCH")
        .env_remove("STANDIN_NO_GPU")
        .args(["campaign", "pool.yaml", "-o", results, "--devices", devices])
        .arg("--nvcc")
        .arg(&s.nvcc);
    cmd
}

/// Each logged run's `CUDA_VISIBLE_DEVICES`, in the order the runs started; the log emptied.
fn runs_by_gpu(s: &Setup) -> Vec<String> {
    let log = std::fs::read_to_string(&s.log).unwrap_or_default();
    std::fs::write(&s.log, "").unwrap();
    log.lines()
        .map(|l| {
            let (_, gpu) = l
                .rsplit_once("CUDA_VISIBLE_DEVICES=")
                .unwrap_or_else(|| panic!("a log line without its GPU: {l}"));
            gpu.to_string()
        })
        .collect()
}

/// Each recorded run's verdict, by key, with the worker that ran it.
fn verdicts(s: &Setup, results: &str) -> BTreeMap<String, (String, String)> {
    std::fs::read_to_string(s.root.join(results).join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| {
            let field = |name: &str| r[name].as_str().unwrap().to_string();
            (field("key"), (field("verdict"), field("worker")))
        })
        .collect()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_pool_of_four_gpus_is_all_used_to_the_end() {
    let (s, path) = pool();
    let out = campaign(&s, &path, "pool", "all", "0.15")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = stdout(&out);
    assert!(
        stdout.contains("campaign 4 workers on GPU 0 (Stand-in GPU), GPU 1 (Stand-in GPU), GPU 2 (Stand-in GPU), GPU 3 (Stand-in GPU)"),
        "{stdout}"
    );
    let started = runs_by_gpu(&s);
    assert_eq!(started.len(), RUNS, "{started:?}");
    assert!(
        started.iter().all(|gpu| POOL.contains(&gpu.as_str())),
        "{started:?}"
    );
    // Every GPU ran runs up to the end: each is among the last quarter of the runs started. A
    // worker that took more than its share (or everything) would run the last ones alone.
    let last: BTreeSet<&str> = started[RUNS - RUNS / 4..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        last,
        BTreeSet::from(POOL),
        "runs in the order they started: {started:?}"
    );

    // One GPU gives the same verdicts for the same runs.
    campaign(&s, &path, "one", "0", "0").assert().code(1);
    let pool = verdicts(&s, "pool");
    let one = verdicts(&s, "one");
    assert_eq!(pool.len(), RUNS);
    let verdicts_only = |v: &BTreeMap<String, (String, String)>| -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, (verdict, _))| (k.clone(), verdict.clone()))
            .collect()
    };
    assert_eq!(verdicts_only(&pool), verdicts_only(&one));
    assert_eq!(
        pool["small_gemm/default/M=7,N=17,K=9/random"].0, "hang",
        "{pool:?}"
    );
    assert!(one.values().all(|(_, worker)| worker == "GPU 0"));
    let workers: BTreeSet<&str> = pool.values().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        workers,
        BTreeSet::from(["GPU 0", "GPU 1", "GPU 2", "GPU 3"])
    );
}

#[test]
fn cuda_visible_devices_confines_the_pool_and_each_harness_sees_one_gpu() {
    let (s, path) = pool();
    // A UUID and an index, as CUDA reads them: GPU 2, then GPU 1.
    let out = campaign(&s, &path, "visible", "all", "0.05")
        .env("CUDA_VISIBLE_DEVICES", "GPU-cccc-2222,1")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = stdout(&out);
    assert!(
        stdout.contains("campaign 2 workers on GPU 2 (Stand-in GPU), GPU 1 (Stand-in GPU),"),
        "{stdout}"
    );
    let started = runs_by_gpu(&s);
    assert_eq!(started.len(), RUNS);
    // Each harness was given one GPU, by UUID, of the two; both ran runs.
    let used: BTreeSet<&str> = started.iter().map(String::as_str).collect();
    assert_eq!(
        used,
        BTreeSet::from(["GPU-bbbb-1111", "GPU-cccc-2222"]),
        "{started:?}"
    );
    let workers: BTreeSet<String> = verdicts(&s, "visible")
        .into_values()
        .map(|(_, w)| w)
        .collect();
    assert_eq!(
        workers,
        BTreeSet::from(["GPU 1".to_string(), "GPU 2".to_string()])
    );
}

#[test]
fn devices_named_are_the_devices_used() {
    let (s, path) = pool();
    let out = campaign(&s, &path, "named", "1,3", "0.05")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = stdout(&out);
    assert!(
        stdout.contains("campaign 2 workers on GPU 1 (Stand-in GPU), GPU 3 (Stand-in GPU),"),
        "{stdout}"
    );
    let used: BTreeSet<String> = runs_by_gpu(&s).into_iter().collect();
    assert_eq!(
        used,
        BTreeSet::from(["GPU-bbbb-1111".to_string(), "GPU-dddd-3333".to_string()])
    );
}
