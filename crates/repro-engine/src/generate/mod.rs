//! The artifact (the README's "the artifact" part): rendering `harness.cu`, `build.sh`, `CMakeLists.txt`,
//! `spec.yaml` and `README.md` from the templates in `templates/`, and the runtime's sources
//! (`repro_contract::runtime::FILES`) into `runtime/` (all embedded in the binary), and writing
//! them without ever losing a hand edit.

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

/// `op: custom` and intermediates' references only: reference.cu, which includes the user's
/// headers and calls their functions.
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
    // `op: custom` and intermediates' references: the calls of the user's references, in a
    // translation unit of their own.
    if context.reference.compiled.is_some() {
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
    files.extend(
        repro_contract::runtime::FILES
            .iter()
            .map(|file| GeneratedFile {
                name: file.artifact_path,
                content: file.text.to_string(),
                executable: false,
            }),
    );
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
    for (t, resolved) in s.tensors.values_mut().zip(&spec.tensors) {
        if let (Some(written), Some(reference)) =
            (&mut t.reference, &resolved.intermediate_reference)
        {
            match reference {
                crate::spec::IntermediateReference::Function { source, .. } => {
                    written.source = Some(paths::relative_to(source, dir));
                }
                crate::spec::IntermediateReference::File(file) => {
                    written.file = Some(paths::relative_to(file, dir));
                }
            }
        }
    }
    for (launch, written) in spec.launches.iter().zip(s.launch_entries_mut()) {
        if let crate::spec::LaunchKind::Replay(replay) = &launch.kind {
            written.cubin = Some(paths::relative_to(&replay.cubin, dir));
            written.params = Some(paths::relative_to(&replay.params, dir));
        }
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
