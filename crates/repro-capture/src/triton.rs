//! What Triton leaves beside a cubin it compiled, found for a captured launch: the kernel's
//! signature (parameter names and types, from `<name>.source`, the Triton IR before
//! optimization), its compile options (`<name>.json`: num_warps, num_ctas, num_stages, maxnreg,
//! shared memory), the Python file and line it was written at, and, when the autotuner kept its
//! choice on disk (`TRITON_CACHE_AUTOTUNING=1`, `<name>.autotune.json`), the autotuned config
//! with its constexpr values.
//!
//! A Triton kernel reaches the driver as an ordinary cubin launched with `cuLaunchKernelEx`, so
//! the capture records it like any other; this module only names what was recorded. The cache
//! entry is found by content: the captured module's bytes equal the `<name>.cubin` of exactly
//! one entry of Triton's cache folder. Triton's launcher passes two parameters the signature
//! does not list, after the kernel's own: `global_scratch` and `profile_scratch` (null when the
//! kernel needs no scratch). Integer arguments equal to 1 and constexprs are compiled into the
//! cubin and are no parameters at all.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::import::cuda::{KernelDecl, KernelKind, Param, ParamType};

/// The most cache entries looked at: a cache folder is one entry per compiled kernel, and a
/// busy machine's can hold tens of thousands; past this the search gives up (said in a note).
const MAX_ENTRIES: usize = 100_000;
/// Metadata, signature and autotune files are small; a larger one is no Triton file.
const MAX_TEXT_BYTES: u64 = 16 << 20;

/// One parameter of the kernel's signature: `%a_ptr: !tt.ptr<bf16>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonParam {
    pub name: String,
    /// Triton's type: `!tt.ptr<bf16>`, `i32`, `f32`.
    pub ty: String,
}

/// Triton's compile options for the kernel, from `<name>.json`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct TritonOptions {
    #[serde(default)]
    pub num_warps: Option<u32>,
    #[serde(default)]
    pub num_ctas: Option<u32>,
    #[serde(default)]
    pub num_stages: Option<u32>,
    #[serde(default)]
    pub maxnreg: Option<u32>,
    #[serde(default)]
    pub shared: Option<u64>,
    #[serde(default)]
    pub triton_version: Option<String>,
    #[serde(default)]
    pub hash: Option<String>,
    #[serde(default)]
    pub global_scratch_size: Option<u64>,
    #[serde(default)]
    pub profile_scratch_size: Option<u64>,
}

/// The autotuner's choice for this kernel, when it kept it on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct AutotunedConfig {
    /// The constexprs the config sets, `BLOCK_M=64`, in the file's order.
    pub constants: Vec<(String, String)>,
    /// How many configs were timed, and the tuning key (the arguments it was tuned for).
    pub candidates: usize,
    pub key: String,
    pub file: PathBuf,
}

/// Everything found for one captured Triton kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct TritonKernel {
    pub name: String,
    /// The cache entry's folder.
    pub entry: PathBuf,
    pub params: Vec<TritonParam>,
    pub options: TritonOptions,
    /// Where the kernel is written: `matmul.py:30`.
    pub location: Option<String>,
    pub autotuned: Option<AutotunedConfig>,
    /// What could not be told, for the spec's comments.
    pub notes: Vec<String>,
}

/// The cache folders to look in: the program's `TRITON_CACHE_DIR`, else Triton's default
/// (`$HOME/.triton/cache`).
pub fn cache_dirs(program_env: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    if let Some(dir) = program_env("TRITON_CACHE_DIR").filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let home = program_env("TRITON_HOME")
        .filter(|d| !d.is_empty())
        .or_else(|| program_env("HOME"));
    home.map(|h| vec![Path::new(&h).join(".triton").join("cache")])
        .unwrap_or_default()
}

/// The Triton kernel whose cache entry holds exactly `cubin`, if one does.
pub fn find(cubin: &[u8], kernel: &str, cache_dirs: &[PathBuf]) -> Option<TritonKernel> {
    // A Triton kernel's symbol is its Python name: no namespace, no mangling.
    if kernel.is_empty()
        || !kernel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    let cubin_name = format!("{kernel}.cubin");
    let mut looked = 0usize;
    for dir in cache_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            looked += 1;
            if looked > MAX_ENTRIES {
                return None;
            }
            let candidate = entry.path().join(&cubin_name);
            let same_size = std::fs::symlink_metadata(&candidate)
                .is_ok_and(|m| m.is_file() && m.len() == cubin.len() as u64);
            if same_size && std::fs::read(&candidate).is_ok_and(|bytes| bytes == cubin) {
                return Some(read_entry(&entry.path(), kernel, dir));
            }
        }
    }
    None
}

