//! `repro bisect` on a repository someone else made (docs/cli.md, `repro bisect`): the commands
//! its configuration and attributes name (fsmonitor, filters, textconv, external diff, signature
//! check, pager, hooks) never run, each tested tree holds the commit's bytes (no `export-subst`,
//! `ident`, filter or replace ref rewrites them) and no link out of it; a `git status` that fails
//! is exit 2, not "nothing changed"; a huge `check.timeout` neither panics nor hangs; the
//! repository's root as the include directory is the whole tree; a filter no `-c` can turn off is
//! refused before it runs. The histories are written by the tests and judged by bisect.rs's
//! stand-in nvcc.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

use crate::bisect::{commit, git, history, judging_nvcc, History};
use crate::common;

/// `repro bisect` of `history` from `good` to main: exit code, stdout, stderr. Killed after two
/// minutes: a bisect that hangs fails the test.
fn run_bisect(history: &History, nvcc: &Path, good: &str) -> (Option<i32>, String, String) {
    let output = Command::cargo_bin("repro")
        .unwrap()
        .current_dir(&history.root)
        .env("REPRO_CACHE_DIR", history.root.join("cache"))
        .arg("bisect")
        .arg(&history.spec)
        .arg("--repo")
        .arg(&history.repo)
        .args(["--good", good, "--bad", "main", "--nvcc"])
        .arg(nvcc)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A script `cmd-<name>` that appends its name to `log` when run, then behaves as the command it
/// stands for must (a filter copies stdin, a textconv prints the file).
fn command_script(dir: &Path, log: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let body = match name {
        "clean" | "smudge" => "exec cat",
        "textconv" => "exec cat \"$1\"",
        _ => "exit 0",
    };
    let path = dir.join(format!("cmd-{name}"));
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho {name} >> '{}'\n{body}\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The trees bisect wrote (`.repro/bisect/trees/<key>/`).
fn trees(history: &History) -> Vec<PathBuf> {
    let dir = history
        .root
        .join("generated/small_gemm/.repro/bisect/trees");
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect()
}

#[test]
fn the_repository_s_own_commands_never_run_and_each_tree_holds_the_commit_s_bytes() {
    let history = history();
    let repo = &history.repo;
    // The last commit: attributes that rewrite on export and name a filter and a diff driver,
    // links in and out of the tree, a blob that a replace ref stands in for.
    let include = repo.join("include");
    std::fs::write(
        include.join(".gitattributes"),
        "* filter=evil diff=evil\n*.h filter=proc\nident.h ident\nsubst.h export-subst\n",
    )
    .unwrap();
    std::fs::write(include.join("ident.h"), "// $Id$\n").unwrap();
    std::fs::write(include.join("subst.h"), "// $Format:%H$\n").unwrap();
    std::fs::write(include.join("replaced.h"), "// original\n").unwrap();
    std::os::unix::fs::symlink("small_gemm.cuh", include.join("alias.cuh")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../../../../etc/hostname",
        include.join("up.cuh"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/hostname", include.join("absolute.cuh")).unwrap();
    commit(repo, "include/notes.txt", "hostile\n", "attributes, links");
    let original = git(repo, &["rev-parse", "HEAD:include/replaced.h"]);
    let stand_in = repo.join("stand-in");
    std::fs::write(&stand_in, "// replaced\n").unwrap();
    let replacement = git(repo, &["hash-object", "-w", stand_in.to_str().unwrap()]);
    std::fs::remove_file(&stand_in).unwrap();
    git(repo, &["replace", &original, &replacement]);
    // Signed (the signature is never checked: a check would run gpg.program).
    let text = git(repo, &["cat-file", "commit", "HEAD"]);
    let signed = text.replacen(
        "\n\n",
        "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\n",
        1,
    ) + "\n";
    let signed_file = history.root.join("signed-commit");
    std::fs::write(&signed_file, signed).unwrap();
    let signed = git(
        repo,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            signed_file.to_str().unwrap(),
        ],
    );
    git(repo, &["update-ref", "refs/heads/main", &signed]);

    // Then the configuration: from here on, the test runs no git in the repository.
    let log = history.root.join("ran.log");
    let script = |name: &str| command_script(&history.root, &log, name);
    let mut config = vec![
        ("core.fsmonitor", script("fsmonitor")),
        ("filter.evil.clean", script("clean")),
        ("filter.evil.smudge", script("smudge")),
        ("filter.proc.process", script("process")),
        ("diff.evil.textconv", script("textconv")),
        ("diff.evil.command", script("diff-command")),
        ("diff.external", script("external-diff")),
        ("gpg.program", script("gpg")),
        ("core.pager", script("pager")),
        ("pager.show", script("pager-show")),
        ("core.sshCommand", script("ssh")),
        ("core.askPass", script("askpass")),
        ("core.editor", script("editor")),
    ];
    config.push(("credential.helper", script("credential")));
    for hook in [
        "post-index-change",
        "post-checkout",
        "reference-transaction",
    ] {
        let path = script(hook);
        std::fs::copy(&path, repo.join(".git/hooks").join(hook)).unwrap();
    }
    let mut settings: Vec<(String, String)> = config
        .iter()
        .map(|(key, path)| (key.to_string(), path.display().to_string()))
        .collect();
    settings.push(("filter.evil.required".into(), "true".into()));
    settings.push(("log.showSignature".into(), "true".into()));
    for (key, value) in &settings {
        git(repo, &["config", key, value]);
    }

    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let nvcc = judging_nvcc(&history.root, &history.root.join("builds.log"));
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(
        log_text(),
        "",
        "the repository's commands ran (listed); {stderr}"
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("first bad commit: {}", history.hash("defect"))),
        "{stdout}"
    );

    // --bad's tree: the commit's bytes, the link inside kept, the links out left out (named).
    let tree = trees(&history)
        .into_iter()
        .find(|t| t.join("include/ident.h").exists())
        .expect("--bad's tree");
    let include = tree.join("include");
    let read = |name: &str| std::fs::read_to_string(include.join(name)).unwrap();
    assert_eq!(read("ident.h"), "// $Id$\n");
    assert_eq!(read("subst.h"), "// $Format:%H$\n");
    assert_eq!(read("replaced.h"), "// original\n");
    assert_eq!(
        read("small_gemm.cuh"),
        std::fs::read_to_string(repo.join("include/small_gemm.cuh")).unwrap()
    );
    assert_eq!(
        std::fs::read_link(include.join("alias.cuh")).unwrap(),
        Path::new("small_gemm.cuh")
    );
    for outside in ["up.cuh", "absolute.cuh"] {
        assert!(
            std::fs::symlink_metadata(include.join(outside)).is_err(),
            "{outside} was written"
        );
        assert!(
            stderr.contains(&format!("include/{outside} at "))
                && stderr.contains("leads out of the exported tree"),
            "{stderr}"
        );
    }
    assert_eq!(log_text(), "");
}

#[test]
fn a_git_status_that_fails_is_exit_2_with_git_s_message_not_a_clean_checkout() {
    let history = history();
    // An index git cannot read: status fails, while everything else bisect asks still works.
    std::fs::write(history.repo.join(".git/index"), "not an index").unwrap();
    let nvcc = judging_nvcc(&history.root, &history.root.join("builds.log"));
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("git could not list the uncommitted changes of")
            && stderr.contains("(git status): ")
            && stderr.contains("index"),
        "{stderr}"
    );
    assert!(!stdout.contains("first bad commit"), "{stdout}");
}

#[test]
fn a_huge_check_timeout_neither_panics_nor_hangs() {
    let history = history();
    let text = std::fs::read_to_string(&history.spec).unwrap();
    let nvcc = judging_nvcc(&history.root, &history.root.join("builds.log"));
    // One no Duration holds is refused by the spec (it once panicked here and left the pool
    // waiting); the longest one taken, a day, gives every budget bisect derives from it.
    std::fs::write(
        &history.spec,
        format!("{text}check: {{ timeout: 1e308 }}\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("check.timeout") || stderr.contains("timeout"),
        "{stderr}"
    );
    std::fs::write(
        &history.spec,
        format!("{text}check: {{ timeout: 86400 }}\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("first bad commit: {}", history.hash("defect"))),
        "{stdout}"
    );
}

#[test]
fn the_repository_s_root_as_the_include_directory_is_the_whole_tree() {
    let root = tempfile::tempdir().unwrap().keep();
    let repo = root.join("kernel-lib");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let header = "small_gemm.cuh";
    let defect = common::SMALL_KERNEL
        .replace("k < K; ++k", "k < K - 1; ++k")
        .replace("#pragma once", "#pragma once\n// stand-in: wrong");
    let commits = vec![
        (
            "add",
            commit(&repo, header, common::SMALL_KERNEL, "add the small GEMM"),
        ),
        ("notes", commit(&repo, "notes.txt", "notes\n", "notes")),
        (
            "defect",
            commit(&repo, header, &defect, "unroll the K loop"),
        ),
        ("more", commit(&repo, "notes.txt", "more notes\n", "notes")),
    ];
    let spec = root.join("small_gemm.yaml");
    std::fs::write(
        &spec,
        common::SMALL_SPEC.replace("include_dirs: [kernels]", "include_dirs: [kernel-lib]"),
    )
    .unwrap();
    let history = History {
        root,
        repo,
        spec,
        commits,
    };
    let nvcc = judging_nvcc(&history.root, &history.root.join("builds.log"));
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "first bad commit: {} unroll the K loop",
            history.hash("defect")
        )),
        "{stdout}"
    );
    assert!(stdout.contains("small_gemm.cuh | 3"), "{stdout}");
    // The whole tree was written, and the whole checkout is what must be committed.
    assert!(trees(&history)
        .iter()
        .any(|t| t.join("notes.txt").is_file() && t.join(header).is_file()));
    std::fs::write(history.repo.join("scratch.txt"), "untracked\n").unwrap();
    let (code, _, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("uncommitted changes") && stderr.contains("scratch.txt"),
        "{stderr}"
    );
}

#[test]
fn a_filter_whose_commands_cannot_be_turned_off_is_refused_before_any_runs() {
    let history = history();
    let repo = &history.repo;
    // `-c filter.a=b.clean=` would split at the first `=`: no override can reach this driver.
    commit(
        repo,
        "include/.gitattributes",
        "* filter=a=b\n",
        "a filter with = in its name",
    );
    let log = history.root.join("ran.log");
    let clean = command_script(&history.root, &log, "clean");
    git(
        repo,
        &["config", "filter.a=b.clean", clean.to_str().unwrap()],
    );
    git(repo, &["config", "filter.a=b.required", "true"]);
    // Stat-dirty: status must look at the file's content, through the clean filter.
    let header = repo.join("include/small_gemm.cuh");
    std::fs::write(&header, std::fs::read(&header).unwrap()).unwrap();
    let nvcc = judging_nvcc(&history.root, &history.root.join("builds.log"));
    let (code, stdout, stderr) = run_bisect(&history, &nvcc, history.hash("add"));
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "");
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("a filter named `a=b`, whose commands cannot be turned off"),
        "{stderr}"
    );
}
