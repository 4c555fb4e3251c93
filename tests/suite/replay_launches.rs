//! `kind: replay` as an entry of `launches:` (docs/spec.md, `launches` and `kind: replay`): a
//! sequence of replayed launches, or replayed and built-from-source ones mixed, each with its own
//! cubin, parameter bytes and relocations over tensors shared by name. The spec's errors name the
//! entry (`launches[1].name`, `launches[0].relocate[0].tensor`); a bundle carries every launch's
//! files and refuses one from outside the spec's folder. The specs of tests/gpu/ that a GPU runs
//! (replay_sequence.yaml and replay_sequence_mixed.yaml) are built with nvcc in gpu_specs.rs.

use std::path::{Path, PathBuf};

use crate::common;

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

/// `tma:` is for launches built from source (a replayed launch's maps are its relocations): a
/// sequence of replayed launches alone is refused one, as a replayed `kernel:` is.
#[test]
fn a_tma_entry_beside_replayed_launches_alone() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "launches:\n",
        "tma:\n  map_x: { tensor: X, box: [64] }\nlaunches:\n",
    )));
}

/// An output that no launch reaches: the help says a replayed launch reaches it by a relocation.
#[test]
fn an_output_no_replayed_launch_relocates() {
    insta::assert_snapshot!(error_for(&sequence_with(
        "      - { at: 16, tensor: Y, offset: 0 }\n",
        ""
    )));
}

/// The fixtures of tests/gpu/ the sequences read, copied into `dir` (the same relative paths),
/// so that a test may write a spec beside them.
fn copy_fixtures(dir: &Path) {
    for file in [
        "replay/scale_add.cubin",
        "replay/scale_add.params.bin",
        "replay/square_add.cubin",
        "replay/square_add.params.bin",
        "references/replay_sequence.h",
        "kernels/replay_sequence.cuh",
    ] {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(gpu_specs().join(file), to).unwrap();
    }
}

/// A replayed launch, then one built from source: a `tma:` map that no launch names is encoded
/// by the launch built from source (a replayed one encodes only its relocations), and the
/// harness builds with nvcc.
#[test]
fn a_map_no_launch_names_is_encoded_by_the_first_launch_built_from_source() {
    let tmp = tempfile::tempdir().unwrap();
    copy_fixtures(tmp.path());
    let spec = tmp.path().join("sequence.yaml");
    let second = "  - kind: replay\n    name: _ZN23replay_sequence_kernels10square_addEPKfS1_Pf\n    cubin: replay/square_add.cubin\n    params: replay/square_add.params.bin\n    grid: [16, 1, 1]\n    block: [256, 1, 1]\n    relocate:\n      - { at: 0, tensor: W, offset: 0 }\n      - { at: 8, tensor: X, offset: 0 }\n      - { at: 16, tensor: Y, offset: 0 }\n";
    let text = sequence_with(
        second,
        "  - name: replay_sequence_kernels::square_add\n    args: [W, X, Y]\n    grid: [\"ceil_div(N, 256)\", 1, 1]\n    block: [256, 1, 1]\n",
    )
    .replace(
        "tensors:\n",
        "source: { include_dirs: [kernels], includes: [replay_sequence.cuh] }\ntensors:\n",
    )
    .replace(
        "launches:\n",
        "tma:\n  map_x: { tensor: X, box: [64] }\nlaunches:\n",
    );
    std::fs::write(&spec, text).unwrap();
    let resolved =
        repro::spec::load(&spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        resolved
            .warnings
            .iter()
            .any(|w| w.contains("tma.map_x is in no launch's args or setup")),
        "{:?}",
        resolved.warnings
    );
    let out = tmp.path().join("art");
    common::build_with_nvcc(&spec, &out);
    let harness = std::fs::read_to_string(out.join("harness.cu")).unwrap();
    let launch_1 = harness
        .split("// ---- launch 2 of 2")
        .nth(1)
        .expect("launch 2's function");
    assert!(
        launch_1.contains("= repro::encode_tma(map_x_request"),
        "{harness}"
    );
    assert_eq!(
        harness.matches("repro::encode_tma(map_x_request").count(),
        1
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
    common::bundle_command(dir, spec, out, &nvcc).assert()
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
    copy_fixtures(&project);
    std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
    std::fs::rename(
        project.join("replay/square_add.cubin"),
        tmp.path().join("elsewhere/square_add.cubin"),
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