fn read_text(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TEXT_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Reads one cache entry's files; what is missing or unreadable becomes a note.
fn read_entry(entry: &Path, kernel: &str, cache_dir: &Path) -> TritonKernel {
    let mut notes = Vec::new();
    let options = match read_text(&entry.join(format!("{kernel}.json"))) {
        Some(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            notes.push(format!("{kernel}.json is not Triton's metadata: {e}"));
            TritonOptions::default()
        }),
        None => {
            notes.push(format!("no {kernel}.json beside the cubin"));
            TritonOptions::default()
        }
    };
    let (params, location) = match read_text(&entry.join(format!("{kernel}.source"))) {
        Some(text) => (signature(&text, kernel), location(&text)),
        None => {
            notes.push(format!(
                "no {kernel}.source beside the cubin: parameters stay unnamed"
            ));
            (Vec::new(), None)
        }
    };
    let autotuned = autotuned_config(cache_dir, kernel, &options);
    if autotuned.is_none() {
        notes.push(
            "no autotuning record matches this cubin: the kernel is not autotuned, or its choice was not \
             kept on disk (TRITON_CACHE_AUTOTUNING=1 keeps it); its constexprs are compiled into the cubin"
                .into(),
        );
    }
    TritonKernel {
        name: kernel.to_string(),
        entry: entry.to_path_buf(),
        params,
        options,
        location,
        autotuned,
        notes,
    }
}

/// The parameters of `tt.func public @kernel(...)` in Triton IR: `%name: type {attrs} loc(...)`.
pub fn signature(ir: &str, kernel: &str) -> Vec<TritonParam> {
    let head = format!("@{kernel}(");
    let Some(start) = ir.find(&head) else {
        return Vec::new();
    };
    let text = &ir[start + head.len()..];
    // The parameter list ends at the `)` that closes it; types and attributes nest < { ( [.
    let mut depth = 0i32;
    let mut params = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' if depth == 0 => break,
            ')' | '>' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                params.extend(parameter(&current));
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    params.extend(parameter(&current));
    params
}

/// `%a_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32} loc("a_ptr"(#loc))` -> a_ptr, !tt.ptr<bf16>.
fn parameter(text: &str) -> Option<TritonParam> {
    let text = text.trim();
    let rest = text.strip_prefix('%')?;
    let (name, ty) = rest.split_once(':')?;
    let ty = ty.trim();
    // The type is the text up to an attribute dictionary or a location.
    let end = [ty.find(" {"), ty.find(" loc(")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(ty.len());
    Some(TritonParam {
        name: name.trim().to_string(),
        ty: ty[..end].trim().to_string(),
    })
}

/// The first location of the IR: the `@triton.jit` function's file and line.
fn location(ir: &str) -> Option<String> {
    let line = ir.lines().find(|l| l.starts_with("#loc = loc(\""))?;
    let inner = line.strip_prefix("#loc = loc(\"")?;
    let (file, rest) = inner.split_once('"')?;
    let line_number = rest.strip_prefix(':')?.split(':').next()?;
    Some(format!("{file}:{line_number}"))
}

/// The element type a Triton pointer points to, as the CUDA type the capture's layout knows
/// (`!tt.ptr<bf16>` -> `__nv_bfloat16`); None for anything else.
fn cuda_element(ty: &str) -> Option<&'static str> {
    let element = ty.strip_prefix("!tt.ptr<")?.strip_suffix('>')?;
    // `!tt.ptr<bf16, 1>`: the address space follows the element.
    let element = element.split(',').next()?.trim();
    Some(match element {
        "f64" => "double",
        "f32" => "float",
        "f16" => "__half",
        "bf16" => "__nv_bfloat16",
        "f8E4M3FN" => "__nv_fp8_e4m3",
        "f8E5M2" => "__nv_fp8_e5m2",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int32_t",
        "i64" => "int64_t",
        "i1" => "bool",
        _ => return None,
    })
}

fn cuda_scalar(ty: &str) -> Option<ParamType> {
    Some(match ty {
        "i1" => ParamType::Bool,
        "i8" | "i16" | "i32" | "i64" | "u32" | "u64" => ParamType::Integer(ty.to_string()),
        "f16" | "bf16" | "f32" | "f64" => ParamType::Float(ty.to_string()),
        _ => return None,
    })
}

