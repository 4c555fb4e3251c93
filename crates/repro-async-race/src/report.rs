//! What the checker found, in words: the harness writes raw findings (kind, two site ids, the
//! CTA, shared-memory offsets) to a JSON-lines file; the rewrite's site tables turn the ids into
//! instructions and source lines. One finding per kind and pair of sites, with its count.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ptx::{Location, Site};

/// One line of the harness's findings file.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Line {
    Summary { summary: Summary },
    Error { error: String },
    Finding(RawFinding),
    Other(serde::de::IgnoredAny),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub checked_blocks: u64,
    pub unchecked_blocks: u64,
    pub operations: u64,
    pub unknown_sizes: u64,
    pub remote_operations: u64,
    pub dropped_findings: u64,
    /// TMA copies through a tensor map past the ones a CTA follows.
    #[serde(default)]
    pub untracked_maps: u64,
    /// Tensor-map rewrites ordered after a TMA load only by a bulk-group drain in the issuing
    /// warp (cp.async.bulk.commit_group + wait_group.read), which the PTX ISA states for
    /// bulk_group copies only (docs/async-race.md).
    #[serde(default)]
    pub drain_ordered: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct RawFinding {
    kind: u32,
    site: u32,
    other_site: u32,
    count: u64,
    block: [u32; 3],
    warp: u32,
    other_warp: u32,
    lo: u32,
    hi: u32,
    iteration: u32,
    /// The tensor map's generic address (the tensor-map kinds).
    #[serde(default)]
    map: u64,
}

/// The two sides of a race, from the checker's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceKind {
    /// A generic access to bytes a TMA load may still be writing.
    AccessBeforeLoadCompletes,
    /// A generic write to bytes a TMA store (or wgmma) may still be reading.
    WriteWhileAsyncReads,
    /// A TMA load over bytes a generic access not ordered before it touched.
    LoadOverUnorderedAccess,
    /// A TMA store of bytes a generic write not ordered before it wrote.
    StoreOfUnorderedWrite,
    /// A TMA store of generic writes with no fence.proxy.async between.
    StoreWithoutProxyFence,
    /// Two async accesses (a load and a store or wgmma) of the same bytes, unordered.
    AsyncAccessesOverlap,
    /// wgmma reading bytes a TMA load may still be writing.
    WgmmaBeforeLoadCompletes,
    /// A tensor map rewritten (a store into its 128 bytes, `tensormap.replace`, a copy into it)
    /// while a TMA copy issued through its old contents may still read it.
    TensorMapRewrittenWhileInUse,
    /// A TMA copy through a tensor map rewritten with no `fence.proxy.tensormap::generic`
    /// release (after the write) and acquire (before the copy) between.
    TensorMapUsedWithoutProxyFence,
}

impl RaceKind {
    fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            1 => Self::AccessBeforeLoadCompletes,
            2 => Self::WriteWhileAsyncReads,
            3 => Self::LoadOverUnorderedAccess,
            4 => Self::StoreOfUnorderedWrite,
            5 => Self::StoreWithoutProxyFence,
            6 => Self::AsyncAccessesOverlap,
            7 => Self::WgmmaBeforeLoadCompletes,
            8 => Self::TensorMapRewrittenWhileInUse,
            9 => Self::TensorMapUsedWithoutProxyFence,
            _ => return None,
        })
    }
}

/// One side of a finding: the instruction and where it comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub instruction: String,
    /// `file:line`, innermost first (a helper, then where it was inlined).
    pub locations: Vec<String>,
    pub warp: u32,
}

/// One race: a kind, its two sides, the first CTA it was seen in, how often.
#[derive(Debug, Clone, Serialize)]
pub struct Race {
    pub kind: RaceKind,
    /// The side the checker was at when it saw the conflict.
    pub at: Side,
    /// The earlier access it conflicts with.
    pub against: Side,
    pub block: [u32; 3],
    /// Shared-memory byte offsets (of the CTA's window) the conflicting accesses covered; for the
    /// tensor-map kinds, the bytes of the map.
    pub shared_bytes: [u32; 2],
    /// The tensor map's generic address (the tensor-map kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_map: Option<u64>,
    /// The TMA operation's number in its warp (1 = the first), or the other side's clock.
    pub iteration: u32,
    pub count: u64,
}

