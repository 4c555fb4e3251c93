//! The hostile cases, one maker per kind of file: each lays out its case in the jail (the
//! hostile files, links, fifos), and returns the command that reads it, the names a refusal must
//! mention and where the command may write.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{mkfifo, repro, strings, symlink, Case, Jail, Rng, CANARY};
use crate::bisect::git;
use crate::common;

/// Strings an attacker puts where a name, a path or a flag goes.
fn payloads(jail: &Jail, tag: &str) -> Vec<String> {
    let m = jail.marker(tag);
    vec![
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("x; touch {m}"),
        format!("x\ntouch {m}"),
        format!("x\"; touch {m}; \""),
        "../../outside/secret".into(),
        jail.outside().join("secret").display().to_string(),
        "a: b".into(),
        "*a".into(),
        "&a x".into(),
        "\u{1b}]0;owned\u{7}\u{1b}[2J".into(),
        "x".repeat(10_000),
        "".into(),
        "\u{feff}name".into(),
        "-1".into(),
        "1e308".into(),
        "18446744073709551615".into(),
    ]
}

/// Replaces the `n`-th occurrence-free way: one random line of `text` gets `payload` after its
/// first `: `, or the payload is appended as a key of its own.
fn mutate_yaml(rng: &mut Rng, text: &str, payload: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let quoted = serde_json::to_string(payload).unwrap();
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match rng.below(6) {
        0 => {
            // A value replaced, quoted so that the payload arrives as a string.
            let i = rng.below(out.len());
            if let Some((key, _)) = out[i].clone().split_once(": ") {
                out[i] = format!("{key}: {quoted}");
            }
        }
        1 => {
            // The raw payload as a value: YAML injection when it holds newlines or indicators.
            let i = rng.below(out.len());
            if let Some((key, _)) = out[i].clone().split_once(": ") {
                out[i] = format!("{key}: {payload}");
            }
        }
        2 => {
            // A duplicate key.
            let i = rng.below(out.len());
            out.insert(i, out[i].clone());
        }
        3 => {
            let first = out.remove(0);
            out.insert(0, format!("\u{feff}{first}"));
        }
        4 => {
            // A line cut short.
            let i = rng.below(out.len());
            let keep = out[i].len() / 2;
            out[i] = out[i].chars().take(keep).collect();
        }
        _ => {
            // A flag or include that a payload becomes.
            out.push(format!("# {payload}"));
        }
    }
    out.join("\n") + "\n"
}

/// The small spec and its kernel in `case/`, returning the spec's path.
fn small_spec(jail: &Jail) -> PathBuf {
    common::write_small_spec(&jail.case())
}

