//! `tma:` descriptors: each entry checked against the rules `cuTensorMapEncodeTiled` enforces,
//! at spec time, so a wrong box or swizzle is named with its numbers here rather than reported
//! by the driver as `CUDA_ERROR_INVALID_VALUE` inside the harness.
//!
//! The spec gives boxes in the tensor's `shape` order; the driver wants dimensions innermost
//! first with byte strides. The innermost dimension is the one with stride 1, the others follow
//! by increasing stride, which is also what makes `layout: col_major` work without special cases.

use indexmap::IndexMap;

use super::dtype::DType;
use super::model::{TmaInterleave, TmaOobFill, TmaSpec, TmaSwizzle, Value};
use super::resolved::{TensorSpecResolved, TmaDescriptor};
use super::validate::Validator;
use repro_text::did_you_mean;

/// Limits from the cuTensorMapEncodeTiled documentation (CUDA 12/13 driver API).
const MAX_RANK: usize = 5;
const MAX_BOX: i64 = 256;
const MAX_ELEMENT_STRIDE: i64 = 8;
const MAX_GLOBAL_DIM: i64 = 1 << 32;
const MAX_GLOBAL_STRIDE: i64 = 1 << 40;

/// The driver's element type for a spec dtype. 8-bit floats travel as bytes: TMA copies bits.
pub fn data_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
        DType::F32 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
        DType::Tf32 => "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32",
        DType::F16 => "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
        DType::Bf16 => "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
        DType::I32 => "CU_TENSOR_MAP_DATA_TYPE_INT32",
        DType::U32 => "CU_TENSOR_MAP_DATA_TYPE_UINT32",
        DType::I64 => "CU_TENSOR_MAP_DATA_TYPE_INT64",
        DType::E4m3 | DType::E5m2 | DType::I8 | DType::U8 | DType::Bool => {
            "CU_TENSOR_MAP_DATA_TYPE_UINT8"
        }
    }
}

/// True for the element types the driver accepts a NaN out-of-bounds fill for.
fn is_float_data_type(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F64 | DType::F32 | DType::Tf32 | DType::F16 | DType::Bf16
    )
}

