//! Hostile spec values stay values (issues 17 and 38): an artifact is built by whoever receives
//! a bundle, so its build.sh and CMakeLists.txt must run nothing but the compiler, whatever the
//! spec's flags hold, and must give nvcc each flag as one argument, byte for byte. build.sh runs
//! under bash with an nvcc stand-in that records its arguments: it must pass exactly the
//! arguments `repro build` passes, and no marker file may appear. The real cmake (the project
//! toolchain's, from PyPI's `cmake` wheel) configures the CMakeLists.txt of the same spec and
//! builds its objects with make and with ninja (PyPI's `ninja` wheel), through a compiler
//! launcher that records nvcc's arguments: the production flags must be exactly build.sh's, and
//! again no marker may appear.
//!
//! The spec loader refuses most of these flags (`$`, `;`, `<`, `>`: nvcc itself would hand them
//! to `sh`; nvcc_shell.rs), so the artifact here is generated from a resolved spec whose flags
//! are set directly: the generated build files' quoting stays tested on every byte, a defence
//! that holds even for a flag the loader would let through.

use crate::common;

use repro::plan::command::ArgKind;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags that would run a command if they were ever expanded by the shell, make or CMake, or
/// that CMake would change if it took them for a list, a variable reference or a generator
/// expression. No control character and no backtick: generation refuses a control character
/// (tested below), and a backtick is no different from `$(` for the build files.
fn hostile_flags(markers: &Path) -> Vec<String> {
    let m = |name: &str| markers.join(name).display().to_string();
    vec![
        "-O2".into(),
        format!("-DROOT=${{HOME}}$(touch {})", m("shell_dollar")),
        format!("-DQUOTE='x'\"y\"'; touch {} #", m("shell_quote")),
        // A trailing backslash, before a flag that would merge with it.
        "-DA=x\\".into(),
        "-DNEXT".into(),
        format!("-DB=${{CMAKE_COMMAND}};$(touch {})", m("cmake_semicolon")),
        format!(
            "-DC=\\\") execute_process(COMMAND touch {}) #",
            m("cmake_quote")
        ),
        format!("-DMAKE=$(shell touch {})", m("make_shell")),
        "-DGENEX=$<1:x>".into(),
        "-DSEMI=$<SEMICOLON>;a\\;b".into(),
        "-DSPACE=a b  c".into(),
        "-DHASH=#x".into(),
        "-DBRACKET=[a;b".into(),
        "-DESCAPED=\\'\\\\".into(),
        "-DPERCENT=%s$$".into(),
        "-DVARS=$ENV{HOME}$CACHE{CMAKE_COMMAND}@CMAKE_COMMAND@".into(),
        "-DCOMMA=$<COMMA>,a>b:c$<".into(),
        "-DTRAIL=\\;x]".into(),
        "-DUTF=é ✓".into(),
        // CMake keywords and its own option prefix, as flags.
        "PUBLIC".into(),
        "SHELL:-DX".into(),
        "'".into(),
        "\\".into(),
        String::new(),
        // A repeated flag is kept (CMake de-duplicates plain compile options).
        "-Xcompiler".into(),
        "-Wall".into(),
        "-Xcompiler".into(),
        "-Wextra".into(),
        "-O2".into(),
    ]
}

/// The small spec in `dir`, resolved, with the hostile flags put in its build settings past the
/// loader (which refuses most of them), and its artifact written into `dir/artifact` as
/// `repro scaffold` writes it. Returns the resolved spec and the artifact folder.
fn hostile_artifact(dir: &Path, markers: &Path) -> (repro::spec::ResolvedSpec, PathBuf) {
    let spec_path = common::write_small_spec(dir);
    let mut spec = repro::spec::load(&spec_path, &repro::machine::Machine).unwrap();
    let flags = hostile_flags(markers);
    spec.build.flags = flags.clone();
    let group = spec.build.flag_groups.last_mut().unwrap();
    group.flags = flags;
    let plan = repro::plan::Plan::for_spec(spec, dir.join("artifact")).unwrap();
    repro::generate::artifact::write(plan.artifact.as_ref().unwrap(), &spec_path, false).unwrap();
    (plan.spec, plan.dir)
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
    let (spec, dir) = hostile_artifact(work.path(), &markers);

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
    toolchain_tool("CMAKE", ".toolchain/cmake/bin/cmake")
}

/// The project toolchain's ninja (PyPI's `ninja` wheel, in the same install), or `$NINJA`.
fn ninja() -> PathBuf {
    toolchain_tool("NINJA", ".toolchain/site/bin/ninja")
}

fn toolchain_tool(variable: &str, local: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(variable).filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let local = common::repo().join(local);
    assert!(
        local.is_file(),
        "{} not found: run scripts/setup-toolchain.sh",
        local.display()
    );
    local
}

