//! A spec skeleton: what an importer learned about a kernel launch, with every unknown kept as a
//! visible `TODO` (never an invented number), rendered as a spec the user completes. The spec
//! loader rejects any `TODO` left in, naming it.

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

    fn render(&self) -> String {
        match self {
            Value::Known(text) => yaml_scalar(text),
            Value::Todo(why) => yaml_scalar(&format!("TODO: {why}")),
        }
    }
}

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

/// A YAML scalar, quoted when plain style would change its meaning.
pub fn yaml_scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@`".contains(c) || c.is_whitespace())
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':')
        && !text.ends_with(char::is_whitespace)
        && !matches!(
            text,
            "true" | "false" | "null" | "~" | "yes" | "no" | "on" | "off"
        );
    if plain {
        text.to_string()
    } else {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
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
    /// The spec text. `include_dirs` must already be relative to where the spec is written.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "# Spec skeleton written by `repro import` from {}.\n",
            self.origin
        ));
        out.push_str("# Every \"TODO: ...\" is something the importer could not know; `repro scaffold` refuses\n");
        out.push_str("# the spec until each is replaced.\n");
        for note in &self.notes {
            out.push_str(&format!("# {note}\n"));
        }
        out.push_str("version: 1\n");
        out.push_str(&format!("name: {}\n", self.name));
        out.push_str(&format!(
            "about: {}\n",
            yaml_scalar(&format!("imported from {}", self.origin))
        ));
        if !self.sizes.is_empty() {
            out.push_str("\nsizes:\n");
            for (name, value) in &self.sizes {
                out.push_str(&format!("  {name}: {}\n", value.render()));
            }
        }
        out.push_str("\nsource:\n");
        out.push_str(&format!(
            "  include_dirs: [{}]\n",
            self.include_dirs
                .iter()
                .map(|d| yaml_scalar(d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "  includes: [{}]\n",
            self.includes
                .iter()
                .map(|d| yaml_scalar(d))
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
                t.name,
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
        out.push_str(&format!("  name: {}\n", yaml_scalar(&self.kernel_name)));
        if !self.template_args.is_empty() {
            out.push_str(&format!("  template_args: {}\n", list(&self.template_args)));
        }
        out.push_str(&format!("  args: {}\n", list(&self.args)));
        out.push_str(&format!("  grid: {}\n", list(&self.grid)));
        out.push_str(&format!("  block: {}\n", list(&self.block)));
        out.push_str(&format!("  smem: {}\n", self.smem.render()));
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
        out.push_str("\nbuild:\n  arch: sm_90a\n  flags: []   # the production flags: `repro flags --from-log BUILD_LOG` reads them\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_quoted_only_when_needed() {
        assert_eq!(yaml_scalar("M"), "M");
        assert_eq!(yaml_scalar("ceil_div(N, 128)"), "ceil_div(N, 128)");
        assert_eq!(
            yaml_scalar("TODO: grid: depends on n"),
            "\"TODO: grid: depends on n\""
        );
        assert_eq!(yaml_scalar("-1"), "\"-1\"");
        assert_eq!(yaml_scalar(""), "\"\"");
    }
}
