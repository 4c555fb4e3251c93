//! The artifact (the README's "the artifact" part): rendering `harness.cu`, `build.sh`, `CMakeLists.txt`,
//! `spec.yaml` and `README.md` from the templates in `templates/`, and the runtime's sources
//! into `runtime/` (all embedded in the binary), and writing them without ever losing a hand
//! edit.

pub mod artifact;
pub mod command;
pub mod compiled_sizes;
pub mod context;

use std::path::{Path, PathBuf};

use tera::Tera;

use crate::engine_error::EngineError as Error;
use crate::spec::ResolvedSpec;
use command::BuildCommand;
use repro_text::paths;

/// The runtime library's sources, as every artifact carries them in `runtime/` (identical in every
/// artifact of one repro version): the headers harness.cu includes (`include/repro/`) and the
/// library's own headers and its one translation unit (`src/`).
pub const RUNTIME_FILES: &[(&str, &str)] = &[
    (
        "runtime/src/base.cuh",
        include_str!("../../../../templates/runtime/src/base.cuh"),
    ),
    (
        "runtime/src/bench.cuh",
        include_str!("../../../../templates/runtime/src/bench.cuh"),
    ),
    (
        "runtime/src/compare.cuh",
        include_str!("../../../../templates/runtime/src/compare.cuh"),
    ),
    (
        "runtime/src/device.cuh",
        include_str!("../../../../templates/runtime/src/device.cuh"),
    ),
    (
        "runtime/src/driver.cuh",
        include_str!("../../../../templates/runtime/src/driver.cuh"),
    ),
    (
        "runtime/src/device_compare.cuh",
        include_str!("../../../../templates/runtime/src/device_compare.cuh"),
    ),
    (
        "runtime/src/device_inputs.cuh",
        include_str!("../../../../templates/runtime/src/device_inputs.cuh"),
    ),
    (
        "runtime/src/device_reference.cuh",
        include_str!("../../../../templates/runtime/src/device_reference.cuh"),
    ),
    (
        "runtime/src/emulated_analysis.cuh",
        include_str!("../../../../templates/runtime/src/emulated_analysis.cuh"),
    ),
    (
        "runtime/src/emulated_moduli.cuh",
        include_str!("../../../../templates/runtime/src/emulated_moduli.cuh"),
    ),
    (
        "runtime/src/emulated_slices.cuh",
        include_str!("../../../../templates/runtime/src/emulated_slices.cuh"),
    ),
    (
        "runtime/src/emulated_gemm.cuh",
        include_str!("../../../../templates/runtime/src/emulated_gemm.cuh"),
    ),
    (
        "runtime/src/emulated_gemm_tma.cuh",
        include_str!("../../../../templates/runtime/src/emulated_gemm_tma.cuh"),
    ),
    (
        "runtime/src/emulated_gemm_launch.cuh",
        include_str!("../../../../templates/runtime/src/emulated_gemm_launch.cuh"),
    ),
    (
        "runtime/src/emulated_residuals.cuh",
        include_str!("../../../../templates/runtime/src/emulated_residuals.cuh"),
    ),
    (
        "runtime/src/emulated_reference.cuh",
        include_str!("../../../../templates/runtime/src/emulated_reference.cuh"),
    ),
    (
        "runtime/src/dtype.cuh",
        include_str!("../../../../templates/runtime/src/dtype.cuh"),
    ),
    (
        "runtime/src/generators.cuh",
        include_str!("../../../../templates/runtime/src/generators.cuh"),
    ),
    (
        "runtime/src/grouped.cuh",
        include_str!("../../../../templates/runtime/src/grouped.cuh"),
    ),
    (
        "runtime/src/harness_main.cuh",
        include_str!("../../../../templates/runtime/src/harness_main.cuh"),
    ),
    (
        "runtime/src/launch.cuh",
        include_str!("../../../../templates/runtime/src/launch.cuh"),
    ),
    (
        "runtime/src/npy.cuh",
        include_str!("../../../../templates/runtime/src/npy.cuh"),
    ),
    (
        "runtime/src/probe.cuh",
        include_str!("../../../../templates/runtime/src/probe.cuh"),
    ),
    (
        "runtime/src/probe_ops.cuh",
        include_str!("../../../../templates/runtime/src/probe_ops.cuh"),
    ),
    (
        "runtime/src/reference.cuh",
        include_str!("../../../../templates/runtime/src/reference.cuh"),
    ),
    (
        "runtime/src/reference_cross_check.cuh",
        include_str!("../../../../templates/runtime/src/reference_cross_check.cuh"),
    ),
    (
        "runtime/src/reference_cache.cuh",
        include_str!("../../../../templates/runtime/src/reference_cache.cuh"),
    ),
    (
        "runtime/src/report.cuh",
        include_str!("../../../../templates/runtime/src/report.cuh"),
    ),
    (
        "runtime/src/custom.cuh",
        include_str!("../../../../templates/runtime/src/custom.cuh"),
    ),
    (
        "runtime/src/probe_custom.cuh",
        include_str!("../../../../templates/runtime/src/probe_custom.cuh"),
    ),
    (
        "runtime/src/output_order.cuh",
        include_str!("../../../../templates/runtime/src/output_order.cuh"),
    ),
    (
        "runtime/src/attention.cuh",
        include_str!("../../../../templates/runtime/src/attention.cuh"),
    ),
    (
        "runtime/src/attention_reference.cuh",
        include_str!("../../../../templates/runtime/src/attention_reference.cuh"),
    ),
    (
        "runtime/src/attention_device.cuh",
        include_str!("../../../../templates/runtime/src/attention_device.cuh"),
    ),
    (
        "runtime/src/run_options.cuh",
        include_str!("../../../../templates/runtime/src/run_options.cuh"),
    ),
    (
        "runtime/src/scales.cuh",
        include_str!("../../../../templates/runtime/src/scales.cuh"),
    ),
    (
        "runtime/src/spec_file.cuh",
        include_str!("../../../../templates/runtime/src/spec_file.cuh"),
    ),
    (
        "runtime/src/spec_info.cuh",
        include_str!("../../../../templates/runtime/src/spec_info.cuh"),
    ),
    (
        "runtime/src/stress.cuh",
        include_str!("../../../../templates/runtime/src/stress.cuh"),
    ),
    (
        "runtime/src/tensor.cuh",
        include_str!("../../../../templates/runtime/src/tensor.cuh"),
    ),
    (
        "runtime/src/tma.cuh",
        include_str!("../../../../templates/runtime/src/tma.cuh"),
    ),
    (
        "runtime/src/trace.cuh",
        include_str!("../../../../templates/runtime/src/trace.cuh"),
    ),
    (
        "runtime/src/production.cuh",
        include_str!("../../../../templates/runtime/src/production.cuh"),
    ),
    (
        "runtime/src/replay.cuh",
        include_str!("../../../../templates/runtime/src/replay.cuh"),
    ),
    (
        "runtime/src/runtime.cu",
        include_str!("../../../../templates/runtime/src/runtime.cu"),
    ),
    (
        "runtime/include/repro/harness.h",
        include_str!("../../../../templates/runtime/include/repro/harness.h"),
    ),
    (
        "runtime/include/repro/reference.h",
        include_str!("../../../../templates/runtime/include/repro/reference.h"),
    ),
    (
        "runtime/include/repro/delay_points.h",
        include_str!("../../../../templates/runtime/include/repro/delay_points.h"),
    ),
    (
        "runtime/include/repro/tma.h",
        include_str!("../../../../templates/runtime/include/repro/tma.h"),
    ),
    (
        "runtime/include/repro/replay.h",
        include_str!("../../../../templates/runtime/include/repro/replay.h"),
    ),
    (
        "runtime/include/repro/cutlass3.h",
        include_str!("../../../../templates/runtime/include/repro/cutlass3.h"),
    ),
    (
        "runtime/include/repro/async_race.cuh",
        include_str!("../../../../templates/runtime/include/repro/async_race.cuh"),
    ),
];

