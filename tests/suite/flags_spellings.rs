//! Production flags (`repro flags`): every spelling nvcc accepts for the options the harness
//! keeps, moves or drops, each read to one normalized form with its reason. Split from
//! flags.rs (the corpus of real logs).

use std::path::{Path, PathBuf};

use repro::flags::{self, Extraction, Input, Selector, Verdict};

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
