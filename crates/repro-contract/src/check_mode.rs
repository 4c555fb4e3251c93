//! What one check of a spec runs: all-ones inputs, the spec's own random inputs, the probe
//! suite, or one launch under compute-sanitizer (docs/cli.md, `repro campaign` and
//! `repro bisect`). One enum for the campaign file's `modes:`, its results' `mode` and
//! `repro bisect --mode`; the harness options each selects come from [`crate::harness_options`].

use serde::{Deserialize, Serialize};

use crate::harness_options::{self as opt, HarnessOption};

/// A way of running one check of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `--ones`: every GEMM output must equal K.
    Ones,
    /// The spec's own (random) inputs.
    Random,
    /// The probe suite: the class is its verdict (row_mapping, k_coverage...).
    Probe,
    /// The spec's own inputs, one launch under compute-sanitizer's memcheck.
    Sanitize,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Ones, Mode::Random, Mode::Probe, Mode::Sanitize];

    /// How the campaign file, results and `--mode` spell it (serde's snake_case).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Ones => "ones",
            Mode::Random => "random",
            Mode::Probe => "probe",
            Mode::Sanitize => "sanitize",
        }
    }

    /// The harness's own option that selects the mode; None where the harness runs as the spec
    /// says (random; sanitize, whose tool wraps the harness from outside).
    pub fn harness_flag(self) -> Option<HarnessOption> {
        match self {
            Mode::Ones => Some(opt::ONES),
            Mode::Probe => Some(opt::PROBE),
            Mode::Random | Mode::Sanitize => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_serdes_spelling() {
        for mode in Mode::ALL {
            let written = serde_yaml::to_string(&mode).unwrap();
            assert_eq!(written.trim(), mode.name());
            let read: Mode = serde_yaml::from_str(mode.name()).unwrap();
            assert_eq!(read, mode);
        }
        assert_eq!(
            Mode::Ones.harness_flag().map(|o| o.flag()).as_deref(),
            Some("--ones")
        );
        assert_eq!(Mode::Random.harness_flag(), None);
    }
}
