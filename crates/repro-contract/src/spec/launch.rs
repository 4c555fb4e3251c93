//! `kernel:` for kernels built from source: `kind: global` and `kind: device` (a name that is a
//! C++ function, arguments resolved to tensors, sizes, TMA maps or C++ expressions, every output
//! reachable from the launch, grid, block, cluster and shared memory within what CUDA allows) and
//! `kind: cutlass3` (a `GemmUniversal` type whose launch CUTLASS chooses); which launches a
//! spec has (`kernel:` or `launches:`) and what holds across a sequence's. `kind: replay` (alone
//! or in a sequence) is in replay.rs.

use indexmap::IndexMap;

use super::environment::Cutlass;
use super::expr;
use super::model::{GroupedLayout, KernelKind, KernelSpec, ScaleFormat, Value};
use super::resolved::{KernelArg, KernelLaunch, LaunchKind, TensorSpecResolved, TmaDescriptor};
use super::validate::Validator;
use repro_text::did_you_mean;

/// Most launches of one operator (`launches:`): each is a function of harness.cu, so the bound
/// keeps the generated code's size bounded whatever the spec holds.
pub const MAX_LAUNCHES: usize = 64;

/// Largest dynamic shared memory a block may ask for on sm_90 (227 KiB).
const SM90_MAX_DYNAMIC_SMEM: i64 = 227 * 1024;

