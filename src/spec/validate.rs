//! What a spec means, checked before anything is written: names declared, shapes that fit the
//! reference GEMM, launch values, build settings. Every problem is collected (not just the first)
//! with the place it was written.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::diagnostic::{did_you_mean, Diagnostic};
use super::dtype::DType;
use super::environment::{Cutlass, Environment, FlagsFromLine, InputFile};
use super::expr::{self, ExprError};
use super::model::{
    FlagsFrom, Generator, InitPattern, KernelKind, Layout, Spec, TensorSpec, Value,
};
use super::names::{identifier_problem, is_spec_name};
use super::resolved::*;
use super::yaml::SpanMap;

/// Largest dynamic shared memory a block may ask for on sm_90 (227 KiB).
const SM90_MAX_DYNAMIC_SMEM: i64 = 227 * 1024;

pub(super) struct Validator<'a> {
    pub(super) spec: &'a Spec,
    spans: &'a SpanMap,
    pub(super) environment: &'a Environment,
    errors: Vec<Diagnostic>,
    warnings: Vec<String>,
}

/// Checks `spec` against its text's spans and what `environment` found, and resolves it. Pure:
/// every fact from outside the text comes in `environment` (environment.rs gathers it).
pub fn validate(
    spec: Spec,
    spans: &SpanMap,
    path: &Path,
    environment: &Environment,
) -> Result<ResolvedSpec, Vec<Diagnostic>> {
    let mut v = Validator {
        spec: &spec,
        spans,
        environment,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    v.header();
    let sizes = v.sizes();
    let tensors = v.tensors(&sizes);
    let include_dirs = v.source();
    let tma = v.tma(&sizes, &tensors);
    let trace = v.trace();
    let kernel = v.kernel(&sizes, &tensors, &tma);
    let reference = v.reference(&tensors);
    let check = v.check();
    let capture = v.capture(&tensors);
    let (build, log_include_dirs) = v.build();
    let mut include_dirs = include_dirs;
    for dir in log_include_dirs {
        if !include_dirs.contains(&dir) {
            include_dirs.push(dir);
        }
    }
    let (errors, warnings) = (v.errors, v.warnings);
    match (kernel, reference, build) {
        (Some(kernel), Some(reference), Some(build)) if errors.is_empty() => {
            let mut resolved = ResolvedSpec {
                name: spec.name.clone(),
                about: spec.about.clone(),
                includes: spec.source.includes.clone(),
                prelude: spec.source.prelude.clone(),
                expect: spec.expect.clone(),
                document: spec.clone(),
                path: path.to_path_buf(),
                dir: environment.dir.clone(),
                sizes,
                tensors,
                kernel,
                tma,
                trace,
                reference,
                check,
                build,
                include_dirs,
                capture,
                warnings,
                // CUTLASS from the spec's own include_dirs wins; otherwise $CUTLASS_DIR or the
                // project's toolchain, added to the build by repro.
                cutlass: match &environment.cutlass {
                    Cutlass::Found(root) => Some(root.clone()),
                    _ => None,
                },
            };
            resolved.document = super::document::resolved_document(&spec, &resolved);
            Ok(resolved)
        }
        _ => Err(errors),
    }
}

/// Largest tensor, in bytes (256 TiB): far above any GPU's memory, far below where 64-bit
/// element and byte counts overflow.
pub const MAX_TENSOR_BYTES: i64 = 1 << 48;

/// Longest spec name. The name is a folder name (`generated/<name>/`), which common filesystems
/// limit to 255 bytes; repro derives longer ones from it (`repro shrink` writes `<name>_shrunk`,
/// and again for a shrunk spec), so the bound leaves room for those.
pub const MAX_SPEC_NAME: usize = 128;

impl<'a> Validator<'a> {
    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) -> &mut Diagnostic {
        let loc = self.spans.value(path);
        self.errors.push(Diagnostic::new(loc, message));
        self.errors.last_mut().expect("just pushed")
    }

    pub(super) fn key_error(&mut self, path: &str, message: impl Into<String>) -> &mut Diagnostic {
        let loc = self.spans.key(path);
        self.errors.push(Diagnostic::new(loc, message));
        self.errors.last_mut().expect("just pushed")
    }

    fn header(&mut self) {
        if self.spec.version != 1 {
            self.error(
                "version",
                format!("spec version {} is not supported", self.spec.version),
            )
            .help = Some("this repro reads `version: 1`".into());
        }
        if !is_spec_name(&self.spec.name) {
            self.error("name", format!("`{}` is not a valid spec name", self.spec.name)).help =
                Some("names are lowercase letters, digits and `_` ([a-z0-9_]+); the name is the output folder".into());
        } else if self.spec.name.len() > MAX_SPEC_NAME {
            self.error(
                "name",
                format!(
                    "the spec name is {} characters long; at most {MAX_SPEC_NAME}",
                    self.spec.name.len()
                ),
            )
            .help = Some(format!(
                "the name is the output folder (generated/<name>/, bundles/<name>/), and a folder \
                 name has at most 255 bytes on common filesystems; repro also derives names from \
                 it (`<name>_shrunk`), so keep it under {MAX_SPEC_NAME}"
            ));
        }
    }

    fn sizes(&mut self) -> IndexMap<String, i64> {
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

    fn tensors(&mut self, sizes: &IndexMap<String, i64>) -> Vec<TensorSpecResolved> {
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
            init: init?,
        })
    }

    fn init(&mut self, name: &str, t: &TensorSpec, path: &str) -> Option<InitResolved> {
        let inputs = &self.spec.inputs;
        // Per-tensor fields win over `inputs:`; outputs are poisoned, their init unused.
        let pattern = t.init.clone().unwrap_or_else(|| inputs.init.clone());
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
                let (p0, p1) = match g {
                    Generator::Uniform => range.map(|r| (r[0], r[1])).unwrap_or((-1.0, 1.0)),
                    Generator::IntUniform => range.map(|r| (r[0], r[1])).unwrap_or((-4.0, 4.0)),
                    Generator::Normal => (
                        t.mean.or(inputs.mean).unwrap_or(0.0),
                        t.std.or(inputs.std).unwrap_or(1.0),
                    ),
                    _ => (0.0, 0.0),
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

    fn source(&mut self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for (i, d) in self.spec.source.include_dirs.iter().enumerate() {
            match self.environment.include_dirs.get(i).cloned().flatten() {
                Some(p) => dirs.push(p),
                None => {
                    let abs = self.environment.dir.join(d);
                    self.error(
                        &format!("source.include_dirs[{i}]"),
                        format!("include directory `{}` does not exist", abs.display()),
                    )
                    .help = Some("include_dirs are relative to the spec file".into());
                }
            }
        }
        dirs
    }

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

    /// `trace:`: at most 16 stages (repro_trace::kMaxStages), indexes unique, names given.
    fn trace(&mut self) -> Vec<(u32, String, crate::spec::model::TraceRole)> {
        let mut out: Vec<(u32, String, crate::spec::model::TraceRole)> = Vec::new();
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

    /// Cluster rules known at spec time: at most 8 blocks (portable) or 16 (non-portable, which
    /// the harness opts into), and a grid divisible by the cluster. Grid values that are C++
    /// expressions repro cannot evaluate are checked by the harness at launch.
    fn cluster(
        &mut self,
        cluster: &[String; 3],
        grid: Option<&[String; 3]>,
        sizes: &IndexMap<String, i64>,
    ) {
        let numbers: Option<Vec<i64>> = cluster
            .iter()
            .map(|c| expr::evaluate(c, sizes).ok())
            .collect();
        let Some(numbers) = numbers else { return };
        // Checked: a fuzzed or mistyped cluster can be large enough to overflow the product.
        let blocks = numbers
            .iter()
            .try_fold(1i64, |n, &c| n.checked_mul(c))
            .unwrap_or(i64::MAX);
        if blocks > 16 {
            self.error(
                "kernel.cluster",
                format!("a cluster of {} = {blocks} blocks; sm_90 allows at most 8 (portable) or 16 (non-portable)", numbers.iter().map(i64::to_string).collect::<Vec<_>>().join(" x ")),
            );
            return;
        }
        let Some(grid) = grid else { return };
        for (axis, ((g, &c), name)) in grid.iter().zip(&numbers).zip(["x", "y", "z"]).enumerate() {
            if let Ok(g) = expr::evaluate(g, sizes) {
                if g % c != 0 {
                    self.error(
                        &format!("kernel.cluster[{axis}]"),
                        format!("grid.{name} = {g} is not a multiple of cluster.{name} = {c}; a grid must be made of whole clusters"),
                    )
                    .help = Some(format!("round the grid up (e.g. {} blocks) and let the kernel skip the extra ones, as production code must", (g + c - 1) / c * c));
                }
            }
        }
    }

    fn launch_triple(
        &mut self,
        path: &str,
        values: Option<&Vec<Value>>,
        required: bool,
    ) -> Option<[String; 3]> {
        let Some(values) = values else {
            if required {
                self.error(
                    "kernel",
                    format!("`kernel.{}` is missing", path.trim_start_matches("kernel.")),
                )
                .help =
                    Some("write it as [x, y, z]; entries are integers or C++ expressions".into());
            }
            return None;
        };
        if values.is_empty() || values.len() > 3 {
            self.error(
                path,
                format!("expected 1 to 3 entries, found {}", values.len()),
            );
            return None;
        }
        let mut out = [String::from("1"), String::from("1"), String::from("1")];
        for (i, v) in values.iter().enumerate() {
            match v {
                Value::Int(n) if *n <= 0 => {
                    self.error(
                        &format!("{path}[{i}]"),
                        format!("{n} is not a positive extent"),
                    );
                    return None;
                }
                Value::Float(x) => {
                    self.error(&format!("{path}[{i}]"), format!("{x} is not an integer"));
                    return None;
                }
                _ => out[i] = v.to_cpp(),
            }
        }
        Some(out)
    }

    fn kernel(
        &mut self,
        sizes: &IndexMap<String, i64>,
        tensors: &[TensorSpecResolved],
        tma: &[TmaDescriptor],
    ) -> Option<KernelLaunch> {
        let k = &self.spec.kernel;
        let kind = match k.kind {
            KernelKind::Global => LaunchKind::Global,
            KernelKind::Device => LaunchKind::Device,
            KernelKind::Cutlass3 => return self.cutlass3_kernel(),
            KernelKind::Replay => return self.replay_kernel(tensors),
        };
        let Some(name) = k.name.clone() else {
            self.error("kernel", "`kernel.name` is missing").help = Some(match kind {
                LaunchKind::Device => {
                    "name the __device__ function (the task body), e.g. `name: gemm_task`".into()
                }
                _ => "name the __global__ function, e.g. `name: tiled_gemm`".into(),
            });
            return None;
        };
        let qualified_ok = name
            .split("::")
            .all(|part| part.is_empty() || super::names::is_cpp_identifier(part));
        if !qualified_ok {
            self.error(
                "kernel.name",
                format!("`{name}` is not a (qualified) C++ function name"),
            )
            .help = Some("template arguments go in `template_args`".into());
        }
        let mut args = Vec::new();
        let declared: Vec<&str> = tensors
            .iter()
            .map(|t| t.name.as_str())
            .chain(sizes.keys().map(String::as_str))
            .chain(tma.iter().map(|d| d.name.as_str()))
            .collect();
        let setup_names = k
            .setup
            .as_deref()
            .map(expr::identifiers)
            .unwrap_or_default();
        for (i, a) in k.args.iter().enumerate() {
            let path = format!("kernel.args[{i}]");
            let arg = match a {
                Value::Text(t) if tensors.iter().any(|x| &x.name == t) => {
                    KernelArg::Tensor(tensors.iter().position(|x| &x.name == t).expect("checked"))
                }
                Value::Text(t) if sizes.contains_key(t) => KernelArg::Size(t.clone()),
                Value::Text(t) if tma.iter().any(|d| &d.name == t) => {
                    KernelArg::Tma(tma.iter().position(|d| &d.name == t).expect("checked"))
                }
                Value::Text(t) => {
                    // A bare identifier one typo away from a tensor or size is almost surely a typo,
                    // not a C++ constant: say so rather than let nvcc report it in harness.cu.
                    // Names that kernel.setup mentions (a descriptor it builds) are meant.
                    if super::names::is_cpp_identifier(t) && !setup_names.contains(t) {
                        if let Some(best) = did_you_mean(t, declared.iter().copied()) {
                            self.error(&path, format!("`{t}` is neither a tensor nor a size"))
                                .help = Some(format!("did you mean `{best}`? (a C++ expression that is meant as such can be written in parentheses: `({t})`)"));
                            continue;
                        }
                    }
                    KernelArg::Expr(t.clone())
                }
                other => KernelArg::Expr(other.to_cpp()),
            };
            args.push(arg);
        }
        // An output the kernel cannot reach is never written, and every check of it would fail
        // for a reason that is not the kernel's. It is reached when passed itself, named in an
        // argument expression or in kernel.setup (which may wrap it in a library's descriptor),
        // or through a `tma:` entry over it that is passed or named there (a kernel that writes D
        // only with TMA stores takes `map_d`, not D).
        let arg_names: Vec<String> = k
            .args
            .iter()
            .flat_map(|a| match a {
                Value::Text(t) => expr::identifiers(t),
                _ => Vec::new(),
            })
            .collect();
        let reaches = |name: &String| arg_names.contains(name) || setup_names.contains(name);
        for t in tensors.iter().filter(|t| t.output) {
            let through_tma = self
                .spec
                .tma
                .iter()
                .any(|(map, entry)| entry.tensor == t.name && reaches(map));
            if !reaches(&t.name) && !through_tma {
                let maps: Vec<&str> = self
                    .spec
                    .tma
                    .iter()
                    .filter(|(_, entry)| entry.tensor == t.name)
                    .map(|(map, _)| map.as_str())
                    .collect();
                let help = match maps.as_slice() {
                    [] => "add it (or a `tma:` entry over it) to `kernel.args`, or drop \
                           `output: true`"
                        .to_string(),
                    maps => format!(
                        "add it or its TMA map (`{}`) to `kernel.args` (or name one of them in \
                         `kernel.setup`), or drop `output: true`",
                        maps.join("`, `")
                    ),
                };
                self.key_error(
                    &format!("tensors.{}", t.name),
                    format!("output `{}` is never passed to the kernel", t.name),
                )
                .help = Some(help);
            }
        }
        let grid = self.launch_triple("kernel.grid", k.grid.as_ref(), true);
        let block = self.launch_triple("kernel.block", k.block.as_ref(), true);
        let cluster = self.launch_triple("kernel.cluster", k.cluster.as_ref(), false);
        if let Some(block) = &block {
            let threads: Option<i64> = block.iter().map(|b| b.parse::<i64>().ok()).product();
            if let Some(threads) = threads.filter(|t| *t > 1024) {
                self.error(
                    "kernel.block",
                    format!("{threads} threads per block; CUDA allows at most 1024"),
                );
            }
        }
        let smem = match &k.smem {
            None => "0".to_string(),
            Some(Value::Int(n)) if *n < 0 => {
                self.error("kernel.smem", format!("{n} bytes of shared memory?"));
                return None;
            }
            Some(Value::Int(n)) if *n > SM90_MAX_DYNAMIC_SMEM => {
                // Not an error: asking for too much is a legitimate thing to reproduce (the launch
                // fails, exit 4). But it is worth saying now.
                self.warnings.push(format!(
                    "kernel.smem = {n} B is more than the {SM90_MAX_DYNAMIC_SMEM} B of dynamic shared memory an sm_90 block can have; the launch will fail"
                ));
                n.to_string()
            }
            Some(Value::Float(x)) => {
                self.error("kernel.smem", format!("{x} is not a byte count"));
                return None;
            }
            Some(v) => v.to_cpp(),
        };
        if let Some(cluster) = &cluster {
            self.cluster(cluster, grid.as_ref(), sizes);
        }
        // A descriptor neither passed nor used by kernel.setup is most likely a forgotten argument.
        for name in self.spec.tma.keys() {
            let passed = k
                .args
                .iter()
                .any(|a| matches!(a, Value::Text(t) if t == name));
            if !passed && !setup_names.contains(name) {
                self.warnings.push(format!(
                    "tma.{name} is neither in kernel.args nor used by kernel.setup; the harness encodes and prints it anyway"
                ));
            }
        }
        Some(KernelLaunch {
            kind,
            name,
            template_args: k.template_args.iter().map(Value::to_cpp).collect(),
            args,
            setup: k.setup.clone(),
            grid: grid?,
            block: block?,
            cluster,
            smem,
        })
    }

    /// `kind: cutlass3`: the kernel is a `GemmUniversal` type; CUTLASS chooses the launch.
    fn cutlass3_kernel(&mut self) -> Option<KernelLaunch> {
        let k = &self.spec.kernel;
        let launch_fields = [
            ("name", k.name.is_some()),
            ("template_args", !k.template_args.is_empty()),
            ("args", !k.args.is_empty()),
            ("grid", k.grid.is_some()),
            ("block", k.block.is_some()),
            ("cluster", k.cluster.is_some()),
            ("smem", k.smem.is_some()),
            ("setup", k.setup.is_some()),
        ];
        for (field, given) in launch_fields {
            if given {
                self.key_error(
                    &format!("kernel.{field}"),
                    format!("`kernel.{field}` does not apply to `kind: cutlass3`"),
                )
                .help = Some("a CUTLASS kernel's launch (grid, block, cluster, smem, arguments) comes from its type and the tensors; name the type in `gemm:`".into());
            }
        }
        let Some(gemm) = k.gemm.clone() else {
            self.error("kernel", "`kind: cutlass3` needs `gemm:`").help = Some(
                "name the cutlass::gemm::kernel::GemmUniversal<...> alias from the prelude, e.g. `gemm: GemmKernel`".into(),
            );
            return None;
        };
        if matches!(
            self.spec.reference.op.as_str(),
            "custom" | "file" | "attention" | "attention_backward"
        ) {
            self.error(
                "reference.op",
                format!("`kind: cutlass3` runs CUTLASS GEMMs; `op: {}` is for kernels that are not GEMMs", self.spec.reference.op),
            )
            .help = Some("give the GEMM's reference: `op: gemm` (or `grouped_gemm`) with `a`, `b` and `out`".into());
        }
        if self.spec.reference.bias.is_some() {
            self.key_error("reference.bias", "a bias is not supported with `kind: cutlass3` yet")
                .help = Some("the harness drives the default epilogue (alpha, beta, C); a bias needs the kernel's own fusion arguments".into());
        }
        // Block scales drive CUTLASS's sm90 blockwise-scaled mainloop (ptr_SFA/layout_SFA and
        // ptr_SFB/layout_SFB): both operands scaled, by f32 (the accumulator type) scales; the
        // harness checks the blocks against the kernel's granularity. Grouped GEMMs drive a
        // grouped (ptr-array) kernel, one problem per group of the masked layout.
        let r = &self.spec.reference;
        let scales = [("scale_a", &r.scale_a), ("scale_b", &r.scale_b)];
        for (field, scale) in scales {
            if scale.as_ref().map(|s| s.format) == Some(crate::spec::model::ScaleFormat::Ue8m0) {
                self.key_error(
                    &format!("reference.{field}.format"),
                    "ue8m0 scales are not supported with `kind: cutlass3`: CUTLASS's sm90 blockwise-scaled mainloop reads f32 scales (ElementBlockScale, the accumulator type)",
                )
                .help = Some("give the scales as f32 tensors (`format: f32`, the default), as the CUTLASS kernel takes them".into());
            }
        }
        if let [(given, Some(_)), (missing, None)] | [(missing, None), (given, Some(_))] = scales {
            self.key_error(
                &format!("reference.{given}"),
                format!("`kind: cutlass3` with `{given}` needs `{missing}` too: CUTLASS's sm90 blockwise-scaled mainloop scales both operands"),
            )
            .help = Some(format!("give `{missing}` with the kernel's scale granularity too (its blocks; scales of 1 where the production GEMM has none)"));
        }
        if r.op == "grouped_gemm" {
            if let Some(layout) = r.layout {
                if layout != crate::spec::model::GroupedLayout::Masked {
                    self.key_error(
                        "reference.layout",
                        format!(
                            "`kind: cutlass3` runs `op: grouped_gemm` with `layout: masked` only, not `{}`",
                            layout.name()
                        ),
                    )
                    .help = Some("a masked layout maps each group to one problem of a CUTLASS grouped (ptr-array) GEMM; write other layouts' launches as `kind: global` with kernel.setup building the CUTLASS arguments".into());
                }
            }
        }
        if self.environment.cutlass == Cutlass::Missing {
            self.error("kernel.kind", "`kind: cutlass3` needs the CUTLASS headers, and none were found")
                .help = Some("run scripts/setup-toolchain.sh (the nvidia-cutlass wheel), or set $CUTLASS_DIR to a CUTLASS checkout".into());
        }
        Some(KernelLaunch {
            kind: LaunchKind::Cutlass3 { gemm: gemm.clone() },
            name: gemm,
            template_args: Vec::new(),
            args: Vec::new(),
            setup: None,
            grid: Default::default(),
            block: Default::default(),
            cluster: None,
            smem: String::new(),
        })
    }

    fn reference(&mut self, tensors: &[TensorSpecResolved]) -> Option<Reference> {
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
        if let Some(ci) = c {
            let tc = &tensors[ci];
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
        if r.beta.is_some() && c.is_none() {
            self.key_error(
                "reference.beta",
                "`beta` is given but there is no `c` for it to scale",
            )
            .help = Some("add `c: <tensor>` or remove `beta`".into());
        }
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
        let scale_a = r
            .scale_a
            .as_ref()
            .and_then(|x| self.scale(tensors, "scale_a", x, [m, k], 1, batched));
        let scale_b = r
            .scale_b
            .as_ref()
            .and_then(|x| self.scale(tensors, "scale_b", x, [k, n], 0, batched));
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

    fn check(&mut self) -> CheckSettings {
        let c = &self.spec.check;
        for (field, value) in [("rel_l2", c.rel_l2), ("rtol", c.rtol), ("atol", c.atol)] {
            if let Some(v) = value.filter(|v| !(is_positive(*v) || *v == 0.0)) {
                self.error(
                    &format!("check.{field}"),
                    format!("{field} = {v}; tolerances are >= 0"),
                );
            }
        }
        if c.repeat == Some(0) {
            self.error(
                "check.repeat",
                "repeat = 0 would not run the kernel; use 1 or more (2+ compares runs bitwise)",
            );
        }
        if let Some(t) = c.timeout.filter(|t| !is_positive(*t)) {
            self.error(
                "check.timeout",
                format!("timeout = {t}; it is in seconds and must be positive"),
            );
        }
        if c.stress_sms == Some(0) {
            self.error(
                "check.stress_sms",
                "stress_sms = 0 gives the stressor no SM; use 1 or more",
            );
        }
        let stressed = c
            .stress
            .is_some_and(|m| m != crate::spec::model::StressMode::None);
        if c.stress_sms.is_some() && c.stress == Some(crate::spec::model::StressMode::Jitter) {
            self.key_error(
                "check.stress_sms",
                "`stress_sms` gives SMs to a stressor kernel, and `stress: jitter` runs none",
            )
            .help = Some(
                "remove `stress_sms`: jitter sleeps the kernel's own warps at its repro::delay points"
                    .into(),
            );
        }
        if c.stress_sms.is_some() && !stressed {
            self.key_error(
                "check.stress_sms",
                "`stress_sms` is for a stressor, and `check.stress` names none",
            )
            .help = Some("add `stress: bandwidth` (or `l2`), or remove `stress_sms`".into());
        }
        if stressed && c.repeat == Some(1) {
            self.error(
                "check.repeat",
                "repeat = 1 with `stress`: every second launch is stressed, so one launch never is",
            )
            .help =
                Some("use repeat: 2 or more (an unstressed launch, then a stressed one)".into());
        }
        CheckSettings {
            rel_l2: c.rel_l2,
            rtol: c.rtol,
            atol: c.atol,
            repeat: c.repeat.unwrap_or(2),
            timeout: c.timeout.unwrap_or(10.0),
        }
    }

    /// Build settings, and the include directories a `flags_from` compile line adds.
    fn build(&mut self) -> (Option<BuildSettings>, Vec<PathBuf>) {
        let b = &self.spec.build;
        let mut flag_groups = Vec::new();
        let mut extra_include_dirs = Vec::new();
        let (mut arch, mut std) = (b.arch.clone(), b.std.clone());
        if let Some(from) = &b.flags_from {
            match self.flags_from(from) {
                Some(line) => {
                    let extraction = &line.extraction;
                    if arch.is_none() {
                        arch = extraction.arch.clone();
                    }
                    if std.is_none() {
                        std = extraction.std.clone();
                    }
                    // Existing include directories of the production line come along (the kernel's
                    // headers may need them), except the CUDA toolkit's own, which nvcc adds itself
                    // and whose path differs from machine to machine (Environment::gather picks
                    // them). Missing ones are warned about by the extraction.
                    extra_include_dirs.extend(line.include_dirs.iter().cloned());
                    self.warnings.extend(
                        extraction
                            .warnings
                            .iter()
                            .map(|w| format!("{}: {w}", from.file)),
                    );
                    flag_groups.push(FlagGroup {
                        // As the spec names the log, not this machine's absolute path.
                        origin: format!(
                            "build.flags_from: {}",
                            extraction
                                .origin
                                .replace(&line.path.display().to_string(), &from.file)
                        ),
                        flags: extraction.kept_flags(),
                    });
                }
                None => return (None, Vec::new()),
            }
        }
        let arch = arch.unwrap_or_else(|| "sm_90a".to_string());
        let std = std.unwrap_or_else(|| "c++17".to_string());
        let digits = arch.strip_prefix("sm_");
        let (number, specific) = match digits {
            Some(d) if d.ends_with('a') || d.ends_with('f') => (&d[..d.len() - 1], true),
            Some(d) => (d, false),
            None => ("", false),
        };
        let parsed = number.parse::<u32>().ok().filter(|n| *n >= 50);
        let Some(cc) = parsed else {
            self.error("build.arch", format!("`{arch}` is not a CUDA architecture"))
                .help = Some("write it like sm_90a (Hopper with wgmma/TMA), sm_90, sm_80".into());
            return (None, Vec::new());
        };
        if !["c++17", "c++20"].contains(&std.as_str()) {
            self.error(
                "build.std",
                format!("`{std}` is not a standard the harness can be built with"),
            )
            .help = Some("c++17 or c++20 (the harness itself needs C++17)".into());
        }
        for (i, flag) in b.flags.iter().enumerate() {
            let path = format!("build.flags[{i}]");
            let conflicts: &[(&str, &str)] = &[
                ("-arch", "the target comes from `build.arch`"),
                ("--gpu-architecture", "the target comes from `build.arch`"),
                ("-gencode", "the target comes from `build.arch`"),
                ("--generate-code", "the target comes from `build.arch`"),
                ("-code", "the target comes from `build.arch`"),
                ("-std", "the standard comes from `build.std`"),
                ("--std", "the standard comes from `build.std`"),
                ("-o", "the harness decides its output file"),
                ("-c", "the harness is built as an executable"),
                ("-shared", "the harness is built as an executable"),
            ];
            let stem = flag.split(['=', ' ']).next().unwrap_or(flag);
            if let Some((_, why)) = conflicts.iter().find(|(f, _)| *f == stem) {
                self.error(&path, format!("`{flag}` cannot be a harness flag: {why}"));
            }
        }
        if !b.flags.is_empty() {
            flag_groups.push(FlagGroup {
                origin: "build.flags: the production flags, verbatim".into(),
                flags: b.flags.clone(),
            });
        }
        let settings = BuildSettings {
            arch,
            cc_major: cc / 10,
            cc_minor: cc % 10,
            arch_specific: specific,
            std,
            flags: flag_groups
                .iter()
                .flat_map(|g| g.flags.iter().cloned())
                .collect(),
            flag_groups,
        };
        (Some(settings), extra_include_dirs)
    }

    /// The compile line `build.flags_from` points at, as the environment read it.
    fn flags_from(&mut self, from: &FlagsFrom) -> Option<&'a FlagsFromLine> {
        let environment = self.environment;
        match environment.flags_from.as_ref()? {
            Ok(line) => Some(line),
            Err(message) => {
                self.error("build.flags_from", format!("cannot take production flags from {}: {message}", from.file))
                    .help = Some("flags_from is a build log, compile_commands.json or a file with one nvcc command line, relative to the spec; `repro flags --from-log FILE` shows what it finds".into());
                None
            }
        }
    }
}

/// True for a positive number (NaN is not).
pub fn is_positive(x: f64) -> bool {
    x.partial_cmp(&0.0) == Some(Ordering::Greater)
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
