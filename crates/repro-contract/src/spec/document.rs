//! The resolved spec written back as a document: what an artifact's `spec.yaml` holds. Every
//! value the harness reads at run time is spelled out (each input's init with the `inputs:`
//! default applied, the reference's scalars and tile, the checks' repeat and timeout), and the
//! production flags a `flags_from` log gave are written out, so that the artifact builds and
//! runs without the log. Paths are the artifact's to write, relative to itself: it takes
//! `source.include_dirs` and the input files from the resolved spec.

use super::model::{BuildSpec, FileInit, Generator, GroupsInit, InitPattern, Spec, ValuesInit};
use super::resolved::{InitSource, Reference, ResolvedSpec};

/// `written` (the spec as parsed, defaults filled by serde) with `resolved`'s values spelled out.
pub fn resolved_document(written: &Spec, resolved: &ResolvedSpec) -> Spec {
    let mut s = written.clone();
    s.build = BuildSpec {
        arch: Some(resolved.build.arch.clone()),
        std: Some(resolved.build.std.clone()),
        flags: resolved.build.flags.clone(),
        flags_from: None,
    };
    for (t, tensor) in s.tensors.values_mut().zip(&resolved.tensors) {
        if t.output {
            continue;
        }
        let init = &tensor.init;
        (t.range, t.mean, t.std, t.seed) = (None, None, None, None);
        match &init.source {
            InitSource::File(path) => {
                t.init = Some(InitPattern::File(FileInit {
                    file: path.display().to_string(),
                }));
            }
            InitSource::Values(values) => {
                t.init = Some(InitPattern::Values(ValuesInit {
                    values: values.clone(),
                }));
            }
            InitSource::Groups { rows, align } => {
                t.init = Some(InitPattern::Groups(GroupsInit {
                    groups: rows.clone(),
                    align: *align,
                }));
            }
            InitSource::Generator(g) => {
                t.init = Some(InitPattern::Generator(*g));
                match g {
                    Generator::Uniform | Generator::IntUniform => {
                        t.range = Some([init.p0, init.p1]);
                        t.seed = Some(init.seed);
                    }
                    Generator::Normal => {
                        (t.mean, t.std, t.seed) = (Some(init.p0), Some(init.p1), Some(init.seed));
                    }
                    _ => {}
                }
            }
        }
    }
    match &resolved.reference {
        Reference::Gemm(r) => {
            s.reference.alpha = Some(r.alpha);
            s.reference.beta = r.c.map(|_| r.beta);
            s.reference.tile = Some(match r.tile_k {
                Some(k) => vec![r.tile_m, r.tile_n, k],
                None => vec![r.tile_m, r.tile_n],
            });
        }
        // Absolute here; the artifact writes them relative to itself (like input files).
        Reference::Custom(c) => s.reference.source = Some(c.source.display().to_string()),
        Reference::File(f) => {
            s.reference.expected = Some(
                f.expected
                    .iter()
                    .map(|(i, path)| {
                        (
                            resolved.tensors[*i].name.clone(),
                            path.display().to_string(),
                        )
                    })
                    .collect(),
            )
        }
        Reference::Attention(_) => {}
    }
    s.check.repeat = Some(resolved.check.repeat);
    s.check.timeout = Some(resolved.check.timeout);
    s
}
