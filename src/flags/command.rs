//! `repro flags`: the production flags of a real compile line, shown as a kept/dropped table and
//! as a `build:` block to paste into a spec.

use crate::cli::FlagsArgs;
use crate::error::{exit, Error};

impl FlagsArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let mut hints = Vec::new();
        if let Some(spec_path) = &self.spec {
            let spec = crate::spec::load(spec_path)?;
            hints.extend(spec.spec.source.includes.iter().cloned());
            hints.push(spec.name().to_string());
        }
        let selector = super::Selector {
            match_pattern: self.match_pattern.clone(),
            hints,
        };
        let input = match (&self.from_log, &self.line) {
            (Some(path), _) => super::read_input(path),
            (None, Some(line)) => super::from_command_line(line),
            (None, None) => unreachable!("clap requires one of --from-log and --line"),
        }
        .map_err(|e| Error::Usage(e.to_string()))?;
        let extraction =
            super::extract(&input, &selector).map_err(|e| Error::Usage(e.to_string()))?;
        print!("{}", super::render_report(&extraction));
        println!();
        print!("{}", super::render_build_yaml(&extraction));
        Ok(exit::PASSED)
    }
}
