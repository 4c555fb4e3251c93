//! The build plan: everything one build of a spec needs, computed once from the resolved spec —
//! the artifact folder, the artifact's files as the spec generates them, and the nvcc commands of
//! the runtime library (its own flags) and of harness.cu (the production flags;
//! generate/command.rs). `generate` renders and writes a plan's files and `build` runs its
//! commands; neither calls the other, and `generate` is below the plan: it may not import it. The
//! runtime library's cache key is the plan's runtime command and sources plus the identity of the
//! nvcc that runs it, which only the build knows (build/runtime.rs).

// The nvcc commands live below the plan, in generate/, which renders them into build.sh and
// CMakeLists.txt and may not import the plan; their old path stays.
pub use crate::generate::command;

use std::path::{Path, PathBuf};

use crate::engine_error::EngineError as Error;
use crate::generate::command::BuildCommand;
use crate::generate::{self, artifact, Artifact};
use crate::spec::{self, Lookups, ResolvedSpec};

/// One spec's build, planned.
#[derive(Debug)]
pub struct Plan {
    pub spec: ResolvedSpec,
    /// The artifact folder.
    pub dir: PathBuf,
    /// The runtime library's and the harness's nvcc commands (build.sh, CMakeLists.txt and
    /// `repro build` all render or run this one description).
    pub command: BuildCommand,
    /// The artifact as the spec generates it now; `None` for an artifact folder taken as it is
    /// on disk (hand edits and all).
    pub artifact: Option<Artifact>,
}

impl Plan {
    /// The plan of `spec`'s artifact in `dir`, its files rendered.
    pub fn for_spec(spec: ResolvedSpec, dir: PathBuf) -> Result<Plan, Error> {
        let command = BuildCommand::new(&spec, &dir);
        let artifact = generate::render(&spec, &dir, &command)?;
        Ok(Plan {
            spec,
            dir,
            command,
            artifact: Some(artifact),
        })
    }

    /// The plan of an artifact folder as it is on disk, from its own spec.yaml.
    pub fn for_artifact(dir: &Path, lookups: &dyn Lookups) -> Result<Plan, Error> {
        if !is_artifact_dir(dir) {
            return Err(Error::NotAnArtifact {
                dir: dir.to_path_buf(),
            });
        }
        let spec = load_spec(&dir.join("spec.yaml"), lookups)?;
        Ok(Plan {
            command: BuildCommand::new(&spec, dir),
            spec,
            dir: dir.to_path_buf(),
            artifact: None,
        })
    }

    /// The plan of the spec file at `path`, its artifact in `output` [default: generated/<name>/].
    pub fn for_spec_file(
        path: &Path,
        output: Option<&Path>,
        lookups: &dyn Lookups,
    ) -> Result<Plan, Error> {
        let spec = load_spec(path, lookups)?;
        let dir = output
            .map(Path::to_path_buf)
            .unwrap_or_else(|| generate::default_dir(&spec));
        Plan::for_spec(spec, dir)
    }

    /// The plan of what a command was pointed at: an artifact folder as it is, or a spec file.
    pub fn for_target(
        target: &Path,
        output: Option<&Path>,
        lookups: &dyn Lookups,
    ) -> Result<Plan, Error> {
        if target.is_dir() {
            Plan::for_artifact(target, lookups)
        } else {
            Plan::for_spec_file(target, output, lookups)
        }
    }
}

/// Loads a spec for a command, telling the user (on stderr) what the spec resolved with warnings.
/// `lookups` answers the spec's questions about this machine: the commands and features pass
/// `crate::machine::Machine`, which the engine may not name (it reads build logs with flags/).
pub fn load_spec(path: &Path, lookups: &dyn Lookups) -> Result<ResolvedSpec, Error> {
    let spec = spec::load(path, lookups)?;
    for warning in &spec.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(spec)
}

/// A folder holding `spec.yaml` is an artifact; anything else is a spec file.
pub fn is_artifact_dir(path: &Path) -> bool {
    path.is_dir() && path.join("spec.yaml").is_file()
}

/// The plan of `target`, with its artifact written where stale (never over hand edits): what
/// build, run, probe, sweep, shrink, bench and bundle start from.
pub fn prepare(target: &Path, output: Option<&Path>, lookups: &dyn Lookups) -> Result<Plan, Error> {
    let plan = Plan::for_target(target, output, lookups)?;
    if let Some(files) = &plan.artifact {
        if !artifact::is_current(files) {
            let summary = artifact::write(files, &plan.spec.path, false)?;
            eprintln!(
                "scaffold: wrote {} in {}",
                generate::file_list(&summary.written),
                plan.dir.display()
            );
        }
    }
    Ok(plan)
}
