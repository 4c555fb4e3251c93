//! Spec errors: each bad spec gives a message with file:line:column, the source line, and a
//! hint; the messages are snapshots, so a change to any of them is a reviewed change.

use std::path::{Path, PathBuf};

/// A valid spec to break one field at a time.
const GOOD: &str = r#"version: 1
name: good_gemm
about: a valid spec
sizes: { M: 100, N: 60, K: 70 }
source:
  include_dirs: [../kernels]
  includes: [naive_gemm.cuh]
tensors:
  A: { dtype: bf16, shape: [M, K] }
  B: { dtype: bf16, shape: [K, N] }
  D: { dtype: bf16, shape: [M, N], output: true }
kernel:
  name: naive_gemm_bf16
  args: [A, B, D, M, N, K]
  grid: ["ceil_div(N, 16)", "ceil_div(M, 16)", 1]
  block: [16, 16, 1]
reference: { op: gemm, a: A, b: B, out: D, tile: [16, 16] }
build: { arch: sm_90a, flags: [-O3] }
"#;

use crate::common::{load_spec_text as load, spec_error_for as error_for};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn replace(from: &str, to: &str) -> String {
    assert!(
        GOOD.contains(from),
        "test bug: `{from}` not in the good spec"
    );
    GOOD.replacen(from, to, 1)
}

