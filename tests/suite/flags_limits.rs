//! Production flags (`repro flags`, `build.flags_from`): no panic on any input, linear time on
//! large logs, and what is refused (devices, fifos, huge files) and how much is listed (issue
//! 38). Split from flags.rs (the corpus of real logs), whose helpers it uses.

use std::path::Path;

use repro::flags::{self, Extraction, Input, Selector};

use super::flags::{fixtures, select};

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
