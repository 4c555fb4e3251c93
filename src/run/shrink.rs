//! `repro shrink`: from a failing spec, smaller sizes that still fail the same way. One build;
//! each candidate is one run of the harness with `--size`. The smaller spec is written next to
//! the original (never over anything), with only its sizes and name changed.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::sweep::{check_dims, run_arguments, run_limit};
use super::{run_quiet, RunOutcome};
use crate::build::Variant;
use crate::cli::ShrinkArgs;
use crate::error::{exit, Error};
use crate::generate::command::prepare;
use crate::spec::ResolvedSpec;

/// The sizes a GEMM's extents are named by, in the order they are shrunk: M, N, K, then the
/// batch. Only extents written as a plain size name can be changed.
pub fn gemm_size_names(spec: &ResolvedSpec) -> Vec<(String, i64)> {
    let r = &spec.reference;
    let out = spec.tensor(r.out);
    let a = spec.tensor(r.a);
    let rank = out.shape_text.len();
    let mut names = Vec::new();
    let mut push = |text: &str, tile: i64| {
        if spec.sizes.contains_key(text) && !names.iter().any(|(n, _)| n == text) {
            names.push((text.to_string(), tile));
        }
    };
    if rank >= 2 {
        push(&out.shape_text[rank - 2], r.tile_m);
    }
    push(&out.shape_text[rank - 1], r.tile_n);
    push(
        &a.shape_text[a.shape_text.len() - 1],
        r.tile_k.unwrap_or(32),
    );
    if r.batched {
        push(&out.shape_text[0], 1);
    }
    names
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

/// What the spec's failure is: the first mode that fails (`--ones`, then random) and its class.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    ones: bool,
    class: String,
}

impl ShrinkArgs {
    pub fn exec(self) -> Result<u8, Error> {
        super::check_timeout(self.timeout)?;
        let prepared = prepare(&self.target, self.output.as_deref())?;
        let spec = &prepared.spec;
        let dims = gemm_size_names(spec);
        let names: Vec<String> = dims.iter().map(|(n, _)| n.clone()).collect();
        check_dims(spec, &names, "shrink")?;
        let binary = super::build_harness(
            &prepared,
            self.toolchain.nvcc.as_deref(),
            Variant::Production,
            " (one build for every candidate)",
        )?;
        let limit = run_limit(spec, self.timeout.unwrap_or(spec.check.timeout));
        // Counted in a Cell: the loop below reads the count while `run` holds the closure.
        let runs = std::cell::Cell::new(0usize);
        let run = |sizes: &IndexMap<String, i64>, ones: bool| -> Result<RunOutcome, Error> {
            runs.set(runs.get() + 1);
            let args = run_arguments(
                sizes.iter().map(|(n, v)| (n.as_str(), *v)),
                ones,
                self.timeout,
            );
            run_quiet(&binary, &args, limit)
        };

        let mut sizes: IndexMap<String, i64> =
            names.iter().map(|n| (n.clone(), spec.sizes[n])).collect();
        let ones = run(&sizes, true)?;
        if ones.code == exit::NO_DEVICE {
            println!(
                "no usable CUDA device: the harness is built; shrinking needs a GPU to run it"
            );
            return Ok(exit::NO_DEVICE);
        }
        let target = if ones.class != "ok" {
            Target {
                ones: true,
                class: ones.class,
            }
        } else {
            let random = run(&sizes, false)?;
            if random.class == "ok" {
                println!(
                    "shrink  {} passes with --ones and with random inputs: nothing to shrink",
                    spec.name()
                );
                return Ok(exit::PASSED);
            }
            Target {
                ones: false,
                class: random.class,
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
            target.class,
            sizes_text(&sizes)
        );

        // Greedy, smallest candidate first, until a pass over every size changes nothing. A
        // configuration tried once is not run again (a second pass revisits the same small
        // values of the sizes that did not change).
        let mut tried: std::collections::HashSet<Vec<i64>> = std::collections::HashSet::new();
        tried.insert(sizes.values().copied().collect());
        let mut changed = true;
        while changed && runs.get() < self.max_runs {
            changed = false;
            for (name, tile) in &dims {
                for value in candidates(sizes[name], *tile) {
                    if runs.get() >= self.max_runs {
                        break;
                    }
                    let mut trial = sizes.clone();
                    trial[name] = value;
                    if !tried.insert(trial.values().copied().collect()) {
                        continue;
                    }
                    let outcome = run(&trial, target.ones)?;
                    let same = outcome.class == target.class;
                    println!(
                        "  {:<28} {}",
                        sizes_text(&trial),
                        if same {
                            "same failure".to_string()
                        } else {
                            format!("{} (not the same)", outcome.class)
                        }
                    );
                    if same {
                        sizes = trial;
                        changed = true;
                        break;
                    }
                }
            }
        }
        let shrunk: Vec<String> = names
            .iter()
            .filter(|n| sizes[*n] != spec.sizes[*n])
            .map(|n| format!("{n} {} -> {}", spec.sizes[n], sizes[n]))
            .collect();
        if shrunk.is_empty() {
            println!(
                "shrink  no smaller size fails the same way ({} runs)",
                runs.get()
            );
            return Ok(exit::MISMATCH);
        }
        let path = write_shrunk(spec, &sizes)?;
        println!(
            "shrunk  {} in {} runs of one build; still {mode}, class {}",
            shrunk.join(", "),
            runs.get(),
            target.class
        );
        println!("wrote   {}", path.display());
        Ok(exit::MISMATCH)
    }
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
    let rewritten = crate::spec::yaml::rewrite_scalars(&text, &edits).map_err(|e| {
        Error::Usage(format!(
            "cannot write the shrunk spec from {}: {e}",
            spec.path.display()
        ))
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
    use super::candidates;

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
}
