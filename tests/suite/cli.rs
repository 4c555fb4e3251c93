//! The command line end to end: scaffold, edit protection, diff, build cache, run without a GPU.

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

fn repro() -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.env_remove("NVCC");
    cmd
}

#[test]
fn scaffold_writes_the_artifact_and_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "wrote harness.cu, build.sh, CMakeLists.txt, README.md, runtime/ (59 files), spec.yaml",
        ));
    for f in [
        "harness.cu",
        "build.sh",
        "CMakeLists.txt",
        "README.md",
        "spec.yaml",
        ".repro/manifest.json",
        "runtime/include/repro/harness.h",
        "runtime/src/runtime.cu",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("up to date"));
}

#[test]
fn an_invalid_spec_writes_nothing_and_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("b: B,", "b: Bx,");
    std::fs::write(&spec, text).unwrap();
    let out = tmp.path().join("art");
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("tensor `Bx` is not declared"))
        .stderr(predicate::str::contains("small_gemm.yaml:"));
    assert!(!out.exists(), "nothing may be written for an invalid spec");
}

#[test]
fn hand_edits_are_never_overwritten_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let harness = out.join("harness.cu");
    let edited = std::fs::read_to_string(&harness).unwrap() + "// my debugging printf\n";
    std::fs::write(&harness, &edited).unwrap();
    // The spec changes too, so scaffold has something to write.
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("K: 9", "K: 11");
    std::fs::write(&spec, text).unwrap();

    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("refusing to overwrite harness.cu"))
        .stderr(predicate::str::contains("-// my debugging printf"));
    assert_eq!(
        std::fs::read_to_string(&harness).unwrap(),
        edited,
        "the edit survives"
    );
    // `run` on the spec refuses the same way rather than rebuild over the edit.
    repro()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .code(2);
    assert_eq!(std::fs::read_to_string(&harness).unwrap(), edited);

    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--force")
        .assert()
        .success()
        .stdout(predicate::str::contains("your edited files were kept in"));
    assert!(!std::fs::read_to_string(&harness)
        .unwrap()
        .contains("my debugging printf"));
    // --force replaced the edit, but it is not lost.
    assert_eq!(
        std::fs::read_to_string(out.join(".repro/edited/1/harness.cu")).unwrap(),
        edited
    );
}

#[test]
fn diff_shows_what_the_spec_would_change() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    repro()
        .arg("diff")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("matches"));
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("K: 9", "K: 13");
    std::fs::write(&spec, text).unwrap();
    repro()
        .arg("diff")
        .arg(&out)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("-  K: 9"))
        .stdout(predicate::str::contains("+  K: 13"))
        // Sizes are read at run time: harness.cu does not change.
        .stdout(predicate::str::contains("harness.cu").not());
}

