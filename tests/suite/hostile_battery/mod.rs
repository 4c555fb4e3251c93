//! The hostile-file battery (issue 58): every kind of file repro reads that someone else may
//! have made — a spec, a campaign file, a shapes file, a results folder, a capture folder, a
//! repository to bisect, a received bundle, and a spec about to be bundled — mutated as an
//! attacker would (links out of the folder, fifos, devices, `..` and absolute names, shell and
//! YAML injection, control characters, huge numbers, duplicate keys, a BOM, bytes that are no
//! UTF-8), each case in a jail of its own, with repro run through its binary. A case passes when:
//!
//! - repro ends within its limit, neither panicking (101) nor calling itself buggy (70);
//! - a refusal (exit 2) names the file it refuses, and a place in it where the file has lines;
//! - nothing outside the case's output folders changed (files, links, modes, sizes, times), and
//!   no marker a payload would `touch` exists;
//! - no output holds the canary: the content of a "secret" file beside the case, which every
//!   link and path in the case points at.
//!
//! `REPRO_HOSTILE_CASES` cases per kind (default 12, CI's short mode); `scripts/fuzz-hostile.sh`
//! runs it at length. The cases are seeded: a failure names its kind and number, and reruns.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::Duration;

mod cases;

use cases::{
    bisect_case, bundle_case, campaign_case, capture_case, received_case, results_case, spec_case,
};

/// The secret every hostile path points at; found in an output, it was read and carried.
const CANARY: &str = "CANARY-7f3a9c1e-do-not-leak";

/// A small deterministic generator (xorshift64*), so a case reruns as it failed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    /// Which of `k` variants case `number` makes: each in turn for the first `k` cases, so that
    /// the short mode covers them all, then at random.
    fn variant(&mut self, number: usize, k: usize) -> usize {
        if number < k {
            number
        } else {
            self.below(k)
        }
    }
}

fn cases() -> usize {
    std::env::var("REPRO_HOSTILE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// One case's folders: `outside/` holds the secret and is where markers would land; `case/` the
/// hostile input; `out/` where the command may write; `home`, `tmp` and `cache` the process's.
struct Jail {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Jail {
    fn new() -> Jail {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["outside", "case", "out", "home", "tmp", "cache"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("outside/secret"), format!("{CANARY}\n")).unwrap();
        std::fs::write(root.join("outside/secret.npy"), format!("{CANARY}\n")).unwrap();
        std::fs::write(root.join("outside/secret.cuh"), format!("// {CANARY}\n")).unwrap();
        std::fs::create_dir_all(root.join("outside/dir")).unwrap();
        std::fs::write(
            root.join("outside/dir/small_gemm.cuh"),
            format!("// {CANARY}\n"),
        )
        .unwrap();
        Jail { _dir: dir, root }
    }
    fn case(&self) -> PathBuf {
        self.root.join("case")
    }
    fn out(&self) -> PathBuf {
        self.root.join("out")
    }
    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
    /// A payload that creates a marker in `outside/` if any shell, make or CMake ever runs it.
    fn marker(&self, name: &str) -> String {
        self.outside()
            .join(format!("pwned-{name}"))
            .display()
            .to_string()
    }
}

/// What a tree looks like without following links: each entry's kind, mode, size, mtime and
/// link target.
type Snapshot = BTreeMap<PathBuf, String>;

fn snapshot(root: &Path, skip: &[PathBuf]) -> Snapshot {
    let mut out = Snapshot::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        if skip.iter().any(|s| path.starts_with(s)) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let link = std::fs::read_link(path).ok();
        let mtime = if meta.is_dir() {
            0
        } else {
            meta.mtime_nsec() + meta.mtime() * 1_000_000_000
        };
        out.insert(
            path.to_path_buf(),
            format!("{:o} {} {mtime} {link:?}", meta.mode(), meta.len()),
        );
    }
    out
}

/// Files under `root` (not following links) whose bytes hold the canary.
fn leaks(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        let holds = |b: &[u8]| b.windows(CANARY.len()).any(|w| w == CANARY.as_bytes());
        let unpacked = if entry.path().extension().is_some_and(|e| e == "gz") {
            let mut text = Vec::new();
            let mut decoder = flate2::read::GzDecoder::new(&bytes[..]);
            let _ = std::io::Read::read_to_end(&mut decoder, &mut text);
            text
        } else {
            Vec::new()
        };
        if holds(&bytes) || holds(&unpacked) {
            found.push(entry.path().to_path_buf());
        }
    }
    found
}

/// The nvcc the battery builds with: compiles nothing, writes a "harness" that finds no GPU
/// (exit 7) and an empty dependency file, and never runs its arguments.
fn stand_in_nvcc(dir: &Path) -> PathBuf {
    let script = r#"#!/bin/sh
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release 0.0, V0.0.0 (battery stand-in)'; exit 0; fi
out=; dep=; prev=
for a in "$@"; do case "$prev" in -o) out=$a;; -MF) dep=$a;; esac; prev=$a; done
[ -n "$out" ] && printf '#!/bin/sh\necho "error: no CUDA device" >&2\nexit 7\n' > "$out" && chmod +x "$out"
[ -n "$dep" ] && echo "$out: harness.cu" > "$dep"
exit 0
"#;
    let path = dir.join("nvcc-battery");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// How a case ended.
