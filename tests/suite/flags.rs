//! Production flags from real compile lines (`repro flags`, `build.flags_from`): a corpus of
//! hand-written but realistic logs in tests/fixtures/flags/, each asserting which options are
//! kept, moved or dropped and why. No nvcc or GPU needed.

use std::path::{Path, PathBuf};

use repro::flags::{self, Extraction, FlagsError, Input, Selector, Verdict};

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flags")
}

/// A fixture as an input named by its path under fixtures/flags (stable in snapshots).
fn load(name: &str) -> Input {
    let path = fixtures().join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut input = Input::from_text(name, text);
    input.base_dir = path.parent().map(Path::to_path_buf);
    input
}

pub(crate) fn select(match_pattern: Option<&str>, hints: &[&str]) -> Selector {
    Selector {
        match_pattern: match_pattern.map(str::to_string),
        hints: hints.iter().map(|h| h.to_string()).collect(),
    }
}

fn extract(name: &str, selector: &Selector) -> Extraction {
    flags::extract(&load(name), selector).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn error(name: &str, selector: &Selector) -> String {
    match flags::extract(&load(name), selector) {
        Ok(e) => panic!(
            "{name}: expected an error, got\n{}",
            flags::render_report(&e)
        ),
        Err(e) => e.to_string(),
    }
}

/// The options with a verdict, as written (words joined by a space).
fn with(e: &Extraction, verdict: Verdict) -> Vec<String> {
    e.flags
        .iter()
        .filter(|f| f.verdict == verdict)
        .map(|f| f.original.join(" "))
        .collect()
}

fn reason_of(e: &Extraction, original: &str) -> String {
    let flag = e
        .flags
        .iter()
        .find(|f| f.original.join(" ") == original)
        .unwrap_or_else(|| panic!("no option `{original}`"));
    flag.reason.clone().unwrap_or_default()
}

fn includes(e: &Extraction) -> Vec<(String, bool)> {
    e.include_dirs
        .iter()
        .map(|d| (d.path.display().to_string(), d.system))
        .collect()
}

const TORCH: &str = "/home/kdev/miniforge3/envs/fg/lib/python3.11/site-packages/torch";
const ENV: &str = "/home/kdev/miniforge3/envs/fg";
const EXT_MACROS: [&str; 5] = [
    "-DTORCH_EXTENSION_NAME=fused_gemm",
    "-DTORCH_API_INCLUDE_EXTENSION_H",
    "-DPYBIND11_COMPILER_TYPE=\"_gcc\"",
    "-DPYBIND11_STDLIB=\"_libstdcpp\"",
    "-DPYBIND11_BUILD_ABI=\"_cxxabi1011\"",
];

// --- torch JIT (`torch.utils.cpp_extension.load(verbose=True)`): ninja `[n/m]` lines ----------

#[test]
fn torch_jit_log_picks_the_kernel_the_spec_names() {
    let e = extract(
        "torch_jit_ninja.log",
        &select(None, &["gemm_kernel.cuh", "fused_gemm_bf16"]),
    );
    assert_eq!(e.origin, "torch_jit_ninja.log:12");
    assert_eq!(
        e.source_file.as_deref(),
        Some("/home/kdev/src/fused_gemm/csrc/gemm_kernel.cu")
    );
    assert_eq!(
        e.directory.as_deref(),
        Some(Path::new(
            "/home/kdev/.cache/torch_extensions/py311_cu124/fused_gemm"
        ))
    );
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.std.as_deref(), Some("c++17"));
    assert_eq!(
        e.kept_flags(),
        [
            "-D_GLIBCXX_USE_CXX11_ABI=0",
            "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__",
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__",
            "--expt-relaxed-constexpr",
            "-O3",
            "--use_fast_math",
            "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
        ]
    );
    let mut dropped = vec![
        "--generate-dependencies-with-compile",
        "--dependency-output gemm_kernel.cuda.o.d",
    ];
    dropped.extend(EXT_MACROS);
    dropped.extend([
        "--compiler-options -fPIC",
        "-c",
        "/home/kdev/src/fused_gemm/csrc/gemm_kernel.cu",
        "-o gemm_kernel.cuda.o",
    ]);
    assert_eq!(with(&e, Verdict::Dropped), dropped);
    assert_eq!(reason_of(&e, "--compiler-options -fPIC"), "removed -fPIC: position-independent code is for the production shared object; the harness is an executable");
    assert_eq!(
        reason_of(&e, "-c"),
        "the harness is compiled and linked as one executable"
    );
    assert!(reason_of(&e, "-DTORCH_API_INCLUDE_EXTENSION_H").contains("Python.h"));
    assert_eq!(
        includes(&e),
        [
            (format!("{TORCH}/include"), true),
            (format!("{TORCH}/include/torch/csrc/api/include"), true),
            (format!("{ENV}/include"), true),
            (format!("{ENV}/include/python3.11"), true),
            ("/home/kdev/src/fused_gemm/csrc".into(), false),
            (
                "/home/kdev/src/fused_gemm/third_party/cutlass/include".into(),
                false
            ),
        ]
    );
    // The other nvcc lines are listed; the repeated FAILED line is not a second invocation.
    let others: Vec<&str> = e.others.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(
        others,
        [
            "torch_jit_ninja.log:11",
            "torch_jit_ninja.log:13",
            "torch_jit_ninja.log:28"
        ]
    );
    insta::assert_snapshot!("torch_jit_report", flags::render_report(&e));
}

