//! Hostile spec values stay values (issue 17): an artifact is built by whoever receives a
//! bundle, so its build.sh and CMakeLists.txt must run nothing but the compiler, whatever the
//! spec's flags hold. build.sh runs under bash with an nvcc stand-in that records its
//! arguments: it must pass exactly the arguments `repro build` passes, and no marker file may
//! appear. The real cmake (the project toolchain's, from PyPI's `cmake` wheel) configures the
//! CMakeLists.txt of the same spec: again no marker, and the flags reach the compile line as
//! written.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags that would run a command if they were ever expanded by the shell or by CMake.
fn hostile_flags(markers: &Path) -> Vec<String> {
    let m = |name: &str| markers.join(name).display().to_string();
    vec![
        "-O2".into(),
        format!("-DROOT=${{HOME}}$(touch {})", m("shell_dollar")),
        format!("-DTICK=`touch {}`", m("shell_backtick")),
        format!("-DQUOTE='x'\"y\"'; touch {} #", m("shell_quote")),
        "-DA=x\\".into(),
        format!(
            ") \nexecute_process(COMMAND touch {}) #",
            m("cmake_newline")
        ),
        format!("-DB=${{CMAKE_COMMAND}};$(touch {})", m("cmake_semicolon")),
        format!(
            "-DC=\\\") execute_process(COMMAND touch {}) #",
            m("cmake_quote")
        ),
    ]
}

/// The small spec with the hostile flags, in `dir`.
fn write_hostile_spec(dir: &Path, markers: &Path) -> PathBuf {
    let spec = common::write_small_spec(dir);
    let flags: Vec<String> = hostile_flags(markers)
        .iter()
        .map(|f| serde_json::to_string(f).unwrap())
        .collect();
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "build: { arch: sm_90a, flags: [-O2] }",
        &format!("build: {{ arch: sm_90a, flags: [{}] }}", flags.join(", ")),
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// `repro scaffold SPEC -o DIR`; returns DIR.
fn scaffold(spec: &Path, dir: &Path) -> PathBuf {
    assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .arg("scaffold")
        .arg(spec)
        .arg("-o")
        .arg(dir)
        .assert()
        .success();
    dir.to_path_buf()
}

fn assert_no_markers(markers: &Path) {
    let found: Vec<_> = std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(found.is_empty(), "a hostile value ran a command: {found:?}");
}

#[test]
fn build_sh_passes_hostile_flags_as_inert_words() {
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let spec_path = write_hostile_spec(work.path(), &markers);
    let dir = scaffold(&spec_path, &work.path().join("artifact"));

    // An nvcc that records each call's arguments (each NUL-terminated, the call ended by an
    // END argument: a flag may hold a newline) and makes the -o file.
    let log = work.path().join("nvcc.log");
    let fake = work.path().join("fake-nvcc");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fake nvcc, release 0.0'; exit 0; fi\n\
             printf '%s\\0' \"$@\" END >> '{log}'\n\
             while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = Command::new("bash")
        .arg(dir.join("build.sh"))
        .env("NVCC", &fake)
        .output()
        .unwrap();
    assert!(run.status.success(), "build.sh failed: {run:?}");
    assert_no_markers(&markers);

    // Two calls: the runtime library, then the harness, with exactly repro build's arguments
    // (the library's path aside: build.sh keeps its own copy in .repro/runtime/).
    let text = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Vec<&str>> = text
        .split_terminator("END\0")
        .map(|call| call.split_terminator('\0').collect())
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let spec = repro::spec::load(&spec_path).unwrap();
    let command = repro::plan::command::BuildCommand::new(&spec, &dir);
    let harness = command.arguments("LIBRARY");
    assert_eq!(
        &calls[1][..calls[1].len() - 1],
        &harness[..harness.len() - 1],
        "build.sh's harness compile differs from repro build's"
    );
    let runtime = command.runtime_arguments("OUTPUT");
    let at = runtime.iter().position(|a| a == "OUTPUT").unwrap();
    assert_eq!(&calls[0][..at], &runtime[..at]);
    assert_eq!(&calls[0][at + 1..], &runtime[at + 1..]);
    for flag in hostile_flags(&markers) {
        assert!(
            calls[1].contains(&flag.as_str()),
            "{flag:?} did not reach nvcc as one argument"
        );
        assert!(
            !calls[0].contains(&flag.as_str()),
            "{flag:?} reached the runtime's build"
        );
    }
}

/// The project toolchain's cmake (scripts/setup-toolchain.sh installs it), or `$CMAKE`.
fn cmake() -> PathBuf {
    if let Some(p) = std::env::var_os("CMAKE").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let local = common::repo().join(".toolchain/cmake/bin/cmake");
    assert!(
        local.is_file(),
        "cmake not found at {}: run scripts/setup-toolchain.sh",
        local.display()
    );
    local
}

#[test]
fn cmake_configures_hostile_flags_as_values() {
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let spec_path = write_hostile_spec(work.path(), &markers);
    let dir = scaffold(&spec_path, &work.path().join("artifact"));
    let build = work.path().join("build");
    let run = Command::new(cmake())
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(&build)
        .arg(format!(
            "-DCMAKE_CUDA_COMPILER={}",
            common::nvcc().display()
        ))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "cmake failed to configure:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_no_markers(&markers);
    // Generating the build files expanded nothing either: the flags are in the harness's
    // compile flags, and none in the runtime's.
    let harness_flags =
        std::fs::read_to_string(build.join("CMakeFiles/harness.dir/flags.make")).unwrap();
    let runtime_flags =
        std::fs::read_to_string(build.join("CMakeFiles/repro_runtime.dir/flags.make")).unwrap();
    assert!(harness_flags.contains("touch"), "{harness_flags}");
    assert!(!runtime_flags.contains("touch"), "{runtime_flags}");
    assert!(!runtime_flags.contains("-O2"), "{runtime_flags}");
}
