//! `repro import rust`: spec skeletons from cudarc launch sites. Fixtures in
//! tests/fixtures/import/rust/ are hand-written but realistic cudarc programs in each launch style
//! (builder, chained builder, cooperative, the older `f.launch(cfg, (..))`), with functions that
//! launch nothing and `launch` methods of other types that must not be taken for launches.
//! No nvcc or GPU needed.

use std::path::PathBuf;

use repro::import::rust::{self, Arg, ArgKind, ImportError, LaunchForm, LaunchSite};
use repro::import::skeleton::{Tensor, Value};

use super::import_rust_rules::inline;

/// A fixture's path as the tests name it (relative, so snapshots do not depend on the checkout).
pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from("tests/fixtures/import/rust").join(name)
}

pub(crate) fn sites(name: &str) -> Vec<LaunchSite> {
    rust::import(&fixture(name), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(crate) fn site(name: &str, kernel: &str) -> LaunchSite {
    let mut found = rust::import(&fixture(name), Some(kernel)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.len(), 1, "{name}: `{kernel}` launched more than once");
    found.remove(0)
}

pub(crate) fn error(result: Result<Vec<LaunchSite>, ImportError>) -> ImportError {
    match result {
        Ok(sites) => panic!(
            "expected an error, found {:?}",
            sites.iter().map(LaunchSite::location).collect::<Vec<_>>()
        ),
        Err(e) => e,
    }
}

pub(crate) fn known(text: &str) -> Value {
    Value::known(text)
}

pub(crate) fn todo(text: &str) -> Value {
    Value::todo(text)
}

pub(crate) fn ks(texts: [&str; 3]) -> [Value; 3] {
    texts.map(Value::known)
}

pub(crate) fn tensor(name: &str, dtype: Value, shape: Vec<Value>, output: Option<bool>) -> Tensor {
    Tensor {
        name: name.into(),
        dtype,
        shape,
        output,
    }
}

pub(crate) fn arg(rust: &str, kind: ArgKind) -> Arg {
    Arg {
        rust: rust.into(),
        kind,
    }
}

pub(crate) fn t(name: &str) -> ArgKind {
    ArgKind::Tensor(name.into())
}

pub(crate) fn s(name: &str) -> ArgKind {
    ArgKind::Size(name.into())
}

pub(crate) fn x(value: Value) -> ArgKind {
    ArgKind::Expr(value)
}

pub(crate) fn sizes(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.clone()))
        .collect()
}

/// The rendered skeleton, checked to be YAML.
pub(crate) fn rendered(site: &LaunchSite) -> String {
    let text = rust::skeleton(site).render();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} renders invalid YAML: {e}\n{text}", site.location()));
    assert_eq!(yaml["version"], serde_yaml::Value::from(1));
    text
}

// ---- builder form ---------------------------------------------------------------------------

#[test]
fn builder_gemm_resolves_lets_consts_and_the_config() {
    let all = sites("builder_gemm.rs");
    // The job runner's `job.launch(&plan)` (with its own `arg`) is not a launch.
    assert_eq!(all.len(), 1);
    let site = &all[0];
    assert_eq!(site.kernel.as_deref(), Some("tiled_gemm_bf16"));
    assert_eq!(
        site.kernel_source,
        "`module.load_function(\"tiled_gemm_bf16\")` (line 62)"
    );
    assert_eq!(
        site.location(),
        "tests/fixtures/import/rust/builder_gemm.rs:92"
    );
    assert_eq!(site.column, 22);
    assert_eq!(site.function, "main");
    assert_eq!(site.form, LaunchForm::Builder);
    assert!(!site.cooperative);
    assert_eq!(
        site.args,
        vec![
            arg("&a", t("a")),
            arg("&b", t("b")),
            arg("&mut d", t("d")),
            arg("&bias", t("bias")),
            arg("&(m as i32)", s("m")),
            arg("&(n as i32)", s("n")),
            arg("&(k as i32)", s("k")),
            arg("&alpha", x(known("1.0f"))),
        ]
    );
    // `let m = 1024; let k = m / 2;` resolve; the names stay in shapes and the grid.
    assert_eq!(
        site.sizes,
        sizes(&[
            ("m", known("1024")),
            ("k", known("512")),
            ("n", known("768"))
        ])
    );
    assert_eq!(
        site.tensors,
        vec![
            // memcpy_stod(&a_host), a_host: Vec<bf16> collected from (0..m * k)
            tensor("a", known("bf16"), vec![known("m * k")], Some(false)),
            // memcpy_stod(&b_host), b_host = vec![bf16::ONE; k * n]
            tensor("b", known("bf16"), vec![known("k * n")], Some(false)),
            // alloc_zeros::<bf16>(m * n), passed as &mut
            tensor("d", known("bf16"), vec![known("m * n")], Some(true)),
            // let bias: CudaSlice<f32> = stream.alloc_zeros(n)?
            tensor("bias", known("f32"), vec![known("n")], Some(false)),
        ]
    );
    assert_eq!(site.grid, ks(["ceil_div(n, 128)", "ceil_div(m, 128)", "1"]));
    assert_eq!(site.block, ks(["256", "1", "1"]));
    // STAGES * (TILE_M * TILE_K + TILE_K * TILE_N) * 2 = 2 * (4096 + 4096) * 2
    assert_eq!(site.smem, known("32768"));
    assert!(site
        .notes
        .iter()
        .any(|n| n == "Resolved in `main`: m = 1024, k = 512, n = 768."));

    let skeleton = rust::skeleton(site);
    assert_eq!(skeleton.name, "tiled_gemm_bf16");
    assert_eq!(skeleton.kernel_name, "tiled_gemm_bf16");
    assert_eq!(
        skeleton.origin,
        "tests/fixtures/import/rust/builder_gemm.rs:92"
    );
    assert!(skeleton.includes.is_empty());
    assert!(skeleton
        .notes
        .iter()
        .any(|n| n.contains("source.includes is empty") && n.contains("`tiled_gemm_bf16`")));
    insta::assert_snapshot!("builder_gemm", rendered(site));
}

