//! Kernels that are no GEMM (docs/spec.md, "Kernels that are no GEMM"): `op: custom` (a host C++
//! reference of the user's) and `op: file` (expected outputs as .npy). Their spec errors are
//! snapshots; the references' own failures (an output left unwritten, an index outside a tensor, a
//! header that does not compile, an expected file that does not fit) are tested end to end with the
//! real nvcc: the reference runs before the harness looks for a GPU, so they show on this machine.

use std::path::Path;

use crate::common::{load_spec_text as load, nvcc, spec_error_for as error_for};

/// A valid custom-reference spec over the column-sum example's kernel and reference.
const CUSTOM: &str = r#"version: 1
name: colsum
sizes: { B: 100, N: 1000 }
source: { include_dirs: [../kernels], includes: [column_sum.cuh] }
tensors:
  X: { dtype: f32, shape: [B, N] }
  D: { dtype: f32, shape: [N], output: true }
kernel:
  name: column_sum
  args: [X, D, B, N]
  grid: ["ceil_div(N, 32)", 1, 1]
  block: [32, 8, 1]
reference:
  op: custom
  source: references/column_sum.h
  function: column_sum_reference
  block: [32]
build: { arch: sm_90a }
"#;

fn replaced(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "test bug: `{from}` not in the spec");
    base.replacen(from, to, 1)
}

#[test]
fn the_base_spec_is_valid() {
    let spec = load(CUSTOM).unwrap_or_else(|e| panic!("{e}"));
    let repro::spec::Reference::Custom(c) = &spec.reference else {
        panic!("not a custom reference");
    };
    assert_eq!(c.function, "column_sum_reference");
    assert_eq!(c.outputs, vec![1]);
    assert_eq!(c.block, vec![32]);
    assert!(c.source.ends_with("references/column_sum.h"));
}

#[test]
fn a_custom_reference_without_its_function() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "  function: column_sum_reference\n",
        ""
    )));
}

#[test]
fn a_function_that_is_no_cpp_name() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "function: column_sum_reference",
        "function: \"column_sum_reference(); system(\\\"x\\\")\""
    )));
}

#[test]
fn a_reference_header_that_does_not_exist() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "references/column_sum.h",
        "references/no_such.h"
    )));
}

#[test]
fn a_gemm_field_on_a_custom_reference() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "  block: [32]\n",
        "  block: [32]\n  a: X\n  tile: [32, 32]\n"
    )));
}

#[test]
fn a_block_longer_than_the_output_rank() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "block: [32]",
        "block: [8, 32]"
    )));
}

/// The block is checked against every output it localizes, not the first listed (issue 59): a
/// rank-1 output listed before a rank-2 one takes a two-extent block (the runtime covers its only
/// dimension with the second extent); only a block longer than every output's rank is refused.
#[test]
fn a_block_is_checked_against_every_output() {
    let two = replaced(
        CUSTOM,
        "  D: { dtype: f32, shape: [N], output: true }\n",
        "  D: { dtype: f32, shape: [N], output: true }\n  E: { dtype: f32, shape: [B, N], output: true }\n",
    )
    .replace("block: [32]", "block: [1, 32]")
    .replace("args: [X, D, B, N]", "args: [X, D, B, N, E]");
    load(&two).unwrap_or_else(|e| panic!("{e}"));
    let flat = two.replace("shape: [B, N], output: true", "shape: [N], output: true");
    let error = error_for(&flat);
    assert!(error.contains("ranks: `D` 1, `E` 1), not 2"), "{error}");
}

#[test]
fn a_device_provider_for_a_host_reference() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "  block: [32]\n",
        "  block: [32]\n  provider: device\n"
    )));
}

#[test]
fn an_emulated_provider_for_a_host_reference() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "  block: [32]\n",
        "  block: [32]\n  provider: emulated\n"
    )));
}

#[test]
fn a_gemm_without_its_operands_names_the_ops_for_other_kernels() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "  op: custom\n  source: references/column_sum.h\n  function: column_sum_reference\n  block: [32]\n",
        "  op: gemm\n  out: D\n"
    )));
}

