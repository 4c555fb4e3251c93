//! The campaign file (docs/campaign.md): which specs, at which shapes, in which modes and build
//! variants. It is read by the spec's own YAML reader, so a campaign's mistakes are shown the way
//! a spec's are (file, line, column, a hint, "did you mean"), and expanded here into the runs and
//! the distinct builds they need.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::folder::one_line;
use super::shapes;
use super::CampaignError;
use crate::engine_error::EngineError;
use crate::generate::compiled_sizes::sizes_fixed_reason;
use crate::spec::model::Value;
use crate::spec::validate::MAX_SPEC_NAME;
use crate::spec::yaml::{self, SpanMap};
use crate::spec::{Diagnostic, ResolvedSpec, SpecErrors};
use repro_text::did_you_mean;

/// Most runs one campaign may hold: a bound on memory and on the results file, checked before
/// any list is expanded (`sizes:` multiplies its lists).
pub const MAX_RUNS: usize = 100_000;

/// Largest campaign file read; like a spec, it is a page of YAML.
const MAX_FILE_BYTES: u64 = 16 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    pub version: u32,
    pub name: String,
    /// The harness's watchdog, seconds per launch [default: each spec's `check.timeout`].
    #[serde(default)]
    pub timeout: Option<f64>,
    pub specs: Vec<SpecEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecEntry {
    /// The spec file, relative to the campaign file.
    pub spec: String,
    /// Lists of values per size name: every combination is a shape.
    #[serde(default)]
    pub sizes: IndexMap<String, Vec<i64>>,
    /// Shapes written out, each a mapping of size names to values.
    #[serde(default)]
    pub shapes: Vec<IndexMap<String, i64>>,
    /// A CSV file (a header row of size names) or JSON lines (an object per shape).
    #[serde(default)]
    pub shapes_file: Option<String>,
    #[serde(default = "default_modes")]
    pub modes: Vec<Mode>,
    #[serde(default)]
    pub variants: Vec<VariantEntry>,
}

/// A build variant: the spec with other production flags or template arguments.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantEntry {
    pub name: String,
    /// Replaces the spec's `build.flags` (and any `flags_from`).
    #[serde(default)]
    pub flags: Option<Vec<String>>,
    /// Appended to the spec's flags (or to `flags` when both are given).
    #[serde(default)]
    pub add_flags: Vec<String>,
    /// Replaces `kernel.template_args`.
    #[serde(default)]
    pub template_args: Option<Vec<Value>>,
}

/// How one run feeds and checks the kernel: the contract's modes, shared with `repro bisect`.
pub use crate::check_mode::Mode;

fn default_modes() -> Vec<Mode> {
    vec![Mode::Ones, Mode::Random]
}

/// The variant every spec runs as written.
pub const DEFAULT_VARIANT: &str = "default";

/// One distinct build: a spec as one variant makes it (and, for a shape-specialized kernel, at
/// one shape, since its sizes are compiled in).
#[derive(Debug)]
pub struct Instance {
    /// Its folder name under the results' `builds/`: spec, variant and compiled-in sizes.
    pub id: String,
    pub spec: ResolvedSpec,
}

/// One run of the campaign: a build, the sizes given to it with `--size`, a mode.
#[derive(Debug, Clone)]
pub struct Run {
    pub key: RunKey,
    pub instance: usize,
    /// `--size` values (none for an instance whose sizes are compiled in).
    pub size_arguments: Vec<(String, i64)>,
}

/// What identifies a run across a resume or a collection: spec name, variant, every size, mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunKey {
    pub spec: String,
    pub variant: String,
    pub sizes: IndexMap<String, i64>,
    pub mode: Mode,
}

impl RunKey {
    /// `tiled_gemm_bf16/default/M=128,N=256,K=64/ones`: the results' `key` field.
    pub fn text(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
        format!(
            "{}/{}/{}/{}",
            self.spec,
            self.variant,
            sizes.join(","),
            self.mode.name()
        )
    }
}

/// A campaign file, read and expanded.
#[derive(Debug)]
pub struct Campaign {
    pub name: String,
    pub file: PathBuf,
    pub timeout: Option<f64>,
    pub instances: Vec<Instance>,
    pub runs: Vec<Run>,
}

