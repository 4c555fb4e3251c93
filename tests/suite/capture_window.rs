//! `repro capture --launches`/`--through` without a GPU: a window of three launches as the
//! injection library records it (window.json, one launch record each, the allocations shared),
//! written into a spec of replayed `launches:` that loads and whose harness nvcc builds. The
//! modules are the fixtures of tests/gpu/replay/ (scale_add and square_add, made by its make.sh):
//!   launch 1  scale_add(X, W)      W = 2 X + 1
//!   launch 2  square_add(W, X, Y)  Y = W^2 + X
//!   launch 3  scale_add(X, W)      the first module again, W left as the window found it
//! so X is an input, W an intermediate (written, and left as found) and Y the output; a memset
//! into Y between launches 2 and 3 is named; `--tensor` views of the launches' parameters. The
//! flags a window refuses before the program runs (a length past 64, --source) are checked too, and the whole command, with a
//! stand-in program that writes the library's records (a window, and a window it refused); the
//! refusal over --max-bytes and `--launches 1` being the one-launch capture are lib.rs's tests.

use std::path::Path;

use crate::common;

use predicates::prelude::*;
use repro::capture::record::Window;
use repro::capture::sequence::write_sequence;
use repro::capture::write::SpecRequest;

const N: usize = 4096;
const BYTES: usize = N * 4;

fn f32_bytes(values: impl Iterator<Item = f32>) -> Vec<u8> {
    values.flat_map(f32::to_le_bytes).collect()
}

/// The raw folder of the window: its launch records, parameter bytes, modules and buffers.
fn window_raw(raw: &Path) -> Window {
    let fixtures = common::repo().join("tests/gpu/replay");
    std::fs::create_dir_all(raw.join("launches")).unwrap();
    std::fs::create_dir_all(raw.join("buffers")).unwrap();
    std::fs::copy(
        fixtures.join("scale_add.cubin"),
        raw.join("launches/m1.cubin"),
    )
    .unwrap();
    std::fs::copy(
        fixtures.join("square_add.cubin"),
        raw.join("launches/m2.cubin"),
    )
    .unwrap();
    let (x, w, y) = (
        0x7f00_0000_0000u64,
        0x7f00_0010_0000u64,
        0x7f00_0020_0000u64,
    );
    let pack =
        |addresses: &[u64]| -> Vec<u8> { addresses.iter().flat_map(|a| a.to_le_bytes()).collect() };
    std::fs::write(raw.join("launches/l1.params.bin"), pack(&[x, w])).unwrap();
    std::fs::write(raw.join("launches/l2.params.bin"), pack(&[w, x, y])).unwrap();
    std::fs::write(raw.join("launches/l3.params.bin"), pack(&[x, w])).unwrap();
    let xs = f32_bytes((0..N).map(|i| (i % 7) as f32 - 3.0));
    std::fs::write(raw.join("buffers/b0.before.bin"), &xs).unwrap();
    std::fs::write(raw.join("buffers/b1.before.bin"), vec![0u8; BYTES]).unwrap();
    std::fs::write(raw.join("buffers/b2.before.bin"), vec![0xFFu8; BYTES]).unwrap();
    let ys = f32_bytes((0..N).map(|i| {
        let x = (i % 7) as f32 - 3.0;
        (2.0 * x + 1.0) * (2.0 * x + 1.0) + x
    }));
    std::fs::write(raw.join("buffers/b2.after.bin"), &ys).unwrap();
    let launch = |index: usize,
                  mangled: &str,
                  demangled: &str,
                  module: usize,
                  pointers: &[(u64, usize)]| {
        let layout: Vec<String> = (0..pointers.len())
            .map(|i| format!(r#"{{"index": {i}, "offset": {}, "size": 8}}"#, i * 8))
            .collect();
        let pointers: Vec<String> = pointers
            .iter()
            .enumerate()
            .map(|(i, (_, buffer))| {
                format!(
                    r#"{{"param": {i}, "offset": {}, "value": "0x0", "buffer": {buffer}, "byte_offset": 0}}"#,
                    i * 8
                )
            })
            .collect();
        format!(
            r#"{{"version": 1, "kernel": {{"mangled": "{mangled}", "demangled": "{demangled}"}},
                "launch_number": {number}, "api": "cuLaunchKernel",
                "device": {{"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "cc": [9, 0]}},
                "grid": [16, 1, 1], "block": [256, 1, 1], "smem": 0, "cluster": null,
                "params": {{"file": "launches/l{index}.params.bin", "size": {size}, "layout": [{layout}]}},
                "pointers": [{pointers}], "tensor_maps": [], "buffers": [],
                "module": {{"file": "launches/m{module}.cubin", "size": 4000}},
                "launch_result": "CUDA_SUCCESS", "launch_error": null, "notes": []}}"#,
            number = if index == 1 { 2 } else { index },
            size = layout.len() * 8,
            layout = layout.join(", "),
            pointers = pointers.join(", "),
        )
    };
    let scale_add = (
        "_ZN23replay_sequence_kernels9scale_addEPKfPf",
        "replay_sequence_kernels::scale_add(float const*, float*)",
    );
    let square_add = (
        "_ZN23replay_sequence_kernels10square_addEPKfS1_Pf",
        "replay_sequence_kernels::square_add(float const*, float const*, float*)",
    );
    let text = format!(
        r#"{{"version": 1,
            "window": {{"kernel": "scale_add", "first": 2, "launches": 3, "through": null}},
            "launches": [{}, {}, {}],
            "buffers": [
              {{"id": 0, "base": "0x{x:x}", "size": {BYTES}, "managed": false, "before": "buffers/b0.before.bin",
               "after": null, "changed_bytes": 0, "first_launch": 1, "written_by": []}},
              {{"id": 1, "base": "0x{w:x}", "size": {BYTES}, "managed": false, "before": "buffers/b1.before.bin",
               "after": null, "changed_bytes": 0, "first_launch": 1, "written_by": [1, 3]}},
              {{"id": 2, "base": "0x{y:x}", "size": {BYTES}, "managed": false, "before": "buffers/b2.before.bin",
               "after": "buffers/b2.after.bin", "changed_bytes": {BYTES}, "first_launch": 2, "written_by": [2]}}],
            "memory_operations": [{{"api": "cuMemsetD32Async", "buffer": 2, "address": "0x{y:x}", "after_launch": 2}}]}}"#,
        launch(1, scale_add.0, scale_add.1, 1, &[(x, 0), (w, 1)]),
        launch(2, square_add.0, square_add.1, 2, &[(w, 1), (x, 0), (y, 2)]),
        launch(3, scale_add.0, scale_add.1, 1, &[(x, 0), (w, 1)]),
    );
    std::fs::write(raw.join("window.json"), &text).unwrap();
    repro::capture::record::read(&raw.join("window.json"))
        .unwrap()
        .expect("window.json")
}