#[test]
fn build_is_cached_by_content_and_run_reports_no_device() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    let log = tmp.path().join("nvcc.log");
    let nvcc = common::counting_nvcc(tmp.path(), &log);

    repro()
        .arg("build")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .success();
    assert_eq!(common::calls(&log), 1);
    assert!(out.join("harness").is_file());

    repro()
        .arg("build")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .success()
        .stdout(predicate::str::contains("nvcc not called"));
    assert_eq!(
        common::calls(&log),
        1,
        "an unchanged build must not call nvcc"
    );

    // A kernel header is part of the key: editing it rebuilds.
    let header = tmp.path().join("kernels/small_gemm.cuh");
    let text = std::fs::read_to_string(&header).unwrap() + "// changed\n";
    std::fs::write(&header, text).unwrap();
    repro()
        .arg("build")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .success();
    assert_eq!(common::calls(&log), 2);

    // Inits, seeds, sizes, tolerances, repeats and timeouts are read from spec.yaml when the
    // harness runs: editing them in the spec rescaffolds and costs no nvcc call, and the
    // harness sees the new values (here: the inputs it emits).
    let text = std::fs::read_to_string(&spec).unwrap();
    let edited = text
        .replace("seed: 7", "seed: 8")
        .replace("K: 9", "K: 11")
        .replace("init: iota", "init: ones")
        .replace(
            "build: {",
            "check: { rel_l2: 0.5, repeat: 3, timeout: 4 }\nbuild: {",
        );
    std::fs::write(&spec, &edited).unwrap();
    repro()
        .arg("build")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .success()
        .stdout(predicate::str::contains("nvcc not called"));
    assert_eq!(common::calls(&log), 2, "run-time values need no rebuild");
    common::assert_emitted_inputs_match(&out.join("harness"), &spec, &tmp.path().join("emitted"));
    std::fs::write(&spec, &text).unwrap();

    // No GPU on CI: the harness is built, then says there is no device, exit 7.
    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    repro()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .arg("--ones")
        .assert()
        .code(7)
        .stdout(predicate::str::contains("no usable CUDA device"));
    assert_eq!(common::calls(&log), 2, "run reuses the cached build");
    // The reference's provider is read when the harness runs: `provider: emulated` needs no
    // rebuild, and the harness accepts it (it gets as far as asking for a device).
    std::fs::write(
        &spec,
        text.replace("tile: [16, 16] }", "tile: [16, 16], provider: emulated }"),
    )
    .unwrap();
    repro()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .code(7)
        .stdout(predicate::str::contains("no usable CUDA device"));
    assert_eq!(common::calls(&log), 2, "a provider needs no rebuild");
    std::fs::write(&spec, &text).unwrap();
    // The probe suite runs in the same harness: same build, same answer without a GPU.
    repro()
        .arg("probe")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .code(7)
        .stdout(predicate::str::contains("no usable CUDA device"));
    assert_eq!(common::calls(&log), 2, "probe reuses the cached build");
    repro()
        .arg("probe")
        .arg(&out)
        .args(["--repeat", "1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("at least 2"));
}

#[test]
fn harness_rejects_bad_options_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    let harness = common::build_with_nvcc(&spec, &out);
    Command::new(&harness)
        .args(["--init", "Q=ones"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no tensor `Q`; inputs are: A, B"));
    Command::new(&harness)
        .args(["--init", "A=unifrom"])
        .assert()
        .code(2);
    Command::new(&harness)
        .args(["--init", "D=ones"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is an output"));
    Command::new(&harness)
        .args(["--repeat", "0"])
        .assert()
        .code(2);
    Command::new(&harness).arg("--bogus").assert().code(2);
    Command::new(&harness)
        .args(["--reference", "gpu"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--reference takes host, device, emulated or auto, not `gpu`",
        ));
    Command::new(&harness)
        .args(["--probe", "--ones"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--probe chooses its own inputs"));
    Command::new(&harness)
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("--ones"));
}

#[test]
fn missing_nvcc_is_a_build_error_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    repro()
        .arg("build")
        .arg(&spec)
        .arg("-o")
        .arg(tmp.path().join("art"))
        .arg("--nvcc")
        .arg(tmp.path().join("no-nvcc"))
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no such file"));
}

#[test]
fn doctor_finds_the_project_toolchain() {
    repro()
        .arg("doctor")
        .assert()
        .success()
        .stdout(predicate::str::contains("nvcc"))
        .stdout(predicate::str::contains("release 13.0"))
        .stdout(predicate::str::contains("CUTLASS   4.2.0"))
        // The project toolchain (PyPI's nvcc) has no compute-sanitizer: doctor says so, and what
        // the harness still checks without it.
        .stdout(
            predicate::str::contains("sanitizer /").or(predicate::str::contains(
                "compute-sanitizer not found (WSL2 and some container images lack it)",
            )
            .and(predicate::str::contains("Every other check still runs"))),
        );
}

#[test]
fn build_sh_runs_exactly_what_repro_build_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "flags: [-O2]",
        "flags: [-O2, -DTAG=\"a b\", --use_fast_math, -Xptxas=-v]",
    );
    std::fs::write(&spec, text).unwrap();
    let out = tmp.path().join("art");
    let log = tmp.path().join("nvcc.log");
    // What is compared is the arguments, so nothing needs compiling: the real nvcc runs build.sh
    // in the bundle test.
    let nvcc = common::stand_in_nvcc(tmp.path(), &log);
    repro()
        .arg("build")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .arg("--nvcc")
        .arg(&nvcc)
        .assert()
        .success();
    std::process::Command::new("bash")
        .arg(out.join("build.sh"))
        .env("NVCC", &nvcc)
        .output()
        .unwrap();
    // repro's harness compile and build.sh's: repro adds only its dependency file for the build
    // cache and writes to a temporary name it renames on success (so a failed build keeps the
    // last good harness); each links its own copy of the runtime library.
    let harness_calls: Vec<String> = common::logged_calls(&log)
        .into_iter()
        .filter(|l| l.contains("|harness.cu|"))
        .map(|l| {
            let args: Vec<&str> = l.split('|').collect();
            let library = args
                .iter()
                .position(|a| a.ends_with("librepro_runtime.a"))
                .unwrap();
            let mut kept: Vec<&str> = args[..library].to_vec();
            kept.extend(&args[library + 1..]);
            kept.join("|")
        })
        .collect();
    assert_eq!(harness_calls.len(), 2, "{harness_calls:?}");
    assert_eq!(
        harness_calls[0],
        format!("{}-MD|-MF|.repro/build/harness.d|", harness_calls[1])
            .replace("|-o|harness|", "|-o|harness.partial|")
    );
    // Production flags verbatim and in order, a flag with a space kept as one argument.
    assert_eq!(
        harness_calls[1],
        "-gencode=arch=compute_90a,code=sm_90a|-std=c++17|-O2|-DTAG=\"a b\"|--use_fast_math|-Xptxas=-v|-I../kernels|-Iruntime/include|-o|harness|harness.cu|"
    );
    // The runtime library is built with its own flags only.
    for call in common::logged_calls(&log)
        .iter()
        .filter(|l| l.contains("|--lib|"))
    {
        assert!(
            call.starts_with(
                "-gencode=arch=compute_90a,code=sm_90a|-std=c++17|-O3|-Iruntime/include|--lib|"
            ),
            "{call}"
        );
    }
    // ARCH overrides the target of both builds in build.sh.
    std::process::Command::new("bash")
        .arg(out.join("build.sh"))
        .env("NVCC", &nvcc)
        .env("ARCH", "sm_90")
        .output()
        .unwrap();
    let last = common::logged_calls(&log);
    assert!(
        last.iter()
            .rev()
            .take(2)
            .all(|l| l.starts_with("-gencode=arch=compute_90,code=sm_90|")),
        "{last:?}"
    );
}

#[test]
fn flags_reads_a_log_and_prints_a_build_block() {
    let log = common::repo().join("examples/logs/torch_extension_build.log");
    repro()
        .arg("flags")
        .arg("--from-log")
        .arg(&log)
        .arg("--match")
        .arg("tiled_gemm_cuda.cu")
        .assert()
        .success()
        .stdout(predicate::str::contains("kept     --use_fast_math"))
        .stdout(predicate::str::contains(
            "dropped  -DTORCH_EXTENSION_NAME=gemm_ext",
        ))
        .stdout(predicate::str::contains(
            "build:\n  arch: sm_90a\n  std: c++17\n  flags:\n    - -D__CUDA_NO_HALF_OPERATORS__",
        ));
    // Two nvcc lines and nothing to choose between them: exit 2, both listed.
    repro()
        .arg("flags")
        .arg("--from-log")
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("tiled_gemm_cuda.cu"))
        .stderr(predicate::str::contains("naive_gemm_cuda.cu"));
    repro()
        .arg("flags")
        .arg("--line")
        .arg("nvcc -arch=sm_90a -O3 -Xptxas -v -c k.cu -o k.o")
        .assert()
        .success()
        .stdout(predicate::str::contains("  arch: sm_90a"))
        .stdout(predicate::str::contains("- -Xptxas=-v"));
}

#[test]
fn a_failed_build_keeps_the_last_good_harness_and_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    common::build_with_nvcc(&spec, &out);
    let good = std::fs::read(out.join("harness")).unwrap();
    // A kernel that no longer compiles: nvcc's own error is shown, exit 3.
    let header = tmp.path().join("kernels/small_gemm.cuh");
    let text = std::fs::read_to_string(&header)
        .unwrap()
        .replace("float sum = 0.f;", "float sum = 0.f +;");
    std::fs::write(&header, text).unwrap();
    repro()
        .arg("build")
        .arg(&out)
        .arg("--nvcc")
        .arg(common::nvcc())
        .assert()
        .code(3)
        .stderr(predicate::str::contains("error: expected an expression"))
        .stderr(predicate::str::contains("nvcc failed"));
    assert_eq!(
        std::fs::read(out.join("harness")).unwrap(),
        good,
        "the last good harness is kept"
    );
    // And run refuses to use it: the build is not current.
    repro()
        .arg("run")
        .arg(&out)
        .arg("--nvcc")
        .arg(common::nvcc())
        .assert()
        .code(3);
}

