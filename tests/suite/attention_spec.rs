//! `op: attention` specs: the example loads with the tensors, mask and scale it names, and each
//! way of getting the tensors wrong is a spanned error (snapshots).

use crate::common::{load_spec_text as load, repo, spec_error_for as error_for};

fn example() -> String {
    std::fs::read_to_string(repo().join("examples/flash_attention.yaml")).expect("the example")
}

fn replace(from: &str, to: &str) -> String {
    let text = example();
    assert!(text.contains(from), "test bug: `{from}` not in the example");
    text.replacen(from, to, 1)
}

#[test]
fn the_example_names_its_tensors_mask_and_scale() {
    let spec = load(&example()).expect("valid");
    let repro::spec::Reference::Attention(a) = &spec.reference else {
        panic!("not an attention reference: {:?}", spec.reference.op());
    };
    let name = |i: usize| spec.tensors[i].name.as_str();
    assert_eq!(
        (name(a.q), name(a.k), name(a.v), name(a.out)),
        ("Q", "K", "V", "O")
    );
    assert_eq!(a.lse.map(name), Some("LSE"));
    assert_eq!(a.causal, repro::spec::model::CausalMask::TopLeft);
    assert_eq!(a.softmax_scale, Some(0.125));
    assert_eq!(spec.reference.outputs().len(), 2);
}

#[test]
fn query_heads_that_are_no_multiple_of_the_kv_heads() {
    insta::assert_snapshot!(error_for(&replace("HK: 2", "HK: 3")));
}

#[test]
fn a_query_tensor_marked_as_output() {
    insta::assert_snapshot!(error_for(&replace(
        "shape: [B, HQ, S, D], strides: [\"S * HQ * D\", D, \"HQ * D\", 1] }",
        "shape: [B, HQ, S, D], strides: [\"S * HQ * D\", D, \"HQ * D\", 1], output: true }"
    )));
}

#[test]
fn an_lse_of_the_wrong_shape() {
    insta::assert_snapshot!(error_for(&replace(
        "LSE: { dtype: f32, shape: [B, HQ, S]",
        "LSE: { dtype: f32, shape: [B, S, HQ]"
    )));
}

#[test]
fn one_cu_seqlens_without_the_other() {
    let text = replace(
        "  LSE: { dtype: f32",
        "  CQ: { dtype: i32, shape: [3], init: { values: [0, 100, 256] } }\n  LSE: { dtype: f32",
    )
    .replacen(
        "  causal: top_left",
        "  causal: top_left\n  cu_seqlens_q: CQ",
        1,
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn an_unknown_causal_alignment() {
    insta::assert_snapshot!(error_for(&replace("causal: top_left", "causal: top_right")));
}

#[test]
fn attention_fields_under_a_gemm_reference() {
    insta::assert_snapshot!(error_for(&replace("  op: attention", "  op: gemm")));
}

/// The example turned into a backward spec: O and LSE become inputs, dO one more, and the
/// gradients of Q, K and V the outputs.
fn backward() -> String {
    let text = example()
        .replace(
            "  O: { dtype: bf16, shape: [B, HQ, S, D], strides: [\"S * HQ * D\", D, \"HQ * D\", 1], output: true }\n  LSE: { dtype: f32, shape: [B, HQ, S], output: true }",
            "  O: { dtype: bf16, shape: [B, HQ, S, D] }\n  LSE: { dtype: f32, shape: [B, HQ, S] }\n  DO: { dtype: bf16, shape: [B, HQ, S, D] }\n  DQ: { dtype: f32, shape: [B, HQ, S, D], output: true }\n  DK: { dtype: f32, shape: [B, HK, S, D], output: true }\n  DV: { dtype: f32, shape: [B, HK, S, D], output: true }",
        )
        .replace("  op: attention\n", "  op: attention_backward\n")
        .replace("  out: O\n", "  o: O\n  do: DO\n  dq: DQ\n  dk: DK\n  dv: DV\n")
        // A backward kernel's launch (loaded, not built: the kernel is not in kernels/ yet).
        .replace(
            "  name: attention_kernels::flash_forward\n",
            "  name: attention_kernels::flash_backward\n",
        )
        .replace(
            "args: [Q, K, V, O, LSE, nullptr, nullptr, S, S, HQ, HK, \"0.125f\", \"attention_kernels::kTopLeft\"]",
            "args: [Q, K, V, O, LSE, DO, DQ, DK, DV, S, HQ, HK]",
        );
    assert!(
        text.contains("dq: DQ") && text.contains("DV: {"),
        "test bug: the example changed"
    );
    text
}

#[test]
fn a_backward_spec_names_its_gradients() {
    let spec = load(&backward()).expect("valid");
    assert_eq!(spec.reference.op(), "attention_backward");
    let repro::spec::Reference::Attention(a) = &spec.reference else {
        panic!("not an attention reference");
    };
    let g = a.backward.expect("gradients");
    let name = |i: usize| spec.tensors[i].name.as_str();
    assert_eq!(
        (
            name(a.out),
            name(g.d_out),
            name(g.dq),
            name(g.dk),
            name(g.dv)
        ),
        ("O", "DO", "DQ", "DK", "DV")
    );
    let outputs: Vec<&str> = spec.reference.outputs().into_iter().map(name).collect();
    assert_eq!(outputs, ["DQ", "DK", "DV"]);
}

#[test]
fn a_backward_gradient_shaped_as_the_queries_for_a_key() {
    let text = backward().replace(
        "DK: { dtype: f32, shape: [B, HK, S, D]",
        "DK: { dtype: f32, shape: [B, HQ, S, D]",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn sequence_offsets_past_the_packed_rows() {
    let text = std::fs::read_to_string(repo().join("examples/flash_attention_varlen.yaml"))
        .unwrap()
        .replace("values: [0, 120, 376, 440]", "values: [0, 120, 376, 441]");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn the_varlen_example_names_its_offsets() {
    let text =
        std::fs::read_to_string(repo().join("examples/flash_attention_varlen.yaml")).unwrap();
    let spec = load(&text).expect("valid");
    let repro::spec::Reference::Attention(a) = &spec.reference else {
        panic!("not an attention reference");
    };
    assert_eq!(
        a.cu_seqlens_q.map(|i| spec.tensors[i].name.as_str()),
        Some("CQ")
    );
    assert_eq!(a.causal, repro::spec::model::CausalMask::BottomRight);
}

#[test]
fn the_forward_may_ask_for_the_device_reference() {
    // The runtime reads `provider` from spec.yaml itself; here it only has to be accepted.
    load(&replace(
        "  softmax_scale: 0.125",
        "  softmax_scale: 0.125\n  provider: device",
    ))
    .expect("valid");
}

#[test]
fn attention_has_no_emulated_reference() {
    let text = backward().replace(
        "  softmax_scale: 0.125",
        "  softmax_scale: 0.125\n  provider: emulated",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn the_backward_has_no_device_reference() {
    let text = backward().replace(
        "  softmax_scale: 0.125",
        "  softmax_scale: 0.125\n  provider: device",
    );
    insta::assert_snapshot!(error_for(&text));
}