fn request() -> SpecRequest {
    SpecRequest {
        command: "./replay_app --calls 2".into(),
        ..SpecRequest::default()
    }
}

/// The three launches as three replayed entries sharing three tensors: the spec, its files, a
/// harness nvcc builds with the three launches in order.
#[test]
fn a_window_of_three_launches_is_a_sequence_of_replayed_launches_that_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let window = window_raw(&raw);
    std::fs::create_dir_all(&out).unwrap();
    let written = write_sequence(&raw, &out, &window, &request(), &[None, None, None]).unwrap();
    assert_eq!(written.kind, "replay");
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    insta::assert_snapshot!("window_of_three_launches", spec);
    // One cubin per module (launch 3 shares launch 1's), one parameter file per launch.
    for file in [
        "replay/module1.cubin",
        "replay/module2.cubin",
        "replay/launch1.params.bin",
        "replay/launch2.params.bin",
        "replay/launch3.params.bin",
        "inputs/buffer0.npy",
        "inputs/buffer1.npy",
        "production/buffer2.before.npy",
        "production/buffer2.after.npy",
    ] {
        assert!(out.join(file).is_file(), "{file}");
    }
    assert!(!out.join("replay/module3.cubin").exists());
    assert_eq!(
        std::fs::read(out.join("replay/module1.cubin")).unwrap(),
        std::fs::read(common::repo().join("tests/gpu/replay/scale_add.cubin")).unwrap()
    );
    // Production's output after the window, as the library copied it.
    let after = std::fs::read(out.join("production/buffer2.after.npy")).unwrap();
    assert_eq!(
        after[after.len() - BYTES..],
        std::fs::read(raw.join("buffers/b2.after.bin")).unwrap()[..]
    );
    let resolved = repro::spec::load(&written.spec, &repro::machine::Machine)
        .unwrap_or_else(|e| panic!("{e}"));
    let capture = resolved.document.capture.as_ref().expect("capture:");
    let window_section = capture.window.as_ref().expect("capture.window");
    assert_eq!(window_section.kernels.len(), 3);
    assert_eq!(window_section.launches, Some(3));
    let art = tmp.path().join("art");
    common::build_with_nvcc(&written.spec, &art);
    let harness = std::fs::read_to_string(art.join("harness.cu")).unwrap();
    for k in 1..=3 {
        assert!(
            harness.contains(&format!("// ---- launch {k} of 3")),
            "launch {k}\n{harness}"
        );
    }
}

