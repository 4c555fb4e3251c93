//! Reading a harness's JSON report after the run: pictures of where the errors are. The
//! verdicts themselves are named inside the harness (crates/repro-contract/runtime/src/report/report.cuh and
//! probe.cuh), so that a harness on a machine without repro still says them.

pub mod heatmap;
