//! `repro shrink`: from a failing spec, smaller sizes that still fail the same way. One build;
//! each candidate is one run of the harness with `--size` and `--json`. The smaller spec is
//! written next to the original (never over anything), with only its sizes and name changed.
//!
//! "The same way" is an interestingness test in the sense of delta debugging, and it keeps the
//! verdict's evidence, not only its class: a kernel that skips its last partial M tile fails as
//! `unwritten` at 1x1x1 too, but there the only tile is the partial one and nothing shows that
//! full tiles work, so the small case says less than the original. A candidate is kept when its
//! report (the harness's `--json`) shows, relative to the tile grid:
//!
//! - the same class (and for `scale` the same kind of factor: 0, below 1, above 1, negative);
//! - outputs right if the original had right outputs;
//! - each kind of output tile the original had (full, partial in M, partial in N, the corner)
//!   right, wrong, or partly wrong as it was there, and no kind the original did not have.
//!
//! The last rule fixes the tile structure of M and N, so candidates that cannot keep it (M = 1
//! when the original had full M tiles) are not run at all. The output does not show K, so K
//! keeps one whole K tile when the original had one: the main K loop still runs; a partial K
//! tile that matters shows itself as a change of class or factor, and such a candidate is
//! refused. For `skip the last partial M tile` at M = 200 (tile 64), N = 192, K = 1000 this
//! gives M = 65 (a full tile and one row of a partial one), N = 64, K = one K tile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use repro_contract::report::Report;

use super::queue::QueueSession;
use super::sweep::{check_dims, run_arguments, run_limit};
use super::RunOutcome;
use crate::build::Variant;
use crate::engine_error::EngineError as Error;
use crate::plan::Plan;
use crate::spec::ResolvedSpec;
use repro_contract::exit;

/// The K tile assumed when `reference.tile` gives none: the probes' K slice (docs/cli.md, `repro probe`).
const DEFAULT_TILE_K: i64 = 32;

/// Which extent of the GEMM a size is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    M,
    N,
    K,
    Batch,
}

/// A size shrink can change, with its tile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dim {
    pub name: String,
    pub axis: Axis,
    /// The tile along that axis (1 for the batch).
    pub tile: i64,
    /// The output tiles this size is the extent of (tile_m for M, tile_n for N; both when one
    /// size names both extents): its tile structure there is part of the evidence.
    pub output_tiles: Vec<i64>,
}

/// The sizes a GEMM's extents are named by, in the order they are shrunk: M, N, K, then the
/// batch. Only extents written as a plain size name can be changed.
pub fn gemm_dims(spec: &ResolvedSpec) -> Vec<Dim> {
    let Some(r) = spec.reference.gemm() else {
        return Vec::new();
    };
    let out = spec.tensor(r.out);
    let a = spec.tensor(r.a);
    let rank = out.shape_text.len();
    let mut dims: Vec<Dim> = Vec::new();
    let mut push = |text: &str, axis: Axis, tile: i64| {
        if !spec.sizes.contains_key(text) {
            return;
        }
        let output_tile = matches!(axis, Axis::M | Axis::N).then_some(tile);
        match dims.iter_mut().find(|d| d.name == text) {
            Some(d) => d.output_tiles.extend(output_tile),
            None => dims.push(Dim {
                name: text.to_string(),
                axis,
                tile,
                output_tiles: output_tile.into_iter().collect(),
            }),
        }
    };
    if rank >= 2 {
        push(&out.shape_text[rank - 2], Axis::M, r.tile_m);
    }
    push(&out.shape_text[rank - 1], Axis::N, r.tile_n);
    push(
        &a.shape_text[a.shape_text.len() - 1],
        Axis::K,
        r.tile_k.unwrap_or(DEFAULT_TILE_K),
    );
    if r.batched {
        push(&out.shape_text[0], Axis::Batch, 1);
    }
    dims
}

