//! What can stop `repro campaign` as a whole, each with the fix (docs/campaign.md). What goes
//! wrong in one run or one build does not stop a campaign: it is recorded as that run's result.

use std::path::PathBuf;

use repro_contract::exit;
use repro_contract::spec::LoadError;
use repro_engine::engine_error::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// A failure of the engine, or of the spec it reads, as it is: the same message and the same
    /// exit code as when the command met it itself.
    #[error(transparent)]
    Engine(#[from] EngineError),

    #[error("{}: {why}\nhelp: {help}", path.display())]
    ShapesFile {
        path: PathBuf,
        why: String,
        help: String,
    },

    /// A file of a results folder (or a lock) that is not what repro writes there: a link, a
    /// fifo, a file too large, a record with a name no campaign makes. `place` is the path, with
    /// the line or field when there is one.
    #[error("{place}: {why}\nhelp: {help}")]
    Unsafe {
        place: String,
        why: String,
        help: String,
    },

    #[error("{}: another repro campaign (pid {holder}) is writing results here\nhelp: wait for it to end, or give this one another --output folder", dir.display())]
    ResultsBusy { dir: PathBuf, holder: String },

    #[error("GPU {device} is held by another repro campaign ({holder})\nhelp: give this campaign other GPUs with --devices, wait for that one, or pass --share-devices when sharing is meant (its timings then mean less)")]
    DeviceBusy { device: String, holder: String },

    #[error("--devices {given}: {why}\nhelp: `all`, or GPU indices as nvidia-smi numbers them (0,1,...), or UUIDs (GPU-...)")]
    Devices { given: String, why: String },

    #[error("{}: holds the results of campaign `{other}`, not of `{name}`\nhelp: give this campaign its own folder with --output (a folder holds one campaign's runs)", dir.display())]
    OtherCampaign {
        dir: PathBuf,
        other: String,
        name: String,
    },

    #[error("{}: not a campaign results folder ({why})\nhelp: point --collect at the --output folder of a `repro campaign --slurm` (it holds campaign.json)", dir.display())]
    NotResults { dir: PathBuf, why: String },

    #[error("{}: {why}\nhelp: the shard plan is written by `repro campaign --slurm`; submit again from the campaign file", path.display())]
    ShardPlan { path: PathBuf, why: String },

    #[error("sbatch could not submit the job array: {why}\nhelp: {help}")]
    Submit { why: String, help: String },

    #[error("the campaign has {runs} runs, more than the {limit} one campaign may hold\nhelp: split it into several campaign files, or list the shapes that matter instead of every combination")]
    TooManyRuns { runs: u128, limit: usize },

    #[error("no usable CUDA device: the builds are done; run the same command on a machine with a GPU (the results recorded so far are kept, and the campaign resumes there)")]
    NoDevice,
}

impl From<LoadError> for CampaignError {
    fn from(error: LoadError) -> Self {
        CampaignError::Engine(error.into())
    }
}

impl CampaignError {
    /// The engine's file error (`cannot ACTION PATH`), as this feature's.
    pub fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> CampaignError {
        let io = EngineError::io(action, path);
        move |source| CampaignError::Engine(io(source))
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            CampaignError::Engine(e) => e.exit_code(),
            CampaignError::NoDevice => exit::NO_DEVICE,
            _ => exit::USAGE,
        }
    }
}