/// A window that changed nothing it reaches has nothing to reproduce.
#[test]
fn a_window_that_changed_nothing_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let mut window = window_raw(&raw);
    window.buffers[2].after = None;
    window.buffers[2].written_by.clear();
    std::fs::create_dir_all(&out).unwrap();
    let e = write_sequence(&raw, &out, &window, &request(), &[None, None, None]).unwrap_err();
    assert!(
        e.contains("the window's 3 launches changed no buffer they can reach"),
        "{e}"
    );
}

/// `--reference` names the window's tensors, as for one launch; the expected files are gone.
#[test]
fn a_reference_over_the_windows_tensors_replaces_productions_output() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let window = window_raw(&raw);
    std::fs::create_dir_all(&out).unwrap();
    let request = SpecRequest {
        reference: Some(
            repro::spec::yaml::reference_from_text(
                "{op: custom, source: ref.h, function: window_reference}",
            )
            .unwrap(),
        ),
        ..request()
    };
    let written = write_sequence(&raw, &out, &window, &request, &[None, None, None]).unwrap();
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    assert!(
        spec.contains("reference:   # given with --reference"),
        "{spec}"
    );
    assert!(!spec.contains("op: file"), "{spec}");
}

fn repro() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("repro").unwrap();
    cmd.env_remove("NVCC").env_remove("CUDA_INJECTION64_PATH");
    cmd
}

/// A window longer than a spec's `launches:` may be, a `--through` that is no pattern, the
/// one-launch flag a window cannot take and a window's view without a window are refused before
/// the program runs (exit 2).
#[test]
fn a_window_past_its_bounds_or_with_one_launchs_flags_is_refused_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    for (flags, says) in [
        (vec!["--launches", "65"], "65 is not in 1..=64"),
        (vec!["--launches", "0"], "0 is not in 1..=64"),
        (vec!["--through", ""], "--through is empty"),
        (
            vec!["--tensor", "launch1.x=[4]"],
            "`launchK.` names a launch of a window",
        ),
        (
            vec!["--through", "reduce", "--source", "."],
            "--source rebuilds one launch",
        ),
    ] {
        repro()
            .args(["capture", "--kernel", "gemm"])
            .args(&flags)
            .arg("-o")
            .arg(tmp.path().join("cap"))
            .args(["--", "touch"])
            .arg(&marker)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
        assert!(!marker.exists(), "{flags:?}: the program must not run");
    }
}

/// A window's program runs under the library as one launch's does: here it never initializes
/// CUDA, which is said as for one launch.
#[test]
fn a_window_of_a_program_without_cuda_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    repro()
        .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
        .args([
            "capture",
            "--kernel",
            "partials",
            "--through",
            "reduce",
            "-o",
        ])
        .arg(tmp.path().join("cap"))
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the program ended (exit status 0) without initializing CUDA",
        ))
        .stderr(predicate::str::contains(
            "and the launches after it through the first matching `reduce`",
        ));
}

