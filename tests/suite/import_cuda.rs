//! `repro import cuda`: finding kernels in a hand-written CUDA tree (tests/fixtures/import/cuda/)
//! and the spec skeletons made from them. No nvcc or GPU needed.

use std::path::{Path, PathBuf};

use repro::import::cuda::{
    self, ImportError, KernelDecl, KernelKind, Param, ParamType, TemplateParam, TemplateParamKind,
};
use repro::import::skeleton::{Skeleton, Tensor, Value};

/// Relative to the package root (cargo's working directory for tests), so paths in the
/// snapshots are stable.
const ROOT: &str = "tests/fixtures/import/cuda";

fn root() -> &'static Path {
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
fn rendered(sk: &Skeleton) -> String {
    let text = sk.render();
    serde_yaml::from_str::<serde_yaml::Value>(&text)
        .unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"));
    text
}

fn known(s: &str) -> Value {
    Value::known(s)
}

fn todo(s: &str) -> Value {
    Value::todo(s)
}

fn ptr(element: &str, is_const: bool) -> ParamType {
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

// ------------------------------------------------------------------------------------------------
// Declaration forms, one snippet each

fn decls(text: &str) -> Vec<KernelDecl> {
    cuda::declarations_in(Path::new("snippet.cuh"), text)
}

fn one(text: &str) -> KernelDecl {
    let mut d = decls(text);
    assert_eq!(d.len(), 1, "{text}\n{d:#?}");
    d.remove(0)
}

fn names(params: &[Param]) -> Vec<Option<&str>> {
    params.iter().map(|p| p.name.as_deref()).collect()
}

#[test]
fn parameter_forms() {
    let d = one(
        "__global__ void k(float a[], const int b[16], void (*fn)(int), const Params& p, float** ptrs,\n\
         const void* raw, float4* vec, bool flag, double* opt = nullptr, [[maybe_unused]] int u,\n\
         __attribute__((unused)) unsigned long long big, std::size_t s, struct Opts o) {}",
    );
    assert_eq!(
        names(&d.params),
        [
            Some("a"),
            Some("b"),
            Some("fn"),
            Some("p"),
            Some("ptrs"),
            Some("raw"),
            Some("vec"),
            Some("flag"),
            Some("opt"),
            Some("u"),
            Some("big"),
            Some("s"),
            Some("o")
        ]
    );
    let t: Vec<&ParamType> = d.params.iter().map(|p| &p.ty).collect();
    assert_eq!(*t[0], ptr("float", false));
    assert_eq!(*t[1], ptr("int", true));
    assert!(matches!(t[2], ParamType::Other(_)));
    assert_eq!(*t[3], ParamType::Other("const Params&".into()));
    assert_eq!(*t[4], ParamType::Other("float**".into()));
    assert_eq!(*t[5], ptr("void", true));
    assert_eq!(*t[6], ptr("float4", false));
    assert_eq!(*t[7], ParamType::Bool);
    assert_eq!(*t[8], ptr("double", false));
    assert_eq!(d.params[8].default.as_deref(), Some("nullptr"));
    assert_eq!(*t[9], ParamType::Integer("int".into()));
    assert_eq!(*t[10], ParamType::Integer("unsigned long long".into()));
    assert_eq!(*t[11], ParamType::Integer("std::size_t".into()));
    assert_eq!(*t[12], ParamType::Other("struct Opts".into()));

    let sk = cuda::skeleton(&d, Path::new("."));
    assert_eq!(
        sk.tensors
            .iter()
            .map(|t| (t.name.as_str(), &t.dtype))
            .collect::<Vec<_>>(),
        vec![
            ("a", &known("f32")),
            ("b", &known("i32")),
            ("raw", &todo("dtype of raw (`void*`: the signature does not say)")),
            ("vec", &todo("dtype of vec: `float4` packs 4 f32 values; use f32 and count 4 elements per `float4` in the shape")),
            ("opt", &known("f64")),
        ]
    );
    assert!(sk
        .notes
        .iter()
        .any(|n| n.starts_with("opt default to a null pointer")));
    rendered(&sk);
}

#[test]
fn integer_defaults_become_sizes() {
    let d = one("__global__ void k(int a = 0x10, long b = -1'000L, unsigned c = 017u, int d = 0b101, int e = N * 2, int f = 0);");
    let sk = cuda::skeleton(&d, Path::new("."));
    assert_eq!(
        sk.sizes,
        vec![
            ("a".to_string(), known("16")),
            ("b".to_string(), known("-1000")),
            ("c".to_string(), known("15")),
            ("d".to_string(), known("5")),
            (
                "e".to_string(),
                todo("value of e in the production launch (default `N * 2`)")
            ),
            ("f".to_string(), known("0")),
        ]
    );
    rendered(&sk);
}

#[test]
fn unnamed_void_and_reserved_names() {
    let d = one("__global__ void k(void);");
    assert!(d.params.is_empty());
    assert!(!d.definition);
    let sk = cuda::skeleton(&d, Path::new("."));
    assert!(sk.smem.clone() != known("0"));
    assert!(sk
        .notes
        .iter()
        .any(|n| n.starts_with("only a declaration was found")));

    // Unnamed parameters get positional names; reserved ones are renamed; a size colliding with
    // a tensor name gets `_size`.
    let d = one("__global__ void k(const float*, int, float* _A, int A, half* half, int main);");
    assert_eq!(
        names(&d.params),
        [
            None,
            None,
            Some("_A"),
            Some("A"),
            Some("half"),
            Some("main")
        ]
    );
    let sk = cuda::skeleton(&d, Path::new("."));
    let tensors: Vec<&str> = sk.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tensors, ["arg0", "A", "half_arg"]);
    let sizes: Vec<&str> = sk.sizes.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(sizes, ["arg1", "A_size", "main_arg"]);
    assert_eq!(
        sk.args,
        ["arg0", "arg1", "A", "A_size", "half_arg", "main_arg"]
            .map(known)
            .to_vec()
    );
    rendered(&sk);
}

