//! Production flags from real compile lines (`repro flags`, `build.flags_from`): a corpus of
//! hand-written but realistic logs in tests/fixtures/flags/, each asserting which options are
//! kept, moved or dropped and why. No nvcc or GPU needed.

use std::path::{Path, PathBuf};

use repro::flags::{self, Extraction, FlagsError, Input, Selector, Verdict};

fn fixtures() -> PathBuf {
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

fn select(match_pattern: Option<&str>, hints: &[&str]) -> Selector {
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

// --- every spelling nvcc accepts ------------------------------------------------------------

/// The flags of `nvcc ARGS k.cu` typed on the command line.
fn line(args: &str) -> Extraction {
    let input = flags::from_command_line(&format!("nvcc {args} k.cu")).unwrap();
    flags::extract(&input, &Selector::default()).unwrap_or_else(|e| panic!("{args}: {e}"))
}

#[test]
fn every_spelling_of_a_kept_option_has_one_normalized_form() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[
                "-Xcompiler -O3,-Wall",
                "-Xcompiler=-O3,-Wall",
                "--compiler-options '-O3 -Wall'",
                "--compiler-options=-O3,-Wall",
                "-Xcompiler -fPIC,-O3,-Wall",
            ],
            &["-Xcompiler=-O3,-Wall"],
        ),
        (
            &[
                "-Xptxas -v",
                "-Xptxas=-v",
                "--ptxas-options=-v",
                "--ptxas-options -v",
            ],
            &["-Xptxas=-v"],
        ),
        (
            &[
                "-D X=Y",
                "-DX=Y",
                "--define-macro X=Y",
                "--define-macro=X=Y",
            ],
            &["-DX=Y"],
        ),
        (&["-U X", "-UX", "--undefine-macro=X"], &["-UX"]),
        (&["-O3", "-O 3", "--optimize 3", "--optimize=3"], &["-O3"]),
        (
            &[
                "-maxrregcount 128",
                "-maxrregcount=128",
                "--maxrregcount=128",
            ],
            &["-maxrregcount=128"],
        ),
        (
            &[
                "--ftz",
                "--ftz=true",
                "-ftz=true",
                "-ftz true",
                "--ftz=TRUE",
            ],
            &["--ftz=true"],
        ),
        (
            &["--prec-div=false", "-prec-div false"],
            &["--prec-div=false"],
        ),
        (
            &["--prec-sqrt false", "-prec-sqrt=false"],
            &["--prec-sqrt=false"],
        ),
        (&["--fmad=false", "-fmad false"], &["--fmad=false"]),
        (&["--use_fast_math", "-use_fast_math"], &["--use_fast_math"]),
        (&["-lineinfo", "--generate-line-info"], &["-lineinfo"]),
        (
            &[
                "--expt-extended-lambda",
                "-expt-extended-lambda",
                "--extended-lambda",
            ],
            &["--extended-lambda"],
        ),
        (
            &["--expt-relaxed-constexpr", "-expt-relaxed-constexpr"],
            &["--expt-relaxed-constexpr"],
        ),
        (&["-G", "--device-debug"], &["-G"]),
        (
            &[
                "-rdc=false",
                "--relocatable-device-code false",
                "-rdc false",
            ],
            &["-rdc=false"],
        ),
        (
            &["-ccbin g++-12", "-ccbin=g++-12", "--compiler-bindir=g++-12"],
            &["-ccbin=g++-12"],
        ),
        (
            &["--diag-suppress 177,550", "-diag-suppress=177,550"],
            &["--diag-suppress=177,550"],
        ),
        (
            &["-Werror all-warnings", "--Werror=all-warnings"],
            &["-Werror=all-warnings"],
        ),
    ];
    for (spellings, kept) in cases {
        for args in *spellings {
            assert_eq!(line(args).kept_flags(), *kept, "nvcc {args}");
        }
    }
}