/// Values to try for a size now at `current` with tile `tile`, smallest first: tiny sizes, and
/// the tile's first multiples ± 1 (where boundary defects still show), all below `current`.
pub fn candidates(current: i64, tile: i64) -> Vec<i64> {
    let mut values = vec![1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65];
    let tile = tile.max(1);
    for j in 1..=4 {
        values.extend([j * tile - 1, j * tile, j * tile + 1]);
    }
    values.extend([current / 2, current / 4]);
    values.retain(|&v| v >= 1 && v < current);
    values.sort_unstable();
    values.dedup();
    values
}

/// Along one axis of the tile grid: whether an extent has a full tile, and a partial last one.
pub fn tile_structure(extent: i64, tile: i64) -> (bool, bool) {
    let tile = tile.max(1);
    (extent >= tile, extent % tile != 0)
}

/// The candidates for `dim`, now at `current`, that can keep the evidence of a failure seen at
/// `original`, smallest first: an output extent keeps its tile structure (a full tile and a
/// partial one, as the original had), K keeps one whole K tile when the original had one.
pub fn candidate_sizes(dim: &Dim, original: i64, current: i64) -> Vec<i64> {
    let mut values = candidates(current, dim.tile);
    match dim.axis {
        Axis::M | Axis::N => values.retain(|&v| {
            dim.output_tiles
                .iter()
                .all(|&t| tile_structure(v, t) == tile_structure(original, t))
        }),
        Axis::K => {
            let floor = if original >= dim.tile { dim.tile } else { 1 };
            values.retain(|&v| v >= floor);
        }
        Axis::Batch => {}
    }
    values
}

// ---------------------------------------------------------------------------------------------
// What a run showed, from the harness's JSON report
// ---------------------------------------------------------------------------------------------

/// One run as shrink judges it: its class, and the comparison of the output when the report
/// has one (a hang or a fault has none).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub class: String,
    pub output: Option<OutputReport>,
}

/// The fields of the report's `output` that the evidence is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputReport {
    pub count: i64,
    pub bad: i64,
    /// The least-squares ratio output / reference (None when not finite: `null` in the JSON).
    pub ratio: Option<f64>,
    /// [L, M, N].
    pub shape: [i64; 3],
    /// [tile_m, tile_n].
    pub tile: [i64; 2],
    /// Bad outputs per output tile, row-major over the tile grid, summed over the batch.
    pub bad_per_tile: Vec<i64>,
}

/// The `output` member of a harness JSON report (None when absent: the run stopped before the
/// comparison).
pub fn output_report(report: &Report) -> Result<Option<OutputReport>, String> {
    let Some(out) = &report.output else {
        return Ok(None);
    };
    let report = OutputReport {
        count: out.count,
        bad: out.bad,
        ratio: out.ratio,
        shape: out.tiles.shape,
        tile: out.tiles.tile,
        bad_per_tile: out.tiles.bad_per_tile.clone(),
    };
    let grid = report.grid();
    if report.tile.iter().any(|&t| t < 1) || report.bad_per_tile.len() as i64 != grid.0 * grid.1 {
        return Err("`output.bad_per_tile` does not match `output.shape` and `output.tile`".into());
    }
    Ok(Some(report))
}

/// Where a tile row or column lies on the tile grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Edge {
    /// A whole tile.
    Full,
    /// The last, partial tile (the extent is not a multiple of the tile).
    Partial,
}

/// What the outputs of one kind of tile showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileState {
    Right,
    Wrong,
    /// Some outputs right, some wrong.
    PartlyWrong,
}

impl OutputReport {
    /// Tile rows and columns.
    fn grid(&self) -> (i64, i64) {
        let [_, m, n] = self.shape;
        let [tm, tn] = self.tile;
        let up = |x: i64, t: i64| if t > 0 { (x + t - 1) / t } else { 0 };
        (up(m, tm), up(n, tn))
    }

