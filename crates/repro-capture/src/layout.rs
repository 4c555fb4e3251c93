//! From one recorded launch to the spec's view of it: which buffer is which tensor (name, dtype,
//! shape), which parameter is which argument, and whether the launch can be rebuilt from source
//! (`kind: global`) or is replayed from its machine code (`kind: replay`).
//!
//! The driver says little: parameter offsets and sizes, the bytes, the allocations pointers fall
//! in, and how each tensor map was encoded. The kernel's declaration (`--source`) adds names and
//! element types; a tensor map adds a dtype and a shape for the buffer it covers.
//!
//! Below write.rs, which it may not import; views.rs is below it.

use crate::import::cuda::{KernelDecl, ParamType};
use crate::spec::dtype::DType;

use repro_text::split_top_level;

use super::record::{Capture, CapturedTensorMap};
use super::tensor::{instantiated, pointee_dtype, BufferTensor};

/// The parts of a demangled kernel name: `void ns::k<1, float>(float*, int)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demangled {
    pub name: String,
    pub template_args: Vec<String>,
    pub params: Vec<String>,
}

/// The index of the bracket that opens the one closing at `close` (both of `open`/`shut`).
fn matching_open(text: &str, close: usize, open: u8, shut: u8) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0;
    for i in (0..=close).rev() {
        if bytes[i] == shut {
            depth += 1;
        } else if bytes[i] == open {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// Parses a demangled function name; `None` for anything that does not end in a parameter list.
pub fn parse_demangled(text: &str) -> Option<Demangled> {
    let text = text.trim();
    if !text.ends_with(')') {
        return None;
    }
    let open = matching_open(text, text.len() - 1, b'(', b')')?;
    let params = split_top_level(&text[open + 1..text.len() - 1]);
    let params = if params == ["void"] {
        Vec::new()
    } else {
        params
    };
    let mut head = text[..open].trim_end();
    let mut template_args = Vec::new();
    if head.ends_with('>') {
        let at = matching_open(head, head.len() - 1, b'<', b'>')?;
        template_args = split_top_level(&head[at + 1..head.len() - 1]);
        head = head[..at].trim_end();
    }
    // A template's demangled name starts with its return type: the name is the last word.
    let name = head.rsplit(' ').next()?.to_string();
    let ok = name.split("::").all(crate::spec::names::is_cpp_identifier);
    ok.then_some(Demangled {
        name,
        template_args,
        params,
    })
}

/// The spec dtype of a `CU_TENSOR_MAP_DATA_TYPE_*` value, and its lowercase name.
pub fn tensor_map_type(value: u32) -> Option<(&'static str, Option<DType>)> {
    let (name, _) = crate::spec::TENSOR_MAP_TYPES.get(value as usize)?;
    let dtype = match *name {
        "uint8" | "16u4_align8b" | "16u4_align16b" | "16u6_align16b" => Some(DType::U8),
        "uint32" => Some(DType::U32),
        "int32" => Some(DType::I32),
        "int64" => Some(DType::I64),
        "float16" => Some(DType::F16),
        "float32" | "float32_ftz" => Some(DType::F32),
        "float64" => Some(DType::F64),
        "bfloat16" => Some(DType::Bf16),
        "tfloat32" | "tfloat32_ftz" => Some(DType::Tf32),
        _ => None,
    };
    Some((name, dtype))
}

/// The spec's names of the CUtensorMap enums (`none`, `128B`...), `None` for values this repro
/// does not know (the CUDA 12.8 swizzle atoms).
pub fn swizzle_name(v: u32) -> Option<&'static str> {
    ["none", "32B", "64B", "128B"].get(v as usize).copied()
}
pub fn interleave_name(v: u32) -> Option<&'static str> {
    ["none", "16B", "32B"].get(v as usize).copied()
}
pub fn l2_name(v: u32) -> Option<&'static str> {
    ["none", "64B", "128B", "256B"].get(v as usize).copied()
}
pub fn oob_name(v: u32) -> Option<&'static str> {
    ["none", "nan"].get(v as usize).copied()
}