#[test]
fn every_spelling_of_the_target_the_dialect_and_include_dirs_moves() {
    let targets = [
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode arch=compute_90a,code=sm_90a",
        "--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]",
        "--generate-code arch=compute_90a,code=\"sm_90a,compute_90a\"",
        "-arch=sm_90a",
        "-arch sm_90a",
        "--gpu-architecture=sm_90a",
        "-arch=compute_90a -code=sm_90a",
        "-arch compute_90a -code sm_90a,compute_90a",
        "--gpu-architecture compute_90a --gpu-code=[sm_90a]",
    ];
    for args in targets {
        let e = line(args);
        assert_eq!(
            (e.arch.as_deref(), e.kept_flags().len()),
            (Some("sm_90a"), 0),
            "nvcc {args}"
        );
        assert!(
            e.flags.iter().all(|f| f.verdict != Verdict::Kept),
            "nvcc {args}"
        );
    }
    for args in ["-std=c++20", "-std c++20", "--std c++20", "--std=c++20"] {
        assert_eq!(line(args).std.as_deref(), Some("c++20"), "nvcc {args}");
    }
    let includes = [
        ("-I/x", false),
        ("-I /x", false),
        ("--include-path /x", false),
        ("--include-path=/x", false),
        ("-isystem /x", true),
        ("-isystem=/x", true),
        ("-isystem/x", true),
        ("--system-include=/x", true),
    ];
    for (args, system) in includes {
        let dirs: Vec<(PathBuf, bool)> = line(args)
            .include_dirs
            .iter()
            .map(|d| (d.path.clone(), d.system))
            .collect();
        assert_eq!(dirs, [(PathBuf::from("/x"), system)], "nvcc {args}");
    }
    // A line with PTX only builds SASS for that architecture; `native` names none.
    let ptx = line("-gencode arch=compute_90a,code=compute_90a");
    assert_eq!(ptx.arch.as_deref(), Some("sm_90a"));
    assert!(ptx
        .notes
        .iter()
        .any(|n| n.starts_with("the line embeds only PTX (compute_90a)")));
    let native = line("-arch=native");
    assert_eq!(native.arch, None);
    assert!(native
        .notes
        .contains(&"`-arch=native` names no fixed target; set build.arch".to_string()));
    // Blackwell's family and arch-specific targets order as 100 < 100f < 100a.
    assert_eq!(
        line("-gencode arch=compute_100,code=[sm_100,sm_100a,sm_100f]")
            .arch
            .as_deref(),
        Some("sm_100a")
    );
}