impl TritonKernel {
    /// The signature as a kernel declaration, so the capture's layout names buffers and
    /// integers after the Python parameters and types pointers by their element. It is never a
    /// source to rebuild from: a Triton kernel is replayed from its cubin.
    pub fn declaration(&self) -> KernelDecl {
        let params = self
            .params
            .iter()
            .map(|p| {
                let ty = match cuda_element(&p.ty) {
                    Some(element) => ParamType::Pointer {
                        element: element.to_string(),
                        resolved: None,
                        is_const: false,
                    },
                    None => cuda_scalar(&p.ty).unwrap_or_else(|| ParamType::Other(p.ty.clone())),
                };
                Param {
                    name: Some(p.name.clone()),
                    text: format!("{}: {}", p.name, p.ty),
                    ty,
                    default: None,
                    element_macro: None,
                }
            })
            .collect();
        // `matmul.py:30`: the file, and the line (0 when unknown).
        let (file, line) = match self.location.as_deref().and_then(|l| l.rsplit_once(':')) {
            Some((file, line)) => (PathBuf::from(file), line.parse().unwrap_or(0)),
            None => (self.entry.clone(), 0),
        };
        KernelDecl::foreign(&self.name, KernelKind::Global, file, line, params)
    }

    /// The compile options and the autotuned constexprs, on one line:
    /// `BLOCK_M=64, BLOCK_N=128, num_warps=4, num_ctas=1, num_stages=4`.
    pub fn config_text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(a) = &self.autotuned {
            parts.extend(a.constants.iter().map(|(k, v)| format!("{k}={v}")));
        }
        let o = &self.options;
        for (name, value) in [
            ("num_warps", o.num_warps),
            ("num_ctas", o.num_ctas),
            ("num_stages", o.num_stages),
            ("maxnreg", o.maxnreg),
        ] {
            if let Some(v) = value {
                parts.push(format!("{name}={v}"));
            }
        }
        parts.join(", ")
    }
}

/// One `<kernel>.autotune.json`: `{"key": ..., "configs_timings": [[config, timings], ...]}`.
#[derive(Debug, Deserialize)]
struct AutotuneFile {
    #[serde(default)]
    key: serde_json::Value,
    configs_timings: Vec<(AutotuneConfig, serde_json::Value)>,
}

#[derive(Debug, Deserialize)]
struct AutotuneConfig {
    /// In the file's order (the config's own), which serde_json's map would sort.
    #[serde(default)]
    kwargs: indexmap::IndexMap<String, serde_json::Value>,
    #[serde(default)]
    num_warps: Option<u32>,
    #[serde(default)]
    num_stages: Option<u32>,
    #[serde(default)]
    num_ctas: Option<u32>,
}

/// The first number of a timing: a list of quantiles `[0.5, 0.2, 0.8]`, or one number.
fn first_timing(value: &serde_json::Value) -> f64 {
    match value {
        serde_json::Value::Array(items) => items.first().map_or(f64::INFINITY, first_timing),
        serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::INFINITY),
        _ => f64::INFINITY,
    }
}