#[test]
fn builder_with_for_num_elems_and_a_field_assignment() {
    let site = site("elementwise.rs", "relu_bf16");
    assert_eq!(
        site.kernel_source,
        "`kernels.get_fn(\"relu_bf16\")` (line 30)"
    );
    assert_eq!(site.form, LaunchForm::Builder);
    // `b.arg(&x).arg(&mut y); b.arg(&(N as u32));`
    assert_eq!(
        site.args,
        vec![
            arg("&x", t("x")),
            arg("&mut y", t("y")),
            arg("&(N as u32)", s("N"))
        ]
    );
    assert_eq!(site.sizes, sizes(&[("N", known("65536"))]));
    assert_eq!(
        site.tensors,
        vec![
            tensor("x", known("bf16"), vec![known("N")], Some(false)),
            tensor("y", known("bf16"), vec![known("N")], Some(true)),
        ]
    );
    // for_num_elems: block 1024, grid ceil(n / 1024); then `cfg.shared_mem_bytes = 1024 * 2`.
    assert_eq!(site.grid, ks(["ceil_div(N, 1024)", "1", "1"]));
    assert_eq!(site.block, ks(["1024", "1", "1"]));
    assert_eq!(site.smem, known("2048"));
    insta::assert_snapshot!("elementwise_relu", rendered(&site));
}

#[test]
fn a_kernel_function_passed_in_leaves_the_name_a_todo() {
    let site = site("elementwise.rs", "65");
    assert_eq!(site.kernel, None);
    assert_eq!(
        site.kernel_source,
        "the kernel function `f` is a parameter of `launch_unary`: look at its callers for the `load_function(\"..\")` it comes from"
    );
    let at = "at the launch site (tests/fixtures/import/rust/elementwise.rs:65)";
    assert_eq!(
        site.args,
        vec![
            arg("src", t("src")),
            arg("dst", t("dst")),
            arg("&len", s("len")),
            arg("&scale", x(todo(&format!("value of `scale` (f32) {at}")))),
        ]
    );
    assert_eq!(
        site.sizes,
        sizes(&[(
            "len",
            todo(&format!(
                "value of `len` (a parameter of `launch_unary`) {at}"
            ))
        )])
    );
    // Parameter types give dtype and direction: `&CudaSlice<u8>` / `&mut CudaSlice<u8>`.
    assert_eq!(
        site.tensors,
        vec![
            tensor(
                "src",
                known("u8"),
                vec![todo("shape of `src` (e.g. [M, K])")],
                Some(false)
            ),
            tensor(
                "dst",
                known("u8"),
                vec![todo("shape of `dst` (e.g. [M, K])")],
                Some(true)
            ),
        ]
    );
    // `let blocks = (len + threads - 1) / threads` is inlined; `threads = 128` resolved.
    assert_eq!(site.grid, ks(["(len + 128 - 1) / 128", "1", "1"]));
    assert_eq!(site.block, ks(["128", "1", "1"]));
    let skeleton = rust::skeleton(&site);
    assert_eq!(skeleton.name, "launch_unary");
    assert_eq!(
        skeleton.kernel_name,
        "TODO: the kernel's name (the kernel function `f` is a parameter of `launch_unary`: look at its callers for the `load_function(\"..\")` it comes from; launched at tests/fixtures/import/rust/elementwise.rs:65)"
    );
    insta::assert_snapshot!("elementwise_unknown_kernel", rendered(&site));
}