#[test]
fn a_file_reference_must_name_every_output_and_only_outputs() {
    let text = replaced(
        CUSTOM,
        "  op: custom\n  source: references/column_sum.h\n  function: column_sum_reference\n",
        "  op: file\n  expected: { X: references/column_sum.h, E: x.npy }\n",
    );
    insta::assert_snapshot!(error_for(&text));
}

/// A small self-contained op: y = 2x and z = x + 1 over N elements, its reference in refs/.
pub(crate) fn write_op(dir: &Path, reference_body: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("k")).unwrap();
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(
        dir.join("k/twice.cuh"),
        "#pragma once\n__global__ void twice(const float* x, float* y, float* z, int n) {\n  \
         const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  \
         if (i < n) { y[i] = 2.0f * x[i]; z[i] = x[i] + 1.0f; }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("refs/twice.h"),
        format!(
            "#pragma once\n#include <repro/reference.h>\n\
             inline void twice_reference(repro::In x, repro::Out y, repro::Out z) {{\n  \
             for (int64_t i = 0; i < x.shape(0); ++i) {{ {reference_body} }}\n}}\n"
        ),
    )
    .unwrap();
    let spec = dir.join("twice.yaml");
    std::fs::write(
        &spec,
        "version: 1\nname: twice\nsizes: { N: 1000 }\n\
         source: { include_dirs: [k], includes: [twice.cuh] }\n\
         tensors:\n  x: { dtype: f32, shape: [N] }\n  y: { dtype: f32, shape: [N], output: true }\n  \
         z: { dtype: f32, shape: [N], output: true }\n\
         kernel: { name: twice, args: [x, y, z, N], grid: [\"ceil_div(N, 256)\", 1, 1], block: [256, 1, 1] }\n\
         reference: { op: custom, source: refs/twice.h, function: twice_reference, block: [256] }\n\
         build: { arch: sm_90a }\n",
    )
    .unwrap();
    spec
}

fn repro_build(spec: &Path, out: &Path) -> assert_cmd::assert::Assert {
    assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .args([
            "build",
            spec.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--nvcc",
        ])
        .arg(nvcc())
        .assert()
}

fn harness(out: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(out.join("harness"))
        .args(args)
        .output()
        .expect("the harness runs")
}

#[test]
fn a_custom_reference_is_built_with_the_runtime_flags_and_its_failures_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("art");
    // A correct reference: the harness builds, computes it, and only then needs a GPU.
    let spec = write_op(dir.path(), "y(i) = 2 * x(i); z.at(i) = x(i) + 1;");
    repro_build(&spec, &out).success();
    let build_sh = std::fs::read_to_string(out.join("build.sh")).unwrap();
    assert!(
        build_sh.contains("-std=c++17 -O3 \"${host_compiler[@]}\" -Iruntime/include -c -o .repro/build/reference.o reference.cu"),
        "{build_sh}"
    );
    let reference_cu = std::fs::read_to_string(out.join("reference.cu")).unwrap();
    assert!(
        reference_cu.contains("twice_reference(\n      repro::In(tensors[0]),  // x f32 [N]"),
        "{reference_cu}"
    );
    let run = harness(&out, &[]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.code() == Some(7) || run.status.code() == Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );

    // An output element left unwritten, then an index outside a tensor: exit 2, named.
    for (body, says) in [
        (
            "y(i) = 2 * x(i); if (i < 990) z(i) = x(i) + 1;",
            "the custom reference wrote no value to z[990] (and 9 more of its 1000 elements)",
        ),
        (
            "y(i) = 2 * x(i); z(i + 1) = x(i) + 1;",
            "the custom reference indexed z(1000): index 1000 is outside dimension 0 of [1000]",
        ),
        (
            "y(i, 0) = 2 * x(i); z(i) = x(i) + 1;",
            "the custom reference indexed y(",
        ),
    ] {
        write_op(dir.path(), body);
        repro_build(&spec, &out).success();
        let run = harness(&out, &[]);
        let text = String::from_utf8_lossy(&run.stdout);
        assert_eq!(run.status.code(), Some(2), "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
        assert!(text.contains("Disposition: Failed (reference)"), "{text}");
    }

    // A reference that does not compile: exit 3, nvcc's message naming the header.
    write_op(dir.path(), "y(i) = 2 * x(i) +; z(i) = 1;");
    let assert = repro_build(&spec, &out).code(3);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("refs/twice.h("), "{stderr}");
    assert!(
        stderr.contains("the custom reference does not compile (nvcc exit 2): `twice_reference` in ../refs/twice.h"),
        "{stderr}"
    );
}