/// A bool operand is refused whatever the output's type (an integer output was once let through).
#[test]
fn a_bool_operand_is_refused_for_any_output() {
    let text = replace("A: { dtype: bf16", "A: { dtype: bool").replace(
        "D: { dtype: bf16, shape: [M, N], output: true }",
        "D: { dtype: i32, shape: [M, N], output: true }",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn the_base_spec_is_valid() {
    let spec = load(GOOD).expect("valid");
    assert_eq!(spec.reference.gemm().unwrap().m, 100);
    assert_eq!(spec.reference.gemm().unwrap().k, 70);
    assert_eq!(spec.kernel().instantiation(), "naive_gemm_bf16");
}

#[test]
fn unknown_top_level_field_suggests_the_right_one() {
    insta::assert_snapshot!(error_for(&replace("tensors:", "tensor:")));
}

#[test]
fn unknown_tensor_field_suggests_the_right_one() {
    insta::assert_snapshot!(error_for(&replace("A: { dtype: bf16", "A: { dtyp: bf16")));
}

#[test]
fn bad_dtype() {
    insta::assert_snapshot!(error_for(&replace("A: { dtype: bf16", "A: { dtype: bf61")));
}

#[test]
fn undeclared_size_in_shape() {
    insta::assert_snapshot!(error_for(&replace("shape: [M, K] }", "shape: [M, KK] }")));
}

#[test]
fn undeclared_tensor_in_reference() {
    insta::assert_snapshot!(error_for(&replace("b: B, out", "b: BB, out")));
}

#[test]
fn kernel_arg_typo() {
    insta::assert_snapshot!(error_for(&replace(
        "args: [A, B, D, M, N, K]",
        "args: [A, B, DD, M, N, K]"
    )));
}

#[test]
fn shapes_that_do_not_fit_the_gemm() {
    insta::assert_snapshot!(error_for(&replace(
        "B: { dtype: bf16, shape: [K, N] }",
        "B: { dtype: bf16, shape: [M, N] }"
    )));
}

#[test]
fn batched_output_needs_batched_operands() {
    let text = replace(
        "sizes: { M: 100, N: 60, K: 70 }",
        "sizes: { L: 3, M: 100, N: 60, K: 70 }",
    )
    .replace(
        "D: { dtype: bf16, shape: [M, N]",
        "D: { dtype: bf16, shape: [L, M, N]",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn bias_must_be_n() {
    let text = replace("  D: {", "  bias: { dtype: f32, shape: [M] }\n  D: {")
        .replace("tile: [16, 16] }", "tile: [16, 16], bias: bias }");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn beta_without_c() {
    insta::assert_snapshot!(error_for(&replace(
        "tile: [16, 16] }",
        "tile: [16, 16], beta: 0.5 }"
    )));
}

#[test]
fn tensor_name_that_is_not_an_identifier() {
    insta::assert_snapshot!(error_for(
        &replace("  A: { dtype", "  2A: { dtype")
            .replace("a: A,", "a: 2A,")
            .replace("[A, B", "[2A, B")
    ));
}

#[test]
fn tensor_name_that_collides_with_the_harness() {
    insta::assert_snapshot!(error_for(
        &replace("  A: { dtype", "  repro_A: { dtype")
            .replace("a: A,", "a: repro_A,")
            .replace("[A, B", "[repro_A, B")
    ));
}

#[test]
fn spec_name_of_the_wrong_form() {
    insta::assert_snapshot!(error_for(&replace("name: good_gemm", "name: Good-GEMM")));
}

#[test]
fn output_not_marked() {
    insta::assert_snapshot!(error_for(&replace(
        "shape: [M, N], output: true }",
        "shape: [M, N] }"
    )));
}

#[test]
fn yaml_syntax_error() {
    insta::assert_snapshot!(error_for(&replace(
        "block: [16, 16, 1]",
        "block: [16, 16, 1"
    )));
}

#[test]
fn conflicting_build_flag() {
    insta::assert_snapshot!(error_for(&replace(
        "flags: [-O3]",
        "flags: [-O3, -arch=sm_80]"
    )));
}

#[test]
fn too_many_threads() {
    insta::assert_snapshot!(error_for(&replace(
        "block: [16, 16, 1]",
        "block: [64, 32, 1]"
    )));
}

#[test]
fn several_errors_are_reported_together() {
    let text = replace("b: B, out", "b: BB, out").replace("version: 1", "version: 2");
    let message = error_for(&text);
    assert!(message.contains("spec version 2"), "{message}");
    assert!(message.contains("`BB`"), "{message}");
    assert!(
        message.contains("2 errors in bad.yaml; nothing was written"),
        "{message}"
    );
}

#[test]
fn every_error_names_file_line_and_column() {
    let cases = [
        replace("tensors:", "tensor:"),
        replace("b: B, out", "b: BB, out"),
        replace("shape: [M, K] }", "shape: [M, KK] }"),
        replace("block: [16, 16, 1]", "block: [16, 16, 1"),
    ];
    for text in cases {
        let message = error_for(&text);
        let has_location = message.lines().any(|l| {
            l.trim_start()
                .strip_prefix("--> bad.yaml:")
                .is_some_and(|rest| {
                    let parts: Vec<&str> = rest.split(':').collect();
                    parts.len() == 2
                        && parts
                            .iter()
                            .all(|p| p.parse::<usize>().is_ok_and(|n| n > 0))
                })
        });
        assert!(has_location, "no file:line:column in\n{message}");
    }
}

#[test]
fn a_batched_spec_resolves_its_gemm_dimensions() {
    let text = GOOD
        .replace(
            "sizes: { M: 100, N: 60, K: 70 }",
            "sizes: { L: 3, M: 100, N: 60, K: 70 }",
        )
        .replace("shape: [M, K] }", "shape: [L, M, K] }")
        .replace("shape: [K, N] }", "shape: [L, K, N], layout: col_major }")
        .replace("shape: [M, N], output", "shape: [L, M, N], output");
    let spec = load(&text).unwrap_or_else(|e| panic!("{e}"));
    let r = spec.reference.gemm().expect("a GEMM");
    assert!(r.batched);
    assert_eq!((r.l, r.m, r.n, r.k), (3, 100, 60, 70));
    // col_major swaps the last two dimensions; the batch stays outermost.
    assert_eq!(spec.tensors[1].strides, vec![70 * 60, 1, 70]);
}

#[test]
fn flags_from_a_missing_log() {
    insta::assert_snapshot!(error_for(&replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "build: { flags_from: logs/nope.log }"
    )));
}

#[test]
fn flags_from_a_log_resolves_arch_std_and_flags() {
    let text = replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "build: { flags_from: { file: logs/torch_extension_build.log, match: tiled_gemm_cuda.cu }, flags: [-Xptxas=-v] }",
    );
    let spec = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.build.arch, "sm_90a");
    assert_eq!(spec.build.std, "c++17");
    // The log's flags first, then the spec's own.
    assert_eq!(
        spec.build.flags.first().map(String::as_str),
        Some("-D__CUDA_NO_HALF_OPERATORS__")
    );
    assert_eq!(
        spec.build.flags.last().map(String::as_str),
        Some("-Xptxas=-v")
    );
    assert!(spec.build.flags.contains(&"--use_fast_math".to_string()));
    assert!(!spec
        .build
        .flags
        .iter()
        .any(|f| f.contains("TORCH_EXTENSION_NAME") || f == "-c"));
    assert_eq!(
        spec.build.flag_groups[0].origin,
        "build.flags_from: logs/torch_extension_build.log:7"
    );
    assert!(
        spec.warnings
            .iter()
            .any(|w| w.contains("TORCH_EXTENSION_NAME")),
        "{:?}",
        spec.warnings
    );
}

#[test]
fn cutlass3_takes_its_launch_from_the_type() {
    let text = replace(
        "kernel:\n  name: naive_gemm_bf16",
        "kernel:\n  kind: cutlass3\n  name: naive_gemm_bf16",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn cutlass3_needs_a_gemm_type() {
    let text = GOOD.replace(
        "kernel:\n  name: naive_gemm_bf16\n  args: [A, B, D, M, N, K]\n  grid: [\"ceil_div(N, 16)\", \"ceil_div(M, 16)\", 1]\n  block: [16, 16, 1]\n",
        "kernel: { kind: cutlass3 }\n",
    );
    assert_ne!(text, GOOD, "test bug: the kernel block was not replaced");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn cutlass_from_the_specs_own_include_dirs_is_used_as_is() {
    let cutlass = Path::new(env!("CARGO_MANIFEST_DIR")).join(".toolchain/cutlass/include");
    let text = std::fs::read_to_string(examples_dir().join("cutlass_bf16_pingpong.yaml"))
        .unwrap()
        .replace(
            "source:\n",
            &format!("source:\n  include_dirs: [{}]\n", cutlass.display()),
        );
    let spec = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(spec.cutlass.is_none(), "repro adds no CUTLASS of its own");
    assert!(spec
        .include_dirs
        .iter()
        .any(|d| d.join("cutlass/cutlass.h").is_file()));
}

#[test]
fn todos_left_by_import_are_errors() {
    let text = replace(
        "sizes: { M: 100, N: 60, K: 70 }",
        "sizes: { M: \"TODO: value of `m` at src/gemm.rs:42\", N: 60, K: 70 }",
    )
    .replace(
        "grid: [\"ceil_div(N, 16)\", \"ceil_div(M, 16)\", 1]",
        "grid: [\"TODO: grid of the production launch\", 1, 1]",
    );
    insta::assert_snapshot!(error_for(&text));
}

/// The good spec with K = 72 (a 144-byte row: TMA-aligned) and `tma:` entries added.
fn with_tma(entries: &str) -> String {
    replace("K: 70 }", "K: 72 }").replace("kernel:\n", &format!("tma:\n{entries}kernel:\n"))
}

#[test]
fn tma_descriptor_is_resolved_innermost_first() {
    let text = with_tma(
        "  map_a: { tensor: A, box: [64, 64], swizzle: 128B }\n  map_b: { tensor: B, box: [64, 32], l2_promotion: 256B }\n",
    )
    .replace(
        "B: { dtype: bf16, shape: [K, N] }",
        "B: { dtype: bf16, shape: [K, N], layout: col_major }",
    )
    .replace("args: [A, B, D, M, N, K]", "args: [map_a, map_b, D, M, N, K]");
    let spec = load(&text).unwrap_or_else(|e| panic!("{e}"));
    let [a, b] = &spec.tma[..] else {
        panic!("two descriptors")
    };
    // A [M=100, K=72] row-major: K is innermost; one row is 72 * 2 = 144 bytes.
    assert_eq!(
        (a.dims.clone(), a.strides_bytes.clone()),
        (vec![72, 100], vec![144])
    );
    assert_eq!(a.box_dims, vec![64, 64]);
    // B [K=72, N=60] column-major: K is innermost again; box [64 (K), 32 (N)].
    assert_eq!(
        (b.dims.clone(), b.strides_bytes.clone()),
        (vec![72, 60], vec![144])
    );
    assert_eq!(b.box_dims, vec![64, 32]);
    assert_eq!(a.data_type, "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16");
    assert_eq!(
        spec.kernel().args[0],
        repro::spec::KernelArg::Tma(0),
        "a descriptor's name passes the CUtensorMap"
    );
}

#[test]
fn tma_inner_box_wider_than_the_swizzle_span() {
    insta::assert_snapshot!(error_for(&with_tma(
        "  map_a: { tensor: A, box: [64, 64], swizzle: 64B }\n"
    )));
}

#[test]
fn tma_box_extent_and_rank() {
    insta::assert_snapshot!(error_for(&with_tma(
        "  map_a: { tensor: A, box: [512, 64] }\n  map_b: { tensor: B, box: [64] }\n"
    )));
}

#[test]
fn tma_global_stride_not_16_byte_aligned() {
    // K = 70: a row of A is 140 bytes.
    insta::assert_snapshot!(error_for(&GOOD.replace(
        "kernel:\n",
        "tma:\n  map_a: { tensor: A, box: [64, 64], swizzle: 128B }\nkernel:\n"
    )));
}

#[test]
fn tma_inner_box_not_whole_16_byte_chunks() {
    insta::assert_snapshot!(error_for(&with_tma(
        "  map_a: { tensor: A, box: [64, 12] }\n"
    )));
}

#[test]
fn tma_unknown_tensor_unaligned_stride_and_interleave_rank() {
    let text = with_tma(
        "  map_a: { tensor: AA, box: [64, 64] }\n  map_b: { tensor: B, box: [8, 64], interleave: 16B }\n  map_c: { tensor: A, box: [8, 8], oob_fill: nan, swizzle: 32B }\n",
        // map_c is valid: bf16 takes a NaN fill, and 8 x 2 B fit the 32-byte span.
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn tma_innermost_element_stride_is_ignored_without_interleave() {
    // A [M, K] row-major: K is innermost, so the stride 2 on dimension 1 would do nothing; the
    // stride 2 on dimension 0 (rows) is what the driver applies.
    let text = with_tma(
        "  map_a: { tensor: A, box: [8, 16], element_strides: [2, 1] }\n  map_b: { tensor: A, box: [8, 16], element_strides: [1, 2] }\n",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn tma_unknown_swizzle() {
    insta::assert_snapshot!(error_for(&with_tma(
        "  map_a: { tensor: A, box: [8, 8], swizzle: 256B }\n"
    )));
}

#[test]
fn tma_integer_tensors_cannot_take_a_nan_fill() {
    let text = with_tma("  map_a: { tensor: A, box: [8, 16], oob_fill: nan }\n")
        .replace("K: 72 }", "K: 80 }")
        .replace("A: { dtype: bf16", "A: { dtype: i8");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn cluster_must_divide_the_grid_and_stay_within_16() {
    let text = replace(
        "block: [16, 16, 1]",
        "block: [16, 16, 1]\n  cluster: [2, 1, 1]",
    );
    // grid.x = ceil_div(60, 16) = 4 is a multiple of 2; grid.y = 7 is not a multiple of 3.
    let text = text.replace("cluster: [2, 1, 1]", "cluster: [2, 3, 1]");
    insta::assert_snapshot!("cluster_divides_grid", error_for(&text));
    let text = replace(
        "block: [16, 16, 1]",
        "block: [16, 16, 1]\n  cluster: [4, 8, 1]",
    );
    insta::assert_snapshot!("cluster_too_large", error_for(&text));
}

#[test]
fn device_kind_needs_a_name() {
    let text = replace("  name: naive_gemm_bf16\n", "  kind: device\n");
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn names_built_by_setup_are_not_typos() {
    // `Dd` is one letter from `D`; as a name kernel.setup declares, it is meant.
    let text = replace(
        "args: [A, B, D, M, N, K]",
        "setup: |\n    auto* Dd = static_cast<__nv_bfloat16*>(D);\n  args: [A, B, Dd, M, N, K]",
    );
    load(&text).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn trace_stages_need_unique_indexes_below_16() {
    let text = replace(
        "reference:",
        "trace:\n  - { name: A tile, role: operand }\n  - { name: acc, role: accumulator, stage: 0 }\n  - { name: out, role: output, stage: 16 }\nreference:",
    );
    insta::assert_snapshot!(error_for(&text));
}

// Issue 24: an output the kernel writes only through a TMA map (TMA stores) is passed.

/// The good spec with a TMA map over D (N = 64: a 128-byte row, TMA-aligned).
fn with_tma_over_d(args: &str, setup: Option<&str>) -> String {
    let text = with_tma("  map_d: { tensor: D, box: [16, 16] }\n")
        .replace("N: 60", "N: 64")
        .replace("args: [A, B, D, M, N, K]", &format!("args: {args}"));
    match setup {
        Some(setup) => text.replace("  args:", &format!("  setup: |\n    {setup}\n  args:")),
        None => text,
    }
}

#[test]
fn an_output_passed_through_its_tma_map_is_passed() {
    let spec =
        load(&with_tma_over_d("[A, B, map_d, M, N, K]", None)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.kernel().args[2], repro::spec::KernelArg::Tma(0));
}

#[test]
fn an_output_named_in_setup_is_passed() {
    // The setup wraps D (or its map) in a library's own descriptor, which the kernel takes.
    for setup in ["auto out = make_desc(D, M, N);", "auto out = wrap(map_d);"] {
        let text = with_tma_over_d("[A, B, out, M, N, K]", Some(setup));
        load(&text).unwrap_or_else(|e| panic!("{setup}: {e}"));
    }
}

#[test]
fn an_output_reached_by_nothing_is_an_error_even_with_a_setup() {
    // A setup that names neither D nor its map does not reach the output.
    let text = with_tma_over_d(
        "[A, B, out, M, N, K]",
        Some("auto out = make_desc(A, M, K);  // Dx and map_dd are other names"),
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn an_output_reached_by_nothing_without_a_tma_map() {
    let text = replace("args: [A, B, D, M, N, K]", "args: [A, B, M, N, K]");
    insta::assert_snapshot!(error_for(&text));
}

// Issue 17 item 4: hostile input gets an error with a place, never a panic.

#[test]
fn an_error_past_column_65535_is_shown_around_its_column() {
    // A flow mapping on one line puts the error far to the right; the column must be right and
    // the excerpt short.
    let flags = "-DX, ".repeat(14_000);
    let text = replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        &format!("build: {{ arch: sm_90a, flags: [{flags}-O3], flagz: [] }}"),
    );
    let error = error_for(&text);
    let column = text.lines().last().unwrap().find("flagz").unwrap() + 1;
    assert!(column > 65_535);
    assert!(error.contains(&format!("bad.yaml:18:{column}")), "{error}");
    insta::assert_snapshot!(error);
}

#[test]
fn a_spec_name_longer_than_a_folder_name_can_be() {
    let name = "n".repeat(300);
    insta::assert_snapshot!(error_for(&replace(
        "name: good_gemm",
        &format!("name: {name}")
    )));
    // The longest name allowed still leaves room for the names derived from it.
    let longest = "n".repeat(repro::spec::validate::MAX_SPEC_NAME);
    load(&replace("name: good_gemm", &format!("name: {longest}"))).unwrap();
}

/// `error_for`, for a spec read from a file in `dir`, with the folder's path replaced by `<dir>`.
fn error_for_file(dir: &Path, name: &str) -> String {
    match repro::spec::load(&dir.join(name), &repro::machine::Machine) {
        Ok(_) => panic!("{name} unexpectedly valid"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "spec errors exit 2");
            let dir = dir.canonicalize().unwrap();
            e.to_string().replace(&dir.display().to_string(), "<dir>")
        }
    }
}

#[test]
fn a_spec_that_is_not_utf8_gets_a_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = replace("about: a valid spec", "about: a valid spec, caf").into_bytes();
    // Latin-1 `é` after "caf" on line 3.
    let at = bytes.windows(3).position(|w| w == b"caf").unwrap() + 3;
    bytes.insert(at, 0xE9);
    std::fs::write(dir.path().join("latin1.yaml"), bytes).unwrap();
    let error = error_for_file(dir.path(), "latin1.yaml");
    assert!(error.contains("latin1.yaml:3:25"), "{error}");
    insta::assert_snapshot!(error.replace(&dir.path().display().to_string(), "<dir>"));
}

#[cfg(unix)]
#[test]
fn an_input_file_that_is_a_fifo_or_a_device_is_not_a_regular_file() {
    // dir/spec/ holds the spec's input files; dir/kernels/ is its `../kernels`.
    let dir = tempfile::tempdir().unwrap();
    let spec_dir = dir.path().join("spec");
    std::fs::create_dir_all(&spec_dir).unwrap();
    std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
    let fifo = std::ffi::CString::new(spec_dir.join("a.npy").display().to_string()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink("/dev/zero", spec_dir.join("b.npy")).unwrap();
    std::os::unix::fs::symlink("missing.npy", spec_dir.join("c.npy")).unwrap();
    std::fs::create_dir_all(spec_dir.join("d.npy")).unwrap();
    let text = replace(
        "A: { dtype: bf16, shape: [M, K] }",
        "A: { dtype: bf16, shape: [M, K], init: { file: a.npy } }",
    )
    .replace(
        "B: { dtype: bf16, shape: [K, N] }",
        "B: { dtype: bf16, shape: [K, N], init: { file: b.npy } }\n  \
         C: { dtype: bf16, shape: [M, N], init: { file: c.npy } }\n  \
         E: { dtype: bf16, shape: [M, N], init: { file: d.npy } }\n  \
         F: { dtype: bf16, shape: [M, N], init: { file: f.npy } }",
    );
    let error = match repro::spec::load_text(
        Path::new("bad.yaml"),
        &text,
        &spec_dir,
        &repro::machine::Machine,
    ) {
        Ok(_) => panic!("unexpectedly valid"),
        Err(e) => e.to_string(),
    };
    insta::assert_snapshot!(error.replace(&spec_dir.display().to_string(), "<dir>"));
}

/// Time for one spec to be refused: the bounds must make hostile YAML cheap.
fn refused_within(text: &str, seconds: f64) -> String {
    let start = std::time::Instant::now();
    let error = error_for(text);
    let took = start.elapsed().as_secs_f64();
    assert!(took < seconds, "took {took:.1} s to refuse");
    error
}

#[test]
fn alias_expansion_is_bounded() {
    // Issue 17 item 6: a 107 KB spec whose 100 KB anchor is used 2,000 times took 31 s and
    // 3.2 GB; it must be refused before anything is expanded.
    let anchor = "x".repeat(100_000);
    let uses = vec!["*big"; 2_000].join(", ");
    let text = replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        &format!("about2: &big \"-D{anchor}\"\nbuild: {{ arch: sm_90a, flags: [{uses}] }}"),
    );
    let error = refused_within(&text, 5.0);
    assert!(
        error.contains("aliases expand the spec by more than 4 MiB"),
        "{error}"
    );
    assert!(error.contains("bad.yaml:19:"), "{error}");
    // Nested aliases (a "billion laughs") are counted expanded, not as written.
    let mut laughs = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let p = i - 1;
        laughs += &format!(
            "l{i}: &l{i} [*l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}, *l{p}]\n"
        );
    }
    let error = refused_within(&format!("{GOOD}{laughs}"), 5.0);
    insta::assert_snapshot!(error);
    // A few aliases, as a spec uses them to share a shape or flags, are fine.
    let shared = GOOD
        .replace("shape: [M, K] }", "shape: &mk [M, K] }")
        .replace(
            "A: { dtype: bf16, shape: &mk [M, K] }",
            "A: { dtype: bf16, shape: &mk [M, K] }\n  A2: { dtype: bf16, shape: *mk }",
        );
    load(&shared).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn nesting_depth_is_bounded() {
    // 100,000 levels took 34 s (quadratic); refused at the 129th level.
    let text = replace(
        "about: a valid spec",
        &format!("about: {}", "[".repeat(100_000)),
    );
    let error = refused_within(&text, 5.0);
    assert!(error.contains("nests deeper than 128 levels"), "{error}");
    assert!(error.contains("bad.yaml:3:"), "{error}");
    // Block nesting (`- - - x`, one level per dash) is bounded alike.
    let text = replace(
        "about: a valid spec",
        &format!("about:\n  {}x", "- ".repeat(100_000)),
    );
    let error = refused_within(&text, 5.0);
    insta::assert_snapshot!(error);
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_as_the_output_folder_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let spec = examples_dir().join("tiled_gemm_bf16.yaml");
    let out = dir.path().join("out");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &out).unwrap();
    let output = assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .args([
            "scaffold".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is a symbolic link to") && stderr.contains("does not exist"),
        "{stderr}"
    );
    assert!(!stderr.contains("os error 17"), "{stderr}");
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let output = assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .args([
            "scaffold".as_ref(),
            spec.as_os_str(),
            "-o".as_ref(),
            file.as_os_str(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not a folder"), "{stderr}");
}

#[test]
fn stress_settings_that_cannot_stress() {
    let text = GOOD.replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "check: { repeat: 1, stress: bandwidth }\nbuild: { arch: sm_90a, flags: [-O3] }",
    );
    insta::assert_snapshot!(crate::common::spec_error_for(&text));
    let text = GOOD.replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "check: { stress_sms: 8 }\nbuild: { arch: sm_90a, flags: [-O3] }",
    );
    insta::assert_snapshot!(crate::common::spec_error_for(&text));
    // jitter runs no stressor kernel: no SMs to give it.
    let text = GOOD.replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "check: { repeat: 4, stress: jitter, stress_sms: 8 }\nbuild: { arch: sm_90a, flags: [-O3] }",
    );
    insta::assert_snapshot!(crate::common::spec_error_for(&text));
}

/// The names in backticks in `text`.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Every verdict class the spec accepts reads back under its own name, and docs/spec.md lists
/// exactly these: serde's list of variants is the one the "did you mean" hint is drawn from, so
/// a class added to the enum without its name or its line in the docs fails here.
#[test]
fn every_verdict_class_is_accepted_and_listed_in_the_docs() {
    let unknown = error_for(&format!("{GOOD}expect: {{ verdict: nope }}\n"));
    let expected = unknown
        .split_once("expected one of ")
        .unwrap_or_else(|| panic!("no list of verdicts in:\n{unknown}"))
        .1
        .lines()
        .next()
        .unwrap();
    let names = ticked(expected);
    assert!(names.contains(&"operand_layout"), "{names:?}");
    for name in &names {
        let spec = load(&format!("{GOOD}expect: {{ verdict: {name} }}\n"))
            .unwrap_or_else(|e| panic!("verdict {name} refused:\n{e}"));
        assert_eq!(
            spec.expect.and_then(|e| e.verdict).map(|v| v.name()),
            Some(*name)
        );
    }
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/spec.md"))
        .unwrap();
    let listed = docs
        .split_once("`verdict` is one of ")
        .and_then(|(_, rest)| rest.split_once("; docs/cli.md"))
        .expect("docs/spec.md lists the verdict classes under `expect`")
        .0;
    assert_eq!(
        ticked(listed),
        names,
        "docs/spec.md, `expect`, lists other verdicts"
    );
}

#[test]
fn a_misspelt_verdict_gets_a_suggestion() {
    insta::assert_snapshot!(error_for(&format!(
        "{GOOD}expect: {{ verdict: operand_layuot }}\n"
    )));
}

/// A size given twice was once taken with the later value; both places are named.
#[test]
fn a_size_given_twice() {
    insta::assert_snapshot!(error_for(&replace(
        "sizes: { M: 100, N: 60, K: 70 }",
        "sizes: { M: 100, N: 60, K: 70, M: 128 }"
    )));
}

/// A tensor declared twice (block style, lines apart) was once taken with the later declaration.
#[test]
fn a_tensor_declared_twice() {
    insta::assert_snapshot!(error_for(&replace(
        "  D: {",
        "  A: { dtype: f32, shape: [M, K] }\n  D: {"
    )));
}

/// Struct fields given twice get the same error, with both places (serde's own named neither).
#[test]
fn a_field_given_twice() {
    insta::assert_snapshot!(error_for(&replace(
        "A: { dtype: bf16, shape: [M, K] }",
        "A: { dtype: bf16, shape: [M, K], dtype: f32 }"
    )));
}

/// A newline in a flag was once written raw into the Makefile CMake generated, where the text
/// after it ran as a command.
#[test]
fn a_flag_with_a_newline() {
    insta::assert_snapshot!(error_for(&replace(
        "flags: [-O3]",
        r#"flags: [-O3, "-DNDEBUG\ntouch /tmp/pwned", "-lineinfo\t-G", "-DX=\u001b"]"#
    )));
}

/// nvcc hands a -D value to sh inside double quotes, where a backtick runs what it encloses: on
/// whoever builds a bundle. Refused like a control character.
#[test]
fn a_flag_with_a_backtick() {
    insta::assert_snapshot!(error_for(&replace(
        "flags: [-O3]",
        r#"flags: [-O3, "-DX=`touch /tmp/pwned`"]"#
    )));
}

/// Flags read off a compile line go to the same build files: a control character there is
/// refused too, naming the file it came from.
#[test]
fn a_flags_from_line_with_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    // A Python-logged argv: `\n` inside a quoted argument is a newline in the flag.
    std::fs::write(
        dir.path().join("jit.log"),
        "['nvcc', '-c', 'naive_gemm.cu', '-O3', '-DA=1\\ntouch /tmp/pwned', '-o', 'x.o']\n",
    )
    .unwrap();
    let spec = replace(
        "build: { arch: sm_90a, flags: [-O3] }",
        "build: { flags_from: jit.log }",
    )
    .replace("include_dirs: [../kernels]", "include_dirs: []");
    std::fs::write(dir.path().join("spec.yaml"), spec).unwrap();
    insta::assert_snapshot!(error_for_file(dir.path(), "spec.yaml"));
}

/// The good spec as an operator of two launches: the same kernel twice, the second into an
/// intermediate it never reads (enough for the checks of `launches:`).
fn sequence(second_args: &str, tensors: &str) -> String {
    replace(
        "kernel:\n  name: naive_gemm_bf16\n  args: [A, B, D, M, N, K]\n  grid: [\"ceil_div(N, 16)\", \"ceil_div(M, 16)\", 1]\n  block: [16, 16, 1]\n",
        &format!(
            "{tensors}launches:\n  - name: naive_gemm_bf16\n    args: [A, B, D, M, N, K]\n    grid: [\"ceil_div(N, 16)\", \"ceil_div(M, 16)\", 1]\n    block: [16, 16, 1]\n  - name: naive_gemm_bf16\n    args: {second_args}\n    grid: [\"ceil_div(N, 16)\", \"ceil_div(M, 16)\", 1]\n    block: [16, 16, 1]\n"
        ),
    )
    .replace(
        "  D: { dtype: bf16, shape: [M, N], output: true }\n",
        "  D: { dtype: bf16, shape: [M, N], output: true }\n  W: { dtype: bf16, shape: [M, N], intermediate: true }\n",
    )
}

#[test]
fn a_sequence_of_launches_is_valid() {
    let spec = load(&sequence("[A, B, W, M, N, K]", "")).unwrap();
    assert!(spec.is_sequence());
    assert_eq!(spec.launches.len(), 2);
    let w = spec.tensors.iter().find(|t| t.name == "W").unwrap();
    assert_eq!(w.intermediate, Some(repro::spec::model::Lifetime::Call));
    assert!(!w.output);
    // An intermediate starts as zeros unless its init says otherwise, whatever `inputs:` says.
    assert_eq!(
        w.init.source,
        repro::spec::InitSource::Generator(repro::spec::model::Generator::Zeros)
    );
}

#[test]
fn a_typo_in_a_later_launch_is_named_by_its_index() {
    insta::assert_snapshot!(error_for(&sequence("[A, B, WW, M, N, K]", "")));
}

#[test]
fn kernel_and_launches_both_given() {
    let text = sequence("[A, B, W, M, N, K]", "").replace(
        "launches:\n",
        "kernel: { name: naive_gemm_bf16, args: [A, B, D, M, N, K], grid: [1, 1, 1], block: [16, 16, 1] }\nlaunches:\n",
    );
    insta::assert_snapshot!(error_for(&text));
}

#[test]
fn neither_kernel_nor_launches() {
    let text = sequence("[A, B, W, M, N, K]", "");
    let start = text.find("launches:\n").unwrap();
    let end = text.find("reference:").unwrap();
    insta::assert_snapshot!(error_for(&format!("{}{}", &text[..start], &text[end..])));
}

#[test]
fn an_output_no_launch_is_given() {
    insta::assert_snapshot!(error_for(&sequence("[A, B, W, M, N, K]", "").replacen(
        "args: [A, B, D, M, N, K]",
        "args: [A, B, W, M, N, K]",
        1
    )));
}

#[test]
fn a_lifetime_without_intermediate() {
    insta::assert_snapshot!(error_for(&replace(
        "D: { dtype: bf16, shape: [M, N], output: true }",
        "D: { dtype: bf16, shape: [M, N], output: true, lifetime: persist }"
    )));
}

#[test]
fn an_output_that_is_an_intermediate_too() {
    insta::assert_snapshot!(error_for(&replace(
        "D: { dtype: bf16, shape: [M, N], output: true }",
        "D: { dtype: bf16, shape: [M, N], output: true, intermediate: true }"
    )));
}

#[test]
fn a_cutlass_kernel_in_a_sequence() {
    insta::assert_snapshot!(error_for(&sequence("[A, B, W, M, N, K]", "").replacen(
        "  - name: naive_gemm_bf16\n    args: [A, B, W",
        "  - kind: cutlass3\n    name: naive_gemm_bf16\n    args: [A, B, W",
        1
    )));
}

#[test]
fn too_many_launches() {
    let one = "  - name: naive_gemm_bf16\n    args: [A, B, W, M, N, K]\n    grid: [1, 1, 1]\n    block: [16, 16, 1]\n";
    let text = sequence("[A, B, W, M, N, K]", "").replace(
        "launches:\n",
        &format!("launches:\n{}", one.repeat(repro::spec::MAX_LAUNCHES)),
    );
    insta::assert_snapshot!(error_for(&text));
}

/// The sequence's intermediate W with `reference: { ... }` as written.
fn with_intermediate_reference(reference: &str) -> String {
    sequence("[A, B, W, M, N, K]", "").replace(
        "W: { dtype: bf16, shape: [M, N], intermediate: true }",
        &format!("W: {{ dtype: bf16, shape: [M, N], intermediate: true, reference: {reference} }}"),
    )
}

#[test]
fn an_intermediate_reference_is_resolved() {
    let spec = load(&with_intermediate_reference(
        "{ source: references/split_k_partials.h, function: refs::split_k_partials_reference }",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let w = spec.tensors.iter().find(|t| t.name == "W").unwrap();
    let (source, function) = w
        .intermediate_reference
        .as_ref()
        .unwrap()
        .function()
        .unwrap();
    assert!(source.ends_with("references/split_k_partials.h"));
    assert_eq!(function, "refs::split_k_partials_reference");
    assert!(spec
        .tensors
        .iter()
        .all(|t| t.name == "W" || t.intermediate_reference.is_none()));
}

#[test]
fn a_reference_on_a_tensor_that_is_no_intermediate() {
    insta::assert_snapshot!(error_for(&replace(
        "D: { dtype: bf16, shape: [M, N], output: true }",
        "D: { dtype: bf16, shape: [M, N], output: true, reference: { source: references/split_k_partials.h, function: f } }"
    )));
}

#[test]
fn an_intermediate_reference_without_its_function() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: references/split_k_partials.h }"
    )));
}

#[test]
fn an_intermediate_reference_without_its_source() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ function: split_k_partials_reference }"
    )));
}

#[test]
fn an_intermediate_reference_header_that_does_not_exist() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: references/no_such.h, function: split_k_partials_reference }"
    )));
}

