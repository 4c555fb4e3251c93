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

/// tests/gpu/replay_sequence.yaml: an operator of two replayed launches (`kind: replay` in
/// `launches:`), each from its own cubin with its own parameter bytes (tests/gpu/replay/), builds
/// with nvcc: one function a launch, each with its own relocation table and its path in
/// spec.yaml, and none records events (the runtime times the call around both). On a GPU:
/// `repro run tests/gpu/replay_sequence.yaml --ones` gives Y = 10 everywhere, bit for bit.
#[test]
fn an_operator_of_two_replayed_launches_builds_with_nvcc() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    let spec = common::repo().join("tests/gpu/replay_sequence.yaml");
    common::build_with_nvcc(&spec, &out);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for expected in [
        "#include <repro/replay.h>",
        "// ---- launch 1 of 2 (spec: launches[0], kind: replay) ----",
        "const repro::ReplayPointer kReplayPointers_0[] = {",
        "const repro::ReplayPointer kReplayPointers_1[] = {",
        "repro_kernel.path = \"launches[0]\";",
        "repro_kernel.path = \"launches[1]\";",
        "repro::Launch launch_1(const repro::TensorView* repro_tensors, const int64_t* /*sizes*/, cudaStream_t repro_stream) {",
        "repro::replay_launch(repro_kernel, repro_tensors, repro_launch, repro_stream);",
        "{\"_ZN23replay_sequence_kernels10square_addEPKfS1_Pf\", &launch_1},",
    ] {
        assert!(harness.contains(expected), "{expected}\n{harness}");
    }
    assert!(!harness.contains("cudaEventRecord"), "{harness}");
    // The artifact's spec.yaml gives each launch its own files, which the harness reads.
    let written = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    for file in [
        "scale_add.cubin",
        "scale_add.params.bin",
        "square_add.cubin",
        "square_add.params.bin",
    ] {
        assert!(
            written.contains(&format!("replay/{file}")),
            "{file}\n{written}"
        );
    }
    // Each committed cubin holds the symbol its launch names (replay/make.sh compiles one kernel
    // into each): a module with both would hide a launch loading the other's.
    let resolved = repro::spec::load(&spec, &repro::machine::Machine).unwrap();
    for (launch, other) in [(0, 1), (1, 0)] {
        let repro::spec::LaunchKind::Replay(replay) = &resolved.launches[launch].kind else {
            panic!("launch {launch} is replayed");
        };
        let cubin = std::fs::read(&replay.cubin).unwrap();
        let holds = |symbol: &str| cubin.windows(symbol.len()).any(|w| w == symbol.as_bytes());
        assert!(holds(&resolved.launches[launch].name), "launch {launch}");
        assert!(!holds(&resolved.launches[other].name), "launch {launch}");
    }
}

/// tests/gpu/replay_sequence_mixed.yaml: a launch built from source, then a replayed one, build
/// with nvcc into one sequence. On a GPU: `repro run tests/gpu/replay_sequence_mixed.yaml --ones`
/// gives Y = 10 everywhere.
#[test]
fn a_sequence_of_a_source_launch_and_a_replayed_one_builds_with_nvcc() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("art");
    common::build_with_nvcc(
        &common::repo().join("tests/gpu/replay_sequence_mixed.yaml"),
        &out,
    );
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    for expected in [
        "#include <repro/replay.h>",
        "repro::Launch launch_0(const repro::TensorView* repro_tensors, const int64_t* repro_sizes, cudaStream_t repro_stream) {",
        "cudaLaunchKernelEx(&repro_config, repro_kernel, X, W);",
        "// ---- launch 2 of 2 (spec: launches[1], kind: replay) ----",
        "repro_kernel.path = \"launches[1]\";",
        "const repro::LaunchStep kLaunches[] = {",
    ] {
        assert!(harness.contains(expected), "{expected}\n{harness}");
    }
    assert!(!harness.contains("cudaEventRecord"), "{harness}");
}
