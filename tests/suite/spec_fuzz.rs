//! The spec loader on hostile input: random mutations of every example spec, and random YAML.
//! Each must give a spec error or a valid spec, never a panic (a panic is a bug: repro's exit
//! codes, docs/cli.md, have no room for it); every error exits 2 and names file, line and column;
//! no case takes more than 5 s (issue 17).
//!
//! The mutations are those of a hostile but fair user: lines dropped, doubled, swapped, cut, junk
//! values and keys, and the inputs that broke the loader once: errors past column 65,535, bytes
//! that are not UTF-8, alias bombs, deep nesting, input files that are devices, names longer than
//! a folder name can be.
//!
//! `REPRO_FUZZ_CASES=N` sets the number of mutated specs (a few thousand by default, seconds
//! long); `REPRO_FUZZ_DUMP=DIR` also writes every 10th case under DIR/examples/ for a run through
//! the binary. scripts/fuzz-specs.sh does both with ≥ 10,000 cases.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    "{ file: /dev/zero }",
    "{ file: /dev/null }",
    "{ file: /tmp }",
    "col_major",
    "identity",
    "cutlass3",
    "device",
    "4294967296",
    "65536",
    "map_a",
    "D",
    "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn",
];

/// A mutated spec: text, or bytes that are not all UTF-8 (read from a file, as a user's would be).
enum Case {
    Text(String),
    Bytes(Vec<u8>),
}

fn mutate(text: &str, rng: &mut Rng) -> Case {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut bytes_at: Option<(usize, u8)> = None;
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(13) {
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
            6 => {
                lines.truncate(i);
            }
            7 => {
                // A line pushed past column 65,535 (a generated or minified spec).
                let pad = 65_536 + rng.below(10_000);
                match rng.below(2) {
                    0 => lines[i].insert_str(0, &" ".repeat(pad)),
                    _ => {
                        let at = lines[i].find([',', '[', '{']).map_or(0, |a| a + 1);
                        // Long items: as wide, fewer values to read.
                        lines[i]
                            .insert_str(at, &"xxxxxxxxxxxxxxxxxxxxxxxxxxxxx, ".repeat(pad / 31));
                    }
                }
            }
            8 => {
                // An alias bomb: nested (a "billion laughs") or one large anchor used often.
                let mut bomb =
                    String::from("lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol]\n");
                match rng.below(2) {
                    0 => {
                        for l in 1..2 + rng.below(10) {
                            let p = format!("*lol{}", l - 1);
                            bomb += &format!("lol{l}: &lol{l} [{}]\n", vec![p; 8].join(", "));
                        }
                    }
                    _ => {
                        let size = 1 + rng.below(20_000);
                        bomb = format!("big: &big \"{}\"\n", "x".repeat(size));
                        bomb += &format!(
                            "uses: [{}]\n",
                            vec!["*big"; 1 + rng.below(3_000)].join(", ")
                        );
                    }
                }
                lines.insert(i, bomb.trim_end().to_string());
            }
            9 => {
                // Deep nesting, in flow or block style.
                let depth = 1 + rng.below(2_000);
                let nest = match rng.below(2) {
                    0 => "[".repeat(depth) + &"]".repeat(rng.below(depth + 1)),
                    _ => "- ".repeat(depth) + "x",
                };
                lines.insert(i, format!("deep:\n  {nest}"));
            }
            10 => {
                // A byte that is not UTF-8 (Latin-1 `é`, a UTF-16 half, a stray continuation).
                let byte = [0xE9u8, 0xFF, 0xFE, 0x80, 0xC3][rng.below(5)];
                let at = rng.below(lines[i].len() + 1);
                bytes_at = Some((
                    lines[..i].iter().map(|l| l.len() + 1).sum::<usize>() + at,
                    byte,
                ));
            }
            11 => {
                // An input file that is a device, a folder or missing.
                let file = [
                    "/dev/zero",
                    "/dev/null",
                    "/tmp",
                    "missing.npy",
                    "/dev/stdin",
                ][rng.below(5)];
                if let Some(at) = lines[i].find("dtype:") {
                    lines[i].insert_str(at, &format!("init: {{ file: {file} }}, "));
                }
            }
            _ => {
                // A name longer than a folder name can be.
                if let Some(name) = lines.iter_mut().find(|l| l.starts_with("name:")) {
                    *name = format!("name: {}", "n".repeat(100 + rng.below(300)));
                }
            }
        }
    }
    let text = lines.join("\n");
    match bytes_at {
        Some((at, byte)) => {
            let mut bytes = text.into_bytes();
            let at = at.min(bytes.len());
            bytes.insert(at, byte);
            match String::from_utf8(bytes) {
                Ok(text) => Case::Text(text),
                Err(e) => Case::Bytes(e.into_bytes()),
            }
        }
        None => Case::Text(text),
    }
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