#[test]
fn torch_jit_log_without_a_hint_is_ambiguous() {
    // Three files of one extension share flags; the second extension's differ.
    insta::assert_snapshot!(
        "torch_jit_ambiguous",
        error("torch_jit_ninja.log", &Selector::default())
    );
    // Hints that match nothing do not pick at random either.
    assert!(
        error("torch_jit_ninja.log", &select(None, &["attention.cuh"])).contains("different flags")
    );
}

#[test]
fn torch_jit_log_match_picks_the_other_extension() {
    let e = extract("torch_jit_ninja.log", &select(Some("moe_dispatch"), &[]));
    assert_eq!(e.origin, "torch_jit_ninja.log:28");
    assert_eq!(
        e.directory.as_deref(),
        Some(Path::new(
            "/home/kdev/.cache/torch_extensions/py311_cu124/moe_ops"
        ))
    );
    assert_eq!(
        e.kept_flags()[5..],
        [
            "--expt-relaxed-constexpr",
            "-O3",
            "-lineinfo",
            "-maxrregcount=168"
        ]
    );
    assert_eq!(
        reason_of(&e, "-Xcompiler -fPIC"),
        reason_of(&e, "--compiler-options -fPIC")
    );
    assert_eq!(
        with(&e, Verdict::Moved)
            .iter()
            .filter(|m| m.starts_with("-gencode"))
            .collect::<Vec<_>>(),
        ["-gencode arch=compute_90a,code=sm_90a"]
    );
    let others: Vec<&str> = e.others.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(others.len(), 3);
}

#[test]
fn several_invocations_with_the_same_flags_are_not_an_ambiguity() {
    let e = extract(
        "torch_jit_ninja.log",
        &select(Some("TORCH_EXTENSION_NAME=fused_gemm"), &[]),
    );
    assert_eq!(e.origin, "torch_jit_ninja.log:11");
    assert_eq!(e.notes[0], "3 nvcc invocations matching `TORCH_EXTENSION_NAME=fused_gemm` give the same harness flags; took torch_jit_ninja.log:11");
}

#[test]
fn a_pattern_that_matches_nothing_lists_the_candidates() {
    insta::assert_snapshot!(
        "torch_jit_no_match",
        error("torch_jit_ninja.log", &select(Some("attention"), &[]))
    );
}

#[test]
fn several_sass_targets_take_the_highest_and_say_so() {
    let e = extract("torch_jit_ninja.log", &select(Some("epilogue"), &[]));
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert!(e.notes.iter().any(|n| n.starts_with(
        "the line builds SASS for sm_80, sm_90a; the harness takes the highest, sm_90a"
    )));
    assert_eq!(
        reason_of(&e, "-gencode=arch=compute_80,code=sm_80"),
        "the GPU target (sm_80) is carried by build.arch"
    );
}