impl Validator<'_> {
    /// Cluster rules known at spec time: at most 8 blocks (portable) or 16 (non-portable, which
    /// the harness opts into), and a grid divisible by the cluster. Grid values that are C++
    /// expressions repro cannot evaluate are checked by the harness at launch.
    fn cluster(
        &mut self,
        path: &str,
        cluster: &[String; 3],
        grid: Option<&[String; 3]>,
        sizes: &IndexMap<String, i64>,
    ) {
        let numbers: Option<Vec<i64>> = cluster
            .iter()
            .map(|c| expr::evaluate(c, sizes).ok())
            .collect();
        let Some(numbers) = numbers else { return };
        // Checked: a fuzzed or mistyped cluster can be large enough to overflow the product.
        let blocks = numbers
            .iter()
            .try_fold(1i64, |n, &c| n.checked_mul(c))
            .unwrap_or(i64::MAX);
        if blocks > 16 {
            self.error(
                &format!("{path}.cluster"),
                format!("a cluster of {} = {blocks} blocks; sm_90 allows at most 8 (portable) or 16 (non-portable)", numbers.iter().map(i64::to_string).collect::<Vec<_>>().join(" x ")),
            );
            return;
        }
        let Some(grid) = grid else { return };
        for (axis, ((g, &c), name)) in grid.iter().zip(&numbers).zip(["x", "y", "z"]).enumerate() {
            if let Ok(g) = expr::evaluate(g, sizes) {
                if g % c != 0 {
                    self.error(
                        &format!("{path}.cluster[{axis}]"),
                        format!("grid.{name} = {g} is not a multiple of cluster.{name} = {c}; a grid must be made of whole clusters"),
                    )
                    .help = Some(format!("round the grid up (e.g. {} blocks) and let the kernel skip the extra ones, as production code must", (g + c - 1) / c * c));
                }
            }
        }
    }

    fn launch_triple(
        &mut self,
        path: &str,
        values: Option<&Vec<Value>>,
        required: bool,
    ) -> Option<[String; 3]> {
        let Some(values) = values else {
            if required {
                let (owner, field) = path.rsplit_once('.').unwrap_or(("kernel", path));
                self.error(owner, format!("`{owner}.{field}` is missing"))
                    .help =
                    Some("write it as [x, y, z]; entries are integers or C++ expressions".into());
            }
            return None;
        };
        if values.is_empty() || values.len() > 3 {
            self.error(
                path,
                format!("expected 1 to 3 entries, found {}", values.len()),
            );
            return None;
        }
        let mut out = [String::from("1"), String::from("1"), String::from("1")];
        for (i, v) in values.iter().enumerate() {
            match v {
                Value::Int(n) if *n <= 0 => {
                    self.error(
                        &format!("{path}[{i}]"),
                        format!("{n} is not a positive extent"),
                    );
                    return None;
                }
                Value::Float(x) => {
                    self.error(&format!("{path}[{i}]"), format!("{x} is not an integer"));
                    return None;
                }
                _ => out[i] = v.to_cpp(),
            }
        }
        Some(out)
    }

    /// Every launch: `kernel:` alone, or each entry of `launches:` in order. Either is given,
    /// never both; a sequence's entries are built from source (`global` or `device`) or
    /// replayed (`replay`), never CUTLASS's own (`cutlass3`).
    pub(super) fn launches(
        &mut self,
        sizes: &IndexMap<String, i64>,
        tensors: &[TensorSpecResolved],
        tma: &[TmaDescriptor],
    ) -> Option<Vec<KernelLaunch>> {
        let spec = self.spec;
        match (&spec.kernel, spec.launches.is_empty()) {
            (Some(_), false) => {
                self.key_error(
                    "launches",
                    "`kernel:` and `launches:` are both given; a spec has one or the other",
                )
                .help = Some(
                    "keep `kernel:` for one launch, or move it into `launches:` as its first entry"
                        .into(),
                );
                return None;
            }
            (None, true) => {
                self.error("", "`kernel:` is missing").help = Some(
                    "say what is launched: `kernel:` with its name, args, grid and block (or \
                     `launches:`, a list of them, for an operator of several kernels)"
                        .into(),
                );
                return None;
            }
            (Some(kernel), true) if kernel.kind == KernelKind::Cutlass3 => {
                return self.cutlass3_kernel().map(|k| vec![k]);
            }
            (Some(kernel), true) if kernel.kind == KernelKind::Replay => {
                return self
                    .replay_launch(kernel, "kernel", tensors)
                    .map(|k| vec![k]);
            }
            _ => {}
        }
        if spec.launches.len() > MAX_LAUNCHES {
            self.key_error(
                "launches",
                format!(
                    "{} launches; an operator has at most {MAX_LAUNCHES}",
                    spec.launches.len()
                ),
            )
            .help = Some("each launch is a function of harness.cu: reproduce the operator's launches around the defect, or split it into specs".into());
            return None;
        }
        let entries = spec.launch_entries();
        let mut launches = Vec::new();
        for (path, entry) in &entries {
            match entry.kind {
                KernelKind::Cutlass3 => {
                    self.error(
                        &format!("{path}.kind"),
                        "`kind: cutlass3` is not supported in `launches:` yet; a sequence's launches are `kind: global`, `kind: device` or `kind: replay`",
                    )
                    .help = Some("run the `cutlass3` kernel as a spec of its own (`kernel:`), or launch it from a `global` entry's `setup`".into());
                }
                KernelKind::Replay => launches.push(self.replay_launch(entry, path, tensors)),
                KernelKind::Global | KernelKind::Device => {
                    launches.push(self.source_launch(entry, path, sizes, tensors, tma))
                }
            }
        }
        // A replayed launch's tensor maps are its relocations; `tma:` is for launches built from
        // source, and a sequence of replayed launches alone has none to encode it.
        if !spec.tma.is_empty() && entries.iter().all(|(_, k)| k.kind == KernelKind::Replay) {
            self.key_error("tma", "`tma:` does not apply to a sequence of `kind: replay` launches alone").help = Some(
                "a replayed launch's tensor maps are `relocate:` entries with `tensor_map:`, encoded as production encoded them; `tma:` is for launches built from source".into(),
            );
        }
        self.outputs_reached(&entries);
        self.unused_state(&entries, tensors);
        launches.into_iter().collect()
    }

    /// A `tma:` descriptor or an intermediate that no launch is given (in its args or setup) is
    /// most likely a forgotten argument: a warning, since the harness still encodes the one and
    /// keeps the other.
    fn unused_state(&mut self, entries: &[(String, &KernelSpec)], tensors: &[TensorSpecResolved]) {
        let names: Vec<String> = entries.iter().flat_map(|(_, k)| launch_names(k)).collect();
        let given = |name: &String| names.contains(name);
        let place = match entries {
            [(path, _)] => format!("neither in {path}.args nor used by {path}.setup"),
            _ => "in no launch's args or setup".to_string(),
        };
        for name in self.spec.tma.keys() {
            if !given(name) {
                self.warnings.push(format!(
                    "tma.{name} is {place}; the harness encodes and prints it anyway"
                ));
            }
        }
        for t in tensors.iter().filter(|t| t.intermediate.is_some()) {
            if !given(&t.name) {
                self.warnings.push(format!(
                    "tensor `{}` is an intermediate {place}; the harness makes it all the same",
                    t.name
                ));
            }
        }
    }

    /// Every output must be reachable from some launch: one the kernels cannot reach is never
    /// written, and every check of it would fail for a reason that is not the kernel's. It is
    /// reached when passed itself, named in an argument expression or in a `setup` (which may
    /// wrap it in a library's descriptor), or through a `tma:` entry over it that is passed or
    /// named there (a kernel that writes D only with TMA stores takes `map_d`, not D), or
    /// relocated into a replayed launch's parameter bytes.
    fn outputs_reached(&mut self, entries: &[(String, &KernelSpec)]) {
        let names: Vec<String> = entries.iter().flat_map(|(_, k)| launch_names(k)).collect();
        let reaches = |name: &String| names.contains(name);
        // The help names the first launch built from source (a replayed one has no args).
        let first = entries
            .iter()
            .find(|(_, k)| k.kind != KernelKind::Replay)
            .map(|(path, _)| path.as_str());
        let replayed = entries.iter().any(|(_, k)| k.kind == KernelKind::Replay);
        let place = if entries.len() > 1 {
            "any of the launches"
        } else {
            "the kernel"
        };
        let outputs: Vec<String> = self
            .spec
            .tensors
            .iter()
            .filter(|(_, t)| t.output)
            .map(|(name, _)| name.clone())
            .collect();
        for name in outputs {
            let through_tma = self
                .spec
                .tma
                .iter()
                .any(|(map, entry)| entry.tensor == name && reaches(map));
            if reaches(&name) || through_tma {
                continue;
            }
            let maps: Vec<&str> = self
                .spec
                .tma
                .iter()
                .filter(|(_, entry)| entry.tensor == name)
                .map(|(map, _)| map.as_str())
                .collect();
            let relocate =
                "give a replayed launch a `relocate:` entry at the bytes that point at it";
            let help = match (first, maps.as_slice()) {
                (None, _) => format!("{relocate}, or drop `output: true`"),
                (Some(first), []) => format!(
                    "add it (or a `tma:` entry over it) to `{first}.args`, or drop `output: true`"
                ),
                (Some(first), maps) => format!(
                    "add it or its TMA map (`{}`) to `{first}.args` (or name one of them in \
                     `{first}.setup`), or drop `output: true`",
                    maps.join("`, `")
                ),
            };
            let help = match (first, replayed) {
                (Some(_), true) => format!("{help}; or {relocate}"),
                _ => help,
            };
            self.key_error(
                &format!("tensors.{name}"),
                format!("output `{name}` is never passed to {place}"),
            )
            .help = Some(help);
        }
    }

    /// One launch built from source (`kind: global` or `kind: device`), its errors under `path`
    /// (`kernel` or `launches[i]`).
    fn source_launch(
        &mut self,
        k: &KernelSpec,
        path: &str,
        sizes: &IndexMap<String, i64>,
        tensors: &[TensorSpecResolved],
        tma: &[TmaDescriptor],
    ) -> Option<KernelLaunch> {
        let kind = match k.kind {
            KernelKind::Device => LaunchKind::Device,
            _ => LaunchKind::Global,
        };
        let Some(name) = k.name.clone() else {
            self.error(path, format!("`{path}.name` is missing")).help = Some(match kind {
                LaunchKind::Device => {
                    "name the __device__ function (the task body), e.g. `name: gemm_task`".into()
                }
                _ => "name the __global__ function, e.g. `name: tiled_gemm`".into(),
            });
            return None;
        };
        let qualified_ok = name
            .split("::")
            .all(|part| part.is_empty() || super::names::is_cpp_identifier(part));
        if !qualified_ok {
            self.error(
                &format!("{path}.name"),
                format!("`{name}` is not a (qualified) C++ function name"),
            )
            .help = Some("template arguments go in `template_args`".into());
        }
        let mut args = Vec::new();
        let declared: Vec<&str> = tensors
            .iter()
            .map(|t| t.name.as_str())
            .chain(sizes.keys().map(String::as_str))
            .chain(tma.iter().map(|d| d.name.as_str()))
            .collect();
        let setup_names = k
            .setup
            .as_deref()
            .map(expr::identifiers)
            .unwrap_or_default();
        for (i, a) in k.args.iter().enumerate() {
            let arg_path = format!("{path}.args[{i}]");
            let arg = match a {
                Value::Text(t) if tensors.iter().any(|x| &x.name == t) => {
                    KernelArg::Tensor(tensors.iter().position(|x| &x.name == t).expect("checked"))
                }
                Value::Text(t) if sizes.contains_key(t) => KernelArg::Size(t.clone()),
                Value::Text(t) if tma.iter().any(|d| &d.name == t) => {
                    KernelArg::Tma(tma.iter().position(|d| &d.name == t).expect("checked"))
                }
                Value::Text(t) => {
                    // A bare identifier one typo away from a tensor or size is almost surely a typo,
                    // not a C++ constant: say so rather than let nvcc report it in harness.cu.
                    // Names that the setup mentions (a descriptor it builds) are meant.
                    if super::names::is_cpp_identifier(t) && !setup_names.contains(t) {
                        if let Some(best) = did_you_mean(t, declared.iter().copied()) {
                            self.error(&arg_path, format!("`{t}` is neither a tensor nor a size"))
                                .help = Some(format!("did you mean `{best}`? (a C++ expression that is meant as such can be written in parentheses: `({t})`)"));
                            continue;
                        }
                    }
                    KernelArg::Expr(t.clone())
                }
                other => KernelArg::Expr(other.to_cpp()),
            };
            args.push(arg);
        }
        let grid = self.launch_triple(&format!("{path}.grid"), k.grid.as_ref(), true);
        let block = self.launch_triple(&format!("{path}.block"), k.block.as_ref(), true);
        let cluster = self.launch_triple(&format!("{path}.cluster"), k.cluster.as_ref(), false);
        if let Some(block) = &block {
            let threads: Option<i64> = block.iter().map(|b| b.parse::<i64>().ok()).product();
            if let Some(threads) = threads.filter(|t| *t > 1024) {
                self.error(
                    &format!("{path}.block"),
                    format!("{threads} threads per block; CUDA allows at most 1024"),
                );
            }
        }
        let smem = match &k.smem {
            None => "0".to_string(),
            Some(Value::Int(n)) if *n < 0 => {
                self.error(
                    &format!("{path}.smem"),
                    format!("{n} bytes of shared memory?"),
                );
                return None;
            }
            Some(Value::Int(n)) if *n > SM90_MAX_DYNAMIC_SMEM => {
                // Not an error: asking for too much is a legitimate thing to reproduce (the launch
                // fails, exit 4). But it is worth saying now.
                self.warnings.push(format!(
                    "{path}.smem = {n} B is more than the {SM90_MAX_DYNAMIC_SMEM} B of dynamic shared memory an sm_90 block can have; the launch will fail"
                ));
                n.to_string()
            }
            Some(Value::Float(x)) => {
                self.error(&format!("{path}.smem"), format!("{x} is not a byte count"));
                return None;
            }
            Some(v) => v.to_cpp(),
        };
        if let Some(cluster) = &cluster {
            self.cluster(path, cluster, grid.as_ref(), sizes);
        }
        Some(KernelLaunch {
            kind,
            name,
            template_args: k.template_args.iter().map(Value::to_cpp).collect(),
            args,
            setup: k.setup.clone(),
            grid: grid?,
            block: block?,
            cluster,
            smem,
        })
    }

    /// `kind: cutlass3`: the kernel is a `GemmUniversal` type; CUTLASS chooses the launch.
    fn cutlass3_kernel(&mut self) -> Option<KernelLaunch> {
        let spec = self.spec;
        let Some(k) = &spec.kernel else { return None };
        let launch_fields = [
            ("name", k.name.is_some()),
            ("template_args", !k.template_args.is_empty()),
            ("args", !k.args.is_empty()),
            ("grid", k.grid.is_some()),
            ("block", k.block.is_some()),
            ("cluster", k.cluster.is_some()),
            ("smem", k.smem.is_some()),
            ("setup", k.setup.is_some()),
        ];
        for (field, given) in launch_fields {
            if given {
                self.key_error(
                    &format!("kernel.{field}"),
                    format!("`kernel.{field}` does not apply to `kind: cutlass3`"),
                )
                .help = Some("a CUTLASS kernel's launch (grid, block, cluster, smem, arguments) comes from its type and the tensors; name the type in `gemm:`".into());
            }
        }
        let Some(gemm) = k.gemm.clone() else {
            self.error("kernel", "`kind: cutlass3` needs `gemm:`").help = Some(
                "name the cutlass::gemm::kernel::GemmUniversal<...> alias from the prelude, e.g. `gemm: GemmKernel`".into(),
            );
            return None;
        };
        if matches!(
            self.spec.reference.op.as_str(),
            "custom" | "file" | "attention" | "attention_backward"
        ) {
            self.error(
                "reference.op",
                format!("`kind: cutlass3` runs CUTLASS GEMMs; `op: {}` is for kernels that are not GEMMs", self.spec.reference.op),
            )
            .help = Some("give the GEMM's reference: `op: gemm` (or `grouped_gemm`) with `a`, `b` and `out`".into());
        }
        if self.spec.reference.bias.is_some() {
            self.key_error("reference.bias", "a bias is not supported with `kind: cutlass3` yet")
                .help = Some("the harness drives the default epilogue (alpha, beta, C); a bias needs the kernel's own fusion arguments".into());
        }
        // Block scales drive CUTLASS's sm90 blockwise-scaled mainloop (ptr_SFA/layout_SFA and
        // ptr_SFB/layout_SFB): both operands scaled, by f32 (the accumulator type) scales; the
        // harness checks the blocks against the kernel's granularity. Grouped GEMMs drive a
        // grouped (ptr-array) kernel, one problem per group of the masked layout; with scales, the
        // ptr-array blockwise mainloop, group g's scales SA[g] and SB[g] (the harness checks their
        // strides against the layout CUTLASS derives for each group).
        let r = &self.spec.reference;
        let scales = [("scale_a", &r.scale_a), ("scale_b", &r.scale_b)];
        for (field, scale) in scales {
            if scale.as_ref().map(|s| s.format) == Some(ScaleFormat::Ue8m0) {
                self.key_error(
                    &format!("reference.{field}.format"),
                    "ue8m0 scales are not supported with `kind: cutlass3`: CUTLASS's sm90 blockwise-scaled mainloop reads f32 scales (ElementBlockScale, the accumulator type)",
                )
                .help = Some("give the scales as f32 tensors (`format: f32`, the default), as the CUTLASS kernel takes them".into());
            }
        }
        if let [(given, Some(_)), (missing, None)] | [(missing, None), (given, Some(_))] = scales {
            self.key_error(
                &format!("reference.{given}"),
                format!("`kind: cutlass3` with `{given}` needs `{missing}` too: CUTLASS's sm90 blockwise-scaled mainloop scales both operands"),
            )
            .help = Some(format!("give `{missing}` with the kernel's scale granularity too (its blocks; scales of 1 where the production GEMM has none)"));
        }
        if r.op == "grouped_gemm" {
            // The harness builds a grouped kernel's A, B and D pointer arrays, and the scales'
            // (SFA, SFB) of a blockwise-scaled one: C's per-group pointers are not passed yet.
            if r.c.is_some() {
                self.key_error(
                    "reference.c",
                    "`kind: cutlass3` runs `op: grouped_gemm` without `c` (the harness passes no per-group pointer arrays for it yet)",
                )
                .help = Some("write the launch as `kind: global` with kernel.setup building the CUTLASS arguments".into());
            }
            if let Some(layout) = r.layout {
                if layout != GroupedLayout::Masked {
                    self.key_error(
                        "reference.layout",
                        format!(
                            "`kind: cutlass3` runs `op: grouped_gemm` with `layout: masked` only, not `{}`",
                            layout.name()
                        ),
                    )
                    .help = Some("a masked layout maps each group to one problem of a CUTLASS grouped (ptr-array) GEMM; write other layouts' launches as `kind: global` with kernel.setup building the CUTLASS arguments".into());
                }
            }
        }
        if self.environment.cutlass == Cutlass::Missing {
            self.error("kernel.kind", "`kind: cutlass3` needs the CUTLASS headers, and none were found")
                .help = Some("run scripts/setup-toolchain.sh (the nvidia-cutlass wheel), or set $CUTLASS_DIR to a CUTLASS checkout".into());
        }
        Some(KernelLaunch {
            kind: LaunchKind::Cutlass3 { gemm: gemm.clone() },
            name: gemm,
            template_args: Vec::new(),
            args: Vec::new(),
            setup: None,
            grid: Default::default(),
            block: Default::default(),
            cluster: None,
            smem: String::new(),
        })
    }
}

/// The names a launch mentions: its arguments' identifiers and its setup's, and a replayed
/// launch's relocated tensors (what its parameter bytes point into).
fn launch_names(k: &KernelSpec) -> Vec<String> {
    let relocated = k
        .relocate
        .iter()
        .filter(|_| k.kind == KernelKind::Replay)
        .map(|r| r.tensor.clone());
    k.args
        .iter()
        .flat_map(|a| match a {
            Value::Text(t) => expr::identifiers(t),
            _ => Vec::new(),
        })
        .chain(
            k.setup
                .as_deref()
                .map(expr::identifiers)
                .unwrap_or_default(),
        )
        .chain(relocated)
        .collect()
}
