//! `expect:` as written: what a run of the spec should give, per input mode, and the verdict
//! classes a failing run is named by.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Hang,
    Fault,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Hang => "hang",
            Outcome::Fault => "fault",
        }
    }
}

/// Verdict classes (docs/cli.md, "Verdict classes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Scale,
    KCoverage,
    RowMapping,
    ColMapping,
    Layout,
    /// An operand (A or B) read from the wrong place: most K slices read zeros or foreign data,
    /// and the identity probe fails in column blocks (B) or row blocks (A). Named by the probe
    /// suite only: it takes the K slice probes to tell from a K loop's defect.
    OperandLayout,
    Boundary,
    Unwritten,
    Nonfinite,
    Nondeterministic,
    /// An operator right on its first call and wrong on every later one of a check: what it
    /// keeps between calls (`lifetime: persist`) is not left as it found it.
    StateAcrossCalls,
    Scattered,
    Precision,
    Fault,
    Hang,
    ScaleMapping,
    GroupMapping,
    Mask,
    HeadMapping,
    SoftmaxScale,
    Lse,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Scale => "scale",
            Verdict::KCoverage => "k_coverage",
            Verdict::RowMapping => "row_mapping",
            Verdict::ColMapping => "col_mapping",
            Verdict::Layout => "layout",
            Verdict::OperandLayout => "operand_layout",
            Verdict::Boundary => "boundary",
            Verdict::Unwritten => "unwritten",
            Verdict::Nonfinite => "nonfinite",
            Verdict::Nondeterministic => "nondeterministic",
            Verdict::StateAcrossCalls => "state_across_calls",
            Verdict::Scattered => "scattered",
            Verdict::Precision => "precision",
            Verdict::Fault => "fault",
            Verdict::Hang => "hang",
            Verdict::ScaleMapping => "scale_mapping",
            Verdict::GroupMapping => "group_mapping",
            Verdict::Mask => "mask",
            Verdict::HeadMapping => "head_mapping",
            Verdict::SoftmaxScale => "softmax_scale",
            Verdict::Lse => "lse",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ones: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}