struct Outcome {
    code: Option<i32>,
    stderr: String,
}

/// Runs repro in the jail with `args`, within `limit`, with its home, temp and cache folders
/// inside the jail.
fn repro(jail: &Jail, args: &[String], limit: Duration) -> Outcome {
    let mut command = Process::new(assert_cmd::cargo::cargo_bin("repro"));
    command
        .args(args)
        .current_dir(jail.out())
        .env("HOME", jail.root.join("home"))
        .env("TMPDIR", jail.root.join("tmp"))
        .env("XDG_CACHE_HOME", jail.root.join("cache"))
        // The runtime library is built once for the whole battery (scripts/test.sh sets the
        // suite's cache), not once a case: the cache is repro's own, not the case's input.
        .env(
            "REPRO_CACHE_DIR",
            std::env::var_os("REPRO_CACHE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| jail.root.join("cache/repro")),
        )
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut text);
        text
    });
    let status = wait_timeout::ChildExt::wait_timeout(&mut child, limit).unwrap();
    let code = match status {
        Some(status) => status.code(),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    Outcome {
        code,
        stderr: reader.join().unwrap_or_default(),
    }
}

/// A hostile case: what it is, the files it names (one must appear in a refusal), and whether
/// those files have lines (then a refusal names a line too).
struct Case {
    kind: &'static str,
    number: usize,
    what: String,
    args: Vec<String>,
    /// Names any of which a refusal (exit 2) must mention.
    named: Vec<String>,
    /// Folders the command may write in (besides out/, home, tmp and cache).
    writable: Vec<PathBuf>,
    /// How long the command may take: a bundle builds with the real nvcc.
    limit: Duration,
}

/// Runs a case and returns what went wrong with it, if anything.
fn judge(jail: &Jail, case: &Case) -> Vec<String> {
    let mut writable = vec![
        jail.out(),
        jail.root.join("home"),
        jail.root.join("tmp"),
        jail.root.join("cache"),
    ];
    writable.extend(case.writable.iter().cloned());
    let before = snapshot(&jail.root, &writable);
    let outcome = repro(jail, &case.args, case.limit);
    let after = snapshot(&jail.root, &writable);
    let mut problems = Vec::new();
    let shown = || format!("{}\n{}", case.args.join(" "), tail(&outcome.stderr));
    match outcome.code {
        None => problems.push(format!(
            "did not end within {} s: {}",
            case.limit.as_secs(),
            shown()
        )),
        Some(101) => problems.push(format!("panicked: {}", shown())),
        Some(70) => problems.push(format!("exit 70: {}", shown())),
        Some(2) => {
            if !case
                .named
                .iter()
                .any(|n| outcome.stderr.contains(n.as_str()))
            {
                problems.push(format!(
                    "a refusal that names none of {:?}: {}",
                    case.named,
                    shown()
                ));
            }
        }
        Some(_) => {}
    }
    for (path, was) in &before {
        match after.get(path) {
            None => problems.push(format!("removed {}", path.display())),
            Some(now) if now != was => problems.push(format!(
                "changed {} ({was} -> {now}): {}",
                path.display(),
                shown()
            )),
            _ => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        problems.push(format!(
            "wrote {} outside its folders: {}",
            path.display(),
            shown()
        ));
    }
    let mut leaked = leaks(&jail.out());
    for dir in &case.writable {
        leaked.extend(leaks(dir));
    }
    for path in leaked {
        problems.push(format!(
            "the secret reached {}: {}",
            path.display(),
            shown()
        ));
    }
    problems
        .into_iter()
        .map(|p| format!("{} case {} ({}): {p}", case.kind, case.number, case.what))
        .collect()
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn symlink(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link);
    let _ = std::fs::remove_dir_all(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = Process::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

/// Runs `make` for `count` cases of one kind, each in a fresh jail; every problem is collected,
/// so one run shows them all.
fn battery(kind: &str, count: usize, make: impl Fn(&Jail, &mut Rng, usize, &Path) -> Case) {
    let mut problems = Vec::new();
    for number in 0..count {
        let jail = Jail::new();
        let nvcc = stand_in_nvcc(&jail.root.join("home"));
        let mut rng = Rng::new(number as u64 * 7919 + kind.len() as u64);
        let case = make(&jail, &mut rng, number, &nvcc);
        problems.extend(judge(&jail, &case));
    }
    eprintln!("{kind}: {count} cases, {} problems", problems.len());
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn specs() {
    battery("spec", cases() * 2, spec_case);
}

#[test]
fn campaign_and_shapes_files() {
    battery("campaign", cases(), campaign_case);
}

#[test]
fn results_folders() {
    battery("results", cases(), results_case);
}

#[test]
fn capture_folders() {
    battery("capture", cases(), |jail, rng, n, _| {
        capture_case(jail, rng, n)
    });
}

#[test]
fn bisect_repositories() {
    battery("bisect", cases(), bisect_case);
}

#[test]
fn received_bundles() {
    battery("received bundle", cases(), received_case);
}

#[test]
fn bundled_specs() {
    battery("bundle", cases().min(5), |jail, rng, n, _| {
        bundle_case(jail, rng, n)
    });
}
