//! `repro capture --kernel REGEX [--launch N] [--launches N] [--through REGEX] [-o DIR] [--source DIR] -- PROGRAM ARGS...`.

use std::path::PathBuf;

use clap::Args;

use crate::capture::{write::SpecRequest, CaptureRequest};
use crate::error::Error;

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Pattern (ECMAScript regex) searched in each launched kernel's demangled name.
    #[arg(long, value_name = "REGEX")]
    pub kernel: String,
    /// Record the N-th launch of the kernels that match, counting from 1.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub launch: u64,
    /// Record a window of N consecutive launches from that one, whatever kernel they run (an
    /// operator's kernels), as a spec of `launches:` (at most 64). With --through: the most the
    /// window may hold.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub launches: Option<u64>,
    /// Record a window from that launch up to and including the first later launch whose
    /// demangled name matches REGEX (at most 64 launches, or --launches).
    #[arg(long, value_name = "REGEX")]
    pub through: Option<String>,
    /// The folder to write (must not exist, or be empty): the spec capture.yaml, its inputs,
    /// production's output, and the artifact `repro run DIR` runs.
    #[arg(short = 'o', long, value_name = "DIR", default_value = "capture")]
    pub output: PathBuf,
    /// The kernel's source tree: rebuild the launch from it (kind: global) instead of replaying
    /// the captured machine code (kind: replay).
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// Replay the captured machine code even when --source could rebuild the launch.
    #[arg(long)]
    pub replay: bool,
    /// The spec's reference instead of production's output, as YAML:
    /// '{op: gemm, a: A, b: B, out: D}' (the operands are then laid out as a GEMM's).
    #[arg(long, value_name = "YAML")]
    pub reference: Option<String>,
    /// A tensor carved out of the allocation a pointer parameter points into, as
    /// NAME=[DTYPE][DIM, ...][:col_major | :strides[S, ...]]: `a_ptr=[M, K]`,
    /// `w=bf16[K, N]:col_major`. Dimensions are numbers or integer parameters' names (their
    /// captured values); the dtype defaults to the parameter's. Needs parameter names:
    /// --source, or a Triton kernel; NAME@BYTE=DTYPE[...] names the pointer at byte BYTE of the
    /// parameters instead (a parameter struct's field). Repeatable.
    #[arg(long = "tensor", value_name = "VIEW")]
    pub tensors: Vec<String>,
    /// The spec's name [default: the kernel's, with _capture].
    #[arg(long)]
    pub name: Option<String>,
    /// The most bytes of device memory to copy before the launch, or over a window's launches
    /// (twice that on disk at most).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 30)]
    pub max_bytes: u64,
    /// Only launches on this CUDA device count [default: any].
    #[arg(long, value_name = "ORDINAL")]
    pub device: Option<u32>,
    /// Stop the program once the launch is recorded.
    #[arg(long)]
    pub stop: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}

impl CaptureArgs {
    pub fn exec(self) -> Result<u8, Error> {
        let reference = match &self.reference {
            None => None,
            Some(text) => Some(
                crate::spec::yaml::reference_from_text(text)
                    .map_err(|e| Error::CaptureRun(format!("--reference {text}: {e}")))?,
            ),
        };
        let views = self
            .tensors
            .iter()
            .map(|text| crate::capture::views::parse(text))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Error::CaptureRun)?;
        let window = crate::capture::WindowRequest::from_flags(self.launches, self.through)
            .map_err(Error::CaptureRun)?;
        let command = self
            .program
            .iter()
            .map(|a| repro_text::quote::shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(crate::capture::capture(CaptureRequest {
            kernel: self.kernel,
            launch: self.launch,
            output: self.output,
            max_bytes: self.max_bytes,
            device: self.device,
            stop: self.stop,
            source: self.source,
            window,
            spec: SpecRequest {
                name: self.name,
                replay: self.replay,
                reference,
                command,
                source: None,
                views,
                triton: None,
            },
            program: self.program,
        })?)
    }
}
