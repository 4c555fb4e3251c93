//! nvcc itself runs a shell (issue 58): it writes each tool's command line (the host compiler,
//! cudafe++, ptxas, fatbinary, nvlink) as text and hands it to `sh -c`, quoting some option
//! values and not others, so a flag can run a command on whoever builds: `repro build`, a
//! campaign's builds, a bisect, a bundle's `./build.sh`. These tests drive the real nvcc with
//! each dangerous form and see a marker file appear (if a future nvcc stops running them, the
//! test fails and says the refusal can be relaxed), then check that the spec loader refuses every
//! one of them with a spanned error (exit 2), in `build.flags`, in a `flags_from` log and in a
//! campaign variant's flags; and that the flags people use, and the shell characters the loader
//! still lets through, reach nvcc and run nothing.
//!
//! What nvcc 13.0.88 does with a value, measured with `nvcc --dryrun` and by running the commands
//! it hands to `sh` (/bin/sh is dash here) under stubs that record their arguments
//! (RUN: a command ran; live: the shell changed the value; inert: the value arrived byte for byte):
//!
//! | option (every spelling)                         | how nvcc writes the value      | `$(…)` `$X` | `` ` `` | `; \| & < >` | `' " \ # * ? [ ~ { ( space` |
//! |-------------------------------------------------|--------------------------------|-------------|---------|--------------|------------------------------|
//! | -D, -U, --define-macro, --undefine-macro        | inside `"…"`, `"` escaped      | RUN / live  | RUN     | inert        | inert (nvcc eats `\`, splits at `,`) |
//! | -I, -isystem, -include, -L, --pre-include       | inside `"…"`, `$` escaped      | inert       | RUN     | inert        | `'` becomes `\'`, else inert |
//! | -Xcompiler, --compiler-options, forwarded opts  | bare                           | RUN / live  | RUN     | RUN          | live (words, quotes, globs)  |
//! | -Xlinker, -Xptxas, -Xcudafe, -Xfatbin, -Xnvlink, -l | bare, `$` escaped          | inert       | RUN     | RUN          | live                         |
//! | --keep-dir                                      | inside `"…"`                   | RUN         | RUN     | inert        | inert                        |
//! | --run-args (with --run)                         | bare                           | RUN         | RUN     | RUN          | live                         |
//!
//! With `-odir`, `-MF`, `-MT`, `-ldir` and `--dependency-drive-prefix` no payload ran (nvcc uses
//! these values itself); `-ccbin` runs the program it names. nvcc decodes no
//! escapes in a value (`\044` stays four characters).
//!
//! A value can also be the list entry after its option (`[-Xcompiler, VALUE]`), so the loader
//! refuses `$`, the backtick, `;`, `|`, `&`, `<` and `>` in every flag. Without them the command
//! is one simple command whose program nvcc chose: the other characters can change its arguments
//! (or make it a syntax error) but run nothing, which `allowed_flags_reach_nvcc_and_run_nothing`
//! checks. Options that run or read what they name are refused whole: `--options-file` (flags
//! from a file nothing checks), `--run`/`--run-args`, `-ccbin` with a relative path (a program
//! the spec's folder brings), the `--forward-unknown-to-host-*` options, the output-folder
//! options, and host options passed through -Xcompiler/-Xlinker that run or load a program
//! (`-wrapper`, `-B`, `-specs`, `-fplugin`, `@file`, `--ld-path`, `-plugin`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

/// A tiny translation unit that links into a program (for -l, -Xlinker, -Xnvlink, --run).
const TU: &str = "__global__ void k(int* p) { *p = 1; }\nint main() { return 0; }\n";

/// How nvcc is driven for a form: `-c` (compile only) or a link to an executable.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    Compile,
    Link,
}

/// A flag list that makes nvcc run `touch MARK` (`MARK` is replaced by the marker's path), the
/// step that reaches the tool concerned, and extra arguments it needs besides the flags.
struct Form {
    flags: &'static [&'static str],
    step: Step,
    extra: &'static [&'static str],
}

