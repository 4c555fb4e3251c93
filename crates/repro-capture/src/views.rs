//! `repro capture --tensor NAME=[DTYPE][DIMS][:col_major]`: a tensor carved out of the
//! allocation a pointer parameter points into.
//!
//! The driver knows allocations, not tensors: PyTorch's caching allocator hands out pieces of
//! large segments, so two tensors of one launch (a softmax's input and output) can share one
//! allocation, and a GEMM operand sits at some offset of a 2 MiB or 20 MiB block. The capture
//! then records the allocation as one byte buffer, which replays bit for bit but gives `--ones`
//! and the probes nothing to shape. A view says what the parameter's tensor is: its element type
//! (default: the parameter's, from `--source` or a Triton signature), its dimensions (numbers, or
//! the names of integer parameters, whose captured values are taken), row-major unless
//! `:col_major`. The view starts at the pointer and must end inside the allocation. The rest of
//! an allocation a view is carved from becomes one tensor per pointer parameter into it (a
//! decoding kernel's q, k, v beside a view on its output), so one view is enough.
//!
//! Below layout.rs and write.rs, which use it: it imports neither (tensor.rs and record.rs hold
//! what they share).

use std::path::Path;

use crate::import::cuda::{KernelDecl, ParamType};
use crate::spec::dtype::DType;

use super::record::Capture;
use super::tensor::{pointee_dtype, BufferTensor};

/// One `--tensor` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorView {
    pub text: String,
    /// `launchK.NAME`: launch K (from 1) of a window only; `None`: every launch with a pointer
    /// parameter NAME (a window's, sequence.rs), or the one launch.
    pub launch: Option<usize>,
    pub name: String,
    /// `NAME@BYTE`: the pointer stored at byte BYTE of the launch's parameter bytes (a field of a
    /// parameter struct, as FlashAttention's `Flash_bwd_params` or a CUTLASS kernel's `Params`),
    /// named NAME; `None`: the pointer parameter NAME.
    pub at: Option<u64>,
    pub dtype: Option<DType>,
    pub dims: Vec<Dim>,
    pub col_major: bool,
    /// `:strides[S0, S1, ...]`: element strides, one per dimension (FlashAttention's [B, S, H,
    /// D] storage read as [B, H, S, D]); `None`: packed, row-major or `col_major`.
    pub strides: Option<Vec<u64>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Number(u64),
    /// An integer parameter's name: its captured value.
    Parameter(String),
}

const FORM: &str = "NAME=[DTYPE][DIM, ...][:col_major | :strides[S, ...]], e.g. a_ptr=[M, K] or b_ptr=bf16[K, N]:col_major, \
     or NAME@BYTE=DTYPE[DIM, ...] for the pointer at byte BYTE of the parameters, e.g. q@0=bf16[2, 4, 256, 64]";