/// How one parameter is passed, for `kind: global`.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamRole {
    /// A device address: tensor index, element offset (with the pointee type for the cast).
    Pointer {
        tensor: usize,
        element_offset: u64,
        element: String,
    },
    Null,
    /// A CUtensorMap over the whole of tensor `tensor`: the spec's `tma:` entry `name`.
    TensorMap {
        tensor: usize,
        map: usize,
        name: String,
    },
    /// An integer: a size named after the parameter, or a literal.
    Size {
        name: String,
        value: i64,
    },
    Literal(String),
}

/// Everything the spec needs to know of the launch.
#[derive(Debug, Clone)]
pub struct LaunchLayout {
    pub tensors: Vec<BufferTensor>,
    /// `Some` when the launch can be rebuilt from the declaration (kind: global).
    pub global: Option<Vec<ParamRole>>,
    /// Why it cannot, when it cannot.
    pub global_blocked: Option<String>,
    pub sizes: Vec<(String, i64)>,
}

/// The parameter bytes at `offset..offset + size`, if the record's numbers lie inside them
/// (checked: the record is a file the program could have written anything into).
fn element_size(params: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = usize::try_from(offset.checked_add(size)?).ok()?;
    params.get(start..end)
}

/// `map_a` -> `A`, `tma_scores` -> `scores`: the tensor a map parameter's name suggests.
fn tensor_name_of_map(param: &str) -> String {
    let mut name = param;
    for prefix in ["tmap_", "map_", "tma_", "desc_", "tensor_map_"] {
        name = name.strip_prefix(prefix).unwrap_or(name);
    }
    for suffix in ["_tmap", "_map", "_desc", "_tma", "_tensor_map"] {
        name = name.strip_suffix(suffix).unwrap_or(name);
    }
    if name.len() == 1 {
        name.to_ascii_uppercase()
    } else {
        name.to_string()
    }
}

