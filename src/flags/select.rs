//! Which invocation of an input is *the* compile line: the one matching `--match`, else the one
//! whose source file matches the spec's kernel headers or name, else the only one. Invocations
//! that give the same harness flags (a CMake project compiling many files alike) are not an
//! ambiguity; different ones are an error that lists them.

use std::path::Path;

use super::extract::{analyze, is_source};
use super::{Extraction, FlagsError, Format, Input, Invocation, Selector};

/// The source file an invocation compiles, as written.
fn source_of(inv: &Invocation) -> Option<String> {
    if inv.file.is_some() {
        return inv.file.clone();
    }
    let mut words = inv.args.iter();
    while let Some(w) = words.next() {
        // `-o kernel.cu.o` is no source: skip the value of -o/-MF/-x.
        if matches!(
            w.as_str(),
            "-o" | "--output-file" | "-MF" | "--dependency-output" | "-x"
        ) {
            words.next();
        } else if is_source(w) {
            return Some(w.clone());
        }
    }
    None
}

/// Compiles something, or may (its source can be in a response file).
fn compiles(inv: &Invocation) -> bool {
    let response = |w: &String| w.starts_with('@') || w.contains("options-file") || w == "-optf";
    source_of(inv).is_some() || inv.args.iter().any(response)
}

fn describe(inv: &Invocation) -> String {
    let source = source_of(inv).map(|s| format!("  {s}")).unwrap_or_default();
    format!("{}{source}", inv.origin)
}

fn stem(path: &str) -> &str {
    Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(path)
}

/// How well `inv` matches the hints: 3 for a source file of the hint's stem (`tiled_gemm.cu` for
/// `tiled_gemm.cuh`), 2 for a source path containing it, 1 for a line containing it.
fn score(inv: &Invocation, hints: &[String]) -> u8 {
    let source = source_of(inv).unwrap_or_default();
    let mut best = 0;
    for hint in hints.iter().filter(|h| !h.is_empty()) {
        let s = stem(hint);
        // Short stems ("k", "op") would match anything.
        let found = |text: &str| text.contains(hint.as_str()) || (s.len() >= 3 && text.contains(s));
        let score = match () {
            _ if !source.is_empty() && stem(&source) == s => 3,
            _ if found(&source) => 2,
            _ => u8::from(found(&inv.text)),
        };
        best = best.max(score);
    }
    best
}

/// Same harness build: arch, std, include dirs and kept flags.
fn same_build(a: &Extraction, b: &Extraction) -> bool {
    let key = |e: &Extraction| (e.arch.clone(), e.std.clone(), e.include_dirs.clone());
    key(a) == key(b) && a.kept_flags() == b.kept_flags()
}

pub(crate) fn choose(
    input: &Input,
    invocations: Vec<Invocation>,
    selector: &Selector,
) -> Result<Extraction, FlagsError> {
    let base = input.base_dir.as_deref();
    if input.format == Format::CommandLine {
        let mut inv = invocations.into_iter().next().ok_or(FlagsError::Empty)?;
        inv.directory = inv.directory.or_else(|| input.base_dir.clone());
        return analyze(&inv, base);
    }
    // The same command twice (ninja's "FAILED:" repeats it) is one invocation.
    let mut unique: Vec<Invocation> = Vec::new();
    for inv in invocations {
        let key = |i: &Invocation| (i.args.clone(), i.directory.clone(), i.file.clone());
        if !unique.iter().any(|u| key(u) == key(&inv)) {
            unique.push(inv);
        }
    }
    let (candidates, idle): (Vec<_>, Vec<_>) = unique.into_iter().partition(compiles);
    if candidates.is_empty() {
        let example = idle
            .first()
            .map(|i| (i.origin.clone(), i.text.trim().chars().take(80).collect()));
        let (name, lines) = (input.name.clone(), input.text.lines().count());
        return Err(FlagsError::NoInvocation {
            name,
            lines,
            idle: idle.len(),
            example,
        });
    }
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    let mut why = String::new();
    if let Some(pattern) = &selector.match_pattern {
        let hit =
            |i: &Invocation| i.text.contains(pattern) || i.file.iter().any(|f| f.contains(pattern));
        pool.retain(|&i| hit(&candidates[i]));
        if pool.is_empty() {
            let (name, pattern) = (input.name.clone(), pattern.clone());
            let candidates = candidates.iter().map(describe).collect();
            return Err(FlagsError::NoMatch {
                name,
                pattern,
                candidates,
            });
        }
        why = format!(" matching `{pattern}`");
    }
    let scores: Vec<u8> = pool
        .iter()
        .map(|&i| score(&candidates[i], &selector.hints))
        .collect();
    let best = scores.iter().copied().max().unwrap_or(0);
    if pool.len() > 1 && best > 0 {
        pool = pool
            .into_iter()
            .zip(scores)
            .filter(|(_, s)| *s == best)
            .map(|(i, _)| i)
            .collect();
        let and = if why.is_empty() { " " } else { " and " };
        why += &format!("{and}related to the spec ({})", selector.hints.join(", "));
    }
    let chosen = pool[0];
    let extraction = analyze(&candidates[chosen], base);
    let (mut notes, mut warnings) = (Vec::new(), Vec::new());
    if pool.len() > 1 {
        let alike = |i: &usize| match (&extraction, analyze(&candidates[*i], base)) {
            (Ok(a), Ok(b)) => same_build(a, &b),
            _ => false,
        };
        if !pool[1..].iter().all(alike) {
            let candidates = pool.iter().map(|&i| describe(&candidates[i])).collect();
            return Err(FlagsError::Ambiguous {
                name: input.name.clone(),
                why,
                candidates,
            });
        }
        let (n, first) = (pool.len(), &candidates[chosen].origin);
        notes.push(format!(
            "{n} nvcc invocations{why} give the same harness flags; took {first}"
        ));
    } else if best > 0 && candidates.len() > 1 {
        let source = source_of(&candidates[chosen])
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let (origin, n) = (&candidates[chosen].origin, candidates.len());
        let message = format!("took {origin}{source} among {n} nvcc invocations: the one{why}");
        // A match in the source file's name is good evidence; elsewhere in the line it is not.
        match best {
            1 => warnings.push(format!(
                "{message}, though only its command line mentions them"
            )),
            _ => notes.push(message),
        }
    }
    let mut extraction = extraction?;
    let others = candidates.iter().enumerate().filter(|(i, _)| *i != chosen);
    extraction.others = others
        .map(|(_, c)| (c.origin.clone(), source_of(c)))
        .collect();
    extraction.notes.splice(0..0, notes);
    extraction.warnings.splice(0..0, warnings);
    Ok(extraction)
}
