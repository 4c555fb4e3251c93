//! The layers inside a crate, where the compiler does not refuse a loop (between crates it does:
//! the engine, the async-race checker and each feature are crates of their own): the files of the
//! capture crate, the async-race checker and the import crate's rust/ import one another without a
//! loop. Read from the sources, test modules left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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

/// Whether `code` names `path` (`crate::error`, not `crate::error_kind`).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        !code[at + path.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The files of `folder` (mod.rs and lib.rs aside) that each file imports with `super::name` or
/// `{module}::name`.
fn sibling_imports(folder: &str, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = repo().join(folder);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "mod" && name != "lib")
        .collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let code = code_of(&dir.join(format!("{file}.rs")));
        let uses: BTreeSet<String> = files
            .iter()
            .filter(|other| *other != file)
            .filter(|other| {
                names(&code, &format!("super::{other}"))
                    || names(&code, &format!("{module}::{other}"))
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
    for (folder, module) in [
        ("crates/repro-capture/src", "crate"),
        ("crates/repro-async-race/src", "crate"),
        ("crates/repro-import/src/rust", "crate::rust"),
    ] {
        let graph = sibling_imports(folder, module);
        assert!(graph.len() > 3, "{folder} has its files");
        if let Some(cycle) = a_loop(&graph) {
            panic!("{folder} imports in a loop: {}", cycle.join(" -> "));
        }
    }
}