/// The longest a single case may take.
const CASE_LIMIT: Duration = Duration::from_secs(5);

/// A folder laid out like the repository for specs read from files: `examples/` (with the
/// examples' own subfolders linked) next to a link to `kernels/`, so `../kernels` resolves.
struct Sandbox {
    _dir: tempfile::TempDir,
    examples: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let examples = dir.path().join("examples");
        std::fs::create_dir_all(&examples).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            symlink(repo.join("kernels"), dir.path().join("kernels")).unwrap();
            for entry in std::fs::read_dir(repo.join("examples")).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    symlink(&path, examples.join(path.file_name().unwrap())).unwrap();
                }
            }
        }
        Sandbox {
            _dir: dir,
            examples,
        }
    }
}

/// Counts of outcomes by exit code (0 valid, 2 spec error), and the slowest case.
#[derive(Default)]
struct Tally {
    codes: BTreeMap<u8, usize>,
    slowest: Duration,
}

impl Tally {
    fn report(&self, what: &str) {
        let codes: Vec<String> = self
            .codes
            .iter()
            .map(|(code, n)| format!("exit {code}: {n}"))
            .collect();
        let total: usize = self.codes.values().sum();
        println!(
            "{what}: {total} cases, {}, 0 panics, slowest {:.2} s",
            codes.join(", "),
            self.slowest.as_secs_f64()
        );
    }
}

/// Loads one case (text in memory, bytes from a file in `sandbox`) and checks the contract:
/// no panic, an error exits 2 and every `error:` has a `--> FILE:LINE:COLUMN` inside the text,
/// no more than [`CASE_LIMIT`].
fn check(case: &Case, dir: &Path, sandbox: &Sandbox, what: &str, tally: &mut Tally) {
    let start = Instant::now();
    let (file, outcome, text) = match case {
        Case::Text(text) => {
            let file = PathBuf::from("fuzz.yaml");
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                repro::spec::load_text(&file, text, dir, &repro::machine::Machine)
            }));
            (file, outcome, text.clone())
        }
        Case::Bytes(bytes) => {
            let file = sandbox.examples.join("fuzz.yaml");
            std::fs::write(&file, bytes).unwrap();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                repro::spec::load(&file, &repro::machine::Machine)
            }));
            (file, outcome, String::from_utf8_lossy(bytes).into_owned())
        }
    };
    let took = start.elapsed();
    let shown = || text.chars().take(2_000).collect::<String>();
    let result =
        outcome.unwrap_or_else(|_| panic!("the spec loader panicked on {what}:\n{}", shown()));
    assert!(took < CASE_LIMIT, "{what} took {took:?}:\n{}", shown());
    tally.slowest = tally.slowest.max(took);
    let code = match result {
        Ok(_) => 0,
        Err(e) => {
            let code = e.exit_code();
            let message = e.to_string();
            assert_eq!(code, 2, "{what}: exit {code} for\n{message}");
            assert_located(&message, &file, text.lines().count(), what);
            code
        }
    };
    *tally.codes.entry(code).or_default() += 1;
}

