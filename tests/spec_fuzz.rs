//! The spec loader on hostile input: random mutations of every example spec, and random YAML.
//! Each must give a spec error or a valid spec, never a panic (a panic is a bug, DESIGN §2's
//! exit codes have no room for it).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// splitmix64: a small deterministic generator, so a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const JUNK: &[&str] = &[
    "-1",
    "0",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e400",
    "nan",
    "[]",
    "{}",
    "~",
    "null",
    "\"",
    "'",
    ":",
    "- -",
    "[[[",
    "}}}",
    "&a",
    "*a",
    "!!binary",
    "K*K*K*K*K",
    "ceil_div(M, 0)",
    "M/0",
    "(((",
    "sm_",
    "sm_9999a",
    "c++98",
    "A",
    "repro_x",
    "2x",
    "é",
    "\t",
    "\\",
    "{ file: /nonexistent.npy }",
    "col_major",
    "identity",
    "cutlass3",
    "device",
];

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(7) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let line = lines[i].clone();
                lines.insert(i, line);
            }
            2 => {
                let j = rng.below(lines.len());
                lines.swap(i, j);
            }
            3 => {
                // Replace one word (or value) with junk.
                let words: Vec<&str> = lines[i]
                    .split([' ', ',', '[', ']', '{', '}'])
                    .filter(|w| !w.is_empty())
                    .collect();
                if !words.is_empty() {
                    let word = words[rng.below(words.len())].to_string();
                    let junk = rng.pick(JUNK);
                    lines[i] = lines[i].replacen(&word, junk, 1);
                }
            }
            4 => {
                let cut = rng.below(lines[i].len() + 1);
                let cut = (0..=cut)
                    .rev()
                    .find(|c| lines[i].is_char_boundary(*c))
                    .unwrap_or(0);
                lines[i].truncate(cut);
            }
            5 => {
                let indent = " ".repeat(rng.below(5));
                let junk = rng.pick(JUNK);
                lines.insert(i, format!("{indent}{junk}: {}", rng.pick(JUNK)));
            }
            _ => {
                lines.truncate(i);
            }
        }
    }
    lines.join("\n")
}

fn random_yaml(rng: &mut Rng) -> String {
    let keys = [
        "version",
        "name",
        "sizes",
        "tensors",
        "kernel",
        "reference",
        "build",
        "check",
        "A",
        "shape",
        "dtype",
        "M",
    ];
    let mut out = String::new();
    for _ in 0..rng.below(30) {
        let indent = " ".repeat(2 * rng.below(4));
        match rng.below(3) {
            0 => out += &format!("{indent}{}: {}\n", rng.pick(&keys), rng.pick(JUNK)),
            1 => out += &format!("{indent}- {}\n", rng.pick(JUNK)),
            _ => out += &format!("{indent}{}:\n", rng.pick(&keys)),
        }
    }
    out
}

fn load_must_not_panic(text: &str, dir: &Path, what: &str) -> bool {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        repro::spec::load_text(Path::new("fuzz.yaml"), text, dir)
    }));
    match outcome {
        Err(_) => panic!("the spec loader panicked on {what}:\n{text}"),
        Ok(result) => result.is_ok(),
    }
}

fn example_texts() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn mutated_example_specs_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut rng = Rng(20261129);
    let (mut valid, mut rejected) = (0, 0);
    for (path, text) in example_texts() {
        for round in 0..150 {
            let mutated = mutate(&text, &mut rng);
            let what = format!("mutation {round} of {}", path.display());
            if load_must_not_panic(&mutated, &dir, &what) {
                valid += 1;
            } else {
                rejected += 1;
            }
        }
    }
    // Most mutations break something; a test that never sees an error would test nothing.
    assert!(rejected > valid, "{rejected} rejected, {valid} still valid");
}

#[test]
fn random_yaml_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut rng = Rng(7);
    for round in 0..3000 {
        let text = random_yaml(&mut rng);
        load_must_not_panic(&text, &dir, &format!("random YAML {round}"));
    }
    for text in [
        "",
        "\0",
        "---\n---\n",
        "[1, 2",
        "a: &x [*x]",
        "version: 1\nversion: 1\n",
        &"[".repeat(10_000),
    ] {
        load_must_not_panic(text, &dir, "a hand-picked input");
    }
}