/// Everything the checker reported for one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Findings {
    pub races: Vec<Race>,
    pub summary: Summary,
    /// The harness could not hand its findings over (the context was lost, say).
    pub error: Option<String>,
}

/// Reads the findings file and the site tables (every `*.sites.json` in `sites`).
pub fn load(findings: &Path, sites: &Path) -> Findings {
    let mut table: HashMap<u32, Site> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir(sites) {
        for entry in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            if let Ok(list) = serde_json::from_str::<Vec<Site>>(&text) {
                table.extend(list.into_iter().map(|s| (s.id, s)));
            }
        }
    }
    let text = std::fs::read_to_string(findings).unwrap_or_default();
    parse(&text, &table)
}

fn parse(text: &str, table: &HashMap<u32, Site>) -> Findings {
    let mut out = Findings::default();
    if text.trim().is_empty() {
        out.error = Some("the harness wrote no findings (it did not reach its exit)".into());
    }
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Summary { summary }) => out.summary = summary,
            Ok(Line::Error { error }) => out.error = Some(error),
            Ok(Line::Finding(raw)) => {
                let Some(kind) = RaceKind::from_code(raw.kind) else {
                    continue;
                };
                let side = |id: u32, warp: u32| {
                    let site = table.get(&id);
                    Side {
                        instruction: site
                            .map(|s| short_instruction(&s.instruction))
                            .unwrap_or_else(|| format!("site {id}")),
                        locations: site
                            .map(|s| s.locations.iter().map(location_text).collect())
                            .unwrap_or_default(),
                        warp,
                    }
                };
                out.races.push(Race {
                    kind,
                    at: side(raw.site, raw.warp),
                    against: side(raw.other_site, raw.other_warp),
                    block: raw.block,
                    shared_bytes: [raw.lo, raw.hi],
                    tensor_map: (raw.map != 0).then_some(raw.map),
                    iteration: raw.iteration,
                    count: raw.count,
                });
            }
            Ok(Line::Other(_)) | Err(_) => {}
        }
    }
    // The same two source lines can meet through several instructions (an unrolled loop): one
    // race each, counts and ranges merged. The same means the whole chain of each side, not its
    // innermost line: every TMA load of a kernel is one helper's asm (CuTe's
    // copy_sm90_tma.hpp), and merging by that line alone made one race of a kernel's A, B and
    // scale loads, named by whichever came first, its range spanning all of them.
    let mut merged: Vec<Race> = Vec::new();
    for race in out.races.drain(..) {
        let same = merged.iter_mut().find(|r| {
            r.kind == race.kind
                && r.at.locations == race.at.locations
                && r.against.locations == race.against.locations
                && !race.at.locations.is_empty()
        });
        match same {
            Some(r) => {
                r.count += race.count;
                r.shared_bytes[0] = r.shared_bytes[0].min(race.shared_bytes[0]);
                r.shared_bytes[1] = r.shared_bytes[1].max(race.shared_bytes[1]);
            }
            None => merged.push(race),
        }
    }
    merged.sort_by_key(|r| std::cmp::Reverse(r.count));
    out.races = merged;
    out
}

/// `st.shared.u32 \t[%r40+10256], %r981` → `st.shared.u32`: the mnemonic is what a reader needs.
fn short_instruction(instruction: &str) -> String {
    instruction
        .split_whitespace()
        .next()
        .unwrap_or(instruction)
        .to_string()
}

fn location_text(location: &Location) -> String {
    let file = Path::new(&location.file)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| location.file.clone());
    format!("{file}:{}", location.line)
}

