//! The async-race checker's kernels of issue 62 build through the checker's nvcc (the PTX
//! rewritten between cicc and ptxas, which ptxas must accept) and their site tables show what
//! each was written to exercise: DeepGEMM's pipeline (wgmma from swizzled descriptors, one empty
//! arrival per math warp, the f32 tile written with st.shared.v2.f32) and the three orders of the
//! tensor-map rewrite, which differ only in the drain (commit_group + wait_group.read). The GPU
//! checks are scripts/gpu-async-race.sh's; here the run stops at "no device" (exit 7).

use crate::common;

use assert_cmd::Command;
use repro::async_race::ptx::Site;

/// `repro run SPEC --sanitize async-race --ones` without a GPU, and the site table it built.
fn instrumented_sites(example: &str) -> Vec<Site> {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    let spec = common::repo()
        .join("examples")
        .join(format!("{example}.yaml"));
    let output = Command::cargo_bin("repro")
        .unwrap()
        .args(["run", "--sanitize", "async-race", "--ones", "-o"])
        .arg(&out)
        .arg("--nvcc")
        .arg(common::nvcc())
        .arg(&spec)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(7),
        "{example}: built, then no device:\n{stderr}"
    );
    assert!(stderr.contains("instrumented for async-race"), "{stderr}");
    let mut sites = Vec::new();
    for entry in std::fs::read_dir(out.join(".repro/build/async-race-sites")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        sites.extend(serde_json::from_str::<Vec<Site>>(&text).unwrap());
    }
    sites
}

/// The sites whose instruction starts with `prefix` and whose innermost source line is in `file`.
fn count(sites: &[Site], prefix: &str, file: &str) -> usize {
    sites
        .iter()
        .filter(|s| s.instruction.starts_with(prefix))
        .filter(|s| {
            s.locations
                .first()
                .is_some_and(|l| l.file.ends_with(file) && l.line > 0)
        })
        .count()
}

#[test]
fn the_deepgemm_shaped_pipeline_builds_instrumented() {
    let sites = instrumented_sites("async_race_aligned_pipeline");
    for (prefix, file) in [
        (
            "wgmma.mma_async.sync.aligned.m64n136k16",
            "aligned_pipeline.cuh",
        ),
        ("wgmma.wait_group", "aligned_pipeline.cuh"),
        // The one arrival per math warp on the stage's empty barrier (lane 0 after wait_group).
        ("mbarrier.arrive.shared::cta", "aligned_pipeline.cuh"),
        // The epilogue's f32 tile, as DeepGEMM's ld_st.cuh writes it.
        ("st.shared.v2.f32", "aligned_pipeline.cuh"),
        (
            "cp.async.bulk.tensor.2d.shared::cluster.global",
            "tma_gemm.cuh",
        ),
        (
            "cp.async.bulk.tensor.2d.global.shared::cta",
            "persistent_tma_store.cuh",
        ),
    ] {
        assert!(
            count(&sites, prefix, file) > 0,
            "no {prefix} site in {file}: {sites:#?}"
        );
    }
}

#[test]
fn the_tensor_map_rewrites_differ_only_in_their_drain() {
    // The drain is one more commit_group and wait_group.read (tensormap_rewrite.cuh's
    // drain_tma_operations, through persistent_tma_store.cuh's wrappers) beside the epilogue's own.
    let drains = |example: &str| {
        let sites = instrumented_sites(example);
        assert!(
            count(
                &sites,
                "cp.async.bulk.tensor.3d.global.shared::cta",
                "aligned_pipeline.cuh"
            ) > 0,
            "{example}: no 3-D TMA store: {sites:#?}"
        );
        (
            count(
                &sites,
                "cp.async.bulk.commit_group",
                "persistent_tma_store.cuh",
            ),
            count(
                &sites,
                "cp.async.bulk.wait_group.read",
                "persistent_tma_store.cuh",
            ),
        )
    };
    let no_drain = drains("tensormap_rewrite_no_drain");
    assert_eq!(no_drain, (1, 1), "the epilogue's store only");
    assert_eq!(drains("tensormap_rewrite_drained"), (2, 2));
    assert_eq!(drains("tensormap_rewrite_same_group"), (2, 2));
}
