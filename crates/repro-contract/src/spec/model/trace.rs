//! `trace:` as written: the stages an instrumented kernel records with repro_trace.cuh, and
//! what each holds.

use serde::{Deserialize, Serialize};

/// One `trace:` entry: a stage the kernel records (repro_trace::Stage), and what it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceStageSpec {
    pub name: String,
    pub role: TraceRole,
    /// The index the kernel records the stage under [default: its position in the list].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
}

/// What a traced stage holds, which fixes its right absmax under --ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceRole {
    /// An operand as the MMA consumes it: 1.
    Operand,
    /// The accumulator after the K loop: K.
    Accumulator,
    /// The output value before the store: alpha * K.
    Output,
}

impl TraceRole {
    pub fn name(self) -> &'static str {
        match self {
            TraceRole::Operand => "operand",
            TraceRole::Accumulator => "accumulator",
            TraceRole::Output => "output",
        }
    }
}