/// Where a side is, for one line: the innermost location outside CUDA's own headers, and the
/// kernel line it was inlined into when that differs.
fn place(side: &Side) -> String {
    let own =
        |l: &&String| !l.starts_with("cuda_") && !l.starts_with("sm_") && !l.starts_with("device_");
    let first = side.locations.iter().find(own);
    let last = side.locations.last();
    match (first, last) {
        (Some(f), Some(l)) if f != l => format!("{f} (inlined at {l})"),
        (Some(f), _) => f.clone(),
        (None, Some(l)) => l.clone(),
        (None, None) => "an unknown line (build without -lineinfo?)".into(),
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The sentence naming the missing order.
fn sentence(race: &Race) -> String {
    let at = place(&race.at);
    let against = place(&race.against);
    let (ai, oi) = (&race.at.instruction, &race.against.instruction);
    match race.kind {
        RaceKind::AccessBeforeLoadCompletes => format!(
            "{ai} at {at} touches shared memory the TMA load issued at {against} ({oi}) may still be writing: no wait on that load's mbarrier phase orders it"
        ),
        RaceKind::WriteWhileAsyncReads => format!(
            "the async read issued at {against} ({oi}) is not waited for before the write at {at} ({ai}): no cp.async.bulk.wait_group.read (or wgmma.wait_group) in its warp, followed by a barrier, orders the write after it"
        ),
        RaceKind::LoadOverUnorderedAccess => format!(
            "the TMA load issued at {at} ({ai}) overwrites shared memory that warp {} accessed at {against} ({oi}), and nothing orders that access before the load: the stage was released before the access",
            race.against.warp
        ),
        RaceKind::StoreOfUnorderedWrite => format!(
            "the TMA store issued at {at} ({ai}) reads shared memory warp {} wrote at {against} ({oi}) with no barrier between the write and the store",
            race.against.warp
        ),
        RaceKind::StoreWithoutProxyFence => format!(
            "the TMA store issued at {at} ({ai}) reads shared memory written at {against} ({oi}) through the generic proxy with no fence.proxy.async between the write and the store"
        ),
        RaceKind::AsyncAccessesOverlap => format!(
            "the async copy issued at {at} ({ai}) and the one at {against} ({oi}) touch the same shared memory, and neither is waited for before the other"
        ),
        RaceKind::WgmmaBeforeLoadCompletes => format!(
            "wgmma at {at} reads shared memory the TMA load issued at {against} ({oi}) may still be writing: no wait on that load's mbarrier phase orders it"
        ),
        RaceKind::TensorMapRewrittenWhileInUse => format!(
            "the tensor map that the TMA copy issued at {against} ({oi}) reads is rewritten at {at} ({ai}) while that copy may still be reading it: no wait on the copy's mbarrier phase (or, for a store, its cp.async.bulk.wait_group.read), and no cp.async.bulk.commit_group + wait_group.read in its warp, orders the rewrite after it"
        ),
        RaceKind::TensorMapUsedWithoutProxyFence => format!(
            "the TMA copy issued at {at} ({ai}) reads a tensor map rewritten at {against} ({oi}) with no fence.proxy.tensormap::generic release after the write and acquire (of that map, in the copying warp) before the copy"
        ),
    }
}

/// Adds the findings to the harness's JSON report (`"async_race": {...}`); the report is the
/// harness's, so a missing or unreadable one is left as it is. Edited as a `serde_json::Value`,
/// not read as `repro_contract::report::Report`: a rewrite must keep every member, known or not.
pub fn add_to_json(report: &Path, findings: &Findings) -> Result<(), super::error::AsyncRaceError> {
    let Ok(text) = std::fs::read_to_string(report) else {
        return Ok(());
    };
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(());
    };
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "async_race".into(),
            serde_json::to_value(findings).unwrap_or_default(),
        );
        if !findings.races.is_empty() {
            object.insert("disposition".into(), "Failed (race)".into());
        }
    }
    let text = serde_json::to_string_pretty(&value).unwrap_or(text);
    std::fs::write(report, text).map_err(super::error::AsyncRaceError::io("write", report))
}

