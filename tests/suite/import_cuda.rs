//! `repro import cuda`: finding kernels in a hand-written CUDA tree (tests/fixtures/import/cuda/)
//! and the spec skeletons made from them. No nvcc or GPU needed.

use std::path::{Path, PathBuf};

use repro::import::cuda::{
    self, ImportError, KernelDecl, KernelKind, ParamType, TemplateParam, TemplateParamKind,
};
use repro::import::skeleton::{Skeleton, Tensor, Value};

/// Relative to the package root (cargo's working directory for tests), so paths in the
/// snapshots are stable.
const ROOT: &str = "tests/fixtures/import/cuda";

pub(crate) fn root() -> &'static Path {
    let root = Path::new(ROOT);
    assert!(root.is_dir(), "run from the package root");
    root
}

fn find_one(kernel: &str) -> KernelDecl {
    let mut found = cuda::find(root(), kernel).unwrap_or_else(|e| panic!("{kernel}: {e}"));
    assert_eq!(found.len(), 1, "{kernel}: {found:#?}");
    found.remove(0)
}

/// The skeleton with its include directories made relative to the fixture root, as the CLI
/// makes them relative to the spec.
fn skeleton(decl: &KernelDecl) -> Skeleton {
    let mut sk = cuda::skeleton(decl, root());
    let base = std::path::absolute(root()).unwrap();
    sk.include_dirs = sk
        .include_dirs
        .iter()
        .map(|d| {
            let rel = pathdiff::diff_paths(d, &base).unwrap_or_else(|| PathBuf::from(d));
            rel.to_string_lossy().replace('\\', "/")
        })
        .collect();
    sk
}

/// Renders, checks the text is YAML, and returns it.
pub(crate) fn rendered(sk: &Skeleton) -> String {
    let text = sk.render();
    serde_yaml::from_str::<serde_yaml::Value>(&text)
        .unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"));
    text
}

pub(crate) fn known(s: &str) -> Value {
    Value::known(s)
}

pub(crate) fn todo(s: &str) -> Value {
    Value::todo(s)
}

pub(crate) fn ptr(element: &str, is_const: bool) -> ParamType {
    ParamType::Pointer {
        element: element.into(),
        resolved: None,
        is_const,
    }
}

fn types(decl: &KernelDecl) -> Vec<(Option<&str>, &ParamType)> {
    decl.params
        .iter()
        .map(|p| (p.name.as_deref(), &p.ty))
        .collect()
}

fn tensor(name: &str, dtype: Value, output: bool) -> Tensor {
    Tensor {
        name: name.into(),
        dtype,
        shape: vec![todo(&format!("shape of {name}"))],
        output: Some(output),
    }
}

fn size(name: &str) -> (String, Value) {
    (
        name.into(),
        todo(&format!("value of {name} in the production launch")),
    )
}

fn location_tail(loc: &str) -> String {
    loc.strip_prefix(&format!("{ROOT}/"))
        .unwrap_or(loc)
        .to_string()
}

// ------------------------------------------------------------------------------------------------
// The fixture tree