/// The whole command without a GPU: a stand-in program writes what the injection library would
/// (session.json, window.json and the files they name) into `$REPRO_CAPTURE_OUT`, after checking
/// that the window's bounds reached it; `repro capture` writes and scaffolds the spec from them.
#[test]
fn the_command_writes_a_window_from_the_librarys_records() {
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records");
    window_raw(&records);
    std::fs::write(
        records.join("session.json"),
        r#"{"status": "captured", "message": "recorded a window of 3 launches", "launches_seen": 9, "matched": 2,
            "kernels": [], "notes": ["a launch in another context than the window's was left out of it"]}"#,
    )
    .unwrap();
    let program = format!(
        "test \"$REPRO_CAPTURE_LAUNCHES\" = 3 && test \"$REPRO_CAPTURE_WINDOW_MAX\" = 64 && test -z \"$REPRO_CAPTURE_THROUGH\" \
         && cp -r '{}'/. \"$REPRO_CAPTURE_OUT\"/",
        records.display()
    );
    let out = tmp.path().join("cap");
    repro()
        .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
        .args(["capture", "--kernel", "scale_add", "--launch", "2", "--launches", "3", "-o"])
        .arg(&out)
        .args(["--", "bash", "-c", &program])
        .assert()
        .code(0)
        .stderr(predicate::str::contains("capture: a window of 3 launches:"))
        .stderr(predicate::str::contains(
            "capture:   launch 2: replay_sequence_kernels::square_add(float const*, float const*, float*) (grid [16, 1, 1], block [256, 1, 1])",
        ))
        .stderr(predicate::str::contains(
            "capture: note: a launch in another context than the window's was left out of it",
        ))
        .stderr(predicate::str::contains(
            "capture: note: cuMemsetD32Async wrote into buffer 2 at 0x7f0000200000 between launches 2 and 3 of the window",
        ))
        .stderr(predicate::str::contains("(kind: replay, because a window of 3 launches is replayed launch by launch) and 3 tensors"));
    let spec = std::fs::read_to_string(out.join("capture.yaml")).unwrap();
    assert!(spec.contains("  command: \"bash -c "), "{spec}");
    assert!(spec.contains("    launches: 3   # --launches"), "{spec}");
    assert!(
        !out.join("raw/buffers").exists(),
        "the raw copies are now .npy files"
    );
    repro::spec::load(&out.join("capture.yaml"), &repro::machine::Machine)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// window.json is written by the captured program's process: one holding more launches than the
/// library ever records is refused (exit 2) before any of its files are read.
#[test]
fn a_window_record_past_the_librarys_bound_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let records = tmp.path().join("records");
    window_raw(&records);
    let path = records.join("window.json");
    let mut window: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let first = window["launches"][0].clone();
    window["launches"] = serde_json::Value::Array(vec![first; 65]);
    std::fs::write(&path, serde_json::to_vec(&window).unwrap()).unwrap();
    std::fs::write(
        records.join("session.json"),
        r#"{"status": "captured", "message": "", "kernels": []}"#,
    )
    .unwrap();
    let program = format!("cp -r '{}'/. \"$REPRO_CAPTURE_OUT\"/", records.display());
    let out = tmp.path().join("cap");
    repro()
        .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
        .args(["capture", "--kernel", "scale_add", "--launches", "3", "-o"])
        .arg(&out)
        .args(["--", "bash", "-c", &program])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "window.json: a window of 65 launches; repro's injection library records 1 to 64",
        ));
    assert!(!out.join("capture.yaml").exists());
}

/// The library's refusal of a window that grew past its bound is the command's (exit 2).
#[test]
fn a_window_the_library_refused_is_said_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let program = "printf '%s' '{\"status\": \"window_too_long\", \"message\": \"the window held 64 launches (the most a window may hold) and none of them after the first matched '\"'\"'reduce'\"'\"'\", \"matched\": 1}' > \"$REPRO_CAPTURE_OUT/session.json\"";
    repro()
        .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
        .args(["capture", "--kernel", "partials", "--through", "reduce", "-o"])
        .arg(tmp.path().join("cap"))
        .args(["--", "bash", "-c", program])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "repro capture: the window held 64 launches (the most a window may hold) and none of them after the first matched 'reduce'; nothing was written",
        ));
}