// --- torch setup.py `build.ninja` -----------------------------------------------------------

#[test]
fn torch_build_ninja_is_expanded_like_ninja() {
    let input = load("torch_setup/build.ninja");
    assert_eq!(input.format, flags::Format::Ninja);
    let e = flags::extract(&input, &select(None, &["flash_gemm_sm90.cuh"])).unwrap();
    assert_eq!(e.origin, "torch_setup/build.ninja:28 (build /home/kdev/src/flash_gemm/build/temp.linux-x86_64-cpython-311/csrc/flash_gemm_sm90.o)");
    assert_eq!(
        e.source_file.as_deref(),
        Some("/home/kdev/src/flash_gemm/csrc/flash_gemm_sm90.cu")
    );
    // torch's ''"'"'-fPIC'"'"'' reaches nvcc as '-fPIC' and the host compiler as -fPIC.
    assert!(reason_of(&e, "--compiler-options '-fPIC'").starts_with("removed -fPIC"));
    // torch writes -c twice (in cuda_cflags and in the rule).
    assert_eq!(
        with(&e, Verdict::Dropped)
            .iter()
            .filter(|d| *d == "-c")
            .count(),
        2
    );
    assert_eq!(
        e.kept_flags(),
        [
            "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__",
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__",
            "--expt-relaxed-constexpr",
            "-O3",
            "--use_fast_math",
            "-D_GLIBCXX_USE_CXX11_ABI=0",
        ]
    );
    assert_eq!(e.others, [(
        "torch_setup/build.ninja:29 (build /home/kdev/src/flash_gemm/build/temp.linux-x86_64-cpython-311/csrc/split_k reduce.o)".to_string(),
        Some("/home/kdev/src/flash_gemm/csrc/split_k reduce.cu".to_string())
    )]);
    // The edge's own binding extends the file's.
    let split = flags::extract(&input, &select(Some("split_k"), &[])).unwrap();
    assert_eq!(
        split.kept_flags().last().map(String::as_str),
        Some("-DSPLITK_SLICES=4")
    );
    assert_eq!(
        split.source_file.as_deref(),
        Some("/home/kdev/src/flash_gemm/csrc/split_k reduce.cu")
    );
}

// --- CMake compile_commands.json (CUTLASS examples) ------------------------------------------

const CUTLASS_KEPT: [&str; 14] = [
    "--forward-unknown-to-host-compiler",
    "-DCUTLASS_ENABLE_CUBLAS=1",
    "-DCUTLASS_NAMESPACE=cutlass",
    "-DCUTLASS_TEST_LEVEL=0",
    "-DCUTLASS_TEST_ENABLE_CACHED_RESULTS=1",
    "-DCUTLASS_CONV_UNIT_TEST_RIGOROUS_SIZE_ENABLED=1",
    "-DCUTLASS_DEBUG_TRACE_LEVEL=0",
    "-O3",
    "-DNDEBUG",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "--expt-relaxed-constexpr",
    "-DCUTLASS_ENABLE_GDC_FOR_SM90=1",
    "-Xcompiler=-Wconversion",
    "-Xcompiler=-fno-strict-aliasing",
];

