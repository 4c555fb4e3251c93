//! The spec skeleton of one found kernel: spec dtypes of the element types, sizes and tensors
//! from the parameters, template arguments from defaults, the include directories, and a note for
//! everything the declaration cannot say.

use std::collections::HashSet;
use std::path::Path;

use crate::skeleton::{Skeleton, Tensor, Value};
use crate::spec::names::identifier_problem;

use super::lex::replace_word;
use super::tree::{absolute, include_dirs_for};
use super::{KernelDecl, KernelKind, ParamType, TemplateParamKind};

/// Header endings: a kernel in one of these can be `#include`d as is.
const HEADER_EXTENSIONS: &[&str] = &["cuh", "h", "hpp", "hh", "cuhpp", "inl"];

// ---------------------------------------------------------------------------------------------
// Skeleton

/// The spec dtype of an element type, when it is one.
pub fn spec_dtype(element: &str) -> Option<&'static str> {
    let t = element.trim_start_matches("::");
    let t = t.strip_prefix("std::").unwrap_or(t);
    Some(match t {
        "float" => "f32",
        "double" => "f64",
        "half" | "__half" | "cutlass::half_t" => "f16",
        "__nv_bfloat16" | "nv_bfloat16" | "cutlass::bfloat16_t" | "__bf16" => "bf16",
        "cutlass::tfloat32_t" => "tf32",
        "__nv_fp8_e4m3" | "cutlass::float_e4m3_t" => "e4m3",
        "__nv_fp8_e5m2" | "cutlass::float_e5m2_t" => "e5m2",
        "int8_t" | "char" | "signed char" => "i8",
        "uint8_t" | "unsigned char" => "u8",
        "int" | "int32_t" | "signed" | "signed int" => "i32",
        "unsigned" | "unsigned int" | "uint32_t" => "u32",
        "int64_t" | "long long" | "long long int" | "signed long long" => "i64",
        "bool" => "bool",
        _ => return None,
    })
}

/// The scalar type of a CUDA vector type (`float4` → `float`, 4).
fn vector_type(element: &str) -> Option<(&'static str, u32)> {
    let (base, n) = element
        .trim_start_matches("::")
        .split_at(element.trim_end_matches(|c: char| c.is_ascii_digit()).len());
    let n: u32 = n.parse().ok()?;
    let scalar = match base {
        "float" => "f32",
        "double" => "f64",
        "half" | "__half" => "f16",
        "__nv_bfloat16" | "nv_bfloat16" => "bf16",
        "int" => "i32",
        "uint" => "u32",
        "char" => "i8",
        "uchar" => "u8",
        "longlong" => "i64",
        _ => return None,
    };
    (matches!(n, 2..=4) || (base == "longlong" && n <= 4)).then_some((scalar, n))
}

fn spec_name(kernel: &str) -> String {
    let mut s: String = kernel
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_matches('_').to_string();
    if s.is_empty() {
        "kernel".into()
    } else {
        s
    }
}

fn is_literal(text: &str) -> bool {
    let t = text.trim();
    let t = t
        .strip_prefix('-')
        .or_else(|| t.strip_prefix('+'))
        .unwrap_or(t)
        .trim();
    matches!(t, "true" | "false")
        || (t.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '\'' | '+' | '-')))
}

/// The value of a C++ integer literal (`42`, `-1`, `0x10`, `0b101`, `017`, `1'000`, `0u`, `8ull`).
fn integer_literal(text: &str) -> Option<i64> {
    let t = text.trim().replace('\'', "");
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest.trim().to_string()),
        None => (false, t.trim_start_matches('+').trim().to_string()),
    };
    let t = t.trim_end_matches(['u', 'U', 'l', 'L', 'z', 'Z']);
    let lower = t.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    if digits.is_empty() {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if negative { -v } else { v })
}

