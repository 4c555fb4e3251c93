//! `reference:` for GEMMs: which op a spec names (the dispatch to every op's checks), the
//! operands `op: gemm` and `op: grouped_gemm` need, and `op: gemm` itself: the tensors of
//! D = alpha * A @ B + beta * C + bias with a shape check that names the numbers, an optional
//! leading batch dimension, and the output tile the report localizes by. Block scales and
//! grouped layouts are in scaled_grouped.rs, attention in attention.rs, custom and file
//! references in custom.rs.

use super::dtype::DType;
use super::resolved::{Reference, ReferenceGemm, TensorSpecResolved};
use super::scaled_grouped::{shape_list, ScaledOperand};
use super::validate::Validator;
use repro_text::did_you_mean;

impl Validator<'_> {
    /// `reference.tile`: (tile_m, tile_n, tile_k), the whole [m, n] output and no K tile when
    /// the spec gives none.
    pub(super) fn tile(&mut self, m: i64, n: i64) -> (i64, i64, Option<i64>) {
        match self.spec.reference.tile.as_deref() {
            None => (m, n, None),
            Some([tm, tn]) if *tm > 0 && *tn > 0 => (*tm, *tn, None),
            Some([tm, tn, tk]) if *tm > 0 && *tn > 0 && *tk > 0 => (*tm, *tn, Some(*tk)),
            Some(_) => {
                self.error(
                    "reference.tile",
                    "tile is [tile_m, tile_n] (optionally [tile_m, tile_n, tile_k]), positive",
                );
                (m, n, None)
            }
        }
    }

    pub(super) fn reference(&mut self, tensors: &[TensorSpecResolved]) -> Option<Reference> {
        let op = self.spec.reference.op.clone();
        if op != "attention" && op != "attention_backward" {
            self.refuse_attention_fields(&op);
        }
        match self.spec.reference.op.as_str() {
            "custom" => return self.custom_reference(tensors).map(Reference::Custom),
            "attention" | "attention_backward" => {
                return self.attention_reference(tensors).map(Reference::Attention)
            }
            "file" => return self.file_reference(tensors).map(Reference::File),
            "grouped_gemm" => {
                self.gemm_operands_given("grouped_gemm")?;
                return self.grouped_reference(tensors).map(Reference::Gemm);
            }
            "gemm" => self.gemm_operands_given("gemm")?,
            _ => {}
        }
        self.gemm_reference(tensors).map(Reference::Gemm)
    }

    /// `op: gemm` and `op: grouped_gemm` name their operands; none of the custom ops' fields.
    fn gemm_operands_given(&mut self, op: &str) -> Option<()> {
        let r = &self.spec.reference;
        for (field, given) in [
            ("source", r.source.is_some()),
            ("function", r.function.is_some()),
            ("expected", r.expected.is_some()),
            ("block", r.block.is_some()),
            ("upstream", r.upstream.is_some()),
        ] {
            if given {
                let owner = if field == "expected" {
                    "file"
                } else {
                    "custom"
                };
                self.key_error(
                    &format!("reference.{field}"),
                    format!("`{field}` belongs to `op: {owner}`, not `op: {op}`"),
                )
                .help = Some(if field == "block" {
                    "a GEMM's outputs are localized by `tile: [tile_m, tile_n]`".into()
                } else {
                    format!("a GEMM's reference is the runtime's own; `op: {owner}` takes a reference of yours")
                });
            }
        }
        let missing: Vec<&str> = [("a", &r.a), ("b", &r.b), ("out", &r.out)]
            .into_iter()
            .filter(|(_, name)| name.is_empty())
            .map(|(field, _)| field)
            .collect();
        if missing.is_empty() {
            return Some(());
        }
        let fields = missing.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>();
        self.key_error(
            "reference",
            format!("`op: {op}` needs {}", fields.join(" and ")),
        )
        .help = Some(
            "name the GEMM's tensors: `a:` (A [M, K]), `b:` (B [K, N]) and `out:` (D [M, N]); \
             attention takes `op: attention` (q, k, v, out); another kernel `op: custom` (a \
             reference function of yours) or `op: file` (expected outputs as .npy)"
                .into(),
        );
        None
    }

    fn gemm_reference(&mut self, tensors: &[TensorSpecResolved]) -> Option<ReferenceGemm> {
        let r = &self.spec.reference;
        match r.op.as_str() {
            "gemm" => {
                for (field, given) in [
                    ("layout", r.layout.is_some()),
                    ("group_index", r.group_index.is_some()),
                    ("masked_m", r.masked_m.is_some()),
                    ("k_sizes", r.k_sizes.is_some()),
                ] {
                    if given {
                        self.key_error(
                            &format!("reference.{field}"),
                            format!("`{field}` belongs to `op: grouped_gemm`, not `op: gemm`"),
                        );
                    }
                }
            }
            op => {
                let d = self.error(
                    "reference.op",
                    format!("reference op `{op}` is not supported"),
                );
                d.help = Some(
                    "supported: gemm (D = alpha * A @ B + beta * C + bias, optionally with \
                     scale_a/scale_b block scales), grouped_gemm (layout: contiguous, masked \
                     or k_grouped), attention and attention_backward (q, k, v, out; the backward \
                     with o, lse, do, dq, dk, dv), custom (a host C++ reference function of \
                     yours) and file (expected outputs as .npy)"
                        .into(),
                );
                if let Some(close) = did_you_mean(
                    op,
                    [
                        "gemm",
                        "grouped_gemm",
                        "custom",
                        "file",
                        "attention",
                        "attention_backward",
                    ],
                ) {
                    d.help = Some(format!("did you mean `{close}`?"));
                }
                return None;
            }
        }
        let a = self.tensor_index(tensors, "reference.a", &r.a);
        let b = self.tensor_index(tensors, "reference.b", &r.b);
        let out = self.tensor_index(tensors, "reference.out", &r.out);
        let c =
            r.c.as_ref()
                .map(|c| self.tensor_index(tensors, "reference.c", c));
        let bias = r
            .bias
            .as_ref()
            .map(|x| self.tensor_index(tensors, "reference.bias", x));
        let (a, b, out) = (a?, b?, out?);
        let (c, bias) = (
            c.map(|x| x.ok_or(())).transpose().ok()?,
            bias.map(|x| x.ok_or(())).transpose().ok()?,
        );

        let (ta, tb, to) = (&tensors[a], &tensors[b], &tensors[out]);
        if !to.output {
            self.key_error(
                &format!("tensors.{}", to.name),
                format!(
                    "`{}` is the reference output but not marked `output: true`",
                    to.name
                ),
            )
            .help = Some(
                "outputs are poisoned before launch so unwritten elements show; add `output: true`"
                    .into(),
            );
        }
        for (field, idx) in [("a", Some(a)), ("b", Some(b)), ("c", c), ("bias", bias)] {
            if let Some(i) = idx {
                if tensors[i].output {
                    self.error(
                        &format!("reference.{field}"),
                        format!(
                            "`{}` is an input of the reference but marked `output: true`",
                            tensors[i].name
                        ),
                    );
                }
            }
        }
        let batched = to.shape.len() == 3;
        let rank = if batched { 3 } else { 2 };
        let mut ok = true;
        for (field, t, what) in [
            ("a", ta, "[M, K]"),
            ("b", tb, "[K, N]"),
            ("out", to, "[M, N]"),
        ] {
            if t.shape.len() != rank {
                let want = if batched {
                    format!("[L, {}", &what[1..])
                } else {
                    what.to_string()
                };
                self.error(&format!("reference.{field}"), format!(
                    "`{}` has shape [{}] ({} dims) but reference.{field} must be {want}{}",
                    t.name, t.shape_text.join(", "), t.shape.len(),
                    if batched { " (the output is batched)" } else { "" }))
                    .help = Some("gemm shapes: a [M, K], b [K, N], out [M, N], c [M, N], bias [N]; a leading batch dimension L on all of a, b, out (and c)".into());
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        let d = |t: &TensorSpecResolved, i: usize| t.shape[t.shape.len() - 2 + i];
        let (m, k, n) = (d(to, 0), d(ta, 1), d(to, 1));
        let l = if batched { to.shape[0] } else { 1 };
        let mut mismatch =
            |field: &str, t: &TensorSpecResolved, dim: usize, what: &str, want: i64, why: &str| {
                let got = d(t, dim);
                if got != want {
                    let text = &t.shape_text[t.shape.len() - 2 + dim];
                    self.error(
                        &format!("tensors.{}.shape[{}]", t.name, t.shape.len() - 2 + dim),
                        format!(
                        "reference.{field} `{}` has {what} = {text} = {got}, but {why} is {want}",
                        t.name
                    ),
                    )
                    .help = Some(
                        "gemm shapes: a [M, K], b [K, N], out [M, N], c [M, N], bias [N]".into(),
                    );
                }
            };
        mismatch("a", ta, 0, "M", m, "the output's M");
        mismatch("b", tb, 0, "K", k, "a's K");
        mismatch("b", tb, 1, "N", n, "the output's N");
        if batched {
            for (field, t) in [("a", ta), ("b", tb)] {
                if t.shape[0] != l {
                    self.error(
                        &format!("tensors.{}.shape[0]", t.name),
                        format!(
                            "reference.{field} `{}` has batch {} but the output has batch L = {l}",
                            t.name, t.shape[0]
                        ),
                    );
                }
            }
        }
        if let Some(bi) = bias {
            let tb = &tensors[bi];
            if tb.shape != [n] {
                self.error(
                    "reference.bias",
                    format!(
                        "bias `{}` has shape [{}] but must be [N] = [{n}]",
                        tb.name,
                        tb.shape_text.join(", ")
                    ),
                );
            }
        }
        let accumulate = self.c_beta_accumulate(tensors, c, out);
        let (tile_m, tile_n, tile_k) = self.tile(m, n);
        for t in [ta, tb] {
            // Whatever the output's type: true and false are no numbers to multiply and sum.
            if t.dtype == DType::Bool {
                self.error(
                    "reference",
                    format!("`{}` is bool; a GEMM operand must be numeric", t.name),
                );
            }
        }
        let scale_a = r.scale_a.as_ref().and_then(|x| {
            self.scale(
                tensors,
                "scale_a",
                x,
                ScaledOperand {
                    extents: [m, k],
                    k_axis: 1,
                    batch: batched.then_some(l),
                    groups: None,
                    flat: false,
                },
            )
        });
        let scale_b = r.scale_b.as_ref().and_then(|x| {
            self.scale(
                tensors,
                "scale_b",
                x,
                ScaledOperand {
                    extents: [k, n],
                    k_axis: 0,
                    batch: batched.then_some(l),
                    groups: None,
                    flat: false,
                },
            )
        });
        Some(ReferenceGemm {
            a,
            b,
            out,
            c,
            bias,
            scale_a,
            scale_b,
            grouped: None,
            alpha: r.alpha.unwrap_or(1.0),
            beta: if c.is_some() {
                r.beta.unwrap_or(1.0)
            } else {
                0.0
            },
            accumulate,
            batched,
            l,
            m,
            n,
            k,
            tile_m,
            tile_n,
            tile_k,
            provider: r.provider,
        })
    }

    /// `c` has the output's shape; `beta` needs `c`; `accumulate: true` needs a `c` the output
    /// can start as, byte for byte: its dtype, shape and strides. Returns whether the kernel
    /// accumulates into the output.
    pub(super) fn c_beta_accumulate(
        &mut self,
        tensors: &[TensorSpecResolved],
        c: Option<usize>,
        out: usize,
    ) -> bool {
        if let Some(ci) = c {
            let (tc, to) = (&tensors[ci], &tensors[out]);
            if tc.shape != to.shape {
                self.error(
                    "reference.c",
                    format!(
                        "c `{}` has shape [{}] but must match the output [{}]",
                        tc.name,
                        tc.shape_text.join(", "),
                        to.shape_text.join(", ")
                    ),
                );
            }
        }
        let r = &self.spec.reference;
        if r.beta.is_some() && c.is_none() {
            self.key_error(
                "reference.beta",
                "`beta` is given but there is no `c` for it to scale",
            )
            .help = Some("add `c: <tensor>` or remove `beta`".into());
        }
        if r.accumulate != Some(true) {
            return false;
        }
        let Some(ci) = c else {
            self.key_error(
                "reference.accumulate",
                "`accumulate: true` says the kernel adds into the output, but there is no `c` for the output to start as",
            )
            .help = Some("add `c: <tensor>` (its initial contents; `beta: 1` adds it once)".into());
            return false;
        };
        let (tc, to) = (&tensors[ci], &tensors[out]);
        if tc.dtype != to.dtype || tc.strides != to.strides {
            self.error(
                &format!("tensors.{}", tc.name),
                format!(
                    "`accumulate: true` copies `{}` into the output `{}` before each launch, byte for byte, but `{}` is {} with strides [{}] and `{}` is {} with strides [{}]",
                    tc.name,
                    to.name,
                    tc.name,
                    tc.dtype.name(),
                    shape_list(&tc.strides),
                    to.name,
                    to.dtype.name(),
                    shape_list(&to.strides)
                ),
            )
            .help = Some(format!("give `{}` the output's dtype and layout", tc.name));
        }
        true
    }
}