#[test]
fn templated_gemm_with_defaults_and_launch_bounds() {
    let d = find_one("gemm");
    assert_eq!(d.kind, KernelKind::Global);
    assert_eq!(location_tail(&d.location()), "src/gemm.cuh:24");
    assert!(d.definition);
    assert_eq!(
        d.declared_at
            .iter()
            .map(|l| location_tail(l))
            .collect::<Vec<_>>(),
        ["src/gemm.cuh:20"]
    );
    assert_eq!(d.qualified_name, "gemm");
    assert_eq!(d.launch_bounds.as_deref(), Some("256, 2"));
    assert_eq!(d.dynamic_smem, Some(true));
    assert!(!d.extern_c);
    // Defaults come from the forward declaration; names from the definition.
    assert_eq!(
        d.template_params,
        vec![
            TemplateParam {
                kind: TemplateParamKind::Type,
                name: Some("T".into()),
                default: None,
                pack: false
            },
            TemplateParam {
                kind: TemplateParamKind::Value("int".into()),
                name: Some("BM".into()),
                default: Some("128".into()),
                pack: false
            },
            TemplateParam {
                kind: TemplateParamKind::Value("int".into()),
                name: Some("BN".into()),
                default: Some("128".into()),
                pack: false
            },
            TemplateParam {
                kind: TemplateParamKind::Type,
                name: Some("Cfg".into()),
                default: Some("TileCfg<BM, BN, (BN > 64 ? 32 : 16)>".into()),
                pack: false
            },
        ]
    );
    assert_eq!(
        types(&d),
        vec![
            (Some("A"), &ptr("T", true)),
            (Some("B"), &ptr("T", true)),
            (Some("D"), &ptr("T", false)),
            (Some("M"), &ParamType::Integer("int".into())),
            (Some("N"), &ParamType::Integer("int".into())),
            (Some("K"), &ParamType::Integer("int".into())),
        ]
    );
    assert_eq!(d.params[0].text, "const T* __restrict__ A");
    assert_eq!(
        d.instantiations
            .iter()
            .map(|l| location_tail(l))
            .collect::<Vec<_>>(),
        ["gemm<float, 64, 64> (tests/fixtures/import/cuda/src/gemm.cuh:52)"]
    );

    let sk = skeleton(&d);
    assert_eq!(sk.name, "gemm");
    assert_eq!(sk.kernel_name, "gemm");
    assert_eq!(sk.includes, ["gemm.cuh"]);
    assert_eq!(sk.include_dirs, ["src"]);
    assert_eq!(
        sk.template_args,
        vec![
            todo("template argument T (a type)"),
            known("128"),
            known("128")
        ]
    );
    let t_dtype = || todo("dtype of T (a template parameter)");
    assert_eq!(
        sk.tensors,
        vec![
            tensor("A", t_dtype(), false),
            tensor("B", t_dtype(), false),
            tensor("D", t_dtype(), true),
        ]
    );
    assert_eq!(sk.sizes, vec![size("M"), size("N"), size("K")]);
    assert_eq!(sk.args, ["A", "B", "D", "M", "N", "K"].map(known).to_vec());
    assert_eq!(
        sk.smem,
        todo("dynamic smem bytes of the production launch (the kernel declares extern __shared__)")
    );
    insta::assert_snapshot!("gemm", rendered(&sk));
}

#[test]
fn extern_c_kernels() {
    let d = find_one("scale_rows");
    assert!(d.extern_c);
    assert_eq!(location_tail(&d.location()), "src/other.cu:5");
    assert_eq!(
        types(&d),
        vec![
            (Some("out"), &ptr("float", false)),
            (Some("in"), &ptr("float", true)),
            (Some("alpha"), &ParamType::Float("float".into())),
            (Some("n"), &ParamType::Integer("size_t".into())),
        ]
    );
    assert_eq!(d.dynamic_smem, Some(false));
    let sk = skeleton(&d);
    assert_eq!(sk.smem, known("0"));
    assert_eq!(
        sk.args,
        vec![
            known("out"),
            known("in"),
            todo("value of alpha (float)"),
            known("n")
        ]
    );
    assert!(sk
        .notes
        .iter()
        .any(|n| n.contains("other.cu is not a header")));
    insta::assert_snapshot!("scale_rows", rendered(&sk));

    // Inside an `extern "C" { }` block, with `static` and `__launch_bounds__`.
    let d = find_one("fill");
    assert!(d.extern_c);
    assert_eq!(d.specifiers, ["static"]);
    assert_eq!(d.launch_bounds.as_deref(), Some("1024"));
    assert_eq!(
        types(&d),
        vec![
            (Some("dst"), &ptr("int32_t", false)),
            (Some("value"), &ParamType::Integer("int32_t".into())),
            (Some("count"), &ParamType::Integer("long long".into())),
        ]
    );
    let sk = skeleton(&d);
    assert_eq!(sk.tensors, vec![tensor("dst", known("i32"), true)]);
    assert_eq!(sk.sizes, vec![size("value"), size("count")]);
}