pub(super) fn spec_case(jail: &Jail, rng: &mut Rng, number: usize, nvcc: &Path) -> Case {
    let spec = small_spec(jail);
    let base = std::fs::read_to_string(&spec).unwrap();
    let payload = rng.pick(&payloads(jail, "spec")).clone();
    let kernels = jail.case().join("kernels");
    let (what, text) = match rng.variant(number, 9) {
        0 => (
            "a flag payload",
            base.replace(
                "flags: [-O2]",
                &format!(
                    "flags: [-O2, {}]",
                    serde_json::to_string(&format!("-DX={payload}")).unwrap()
                ),
            ),
        ),
        1 => {
            symlink(&jail.outside().join("dir"), &kernels);
            ("an include dir linked out of the tree", base)
        }
        2 => {
            symlink(
                &jail.outside().join("secret.cuh"),
                &kernels.join("small_gemm.cuh"),
            );
            ("a header linked out of the tree", base)
        }
        3 => {
            let target = *rng.pick(&["/dev/zero", "fifo", "../outside/secret.npy", "/etc/passwd"]);
            if target == "fifo" {
                mkfifo(&jail.case().join("a.npy"));
            } else if target.starts_with('/') {
                symlink(Path::new(target), &jail.case().join("a.npy"));
            }
            let file = if target.starts_with("..") {
                target
            } else {
                "a.npy"
            };
            (
                "an init file that is no file of the tree",
                base.replace(
                    "A: { dtype: f32, shape: [M, K] }",
                    &format!("A: {{ dtype: f32, shape: [M, K], init: {{ file: {file} }} }}"),
                ),
            )
        }
        4 => {
            mkfifo(&spec);
            ("the spec is a fifo", base)
        }
        5 => {
            symlink(Path::new("/dev/zero"), &spec);
            ("the spec is /dev/zero", base)
        }
        6 => (
            "a timeout no Duration holds",
            format!(
                "{base}check: {{ timeout: {} }}\n",
                rng.pick(&["1e300", ".inf", "-.inf", ".nan", "1e-320"])
            ),
        ),
        7 => {
            let mut bytes = base.clone().into_bytes();
            let at = rng.below(bytes.len());
            bytes[at] = 0xff;
            std::fs::write(&spec, bytes).unwrap();
            ("a byte that is no UTF-8", String::new())
        }
        _ => ("a mutated line", mutate_yaml(rng, &base, &payload)),
    };
    if !text.is_empty()
        && std::fs::symlink_metadata(&spec)
            .unwrap()
            .file_type()
            .is_file()
    {
        std::fs::write(&spec, text).unwrap();
    }
    let art = jail.out().join("art");
    let mut args = strings(&["scaffold"]);
    args.push(spec.display().to_string());
    args.extend(["-o".into(), art.display().to_string()]);
    if rng.below(2) == 0 {
        args = strings(&["build"]);
        args.push(spec.display().to_string());
        args.extend([
            "-o".into(),
            art.display().to_string(),
            "--nvcc".into(),
            nvcc.display().to_string(),
        ]);
    }
    Case {
        kind: "spec",
        number,
        what: what.into(),
        args,
        named: vec!["small_gemm.yaml".into()],
        writable: vec![],
        limit: Duration::from_secs(20),
    }
}

pub(super) fn campaign_case(jail: &Jail, rng: &mut Rng, number: usize, nvcc: &Path) -> Case {
    let spec = small_spec(jail);
    let _ = spec;
    let payload = rng.pick(&payloads(jail, "campaign")).clone();
    let shapes_csv = jail.case().join("shapes.csv");
    let shapes_jsonl = jail.case().join("shapes.jsonl");
    std::fs::write(&shapes_csv, "M,N\n16,32\n33,17\n").unwrap();
    std::fs::write(&shapes_jsonl, "{\"M\": 16, \"N\": 32}\n").unwrap();
    let base = "version: 1\nname: battery\nspecs:\n  - spec: small_gemm.yaml\n    shapes_file: shapes.csv\n    shapes: [{ M: 8, N: 8 }]\n    modes: [ones]\n    variants:\n      - name: fast\n        add_flags: [-DFAST=1]\n";
    let file = jail.case().join("campaign.yaml");
    let (what, text): (&str, String) = match rng.variant(number, 10) {
        0 => ("a shapes file that is a fifo", {
            mkfifo(&shapes_csv);
            base.into()
        }),
        1 => ("a shapes file linked to /dev/zero", {
            symlink(Path::new("/dev/zero"), &shapes_csv);
            base.into()
        }),
        2 => ("shapes with duplicate columns", {
            std::fs::write(&shapes_csv, "M,N,M\n1,2,3\n").unwrap();
            base.into()
        }),
        3 => ("a size above 2^31-1", {
            std::fs::write(&shapes_csv, "M,N\n4294967296,1\n").unwrap();
            base.into()
        }),
        4 => (
            "JSON shapes with a duplicate key",
            (
                base.replace("shapes.csv", "shapes.jsonl"),
                std::fs::write(&shapes_jsonl, "{\"M\": 1, \"M\": 2}\n").unwrap(),
            )
                .0,
        ),
        5 => (
            "a variant flag payload",
            base.replace(
                "-DFAST=1",
                &serde_json::to_string(&format!("-DFAST={payload}")).unwrap(),
            ),
        ),
        6 => (
            "a payload as the name",
            base.replace(
                "name: battery",
                &format!("name: {}", serde_json::to_string(&payload).unwrap()),
            ),
        ),
        7 => (
            "a timeout no Duration holds",
            base.replace(
                "version: 1\n",
                &format!(
                    "version: 1\ntimeout: {}\n",
                    rng.pick(&["1e308", ".inf", ".nan"])
                ),
            ),
        ),
        8 => (
            "a spec path out of the tree",
            base.replace(
                "spec: small_gemm.yaml",
                &format!(
                    "spec: {}",
                    rng.pick(&["../outside/secret", "/dev/zero", "/etc/passwd"])
                ),
            ),
        ),
        _ => ("a mutated line", mutate_yaml(rng, base, &payload)),
    };
    std::fs::write(&file, text).unwrap();
    let mut args = strings(&["campaign"]);
    args.push(file.display().to_string());
    args.extend([
        "-o".into(),
        jail.out().join("results").display().to_string(),
        "--nvcc".into(),
        nvcc.display().to_string(),
        "--build-jobs".into(),
        "1".into(),
    ]);
    Case {
        kind: "campaign",
        number,
        what: what.into(),
        args,
        // A spec the campaign names outside its folder is a spec like any other (campaigns sit
        // beside their specs or below them): its refusal names that spec.
        named: vec![
            "campaign.yaml".into(),
            "shapes.csv".into(),
            "shapes.jsonl".into(),
            "small_gemm.yaml".into(),
            "secret".into(),
            "/dev/zero".into(),
            "/etc/passwd".into(),
        ],
        writable: vec![],
        limit: Duration::from_secs(20),
    }
}