#[test]
fn template_forms() {
    let d = one(
        "template <typename T = float, typename... Ts, template <typename> class Op, int = 3,\n\
         std::size_t N = sizeof(T) * 8, bool B = (N < 64), typename = std::enable_if_t<(N > 1)>>\n\
         __global__ void k(T* out, T alpha, Ts... rest) {}",
    );
    let tp: Vec<(Option<&str>, &TemplateParamKind, Option<&str>, bool)> = d
        .template_params
        .iter()
        .map(|p| (p.name.as_deref(), &p.kind, p.default.as_deref(), p.pack))
        .collect();
    assert_eq!(
        tp,
        vec![
            (Some("T"), &TemplateParamKind::Type, Some("float"), false),
            (Some("Ts"), &TemplateParamKind::Type, None, true),
            (Some("Op"), &TemplateParamKind::Template, None, false),
            (
                None,
                &TemplateParamKind::Value("int".into()),
                Some("3"),
                false
            ),
            (
                Some("N"),
                &TemplateParamKind::Value("std::size_t".into()),
                Some("sizeof(T) * 8"),
                false
            ),
            (
                Some("B"),
                &TemplateParamKind::Value("bool".into()),
                Some("(N < 64)"),
                false
            ),
            (
                None,
                &TemplateParamKind::Type,
                Some("std::enable_if_t<(N > 1)>"),
                false
            ),
        ]
    );
    assert_eq!(d.params[1].ty, ParamType::TemplateValue("T".into()));
    let sk = cuda::skeleton(&d, Path::new("."));
    assert_eq!(
        sk.template_args,
        vec![
            known("float"),
            todo("template arguments of the pack Ts (a type; remove this entry if production passes none)"),
            todo("template argument Op (a template)"),
            known("3"),
        ]
    );
    // T's default gives the pointer's dtype.
    assert_eq!(sk.tensors[0].dtype, known("f32"));
    assert_eq!(sk.args[1], todo("value of alpha (T, a template parameter)"));
    rendered(&sk);
}