#[test]
fn macro_heavy_kernel() {
    let d = find_one("gemv");
    assert_eq!(location_tail(&d.location()), "src/macros.cuh:28");
    assert_eq!(d.launch_bounds.as_deref(), Some("128"));
    assert_eq!(
        types(&d),
        vec![
            (Some("x"), &ptr("__nv_bfloat16", true)),
            (Some("y"), &ptr("__nv_bfloat16", false)),
            (Some("w"), &ptr("__nv_bfloat16", true)),
            (Some("partial"), &ptr("float", false)),
            (Some("scratch"), &ptr("OUT_T", false)),
            (Some("rows"), &ParamType::Integer("int".into())),
            (Some("cols"), &ParamType::Integer("int".into())),
            (Some("flags"), &ParamType::Integer("unsigned".into())),
        ]
    );
    assert_eq!(d.params[7].default.as_deref(), Some("0u"));
    for m in [
        "KERNEL",
        "LAUNCH_BOUNDS",
        "GEMV_IO",
        "ELEM",
        "RESTRICT",
        "ACC",
    ] {
        assert!(d.macros.iter().any(|x| x == m), "{m} in {:?}", d.macros);
    }
    assert_eq!(d.ambiguous_macros, ["OUT_T"]);
    assert_eq!(
        d.macro_alternatives,
        [(
            "ACC".to_string(),
            "`ACC` is `float` here, `double` when USE_DOUBLE_PARTIALS is defined".to_string()
        )]
    );
    let sk = skeleton(&d);
    assert_eq!(
        sk.tensors,
        vec![
            tensor("x", known("bf16"), false),
            tensor("y", known("bf16"), true),
            tensor("w", known("bf16"), false),
            tensor(
                "partial",
                todo("dtype of partial: `ACC` is `float` here, `double` when USE_DOUBLE_PARTIALS is defined; the production flags decide"),
                true
            ),
            tensor(
                "scratch",
                todo("dtype of scratch: `OUT_T` is a macro with several definitions"),
                true
            ),
        ]
    );
    assert_eq!(
        sk.sizes,
        vec![size("rows"), size("cols"), ("flags".into(), known("0"))]
    );
    insta::assert_snapshot!("gemv", rendered(&sk));
}

#[test]
fn tma_kernel_in_namespaces() {
    let d = find_one("tma_gemm");
    assert_eq!(d.qualified_name, "hopper::v2::tma_gemm");
    assert_eq!(location_tail(&d.location()), "src/hopper/tma_gemm.cuh:13");
    assert_eq!(d.launch_bounds.as_deref(), Some("384, 1"));
    assert_eq!(d.cluster_dims.as_deref(), Some("2, 1, 1"));
    assert_eq!(
        types(&d),
        vec![
            (Some("tmap_a"), &ParamType::TensorMap),
            (Some("tmap_b"), &ParamType::TensorMap),
            (Some("D"), &ptr("cutlass::bfloat16_t", false)),
            (Some("bias"), &ptr("float", true)),
            (Some("M"), &ParamType::Integer("int".into())),
            (Some("N"), &ParamType::Integer("int".into())),
            (Some("K"), &ParamType::Integer("int".into())),
            (Some("alpha"), &ParamType::Float("float".into())),
        ]
    );
    assert_eq!(
        d.params[0].text,
        "const __grid_constant__ CUtensorMap tmap_a"
    );
    // Qualified lookups, the inline namespace optional.
    for name in ["hopper::tma_gemm", "hopper::v2::tma_gemm", "v2::tma_gemm"] {
        assert_eq!(find_one(name).location(), d.location(), "{name}");
    }
    assert!(matches!(
        cuda::find(root(), "other::tma_gemm"),
        Err(ImportError::NotFound { .. })
    ));

    let sk = skeleton(&d);
    assert_eq!(sk.kernel_name, "hopper::v2::tma_gemm");
    assert_eq!(sk.template_args, vec![known("4"), known("2")]);
    // "hopper/barrier.cuh" resolves from src/ only.
    assert_eq!(sk.include_dirs, ["src/hopper", "src"]);
    assert_eq!(
        sk.args[..2],
        [
            todo("TMA descriptor `tmap_a`: the `tma:` section (Hopper support) builds it"),
            todo("TMA descriptor `tmap_b`: the `tma:` section (Hopper support) builds it"),
        ]
    );
    assert_eq!(sk.args[7], known("1.0f"));
    assert_eq!(sk.smem, known("0"));
    assert_eq!(
        sk.block[0],
        todo("block x of the production launch (__launch_bounds__(384, 1): at most 384 threads in all)")
    );
    insta::assert_snapshot!("tma_gemm", rendered(&sk));
}

#[test]
fn device_task_body() {
    let d = find_one("tile_task");
    assert_eq!(d.kind, KernelKind::Device);
    assert_eq!(location_tail(&d.location()), "src/tasks.cuh:11");
    assert_eq!(d.specifiers, ["__forceinline__"]);
    assert_eq!(
        types(&d),
        vec![
            (Some("a"), &ptr("__nv_bfloat16", true)),
            (Some("b"), &ptr("__nv_bfloat16", true)),
            (Some("acc"), &ptr("float", false)),
            (Some("k_tiles"), &ParamType::Integer("int64_t".into())),
            (Some("args"), &ParamType::Other("const TaskArgs".into())),
        ]
    );
    let sk = skeleton(&d);
    assert!(sk.notes.iter().any(|n| n.contains("`kind: device`")));
    assert_eq!(
        sk.args[4],
        todo("argument `args` of type `const TaskArgs`: a C++ expression (build it in `kernel.setup` or `source.prelude`)")
    );
    insta::assert_snapshot!("tile_task", rendered(&sk));
}

