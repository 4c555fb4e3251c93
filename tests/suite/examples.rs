//! Every example in examples/: its committed artifact in generated/ is current, and its harness
//! compiles with the real nvcc for its arch (sm_90a) and runs as far as a machine without a GPU
//! allows: the generated inputs, then exit 7. The default suite compiles one example of each kind
//! (examples_to_compile); `REPRO_TEST_ALL=1`, as CI runs it, compiles every one.

use crate::common;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn example_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(common::repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 8, "examples/ should hold the kernels' specs");
    specs
}

#[test]
fn every_example_is_valid_and_named_after_its_file() {
    for path in example_specs() {
        let spec =
            repro::spec::load(&path, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Some(spec.name()),
            path.file_stem().and_then(|s| s.to_str()),
            "{}",
            path.display()
        );
        assert!(
            spec.expect.is_some(),
            "{} must say what it shows (`expect:`)",
            path.display()
        );
        // A [1, 1] tile (one block per output, e.g. a row reduction) has no partial tiles. A
        // custom op's block lies over its first output's last dimensions.
        let (extents, block) = match &spec.reference {
            repro::spec::Reference::Gemm(r) => (vec![r.m, r.n], vec![r.tile_m, r.tile_n]),
            other => {
                let out = spec.tensor(other.outputs()[0]);
                let block = other.block();
                (out.shape[out.shape.len() - block.len()..].to_vec(), block)
            }
        };
        // A block that is one output, or a whole extent (a block per row), has no partial blocks.
        assert!(
            block.iter().zip(&extents).all(|(&b, &e)| b == 1 || b == e)
                || extents.iter().zip(&block).any(|(e, b)| e % b != 0),
            "{}: sizes should not be block multiples",
            path.display()
        );
    }
}

#[test]
fn generated_artifacts_are_current() {
    let mut stale = Vec::new();
    for path in example_specs() {
        let spec = repro::spec::load(&path, &repro::machine::Machine).unwrap();
        let dir = common::repo().join("generated").join(spec.name());
        let plan = repro::plan::Plan::for_spec(spec, dir.clone()).unwrap();
        let artifact = plan.artifact.expect("a spec's plan has its files");
        // runtime/ is not committed: it is repro_contract::runtime::FILES (embedded by
        // include_str!), the same in every artifact, and `repro scaffold` writes it.
        for file in artifact
            .files
            .iter()
            .filter(|f| !f.name.starts_with("runtime/"))
        {
            let on_disk = std::fs::read_to_string(dir.join(file.name)).unwrap_or_default();
            if on_disk != file.content {
                stale.push(repro::generate::artifact::unified_diff(
                    &format!("generated/{}/{}", plan.spec.name(), file.name),
                    &on_disk,
                    &file.content,
                ));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated/ is stale; run scripts/regenerate.sh and commit the result:\n{}",
        stale.join("\n")
    );
}

/// Scaffolds and builds one example in `work`, checks what can be checked without a GPU.
fn build_and_check(spec_path: &Path, work: &Path) {
    let name = spec_path
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let dir = work.join(&name);
    let built = Command::cargo_bin("repro")
        .unwrap()
        .arg("build")
        .arg(spec_path)
        .arg("-o")
        .arg(&dir)
        .arg("--nvcc")
        .arg(common::nvcc())
        .assert()
        .success();
    // The instrument compiles without a warning under every example's production flags: the
    // runtime library with its own flags, and its headers inside harness.cu with the spec's.
    let output = built.get_output();
    let printed = String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
    let runtime_warnings: Vec<&str> = printed
        .lines()
        .filter(|l| l.contains("runtime/") && l.to_lowercase().contains("warning"))
        .collect();
    assert!(
        runtime_warnings.is_empty(),
        "{name}: the runtime warns:\n{}",
        runtime_warnings.join("\n")
    );
    let harness = dir.join("harness");
    assert!(harness.is_file(), "{name}: no harness binary");

    // Inputs are generated on the host, before any CUDA call: they must be repro's own values.
    common::assert_emitted_inputs_match(&harness, spec_path, &work.join(format!("{name}-inputs")));

    if !Path::new("/dev/nvidia0").exists() {
        Command::new(&harness)
            .arg("--ones")
            .assert()
            .code(7)
            .stdout(predicate::str::contains("no usable CUDA device"));
    }
}

/// The examples the default suite compiles: one per kind of harness the generator writes (launch
/// kind, reference op, kernel, TMA, trace, cluster, an intermediate's reference file), the first
/// by name; CUTLASS specs one per
/// reference op, since each costs nvcc about 50 CPU-seconds. The defect variants of a kernel are
/// other template arguments of the same code. `REPRO_TEST_ALL=1` compiles every example: CI
/// sets it (.ci/run), and scripts/gpu-check.sh builds every one on the GPU machine.
fn examples_to_compile() -> Vec<PathBuf> {
    let specs = example_specs();
    if common::test_all() {
        return specs;
    }
    let mut seen = std::collections::BTreeSet::new();
    specs
        .into_iter()
        .filter(|path| {
            let spec =
                repro::spec::load(path, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
            let cutlass = matches!(spec.kernel().kind, repro::spec::LaunchKind::Cutlass3 { .. });
            seen.insert((
                cutlass,
                spec.reference.op(),
                if cutlass {
                    String::new()
                } else {
                    spec.kernel().name.clone()
                },
                spec.tma.is_empty(),
                spec.trace.is_empty(),
                spec.kernel().cluster.is_some(),
                spec.launches.len(),
                // An intermediate's reference file: a harness with no reference.cu for it.
                spec.tensors.iter().any(|t| {
                    matches!(
                        t.intermediate_reference,
                        Some(repro::spec::IntermediateReference::File(_))
                    )
                }),
            ))
        })
        .collect()
}

#[test]
fn every_kind_of_example_compiles_with_nvcc_for_sm90a() {
    let work = tempfile::tempdir().unwrap();
    // Two at a time (CI machines have two cores and nvcc is single-threaded), from one queue,
    // longest first: a CUTLASS harness takes nvcc about ten times a small kernel's time, so
    // starting them first keeps both threads busy to the end.
    let mut specs = examples_to_compile();
    specs.sort_by_key(|spec| {
        let text = std::fs::read_to_string(spec).unwrap_or_default();
        !text.contains("cutlass")
    });
    eprintln!(
        "compiling {} of {} examples (REPRO_TEST_ALL=1: every one)",
        specs.len(),
        example_specs().len()
    );
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (work, specs, next) = (work.path(), &specs, &next);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                build_and_check(spec, work);
            });
        }
    });
}