// ---- chained builder and cooperative launch -----------------------------------------------------

#[test]
fn chained_builder_traces_the_kernel_through_a_struct_field() {
    let all = sites("chained.rs");
    let kernels: Vec<_> = all.iter().map(|s| s.kernel.as_deref()).collect();
    assert_eq!(
        kernels,
        vec![Some("softmax_fwd_f16"), Some("grid_reduce_sum")]
    );

    let site = &all[0];
    assert_eq!(site.form, LaunchForm::Chained);
    assert_eq!(site.function, "Ops::softmax");
    assert_eq!(site.line, 55);
    // `Self { softmax_fwd, .. }` in `Ops::new`, from `let softmax_fwd = module.load_function(..)`.
    assert_eq!(
        site.kernel_source,
        "`module.load_function(\"softmax_fwd_f16\")` (line 28), stored in `softmax_fwd` by `Ops::new`"
    );
    assert_eq!(
        site.args,
        vec![
            arg("x", t("x")),
            arg("y", t("y")),
            arg("&(rows as i32)", s("rows")),
            arg("&(cols as i32)", s("cols")),
        ]
    );
    let at = "at the launch site (tests/fixtures/import/rust/chained.rs:55)";
    assert_eq!(
        site.sizes,
        sizes(&[
            (
                "rows",
                todo(&format!(
                    "value of `rows` (a parameter of `Ops::softmax`) {at}"
                ))
            ),
            (
                "cols",
                todo(&format!(
                    "value of `cols` (a parameter of `Ops::softmax`) {at}"
                ))
            ),
        ])
    );
    assert_eq!(
        site.tensors,
        vec![
            tensor(
                "x",
                known("f16"),
                vec![todo("shape of `x` (e.g. [M, K])")],
                Some(false)
            ),
            tensor(
                "y",
                known("f16"),
                vec![todo("shape of `y` (e.g. [M, K])")],
                Some(true)
            ),
        ]
    );
    assert_eq!(site.grid, ks(["rows", "1", "1"]));
    assert_eq!(site.block, ks(["256", "1", "1"]));
    // `block as usize * std::mem::size_of::<f32>()` with `block = 256u32`.
    assert_eq!(site.smem, known("1024"));
    insta::assert_snapshot!("chained_softmax", rendered(site));
}

#[test]
fn cooperative_launch_with_a_generic_buffer() {
    let site = site("chained.rs", "grid_reduce_sum");
    assert!(site.cooperative);
    assert_eq!(site.form, LaunchForm::Builder);
    // `reduce: module.load_function(REDUCE_KERNEL)?` with `const REDUCE_KERNEL: &str = ..`.
    assert_eq!(
        site.kernel_source,
        "`module.load_function(REDUCE_KERNEL)` (line 32), stored in `reduce` by `Ops::new`"
    );
    // `launch.arg(input).arg(&mut self.partials); launch.arg(&n);`
    assert_eq!(
        site.args,
        vec![
            arg("input", t("input")),
            arg("&mut self.partials", t("partials")),
            arg("&n", s("n")),
        ]
    );
    assert_eq!(
        site.tensors,
        vec![
            tensor(
                "input",
                todo("dtype of `input`: its element type is the generic `T` of `Ops::sum`"),
                vec![todo("shape of `input` (e.g. [M, K])")],
                Some(false)
            ),
            // The field's type comes from `struct Ops`.
            tensor(
                "partials",
                known("f32"),
                vec![todo("shape of `self.partials` (e.g. [M, K])")],
                Some(true)
            ),
        ]
    );
    assert_eq!(site.grid, ks(["ceil_div(n, 1024)", "1", "1"]));
    assert_eq!(site.block, ks(["1024", "1", "1"]));
    assert_eq!(site.smem, known("0"));
    assert!(site
        .notes
        .iter()
        .any(|n| n.contains("launch_cooperative") && n.contains("sync the whole grid")));
    insta::assert_snapshot!("chained_cooperative", rendered(&site));
}

