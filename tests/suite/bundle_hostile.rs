//! `repro bundle` with files that must not travel to strangers, or that are not what the spec
//! says: a header or an input symlinked out of the spec's tree, a `.npy` that is no NumPy file, a
//! cubin that is no ELF file, the home folder named in the spec's text; and the bundle's own
//! names: an existing tarball beside a free folder, a dotted `-o`, two inputs of one file name.
//! Each refusal exits 2 and leaves nothing behind. Only the tests about headers compile with the
//! real nvcc; the others use a stand-in that writes a dependency list and compiles nothing.

use std::path::{Path, PathBuf};

use crate::common;

use predicates::prelude::*;

/// An nvcc stand-in that compiles nothing: answers `--version`, writes a placeholder at `-o`
/// and a dependency list at `-MF` naming only the source.
fn quick_nvcc(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("nvcc-quick");
    std::fs::write(
        &path,
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release 0.0, V0.0.0 (quick stand-in)'; exit 0; fi
out=; dep=; prev=
for a in "$@"; do case "$prev" in -o) out=$a;; -MF) dep=$a;; esac; prev=$a; done
[ -n "$out" ] && echo "compiled by the stand-in" > "$out"
if [ -n "$dep" ]; then echo "$out: harness.cu" > "$dep"; fi
exit 0
"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A `.npy` of f32 values of `shape`, each `fill`.
fn f32_npy(path: &Path, shape: &[usize], fill: f32) {
    let payload: Vec<u8> = (0..shape.iter().product::<usize>())
        .flat_map(|_| fill.to_le_bytes())
        .collect();
    npy(path, "<f4", shape, &payload);
}

/// A `.npy` of `descr` values of `shape`, its bytes `payload`.
fn npy(path: &Path, descr: &str, shape: &[usize], payload: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d},")).collect();
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(" ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(payload);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The small GEMM spec in `dir` with tensor A read from `a` and B from `b` (paths relative to
/// the spec), when given.
fn spec_with_inputs(dir: &Path, a: Option<&str>, b: Option<&str>) -> PathBuf {
    let spec = common::write_small_spec(dir);
    let mut text = std::fs::read_to_string(&spec).unwrap();
    if let Some(a) = a {
        text = text.replace(
            "A: { dtype: f32, shape: [M, K] }",
            &format!("A: {{ dtype: f32, shape: [M, K], init: {{ file: {a} }} }}"),
        );
    }
    if let Some(b) = b {
        text = text.replace(
            "B: { dtype: f32, shape: [K, N], init: iota }",
            &format!("B: {{ dtype: f32, shape: [K, N], init: {{ file: {b} }} }}"),
        );
    }
    std::fs::write(&spec, text).unwrap();
    spec
}

/// Nothing of a refused bundle is left: no folder, no tarball, no temporary folder beside them.
fn assert_nothing_written(parent: &Path, name: &str) {
    assert!(!parent.join(name).exists(), "no bundle folder");
    assert!(
        !parent.join(format!("{name}.tar.gz")).exists(),
        "no tarball"
    );
    let leftovers: Vec<String> = std::fs::read_dir(parent)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("partial"))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        leftovers.is_empty(),
        "temporary folders left: {leftovers:?}"
    );
}

/// Whether `needle` occurs in any file below `dir` or inside any `.tar.gz` there (unpacked).
fn found_below(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
    {
        let bytes = std::fs::read(entry.path()).unwrap();
        let text = if entry.path().to_string_lossy().ends_with(".tar.gz") {
            let mut unpacked = Vec::new();
            let mut archive =
                tar::Archive::new(flate2::read::GzDecoder::new(std::io::Cursor::new(bytes)));
            for file in archive.entries().unwrap() {
                let mut file = file.unwrap();
                std::io::Read::read_to_end(&mut file, &mut unpacked).unwrap();
            }
            unpacked
        } else {
            bytes
        };
        if text.windows(needle.len()).any(|w| w == needle) {
            hits.push(entry.path().to_path_buf());
        }
    }
    hits
}

