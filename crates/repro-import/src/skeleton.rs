//! A spec skeleton: what an importer learned about a kernel launch, with every unknown kept as a
//! visible `TODO` (never an invented number), rendered as a spec the user completes. The spec
//! loader rejects any `TODO` left in, naming it.
//!
//! The reference is `op: gemm` (its `a`, `b` and `out` left as TODOs) only when the launch looks
//! like a GEMM ([`looks_like_gemm`]); any other kernel gets `op: custom`, whose `source`,
//! `function` and `block` are TODOs, the function's TODO spelling out the exact signature the
//! reference needs for this kernel's tensors. When in doubt, not a GEMM: a custom reference is
//! always right to write, a GEMM reference on a reduction is a wrong guess.

use crate::spec::yaml::{self, Context};

/// A value an importer found, or could not find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Verbatim spec text: a number, a size name, a C++ expression, a dtype name.
    Known(String),
    /// Unknown: says what is missing and where to look (rendered as `"TODO: ..."`).
    Todo(String),
}

impl Value {
    pub fn known(text: impl Into<String>) -> Value {
        Value::Known(text.into())
    }

    pub fn todo(why: impl Into<String>) -> Value {
        Value::Todo(why.into())
    }

    /// The YAML scalar, written where a flow list may hold it: the text (a number as the
    /// number it is, anything else quoted where plain style would change it), or `"TODO: why"`.
    pub fn render(&self) -> String {
        match self {
            Value::Known(text) if yaml::is_number(text) => text.clone(),
            Value::Known(text) => yaml::scalar(text, Context::Flow),
            Value::Todo(why) => yaml::scalar(&format!("TODO: {why}"), Context::Flow),
        }
    }
}

/// What a custom or file reference's `block` TODO says.
pub(crate) const BLOCK_TODO: &str =
    "the launch's block of outputs, in the output's index order (e.g. [256])";

/// One buffer of the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    pub name: String,
    /// A spec dtype (`bf16`, `f32`...), or a TODO when the element type is not known.
    pub dtype: Value,
    /// Dimensions (sizes or expressions); a single TODO when the shape is not known.
    pub shape: Vec<Value>,
    /// True for a pointer the kernel writes (not `const`); None when that is not known.
    pub output: Option<bool>,
}

/// Everything `repro import` writes into a spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Skeleton {
    /// The spec name (`[a-z0-9_]+`).
    pub name: String,
    /// Where the launch or the kernel was found (`src/gemm.rs:42`).
    pub origin: String,
    /// Header(s) declaring the kernel, as `#include "..."` names.
    pub includes: Vec<String>,
    /// Include directories (paths as found; the writer makes them relative to the spec).
    pub include_dirs: Vec<String>,
    /// Named integer sizes, in order of first use.
    pub sizes: Vec<(String, Value)>,
    pub tensors: Vec<Tensor>,
    pub kernel_name: String,
    /// A `__device__` task body: the spec gets `kind: device`.
    pub device_function: bool,
    pub template_args: Vec<Value>,
    /// Kernel arguments in order: tensor names, size names, or C++ expressions.
    pub args: Vec<Value>,
    pub grid: [Value; 3],
    pub block: [Value; 3],
    pub smem: Value,
    /// Comment lines for the top of the spec (what was resolved, what was guessed).
    pub notes: Vec<String>,
}

impl Default for Value {
    fn default() -> Self {
        Value::Known("1".into())
    }
}

