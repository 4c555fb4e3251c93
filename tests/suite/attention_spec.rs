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
        "Q: { dtype: bf16, shape: [B, S, HQ, D] }",
        "Q: { dtype: bf16, shape: [B, S, HQ, D], output: true }"
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
