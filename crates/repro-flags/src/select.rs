//! Which invocation of an input is *the* compile line: the one matching `--match`, else the one
//! whose source file matches the spec's kernel headers or name, else the only one. Invocations
//! that give the same harness flags (a CMake project compiling many files alike) are not an
//! ambiguity; different ones are an error that lists them.

use std::collections::HashSet;
use std::path::Path;

use super::extract::{analyze, is_object, is_source};
use super::{Extraction, FlagsError, Format, Input, Invocation, Selector, Verdict};

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

/// Same harness build (arch, std, include dirs and kept flags), and the same warnings about it:
/// two lines of which only one had `-rdc=true` (dropped, as it changes code generation) give one
/// harness build, but taking either would hide or invent the other's warning, so they differ.
fn same_build(a: &Extraction, b: &Extraction) -> bool {
    let key = |e: &Extraction| (e.arch.clone(), e.std.clone(), e.include_dirs.clone());
    let dropped_codegen = |e: &Extraction| -> Vec<Vec<String>> {
        e.flags
            .iter()
            .filter(|f| f.verdict == Verdict::Dropped && f.affects_codegen)
            .map(|f| f.original.clone())
            .collect()
    };
    key(a) == key(b) && a.kept_flags() == b.kept_flags() && dropped_codegen(a) == dropped_codegen(b)
}

/// Options whose value only names a file the production build writes (`-o`, dependency files):
/// dropped whatever the value says.
const OUTPUT_OPTIONS: &[&str] = &[
    "-o",
    "--output-file",
    "-odir",
    "--output-directory",
    "-MF",
    "--dependency-output",
    "-MT",
    "--dependency-target-name",
];

/// Whether `other` gives the same harness build as `first` (read into `done`) without reading
/// it: the same words but for the files compiled and written, which the harness drops. A large
/// project's log has tens of thousands of such lines, one per source file, and reading each fully
/// (response files, include dirs on disk) to compare it was most of `repro flags`' time. False
/// means "not known", and the caller reads `other` in full.
fn same_but_file_names(first: &Invocation, done: &Extraction, other: &Invocation) -> bool {
    let (a, b) = (&first.args, &other.args);
    let plain = first.prepend.is_empty() && first.append.is_empty();
    if !plain
        || (&other.prepend, &other.append, &other.directory, b.len())
            != (&first.prepend, &first.append, &first.directory, a.len())
    {
        return false;
    }
    // Which words each flag of `done` was read from; they are the line's words, in order, unless a
    // response file was spliced in (then the words are not all on the line: not known).
    let mut at = 0;
    for flag in &done.flags {
        let n = flag.original.len();
        if flag.from.is_some() || a.get(at..at + n) != Some(&flag.original[..]) {
            return false;
        }
        if a[at..at + n] != b[at..at + n] {
            let file_kind = |w: &str| (!w.starts_with('-')).then(|| (is_object(w), is_source(w)));
            let same = match (n, flag.verdict) {
                // A positional file: the same kind (source or object) is read the same way, since
                // every word before it is the same.
                (1, Verdict::Dropped) => {
                    file_kind(&a[at]).is_some_and(|k| k.0 || k.1)
                        && file_kind(&a[at]) == file_kind(&b[at])
                }
                // `-o FILE`: the same option, and a value that is not an option, is taken as its value.
                (2, Verdict::Dropped) => {
                    a[at] == b[at]
                        && OUTPUT_OPTIONS.contains(&a[at].as_str())
                        && !a[at + 1].starts_with('-')
                        && !b[at + 1].starts_with('-')
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
        at += n;
    }
    at == a.len()
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
    // The same command twice (ninja's "FAILED:" repeats it) is one invocation; the same words
    // with other NVCC_PREPEND_FLAGS/NVCC_APPEND_FLAGS are not. A set of borrowed keys, not a scan
    // of the kept ones: a build log has one invocation per compiled file, tens of thousands in a
    // large project's log, and comparing each with all before it was the quadratic time of
    // issue 17 (a 1 MB log took 31 s).
    let first_of_its_kind: Vec<bool> = {
        let mut seen = HashSet::new();
        invocations
            .iter()
            .map(|i| seen.insert((&i.args, &i.prepend, &i.append, &i.directory, &i.file)))
            .collect()
    };
    let unique: Vec<Invocation> = invocations
        .into_iter()
        .zip(first_of_its_kind)
        .filter_map(|(inv, first)| first.then_some(inv))
        .collect();
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
        let alike = |i: &usize| match &extraction {
            Ok(a) => {
                same_but_file_names(&candidates[chosen], a, &candidates[*i])
                    || analyze(&candidates[*i], base).is_ok_and(|b| same_build(a, &b))
            }
            Err(_) => false,
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
