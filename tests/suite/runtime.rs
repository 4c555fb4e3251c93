//! The harness runtime (crates/repro-contract/runtime/), compiled with the real nvcc: its own
//! host-only self-test (tests/cpp/runtime_selftest.cu), and bit-for-bit agreement of its input
//! generators and dtype conversions with the Rust mirror in `repro::inputs`, both with plain
//! flags and with production-style host flags that invite FMA contraction.
//!
//! Needs nvcc ($NVCC, the project's .toolchain/, or PATH) but no GPU.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use repro::inputs::{decode_bits, encode_bits, generate_value, stream_of, Generator, Init};
use repro::spec::dtype::DType;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn find_nvcc() -> PathBuf {
    if let Some(nvcc) = std::env::var_os("NVCC").filter(|v| !v.is_empty()) {
        return nvcc.into();
    }
    let local = repo_root().join(".toolchain/cuda/bin/nvcc");
    if local.is_file() {
        return local;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("nvcc"))
        .find(|candidate| candidate.is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "no nvcc found (not in $NVCC, {}, or PATH): run scripts/setup-toolchain.sh to install the \
             project's CUDA toolchain, or point NVCC at one",
            repo_root().join(".toolchain/cuda/bin/nvcc").display()
        )
    })
}

/// One `-I` per folder of the runtime's sources. The artifact holds runtime/src/ flat and its
/// headers include one another by bare name; here they sit in folders by concern, and since every
/// name is unique across them (repro_contract::runtime's tests), searching every folder finds the
/// very file the flat folder holds. Simpler than writing a flat copy first, and it compiles the
/// sources where they are edited.
fn runtime_include_flags() -> Vec<String> {
    let src = repo_root().join("crates/repro-contract/runtime/src");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    folders.sort();
    let mut flags = vec!["-Icrates/repro-contract/runtime/include".to_string()];
    flags.extend(folders.iter().map(|f| format!("-I{}", f.display())));
    flags
}

