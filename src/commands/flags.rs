//! `repro flags --from-log FILE | --line COMMAND [--match PATTERN] [--spec SPEC]`.

use std::path::PathBuf;

use clap::Args;

use super::flags_table::Source;
use crate::error::Error;

#[derive(Debug, Args)]
pub struct FlagsArgs {
    /// A build log (ninja, make, CMake, JIT), a compile_commands.json, or a file holding one nvcc
    /// command line.
    #[arg(
        long = "from-log",
        value_name = "FILE",
        required_unless_present = "line",
        conflicts_with = "line"
    )]
    pub from_log: Option<PathBuf>,
    /// The nvcc command line itself (quote it).
    #[arg(long, value_name = "COMMAND")]
    pub line: Option<String>,
    /// Pick the nvcc invocation whose line contains PATTERN.
    #[arg(long = "match", value_name = "PATTERN")]
    pub match_pattern: Option<String>,
    /// Prefer the invocation that compiles this spec's kernel (its includes and name).
    #[arg(long, value_name = "SPEC")]
    pub spec: Option<PathBuf>,
}

impl FlagsArgs {
    pub fn exec(self) -> Result<u8, Error> {
        // clap requires exactly one of the two.
        let source = match (self.from_log, self.line) {
            (Some(path), _) => Source::Log(path),
            (None, Some(line)) => Source::Line(line),
            (None, None) => unreachable!("clap requires one of --from-log and --line"),
        };
        super::flags_table::flags(
            &source,
            self.match_pattern.as_deref(),
            self.spec.as_deref(),
            &crate::machine::Machine,
        )
    }
}
