//! Reading YAML files repro did not write: a UTF-8 byte order mark at the start of a spec or a
//! campaign file is read past (every YAML file goes through spec::yaml), and a replayed launch's
//! relocation at a byte near 2^64 is refused at its line instead of wrapping past the bound.

use std::path::Path;

use crate::common;

const BOM: &str = "\u{feff}";

#[test]
fn a_spec_and_a_campaign_file_may_start_with_a_byte_order_mark() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = common::write_small_spec(tmp.path());
    let text = std::fs::read_to_string(&spec).unwrap();
    let plain = repro::spec::load(&spec, &repro::machine::Machine).expect("the small spec loads");
    std::fs::write(&spec, format!("{BOM}{text}")).unwrap();
    let marked =
        repro::spec::load(&spec, &repro::machine::Machine).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(marked.name, plain.name);
    assert_eq!(marked.tensors.len(), plain.tensors.len());

    let campaign = tmp.path().join("campaign.yaml");
    std::fs::write(
        &campaign,
        format!(
            "{BOM}version: 1\nname: small_check\nspecs:\n  - spec: {}\n    modes: [ones]\n",
            spec.file_name().unwrap().to_string_lossy()
        ),
    )
    .unwrap();
    let loaded = repro::campaign::file::load(&campaign).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.name, "small_check");

    // An error on the first line still points at the column the reader sees.
    std::fs::write(
        &spec,
        format!("{BOM}{}", text.replacen("version: 1", "versio: 1", 1)),
    )
    .unwrap();
    let error = repro::spec::load(&spec, &repro::machine::Machine)
        .unwrap_err()
        .to_string();
    assert!(error.contains("small_gemm.yaml:1:1"), "{error}");
}

/// A replayed launch: 64 bytes of parameters, one pointer relocated at `at`.
fn replay_spec(at: &str) -> String {
    format!(
        r#"version: 1
name: replayed
tensors:
  buffer0: {{ dtype: u8, shape: [64] }}
  buffer1: {{ dtype: u8, shape: [64], output: true }}
kernel:
  kind: replay
  name: _Z6kernelPhS_
  cubin: module.cubin
  params: params.bin
  grid: [1, 1, 1]
  block: [64, 1, 1]
  relocate:
    - {{ at: 8, tensor: buffer1, offset: 0 }}
    - {{ at: {at}, tensor: buffer0, offset: 0 }}
reference:
  op: file
  expected: {{ buffer1: expected.npy }}
  block: [64]
build: {{ arch: sm_90a }}
"#
    )
}

fn load_replay(dir: &Path, at: &str) -> Result<repro::spec::ResolvedSpec, repro::spec::LoadError> {
    std::fs::write(dir.join("params.bin"), [0u8; 64]).unwrap();
    std::fs::write(dir.join("module.cubin"), b"cubin").unwrap();
    let mut header = "{'descr': '|u1', 'fortran_order': False, 'shape': (64,), }".to_string();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&[0u8; 64]);
    std::fs::write(dir.join("expected.npy"), npy).unwrap();
    repro::spec::load_text(
        Path::new("replay.yaml"),
        &replay_spec(at),
        dir,
        &repro::machine::Machine,
    )
}

#[test]
fn a_relocation_past_the_parameters_is_refused_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    load_replay(tmp.path(), "0").expect("a relocation inside the parameters loads");
    for at in ["18446744073709551615", "18446744073709551608"] {
        let error = load_replay(tmp.path(), at).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let text = error.to_string();
        assert!(text.contains("replay.yaml:15:"), "{text}");
        insta::assert_snapshot!(format!("relocation_at_{at}"), text);
    }
}
