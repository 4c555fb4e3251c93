//! `check:` as written: tolerances, repeats, the watchdog's timeout, and the stressor run beside
//! the kernel (`StressMode`, also `--stress`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_l2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Every second launch beside a stressor kernel, so that races with a short window show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress: Option<StressMode>,
    /// With `stress`: the stressor's SMs (default: those the kernel's grid leaves free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress_sms: Option<u32>,
}

/// `check.stress` and `--stress` (docs/spec.md, `check`).
///
/// `--stress` offers these by [`StressMode::ALL`], [`name`](StressMode::name) and
/// [`help`](StressMode::help) (src/commands/options.rs): the contract does not depend on clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StressMode {
    /// No stressor.
    None,
    /// Copies streamed through a buffer four times the L2 on a second stream: DRAM congestion.
    Bandwidth,
    /// The L2 overwritten before the launch and thrashed by random lines during it.
    L2,
    /// Random sleeps at the kernel's repro::delay points (repro_trace.cuh): no stressor kernel.
    Jitter,
}

impl StressMode {
    pub const ALL: [StressMode; 4] = [
        StressMode::None,
        StressMode::Bandwidth,
        StressMode::L2,
        StressMode::Jitter,
    ];

    /// One line for `--stress`'s list of values.
    pub fn help(self) -> &'static str {
        match self {
            StressMode::None => "No stressor",
            StressMode::Bandwidth => {
                "Copies streamed through a buffer four times the L2 on a second stream: DRAM \
                 congestion"
            }
            StressMode::L2 => {
                "The L2 overwritten before the launch and thrashed by random lines during it"
            }
            StressMode::Jitter => {
                "Random sleeps at the kernel's repro::delay points (repro_trace.cuh): no stressor \
                 kernel"
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StressMode::None => "none",
            StressMode::Bandwidth => "bandwidth",
            StressMode::L2 => "l2",
            StressMode::Jitter => "jitter",
        }
    }
}
