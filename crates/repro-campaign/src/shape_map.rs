//! Where in the shape space a kernel fails: for each spec, variant and mode with a failure, a
//! grid of its shapes (the first size that varies down, the others across) marking each run
//! pass, its failure class, or not run. A failure at every M that is not a multiple of 128, or
//! at one tensor-parallel degree's N, shows as a line in it. Printed in the summary and drawn
//! as a PNG beside the runs' own per-tile heatmaps.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::results::Record;
use crate::analyze::heatmap::{encode_png, TileShares};

/// One grid of shapes.
#[derive(Debug)]
pub struct ShapeMap {
    /// `tiled_gemm_bf16 default probe`.
    pub title: String,
    /// The file name stem: `tiled_gemm_bf16__default__probe`.
    pub stem: String,
    /// `M`: the size down the rows.
    pub row_size: String,
    pub rows: Vec<i64>,
    /// `N=4096,K=4096` for each column (empty text when only one size varies).
    pub columns: Vec<String>,
    /// Row-major [rows][columns]: the verdict of the run there, if any.
    pub cells: Vec<Option<String>>,
}

/// Text grids wider or taller than these are left to the PNG.
const MAX_TEXT_COLUMNS: usize = 64;
const MAX_TEXT_ROWS: usize = 200;

/// The maps of every spec, variant and mode with a failure and more than one shape.
pub fn maps(keys: &[String], latest: &HashMap<String, Record>) -> Vec<ShapeMap> {
    // Grouped by the names of their sizes too: a grid needs every record to have each size (a
    // spec's sizes do not change within a campaign, but records from elsewhere may differ).
    type Group = (String, String, &'static str, Vec<String>);
    let mut groups: BTreeMap<Group, Vec<&Record>> = BTreeMap::new();
    for key in keys {
        if let Some(r) = latest.get(key) {
            let names = r.sizes.keys().cloned().collect();
            groups
                .entry((r.spec.clone(), r.variant.clone(), r.mode.name(), names))
                .or_default()
                .push(r);
        }
    }
    let mut maps = Vec::new();
    let mut stems: HashMap<String, usize> = HashMap::new();
    for ((spec, variant, mode, _), records) in groups {
        // A build that failed fails every shape alike: its map would say nothing.
        if !records
            .iter()
            .any(|r| r.is_failure() && !matches!(r.verdict.as_str(), "build_failed" | "refused"))
        {
            continue;
        }
        let names: Vec<&String> = records[0].sizes.keys().collect();
        let varying: Vec<&String> = names
            .iter()
            .copied()
            .filter(|n| {
                records
                    .iter()
                    .any(|r| r.sizes.get(*n) != records[0].sizes.get(*n))
            })
            .collect();
        let Some((row_size, across)) = varying.split_first() else {
            continue;
        };
        let column_of = |r: &Record| -> String {
            across
                .iter()
                .map(|n| format!("{n}={}", r.sizes.get(*n).copied().unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut rows: Vec<i64> = records.iter().map(|r| r.sizes[*row_size]).collect();
        rows.sort_unstable();
        rows.dedup();
        let mut columns: Vec<String> = Vec::new();
        for r in &records {
            let c = column_of(r);
            if !columns.contains(&c) {
                columns.push(c);
            }
        }
        let mut cells = vec![None; rows.len() * columns.len()];
        for r in &records {
            let row = rows
                .binary_search(&r.sizes[*row_size])
                .expect("a row of its own");
            let column = columns
                .iter()
                .position(|c| *c == column_of(r))
                .expect("listed");
            cells[row * columns.len() + column] = Some(r.verdict.clone());
        }
        // A second set of size names of one spec, variant and mode gets a file of its own.
        let mut stem = format!("{spec}__{variant}__{mode}");
        let seen = stems.entry(stem.clone()).or_default();
        *seen += 1;
        if *seen > 1 {
            stem = format!("{stem}__{seen}");
        }
        maps.push(ShapeMap {
            title: format!("{spec} {variant} {mode}"),
            stem,
            row_size: row_size.to_string(),
            rows,
            columns,
            cells,
        });
    }
    maps
}

impl ShapeMap {
    /// The grid in characters: `.` a pass, a letter per failure class (the legend says which),
    /// `?` a run that found no GPU, blank where no run was made.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for v in self.cells.iter().flatten() {
            *counts.entry(v.as_str()).or_default() += 1;
        }
        let mut failures: Vec<(&str, usize)> = counts
            .iter()
            .filter(|(v, _)| !matches!(**v, "ok" | "no_device"))
            .map(|(v, n)| (*v, *n))
            .collect();
        failures.sort_by_key(|(v, n)| (std::cmp::Reverse(*n), *v));
        let letter = |v: &str| -> char {
            match v {
                "ok" => '.',
                "no_device" => '?',
                _ => {
                    let i = failures.iter().position(|(f, _)| *f == v).unwrap_or(0);
                    char::from(b'a' + (i % 26) as u8)
                }
            }
        };
        let across = if self.columns.iter().all(String::is_empty) {
            String::new()
        } else {
            format!("; across: {} columns", self.columns.len())
        };
        let _ = writeln!(
            out,
            "shape map {}: {} down{across}",
            self.title, self.row_size
        );
        if self.columns.len() > MAX_TEXT_COLUMNS || self.rows.len() > MAX_TEXT_ROWS {
            let _ = writeln!(
                out,
                "  {} x {} shapes: too many to print; see its PNG",
                self.rows.len(),
                self.columns.len()
            );
            return out;
        }
        let label_width = self
            .rows
            .iter()
            .map(|r| format!("{}={r}", self.row_size).len())
            .max()
            .unwrap_or(1);
        if !across.is_empty() {
            let header: Vec<String> = (0..self.columns.len())
                .map(|c| (c % 10).to_string())
                .collect();
            let _ = writeln!(out, "  {:label_width$}  {}", "", header.join(" "));
        }
        for (i, row) in self.rows.iter().enumerate() {
            let cells: Vec<String> = (0..self.columns.len())
                .map(|c| match &self.cells[i * self.columns.len() + c] {
                    Some(v) => letter(v).to_string(),
                    None => " ".to_string(),
                })
                .collect();
            let label = format!("{}={row}", self.row_size);
            let _ = writeln!(
                out,
                "  {label:label_width$}  {}",
                cells.join(" ").trim_end()
            );
        }
        if !across.is_empty() {
            let listed: Vec<String> = self
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{i} {c}"))
                .collect();
            let _ = writeln!(out, "  columns: {}", listed.join("; "));
        }
        let mut legend: Vec<String> = failures
            .iter()
            .map(|(v, n)| format!("{} {} ({n})", letter(v), super::folder::one_line(v)))
            .collect();
        legend.push(". pass".into());
        if counts.contains_key("no_device") {
            legend.push("? no GPU".into());
        }
        if self.cells.iter().any(Option::is_none) {
            legend.push("blank: no run".into());
        }
        let _ = writeln!(out, "  {}", legend.join(", "));
        out
    }

    /// The grid as a PNG: light grey a pass, dark red a failure, white no run (or no GPU).
    pub fn png(&self) -> Result<Vec<u8>, png::EncodingError> {
        let shares = self
            .cells
            .iter()
            .map(|c| match c.as_deref() {
                Some("ok") => 0.0,
                Some("no_device") | None => f64::NAN,
                Some(_) => 1.0,
            })
            .collect();
        encode_png(&TileShares {
            tiles_m: self.rows.len(),
            tiles_n: self.columns.len(),
            shares,
        })
    }

    /// Writes the PNG into the results folder's `maps/` (made when missing, refused when it is
    /// not a folder of its own); its path.
    pub fn write_png(&self, results_dir: &Path) -> Option<PathBuf> {
        let dir = results_dir.join("maps");
        super::folder::real_dir(&dir).ok()?;
        let path = dir.join(format!("{}.png", self.stem));
        super::folder::replace(&path, &self.png().ok()?).ok()?;
        Some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(m: i64, n: i64, verdict: &str) -> Record {
        Record {
            sizes: [("M", m), ("N", n), ("K", 8)]
                .map(|(name, v)| (name.to_string(), v))
                .into_iter()
                .collect(),
            ..Record::example(&format!("s/default/M={m},N={n},K=8/ones"), verdict)
        }
    }

    #[test]
    fn a_failing_row_of_shapes_shows_as_a_row() {
        let mut latest = HashMap::new();
        let mut keys = Vec::new();
        for (m, n, v) in [
            (128, 64, "ok"),
            (128, 96, "ok"),
            (129, 64, "unwritten"),
            (129, 96, "unwritten"),
            (1, 64, "ok"),
        ] {
            let r = record(m, n, v);
            keys.push(r.key.clone());
            latest.insert(r.key.clone(), r);
        }
        let maps = maps(&keys, &latest);
        assert_eq!(maps.len(), 1);
        assert_eq!(
            maps[0].text(),
            "shape map s default ones: M down; across: 2 columns\n         0 1\n  M=1    .\n  M=128  . .\n  M=129  a a\n  columns: 0 N=64; 1 N=96\n  a unwritten (2), . pass, blank: no run\n"
        );
        assert!(maps[0].png().unwrap().starts_with(b"\x89PNG"));
    }
}
