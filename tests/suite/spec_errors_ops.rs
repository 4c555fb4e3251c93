//! Spec errors of the reference ops beyond the plain GEMM (docs/spec.md, "Scaled GEMMs" and
//! "Grouped GEMMs"): block scales whose shape does not fit their blocks, group metadata outside its
//! range. Each is a spec error (exit 2) with file:line:column and the numbers, never a wrong
//! reference; the messages are snapshots. The harness checks metadata read at run time again (a
//! file, an edited spec.yaml): tested here too.

use std::path::{Path, PathBuf};

/// A valid scaled GEMM: SA per row and 128 of K, SB per 128 x 128; K = 300 ends in a partial
/// block, which has a scale of its own (3 K blocks).
const SCALED: &str = r#"version: 1
name: scaled
sizes: { M: 100, N: 200, K: 300 }
source: { include_dirs: [../kernels], includes: [fp8_scaled_gemm.cuh] }
tensors:
  A: { dtype: e4m3, shape: [M, K] }
  B: { dtype: e4m3, shape: [K, N], layout: col_major }
  SA: { dtype: f32, shape: [M, 3] }
  SB: { dtype: f32, shape: [3, 2] }
  D: { dtype: bf16, shape: [M, N], output: true }
kernel:
  name: fp8_scaled_gemm
  template_args: [128, fp8_gemm::ScaleFormat::f32]
  args: [A, B, SA, SB, D, M, N, K, "1.0f"]
  grid: ["ceil_div(M, 128) * ceil_div(N, 128)", 1, 1]
  block: [256, 1, 1]
reference:
  op: gemm
  a: A
  b: B
  out: D
  scale_a: { tensor: SA, block: [1, 128] }
  scale_b: { tensor: SB, block: [128, 128] }
build: { arch: sm_90a }
"#;

/// A valid masked grouped GEMM: G = 4 groups of up to 200 rows.
const MASKED: &str = r#"version: 1
name: masked
sizes: { M: 200, N: 100, K: 64, G: 4 }
source: { include_dirs: [../kernels], includes: [grouped_gemm.cuh] }
tensors:
  A: { dtype: bf16, shape: [G, M, K] }
  B: { dtype: bf16, shape: [G, K, N] }
  MM: { dtype: i32, shape: [G], init: { values: [170, 200, 0, 90] } }
  D: { dtype: bf16, shape: [G, M, N], output: true }
kernel:
  name: grouped_gemm_masked
  template_args: [128, 128, 32, 8, 8]
  args: [A, B, MM, D, M, N, K, G]
  grid: ["ceil_div(N, 128)", G, 1]
  block: [256, 1, 1]
  smem: 16384
reference: { op: grouped_gemm, layout: masked, a: A, b: B, out: D, masked_m: MM }
build: { arch: sm_90a }
"#;

use crate::common::{load_spec_text as load, spec_error_for as error_for};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn replaced(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "test bug: `{from}` not in the spec");
    base.replacen(from, to, 1)
}

#[test]
fn the_base_specs_are_valid() {
    let scaled = load(SCALED).expect("valid scaled spec");
    let scaled = scaled.reference.gemm().expect("a GEMM");
    let scale_b = scaled.scale_b.as_ref().expect("scale_b");
    assert_eq!(scale_b.block, [128, 128]);
    let masked = load(MASKED).expect("valid masked spec");
    let masked = masked.reference.gemm().expect("a GEMM");
    assert_eq!(masked.l, 4);
    assert_eq!(masked.m, 200);
}

#[test]
fn a_scale_tensor_whose_shape_does_not_fit_its_blocks() {
    insta::assert_snapshot!(error_for(&replaced(
        SCALED,
        "SA: { dtype: f32, shape: [M, 3] }",
        "SA: { dtype: f32, shape: [M, 2] }"
    )));
}