/// A results folder as a campaign leaves it, made once by a campaign with the stand-in nvcc (it
/// finds no GPU, so every run is unrecorded), then given records by hand.
pub(super) fn results_case(jail: &Jail, rng: &mut Rng, number: usize, nvcc: &Path) -> Case {
    small_spec(jail);
    let file = jail.case().join("campaign.yaml");
    std::fs::write(&file, "version: 1\nname: battery\nspecs:\n  - spec: small_gemm.yaml\n    shapes: [{ M: 8, N: 8 }, { M: 9 }]\n    modes: [ones]\n").unwrap();
    let results = jail.case().join("results");
    let made = repro(
        jail,
        &[
            "campaign".into(),
            file.display().to_string(),
            "-o".into(),
            results.display().to_string(),
            "--nvcc".into(),
            nvcc.display().to_string(),
        ],
        Duration::from_secs(60),
    );
    assert!(
        matches!(made.code, Some(0) | Some(7)),
        "making a results folder: {}",
        made.stderr
    );
    let record = |spec: &str, sizes: &str, report: &str| {
        format!(
            "{{\"key\":\"{spec}/default/{sizes}/ones\",\"campaign\":\"battery\",\"spec\":{},\"variant\":\"default\",\"sizes\":{{{}}},\"mode\":\"ones\",\"code\":1,\"verdict\":\"scale\",\"disposition\":\"Failed (scale)\",\"evidence\":\"e\",\"times\":{{\"build_s\":0,\"run_s\":1}},\"gpu\":null,\"worker\":\"GPU 0\",\"host\":\"h\",\"started\":\"2026-01-01T00:00:00Z\",\"report\":{}}}\n",
            serde_json::to_string(spec).unwrap(),
            sizes.split(',').filter(|s| !s.is_empty()).map(|kv| { let (k, v) = kv.split_once('=').unwrap(); format!("\"{k}\":{v}") }).collect::<Vec<_>>().join(","),
            serde_json::to_string(report).unwrap(),
        )
    };
    let payload = rng.pick(&payloads(jail, "results")).clone();
    std::fs::create_dir_all(results.join("reports")).unwrap();
    std::fs::write(results.join("reports/r.json"), "{}").unwrap();
    let lines = match rng.below(3) {
        0 => record("small_gemm", "M=8,N=8", "reports/r.json"),
        1 => record(&payload, "M=8,N=8", "reports/r.json"),
        _ => record("small_gemm", "M=8,N=8", &payload),
    } + &record("small_gemm", "M=9", "reports/r.json");
    std::fs::write(results.join("results.jsonl"), &lines).unwrap();
    let outside = jail.outside().join("secret");
    let what = match rng.variant(number, 9) {
        0 => {
            symlink(&outside, &results.join("results.jsonl"));
            "results.jsonl linked out"
        }
        1 => {
            let _ = std::fs::remove_file(results.join("summary.txt"));
            symlink(&outside, &results.join("summary.txt"));
            "summary.txt linked out"
        }
        2 => {
            let _ = std::fs::remove_dir_all(results.join("maps"));
            symlink(&jail.outside().join("dir"), &results.join("maps"));
            "maps/ linked out"
        }
        3 => {
            symlink(&outside, &results.join(".lock"));
            ".lock linked out"
        }
        4 => {
            std::fs::create_dir_all(results.join("shards")).unwrap();
            let mut bytes = record("small_gemm", "M=8,N=8", "reports/r.json").into_bytes();
            bytes.insert(10, 0xff);
            std::fs::write(results.join("shards/1-0.jsonl"), bytes).unwrap();
            "a shard line that is no UTF-8"
        }
        5 => {
            std::fs::create_dir_all(results.join("shards")).unwrap();
            symlink(Path::new("/dev/zero"), &results.join("shards/1-0.jsonl"));
            "a shard linked to /dev/zero"
        }
        6 => {
            std::fs::create_dir_all(results.join("shards")).unwrap();
            mkfifo(&results.join("shards/1-0.jsonl"));
            "a shard that is a fifo"
        }
        7 => {
            let _ = std::fs::remove_file(results.join("campaign.json"));
            symlink(Path::new("/dev/zero"), &results.join("campaign.json"));
            "campaign.json linked to /dev/zero"
        }
        _ => "hostile records",
    };
    Case {
        kind: "results",
        number,
        what: what.into(),
        args: vec![
            "campaign".into(),
            "--collect".into(),
            results.display().to_string(),
        ],
        named: vec!["results".into(), "jsonl".into(), "campaign.json".into()],
        writable: vec![results],
        limit: Duration::from_secs(20),
    }
}

