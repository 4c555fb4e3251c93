//! One captured buffer as a tensor of the spec, and the kernel declaration's word on its element
//! type: what layout.rs, views.rs and write.rs all describe a launch with. It sits below them
//! (it imports none of them), so the capture's files form no loop.

use crate::import::cuda::{KernelDecl, ParamType};
use crate::spec::dtype::DType;

/// One captured buffer as a tensor of the spec.
#[derive(Debug, Clone)]
pub struct BufferTensor {
    pub buffer: usize,
    pub name: String,
    pub dtype: DType,
    /// Logical shape, row-major over storage unless `col_major` (the last two swapped).
    pub shape: Vec<u64>,
    pub col_major: bool,
    /// Element strides per logical dimension, from a `--tensor ...:strides[...]` view; `None`:
    /// packed (row-major, or `col_major`).
    pub strides: Option<Vec<u64>>,
    /// Carved out of its allocation by `--tensor` (views.rs), rather than the allocation itself.
    pub view: bool,
    /// Where the tensor starts in its allocation: 0, or a `--tensor` view's pointer offset.
    pub start: u64,
    /// Bytes of the buffer the tensor holds, from `start`.
    pub bytes: u64,
    pub output: bool,
    /// Where the dtype and shape came from, for the spec's comment.
    pub origin: String,
}

impl BufferTensor {
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The spec's layout fields for the tensor: `, layout: col_major`, `, strides: [...]` or
    /// nothing (packed row-major).
    pub fn layout_fields(&self) -> String {
        match &self.strides {
            Some(strides) => format!(
                ", strides: [{}]",
                strides
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None if self.col_major => ", layout: col_major".to_string(),
            None => String::new(),
        }
    }

    /// The storage offset (in elements) of the `i`-th logical element, row-major over `shape`,
    /// through `strides`.
    pub fn strided_element(&self, strides: &[u64], i: u64) -> u64 {
        let mut rest = i;
        let mut at = 0;
        for d in (0..self.shape.len()).rev() {
            at += (rest % self.shape[d]) * strides[d];
            rest /= self.shape[d];
        }
        at
    }

    /// The driver dimension (innermost first) behind logical dimension `d`.
    pub fn driver_dim(&self, d: usize) -> usize {
        let rank = self.shape.len();
        let mut storage: Vec<usize> = (0..rank).collect();
        if let Some(strides) = &self.strides {
            storage.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
        } else if self.col_major && rank >= 2 {
            storage.swap(rank - 1, rank - 2);
        }
        // storage[i] is the logical dimension at storage position i (outermost first).
        rank - 1 - storage.iter().position(|&s| s == d).expect("a dimension")
    }
}

/// A type as the instantiation sees it: a template parameter's name (`T`) replaced by the
/// demangled name's argument for it (`float`).
pub(super) fn instantiated(decl: &KernelDecl, template_args: &[String], ty: &str) -> String {
    decl.template_params
        .iter()
        .zip(template_args)
        .find(|(p, _)| p.name.as_deref() == Some(ty))
        .map_or_else(|| ty.to_string(), |(_, arg)| arg.clone())
}

/// The dtype parameter `index` points to, when it is a pointer to an element type repro knows
/// (a template parameter's name replaced by the instantiation's argument).
pub fn pointee_dtype(decl: &KernelDecl, template_args: &[String], index: usize) -> Option<DType> {
    match &decl.params.get(index)?.ty {
        ParamType::Pointer {
            element, resolved, ..
        } => {
            let element = resolved.as_deref().unwrap_or(element);
            let element = instantiated(decl, template_args, element);
            crate::import::cuda::spec_dtype(&element).and_then(DType::from_name)
        }
        _ => None,
    }
}

/// The tensor that holds byte `at` of allocation `buffer`, and the offset into it: the view
/// that contains it, else the allocation's own tensor.
pub fn tensor_at(tensors: &[BufferTensor], buffer: usize, at: u64) -> Option<(usize, u64)> {
    let contains =
        |t: &BufferTensor| t.buffer == buffer && t.start <= at && at - t.start < t.bytes.max(1);
    tensors
        .iter()
        .position(|t| t.view && contains(t))
        .or_else(|| tensors.iter().position(|t| !t.view && t.buffer == buffer))
        .map(|i| (i, at.saturating_sub(tensors[i].start)))
}