// ---- the older tuple form -----------------------------------------------------------------------

#[test]
fn tuple_form_sites_and_not_the_schedulers_launch() {
    let all = sites("legacy.rs");
    let found: Vec<_> = all
        .iter()
        .map(|s| (s.kernel.as_deref().unwrap_or("?"), s.line, s.form))
        .collect();
    // `scheduler.launch(plan, (1, 2))` has the shape but neither a CUDA function nor a config.
    assert_eq!(
        found,
        vec![
            ("saxpy", 55, LaunchForm::Tuple),
            ("sgemm_naive", 80, LaunchForm::Tuple),
            ("fill", 93, LaunchForm::Tuple),
        ]
    );
}

#[test]
fn tuple_form_with_a_runtime_size_and_for_num_elems() {
    let site = site("legacy.rs", "saxpy");
    assert_eq!(
        site.kernel_source,
        "`dev.get_func(\"blas\", \"saxpy\")` (line 53)"
    );
    assert_eq!(
        site.args,
        vec![
            arg("&x", t("x")),
            arg("&mut y", t("y")),
            arg("3.0f32", x(known("3.0f"))),
            arg("n", s("n")),
        ]
    );
    // n comes from the command line: a size whose value is a TODO saying where it came from.
    let [(name, Value::Todo(why))] = site.sizes.as_slice() else {
        panic!("{:?}", site.sizes)
    };
    assert_eq!(name, "n");
    assert!(
        why.starts_with("value of `n` (= `std::env::args().nth(1)"),
        "{why}"
    );
    assert!(why.ends_with("line 46) at the launch site (tests/fixtures/import/rust/legacy.rs:55)"));
    // `htod_copy(vec![1.0f32; n])`: f32, n long.
    assert_eq!(
        site.tensors,
        vec![
            tensor("x", known("f32"), vec![known("n")], Some(false)),
            tensor("y", known("f32"), vec![known("n")], Some(true)),
        ]
    );
    assert_eq!(site.grid, ks(["ceil_div(n, 1024)", "1", "1"]));
    assert_eq!(site.block, ks(["1024", "1", "1"]));
    assert_eq!(site.smem, known("0"));
}

#[test]
fn tuple_form_gemm_with_parameters_and_host_vectors() {
    let site = site("legacy.rs", "sgemm_naive");
    assert_eq!(
        site.args,
        vec![
            arg("&a", t("a")),
            arg("&b", t("b")),
            arg("&mut c", t("c")),
            arg("m as i32", s("m")),
            arg("n as i32", s("n")),
            arg("k as i32", s("k")),
        ]
    );
    assert_eq!(
        site.tensors,
        vec![
            // htod_sync_copy(&a_host), a_host: Vec<f32> from (0..m * k)
            tensor("a", known("f32"), vec![known("m * k")], Some(false)),
            // htod_sync_copy(&b_host), b_host from (0..k * n).collect::<Vec<f32>>()
            tensor("b", known("f32"), vec![known("k * n")], Some(false)),
            tensor("c", known("f32"), vec![known("m * n")], Some(true)),
        ]
    );
    let names: Vec<&str> = site.sizes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["m", "k", "n"]);
    assert!(site
        .sizes
        .iter()
        .all(|(n, v)| *v == todo(&format!("value of `{n}` (a parameter of `gemm`) at the launch site (tests/fixtures/import/rust/legacy.rs:80)"))));
    // `let block = 16;` resolves inside the grid expression.
    assert_eq!(
        site.grid,
        ks(["(n + 16 - 1) / 16", "(m + 16 - 1) / 16", "1"])
    );
    assert_eq!(site.block, ks(["16", "16", "1"]));
    insta::assert_snapshot!("legacy_sgemm", rendered(&site));
}

#[test]
fn tuple_form_generic_scalar_and_buffer() {
    let site = site("legacy.rs", "fill");
    assert_eq!(
        site.args,
        vec![
            arg("buf", t("buf")),
            arg(
                "value",
                x(todo(
                    "argument 1 `value` is of the generic type `T` of `fill`: write the C++ expression the kernel receives"
                ))
            ),
            arg("len", s("len")),
        ]
    );
    assert_eq!(
        site.tensors,
        vec![tensor(
            "buf",
            todo("dtype of `buf`: its element type is the generic `T` of `fill`"),
            vec![todo("shape of `buf` (e.g. [M, K])")],
            Some(true)
        )]
    );
    assert_eq!(site.grid, ks(["ceil_div(len, 1024)", "1", "1"]));
}