/// A header in the include dir that is a symlink to a file outside the spec's tree: nvcc reads
/// it (it is a comment, so the build succeeds), and the bundle refuses it, naming the include
/// dir; the secret is nowhere in what was written.
#[test]
fn a_header_symlinked_out_of_the_include_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let spec = common::write_small_spec(&project);
    std::fs::create_dir_all(tmp.path().join("private")).unwrap();
    let secret = "TOKEN=hunter2-do-not-ship";
    std::fs::write(
        tmp.path().join("private/token.h"),
        format!("#pragma once\n// {secret}\n"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("private/token.h"),
        project.join("kernels/settings.h"),
    )
    .unwrap();
    let kernel = project.join("kernels/small_gemm.cuh");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("#include \"settings.h\"\n{text}")).unwrap();
    let out = project.join("bundles/report");
    common::bundle_command(&project, &spec, &out, &common::nvcc())
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("kernels/settings.h")
                .and(predicate::str::contains("include dir kernels"))
                .and(predicate::str::contains("symlink")),
        );
    assert_nothing_written(&project.join("bundles"), "report");
    let hits = found_below(&project, secret.as_bytes());
    assert!(hits.is_empty(), "the secret is in {hits:?}");
}

/// An init file that is a symlink to a file outside the spec's folder: refused, naming the
/// tensor's field, and its bytes are nowhere in what was written.
#[test]
fn an_init_file_symlinked_out_of_the_spec_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let spec = spec_with_inputs(&project, Some("inputs/a.npy"), None);
    // A valid input, so only where it lies is wrong; its values are a marker to look for.
    f32_npy(&tmp.path().join("private/a.npy"), &[33, 9], 1234.5678);
    std::fs::create_dir_all(project.join("inputs")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("private/a.npy"),
        project.join("inputs/a.npy"),
    )
    .unwrap();
    let out = project.join("bundles/report");
    common::bundle_command(&project, &spec, &out, &quick_nvcc(tmp.path()))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("inputs/a.npy")
                .and(predicate::str::contains("tensor A's init.file"))
                .and(predicate::str::contains("symlink")),
        );
    assert_nothing_written(&project.join("bundles"), "report");
    let marker = 1234.5678f32.to_le_bytes();
    let hits = found_below(&project.join("bundles"), &marker);
    assert!(hits.is_empty(), "the private input is in {hits:?}");
}

/// An intermediate's reference header (`tensors.X.reference.source`) that is a symlink to a file
/// outside the spec's folder: refused, naming the tensor's field, and its bytes are nowhere in
/// what was written.
#[test]
fn an_intermediate_reference_symlinked_out_of_the_spec_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let spec = common::write_small_spec(&project);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "  D: { dtype: f32, shape: [M, N], output: true }\n",
        "  D: { dtype: f32, shape: [M, N], output: true }\n  W: { dtype: f32, shape: [M, N], intermediate: true, reference: { source: references/w.h, function: w_reference } }\n",
    ).replace("args: [A, B, D, M, N, K]", "args: [A, B, D, M, N, K]\n  setup: \"(void)W;\"");
    std::fs::write(&spec, text).unwrap();
    std::fs::create_dir_all(tmp.path().join("private")).unwrap();
    let secret = "TOKEN=hunter2-intermediate";
    std::fs::write(
        tmp.path().join("private/w.h"),
        format!("#pragma once\n// {secret}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(project.join("references")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("private/w.h"),
        project.join("references/w.h"),
    )
    .unwrap();
    let out = project.join("bundles/report");
    common::bundle_command(&project, &spec, &out, &quick_nvcc(tmp.path()))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("references/w.h")
                .and(predicate::str::contains("tensor W's reference.source"))
                .and(predicate::str::contains("symlink")),
        );
    assert_nothing_written(&project.join("bundles"), "report");
    let hits = found_below(&project, secret.as_bytes());
    assert!(hits.is_empty(), "the secret is in {hits:?}");
}

/// The small GEMM spec in `dir` with an intermediate W whose reference is the file `file`.
fn spec_with_intermediate_file(dir: &Path, file: &str) -> PathBuf {
    let spec = common::write_small_spec(dir);
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "  D: { dtype: f32, shape: [M, N], output: true }\n",
        &format!("  D: {{ dtype: f32, shape: [M, N], output: true }}\n  W: {{ dtype: f32, shape: [M, N], intermediate: true, reference: {{ file: {file} }} }}\n"),
    ).replace("args: [A, B, D, M, N, K]", "args: [A, B, D, M, N, K]\n  setup: \"(void)W;\"");
    std::fs::write(&spec, text).unwrap();
    spec
}

