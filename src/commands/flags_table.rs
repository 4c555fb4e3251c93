//! `repro flags`: the production flags of a real compile line, shown as a kept/dropped table and
//! as a `build:` block to paste into a spec.

use std::path::{Path, PathBuf};

use crate::error::{exit, Error};

/// Where the compile line comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A build log, a compile_commands.json, or a file holding one nvcc command line.
    Log(PathBuf),
    /// The nvcc command line itself.
    Line(String),
}

/// Prints the production flags of the nvcc invocation in `source` that `match_pattern` (or the
/// kernel of the spec at `spec`) picks: a kept/dropped table and a `build:` block. The spec is
/// loaded with the `lookups` that commands/ passes (this machine: crates/repro-flags/src/machine.rs).
pub fn flags(
    source: &Source,
    match_pattern: Option<&str>,
    spec: Option<&Path>,
    lookups: &dyn crate::spec::Lookups,
) -> Result<u8, Error> {
    let mut hints = Vec::new();
    if let Some(spec_path) = spec {
        let spec = crate::spec::load(spec_path, lookups)?;
        hints.extend(spec.includes.iter().cloned());
        hints.push(spec.name().to_string());
    }
    let selector = crate::flags::Selector {
        match_pattern: match_pattern.map(str::to_string),
        hints,
    };
    let input = match source {
        Source::Log(path) => crate::flags::read_input(path),
        Source::Line(line) => crate::flags::from_command_line(line),
    }?;
    let extraction = crate::flags::extract(&input, &selector)?;
    print!("{}", crate::flags::render_report(&extraction));
    println!();
    print!("{}", crate::flags::render_build_yaml(&extraction));
    Ok(exit::PASSED)
}