/// A batched GEMM's ue8m0 scales per batch are [L, ...]: the harness numbers their blocks on from
/// one batch to the next, as a grouped GEMM's, and repro's mirror must agree byte for byte.
/// The same example with f32 scales [L, ...] (each its generator's values) checks those too.
#[test]
fn batched_ue8m0_scales_are_made_as_repro_makes_them() {
    let work = tempfile::tempdir().unwrap();
    let example = common::repo().join("examples/fp8_batched_scaled_gemm.yaml");
    build_and_check(&example, work.path());
    let text = std::fs::read_to_string(&example).unwrap();
    let kernels = common::repo().join("kernels");
    let mut f32_scales = text
        .replace(
            "include_dirs: [../kernels]",
            &format!("include_dirs: [\"{}\"]", kernels.display()),
        )
        .replace("ScaleFormat::ue8m0", "ScaleFormat::f32")
        .replace(", format: ue8m0 }", " }")
        .replace("\"ceil_div(ceil_div(K, 128), 4)\"", "\"ceil_div(K, 128)\"")
        .replace("SA: { dtype: i32,", "SA: { dtype: f32, range: [0.5, 2.0],")
        .replace("SB: { dtype: i32,", "SB: { dtype: f32, range: [0.5, 2.0],");
    assert!(!f32_scales.contains("format: ue8m0") && !f32_scales.contains("dtype: i32"));
    f32_scales = f32_scales.replace(
        "name: fp8_batched_scaled_gemm\n",
        "name: fp8_batched_scaled_gemm_f32\n",
    );
    let spec = work.path().join("fp8_batched_scaled_gemm_f32.yaml");
    std::fs::write(&spec, f32_scales).unwrap();
    build_and_check(&spec, work.path());
}

/// A grouped GEMM's ue8m0 scales are [G, ...]: the harness numbers their blocks on from one
/// group to the next, and repro's mirror must agree byte for byte (the default suite compiles
/// one example per kernel, and each of these shares its kernel with a contiguous example: the
/// CUDA-core one, and the TMA + wgmma one with its 3-D descriptors over [G, M_max, K]).
#[test]
fn grouped_ue8m0_scales_are_made_as_repro_makes_them() {
    let work = tempfile::tempdir().unwrap();
    for example in [
        "examples/fp8_grouped_masked_ue8m0.yaml",
        "examples/fp8_grouped_wgmma_masked.yaml",
    ] {
        build_and_check(&common::repo().join(example), work.path());
    }
}