/// An intermediate's reference file (`tensors.X.reference.file`) that is a symlink to a file
/// outside the spec's folder: refused, naming the tensor's field, and its bytes are nowhere in
/// what was written.
#[test]
fn an_intermediate_reference_file_symlinked_out_of_the_spec_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let spec = spec_with_intermediate_file(&project, "references/w.npy");
    f32_npy(&tmp.path().join("private/w.npy"), &[33, 17], 4321.875);
    std::fs::create_dir_all(project.join("references")).unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("private/w.npy"),
        project.join("references/w.npy"),
    )
    .unwrap();
    let out = project.join("bundles/report");
    common::bundle_command(&project, &spec, &out, &quick_nvcc(tmp.path()))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("references/w.npy")
                .and(predicate::str::contains("tensor W's reference.file"))
                .and(predicate::str::contains("symlink")),
        );
    assert_nothing_written(&project.join("bundles"), "report");
    let hits = found_below(&project, &4321.875f32.to_le_bytes());
    assert!(hits.is_empty(), "the private reference is in {hits:?}");
}

/// An intermediate's reference file inside the spec's folder travels with the bundle, listed,
/// and the bundle's spec names the copy, relative to itself.
#[test]
fn an_intermediate_reference_file_travels_with_the_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_intermediate_file(tmp.path(), "references/w.npy");
    f32_npy(&tmp.path().join("references/w.npy"), &[33, 17], 2.5);
    let out = tmp.path().join("report");
    common::bundle_command(tmp.path(), &spec, &out, &quick_nvcc(tmp.path()))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "the reference of intermediate W (reference.file)",
        ));
    let bundled = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&bundled).unwrap();
    let file = yaml["tensors"]["W"]["reference"]["file"]
        .as_str()
        .unwrap_or_else(|| panic!("W's reference.file in:\n{bundled}"));
    assert!(Path::new(file).is_relative(), "{bundled}");
    assert_eq!(
        std::fs::read(out.join(file)).unwrap(),
        std::fs::read(tmp.path().join("references/w.npy")).unwrap()
    );
}

/// An intermediate's reference file called `.npy` that is no NumPy file: refused.
#[test]
fn an_intermediate_reference_file_that_is_not_npy_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_intermediate_file(tmp.path(), "references/w.npy");
    std::fs::create_dir_all(tmp.path().join("references")).unwrap();
    std::fs::write(tmp.path().join("references/w.npy"), "not numpy at all\n").unwrap();
    common::bundle_command(
        tmp.path(),
        &spec,
        &tmp.path().join("out"),
        &quick_nvcc(tmp.path()),
    )
    .assert()
    .code(2)
    .stderr(
        predicate::str::contains("references/w.npy")
            .and(predicate::str::contains("not a NumPy .npy file")),
    );
}

/// An init file called `.npy` that is no NumPy file (here a copy of a password file): refused.
#[test]
fn an_init_file_that_is_not_npy_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_inputs(tmp.path(), Some("inputs/a.npy"), None);
    std::fs::create_dir_all(tmp.path().join("inputs")).unwrap();
    std::fs::write(
        tmp.path().join("inputs/a.npy"),
        "root:x:0:0:root:/root:/bin/bash\n",
    )
    .unwrap();
    common::bundle_command(
        tmp.path(),
        &spec,
        &tmp.path().join("out"),
        &quick_nvcc(tmp.path()),
    )
    .assert()
    .code(2)
    .stderr(
        predicate::str::contains("inputs/a.npy")
            .and(predicate::str::contains("not a NumPy .npy file")),
    );
    assert_nothing_written(tmp.path(), "out");
}

/// A `.bin` input holds the tensor's raw elements: one of another size is refused (it is not
/// the tensor's data), one of exactly 33 x 9 f32 comes in.
#[test]
fn a_bin_input_of_the_wrong_size_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_inputs(tmp.path(), Some("inputs/a.bin"), None);
    std::fs::create_dir_all(tmp.path().join("inputs")).unwrap();
    std::fs::write(tmp.path().join("inputs/a.bin"), vec![0u8; 33 * 9 * 4 + 1]).unwrap();
    let nvcc = quick_nvcc(tmp.path());
    common::bundle_command(tmp.path(), &spec, &tmp.path().join("out"), &nvcc)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("inputs/a.bin")
                .and(predicate::str::contains("1188 bytes, but it has 1189")),
        );
    assert_nothing_written(tmp.path(), "out");
    std::fs::write(tmp.path().join("inputs/a.bin"), vec![0u8; 33 * 9 * 4]).unwrap();
    common::bundle_command(tmp.path(), &spec, &tmp.path().join("out"), &nvcc)
        .assert()
        .success();
    assert!(tmp.path().join("out/inputs/a.bin").is_file());
}

