//! The command line (docs/cli.md): one file per command, holding its clap arguments and its
//! `exec`, which turns them into the plain values the core takes. This folder is the only code
//! that knows about clap; what the commands share is in [`options`].

pub mod bench;
pub mod bisect;
pub mod build;
pub mod bundle;
pub mod campaign;
pub mod capture;
pub mod diff;
pub mod doctor;
pub mod flags;
pub mod flags_table;
pub mod import;
pub mod import_write;
pub mod options;
pub mod probe;
pub mod run;
pub mod scaffold;
pub mod shrink;
pub mod sweep;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{exit, Error};

#[derive(Debug, Parser)]
#[command(
    name = "repro",
    version,
    about = "Standalone reproducers for CUDA GEMM kernels that compute wrong numbers",
    long_about = "Writes a self-contained CUDA harness from a YAML spec, builds it with the production \
nvcc flags, runs it against an fp64 reference and reports what is wrong.",
    after_help = "Exit codes: 0 passed, 1 mismatch, 2 usage/spec error, 3 build failed, 4 CUDA error or \
device fault, 5 hang, 6 sanitizer errors, 7 no CUDA device (the harness was built), 70 a bug in repro."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a spec and write its harness artifact (default generated/<name>/).
    Scaffold(scaffold::ScaffoldArgs),
    /// Compile the harness with the spec's production flags (cached: no nvcc call when unchanged).
    Build(build::BuildArgs),
    /// Scaffold and build when stale, run the harness, print its report; exits with its code.
    Run(run::RunArgs),
    /// Run the probe suite (ones, K slices, row/column codes, identity, random) and name the defect.
    Probe(probe::ProbeArgs),
    /// Run the harness over sizes (one build) and tabulate what --ones and random inputs show.
    Sweep(sweep::SweepArgs),
    /// Check specs over many shapes, modes and build variants, on every GPU here or on Slurm.
    Campaign(campaign::CampaignArgs),
    /// From a failing spec, find smaller sizes that fail the same way; writes <spec>.shrunk.yaml.
    Shrink(shrink::ShrinkArgs),
    /// Time the kernel with device events (warm-up, median, spread); variants and sizes side by side.
    Bench(bench::BenchArgs),
    /// Show the unified diff between an artifact on disk and what its spec generates now.
    Diff(diff::DiffArgs),
    /// Read a real nvcc compile line and print the production flags for a harness build.
    Flags(flags::FlagsArgs),
    /// Write a spec skeleton from a cudarc launch site (Rust) or a __global__ in a CUDA tree.
    Import(import::ImportArgs),
    /// Run a program unmodified and record one launch of a kernel: a spec, its inputs, production's output.
    Capture(capture::CaptureArgs),
    /// Find the first commit of a kernel library at which the spec fails as it does at --bad.
    Bisect(bisect::BisectArgs),
    /// Package a folder and a .tar.gz for a bug report: artifact, kernel headers, inputs, env, results.
    Bundle(bundle::BundleArgs),
    /// Show which nvcc, CUDA headers, CUTLASS headers, host compiler and GPU repro finds.
    Doctor(doctor::DoctorArgs),
}

impl Command {
    /// Runs the command; the exit code it returns is the process's.
    pub fn exec(self) -> Result<u8, Error> {
        match self {
            Command::Scaffold(args) => args.exec(),
            Command::Build(args) => args.exec(),
            Command::Run(args) => args.exec(),
            Command::Probe(args) => args.exec(),
            Command::Sweep(args) => args.exec(),
            Command::Campaign(args) => args.exec(),
            Command::Shrink(args) => args.exec(),
            Command::Bisect(args) => args.exec(),
            Command::Bench(args) => args.exec(),
            Command::Diff(args) => args.exec(),
            Command::Flags(args) => args.exec(),
            Command::Import(args) => args.exec(),
            Command::Capture(args) => args.exec(),
            Command::Bundle(args) => args.exec(),
            Command::Doctor(args) => args.exec(),
        }
    }
}

/// `repro doctor | head` must end quietly when `head` stops reading, as any Unix tool does.
/// Rust ignores SIGPIPE, which turns that into a "failed printing to stdout" panic instead.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Parses the command line, runs the command, and turns its outcome into the process exit code.
pub fn main() -> ExitCode {
    // Started as `ptxas` by the async-race checker's nvcc (crates/repro-async-race/src/toolkit.rs).
    if crate::async_race::toolkit::is_ptxas_wrapper() {
        return crate::async_race::toolkit::ptxas_main();
    }
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are answers, not errors.
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command.exec() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}", e.render());
            ExitCode::from(e.exit_code())
        }
    }
}