#[test]
fn cutlass_compile_commands_command_entry() {
    let input = load("cutlass_compile_commands.json");
    assert_eq!(input.format, flags::Format::CompileCommands);
    let e = flags::extract(&input, &select(Some("48_hopper"), &[])).unwrap();
    assert_eq!(e.origin, "cutlass_compile_commands.json entry 1");
    assert_eq!(
        e.directory.as_deref(),
        Some(Path::new("/workspace/cutlass/build"))
    );
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.std.as_deref(), Some("c++17"));
    assert_eq!(e.kept_flags(), CUTLASS_KEPT);
    assert_eq!(
        with(&e, Verdict::Dropped),
        [
            "-Xcompiler=-fPIE",
            "-x cu",
            "-c",
            "/workspace/cutlass/examples/48_hopper_warp_specialized_gemm/48_hopper_warp_specialized_gemm.cu",
            "-o examples/48_hopper_warp_specialized_gemm/CMakeFiles/48_hopper_warp_specialized_gemm.dir/48_hopper_warp_specialized_gemm.cu.o",
        ]
    );
    assert_eq!(
        reason_of(&e, "-x cu"),
        "the harness is a .cu file, compiled as CUDA"
    );
    assert_eq!(
        with(&e, Verdict::Moved),
        [
            "-I/workspace/cutlass/include",
            "-I/workspace/cutlass/examples/common",
            "-I/workspace/cutlass/build/include",
            "-I/workspace/cutlass/tools/util/include",
            "-std=c++17",
            "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]",
        ]
    );
    // The C++ entry is not an nvcc invocation.
    assert_eq!(
        e.others.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
        [
            "cutlass_compile_commands.json entry 2",
            "cutlass_compile_commands.json entry 4"
        ]
    );
    insta::assert_snapshot!("cutlass_build_yaml", flags::render_build_yaml(&e));
}

#[test]
fn cutlass_compile_commands_arguments_entry_reads_the_same() {
    let by_command = extract(
        "cutlass_compile_commands.json",
        &select(Some("48_hopper"), &[]),
    );
    let by_arguments = extract(
        "cutlass_compile_commands.json",
        &select(Some("49_hopper"), &[]),
    );
    assert_eq!(by_arguments.origin, "cutlass_compile_commands.json entry 2");
    assert_eq!(by_arguments.kept_flags(), by_command.kept_flags());
    assert_eq!(by_arguments.include_dirs, by_command.include_dirs);
    // Two examples with the same flags: no ambiguity.
    let either = extract(
        "cutlass_compile_commands.json",
        &select(Some("examples/4"), &[]),
    );
    assert_eq!(either.origin, "cutlass_compile_commands.json entry 1");
}

#[test]
fn cutlass_compile_commands_relative_include_and_ccache() {
    let e = extract(
        "cutlass_compile_commands.json",
        &select(None, &["55_hopper_mixed_dtype_gemm"]),
    );
    assert_eq!(e.origin, "cutlass_compile_commands.json entry 4");
    assert_eq!(
        e.include_dirs[1].path,
        Path::new(
            "/workspace/cutlass/build/examples/55_hopper_mixed_dtype_gemm/../../../examples/common"
        )
    );
    let kept = e.kept_flags();
    assert_eq!(kept[..14], CUTLASS_KEPT);
    assert_eq!(
        kept[14..],
        [
            "-lineinfo",
            "-DCUTLASS_DEBUG_TRACE_LEVEL=1",
            "-Xptxas=-warn-spills"
        ]
    );
    assert!(e
        .notes
        .iter()
        .any(|n| n.starts_with("took cutlass_compile_commands.json entry 4")));
    // Without a pick: entries 1 and 2 agree, 4 differs.
    insta::assert_snapshot!(
        "cutlass_ambiguous",
        error("cutlass_compile_commands.json", &Selector::default())
    );
}

// --- JIT log of a persistent megakernel with nvshmem ------------------------------------------