// ---- the reference: `op: gemm` only for what looks like a GEMM -------------------------------

#[test]
fn a_column_sum_gets_a_custom_reference_with_its_signature() {
    let site = site("column_sum.rs", "column_sum");
    assert_eq!(
        site.tensors,
        vec![
            tensor("x", known("f32"), vec![known("ROWS * COLS")], Some(false)),
            tensor("d", known("f32"), vec![known("COLS")], Some(true)),
        ]
    );
    let sk = rust::skeleton(&site);
    assert!(!sk.looks_like_gemm());
    assert_eq!(
        sk.reference_signature(),
        "void column_sum_reference(repro::In x, repro::Out d)"
    );
    let text = rendered(&site);
    assert!(text.contains("\nreference:\n  op: custom\n"), "{text}");
    insta::assert_snapshot!("column_sum", text);
}

#[test]
fn shapes_say_gemm_where_the_name_cannot() {
    // The kernel is the caller's (its name a TODO), but A [m * k] and B [k * n] make C [m * n].
    let source = r#"
fn launch_gemm(stream: &CudaStream, f: &CudaFunction, m: usize, n: usize, k: usize) -> Result<()> {
    let a = stream.alloc_zeros::<f32>(m * k)?;
    let b = stream.alloc_zeros::<f32>(k * n)?;
    let mut c = stream.alloc_zeros::<f32>(m * n)?;
    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut builder = stream.launch_builder(f);
    builder.arg(&a).arg(&b).arg(&mut c);
    unsafe { builder.launch(cfg) }?;
    Ok(())
}
"#;
    let site = inline(source);
    assert_eq!(site.kernel, None);
    assert!(rust::skeleton(&site).looks_like_gemm());
    assert!(rendered(&site).contains("\nreference:\n  op: gemm\n"));
    // The same buffers summed elementwise (all [m * n]) are not a GEMM, though the TODO that
    // stands for the kernel's name mentions `launch_gemm`: a TODO says nothing.
    let site = inline(
        &source
            .replace("(m * k)", "(m * n)")
            .replace("(k * n)", "(m * n)"),
    );
    let sk = rust::skeleton(&site);
    assert!(
        sk.kernel_name.starts_with("TODO:") && sk.kernel_name.contains("launch_gemm"),
        "{}",
        sk.kernel_name
    );
    assert!(!sk.looks_like_gemm());
    assert!(rendered(&site).contains("\nreference:\n  op: custom\n"));
}

#[test]
fn gemm_sites_keep_the_gemm_reference() {
    for (file, kernel) in [
        ("builder_gemm.rs", "tiled_gemm_bf16"),
        ("legacy.rs", "sgemm_naive"),
    ] {
        assert!(
            rust::skeleton(&site(file, kernel)).looks_like_gemm(),
            "{kernel}"
        );
    }
    for (file, kernel) in [
        ("elementwise.rs", "relu_bf16"),
        ("chained.rs", "softmax_fwd_f16"),
        ("chained.rs", "grid_reduce_sum"),
    ] {
        assert!(
            !rust::skeleton(&site(file, kernel)).looks_like_gemm(),
            "{kernel}"
        );
    }
}

// ---- picking a site, listing ------------------------------------------------------------------

#[test]
fn kernel_selectors() {
    let path = fixture("legacy.rs");
    let by_name = rust::import(&path, Some("sgemm_naive")).unwrap();
    assert_eq!(by_name.len(), 1);
    assert_eq!(by_name[0].line, 80);
    let by_name_and_line = rust::import(&path, Some("saxpy:55")).unwrap();
    assert_eq!(by_name_and_line[0].kernel.as_deref(), Some("saxpy"));
    let by_line = rust::import(&path, Some("93")).unwrap();
    assert_eq!(by_line[0].kernel.as_deref(), Some("fill"));
    // No selector: every site, for the caller to list.
    assert_eq!(rust::import(&path, None).unwrap().len(), 3);
}

