//! `op: attention` (docs/spec.md, "Attention"): the forward pass
//! O = softmax(scale * Q K^T + mask) V of a batch of heads, with grouped-query heads, causal masks
//! aligned top-left or bottom-right, variable sequence lengths, and the rows' log-sum-exp as an
//! optional second output. The runtime computes it in f64, on the host or at production sizes on
//! the device (attention.cuh, attention_reference.cuh, attention_device.cuh); this checks that
//! the tensors the reference names fit together, so that a wrong spec is an error here, not a
//! wrong verdict.
//!
//! Shapes are in the logical order docs/spec.md gives: Q and O [B, Hq, Sq, D], K and V
//! [B, Hk, Sk, D], lse [B, Hq, Sq]; with variable lengths Q and O [Hq, total_q, D], K and V
//! [Hk, total_k, D], lse [Hq, total_q] and i32 `cu_seqlens_q` / `cu_seqlens_k` [B + 1]. The
//! storage is the tensor's own: FlashAttention's [B, S, H, D] memory is
//! `strides: [S*H*D, D, H*D, 1]`.

use super::dtype::DType;
use super::model::{CausalMask, ReferenceProvider};
use super::resolved::{AttentionGradients, ReferenceAttention, TensorSpecResolved};
use super::validate::Validator;