/// The artifact's files, in the order they are listed in its README.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "harness.cu",
        include_str!("../../../../templates/harness.cu.tera"),
    ),
    (
        "build.sh",
        include_str!("../../../../templates/build.sh.tera"),
    ),
    (
        "CMakeLists.txt",
        include_str!("../../../../templates/CMakeLists.txt.tera"),
    ),
    (
        "README.md",
        include_str!("../../../../templates/README.md.tera"),
    ),
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

/// The files written, the runtime's as one entry: `harness.cu, runtime/ (25 files), spec.yaml`.
pub fn file_list(names: &[&str]) -> String {
    let runtime = names.iter().filter(|n| n.starts_with("runtime/")).count();
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !name.starts_with("runtime/") {
            out.push(name.to_string());
        } else if !out.iter().any(|o| o.starts_with("runtime/")) {
            out.push(format!(
                "runtime/ ({runtime} file{})",
                if runtime == 1 { "" } else { "s" }
            ));
        }
    }
    out.join(", ")
}

/// `op: custom` only: reference.cu, which includes the user's header and calls their function.
const REFERENCE_TEMPLATE: (&str, &str) = (
    "reference.cu",
    include_str!("../../../../templates/reference.cu.tera"),
);

fn templates() -> Tera {
    let mut tera = Tera::default();
    for (name, text) in TEMPLATES.iter().chain([&REFERENCE_TEMPLATE]) {
        tera.add_raw_template(name, text)
            .expect("embedded templates parse (tested)");
    }
    // Generated code is code, not HTML.
    tera.autoescape_on(vec![]);
    tera
}