/// Every `error:` of `message` is followed by `--> FILE:LINE:COLUMN` with the line in the text.
fn assert_located(message: &str, file: &Path, lines: usize, what: &str) {
    let marker = format!("--> {}:", file.display());
    let errors = message.lines().filter(|l| l.starts_with("error: ")).count();
    let places: Vec<(usize, usize)> = message
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(&marker))
        .map(|at| {
            let (line, column) = at.split_once(':').unwrap_or_else(|| panic!("{what}: {at}"));
            (line.parse().unwrap(), column.parse().unwrap())
        })
        .collect();
    assert!(
        errors > 0 && errors == places.len(),
        "{what}: an error without a place:\n{message}"
    );
    for (line, column) in places {
        assert!(
            (1..=lines + 1).contains(&line) && column >= 1,
            "{what}: place {line}:{column} outside the text ({lines} lines):\n{message}"
        );
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

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_example_specs_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dump = std::env::var_os("REPRO_FUZZ_DUMP").map(PathBuf::from);
    let sandbox = Sandbox::new();
    let examples = example_texts();
    let rounds = env_number("REPRO_FUZZ_CASES", 3_000).div_ceil(examples.len());
    let mut rng = Rng(20261129);
    let mut tally = Tally::default();
    let mut n = 0;
    for (path, text) in &examples {
        for round in 0..rounds {
            let case = mutate(text, &mut rng);
            let what = format!("mutation {round} of {}", path.display());
            check(&case, &dir, &sandbox, &what, &mut tally);
            if let Some(dump) = &dump {
                if n % 10 == 0 {
                    let bytes = match &case {
                        Case::Text(t) => t.as_bytes(),
                        Case::Bytes(b) => b,
                    };
                    std::fs::create_dir_all(dump.join("examples")).unwrap();
                    std::fs::write(dump.join(format!("examples/case_{n:06}.yaml")), bytes).unwrap();
                }
            }
            n += 1;
        }
    }
    tally.report("mutated example specs");
    // Most mutations break something; a test that never sees an error would test nothing.
    let (valid, rejected) = (tally.codes.get(&0), tally.codes.get(&2));
    assert!(
        rejected > valid,
        "{rejected:?} rejected, {valid:?} still valid"
    );
}

#[test]
fn random_yaml_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let sandbox = Sandbox::new();
    let mut rng = Rng(7);
    let mut tally = Tally::default();
    for round in 0..env_number("REPRO_FUZZ_CASES", 2_000) {
        let text = random_yaml(&mut rng);
        check(
            &Case::Text(text),
            &dir,
            &sandbox,
            &format!("random YAML {round}"),
            &mut tally,
        );
    }
    let hand_picked = [
        "".to_string(),
        "\0".to_string(),
        "---\n---\n".to_string(),
        "[1, 2".to_string(),
        "a: &x [*x]".to_string(),
        "version: 1\nversion: 1\n".to_string(),
        "[".repeat(10_000),
        "[".repeat(100_000),
        format!(
            "a: &a [{}]\nb: [{}]",
            "x, ".repeat(1_000),
            "*a, ".repeat(100_000)
        ),
        format!("a: {}", "{a: ".repeat(50_000)),
        format!("{}x", "- ".repeat(100_000)),
        format!("{}x: 1", " ".repeat(70_000)),
    ];
    for text in hand_picked {
        check(
            &Case::Text(text),
            &dir,
            &sandbox,
            "a hand-picked input",
            &mut tally,
        );
    }
    for bytes in [&b"\xff\xfe"[..], b"version: 1\nname: \xe9\n", b"\xc3"] {
        check(
            &Case::Bytes(bytes.to_vec()),
            &dir,
            &sandbox,
            "hand-picked bytes",
            &mut tally,
        );
    }
    tally.report("random YAML");
}
