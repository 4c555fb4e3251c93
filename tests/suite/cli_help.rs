//! Snapshots of what users read from the command line: every command's `--help`, and the main
//! error outputs (an unknown file, a bad spec, a failed build, an unknown option, a value out of
//! range). A change to any of them shows up as a snapshot diff to review (`cargo insta review`,
//! or `INSTA_UPDATE=always cargo test --test suite cli_help::` and read `git diff tests/suite/snapshots/`).
//!
//! No GPU and no real nvcc: the failed build uses an nvcc stand-in that always fails.

use crate::common;

use std::path::Path;

use assert_cmd::Command;

/// `repro` with a fixed help width and nothing from the caller's environment that changes what
/// it prints (colours, the nvcc it would find).
fn repro(cwd: &Path) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(cwd)
        .env("COLUMNS", "100")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("NVCC")
        .env_remove("CUDA_HOME");
    cmd
}

/// The exit code, then stdout and stderr, with the temporary folder's path replaced by `[TMP]`.
fn transcript(cmd: &mut Command, tmp: &Path) -> String {
    let output = cmd.output().unwrap();
    let code = output
        .status
        .code()
        .map_or("signal".to_string(), |c| c.to_string());
    let text = format!(
        "exit: {code}\n--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The folder may be reached through a symlink (macOS /tmp); replace both spellings.
    let real = tmp.canonicalize().unwrap();
    text.replace(&real.display().to_string(), "[TMP]")
        .replace(&tmp.display().to_string(), "[TMP]")
}

fn help(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    transcript(repro(tmp.path()).args(args).arg("--help"), tmp.path())
}

macro_rules! help_snapshots {
    ($($name:ident: [$($arg:literal),*];)*) => {
        $(
            #[test]
            fn $name() {
                insta::assert_snapshot!(stringify!($name), help(&[$($arg),*]));
            }
        )*
    };
}

help_snapshots! {
    help_repro: [];
    help_scaffold: ["scaffold"];
    help_build: ["build"];
    help_run: ["run"];
    help_probe: ["probe"];
    help_sweep: ["sweep"];
    help_shrink: ["shrink"];
    help_bench: ["bench"];
    help_diff: ["diff"];
    help_flags: ["flags"];
    help_import: ["import"];
    help_import_rust: ["import", "rust"];
    help_import_cuda: ["import", "cuda"];
    help_import_capture: ["import", "capture"];
    help_capture: ["capture"];
    help_bisect: ["bisect"];
    help_campaign: ["campaign"];
    help_bundle: ["bundle"];
    help_doctor: ["doctor"];
}

#[test]
fn error_unknown_file() {
    let tmp = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(
        "error_unknown_file",
        transcript(
            repro(tmp.path()).args(["build", "missing.yaml"]),
            tmp.path()
        )
    );
}

#[test]
fn error_bad_spec() {
    let tmp = tempfile::tempdir().unwrap();
    common::write_small_spec(tmp.path());
    let spec = tmp.path().join("small_gemm.yaml");
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("  block: [16, 16, 1]\n", "  blokc: [16, 16, 1]\n");
    std::fs::write(&spec, text).unwrap();
    insta::assert_snapshot!(
        "error_bad_spec",
        transcript(
            repro(tmp.path()).args(["scaffold", "small_gemm.yaml"]),
            tmp.path()
        )
    );
}

#[test]
fn error_folder_without_spec() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    insta::assert_snapshot!(
        "error_folder_without_spec",
        transcript(repro(tmp.path()).args(["build", "empty"]), tmp.path())
    );
}

#[test]
fn error_build_failed() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    common::write_small_spec(tmp.path());
    // Says what a compiler says when the code does not compile, whatever it is asked to build.
    let nvcc = tmp.path().join("nvcc-failing");
    std::fs::write(
        &nvcc,
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 12.8, V12.8.93'; exit 0; fi\n\
         echo 'kernels/small_gemm.cuh(8): error: expected an expression' >&2\n\
         exit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = transcript(
        repro(tmp.path())
            .env("REPRO_CACHE_DIR", tmp.path().join("cache"))
            .args(["build", "small_gemm.yaml", "-o", "art", "--nvcc"])
            .arg(&nvcc),
        tmp.path(),
    );
    // nvcc's arguments are the build's business (tested in cli.rs), not this snapshot's.
    let output: Vec<String> = output
        .lines()
        .map(|line| match line.find("nvcc-failing ") {
            Some(at) => format!("{}nvcc-failing [ARGUMENTS]", &line[..at]),
            None => line.to_string(),
        })
        .collect();
    insta::assert_snapshot!("error_build_failed", output.join("\n"));
}

#[test]
fn error_unknown_option() {
    let tmp = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(
        "error_unknown_option",
        transcript(
            repro(tmp.path()).args(["run", "spec.yaml", "--bogus"]),
            tmp.path()
        )
    );
}

#[test]
fn error_unknown_command() {
    let tmp = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(
        "error_unknown_command",
        transcript(repro(tmp.path()).args(["scafold", "spec.yaml"]), tmp.path())
    );
}

/// Values clap refuses before anything runs: ranges and the `--reference` enum.
#[test]
fn error_values_out_of_range() {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = String::new();
    for args in [
        &["run", "spec.yaml", "--repeat", "0"][..],
        &["run", "spec.yaml", "--timeout", "0"],
        &["run", "spec.yaml", "--timeout", "-1"],
        &["run", "spec.yaml", "--reference", "gpu"],
        &["probe", "spec.yaml", "--repeat", "1"],
        &["bench", "spec.yaml", "--repeat", "0"],
        &["sweep", "spec.yaml", "--sizes", "64,0"],
        &["shrink", "spec.yaml", "--timeout", "nan"],
    ] {
        all.push_str(&format!("$ repro {}\n", args.join(" ")));
        all.push_str(&transcript(repro(tmp.path()).args(args), tmp.path()));
        all.push('\n');
    }
    insta::assert_snapshot!("error_values_out_of_range", all);
}