/// Reads, checks and expands the campaign file at `path`; loads every spec it names.
pub fn load(path: &Path) -> Result<Campaign, CampaignError> {
    let text = read_text(path)?;
    let (file, spans): (CampaignFile, SpanMap) = yaml::parse_document(&text)
        .map_err(|d| EngineError::Spec(SpecErrors::new(path, &text, d)))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut reader = Reader {
        spans: &spans,
        dir: &dir,
        diagnostics: Vec::new(),
    };
    let campaign = reader.expand(path, &file)?;
    if reader.diagnostics.is_empty() {
        Ok(campaign)
    } else {
        Err(EngineError::Spec(SpecErrors::new(path, &text, reader.diagnostics)).into())
    }
}

/// The text of a campaign file (or of a spec a variant rewrites): only a regular file, which a
/// fifo or a device is not (one would block the read, the other never end), and bounded.
fn read_text(path: &Path) -> Result<String, CampaignError> {
    use crate::file_kind::ReadError;
    let bytes = crate::file_kind::read_regular(path, MAX_FILE_BYTES).map_err(|e| {
        CampaignError::io("read", path)(match e {
            ReadError::Io(e) => e,
            ReadError::NotAFile(what) => std::io::Error::other(format!(
                "{what}, not a file; a campaign file is a short YAML file (is this the right path?)"
            )),
            ReadError::TooLarge { .. } => std::io::Error::other(format!(
                "larger than {} MiB; a campaign file is a short YAML file (is this the right path?)",
                MAX_FILE_BYTES >> 20
            )),
        })
    })?;
    String::from_utf8(bytes).map_err(|_| {
        CampaignError::io("read", path)(std::io::Error::other(
            "not UTF-8 text; save the campaign file as UTF-8",
        ))
    })
}

/// Expands the campaign, gathering every problem of the file before giving up.
struct Reader<'a> {
    spans: &'a SpanMap,
    dir: &'a Path,
    diagnostics: Vec<Diagnostic>,
}