const fn form(flags: &'static [&'static str]) -> Form {
    Form {
        flags,
        step: Step::Compile,
        extra: &[],
    }
}

const fn linked(flags: &'static [&'static str], extra: &'static [&'static str]) -> Form {
    Form {
        flags,
        step: Step::Link,
        extra,
    }
}

/// Every form the loader refuses for a character, each of which the real nvcc runs.
const BY_CHARACTER: &[Form] = &[
    form(&["-DX=$(touch MARK)"]),
    form(&["-DX=`touch MARK`"]),
    form(&["-D", "X=$(touch MARK)"]),
    form(&["--define-macro=X=$(touch MARK)"]),
    form(&["-UX$(touch MARK)"]),
    form(&["-I`touch MARK`"]),
    form(&["-Xcompiler=-DY=$(touch MARK)"]),
    form(&["-Xcompiler=-Wall;touch MARK;"]),
    form(&["-Xcompiler", "-Wall;touch MARK;"]),
    form(&["--compiler-options=-Wall;touch MARK;"]),
    form(&["-Xcompiler=-Wall&touch MARK&"]),
    form(&["-Xptxas=-v;touch MARK;"]),
    form(&["-Xptxas", "-v;touch MARK;"]),
    form(&["-Xptxas=-v|touch -- MARK"]),
    form(&["-Xptxas=-v>MARK"]),
    form(&["-Xptxas=-v<>MARK"]),
    form(&["-Xcudafe=--display_error_number;touch MARK;"]),
    form(&["-Xfatbin=-compress-all;touch MARK;"]),
    linked(&["-Xlinker=--as-needed;touch MARK;"], &[]),
    linked(&["-lm;touch MARK;"], &[]),
    linked(&["-Xnvlink=--verbose;touch MARK;"], &["-rdc=true"]),
];

/// Whether a marker appeared at `mark` within a few seconds (a command put in the background
/// with `&` may still be starting when nvcc exits).
fn appeared(mark: &Path) -> bool {
    (0..50).any(|_| {
        let there = mark.exists();
        if !there {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        there
    })
}

/// Runs the real nvcc on a fresh copy of `TU` in a new folder under `work` with `flags` (MARK
/// replaced by the marker's path); returns the marker's path and nvcc's output.
fn run_nvcc(
    work: &Path,
    n: usize,
    flags: &[&str],
    step: Step,
    extra: &[&str],
) -> (PathBuf, std::process::Output) {
    let dir = work.join(format!("case{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.cu"), TU).unwrap();
    let mark = dir.join("MARK");
    let flags: Vec<String> = flags
        .iter()
        .map(|f| f.replace("MARK", &mark.display().to_string()))
        .collect();
    let mut nvcc = Command::new(common::nvcc());
    nvcc.current_dir(&dir).arg("-arch=sm_90a").args(extra);
    match step {
        Step::Compile => nvcc.args(["-c", "t.cu", "-o", "t.o"]),
        Step::Link => nvcc.args(["t.cu", "-o", "t.out"]),
    };
    let output = nvcc.args(&flags).output().unwrap();
    (mark, output)
}

/// The small spec in `dir` with `flags` as a block list, the first at line `FIRST_FLAG_LINE`,
/// column 7; returns its path.
fn spec_with_flags(dir: &Path, flags: &[String]) -> PathBuf {
    let spec = common::write_small_spec(dir);
    let list: String = flags
        .iter()
        .map(|f| format!("    - {}\n", serde_json::to_string(f).unwrap()))
        .collect();
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "build: { arch: sm_90a, flags: [-O2] }\n",
        &format!("build:\n  arch: sm_90a\n  flags:\n{list}"),
    );
    std::fs::write(&spec, text).unwrap();
    spec
}

/// The line of the first flag `spec_with_flags` writes.
const FIRST_FLAG_LINE: usize = 22;