fn npy_f32(shape: &[usize]) -> Vec<u8> {
    let count: usize = shape.iter().product();
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.resize(bytes.len() + count * 4, 0);
    bytes
}

pub(super) fn capture_case(jail: &Jail, rng: &mut Rng, number: usize) -> Case {
    let dir = jail.case().join("capture");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("A.0.npy"), npy_f32(&[4, 3])).unwrap();
    let payload = rng.pick(&payloads(jail, "capture")).clone();
    let entry = |name: &str, file: &str, shape: &str| {
        format!(
            "{{\"name\": {}, \"call\": 0, \"file\": {}, \"dtype\": \"f32\", \"shape\": {shape}, \"strides\": [3, 1], \"npy\": \"<f4\"}}\n",
            serde_json::to_string(name).unwrap(),
            serde_json::to_string(file).unwrap()
        )
    };
    let manifest = dir.join("manifest.jsonl");
    let what = match rng.variant(number, 8) {
        0 => {
            std::fs::write(&manifest, entry(&payload, "A.0.npy", "[4, 3]")).unwrap();
            "a payload as a tensor name"
        }
        1 => {
            std::fs::write(&manifest, entry("A", &payload, "[4, 3]")).unwrap();
            "a payload as a file"
        }
        2 => {
            let shapes = ["[-4, 3]", "[0, 3]", "[4294967296, 3]"];
            let shape = shapes[rng.below(shapes.len())];
            std::fs::write(&manifest, entry("A", "A.0.npy", shape)).unwrap();
            "a shape no tensor has"
        }
        3 => {
            symlink(Path::new("/dev/zero"), &manifest);
            "the manifest linked to /dev/zero"
        }
        4 => {
            mkfifo(&manifest);
            "the manifest is a fifo"
        }
        5 => {
            std::fs::write(&manifest, entry("A", "A.0.npy", "[4, 3]")).unwrap();
            symlink(&jail.outside().join("secret.npy"), &dir.join("A.0.npy"));
            "a tensor file linked out"
        }
        6 => {
            std::fs::write(
                &manifest,
                entry("A\nreference: { op: file }", "A.0.npy", "[4, 3]"),
            )
            .unwrap();
            "YAML injection through a name"
        }
        _ => {
            std::fs::write(&manifest, entry("A", "A.0.npy", "[4, 3]")).unwrap();
            "a plain capture"
        }
    };
    Case {
        kind: "capture",
        number,
        what: what.into(),
        args: vec![
            "import".into(),
            "capture".into(),
            dir.display().to_string(),
            "-o".into(),
            jail.out().join("tensors.yaml").display().to_string(),
        ],
        named: vec!["manifest.jsonl".into(), "capture".into()],
        writable: vec![],
        limit: Duration::from_secs(20),
    }
}

