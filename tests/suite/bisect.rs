//! `repro bisect` end to end on a kernel library's history that the test writes itself (a
//! correct kernel, refactors, a commit outside the include directory, a broken build and its
//! fix, the defect, later commits), judged by a stand-in nvcc whose "harness" passes or fails
//! as the exported header says: the first bad commit is found, the broken build is skipped, a
//! second bisect builds nothing, the user's checkout is untouched, bad input gets exit 2. With
//! the real nvcc: each commit's tree builds for real and, without a GPU, bisect stops at exit 7.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;

use crate::common;

pub(crate) fn git(repo: &Path, args: &[&str]) -> String {
    let output = Process::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Kernel Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Kernel Author")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

pub(crate) fn commit(repo: &Path, file: &str, text: &str, subject: &str) -> String {
    let path = repo.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", subject]);
    git(repo, &["rev-parse", "HEAD"])
}

/// The history, oldest first: (name, hash).
pub(crate) struct History {
    pub(crate) root: PathBuf,
    pub(crate) repo: PathBuf,
    pub(crate) spec: PathBuf,
    pub(crate) commits: Vec<(&'static str, String)>,
}

impl History {
    pub(crate) fn hash(&self, name: &str) -> &str {
        &self.commits.iter().find(|(n, _)| *n == name).unwrap().1
    }
}

pub(crate) fn history() -> History {
    let root = tempfile::tempdir().unwrap().keep();
    let repo = root.join("kernel-lib");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let header = "include/small_gemm.cuh";
    let refactored = common::SMALL_KERNEL
        .replace("float sum = 0.f;", "float acc = 0.f;")
        .replace("sum +=", "acc +=")
        .replace("= sum;", "= acc;");
    let mut commits = vec![(
        "add",
        commit(&repo, header, common::SMALL_KERNEL, "add the small GEMM"),
    )];
    commits.push((
        "refactor",
        commit(
            &repo,
            header,
            &refactored,
            "refactor: name the accumulator acc",
        ),
    ));
    commits.push((
        "readme",
        commit(&repo, "README.md", "a kernel library\n", "docs: a README"),
    ));
    let tidy = refactored.replace("// D[M,N]", "// small_gemm: D[M,N]");
    commits.push((
        "tidy",
        commit(&repo, header, &tidy, "tidy the header comment"),
    ));
    let broken = tidy.replace(
        "#pragma once",
        "#pragma once\n#error \"half-done port to the new API\"",
    );
    commits.push((
        "broken",
        commit(&repo, header, &broken, "start the port to the new API"),
    ));
    commits.push(("fixed", commit(&repo, header, &tidy, "finish the port")));
    // The defect: the last K step is dropped. The stand-in nvcc reads the marker.
    let defect = tidy
        .replace("k < K; ++k", "k < K - 1; ++k")
        .replace("#pragma once", "#pragma once\n// stand-in: wrong");
    commits.push((
        "defect",
        commit(&repo, header, &defect, "unroll the K loop by hand"),
    ));
    let later = defect.replace("one thread per output", "one thread per output element");
    commits.push(("later", commit(&repo, header, &later, "comment wording")));
    commits.push((
        "latest",
        commit(&repo, "README.md", "a kernel library, v2\n", "docs: v2"),
    ));
    let spec = root.join("small_gemm.yaml");
    std::fs::write(
        &spec,
        common::SMALL_SPEC.replace(
            "include_dirs: [kernels]",
            "include_dirs: [kernel-lib/include]",
        ),
    )
    .unwrap();
    History {
        root,
        repo,
        spec,
        commits,
    }
}

/// An nvcc stand-in that compiles nothing: a harness.cu compile fails when the header in its
/// include path has an `#error`, else writes a "harness" that reports a pass, or a K-coverage
/// failure when the header carries the marker `stand-in: wrong`. It logs each harness compile.
pub(crate) fn judging_nvcc(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = r#"#!/bin/sh
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release 0.0, V0.0.0 (bisect stand-in)'; exit 0; fi
out=; dep=; prev=; header=; harness=
for a in "$@"; do
  case "$prev" in -o) out=$a;; -MF) dep=$a;; esac
  case "$a" in -I*) [ -f "${a#-I}/small_gemm.cuh" ] && header="${a#-I}/small_gemm.cuh";; harness.cu) harness=1;; esac
  prev=$a
done
if [ -z "$harness" ]; then echo placeholder > "$out"; exit 0; fi
echo "$header" >> 'LOG'
if grep -q '#error' "$header"; then echo "$header(3): error: #error directive: half-done port" >&2; exit 2; fi
if grep -q 'stand-in: wrong' "$header"; then
  printf '#!/bin/sh\necho "D       relL2 1.1e-01  bad 561/561"\necho "pattern k_coverage: every output misses K slice 8"\necho "Disposition: Failed (k_coverage)"\nexit 1\n' > "$out"
