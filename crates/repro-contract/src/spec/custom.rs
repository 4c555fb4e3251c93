//! The references of kernels that are no GEMM (docs/spec.md, "Kernels that are no GEMM"):
//! `op: custom`, a host C++ function of the user's in a header beside the spec, and `op: file`,
//! expected outputs saved as `.npy`. Both judge every tensor marked `output: true`, localized by
//! `reference.block` (the launch's block of outputs) where a GEMM has its tile.
//!
//! An intermediate's own reference (`tensors.X.reference`, for naming the first launch of an
//! operator whose result is wrong) names a header and a function the same way, or a `.npy` of
//! its values as `op: file` names its expected outputs.
//!
//! The function's name becomes C++ in the artifact's reference.cu, so it must be a plain
//! (optionally namespace-qualified) identifier: nothing else of the spec reaches that file.

use std::path::PathBuf;

use super::environment::InputFile;
use super::model::TensorSpec;
use super::resolved::{IntermediateReference, ReferenceCustom, ReferenceFile, TensorSpecResolved};
use super::validate::Validator;

/// The GEMM ops' fields, none of which a custom or file reference takes.
pub(super) fn gemm_fields(r: &super::model::ReferenceSpec) -> [(&'static str, bool); 15] {
    [
        ("a", !r.a.is_empty()),
        ("b", !r.b.is_empty()),
        ("out", !r.out.is_empty()),
        ("c", r.c.is_some()),
        ("bias", r.bias.is_some()),
        ("alpha", r.alpha.is_some()),
        ("beta", r.beta.is_some()),
        ("accumulate", r.accumulate.is_some()),
        ("tile", r.tile.is_some()),
        ("scale_a", r.scale_a.is_some()),
        ("scale_b", r.scale_b.is_some()),
        ("layout", r.layout.is_some()),
        ("group_index", r.group_index.is_some()),
        ("masked_m", r.masked_m.is_some()),
        ("k_sizes", r.k_sizes.is_some()),
    ]
}

/// `function:` is a C++ name: `name` or `ns::name`.
fn is_cpp_name(text: &str) -> bool {
    let text = text.strip_prefix("::").unwrap_or(text);
    !text.is_empty()
        && text.split("::").all(|part| {
            let mut chars = part.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

impl Validator<'_> {
    /// What `op: custom` and `op: file` share: no GEMM field, a host reference, outputs, and a
    /// block that fits the first output.
    fn custom_common(
        &mut self,
        op: &str,
        tensors: &[TensorSpecResolved],
    ) -> Option<(Vec<usize>, Vec<i64>)> {
        let r = &self.spec.reference;
        for (field, given) in gemm_fields(r) {
            if given {
                self.key_error(
                    &format!("reference.{field}"),
                    format!("`{field}` belongs to the GEMM ops, not `op: {op}`"),
                )
                .help = Some(if field == "tile" {
                    "`op: custom` and `op: file` localize errors by `block:`, the launch's block of outputs (e.g. [256] or [8, 32])".into()
                } else {
                    format!(
                        "`op: {op}` judges every tensor marked `output: true`; remove `{field}`"
                    )
                });
            }
        }
        let other = if op == "custom" {
            vec![("expected", r.expected.is_some(), "file")]
        } else {
            // Expected files are fixed values: nothing recomputes them from the kernel's own
            // upstream outputs.
            vec![
                (
                    "source",
                    r.source.is_some() || r.function.is_some(),
                    "custom",
                ),
                ("upstream", r.upstream.is_some(), "custom"),
            ]
        };
        for (field, given, owner) in other {
            if given {
                self.key_error(
                    &format!("reference.{field}"),
                    format!("`{field}` belongs to `op: {owner}`, not `op: {op}`"),
                );
            }
        }
        if matches!(
            r.provider,
            super::model::ReferenceProvider::Device | super::model::ReferenceProvider::Emulated
        ) {
            self.error(
                "reference.provider",
                format!(
                    "`op: {op}` has no {} reference: its reference is computed on the host",
                    r.provider.name()
                ),
            )
            .help = Some("remove `provider:` (or write `provider: host`)".into());
        }
        let outputs: Vec<usize> = (0..tensors.len()).filter(|&i| tensors[i].output).collect();
        if outputs.is_empty() {
            self.error(
                "tensors",
                format!("`op: {op}` judges the tensors marked `output: true`, and there are none"),
            )
            .help = Some("mark what the kernel writes with `output: true`".into());
            return None;
        }
        let block = match &r.block {
            None => Vec::new(),
            Some(block) => {
                // The block localizes every output it compares (the runtime's
                // output_frame): two extents cover an output's last two dimensions, or its
                // only one with the first extent taken as 1. So it is checked against all of
                // them, not the first: a capture's leftover rank-1 buffer listed before a
                // rank-2 output once made a [1, 256] block look wrong.
                let max_rank = outputs
                    .iter()
                    .map(|&i| tensors[i].shape.len())
                    .max()
                    .unwrap_or(0);
                if block.is_empty() || block.len() > 2 || block.len() > max_rank {
                    let ranks: Vec<String> = outputs
                        .iter()
                        .map(|&i| format!("`{}` {}", tensors[i].name, tensors[i].shape.len()))
                        .collect();
                    let ranks = match &outputs[..] {
                        [only] => format!(
                            "`{}` has rank {}",
                            tensors[*only].name,
                            tensors[*only].shape.len()
                        ),
                        _ => format!("ranks: {}", ranks.join(", ")),
                    };
                    self.error(
                        "reference.block",
                        format!(
                            "`block` takes one or two extents, at most the highest rank of the outputs it localizes ({ranks}), not {}",
                            block.len()
                        ),
                    )
                    .help = Some("the outputs one block of the launch writes, in the output's index order: [256] for a 1-D launch, [8, 32] for a (32, 8) CUDA block over an [H, W] image".into());
                    return None;
                }
                if let Some(bad) = block.iter().find(|&&b| b < 1) {
                    self.error(
                        "reference.block",
                        format!("block extents are positive, not {bad}"),
                    );
                    return None;
                }
                block.clone()
            }
        };
        Some((outputs, block))
    }

    pub(super) fn custom_reference(
        &mut self,
        tensors: &[TensorSpecResolved],
    ) -> Option<ReferenceCustom> {
        let common = self.custom_common("custom", tensors);
        let r = &self.spec.reference;
        let (source, function) = (r.source.clone(), r.function.clone());
        let source = match source {
            None => {
                self.key_error("reference", "`op: custom` needs `source:`")
                    .help = Some("the header with your host C++ reference, relative to the spec: `source: references/my_op.h`".into());
                None
            }
            Some(source) => self.reference_header("reference.source", &source),
        };
        let function = match function {
            None => {
                self.key_error("reference", "`op: custom` needs `function:`").help = Some(
                    "the function in `source` that computes the outputs: void NAME(repro::In X, ..., repro::Out D), one parameter per tensor in the spec's order".into(),
                );
                None
            }
            Some(f) if !is_cpp_name(&f) => {
                self.error(
                    "reference.function",
                    format!("`{f}` is not a C++ function name"),
                )
                .help = Some("a name such as `column_sum_reference` or `refs::column_sum`; the function takes one parameter per tensor".into());
                None
            }
            Some(f) => Some(f),
        };
        let (outputs, block) = common?;
        let upstream = self.upstream(tensors, &outputs)?;
        Some(ReferenceCustom {
            source: source?,
            function: function?,
            outputs,
            block,
            upstream,
        })
    }

    /// `reference.upstream`: every name an output, none its own upstream (directly or through
    /// others: the judgement walks the outputs in the order it gives).
    fn upstream(
        &mut self,
        tensors: &[TensorSpecResolved],
        outputs: &[usize],
    ) -> Option<Vec<(usize, Vec<usize>)>> {
        let Some(written) = self.spec.reference.upstream.clone() else {
            return Some(Vec::new());
        };
        let output_names: Vec<&str> = outputs.iter().map(|&i| tensors[i].name.as_str()).collect();
        let mut ok = true;
        let mut upstream = Vec::new();
        for (name, sources) in &written {
            let field = format!("reference.upstream.{name}");
            let Some(output) = self.output_named(tensors, &output_names, name, &field, true) else {
                ok = false;
                continue;
            };
            if sources.is_empty() {
                self.error(&field, format!("`{name}` lists no upstream output"))
                    .help = Some(format!(
                    "name the outputs `{name}` is computed from (`{name}: [Mean, Rstd]`), or remove the entry"
                ));
                ok = false;
            }
            let mut from = Vec::new();
            for (k, source) in sources.iter().enumerate() {
                let field = format!("{field}[{k}]");
                match self.output_named(tensors, &output_names, source, &field, false) {
                    Some(i) if i == output => {
                        self.error(&field, format!("`{name}` cannot be its own upstream"))
                            .help =
                            Some(format!("list the other outputs `{name}` is computed from"));
                        ok = false;
                    }
                    Some(i) if from.contains(&i) => {
                        self.error(&field, format!("`{source}` is listed twice"));
                        ok = false;
                    }
                    Some(i) => from.push(i),
                    None => ok = false,
                }
            }
            upstream.push((output, from));
        }
        if !ok {
            return None;
        }
        if let Some(cycle) = upstream_cycle(&upstream) {
            let names: Vec<&str> = cycle.iter().map(|&i| tensors[i].name.as_str()).collect();
            self.error(
                &format!("reference.upstream.{}", names[0]),
                format!(
                    "the upstream outputs go round in a circle: {}",
                    names.join(" <- ")
                ),
            )
            .help = Some(
                "an output's upstream are the outputs computed before it; one of these entries is backwards".into(),
            );
            return None;
        }
        Some(upstream)
    }

    /// The index of output `name` for `reference.upstream` (a key, or an item of a list).
    fn output_named(
        &mut self,
        tensors: &[TensorSpecResolved],
        output_names: &[&str],
        name: &str,
        field: &str,
        is_key: bool,
    ) -> Option<usize> {
        let problem = match tensors.iter().position(|t| t.name == name) {
            Some(i) if tensors[i].output => return Some(i),
            Some(_) => format!(
                "`{name}` is an input: only outputs have an upstream and are upstream of others"
            ),
            None => format!("`{name}` is not a declared tensor"),
        };
        let diagnostic = if is_key {
            self.key_error(field, problem)
        } else {
            self.error(field, problem)
        };
        diagnostic.help = Some(
            match repro_text::did_you_mean(name, output_names.iter().copied()) {
                Some(best) if best != name => format!("did you mean `{best}`?"),
                _ => format!("the outputs are: {}", output_names.join(", ")),
            },
        );
        None
    }

    pub(super) fn file_reference(
        &mut self,
        tensors: &[TensorSpecResolved],
    ) -> Option<ReferenceFile> {
        let (outputs, block) = self.custom_common("file", tensors)?;
        let Some(expected) = self.spec.reference.expected.clone() else {
            self.key_error("reference", "`op: file` needs `expected:`")
                .help = Some(
                "one .npy per output, relative to the spec: `expected: { D: expected/d.npy }`"
                    .into(),
            );
            return None;
        };
        let mut files = Vec::new();
        let mut ok = true;
        for (name, file) in &expected {
            let field = format!("reference.expected.{name}");
            match tensors.iter().position(|t| &t.name == name) {
                Some(i) if tensors[i].output => {
                    if !file.ends_with(".npy") {
                        self.error(&field, format!("`{file}` is not a .npy file"))
                            .help = Some("save the expected output with numpy.save (any of the output's dtype, f32 or f64)".into());
                        ok = false;
                    } else if let Some(path) = self.reference_file(&field, file, "expected output")
                    {
                        files.push((i, path));
                    } else {
                        ok = false;
                    }
                }
                Some(_) => {
                    self.key_error(
                        &field,
                        format!("`{name}` is an input, not an output: only outputs are expected"),
                    );
                    ok = false;
                }
                None => {
                    let outputs: Vec<&str> =
                        outputs.iter().map(|&i| tensors[i].name.as_str()).collect();
                    self.key_error(&field, format!("`{name}` is not a declared tensor"))
                        .help = Some(
                        match repro_text::did_you_mean(name, outputs.iter().copied()) {
                            Some(best) => format!("did you mean `{best}`?"),
                            None => format!("the outputs are: {}", outputs.join(", ")),
                        },
                    );
                    ok = false;
                }
            }
        }
        for &i in &outputs {
            if !expected.contains_key(&tensors[i].name) {
                self.key_error(
                    "reference.expected",
                    format!("output `{}` has no expected file", tensors[i].name),
                )
                .help = Some(format!(
                    "every output is compared: add `{}: PATH.npy`",
                    tensors[i].name
                ));
                ok = false;
            }
        }
        files.sort_by_key(|(i, _)| *i);
        ok.then_some(ReferenceFile {
            expected: files,
            block,
        })
    }

    /// A header of the user's that reference.cu includes: a file, and a path an `#include "..."`
    /// can name.
    fn reference_header(&mut self, field: &str, source: &str) -> Option<PathBuf> {
        // The header is named by an `#include "..."` in reference.cu, which knows no escapes.
        if source.contains(['"', '\\', '\n', '\r', '>', '<']) {
            self.error(
                field,
                format!("`{}` cannot be named by an #include: it holds a quote, backslash, angle bracket or line break", source.escape_debug()),
            )
            .help = Some("rename the header or its folder".into());
            return None;
        }
        // The environment's help for a file that is not regular speaks of input files (.npy).
        if let Some(InputFile::Unusable { problem, .. }) = self.environment.input_files.get(source)
        {
            if problem.starts_with("is not a regular file") {
                let message = format!("reference header `{source}` {problem}");
                self.error(field, message).help = Some(
                    "name the header itself (e.g. references/my_op.h), relative to the spec".into(),
                );
                return None;
            }
        }
        self.reference_file(field, source, "reference header")
    }

    /// An intermediate's `reference:` (tensor `name`, at `path`): only an intermediate has one,
    /// and it either names a header and a C++ function as `op: custom` does (`{ source,
    /// function }`), or a `.npy` of its values as `op: file`'s `expected:` does (`{ file }`).
    pub(super) fn intermediate_reference(
        &mut self,
        name: &str,
        t: &TensorSpec,
        path: &str,
    ) -> Option<IntermediateReference> {
        let written = t.reference.as_ref()?;
        let field = format!("{path}.reference");
        if !t.intermediate {
            self.key_error(
                &field,
                format!("`reference` is for intermediates, and `{name}` is not one"),
            )
            .help = Some(
                "outputs are judged by the spec's own `reference:`; an intermediate's reference \
                 says what the operator's state should hold once the launch that writes it has run"
                    .into(),
            );
            return None;
        }
        if let Some(file) = &written.file {
            if written.source.is_some() || written.function.is_some() {
                let other = if written.source.is_some() {
                    "source"
                } else {
                    "function"
                };
                self.key_error(
                    &format!("{field}.{other}"),
                    format!("`{name}`'s reference gives both `file:` and `{other}:`"),
                )
                .help = Some(
                    "a reference is either a file of the intermediate's values (`{ file: PATH.npy }`) \
                     or a host function (`{ source: HEADER, function: NAME }`): keep one"
                        .into(),
                );
                return None;
            }
            let file_field = format!("{field}.file");
            if !file.ends_with(".npy") {
                self.error(&file_field, format!("`{file}` is not a .npy file"))
                    .help = Some(format!(
                    "save what `{name}` holds once its launch has run with numpy.save (its dtype, f32 or f64), relative to the spec"
                ));
                return None;
            }
            let path = self.reference_file(&file_field, file, "reference file")?;
            return Some(IntermediateReference::File(path));
        }
        let source = match &written.source {
            None => {
                self.key_error(&field, format!("`{name}`'s reference needs `source:`"))
                    .help = Some("the header with your host C++ function, relative to the spec: `source: references/my_partials.h` (or, without a function, a .npy of its values: `file: data/my_partials.npy`)".into());
                None
            }
            Some(source) => self.reference_header(&format!("{field}.source"), source),
        };
        let function = match &written.function {
            None => {
                self.key_error(&field, format!("`{name}`'s reference needs `function:`"))
                    .help = Some(format!(
                    "the function in `source` that computes `{name}`: void NAME(repro::In X, ..., repro::Out {name}), every input in the spec's order, then `{name}`"
                ));
                None
            }
            Some(f) if !is_cpp_name(f) => {
                self.error(
                    &format!("{field}.function"),
                    format!("`{f}` is not a C++ function name"),
                )
                .help = Some(format!("a name such as `{}_reference` or `refs::{}`; the function takes every input, then `{name}`", name.to_lowercase(), name.to_lowercase()));
                None
            }
            Some(f) => Some(f.clone()),
        };
        Some(IntermediateReference::Function {
            source: source?,
            function: function?,
        })
    }

    /// A file the reference names, as the environment found it.
    pub(super) fn reference_file(
        &mut self,
        field: &str,
        written: &str,
        what: &str,
    ) -> Option<PathBuf> {
        match self.environment.input_files.get(written) {
            Some(InputFile::Regular(path)) => Some(path.clone()),
            // Named as the spec names it: the message is the same on every machine.
            Some(InputFile::Unusable { problem, help, .. }) => {
                let message = format!("{what} `{written}` {problem}");
                self.error(field, message).help = Some(help.to_string());
                None
            }
            None => {
                self.error(field, format!("{what} `{written}` was not looked up"));
                None
            }
        }
    }
}

/// A circle in `reference.upstream` (each output followed by one it is computed from, back to
/// the first), if there is one.
fn upstream_cycle(upstream: &[(usize, Vec<usize>)]) -> Option<Vec<usize>> {
    // Depth-first from every output; the path so far is the candidate circle. The outputs are
    // few (a spec's tensors), so the plain search is enough.
    fn walk(
        node: usize,
        upstream: &[(usize, Vec<usize>)],
        path: &mut Vec<usize>,
        done: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        if let Some(at) = path.iter().position(|&p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node);
            return Some(cycle);
        }
        if done.contains(&node) {
            return None;
        }
        path.push(node);
        let sources = upstream.iter().filter(|(o, _)| *o == node);
        for &source in sources.flat_map(|(_, from)| from) {
            if let Some(cycle) = walk(source, upstream, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.push(node);
        None
    }
    let mut done = Vec::new();
    upstream
        .iter()
        .find_map(|(output, _)| walk(*output, upstream, &mut Vec::new(), &mut done))
}

#[cfg(test)]
mod tests {
    use super::is_cpp_name;

    #[test]
    fn function_names() {
        for ok in ["f", "_ref2", "ns::f", "::a::b_c"] {
            assert!(is_cpp_name(ok), "{ok}");
        }
        for bad in [
            "", "2f", "f()", "a::", "a b", "f;system", "a::::b", "f<int>",
        ] {
            assert!(!is_cpp_name(bad), "{bad}");
        }
    }
}