/// A spec name for a parameter: a C++ identifier the harness may use, unique among `used`.
fn usable_name(name: &str, used: &HashSet<String>) -> String {
    let trimmed = name.trim_start_matches('_');
    let mut candidates = vec![name.to_string()];
    if !trimmed.is_empty() && !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        candidates.push(trimmed.to_string());
        candidates.push(format!("{trimmed}_arg"));
        candidates.push(format!("arg_{trimmed}"));
    }
    for c in candidates {
        if identifier_problem(&c).is_none() && !used.contains(&c) {
            return c;
        }
    }
    (2..)
        .map(|k| format!("arg_{k}"))
        .find(|c| !used.contains(c))
        .unwrap_or_default()
}

fn is_header(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| HEADER_EXTENSIONS.contains(&e))
}

/// The first comma-separated argument of `a, b` (commas inside brackets do not count).
fn first_argument(args: &str) -> &str {
    let mut depth = 0i32;
    for (k, c) in args.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth <= 0 => return args[..k].trim(),
            _ => {}
        }
    }
    args.trim()
}

fn note_list(items: &[String]) -> String {
    items.join(", ")
}

/// The spec skeleton for `decl`, found under `root` (the PATH given to [`find`](super::find)). Reads the
/// kernel's file and the local headers it includes, to find the include directories they need.
pub fn skeleton(decl: &KernelDecl, root: &Path) -> Skeleton {
    let mut notes: Vec<String> = Vec::new();
    let file_name = decl
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let what = if decl.definition {
        "defined"
    } else {
        "declared"
    };
    notes.push(format!(
        "`{}` ({}) {what} at {}{}.",
        decl.qualified_name,
        if decl.kind == KernelKind::Global {
            "__global__"
        } else {
            "__device__"
        },
        decl.location(),
        if decl.declared_at.is_empty() {
            String::new()
        } else {
            format!("; also declared at {}", note_list(&decl.declared_at))
        }
    ));
    if decl.kind == KernelKind::Device {
        notes.push(format!(
            "`{}` is a __device__ function (no __global__ has that name): the spec has `kind: device`, so the harness generates a __global__ entry that calls it; give the launch the production context would make (often one CTA for a task body).",
            decl.name
        ));
    }
    if decl.name == "device_kernel" && decl.template_params.len() == 1 {
        notes.push("this is CUTLASS's generic `device_kernel<Operator>`: a CUTLASS 3 GEMM is better described with `kind: cutlass3` and its `GemmUniversal` type.".into());
    }

    // Template arguments.
    let tnames: Vec<String> = decl
        .template_params
        .iter()
        .filter_map(|p| p.name.clone())
        .collect();
    let mut template_args = Vec::new();
    let mut from_defaults = Vec::new();
    let mut left_to_default = Vec::new();
    let dependent = |default: &str| -> Vec<String> {
        tnames
            .iter()
            .filter(|n| replace_word(default, n, "\u{0}") != default)
            .cloned()
            .collect()
    };
    // Trailing parameters whose default depends on earlier ones are left out (C++ fills them in).
    let mut last = decl.template_params.len();
    while last > 0 {
        let p = &decl.template_params[last - 1];
        match &p.default {
            Some(d) if !dependent(d).is_empty() => {
                left_to_default.push(format!(
                    "{} = {d}",
                    p.name.as_deref().unwrap_or("(unnamed)")
                ));
                last -= 1;
            }
            _ => break,
        }
    }
    left_to_default.reverse();
    for (k, p) in decl.template_params.iter().take(last).enumerate() {
        let label = p.name.clone().unwrap_or_else(|| format!("#{}", k + 1));
        let kind = match &p.kind {
            TemplateParamKind::Type => "a type".to_string(),
            TemplateParamKind::Template => "a template".to_string(),
            TemplateParamKind::Value(t) if t.is_empty() => "a value".to_string(),
            TemplateParamKind::Value(t) => format!("`{t}`"),
        };
        let value = if p.pack {
            Value::todo(format!("template arguments of the pack {label} ({kind}; remove this entry if production passes none)"))
        } else {
            match &p.default {
                Some(d) => {
                    let deps = dependent(d);
                    if deps.is_empty() {
                        from_defaults.push(format!("{label} = {d}"));
                        Value::known(d.clone())
                    } else {
                        Value::todo(format!(
                            "template argument {label} (default `{d}`, which depends on {})",
                            deps.join(", ")
                        ))
                    }
                }
                None => Value::todo(format!("template argument {label} ({kind})")),
            }
        };
        template_args.push(value);
    }
    if !from_defaults.is_empty() {
        notes.push(format!(
            "template arguments from their defaults: {}; set them to the production instantiation.",
            note_list(&from_defaults)
        ));
    }
    if !left_to_default.is_empty() {
        notes.push(format!(
            "left to their defaults (they depend on earlier template arguments): {}.",
            note_list(&left_to_default)
        ));
    }
    if !decl.instantiations.is_empty() {
        let shown: Vec<String> = decl.instantiations.iter().take(5).cloned().collect();
        let more = decl.instantiations.len().saturating_sub(5);
        notes.push(format!(
            "explicit instantiations in the tree (production may use one of them): {}{}.",
            note_list(&shown),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }

    // Parameters.
    let mut used: HashSet<String> = HashSet::new();
    let mut tensors: Vec<Tensor> = Vec::new();
    let mut sizes: Vec<(String, Value)> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let mut outputs = Vec::new();
    let mut renamed = Vec::new();
    let mut tmaps = Vec::new();
    let mut defaulted_args = Vec::new();
    let mut dtype_from_default = Vec::new();
    let mut optional = Vec::new();
    let template_type = |t: &str| {
        decl.template_params
            .iter()
            .find(|p| p.kind == TemplateParamKind::Type && p.name.as_deref() == Some(t))
    };
    // Tensor names are taken first, so a size colliding with one gets the `_size` suffix.
    let mut names: Vec<String> = Vec::new();
    for (k, p) in decl.params.iter().enumerate() {
        let raw = p.name.clone().unwrap_or_else(|| format!("arg{k}"));
        if matches!(p.ty, ParamType::Pointer { .. }) {
            let n = usable_name(&raw, &used);
            used.insert(n.clone());
            names.push(n);
        } else {
            names.push(String::new());
        }
    }
    for (k, p) in decl.params.iter().enumerate() {
        if !names[k].is_empty() {
            continue;
        }
        let raw = p.name.clone().unwrap_or_else(|| format!("arg{k}"));
        let mut n = usable_name(&raw, &used);
        if used.contains(&raw) || (n != raw && used.contains(raw.trim_start_matches('_'))) {
            n = usable_name(&format!("{}_size", raw.trim_start_matches('_')), &used);
        }
        used.insert(n.clone());
        names[k] = n;
    }
    let unnamed: Vec<String> = decl
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| p.name.is_none())
        .map(|(k, _)| names[k].clone())
        .collect();
    if !unnamed.is_empty() {
        notes.push(format!(
            "the declaration leaves parameters unnamed; called here: {}.",
            note_list(&unnamed)
        ));
    }
    for (k, p) in decl.params.iter().enumerate() {
        let shown = p.name.clone().unwrap_or_else(|| names[k].clone());
        let name = names[k].clone();
        if p.name.as_deref().is_some_and(|n| n != name) {
            renamed.push(format!("{shown} -> {name}"));
        }
        match &p.ty {
            ParamType::Pointer { element, resolved, is_const } => {
                let target = resolved.as_deref().unwrap_or(element);
                let alternative = p.element_macro.as_ref().and_then(|m| {
                    decl.macro_alternatives.iter().find(|(n, _)| n == m)
                });
                let dtype = if let Some((_, what)) = alternative {
                    Value::todo(format!(
                        "dtype of {name}: {what}; the production flags decide"
                    ))
                } else if let Some(d) = spec_dtype(target) {
                    Value::known(d)
                } else if let Some(tp) = template_type(target) {
                    match tp.default.as_deref().map(|d| (d, spec_dtype(d))) {
                        Some((d, Some(dt))) => {
                            dtype_from_default.push(format!("{name} ({target} = {d})"));
                            Value::known(dt)
                        }
                        _ => Value::todo(format!("dtype of {target} (a template parameter)")),
                    }
                } else if target == "void" {
                    Value::todo(format!("dtype of {name} (`void*`: the signature does not say)"))
                } else if let Some((scalar, n)) = vector_type(target) {
                    Value::todo(format!(
                        "dtype of {name}: `{target}` packs {n} {scalar} values; use {scalar} and count {n} elements per `{target}` in the shape"
                    ))
                } else if decl.ambiguous_macros.iter().any(|m| m == target) {
                    Value::todo(format!("dtype of {name}: `{target}` is a macro with several definitions"))
                } else {
                    Value::todo(format!("dtype of {name}: `{target}` is not a type the importer maps to a spec dtype"))
                };
                if !is_const {
                    outputs.push(name.clone());
                }
                if p.default.as_deref().is_some_and(|d| matches!(d, "nullptr" | "NULL" | "0")) {
                    optional.push(name.clone());
                }
                tensors.push(Tensor {
                    name: name.clone(),
                    dtype,
                    shape: vec![Value::todo(format!("shape of {name}"))],
                    output: Some(!is_const),
                });
                args.push(Value::known(name));
            }
            ParamType::Integer(_) => {
                let value = match p.default.as_deref().map(|d| (d, integer_literal(d))) {
                    Some((d, Some(v))) => {
                        defaulted_args.push(format!("{shown} = {d}"));
                        Value::known(v.to_string())
                    }
                    Some((d, None)) => Value::todo(format!("value of {name} in the production launch (default `{d}`)")),
                    None => Value::todo(format!("value of {name} in the production launch")),
                };
                sizes.push((name.clone(), value));
                args.push(Value::known(name));
            }
            ParamType::Float(t) | ParamType::TemplateValue(t) => {
                let of = if matches!(p.ty, ParamType::TemplateValue(_)) {
                    format!("{t}, a template parameter")
                } else {
                    t.clone()
                };
                args.push(match &p.default {
                    Some(d) if is_literal(d) => {
                        defaulted_args.push(format!("{shown} = {d}"));
                        Value::known(d.clone())
                    }
                    Some(d) => Value::todo(format!("value of {shown} ({of}; default `{d}`)")),
                    None => Value::todo(format!("value of {shown} ({of})")),
                });
            }
            ParamType::Bool => args.push(match &p.default {
                Some(d) if is_literal(d) => {
                    defaulted_args.push(format!("{shown} = {d}"));
                    Value::known(d.clone())
                }
                _ => Value::todo(format!("value of {shown} (bool)")),
            }),
            ParamType::TensorMap => {
                tmaps.push(shown.clone());
                args.push(Value::todo(format!("TMA descriptor `{shown}`: the `tma:` section (Hopper support) builds it")));
            }
            ParamType::Other(t) => args.push(Value::todo(format!(
                "argument `{shown}` of type `{t}`: a C++ expression (build it in `kernel.setup` or `source.prelude`)"
            ))),
        }
    }
    if !outputs.is_empty() {
        notes.push(format!(
            "non-const pointers are taken as outputs: {}; drop `output: true` from any the kernel only reads.",
            note_list(&outputs)
        ));
    }
    if !optional.is_empty() {
        notes.push(format!(
            "{} default to a null pointer (optional buffers): if production passes none, replace the argument with nullptr and drop the tensor.",
            note_list(&optional)
        ));
    }
    if !dtype_from_default.is_empty() {
        notes.push(format!(
            "dtypes from template defaults: {}.",
            note_list(&dtype_from_default)
        ));
    }
    if !defaulted_args.is_empty() {
        notes.push(format!(
            "arguments from their defaults: {}.",
            note_list(&defaulted_args)
        ));
    }
    if !tmaps.is_empty() {
        notes.push(format!(
            "CUtensorMap parameters {}: describe each under `tma:` and add the global tensor it reads or writes under `tensors:` (it is not a kernel parameter).",
            note_list(&tmaps)
        ));
    }
    if !renamed.is_empty() {
        notes.push(format!(
            "renamed to be usable spec names: {}.",
            note_list(&renamed)
        ));
    }
    if !decl.macros.is_empty() {
        notes.push(format!(
            "macros expanded in the signature: {}.",
            note_list(&decl.macros)
        ));
    }
    if !decl.macro_alternatives.is_empty() {
        let what: Vec<String> = decl
            .macro_alternatives
            .iter()
            .map(|(_, a)| a.clone())
            .collect();
        notes.push(format!(
            "macros with other definitions under an #ifdef of a name the tree never defines (a -D flag may): {}.",
            what.join("; ")
        ));
    }
    if !decl.ambiguous_macros.is_empty() {
        notes.push(format!(
            "macros with several definitions (#ifdef alternatives) left as written: {}.",
            note_list(&decl.ambiguous_macros)
        ));
    }
    if decl.extern_c {
        notes.push("declared extern \"C\": no template arguments, unmangled name.".into());
    }
    if let Some(c) = &decl.cluster_dims {
        notes.push(format!(
            "declares __cluster_dims__({c}): the launch uses that cluster shape."
        ));
    }

    // Source.
    let (mut include_dirs, missing) = include_dirs_for(&decl.path, root);
    let own_dir = absolute(decl.path.parent().unwrap_or(Path::new(".")));
    include_dirs.retain(|d| *d != own_dir);
    include_dirs.insert(0, own_dir);
    if !is_header(&decl.path) {
        notes.push(format!(
            "{file_name} is not a header: including it compiles all of it into the harness (a `main`, other kernels); if that fails, move the kernel into a header."
        ));
    }
    if !decl.definition {
        notes.push(format!(
            "only a declaration was found (no body under {}): the harness needs the definition in an included file.",
            root.display()
        ));
    }
    if !missing.is_empty() {
        notes.push(format!(
            "local includes not found under {}: {}; add their folders to `include_dirs`.",
            root.display(),
            note_list(&missing)
        ));
    }

    // Launch.
    let axes = ["x", "y", "z"];
    let grid = axes.map(|a| Value::todo(format!("grid {a} of the production launch")));
    let block = axes.map(|a| match &decl.launch_bounds {
        Some(b) if a == "x" => Value::todo(format!(
            "block {a} of the production launch (__launch_bounds__({b}): at most {} threads in all)",
            first_argument(b)
        )),
        _ => Value::todo(format!("block {a} of the production launch")),
    });
    let smem = match decl.dynamic_smem {
        Some(false) => Value::known("0"),
        Some(true) => Value::todo("dynamic smem bytes of the production launch (the kernel declares extern __shared__)"),
        None => Value::todo("dynamic smem bytes of the production launch (only a declaration was seen; 0 if the kernel has no extern __shared__)"),
    };

    let notes = notes
        .into_iter()
        .map(|n| n.replace(['\n', '\r'], " "))
        .collect();
    Skeleton {
        name: spec_name(&decl.name),
        origin: decl.location(),
        includes: vec![file_name],
        include_dirs: include_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        sizes,
        tensors,
        kernel_name: decl.qualified_name.clone(),
        device_function: decl.kind == KernelKind::Device,
        template_args,
        args,
        grid,
        block,
        smem,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::declarations_in;

    #[test]
    fn spec_dtypes_and_vector_types() {
        for (t, d) in [
            ("float", "f32"),
            ("::std::int64_t", "i64"),
            ("cutlass::half_t", "f16"),
            ("__nv_bfloat16", "bf16"),
            ("unsigned char", "u8"),
            ("__nv_fp8_e4m3", "e4m3"),
            ("bool", "bool"),
        ] {
            assert_eq!(spec_dtype(t), Some(d), "{t}");
        }
        assert_eq!(spec_dtype("float4"), None);
        assert_eq!(vector_type("float4"), Some(("f32", 4)));
        assert_eq!(vector_type("half2"), Some(("f16", 2)));
        assert_eq!(vector_type("float8"), None);
        assert_eq!(vector_type("float"), None);
        assert_eq!(vector_type("Foo3"), None);
    }

    #[test]
    fn names() {
        assert_eq!(spec_name("MyKernel__v2"), "mykernel_v2");
        assert_eq!(spec_name("ns::gemm<float>"), "ns_gemm_float");
        assert_eq!(spec_name("__"), "kernel");
        let used: HashSet<String> = ["n".to_string()].into();
        assert_eq!(usable_name("n", &used), "n_arg");
        assert_eq!(usable_name("m", &used), "m");
        assert_eq!(usable_name("_m", &HashSet::new()), "_m");
    }

    #[test]
    fn literals() {
        for (t, v) in [
            ("42", 42),
            ("-1", -1),
            ("0x10", 16),
            ("0b101", 5),
            ("017", 15),
            ("1'000", 1000),
            ("8ull", 8),
            ("0", 0),
            ("+ 3", 3),
        ] {
            assert_eq!(integer_literal(t), Some(v), "{t}");
        }
        for t in ["1.5", "N", "", "0x", "1 << 4"] {
            assert_eq!(integer_literal(t), None, "{t}");
        }
        for t in ["1.0f", "-2", "true", "1e-3", ".5"] {
            assert!(is_literal(t), "{t}");
        }
        for t in ["N", "1 + x", "f(1)", "nullptr"] {
            assert!(!is_literal(t), "{t}");
        }
    }

    #[test]
    fn first_launch_bound() {
        assert_eq!(first_argument("256, 2"), "256");
        assert_eq!(first_argument(" f(a, b), 2"), "f(a, b)");
        assert_eq!(first_argument("T<1, 2>::n"), "T<1, 2>::n");
    }

    #[test]
    fn a_skeleton_from_a_declaration() {
        let text = "template <typename T, int BM = 64>\n__global__ void __launch_bounds__(128) scale(const T* in, float* out, int n, T alpha = 2) {}";
        let decls = declarations_in(Path::new("missing_dir/k.cuh"), text);
        let sk = skeleton(&decls[0], Path::new("missing_dir"));
        assert_eq!(sk.name, "scale");
        assert_eq!(sk.kernel_name, "scale");
        assert_eq!(sk.origin, "missing_dir/k.cuh:2");
        assert_eq!(sk.includes, ["k.cuh"]);
        let tensors: Vec<(&str, Option<bool>)> = sk
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.output))
            .collect();
        assert_eq!(tensors, [("in", Some(false)), ("out", Some(true))]);
        assert_eq!(sk.tensors[1].dtype, Value::known("f32"));
        assert!(
            matches!(&sk.tensors[0].dtype, Value::Todo(why) if why.contains("template parameter")),
            "{:?}",
            sk.tensors[0].dtype
        );
        assert_eq!(sk.sizes.len(), 1);
        assert_eq!(sk.sizes[0].0, "n");
        assert_eq!(sk.template_args.len(), 2);
        assert_eq!(sk.template_args[1], Value::known("64"));
        assert_eq!(sk.smem, Value::known("0"));
        assert!(matches!(&sk.block[0], Value::Todo(why) if why.contains("at most 128 threads")));
        assert!(sk
            .notes
            .iter()
            .any(|n| n.contains("non-const pointers are taken as outputs: out")));
    }
}
