//! `kind: replay` as an entry of `launches:` (docs/spec.md, `launches` and `kind: replay`): a
//! sequence of replayed launches, or replayed and built-from-source ones mixed, each with its own
//! cubin, parameter bytes and relocations over tensors shared by name. The spec's errors name the
//! entry (`launches[1].name`, `launches[0].relocate[0].tensor`); a bundle carries every launch's
//! files and refuses one from outside the spec's folder. The specs of tests/gpu/ that a GPU runs
//! (replay_sequence.yaml and replay_sequence_mixed.yaml) are built with nvcc in gpu_specs.rs.

use std::path::{Path, PathBuf};

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

/// Two replayed launches of the fixtures in tests/gpu/replay/ (made by its make.sh), the second
/// reading the intermediate the first writes; every path relative to tests/gpu/.
const SEQUENCE: &str = r#"version: 1
name: replayed_sequence
sizes: { N: 4096 }
tensors:
  X: { dtype: f32, shape: [N] }
  W: { dtype: f32, shape: [N], intermediate: true }
  Y: { dtype: f32, shape: [N], output: true }
launches:
  - kind: replay
    name: _ZN23replay_sequence_kernels9scale_addEPKfPf
    cubin: replay/scale_add.cubin
    params: replay/scale_add.params.bin
    grid: [16, 1, 1]
    block: [256, 1, 1]
    relocate:
      - { at: 0, tensor: X, offset: 0 }
      - { at: 8, tensor: W, offset: 0 }
  - kind: replay
    name: _ZN23replay_sequence_kernels10square_addEPKfS1_Pf
    cubin: replay/square_add.cubin
    params: replay/square_add.params.bin
    grid: [16, 1, 1]
    block: [256, 1, 1]
    relocate:
      - { at: 0, tensor: W, offset: 0 }
      - { at: 8, tensor: X, offset: 0 }
      - { at: 16, tensor: Y, offset: 0 }
reference: { op: custom, source: references/replay_sequence.h, function: replay_sequence_reference }
build: { arch: sm_90a }
"#;

fn gpu_specs() -> PathBuf {
    common::repo().join("tests/gpu")
}

/// SEQUENCE with `from` replaced by `to` (once; `from` must be there).
fn sequence_with(from: &str, to: &str) -> String {
    assert!(
        SEQUENCE.contains(from),
        "test bug: `{from}` not in the sequence"
    );
    SEQUENCE.replacen(from, to, 1)
}

/// `text` read as tests/gpu/replay_sequence.yaml would be: its files are the fixtures there.
fn load(text: &str) -> Result<repro::spec::ResolvedSpec, repro::spec::LoadError> {
    repro::spec::load_text(
        Path::new("sequence.yaml"),
        text,
        &gpu_specs(),
        &repro::machine::Machine,
    )
}

/// The rendered errors of `text`, which must be refused with exit 2.
fn error_for(text: &str) -> String {
    match load(text) {
        Ok(_) => panic!("spec unexpectedly valid:\n{text}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "spec errors exit 2");
            e.to_string()
        }
    }
}

fn replayed(launch: &repro::spec::KernelLaunch) -> &repro::spec::ReplayLaunch {
    match &launch.kind {
        repro::spec::LaunchKind::Replay(replay) => replay,
        other => panic!("not a replayed launch: {other:?}"),
    }
}

/// Each replayed launch keeps its own module, bytes and relocations; the tensors they name are
/// the spec's, shared by name (W is written through the first's bytes and read through the
/// second's). Y is reached only through a relocation, which counts as passing it.
#[test]
fn two_replayed_launches_each_keep_their_own_files_and_relocations() {
    let spec = load(SEQUENCE).unwrap_or_else(|e| panic!("{e}"));
    assert!(spec.is_sequence());
    assert_eq!(spec.launches.len(), 2);
    let (first, second) = (replayed(&spec.launches[0]), replayed(&spec.launches[1]));
    assert!(first.cubin.ends_with("replay/scale_add.cubin"));
    assert!(second.cubin.ends_with("replay/square_add.cubin"));
    assert_eq!((first.params_size, second.params_size), (16, 24));
    let tensor = |name: &str| spec.tensors.iter().position(|t| t.name == name).unwrap();
    let relocated = |replay: &repro::spec::ReplayLaunch| -> Vec<(u64, usize)> {
        replay
            .relocations
            .iter()
            .map(|r| (r.at, r.tensor))
            .collect()
    };
    assert_eq!(relocated(first), [(0, tensor("X")), (8, tensor("W"))]);
    assert_eq!(
        relocated(second),
        [(0, tensor("W")), (8, tensor("X")), (16, tensor("Y"))]
    );
    assert_eq!(
        spec.launches[1].name,
        "_ZN23replay_sequence_kernels10square_addEPKfS1_Pf"
    );
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
}

/// tests/gpu/replay_sequence_mixed.yaml: a launch built from source, then a replayed one.
#[test]
fn a_replayed_launch_may_follow_one_built_from_source() {
    let spec = repro::spec::load(
        &gpu_specs().join("replay_sequence_mixed.yaml"),
        &repro::machine::Machine,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.launches[0].kind, repro::spec::LaunchKind::Global);
    assert!(replayed(&spec.launches[1])
        .cubin
        .ends_with("replay/square_add.cubin"));
}

