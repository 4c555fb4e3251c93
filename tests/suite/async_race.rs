//! `repro run --sanitize async-race` without a GPU: the harness is built for real with the
//! checker's nvcc (the PTX rewritten between cicc and ptxas, which ptxas must accept), the site
//! table names the TMA, mbarrier, barrier and fence instructions of the kernel with their
//! source lines, and the run stops at "no device" like any other run (GPU checks:
//! scripts/gpu-async-race.sh).

use crate::common;

use assert_cmd::Command;

#[test]
fn a_tma_kernel_builds_instrumented_and_its_sites_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    let spec = common::repo().join("examples/async_race_no_proxy_fence.yaml");
    // repro run --sanitize async-race, with the hooks to leave out when given.
    let run = |skip: Option<&str>| {
        let mut command = Command::cargo_bin("repro").unwrap();
        command.env("REPRO_CACHE_DIR", tmp.path().join("cache"));
        if let Some(skip) = skip {
            command.env("REPRO_ASYNC_RACE_SKIP", skip);
        }
        command
            .args(["run", "--sanitize", "async-race", "--ones", "-o"])
            .arg(&out)
            .arg("--nvcc")
            .arg(common::nvcc())
            .arg(&spec)
            .output()
            .unwrap()
    };
    let output = run(None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(7),
        "built, then no device:\n{stderr}"
    );
    assert!(stderr.contains("instrumented for async-race"), "{stderr}");
    assert!(out.join(".repro/build/harness-async-race").is_file());
    // The production build is untouched by the checker's.
    assert!(!out.join("harness").exists());
    let mut sites = Vec::new();
    for entry in std::fs::read_dir(out.join(".repro/build/async-race-sites")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let list: Vec<repro::async_race::ptx::Site> = serde_json::from_str(&text).unwrap();
        sites.extend(list);
    }
    let has = |prefix: &str, file: &str| {
        sites.iter().any(|s| {
            s.instruction.starts_with(prefix)
                && s.locations
                    .iter()
                    .any(|l| l.file.ends_with(file) && l.line > 0)
        })
    };
    for (prefix, file) in [
        (
            "cp.async.bulk.tensor.2d.shared::cluster.global",
            "tma_gemm.cuh",
        ),
        (
            "cp.async.bulk.tensor.2d.global.shared::cta",
            "persistent_tma_store.cuh",
        ),
        ("cp.async.bulk.wait_group.read", "persistent_tma_store.cuh"),
        ("mbarrier.try_wait.parity", "tma_gemm.cuh"),
        ("mbarrier.arrive", "async_proxy_races.cuh"),
        ("bar.sync", "async_proxy_races.cuh"),
        ("ldmatrix", "async_proxy_races.cuh"),
        ("st.shared", "async_proxy_races.cuh"),
    ] {
        assert!(has(prefix, file), "no {prefix} site in {file}: {sites:#?}");
    }
    // The defect: the epilogue's proxy fence (persistent_tma_store.cuh's wrapper) is gone; the
    // only one left is tma_gemm.cuh's, after the barriers' initialization.
    let fences: Vec<&str> = sites
        .iter()
        .filter(|s| s.instruction.starts_with("fence.proxy.async"))
        .filter_map(|s| s.locations.first().map(|l| l.file.as_str()))
        .collect();
    assert!(!fences.is_empty());
    assert!(
        fences.iter().all(|f| f.ends_with("tma_gemm.cuh")),
        "{fences:?}"
    );

    // A diagnosis build that leaves hooks out (REPRO_ASYNC_RACE_SKIP) is a build of its own:
    // compiled again, without those sites, then answered by the cache.
    let skipped = run(Some("repro_race_access"));
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    assert_eq!(skipped.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("instrumented for async-race compiled"),
        "the skip list is part of the key: {stderr}"
    );
    let mut instructions = Vec::new();
    for entry in std::fs::read_dir(out.join(".repro/build/async-race-sites")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let list: Vec<repro::async_race::ptx::Site> = serde_json::from_str(&text).unwrap();
        instructions.extend(list.into_iter().map(|s| s.instruction));
    }
    assert!(instructions.iter().any(|i| i.starts_with("mbarrier.")));
    assert!(
        !instructions
            .iter()
            .any(|i| i.starts_with("st.shared") || i.starts_with("ldmatrix")),
        "{instructions:?}"
    );
    let again = run(Some("repro_race_access"));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!stderr.contains("compiled in"), "{stderr}");
}
