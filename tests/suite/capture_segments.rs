//! `repro capture` of a launch whose parameters share one allocation (issue 59): PyTorch's
//! caching allocator puts a decoding kernel's q, k, v, cu_seqlens and o in one segment. A view
//! on the output alone splits the rest into one tensor per parameter, so the spec's reference
//! judges `o` only. A synthetic capture (no GPU): the files the injection library writes.

use std::path::{Path, PathBuf};

use repro::capture::record::Capture;
use repro::capture::triton::{signature, TritonKernel};
use repro::capture::views;
use repro::capture::write::{write, SpecRequest};

/// Byte offsets in the 4096-byte segment: q [8, 16] f16 at 0, k at 256, v at 512, cu_seqlens
/// (3 i32) at 768, o [8, 16] f16 at 1024; the segment's rest is the allocator's.
const SEGMENT: u64 = 4096;
const O_AT: usize = 1024;
const O_BYTES: usize = 8 * 16 * 2;

fn decode_capture(raw: &Path, stray_write: bool) -> Capture {
    std::fs::create_dir_all(raw.join("buffers")).unwrap();
    let before: Vec<u8> = (0..SEGMENT).map(|i| (i % 251) as u8).collect();
    let mut after = before.clone();
    for b in &mut after[O_AT..O_AT + O_BYTES] {
        *b = b.wrapping_add(1);
    }
    if stray_write {
        // A byte past o's view, which no parameter points at.
        after[3000] ^= 0xFF;
    }
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    std::fs::write(raw.join("buffers/b0.before.bin"), &before).unwrap();
    std::fs::write(raw.join("buffers/b0.after.bin"), &after).unwrap();
    std::fs::write(raw.join("module.cubin"), b"cubin").unwrap();
    let base = 0x7000_0000u64;
    let mut params = Vec::new();
    for at in [0u64, 256, 512, 768, O_AT as u64] {
        params.extend((base + at).to_le_bytes());
    }
    params.extend(16i32.to_le_bytes()); // head_dim
    params.extend([0u8; 4]);
    params.extend([0u8; 16]); // Triton's global_scratch, profile_scratch
    std::fs::write(raw.join("params.bin"), &params).unwrap();
    let pointers: Vec<String> = [0u64, 256, 512, 768, O_AT as u64]
        .iter()
        .enumerate()
        .map(|(i, at)| {
            format!(
                r#"{{"param": {i}, "offset": {}, "buffer": 0, "byte_offset": {at}}}"#,
                i * 8
            )
        })
        .collect();
    serde_json::from_str(&format!(
        r#"{{"kernel": {{"mangled": "decode_kernel", "demangled": "decode_kernel"}}, "launch_number": 1,
            "api": "cuLaunchKernelEx", "device": {{"ordinal": 0, "name": "H100", "cc": [9, 0]}},
            "grid": [8, 1, 1], "block": [128, 1, 1], "smem": 0,
            "params": {{"file": "params.bin", "size": 64, "layout": [
                {{"index": 0, "offset": 0, "size": 8}}, {{"index": 1, "offset": 8, "size": 8}},
                {{"index": 2, "offset": 16, "size": 8}}, {{"index": 3, "offset": 24, "size": 8}},
                {{"index": 4, "offset": 32, "size": 8}}, {{"index": 5, "offset": 40, "size": 4}},
                {{"index": 6, "offset": 48, "size": 8}}, {{"index": 7, "offset": 56, "size": 8}}]}},
            "pointers": [{}],
            "buffers": [{{"id": 0, "size": {SEGMENT}, "before": "buffers/b0.before.bin",
                         "after": "buffers/b0.after.bin", "changed_bytes": {changed}}}],
            "module": {{"file": "module.cubin", "size": 5}}}}"#,
        pointers.join(", ")
    ))
    .unwrap()
}