pub(super) fn bisect_case(jail: &Jail, rng: &mut Rng, number: usize, nvcc: &Path) -> Case {
    let repo = jail.case().join("lib");
    std::fs::create_dir_all(repo.join("include")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("include/small_gemm.cuh"), common::SMALL_KERNEL).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "good"]);
    let marker = jail.marker("bisect");
    // The files the bad commit adds, then the repository's own config, set after the last
    // commit so that only what repro runs can trigger it.
    let variant = rng.variant(number, 5);
    match variant {
        0 => std::fs::write(repo.join(".gitattributes"), "*.cuh filter=evil\n").unwrap(),
        2 => symlink(
            &jail.outside().join("secret.cuh"),
            &repo.join("include/extra.cuh"),
        ),
        3 => {
            std::fs::write(repo.join(".gitattributes"), "*.cuh export-subst ident\n").unwrap();
            std::fs::write(
                repo.join("include/small_gemm.cuh"),
                format!("{}// $Format:%H$ $Id$\n", common::SMALL_KERNEL),
            )
            .unwrap();
        }
        _ => {}
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "bad"]);
    let what = match variant {
        0 => {
            git(
                &repo,
                &[
                    "config",
                    "filter.evil.smudge",
                    &format!("touch {marker}; cat"),
                ],
            );
            git(
                &repo,
                &["config", "filter.evil.process", &format!("touch {marker}")],
            );
            "a smudge filter"
        }
        1 => {
            git(
                &repo,
                &[
                    "config",
                    "core.fsmonitor",
                    &format!("touch {marker}; false"),
                ],
            );
            "an fsmonitor command"
        }
        2 => "a link out of the tree in a commit",
        3 => "export-subst and ident",
        _ => {
            git(&repo, &["config", "core.pager", &format!("touch {marker}")]);
            let hooks = jail.outside().display().to_string();
            git(&repo, &["config", "core.hooksPath", &hooks]);
            "a pager and hooks"
        }
    };
    let spec = jail.case().join("small_gemm.yaml");
    std::fs::write(
        &spec,
        common::SMALL_SPEC.replace("include_dirs: [kernels]", "include_dirs: [lib/include]"),
    )
    .unwrap();
    Case {
        kind: "bisect",
        number,
        what: what.into(),
        args: vec![
            "bisect".into(),
            spec.display().to_string(),
            "--repo".into(),
            repo.display().to_string(),
            "--good".into(),
            "HEAD~1".into(),
            "--bad".into(),
            "HEAD".into(),
            "-o".into(),
            jail.out().join("art").display().to_string(),
            "--nvcc".into(),
            nvcc.display().to_string(),
        ],
        named: vec!["small_gemm.yaml".into(), "lib".into()],
        writable: vec![],
        limit: Duration::from_secs(20),
    }
}

