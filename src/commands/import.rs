//! `repro import rust FILE | cuda PATH | capture DIR`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::import_write as command;
use crate::error::Error;

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
        /// A tensor the kernel writes, captured after the launch: it becomes an output and its
        /// capture the expected values of a `reference: { op: file }` (once per output).
        #[arg(long = "expected", value_name = "NAME")]
        expected: Vec<String>,
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

impl ImportArgs {
    pub fn exec(self) -> Result<u8, Error> {
        match self.command {
            ImportCommand::Rust {
                file,
                kernel,
                list,
                search,
                output,
            } => command::rust(
                &file,
                kernel.as_deref(),
                list,
                search.as_deref(),
                output.as_deref(),
            ),
            ImportCommand::Capture {
                dir,
                call,
                expected,
                output,
            } => command::capture_with_outputs(&dir, call, &expected, output.as_deref()),
            ImportCommand::Cuda {
                path,
                kernel,
                output,
            } => command::cuda(&path, &kernel, output.as_deref()),
        }
    }
}