fn decode_triton() -> TritonKernel {
    let ir = r#"#loc = loc("/app/decode.py":9:0)
  tt.func public @decode_kernel(%q: !tt.ptr<f16> loc("q"(#loc)), %k: !tt.ptr<f16> loc("k"(#loc)), %v: !tt.ptr<f16> loc("v"(#loc)), %cu_seqlens: !tt.ptr<i32> loc("cu_seqlens"(#loc)), %o: !tt.ptr<f16> loc("o"(#loc)), %head_dim: i32 loc("head_dim"(#loc))) attributes {noinline = false} {"#;
    TritonKernel {
        name: "decode_kernel".into(),
        entry: PathBuf::from("/cache/E"),
        params: signature(ir, "decode_kernel"),
        options: serde_json::from_str(
            r#"{"num_warps": 4, "num_ctas": 1, "num_stages": 3, "triton_version": "3.6.0"}"#,
        )
        .unwrap(),
        location: Some("/app/decode.py:9".into()),
        autotuned: None,
        notes: Vec::new(),
    }
}

fn request() -> SpecRequest {
    SpecRequest {
        command: "python3 decode.py".into(),
        triton: Some(decode_triton()),
        views: vec![views::parse("o=[8, head_dim]").unwrap()],
        reference: Some(
            repro::spec::yaml::reference_from_text(
                "{op: file, expected: {o: o.npy}, block: [1, 16]}",
            )
            .unwrap(),
        ),
        ..SpecRequest::default()
    }
}

#[test]
fn a_view_on_the_output_alone_splits_the_shared_segment_per_parameter() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let capture = decode_capture(&raw, false);
    std::fs::create_dir_all(&out).unwrap();
    let written = write(&raw, &out, &capture, &request()).unwrap();
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    for expected in [
        // Each parameter its own tensor, up to the next pointer, typed by the signature.
        "  q: { dtype: f16, shape: [128], init: { file: inputs/q.npy } }",
        "  k: { dtype: f16, shape: [128], init: { file: inputs/k.npy } }",
        "  v: { dtype: f16, shape: [128], init: { file: inputs/v.npy } }",
        "  cu_seqlens: { dtype: i32, shape: [64], init: { file: inputs/cu_seqlens.npy } }",
        // The only output, its changed bytes counted once.
        "  o: { dtype: f16, shape: [8, 16], output: true }   # 256 bytes changed by the launch",
        "    - { at: 0, tensor: q, offset: 0 }   # parameter 0",
        "    - { at: 24, tensor: cu_seqlens, offset: 0 }   # parameter 3",
        "    - { at: 32, tensor: o, offset: 0 }   # parameter 4",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    assert_eq!(spec.matches("output: true").count(), 1, "{spec}");
    assert!(!spec.contains("buffer0"), "{spec}");
    // The pieces hold the segment's bytes from each pointer on, as captured.
    let before: Vec<u8> = (0..SEGMENT).map(|i| (i % 251) as u8).collect();
    let k = std::fs::read(out.join("inputs/k.npy")).unwrap();
    assert_eq!(k[k.len() - 256..], before[256..512]);
    // The spec loads: the reference's `block` is checked against `o`, the output it judges.
    std::fs::write(out.join("o.npy"), b"").unwrap();
    repro::spec::load(&written.spec, &repro::machine::Machine).unwrap();
}

#[test]
fn a_write_outside_every_tensor_keeps_the_segment_whole_and_the_refusal_names_the_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let capture = decode_capture(&raw, true);
    std::fs::create_dir_all(&out).unwrap();
    let e = write(&raw, &out, &capture, &request()).unwrap_err();
    for says in [
        "q, k, v, cu_seqlens and o point into one allocation",
        "--tensor 'q=[",
        "--tensor 'cu_seqlens=[",
    ] {
        assert!(e.contains(says), "{says}: {e}");
    }
}

#[test]
fn a_segment_kept_whole_beside_its_view_counts_and_holds_only_the_bytes_outside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let capture = decode_capture(&raw, true);
    std::fs::create_dir_all(&out).unwrap();
    let request = SpecRequest {
        reference: None,
        ..request()
    };
    let written = write(&raw, &out, &capture, &request).unwrap();
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    // o's 256 changed bytes are o's; the allocation kept whole counts the stray byte alone.
    for expected in [
        "  q: { dtype: f16, shape: [2048], output: true }   # 1 bytes changed by the launch",
        "  o: { dtype: f16, shape: [8, 16], output: true }   # 256 bytes changed by the launch",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    // The harness writes o in o's tensor, so the whole allocation's expected bytes keep o's
    // bytes as they were before the launch.
    let before: Vec<u8> = (0..SEGMENT).map(|i| (i % 251) as u8).collect();
    let mut want = before.clone();
    want[3000] ^= 0xFF;
    let after = std::fs::read(out.join("production/q.after.npy")).unwrap();
    assert_eq!(after[after.len() - SEGMENT as usize..], want[..]);
}

#[test]
fn a_pointer_the_pieces_would_leave_out_keeps_the_segment_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let mut capture = decode_capture(&raw, false);
    // Eight bytes of Triton's scratch slot that point past o's view: no parameter's own pointer.
    capture
        .pointers
        .push(repro::capture::record::CapturedPointer {
            param: 6,
            offset: 52,
            buffer: 0,
            byte_offset: 2048,
        });
    std::fs::create_dir_all(&out).unwrap();
    let request = SpecRequest {
        reference: None,
        ..request()
    };
    let spec =
        std::fs::read_to_string(write(&raw, &out, &capture, &request).unwrap().spec).unwrap();
    // One tensor of the allocation, which every pointer outside o's view relocates into.
    assert!(spec.contains("  q: { dtype: f16, shape: [2048]"), "{spec}");
    assert!(
        spec.contains("    - { at: 52, tensor: q, offset: 2048 }"),
        "{spec}"
    );
    assert!(!spec.contains("  k: {"), "{spec}");
}

/// The same launch without parameter names (a kernel whose parameters are a struct, seen only as
/// bytes): views name each pointer by its byte in the parameters, `NAME@BYTE=DTYPE[...]`, and the
/// segment every pointer of which lands in a view is those views alone.
#[test]
fn views_at_parameter_bytes_carve_a_launch_without_parameter_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let capture = decode_capture(&raw, false);
    std::fs::create_dir_all(&out).unwrap();
    let by_bytes = SpecRequest {
        triton: None,
        views: [
            "q@0=f16[128]",
            "k@8=f16[128]",
            "v@16=f16[128]",
            "lengths@24=i32[3]",
            "o@32=f16[8, 16]",
        ]
        .iter()
        .map(|v| views::parse(v).unwrap())
        .collect(),
        ..request()
    };
    let written = write(&raw, &out, &capture, &by_bytes).unwrap_or_else(|e| panic!("{e}"));
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    for expected in [
        "  q: { dtype: f16, shape: [128], init: { file: inputs/q.npy } }",
        "  lengths: { dtype: i32, shape: [3], init: { file: inputs/lengths.npy } }",
        "  o: { dtype: f16, shape: [8, 16], output: true }   # 256 bytes changed by the launch",
        "    - { at: 24, tensor: lengths, offset: 0 }   # parameter 3",
        "    - { at: 32, tensor: o, offset: 0 }   # parameter 4",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    assert!(!spec.contains("buffer0"), "{spec}");
    // A name alone needs the parameters' names; a byte that holds no pointer says which do.
    for (view, says) in [
        ("o=[8, 16]", "this kernel's parameters have no names: give --source DIR"),
        ("o@40=f16[4]", "byte 40 of decode_kernel's parameters holds no pointer into a device allocation (pointers are at bytes 0, 8, 16, 24, 32)"),
    ] {
        let refused = SpecRequest {
            triton: None,
            views: vec![views::parse(view).unwrap()],
            ..request()
        };
        let e = write(&raw, &tmp.path().join("out2"), &capture, &refused).unwrap_err();
        assert!(e.contains(says), "{view}: {e}");
    }
}

/// With a reference that names its outputs, what else the launch changed is its scratch (an
/// intermediate made from its state before the launch); a reference none of whose outputs the
/// launch changed is refused, naming what it changed.
#[test]
fn a_references_outputs_alone_are_judged_and_the_rest_the_launch_changed_is_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
    let mut capture = decode_capture(&raw, false);
    // k changed too (a kernel's scratch beside its output o).
    let mut after = std::fs::read(raw.join("buffers/b0.after.bin")).unwrap();
    for b in &mut after[256..512] {
        *b = b.wrapping_add(3);
    }
    std::fs::write(raw.join("buffers/b0.after.bin"), &after).unwrap();
    capture.buffers[0].changed_bytes += 256;
    let gemm = |out: &str| {
        Some(
            repro::spec::yaml::reference_from_text(&format!(
                "{{op: gemm, a: q, b: v, out: {out}}}"
            ))
            .unwrap(),
        )
    };
    let views_of = |list: &[&str]| list.iter().map(|v| views::parse(v).unwrap()).collect();
    let all = [
        "q@0=f16[8, 8]",
        "k@8=f16[128]",
        "v@16=f16[8, 16]",
        "lengths@24=i32[3]",
        "o@32=f16[8, 16]",
    ];
    let request = SpecRequest {
        triton: None,
        views: views_of(&all),
        reference: gemm("o"),
        ..SpecRequest::default()
    };
    let written = write(&raw, &out, &capture, &request).unwrap_or_else(|e| panic!("{e}"));
    let spec = std::fs::read_to_string(&written.spec).unwrap();
    for expected in [
        "  o: { dtype: f16, shape: [8, 16], output: true }",
        "  k: { dtype: f16, shape: [128], intermediate: true, init: { file: inputs/k.npy } }   # the launch changed it and the reference judges only o",
    ] {
        assert!(spec.contains(expected), "{expected}\n{spec}");
    }
    assert_eq!(spec.matches("output: true").count(), 1, "{spec}");
    let refused = SpecRequest {
        reference: gemm("v"),
        views: views_of(&all),
        triton: None,
        ..SpecRequest::default()
    };
    let e = write(&raw, &tmp.path().join("out2"), &capture, &refused).unwrap_err();
    assert!(
        e.contains(
            "the reference judges v, and the launch left none of them changed (it changed k, o)"
        ),
        "{e}"
    );
}