/// The report block `repro run --sanitize async-race` prints.
pub fn render(findings: &Findings) -> String {
    let mut out = String::new();
    let s = &findings.summary;
    let total: u64 = findings.races.iter().map(|r| r.count).sum();
    let _ = writeln!(
        out,
        "sanitize  async-race: {} race{} ({} conflicting access{}) in {} CTA{} checked, {} async operations followed",
        findings.races.len(),
        if findings.races.len() == 1 { "" } else { "s" },
        total,
        if total == 1 { "" } else { "es" },
        s.checked_blocks,
        if s.checked_blocks == 1 { "" } else { "s" },
        s.operations
    );
    if let Some(error) = &findings.error {
        let _ = writeln!(out, "  error: {error}");
    }
    for race in &findings.races {
        let _ = writeln!(out, "  race  {}", sentence(race));
        let bytes = match race.tensor_map {
            Some(map) => format!(
                "bytes {}-{} of the tensor map at {map:#x}",
                race.shared_bytes[0], race.shared_bytes[1]
            ),
            None => format!(
                "shared bytes {}-{}",
                race.shared_bytes[0], race.shared_bytes[1]
            ),
        };
        let _ = writeln!(
            out,
            "        {bytes} of CTA ({}, {}, {}), warp {} against warp {}, first at the {} operation; {} time{}",
            race.block[0],
            race.block[1],
            race.block[2],
            race.at.warp,
            race.against.warp,
            ordinal(race.iteration),
            race.count,
            if race.count == 1 { "" } else { "s" }
        );
    }
    let mut notes = Vec::new();
    if s.unchecked_blocks > 0 {
        notes.push(format!(
            "{} CTAs ran unchecked (more resident than the checker has state for)",
            s.unchecked_blocks
        ));
    }
    if s.unknown_sizes > 0 {
        notes.push(format!(
            "{} copies of unknown size were not followed",
            s.unknown_sizes
        ));
    }
    if s.remote_operations > 0 {
        notes.push(format!(
            "{} operations on another CTA's shared memory (cluster) were not followed",
            s.remote_operations
        ));
    }
    if s.untracked_maps > 0 {
        notes.push(format!(
            "{} TMA copies through tensor maps past the {} a CTA follows were not checked against rewrites",
            s.untracked_maps, 16
        ));
    }
    if s.drain_ordered > 0 {
        notes.push(format!(
            "{} tensor-map writes were ordered after in-flight TMA loads only by cp.async.bulk.commit_group + wait_group.read in the loading warp, which the PTX ISA states for bulk_group copies only (CUTLASS relies on it; docs/async-race.md)",
            s.drain_ordered
        ));
    }
    if s.dropped_findings > 0 {
        notes.push(format!(
            "{} findings past the table's 256 kinds were dropped",
            s.dropped_findings
        ));
    }
    for note in notes {
        let _ = writeln!(out, "  note: {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: u32, instruction: &str, file: &str, line: u32) -> (u32, Site) {
        (
            id,
            Site {
                id,
                instruction: instruction.into(),
                locations: vec![Location {
                    file: file.into(),
                    line,
                }],
                function: "k".into(),
            },
        )
    }

    #[test]
    fn a_store_race_reads_as_its_missing_wait() {
        let table: HashMap<u32, Site> = [
            site(
                4,
                "cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r2], 1024",
                "/k/unit.cu",
                14,
            ),
            site(8, "st.shared.f32 [%r5], %f1", "/k/unit.cu", 19),
        ]
        .into_iter()
        .collect();
        let text = r#"{"summary": {"checked_blocks": 2, "unchecked_blocks": 0, "operations": 2, "unknown_sizes": 0, "remote_operations": 0, "dropped_findings": 0}}
{"kind": 2, "site": 8, "other_site": 4, "count": 3, "block": [1, 0, 0], "warp": 5, "other_warp": 0, "lo": 1744, "hi": 1760, "iteration": 1, "other_clock": 1}
{"kind": 2, "site": 8, "other_site": 4, "count": 2, "block": [0, 0, 0], "warp": 3, "other_warp": 0, "lo": 1024, "hi": 1040, "iteration": 1, "other_clock": 1}
"#;
        let findings = parse(text, &table);
        assert_eq!(findings.races.len(), 1, "one pair of lines, merged");
        assert_eq!(findings.races[0].count, 5);
        assert_eq!(findings.races[0].shared_bytes, [1024, 1760]);
        let text = render(&findings);
        assert!(
            text.starts_with(
                "sanitize  async-race: 1 race (5 conflicting accesses) in 2 CTAs checked"
            ),
            "{text}"
        );
        assert!(text.contains("the async read issued at unit.cu:14 (cp.async.bulk.global.shared::cta.bulk_group) is not waited for before the write at unit.cu:19 (st.shared.f32)"), "{text}");
    }

    #[test]
    fn loads_of_one_helper_inlined_at_two_lines_stay_two_races() {
        // Two TMA loads from one asm helper (the same innermost line), inlined at kernel lines
        // 223 and 224, against one wgmma: two races, each with its own lines and bytes.
        let inlined = |id: u32, instruction: &str, helper: (&str, u32), at: u32| {
            (
                id,
                Site {
                    id,
                    instruction: instruction.into(),
                    locations: vec![
                        Location {
                            file: helper.0.into(),
                            line: helper.1,
                        },
                        Location {
                            file: "/k/gemm.cuh".into(),
                            line: at,
                        },
                    ],
                    function: "k".into(),
                },
            )
        };
        let load = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
        let table: HashMap<u32, Site> = [
            inlined(1, load, ("/cute/copy_sm90_tma.hpp", 129), 223),
            inlined(2, load, ("/cute/copy_sm90_tma.hpp", 129), 224),
            inlined(
                3,
                "wgmma.mma_async",
                ("/cute/mma_sm90_gmma_ext.hpp", 30816),
                292,
            ),
        ]
        .into_iter()
        .collect();
        let text = r#"{"kind": 6, "site": 1, "other_site": 3, "count": 2, "block": [0, 0, 0], "warp": 8, "other_warp": 0, "lo": 87040, "hi": 87296, "iteration": 5, "other_clock": 2}
{"kind": 6, "site": 2, "other_site": 3, "count": 3, "block": [0, 0, 0], "warp": 8, "other_warp": 4, "lo": 171008, "hi": 171264, "iteration": 6, "other_clock": 3}
"#;
        let findings = parse(text, &table);
        assert_eq!(findings.races.len(), 2, "{findings:#?}");
        let text = render(&findings);
        assert!(
            text.contains("copy_sm90_tma.hpp:129 (inlined at gemm.cuh:224)"),
            "{text}"
        );
        assert!(
            text.contains("copy_sm90_tma.hpp:129 (inlined at gemm.cuh:223)"),
            "{text}"
        );
        assert!(text.contains("shared bytes 87040-87296"), "{text}");
        assert!(text.contains("shared bytes 171008-171264"), "{text}");
    }

    #[test]
    fn a_rewritten_tensor_map_names_the_rewrite_the_load_and_the_map() {
        let table: HashMap<u32, Site> = [
            site(
                5,
                "st.global.v4.u32 [%rd3+16], {%r1, %r2, %r3, %r4}",
                "/k/grouped.cuh",
                200,
            ),
            site(
                9,
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd2, {%r3, %r4}], [%r5]",
                "/k/grouped.cuh",
                223,
            ),
        ]
        .into_iter()
        .collect();
        let text = r#"{"summary": {"checked_blocks": 132, "unchecked_blocks": 0, "operations": 9, "unknown_sizes": 0, "remote_operations": 0, "dropped_findings": 0, "untracked_maps": 0, "drain_ordered": 3}}
{"kind": 8, "site": 5, "other_site": 9, "count": 4, "block": [7, 0, 0], "warp": 8, "other_warp": 8, "lo": 16, "hi": 32, "iteration": 6, "other_clock": 6, "known": 2, "map": 139637976727552}
"#;
        let findings = parse(text, &table);
        assert_eq!(findings.races.len(), 1);
        assert_eq!(
            findings.races[0].kind,
            RaceKind::TensorMapRewrittenWhileInUse
        );
        assert_eq!(findings.races[0].tensor_map, Some(0x7f00_0000_0000));
        let text = render(&findings);
        assert!(text.contains("the tensor map that the TMA copy issued at grouped.cuh:223 (cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes) reads is rewritten at grouped.cuh:200 (st.global.v4.u32)"), "{text}");
        assert!(
            text.contains("bytes 16-32 of the tensor map at 0x7f0000000000 of CTA (7, 0, 0)"),
            "{text}"
        );
        assert!(text.contains("3 tensor-map writes were ordered after in-flight TMA loads only by cp.async.bulk.commit_group"), "{text}");
        // A findings file of an older runtime (no map fields) still reads.
        let old = r#"{"summary": {"checked_blocks": 1, "unchecked_blocks": 0, "operations": 1, "unknown_sizes": 0, "remote_operations": 0, "dropped_findings": 0}}
{"kind": 2, "site": 5, "other_site": 9, "count": 1, "block": [0, 0, 0], "warp": 1, "other_warp": 0, "lo": 0, "hi": 16, "iteration": 1, "other_clock": 1}
"#;
        let findings = parse(old, &table);
        assert_eq!(findings.summary.checked_blocks, 1);
        assert_eq!(findings.races.len(), 1);
        assert_eq!(findings.races[0].tensor_map, None);
    }

    #[test]
    fn no_findings_file_is_an_error_not_a_pass() {
        let findings = parse("", &HashMap::new());
        assert!(findings.error.is_some());
    }
}