#[test]
fn an_intermediate_reference_header_that_is_a_folder() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: references, function: split_k_partials_reference }"
    )));
}

#[test]
fn an_intermediate_reference_function_that_is_no_cpp_name() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: references/split_k_partials.h, function: \"f(); system(1)\" }"
    )));
}

#[test]
fn an_intermediate_reference_header_no_include_can_name() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: \"references/a\\\"b.h\", function: f }"
    )));
}

#[test]
fn an_intermediate_reference_file_is_resolved() {
    let spec = load(&with_intermediate_reference(
        "{ file: data/split_k_file_reference/workspace.npy }",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let w = spec.tensors.iter().find(|t| t.name == "W").unwrap();
    match w.intermediate_reference.as_ref().unwrap() {
        repro::spec::IntermediateReference::File(path) => {
            assert!(path.is_absolute(), "{}", path.display());
            assert!(path.ends_with("data/split_k_file_reference/workspace.npy"));
        }
        other => panic!("a file reference, not {other:?}"),
    }
}

#[test]
fn an_intermediate_reference_file_and_a_function() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ file: data/split_k_file_reference/workspace.npy, source: references/split_k_partials.h, function: f }"
    )));
}

#[test]
fn an_intermediate_reference_file_and_a_function_name() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ file: data/split_k_file_reference/workspace.npy, function: f }"
    )));
}

#[test]
fn an_intermediate_reference_file_that_does_not_exist() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ file: data/no_such.npy }"
    )));
}

#[test]
fn an_intermediate_reference_file_that_is_not_npy() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ file: references/split_k_partials.h }"
    )));
}

#[test]
fn a_misspelt_field_of_an_intermediate_reference() {
    insta::assert_snapshot!(error_for(&with_intermediate_reference(
        "{ source: references/split_k_partials.h, functoin: f }"
    )));
}