/// A compiler launcher (`CMAKE_CUDA_COMPILER_LAUNCHER`: CMake puts it before nvcc on every
/// compile line) that records the compile's arguments into `log`, each NUL-terminated, and
/// makes the `-o` file instead of compiling.
fn recording_launcher(dir: &Path, log: &Path) -> PathBuf {
    let launcher = dir.join("record-nvcc");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nprintf '%s\\0' \"$@\" > '{log}'\n\
             while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    launcher
}

/// `cmake -S dir -B build -G generator` with the real nvcc (CMake's compiler check runs it) and
/// the recording launcher.
fn configure(dir: &Path, build: &Path, generator: &str, launcher: &Path) -> std::process::Output {
    let mut command = Command::new(cmake());
    command
        .arg("-S")
        .arg(dir)
        .arg("-B")
        .arg(build)
        .arg("-G")
        .arg(generator)
        .arg(format!(
            "-DCMAKE_CUDA_COMPILER={}",
            common::nvcc().display()
        ))
        .arg(format!(
            "-DCMAKE_CUDA_COMPILER_LAUNCHER={}",
            launcher.display()
        ));
    if generator == "Ninja" {
        command.arg(format!("-DCMAKE_MAKE_PROGRAM={}", ninja().display()));
    }
    command.output().unwrap()
}

/// Builds one object of the configured tree; returns the arguments nvcc was given for it.
fn compile_object(build: &Path, target: &str, log: &Path) -> Vec<String> {
    let _ = std::fs::remove_file(log);
    let run = Command::new(cmake())
        .arg("--build")
        .arg(build)
        .arg("--target")
        .arg(target)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "building {target} failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(log).unwrap();
    let mut args: Vec<String> = bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8(a.to_vec()).unwrap())
        .collect();
    // Each argument ends in a NUL, so the split leaves an empty last piece; the first argument
    // is nvcc itself.
    assert_eq!(args.pop().as_deref(), Some(""));
    args.remove(0);
    args
}