#[test]
fn declaration_forms() {
    let text = r#"
#define CAT(a, b) a##b
#define HD __host__ __device__
using Elem = cutlass::half_t;
typedef Elem MyElem;
namespace outer { namespace inner {
template <> __global__ void spec<float>(float* x) {}
}}
namespace a::b {
extern "C" __global__ void __launch_bounds__(128, 4) c_kernel(const MyElem* __restrict__ x, int n) {}
}
CUTLASS_GLOBAL void cutlass_style(CUTE_GRID_CONSTANT Params const params) {}
__global__ auto trailing(float* x) -> void {}
__global__ void noexcept_kernel(float* x) noexcept {}
HD void hd(float* x) {}
__device__ int counter;
__device__ float table[4] = {1, 2, 3, 4};
__global__ void spliced(float* \
    x, int \
    n) {}
#if 1
__global__ void live(float* x) {}
#else
__global__ void dead_else(float* x) {}
#endif
#if 0
__global__ void dead(float* x) {}
#elif 1
__global__ void elif_live(float* x) {}
#endif
__global__ void after(const char* s = "a \" quote )", char c = ')') {}
__global__ void ns_return(float* x) { auto l = [] __device__ (int i) { return i; }; (void)l; }
"#;
    let all = decls(text);
    let summary: Vec<(String, usize, KernelKind)> = all
        .iter()
        .map(|d| (d.qualified_name.clone(), d.line, d.kind))
        .collect();
    use KernelKind::{Device, Global};
    assert_eq!(
        summary,
        vec![
            ("outer::inner::spec".to_string(), 7, Global),
            ("a::b::c_kernel".to_string(), 10, Global),
            ("cutlass_style".to_string(), 12, Global),
            ("trailing".to_string(), 13, Global),
            ("noexcept_kernel".to_string(), 14, Global),
            ("hd".to_string(), 15, Device),
            ("spliced".to_string(), 18, Global),
            ("live".to_string(), 22, Global),
            ("elif_live".to_string(), 29, Global),
            ("after".to_string(), 31, Global),
            ("ns_return".to_string(), 32, Global),
        ]
    );
    let c = &all[1];
    assert!(c.extern_c);
    assert_eq!(c.launch_bounds.as_deref(), Some("128, 4"));
    assert_eq!(
        c.params[0].ty,
        ParamType::Pointer {
            element: "MyElem".into(),
            resolved: Some("cutlass::half_t".into()),
            is_const: true
        }
    );
    let sk = cuda::skeleton(c, Path::new("."));
    assert_eq!(sk.tensors[0].dtype, known("f16"));
    assert_eq!(sk.kernel_name, "a::b::c_kernel");
    assert_eq!(all[2].params[0].ty, ParamType::Other("Params const".into()));
    assert!(all[2].specifiers.contains(&"static".to_string()));
    assert_eq!(names(&all[6].params), [Some("x"), Some("n")]);
    assert_eq!(
        all[9].params[0].default.as_deref(),
        Some("\"a \\\" quote )\"")
    );
    assert_eq!(all[9].params[1].default.as_deref(), Some("')'"));
}

#[test]
fn conditional_macro_definitions() {
    let text = "\u{feff}#ifdef MYLIB_NS\n#define mylib mylib_v2\n#endif\n\
                #if defined(__CUDACC__)\n#define HD __host__ __device__\n#else\n#define HD inline\n#endif\n\
                #ifdef _MSC_VER\n#define EXPORT __declspec(dllexport)\n#else\n#define EXPORT\n#endif\n\
                #ifdef FP64\n#define REAL double\n#else\n#define REAL float\n#endif\n\
                namespace mylib {\n\
                HD void helper(float* x) {}\n\
                EXPORT __global__ void k(REAL* x) {}\n\
                }\n";
    let all = decls(text);
    let summary: Vec<(&str, KernelKind)> = all
        .iter()
        .map(|d| (d.qualified_name.as_str(), d.kind))
        .collect();
    // Nothing defines MYLIB_NS, so `mylib` is not a macro; nvcc's side of `#ifdef __CUDACC__` is
    // taken; `_MSC_VER` is not defined.
    assert_eq!(
        summary,
        [
            ("mylib::helper", KernelKind::Device),
            ("mylib::k", KernelKind::Global)
        ]
    );
    assert_eq!(all[1].macros, ["REAL"]);
    // FP64 might be set on the command line: REAL's dtype stays a question.
    assert!(all[1].ambiguous_macros.is_empty());
    assert_eq!(all[1].params[0].ty, ptr("float", false));
    assert_eq!(all[1].params[0].element_macro.as_deref(), Some("REAL"));
    assert_eq!(
        all[1].macro_alternatives,
        [(
            "REAL".to_string(),
            "`REAL` is `float` here, `double` when FP64 is defined".to_string()
        )]
    );
    let sk = cuda::skeleton(&all[1], Path::new("."));
    assert_eq!(
        sk.tensors[0].dtype,
        todo("dtype of x: `REAL` is `float` here, `double` when FP64 is defined; the production flags decide")
    );
}

