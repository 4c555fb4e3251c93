//! `repro import rust`: the reader's rules on small inline sources (what counts as a launch,
//! how arguments are read), its robustness, and input that is not a source file (devices,
//! fifos, folders, huge files). Split from import_rust.rs (the fixture programs and their
//! skeletons).

use repro::import::rust::{self, ArgKind, ImportError, LaunchSite};

use super::import_rust::{
    arg, error, fixture, known, ks, rendered, repro_import, s, site, sites, sizes, stderr_of,
    stdout_of, t, tensor, todo, x,
};

// ---- rules, on small inline sources -----------------------------------------------------------

pub(crate) fn inline(source: &str) -> LaunchSite {
    let mut found =
        rust::import_source("src/lib.rs", source, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.len(), 1);
    found.remove(0)
}

#[test]
fn shadowing_scopes_and_reassignment() {
    let site = inline(
        r#"
fn run(stream: &Stream, module: &Module) -> Result<()> {
    let f = module.load_function("a")?;
    let n = 10;
    let n = n * 3;              // shadows: 30
    {
        let n = 7;              // a block's own n, gone after it
        let _ = n;
    }
    let m = 4;
    let items = [1, 2, 3];
    let total: usize = items.iter().map(|m| m * 2).sum(); // the closure's m is its own
    let mut k = 5;
    k += total;                 // no longer known
    let cfg = LaunchConfig { grid_dim: (n as u32, m, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    let mut b = stream.launch_builder(&f);
    b.arg(&(n as i32)).arg(&(m as i32)).arg(&(k as i32));
    unsafe { b.launch(cfg) }?;
    Ok(())
}
"#,
    );
    assert_eq!(site.kernel.as_deref(), Some("a"));
    assert_eq!(
        site.sizes,
        sizes(&[
            ("n", known("30")),
            ("m", known("4")),
            (
                "k",
                todo("value of `k` (reassigned on line 14) at the launch site (src/lib.rs:18)")
            ),
        ])
    );
    assert_eq!(site.grid, ks(["n", "m", "1"]));
}

#[test]
fn host_data_element_types() {
    let site = inline(
        r#"
fn run(dev: &Arc<CudaDevice>, n: usize) -> Result<()> {
    let f = dev.get_func("m", "k").unwrap();
    let untyped = dev.htod_copy(vec![0.0; n])?;            // f64 unless inferred: a TODO
    let halves = dev.htod_copy(vec![half::f16::ZERO; 64])?;
    let listed = dev.htod_sync_copy(&[1i8, 2, 3])?;
    let ints: Vec<u16> = vec![0; n];
    let wide = dev.htod_sync_copy(&ints)?;
    let mut out = unknown_alloc(n);
    unsafe { f.launch(LaunchConfig::for_num_elems(4096), (&untyped, &halves, &listed, &wide, &mut out, &mystery)) }?;
    Ok(())
}
"#,
    );
    assert_eq!(
        site.tensors,
        vec![
            tensor(
                "untyped",
                todo("dtype of `untyped`: `0.0` has no type suffix (f64 unless its use makes it f32)"),
                vec![known("n")],
                Some(false)
            ),
            tensor("halves", known("f16"), vec![known("64")], Some(false)),
            tensor("listed", known("i8"), vec![known("3")], Some(false)),
            tensor(
                "wide",
                todo("dtype of `wide`: Rust `u16` has no spec dtype"),
                vec![known("n")],
                Some(false)
            ),
            // `&mut` of something unseen is a buffer all the same.
            tensor(
                "out",
                todo("dtype of `out`: the Rust type of `out` is not visible here"),
                vec![todo("shape of `out` (e.g. [M, K])")],
                Some(true)
            ),
            // The tuple form passes scalars by value: `&x` is a buffer.
            tensor(
                "mystery",
                todo("dtype of `mystery`: the Rust type of `mystery` is not visible here"),
                vec![todo("shape of `mystery` (e.g. [M, K])")],
                Some(false)
            ),
        ]
    );
    assert_eq!(site.grid, ks(["4", "1", "1"]));
}

#[test]
fn launch_on_stream_and_a_tuple_bound_to_a_let() {
    let site = inline(
        r#"
const BLOCK: u32 = 1 << 7;
fn run(dev: &Arc<CudaDevice>, stream: &CudaStream, x: &CudaSlice<i32>, rows: u32) -> Result<()> {
    let f: CudaFunction = dev.get_func("m", "scan").unwrap();
    let params = (x, rows, 2.5, true);
    let cfg: LaunchConfig = LaunchConfig { grid_dim: (rows.div_ceil(BLOCK), 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: BLOCK * 4 };
    unsafe { f.launch_on_stream(stream, cfg, params) }?;
    Ok(())
}
"#,
    );
    assert_eq!(site.kernel.as_deref(), Some("scan"));
    assert_eq!(
        site.args,
        vec![
            arg("x", t("x")),
            arg("rows", s("rows")),
            arg("2.5", x(known("2.5"))),
            arg("true", x(known("true"))),
        ]
    );
    assert_eq!(site.grid, ks(["ceil_div(rows, 128)", "1", "1"]));
    assert_eq!(site.block, ks(["128", "1", "1"]));
    assert_eq!(site.smem, known("512"));
}

#[test]
fn builder_scalars_of_unknown_type_are_todos_not_guesses() {
    let site = inline(
        r#"
fn run(stream: &Stream, module: &Module, shape: Shape, cfg: LaunchConfig) {
    let f = module.load_function("k").unwrap();
    let (rows, cols) = shape.dims();
    let mut b = stream.launch_builder(&f);
    b.arg(&rows);
    b.arg(&shape.batch);
    b.arg(&(cols as i32));
    unsafe { b.launch(cfg) }.unwrap();
}
"#,
    );
    assert_eq!(
        site.args,
        vec![
            arg(
                "&rows",
                x(todo("argument 0 `&rows`: its Rust type is not visible here (a device buffer is a tensor, an integer a size, anything else a C++ expression)"))
            ),
            arg(
                "&shape.batch",
                x(todo("argument 1 `&shape.batch`: its Rust type is not visible here (a device buffer is a tensor, an integer a size, anything else a C++ expression)"))
            ),
            arg("&(cols as i32)", s("cols")),
        ]
    );
    assert_eq!(
        site.sizes,
        sizes(&[(
            "cols",
            todo("value of `cols` (bound on line 4) at the launch site (src/lib.rs:9)")
        )])
    );
    // A config handed in by the caller.
    assert_eq!(
        site.grid[0],
        todo("grid x: the launch config `cfg` is a parameter of `run`")
    );
    assert_eq!(
        site.smem,
        todo("smem: the launch config `cfg` is a parameter of `run`")
    );
}

#[test]
fn names_that_are_not_cpp_identifiers_are_adjusted() {
    let site = inline(
        r#"
fn run(stream: &Stream, f: &CudaFunction, new: &CudaSlice<f32>, class: usize) {
    let cfg = LaunchConfig::for_num_elems(class as u32);
    unsafe { stream.launch_builder(f).arg(new).arg(&class).launch(cfg) }.unwrap();
}
"#,
    );
    assert_eq!(
        site.args,
        vec![arg("new", t("new_")), arg("&class", s("class_"))]
    );
    assert_eq!(site.grid, ks(["ceil_div(class_, 1024)", "1", "1"]));
}

// ---- robustness -----------------------------------------------------------------------------

/// Deterministic pseudo-random numbers (no dependency, same on every machine).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn must_not_break(source: &str) {
    match rust::import_source("fuzz.rs", source, None) {
        Ok(sites) => {
            for site in &sites {
                rendered(site);
            }
        }
        Err(ImportError::Internal { message, .. }) => {
            panic!("the importer failed on:\n{source}\n---\n{message}")
        }
        Err(_) => {}
    }
}

#[test]
fn garbage_and_partial_rust_never_panics() {
    let fixtures = [
        "builder_gemm.rs",
        "chained.rs",
        "legacy.rs",
        "elementwise.rs",
        "no_launch.rs",
        "broken.rs",
        "linear_layer.rs",
        "arc_kernels.rs",
        "kernel_map.rs",
        "split/src/ops.rs",
    ];
    let mut rng = Lcg(2024);
    for name in fixtures {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let chars: Vec<char> = text.chars().collect();
        // Cut anywhere, and splice out a random stretch.
        for _ in 0..40 {
            let cut = rng.next() as usize % (chars.len() + 1);
            must_not_break(&chars[..cut].iter().collect::<String>());
            let (a, b) = (
                rng.next() as usize % (chars.len() + 1),
                rng.next() as usize % (chars.len() + 1),
            );
            let (a, b) = (a.min(b), a.max(b));
            let spliced: String = chars[..a].iter().chain(&chars[b..]).collect();
            must_not_break(&spliced);
        }
    }
    // Random tokens of cudarc-flavoured Rust.
    let words = [
        "fn",
        "f",
        "(",
        ")",
        "{",
        "}",
        "let",
        "=",
        ";",
        "launch",
        "launch_builder",
        ".",
        "arg",
        "&",
        "mut",
        "LaunchConfig",
        "for_num_elems",
        "grid_dim",
        ":",
        ",",
        "1024",
        "n",
        "as",
        "u32",
        "/",
        "-",
        "*",
        "<<",
        "unsafe",
        "?",
        "load_function",
        "\"k\"",
        "(1, 1, 1)",
        "[",
        "]",
        "vec!",
        "cfg",
        "0.5",
        "i32",
        "CudaSlice<f32>",
        "self",
        "struct",
        "impl",
    ];
    for _ in 0..300 {
        let len = rng.next() as usize % 60;
        let source: Vec<&str> = (0..len)
            .map(|_| words[rng.next() as usize % words.len()])
            .collect();
        must_not_break(&source.join(" "));
    }
    // Bytes that are not Rust at all, and shapes that stress recursion.
    must_not_break("\u{0}\u{1}\u{fffd} }}}} {{{ \"\\");
    must_not_break(&"(".repeat(100_000));
    must_not_break(&format!(
        "fn f() {{ let n = {}1; unsafe {{ g.launch(LaunchConfig::for_num_elems(n), (&a, n)) }}; }}",
        "1 + ".repeat(20_000)
    ));
    must_not_break(&format!(
        "fn f() {{ {} let cfg = LaunchConfig::for_num_elems(x0); unsafe {{ g.launch(cfg, (&a, x0)) }}; }}",
        (0..2000)
            .map(|i| format!("let x{i} = x{} * 2;", i + 1))
            .collect::<String>()
    ));
    must_not_break(
        "fn f() { let a = i128::MAX; let b = -a - 1; let c = -b; let d = c.div_ceil(0); \
         let e = (1u64 << 200) >> 3; let z = 0usize.next_power_of_two(); \
         unsafe { g.launch(LaunchConfig::for_num_elems(a), (&a, b, c, d, e, z, 99999999999999999999999999999999999999999)) }; }",
    );
}

// ---- input that is not a source file (issue 17 item 5) ------------------------------------------

#[test]
fn devices_fifos_folders_and_huge_files_are_refused_before_reading() {
    // /dev/zero never ends: read whole, it fills memory.
    let e = error(rust::import(std::path::Path::new("/dev/zero"), None));
    assert_eq!(
        e.to_string(),
        "/dev/zero is a device, not a Rust source file; pass the .rs file that holds the launch"
    );
    let tmp = tempfile::tempdir().unwrap();
    // A fifo blocks its reader until someone writes: refused without opening it.
    let fifo = tmp.path().join("launch.rs");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let out = repro_import(&[fifo.to_str().unwrap()]).code(2);
    assert_eq!(
        stderr_of(&out).trim_end(),
        format!(
            "error: {} is a fifo, not a Rust source file; pass the .rs file that holds the launch",
            fifo.display()
        )
    );
    let e = error(rust::import(tmp.path(), None));
    assert!(
        e.to_string().ends_with(
            " is a folder, not a Rust source file; pass the .rs file that holds the launch"
        ),
        "{e}"
    );
    // Sparse: 17 MiB on paper, nothing on disk.
    let huge = tmp.path().join("huge.rs");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    let e = error(rust::import(&huge, None));
    assert_eq!(
        e.to_string(),
        format!(
            "{} is 17.0 MiB; repro import rust reads Rust source files up to 16 MiB: pass the .rs file that holds the launch (not a generated or bundled one)",
            huge.display()
        )
    );
    let binary = tmp.path().join("binary.rs");
    std::fs::write(&binary, b"fn main() {\n    let s = \"\xff\xfe\";\n}\n").unwrap();
    let e = error(rust::import(&binary, None));
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2:14: not UTF-8 text, so not a Rust source file; pass the .rs file that holds the launch",
            binary.display()
        )
    );
    // Under --search the same files are skipped with a note, not fatal.
    std::fs::copy(fixture("split/src/model.rs"), tmp.path().join("model.rs")).unwrap();
    let found =
        rust::import_with_search(&fixture("split/src/ops.rs"), None, Some(tmp.path())).unwrap();
    assert_eq!(found[0].kernel.as_deref(), Some("gemm_bias_relu_f16"));
    let out = repro_import(&[
        "tests/fixtures/import/rust/split/src/ops.rs",
        "--search",
        tmp.path().to_str().unwrap(),
        "--list",
    ])
    .success();
    let notes = stderr_of(&out);
    assert!(
        notes.contains(&format!(
            "note: --search skipped {} is a fifo",
            fifo.display()
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!(
            "note: --search skipped {} is 17.0 MiB",
            huge.display()
        )),
        "{notes}"
    );
    assert!(stdout_of(&out).starts_with("gemm_bias_relu_f16  "));
}

/// Issue 38: a device buffer whose cudarc type is not in sight is a tensor TODO, never a size.
/// The rule (docs/cli.md): a builder passes every argument by reference, so there a `&` says
/// nothing and the type decides (cudarc buffers and raw pointers are tensors, integers sizes, an
/// unknown type a value TODO); an argument tuple passes scalars by value, so a reference there
/// is a buffer whatever its type reads as.
#[test]
fn raw_device_pointers_are_tensors_not_sizes() {
    let site = site("raw_pointers.rs", "relu_backward_raw");
    assert_eq!(
        site.args,
        vec![arg("&dy", t("dy")), arg("dx", t("dx")), arg("n", s("n"))]
    );
    assert_eq!(
        site.tensors[0],
        tensor(
            "dy",
            todo("dtype of `dy`: `dy` reads as u64, but an argument tuple passes scalars by value: a reference there is a device buffer"),
            vec![todo("shape of `dy` (e.g. [M, K])")],
            Some(false),
        )
    );
    let names: Vec<&str> = site.sizes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["n"]);

    // cudarc 0.16's (pointer, guard) pair: the pointer is the buffer's, with its dtype.
    let found = sites("raw_pointers.rs");
    let scale = &found[1];
    assert_eq!(scale.function, "scale_grad");
    assert_eq!(
        scale.args,
        vec![
            arg("&dy_ptr", t("dy_ptr")),
            arg("&mut dx", t("dx")),
            arg("&n", s("n"))
        ]
    );
    assert_eq!(scale.tensors[0].dtype, known("f32"));
    assert_eq!(scale.tensors[0].output, Some(false));

    // A `CUdeviceptr` parameter, `.0` of `device_ptr_mut` (written, whatever the `&` around
    // it), and a scalar of a type not visible here.
    let axpy = &found[2];
    assert_eq!(axpy.function, "axpy_raw");
    assert_eq!(axpy.args[0], arg("&dy", t("dy")));
    assert_eq!(
        axpy.tensors[0].dtype,
        todo("dtype of `dy`: a raw `CUdeviceptr` has no element type")
    );
    assert_eq!(axpy.args[1], arg("&out_ptr", t("out_ptr")));
    assert_eq!(
        axpy.tensors[1],
        tensor("out_ptr", known("f32"), vec![known("n")], Some(true))
    );
    assert!(
        matches!(&axpy.args[2].kind, ArgKind::Expr(v) if *v == todo("argument 2 `&alpha`: its Rust type is not visible here (a device buffer is a tensor, an integer a size, anything else a C++ expression)")),
        "{:?}",
        axpy.args[2]
    );
    let names: Vec<&str> = axpy.sizes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["n"]);
}
