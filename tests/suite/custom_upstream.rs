//! `reference.upstream` (docs/spec.md, "Outputs computed from other outputs"): which outputs an
//! `op: custom` output is computed from. The spec's errors are snapshots; how the harness judges
//! with it is the runtime self-test's (tests/cpp/ops_checks.h) and the GPU script's.

use crate::common::{load_spec_text as load, spec_error_for as error_for};

/// The layer-norm example's tensors and reference, in a spec of its own.
const LAYER_NORM: &str = r#"version: 1
name: norm
sizes: { R: 100, N: 320 }
source: { include_dirs: [../kernels], includes: [layer_norm.cuh] }
tensors:
  X: { dtype: f32, shape: [R, N] }
  W: { dtype: f32, shape: [N] }
  B: { dtype: f32, shape: [N] }
  Y: { dtype: f32, shape: [R, N], output: true }
  Mean: { dtype: f32, shape: [R], output: true }
  Rstd: { dtype: f32, shape: [R], output: true }
kernel:
  name: layer_norm
  args: [X, W, B, Y, Mean, Rstd, N, "1e-5f"]
  grid: [R, 1, 1]
  block: [256, 1, 1]
reference:
  op: custom
  source: references/layer_norm.h
  function: layer_norm_reference
  upstream: { Rstd: [Mean], Y: [Mean, Rstd] }
build: { arch: sm_90a }
"#;

fn with_upstream(upstream: &str) -> String {
    let from = "  upstream: { Rstd: [Mean], Y: [Mean, Rstd] }\n";
    assert!(LAYER_NORM.contains(from));
    LAYER_NORM.replacen(from, upstream, 1)
}

#[test]
fn upstream_outputs_resolve_to_tensor_indices() {
    let spec = load(LAYER_NORM).unwrap_or_else(|e| panic!("{e}"));
    let repro::spec::Reference::Custom(c) = &spec.reference else {
        panic!("not a custom reference");
    };
    assert_eq!(c.outputs, vec![3, 4, 5]);
    assert_eq!(c.upstream, vec![(5, vec![4]), (3, vec![4, 5])]);
    let none = load(&with_upstream("")).unwrap_or_else(|e| panic!("{e}"));
    let repro::spec::Reference::Custom(c) = &none.reference else {
        panic!("not a custom reference");
    };
    assert!(c.upstream.is_empty());
}

#[test]
fn an_upstream_name_that_is_no_tensor() {
    insta::assert_snapshot!(error_for(&with_upstream(
        "  upstream: { Y: [Mean, Rstdd] }\n"
    )));
}

#[test]
fn an_upstream_key_that_is_an_input() {
    insta::assert_snapshot!(error_for(&with_upstream("  upstream: { X: [Mean] }\n")));
}

#[test]
fn an_output_that_is_its_own_upstream() {
    insta::assert_snapshot!(error_for(&with_upstream("  upstream: { Y: [Y] }\n")));
}

#[test]
fn an_empty_upstream_list() {
    insta::assert_snapshot!(error_for(&with_upstream("  upstream: { Y: [] }\n")));
}

#[test]
fn upstream_outputs_in_a_circle() {
    insta::assert_snapshot!(error_for(&with_upstream(
        "  upstream: { Mean: [Y], Rstd: [Mean], Y: [Rstd] }\n"
    )));
}

#[test]
fn upstream_belongs_to_op_custom() {
    let file = with_upstream("  upstream: { Y: [Mean] }\n").replacen(
        "  source: references/layer_norm.h\n  function: layer_norm_reference\n",
        "  expected: { Y: y.npy, Mean: m.npy, Rstd: r.npy }\n",
        1,
    );
    let file = file.replacen("op: custom", "op: file", 1);
    let error = error_for(&file);
    assert!(
        error.contains("`upstream` belongs to `op: custom`, not `op: file`"),
        "{error}"
    );
    let gemm = with_upstream("  upstream: { Y: [Mean] }\n").replacen(
        "  op: custom\n  source: references/layer_norm.h\n  function: layer_norm_reference\n",
        "  op: gemm\n  a: X\n  b: W\n  out: Y\n",
        1,
    );
    let error = error_for(&gemm);
    assert!(
        error.contains("`upstream` belongs to `op: custom`, not `op: gemm`"),
        "{error}"
    );
}