/// Issue 38: the CMakeLists.txt passes every production flag to nvcc exactly as build.sh does,
/// with make and with ninja: no `;` splits a flag, no trailing `\\` merges two, no `$<...>` is
/// evaluated, an empty flag and a repeated one stay, and nothing runs at configure or build time.
#[test]
fn cmake_passes_hostile_flags_exactly_as_build_sh() {
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let (spec, dir) = hostile_artifact(work.path(), &markers);
    // What build.sh passes (build_sh_passes_hostile_flags_as_inert_words shows it passes these).
    let production: Vec<String> = repro::plan::command::BuildCommand::new(&spec, &dir)
        .groups()
        .into_iter()
        .filter(|g| g.kind == ArgKind::Production)
        .flat_map(|g| g.args)
        .collect();
    assert_eq!(production, hostile_flags(&markers));

    let log = work.path().join("nvcc-args");
    let launcher = recording_launcher(work.path(), &log);
    for (generator, harness_object, runtime_object) in [
        ("Unix Makefiles", "harness.cu.o", "runtime/src/runtime.cu.o"),
        (
            "Ninja",
            "CMakeFiles/harness.dir/harness.cu.o",
            "CMakeFiles/repro_runtime.dir/runtime/src/runtime.cu.o",
        ),
    ] {
        let build = work.path().join(generator.replace(' ', "-"));
        let run = configure(&dir, &build, generator, &launcher);
        assert!(
            run.status.success(),
            "cmake -G {generator} failed to configure:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert_no_markers(&markers);

        let harness = compile_object(&build, harness_object, &log);
        assert_no_markers(&markers);
        // The production flags are one run of the compile line, after CMake's own -std and
        // -gencode and before its dependency-file and -x cu -c options.
        let found = harness
            .windows(production.len())
            .any(|w| w == production.as_slice());
        assert!(
            found,
            "{generator}: the production flags did not reach nvcc as build.sh passes them\n\
             want {production:?}\ngot  {harness:?}"
        );
        let runtime = compile_object(&build, runtime_object, &log);
        assert_no_markers(&markers);
        assert!(
            !runtime.iter().any(|a| a.starts_with("-D")),
            "{generator}: a production flag reached the runtime's build: {runtime:?}"
        );
    }
}

/// Defence in depth: a control character in a flag (which the spec loader refuses) or in a
/// folder's name stops generation, as a bug in repro (exit 70), naming the value: no quoting
/// keeps one in a Makefile, where a newline ends the line and the next one is a command. So does
/// a `;` in the CUTLASS root, which its PATH cache entry cannot keep.
#[test]
fn generation_refuses_a_control_character_for_cmake() {
    let work = tempfile::tempdir().unwrap();
    let spec_path = common::write_small_spec(work.path());
    let dir = work.path().join("artifact");
    let injected = "-DX=1\n\ttouch /tmp/make_newline\n".to_string();

    let mut spec = repro::spec::load(&spec_path, &repro::machine::Machine).unwrap();
    spec.build.flags.push(injected.clone());
    spec.build
        .flag_groups
        .last_mut()
        .unwrap()
        .flags
        .push(injected);
    let command = repro::plan::command::BuildCommand::new(&spec, &dir);
    let error = repro::generate::render(&spec, &dir, &command).unwrap_err();
    assert_eq!(error.exit_code(), repro::error::exit::INTERNAL, "{error}");
    let message = error.to_string();
    assert!(message.contains("holds a control character"), "{message}");
    assert!(message.contains("a production flag"), "{message}");
    assert!(message.contains("touch /tmp/make_newline"), "{message}");

    let folder = work.path().join("inc\n\ttouch x");
    std::fs::create_dir_all(&folder).unwrap();
    let mut spec = repro::spec::load(&spec_path, &repro::machine::Machine).unwrap();
    spec.include_dirs.push(folder);
    let command = repro::plan::command::BuildCommand::new(&spec, &dir);
    let error = repro::generate::render(&spec, &dir, &command).unwrap_err();
    assert_eq!(error.exit_code(), repro::error::exit::INTERNAL, "{error}");
    assert!(
        error.to_string().contains("an include directory"),
        "{error}"
    );

    for root in ["cutlass\r", "cut;lass"] {
        let mut spec = repro::spec::load(&spec_path, &repro::machine::Machine).unwrap();
        spec.cutlass = Some(work.path().join(root));
        let command = repro::plan::command::BuildCommand::new(&spec, &dir);
        let error = repro::generate::render(&spec, &dir, &command).unwrap_err();
        assert_eq!(error.exit_code(), repro::error::exit::INTERNAL, "{error}");
        assert!(error.to_string().contains("the CUTLASS root"), "{error}");
    }
}

/// Include directories and the CUTLASS root whose names CMake would take for a list, a variable
/// reference or a generator expression reach nvcc as the folders build.sh names, with make and
/// with ninja, and nothing runs. An include directory and the CUTLASS root are inside the
/// artifact folder with names starting with `$`, so that their relative paths start with what
/// CMake would take for an expression.
#[test]
fn cmake_passes_hostile_folders_as_build_sh() {
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let m = |name: &str| markers.join(name).display().to_string();
    let spec_path = common::write_small_spec(work.path());
    let dir = work.path().join("artifact");
    let folders = [
        work.path()
            .join(format!("inc;$<1:x>${{HOME}}$(touch {})", m("dir_dollar"))),
        work.path()
            .join(format!("sp ace#'q\"`touch {}`", m("dir_tick"))),
        work.path().join("[br;é]$"),
        dir.join("$lead;x"),
    ];
    // A `;` cannot be kept in the CUTLASS root (a PATH cache entry): refused, tested above.
    let cutlass = dir.join(format!("$<1:c>ut{{l}}ass #'\"é $(touch {})", m("cutlass")));
    for folder in &folders {
        std::fs::create_dir_all(folder).unwrap();
    }
    for sub in ["include", "tools/util/include"] {
        std::fs::create_dir_all(cutlass.join(sub)).unwrap();
    }
    let mut spec = repro::spec::load(&spec_path, &repro::machine::Machine).unwrap();
    spec.include_dirs.extend(folders.iter().cloned());
    spec.cutlass = Some(cutlass.clone());
    let command = repro::plan::command::BuildCommand::new(&spec, &dir);
    let artifact = repro::generate::render(&spec, &dir, &command).unwrap();
    for file in &artifact.files {
        let path = dir.join(file.name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &file.content).unwrap();
    }
    // Every folder build.sh names with -I (relative to the artifact folder), as it is on disk.
    let want: Vec<PathBuf> = command
        .arguments("LIBRARY")
        .iter()
        .filter_map(|a| a.strip_prefix("-I"))
        .map(|d| dir.join(d).canonicalize().unwrap())
        .collect();
    for folder in folders.iter().chain([&cutlass.join("include")]) {
        assert!(want.contains(&folder.canonicalize().unwrap()), "{want:?}");
    }

    let log = work.path().join("nvcc-args");
    let launcher = recording_launcher(work.path(), &log);
    for (generator, harness_object) in [
        ("Unix Makefiles", "harness.cu.o"),
        ("Ninja", "CMakeFiles/harness.dir/harness.cu.o"),
    ] {
        let build = work.path().join(generator.replace(' ', "-"));
        let run = configure(&dir, &build, generator, &launcher);
        assert!(
            run.status.success(),
            "cmake -G {generator} failed to configure:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert_no_markers(&markers);
        let harness = compile_object(&build, harness_object, &log);
        assert_no_markers(&markers);
        // Each -I names an existing folder (a split or a changed name would not), and together
        // they are build.sh's.
        let got: Vec<PathBuf> = harness
            .iter()
            .filter_map(|a| a.strip_prefix("-I"))
            .map(|d| {
                Path::new(d).canonicalize().unwrap_or_else(|e| {
                    panic!("{generator}: -I{d} is no folder ({e}): {harness:?}")
                })
            })
            .collect();
        assert_eq!(got, want, "{generator}: {harness:?}");
    }
}
