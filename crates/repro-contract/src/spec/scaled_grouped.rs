//! The reference ops beyond the plain GEMM that are still GEMMs (docs/spec.md, "Scaled GEMMs" and
//! "Grouped GEMMs"): the block scales of a scaled GEMM (`scale_a`, `scale_b`) and
//! `op: grouped_gemm` with its three layouts. Shapes are checked against the operands with the
//! numbers in the message, and metadata the spec lists (`init: { values }` / `{ groups }`)
//! against the group count and extents, so that a wrong layout is a spec error (exit 2), never a
//! wrong reference. Metadata read from a file is checked by the harness when it runs.

use super::dtype::DType;
use super::model::{GroupedLayout, KernelKind, ScaleFormat, ScaleSpec};
use super::resolved::{
    GroupedResolved, InitSource, ReferenceGemm, ScaleResolved, TensorSpecResolved,
};
use super::validate::Validator;

pub(super) fn shape_list(shape: &[i64]) -> String {
    shape
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// The operand a scale tensor scales.
pub(super) struct ScaledOperand {
    /// Its logical extents: [M, K] for A, [K, N] for B.
    pub extents: [i64; 2],
    /// Which of them is K: 1 for A, 0 for B.
    pub k_axis: usize,
    /// A batched `op: gemm`'s batch count L: its scales are [L, ...] (one per batch) or the
    /// 2-D shape (shared by every batch).
    pub batch: Option<i64>,
    /// A grouped GEMM's scales of one operand per group: [G, ...] before the blocks
    /// (`op: grouped_gemm`'s weights, masked activations).
    pub groups: Option<i64>,
    /// `layout: k_grouped_blocks`: one flat tensor of every group's scale block, one scale per
    /// row (A) or column (B) and K block, so the block is 1 along that axis.
    pub flat: bool,
}

impl Validator<'_> {
    /// `scale_a` (blocks of A [M, K]) or `scale_b` (blocks of B [K, N]) over `operand`.
    pub(super) fn scale(
        &mut self,
        tensors: &[TensorSpecResolved],
        field: &str,
        scale: &ScaleSpec,
        operand_scaled: ScaledOperand,
    ) -> Option<ScaleResolved> {
        let ScaledOperand {
            extents,
            k_axis,
            batch,
            groups,
            flat,
        } = operand_scaled;
        let path = format!("reference.{field}");
        let index = self.tensor_index(tensors, &format!("{path}.tensor"), &scale.tensor)?;
        let t = &tensors[index];
        let operand = if k_axis == 1 { "A [M, K]" } else { "B [K, N]" };
        if batch.is_some() && self.spec.first_launch().map(|k| k.kind) == Some(KernelKind::Cutlass3)
        {
            // cutlass3.h's scale_layout gives CUTLASS one batch's scale layout.
            self.key_error(
                &path,
                format!("`{field}` on a batched GEMM is not supported with `kind: cutlass3` yet"),
            )
            .help = Some("write the launch as `kind: global` with kernel.setup building the CUTLASS arguments".into());
            return None;
        }
        let block = match scale.block.as_slice() {
            [r, c] if *r > 0 && *c > 0 => [*r, *c],
            _ => {
                self.error(
                    &format!("{path}.block"),
                    format!(
                        "block [{}] is not two positive extents in {operand}'s order",
                        shape_list(&scale.block)
                    ),
                )
                .help = Some(format!(
                    "e.g. [1, 128] for A (per row, per 128 of K), [128, 128] for B; the whole \
                     extent [{}] is one scale for the tensor",
                    shape_list(&extents)
                ));
                return None;
            }
        };
        if t.output {
            self.error(
                &format!("{path}.tensor"),
                format!(
                    "`{}` is a scale of the reference but marked `output: true`",
                    t.name
                ),
            );
        }
        let packed = match (scale.format, t.dtype) {
            (ScaleFormat::F32, d) if d.is_float() => false,
            (ScaleFormat::Ue8m0, DType::U8) => false,
            (ScaleFormat::Ue8m0, DType::I32 | DType::U32) => true,
            (format, d) => {
                let want = match format {
                    ScaleFormat::F32 => "a float dtype (f32, or f16, bf16, f64)",
                    ScaleFormat::Ue8m0 => {
                        "u8 (one ue8m0 exponent per block) or i32 (four per element, along K)"
                    }
                };
                self.error(
                    &format!("tensors.{}.dtype", t.name),
                    format!(
                        "scale tensor `{}` is {} but `{field}` with format {} needs {want}",
                        t.name,
                        d.name(),
                        if format == ScaleFormat::F32 {
                            "f32"
                        } else {
                            "ue8m0"
                        }
                    ),
                );
                return None;
            }
        };
        let blocks = [
            ceil_div(extents[0], block[0]),
            ceil_div(extents[1], block[1]),
        ];
        let mut per_operand = blocks;
        if packed {
            per_operand[k_axis] = ceil_div(blocks[k_axis], 4);
        }
        if flat && (scale.format != ScaleFormat::F32 || block[1 - k_axis] != 1) {
            self.error(
                &format!("{path}.block"),
                format!(
                    "`layout: k_grouped_blocks` keeps one f32 scale per {} and K block, in each group's block: `{field}` needs block {} and format f32",
                    if k_axis == 1 { "row of A" } else { "column of B" },
                    if k_axis == 1 { format!("[1, {}]", block[1]) } else { format!("[{}, 1]", block[0]) },
                ),
            );
            return None;
        }
        // A batched GEMM's scales: [L, ...] when the tensor has a leading dimension, else shared.
        let per_batch = batch.filter(|_| t.shape.len() == 3);
        let want: Vec<i64> = if flat {
            vec![per_operand[0] * per_operand[1]]
        } else {
            groups
                .or(per_batch)
                .into_iter()
                .chain(per_operand)
                .collect()
        };
        if groups.is_none() && batch.is_none() && !flat && t.shape.len() == 3 {
            self.error(
                &format!("tensors.{}.shape", t.name),
                format!(
                    "scale tensor `{}` has shape [{}] (3 dims), but `{field}` scales a GEMM without a batch dimension: it needs [{}]",
                    t.name,
                    shape_list(&t.shape),
                    shape_list(&want),
                ),
            )
            .help = Some("a leading dimension of scales is a batched GEMM's L (its operands and output [L, ...])".into());
            return None;
        }
        if let Some(l) = per_batch {
            if t.shape[1..] == want[1..] && t.shape[0] != l {
                self.error(
                    &format!("tensors.{}.shape[0]", t.name),
                    format!(
                        "scale tensor `{}` has {} batches of scales, but the output has batch L = {l}",
                        t.name, t.shape[0]
                    ),
                )
                .help = Some(format!(
                    "one [{}] per batch: [{l}, {}]; or [{}] alone, shared by every batch",
                    shape_list(&want[1..]),
                    shape_list(&want[1..]),
                    shape_list(&want[1..]),
                ));
                return None;
            }
        }
        if t.shape != want {
            let names = if k_axis == 1 { ["M", "K"] } else { ["K", "N"] };
            let how = format!(
                "{}ceil({}/{}) x ceil({}/{}){}",
                match (groups, per_batch) {
                    (Some(g), _) => format!("G = {g} groups x "),
                    (None, Some(l)) => format!("L = {l} batches x "),
                    (None, None) => String::new(),
                },
                extents[0],
                block[0],
                extents[1],
                block[1],
                if packed {
                    format!(
                        ", the K blocks four to an element: {} / 4 rounded up",
                        blocks[k_axis]
                    )
                } else {
                    String::new()
                }
            );
            self.error(
                &format!("tensors.{}.shape", t.name),
                format!(
                    "scale tensor `{}` has shape [{}], but block [{}] over {operand} = [{}]{} needs [{}] ({how})",
                    t.name,
                    shape_list(&t.shape),
                    shape_list(&block),
                    shape_list(&extents),
                    if groups.is_some() {
                        " of each group"
                    } else if per_batch.is_some() {
                        " of each batch"
                    } else {
                        ""
                    },
                    shape_list(&want),
                ),
            )
            .help = Some(format!(
                "one scale per block of {} x {}; a partial last block along {} or {} has its own scale",
                block[0], block[1], names[0], names[1]
            ));
            return None;
        }
        Some(ScaleResolved {
            tensor: index,
            block,
            format: scale.format,
            packed,
        })
    }

    /// `op: grouped_gemm`.
    pub(super) fn grouped_reference(
        &mut self,
        tensors: &[TensorSpecResolved],
    ) -> Option<ReferenceGemm> {
        let r = &self.spec.reference;
        let Some(layout) = r.layout else {
            self.key_error("reference", "`op: grouped_gemm` needs `layout:`")
                .help = Some(
                "layout: contiguous, masked, k_grouped or k_grouped_blocks (docs/spec.md)".into(),
            );
            return None;
        };
        let (field, metadata, shapes) = match layout {
            GroupedLayout::Contiguous => (
                "group_index",
                &r.group_index,
                "a [M_total, K], b [G, K, N], out [M_total, N], group_index [M_total] (i32)",
            ),
            GroupedLayout::Masked => (
                "masked_m",
                &r.masked_m,
                "a [G, M_max, K], b [G, K, N], out [G, M_max, N], masked_m [G] (i32)",
            ),
            GroupedLayout::KGrouped => (
                "k_sizes",
                &r.k_sizes,
                "a [M, K_total], b [K_total, N], out [G, M, N], k_sizes [G] (i32)",
            ),
            GroupedLayout::KGroupedBlocks => (
                "k_sizes",
                &r.k_sizes,
                "a [M * K_total] (group g's [M, k_g] row-major block at M * the K before g), b [N * K_total] (its [N, k_g] block at N * the K before g), out [G, M, N], k_sizes [G] (i32)",
            ),
        };
        for (other, given) in [
            ("group_index", r.group_index.is_some()),
            ("masked_m", r.masked_m.is_some()),
            ("k_sizes", r.k_sizes.is_some()),
        ] {
            if given && other != field {
                self.key_error(
                    &format!("reference.{other}"),
                    format!("`{other}` does not belong to `layout: {}`", layout.name()),
                )
                .help = Some(format!("layout {} takes `{field}`", layout.name()));
            }
        }
        for (other, given) in [("bias", r.bias.is_some())] {
            if given {
                self.key_error(
                    &format!("reference.{other}"),
                    format!("`{other}` with `op: grouped_gemm` is not supported yet"),
                );
            }
        }
        let Some(metadata) = metadata else {
            self.key_error(
                "reference",
                format!("`layout: {}` needs `{field}:`", layout.name()),
            )
            .help = Some(format!("grouped_gemm {}: {shapes}", layout.name()));
            return None;
        };
        let a = self.tensor_index(tensors, "reference.a", &r.a);
        let b = self.tensor_index(tensors, "reference.b", &r.b);
        let out = self.tensor_index(tensors, "reference.out", &r.out);
        let meta = self.tensor_index(tensors, &format!("reference.{field}"), metadata);
        let c = match &r.c {
            Some(name) => Some(self.tensor_index(tensors, "reference.c", name)?),
            None => None,
        };
        let (a, b, out, meta) = (a?, b?, out?, meta?);
        let (ta, tb, to, tm) = (&tensors[a], &tensors[b], &tensors[out], &tensors[meta]);
        if !to.output {
            self.key_error(
                &format!("tensors.{}", to.name),
                format!(
                    "`{}` is the reference output but not marked `output: true`",
                    to.name
                ),
            );
        }
        for (f, t) in [("a", ta), ("b", tb), (field, tm)] {
            if t.output {
                self.error(
                    &format!("reference.{f}"),
                    format!(
                        "`{}` is an input of the reference but marked `output: true`",
                        t.name
                    ),
                );
            }
        }
        let ranks: [usize; 4] = match layout {
            GroupedLayout::Contiguous => [2, 3, 2, 1],
            GroupedLayout::Masked => [3, 3, 3, 1],
            GroupedLayout::KGrouped => [2, 2, 3, 1],
            GroupedLayout::KGroupedBlocks => [1, 1, 3, 1],
        };
        let mut ok = true;
        for ((f, t), rank) in [("a", ta), ("b", tb), ("out", to), (field, tm)]
            .into_iter()
            .zip(ranks)
        {
            if t.shape.len() != rank {
                self.error(
                    &format!("reference.{f}"),
                    format!(
                        "`{}` has shape [{}] ({} dims) but grouped_gemm {} needs {rank} dims",
                        t.name,
                        t.shape_text.join(", "),
                        t.shape.len(),
                        layout.name()
                    ),
                )
                .help = Some(format!("grouped_gemm {}: {shapes}", layout.name()));
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        if tm.dtype != DType::I32 {
            self.error(
                &format!("tensors.{}.dtype", tm.name),
                format!(
                    "`{}` ({field}) is {} but must be i32",
                    tm.name,
                    tm.dtype.name()
                ),
            );
        }
        // The extents, and what each tensor's must be.
        let (g, m, n, k) = match layout {
            GroupedLayout::Contiguous => (tb.shape[0], ta.shape[0], to.shape[1], ta.shape[1]),
            GroupedLayout::Masked => (ta.shape[0], ta.shape[1], to.shape[2], ta.shape[2]),
            GroupedLayout::KGrouped => (to.shape[0], ta.shape[0], to.shape[2], ta.shape[1]),
            // A holds M * K_total elements: K_total follows from the output's M.
            GroupedLayout::KGroupedBlocks => (
                to.shape[0],
                to.shape[1],
                to.shape[2],
                if to.shape[1] > 0 {
                    ta.shape[0] / to.shape[1]
                } else {
                    0
                },
            ),
        };
        let want: [(&str, &TensorSpecResolved, Vec<i64>); 4] = match layout {
            GroupedLayout::Contiguous => [
                ("a", ta, vec![m, k]),
                ("b", tb, vec![g, k, n]),
                ("out", to, vec![m, n]),
                (field, tm, vec![m]),
            ],
            GroupedLayout::Masked => [
                ("a", ta, vec![g, m, k]),
                ("b", tb, vec![g, k, n]),
                ("out", to, vec![g, m, n]),
                (field, tm, vec![g]),
            ],
            GroupedLayout::KGrouped => [
                ("a", ta, vec![m, k]),
                ("b", tb, vec![k, n]),
                ("out", to, vec![g, m, n]),
                (field, tm, vec![g]),
            ],
            GroupedLayout::KGroupedBlocks => [
                ("a", ta, vec![m * k]),
                ("b", tb, vec![n * k]),
                ("out", to, vec![g, m, n]),
                (field, tm, vec![g]),
            ],
        };
        for (f, t, shape) in want {
            if t.shape != shape {
                self.error(
                    &format!("tensors.{}.shape", t.name),
                    format!(
                        "reference.{f} `{}` has shape [{}] = [{}], but with G = {g} groups it must be [{}]",
                        t.name,
                        t.shape_text.join(", "),
                        shape_list(&t.shape),
                        shape_list(&shape)
                    ),
                )
                .help = Some(format!("grouped_gemm {}: {shapes}", layout.name()));
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        self.grouped_metadata(tm, layout, field, g, m, k);
        // Block scales follow the group layout: the activations' as A's rows (one tensor over
        // M_total, or per group over M_max), the weights' per group ([G, K/bk, N/bn]); k_grouped
        // groups are K ranges of one A and one B, so their scales are one tensor each.
        let (a_groups, b_groups) = match layout {
            GroupedLayout::Contiguous => (None, Some(g)),
            GroupedLayout::Masked => (Some(g), Some(g)),
            GroupedLayout::KGrouped | GroupedLayout::KGroupedBlocks => (None, None),
        };
        // Blocks: each group's scales a block too, flat like its operands (per row of A and per
        // column of B, per K block).
        let flat = layout == GroupedLayout::KGroupedBlocks;
        let scale_a = r.scale_a.as_ref().and_then(|x| {
            let operand = ScaledOperand {
                extents: [m, k],
                k_axis: 1,
                batch: None,
                groups: a_groups,
                flat,
            };
            self.scale(tensors, "scale_a", x, operand)
        });
        let scale_b = r.scale_b.as_ref().and_then(|x| {
            let operand = ScaledOperand {
                extents: [k, n],
                k_axis: 0,
                batch: None,
                groups: b_groups,
                flat,
            };
            self.scale(tensors, "scale_b", x, operand)
        });
        self.grouped_scale_blocks(tm, layout, field, scale_a.as_ref(), scale_b.as_ref());
        // C is what the output adds (beta C): the output's shape (c_beta_accumulate), every
        // group's rows in place.
        if let Some(ci) = c {
            let tc = &tensors[ci];
            if tc.output {
                self.error(
                    "reference.c",
                    format!(
                        "`{}` is an input of the reference but marked `output: true`",
                        tc.name
                    ),
                );
            }
        }
        let accumulate = self.c_beta_accumulate(tensors, c, out);
        let (tile_m, tile_n, tile_k) = self.tile(m, n);
        Some(ReferenceGemm {
            a,
            b,
            out,
            c,
            bias: None,
            scale_a,
            scale_b,
            grouped: Some(GroupedResolved {
                layout,
                metadata: meta,
            }),
            alpha: r.alpha.unwrap_or(1.0),
            beta: if c.is_some() {
                r.beta.unwrap_or(1.0)
            } else {
                0.0
            },
            accumulate,
            batched: false,
            l: g,
            m,
            n,
            k,
            tile_m,
            tile_n,
            tile_k,
            provider: r.provider,
        })
    }

    /// A group must begin on a scale block: a contiguous group's first row on a block of
    /// `scale_a`'s rows, a k_grouped group's first K on a K block of both scales (else two
    /// groups would share a scale). Checked on the metadata the spec lists; the harness checks
    /// the rest when it reads it.
    fn grouped_scale_blocks(
        &mut self,
        t: &TensorSpecResolved,
        layout: GroupedLayout,
        field: &str,
        scale_a: Option<&ScaleResolved>,
        scale_b: Option<&ScaleResolved>,
    ) {
        let name = &t.name;
        match (layout, &t.init.source) {
            (GroupedLayout::Contiguous, InitSource::Groups { align, .. }) => {
                let Some(block_m) = scale_a.map(|s| s.block[0]) else {
                    return;
                };
                if align % block_m != 0 {
                    self.error(
                        &format!("tensors.{name}.init.groups"),
                        format!(
                            "the groups start every {align} rows (align), but scale_a has one scale per {block_m} rows: a group would begin inside another group's scale block"
                        ),
                    )
                    .help = Some(format!("make `align` a multiple of {block_m}"));
                }
            }
            (
                GroupedLayout::KGrouped | GroupedLayout::KGroupedBlocks,
                InitSource::Values(values),
            ) => {
                let block_k = [scale_a.map(|s| s.block[1]), scale_b.map(|s| s.block[0])]
                    .into_iter()
                    .flatten()
                    .max();
                let Some(block_k) = block_k else {
                    return;
                };
                // Each group starts where the extents before it end: every extent but the
                // last sets a start (with blocks, every group's scales are whole K blocks, the
                // last's too).
                let starts = if layout == GroupedLayout::KGroupedBlocks {
                    values.len()
                } else {
                    values.len().saturating_sub(1)
                };
                for (i, &v) in values.iter().enumerate().take(starts) {
                    if (v as i64) % block_k != 0 {
                        self.error(
                            &format!("tensors.{name}.init.values"),
                            format!(
                                "{field} `{name}`[{i}] = {v}, but with block scales every group's K extent{} must be a multiple of the scales' K block, {block_k}",
                                if layout == GroupedLayout::KGrouped { " but the last" } else { "" }
                            ),
                        )
                        .help = Some(
                            "a group's K range begins where the one before ends: an extent off the block would put two groups in one scale block".into(),
                        );
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    /// The values of group metadata the spec lists: group indices in [-1, G), masked_m in
    /// [0, M_max], k_sizes summing to at most K_total.
    fn grouped_metadata(
        &mut self,
        t: &TensorSpecResolved,
        layout: GroupedLayout,
        field: &str,
        g: i64,
        m: i64,
        k: i64,
    ) {
        let name = &t.name;
        match (&t.init.source, layout) {
            (InitSource::Groups { rows, align }, GroupedLayout::Contiguous) => {
                let path = format!("tensors.{name}.init.groups");
                if rows.len() as i64 > g {
                    self.error(
                        &path,
                        format!(
                            "init.groups lists {} groups but B has G = {g}: group index {} is outside [-1, {g})",
                            rows.len(),
                            rows.len() - 1
                        ),
                    );
                }
                let padded: i64 = rows.iter().map(|r| ceil_div(*r, *align) * align).sum();
                if padded > m {
                    self.error(
                        &path,
                        format!(
                            "the groups take {padded} rows (each padded to a multiple of {align}) but A has M_total = {m}"
                        ),
                    )
                    .help = Some("make M_total larger, or the groups smaller".into());
                }
            }
            (InitSource::Groups { .. }, _) => {
                self.error(
                    &format!("tensors.{name}.init.groups"),
                    format!(
                        "`init: {{ groups }}` makes a contiguous group index; `{name}` is {field}"
                    ),
                )
                .help = Some("list the values instead: `init: { values: [...] }`".into());
            }
            (InitSource::Values(values), _) => {
                let path = format!("tensors.{name}.init.values");
                for (i, &v) in values.iter().enumerate() {
                    let (lo, hi, what) = match layout {
                        GroupedLayout::Contiguous => {
                            (-1.0, (g - 1) as f64, format!("a group index in [-1, {g})"))
                        }
                        GroupedLayout::Masked => {
                            (0.0, m as f64, format!("a row count in [0, M_max = {m}]"))
                        }
                        GroupedLayout::KGrouped | GroupedLayout::KGroupedBlocks => {
                            (0.0, k as f64, format!("a K extent in [0, K_total = {k}]"))
                        }
                    };
                    if v.fract() != 0.0 || v < lo || v > hi {
                        self.error(
                            &path,
                            format!("{field} `{name}`[{i}] = {v}, but each must be {what}"),
                        );
                        return;
                    }
                }
                if layout.splits_k() {
                    let total: f64 = values.iter().sum();
                    if total > k as f64 {
                        self.error(
                            &path,
                            format!("k_sizes `{name}` sum to {total}, more than A's K_total = {k}"),
                        );
                    }
                }
            }
            (InitSource::File(_), _) => {} // the harness checks the file's values
            (InitSource::Generator(gen), _) => {
                self.error(
                    &format!("tensors.{name}.init"),
                    format!(
                        "{field} `{name}` is made by `{}`, which gives no valid {field}",
                        gen.name()
                    ),
                )
                .help = Some(match layout {
                    GroupedLayout::Contiguous => {
                        "e.g. `init: { groups: [300, 200, 0, 512], align: 128 }`, or `init: { file: I.npy }`".into()
                    }
                    _ => "e.g. `init: { values: [100, 256, 0, 77] }`, or `init: { file: ... }`".into(),
                });
            }
        }
    }
}