impl Validator<'_> {
    /// Resolves every `tma:` entry; entries with errors are left out (the errors are recorded).
    pub(super) fn tma(
        &mut self,
        sizes: &IndexMap<String, i64>,
        tensors: &[TensorSpecResolved],
    ) -> Vec<TmaDescriptor> {
        let entries: Vec<(String, TmaSpec)> = self
            .spec
            .tma
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect();
        let mut out = Vec::new();
        for (name, entry) in entries {
            let path = format!("tma.{name}");
            if let Some(problem) = super::names::identifier_problem(&name) {
                self.key_error(&path, format!("`{name}` cannot name a descriptor: {problem}"))
                    .help = Some(
                    "the name becomes a C++ variable in the harness, passed by name in `kernel.args`"
                        .into(),
                );
                continue;
            }
            let clash = tensors.iter().any(|t| t.name == name) || sizes.contains_key(&name);
            if clash {
                self.key_error(
                    &path,
                    format!("`{name}` is already the name of a tensor or size"),
                )
                .help = Some("give the descriptor its own name, e.g. `map_a`".into());
                continue;
            }
            if let Some(d) = self.tma_entry(&name, &entry, sizes, tensors) {
                out.push(d);
            }
        }
        out
    }

    fn tma_entry(
        &mut self,
        name: &str,
        entry: &TmaSpec,
        sizes: &IndexMap<String, i64>,
        tensors: &[TensorSpecResolved],
    ) -> Option<TmaDescriptor> {
        let path = format!("tma.{name}");
        let Some(index) = tensors.iter().position(|t| t.name == entry.tensor) else {
            let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
            let help = match did_you_mean(&entry.tensor, names.iter().copied()) {
                Some(best) => format!("did you mean `{best}`?"),
                None => format!("tensors: {}", names.join(", ")),
            };
            self.error(
                &format!("{path}.tensor"),
                format!("no tensor `{}`", entry.tensor),
            )
            .help = Some(help);
            return None;
        };
        let tensor = &tensors[index];
        let rank = tensor.shape.len();
        let element_bytes = tensor.dtype.bytes() as i64;
        if rank > MAX_RANK {
            self.error(
                &format!("{path}.tensor"),
                format!(
                    "`{}` has {rank} dimensions; TMA handles at most {MAX_RANK}",
                    tensor.name
                ),
            );
            return None;
        }

        let box_dims = self.tma_list(&format!("{path}.box"), &entry.box_dims, rank, sizes)?;
        let element_strides = match &entry.element_strides {
            Some(values) => {
                self.tma_list(&format!("{path}.element_strides"), values, rank, sizes)?
            }
            None => vec![1; rank],
        };
        let mut ok = true;
        for (i, &b) in box_dims.iter().enumerate() {
            if !(1..=MAX_BOX).contains(&b) {
                self.error(
                    &format!("{path}.box[{i}]"),
                    format!("box extent {b} is outside 1..{MAX_BOX}, the TMA limit per dimension"),
                )
                .help = Some(
                    "a tile larger than 256 along one dimension takes several TMA loads".into(),
                );
                ok = false;
            }
        }
        for (i, &s) in element_strides.iter().enumerate() {
            if !(1..=MAX_ELEMENT_STRIDE).contains(&s) {
                self.error(
                    &format!("{path}.element_strides[{i}]"),
                    format!("element stride {s} is outside 1..{MAX_ELEMENT_STRIDE}"),
                );
                ok = false;
            }
        }

        // Driver order: by increasing stride; the innermost must be contiguous.
        let mut order: Vec<usize> = (0..rank).collect();
        order.sort_by_key(|&d| (tensor.strides[d], std::cmp::Reverse(d)));
        let inner = order[0];
        if tensor.strides[inner] != 1 {
            self.error(
                &format!("{path}.tensor"),
                format!(
                    "`{}` has no contiguous dimension (smallest stride {}); TMA needs its innermost dimension to have stride 1",
                    tensor.name, tensor.strides[inner]
                ),
            );
            return None;
        }
        let dims: Vec<i64> = order.iter().map(|&d| tensor.shape[d]).collect();
        for (&d, &extent) in order.iter().zip(&dims) {
            if extent > MAX_GLOBAL_DIM {
                self.error(
                    &format!("{path}.tensor"),
                    format!(
                        "dimension {d} of `{}` has {extent} elements; TMA global dimensions are at most 2^32",
                        tensor.name
                    ),
                );
                ok = false;
            }
        }
        let alignment = if entry.interleave == TmaInterleave::B32 {
            32
        } else {
            16
        };
        let strides_bytes: Vec<i64> = order[1..]
            .iter()
            .map(|&d| tensor.strides[d] * element_bytes)
            .collect();
        for (&d, &bytes) in order[1..].iter().zip(&strides_bytes) {
            if bytes % alignment != 0 || bytes >= MAX_GLOBAL_STRIDE {
                let shape = tensor.shape_text.join(", ");
                self.error(
                    &format!("{path}.tensor"),
                    format!(
                        "the stride of dimension {d} ({}) of `{}` [{shape}] is {bytes} bytes; TMA needs global strides that are multiples of {alignment} bytes{}",
                        tensor.shape_text[d],
                        tensor.name,
                        if bytes >= MAX_GLOBAL_STRIDE { " and below 2^40" } else { "" }
                    ),
                )
                .help = Some(format!(
                    "{} elements of {} are {bytes} bytes: pad the leading dimension (explicit `strides`) or pick a size that makes the row a multiple of {alignment} bytes",
                    tensor.strides[d],
                    tensor.dtype.name()
                ));
                ok = false;
            }
        }

        // Rules on the inner box, the swizzle and the interleave.
        let inner_box_bytes = box_dims[inner] * element_bytes;
        let box_inner_path = format!("{path}.box[{inner}]");
        // The driver ignores the innermost dimension's element stride unless the layout is
        // interleaved (cuTensorMapEncodeTiled's documentation): the box would hold every element
        // of the row, not every s-th, and a kernel written for the strided box would read the
        // wrong ones with nothing to say why.
        if entry.interleave == TmaInterleave::None && element_strides[inner] != 1 {
            self.error(
                &format!("{path}.element_strides[{inner}]"),
                format!(
                    "element stride {} on dimension {inner} ({}) of `{}`, the contiguous one, is ignored by TMA without interleave: every element along it would be loaded",
                    element_strides[inner], tensor.shape_text[inner], tensor.name
                ),
            )
            .help = Some(format!(
                "use 1 there (a stride applies to the other dimensions), or load the whole row and keep one element in {} in the kernel",
                element_strides[inner]
            ));
            ok = false;
        }
        if entry.interleave == TmaInterleave::None && inner_box_bytes % 16 != 0 {
            self.error(
                &box_inner_path,
                format!(
                    "the innermost box extent {} x {} B = {inner_box_bytes} B is not a multiple of 16 bytes",
                    box_dims[inner], element_bytes
                ),
            )
            .help = Some(format!(
                "without interleave TMA moves whole 16-byte chunks along the contiguous dimension ({} of {})",
                16 / element_bytes.max(1),
                tensor.dtype.name()
            ));
            ok = false;
        }
        let span = entry.swizzle.span_bytes();
        if entry.interleave == TmaInterleave::None && span > 0 && inner_box_bytes > span {
            self.error(
                &box_inner_path,
                format!(
                    "the innermost box is {} x {} B = {inner_box_bytes} B, wider than the {} swizzle span of {span} B",
                    box_dims[inner],
                    element_bytes,
                    entry.swizzle.name()
                ),
            )
            .help = Some(format!(
                "with swizzle {} the innermost box holds at most {} elements of {}; a 128-byte row needs `swizzle: 128B` (or `none`)",
                entry.swizzle.name(),
                span / element_bytes.max(1),
                tensor.dtype.name()
            ));
            ok = false;
        }
        if entry.interleave != TmaInterleave::None && rank < 3 {
            self.error(
                &format!("{path}.interleave"),
                format!(
                    "interleave {} needs a tensor of rank 3 or more; `{}` has rank {rank}",
                    entry.interleave.name(),
                    tensor.name
                ),
            );
            ok = false;
        }
        if entry.interleave == TmaInterleave::B32 && entry.swizzle != TmaSwizzle::B32 {
            self.error(
                &format!("{path}.swizzle"),
                format!(
                    "interleave 32B requires swizzle 32B, not {}",
                    entry.swizzle.name()
                ),
            );
            ok = false;
        }
        if entry.oob_fill == TmaOobFill::Nan && !is_float_data_type(tensor.dtype) {
            self.error(
                &format!("{path}.oob_fill"),
                format!(
                    "a NaN out-of-bounds fill needs a floating-point element type; `{}` is {}",
                    tensor.name,
                    tensor.dtype.name()
                ),
            )
            .help = Some("use `oob_fill: none` (zeros)".into());
            ok = false;
        }
        if !ok {
            return None;
        }
        Some(TmaDescriptor {
            name: name.to_string(),
            tensor: index,
            data_type: data_type(tensor.dtype),
            dims,
            strides_bytes,
            box_dims: order.iter().map(|&d| box_dims[d]).collect(),
            element_strides: order.iter().map(|&d| element_strides[d]).collect(),
            order,
            swizzle: entry.swizzle,
            interleave: entry.interleave,
            l2_promotion: entry.l2_promotion,
            oob_fill: entry.oob_fill,
        })
    }

    /// A per-dimension list (`box`, `element_strides`): one integer or size expression per
    /// dimension of the tensor.
    fn tma_list(
        &mut self,
        path: &str,
        values: &[Value],
        rank: usize,
        sizes: &IndexMap<String, i64>,
    ) -> Option<Vec<i64>> {
        if values.len() != rank {
            self.error(
                path,
                format!(
                    "{} {} for a tensor of rank {rank}; give one per dimension, in `shape` order",
                    values.len(),
                    if values.len() == 1 {
                        "entry"
                    } else {
                        "entries"
                    }
                ),
            );
            return None;
        }
        let mut out = Vec::with_capacity(rank);
        for (i, v) in values.iter().enumerate() {
            out.push(self.dim(&format!("{path}[{i}]"), v, sizes)?.0);
        }
        Some(out)
    }
}