#[test]
fn megakernel_jit_log_warns_about_what_the_harness_cannot_have() {
    let e = extract("megakernel_jit.log", &Selector::default());
    // Continuation lines repeat the logger's prefix with other timestamps.
    assert_eq!(e.origin, "megakernel_jit.log:7");
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.std.as_deref(), Some("c++20"));
    assert_eq!(
        e.kept_flags(),
        [
            "-O3",
            "-Xptxas=-v,-warn-spills",
            "-DMK_NUM_SMS=132",
            "-DMK_MAX_TASKS=4096",
            "-DMK_WORLD_SIZE=8",
            "-lineinfo"
        ]
    );
    assert_eq!(
        e.flags.last().unwrap().from.as_deref(),
        Some("NVCC_APPEND_FLAGS")
    );
    assert_eq!(
        with(&e, Verdict::Dropped),
        [
            "-ccbin mpicxx",
            "-rdc=true",
            "-shared",
            "-Xcompiler -fPIC",
            "-L/opt/nvshmem/lib",
            "-lnvshmem_device",
            "-lnvshmem_host",
            "-lcudadevrt",
            "--threads 4",
            "-o /home/kdev/.cache/megakernel/7f3a91c2e05b/persistent_megakernel.so",
            "/home/kdev/.cache/megakernel/7f3a91c2e05b/persistent_megakernel.cu",
        ]
    );
    // `nvcc --version` compiles nothing: not a candidate.
    assert!(e.others.is_empty());
    insta::assert_snapshot!("megakernel_report", flags::render_report(&e));
}

// --- Triton/TVM-style: the argv logged as a Python list ---------------------------------------

#[test]
fn tvm_python_list_argv() {
    let e = extract("tvm_nvcc.log", &Selector::default());
    assert_eq!(e.origin, "tvm_nvcc.log:3");
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(
        e.kept_flags(),
        [
            "-O3",
            "-Xptxas=-v",
            "-maxrregcount=128",
            "--use_fast_math",
            "-lineinfo"
        ]
    );
    assert_eq!(
        with(&e, Verdict::Dropped),
        [
            "--fatbin",
            "-o /tmp/tmpq8d1x2e0/my_kernel.fatbin",
            "/tmp/tmpq8d1x2e0/my_kernel.cu"
        ]
    );
    assert_eq!(
        reason_of(
            &e,
            "--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]"
        ),
        "the GPU target (sm_90a, compute_90a) is carried by build.arch"
    );
    assert!(e.notes.contains(
        &"--use_fast_math implies --ftz=true --prec-div=false --prec-sqrt=false --fmad=true"
            .to_string()
    ));
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
}

// --- make VERBOSE=1: cd DIR &&, quotes, escapes, continuations, every spelling ----------------

#[test]
fn make_log_with_quotes_escapes_and_continuations() {
    let e = extract("make_quoting.log", &Selector::default());
    assert_eq!(e.origin, "make_quoting.log:5");
    assert_eq!(
        e.directory.as_deref(),
        Some(Path::new("/home/kdev/proj/build/src"))
    );
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.std.as_deref(), Some("c++20"));
    assert_eq!(
        e.kept_flags(),
        [
            "--forward-unknown-to-host-compiler",
            "-DKERNEL_TAG=\"tiled-v2\"",
            "-DGREETING=hello world",
            "-DUSE_TMA",
            "-Xcompiler=-Wall",
            "-Xcompiler=-Wextra",
            "-O3",
            "--ftz=true",
            "--prec-div=false",
            "--fmad=false",
            "--diag-suppress=177,550",
            "-Werror=all-warnings",
        ]
    );
    assert_eq!(reason_of(&e, "-Xcompiler=-fPIE,-Wextra"), "removed -fPIE: position-independent code is for the production shared object; the harness is an executable");
    assert_eq!(
        with(&e, Verdict::Dropped),
        [
            "--threads 0",
            "-MD",
            "-MT CMakeFiles/gemm_test.dir/src/gemm_test.cu.o",
            "-MF CMakeFiles/gemm_test.dir/src/gemm_test.cu.o.d",
            "-x cu",
            "-c",
            "/home/kdev/proj/src/gemm_test.cu",
            "-o CMakeFiles/gemm_test.dir/src/gemm_test.cu.o",
        ]
    );
    assert_eq!(
        reason_of(&e, "-MD"),
        "a dependency file for the build system"
    );
    assert_eq!(
        includes(&e),
        [
            ("/home/kdev/proj/include".into(), false),
            ("/home/kdev/proj/third party/cute/include".into(), false),
            ("/home/kdev/proj/build/src/../include".into(), false),
            ("/home/kdev/proj/extern/cccl/include".into(), true),
        ]
    );
    assert_eq!(
        with(&e, Verdict::Moved)[4..],
        ["-arch sm_90a", "-code sm_90a,compute_90a", "-std c++20"]
    );
    // The spec block reads back as exactly these flags.
    let yaml = flags::render_build_yaml(&e);
    insta::assert_snapshot!("make_quoting_build_yaml", yaml);
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let back: Vec<String> = serde_yaml::from_value(doc["build"]["flags"].clone()).unwrap();
    assert_eq!(back, e.kept_flags());
    assert_eq!(doc["build"]["arch"].as_str(), Some("sm_90a"));
    assert_eq!(doc["build"]["std"].as_str(), Some("c++20"));
}