#[test]
fn unreadable_inputs_and_bad_output_folders_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    let harness = common::build_with_nvcc(&spec, &out);
    // A truncated .npy: the harness says which file and what is wrong, exit 2, before any GPU work.
    let emitted = tmp.path().join("inputs");
    Command::new(&harness)
        .arg("--emit-inputs")
        .arg(&emitted)
        .assert()
        .success();
    let npy = std::fs::read(emitted.join("A.npy")).unwrap();
    let truncated = tmp.path().join("truncated.npy");
    std::fs::write(&truncated, &npy[..npy.len() / 2]).unwrap();
    Command::new(&harness)
        .arg("--init")
        .arg(format!("A={}", truncated.display()).replace("A=", "A=file:"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("truncated.npy"));
    let garbage = tmp.path().join("garbage.npy");
    std::fs::write(&garbage, b"not an npy file").unwrap();
    Command::new(&harness)
        .arg("--init")
        .arg(format!("A=file:{}", garbage.display()))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("garbage.npy"));
    // An output "folder" that is a file: a clear error, exit 2, nothing written.
    let blocker = tmp.path().join("blocker");
    std::fs::write(&blocker, "a file").unwrap();
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(blocker.join("art"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("blocker"));
}

#[test]
fn import_writes_a_skeleton_the_loader_refuses_until_its_todos_are_filled() {
    let tmp = tempfile::tempdir().unwrap();
    let source = common::repo().join("tests/fixtures/import/rust/builder_gemm.rs");
    let spec = tmp.path().join("imported.yaml");
    repro()
        .arg("import")
        .arg("rust")
        .arg(&source)
        .arg("-o")
        .arg(&spec)
        .assert()
        .success()
        .stdout(predicate::str::contains("TODOs to fill in"));
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.contains("name: tiled_gemm_bf16"), "{text}");
    // Never over an existing file.
    repro()
        .arg("import")
        .arg("rust")
        .arg(&source)
        .arg("-o")
        .arg(&spec)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("never overwrites"));
    // The loader names every TODO left, exit 2, nothing written.
    repro()
        .arg("scaffold")
        .arg(&spec)
        .arg("-o")
        .arg(tmp.path().join("art"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is still a TODO"));
    assert!(!tmp.path().join("art").exists());
}

#[test]
fn sizes_change_at_run_time_for_sweep_and_shrink() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let out = tmp.path().join("art");
    let harness = common::build_with_nvcc(&spec, &out);
    // --emit-inputs needs no GPU: the tensors follow --size.
    let dump = tmp.path().join("inputs");
    Command::new(&harness)
        .args(["--size", "M=5", "--size", "K=3", "--emit-inputs"])
        .arg(&dump)
        .assert()
        .success();
    let header = |name: &str| {
        let bytes = std::fs::read(dump.join(name)).unwrap();
        String::from_utf8_lossy(&bytes[..128.min(bytes.len())]).into_owned()
    };
    assert!(
        header("A.npy").contains("'shape': (5, 3)"),
        "{}",
        header("A.npy")
    );
    assert!(
        header("B.npy").contains("'shape': (3, 17)"),
        "{}",
        header("B.npy")
    );
    Command::new(&harness)
        .args(["--size", "Q=5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the spec declares no size `Q`"));
    Command::new(&harness)
        .args(["--size", "M=0"])
        .assert()
        .code(2);
    // --stress jitter needs the kernel's delay points, and its options belong to it alone.
    Command::new(&harness)
        .args(["--repeat", "2", "--stress", "jitter"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the kernel does not include repro_trace.cuh, so it has no repro::delay points",
        ));
    Command::new(&harness)
        .args(["--jitter-ns", "500"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the run's stress is not jitter"));

    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    // One build, then the runs need a device: exit 7, said plainly.
    for command in ["sweep", "shrink"] {
        repro()
            .arg(command)
            .arg(&out)
            .assert()
            .code(7)
            .stdout(predicate::str::contains("needs a GPU"));
    }
    repro()
        .args(["sweep", "--dims", "Q"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`Q` is not one of the spec's sizes (M, N, K)",
        ));
}

#[test]
fn bench_builds_every_variant_and_needs_a_gpu_to_time() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let (first, second) = (tmp.path().join("first"), tmp.path().join("second"));
    for out in [&first, &second] {
        common::build_with_nvcc(&spec, out);
    }
    // Timing options belong to --bench, and --bench checks nothing, so no --probe with it.
    let harness = first.join("harness");
    Command::new(&harness)
        .args(["--warmup", "3"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--warmup times launches: it needs --bench",
        ));
    Command::new(&harness)
        .args(["--bench", "--probe"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be combined with --probe"));
    repro()
        .args(["bench", "--repeat", "0"])
        .arg(&first)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("at least 1 timed launch"));
    repro()
        .args(["bench", "--sizes", "64", "--dims", "Q"])
        .arg(&first)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`Q` is not one of the spec's sizes",
        ));

    if std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    repro()
        .arg("bench")
        .arg(&first)
        .assert()
        .code(7)
        .stdout(predicate::str::contains("Disposition: Not run (no_device)"));
    repro()
        .arg("bench")
        .arg(&first)
        .arg("--variants")
        .arg(&second)
        .args(["--sizes", "32,64", "--dims", "M,N"])
        .assert()
        .code(7)
        .stdout(predicate::str::contains("size    M = N = 32"))
        .stdout(predicate::str::contains("timing needs a GPU"));
}

#[test]
fn a_kernel_with_delay_points_takes_stress_jitter() {
    // examples/mbarrier_pipeline_early_release: repro::delay<true>(0) in its consumers.
    let tmp = tempfile::tempdir().unwrap();
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/mbarrier_pipeline_early_release.yaml");
    let harness = common::build_with_nvcc(&spec, &tmp.path().join("art"));
    Command::new(&harness)
        .args(["--stress", "jitter", "--stress-sms", "4"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--stress jitter runs none"));
    if std::path::Path::new("/dev/nvidia0").exists() {
        return; // the GPU script runs it (scripts/gpu-check.sh races)
    }
    // Past the option checks: the run needs a device.
    Command::new(&harness)
        .args(["--repeat", "2", "--stress", "jitter", "--jitter-ns", "500"])
        .assert()
        .code(7);
}