/// Parses `a_ptr=bf16[M, K]:col_major`.
pub fn parse(text: &str) -> Result<TensorView, String> {
    let bad = |why: &str| format!("--tensor {text}: {why}; the form is {FORM}");
    let (name, rest) = text
        .split_once('=')
        .ok_or_else(|| bad("no `=` after the parameter's name"))?;
    let name = name.trim();
    // `launch2.o`: the parameter `o` of a window's launch 2 (docs/cli.md, "A window of launches").
    let (launch, name) = match name.split_once('.') {
        None => (None, name),
        Some((prefix, rest)) => match prefix
            .strip_prefix("launch")
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|k| *k >= 1)
        {
            Some(k) => (Some(k), rest.trim()),
            None => {
                return Err(bad(
                    "the name is no parameter name (nor launchK.NAME, a window's launch K)",
                ))
            }
        },
    };
    // `q@0`: the pointer at byte 0 of the parameters, named q.
    let (name, at) = match name.split_once('@') {
        None => (name, None),
        Some((name, byte)) => match byte.trim().parse::<u64>() {
            Ok(byte) if byte % 8 == 0 => (name.trim(), Some(byte)),
            Ok(_) => return Err(bad("a pointer's byte in the parameters is a multiple of 8")),
            Err(_) => {
                return Err(bad(&format!(
                    "`{}` after `@` is no byte offset in the parameters",
                    byte.trim()
                )))
            }
        },
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(bad("the name is no parameter name"));
    }
    let rest = rest.trim();
    let mut strides = None;
    let (rest, col_major) = match rest.rsplit_once(':') {
        Some((shape, "col_major")) => (shape.trim(), true),
        Some((shape, "row_major")) => (shape.trim(), false),
        Some((shape, layout)) if layout.trim_start().starts_with("strides") => {
            let list = layout
                .trim_start()
                .strip_prefix("strides")
                .map(str::trim)
                .and_then(|l| l.strip_prefix('['))
                .and_then(|l| l.strip_suffix(']'))
                .ok_or_else(|| bad("strides are written strides[S, ...], in elements"))?;
            let parsed: Result<Vec<u64>, _> = list
                .split(',')
                .map(|x| x.trim().parse::<u64>().map_err(|_| x.trim().to_string()))
                .collect();
            match parsed {
                Ok(list) if list.iter().all(|&x| x > 0) => strides = Some(list),
                Ok(_) => return Err(bad("a stride is 0")),
                Err(x) => return Err(bad(&format!("the stride `{x}` is no number of elements"))),
            }
            (shape.trim(), false)
        }
        Some((_, other)) => {
            return Err(bad(&format!(
                "`{other}` is no layout (col_major or row_major)"
            )))
        }
        None => (rest, false),
    };
    let open = rest
        .find('[')
        .ok_or_else(|| bad("no `[` before the dimensions"))?;
    let close = rest
        .strip_suffix(']')
        .ok_or_else(|| bad("the dimensions do not end with `]`"))?;
    let dtype = match rest[..open].trim() {
        "" => None,
        d => Some(DType::from_name(d).ok_or_else(|| {
            bad(&format!(
                "`{d}` is no dtype ({})",
                DType::ALL
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })?),
    };
    let mut dims = Vec::new();
    for item in close[open + 1..].split(',') {
        let item = item.trim();
        dims.push(match item.parse::<u64>() {
            Ok(0) => return Err(bad("a dimension is 0")),
            Ok(n) => Dim::Number(n),
            Err(_)
                if !item.is_empty()
                    && item.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                Dim::Parameter(item.to_string())
            }
            Err(_) => {
                return Err(bad(&format!(
                    "`{item}` is neither a number nor a parameter name"
                )))
            }
        });
    }
    if dims.is_empty() || dims.len() > 4 {
        return Err(bad("a tensor has 1 to 4 dimensions"));
    }
    if strides.as_ref().is_some_and(|s| s.len() != dims.len()) {
        return Err(bad("give one stride per dimension"));
    }
    if col_major && dims.len() != 2 {
        return Err(bad("col_major is for 2-D tensors"));
    }
    if at.is_some() && dtype.is_none() {
        return Err(bad(
            "a view at a byte of the parameters gives its dtype: NAME@BYTE=DTYPE[...]",
        ));
    }
    Ok(TensorView {
        text: text.to_string(),
        launch,
        name: name.to_string(),
        at,
        dtype,
        dims,
        col_major,
        strides,
    })
}

/// An integer parameter's captured value.
fn integer_value(capture: &Capture, params: &[u8], index: usize) -> Option<i64> {
    let slot = capture.params.layout.iter().find(|s| s.index == index)?;
    let bytes = params.get(slot.offset as usize..(slot.offset + slot.size) as usize)?;
    Some(match bytes.len() {
        1 => i8::from_le_bytes([bytes[0]]) as i64,
        2 => i16::from_le_bytes(bytes.try_into().ok()?) as i64,
        4 => i32::from_le_bytes(bytes.try_into().ok()?) as i64,
        8 => i64::from_le_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}

/// The integer parameters and their captured values, for messages and the spec's comments.
pub fn integer_parameters(
    capture: &Capture,
    params: &[u8],
    decl: &KernelDecl,
) -> Vec<(String, i64)> {
    decl.params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.ty, ParamType::Integer(_)))
        .filter_map(|(i, p)| Some((p.name.clone()?, integer_value(capture, params, i)?)))
        .collect()
}