impl Validator<'_> {
    /// `cu_seqlens` listed in the spec (`init: { values }`): from 0, never decreasing, within the
    /// `total` rows of the tensor they cut into sequences.
    fn check_offsets(&mut self, cu: &TensorSpecResolved, total: i64, of: &str) {
        let super::resolved::InitSource::Values(values) = &cu.init.source else {
            return;
        };
        let path = format!("tensors.{}.init.values", cu.name);
        let mut previous = 0.0;
        for (i, &v) in values.iter().enumerate() {
            let bad = v.fract() != 0.0 || (i == 0 && v != 0.0) || v < previous || v > total as f64;
            if bad {
                self.error(
                    &path,
                    format!(
                        "`{}`[{i}] = {v}: sequence offsets start at 0, never decrease and stay within the {total} rows of `{of}`",
                        cu.name
                    ),
                );
                return;
            }
            previous = v;
        }
    }

    /// The other ops take none of attention's fields.
    pub(super) fn refuse_attention_fields(&mut self, op: &str) {
        let r = &self.spec.reference;
        let given = [
            ("q", r.q.is_some()),
            ("k", r.k.is_some()),
            ("v", r.v.is_some()),
            ("lse", r.lse.is_some()),
            ("causal", r.causal.is_some()),
            ("softmax_scale", r.softmax_scale.is_some()),
            ("cu_seqlens_q", r.cu_seqlens_q.is_some()),
            ("cu_seqlens_k", r.cu_seqlens_k.is_some()),
            ("o", r.o.is_some()),
            ("do", r.d_out.is_some()),
            ("dq", r.dq.is_some()),
            ("dk", r.dk.is_some()),
            ("dv", r.dv.is_some()),
        ];
        for (field, given) in given {
            if given {
                self.key_error(
                    &format!("reference.{field}"),
                    format!("`{field}` belongs to the attention ops, not `op: {op}`"),
                );
            }
        }
    }

    pub(super) fn attention_reference(
        &mut self,
        tensors: &[TensorSpecResolved],
    ) -> Option<ReferenceAttention> {
        let r = self.spec.reference.clone();
        let backward = r.op == "attention_backward";
        let op = r.op.clone();
        // The fields of the other ops (`out` is attention's too).
        let others = super::custom::gemm_fields(&r).into_iter().chain([
            ("source", r.source.is_some()),
            ("function", r.function.is_some()),
            ("expected", r.expected.is_some()),
            ("upstream", r.upstream.is_some()),
        ]);
        // The forward's and the backward's own fields.
        let wrong_pass = if backward {
            vec![("out", !r.out.is_empty())]
        } else {
            vec![
                ("o", r.o.is_some()),
                ("do", r.d_out.is_some()),
                ("dq", r.dq.is_some()),
                ("dk", r.dk.is_some()),
                ("dv", r.dv.is_some()),
            ]
        };
        let others = others
            .filter(|(field, _)| *field != "out")
            .chain(wrong_pass);
        for (field, given) in others {
            if given {
                self.key_error(
                    &format!("reference.{field}"),
                    format!("`{field}` does not belong to `op: {op}`"),
                )
                .help = Some(if backward {
                    "`op: attention_backward` takes q, k, v, o (the forward's output), lse, do (its gradient) and the outputs dq, dk, dv; optionally causal, softmax_scale, cu_seqlens_q, cu_seqlens_k and block".into()
                } else {
                    "`op: attention` takes q, k, v, out, and optionally lse, causal, softmax_scale, cu_seqlens_q, cu_seqlens_k and block".into()
                });
            }
        }
        // The forward has an f64 device reference (production sizes); the backward's runs on
        // the host only.
        if r.provider == ReferenceProvider::Emulated {
            self.error(
                "reference.provider",
                format!("`op: {op}` has no emulated reference: the int8 emulation computes GEMMs"),
            )
            .help = Some(if backward {
                "remove `provider:` (or write `provider: host`)".into()
            } else {
                "write `provider: device` (or remove `provider:`)".into()
            });
        }
        if backward && r.provider == ReferenceProvider::Device {
            self.error(
                "reference.provider",
                format!("`op: {op}` has no device reference: its f64 reference runs on the host"),
            )
            .help = Some("remove `provider:` (or write `provider: host`)".into());
        }
        let mut named = |field: &str, name: &Option<String>| -> Option<usize> {
            match name.as_deref() {
                Some(name) if !name.is_empty() => {
                    self.tensor_index(tensors, &format!("reference.{field}"), name)
                }
                _ => {
                    self.key_error("reference", format!("`op: {op}` needs `{field}`"))
                        .help = Some(if backward {
                        "name the tensors: `q:`, `k:`, `v:`, `o:` (the forward's output), `lse:`, `do:` (the output's gradient) and the outputs `dq:`, `dk:`, `dv:`, in [B, H, S, D] order (FlashAttention's [B, S, H, D] storage through `strides:`)".into()
                    } else {
                        "name the tensors: `q:`, `k:`, `v:` (inputs) and `out:` (the output), in [B, H, S, D] order (FlashAttention's [B, S, H, D] storage through `strides:`)".into()
                    });
                    None
                }
            }
        };
        let q = named("q", &r.q);
        let k = named("k", &r.k);
        let v = named("v", &r.v);
        let out = if backward {
            named("o", &r.o)
        } else {
            named("out", &Some(r.out.clone()))
        };
        // The backward's gradients; its lse is required (the probabilities are rebuilt from it).
        let gradients = if backward {
            let d_out = named("do", &r.d_out);
            let dq = named("dq", &r.dq);
            let dk = named("dk", &r.dk);
            let dv = named("dv", &r.dv);
            if r.lse.is_none() {
                named("lse", &None);
            }
            Some((d_out?, dq?, dk?, dv?))
        } else {
            None
        };
        let lse = match &r.lse {
            Some(name) => Some(self.tensor_index(tensors, "reference.lse", name)?),
            None => None,
        };
        let cu_q = match &r.cu_seqlens_q {
            Some(name) => Some(self.tensor_index(tensors, "reference.cu_seqlens_q", name)?),
            None => None,
        };
        let cu_k = match &r.cu_seqlens_k {
            Some(name) => Some(self.tensor_index(tensors, "reference.cu_seqlens_k", name)?),
            None => None,
        };
        let (q, k, v, out) = (q?, k?, v?, out?);

        let out_field = if backward { "o" } else { "out" };
        let roles: Vec<(&str, usize, bool)> = [
            ("q", q, false),
            ("k", k, false),
            ("v", v, false),
            (out_field, out, !backward),
        ]
        .into_iter()
        .chain(lse.map(|l| ("lse", l, !backward)))
        .chain(gradients.into_iter().flat_map(|(d_out, dq, dk, dv)| {
            [
                ("do", d_out, false),
                ("dq", dq, true),
                ("dk", dk, true),
                ("dv", dv, true),
            ]
        }))
        .collect();
        for &(field, index, output) in &roles {
            let t = &tensors[index];
            if t.output != output {
                self.error(
                    &format!("reference.{field}"),
                    format!(
                        "`{}` is {}, and `{field}` is {}",
                        t.name,
                        if t.output { "an output" } else { "an input" },
                        if output { "an output" } else { "an input" }
                    ),
                )
                .help = Some(format!(
                    "{} `{}` with `output: true`",
                    if output { "mark" } else { "do not mark" },
                    t.name
                ));
            }
            if !t.dtype.is_float() {
                self.error(
                    &format!("reference.{field}"),
                    format!(
                        "`{}` is {}, and `{field}` holds floating-point values",
                        t.name,
                        t.dtype.name()
                    ),
                );
            }
        }
        let judged = |i: usize| roles.iter().any(|&(_, index, output)| output && index == i);
        if let Some(extra) = (0..tensors.len()).find(|&i| tensors[i].output && !judged(i)) {
            self.error(
                &format!("tensors.{}", tensors[extra].name),
                format!(
                    "`{}` is an output, and `op: {op}` judges {} only",
                    tensors[extra].name,
                    if backward {
                        "`dq`, `dk` and `dv`"
                    } else {
                        "`out` and `lse`"
                    }
                ),
            )
            .help = Some(if backward {
                "drop `output: true`".into()
            } else {
                "name it as `lse:`, or drop `output: true`".into()
            });
        }

        let varlen = match (cu_q, cu_k) {
            (Some(a), Some(b)) => Some((a, b)),
            (None, None) => None,
            _ => {
                self.key_error(
                    if cu_q.is_some() {
                        "reference.cu_seqlens_q"
                    } else {
                        "reference.cu_seqlens_k"
                    },
                    "variable lengths need both `cu_seqlens_q` and `cu_seqlens_k`",
                );
                return None;
            }
        };
        let rank = if varlen.is_some() { 3 } else { 4 };
        let layout = if varlen.is_some() {
            "[H, total, D]"
        } else {
            "[B, H, S, D]"
        };
        for (field, index) in [("q", q), ("k", k), ("v", v), (out_field, out)] {
            let t = &tensors[index];
            if t.shape.len() != rank {
                self.error(
                    &format!("reference.{field}"),
                    format!(
                        "`{}` has {} dimensions; `op: {op}` lays `{field}` out as {layout}",
                        t.name,
                        t.shape.len()
                    ),
                );
                return None;
            }
        }
        let shape = |i: usize| tensors[i].shape.clone();
        let (sq, sk) = (shape(q), shape(k));
        let head_dim = sq[rank - 1];
        // [B, H, S, D], or [H, total, D]: the heads, and the rows of one head.
        let heads = if varlen.is_some() { 0 } else { 1 };
        let (hq, hk) = (sq[heads], sk[heads]);
        let (rows_q, rows_k) = (sq[rank - 2], sk[rank - 2]);
        let mut mismatch = |what: String| {
            self.error("reference", what).help = Some(format!(
                "Q and O are {layout} with Hq heads, K and V with Hk heads, Hq a multiple of Hk, one head dimension D"
            ));
        };
        if shape(out) != sq {
            mismatch(format!(
                "`{}` {:?} is not shaped as `{}` {:?}",
                tensors[out].name,
                shape(out),
                tensors[q].name,
                sq
            ));
        }
        if shape(v) != sk {
            mismatch(format!(
                "`{}` {:?} is not shaped as `{}` {:?}",
                tensors[v].name,
                shape(v),
                tensors[k].name,
                sk
            ));
        }
        if let Some((d_out, dq, dk, dv)) = gradients {
            for (grad, like) in [(d_out, q), (dq, q), (dk, k), (dv, k)] {
                if shape(grad) != shape(like) {
                    mismatch(format!(
                        "`{}` {:?} is not shaped as `{}` {:?}",
                        tensors[grad].name,
                        shape(grad),
                        tensors[like].name,
                        shape(like)
                    ));
                }
            }
        }
        if sk[rank - 1] != head_dim {
            mismatch(format!(
                "`{}` has head dimension {} and `{}` {}",
                tensors[q].name,
                head_dim,
                tensors[k].name,
                sk[rank - 1]
            ));
        }
        if hk < 1 || hq % hk != 0 {
            mismatch(format!(
                "{hq} query heads are not a multiple of {hk} key/value heads"
            ));
        }
        if varlen.is_none() && sq[0] != sk[0] {
            mismatch(format!("Q has batch {} and K batch {}", sq[0], sk[0]));
        }
        let batch = match varlen {
            Some((cu_q, cu_k)) => {
                for (field, index) in [("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)] {
                    let t = &tensors[index];
                    if t.output || t.dtype != DType::I32 || t.shape.len() != 1 || t.shape[0] < 2 {
                        self.error(
                            &format!("reference.{field}"),
                            format!(
                                "`{}` must be an i32 input of shape [B + 1] (the offsets of each sequence's rows)",
                                t.name
                            ),
                        );
                        return None;
                    }
                }
                if tensors[cu_q].shape != tensors[cu_k].shape {
                    self.error(
                        "reference.cu_seqlens_k",
                        "`cu_seqlens_q` and `cu_seqlens_k` must have the same length, B + 1",
                    );
                }
                // Offsets the spec lists are checked here; from a file, by the harness.
                for (index, total, of) in [(cu_q, rows_q, q), (cu_k, rows_k, k)] {
                    self.check_offsets(&tensors[index], total, &tensors[of].name);
                }
                tensors[cu_q].shape[0] - 1
            }
            None => sq[0],
        };
        if let Some(l) = lse {
            // [B, Hq, Sq]; with variable lengths FlashAttention's [Hq, total_q].
            let t = &tensors[l];
            let (fits, want) = if varlen.is_some() {
                (
                    t.shape == [hq, rows_q],
                    format!("[Hq, total_q] = [{hq}, {rows_q}]"),
                )
            } else {
                (
                    t.shape == [batch, hq, rows_q],
                    format!("[B, Hq, Sq] = [{batch}, {hq}, {rows_q}]"),
                )
            };
            if !fits {
                self.error(
                    "reference.lse",
                    format!("`{}` {:?} is not {want}", t.name, t.shape),
                );
            }
        }
        if let Some(scale) = r.softmax_scale {
            if !(scale.is_finite() && scale > 0.0) {
                self.error(
                    "reference.softmax_scale",
                    format!("the softmax scale is a positive number, not {scale}"),
                );
            }
        }
        let block = r.block.clone().unwrap_or_default();
        if block.len() > 2 || block.iter().any(|&b| b < 1) {
            self.error(
                "reference.block",
                "`block` takes one or two positive extents over the output's last dimensions",
            );
        }
        Some(ReferenceAttention {
            q,
            k,
            v,
            out,
            lse,
            cu_seqlens_q: cu_q,
            cu_seqlens_k: cu_k,
            causal: r.causal.unwrap_or(CausalMask::None),
            softmax_scale: r.softmax_scale,
            block,
            backward: gradients.map(|(d_out, dq, dk, dv)| AttentionGradients { d_out, dq, dk, dv }),
        })
    }
}