#[test]
fn every_drop_has_its_reason() {
    let exe = "the harness is compiled and linked as one executable";
    let dep = "a dependency file for the build system";
    let link = "links the production binary; the harness links only the CUDA runtime";
    let cases: &[(&str, &str)] = &[
        ("-c", exe),
        ("--compile", exe),
        ("-o x.o", "the harness names its own output"),
        ("--output-file=x.o", "the harness names its own output"),
        ("-MD", dep),
        ("-MMD", dep),
        ("-MF x.d", dep),
        ("--generate-dependencies-with-compile", dep),
        ("--dependency-output=x.d", dep),
        ("-x cu", "the harness is a .cu file, compiled as CUDA"),
        ("-shared", "builds a shared library; the harness is an executable"),
        ("-lnvshmem", link),
        ("-l nvshmem", link),
        ("-L/opt/nvshmem/lib", link),
        ("-Xlinker -rpath=/opt/lib", link),
        ("--threads 8", "compile-time parallelism only"),
        ("-t 8", "compile-time parallelism only"),
        ("-t=8", "compile-time parallelism only"),
        ("--keep", "intermediate files and messages only"),
        ("-keep", "intermediate files and messages only"),
        ("-Xcompiler -fPIC", "removed -fPIC: position-independent code is for the production shared object; the harness is an executable"),
        ("-Xcompiler=-fPIE", "removed -fPIE: position-independent code is for the production shared object; the harness is an executable"),
        ("-Wl,--as-needed", "a host linker option for the production binary"),
        ("libkernels.a", "an object or library of the production link"),
    ];
    for (args, reason) in cases {
        let e = line(args);
        assert_eq!(e.kept_flags(), Vec::<String>::new(), "nvcc {args}");
        let flag = &e.flags[0];
        assert_eq!(
            (flag.verdict, flag.reason.as_deref()),
            (Verdict::Dropped, Some(*reason)),
            "nvcc {args}"
        );
        assert!(!flag.affects_codegen, "nvcc {args}");
        assert!(
            !e.warnings
                .iter()
                .any(|w| w.contains("can change code generation")),
            "nvcc {args}"
        );
    }
    // Those that can change code generation are dropped with a warning.
    for args in [
        "-rdc=true",
        "--relocatable-device-code=true",
        "-dc",
        "-dlto",
        "-ccbin mpicxx",
        "--compiler-bindir=/usr/bin/mpiCC",
        "-DTORCH_EXTENSION_NAME=ext",
    ] {
        let e = line(args);
        assert!(
            e.flags[0].affects_codegen && e.flags[0].verdict == Verdict::Dropped,
            "nvcc {args}"
        );
        let warning = format!(
            "dropped `{}`, which can change code generation: ",
            e.flags[0].original.join(" ")
        );
        assert!(
            e.warnings.iter().any(|w| w.starts_with(&warning)),
            "nvcc {args}: {:?}",
            e.warnings
        );
    }
}

#[test]
fn shell_syntax_around_the_command() {
    let input = flags::from_command_line(
        "cd /b && NVCC_PREPEND_FLAGS='-G -O0' nvcc -O3 -c k.cu 2>&1 | tee log # rebuild",
    )
    .unwrap();
    let e = flags::extract(&input, &Selector::default()).unwrap();
    assert_eq!(e.directory.as_deref(), Some(Path::new("/b")));
    assert_eq!(e.kept_flags(), ["-G", "-O0", "-O3"]);
    assert_eq!(e.flags[0].from.as_deref(), Some("NVCC_PREPEND_FLAGS"));
    // A logger that cut the line inside a quote: what is there is read, with a warning.
    let input = Input::from_text("jit.log", "DEBUG nvcc -O3 -c k.cu -DNAME='gemm tile=128\n");
    let e = flags::extract(&input, &Selector::default()).unwrap();
    assert_eq!(
        e.warnings[0],
        "jit.log:1 ends inside a ' quote (cut off by a logger?): options may be missing"
    );
}

#[test]
fn build_yaml_quotes_what_yaml_would_misread() {
    let input = flags::from_command_line(
        r#"nvcc '-DA=x y' '-DB=\x' -DC=#1 '-DD=a: b' -DE="q" -1 -Dyes k.cu"#,
    )
    .unwrap();
    let e = flags::extract(&input, &Selector::default()).unwrap();
    let yaml = flags::render_build_yaml(&e);
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let back: Vec<String> = serde_yaml::from_value(doc["build"]["flags"].clone()).unwrap();
    assert_eq!(back, e.kept_flags());
    assert_eq!(
        back,
        ["-DA=x y", r"-DB=\x", "-DC=#1", "-DD=a: b", "-DE=q", "-1", "-Dyes"]
    );
    assert!(
        yaml.contains("  # arch: the line names no SASS target"),
        "{yaml}"
    );
}

// --- no panics on any input -------------------------------------------------------------------------

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn try_all_formats(text: &str) {
    for format in [
        flags::Format::Log,
        flags::Format::Ninja,
        flags::Format::CompileCommands,
        flags::Format::CommandLine,
    ] {
        let input = Input {
            name: "fuzz".into(),
            text: text.into(),
            format,
            base_dir: None,
        };
        for selector in [Selector::default(), select(Some("k"), &["k.cuh"])] {
            if let Ok(e) = flags::extract(&input, &selector) {
                let _ = (
                    flags::render_report(&e),
                    flags::render_build_yaml(&e),
                    e.kept_flags(),
                );
            }
        }
    }
    let _ = flags::from_command_line(text);
}

