//! The specs of tests/gpu/ that cover what no example does build with the real nvcc (a spec
//! feature no nvcc-compiled test exercises is not done); scripts/gpu-check.sh runs them on a GPU.

use crate::common;

/// tests/gpu/tma_options.yaml: every TMA descriptor option no example sets (swizzle 32B or 64B,
/// L2 promotion 64B or 128B, an element stride, a NaN out-of-bounds fill, an interleave) reaches
/// harness.cu as the driver's constant (on a GPU: part `hopper`, box sums by the driver's rules).
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

/// tests/gpu/every_dtype.yaml: a tensor of each of the 13 dtypes, taken by the kernel as the C++
/// type of its size (the harness's compile-time check), copied to an output of its dtype (on a
/// GPU: part `custom`, every dtype made, poisoned and compared).
#[test]
fn a_tensor_of_every_dtype_builds_with_nvcc() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = repro::spec::load(
        &common::repo().join("tests/gpu/every_dtype.yaml"),
        &repro::machine::Machine,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut dtypes: Vec<_> = spec.tensors.iter().map(|t| t.dtype).collect();
    dtypes.sort_by_key(|d| d.name());
    dtypes.dedup();
    assert_eq!(
        dtypes.len(),
        repro::spec::dtype::DType::ALL.len(),
        "a tensor of every dtype"
    );
    common::build_with_nvcc(
        &common::repo().join("tests/gpu/every_dtype.yaml"),
        &tmp.path().join("art"),
    );
}
