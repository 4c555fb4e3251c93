//! `repro bisect SPEC --repo DIR --good REV --bad REV`.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use super::options::{TimeoutArgs, ToolchainArgs};
use crate::bisect::{BisectOptions, Mode};
use crate::error::Error;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The spec of the kernel that fails at --bad (its include directories inside --repo are read from each commit).
    pub spec: PathBuf,
    /// Artifact directory of the spec, where bisect keeps its builds and answer [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// The kernel library's git checkout (never changed: commits are exported from its object store).
    #[arg(long, value_name = "DIR", help_heading = "History")]
    pub repo: PathBuf,
    /// A commit where the spec passes.
    #[arg(long, value_name = "REV", help_heading = "History")]
    pub good: String,
    /// A later commit where it fails.
    #[arg(long, value_name = "REV", help_heading = "History")]
    pub bad: String,
    /// Follow only the first parent of merges (the merge that brought a change in is the answer).
    #[arg(long, help_heading = "History")]
    pub first_parent: bool,
    /// Only commits touching these paths, relative to the repository [default: the include directories in it].
    #[arg(
        long,
        value_name = "PATH",
        value_delimiter = ',',
        help_heading = "History"
    )]
    pub paths: Vec<String>,
    /// What each commit's harness runs: all-ones inputs, the spec's random inputs, or the probe suite.
    #[arg(long, value_enum, default_value_t = ModeArg(Mode::Ones), help_heading = "Judging")]
    pub mode: ModeArg,
    /// The failure class that makes a commit bad [default: the class at --bad].
    #[arg(long, value_name = "CLASS", help_heading = "Judging")]
    pub class: Option<String>,
    /// Builds at once: the current candidate and the ones the search may need next.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 1, help_heading = "Judging",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Also write the answer as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub timeout: TimeoutArgs,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

/// `--mode`'s value: a [`Mode`] of the contract's, offered to clap by its own name. Sanitize is
/// not offered: a commit is judged by the class of one plain harness run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeArg(pub Mode);

impl ValueEnum for ModeArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            ModeArg(Mode::Ones),
            ModeArg(Mode::Random),
            ModeArg(Mode::Probe),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

impl BisectArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let options = BisectOptions {
            repo: self.repo,
            good: self.good,
            bad: self.bad,
            mode: self.mode.0,
            class: self.class,
            jobs: usize::from(self.jobs),
            first_parent: self.first_parent,
            paths: self.paths,
            timeout: self.timeout.timeout,
            nvcc: self.toolchain.nvcc,
            json: self.json,
            output: self.output,
        };
        Ok(crate::bisect::bisect(&self.spec, &options)?)
    }
}