/// The autotuner's choice that compiled to this cubin: among the kernel's autotune records in
/// the cache, the fastest config of each, kept when its num_warps, num_stages and num_ctas are
/// the cubin's. One match names the constexprs; none or several name nothing (a guess would
/// put a wrong config into a bug report).
fn autotuned_config(
    cache_dir: &Path,
    kernel: &str,
    options: &TritonOptions,
) -> Option<AutotunedConfig> {
    let file_name = format!("{kernel}.autotune.json");
    let mut matches = Vec::new();
    for entry in std::fs::read_dir(cache_dir)
        .ok()?
        .flatten()
        .take(MAX_ENTRIES)
    {
        let path = entry.path().join(&file_name);
        let Some(text) = read_text(&path) else {
            continue;
        };
        let Ok(record) = serde_json::from_str::<AutotuneFile>(&text) else {
            continue;
        };
        let Some((best, _)) = record
            .configs_timings
            .iter()
            .min_by(|a, b| first_timing(&a.1).total_cmp(&first_timing(&b.1)))
        else {
            continue;
        };
        let same =
            |want: Option<u32>, got: Option<u32>| want.is_none() || got.is_none() || want == got;
        if same(options.num_warps, best.num_warps)
            && same(options.num_stages, best.num_stages)
            && same(options.num_ctas, best.num_ctas)
        {
            matches.push(AutotunedConfig {
                constants: best
                    .kwargs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string().trim_matches('"').to_string()))
                    .collect(),
                candidates: record.configs_timings.len(),
                key: record.key.to_string(),
                file: path,
            });
        }
    }
    if matches.len() == 1 {
        matches.pop()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r#"#loc = loc("/work/app/matmul.py":30:0)
#loc69 = loc("a_ptr"(#loc))
module {
  tt.func public @matmul_kernel(%a_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32} loc("a_ptr"(#loc)), %b_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32} loc("b_ptr"(#loc)), %M: i32 loc("M"(#loc)), %stride_am: i32 loc("stride_am"(#loc))) attributes {noinline = false} {
    %pid_m = tt.get_program_id x : i32 loc(#loc78)
"#;

    #[test]
    fn the_signature_names_and_types_every_parameter() {
        let params = signature(SOURCE, "matmul_kernel");
        let names: Vec<(&str, &str)> = params
            .iter()
            .map(|p| (p.name.as_str(), p.ty.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("a_ptr", "!tt.ptr<bf16>"),
                ("b_ptr", "!tt.ptr<bf16>"),
                ("M", "i32"),
                ("stride_am", "i32")
            ]
        );
        assert_eq!(location(SOURCE).as_deref(), Some("/work/app/matmul.py:30"));
        assert!(signature(SOURCE, "other_kernel").is_empty());
    }

    #[test]
    fn pointers_become_typed_buffers_and_integers_sizes() {
        let kernel = TritonKernel {
            name: "matmul_kernel".into(),
            entry: PathBuf::from("/cache/X"),
            params: signature(SOURCE, "matmul_kernel"),
            options: TritonOptions::default(),
            location: location(SOURCE),
            autotuned: None,
            notes: Vec::new(),
        };
        let decl = kernel.declaration();
        assert_eq!(decl.path, PathBuf::from("/work/app/matmul.py"));
        assert_eq!(decl.line, 30);
        assert!(
            matches!(&decl.params[0].ty, ParamType::Pointer { element, .. } if element == "__nv_bfloat16")
        );
        assert!(matches!(&decl.params[2].ty, ParamType::Integer(t) if t == "i32"));
    }

    #[test]
    fn the_cache_entry_is_found_by_the_cubin_and_its_autotuned_config_named() {
        let cache = tempfile::tempdir().unwrap();
        for (entry, cubin, warps) in [
            ("AAA", b"other".as_slice(), 8),
            ("BBB", b"cubin bytes".as_slice(), 4),
        ] {
            let dir = cache.path().join(entry);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("matmul_kernel.cubin"), cubin).unwrap();
            std::fs::write(
                dir.join("matmul_kernel.json"),
                format!(r#"{{"num_warps": {warps}, "num_ctas": 1, "num_stages": 4, "maxnreg": null, "shared": 12288, "triton_version": "3.6.0"}}"#),
            )
            .unwrap();
            std::fs::write(dir.join("matmul_kernel.source"), SOURCE).unwrap();
        }
        let tuned = cache.path().join("TUNE");
        std::fs::create_dir_all(&tuned).unwrap();
        std::fs::write(
            tuned.join("matmul_kernel.autotune.json"),
            r#"{"key": [1000, 744, 520, "torch.bfloat16"], "configs_timings": [
                [{"kwargs": {"BLOCK_M": 128, "BLOCK_N": 128}, "num_warps": 8, "num_stages": 3, "num_ctas": 1}, [0.05, 0.04, 0.06]],
                [{"kwargs": {"BLOCK_M": 64, "BLOCK_N": 128}, "num_warps": 4, "num_stages": 4, "num_ctas": 1}, [0.03, 0.02, 0.04]]]}"#,
        )
        .unwrap();
        let dirs = vec![cache.path().to_path_buf()];
        let found = find(b"cubin bytes", "matmul_kernel", &dirs).expect("found by its bytes");
        assert_eq!(found.entry, cache.path().join("BBB"));
        assert_eq!(found.options.num_warps, Some(4));
        assert_eq!(
            found.config_text(),
            "BLOCK_M=64, BLOCK_N=128, num_warps=4, num_ctas=1, num_stages=4"
        );
        assert_eq!(found.autotuned.as_ref().unwrap().candidates, 2);
        assert!(find(b"no such bytes", "matmul_kernel", &dirs).is_none());
        // A name that is no Python identifier is no Triton kernel.
        assert!(find(b"cubin bytes", "ns::k<1>", &dirs).is_none());
    }

    #[test]
    fn an_unrecorded_choice_names_no_constexprs() {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("E");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.cubin"), b"x").unwrap();
        std::fs::write(dir.join("k.json"), r#"{"num_warps": 4}"#).unwrap();
        let found = find(b"x", "k", &[cache.path().to_path_buf()]).unwrap();
        assert!(found.autotuned.is_none());
        assert_eq!(found.config_text(), "num_warps=4");
        assert!(
            found
                .notes
                .iter()
                .any(|n| n.contains("TRITON_CACHE_AUTOTUNING=1")),
            "{:?}",
            found.notes
        );
    }
}