// --- a CI log wrapped at a fixed width by the logger --------------------------------------------

#[test]
fn ci_log_wrapped_by_the_logger() {
    let e = extract("ci_wrapped.log", &Selector::default());
    assert_eq!(e.origin, "ci_wrapped.log:5");
    assert_eq!(e.source_file.as_deref(), Some("kernels/attention_fwd.cu"));
    assert_eq!(
        e.kept_flags(),
        [
            "-O3",
            "-DNDEBUG",
            "--expt-relaxed-constexpr",
            "--extended-lambda",
            "-Xptxas=-O3",
            "-lineinfo"
        ]
    );
    assert_eq!(
        with(&e, Verdict::Moved),
        [
            "-std=c++17",
            "-gencode=arch=compute_90a,code=sm_90a",
            "-I/__w/kernels/kernels/include"
        ]
    );
    assert_eq!(
        with(&e, Verdict::Dropped),
        ["-c", "kernels/attention_fwd.cu", "-o build/attention_fwd.o"]
    );
}

// --- response files ------------------------------------------------------------------------------

#[test]
fn response_files_are_expanded_in_place_relative_to_the_log() {
    let e = extract("rsp/build.log", &Selector::default());
    assert_eq!(
        e.source_file.as_deref(),
        Some("/home/kdev/proj/src/gemm.cu")
    );
    assert_eq!(
        e.kept_flags(),
        [
            "--forward-unknown-to-host-compiler",
            "-O3",
            "-DNDEBUG",
            "--use_fast_math",
            "-maxrregcount=128",
            "-DGEMM_TILE=\"128x128\""
        ]
    );
    let from: Vec<(String, Option<&str>)> = e
        .flags
        .iter()
        .map(|f| (f.original.join(" "), f.from.as_deref()))
        .collect();
    assert_eq!(
        from[1],
        (
            "-I/home/kdev/proj/include".into(),
            Some("CMakeFiles/gemm.dir/includes_CUDA.rsp")
        )
    );
    assert_eq!(from[7], ("-std=c++17".into(), Some("flags.rsp")));
    assert_eq!(from[8], ("-maxrregcount=128".into(), Some("more.rsp")));
    assert_eq!(from[10], ("-Xcompiler=-fPIC".into(), None));
    assert_eq!(
        includes(&e)[1],
        ("/home/kdev/proj/third party/cutlass/include".into(), true)
    );
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.std.as_deref(), Some("c++17"));
}

#[test]
fn a_missing_response_file_is_an_error_that_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let mut input = Input::from_text("build.log", "[2/4] nvcc @gone.rsp -c k.cu -o k.o\n");
    input.base_dir = Some(dir.path().to_path_buf());
    let message = flags::extract(&input, &Selector::default())
        .unwrap_err()
        .to_string();
    let message = message.replace(&dir.path().display().to_string(), "TMP");
    assert_eq!(message, "response file `gone.rsp` named at build.log:1 not found (looked for TMP/gone.rsp, gone.rsp); copy it next to the log, or pass the compile line with its contents");
}

#[test]
fn a_response_file_naming_itself_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loop.rsp"), "-O3 @loop.rsp").unwrap();
    let mut input = Input::from_text("build.log", "nvcc @loop.rsp -c k.cu\n");
    input.base_dir = Some(dir.path().to_path_buf());
    let err = flags::extract(&input, &Selector::default()).unwrap_err();
    assert!(matches!(err, FlagsError::ResponseDepth { .. }), "{err}");
}