/// Renders every file of the artifact for `spec` as it would be written into `dir`.
pub fn render(spec: &ResolvedSpec, dir: &Path, command: &BuildCommand) -> Result<Artifact, Error> {
    let context = context::harness_context(spec, dir, command)?;
    let tera_context = tera::Context::from_serialize(&context).expect("the context serializes");
    let tera = templates();
    let mut files = Vec::new();
    for (name, _) in TEMPLATES {
        let content = tera.render(name, &tera_context).map_err(|e| {
            // A template error is a bug in repro, not in the spec; say everything tera knows.
            let mut message = format!("the template of {name} does not render: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(&format!("\n  caused by: {s}"));
                source = s.source();
            }
            Error::Internal(message)
        })?;
        files.push(GeneratedFile {
            name,
            content,
            executable: *name == "build.sh",
        });
    }
    // `op: custom`: the call of the user's reference, in a translation unit of its own.
    if context.reference.custom.is_some() {
        files.push(GeneratedFile {
            name: command::REFERENCE_SOURCE,
            content: tera
                .render(REFERENCE_TEMPLATE.0, &tera_context)
                .map_err(|e| {
                    Error::Internal(format!("the template of reference.cu does not render: {e}"))
                })?,
            executable: false,
        });
    }
    files.extend(RUNTIME_FILES.iter().map(|(name, content)| GeneratedFile {
        name,
        content: content.to_string(),
        executable: false,
    }));
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

/// The resolved spec (spec/document.rs) with paths rewritten relative to the artifact folder,
/// so `repro build DIR` and `repro run DIR` work from the artifact alone.
fn resolved_spec_yaml(spec: &ResolvedSpec, dir: &Path) -> String {
    use crate::spec::model::InitPattern;
    let mut s = spec.document.clone();
    s.source.include_dirs = spec
        .include_dirs
        .iter()
        .map(|d| paths::relative_to(d, dir))
        .collect();
    // From the resolved tensors, not the document: a bundle points its inputs at its own copies.
    for (t, resolved) in s.tensors.values_mut().zip(&spec.tensors) {
        if let (Some(InitPattern::File(f)), crate::spec::InitSource::File(path)) =
            (&mut t.init, &resolved.init.source)
        {
            f.file = paths::relative_to(path, dir);
        }
    }
    match &spec.reference {
        crate::spec::Reference::Custom(c) => {
            s.reference.source = Some(paths::relative_to(&c.source, dir));
        }
        crate::spec::Reference::File(f) => {
            s.reference.expected = Some(
                f.expected
                    .iter()
                    .map(|(i, path)| (spec.tensors[*i].name.clone(), paths::relative_to(path, dir)))
                    .collect(),
            );
        }
        crate::spec::Reference::Gemm(_) | crate::spec::Reference::Attention(_) => {}
    }
    if let crate::spec::LaunchKind::Replay(replay) = &spec.kernel.kind {
        s.kernel.cubin = Some(paths::relative_to(&replay.cubin, dir));
        s.kernel.params = Some(paths::relative_to(&replay.params, dir));
    }
    if let (Some(written), Some(resolved)) = (&mut s.capture, &spec.capture) {
        let names = |files: &[(usize, std::path::PathBuf)]| {
            files
                .iter()
                .map(|(i, path)| (spec.tensors[*i].name.clone(), paths::relative_to(path, dir)))
                .collect()
        };
        written.before = names(&resolved.before);
        written.after = names(&resolved.after);
    }
    format!(
        "# Resolved by repro {} from {}; paths are relative to this folder.\n{}",
        env!("CARGO_PKG_VERSION"),
        paths::relative_to(&spec.path, dir),
        crate::spec::yaml::to_yaml(&s)
    )
}