    /// Each kind of tile present ((row edge, column edge)) and what its outputs showed.
    pub fn tile_states(&self) -> TileStates {
        let [l, m, n] = self.shape;
        let [tm, tn] = self.tile;
        let (rows, cols) = self.grid();
        // (bad, outputs) per kind.
        let mut sums: BTreeMap<(Edge, Edge), (i64, i64)> = BTreeMap::new();
        for r in 0..rows {
            let height = tm.min(m - r * tm);
            let row_edge = if height < tm {
                Edge::Partial
            } else {
                Edge::Full
            };
            for c in 0..cols {
                let width = tn.min(n - c * tn);
                let col_edge = if width < tn {
                    Edge::Partial
                } else {
                    Edge::Full
                };
                let entry = sums.entry((row_edge, col_edge)).or_default();
                entry.0 += self.bad_per_tile[(r * cols + c) as usize];
                entry.1 += height * width * l.max(1);
            }
        }
        sums.into_iter()
            .map(|(kind, (bad, outputs))| {
                let state = match bad {
                    0 => TileState::Right,
                    b if b >= outputs => TileState::Wrong,
                    _ => TileState::PartlyWrong,
                };
                (kind, state)
            })
            .collect()
    }
}

/// The kind of factor a `scale` verdict names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Factor {
    /// Every output 0: nothing of the sum was written.
    Zero,
    /// Between 0 and 1: part of the sum is lost.
    Below,
    /// Above 1: part of the sum counted more than once.
    Above,
    /// Below 0: the sign is flipped.
    Negative,
}

impl Factor {
    fn of(ratio: f64) -> Factor {
        if ratio.abs() < 1e-12 {
            Factor::Zero
        } else if ratio < 0.0 {
            Factor::Negative
        } else if ratio < 1.0 {
            Factor::Below
        } else {
            Factor::Above
        }
    }

    fn text(self) -> &'static str {
        match self {
            Factor::Zero => "a factor of 0",
            Factor::Below => "a factor below 1",
            Factor::Above => "a factor above 1",
            Factor::Negative => "a negative factor",
        }
    }
}

/// What a shrunk case must still show: the original failure's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub class: String,
    /// For `scale`: the kind of factor.
    pub factor: Option<Factor>,
    /// Where the comparison localizes the failure: whether some output was right, and what
    /// each kind of tile showed. None for classes without a localized comparison (hang, fault,
    /// nondeterministic) or a report without one: the class alone is kept.
    pub pattern: Option<(bool, TileStates)>,
}

/// What each kind of tile ((row edge, column edge)) showed.
pub type TileStates = BTreeMap<(Edge, Edge), TileState>;

/// The evidence of a failing run.
pub fn evidence(observed: &Observation) -> Evidence {
    let localized = !matches!(
        observed.class.as_str(),
        "hang" | "fault" | "nondeterministic" | "no_device"
    );
    let output = observed.output.as_ref().filter(|_| localized);
    Evidence {
        class: observed.class.clone(),
        factor: output
            .filter(|_| observed.class == "scale")
            .and_then(|o| o.ratio)
            .map(Factor::of),
        pattern: output.map(|o| (o.bad < o.count, o.tile_states())),
    }
}

/// Whether a candidate's run keeps the original's evidence; Err says what it lost.
pub fn keeps(original: &Evidence, candidate: &Observation) -> Result<(), String> {
    if candidate.class != original.class {
        return Err(format!("{} (not the same)", candidate.class));
    }
    let seen = evidence(candidate);
    if let Some(want) = original.factor {
        match seen.factor {
            Some(got) if got == want => {}
            Some(got) => {
                return Err(format!(
                    "{}, but with {} where the original had {}",
                    candidate.class,
                    got.text(),
                    want.text()
                ))
            }
            None => {
                return Err(format!(
                    "{}, but its report has no ratio to compare",
                    candidate.class
                ))
            }
        }
    }
    let Some((right_before, tiles_before)) = &original.pattern else {
        return Ok(());
    };
    let Some((right_now, tiles_now)) = &seen.pattern else {
        return Err(format!(
            "{}, but its report has no comparison to check the pattern against",
            candidate.class
        ));
    };
    if *right_before && !right_now {
        return Err(format!(
            "{}, but no output is right (the original had right outputs)",
            candidate.class
        ));
    }
    for (kind, before) in tiles_before {
        match tiles_now.get(kind) {
            Some(now) if now == before => {}
            Some(now) => {
                return Err(format!(
                    "{}, but {} are {} (they were {})",
                    candidate.class,
                    kind_text(*kind),
                    state_text(*now),
                    state_text(*before)
                ))
            }
            None => {
                return Err(format!(
                    "{}, but it has no {} (the original's were {})",
                    candidate.class,
                    kind_text(*kind),
                    state_text(*before)
                ))
            }
        }
    }
    if let Some(kind) = tiles_now.keys().find(|k| !tiles_before.contains_key(k)) {
        return Err(format!(
            "{}, but it has {}, which the original had not",
            candidate.class,
            kind_text(*kind)
        ));
    }
    Ok(())
}

