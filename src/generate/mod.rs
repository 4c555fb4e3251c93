//! The artifact (DESIGN §4): rendering `harness.cu`, `build.sh`, `CMakeLists.txt`, `spec.yaml` and
//! `README.md` from the templates in `templates/` (embedded in the binary), and writing them
//! without ever losing a hand edit.

pub mod artifact;
pub mod command;
pub mod context;
pub mod paths;

use std::path::{Path, PathBuf};

use tera::Tera;

use crate::error::Error;
use crate::spec::ResolvedSpec;

/// The harness runtime, in the order it is pasted into harness.cu (each part may use the ones
/// before it).
const RUNTIME_PARTS: &[(&str, &str)] = &[
    (
        "base.cuh",
        include_str!("../../templates/harness/runtime/base.cuh"),
    ),
    (
        "dtype.cuh",
        include_str!("../../templates/harness/runtime/dtype.cuh"),
    ),
    (
        "generators.cuh",
        include_str!("../../templates/harness/runtime/generators.cuh"),
    ),
    (
        "npy.cuh",
        include_str!("../../templates/harness/runtime/npy.cuh"),
    ),
    (
        "tensor.cuh",
        include_str!("../../templates/harness/runtime/tensor.cuh"),
    ),
    (
        "reference.cuh",
        include_str!("../../templates/harness/runtime/reference.cuh"),
    ),
    (
        "compare.cuh",
        include_str!("../../templates/harness/runtime/compare.cuh"),
    ),
    (
        "report.cuh",
        include_str!("../../templates/harness/runtime/report.cuh"),
    ),
    (
        "device.cuh",
        include_str!("../../templates/harness/runtime/device.cuh"),
    ),
    (
        "device_inputs.cuh",
        include_str!("../../templates/harness/runtime/device_inputs.cuh"),
    ),
    (
        "device_reference.cuh",
        include_str!("../../templates/harness/runtime/device_reference.cuh"),
    ),
    (
        "device_compare.cuh",
        include_str!("../../templates/harness/runtime/device_compare.cuh"),
    ),
    (
        "reference_cache.cuh",
        include_str!("../../templates/harness/runtime/reference_cache.cuh"),
    ),
    (
        "launch.cuh",
        include_str!("../../templates/harness/runtime/launch.cuh"),
    ),
    (
        "tma.cuh",
        include_str!("../../templates/harness/runtime/tma.cuh"),
    ),
    (
        "trace.cuh",
        include_str!("../../templates/harness/runtime/trace.cuh"),
    ),
    (
        "spec_info.cuh",
        include_str!("../../templates/harness/runtime/spec_info.cuh"),
    ),
    (
        "probe.cuh",
        include_str!("../../templates/harness/runtime/probe.cuh"),
    ),
    (
        "bench.cuh",
        include_str!("../../templates/harness/runtime/bench.cuh"),
    ),
    (
        "harness_main.cuh",
        include_str!("../../templates/harness/runtime/harness_main.cuh"),
    ),
];

/// The CUTLASS 3.x part of the runtime; it needs CUTLASS's headers, so only `kind: cutlass3`
/// harnesses carry it (after the prelude).
pub const CUTLASS_RUNTIME: &str = include_str!("../../templates/harness/cutlass3.cuh");

/// The artifact's files, in the order they are listed in its README.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "harness.cu",
        include_str!("../../templates/harness.cu.tera"),
    ),
    ("build.sh", include_str!("../../templates/build.sh.tera")),
    (
        "CMakeLists.txt",
        include_str!("../../templates/CMakeLists.txt.tera"),
    ),
    ("README.md", include_str!("../../templates/README.md.tera")),
];

/// One file of an artifact, as generated.
#[derive(Debug, Clone)]
pub struct GeneratedFile {
    pub name: &'static str,
    pub content: String,
    pub executable: bool,
}

/// Everything `repro scaffold` writes for one spec.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub dir: PathBuf,
    pub files: Vec<GeneratedFile>,
}

/// `generated/<name>/`, relative to the current directory.
pub fn default_dir(spec: &ResolvedSpec) -> PathBuf {
    PathBuf::from("generated").join(spec.name())
}

/// The runtime, concatenated with a banner per part.
pub fn runtime_source() -> String {
    let mut out = String::new();
    for (name, text) in RUNTIME_PARTS {
        out.push_str(&format!("\n// ---- runtime: {name} ----\n"));
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

fn templates() -> Tera {
    let mut tera = Tera::default();
    for (name, text) in TEMPLATES {
        tera.add_raw_template(name, text)
            .expect("embedded templates parse (tested)");
    }
    // Generated code is code, not HTML.
    tera.autoescape_on(vec![]);
    tera
}

/// Renders every file of the artifact for `spec` as it would be written into `dir`.
pub fn render(spec: &ResolvedSpec, dir: &Path) -> Result<Artifact, Error> {
    let context = context::harness_context(spec, dir, runtime_source());
    let tera_context = tera::Context::from_serialize(&context).expect("the context serializes");
    let tera = templates();
    let mut files = Vec::new();
    for (name, _) in TEMPLATES {
        let content = tera.render(name, &tera_context).map_err(|e| {
            // A template error is a bug in repro, not in the spec; say everything tera knows.
            let mut message = format!("internal error rendering {name}: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(&format!("\n  caused by: {s}"));
                source = s.source();
            }
            Error::Usage(message)
        })?;
        files.push(GeneratedFile {
            name,
            content,
            executable: *name == "build.sh",
        });
    }
    files.push(GeneratedFile {
        name: "spec.yaml",
        content: resolved_spec_yaml(spec, dir),
        executable: false,
    });
    Ok(Artifact {
        dir: dir.to_path_buf(),
        files,
    })
}

/// The spec with paths rewritten relative to the artifact folder, so `repro build DIR` and
/// `repro run DIR` work from the artifact alone.
fn resolved_spec_yaml(spec: &ResolvedSpec, dir: &Path) -> String {
    let mut s = spec.spec.clone();
    s.source.include_dirs = spec
        .include_dirs
        .iter()
        .map(|d| paths::relative_to(d, dir))
        .collect();
    // The artifact must build without the production log: the flags it gave are written out.
    s.build = crate::spec::model::BuildSpec {
        arch: Some(spec.build.arch.clone()),
        std: Some(spec.build.std.clone()),
        flags: spec.build.flags.clone(),
        flags_from: None,
    };
    for (t, resolved) in s.tensors.values_mut().zip(&spec.tensors) {
        if let crate::spec::InitSource::File(p) = &resolved.init.source {
            t.init = Some(crate::spec::model::InitPattern::File(
                crate::spec::model::FileInit {
                    file: paths::relative_to(p, dir),
                },
            ));
        }
    }
    format!(
        "# Resolved by repro {} from {}; paths are relative to this folder.\n{}",
        env!("CARGO_PKG_VERSION"),
        paths::relative_to(&spec.path, dir),
        crate::spec::yaml::to_yaml(&s)
    )
}