// --- single command lines --------------------------------------------------------------------------

#[test]
fn single_command_file_with_long_spellings() {
    let e = extract("single_command.txt", &Selector::default());
    assert_eq!(e.arch.as_deref(), Some("sm_100a"));
    assert_eq!(e.std.as_deref(), Some("c++20"));
    assert_eq!(
        e.kept_flags(),
        [
            "-O3",
            "-DCUTE_SM100_ENABLED",
            "-UNDEBUG",
            "-Xptxas=-v,--warn-on-spills",
            "-Xcompiler=-Wall,-Wno-unused",
            "--extended-lambda",
            "-rdc=false",
            "--fmad=true",
            "-lineinfo",
            "--resource-usage",
        ]
    );
    assert_eq!(
        with(&e, Verdict::Dropped),
        [
            "-keep",
            "--keep-dir /tmp/nvcc-keep",
            "blackwell_gemm.cu",
            "-o blackwell_gemm"
        ]
    );
    assert_eq!(
        with(&e, Verdict::Moved),
        [
            "--gpu-architecture=compute_100a",
            "--gpu-code=sm_100a,compute_100a",
            "--std c++20",
            "--include-path /home/kdev/b200/include",
            "--system-include /home/kdev/b200/extern/cutlass/include",
        ]
    );
}

#[test]
fn command_line_given_on_the_command_line() {
    let input = flags::from_command_line(
        "FOO=1 ccache nvcc -arch=sm_90a -O3 -Iinclude -Xcompiler -fPIC,-O3 k.cu -o k",
    )
    .unwrap();
    let e = flags::extract(&input, &Selector::default()).unwrap();
    assert_eq!(e.arch.as_deref(), Some("sm_90a"));
    assert_eq!(e.kept_flags(), ["-O3", "-Xcompiler=-O3"]);
    // Relative to the current directory, where the user typed it.
    assert_eq!(
        e.include_dirs[0].path,
        std::env::current_dir().unwrap().join("include")
    );
    // Only options, no program.
    let input = flags::from_command_line("-O3 --use_fast_math -DTILE=128").unwrap();
    let e = flags::extract(&input, &Selector::default()).unwrap();
    assert_eq!(e.kept_flags(), ["-O3", "--use_fast_math", "-DTILE=128"]);
    assert!(e.notes.iter().any(|n| n.contains("no GPU target")));
    // Not nvcc, or not a whole line.
    let err = flags::from_command_line("env CC=gcc g++ -O3 -c main.cpp")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("the command line runs `g++`, not nvcc"),
        "{err}"
    );
    assert!(matches!(
        flags::from_command_line("nvcc -DX='a b"),
        Err(FlagsError::Unterminated { quote: '\'' })
    ));
    assert!(matches!(
        flags::from_command_line("   "),
        Err(FlagsError::Empty)
    ));
    // nvcc alone is an empty invocation; a wrapped other compiler is named.
    let bare = flags::from_command_line("nvcc").unwrap();
    assert!(flags::extract(&bare, &Selector::default())
        .unwrap()
        .flags
        .is_empty());
    let err = flags::from_command_line("ccache g++ -c a.cpp").unwrap_err();
    assert!(matches!(err, FlagsError::NotNvcc { program } if program == "g++"));
}

