//! `repro import cuda`: every declaration form the reader takes (one snippet each: parameters,
//! templates, macros, instantiations), and no panic on truncated, garbage or unreadable input.
//! Split from import_cuda.rs (the fixture tree and the skeletons made from it).

use std::path::{Path, PathBuf};

use repro::import::cuda::{self, KernelDecl, KernelKind, Param, ParamType, TemplateParamKind};

use super::import_cuda::{known, ptr, rendered, root, todo};

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