// ------------------------------------------------------------------------------------------------
// The reference: `op: gemm` only for what looks like a GEMM, `op: custom` for the rest

/// Reductions (tests/fixtures/import/custom/), outside the fixture tree above so its counts stay.
const CUSTOM: &str = "tests/fixtures/import/custom";

fn custom_skeleton(kernel: &str) -> Skeleton {
    let mut found = cuda::find(Path::new(CUSTOM), kernel).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.len(), 1, "{kernel}: {found:#?}");
    let mut sk = cuda::skeleton(&found.remove(0), Path::new(CUSTOM));
    sk.include_dirs = vec![".".into()];
    sk
}

#[test]
fn a_reduction_gets_a_custom_reference_with_its_signature() {
    let sk = custom_skeleton("column_sum");
    assert!(!sk.looks_like_gemm());
    assert_eq!(
        sk.reference_signature(),
        "void column_sum_reference(repro::In X, repro::Out D)"
    );
    let text = rendered(&sk);
    assert!(text.contains("\nreference:\n  op: custom\n"), "{text}");
    assert!(!text.contains("GEMM's"), "{text}");
    insta::assert_snapshot!("column_sum", text);

    // A name that says "matmul" on a kernel around a GEMM is not taken for one; the signature
    // follows the parameters' order, the output first.
    let sk = custom_skeleton("matmul_backward_bias");
    assert!(!sk.looks_like_gemm());
    assert_eq!(
        sk.reference_signature(),
        "void matmul_backward_bias_reference(repro::Out dbias, repro::In dout)"
    );
    let yaml: serde_yaml::Value = serde_yaml::from_str(&rendered(&sk)).unwrap();
    assert_eq!(yaml["reference"]["op"], serde_yaml::Value::from("custom"));
    assert_eq!(
        yaml["reference"]["function"],
        serde_yaml::Value::from("TODO: the reference function: void matmul_backward_bias_reference(repro::Out dbias, repro::In dout), one parameter per tensor in this spec's order")
    );
}

#[test]
fn gemms_keep_the_gemm_reference() {
    // By name: their shapes are TODOs (a declaration says nothing of them).
    for kernel in ["gemm", "tma_gemm"] {
        let sk = skeleton(&find_one(kernel));
        assert!(sk.looks_like_gemm(), "{kernel}");
        let yaml: serde_yaml::Value = serde_yaml::from_str(&rendered(&sk)).unwrap();
        assert_eq!(yaml["reference"]["op"], serde_yaml::Value::from("gemm"));
    }
    // A GEMM's task body, a GEMV, an elementwise kernel: nothing says GEMM.
    for kernel in ["tile_task", "gemv", "scale_rows"] {
        let sk = skeleton(&find_one(kernel));
        assert!(!sk.looks_like_gemm(), "{kernel}");
    }
}

#[test]
fn an_overloaded_name_lists_every_candidate() {
    let found = cuda::find(root(), "reduce").unwrap();
    let at: Vec<String> = found.iter().map(|d| location_tail(&d.location())).collect();
    assert_eq!(at, ["src/other.cu:20", "src/reduce.cuh:4"]);
    assert!(found[0].declared_at.is_empty());
    assert_eq!(
        found[1]
            .declared_at
            .iter()
            .map(|l| location_tail(l))
            .collect::<Vec<_>>(),
        ["src/reduce.cuh:3"]
    );
    assert_eq!(found[0].params[0].ty, ptr("double", true));
    assert_eq!(found[1].params[0].ty, ptr("float", true));
    // A narrower PATH picks one.
    let one = cuda::find(&root().join("src/reduce.cuh"), "reduce").unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].params[0].ty, ptr("float", true));
}