#[test]
fn garbage_never_panics() {
    let pieces = [
        "nvcc",
        "/usr/bin/nvcc",
        " ",
        " ",
        "\n",
        "\\",
        "\\\n",
        "'",
        "\"",
        "$",
        "${",
        "}",
        "[",
        "]",
        "(",
        ")",
        ",",
        "=",
        ":",
        ";",
        "&&",
        "|",
        ">",
        "2>&1",
        "#",
        "-",
        "--",
        "-D",
        "-I",
        "-Xcompiler",
        "-gencode",
        "arch=compute_90a,code=[sm_90a",
        "-arch=",
        "-std",
        "-O",
        "-o",
        "-c",
        "k.cu",
        "x.o",
        "-rdc",
        "true",
        "-ccbin",
        "mpicxx",
        "rule ",
        "build ",
        "command = ",
        "$in",
        "{\"directory\":",
        "\"arguments\":",
        "['nvcc', '",
        "é",
        "\u{0}",
        "\t",
        "sm_",
        "compute_",
        "-isystem=",
        "cd",
        "x",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let n = (rng.next() % 40) as usize;
        let text: String = (0..n).map(|_| rng.pick(&pieces)).collect();
        try_all_formats(&text);
    }
}

#[test]
fn every_prefix_of_every_fixture_reads_without_panicking() {
    for name in [
        "torch_jit_ninja.log",
        "torch_setup/build.ninja",
        "cutlass_compile_commands.json",
        "megakernel_jit.log",
        "make_quoting.log",
        "tvm_nvcc.log",
        "single_command.txt",
        "ci_wrapped.log",
        "rsp/build.log",
    ] {
        let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
        let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(7).collect();
        for cut in cuts {
            let _ = flags::extract(&Input::from_text(name, &text[..cut]), &Selector::default());
        }
        // Each line alone, as a command line.
        for line in text.lines() {
            try_all_formats(line);
        }
    }
}

/// A CMake/Ninja `-v` log line compiling `file` (the words CMake writes for a CUDA object).
fn cmake_nvcc_line(step: usize, file: &str, extra: &str) -> String {
    format!(
        "[{step}/9000] /usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKERNELS_EXPORTS \
         -I/src/kernels/include -isystem /usr/local/cuda/include -O3 -DNDEBUG -std=c++17 \
         --expt-relaxed-constexpr \"--generate-code=arch=compute_90a,code=[sm_90a]\" \
         -Xcompiler=-fPIC{extra} -MD -MT CMakeFiles/kernels.dir/src/{file}.cu.o \
         -MF CMakeFiles/kernels.dir/src/{file}.cu.o.d -x cu -c /src/kernels/src/{file}.cu \
         -o CMakeFiles/kernels.dir/src/{file}.cu.o\n"
    )
}

/// Issue 17: `repro flags --from-log` was quadratic in the log's size (1 MB: 31 s, 2 MB: 135 s).
/// A 5 MB log of 4,000 compile lines among warnings and ninja's status lines must read in a
/// time that only a linear reader meets, even in a debug build on a busy machine.
#[test]
fn a_large_build_log_reads_in_linear_time() {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 5 << 20 {
        i += 1;
        text += &cmake_nvcc_line(i, &format!("gemm_{i}"), "");
        text += &format!(
            "/src/kernels/src/gemm_{i}.cu(41): warning #177-D: variable \"tile\" was declared but never referenced\n\
             \x20     int tile = blockIdx.x * 128;\n          ^\n\n\
             Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n\n\
             [{i}/9000] Linking CXX shared library libkernels_{i}.so\n"
        );
    }
    let start = std::time::Instant::now();
    let e = flags::extract(&Input::from_text("big.log", text), &Selector::default()).unwrap();
    let took = start.elapsed();
    assert_eq!(e.origin, "big.log:1");
    assert_eq!(
        e.notes[0],
        format!("{i} nvcc invocations give the same harness flags; took big.log:1")
    );
    assert!(
        took.as_secs_f64() < 30.0,
        "a 5 MB log took {took:?}: reading a log must be linear in its size"
    );
}