#[test]
fn unknown_kernel_lists_the_sites_with_a_hint() {
    let e = error(rust::import(&fixture("legacy.rs"), Some("sgemm_naiv")));
    let ImportError::NoSuchKernel {
        wanted, suggestion, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(wanted, "sgemm_naiv");
    assert_eq!(suggestion.as_deref(), Some("sgemm_naive"));
    insta::assert_snapshot!("unknown_kernel", e.to_string());

    // The right name on a wrong line points at the name's own site.
    let e = error(rust::import(&fixture("legacy.rs"), Some("saxpy:12")));
    assert!(e.to_string().contains("(did you mean `saxpy:55`?)"), "{e}");
}

#[test]
fn list_shows_every_site() {
    let listed: Vec<String> = rust::list(&fixture("chained.rs"))
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        listed,
        [
            "softmax_fwd_f16  tests/fixtures/import/rust/chained.rs:55  (in `Ops::softmax`, chained launch builder, held in `softmax_fwd`)",
            "grid_reduce_sum  tests/fixtures/import/rust/chained.rs:70  (in `Ops::sum`, launch builder, cooperative, held in `reduce`)",
        ]
    );
    let unknown = rust::list(&fixture("elementwise.rs")).unwrap();
    assert_eq!(
        unknown[1].to_string(),
        "f (CUDA name not known)  tests/fixtures/import/rust/elementwise.rs:65  (in `launch_unary`, launch builder)"
    );
    // The parameter the kernel function arrives in names the site.
    assert_eq!(unknown[1].selector(), "f:65");
    assert_eq!(unknown[0].selector(), "relu_bf16:39");
}

// ---- errors ---------------------------------------------------------------------------------

#[test]
fn unreadable_file() {
    let e = error(rust::import(&fixture("does_not_exist.rs"), None));
    assert!(matches!(e, ImportError::Read { .. }), "{e:?}");
    assert!(e
        .to_string()
        .starts_with("cannot read tests/fixtures/import/rust/does_not_exist.rs: "));
}

#[test]
fn rust_that_does_not_parse() {
    let e = error(rust::import(&fixture("broken.rs"), None));
    assert_eq!(
        e.to_string(),
        "tests/fixtures/import/rust/broken.rs:4:99: not valid Rust: cannot split the file into tokens: an unclosed or mismatched bracket, or an unterminated string, char or comment, near here"
    );
    let e = error(rust::import_source(
        "src/x.rs",
        "fn main() {\n    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: };\n}\n",
        None,
    ));
    assert_eq!(
        e.to_string(),
        "src/x.rs:2:62: not valid Rust: unexpected end of input, expected an expression"
    );
}

#[test]
fn no_launch_site_says_what_was_looked_for() {
    let e = error(rust::import(&fixture("no_launch.rs"), None));
    assert!(matches!(e, ImportError::NoLaunchSite { .. }), "{e:?}");
    insta::assert_snapshot!("no_launch_site", e.to_string());
}

// ---- kernels held in struct fields, locals, Arcs and maps (issue 24 item 5) -------------------

/// `repro import rust ARGS...` run as a user runs it, from the repository root.
pub(crate) fn repro_import(args: &[&str]) -> assert_cmd::assert::Assert {
    assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .args(["import", "rust"])
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
}

pub(crate) fn stdout_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

pub(crate) fn stderr_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn the_field_a_kernel_is_held_in_selects_its_launch() {
    let path = fixture("linear_layer.rs");
    // The issue's launch: `stream.launch_builder(&self.bias_grad_p1_kernel)...launch(..)`,
    // whose chain starts on line 54 and whose `.launch` is on line 56.
    for selector in [
        "bias_grad_p1_kernel",
        "bias_grad_p1_kernel:54",
        "bias_grad_p1_kernel:56",
        "bias_grad_p1",
        "bias_grad_p1:55",
    ] {
        let found =
            rust::import(&path, Some(selector)).unwrap_or_else(|e| panic!("{selector}: {e}"));
        assert_eq!(found.len(), 1, "{selector}");
        assert_eq!(found[0].line, 56, "{selector}");
        assert_eq!(
            found[0].kernel.as_deref(),
            Some("bias_grad_p1"),
            "{selector}"
        );
    }
    // A line outside the launch is not it, and the hint names the field's own site.
    let e = error(rust::import(&path, Some("bias_grad_p1_kernel:40")));
    assert!(
        e.to_string()
            .contains("(did you mean `bias_grad_p1_kernel:56`?)"),
        "{e}"
    );

    let p1 = site("linear_layer.rs", "bias_grad_p1_kernel");
    assert_eq!(p1.handles, ["bias_grad_p1_kernel"]);
    assert_eq!(p1.holder.as_deref(), Some("bias_grad_p1_kernel"));
    assert_eq!(
        p1.kernel_source,
        "`module.load_function(\"bias_grad_p1\")` (line 28), stored in `bias_grad_p1_kernel` by `Linear::new`"
    );
    assert_eq!(p1.grid, ks(["ceil_div(batch, 256)", "out_dim", "1"]));
    assert_eq!(p1.block, ks(["256", "1", "1"]));
    assert_eq!(p1.smem, known("1024"));
    // `let out_dim_i32 = out_dim as i32`: the argument is the size `out_dim`, the one the grid
    // uses (one value for the user to give, not two that must agree).
    assert_eq!(
        p1.args,
        vec![
            arg("dy", t("dy")),
            arg("&mut *partials", t("partials")),
            arg("&out_dim_i32", s("out_dim")),
            arg("&batch_i32", s("batch")),
        ]
    );
    insta::assert_snapshot!("linear_bias_grad_p1", rendered(&p1));

    // A `let` and the shorthand `Self { bias_grad_p2_kernel, .. }`; an assignment in another
    // method (`self.relu_bwd_kernel = Some(module.load_function(..)?)`); a local.
    let p2 = site("linear_layer.rs", "bias_grad_p2_kernel");
    assert_eq!(p2.kernel.as_deref(), Some("bias_grad_p2"));
    let relu = site("linear_layer.rs", "relu_bwd_kernel");
    assert_eq!(relu.kernel.as_deref(), Some("relu_bwd_f32"));
    assert_eq!(relu.handles, ["kernel", "relu_bwd_kernel"]);
    assert_eq!(
        relu.kernel_source,
        "`module.load_function(\"relu_bwd_f32\")` (line 36), stored in `relu_bwd_kernel` by `Linear::set_activation`"
    );
    let fill = site("linear_layer.rs", "fill");
    assert_eq!(fill.kernel.as_deref(), Some("fill_zero_f32"));
    assert_eq!(fill.holder, None);
}