fn kind_text(kind: (Edge, Edge)) -> &'static str {
    match kind {
        (Edge::Full, Edge::Full) => "full tiles",
        (Edge::Partial, Edge::Full) => "tiles of the partial last M tile row",
        (Edge::Full, Edge::Partial) => "tiles of the partial last N tile column",
        (Edge::Partial, Edge::Partial) => "the corner tile (partial in M and N)",
    }
}

fn state_text(state: TileState) -> &'static str {
    match state {
        TileState::Right => "right",
        TileState::Wrong => "wrong",
        TileState::PartlyWrong => "partly wrong",
    }
}

/// The properties a shrunk case was kept to, for the report: "class unwritten; some outputs
/// right; full tiles right, tiles of the partial last M tile row wrong".
pub fn describe(e: &Evidence) -> String {
    let mut parts = vec![format!("class {}", e.class)];
    if let Some(f) = e.factor {
        parts.push(f.text().to_string());
    }
    match &e.pattern {
        Some((right, tiles)) => {
            parts.push(if *right {
                "some outputs right".to_string()
            } else {
                "no output right".to_string()
            });
            let kinds: Vec<String> = tiles
                .iter()
                .map(|(k, s)| format!("{} {}", kind_text(*k), state_text(*s)))
                .collect();
            parts.push(kinds.join(", "));
        }
        None => parts.push(
            "the class only (the run has no localized comparison to keep more of)".to_string(),
        ),
    }
    parts.join("; ")
}

/// What the sizes were held to, for the report: "M keeps a full 64 tile and a partial one, N
/// whole 64 tiles, K at least one 32 K tile".
fn size_rules(dims: &[Dim], original: &IndexMap<String, i64>) -> String {
    let rules: Vec<String> = dims
        .iter()
        .filter_map(|d| {
            let at = original[&d.name];
            match d.axis {
                Axis::M | Axis::N => {
                    let tile = *d.output_tiles.first()?;
                    let (full, partial) = tile_structure(at, tile);
                    let what = match (full, partial) {
                        (true, true) => "a full tile and a partial one",
                        (true, false) => "whole tiles",
                        _ => "one partial tile",
                    };
                    Some(format!("{} {what} of {tile}", d.name))
                }
                Axis::K if at >= d.tile => {
                    Some(format!("{} at least one K tile of {}", d.name, d.tile))
                }
                _ => None,
            }
        })
        .collect();
    rules.join(", ")
}

/// Greedy shrinking, smallest candidate first, until a pass over every size changes nothing or
/// `max_runs` candidates ran. `keep` runs one candidate and says whether it keeps the evidence;
/// a configuration is tried once. Returns the smallest sizes kept.
pub fn search(
    dims: &[Dim],
    original: &IndexMap<String, i64>,
    max_runs: usize,
    mut keep: impl FnMut(&IndexMap<String, i64>) -> Result<bool, Error>,
) -> Result<IndexMap<String, i64>, Error> {
    let mut sizes = original.clone();
    let mut tried: std::collections::HashSet<Vec<i64>> = std::collections::HashSet::new();
    tried.insert(sizes.values().copied().collect());
    let mut runs = 0;
    let mut changed = true;
    while changed && runs < max_runs {
        changed = false;
        for dim in dims {
            for value in candidate_sizes(dim, original[&dim.name], sizes[&dim.name]) {
                if runs >= max_runs {
                    break;
                }
                let mut trial = sizes.clone();
                trial[&dim.name] = value;
                if !tried.insert(trial.values().copied().collect()) {
                    continue;
                }
                runs += 1;
                if keep(&trial)? {
                    sizes = trial;
                    changed = true;
                    break;
                }
            }
        }
    }
    Ok(sizes)
}