/// The loader's error for the spec `spec_with_flags` writes, which must be a spec error (exit 2).
fn refusal(dir: &Path, flags: &[String]) -> String {
    let spec = spec_with_flags(dir, flags);
    match repro::spec::load(&spec, &repro::machine::Machine) {
        Ok(_) => panic!("the loader accepted {flags:?}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{flags:?}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn nvcc_runs_these_flags_through_a_shell_and_the_loader_refuses_them() {
    let work = tempfile::tempdir().unwrap();
    for (n, form) in BY_CHARACTER.iter().enumerate() {
        let (mark, output) = run_nvcc(work.path(), n, form.flags, form.step, form.extra);
        assert!(
            appeared(&mark),
            "nvcc {:?} ran no shell command (exit {:?}, {}): if nvcc now quotes this, the \
             refusal of its character can be relaxed (crates/repro-contract/src/spec/build.rs, docs/spec.md)",
            form.flags,
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );

        // The loader refuses the flag holding the character, pointing at its list entry.
        let flags: Vec<String> = form.flags.iter().map(|f| f.replace("MARK", "m")).collect();
        let dir = work.path().join(format!("spec{n}"));
        let message = refusal(&dir, &flags);
        let entry = flags
            .iter()
            .position(|f| f.contains(['$', '`', ';', '|', '&', '<', '>']))
            .unwrap();
        let at = format!("small_gemm.yaml:{}:7", FIRST_FLAG_LINE + entry);
        assert!(message.contains(&at), "{flags:?}: no {at} in\n{message}");
        assert!(message.contains("nvcc hands"), "{flags:?}: {message}");
    }
}

/// Options that run, read or write what they name: what nvcc does with each (the marker), and
/// the loader's refusal.
#[test]
fn options_that_run_or_read_what_they_name_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let scripts = work.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    // A program the spec's folder could bring: it leaves a marker in the folder nvcc runs in.
    let toucher = scripts.join("toucher");
    std::fs::write(&toucher, "#!/bin/sh\ntouch MARK\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&toucher, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Flags nvcc reads from a file: nvcc splits it at spaces, and `${IFS}` is one to sh; the
    // marker lands in the folder nvcc runs in.
    let options_file = scripts.join("more.flags");
    std::fs::write(&options_file, "-DX=$(touch${IFS}MARK)\n").unwrap();
    // The flags, the step, the flags nvcc needs besides them (which the spec holds too, first),
    // the list entry the loader refuses first and what its error says.
    type Case = (Vec<String>, Step, Vec<String>, usize, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec!["-ccbin".into(), "../scripts/toucher".into()],
            Step::Compile,
            vec![],
            1,
            "by a relative path",
        ),
        (
            vec!["--options-file".into(), options_file.display().to_string()],
            Step::Compile,
            vec![],
            0,
            "reads more flags from a file",
        ),
        (
            vec!["-Xcompiler=-wrapper,../scripts/toucher".into()],
            Step::Compile,
            vec![],
            0,
            "runs or loads a program",
        ),
        (
            vec!["--run-args=$(touch MARK)".into()],
            Step::Link,
            vec!["--run".into()],
            0,
            "makes nvcc run the program it built",
        ),
    ];
    for (n, (flags, step, extra, entry, why)) in cases.iter().enumerate() {
        // The cases' folders (work/caseN) sit beside `scripts`: `../scripts/toucher` reaches it.
        let flag_refs: Vec<&str> = flags.iter().map(String::as_str).collect();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (mark, output) = run_nvcc(work.path(), n, &flag_refs, *step, &extra);
        assert!(
            appeared(&mark),
            "nvcc {flags:?} ran nothing (exit {:?}, {})",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut refused = extra.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        refused.extend(flags.iter().map(|f| f.replace("MARK", "m")));
        let message = refusal(&work.path().join(format!("spec{n}")), &refused);
        assert!(message.contains(why), "{refused:?}: {message}");
        let at = format!("small_gemm.yaml:{}:7", FIRST_FLAG_LINE + entry);
        assert!(message.contains(&at), "{refused:?}: no {at} in\n{message}");
    }
}

/// Flags people use pass the loader and reach nvcc, which builds with them; and flags holding
/// the shell characters the loader lets through run nothing whatever option they are given to.
#[test]
fn allowed_flags_reach_nvcc_and_run_nothing() {
    let work = tempfile::tempdir().unwrap();
    let usual: Vec<String> = [
        "-O3",
        "-DNAME=value",
        "-DFOO=\"bar\"",
        "-DFOO2=\\\"bar\\\"",
        "-DMUL=a*b",
        "-Xptxas=-v",
        "-Xptxas",
        "-O3",
        "-Xcompiler=-fno-strict-aliasing,-Wall",
        "-Xcompiler=-DQ='\"q\"'",
        "--use_fast_math",
        "-maxrregcount=128",
        "-lineinfo",
        "-ccbin=g++",
    ]
    .map(String::from)
    .to_vec();
    let dir = work.path().join("usual");
    let spec = repro::spec::load(&spec_with_flags(&dir, &usual), &repro::machine::Machine)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(spec.build.flags.ends_with(&usual), "{:?}", spec.build.flags);
    let refs: Vec<&str> = usual.iter().map(String::as_str).collect();
    let (mark, output) = run_nvcc(work.path(), 0, &refs, Step::Compile, &[]);
    assert!(
        output.status.success(),
        "nvcc {usual:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!mark.exists());

    // The characters the loader allows, around a `touch MARK` that a shell would run if any of
    // them could start a command, in the options nvcc writes bare or in double quotes.
    let inert: &[&[&str]] = &[
        &["-Xcompiler=-DZ=(touch MARK)"],
        &["-Xcompiler=-DZ='x' touch MARK"],
        &["-Xcompiler=-DZ=\"(touch MARK)\""],
        &["-Xcompiler=-DZ={touch,MARK}"],
        &["-Xcompiler=-DZ=\\", "-Xcompiler=touch MARK"],
        &["-Xptxas=-v #touch MARK"],
        &["-Xptxas=-v'touch MARK'"],
        &["-Xptxas=-v", "-Xptxas=(touch MARK)"],
        &["-DZ=\"touch MARK\""],
        &["-DZ='", "-DY=(touch MARK)'"],
        &["-DZ=\\", "-DY=touch MARK"],
        &["-I\"touch MARK\"", "-I'(touch MARK)'"],
        &["-DZ=*.cu?[t]~#!%@^+="],
    ];
    for (n, flags) in inert.iter().enumerate() {
        let (mark, output) = run_nvcc(work.path(), n + 1, flags, Step::Compile, &[]);
        assert!(
            !appeared_quickly(&mark),
            "nvcc {flags:?} ran a command: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let dir = work.path().join(format!("inert{n}"));
        repro::spec::load(&spec_with_flags(&dir, &flags), &repro::machine::Machine)
            .unwrap_or_else(|e| panic!("the loader refused {flags:?}: {e}"));
    }
}

/// `appeared` for a marker that should not appear: a shorter wait (nothing here backgrounds).
fn appeared_quickly(mark: &Path) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(100));
    mark.exists()
}

/// A `flags_from` log whose compile line holds a flag nvcc would run through `sh` is refused,
/// naming the log and the flag.
#[test]
fn a_flags_from_log_with_a_shell_command_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(dir.path());
    let cases = [
        (
            "nvcc -c k.cu -O3 '-DX=$(touch /tmp/pwned)' -o k.o\n",
            "a dollar sign ($)",
        ),
        (
            "nvcc -c k.cu -O3 '-Xptxas=-v;touch /tmp/pwned' -o k.o\n",
            "a semicolon (;)",
        ),
        (
            "nvcc -c k.cu -O3 -Xcompiler -wrapper,./w -o k.o\n",
            "runs or loads a program",
        ),
    ];
    for (line, what) in cases {
        std::fs::write(dir.path().join("build.log"), line).unwrap();
        let text = std::fs::read_to_string(&spec).unwrap();
        let text = text.replace(
            "build: { arch: sm_90a, flags: [-O2] }",
            "build: { arch: sm_90a, flags_from: build.log }",
        );
        std::fs::write(&spec, &text).unwrap();
        let error = repro::spec::load(&spec, &repro::machine::Machine).expect_err(line);
        assert_eq!(error.exit_code(), 2, "{error}");
        let message = error.to_string();
        assert!(message.contains("small_gemm.yaml:19:"), "{message}");
        assert!(message.contains("read from build.log"), "{message}");
        assert!(message.contains(what), "{line}: {message}");
    }
}

/// A campaign variant's `flags` and `add_flags` go through the spec loader: a flag nvcc would run
/// through `sh` is refused there, at the variant, before anything is built.
#[test]
fn a_campaign_variant_with_a_shell_command_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    common::write_small_spec(dir.path());
    let mark = dir.path().join("MARK");
    let log = dir.path().join("nvcc.log");
    let nvcc = common::stand_in_nvcc(dir.path(), &log);
    for key in ["flags", "add_flags"] {
        let campaign = format!(
            "version: 1\nname: shell\nspecs:\n  - spec: small_gemm.yaml\n    sizes: {{ M: [33], N: [17] }}\n    \
             modes: [ones]\n    variants:\n      - name: hostile\n        {key}: [-O2, \"-DX=$(touch {})\"]\n",
            mark.display()
        );
        std::fs::write(dir.path().join("campaign.yaml"), campaign).unwrap();
        let out = assert_cmd::Command::cargo_bin("repro")
            .unwrap()
            .current_dir(dir.path())
            .env("REPRO_CACHE_DIR", dir.path().join("cache"))
            .env("REPRO_GPU_LOCK_DIR", dir.path().join("locks"))
            .args([
                "campaign",
                "campaign.yaml",
                "-o",
                "results",
                "--devices",
                "0",
            ])
            .arg("--nvcc")
            .arg(&nvcc)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("campaign.yaml:8:"), "{key}: {stderr}");
        assert!(stderr.contains("variant `hostile`"), "{key}: {stderr}");
        assert!(stderr.contains("a dollar sign ($)"), "{key}: {stderr}");
        assert!(!mark.exists());
        assert_eq!(common::calls(&log), 0, "{key}: a build ran");
    }
}