/// Compiles a test program of tests/cpp with the real nvcc, C++17, warnings as errors in nvcc and
/// the host compiler, and the given extra flags (architectures, optimization).
fn compile(source: &str, exe: &Path, flags: &[&str]) {
    let nvcc = find_nvcc();
    let output = Command::new(&nvcc)
        .current_dir(repo_root())
        .arg("-std=c++17")
        .args(runtime_include_flags())
        .args(["--Werror=all-warnings", "-Xcompiler=-Wall,-Wextra,-Werror"])
        .args(flags)
        .arg("-o")
        .arg(exe)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
    assert!(
        output.status.success(),
        "nvcc {} {source} failed:\n{}{}",
        flags.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The self-test program, built into its own temporary directory.
struct Selftest {
    _dir: tempfile::TempDir,
    exe: PathBuf,
}

impl Selftest {
    /// Builds tests/cpp/runtime_selftest.cu with the extra host-compiler flags, warnings as errors.
    fn build(extra_flags: &[&str]) -> Selftest {
        let dir = tempfile::tempdir().expect("temporary directory");
        let exe = dir.path().join("runtime_selftest");
        // PTX for the device side: the self-test runs on the host only, and the runtime's kernels
        // go through ptxas in every example's build (tests/suite/examples.rs).
        let mut flags = vec!["-gencode=arch=compute_90a,code=compute_90a"];
        flags.extend_from_slice(extra_flags);
        compile("tests/cpp/runtime_selftest.cu", &exe, &flags);
        Selftest { _dir: dir, exe }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&self.exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run runtime_selftest");
        let input = stdin.unwrap_or("").to_owned();
        let mut pipe = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
        let output = child.wait_with_output().expect("runtime_selftest output");
        writer.join().expect("stdin writer").expect("write stdin");
        output
    }

    /// One hex number per output line.
    fn run_hex(&self, args: &[&str], stdin: Option<&str>) -> Vec<u64> {
        let output = self.run(args, stdin);
        assert!(
            output.status.success(),
            "runtime_selftest {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("utf-8")
            .lines()
            .map(|line| u64::from_str_radix(line, 16).expect("hex"))
            .collect()
    }
}

/// The patterns checked, as the harness's --init syntax and as the Rust mirror's `Init`.
fn patterns(seed: u64) -> Vec<(String, Init)> {
    let with = |kind, p0, p1| Init { kind, p0, p1, seed };
    let defaults = |kind| Init {
        seed,
        ..Init::new(kind)
    };
    vec![
        ("ones".into(), defaults(Generator::Ones)),
        ("zeros".into(), defaults(Generator::Zeros)),
        ("iota".into(), defaults(Generator::Iota)),
        ("identity".into(), defaults(Generator::Identity)),
        ("uniform".into(), defaults(Generator::Uniform)),
        ("uniform:-3:0.5".into(), with(Generator::Uniform, -3.0, 0.5)),
        (
            "uniform:0:1000".into(),
            with(Generator::Uniform, 0.0, 1000.0),
        ),
        ("int_uniform".into(), defaults(Generator::IntUniform)),
        (
            "int_uniform:-100:27".into(),
            with(Generator::IntUniform, -100.0, 27.0),
        ),
        ("normal".into(), defaults(Generator::Normal)),
        ("normal:2:0.1".into(), with(Generator::Normal, 2.0, 0.1)),
        ("normal:0:300".into(), with(Generator::Normal, 0.0, 300.0)),
    ]
}

/// Every pattern x every dtype x two seeds (and two tensor names): the harness's storage bits
/// equal the Rust mirror's.
fn assert_generators_match(selftest: &Selftest) {
    let shape = [3u64, 5, 41];
    let shape_text = "3x5x41";
    let numel: u64 = shape.iter().product();
    for (seed, name) in [(2024u64, "A"), (7, "bias_2")] {
        for (pattern, init) in patterns(seed) {
            for dtype in DType::ALL {
                let seed_text = seed.to_string();
                let harness = selftest.run_hex(
                    &[
                        "values",
                        &pattern,
                        dtype.name(),
                        &seed_text,
                        name,
                        shape_text,
                    ],
                    None,
                );
                let mirror: Vec<u64> = (0..numel)
                    .map(|i| encode_bits(dtype, generate_value(&init, stream_of(name), i, &shape)))
                    .collect();
                assert_eq!(harness.len(), mirror.len(), "{pattern} {dtype}");
                if let Some(i) = (0..mirror.len()).find(|&i| harness[i] != mirror[i]) {
                    panic!(
                        "{pattern} as {dtype}, seed {seed}, tensor {name}: element {i} is {:#x} in the harness \
                         but {:#x} in repro::inputs",
                        harness[i], mirror[i]
                    );
                }
            }
        }
    }
}

/// A small deterministic generator for probe values.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Doubles that stress `dtype`'s conversion: every encoding's value, the midpoints between
/// neighbours and points a hair off them (small formats), random doubles over a wide exponent
/// range, and the special values.
fn probe_values(dtype: DType) -> Vec<f64> {
    let mut values = Vec::new();
    if dtype.bytes() <= 2 && dtype.is_float() {
        let mut representable: Vec<f64> = (0..1u64 << (8 * dtype.bytes()))
            .map(|bits| decode_bits(dtype, bits))
            .filter(|v| v.is_finite())
            .collect();
        representable.sort_by(f64::total_cmp);
        representable.dedup();
        for pair in representable.windows(2) {
            let mid = pair[0] + (pair[1] - pair[0]) / 2.0;
            let nudge = mid.abs() * 2f64.powi(-40);
            values.extend([mid, mid + nudge, mid - nudge, pair[0]]);
        }
    }
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ dtype.bytes() as u64);
    for _ in 0..20_000 {
        let exponent = (rng.next() % 300) as i32 - 150;
        let significand = 1.0 + (rng.next() >> 11) as f64 / 9_007_199_254_740_992.0;
        let sign = if rng.next() & 1 == 1 { -1.0 } else { 1.0 };
        values.push(sign * significand * 2f64.powi(exponent));
        // Integers and half-integers, for the integer types' rounding and clamping.
        values.push(
            ((rng.next() % 2_000_001) as f64 - 1_000_000.0) / 2.0
                * 2f64.powi((rng.next() % 40) as i32),
        );
    }
    values.extend([
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        -f64::MAX,
        2.5,
        -2.5,
        3.5,
        2f64.powi(63), // one past i64::MAX
        -(2f64.powi(63)),
        4_294_967_295.5,
    ]);
    values
}

/// encode_bits of the C++ runtime and of the Rust mirror agree on the probe values of every dtype.
fn assert_conversions_match(selftest: &Selftest) {
    for dtype in DType::ALL {
        let values = probe_values(dtype);
        let input: String = values
            .iter()
            .map(|v| format!("{:016x}\n", v.to_bits()))
            .collect();
        let harness = selftest.run_hex(&["encode", dtype.name()], Some(&input));
        assert_eq!(harness.len(), values.len(), "{dtype}");
        for (value, harness_bits) in values.iter().zip(harness) {
            let mirror_bits = encode_bits(dtype, *value);
            assert_eq!(
                harness_bits, mirror_bits,
                "{dtype} of {value:e} ({:#018x}): harness {harness_bits:#x}, repro::inputs {mirror_bits:#x}",
                value.to_bits()
            );
        }
    }
}

fn assert_selftest_passes(selftest: &Selftest) {
    let output = selftest.run(&[], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "runtime self-test failed:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// fatal(): the message and the disposition on stdout, exit code 5 for a hang, and a JSON report
/// holding what was reported before it plus the disposition.
fn assert_fatal_reports(selftest: &Selftest) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json_path = dir.path().join("report.json");
    let output = selftest.run(&["fatal", json_path.to_str().expect("utf-8 path")], None);
    assert_eq!(output.status.code(), Some(5), "exit code of a hang");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .ends_with("within 0.5 s (grid (1,1,1) block (32,1,1))\nDisposition: Failed (hang)\n"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("JSON report written"))
            .expect("valid JSON");
    assert_eq!(report["disposition"], "failed");
    assert_eq!(report["class"], "hang");
    assert_eq!(report["exit_code"], 5);
    assert_eq!(report["spec"], "selftest \"quoted\"");
    let output_report = &report["output"];
    assert_eq!(output_report["tensor"], "D");
    assert_eq!(output_report["unwritten"], 1);
    assert_eq!(output_report["nan"], 1);
    assert!(
        output_report["first_mismatches"][1]["got"].is_null(),
        "NaN is written as null"
    );
    assert_eq!(output_report["first_mismatches"][2]["got"], "poison");
}

/// One build of the self-test, under the host flags most likely to change a value: production
/// lines may give the host compiler -O3 -march=native, under which g++ fuses a * b + c into FMAs
/// wherever it may. The runtime library is built with its own flags, but the generated inputs,
/// the conversions and the reports must not depend on them. (One build, not one per flag set:
/// each compiles the whole runtime, about 50 CPU-seconds, and these flags are the strict case.)
#[test]
fn runtime_selftest_passes_and_matches_the_rust_mirror() {
    let selftest = Selftest::build(&["-O3", "-Xcompiler=-march=native,-ffp-contract=fast"]);
    assert_selftest_passes(&selftest);
    assert_generators_match(&selftest);
    assert_conversions_match(&selftest);
    assert_fatal_reports(&selftest);
}

/// Compiles one of the GPU check programs of tests/cpp, warnings as errors, for sm_90a and, with
/// `REPRO_TEST_ALL=1` (CI), also sm_80 and sm_75; without a GPU it must say so and exit 7.
fn gpu_check_program_compiles(name: &str) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let exe = dir.path().join(name);
    let mut flags = vec!["-O2", "-gencode=arch=compute_90a,code=sm_90a"];
    if crate::common::test_all() {
        flags.extend([
            "-gencode=arch=compute_80,code=sm_80",
            "-gencode=arch=compute_75,code=sm_75",
        ]);
    }
    compile(&format!("tests/cpp/{name}.cu"), &exe, &flags);
    let has_gpu = Command::new("nvidia-smi")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_gpu {
        let run = Command::new(&exe)
            .output()
            .unwrap_or_else(|e| panic!("run {name}: {e}"));
        assert_eq!(run.status.code(), Some(7), "{run:?}");
        assert_eq!(String::from_utf8_lossy(&run.stdout), "no CUDA device\n");
    }
}

/// The GPU check of the device reference (run by `scripts/gpu-check.sh reference`) compiles
/// for the three inner loops of its kernel: sm_90a (one m16n8k4 DMMA), sm_80 (two m8n8k4 DMMAs)
/// and sm_75 (fp64 FMAs), the last two with `REPRO_TEST_ALL=1`.
#[test]
fn device_reference_check_compiles_for_every_kernel_path() {
    gpu_check_program_compiles("device_reference_check");
}

/// The GPU check of the emulated reference (`scripts/gpu-check.sh emulated`) compiles: sm_90a
/// (the wgmma kernel), sm_80 (mma.sync, its oldest target) and sm_75 (no int8 kernel: the
/// runtime falls back to the fp64 one), the last two with `REPRO_TEST_ALL=1`.
#[test]
fn emulated_reference_check_compiles() {
    gpu_check_program_compiles("emulated_reference_check");
}

/// The runtime compiles, warnings as errors, for the hosts the users have besides x86-64: an
/// aarch64 host (Jetson Orin, sm_87), with Debian's cross compiler as nvcc's host compiler. The
/// AVX-512 micro-kernel of the host reference exists only on x86-64, and nothing else may depend
/// on it. Runs with `REPRO_TEST_ALL=1`; CI sets it and installs the cross compiler (.ci/run).
#[test]
fn runtime_compiles_for_an_aarch64_host() {
    if !crate::common::test_all() {
        eprintln!("note: the aarch64 host build runs with REPRO_TEST_ALL=1 (CI)");
        return;
    }
    let cross = "aarch64-linux-gnu-g++";
    if Command::new(cross).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{cross} is missing on CI: .ci/run installs g++-aarch64-linux-gnu"
        );
        eprintln!(
            "note: {cross} not installed (apt-get install g++-aarch64-linux-gnu); not checked"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let object = dir.path().join("runtime-aarch64.o");
    compile(
        "crates/repro-contract/runtime/src/run/runtime.cu",
        &object,
        &[
            "-ccbin",
            cross,
            "-O3",
            "-c",
            // PTX for the device side: this test is about the host; ptxas checks the sm_80-89
            // inner loop in device_reference_check_compiles_for_every_kernel_path (sm_80).
            "-gencode=arch=compute_87,code=compute_87",
        ],
    );
    let bytes = std::fs::read(&object).unwrap();
    // ELF e_machine 183 (0xb7) is AArch64.
    assert_eq!(&bytes[18..20], &[0xb7, 0x00], "not an aarch64 object");
}