else
  printf '#!/bin/sh\necho "D       relL2 0.000e+00  bad 0/561"\necho "Disposition: Passed"\nexit 0\n' > "$out"
fi
chmod +x "$out"
[ -n "$dep" ] && echo "$out: harness.cu $header" > "$dep"
exit 0
"#;
    let path = dir.join("nvcc-judging");
    std::fs::write(&path, script.replace("LOG", &log.display().to_string())).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub(crate) fn bisect(history: &History, nvcc: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("repro")
        .unwrap()
        .current_dir(&history.root)
        .env("REPRO_CACHE_DIR", history.root.join("cache"))
        .arg("bisect")
        .arg(&history.spec)
        .arg("--repo")
        .arg(&history.repo)
        .args(["--good", history.hash("add"), "--bad", "main", "--nvcc"])
        .arg(nvcc)
        .args(extra)
        .assert()
}

/// What must not change in the user's checkout: HEAD, status, the index's bytes, .git's entries.
fn checkout_state(repo: &Path) -> (String, String, Vec<u8>, Vec<String>) {
    let mut entries: Vec<String> = std::fs::read_dir(repo.join(".git"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    (
        git(repo, &["rev-parse", "HEAD"]),
        git(repo, &["status", "--porcelain"]),
        std::fs::read(repo.join(".git/index")).unwrap(),
        entries,
    )
}

fn harness_builds(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn finds_the_first_bad_commit_skips_the_broken_build_and_leaves_the_checkout_alone() {
    let history = history();
    let log = history.root.join("builds.log");
    let nvcc = judging_nvcc(&history.root, &log);
    let before = checkout_state(&history.repo);
    let json = history.root.join("answer.json");
    let output = bisect(&history, &nvcc, &["--json", json.to_str().unwrap()])
        .code(0)
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8_lossy(&output);
    let defect = history.hash("defect");
    assert!(
        stdout.contains(&format!(
            "first bad commit: {defect} unroll the K loop by hand"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("at it:     k_coverage: pattern k_coverage"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "before it: ok: D relL2 0.000e+00 bad 0/561 ({})",
            &history.hash("fixed")[..12]
        )),
        "{stdout}"
    );
    assert!(stdout.contains("include/small_gemm.cuh | 3"), "{stdout}");
    // The broken build was tried and skipped, with nvcc's error; the README commits were never
    // candidates (they do not touch the include directory).
    assert!(
        stdout.contains(&format!("{} build: ", &history.hash("broken")[..12]))
            && stdout.contains("#error directive"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[~3 left]"),
        "a progress line per step: {stdout}"
    );
    let answer: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(answer["first_bad"]["hash"], defect);
    assert_eq!(answer["first_bad"]["author"], "Kernel Author");
    assert_eq!(answer["class"], "k_coverage");
    assert_eq!(
        answer["changed_files"],
        serde_json::json!(["include/small_gemm.cuh"])
    );
    assert_eq!(answer["commits_in_range"], 7);
    let skipped: Vec<&str> = answer["tested"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "skip")
        .map(|t| t["commit"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, [history.hash("broken")]);
    assert_eq!(
        checkout_state(&history.repo),
        before,
        "the checkout changed"
    );

    // Again: every tree is known, nothing is compiled (the ends run again, from their cached builds).
    let first = harness_builds(&log);
    assert_eq!(
        first, 5,
        "bad, good, and three candidates (\"finish the port\" has the tree of \"tidy\")"
    );
    let again = bisect(&history, &nvcc, &[])
        .code(0)
        .get_output()
        .stdout
        .clone();
    let again = String::from_utf8_lossy(&again);
    assert!(
        again.contains(&format!("first bad commit: {defect}")),
        "{again}"
    );
    assert!(
        again.contains("(result cached)") && again.contains("(build up to date)"),
        "{again}"
    );
    assert_eq!(harness_builds(&log), first, "{again}");
    assert!(again.contains("0 builds"), "{again}");

    // An edited spec (another seed) is judged again: results are keyed by the harness and the
    // spec it reads, so none answers; the builds are still current.
    let text = std::fs::read_to_string(&history.spec).unwrap();
    std::fs::write(&history.spec, text.replace("seed: 7", "seed: 8")).unwrap();
    let edited = bisect(&history, &nvcc, &[])
        .code(0)
        .get_output()
        .stdout
        .clone();
    let edited = String::from_utf8_lossy(&edited);
    // (Within the run, "finish the port" is answered by "tidy"'s run: the same tree and spec.)
    assert!(
        edited.contains("tidy the header comment (build up to date): good"),
        "{edited}"
    );
    assert_eq!(harness_builds(&log), first, "{edited}");

    // With builds ahead, the same answer.
    std::fs::remove_dir_all(history.root.join("generated")).unwrap();
    let ahead = bisect(&history, &nvcc, &["--jobs", "4"])
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&ahead).contains(&format!("first bad commit: {defect}")));
    assert_eq!(checkout_state(&history.repo), before);

    // A bug report's bundle of the spec says which commit introduced the failure.
    Command::cargo_bin("repro")
        .unwrap()
        .current_dir(&history.root)
        .env("REPRO_CACHE_DIR", history.root.join("cache"))
        .args(["bundle", "--no-run", "--nvcc"])
        .arg(&nvcc)
        .arg(&history.spec)
        .assert()
        .success();
    let readme =
        std::fs::read_to_string(history.root.join("bundles/small_gemm/README.md")).unwrap();
    assert!(
        readme.contains(&format!(
            "**Introduced by** {} \"unroll the K loop by hand\" (Kernel Author,",
            &defect[..12]
        )),
        "{readme}"
    );
    assert!(readme.contains("include/small_gemm.cuh | 3"), "{readme}");
}

#[test]
fn bad_input_is_refused_with_exit_2_and_the_checkout_untouched() {
    let history = history();
    let log = history.root.join("builds.log");
    let nvcc = judging_nvcc(&history.root, &log);
    let before = checkout_state(&history.repo);
    let run = |args: &[&str]| {
        let output = Command::cargo_bin("repro")
            .unwrap()
            .current_dir(&history.root)
            .env("REPRO_CACHE_DIR", history.root.join("cache"))
            .arg("bisect")
            .arg(&history.spec)
            .args(args)
            .arg("--nvcc")
            .arg(&nvcc)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let repo = history.repo.to_str().unwrap();
    let good = history.hash("add");
    let (code, err) = run(&[
        "--repo",
        history.root.to_str().unwrap(),
        "--good",
        good,
        "--bad",
        "main",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not a git repository"), "{err}");
    let (code, err) = run(&["--repo", repo, "--good", "v0.0-nope", "--bad", "main"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--good v0.0-nope: no such commit"), "{err}");
    let (code, err) = run(&["--repo", repo, "--good", "main", "--bad", good]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not an ancestor of --bad"), "{err}");
    let (code, err) = run(&[
        "--repo",
        repo,
        "--good",
        history.hash("fixed"),
        "--bad",
        "main",
        "--class",
        "row_maping",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--class row_maping: not a failure class"),
        "{err}"
    );
    // --good that fails, --bad that passes.
    let (code, err) = run(&[
        "--repo",
        repo,
        "--good",
        history.hash("defect"),
        "--bad",
        "main",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("does not pass: class `k_coverage`"), "{err}");
    let (code, err) = run(&[
        "--repo",
        repo,
        "--good",
        good,
        "--bad",
        history.hash("fixed"),
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("does not fail"), "{err}");
    // A repository that does not hold the include directory.
    let other = history.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q"]);
    let (code, err) = run(&[
        "--repo",
        other.to_str().unwrap(),
        "--good",
        "HEAD",
        "--bad",
        "HEAD",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("none of the spec's source.include_dirs is inside --repo"),
        "{err}"
    );
    assert_eq!(checkout_state(&history.repo), before);
    // Uncommitted changes under the include directory.
    std::fs::write(history.repo.join("include/small_gemm.cuh"), "// edited\n").unwrap();
    let (code, err) = run(&["--repo", repo, "--good", good, "--bad", "main"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("uncommitted changes") && err.contains("include/small_gemm.cuh"),
        "{err}"
    );
    // Only the ends were built: "defect" and main, then the passing "fixed" (--good "add"
    // never ran, --bad failed first).
    assert_eq!(harness_builds(&log), 3, "{err}");
}

#[test]
fn with_the_real_nvcc_each_tree_builds_and_without_a_gpu_bisect_stops_at_exit_7() {
    let history = history();
    let before = checkout_state(&history.repo);
    let mut command = Command::cargo_bin("repro").unwrap();
    command.current_dir(&history.root);
    // The suite's shared cache when it has one: the runtime library is built once for all tests.
    if std::env::var_os("REPRO_CACHE_DIR").is_none() {
        command.env("REPRO_CACHE_DIR", history.root.join("cache"));
    }
    let output = command
        .arg("bisect")
        .arg(&history.spec)
        .arg("--repo")
        .arg(&history.repo)
        .args(["--good", history.hash("add"), "--bad", "main", "--nvcc"])
        .arg(common::nvcc())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("no usable CUDA device: bisect judges each commit"),
        "{stderr}"
    );
    // --bad's tree was exported and compiled with the production flags.
    let artifacts = history
        .root
        .join("generated/small_gemm/.repro/bisect/artifacts");
    let built: Vec<PathBuf> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().path().join("harness"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(built.len(), 1, "{stderr}");
    assert_eq!(checkout_state(&history.repo), before);
}