/// `tma:` is refused beside a `kernel:` that is replayed (its maps are relocations), but in a
/// sequence it is for the launches built from source: one that no launch takes is the usual
/// warning, not an error.
#[test]
fn a_tma_entry_beside_replayed_launches_is_a_warning() {
    let spec = load(&sequence_with(
        "launches:\n",
        "tma:\n  map_x: { tensor: X, box: [64] }\nlaunches:\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        spec.warnings
            .iter()
            .any(|w| w.contains("tma.map_x is in no launch's args or setup")),
        "{:?}",
        spec.warnings
    );
}

#[test]
fn a_replayed_launch_without_a_name() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "    name: _ZN23replay_sequence_kernels10square_addEPKfS1_Pf\n",
        ""
    )));
}

#[test]
fn a_relocation_of_an_undeclared_tensor_in_a_sequence() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "      - { at: 0, tensor: X, offset: 0 }",
        "      - { at: 0, tensor: XX, offset: 0 }"
    )));
}

#[test]
fn a_replayed_launch_given_args() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "    cubin: replay/square_add.cubin\n",
        "    cubin: replay/square_add.cubin\n    args: [W, X, Y]\n"
    )));
}

#[test]
fn a_replayed_launch_whose_cubin_does_not_exist() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "cubin: replay/square_add.cubin",
        "cubin: replay/square_add_missing.cubin"
    )));
}

#[test]
fn a_replayed_launch_whose_relocation_is_past_its_own_parameters() {
    // 24 bytes are the second launch's; the first's 16 end before byte 16.
    insta::assert_snapshot!(error_for(&sequence_with(
        "      - { at: 8, tensor: W, offset: 0 }",
        "      - { at: 16, tensor: W, offset: 0 }"
    )));
}

/// `repro bundle SPEC -o OUT --no-run` with an nvcc that compiles nothing.
fn bundle(spec: &Path, out: &Path, dir: &Path) -> assert_cmd::assert::Assert {
    let nvcc = common::stand_in_nvcc(dir, &dir.join("nvcc.log"));
    Command::cargo_bin("repro")
        .unwrap()
        .current_dir(dir)
        .arg("bundle")
        .arg(spec)
        .arg("-o")
        .arg(out)
        .arg("--no-run")
        .arg("--nvcc")
        .arg(nvcc)
        .assert()
}

/// A bundle of tests/gpu/replay_sequence.yaml carries both launches' cubins and parameter bytes,
/// and its spec.yaml points each launch at its own copies.
#[test]
fn a_bundle_carries_every_replayed_launchs_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    bundle(&gpu_specs().join("replay_sequence.yaml"), &out, tmp.path()).success();
    for file in [
        "scale_add.cubin",
        "scale_add.params.bin",
        "square_add.cubin",
        "square_add.params.bin",
    ] {
        let copy = std::fs::read(out.join("replay").join(file)).unwrap();
        assert_eq!(
            copy,
            std::fs::read(gpu_specs().join("replay").join(file)).unwrap(),
            "{file}"
        );
    }
    let bundled = std::fs::read_to_string(out.join("spec.yaml")).unwrap();
    for line in [
        "  cubin: replay/scale_add.cubin\n  params: replay/scale_add.params.bin",
        "  cubin: replay/square_add.cubin\n  params: replay/square_add.params.bin",
    ] {
        assert!(bundled.contains(line), "`{line}` in:\n{bundled}");
    }
}

/// A later launch's cubin from outside the spec's folder does not travel: exit 2 naming
/// `launches[1].cubin`, and no bundle is left.
#[test]
fn a_bundle_refuses_a_replayed_launchs_cubin_from_outside_the_spec_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(project.join("references")).unwrap();
    std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
    for file in [
        "scale_add.cubin",
        "scale_add.params.bin",
        "square_add.params.bin",
    ] {
        std::fs::create_dir_all(project.join("replay")).unwrap();
        std::fs::copy(
            gpu_specs().join("replay").join(file),
            project.join("replay").join(file),
        )
        .unwrap();
    }
    std::fs::copy(
        gpu_specs().join("replay/square_add.cubin"),
        tmp.path().join("elsewhere/square_add.cubin"),
    )
    .unwrap();
    std::fs::copy(
        gpu_specs().join("references/replay_sequence.h"),
        project.join("references/replay_sequence.h"),
    )
    .unwrap();
    let spec = project.join("sequence.yaml");
    std::fs::write(
        &spec,
        sequence_with(
            "cubin: replay/square_add.cubin",
            "cubin: ../elsewhere/square_add.cubin",
        ),
    )
    .unwrap();
    bundle(&spec, &project.join("bundle"), &project)
        .code(2)
        .stderr(
            predicate::str::contains("launches[1].cubin")
                .and(predicate::str::contains("outside the spec's folder")),
        );
    assert!(!project.join("bundle").exists());
    assert!(!project.join("bundle.tar.gz").exists());
}