/// The pointer a view starts at, and its parameter's index: the pointer parameter it names
/// (which needs the parameters' names), or the pointer at byte `@BYTE` of the parameter bytes
/// (which does not: a field of a parameter struct).
fn find_pointer<'a>(
    capture: &'a Capture,
    decl: Option<&KernelDecl>,
    view: &TensorView,
) -> Result<(&'a super::record::CapturedPointer, usize), String> {
    if let Some(byte) = view.at {
        return capture
            .pointers
            .iter()
            .find(|p| p.offset == byte)
            .map(|p| (p, p.param))
            .ok_or_else(|| {
                let bytes: Vec<String> = capture.pointers.iter().map(|p| p.offset.to_string()).collect();
                format!(
                    "--tensor {}: byte {byte} of {}'s parameters holds no pointer into a device allocation (pointers \
                     are at bytes {})",
                    view.text,
                    capture.kernel.demangled,
                    if bytes.is_empty() { "none".to_string() } else { bytes.join(", ") }
                )
            });
    }
    let decl = decl.ok_or_else(|| {
        format!(
            "--tensor {}: names a pointer parameter, and this kernel's parameters have no names: give --source DIR \
             (a Triton kernel's signature names them by itself), or name the pointer by its byte in the parameters \
             ({}@BYTE=DTYPE[...]; a capture without views lists them: `at:` in each launch's `relocate:`)",
            view.text, view.name
        )
    })?;
    let pointer_names: Vec<&str> = decl
        .params
        .iter()
        .filter(|p| matches!(p.ty, ParamType::Pointer { .. }))
        .filter_map(|p| p.name.as_deref())
        .collect();
    let index = decl
        .params
        .iter()
        .position(|p| {
            p.name.as_deref() == Some(view.name.as_str())
                && matches!(p.ty, ParamType::Pointer { .. })
        })
        .ok_or_else(|| {
            format!(
                "--tensor {}: `{}` is no pointer parameter of {} (its pointers: {})",
                view.text,
                view.name,
                decl.name,
                pointer_names.join(", ")
            )
        })?;
    let slot = capture.params.layout.iter().find(|s| s.index == index);
    let pointer = capture
        .pointers
        .iter()
        .find(|p| p.param == index && slot.is_some_and(|s| s.offset == p.offset))
        .ok_or_else(|| {
            format!(
                "--tensor {}: `{}` is null or points outside every device allocation",
                view.text, view.name
            )
        })?;
    Ok((pointer, index))
}