/// The launches' parameters named as a Triton kernel's signature names them.
fn named(kernel: &str, params: &[&str]) -> Option<repro::capture::triton::TritonKernel> {
    let list: Vec<String> = params
        .iter()
        .map(|p| format!("%{p}: !tt.ptr<f32> loc(\"{p}\"(#loc))"))
        .collect();
    let ir = format!(
        "#loc = loc(\"/app/op.py\":1:0)\n  tt.func public @{kernel}({}) attributes {{noinline = false}} {{",
        list.join(", ")
    );
    Some(repro::capture::triton::TritonKernel {
        name: kernel.into(),
        entry: std::path::PathBuf::from("/cache/E"),
        params: repro::capture::triton::signature(&ir, kernel),
        options: serde_json::from_str(r#"{"num_warps": 4, "num_ctas": 1, "num_stages": 3}"#)
            .unwrap(),
        location: Some("/app/op.py:1".into()),
        autotuned: None,
        notes: Vec::new(),
    })
}

fn named_launches() -> Vec<Option<repro::capture::triton::TritonKernel>> {
    vec![
        named("scale_add", &["x_ptr", "w_ptr"]),
        named("square_add", &["w_ptr", "x_ptr", "y_ptr"]),
        named("scale_add", &["x_ptr", "w_ptr"]),
    ]
}

/// `NAME=...` carves at every launch's parameter of that name (one tensor where they point at
/// the same bytes), `launchK.NAME=...` at launch K's; a view is an output where the window
/// changed its bytes, and what it changed outside every view is refused.
#[test]
fn views_name_the_launches_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let window = window_raw(&raw);
    std::fs::create_dir_all(&out).unwrap();
    let request = SpecRequest {
        views: vec![
            repro::capture::views::parse("x_ptr=[64, 64]").unwrap(),
            repro::capture::views::parse("launch2.y_ptr=[64, 64]").unwrap(),
        ],
        ..request()
    };
    let written = write_sequence(&raw, &out, &window, &request, &named_launches()).unwrap();
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    for expected in [
        "  x_ptr: { dtype: f32, shape: [64, 64], init: { file: inputs/x_ptr.npy } }",
        "  w_ptr: { dtype: f32, shape: [4096], intermediate: true, init: { file: inputs/w_ptr.npy } }",
        "  y_ptr: { dtype: f32, shape: [64, 64], output: true }   # 16384 bytes changed by the window",
        "      - { at: 8, tensor: x_ptr, offset: 0 }   # parameter 1",
        "      - { at: 16, tensor: y_ptr, offset: 0 }   # parameter 2",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    assert_eq!(spec.matches("  x_ptr: {").count(), 1, "{spec}");
    repro::spec::load(&written.spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn views_a_window_cannot_hold_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let window = window_raw(&raw);
    std::fs::create_dir_all(&out).unwrap();
    for (views, says) in [
        (
            vec!["launch1.y_ptr=[4]"],
            "launch 1 of the window: --tensor launch1.y_ptr=[4]: `y_ptr` is no pointer parameter of scale_add",
        ),
        (vec!["z_ptr=[4]"], "no launch of the window has a pointer parameter `z_ptr`"),
        (vec!["launch4.x_ptr=[4]"], "the window has 3 launches, no launch 4"),
        (
            vec!["launch1.x_ptr=[4096]", "launch2.x_ptr=[2048]"],
            "launch 2's view overlaps the view x_ptr",
        ),
        (vec!["x_ptr=[5000]"], "reaches past it"),
        (
            vec!["launch2.y_ptr=[2048]"],
            "the window changed 8192 bytes of the allocation y_ptr is carved from outside every view (bytes 8192 to 16383)",
        ),
    ] {
        let request = SpecRequest {
            views: views
                .iter()
                .map(|v| repro::capture::views::parse(v).unwrap())
                .collect(),
            ..request()
        };
        let e = write_sequence(&raw, &out, &window, &request, &named_launches()).unwrap_err();
        assert!(e.contains(says), "{views:?}: {e}");
    }
}

/// `NAME@BYTE=DTYPE[...]`: a view at the pointer stored at a byte of the parameters, for kernels
/// whose parameters have no names (a parameter struct: FlashAttention's, CUTLASS's). With a
/// reference that names its outputs, what else the window left changed is the operator's
/// scratch: an intermediate made from its state before the window.
#[test]
fn views_at_parameter_bytes_and_a_references_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let window = window_raw(&raw);
    // W changed by the window too (its state after the last launch differs): two outputs.
    let ws = f32_bytes((0..N).map(|i| 2.0 * ((i % 7) as f32 - 3.0) + 1.0));
    std::fs::write(raw.join("buffers/b1.after.bin"), &ws).unwrap();
    let text = std::fs::read_to_string(raw.join("window.json")).unwrap().replace(
        r#""before": "buffers/b1.before.bin",
               "after": null, "changed_bytes": 0"#,
        &format!(r#""before": "buffers/b1.before.bin", "after": "buffers/b1.after.bin", "changed_bytes": {BYTES}"#),
    );
    assert!(text.contains("b1.after.bin"), "{text}");
    std::fs::write(raw.join("window.json"), &text).unwrap();
    let window = repro::capture::record::read(&raw.join("window.json"))
        .unwrap()
        .unwrap_or(window);
    std::fs::create_dir_all(&out).unwrap();
    let view = |v: &str| repro::capture::views::parse(v).unwrap();
    let with_views = SpecRequest {
        // Byte 0 is X in launches 1 and 3, W in launch 2: each view names its launch.
        views: vec![
            view("launch1.x@0=f32[64, 64]"),
            // Y read as its transpose: the logical [64, 64] through strides [1, 64].
            view("launch2.y@16=f32[64, 64]:strides[1, 64]"),
            view("launch1.w@8=f32[64, 64]"),
        ],
        reference: Some(
            repro::spec::yaml::reference_from_text("{op: gemm, a: x, b: x, out: y}").unwrap(),
        ),
        ..request()
    };
    let written = write_sequence(&raw, &out, &window, &with_views, &[None, None, None])
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    for expected in [
        "  x: { dtype: f32, shape: [64, 64], init: { file: inputs/x.npy } }",
        "  y: { dtype: f32, shape: [64, 64], strides: [1, 64], output: true }",
        "  w: { dtype: f32, shape: [64, 64], intermediate: true, init: { file: inputs/w.npy } }   # launches 1, 3 changed it and the reference judges only y: the operator's scratch",
        "      - { at: 16, tensor: y, offset: 0 }",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    repro::spec::load(&written.spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
    // The files hold the logical elements, row-major: element [r, c] of Y is storage c * 64 + r.
    let after = std::fs::read(out.join("production/y.after.npy")).unwrap();
    let data = &after[after.len() - BYTES..];
    let element = |i: usize| f32::from_le_bytes(data[i * 4..i * 4 + 4].try_into().unwrap());
    let stored = |i: usize| {
        let x = (i % 7) as f32 - 3.0;
        (2.0 * x + 1.0) * (2.0 * x + 1.0) + x
    };
    for (r, c) in [(0, 1), (1, 0), (5, 9), (63, 62)] {
        assert_eq!(element(r * 64 + c), stored(c * 64 + r), "y[{r}, {c}]");
    }

    // A reference whose outputs the window left unchanged is refused, naming what it changed.
    let out2 = tmp.path().join("out2");
    std::fs::create_dir_all(&out2).unwrap();
    let refused = SpecRequest {
        reference: Some(
            repro::spec::yaml::reference_from_text("{op: gemm, a: y, b: y, out: x}").unwrap(),
        ),
        ..with_views
    };
    let e = write_sequence(&raw, &out2, &window, &refused, &[None, None, None]).unwrap_err();
    assert!(
        e.contains(
            "the reference judges x, and the window left none of them changed (it changed w, y)"
        ),
        "{e}"
    );

    // Bytes that hold no pointer, and forms the parser refuses.
    let refused = SpecRequest {
        views: vec![view("launch1.x@24=f32[4]")],
        ..request()
    };
    let e = write_sequence(&raw, &out2, &window, &refused, &[None, None, None]).unwrap_err();
    assert!(e.contains("byte 24 of replay_sequence_kernels::scale_add(float const*, float*)'s parameters holds no pointer into a device allocation (pointers are at bytes 0, 8)"), "{e}");
    let refused = SpecRequest {
        views: vec![view("q@64=f32[4]")],
        ..request()
    };
    let e = write_sequence(&raw, &out2, &window, &refused, &[None, None, None]).unwrap_err();
    assert!(
        e.contains("no launch of the window holds a pointer into a device allocation at byte 64"),
        "{e}"
    );
    let refused = SpecRequest {
        views: vec![view("x=[4]")],
        ..request()
    };
    let e = write_sequence(&raw, &out2, &window, &refused, &[None, None, None]).unwrap_err();
    assert!(
        e.contains("no launch of the window has a pointer parameter `x`"),
        "{e}"
    );
    // Byte 8 is W in launch 1 and X in launch 2: a view at it in every launch overlaps.
    let refused = SpecRequest {
        views: vec![view("launch1.x@0=f32[4096]"), view("w@8=f32[4096]")],
        ..request()
    };
    let e = write_sequence(&raw, &out2, &window, &refused, &[None, None, None]).unwrap_err();
    assert!(
        e.contains("--tensor w@8=f32[4096]: launch 2's view overlaps the view x"),
        "{e}"
    );
    for (text, says) in [
        (
            "q@4=bf16[4]",
            "a pointer's byte in the parameters is a multiple of 8",
        ),
        (
            "q@0=[4]",
            "a view at a byte of the parameters gives its dtype",
        ),
        ("q@x=bf16[4]", "`x` after `@` is no byte offset"),
        ("o@0=bf16[2, 3]:strides[1]", "give one stride per dimension"),
        ("o@0=bf16[2, 3]:strides[3, 0]", "a stride is 0"),
        (
            "o@0=bf16[2, 3]:strides[3, D]",
            "the stride `D` is no number of elements",
        ),
        (
            "o@0=bf16[2, 3]:strides 3, 1",
            "strides are written strides[S, ...]",
        ),
    ] {
        let e = repro::capture::views::parse(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
}
