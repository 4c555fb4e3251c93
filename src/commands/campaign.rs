//! `repro campaign FILE [--devices all|LIST] [--slurm ...]`, `repro campaign --collect DIR`.

use std::path::PathBuf;

use clap::Args;

use super::options::ToolchainArgs;
use crate::campaign::{self, slurm, CampaignOptions, Target};
use crate::error::Error;

#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The campaign file (docs/campaign.md): specs, shapes, modes, build variants.
    #[arg(required_unless_present_any = ["collect", "run_shard"])]
    pub file: Option<PathBuf>,
    /// The results folder [default: campaigns/<name>/]; a campaign resumes from what it holds.
    #[arg(short, long, value_name = "DIR", help_heading = "Output")]
    pub output: Option<PathBuf>,
    /// Merge the records of a Slurm campaign's tasks into DIR/results.jsonl and summarize them.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "slurm", "run_shard"], help_heading = "Output")]
    pub collect: Option<PathBuf>,
    /// GPUs to run on: `all`, or indices or UUIDs as nvidia-smi lists them, comma-separated.
    #[arg(
        long,
        value_name = "all|LIST",
        default_value = "all",
        help_heading = "Local"
    )]
    pub devices: String,
    /// Workers per GPU, each running one harness at a time.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Local")]
    pub workers_per_device: u32,
    /// Run on GPUs another repro campaign holds (its timings, and this one's, then mean less).
    #[arg(long, help_heading = "Local")]
    pub share_devices: bool,
    /// Builds at a time [default: the host's cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Build")]
    pub build_jobs: Option<u32>,
    /// Submit the runs as a Slurm job array (builds are made here first) instead of running them.
    #[arg(long, help_heading = "Slurm")]
    pub slurm: bool,
    /// Array tasks, each running its share of the runs [default: one per 25 runs, at most 64].
    #[arg(long, value_name = "N", requires = "slurm", value_parser = clap::value_parser!(u32).range(1..=100000), help_heading = "Slurm")]
    pub shards: Option<u32>,
    /// Each task's `--gres`; `none` asks for no generic resource.
    #[arg(
        long,
        value_name = "GRES",
        default_value = "gpu:1",
        help_heading = "Slurm"
    )]
    pub gres: String,
    /// An sbatch option passed as it is (repeat for more): `--slurm-arg=--partition=h100`.
    #[arg(
        long,
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "slurm",
        help_heading = "Slurm"
    )]
    pub slurm_arg: Vec<String>,
    /// The sbatch program.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "sbatch",
        help_heading = "Slurm"
    )]
    pub sbatch: PathBuf,
    /// Run one shard of a submitted plan (what each array task runs).
    #[arg(long, value_name = "PLAN", requires = "shard", hide = true)]
    pub run_shard: Option<PathBuf>,
    #[arg(long, value_name = "N", hide = true)]
    pub shard: Option<usize>,
    #[command(flatten)]
    pub toolchain: ToolchainArgs,
}

impl CampaignArgs {
    pub fn exec(self) -> Result<u8, Error> {
        if let (Some(plan), Some(shard)) = (&self.run_shard, self.shard) {
            return Ok(slurm::run_shard(plan, shard)?);
        }
        if let Some(dir) = &self.collect {
            return Ok(campaign::collect(dir)?);
        }
        let target = if self.slurm {
            Target::Slurm(slurm::Submit {
                shards: self.shards.map(|n| n as usize),
                gres: Some(self.gres.clone()).filter(|g| g != "none"),
                extra: self.slurm_arg.clone(),
                sbatch: self.sbatch.clone(),
            })
        } else {
            Target::Local {
                devices: self.devices.clone(),
                per_device: self.workers_per_device as usize,
                share_devices: self.share_devices,
            }
        };
        Ok(campaign::campaign(&CampaignOptions {
            file: self.file.clone().expect("clap requires FILE here"),
            output: self.output.clone(),
            target,
            build_jobs: self.build_jobs.map(|n| n as usize),
            nvcc: self.toolchain.nvcc().map(PathBuf::from),
        })?)
    }
}