/// What the spec's failure is: the first mode that fails (`--ones`, then random) and its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    ones: bool,
    evidence: Evidence,
}

/// What `repro shrink` takes besides the artifact.
#[derive(Debug, Clone)]
pub struct ShrinkOptions {
    /// Stop after this many harness runs.
    pub max_runs: usize,
    pub timeout: Option<f64>,
    pub nvcc: Option<PathBuf>,
}

/// Finds smaller sizes that fail the way the spec fails, and writes them as `<spec>.shrunk.yaml`;
/// returns 0 when the spec passes, 1 when it fails (shrunk or not).
pub fn shrink(plan: &Plan, options: &ShrinkOptions) -> Result<u8, Error> {
    let spec = &plan.spec;
    if spec.reference.gemm().is_none() {
        return Err(Error::ShrinkNeedsGemm {
            spec: spec.path.clone(),
            op: spec.reference.op(),
        });
    }
    let dims = gemm_dims(spec);
    let names: Vec<String> = dims.iter().map(|d| d.name.clone()).collect();
    check_dims(spec, &names, "shrink")?;
    let binary = super::build_harness(
        plan,
        options.nvcc.as_deref(),
        Variant::Production,
        " (one build for every candidate)",
    )?;
    let limit = run_limit(spec, options.timeout.unwrap_or(spec.check.timeout));
    // Every candidate is a check sent to one harness held open (run/queue.rs): the search
    // decides the next candidate from the last one's result, and pays for one process and one
    // CUDA context rather than one per candidate. A candidate that faults or hangs ends that
    // process; the next one starts a fresh one.
    let queue_dir = plan.dir.join(".repro/queue");
    let mut session = QueueSession::new(&binary, &[], limit, &queue_dir, &|_| {})?;
    // Counted in a Cell: the search reads the count while `run` holds the closure.
    let runs = std::cell::Cell::new(0usize);
    let mut run =
        |sizes: &IndexMap<String, i64>, ones: bool| -> Result<(RunOutcome, Observation), Error> {
            runs.set(runs.get() + 1);
            let args = run_arguments(
                sizes.iter().map(|(n, v)| (n.as_str(), *v)),
                ones,
                options.timeout,
                &plan.dir,
            );
            let check = session.check(&args)?;
            let output = match &check.report {
                Some(harness) => output_report(harness).map_err(|why| Error::HarnessReport {
                    path: queue_dir.clone(),
                    why,
                })?,
                // A hang or a fault may stop the harness before it writes the comparison.
                None => None,
            };
            let observation = Observation {
                class: check.outcome.class.clone(),
                output,
            };
            Ok((check.outcome, observation))
        };

    let original: IndexMap<String, i64> =
        names.iter().map(|n| (n.clone(), spec.sizes[n])).collect();
    let (ones, ones_seen) = run(&original, true)?;
    if ones.code == exit::NO_DEVICE {
        println!("no usable CUDA device: the harness is built; shrinking needs a GPU to run it");
        return Ok(exit::NO_DEVICE);
    }
    let target = if ones.class != "ok" {
        Target {
            ones: true,
            evidence: evidence(&ones_seen),
        }
    } else {
        let (random, random_seen) = run(&original, false)?;
        if random.class == "ok" {
            println!(
                "shrink  {} passes with --ones and with random inputs: nothing to shrink",
                spec.name()
            );
            return Ok(exit::PASSED);
        }
        Target {
            ones: false,
            evidence: evidence(&random_seen),
        }
    };
    let mode = if target.ones {
        "--ones"
    } else {
        "random inputs"
    };
    println!(
        "shrink  {} fails with {mode}, class {}, at {}",
        spec.name(),
        target.evidence.class,
        sizes_text(&original)
    );
    println!("keep    {}", describe(&target.evidence));
    let rules = size_rules(&dims, &original);
    if !rules.is_empty() {
        println!("sizes   on the tile grid as the original: {rules}");
    }

    let budget = options.max_runs.saturating_sub(runs.get());
    let sizes = search(&dims, &original, budget, |trial| {
        let (_, seen) = run(trial, target.ones)?;
        let verdict = keeps(&target.evidence, &seen);
        println!(
            "  {:<28} {}",
            sizes_text(trial),
            match &verdict {
                Ok(()) => "same failure, evidence kept".to_string(),
                Err(lost) => lost.clone(),
            }
        );
        Ok(verdict.is_ok())
    })?;
    let shrunk: Vec<String> = names
        .iter()
        .filter(|n| sizes[*n] != spec.sizes[*n])
        .map(|n| format!("{n} {} -> {}", spec.sizes[n], sizes[n]))
        .collect();
    if shrunk.is_empty() {
        println!(
            "shrink  no smaller size keeps the failure's evidence ({} runs)",
            runs.get()
        );
        return Ok(exit::MISMATCH);
    }
    let path = write_shrunk(spec, &sizes)?;
    println!(
        "shrunk  {} in {} runs of one build; still {mode}, class {}",
        shrunk.join(", "),
        runs.get(),
        target.evidence.class
    );
    println!("kept    {}", describe(&target.evidence));
    println!("wrote   {}", path.display());
    Ok(exit::MISMATCH)
}