impl Reader<'_> {
    fn error(&mut self, path: &str, message: impl Into<String>, help: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::new(self.spans.value(path), message).with_help(help));
    }

    fn expand(&mut self, path: &Path, file: &CampaignFile) -> Result<Campaign, CampaignError> {
        if file.version != 1 {
            self.error(
                "version",
                format!("campaign version {} is not known", file.version),
                "write `version: 1` (docs/campaign.md)",
            );
        }
        if !crate::spec::names::is_spec_name(&file.name) {
            self.error(
                "name",
                format!("`{}` is not a campaign name", one_line(&file.name)),
                "lowercase letters, digits and `_` (it names the results folder)",
            );
        } else if file.name.len() > MAX_SPEC_NAME {
            self.error(
                "name",
                format!(
                    "the campaign name is {} characters long; at most {MAX_SPEC_NAME}",
                    file.name.len()
                ),
                "it names the results folder (campaigns/<name>/), as a spec's name does",
            );
        }
        if let Some(t) = file
            .timeout
            .filter(|t| !crate::spec::validate::is_timeout(*t))
        {
            self.error(
                "timeout",
                format!(
                    "timeout {} is not a number of seconds above 0 and at most {}",
                    if t.abs() < 1e9 {
                        t.to_string()
                    } else {
                        format!("{t:e}")
                    },
                    crate::spec::validate::MAX_TIMEOUT_SECONDS
                ),
                "the watchdog's limit per launch, e.g. `timeout: 10`",
            );
        }
        if file.specs.is_empty() {
            self.error(
                "specs",
                "the campaign lists no specs",
                "add `specs: [{spec: my_kernel.yaml}]`",
            );
        }
        let mut campaign = Campaign {
            name: file.name.clone(),
            file: path.to_path_buf(),
            timeout: file.timeout,
            instances: Vec::new(),
            runs: Vec::new(),
        };
        let mut instance_ids: HashMap<String, usize> = HashMap::new();
        let mut spec_files: HashMap<String, PathBuf> = HashMap::new();
        // Each (spec, variant) name's definition: runs are keyed and built by these names.
        let mut variant_definitions: HashMap<(String, String), VariantEntry> = HashMap::new();
        let mut seen_keys: HashSet<String> = HashSet::new();
        for (index, entry) in file.specs.iter().enumerate() {
            let at = format!("specs[{index}]");
            let Some(expanded) = self.entry(&at, entry)? else {
                continue;
            };
            let base = &expanded.variants[0].1;
            let (name, spec_file) = (base.name().to_string(), base.path.clone());
            match spec_files.get(&name) {
                Some(other) if same_file(other, &spec_file) => {}
                Some(other) => {
                    let help = format!(
                        "results are keyed by spec name; give one of them another `name:` (the other is {})",
                        other.display()
                    );
                    self.error(
                        &format!("{at}.spec"),
                        format!("a second spec named `{name}`"),
                        help,
                    );
                    continue;
                }
                None => {
                    spec_files.insert(name.clone(), spec_file);
                }
            }
            let total = expanded.variants.len() as u128
                * expanded.shapes.len() as u128
                * entry.modes.len() as u128
                + campaign.runs.len() as u128;
            if total > MAX_RUNS as u128 {
                return Err(super::CampaignError::TooManyRuns {
                    runs: total,
                    limit: MAX_RUNS,
                });
            }
            let mut redefined = false;
            for (i, v) in entry.variants.iter().enumerate() {
                let known = variant_definitions
                    .entry((name.clone(), v.name.clone()))
                    .or_insert_with(|| v.clone());
                if known != v {
                    self.error(
                        &format!("{at}.variants[{i}]"),
                        format!(
                            "variant `{}` of spec `{name}` is defined differently in an earlier entry",
                            v.name
                        ),
                        "results and builds are keyed by the variant's name: give this one another name",
                    );
                    redefined = true;
                }
            }
            if redefined {
                continue;
            }
            for (variant, resolved) in expanded.variants {
                let fixed = sizes_fixed_reason(&resolved).is_some();
                for shape in &expanded.shapes {
                    let sizes = effective_sizes(&resolved, shape);
                    let (id, size_arguments) = if fixed {
                        let suffix: Vec<String> =
                            shape.iter().map(|(n, v)| format!("{n}{v}")).collect();
                        (
                            format!("{name}__{variant}__{}", suffix.join("_")),
                            Vec::new(),
                        )
                    } else {
                        (
                            format!("{name}__{variant}"),
                            shape.iter().map(|(n, v)| (n.clone(), *v)).collect(),
                        )
                    };
                    let instance = match instance_ids.get(&id) {
                        Some(&i) => i,
                        None => {
                            let spec = if fixed {
                                match self.with_sizes(&at, entry, &variant, shape)? {
                                    Some(spec) => spec,
                                    None => continue,
                                }
                            } else {
                                resolved.clone()
                            };
                            campaign.instances.push(Instance {
                                id: id.clone(),
                                spec,
                            });
                            instance_ids.insert(id, campaign.instances.len() - 1);
                            campaign.instances.len() - 1
                        }
                    };
                    for &mode in &entry.modes {
                        let key = RunKey {
                            spec: name.clone(),
                            variant: variant.clone(),
                            sizes: sizes.clone(),
                            mode,
                        };
                        if !seen_keys.insert(key.text()) {
                            continue;
                        }
                        campaign.runs.push(Run {
                            key,
                            instance,
                            size_arguments: size_arguments.clone(),
                        });
                    }
                }
            }
        }
        Ok(campaign)
    }

    /// One `specs:` entry: its spec as each variant makes it, and its shapes. None when the
    /// entry has problems (recorded as diagnostics).
    fn entry(&mut self, at: &str, entry: &SpecEntry) -> Result<Option<Expanded>, CampaignError> {
        let spec_path = self.dir.join(&entry.spec);
        if !spec_path.is_file() {
            self.error(
                &format!("{at}.spec"),
                format!("no spec file {}", spec_path.display()),
                "spec paths are relative to the campaign file",
            );
            return Ok(None);
        }
        // A spec's own errors name the spec's file and line: they are returned as they are.
        let base = crate::plan::load_spec(&spec_path, &crate::machine::Machine)?;
        let before = self.diagnostics.len();
        if entry.modes.is_empty() {
            self.error(
                &format!("{at}.modes"),
                "no modes",
                "one or more of ones, random, probe, sanitize",
            );
        }
        let mut names = HashSet::new();
        for (i, v) in entry.variants.iter().enumerate() {
            let place = format!("{at}.variants[{i}].name");
            if !crate::spec::names::is_spec_name(&v.name) || v.name == DEFAULT_VARIANT {
                self.error(
                    &place,
                    format!("`{}` is not a variant name", v.name),
                    "lowercase letters, digits and `_`, other than `default` (the spec as written)",
                );
            } else if !names.insert(v.name.as_str()) {
                self.error(
                    &place,
                    format!("variant `{}` is given twice", v.name),
                    "give each variant its own name",
                );
            }
        }
        let shapes = self.shapes(at, entry, &base)?;
        if self.diagnostics.len() > before {
            return Ok(None);
        }
        let mut variants = vec![(DEFAULT_VARIANT.to_string(), base)];
        for (i, v) in entry.variants.iter().enumerate() {
            let place = format!("{at}.variants[{i}]");
            match self.variant_spec(&place, &spec_path, v, &IndexMap::new())? {
                Some(spec) => variants.push((v.name.clone(), spec)),
                None => return Ok(None),
            }
        }
        Ok(Some(Expanded { variants, shapes }))
    }

    /// The shapes of an entry, in order, each once: `shapes_file` rows, then `shapes`, then every
    /// combination of `sizes`; one empty shape (the spec's own sizes) when none is given.
    fn shapes(
        &mut self,
        at: &str,
        entry: &SpecEntry,
        spec: &ResolvedSpec,
    ) -> Result<Vec<IndexMap<String, i64>>, CampaignError> {
        let declared: Vec<&str> = spec.sizes.keys().map(String::as_str).collect();
        let mut all: Vec<IndexMap<String, i64>> = Vec::new();
        if let Some(file) = &entry.shapes_file {
            let path = self.dir.join(file);
            match shapes::read(&path, &declared) {
                Ok(rows) => all.extend(rows),
                Err(shapes::ReadFailure::Unreadable { why, help }) => {
                    self.error(&format!("{at}.shapes_file"), why, help);
                }
                Err(shapes::ReadFailure::Content(error)) => return Err(error),
            }
        }
        for (i, shape) in entry.shapes.iter().enumerate() {
            for (name, value) in shape {
                self.check_size(&format!("{at}.shapes[{i}].{name}"), name, *value, &declared);
            }
            all.push(shape.clone());
        }
        if !entry.sizes.is_empty() {
            let mut combinations: u128 = 1;
            for (name, values) in &entry.sizes {
                let place = format!("{at}.sizes.{name}");
                if values.is_empty() {
                    self.error(
                        &place,
                        format!("no values for `{name}`"),
                        "list one or more",
                    );
                }
                if !declared.contains(&name.as_str()) {
                    // Said once, at the name, rather than once per value.
                    self.check_size(&place, name, 1, &declared);
                } else {
                    for (j, value) in values.iter().enumerate() {
                        self.check_size(&format!("{place}[{j}]"), name, *value, &declared);
                    }
                }
                combinations = combinations.saturating_mul(values.len().max(1) as u128);
            }
            if combinations > MAX_RUNS as u128 {
                return Err(super::CampaignError::TooManyRuns {
                    runs: combinations,
                    limit: MAX_RUNS,
                });
            }
            let mut product = vec![IndexMap::new()];
            for (name, values) in &entry.sizes {
                product = product
                    .into_iter()
                    .flat_map(|shape: IndexMap<String, i64>| {
                        values.iter().map(move |v| {
                            let mut s = shape.clone();
                            s.insert(name.clone(), *v);
                            s
                        })
                    })
                    .collect();
            }
            all.extend(product);
        }
        if all.is_empty() {
            all.push(IndexMap::new());
        }
        // In the spec's order of sizes, so that equal shapes written differently are one.
        let mut seen = HashSet::new();
        let mut shapes = Vec::new();
        for shape in all {
            let ordered: IndexMap<String, i64> = spec
                .sizes
                .keys()
                .filter_map(|n| shape.get(n).map(|v| (n.clone(), *v)))
                .collect();
            let text = format!("{ordered:?}");
            if seen.insert(text) {
                shapes.push(ordered);
            }
        }
        Ok(shapes)
    }

    fn check_size(&mut self, place: &str, name: &str, value: i64, declared: &[&str]) {
        if !declared.contains(&name) {
            let help = match did_you_mean(name, declared.iter().copied()) {
                Some(best) => format!("did you mean `{best}`?"),
                None => format!("the spec's sizes are {}", declared.join(", ")),
            };
            // At the name, not its value: the name is what is wrong.
            self.diagnostics.push(
                Diagnostic::new(
                    self.spans.key(place),
                    format!("`{name}` is not a size of the spec"),
                )
                .with_help(help),
            );
        } else if value < 1 {
            self.error(
                place,
                format!("{name} = {value}: a size is at least 1"),
                "give a positive extent",
            );
        } else if value > i64::from(i32::MAX) {
            self.error(
                place,
                format!(
                    "{name} = {value} does not fit the `int` the kernel receives (at most {})",
                    i32::MAX
                ),
                "sizes are passed to kernels as int; give a smaller extent",
            );
        }
    }

    /// The spec with a variant's changes and `sizes` written in, read and checked again as a
    /// spec. None (with a diagnostic at the variant) when the result is not a valid spec.
    fn variant_spec(
        &mut self,
        place: &str,
        spec_path: &Path,
        variant: &VariantEntry,
        sizes: &IndexMap<String, i64>,
    ) -> Result<Option<ResolvedSpec>, CampaignError> {
        let text = read_text(spec_path)?;
        let (mut model, _) = yaml::parse_spec(&text)
            .map_err(|d| EngineError::Spec(SpecErrors::new(spec_path, &text, d)))?;
        if let Some(flags) = &variant.flags {
            model.build.flags = flags.clone();
            model.build.flags_from = None;
        }
        if !variant.add_flags.is_empty() && model.build.flags_from.is_some() {
            // The log's flags spelled out, so that the variant can add to them.
            let resolved = crate::spec::load(spec_path, &crate::machine::Machine)?;
            model.build.flags = resolved.build.flags;
            model.build.arch = Some(resolved.build.arch);
            model.build.flags_from = None;
        }
        model.build.flags.extend(variant.add_flags.iter().cloned());
        // A variant's template arguments are the first launch's (the only one unless the spec
        // gives `launches:`).
        if let (Some(args), Some(kernel)) = (&variant.template_args, model.first_launch_mut()) {
            kernel.template_args = args.clone();
        }
        for (name, value) in sizes {
            model.sizes.insert(name.clone(), *value);
        }
        let derived = yaml::to_yaml(&model);
        let dir = spec_path.parent().unwrap_or(Path::new("."));
        match crate::spec::load_text(spec_path, &derived, dir, &crate::machine::Machine) {
            Ok(spec) => Ok(Some(spec)),
            Err(crate::spec::LoadError::Spec(errors)) => {
                let first = errors
                    .diagnostics
                    .first()
                    .map(|d| d.message.clone())
                    .unwrap_or_default();
                self.error(
                    place,
                    format!(
                        "variant `{}` does not make a valid spec of {}: {first}",
                        variant.name,
                        spec_path.display()
                    ),
                    "check the variant's flags and template_args against the spec (docs/spec.md)",
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A shape-specialized instance: the variant's spec with the shape's sizes compiled in.
    fn with_sizes(
        &mut self,
        at: &str,
        entry: &SpecEntry,
        variant: &str,
        shape: &IndexMap<String, i64>,
    ) -> Result<Option<ResolvedSpec>, CampaignError> {
        let spec_path = self.dir.join(&entry.spec);
        let unchanged = VariantEntry {
            name: DEFAULT_VARIANT.into(),
            flags: None,
            add_flags: Vec::new(),
            template_args: None,
        };
        let (place, definition) = match entry.variants.iter().position(|v| v.name == variant) {
            Some(i) => (format!("{at}.variants[{i}]"), &entry.variants[i]),
            None => (format!("{at}.spec"), &unchanged),
        };
        self.variant_spec(&place, &spec_path, definition, shape)
    }
}

/// An entry's specs (the default first) and shapes.
struct Expanded {
    variants: Vec<(String, ResolvedSpec)>,
    shapes: Vec<IndexMap<String, i64>>,
}

/// The spec's sizes with a shape's values in place.
fn effective_sizes(spec: &ResolvedSpec, shape: &IndexMap<String, i64>) -> IndexMap<String, i64> {
    spec.sizes
        .iter()
        .map(|(n, v)| (n.clone(), shape.get(n).copied().unwrap_or(*v)))
        .collect()
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