#[test]
fn instantiations_attach_to_their_template() {
    let text = "template <typename T, int N> __global__ void k(T* x) {}\n\
                template __global__ void k<float, 4>(float*);\n\
                extern template __global__ void k<double, 8>(double*);\n\
                template <> __global__ void k<int, 2>(int* x) {}\n";
    let path = tempfile::NamedTempFile::with_suffix(".cuh").unwrap();
    std::fs::write(path.path(), text).unwrap();
    let found = cuda::find(path.path(), "k").unwrap();
    assert_eq!(found.len(), 1, "{found:#?}");
    let inst: Vec<String> = found[0]
        .instantiations
        .iter()
        .map(|s| s.split(" (").next().unwrap().to_string())
        .collect();
    assert_eq!(inst, ["k<float, 4>", "k<double, 8>", "k<int, 2>"]);
}

// ------------------------------------------------------------------------------------------------
// Never panics

fn fixture_texts() -> Vec<(PathBuf, String)> {
    cuda::source_files(root())
        .unwrap()
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect()
}

fn exercise(path: &Path, text: &str) {
    for d in cuda::declarations_in(path, text) {
        let sk = cuda::skeleton(&d, root());
        let rendered = sk.render();
        serde_yaml::from_str::<serde_yaml::Value>(&rendered)
            .unwrap_or_else(|e| panic!("not YAML: {e}\n{rendered}\nfrom:\n{text}"));
    }
}

#[test]
fn truncated_files_never_panic() {
    for (path, text) in fixture_texts() {
        let ends: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for &end in &ends {
            exercise(&path, &text[..end]);
        }
        // and with the head cut off
        for &start in ends.iter().step_by(7) {
            exercise(&path, &text[start..]);
        }
    }
}