/// The loader's error for the small spec in a new folder with `build` as its build line, the
/// folder's path shown as `<dir>` (for snapshots); `files` are written beside the spec first.
fn error_for_build(build: &str, files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(dir.path());
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("build: { arch: sm_90a, flags: [-O2] }", build);
    std::fs::write(&spec, text).unwrap();
    let error = repro::spec::load(&spec, &repro::machine::Machine).expect_err(build);
    assert_eq!(error.exit_code(), 2, "{error}");
    error
        .to_string()
        .replace(&dir.path().display().to_string(), "<dir>")
}

#[test]
fn shell_characters_in_flags_snapshot() {
    insta::assert_snapshot!(error_for_build(
        r#"build: { arch: sm_90a, flags: [-O2, "-DX=$(touch /tmp/pwned)", "-Xptxas=-v;touch /tmp/pwned", -Xcompiler, "-Wall|tee x", "-DY=a>b", "-DHOME=$HOME"] }"#,
        &[]
    ));
}

#[test]
fn options_that_run_or_read_what_they_name_snapshot() {
    insta::assert_snapshot!(error_for_build(
        "build:\n  arch: sm_90a\n  flags: [--options-file, more.flags, -ccbin, ./cc, \
         '-Xcompiler=-wrapper,./w', -Xlinker, '-plugin=./p.so', --run, --keep-dir=/tmp/k, \
         --forward-unknown-to-host-compiler]",
        &[]
    ));
}

#[test]
fn a_flags_from_log_with_a_shell_command_snapshot() {
    insta::assert_snapshot!(error_for_build(
        "build: { arch: sm_90a, flags_from: build.log }",
        &[(
            "build.log",
            "nvcc -c k.cu -O3 '-DX=$(touch /tmp/pwned)' -Xcompiler -B./tools -o k.o\n"
        )]
    ));
}
