//! The layers inside the root crate, until each is a crate of its own (the compiler then refuses a
//! loop): the engine (plan, generate, build, run, analyze, and its error) names no feature, command
//! or `machine`; the async-race checker names nothing of repro's; and the files of capture/,
//! async_race/ and import/rust/ import one another without a loop. Read from the sources, test
//! modules left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::repo;

/// A file's code as the build sees it without `--test`: comments and the test module left out.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|entry| entry.unwrap().into_path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

/// Whether `code` names `path` (`crate::error`, not `crate::error_kind`).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        !code[at + path.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Every `crate::` path among `forbidden` that a file under `dirs` names, as "file: path" lines.
fn offences(dirs: &[&str], forbidden: &[&str]) -> Vec<String> {
    let src = repo().join("src");
    let mut found = Vec::new();
    for dir in dirs {
        let at = src.join(dir);
        let files = if at.is_dir() {
            rust_files(&at)
        } else {
            vec![at.with_extension("rs")]
        };
        for file in files {
            let code = code_of(&file);
            for module in forbidden {
                let path = format!("crate::{module}");
                if names(&code, &path) {
                    let shown = file.strip_prefix(&src).unwrap().display().to_string();
                    found.push(format!("{shown}: {path}"));
                }
            }
        }
    }
    found
}

#[test]
fn the_engine_names_no_feature_command_or_machine() {
    let above = [
        "capture", "import", "bisect", "campaign", "bundle", "flags", "commands", "doctor",
        "machine", "error",
    ];
    let found = offences(
        &[
            "plan",
            "generate",
            "build",
            "run",
            "analyze",
            "engine_error",
        ],
        &above,
    );
    assert!(
        found.is_empty(),
        "the engine imports from above it:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_async_race_checker_names_nothing_of_repros() {
    let all = [
        "plan",
        "generate",
        "build",
        "run",
        "analyze",
        "engine_error",
        "capture",
        "import",
        "bisect",
        "campaign",
        "bundle",
        "flags",
        "commands",
        "doctor",
        "machine",
        "error",
        "spec",
        "inputs",
        "file_kind",
    ];
    let found = offences(&["async_race"], &all);
    assert!(
        found.is_empty(),
        "async_race imports from repro:\n{}",
        found.join("\n")
    );
}

/// The files of `folder` (mod.rs aside) that each file imports with `super::name`.
fn sibling_imports(folder: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = repo().join("src").join(folder);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "mod")
        .collect();
    let module = folder.replace('/', "::");
    let mut graph = BTreeMap::new();
    for file in &files {
        let code = code_of(&dir.join(format!("{file}.rs")));
        let uses: BTreeSet<String> = files
            .iter()
            .filter(|other| *other != file)
            .filter(|other| {
                names(&code, &format!("super::{other}"))
                    || names(&code, &format!("crate::{module}::{other}"))
            })
            .cloned()
            .collect();
        graph.insert(file.clone(), uses);
    }
    graph
}

/// A loop of the graph, if it has one (a depth-first search's back edge).
fn a_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_files_of_capture_async_race_and_the_rust_importer_form_no_loop() {
    for folder in ["capture", "async_race", "import/rust"] {
        let graph = sibling_imports(folder);
        assert!(graph.len() > 3, "src/{folder} has its files");
        if let Some(cycle) = a_loop(&graph) {
            panic!("src/{folder} imports in a loop: {}", cycle.join(" -> "));
        }
    }
}
