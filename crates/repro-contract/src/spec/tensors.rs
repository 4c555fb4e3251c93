//! `sizes:`, `tensors:` and the `inputs:` defaults they take: names that are C++ identifiers,
//! sizes that fit the kernel's `int`, shapes and strides evaluated to numbers that fit a GPU, and
//! each input's init resolved (per-tensor fields over `inputs:`) with its parameters checked. Also
//! how any other section names a tensor ([`Validator::tensor_index`]) and the integer expressions
//! it may write where a size is meant ([`Validator::dim`]).

use std::cmp::Ordering;

use indexmap::IndexMap;

use super::environment::InputFile;
use super::expr::{self, ExprError};
use super::model::{Generator, InitPattern, Layout, Lifetime, TensorSpec, Value};
use super::names::identifier_problem;
use super::resolved::{InitResolved, InitSource, TensorSpecResolved};
use super::validate::{is_positive, Validator};
use repro_text::did_you_mean;

/// Largest tensor, in bytes (256 TiB): far above any GPU's memory, far below where 64-bit
/// element and byte counts overflow.
pub const MAX_TENSOR_BYTES: i64 = 1 << 48;

impl Validator<'_> {
    pub(super) fn sizes(&mut self) -> IndexMap<String, i64> {
        let mut sizes = IndexMap::new();
        for (name, &value) in &self.spec.sizes {
            let path = format!("sizes.{name}");
            if let Some(problem) = identifier_problem(name) {
                self.key_error(&path, format!("size name {problem}"));
            }
            if value <= 0 {
                self.error(
                    &path,
                    format!("size `{name}` is {value}; sizes must be positive"),
                );
            } else if value > i32::MAX as i64 {
                self.error(
                    &path,
                    format!("size `{name}` = {value} does not fit the `int` the kernel receives"),
                )
                .help = Some(
                    "sizes are passed to kernels as int; write larger extents as products of sizes"
                        .into(),
                );
            }
            sizes.insert(name.clone(), value);
        }
        sizes
    }

    /// A dimension or stride: an integer, a size name or an integer expression over sizes.
    pub(super) fn dim(
        &mut self,
        path: &str,
        value: &Value,
        sizes: &IndexMap<String, i64>,
    ) -> Option<(i64, String)> {
        match value {
            Value::Int(i) => Some((*i, i.to_string())),
            Value::Float(x) => {
                self.error(path, format!("{x} is not an integer"));
                None
            }
            Value::Text(text) => match expr::evaluate(text, sizes) {
                Ok(v) => Some((v, text.clone())),
                Err(ExprError::UnknownName(name)) => {
                    let hint = did_you_mean(&name, sizes.keys().map(String::as_str));
                    let declared: Vec<&str> = sizes.keys().map(String::as_str).collect();
                    let help = match hint {
                        Some(best) => format!("did you mean `{best}`?"),
                        None if declared.is_empty() => "declare it under `sizes:`".to_string(),
                        None => format!(
                            "declared sizes: {}; or declare `{name}` under `sizes:`",
                            declared.join(", ")
                        ),
                    };
                    self.error(path, format!("size `{name}` is not declared"))
                        .help = Some(help);
                    None
                }
                Err(e) => {
                    self.error(path, format!("cannot evaluate `{text}`: {e}"));
                    None
                }
            },
        }
    }

    pub(super) fn tensors(&mut self, sizes: &IndexMap<String, i64>) -> Vec<TensorSpecResolved> {
        let mut out = Vec::new();
        if self.spec.tensors.is_empty() {
            self.error("tensors", "the spec declares no tensors");
        }
        for (name, t) in &self.spec.tensors {
            let path = format!("tensors.{name}");
            if let Some(problem) = identifier_problem(name) {
                self.key_error(&path, format!("tensor name {problem}"));
            }
            if sizes.contains_key(name) {
                self.key_error(&path, format!("`{name}` names both a size and a tensor"))
                    .help = Some("tensors and sizes share the harness's scope; rename one".into());
            }
            if let Some(resolved) = self.tensor(name, t, &path, sizes) {
                out.push(resolved);
            }
        }
        out
    }

    fn tensor(
        &mut self,
        name: &str,
        t: &TensorSpec,
        path: &str,
        sizes: &IndexMap<String, i64>,
    ) -> Option<TensorSpecResolved> {
        let rank = t.shape.len();
        if !(1..=4).contains(&rank) {
            self.error(
                &format!("{path}.shape"),
                format!("tensor `{name}` has {rank} dimensions; shapes are 1- to 4-D"),
            );
            return None;
        }
        let mut shape = Vec::new();
        let mut shape_text = Vec::new();
        for (i, d) in t.shape.iter().enumerate() {
            let p = format!("{path}.shape[{i}]");
            let (v, text) = self.dim(&p, d, sizes)?;
            if v <= 0 {
                self.error(
                    &p,
                    format!("dimension {i} of `{name}` is {v}; dimensions must be positive"),
                );
                return None;
            }
            shape.push(v);
            shape_text.push(text);
        }
        // Every count the harness and repro compute from a shape (elements, bytes, offsets) is a
        // 64-bit integer: a shape whose bytes do not fit any GPU is refused here, before a product
        // overflows into a small, wrong allocation.
        let elements = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
        let bytes = elements.and_then(|n| n.checked_mul(t.dtype.bytes() as i64));
        if bytes.map_or(true, |b| b > MAX_TENSOR_BYTES) {
            self.error(
                &format!("{path}.shape"),
                format!(
                    "tensor `{name}` of shape [{}] is more than {} TiB",
                    shape_text.join(", "),
                    MAX_TENSOR_BYTES >> 40
                ),
            )
            .help = Some("no GPU holds it; check the sizes the shape uses".into());
            return None;
        }
        let strides_text = t
            .strides
            .as_ref()
            .map(|s| s.iter().map(Value::to_cpp).collect());
        let col_major = t.layout == Some(Layout::ColMajor);
        let strides = match (&t.layout, &t.strides) {
            (Some(_), Some(_)) => {
                self.key_error(
                    &format!("{path}.strides"),
                    format!("tensor `{name}` gives both `layout` and `strides`"),
                )
                .help = Some(
                    "keep one: `layout` for packed 2-D tensors, `strides` for anything else".into(),
                );
                return None;
            }
            (_, Some(strides)) => {
                if strides.len() != rank {
                    self.error(
                        &format!("{path}.strides"),
                        format!(
                            "`{name}` has {rank} dimensions but {} strides",
                            strides.len()
                        ),
                    );
                    return None;
                }
                let mut out = Vec::new();
                for (i, s) in strides.iter().enumerate() {
                    let p = format!("{path}.strides[{i}]");
                    let (v, _) = self.dim(&p, s, sizes)?;
                    if v <= 0 {
                        self.error(&p, format!("stride {i} of `{name}` is {v}; strides are positive element counts"));
                        return None;
                    }
                    out.push(v);
                }
                // The last element's offset, checked like the shape's size above.
                let last = shape.iter().zip(&out).try_fold(0i64, |sum, (&d, &s)| {
                    sum.checked_add((d - 1).checked_mul(s)?)
                });
                let bytes = last.and_then(|l| (l + 1).checked_mul(t.dtype.bytes() as i64));
                if bytes.map_or(true, |b| b > MAX_TENSOR_BYTES) {
                    self.error(
                        &format!("{path}.strides"),
                        format!(
                            "tensor `{name}` with these strides spans more than {} TiB",
                            MAX_TENSOR_BYTES >> 40
                        ),
                    )
                    .help = Some("no GPU holds it; check the strides".into());
                    return None;
                }
                out
            }
            (layout, None) => {
                let col_major = *layout == Some(Layout::ColMajor);
                if col_major && rank < 2 {
                    self.error(
                        &format!("{path}.layout"),
                        format!(
                            "`layout: col_major` needs at least 2 dimensions; `{name}` has {rank}"
                        ),
                    );
                    return None;
                }
                packed_strides(&shape, col_major)
            }
        };
        let intermediate = self.intermediate(name, t, path);
        let intermediate_reference = self.intermediate_reference(name, t, path);
        let init = self.init(name, t, path);
        if let Some(InitSource::Values(values)) = init.as_ref().map(|i| &i.source) {
            let numel: i64 = shape.iter().product();
            if values.len() as i64 != numel {
                self.error(
                    &format!("{path}.init.values"),
                    format!(
                        "`{name}` has {numel} elements (shape [{}]) but init.values lists {}",
                        shape
                            .iter()
                            .map(i64::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        values.len()
                    ),
                )
                .help = Some("give one value per element, in row-major order".into());
            }
        }
        Some(TensorSpecResolved {
            name: name.to_string(),
            dtype: t.dtype,
            shape,
            shape_text,
            strides,
            strides_text,
            col_major,
            output: t.output,
            intermediate,
            intermediate_reference,
            init: init?,
        })
    }

    /// `intermediate:` and `lifetime:`: an intermediate is neither an input nor an output, and
    /// only an intermediate has a lifetime.
    fn intermediate(&mut self, name: &str, t: &TensorSpec, path: &str) -> Option<Lifetime> {
        if t.intermediate && t.output {
            self.key_error(
                &format!("{path}.intermediate"),
                format!("`{name}` is both an output and an intermediate"),
            )
            .help = Some(
                "an output is compared with the reference; an intermediate (a workspace, partial \
                 sums, a semaphore) is the operator's own state and is not: keep one of the two"
                    .into(),
            );
        }
        if !t.intermediate {
            if t.lifetime.is_some() {
                self.key_error(
                    &format!("{path}.lifetime"),
                    format!("`lifetime` is for intermediates, and `{name}` is not one"),
                )
                .help = Some(
                    "add `intermediate: true` (a tensor the kernels keep their state in), or drop \
                     `lifetime`"
                        .into(),
                );
            }
            return None;
        }
        Some(t.lifetime.unwrap_or(Lifetime::Call))
    }

    fn init(&mut self, name: &str, t: &TensorSpec, path: &str) -> Option<InitResolved> {
        let inputs = &self.spec.inputs;
        // Per-tensor fields win over `inputs:`; outputs are poisoned, their init unused; an
        // intermediate starts as zeros unless it says otherwise (a semaphore, a counter, an
        // accumulator: never the inputs' random values).
        let pattern = match (&t.init, t.intermediate) {
            (Some(init), _) => init.clone(),
            (None, true) => InitPattern::Generator(Generator::Zeros),
            (None, false) => inputs.init.clone(),
        };
        let seed = t.seed.or(inputs.seed).unwrap_or(2024);
        let (field_path, source, p0, p1) = match pattern {
            InitPattern::File(f) => {
                let p = format!("{path}.init.file");
                let file = match self.environment.input_files.get(&f.file) {
                    Some(InputFile::Regular(file)) => file.clone(),
                    Some(InputFile::Unusable {
                        path: file,
                        problem,
                        help,
                    }) => {
                        let message = format!(
                            "input file `{}` for tensor `{name}` {problem}",
                            file.display()
                        );
                        self.error(&p, message).help = Some(help.to_string());
                        return None;
                    }
                    // Environment::gather looks up every init file; an environment made another
                    // way (a test's) may not have, and a path nobody looked at is not a file.
                    None => {
                        self.error(
                            &p,
                            format!(
                                "input file `{}` for tensor `{name}` was not looked up",
                                f.file
                            ),
                        );
                        return None;
                    }
                };
                let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
                if ext != "npy" && ext != "bin" {
                    self.error(&p, format!("`{}` is neither .npy nor .bin", f.file));
                    return None;
                }
                (p, InitSource::File(file), 0.0, 0.0)
            }
            InitPattern::Values(v) => {
                let p = format!("{path}.init.values");
                if let Some(bad) = v.values.iter().find(|x| !x.is_finite()) {
                    self.error(
                        &p,
                        format!("value {bad} of `{name}` is not a finite number"),
                    );
                    return None;
                }
                (p, InitSource::Values(v.values), 0.0, 0.0)
            }
            InitPattern::Groups(g) => {
                let p = format!("{path}.init.groups");
                if let Some(bad) = g.groups.iter().find(|&&rows| rows < 0) {
                    self.error(
                        &p,
                        format!("`{name}` gives a group {bad} rows; a group has 0 rows or more"),
                    );
                    return None;
                }
                if g.align < 1 {
                    self.error(
                        &format!("{path}.init.align"),
                        format!("align {} of `{name}` must be 1 or more", g.align),
                    );
                    return None;
                }
                (
                    p,
                    InitSource::Groups {
                        rows: g.groups,
                        align: g.align,
                    },
                    0.0,
                    0.0,
                )
            }
            InitPattern::Generator(g) => {
                let range = t.range.or(inputs.range);
                let defaults = g.default_parameters();
                let (p0, p1) = match g {
                    Generator::Uniform | Generator::IntUniform => {
                        range.map(|r| (r[0], r[1])).unwrap_or(defaults)
                    }
                    Generator::Normal => (
                        t.mean.or(inputs.mean).unwrap_or(defaults.0),
                        t.std.or(inputs.std).unwrap_or(defaults.1),
                    ),
                    _ => defaults,
                };
                (format!("{path}.range"), InitSource::Generator(g), p0, p1)
            }
        };
        match source {
            InitSource::Generator(Generator::Uniform | Generator::IntUniform)
                if p0.partial_cmp(&p1) != Some(Ordering::Less) =>
            {
                self.error(
                    &field_path,
                    format!("range [{p0}, {p1}] of `{name}` is empty; write [lo, hi] with lo < hi"),
                );
                return None;
            }
            InitSource::Generator(Generator::IntUniform)
                if p0.fract() != 0.0 || p1.fract() != 0.0 =>
            {
                self.error(
                    &field_path,
                    format!("int_uniform range [{p0}, {p1}] of `{name}` must be integers"),
                );
                return None;
            }
            InitSource::Generator(Generator::Normal) if !is_positive(p1) => {
                self.error(
                    &format!("{path}.std"),
                    format!("normal std {p1} of `{name}` must be positive"),
                );
                return None;
            }
            _ => {}
        }
        Some(InitResolved {
            source,
            p0,
            p1,
            seed,
        })
    }

    pub(super) fn tensor_index(
        &mut self,
        tensors: &[TensorSpecResolved],
        field: &str,
        name: &str,
    ) -> Option<usize> {
        if let Some(i) = tensors.iter().position(|t| t.name == name) {
            return Some(i);
        }
        let names: Vec<&str> = self.spec.tensors.keys().map(String::as_str).collect();
        if names.contains(&name) {
            return None; // declared but invalid: already reported
        }
        let help = match did_you_mean(name, names.iter().copied()) {
            Some(best) => format!("did you mean `{best}`?"),
            None => format!("declared tensors: {}", names.join(", ")),
        };
        self.error(
            field,
            format!("tensor `{name}` is not declared in `tensors`"),
        )
        .help = Some(help);
        None
    }
}

/// Packed strides; col_major swaps the last two dimensions (a batch stays outermost).
pub fn packed_strides(shape: &[i64], col_major: bool) -> Vec<i64> {
    let rank = shape.len();
    let mut order: Vec<usize> = (0..rank).collect();
    if col_major && rank >= 2 {
        order.swap(rank - 1, rank - 2);
    }
    let mut strides = vec![0; rank];
    let mut step = 1;
    for &dim in order.iter().rev() {
        strides[dim] = step;
        step *= shape[dim];
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::packed_strides;

    #[test]
    fn strides() {
        assert_eq!(packed_strides(&[4, 3], false), vec![3, 1]);
        assert_eq!(packed_strides(&[4, 3], true), vec![1, 4]);
        assert_eq!(packed_strides(&[2, 4, 3], true), vec![12, 1, 4]);
    }
}
