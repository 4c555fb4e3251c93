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

/// tests/gpu/operator_launches.yaml: an operator of three launches with every launch feature a
/// sequence may use (a cluster, a `kind: device` task whose setup reads a size, a size in
/// `template_args`, an output reached only through a `tma:` descriptor) builds with nvcc; each
/// launch has its own function, the device entries their own names, and the descriptor is
/// encoded by the one launch that takes it.
#[test]
fn an_operator_of_several_launches_with_every_launch_feature_builds_with_nvcc() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    common::build_with_nvcc(
        &common::repo().join("tests/gpu/operator_launches.yaml"),
        &out,
    );
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for expected in [
        "repro::Launch launch_0(",
        "repro::Launch launch_2(",
        "cudaLaunchAttributeClusterDimension",
        "__global__ void repro_device_entry_1(",
        "//   launches[2].template_args[0] (`N`): `N`",
        "constexpr int N = 256;",
        "{\"W\", repro::DType::f32, false, repro::Lifetime::call}",
        "const repro::LaunchStep kLaunches[] = {",
    ] {
        assert!(harness.contains(expected), "{expected}\n{harness}");
    }
    assert_eq!(
        harness.matches("= repro::encode_tma(map_d_request").count(),
        1,
        "map_d is encoded by launch 3 alone\n{harness}"
    );
}