#[test]
fn garbage_never_panics() {
    let nasty = [
        "/* unterminated",
        "R\"delim( unterminated raw",
        "\"unterminated string\n__global__ void k(float* x);",
        "#if 0\n__global__ void k(float* x);",
        "#define A A\n#define F(x) F(x) A\n__global__ void k(A F(F(1)) x);",
        "#define G(x) x x\n#define H G(G(G(G(G(G(G(G(G(G(G(G(G(G(G(G(1))))))))))))))))\n__global__ void k(int H);",
        "#define V(...) __VA_ARGS__\n__global__ void k(V(float* a, int n), V());",
        "#define P(x, y) x\n__global__ void k(P(float* a) int n);",
        "__global__ void k(((((((((((((((((((((",
        "__global__ void k(float* x)))))))))) {{{{ }",
        "template <<<<<<< __global__ void k(float* x);",
        "template <typename T, >> __global__ void k(T* x);",
        "}}}} namespace { __global__ void k(float* x); }}}}",
        "extern \"C\" extern \"C\" { __global__ __global__ void k(float* const* const x) {}",
        "__global__ void (float* x);",
        "__global__ void k(float* = , int = );",
        "__global__ void k(, , ,);",
        "__global__ void k<>(float*);",
        "template __global__ void k<(float*);",
        "\\\n\\\n#\\\ndefine X __global__\nX void k(int);",
        "#define\n#define 3\n#define F(\n#define F(a,\n#undef\n#include\n#include <\n#include \"",
        "__global__ void k(int x['], float y[\"]);",
        "__global__ void k(T* a) { extern",
        "__global__ void \u{00e9}l\u{00e8}ve(float* \u{00b5}s) {}",
        "\u{0}\u{1}\u{7f}__global__\u{0}void k(\u{feff}float* x);",
    ];
    for text in nasty {
        exercise(Path::new("nasty.cuh"), text);
    }
    // Big inputs that would be quadratic (or deeper than the stack) done naively.
    let start = std::time::Instant::now();
    let big = [
        format!(
            "template <{} __global__ void k(float* x);",
            "a < b, ".repeat(30_000)
        ),
        format!("__global__ void k({} float* x);", "(".repeat(30_000)),
        format!(
            "{}__global__ void k(float* x) {{}}",
            "namespace n { ".repeat(30_000)
        ),
        format!(
            "#define X0 __global__\n{}X30 void k(float* x);",
            (1..=30)
                .map(|k| format!("#define X{k} X{} X{}\n", k - 1, k - 1))
                .collect::<String>()
        ),
        format!(
            "#define F(x) x x\n__global__ void k({}1{} float* y);",
            "F(".repeat(200),
            ")".repeat(200)
        ),
    ];
    for text in &big {
        exercise(Path::new("big.cuh"), text);
    }
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    // Pseudo-random mixes of C++ punctuation and the words the scanner looks for.
    let pieces = [
        "__global__",
        "__device__",
        "template",
        "<",
        ">",
        ">>",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ";",
        ",",
        "*",
        "&",
        "=",
        "::",
        "extern",
        "\"C\"",
        "'",
        "\"",
        "/*",
        "*/",
        "//",
        "\n",
        "#",
        "#define",
        "#if 0",
        "#endif",
        "#else",
        "namespace",
        "x",
        "k",
        "T",
        "int",
        "float",
        "const",
        "__launch_bounds__",
        "CUtensorMap",
        "__grid_constant__",
        "typename",
        "...",
        "R\"(",
        ")\"",
        "\\\n",
        " ",
        "0",
        "1.0f",
        "extern __shared__",
        "struct",
        "using",
        "typedef",
        "=",
        "nullptr",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..1500 {
        let len = (next() % 120) as usize;
        let mut text = String::new();
        for _ in 0..len {
            text.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            if next() % 3 == 0 {
                text.push(' ');
            }
        }
        exercise(Path::new("random.cuh"), &text);
    }
    // Raw bytes through the lossy reader.
    let tmp = tempfile::tempdir().unwrap();
    for k in 0..20u64 {
        let bytes: Vec<u8> = (0..2000).map(|_| (next() >> (k % 8)) as u8).collect();
        std::fs::write(tmp.path().join(format!("g{k}.cu")), bytes).unwrap();
    }
    let _ = cuda::find(tmp.path(), "k");
}

/// Issue 17 item 5: a fifo, a device or a huge file under the tree is skipped with a note, never
/// read (a fifo blocks its reader, `/dev/zero` never ends); one named as PATH is an error.
#[test]
fn fifos_devices_and_huge_files_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("scale.cu"),
        "__global__ void scale(float* x, int n) {}\n",
    )
    .unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("pipe.cu"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.cuh")).unwrap();
    // Sparse: 17 MiB on paper, nothing on disk.
    std::fs::File::create(dir.join("table.h"))
        .unwrap()
        .set_len(17 << 20)
        .unwrap();

    let found = cuda::find(dir, "scale").unwrap();
    assert_eq!(found.len(), 1);
    let out = assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .args(["import", "cuda"])
        .arg(dir)
        .args(["--kernel", "scale"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success();
    let notes = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let path = |name: &str| dir.join(name).display().to_string();
    assert!(
        notes.contains(&format!(
            "note: skipped {}: a fifo, not a source file",
            path("pipe.cu")
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "note: skipped {}: a device, not a source file",
            path("zero.cuh")
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "note: skipped {}: 17.0 MiB, above the 16 MiB read of a source file",
            path("table.h")
        )),
        "{notes}"
    );

    for (root, what) in [
        (PathBuf::from("/dev/zero"), "a device"),
        (dir.join("pipe.cu"), "a fifo"),
    ] {
        let e = cuda::find(&root, "scale").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot read {}: {what}, not a source file", root.display())
        );
    }
}