/// Replaces the tensors the views carve out: each view becomes a tensor at its pointer's
/// offset; an allocation every pointer and map of which now lands in a view is no tensor of its
/// own any more.
pub fn apply(
    tensors: &mut Vec<BufferTensor>,
    raw: &Path,
    capture: &Capture,
    params: &[u8],
    decl: Option<&KernelDecl>,
    template_args: &[String],
    views: &[TensorView],
) -> Result<(), String> {
    if views.is_empty() {
        return Ok(());
    }
    let integers = decl
        .map(|d| integer_parameters(capture, params, d))
        .unwrap_or_default();
    let mut carved: Vec<BufferTensor> = Vec::new();
    for view in views {
        let (pointer, index) = find_pointer(capture, decl, view)?;
        let buffer = capture
            .buffers
            .iter()
            .find(|b| b.id == pointer.buffer)
            .ok_or_else(|| format!("--tensor {}: its allocation was not captured", view.text))?;
        let mut shape = Vec::new();
        for dim in &view.dims {
            shape.push(match dim {
                Dim::Number(n) => *n,
                Dim::Parameter(name) => {
                    let value = integers
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| *v)
                        .ok_or_else(|| {
                            let known: Vec<String> =
                                integers.iter().map(|(n, v)| format!("{n} = {v}")).collect();
                            format!(
                                "--tensor {}: `{name}` is no integer parameter (they are: {})",
                                view.text,
                                if decl.is_none() {
                                    "none with a name: this kernel's parameters have no names, give a number"
                                        .to_string()
                                } else if known.is_empty() {
                                    "none".to_string()
                                } else {
                                    known.join(", ")
                                }
                            )
                        })?;
                    u64::try_from(value)
                        .ok()
                        .filter(|v| *v > 0)
                        .ok_or_else(|| {
                            format!("--tensor {}: `{name}` is {value}, no dimension", view.text)
                        })?
                }
            });
        }
        // A view at a byte gives its dtype (parse), one by name has the declaration.
        let dtype = match view.dtype {
            Some(d) => d,
            None => decl.and_then(|decl| pointee_dtype(decl, template_args, index)).ok_or_else(|| {
                format!(
                    "--tensor {}: `{}` points to no element type repro knows: give one, e.g. {}=bf16[...]",
                    view.text, view.name, view.name
                )
            })?,
        };
        // Strided: from the first element to one past the last one the strides reach.
        let bytes = match &view.strides {
            None => shape
                .iter()
                .try_fold(dtype.bytes() as u64, |acc, &d| acc.checked_mul(d)),
            Some(strides) => shape
                .iter()
                .zip(strides)
                .try_fold(1u64, |acc, (&d, &s)| {
                    acc.checked_add((d - 1).checked_mul(s)?)
                })
                .and_then(|elements| elements.checked_mul(dtype.bytes() as u64)),
        }
        .ok_or_else(|| format!("--tensor {}: too many elements", view.text))?;
        let end = pointer.byte_offset.saturating_add(bytes);
        if end > buffer.size {
            return Err(format!(
                "--tensor {}: {shape:?} {} is {bytes} bytes from byte {} of its allocation, which ends at byte {}: \
                 the view reaches past it (a wrong dimension or dtype?)",
                view.text,
                dtype.name(),
                pointer.byte_offset,
                buffer.size
            ));
        }
        if let Some(other) = carved.iter().find(|t| {
            t.buffer == buffer.id && t.start < end && pointer.byte_offset < t.start + t.bytes
        }) {
            return Err(format!(
                "--tensor {}: overlaps the view of {}",
                view.text, other.name
            ));
        }
        carved.push(BufferTensor {
            buffer: buffer.id,
            name: view.name.clone(),
            dtype,
            shape,
            col_major: view.col_major,
            strides: view.strides.clone(),
            view: true,
            start: pointer.byte_offset,
            bytes,
            // Refined when the bytes are read: only a view whose own bytes changed is an output.
            output: buffer.after.is_some(),
            origin: format!("--tensor {}", view.text),
        });
    }
    // The rest of a segment is cut into one tensor per named pointer parameter; a kernel whose
    // parameters have no names (views at bytes of a parameter struct) leaves it whole.
    let pieces = match decl {
        Some(decl) => split_segments(tensors, raw, capture, decl, template_args, &carved),
        None => Vec::new(),
    };
    let inside_a_view = |buffer: usize, at: u64| {
        carved
            .iter()
            .chain(&pieces)
            .any(|t| t.buffer == buffer && t.start <= at && at < t.start + t.bytes)
    };
    tensors.retain(|t| {
        let pointers_covered = capture
            .pointers
            .iter()
            .filter(|p| p.buffer == t.buffer)
            .all(|p| inside_a_view(p.buffer, p.byte_offset));
        let maps_covered = capture
            .tensor_maps
            .iter()
            .filter(|m| m.buffer == Some(t.buffer))
            .all(|m| inside_a_view(t.buffer, m.byte_offset));
        !(pointers_covered && maps_covered && carved.iter().any(|v| v.buffer == t.buffer))
    });
    // An allocation kept whole gives up a name a view takes.
    for t in tensors.iter_mut() {
        if carved.iter().chain(&pieces).any(|v| v.name == t.name) {
            t.name = format!("buffer{}", t.buffer);
        }
    }
    tensors.extend(carved);
    tensors.extend(pieces);
    Ok(())
}