/// The shortcut that compares lines differing only in the files they compile and write must not
/// hide a real difference: a value of another option, or a flag more, is read in full.
#[test]
fn lines_that_differ_in_more_than_their_files_are_still_told_apart() {
    let alike = cmake_nvcc_line(1, "a", "") + &cmake_nvcc_line(2, "b", "");
    let e = extract_text(&alike);
    assert!(e.notes[0].starts_with("2 nvcc invocations give the same harness flags"));
    for (first, second) in [
        (" --pre-include a.cu", " --pre-include b.cu"),
        ("", " -DFAST=1"),
        (" -lineinfo", " -G"),
        (" -Xcompiler", " -Xlinker"),
    ] {
        let text = cmake_nvcc_line(1, "a", first) + &cmake_nvcc_line(2, "b", second);
        let err = flags::extract(&Input::from_text("two.log", text), &Selector::default())
            .map(|e| flags::render_report(&e))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has 2 nvcc invocations, with different flags"),
            "`{first}` vs `{second}`: {err}"
        );
    }
}

fn extract_text(text: &str) -> Extraction {
    flags::extract(&Input::from_text("two.log", text), &Selector::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

// --- issue 38: what is refused, and how much is listed --------------------------------------

/// `repro ARGS` run from `dir` with a deadline: a read that blocks (a fifo without a writer) or
/// never ends (`/dev/zero`) fails the test instead of hanging it. Returns (exit code, stderr).
fn repro_with_deadline(dir: &Path, args: &[&str]) -> (i32, String) {
    let output = assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let code = output
        .status
        .code()
        .unwrap_or_else(|| panic!("repro {args:?} hung or was killed: {output:?}"));
    (code, String::from_utf8_lossy(&output.stderr).into_owned())
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}

#[test]
fn from_log_refuses_devices_fifos_and_huge_files_without_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("build.fifo"));
    // Sparse: 300 MiB on paper, nothing on disk.
    let big = std::fs::File::create(dir.path().join("huge.log")).unwrap();
    big.set_len(300 << 20).unwrap();
    for (file, said) in [
        ("/dev/zero", "/dev/zero is a device, not a build log"),
        ("/dev/random", "/dev/random is a device, not a build log"),
        ("build.fifo", "build.fifo is a fifo, not a build log"),
        (
            "huge.log",
            "huge.log is 300.0 MiB, above the 256 MiB a build log is read to",
        ),
    ] {
        let (code, stderr) = repro_with_deadline(dir.path(), &["flags", "--from-log", file]);
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stderr.contains(said), "{file}: {stderr}");
    }
}

#[test]
fn flags_from_refuses_devices_fifos_and_huge_files_at_the_spec_field() {
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::write_small_spec(dir.path());
    let text = std::fs::read_to_string(&spec).unwrap();
    mkfifo(&dir.path().join("build.fifo"));
    let big = std::fs::File::create(dir.path().join("huge.log")).unwrap();
    big.set_len(300 << 20).unwrap();
    for (from, said) in [
        ("/dev/zero", "/dev/zero is a device, not a build log"),
        ("/dev/random", "/dev/random is a device, not a build log"),
        ("build.fifo", "build.fifo is a fifo, not a build log"),
        (
            "huge.log",
            "huge.log is 300.0 MiB, above the 256 MiB a build log is read to",
        ),
    ] {
        let name = format!("from_{}.yaml", from.replace('/', "_"));
        std::fs::write(
            dir.path().join(&name),
            text.replace("flags: [-O2]", &format!("flags_from: {{ file: {from} }}")),
        )
        .unwrap();
        let (code, stderr) = repro_with_deadline(
            dir.path(),
            &["scaffold", &name, "-o", &format!("out_{name}")],
        );
        assert_eq!(code, 2, "{from}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot take production flags from {from}: {said}")),
            "{from}: {stderr}"
        );
        assert!(stderr.contains(&format!("{name}:19:")), "{from}: {stderr}");
    }
}

