//! The command line (DESIGN §2): clap types, one args struct per command, each executing itself.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::error::Error;

#[derive(Debug, Parser)]
#[command(
    name = "repro",
    version,
    about = "Standalone reproducers for CUDA GEMM kernels that compute wrong numbers",
    long_about = "Writes a self-contained CUDA harness from a YAML spec, builds it with the production \
nvcc flags, runs it against an fp64 reference and reports what is wrong.",
    after_help = "Exit codes: 0 passed, 1 mismatch, 2 usage/spec error, 3 build failed, 4 CUDA error or \
device fault, 5 hang, 6 sanitizer errors, 7 no CUDA device (the harness was built)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a spec and write its harness artifact (default generated/<name>/).
    Scaffold(ScaffoldArgs),
    /// Compile the harness with the spec's production flags (cached: no nvcc call when unchanged).
    Build(BuildArgs),
    /// Scaffold and build when stale, run the harness, print its report; exits with its code.
    Run(RunArgs),
    /// Run the probe suite (ones, K slices, row/column codes, identity, random) and name the defect.
    Probe(ProbeArgs),
    /// Run the harness over sizes (one build) and tabulate what --ones and random inputs show.
    Sweep(SweepArgs),
    /// From a failing spec, find smaller sizes that fail the same way; writes <spec>.shrunk.yaml.
    Shrink(ShrinkArgs),
    /// Time the kernel with device events (warm-up, median, spread); variants and sizes side by side.
    Bench(BenchArgs),
    /// Show the unified diff between an artifact on disk and what its spec generates now.
    Diff(DiffArgs),
    /// Read a real nvcc compile line and print the production flags for a harness build.
    Flags(FlagsArgs),
    /// Write a spec skeleton from a cudarc launch site (Rust) or a __global__ in a CUDA tree.
    Import(ImportArgs),
    /// Package a folder and a .tar.gz for a bug report: artifact, kernel headers, inputs, env, results.
    Bundle(BundleArgs),
    /// Show which nvcc, CUDA headers, CUTLASS headers, host compiler and GPU repro finds.
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct ScaffoldArgs {
    /// The spec file (YAML, DESIGN §3).
    pub spec: PathBuf,
    /// Where to write the artifact [default: generated/<name>/ beside the current directory].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Overwrite files edited by hand since they were generated.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args, Clone)]
pub struct ToolchainArgs {
    /// The nvcc to use [default: $NVCC, PATH, $CUDA_HOME, /usr/local/cuda, then the project's .toolchain].
    #[arg(long, value_name = "PATH", global = true, help_heading = "Toolchain")]
    pub nvcc: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// A spec file, or an artifact directory (holding spec.yaml and harness.cu).
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// All-ones operands (C and bias zero): every output must equal alpha*K exactly.
    #[arg(long, help_heading = "Inputs")]
    pub ones: bool,
    /// Override one tensor's init: T=ones|zeros|iota|identity|uniform[:LO:HI]|int_uniform[:LO:HI]|normal[:MEAN:STD]|file:PATH
    #[arg(long = "init", value_name = "T=PATTERN", help_heading = "Inputs")]
    pub inits: Vec<String>,
    /// Seed for every random tensor.
    #[arg(long, value_name = "N", help_heading = "Inputs")]
    pub seed: Option<u64>,
    /// Launch N times and compare the outputs bitwise [default: check.repeat].
    #[arg(long, value_name = "N", help_heading = "Checks")]
    pub repeat: Option<u32>,
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    #[arg(long, value_name = "S", help_heading = "Checks")]
    pub timeout: Option<f64>,
    /// Where the fp64 reference GEMM runs [default: reference.provider, else auto: by size].
    #[arg(long, value_name = "WHERE", value_parser = ["host", "device", "auto"], help_heading = "Checks")]
    pub reference: Option<String>,
    /// Compute the reference even when a run with the same operands left one in .repro/cache/.
    #[arg(long, help_heading = "Checks")]
    pub no_reference_cache: bool,
    /// Write the whole report as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Run under compute-sanitizer (a -lineinfo build of the production flags); exit 6 on findings.
    #[arg(long, value_name = "TOOL", help_heading = "Checks")]
    pub sanitize: Option<crate::run::sanitize::Tool>,
    /// Write inputs, outputs and the reference as .npy files into DIR.
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub dump: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Seed for the random probe's inputs.
    #[arg(long, value_name = "N", help_heading = "Inputs")]
    pub seed: Option<u64>,
    /// Launches per probe, compared bitwise (at least 2) [default: check.repeat].
    #[arg(long, value_name = "N", help_heading = "Checks")]
    pub repeat: Option<u32>,
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    #[arg(long, value_name = "S", help_heading = "Checks")]
    pub timeout: Option<f64>,
    /// Where the random probe's fp64 reference runs [default: reference.provider, else by size].
    #[arg(long, value_name = "WHERE", value_parser = ["host", "device", "auto"], help_heading = "Checks")]
    pub reference: Option<String>,
    /// Compute the reference even when a run with the same operands left one in .repro/cache/.
    #[arg(long, help_heading = "Checks")]
    pub no_reference_cache: bool,
    /// Write the probes and the verdict as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// More specs to time beside TARGET, one column each (e.g. thread-, warp- and block-per-row kernels).
    #[arg(
        long,
        value_name = "SPEC",
        value_delimiter = ',',
        help_heading = "Bench"
    )]
    pub variants: Vec<PathBuf>,
    /// Sizes to time, comma-separated, one row each [default: the spec's own sizes].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Bench"
    )]
    pub sizes: Vec<i64>,
    /// The spec sizes set to each value of --sizes, comma-separated [default: the output's extents].
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        help_heading = "Bench"
    )]
    pub dims: Vec<String>,
    /// Untimed launches first (clocks, caches, lazy module loading).
    #[arg(long, value_name = "N", default_value_t = 5, help_heading = "Bench")]
    pub warmup: u32,
    /// Timed launches; the median, min and max are over these.
    #[arg(long, value_name = "N", default_value_t = 20, help_heading = "Bench")]
    pub repeat: u32,
    /// Write over a buffer twice the L2's size before each timed launch: cold-cache times.
    #[arg(long, help_heading = "Bench")]
    pub flush_l2: bool,
    /// Time on all-ones operands instead of the spec's inputs.
    #[arg(long, help_heading = "Inputs")]
    pub ones: bool,
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    #[arg(long, value_name = "S", help_heading = "Checks")]
    pub timeout: Option<f64>,
    /// Write every measurement (each launch's time too) as JSON.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Sizes to run, comma-separated [default: 1,31,63,65,127,129 and the tiles' multiples ± 1].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        help_heading = "Sweep"
    )]
    pub sizes: Vec<i64>,
    /// The spec's sizes set to each value, comma-separated [default: the output's extents, e.g. M,N].
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        help_heading = "Sweep"
    )]
    pub dims: Vec<String>,
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    #[arg(long, value_name = "S", help_heading = "Checks")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    /// A failing spec file (the smaller spec is written next to it), or an artifact directory.
    pub target: PathBuf,
    /// Artifact directory when TARGET is a spec [default: generated/<name>/].
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Stop after this many harness runs.
    #[arg(long, value_name = "N", default_value_t = 200, help_heading = "Shrink")]
    pub max_runs: usize,
    /// Seconds one launch may take before it is declared hung [default: check.timeout].
    #[arg(long, value_name = "S", help_heading = "Checks")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// An artifact directory (holding spec.yaml), or a spec file (compared with its default artifact).
    pub target: PathBuf,
}

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

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub command: ImportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// From a cudarc launch site in a Rust file (parsed with syn).
    Rust {
        /// The Rust source file.
        file: PathBuf,
        /// The kernel to import, when the file launches several.
        #[arg(long, value_name = "NAME")]
        kernel: Option<String>,
        /// List the launch sites found and stop.
        #[arg(long)]
        list: bool,
        /// Also search the Rust files under DIR for where the kernels are loaded
        /// (`module.load_function("..")` where the struct or map holding them is built).
        #[arg(long, value_name = "DIR")]
        search: Option<PathBuf>,
        /// Write the skeleton here (never over an existing file) [default: standard output].
        #[arg(short, long, value_name = "SPEC")]
        output: Option<PathBuf>,
    },
    /// The `tensors:` section of a spec from a REPRO_CAPTURE_DIR written by repro::capture.
    Capture {
        /// The capture folder (holding manifest.jsonl and the .npy files).
        dir: PathBuf,
        /// Which call of each tensor (the first call is 0).
        #[arg(long, value_name = "N", default_value_t = 0)]
        call: u32,
        /// Write the section here (never over an existing file) [default: standard output].
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// From a __global__ (or __device__) function found under a source tree.
    Cuda {
        /// A source file or a folder to search (build and VCS folders are skipped).
        path: PathBuf,
        /// The kernel's name.
        #[arg(long, value_name = "NAME")]
        kernel: String,
        /// Write the skeleton here (never over an existing file) [default: standard output].
        #[arg(short, long, value_name = "SPEC")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// A spec file, or an artifact directory.
    pub target: PathBuf,
    /// The bundle folder; PATH.tar.gz is written beside it [default: bundles/<name>].
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Do not run the harness (no results.txt): for a machine without the GPU.
    #[arg(long)]
    pub no_run: bool,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl Command {
    pub fn exec(self) -> Result<u8, Error> {
        match self {
            Command::Scaffold(args) => args.exec(),
            Command::Build(args) => args.exec(),
            Command::Run(args) => args.exec(),
            Command::Probe(args) => args.exec(),
            Command::Sweep(args) => args.exec(),
            Command::Shrink(args) => args.exec(),
            Command::Bench(args) => args.exec(),
            Command::Diff(args) => args.exec(),
            Command::Flags(args) => args.exec(),
            Command::Bundle(args) => args.exec(),
            Command::Import(args) => args.exec(),
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
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                crate::error::exit::USAGE
            } else {
                0
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command.exec() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.exit_code())
        }
    }
}