fn sizes_text(sizes: &IndexMap<String, i64>) -> String {
    sizes
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `spec.yaml` -> `spec.shrunk.yaml` (or `.shrunk.2.yaml`... when taken): the original text
/// with the new sizes and the name `<name>_shrunk`, so its artifact does not replace the
/// original's.
fn write_shrunk(spec: &ResolvedSpec, sizes: &IndexMap<String, i64>) -> Result<PathBuf, Error> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    };
    let text = std::fs::read_to_string(&spec.path).map_err(io("read", &spec.path))?;
    let mut edits: Vec<(String, String)> = sizes
        .iter()
        .map(|(n, v)| (format!("sizes.{n}"), v.to_string()))
        .collect();
    edits.push(("name".into(), format!("{}_shrunk", spec.name())));
    let rewritten =
        crate::spec::yaml::rewrite_scalars(&text, &edits).map_err(|why| Error::ShrunkSpec {
            spec: spec.path.clone(),
            why,
        })?;
    let stem = spec
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "spec".into());
    let dir = spec.path.parent().unwrap_or(Path::new("."));
    let mut n = 1;
    let path = loop {
        let name = if n == 1 {
            format!("{stem}.shrunk.yaml")
        } else {
            format!("{stem}.shrunk.{n}.yaml")
        };
        let candidate = dir.join(name);
        if !candidate.exists() {
            break candidate;
        }
        n += 1;
    };
    let partial = path.with_extension("yaml.partial");
    std::fs::write(&partial, rewritten).map_err(io("write", &partial))?;
    std::fs::rename(&partial, &path).map_err(io("write", &path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_small_first_and_below_the_current_size() {
        assert_eq!(
            candidates(300, 128),
            vec![
                1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 75, 127, 128, 129, 150,
                255, 256, 257
            ]
        );
        assert!(candidates(1, 128).is_empty());
    }

    fn dim(name: &str, axis: Axis, tile: i64) -> Dim {
        Dim {
            name: name.into(),
            axis,
            tile,
            output_tiles: if matches!(axis, Axis::M | Axis::N) {
                vec![tile]
            } else {
                Vec::new()
            },
        }
    }

    fn gemm_dims_64() -> Vec<Dim> {
        vec![
            dim("M", Axis::M, 64),
            dim("N", Axis::N, 64),
            dim("K", Axis::K, 32),
        ]
    }

    fn sizes(m: i64, n: i64, k: i64) -> IndexMap<String, i64> {
        [("M", m), ("N", n), ("K", k)]
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    }

    /// What the harness reports for a kernel with 64x64 output tiles that never writes its last
    /// partial M tile (the issue's defect): those outputs stay poison, every other is right.
    fn skips_last_partial_m_tile(sizes: &IndexMap<String, i64>) -> Observation {
        let (m, n, tile) = (sizes["M"], sizes["N"], 64);
        let (rows, cols) = ((m + tile - 1) / tile, (n + tile - 1) / tile);
        let mut bad_per_tile = vec![0; (rows * cols) as usize];
        if m % tile != 0 {
            for c in 0..cols {
                let width = tile.min(n - c * tile);
                bad_per_tile[((rows - 1) * cols + c) as usize] = (m % tile) * width;
            }
        }
        let bad: i64 = bad_per_tile.iter().sum();
        Observation {
            class: if bad > 0 { "unwritten" } else { "ok" }.into(),
            output: Some(OutputReport {
                count: m * n,
                bad,
                ratio: None,
                shape: [1, m, n],
                tile: [tile, tile],
                bad_per_tile,
            }),
        }
    }

    #[test]
    fn the_partial_m_tile_example_shrinks_to_one_full_tile_and_one_row() {
        // M = 200, tile 64: rows 192-199 unwritten, the three full tile rows right.
        let original = sizes(200, 192, 1000);
        let target = evidence(&skips_last_partial_m_tile(&original));
        assert_eq!(
            describe(&target),
            "class unwritten; some outputs right; full tiles right, tiles of the partial last M tile row wrong"
        );
        let mut tried = Vec::new();
        let shrunk = search(&gemm_dims_64(), &original, 200, |trial| {
            tried.push(trial.clone());
            Ok(keeps(&target, &skips_last_partial_m_tile(trial)).is_ok())
        })
        .unwrap();
        // One full tile and one row of a partial one; N and K at one tile.
        assert_eq!(shrunk, sizes(65, 64, 32));
        // Candidates whose tile grid cannot show the evidence (M below a tile, N not a
        // multiple of it, K below a K tile) are never run.
        assert!(tried
            .iter()
            .all(|t| t["M"] > 64 && t["N"] % 64 == 0 && t["K"] >= 32));
        assert!(tried.len() < 20, "{} runs", tried.len());
    }

    #[test]
    fn what_the_old_class_only_test_accepted_is_refused() {
        let target = evidence(&skips_last_partial_m_tile(&sizes(200, 192, 1000)));
        // 1x1x1: the only tile is the partial one, no output right.
        let e = keeps(&target, &skips_last_partial_m_tile(&sizes(1, 1, 1))).unwrap_err();
        assert_eq!(
            e,
            "unwritten, but no output is right (the original had right outputs)"
        );
        // M = 65, N = 1: a partial N column the original did not have.
        let e = keeps(&target, &skips_last_partial_m_tile(&sizes(65, 1, 1000))).unwrap_err();
        assert_eq!(
            e,
            "unwritten, but it has no full tiles (the original's were right)"
        );
        let e = keeps(&target, &skips_last_partial_m_tile(&sizes(65, 65, 1000))).unwrap_err();
        assert_eq!(
            e,
            "unwritten, but it has tiles of the partial last N tile column, which the original had not"
        );
        // M = 64: no partial tile, so nothing is unwritten.
        let e = keeps(&target, &skips_last_partial_m_tile(&sizes(64, 64, 32))).unwrap_err();
        assert_eq!(e, "ok (not the same)");
        assert_eq!(
            keeps(&target, &skips_last_partial_m_tile(&sizes(65, 64, 32))),
            Ok(())
        );
    }

    #[test]
    fn candidate_sizes_keep_the_tile_structure() {
        let [m, n, k] = [0, 1, 2].map(|i| gemm_dims_64()[i].clone());
        // Ragged with full tiles: a full tile and a partial one.
        assert_eq!(
            candidate_sizes(&m, 200, 200),
            vec![65, 100, 127, 129, 191, 193]
        );
        // A multiple of the tile stays one.
        assert_eq!(candidate_sizes(&n, 192, 192), vec![64, 128]);
        // Below one tile: anything below one tile.
        assert_eq!(
            candidate_sizes(&m, 50, 50),
            vec![1, 2, 3, 4, 7, 8, 9, 12, 15, 16, 17, 25, 31, 32, 33]
        );
        // K keeps one K tile when it had one, partial or not.
        assert_eq!(candidate_sizes(&k, 1000, 1000)[..4], [32, 33, 63, 64]);
        assert_eq!(candidate_sizes(&k, 20, 20)[0], 1);
    }

    fn scale(ratio: f64, m: i64) -> Observation {
        Observation {
            class: "scale".into(),
            output: Some(OutputReport {
                count: m * 64,
                bad: m * 64,
                ratio: Some(ratio),
                shape: [1, m, 64],
                tile: [64, 64],
                bad_per_tile: vec![64 * 64; ((m + 63) / 64) as usize]
                    .into_iter()
                    .enumerate()
                    .map(|(i, full)| full.min((m - i as i64 * 64) * 64))
                    .collect(),
            }),
        }
    }

    #[test]
    fn a_scale_keeps_its_kind_of_factor() {
        // --ones on a kernel that drops its last partial K tile: 992/1000 of every sum.
        let target = evidence(&scale(0.992, 130));
        assert_eq!(target.factor, Some(Factor::Below));
        assert_eq!(keeps(&target, &scale(0.97, 65)), Ok(()));
        // K = 1: the K loop wrote nothing; a factor of 0 is not the same evidence.
        assert_eq!(
            keeps(&target, &scale(0.0, 65)).unwrap_err(),
            "scale, but with a factor of 0 where the original had a factor below 1"
        );
        assert_eq!(
            keeps(&target, &scale(2.0, 65)).unwrap_err(),
            "scale, but with a factor above 1 where the original had a factor below 1"
        );
    }

    #[test]
    fn classes_without_a_localized_comparison_keep_the_class() {
        let hang = Observation {
            class: "hang".into(),
            output: None,
        };
        let target = evidence(&hang);
        assert_eq!(target.pattern, None);
        assert_eq!(
            describe(&target),
            "class hang; the class only (the run has no localized comparison to keep more of)"
        );
        assert_eq!(keeps(&target, &hang), Ok(()));
        let fault = Observation {
            class: "fault".into(),
            output: None,
        };
        assert_eq!(keeps(&target, &fault).unwrap_err(), "fault (not the same)");
    }

    #[test]
    fn the_report_is_read_from_the_harness_json() {
        // The members write_comparison_json (report.cuh) writes, as a 130x70 run with 64x64
        // tiles whose last M tile row is unwritten.
        let json = r#"{"name": "skip", "mode": "ones",
                "output": {"tensor": "D", "passed": false, "count": 9100, "bad": 140, "nan": 0,
                           "inf": 0, "unwritten": 140, "not_compared": 0, "rel_l2": 0,
                           "max_abs": 0, "max_rel": 0, "ratio": null, "residual": 0,
                           "ref_rms": 1, "shape": [1, 130, 70], "tile": [64, 64],
                           "bad_per_tile": [0, 0, 0, 0, 128, 12], "first_mismatches": []},
                "disposition": "failed", "class": "unwritten", "exit_code": 1, "message": ""}"#;
        let read = |text: &str| Report::from_json(text.as_bytes()).unwrap();
        let report = output_report(&read(json)).unwrap().unwrap();
        assert_eq!(report.ratio, None);
        let states = report.tile_states();
        assert_eq!(
            states.into_iter().collect::<Vec<_>>(),
            vec![
                ((Edge::Full, Edge::Full), TileState::Right),
                ((Edge::Full, Edge::Partial), TileState::Right),
                ((Edge::Partial, Edge::Full), TileState::Wrong),
                ((Edge::Partial, Edge::Partial), TileState::Wrong),
            ]
        );
        // No comparison (a fault before it): None, not an error.
        let fault = read(
            r#"{"class": "fault", "disposition": "failed", "exit_code": 4, "message": "fault"}"#,
        );
        assert_eq!(output_report(&fault).unwrap(), None);
        // A tile list that does not fit the grid is an error, not a wrong verdict.
        let broken = read(&json.replace("[0, 0, 0, 0, 128, 12]", "[0, 1]"));
        assert_eq!(
            output_report(&broken).unwrap_err(),
            "`output.bad_per_tile` does not match `output.shape` and `output.tile`"
        );
    }

    #[test]
    fn size_rules_say_what_the_grid_keeps() {
        assert_eq!(
            size_rules(&gemm_dims_64(), &sizes(200, 192, 1000)),
            "M a full tile and a partial one of 64, N whole tiles of 64, K at least one K tile of 32"
        );
    }
}