/// The rest of each allocation a view is carved from, as one tensor per pointer parameter that
/// points into it outside every view: from its pointer up to the next pointer, the next view or
/// the allocation's end, typed by the parameter's element (bytes where the span is no whole
/// number of elements), named after the parameter. PyTorch's caching allocator puts a decoding
/// kernel's q, k, v, cu_seqlens and o in one segment: a view on `o` alone then leaves `q`, `k`,
/// `v` and `cu_seqlens` inputs of their own, and `o` the only output (docs/cli.md, `repro
/// capture`).
///
/// None where the split would not replay the launch as captured, and the allocation stays one
/// tensor beside its views: a tensor map lands in it outside every view, or the launch changed
/// bytes no piece and no view holds (before the first pointer, between a view's end and the next
/// pointer), or the bytes cannot be read to say.
fn split_segments(
    tensors: &[BufferTensor],
    raw: &Path,
    capture: &Capture,
    decl: &KernelDecl,
    template_args: &[String],
    carved: &[BufferTensor],
) -> Vec<BufferTensor> {
    let mut pieces = Vec::new();
    for buffer in &capture.buffers {
        let views: Vec<&BufferTensor> = carved.iter().filter(|v| v.buffer == buffer.id).collect();
        if views.is_empty() {
            continue;
        }
        let in_view = |at: u64| {
            views
                .iter()
                .any(|v| v.start <= at && at < v.start + v.bytes)
        };
        if capture
            .tensor_maps
            .iter()
            .any(|m| m.buffer == Some(buffer.id) && !in_view(m.byte_offset))
        {
            continue;
        }
        // Whole-parameter pointers outside every view, by where they point (the first
        // parameter of several with one pointer names it).
        let mut starts: Vec<(u64, usize)> = capture
            .pointers
            .iter()
            .filter(|p| p.buffer == buffer.id && !in_view(p.byte_offset))
            .filter(|p| {
                capture
                    .params
                    .layout
                    .iter()
                    .any(|s| s.index == p.param && s.offset == p.offset && s.size == 8)
            })
            .map(|p| (p.byte_offset, p.param))
            .collect();
        starts.sort();
        starts.dedup_by_key(|(at, _)| *at);
        let boundaries: Vec<u64> = starts
            .iter()
            .map(|(at, _)| *at)
            .chain(views.iter().map(|v| v.start))
            .chain([buffer.size])
            .collect();
        // The allocation's own tensor gives its name up to the piece that takes it.
        let mut taken: Vec<String> = tensors
            .iter()
            .filter(|t| t.buffer != buffer.id)
            .chain(carved)
            .chain(&pieces)
            .map(|t| t.name.clone())
            .collect();
        let mut own = Vec::new();
        for &(start, param) in &starts {
            let end = boundaries
                .iter()
                .copied()
                .filter(|&b| b > start)
                .min()
                .unwrap_or(buffer.size);
            let Some(name) = decl.params.get(param).and_then(|p| p.name.clone()) else {
                own.clear();
                break;
            };
            if crate::spec::names::identifier_problem(&name).is_some() || taken.contains(&name) {
                own.clear();
                break;
            }
            taken.push(name.clone());
            let bytes = end - start;
            let dtype = pointee_dtype(decl, template_args, param)
                .filter(|d| bytes % d.bytes() as u64 == 0)
                .unwrap_or(DType::U8);
            own.push(BufferTensor {
                buffer: buffer.id,
                name: name.clone(),
                dtype,
                shape: vec![bytes / dtype.bytes() as u64],
                col_major: false,
                strides: None,
                view: true,
                start,
                bytes,
                output: buffer.after.is_some(),
                origin: format!(
                    "`{name}`'s pointer, up to the next tensor of its allocation ({} bytes from byte {start})",
                    bytes
                ),
            });
        }
        if own.is_empty() {
            continue;
        }
        let held = |at: u64| {
            views
                .iter()
                .copied()
                .chain(&own)
                .any(|t| t.start <= at && at < t.start + t.bytes)
        };
        // A pointer the split leaves in no tensor (one inside a struct, before the first
        // parameter's) would need the allocation kept whole, overlapping its pieces.
        if capture
            .pointers
            .iter()
            .any(|p| p.buffer == buffer.id && !held(p.byte_offset))
        {
            continue;
        }
        let outside_changed = match (&buffer.before, &buffer.after) {
            (_, None) => Some(false),
            (Some(before), Some(after)) => {
                let read = |file: &str| super::record::read_buffer(raw, file, buffer.size).ok();
                match (read(before), read(after)) {
                    (Some(b), Some(a)) => Some(
                        b.iter()
                            .zip(&a)
                            .enumerate()
                            .any(|(at, (x, y))| x != y && !held(at as u64)),
                    ),
                    _ => None,
                }
            }
            (None, Some(_)) => None,
        };
        if outside_changed == Some(false) {
            pieces.extend(own);
        }
    }
    pieces
}

