//! `trace:`: the stages a kernel records with repro_trace.cuh (operands, accumulator, output),
//! named and numbered as the kernel numbers them, for GEMM references only: the runtime reads
//! each stage against the value it knows a GEMM's stage holds.

use super::model::TraceRole;
use super::validate::Validator;

impl Validator<'_> {
    /// `trace:`: at most 16 stages (repro_trace::kMaxStages), indexes unique, names given.
    pub(super) fn trace(&mut self) -> Vec<(u32, String, TraceRole)> {
        let mut out: Vec<(u32, String, TraceRole)> = Vec::new();
        if !self.spec.trace.is_empty()
            && matches!(
                self.spec.reference.op.as_str(),
                "custom" | "file" | "attention" | "attention_backward"
            )
        {
            self.key_error(
                "trace",
                format!(
                    "`trace:` reads a GEMM's stages (operands, accumulator, output) against their known values; `op: {}` has none",
                    self.spec.reference.op
                ),
            )
            .help = Some("remove `trace:`; a custom op's errors are localized by index (`reference.block`) and its probes".into());
        }
        for (i, s) in self.spec.trace.iter().enumerate() {
            let path = format!("trace[{i}]");
            let index = s.stage.unwrap_or(i as u32);
            if index >= 16 {
                self.error(
                    &format!("{path}.stage"),
                    format!("stage {index}: repro_trace.cuh records stages 0 to 15"),
                );
                continue;
            }
            if s.name.trim().is_empty() {
                self.error(
                    &format!("{path}.name"),
                    "a traced stage needs a name (it is how the report names it)",
                );
                continue;
            }
            if let Some((_, other, _)) = out.iter().find(|(j, _, _)| *j == index) {
                self.error(
                    &format!("{path}.stage"),
                    format!("stage {index} is also `{other}`"),
                )
                .help = Some("give each stage its own index, as the kernel records it".into());
                continue;
            }
            out.push((index, s.name.clone(), s.role));
        }
        out
    }
}