#[test]
fn an_expected_file_of_another_shape_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("art");
    let spec = write_op(dir.path(), "y(i) = 2 * x(i); z(i) = x(i) + 1;");
    // numpy's format: a 1-D f32 array of 999 elements where the outputs have 1000.
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (999,), }";
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    npy.extend((padded.len() as u16).to_le_bytes());
    npy.extend(padded.as_bytes());
    npy.extend(std::iter::repeat_n(0u8, 999 * 4));
    std::fs::write(dir.path().join("y.npy"), &npy).unwrap();
    std::fs::write(dir.path().join("z.npy"), &npy).unwrap();
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "reference: { op: custom, source: refs/twice.h, function: twice_reference, block: [256] }",
        "reference: { op: file, expected: { y: y.npy, z: z.npy }, block: [256] }",
    );
    std::fs::write(&spec, text).unwrap();
    repro_build(&spec, &out).success();
    assert!(
        !out.join("reference.cu").exists(),
        "op: file has no reference.cu"
    );
    let run = harness(&out, &[]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(2), "{text}");
    assert!(text.contains("reference.expected.y:"), "{text}");
    assert!(text.contains("holds <f4 [999]"), "{text}");
    assert!(text.contains("the output's shape, [1000]"), "{text}");
}

#[test]
fn a_bundle_carries_the_reference_and_builds_elsewhere() {
    let sender = tempfile::tempdir().unwrap();
    let spec = write_op(sender.path(), "y(i) = 2 * x(i); z(i) = x(i) + 1;");
    // A header of the reference's own, beside it: the bundle takes what its compile read.
    std::fs::write(
        sender.path().join("refs/twice_math.h"),
        "#pragma once\ninline double twice_of(double v) { return 2 * v; }\n",
    )
    .unwrap();
    let header = std::fs::read_to_string(sender.path().join("refs/twice.h")).unwrap();
    std::fs::write(
        sender.path().join("refs/twice.h"),
        header
            .replace(
                "#include <repro/reference.h>",
                "#include <repro/reference.h>\n#include \"twice_math.h\"",
            )
            .replace("y(i) = 2 * x(i);", "y(i) = twice_of(x(i));"),
    )
    .unwrap();
    let out = sender.path().join("out/twice");
    assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .current_dir(sender.path())
        .args([
            "bundle",
            spec.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--nvcc",
        ])
        .arg(nvcc())
        .assert()
        .success();
    assert!(out.join("reference/twice.h").is_file());
    assert!(out.join("reference/twice_math.h").is_file());
    let reference_cu = std::fs::read_to_string(out.join("reference.cu")).unwrap();
    assert!(
        reference_cu.contains("#include \"reference/twice.h\""),
        "{reference_cu}"
    );
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        readme.contains("| `reference/`, `reference.cu` |"),
        "{readme}"
    );

    let receiver = tempfile::tempdir().unwrap();
    let tarball = std::fs::File::open(out.with_extension("tar.gz")).unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(tarball))
        .unpack(receiver.path())
        .unwrap();
    let unpacked = receiver.path().join("twice");
    let status = std::process::Command::new("bash")
        .arg("build.sh")
        .current_dir(&unpacked)
        .env("NVCC", nvcc())
        .status()
        .unwrap();
    assert!(status.success(), "build.sh builds the unpacked bundle");
    assert!(
        unpacked.join("harness").is_file() && unpacked.join(".repro/build/reference.o").is_file()
    );
}

#[test]
fn a_trace_on_a_custom_reference() {
    insta::assert_snapshot!(error_for(&replaced(
        CUSTOM,
        "build: { arch: sm_90a }\n",
        "build: { arch: sm_90a }\ntrace:\n  - { name: acc, role: accumulator }\n"
    )));
}