#[test]
fn packed_ue8m0_scales_take_a_quarter_of_the_k_blocks() {
    // Three K blocks, four to an int32: one element along K, not three.
    let text = replaced(
        SCALED,
        "SB: { dtype: f32, shape: [3, 2] }",
        "SB: { dtype: i32, shape: [3, 2] }",
    )
    .replace("block: [128, 128] }", "block: [128, 128], format: ue8m0 }");
    insta::assert_snapshot!(error_for(&text));
    let fixed = text.replace(
        "SB: { dtype: i32, shape: [3, 2] }",
        "SB: { dtype: i32, shape: [1, 2] }",
    );
    assert!(load(&fixed).is_ok(), "[ceil(3/4), 2] is the packed shape");
}

#[test]
fn ue8m0_scales_in_a_float_tensor() {
    insta::assert_snapshot!(error_for(&replaced(
        SCALED,
        "block: [1, 128] }",
        "block: [1, 128], format: ue8m0 }"
    )));
}

#[test]
fn a_scale_block_that_is_not_two_extents() {
    insta::assert_snapshot!(error_for(&replaced(
        SCALED,
        "block: [1, 128] }",
        "block: [128] }"
    )));
}

#[test]
fn a_masked_m_larger_than_m_max() {
    insta::assert_snapshot!(error_for(&replaced(
        MASKED,
        "values: [170, 200, 0, 90]",
        "values: [170, 201, 0, 90]"
    )));
}

#[test]
fn metadata_with_a_value_per_group_missing() {
    insta::assert_snapshot!(error_for(&replaced(
        MASKED,
        "values: [170, 200, 0, 90]",
        "values: [170, 200, 0]"
    )));
}

#[test]
fn metadata_made_by_a_random_generator() {
    insta::assert_snapshot!(error_for(&replaced(
        MASKED,
        "init: { values: [170, 200, 0, 90] }",
        "init: int_uniform"
    )));
}

#[test]
fn a_misspelt_op_suggests_the_right_one() {
    insta::assert_snapshot!(error_for(&replaced(
        MASKED,
        "op: grouped_gemm",
        "op: grouped_gem"
    )));
}

#[test]
fn a_field_of_another_layout() {
    insta::assert_snapshot!(error_for(&replaced(
        MASKED,
        "masked_m: MM }",
        "masked_m: MM, k_sizes: MM }"
    )));
}

/// A contiguous group index with more groups than B has: the last group's index is outside
/// [-1, G).
#[test]
fn a_group_index_outside_the_groups() {
    let text = MASKED
        .replace(
            "A: { dtype: bf16, shape: [G, M, K] }",
            "A: { dtype: bf16, shape: [M, K] }",
        )
        .replace(
            "MM: { dtype: i32, shape: [G], init: { values: [170, 200, 0, 90] } }",
            "I: { dtype: i32, shape: [M], init: { groups: [50, 50, 0, 50, 20], align: 8 } }",
        )
        .replace(
            "D: { dtype: bf16, shape: [G, M, N], output: true }",
            "D: { dtype: bf16, shape: [M, N], output: true }",
        )
        .replace("layout: masked", "layout: contiguous")
        .replace("args: [A, B, MM,", "args: [A, B, I,")
        .replace("masked_m: MM", "group_index: I");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn k_sizes_past_k_total() {
    let text = MASKED
        .replace(
            "A: { dtype: bf16, shape: [G, M, K] }",
            "A: { dtype: bf16, shape: [M, K] }",
        )
        .replace(
            "B: { dtype: bf16, shape: [G, K, N] }",
            "B: { dtype: bf16, shape: [K, N] }",
        )
        .replace(
            "MM: { dtype: i32, shape: [G], init: { values: [170, 200, 0, 90] } }",
            "KS: { dtype: i32, shape: [G], init: { values: [16, 16, 16, 17] } }",
        )
        .replace("layout: masked", "layout: k_grouped")
        .replace("args: [A, B, MM,", "args: [A, B, KS,")
        .replace("masked_m: MM", "k_sizes: KS");
    insta::assert_snapshot!(error_for(&text));
}

/// Metadata the harness reads at run time (an edited spec.yaml here; a `.npy` alike) is checked
/// by the harness itself before anything runs: exit 2, naming the element, on a machine with or
/// without a GPU.
#[test]
fn the_harness_refuses_metadata_edited_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("masked");
    let harness = crate::common::build_with_nvcc(&examples_dir().join("grouped_masked.yaml"), &out);
    let spec = out.join("spec.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    let edited = text.replacen("- 200\n", "- 500\n", 1);
    assert_ne!(
        text,
        edited,
        "test bug: masked_m 200 not found in {}",
        spec.display()
    );
    std::fs::write(&spec, edited).unwrap();
    let output = std::process::Command::new(&harness)
        .arg("--ones")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}")
            .contains("MM[1] = 500, but a masked_m must be in [0, M_max = 200]"),
        "{stdout}{stderr}"
    );
}