/// A replayed launch whose cubin is not an ELF file: refused, naming `kernel.cubin`.
#[test]
fn a_cubin_that_is_not_elf_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("module.cubin"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    std::fs::write(dir.join("params.bin"), [0u8; 16]).unwrap();
    npy(&dir.join("inputs/buffer0.npy"), "|u1", &[64], &[1; 64]);
    npy(&dir.join("expected/buffer1.npy"), "|u1", &[64], &[2; 64]);
    let spec = dir.join("replay.yaml");
    std::fs::write(
        &spec,
        r#"version: 1
name: replayed
tensors:
  buffer0: { dtype: u8, shape: [64], init: { file: inputs/buffer0.npy } }
  buffer1: { dtype: u8, shape: [64], output: true }
kernel:
  kind: replay
  name: _Z6kernelPhS_
  cubin: module.cubin
  params: params.bin
  grid: [1, 1, 1]
  block: [64, 1, 1]
  relocate:
    - { at: 0, tensor: buffer0, offset: 0 }
    - { at: 8, tensor: buffer1, offset: 0 }
reference: { op: file, expected: { buffer1: expected/buffer1.npy } }
build: { arch: sm_90a }
"#,
    )
    .unwrap();
    let assert = common::bundle_command(dir, &spec, &dir.join("out"), &quick_nvcc(dir)).assert();
    let output = assert.get_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("module.cubin")
            && stderr.contains("kernel.cubin")
            && stderr.contains("ELF"),
        "{stderr}"
    );
    assert_nothing_written(dir, "out");
}

/// `about:` naming a log under the home folder: exit 2 naming the bundled spec's line and the
/// spec's own, not 70
/// ("a bug in repro"); nothing is left, so the retry after the fix writes the bundle.
#[test]
fn the_home_folder_in_the_spec_text_is_exit_2_and_a_retry_works() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home/alice");
    let project = home.join("project");
    let spec = common::write_small_spec(&project);
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        text.replace(
            "about: a one-thread-per-output f32 GEMM",
            &format!(
                "about: a one-thread-per-output f32 GEMM, see {}/logs/run.log",
                home.display()
            ),
        ),
    )
    .unwrap();
    let nvcc = quick_nvcc(tmp.path());
    let out = project.join("bundles/report");
    common::bundle_command(&project, &spec, &out, &nvcc)
        .env("HOME", &home)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("spec.yaml, line")
                .and(predicate::str::contains("small_gemm.yaml, line 3)"))
                .and(predicate::str::contains("home folder"))
                .and(predicate::str::contains("bug in repro").not()),
        );
    assert_nothing_written(&project.join("bundles"), "report");
    std::fs::write(&spec, text).unwrap();
    common::bundle_command(&project, &spec, &out, &nvcc)
        .env("HOME", &home)
        .assert()
        .success();
    assert!(out.join("spec.yaml").is_file());
}

/// `NAME.tar.gz` exists beside a free `NAME`: refused before anything is written, the file kept.
#[test]
fn an_existing_tarball_beside_a_free_folder_is_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    std::fs::write(tmp.path().join("report.tar.gz"), "mine").unwrap();
    common::bundle_command(
        tmp.path(),
        &spec,
        &tmp.path().join("report"),
        &quick_nvcc(tmp.path()),
    )
    .assert()
    .code(2)
    .stderr(
        predicate::str::contains("report.tar.gz").and(predicate::str::contains("never overwrites")),
    );
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("report.tar.gz")).unwrap(),
        "mine"
    );
    assert!(!tmp.path().join("report").exists());
}

/// `-o notes.v2` writes `notes.v2/` and `notes.v2.tar.gz`, never `notes.tar.gz`.
#[test]
fn a_dotted_output_name_keeps_its_dots_in_the_tarball() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    std::fs::write(tmp.path().join("notes.tar.gz"), "mine").unwrap();
    common::bundle_command(
        tmp.path(),
        &spec,
        Path::new("notes.v2"),
        &quick_nvcc(tmp.path()),
    )
    .assert()
    .success()
    .stdout(predicate::str::contains("notes.v2.tar.gz"));
    assert!(tmp.path().join("notes.v2/spec.yaml").is_file());
    assert!(tmp.path().join("notes.v2.tar.gz").is_file());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("notes.tar.gz")).unwrap(),
        "mine"
    );
}