#[test]
fn rules_for_options_that_change_code_generation() {
    let line = "nvcc -gencode arch=compute_90a,code=sm_90a -dc -dlto -ccbin /opt/rh/gcc-toolset-13/root/usr/bin/g++ -Xcompiler -ffast-math,-fPIC -Wall -Wl,-rpath,/opt/lib -frobnicate 7 k.cu -c";
    let e = flags::extract(
        &flags::from_command_line(line).unwrap(),
        &Selector::default(),
    )
    .unwrap();
    assert_eq!(
        e.kept_flags(),
        [
            "-ccbin=/opt/rh/gcc-toolset-13/root/usr/bin/g++",
            "-Xcompiler=-ffast-math",
            "-Wall",
            "-frobnicate",
            "7"
        ]
    );
    assert_eq!(
        with(&e, Verdict::Dropped),
        ["-dc", "-dlto", "-Wl,-rpath,/opt/lib", "k.cu", "-c"]
    );
    let warnings = e.warnings.join("\n");
    assert!(
        warnings.contains("dropped `-dc`, which can change code generation"),
        "{warnings}"
    );
    assert!(
        warnings.contains("dropped `-dlto`, which can change code generation"),
        "{warnings}"
    );
    assert!(
        warnings.contains("host `-ffast-math` applies to the harness's host code too"),
        "{warnings}"
    );
    if !Path::new("/opt/rh/gcc-toolset-13/root/usr/bin/g++").exists() {
        assert!(
            warnings.contains("does not exist on this machine"),
            "{warnings}"
        );
    }
    assert!(e
        .notes
        .iter()
        .any(|n| n.starts_with("kept `-frobnicate` as written")));
    assert!(e
        .notes
        .iter()
        .any(|n| n.starts_with("kept `-Wall` as written")));
}

#[test]
fn include_dirs_that_exist_and_ones_that_do_not() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("include")).unwrap();
    let json = serde_json::json!([{
        "directory": dir.path(),
        "arguments": ["nvcc", "-Iinclude", "-I./missing", "-isystem", "/nonexistent/cutlass/include", "-c", "k.cu"],
        "file": "k.cu",
    }]);
    let input = Input::from_text("compile_commands.json", json.to_string());
    let e = flags::extract(&input, &Selector::default()).unwrap();
    let dirs: Vec<(PathBuf, bool, bool)> = e
        .include_dirs
        .iter()
        .map(|d| (d.path.clone(), d.system, d.exists))
        .collect();
    assert_eq!(
        dirs,
        [
            (dir.path().join("include"), false, true),
            (dir.path().join("missing"), false, false),
            (PathBuf::from("/nonexistent/cutlass/include"), true, false),
        ]
    );
    let warning = e
        .warnings
        .iter()
        .find(|w| w.starts_with("include dirs missing"))
        .unwrap();
    assert!(warning.contains(&dir.path().join("missing").display().to_string()));
    assert!(warning.contains("/nonexistent/cutlass/include"));
}

#[test]
fn read_input_tells_formats_by_content() {
    let formats: Vec<flags::Format> = [
        "torch_jit_ninja.log",
        "torch_setup/build.ninja",
        "cutlass_compile_commands.json",
        "single_command.txt",
    ]
    .iter()
    .map(|f| flags::read_input(&fixtures().join(f)).unwrap().format)
    .collect();
    use flags::Format::*;
    assert_eq!(formats, [Log, Ninja, CompileCommands, Log]);
    let input = flags::read_input(&fixtures().join("rsp/build.log")).unwrap();
    assert_eq!(
        input.base_dir.as_deref(),
        Some(fixtures().join("rsp").as_path())
    );
    let err = flags::read_input(&fixtures().join("nope.log"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot read ") && err.contains("nope.log"),
        "{err}"
    );
}

#[test]
fn inputs_without_nvcc_say_what_they_looked_at() {
    let input = Input::from_text("build.log", "[1/2] c++ -c a.cpp -o a.o\n-- Found CUDAToolkit: /usr/local/cuda/bin/nvcc\nnvcc --version\n[2/2] c++ a.o -o app\n");
    let message = flags::extract(&input, &Selector::default())
        .unwrap_err()
        .to_string();
    assert_eq!(message, "no nvcc invocation that compiles a source file in build.log (looked at 4 lines; 1 nvcc line(s) compile nothing, e.g. build.log:3: `nvcc --version`); pass the compile line itself, or --match PATTERN");
    let err = flags::extract(
        &Input::from_text("compile_commands.json", "[{\"directory\": 3}]"),
        &Selector::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "compile_commands.json is not a valid compile_commands.json: invalid type"
        ),
        "{err}"
    );
}