/// A received bundle: an artifact folder whose spec.yaml the sender wrote; the receiver builds
/// it with repro (the stand-in nvcc) and nothing but the compiler may run.
pub(super) fn received_case(jail: &Jail, rng: &mut Rng, number: usize, nvcc: &Path) -> Case {
    let spec = small_spec(jail);
    let art = jail.case().join("bundle");
    let made = repro(
        jail,
        &[
            "scaffold".into(),
            spec.display().to_string(),
            "-o".into(),
            art.display().to_string(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let resolved = art.join("spec.yaml");
    let text = std::fs::read_to_string(&resolved).unwrap();
    let payload = rng.pick(&payloads(jail, "received")).clone();
    let what = match rng.variant(number, 4) {
        0 => {
            std::fs::write(
                &resolved,
                text.replace(
                    "- -O2",
                    &format!(
                        "- {}",
                        serde_json::to_string(&format!("-DX={payload}")).unwrap()
                    ),
                ),
            )
            .unwrap();
            "a flag payload in the bundled spec"
        }
        1 => {
            symlink(&jail.outside().join("dir"), &art.join("runtime"));
            "runtime/ linked out"
        }
        2 => {
            std::fs::write(&resolved, mutate_yaml(rng, &text, &payload)).unwrap();
            "a mutated bundled spec"
        }
        _ => {
            mkfifo(&resolved);
            "the bundled spec is a fifo"
        }
    };
    Case {
        kind: "received bundle",
        number,
        what: what.into(),
        args: vec![
            "build".into(),
            art.display().to_string(),
            "--nvcc".into(),
            nvcc.display().to_string(),
        ],
        named: vec!["spec.yaml".into(), "bundle".into()],
        // Building a received artifact writes its build products inside it.
        writable: vec![art.join(".repro"), art.join("harness"), art.join("build")],
        limit: Duration::from_secs(20),
    }
}

/// A spec about to be bundled: nothing from outside its tree may reach the bundle. With the
/// real nvcc, which finds the headers the bundle carries.
pub(super) fn bundle_case(jail: &Jail, rng: &mut Rng, number: usize) -> Case {
    let spec = small_spec(jail);
    let base = std::fs::read_to_string(&spec).unwrap();
    let kernels = jail.case().join("kernels");
    let variant = rng.variant(number, 5);
    let text = match variant {
        0 => {
            std::fs::write(
                kernels.join("small_gemm.cuh"),
                format!("{}#include \"extra.cuh\"\n", common::SMALL_KERNEL),
            )
            .unwrap();
            symlink(
                &jail.outside().join("secret.cuh"),
                &kernels.join("extra.cuh"),
            );
            base
        }
        1 => {
            symlink(
                &jail.outside().join("secret.npy"),
                &jail.case().join("a.npy"),
            );
            base.replace(
                "A: { dtype: f32, shape: [M, K] }",
                "A: { dtype: f32, shape: [M, K], init: { file: a.npy } }",
            )
        }
        2 => base.replace(
            "A: { dtype: f32, shape: [M, K] }",
            "A: { dtype: f32, shape: [M, K], init: { file: ../outside/secret.npy } }",
        ),
        3 => base.replace(
            "about: a one-thread-per-output f32 GEMM",
            &format!("about: see {}/log.txt", jail.root.join("home").display()),
        ),
        _ => {
            std::fs::write(jail.case().join("a.npy"), format!("not an npy {CANARY}")).unwrap();
            base.replace(
                "A: { dtype: f32, shape: [M, K] }",
                "A: { dtype: f32, shape: [M, K], init: { file: a.npy } }",
            )
        }
    };
    std::fs::write(&spec, text).unwrap();
    let what = [
        "a header linked out",
        "an input linked out",
        "an input out of the tree",
        "$HOME in a value",
        "an input that is no npy",
    ];
    Case {
        kind: "bundle",
        number,
        what: what[variant].into(),
        args: vec![
            "bundle".into(),
            spec.display().to_string(),
            "-o".into(),
            jail.out().join("report").display().to_string(),
            "--no-run".into(),
            "--nvcc".into(),
            common::nvcc().display().to_string(),
        ],
        named: vec![
            "small_gemm.yaml".into(),
            "a.npy".into(),
            "secret".into(),
            "extra.cuh".into(),
        ],
        writable: vec![],
        limit: Duration::from_secs(180),
    }
}