#[test]
fn list_shows_each_sites_launch_and_arguments() {
    let out = repro_import(&["tests/fixtures/import/rust/linear_layer.rs", "--list"]).success();
    insta::assert_snapshot!("list_linear_layer", stdout_of(&out));
    let out = repro_import(&["tests/fixtures/import/rust/kernel_map.rs", "--list"]).success();
    insta::assert_snapshot!("list_kernel_map", stdout_of(&out));
}

#[test]
fn kernels_in_arcs_and_cloned_locals() {
    let all = sites("arc_kernels.rs");
    let names: Vec<_> = all.iter().map(|s| s.kernel.as_deref()).collect();
    assert_eq!(
        names,
        [Some("masked_softmax_bf16"), Some("rope_inplace_bf16")]
    );
    // `let kernel = Arc::clone(&kernels.softmax)`, `softmax: Arc::new(module.load_function(SOFTMAX)?)`.
    assert_eq!(all[0].handles, ["kernel", "softmax"]);
    assert_eq!(
        all[0].kernel_source,
        "`module.load_function(SOFTMAX)` (line 21), stored in `softmax` by `AttnKernels::load`"
    );
    assert_eq!(all[0].smem, known("seq * 4"));
    // `let rope = kernels.rope.clone()`: the local and the field have one name.
    assert_eq!(all[1].handles, ["rope"]);
    assert_eq!(site("arc_kernels.rs", "softmax").line, all[0].line);
    assert_eq!(site("arc_kernels.rs", "kernel").line, all[0].line);
}

#[test]
fn kernels_in_a_map() {
    let all = sites("kernel_map.rs");
    let names: Vec<_> = all.iter().map(|s| s.kernel.as_deref()).collect();
    // `for name in KERNEL_NAMES { kernels.insert(name.to_string(), module.load_function(name)?) }`
    // gives each listed name; `insert("gelu".to_string(), ..("gelu_tanh_f32"))` an alias; a key
    // nobody inserted stays a TODO.
    assert_eq!(names, [Some("scale_rows_f32"), Some("gelu_tanh_f32"), None]);
    assert_eq!(
        all[0].kernel_source,
        "`module.load_function(name)?` (line 24) with `name` = \"scale_rows_f32\", stored in `kernels[\"scale_rows_f32\"]` by `Registry::new`"
    );
    let gelu = site("kernel_map.rs", "gelu");
    assert_eq!(gelu.kernel.as_deref(), Some("gelu_tanh_f32"));
    assert_eq!(gelu.handles, ["f", "gelu"]);
    let softplus = site("kernel_map.rs", "softplus");
    assert!(
        softplus.kernel_source.contains(
            "the entry \"softplus\" of the map `kernels`, and no `kernels.insert(\"softplus\", ..load_function(\"..\"))` was found in this file: look where `kernels` is filled"
        ),
        "{}",
        softplus.kernel_source
    );
}