fn list(values: &[Value]) -> String {
    format!(
        "[{}]",
        values
            .iter()
            .map(Value::render)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

impl Skeleton {
    /// Whether the reference is rendered as `op: gemm` (else `op: custom`): see
    /// [`looks_like_gemm`].
    pub fn looks_like_gemm(&self) -> bool {
        looks_like_gemm(&self.kernel_name, &self.tensors)
    }

    /// The C++ signature of the custom reference for these tensors:
    /// `void NAME_reference(repro::In X, ..., repro::Out D)`, one parameter per tensor in spec
    /// order (inputs `repro::In`, outputs `repro::Out`).
    pub fn reference_signature(&self) -> String {
        let name = if self.name.starts_with(|c: char| c.is_ascii_digit()) || self.name.is_empty() {
            format!("reference_{}", self.name)
        } else {
            format!("{}_reference", self.name)
        };
        let params: Vec<String> = self
            .tensors
            .iter()
            .map(|t| {
                let view = match t.output {
                    Some(true) => "repro::Out",
                    Some(false) => "repro::In",
                    None => "repro::In or repro::Out",
                };
                format!("{view} {}", t.name)
            })
            .collect();
        format!("void {}({})", name.trim_end_matches('_'), params.join(", "))
    }

    /// The spec text. `include_dirs` must already be relative to where the spec is written.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "# Spec skeleton written by `repro import` from {}.\n",
            yaml::comment(&self.origin)
        ));
        out.push_str("# Every \"TODO: ...\" is something the importer could not know; `repro scaffold` refuses\n");
        out.push_str("# the spec until each is replaced.\n");
        for note in &self.notes {
            out.push_str(&format!("# {}\n", yaml::comment(note)));
        }
        out.push_str("version: 1\n");
        let block = |text: &str| yaml::scalar(text, Context::Block);
        out.push_str(&format!("name: {}\n", block(&self.name)));
        out.push_str(&format!(
            "about: {}\n",
            block(&format!("imported from {}", self.origin))
        ));
        if !self.sizes.is_empty() {
            out.push_str("\nsizes:\n");
            for (name, value) in &self.sizes {
                out.push_str(&format!("  {}: {}\n", block(name), value.render()));
            }
        }
        out.push_str("\nsource:\n");
        out.push_str(&format!(
            "  include_dirs: [{}]\n",
            self.include_dirs
                .iter()
                .map(|d| yaml::scalar(d, Context::Flow))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "  includes: [{}]\n",
            self.includes
                .iter()
                .map(|d| yaml::scalar(d, Context::Flow))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str("\ntensors:\n");
        for t in &self.tensors {
            let output = match t.output {
                Some(true) => ", output: true".to_string(),
                Some(false) => String::new(),
                None => format!(
                    ", output: {}",
                    Value::todo("true if the kernel writes it").render()
                ),
            };
            out.push_str(&format!(
                "  {}: {{ dtype: {}, shape: {}{output} }}\n",
                block(&t.name),
                t.dtype.render(),
                list(&t.shape)
            ));
        }
        out.push_str("\nkernel:\n");
        if self.device_function {
            out.push_str(
                "  kind: device   # a __device__ task body; repro generates the __global__ entry\n",
            );
        }
        out.push_str(&format!("  name: {}\n", block(&self.kernel_name)));
        if !self.template_args.is_empty() {
            out.push_str(&format!("  template_args: {}\n", list(&self.template_args)));
        }
        out.push_str(&format!("  args: {}\n", list(&self.args)));
        out.push_str(&format!("  grid: {}\n", list(&self.grid)));
        out.push_str(&format!("  block: {}\n", list(&self.block)));
        out.push_str(&format!("  smem: {}\n", self.smem.render()));
        if self.looks_like_gemm() {
            let names: Vec<&str> = self.tensors.iter().map(|t| t.name.as_str()).collect();
            let todo = |role: &str| {
                Value::todo(format!(
                    "the tensor that is the GEMM's {role} (one of: {})",
                    names.join(", ")
                ))
                .render()
            };
            out.push_str("\nreference:\n  op: gemm\n");
            out.push_str(&format!(
                "  a: {}\n  b: {}\n  out: {}\n",
                todo("A [M, K]"),
                todo("B [K, N]"),
                todo("output [M, N]")
            ));
        } else {
            out.push_str(
                "\n# Not taken for a GEMM (see `repro import` in docs/cli.md): a host C++ function computes the\n\
                 # outputs. If this kernel is a GEMM after all, write `op: gemm` with its a, b and out instead.\n",
            );
            out.push_str("reference:\n  op: custom\n");
            out.push_str(&format!(
                "  source: {}\n  function: {}\n  block: {}\n",
                Value::todo("a header with the host C++ reference (relative to this spec)")
                    .render(),
                Value::todo(format!(
                    "the reference function: {}, one parameter per tensor in this spec's order",
                    self.reference_signature()
                ))
                .render(),
                Value::todo(BLOCK_TODO).render()
            ));
        }
        out.push_str("\nbuild:\n  arch: sm_90a\n  flags: []   # the production flags: `repro flags --from-log BUILD_LOG` reads them\n");
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Is it a GEMM?

/// A part of a kernel's name that says GEMM: one containing `gemm` (`sgemm`, `hgemm`,
/// `tiled_gemm_bf16`, `SgemmNaive`) or `matmul` (`MatMulKernel`), but not a sparse one
/// (`spgemm`, `spmatmul`).
fn gemm_part(part: &str) -> bool {
    !part.starts_with("sp") && (part.contains("gemm") || part.contains("matmul"))
}

/// Words of a kernel's name that say it is a kernel around a GEMM, not the GEMM itself
/// (`gemm_splitk_reduce`, `gemm_epilogue`, `matmul_backward_bias`, `quantize_for_gemm`).
const NOT_THE_GEMM: &[&str] = &[
    "reduce",
    "reduction",
    "epilogue",
    "backward",
    "bwd",
    "grad",
    "pack",
    "prepack",
    "unpack",
    "transpose",
    "quant",
    "quantize",
    "dequant",
    "dequantize",
    "convert",
    "cast",
    "copy",
    "fill",
    "zero",
    "zeros",
    "init",
];

/// The lowercase parts of a kernel's own name (the last `::` segment, before any `<`) split at
/// `_` and other non-alphanumerics: `hopper::v2::tma_gemm<4>` → `tma`, `gemm`.
fn name_parts(kernel_name: &str) -> Vec<String> {
    let own = kernel_name.split('<').next().unwrap_or("");
    let own = own.rsplit("::").next().unwrap_or("");
    own.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The lowercase words of a part, split at case steps and between letters and digits:
/// `SgemmNaive` → `sgemm`, `naive`; `GemmSplitKReduce` → `gemm`, `split`, `k`, `reduce`.
fn part_words(part: &str) -> Vec<String> {
    let chars: Vec<char> = part.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 {
            let p = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let split = (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                || (p.is_ascii_uppercase() && c.is_ascii_uppercase() && next_lower)
                || p.is_ascii_alphabetic() != c.is_ascii_alphabetic();
            if split && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        }
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether the kernel's own name says GEMM (see [`looks_like_gemm`]).
fn name_says_gemm(kernel_name: &str) -> bool {
    if kernel_name.trim_start().starts_with("TODO:") {
        return false;
    }
    let parts = name_parts(kernel_name);
    let words: Vec<String> = parts.iter().flat_map(|p| part_words(p)).collect();
    let lower: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    let says = lower.iter().any(|p| gemm_part(p))
        || words.iter().any(|w| matches!(w.as_str(), "mm" | "bmm"));
    let around = words
        .iter()
        .chain(&lower)
        .any(|w| NOT_THE_GEMM.contains(&w.as_str()));
    says && !around
}

/// The size names a tensor's shape multiplies, when every dimension is a known product of
/// distinct names: `[M, K]` and `[m * k]` (a flat cudarc buffer) both give {M, K}/{m, k}. None
/// for a TODO, a number, any other expression, or a name used twice (a square `[n * n]` says
/// nothing about which dimension is which).
fn shape_factors(shape: &[Value]) -> Option<Vec<&str>> {
    let mut factors = Vec::new();
    for dim in shape {
        let Value::Known(text) = dim else {
            return None;
        };
        for part in text.split('*') {
            let part = part.trim();
            let identifier = part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier || factors.contains(&part) {
                return None;
            }
            factors.push(part);
        }
    }
    Some(factors)
}

/// Whether inputs shaped `a` and `b` make an output shaped `out` as a GEMM does: `a` = {M, K},
/// `b` = {K, N}, `out` = {M, N}, with M, N, K distinct (optionally with one batch size in all
/// three: {L, M, K}, {L, K, N}, {L, M, N}).
fn contracts(a: &[&str], b: &[&str], out: &[&str]) -> bool {
    let rank = out.len();
    if !(2..=3).contains(&rank) || a.len() != rank || b.len() != rank {
        return false;
    }
    let shared: Vec<&str> = a.iter().copied().filter(|f| b.contains(f)).collect();
    let batch: Vec<&str> = shared.iter().copied().filter(|f| out.contains(f)).collect();
    let k: Vec<&str> = shared
        .iter()
        .copied()
        .filter(|f| !out.contains(f))
        .collect();
    let m: Vec<&str> = a.iter().copied().filter(|f| !b.contains(f)).collect();
    let n: Vec<&str> = b.iter().copied().filter(|f| !a.contains(f)).collect();
    k.len() == 1
        && batch.len() == rank - 2
        && m.len() == 1
        && n.len() == 1
        && out.contains(&m[0])
        && out.contains(&n[0])
}

/// The one rule by which `repro import` takes a launch for a GEMM (`reference: op: gemm`); any
/// other launch gets `op: custom`. Conservative: when in doubt, not a GEMM. A launch is a GEMM
/// when either
///
/// - **its shapes say so**: two inputs and an output whose shapes, all known, multiply size
///   names as `[M, K]`, `[K, N]` and `[M, N]` do (M, N, K distinct names; a flat `[m * k]`
///   counts as `[m, k]`, since the order of a flat buffer's factors says nothing; a batched
///   `[L, M, K]`, `[L, K, N]`, `[L, M, N]` counts too); or
/// - **its name says so**: a part of the kernel's own name (the last `::` segment, before any
///   `<`, split at `_`) contains `gemm` or `matmul` (`sgemm_naive`, `MatMulKernel`; not the
///   sparse `spgemm`, `spmatmul`), or a word of it (parts split again at case steps and digits)
///   is `mm` or `bmm`; and no word says it is a kernel around a GEMM rather than the GEMM
///   (`reduce`, `epilogue`, `backward`, `grad`, `pack`, `transpose`, `quantize`, `convert`,
///   `copy`, `fill`, `zero`, `init`... see [`NOT_THE_GEMM`]).
///
/// A kernel name still a TODO (a Rust launch whose kernel the importer could not name) says
/// nothing. Inputs are the tensors with `output: false`, outputs those with `output: true`; a
/// tensor whose role is unknown counts as neither.
pub fn looks_like_gemm(kernel_name: &str, tensors: &[Tensor]) -> bool {
    if name_says_gemm(kernel_name) {
        return true;
    }
    let with_role = |output: bool| -> Vec<Vec<&str>> {
        tensors
            .iter()
            .filter(|t| t.output == Some(output))
            .filter_map(|t| shape_factors(&t.shape))
            .collect()
    };
    let (inputs, outputs) = (with_role(false), with_role(true));
    outputs.iter().any(|out| {
        inputs.iter().enumerate().any(|(i, a)| {
            inputs
                .iter()
                .enumerate()
                .any(|(j, b)| i != j && contracts(a, b, out))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(Value::known("M").render(), "M");
        assert_eq!(Value::known("128").render(), "128");
        assert_eq!(Value::known("1.0f").render(), "1.0f");
        assert_eq!(
            Value::known("(n + 16 - 1) / 16").render(),
            "(n + 16 - 1) / 16"
        );
        // In a flow list, a comma would split the expression in two.
        assert_eq!(
            Value::known("ceil_div(N, 128)").render(),
            "\"ceil_div(N, 128)\""
        );
        assert_eq!(
            Value::todo("grid: depends on n").render(),
            "\"TODO: grid: depends on n\""
        );
        assert_eq!(Value::known("").render(), "\"\"");
    }

    fn t(name: &str, shape: &[&str], output: bool) -> Tensor {
        Tensor {
            name: name.into(),
            dtype: Value::known("f32"),
            shape: shape.iter().map(|d| Value::known(*d)).collect(),
            output: Some(output),
        }
    }

    fn unknown(name: &str, output: bool) -> Tensor {
        Tensor {
            name: name.into(),
            dtype: Value::known("f32"),
            shape: vec![Value::todo(format!("shape of {name}"))],
            output: Some(output),
        }
    }

    #[test]
    fn kernel_names_that_say_gemm() {
        let none: &[Tensor] = &[];
        for name in [
            "gemm",
            "sgemm_naive",
            "SgemmNaive",
            "tiled_gemm_bf16",
            "hopper::v2::tma_gemm",
            "ns::hgemm<float, 128>",
            "gemm_bias_relu_f16",
            "matmul_forward",
            "MatMulKernel",
            "bmm_f16",
            "mm",
        ] {
            assert!(looks_like_gemm(name, none), "{name}");
        }
        for name in [
            "column_sum",
            "gemv",
            "comm_all_reduce",
            "summary",
            "spgemm_csr",
            "gemm_splitk_reduce",
            "GemmSplitKReduce",
            "big_emma",
            "gemm_epilogue",
            "matmul_backward_bias",
            "quantize_for_gemm",
            "cutlass::gemm::kernel::reduce_kernel",
            "device_kernel",
            "TODO: the kernel's name (the kernel function `f` is a parameter of `launch_gemm`)",
        ] {
            assert!(!looks_like_gemm(name, none), "{name}");
        }
        assert_eq!(part_words("SgemmNaive"), ["sgemm", "naive"]);
        assert_eq!(
            part_words("GemmSplitKReduce"),
            ["gemm", "split", "k", "reduce"]
        );
        assert_eq!(part_words("bf16x2"), ["bf", "16", "x", "2"]);
        assert_eq!(name_parts("hopper::v2::tma_gemm<4, 2>"), ["tma", "gemm"]);
    }

    #[test]
    fn shapes_that_say_gemm() {
        let gemm = |tensors: &[Tensor]| looks_like_gemm("kernel", tensors);
        assert!(gemm(&[
            t("A", &["M", "K"], false),
            t("B", &["K", "N"], false),
            t("D", &["M", "N"], true),
        ]));
        // Flat cudarc buffers, B given first, a bias and an epilogue tensor around them.
        assert!(gemm(&[
            t("b", &["k * n"], false),
            t("a", &["m * k"], false),
            t("bias", &["n"], false),
            t("d", &["m * n"], true),
        ]));
        // Column-major B ([N, K]): the factors still contract over K.
        assert!(gemm(&[
            t("A", &["M", "K"], false),
            t("B", &["N", "K"], false),
            t("D", &["M", "N"], true),
        ]));
        assert!(gemm(&[
            t("A", &["L", "M", "K"], false),
            t("B", &["L", "K", "N"], false),
            t("D", &["L", "M", "N"], true),
        ]));
        // Not GEMMs: a column sum, an elementwise op, an outer product, a square matrix (the
        // names cannot tell M from K), unknown shapes, numbers, an output whose role is unknown.
        assert!(!gemm(&[t("X", &["B", "N"], false), t("D", &["N"], true)]));
        assert!(!gemm(&[
            t("x", &["m * n"], false),
            t("y", &["m * n"], false),
            t("z", &["m * n"], true),
        ]));
        assert!(!gemm(&[
            t("x", &["M"], false),
            t("y", &["N"], false),
            t("z", &["M", "N"], true),
        ]));
        assert!(!gemm(&[
            t("A", &["n * n"], false),
            t("B", &["n * n"], false),
            t("C", &["n * n"], true),
        ]));
        assert!(!gemm(&[
            unknown("A", false),
            unknown("B", false),
            unknown("D", true),
        ]));
        assert!(!gemm(&[
            t("A", &["M", "64"], false),
            t("B", &["64", "N"], false),
            t("D", &["M", "N"], true),
        ]));
        // The same input twice is not two operands.
        assert!(!gemm(&[
            t("A", &["M", "K"], false),
            t("D", &["M", "M"], true)
        ]));
        let mut no_role = t("D", &["M", "N"], true);
        no_role.output = None;
        assert!(!gemm(&[
            t("A", &["M", "K"], false),
            t("B", &["K", "N"], false),
            no_role,
        ]));
    }

    #[test]
    fn a_custom_reference_spells_out_its_signature() {
        let sk = Skeleton {
            name: "column_sum".into(),
            origin: "k.cuh:1".into(),
            tensors: vec![unknown("X", false), unknown("D", true)],
            kernel_name: "column_sum".into(),
            ..Skeleton::default()
        };
        assert!(!sk.looks_like_gemm());
        assert_eq!(
            sk.reference_signature(),
            "void column_sum_reference(repro::In X, repro::Out D)"
        );
        let text = sk.render();
        let reference = text.split_once("reference:\n").unwrap().1;
        assert_eq!(
            reference.split_once("\nbuild:").unwrap().0,
            "  op: custom
  source: \"TODO: a header with the host C++ reference (relative to this spec)\"
  function: \"TODO: the reference function: void column_sum_reference(repro::In X, repro::Out D), one parameter per tensor in this spec's order\"
  block: \"TODO: the launch's block of outputs, in the output's index order (e.g. [256])\"
",
            "{text}"
        );
        assert!(!text.contains("  op: gemm"), "{text}");
    }
}