/// A log of `n` compile lines, line i defining `V=i` (so no two give the same harness flags).
fn distinct_lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("nvcc -O3 -DV={i} -c file_{i}.cu -o file_{i}.o\n"))
        .collect()
}

#[test]
fn lines_with_different_flags_exit_2_and_the_list_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("two.log"), distinct_lines(2)).unwrap();
    let (code, stderr) = repro_with_deadline(dir.path(), &["flags", "--from-log", "two.log"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("two.log has 2 nvcc invocations, with different flags:\n  two.log:1  file_0.cu\n  two.log:2  file_1.cu\nhelp: pick one with --match PATTERN"),
        "{stderr}"
    );

    // Thousands of candidates: the first 20, and how many more.
    let text = distinct_lines(5000);
    let err = flags::extract(
        &Input::from_text("big.log", text.clone()),
        &Selector::default(),
    )
    .map(|e| flags::render_report(&e))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("  big.log:20  file_19.cu\n  ... and 4980 more\nhelp: pick one with --match"),
        "{err}"
    );
    assert!(!err.contains("big.log:21"), "{err}");
    assert_eq!(err.lines().count(), 23, "{err}");

    // A --match that hits nothing lists the candidates the same way.
    let err = flags::extract(
        &Input::from_text("big.log", text),
        &select(Some("attention"), &[]),
    )
    .map(|e| flags::render_report(&e))
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("no nvcc invocation in big.log contains `attention`; the candidates are:\n  big.log:1  file_0.cu\n"),
        "{err}"
    );
    assert!(
        err.contains("  ... and 4980 more\nhelp: --match takes"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 23, "{err}");
}

/// Lines that give one harness build are not an ambiguity unless they differ in a dropped flag
/// that changes code generation: taking either would hide or invent the other's warning.
#[test]
fn lines_that_differ_in_a_dropped_codegen_flag_are_ambiguous() {
    let text = "nvcc -O3 -rdc=true -c a.cu -o a.o\nnvcc -O3 -c b.cu -o b.o\n";
    let err = flags::extract(&Input::from_text("rdc.log", text), &Selector::default())
        .map(|e| flags::render_report(&e))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rdc.log has 2 nvcc invocations, with different flags"),
        "{err}"
    );
    let e = flags::extract(
        &Input::from_text("rdc.log", text),
        &select(Some("b.cu"), &[]),
    )
    .unwrap();
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    // Dropped flags that change nothing (-c, -o, the files) still make no difference.
    let alike = "nvcc -O3 -c a.cu -o a.o\nnvcc -O3 -c b.cu -o b.o -MD -MF b.d\n";
    let e = flags::extract(&Input::from_text("alike.log", alike), &Selector::default()).unwrap();
    assert_eq!(
        e.notes[0],
        "2 nvcc invocations give the same harness flags; took alike.log:1"
    );
}

/// The same words with other NVCC_APPEND_FLAGS are two invocations, not one repeated.
#[test]
fn the_same_words_with_other_nvcc_env_flags_are_not_one_invocation() {
    let text = "NVCC_APPEND_FLAGS=-DX=1 nvcc -O3 -c a.cu -o a.o\nNVCC_APPEND_FLAGS=-DX=2 nvcc -O3 -c a.cu -o a.o\n";
    let err = flags::extract(&Input::from_text("env.log", text), &Selector::default())
        .map(|e| flags::render_report(&e))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("env.log has 2 nvcc invocations, with different flags"),
        "{err}"
    );
}