#[test]
fn a_map_keyed_by_names_not_visible_takes_the_key_as_the_name() {
    let site = inline(
        r#"
fn load(module: &CudaModule, names: &[String]) -> HashMap<String, CudaFunction> {
    let mut map = HashMap::new();
    for name in names {
        map.insert(name.clone(), module.load_function(name).unwrap());
    }
    map
}

fn run(stream: &CudaStream, map: &HashMap<String, CudaFunction>, x: &mut CudaSlice<f32>) {
    unsafe { stream.launch_builder(&map["axpy_f32"]).arg(x).launch(LaunchConfig::for_num_elems(64)) }.unwrap();
}
"#,
    );
    assert_eq!(site.kernel.as_deref(), Some("axpy_f32"));
    assert_eq!(
        site.kernel_source,
        "the key `\"axpy_f32\"` of `map`: `module.load_function(name).unwrap()` (line 5) keys each kernel of `map` by the name it is loaded by"
    );
}

#[test]
fn a_field_set_to_different_kernels_is_a_todo_naming_them() {
    let site = inline(
        r#"
struct K { f: CudaFunction }
impl K {
    fn new(m: &CudaModule) -> Self { K { f: m.load_function("a_f32").unwrap() } }
    fn reload(&mut self, m: &CudaModule) { self.f = m.load_function("b_f32").unwrap(); }
    fn run(&self, s: &CudaStream, x: &CudaSlice<f32>) {
        unsafe { s.launch_builder(&self.f).arg(x).launch(LaunchConfig::for_num_elems(1)) }.unwrap();
    }
}
"#,
    );
    assert_eq!(site.kernel, None);
    assert_eq!(
        site.kernel_source,
        "field `f` is set to different kernels (`a_f32`, `b_f32`): pick the one this launch runs"
    );
}

#[test]
fn search_finds_the_load_call_in_another_file() {
    let ops = fixture("split/src/ops.rs");
    let alone = rust::import(&ops, None).unwrap();
    assert_eq!(alone[0].kernel, None);
    assert_eq!(
        alone[0].kernel_source,
        "the kernel function is `self.gemm_bias_relu`, and no `gemm_bias_relu: ..load_function(\"..\")` or `.gemm_bias_relu = ..load_function(\"..\")` was found in this file: look where `Mlp` is built (the value its field `gemm_bias_relu` gets) and write the name given to `load_function`, or rerun with --search DIR (the crate's src/) to search the other files"
    );
    // The field's name still selects it.
    assert_eq!(rust::import(&ops, Some("gemm_bias_relu")).unwrap().len(), 1);

    let searched = rust::import_with_search(&ops, None, Some(&fixture("split/src"))).unwrap();
    assert_eq!(searched[0].kernel.as_deref(), Some("gemm_bias_relu_f16"));
    assert_eq!(
        searched[0].kernel_source,
        "`module.load_function(\"gemm_bias_relu_f16\")` (line 17), stored in `gemm_bias_relu` by `Mlp::new`, in tests/fixtures/import/rust/split/src/model.rs"
    );
    let out = repro_import(&[
        "tests/fixtures/import/rust/split/src/ops.rs",
        "--search",
        "tests/fixtures/import/rust/split/src",
        "--kernel",
        "gemm_bias_relu",
    ])
    .success();
    insta::assert_snapshot!("split_gemm_bias_relu", stdout_of(&out));

    // Searched and still not found: the TODO says where it looked.
    let elsewhere = rust::import_with_search(
        &fixture("linear_layer.rs"),
        Some("bias_grad_p1_kernel"),
        Some(&fixture("split/src")),
    )
    .unwrap();
    assert_eq!(elsewhere[0].kernel.as_deref(), Some("bias_grad_p1"));
    let e = error(rust::import_with_search(
        &ops,
        None,
        Some(&fixture("split/src/lib.rs")),
    ));
    assert_eq!(
        e.to_string(),
        "--search tests/fixtures/import/rust/split/src/lib.rs: not a folder; give the folder of the crate's sources (e.g. src/)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let nothing = rust::import_with_search(&ops, None, Some(tmp.path())).unwrap();
    assert!(
        nothing[0].kernel_source.ends_with(&format!(
            "was found in this file nor in the 0 other Rust files under {}: look where `Mlp` is built (the value its field `gemm_bias_relu` gets) and write the name given to `load_function`",
            tmp.path().display()
        )),
        "{}",
        nothing[0].kernel_source
    );
}