/// Inputs `d1/x.npy` and `d2/x.npy` are two files in the bundle, each tensor pointed at its
/// own: the receiver runs the sender's data.
#[test]
fn two_inputs_of_one_name_stay_two_files() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_inputs(tmp.path(), Some("d1/x.npy"), Some("d2/x.npy"));
    f32_npy(&tmp.path().join("d1/x.npy"), &[33, 9], 1.0);
    f32_npy(&tmp.path().join("d2/x.npy"), &[9, 17], 2.0);
    let out = tmp.path().join("report");
    common::bundle_command(tmp.path(), &spec, &out, &quick_nvcc(tmp.path()))
        .assert()
        .success()
        .stdout(
            predicate::str::contains("d1/x.npy")
                .and(predicate::str::contains("d2/x.npy"))
                .and(predicate::str::contains("input of tensor B (init.file)")),
        );
    let bundled = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&bundled).unwrap();
    let file_of = |tensor: &str| -> PathBuf {
        let file = yaml["tensors"][tensor]["init"]["file"]
            .as_str()
            .unwrap_or_else(|| panic!("{tensor}'s init.file in:\n{bundled}"));
        out.join(file)
    };
    let (a, b) = (file_of("A"), file_of("B"));
    assert_ne!(a, b, "{bundled}");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(tmp.path().join("d1/x.npy")).unwrap()
    );
    assert_eq!(
        std::fs::read(&b).unwrap(),
        std::fs::read(tmp.path().join("d2/x.npy")).unwrap()
    );
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        readme.contains("| `d2/x.npy` | input of tensor B (init.file) |"),
        "{readme}"
    );
}

/// nvcc is a wrapper script in `~/bin` and the project lies under the same home folder: the
/// toolkit is where nvcc says it is (`nvcc --dryrun`), or, for a wrapper that hides that, where
/// nvcc found `cuda_runtime.h`; never the wrapper's grandparent (the home folder). So the
/// kernel's header comes with the bundle and the toolkit's headers are left out as the
/// receiver's own, said so.
#[test]
fn an_nvcc_wrapper_in_the_home_folder_keeps_the_kernel_headers() {
    use std::os::unix::fs::PermissionsExt;
    for (n, hides_dryrun) in [false, true].into_iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = home.join("project");
        let spec = common::write_small_spec(&project);
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let wrapper = home.join("bin/nvcc");
        let hide = if hides_dryrun {
            "case \"$*\" in *--dryrun*) exit 1;; esac\n"
        } else {
            ""
        };
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\n{hide}exec '{}' \"$@\"\n",
                common::nvcc().display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = project.join(format!("report{n}"));
        common::bundle_command(&project, &spec, &out, &wrapper)
            .assert()
            .success()
            .stderr(predicate::str::contains("warning").not())
            .stdout(
                predicate::str::contains(
                    "include/0/small_gemm.cuh <- kernels/small_gemm.cuh: kernel header (include dir kernels)",
                )
                .and(predicate::str::contains("of the CUDA toolkit"))
                .and(predicate::str::contains("not carried").not()),
            );
        assert!(out.join("include/0/small_gemm.cuh").is_file());
        let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
        assert!(!readme.contains("Not included"), "{readme}");
    }
}

/// An artifact folder as TARGET: its spec.yaml names the inputs beside the spec that made it
/// (`../../d1/x.npy`), which is the tree the bundle carries from.
#[test]
fn an_artifact_folder_bundles_the_inputs_beside_its_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_with_inputs(tmp.path(), Some("d1/x.npy"), None);
    f32_npy(&tmp.path().join("d1/x.npy"), &[33, 9], 1.0);
    let nvcc = quick_nvcc(tmp.path());
    common::bundle_command(tmp.path(), &spec, &tmp.path().join("first"), &nvcc)
        .assert()
        .success();
    common::bundle_command(
        tmp.path(),
        &tmp.path().join("generated/small_gemm"),
        &tmp.path().join("second"),
        &nvcc,
    )
    .assert()
    .success()
    .stdout(predicate::str::contains(
        "inputs/x.npy <- d1/x.npy: input of tensor A (init.file)",
    ));
}
