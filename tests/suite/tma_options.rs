//! Every TMA descriptor option a spec can set reaches harness.cu as the driver's constant, and
//! the spec that sets them all (tests/gpu/tma_options.yaml) builds with the real nvcc. No example
//! uses swizzle 32B or 64B, L2 promotion 64B or 128B, an element stride, a NaN out-of-bounds fill
//! or an interleave; on a GPU the same spec checks that each one does what the driver documents
//! (scripts/gpu-check.sh, part `hopper`).

use crate::common;

#[test]
fn every_tma_option_builds_with_nvcc_and_reaches_the_encode_call() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    common::build_with_nvcc(&common::repo().join("tests/gpu/tma_options.yaml"), &out);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for expected in [
        "CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
        "CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        // [8, 16] rows x columns with element strides [2, 1]: the driver's order is innermost first.
        "/*box*/ {16, 8}, /*element strides*/ {1, 2}",
        "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA",
        "CU_TENSOR_MAP_INTERLEAVE_16B",
        "/*box*/ {4, 16, 2}",
    ] {
        assert!(harness.contains(expected), "{expected}\n{harness}");
    }
}