/// The fp8 grouped GEMM with block scales of examples/ (contiguous, f32 scales).
fn grouped_scaled() -> String {
    std::fs::read_to_string(examples_dir().join("fp8_grouped_contiguous.yaml")).unwrap()
}

#[test]
fn grouped_scales_are_valid_and_resolved() {
    let spec = load(&grouped_scaled()).expect("valid grouped scaled spec");
    let gemm = spec.reference.gemm().expect("a GEMM");
    assert!(gemm.grouped.is_some());
    assert_eq!(gemm.scale_a.as_ref().map(|s| s.block), Some([1, 128]));
    assert_eq!(gemm.scale_b.as_ref().map(|s| s.block), Some([128, 128]));
}

#[test]
fn grouped_weight_scales_without_their_group_dimension() {
    insta::assert_snapshot!(error_for(&replaced(
        &grouped_scaled(),
        r#"SB: { dtype: f32, shape: [G, "ceil_div(K, 128)", "ceil_div(N, 128)"]"#,
        r#"SB: { dtype: f32, shape: ["ceil_div(K, 128)", "ceil_div(N, 128)"]"#
    )));
}

#[test]
fn grouped_rows_that_begin_inside_a_scale_block() {
    // align 128 with scale_a blocks of 256 rows (and SA sized for them).
    let text = replaced(
        &grouped_scaled(),
        "scale_a: { tensor: SA, block: [1, 128] }",
        "scale_a: { tensor: SA, block: [256, 128] }",
    );
    let text = replaced(
        &text,
        r#"SA: { dtype: f32, shape: [M, "ceil_div(K, 128)"]"#,
        r#"SA: { dtype: f32, shape: ["ceil_div(M, 256)", "ceil_div(K, 128)"]"#,
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn k_grouped_extents_off_the_scale_blocks() {
    let text = r#"version: 1
name: kgrouped_scaled
sizes: { M: 64, N: 128, K: 512, G: 3 }
source: { include_dirs: [../kernels], includes: [grouped_gemm.cuh] }
tensors:
  A: { dtype: e4m3, shape: [M, K] }
  B: { dtype: e4m3, shape: [K, N] }
  KS: { dtype: i32, shape: [G], init: { values: [128, 200, 184] } }
  SA: { dtype: f32, shape: [M, 4] }
  SB: { dtype: f32, shape: [4, 1] }
  D: { dtype: f32, shape: [G, M, N], output: true }
kernel:
  name: grouped_gemm_k
  template_args: [128, 128, 32, 8, 8]
  args: [A, B, KS, D, M, N, K, G]
  grid: [1, G, 1]
  block: [256, 1, 1]
reference:
  op: grouped_gemm
  layout: k_grouped
  a: A
  b: B
  out: D
  k_sizes: KS
  scale_a: { tensor: SA, block: [1, 128] }
  scale_b: { tensor: SB, block: [128, 128] }
build: { arch: sm_90a }
"#;
    insta::assert_snapshot!(error_for(text));
    let fixed = text.replace("[128, 200, 184]", "[128, 256, 128]");
    assert!(load(&fixed).is_ok(), "whole K blocks are fine");
}

/// The grouped GEMM that adds into its output (examples/fp8_grouped_masked_accumulate.yaml).
fn grouped_accumulate() -> String {
    std::fs::read_to_string(examples_dir().join("fp8_grouped_masked_accumulate.yaml")).unwrap()
}

#[test]
fn an_output_that_starts_as_c_is_resolved() {
    let spec = load(&grouped_accumulate()).expect("valid accumulating spec");
    let gemm = spec.reference.gemm().expect("a GEMM");
    assert!(gemm.accumulate);
    assert_eq!(gemm.beta, 1.0);
    assert!(gemm.c.is_some());
}

#[test]
fn accumulate_without_c() {
    let text = replaced(&grouped_accumulate(), "  c: C\n", "");
    let text = replaced(&text, "  beta: 1.0\n", "");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn accumulate_into_an_output_of_another_dtype() {
    insta::assert_snapshot!(error_for(&replaced(
        &grouped_accumulate(),
        "C:  { dtype: bf16, shape: [G, M, N], range: [-8, 8] }",
        "C:  { dtype: f32, shape: [G, M, N], range: [-8, 8] }"
    )));
}

/// The k-grouped GEMM whose groups are stored as blocks (examples/fp8_k_grouped_blocks.yaml).
fn k_grouped_blocks() -> String {
    std::fs::read_to_string(examples_dir().join("fp8_k_grouped_blocks.yaml")).unwrap()
}

#[test]
fn k_grouped_blocks_take_m_from_the_output_and_k_from_a() {
    let spec = load(&k_grouped_blocks()).expect("valid k_grouped_blocks spec");
    let gemm = spec.reference.gemm().expect("a GEMM");
    assert_eq!((gemm.l, gemm.m, gemm.n, gemm.k), (4, 200, 136, 1408));
    assert_eq!(gemm.scale_b.as_ref().map(|s| s.block), Some([128, 1]));
}

#[test]
fn k_grouped_blocks_with_a_weight_scale_block_of_many_columns() {
    let text = replaced(
        &k_grouped_blocks(),
        "scale_b: { tensor: SB, block: [128, 1] }",
        "scale_b: { tensor: SB, block: [128, 128] }",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn k_grouped_blocks_whose_a_is_not_m_rows() {
    insta::assert_snapshot!(error_for(&replaced(
        &k_grouped_blocks(),
        r#"A:  { dtype: e4m3, shape: ["M * K"] }"#,
        r#"A:  { dtype: e4m3, shape: ["M * K + 1"] }"#
    )));
}

/// A CUTLASS grouped blockwise-scaled fp8 GEMM (examples/cutlass_grouped_fp8_blockwise.yaml).
fn cutlass_grouped_scaled() -> String {
    std::fs::read_to_string(examples_dir().join("cutlass_grouped_fp8_blockwise.yaml")).unwrap()
}

#[test]
fn a_cutlass_grouped_gemm_takes_block_scales() {
    // The harness passes a grouped kernel group g's scale pointers and layouts (cutlass3.h).
    let spec = load(&cutlass_grouped_scaled()).expect("a CUTLASS grouped GEMM with block scales");
    let r = spec.reference.gemm().expect("a GEMM");
    assert!(r.grouped.is_some());
    assert_eq!(r.scale_a.as_ref().map(|s| s.block), Some([1, 128]));
    assert_eq!(r.scale_b.as_ref().map(|s| s.block), Some([128, 128]));
}

#[test]
fn a_cutlass_grouped_gemm_with_ue8m0_block_scales() {
    // CUTLASS's blockwise mainloop reads f32 scales: ue8m0 bytes are refused when the spec is
    // read, not passed as floats.
    let text = replaced(
        &cutlass_grouped_scaled(),
        r#"SA: { dtype: f32, shape: [G, M, "ceil_div(K, 128)"], range: [0.5, 2.0] }"#,
        r#"SA: { dtype: u8, shape: [G, M, "ceil_div(K, 128)"] }"#,
    );
    let text = replaced(
        &text,
        "scale_a: { tensor: SA, block: [1, 128] }",
        "scale_a: { tensor: SA, block: [1, 128], format: ue8m0 }",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn a_cutlass_grouped_gemm_with_c() {
    // The harness passes a grouped kernel no per-group C pointers: refused, not run without C.
    let text = replaced(
        &cutlass_grouped_scaled(),
        "  D:  { dtype: bf16, shape: [G, M, N], output: true }",
        "  C:  { dtype: bf16, shape: [G, M, N] }\n  D:  { dtype: bf16, shape: [G, M, N], output: true }",
    );
    let text = replaced(
        &text,
        "  masked_m: MM\n",
        "  masked_m: MM\n  c: C\n  beta: 1.0\n",
    );
    insta::assert_snapshot!(error_for(&text));
}

/// SCALED with a batch dimension: L = 3 batches, each with its own scales ([L, ...]).
fn batched_scaled() -> String {
    SCALED
        .replace("sizes: { M: 100,", "sizes: { L: 3, M: 100,")
        .replace("shape: [M, K]", "shape: [L, M, K]")
        .replace("shape: [K, N]", "shape: [L, K, N]")
        .replace("shape: [M, N]", "shape: [L, M, N]")
        .replace(
            "SA: { dtype: f32, shape: [M, 3] }",
            "SA: { dtype: f32, shape: [L, M, 3] }",
        )
        .replace(
            "SB: { dtype: f32, shape: [3, 2] }",
            "SB: { dtype: f32, shape: [L, 3, 2] }",
        )
}

#[test]
fn a_batched_gemm_takes_scales_per_batch_or_shared() {
    let per_batch = load(&batched_scaled()).expect("[L, ...] scales");
    let r = per_batch.reference.gemm().expect("a GEMM");
    assert!(r.batched && r.l == 3);
    assert_eq!(r.scale_a.as_ref().expect("scale_a").block, [1, 128]);
    // SB shared by every batch: the 2-D shape.
    let shared = replaced(
        &batched_scaled(),
        "SB: { dtype: f32, shape: [L, 3, 2] }",
        "SB: { dtype: f32, shape: [3, 2] }",
    );
    assert!(load(&shared).is_ok(), "2-D scales are every batch's");
    // Packed ue8m0 per batch: [L, ceil(3/4), 2].
    let packed = replaced(
        &batched_scaled(),
        "SB: { dtype: f32, shape: [L, 3, 2] }",
        "SB: { dtype: i32, shape: [L, 1, 2] }",
    )
    .replace("block: [128, 128] }", "block: [128, 128], format: ue8m0 }");
    let packed = load(&packed).expect("packed ue8m0 [L, ...] scales");
    let scale_b = packed.reference.gemm().and_then(|r| r.scale_b.clone());
    assert!(scale_b.expect("scale_b").packed);
}

#[test]
fn batched_scales_whose_batch_count_is_not_l() {
    insta::assert_snapshot!(error_for(&replaced(
        &batched_scaled(),
        "SA: { dtype: f32, shape: [L, M, 3] }",
        "SA: { dtype: f32, shape: [2, M, 3] }"
    )));
}

#[test]
fn batched_scales_whose_blocks_do_not_fit() {
    insta::assert_snapshot!(error_for(&replaced(
        &batched_scaled(),
        "SB: { dtype: f32, shape: [L, 3, 2] }",
        "SB: { dtype: f32, shape: [L, 2, 2] }"
    )));
}

#[test]
fn scales_with_a_batch_dimension_on_a_gemm_without_one() {
    insta::assert_snapshot!(error_for(&replaced(
        SCALED,
        "SA: { dtype: f32, shape: [M, 3] }",
        "SA: { dtype: f32, shape: [2, M, 3] }"
    )));
}

#[test]
fn a_cutlass_batched_gemm_with_block_scales() {
    // cutlass3.h passes CUTLASS one batch's scale layout: refused, not run with batch 0's scales
    // for every batch.
    let text = std::fs::read_to_string(examples_dir().join("cutlass_fp8_blockwise.yaml")).unwrap();
    let text = replaced(&text, "sizes: { M: 1252,", "sizes: { L: 2, M: 1252,")
        .replace("shape: [M, K]", "shape: [L, M, K]")
        .replace("shape: [K, N]", "shape: [L, K, N]")
        .replace("shape: [M, N]", "shape: [L, M, N]")
        .replace(
            "shape: [M, \"ceil_div(K, 128)\"]",
            "shape: [L, M, \"ceil_div(K, 128)\"]",
        );
    insta::assert_snapshot!(error_for(&text));
}