/// A name for a tensor or size not used yet (and legal in the harness).
fn unique(wanted: &str, fallback: &str, taken: &mut Vec<String>) -> String {
    let base = if crate::spec::names::identifier_problem(wanted).is_none() {
        wanted.to_string()
    } else {
        fallback.to_string()
    };
    let mut name = base.clone();
    let mut k = 2;
    while taken.contains(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    taken.push(name.clone());
    name
}

/// Whether a map covers exactly a packed tensor that starts at the buffer's base: then the
/// buffer is that tensor ([outer.., inner] from the map's dims), else `None`.
fn packed_view(map: &CapturedTensorMap, element: u64, buffer_size: u64) -> Option<(Vec<u64>, u64)> {
    if map.byte_offset != 0 || map.kind != "tiled" || map.dims.is_empty() {
        return None;
    }
    let mut expected = map.dims[0] * element;
    for (i, &stride) in map.strides.iter().enumerate() {
        if stride != expected {
            return None;
        }
        expected = stride * map.dims[i + 1];
    }
    let bytes = expected;
    (bytes <= buffer_size).then(|| (map.dims.iter().rev().copied().collect(), bytes))
}

/// Lays the capture out: tensors, and the parameters' roles when `decl` is the kernel's
/// declaration and every parameter is one the spec can pass.
pub fn lay_out(
    raw: &std::path::Path,
    capture: &Capture,
    params: &[u8],
    decl: Option<&KernelDecl>,
    template_args: &[String],
    views: &[super::views::TensorView],
) -> Result<LaunchLayout, String> {
    let layout = &capture.params.layout;
    let param_name = |index: usize| -> Option<String> {
        decl.and_then(|d| d.params.get(index))
            .and_then(|p| p.name.clone())
    };
    let mut taken: Vec<String> = Vec::new();
    let mut tensors: Vec<BufferTensor> = Vec::new();
    for buffer in &capture.buffers {
        // What names and types the buffer: a whole-parameter pointer, a map over it.
        let pointer_param = capture.pointers.iter().find(|p| {
            p.buffer == buffer.id
                && layout
                    .get(p.param)
                    .is_some_and(|slot| slot.offset == p.offset && slot.size == 8)
        });
        let map = capture
            .tensor_maps
            .iter()
            .find(|m| m.buffer == Some(buffer.id));
        let wanted = match (pointer_param, map) {
            (Some(p), _) => param_name(p.param),
            (None, Some(m)) => param_name(m.param).map(|n| tensor_name_of_map(&n)),
            _ => None,
        };
        let fallback = format!("buffer{}", buffer.id);
        let name = unique(
            wanted.as_deref().unwrap_or(&fallback),
            &fallback,
            &mut taken,
        );
        let mut tensor = BufferTensor {
            buffer: buffer.id,
            name,
            dtype: DType::U8,
            shape: vec![buffer.size],
            col_major: false,
            strides: None,
            view: false,
            start: 0,
            bytes: buffer.size,
            output: buffer.after.is_some(),
            origin: format!("the allocation's {} bytes", buffer.size),
        };
        let map_view = map.and_then(|m| {
            let (_, dtype) = tensor_map_type(m.data_type)?;
            let dtype = dtype?;
            let (shape, bytes) = packed_view(m, dtype.bytes() as u64, buffer.size)?;
            Some((dtype, shape, bytes))
        });
        let pointee = pointer_param.and_then(|p| pointee_dtype(decl?, template_args, p.param));
        if let Some((dtype, shape, bytes)) = map_view {
            tensor.dtype = dtype;
            tensor.shape = shape;
            tensor.bytes = bytes;
            tensor.origin = "the tensor map encoded over it".into();
        } else if let Some(dtype) = pointee.filter(|d| buffer.size % d.bytes() as u64 == 0) {
            tensor.dtype = dtype;
            tensor.shape = vec![buffer.size / dtype.bytes() as u64];
            tensor.origin = "the kernel's pointer type, over the whole allocation".into();
        }
        tensors.push(tensor);
    }
    super::views::apply(
        &mut tensors,
        raw,
        capture,
        params,
        decl,
        template_args,
        views,
    )?;
    let mut sizes = Vec::new();
    let (global, global_blocked) = match decl {
        None => (
            None,
            Some("no kernel source (--source) to rebuild the launch from".into()),
        ),
        Some(decl) => match global_roles(
            capture,
            params,
            decl,
            template_args,
            &tensors,
            &mut taken,
            &mut sizes,
        ) {
            Ok(roles) => (Some(roles), None),
            Err(why) => {
                sizes.clear();
                (None, Some(why))
            }
        },
    };
    Ok(LaunchLayout {
        tensors,
        global,
        global_blocked,
        sizes,
    })
}

/// Each parameter's role in a `kind: global` launch, or why one has none.
fn global_roles(
    capture: &Capture,
    params: &[u8],
    decl: &KernelDecl,
    template_args: &[String],
    tensors: &[BufferTensor],
    taken: &mut Vec<String>,
    sizes: &mut Vec<(String, i64)>,
) -> Result<Vec<ParamRole>, String> {
    let layout = &capture.params.layout;
    if decl.params.len() != layout.len() {
        return Err(format!(
            "the declaration at {} has {} parameters and the launched kernel {}",
            decl.location(),
            decl.params.len(),
            layout.len()
        ));
    }
    let tensor_of = |buffer: usize, at: u64| super::tensor::tensor_at(tensors, buffer, at);
    let mut roles = Vec::new();
    let mut maps = 0;
    for (slot, param) in layout.iter().zip(&decl.params) {
        let label = param
            .name
            .clone()
            .unwrap_or_else(|| format!("parameter {}", slot.index));
        let bytes = element_size(params, slot.offset, slot.size)
            .ok_or_else(|| format!("{label}: past the captured parameter bytes"))?;
        let role = match &param.ty {
            ParamType::Pointer { element, .. } => {
                let value = u64::from_le_bytes(
                    bytes
                        .try_into()
                        .map_err(|_| format!("{label}: a pointer of {} bytes", slot.size))?,
                );
                match capture.pointers.iter().find(|p| p.offset == slot.offset) {
                    None if value == 0 => ParamRole::Null,
                    None => {
                        return Err(format!(
                            "{label} points outside every device allocation (host memory?)"
                        ))
                    }
                    Some(p) => {
                        let (tensor, byte_offset) = tensor_of(p.buffer, p.byte_offset)
                            .ok_or("a pointer to an unknown buffer")?;
                        let t = &tensors[tensor];
                        let size = t.dtype.bytes() as u64;
                        if byte_offset % size != 0 || byte_offset >= t.bytes {
                            return Err(format!(
                                "{label} points at byte {byte_offset} of {}, not at one of its elements",
                                t.name
                            ));
                        }
                        let element = instantiated(decl, template_args, element);
                        ParamRole::Pointer {
                            tensor,
                            element_offset: byte_offset / size,
                            element,
                        }
                    }
                }
            }
            ParamType::TensorMap => {
                let m = capture
                    .tensor_maps
                    .iter()
                    .find(|m| m.offset == slot.offset)
                    .ok_or_else(|| {
                        format!("{label}: no encode call of this CUtensorMap was seen")
                    })?;
                let tensor = m
                    .buffer
                    .and_then(|b| tensor_of(b, m.byte_offset))
                    .map(|(t, _)| t)
                    .ok_or_else(|| format!("{label}: its global address is in no allocation"))?;
                if tensors[tensor].origin != "the tensor map encoded over it" {
                    return Err(format!(
                        "{label} covers part of {}, not a whole packed tensor",
                        tensors[tensor].name
                    ));
                }
                for (what, ok) in [
                    ("swizzle", swizzle_name(m.swizzle).is_some()),
                    ("interleave", interleave_name(m.interleave).is_some()),
                    ("L2 promotion", l2_name(m.l2_promotion).is_some()),
                    ("OOB fill", oob_name(m.oob_fill).is_some()),
                ] {
                    if !ok {
                        return Err(format!(
                            "{label}: its {what} is one repro's tma: entries do not know"
                        ));
                    }
                }
                let name = unique(
                    &param.name.clone().unwrap_or_default(),
                    &format!("map{maps}"),
                    taken,
                );
                maps += 1;
                ParamRole::TensorMap {
                    tensor,
                    map: capture
                        .tensor_maps
                        .iter()
                        .position(|x| std::ptr::eq(x, m))
                        .expect("found"),
                    name,
                }
            }
            ParamType::Integer(_) | ParamType::Bool => {
                let value = match slot.size {
                    1 => i64::from(bytes[0]),
                    2 => i64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
                    4 => i64::from(i32::from_le_bytes(bytes.try_into().expect("4 bytes"))),
                    8 => i64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                    n => return Err(format!("{label}: an integer of {n} bytes")),
                };
                if matches!(param.ty, ParamType::Bool) {
                    ParamRole::Literal(if value != 0 { "true" } else { "false" }.into())
                } else {
                    match &param.name {
                        Some(n)
                            if slot.size == 4
                                && crate::spec::names::identifier_problem(n).is_none()
                                && !taken.contains(n) =>
                        {
                            taken.push(n.clone());
                            sizes.push((n.clone(), value));
                            ParamRole::Size {
                                name: n.clone(),
                                value,
                            }
                        }
                        _ => ParamRole::Literal(value.to_string()),
                    }
                }
            }
            ParamType::Float(t) if slot.size == 4 => {
                let x = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
                if !x.is_finite() {
                    return Err(format!("{label} is {x}"));
                }
                let text = format!("{x:?}");
                ParamRole::Literal(format!("static_cast<{t}>({text}f)"))
            }
            ParamType::Float(t) if slot.size == 8 => {
                let x = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                if !x.is_finite() {
                    return Err(format!("{label} is {x}"));
                }
                ParamRole::Literal(format!("static_cast<{t}>({x:?})"))
            }
            other => {
                return Err(format!(
                "{label} is passed as `{}`, which a spec's kernel.args cannot rebuild from bytes",
                param_type_text(other)
            ))
            }
        };
        roles.push(role);
    }
    Ok(roles)
}

fn param_type_text(ty: &ParamType) -> String {
    match ty {
        ParamType::Float(t)
        | ParamType::Integer(t)
        | ParamType::TemplateValue(t)
        | ParamType::Other(t) => t.clone(),
        ParamType::Pointer { element, .. } => format!("{element}*"),
        ParamType::Bool => "bool".into(),
        ParamType::TensorMap => "CUtensorMap".into(),
    }
}

/// `reference: op: gemm` names A, B and the output: lay them out as a GEMM's operands. A is
/// [M, K]; B, stored [N, K] (K contiguous, a linear layer's weight) or [K, N], becomes the
/// logical [K, N]; a 1-D output of M * N elements becomes [M, N].
pub fn shape_as_gemm(
    tensors: &mut [BufferTensor],
    a: &str,
    b: &str,
    out: &str,
) -> Result<(), String> {
    let find = |name: &str| {
        tensors.iter().position(|t| t.name == name).ok_or_else(|| {
            format!("the reference names `{name}`, and the capture has no such tensor")
        })
    };
    let (ia, ib, io) = (find(a)?, find(b)?, find(out)?);
    let (m, k) = match tensors[ia].shape[..] {
        [m, k] => (m, k),
        _ => {
            return Err(format!(
            "{a} is {:?}; a GEMM's A is [M, K] (give its kernel a tensor map, or edit its shape)",
            tensors[ia].shape
        ))
        }
    };
    let n = match tensors[ib].shape[..] {
        [rows, cols] if cols == k && rows != k => {
            tensors[ib].shape = vec![k, rows];
            tensors[ib].col_major = true;
            rows
        }
        [rows, cols] if rows == k => cols,
        _ => {
            return Err(format!(
                "{b} is {:?}; with A [{m}, {k}] a GEMM's B is [{k}, N] or stored [N, {k}]",
                tensors[ib].shape
            ))
        }
    };
    let o = &mut tensors[io];
    if o.shape.len() == 1 && o.numel() >= m * n {
        o.shape = vec![m, n];
        o.bytes = m * n * o.dtype.bytes() as u64;
    } else if o.shape != [m, n] {
        return Err(format!(
            "{out} is {:?}; the GEMM's output is [{m}, {n}]",
            o.shape
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangled_names() {
        let d = parse_demangled(
            "void tma_gemm<128, 128, 64, 4, 128, (tma_kernels::SmemSwizzle)3>(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16*, int, int, int)",
        )
        .unwrap();
        assert_eq!(d.name, "tma_gemm");
        assert_eq!(
            d.template_args,
            [
                "128",
                "128",
                "64",
                "4",
                "128",
                "(tma_kernels::SmemSwizzle)3"
            ]
        );
        assert_eq!(d.params.len(), 6);
        let d = parse_demangled("capture_app::zero_bf16(__nv_bfloat16*, unsigned long)").unwrap();
        assert_eq!(d.name, "capture_app::zero_bf16");
        assert!(d.template_args.is_empty());
        let d = parse_demangled(
            "void scaled_add<float, 4>(float const*, float const*, float*, float, int, int)",
        )
        .unwrap();
        assert_eq!(d.template_args, ["float", "4"]);
        assert!(parse_demangled("nvjet_hsh_64x8_64x16_2x1_v_bz_TNT").is_none());
        assert!(parse_demangled("k(void)").unwrap().params.is_empty());
    }

    #[test]
    fn map_parameters_name_their_tensors() {
        assert_eq!(tensor_name_of_map("map_a"), "A");
        assert_eq!(tensor_name_of_map("tma_scores"), "scores");
        assert_eq!(tensor_name_of_map("weights_desc"), "weights");
    }

    fn tensor(name: &str, shape: Vec<u64>) -> BufferTensor {
        BufferTensor {
            buffer: 0,
            name: name.into(),
            dtype: DType::Bf16,
            bytes: shape.iter().product::<u64>() * 2,
            shape,
            col_major: false,
            strides: None,
            view: false,
            start: 0,
            output: false,
            origin: String::new(),
        }
    }

    #[test]
    fn gemm_operands_take_their_logical_shapes() {
        let mut t = vec![
            tensor("A", vec![1000, 520]),
            tensor("B", vec![744, 520]),
            tensor("D", vec![744000]),
        ];
        shape_as_gemm(&mut t, "A", "B", "D").unwrap();
        assert_eq!(t[1].shape, [520, 744]);
        assert!(t[1].col_major);
        assert_eq!(t[1].driver_dim(0), 0, "K is innermost in storage");
        assert_eq!(t[0].driver_dim(0), 1);
        assert_eq!(t[2].shape, [1000, 744]);
        let mut t = vec![
            tensor("A", vec![8]),
            tensor("B", vec![2, 4]),
            tensor("D", vec![8]),
        ];
        assert!(shape_as_gemm(&mut t, "A", "B", "D")
            .unwrap_err()
            .contains("[M, K]"));
    }
}