#[test]
fn unknown_names_suggest_similar_kernels() {
    let err = cuda::find(root(), "gem").unwrap_err();
    match &err {
        ImportError::NotFound {
            files_scanned,
            suggestions,
            ..
        } => {
            assert_eq!(*files_scanned, 9, "build/ is not scanned");
            assert!(suggestions[0].starts_with("`gemm`"), "{suggestions:?}");
            assert!(suggestions.iter().any(|s| s.starts_with("`gemv`")));
        }
        other => panic!("{other:?}"),
    }
    insta::assert_snapshot!("not_found", err.to_string());

    // A host function of that name is pointed out.
    let err = cuda::find(root(), "launch_gemm").unwrap_err().to_string();
    assert!(
        err.contains("`launch_gemm` is declared as a host function")
            && err.contains("src/gemm.cuh:45"),
        "{err}"
    );

    let err = cuda::find(Path::new("tests/fixtures/import/cuda/no_such_dir"), "gemm").unwrap_err();
    assert!(matches!(err, ImportError::Io { .. }), "{err}");

    let err = cuda::find(root(), "gemm<float>").unwrap_err();
    assert!(matches!(err, ImportError::BadName { .. }), "{err}");
    assert!(cuda::find(root(), "not a name").is_err());
}

#[test]
fn build_and_vcs_folders_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    copy_tree(root(), base);
    let decoy = "__global__ void gemm(double* decoy);\n__global__ void decoy_only(float* x);\n";
    for dir in [
        ".git/objects",
        ".hg",
        ".svn",
        ".venv/lib",
        "node_modules/pkg",
        "cmake-build-debug",
        "build-release",
        "_deps/cutlass-src",
        "target/debug",
        "__pycache__",
        "dist",
        "src/CMakeFiles",
    ] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
        std::fs::write(base.join(dir).join("decoy.cuh"), decoy).unwrap();
    }
    // Not a source extension: not read.
    std::fs::write(base.join("src/notes.txt"), decoy).unwrap();
    let found = cuda::find(base, "gemm").unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].path.ends_with("src/gemm.cuh"));
    assert!(matches!(
        cuda::find(base, "decoy_only"),
        Err(ImportError::NotFound {
            files_scanned: 9,
            ..
        })
    ));
    // Vendored code is scanned.
    std::fs::create_dir_all(base.join("third_party/lib")).unwrap();
    std::fs::write(base.join("third_party/lib/decoy.cuh"), decoy).unwrap();
    assert_eq!(cuda::find(base, "decoy_only").unwrap().len(), 1);
    // A skipped folder given as the root itself is scanned.
    let in_build = cuda::find(&root().join("build"), "gemm").unwrap();
    assert_eq!(in_build.len(), 1);
    assert_eq!(in_build[0].params[0].name.as_deref(), Some("build_decoy"));
    // A file given as the root is read whatever its extension.
    assert_eq!(
        cuda::find(&base.join("src/notes.txt"), "decoy_only")
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn declared_in_a_header_defined_in_a_cu() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let write = |rel: &str, text: &str| {
        let path = base.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "include/lib/api.cuh",
        "#pragma once\n#include \"lib/detail.cuh\"\n#include \"cutlass/cutlass.h\"\n#include \"gone.cuh\"\n\
         __global__ void k(const float* a, float* b, int n = 256);\n",
    );
    write(
        "include/lib/detail.cuh",
        "#pragma once\n#include \"../lib/more.cuh\"\n",
    );
    write("include/lib/more.cuh", "#pragma once\n");
    write(
        "src/k.cu",
        "#include \"lib/api.cuh\"\n__global__ void k(const float* a, float* b, int n) { extern __shared__ float s[]; }\n",
    );
    let found = cuda::find(base, "k").unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    let d = &found[0];
    assert!(d.definition);
    assert!(d.path.ends_with("src/k.cu"));
    assert_eq!(d.line, 2);
    assert_eq!(d.declared_at.len(), 1);
    assert!(d.declared_at[0].ends_with("include/lib/api.cuh:5"));
    // The default comes from the header's declaration.
    assert_eq!(d.params[2].default.as_deref(), Some("256"));
    let sk = cuda::skeleton(d, base);
    assert_eq!(sk.includes, ["k.cu"]);
    let abs = std::path::absolute(base).unwrap();
    let dirs: Vec<PathBuf> = sk.include_dirs.iter().map(PathBuf::from).collect();
    assert_eq!(dirs, [abs.join("src"), abs.join("include")]);
    assert_eq!(sk.sizes, vec![("n".to_string(), known("256"))]);
    assert!(sk.notes.iter().any(|n| n.contains("k.cu is not a header")));
    // "cutlass/cutlass.h" is a library's; "gone.cuh" is nowhere.
    let missing: Vec<&String> = sk
        .notes
        .iter()
        .filter(|n| n.starts_with("local includes not found"))
        .collect();
    assert_eq!(missing.len(), 1);
    assert!(missing[0].contains("\"gone.cuh\"") && !missing[0].contains("cutlass"));
    rendered(&sk);
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}