/// With a reference, an output that is a whole allocation several parameters point into is
/// refused: the reference would judge q, k, v and o as one tensor, and its `block` the
/// allocation's rank (1). The message names the parameters and the `--tensor` each needs.
pub fn refuse_shared_outputs(
    tensors: &[BufferTensor],
    capture: &Capture,
    decl: &KernelDecl,
) -> Result<(), String> {
    for t in tensors.iter().filter(|t| t.output && !t.view) {
        let mut params: Vec<usize> = capture
            .pointers
            .iter()
            .filter(|p| p.buffer == t.buffer)
            .map(|p| p.param)
            .collect();
        params.sort_unstable();
        params.dedup();
        if params.len() < 2 {
            continue;
        }
        let name = |i: usize| {
            decl.params
                .get(i)
                .and_then(|p| p.name.clone())
                .unwrap_or_else(|| format!("parameter {i}"))
        };
        let names: Vec<String> = params.iter().map(|&i| name(i)).collect();
        let all = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        let viewed = |n: &str| {
            tensors
                .iter()
                .any(|v| v.view && v.name == n && v.origin.starts_with("--tensor"))
        };
        let needed: Vec<String> = names
            .iter()
            .filter(|n| !viewed(n))
            .map(|n| format!("--tensor '{n}=[DIMS]'"))
            .collect();
        return Err(format!(
            "{all} point into one allocation ({} bytes, `{}` in the spec), and the launch changed bytes in it that no \
             --tensor view holds, so the reference would judge the whole allocation as one output (of rank 1). \
             A view on what the kernel writes is enough when it writes nothing else (the other parameters then get \
             tensors of their own); else give each its view: {} (DTYPE[DIMS] where the tensor's element type is not \
             the parameter's)",
            capture
                .buffers
                .iter()
                .find(|b| b.id == t.buffer)
                .map_or(0, |b| b.size),
            t.name,
            needed.join(" ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_parse() {
        let v = parse("b_ptr=bf16[K, 744]:col_major").unwrap();
        assert_eq!(v.name, "b_ptr");
        assert_eq!(v.dtype, Some(DType::Bf16));
        assert_eq!(v.dims, [Dim::Parameter("K".into()), Dim::Number(744)]);
        assert!(v.col_major);
        let v = parse("x=[300, n_cols]").unwrap();
        assert_eq!(v.dtype, None);
        assert!(!v.col_major);
        assert_eq!(v.launch, None);
        // A window's launch 2 only.
        let v = parse("launch2.o=[8, 16]").unwrap();
        assert_eq!((v.launch, v.name.as_str()), (Some(2), "o"));
    }

    #[test]
    fn bad_views_say_the_form() {
        for (text, says) in [
            ("a_ptr", "no `=`"),
            ("a_ptr=M, K", "no `[`"),
            ("a_ptr=[M, K", "do not end with `]`"),
            ("a_ptr=q7[M]", "`q7` is no dtype"),
            ("a_ptr=[M, 0]", "a dimension is 0"),
            ("a_ptr=[M-1]", "neither a number nor a parameter name"),
            ("a_ptr=[M]:col_major", "col_major is for 2-D"),
            ("a_ptr=[M]:diagonal", "no layout"),
            ("=[M]", "no parameter name"),
            ("launch0.o=[M]", "no parameter name (nor launchK.NAME"),
            ("step2.o=[M]", "no parameter name (nor launchK.NAME"),
            ("launch2.=[M]", "no parameter name"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says) && e.contains("the form is"), "{text}: {e}");
        }
    }
}
