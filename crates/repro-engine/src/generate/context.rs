//! What the templates see: the resolved spec turned into ready-to-print C++ and shell fragments.
//! Templates only place these values; every decision is made here, in Rust, where it is tested.

use std::path::Path;

use serde::Serialize;

use super::command::{ArgGroup, BuildCommand, RUNTIME_FLAGS};
use super::compiled_sizes::{compiled_size_uses, launch_paths, sizes_fixed_reason};
use crate::engine_error::EngineError as Error;
use crate::spec::model::{GroupedLayout, Lifetime};
use crate::spec::{KernelArg, KernelLaunch, LaunchKind, Reference, ResolvedSpec, TmaDescriptor};
use repro_text::paths::relative_to;
use repro_text::quote::{
    cmake_cache_path, cmake_include_dir, cmake_quote, cmake_shell_option, comment_text, shell_quote,
};

#[derive(Debug, Serialize)]
pub struct HarnessContext {
    pub name: String,
    pub about: String,
    pub version: &'static str,
    /// The spec file relative to the artifact folder.
    pub spec_display: String,
    pub includes: Vec<String>,
    pub prelude: Option<String>,
    /// `kind: cutlass3`: the GEMM CUTLASS runs, compiled in (its operands and alpha/beta are the
    /// kernel's arguments).
    pub cutlass: Option<CutlassContext>,
    pub sizes: Vec<SizeContext>,
    /// Sizes are runtime values (`--size` works) unless something needs them at compile time.
    pub sizes_runtime: bool,
    /// Why they are fixed, as a C++ string literal's content; empty when runtime.
    pub sizes_fixed_reason: String,
    /// Each place that compiles the sizes in, for a comment: "kernel.setup, inside <...>: `N`".
    pub sizes_fixed_uses: Vec<String>,
    pub tensors: Vec<TensorContext>,
    /// The first launch (the only one unless the spec gives `launches:`).
    pub kernel: KernelContext,
    /// Every launch harness.cu writes a function for, in order: the `kernel:` alone, or each of
    /// `launches:` (built from source or replayed); empty for `kind: cutlass3`, whose launch is
    /// CUTLASS's.
    pub launches: Vec<KernelContext>,
    /// Some launch is `kind: replay` (harness.cu includes repro/replay.h).
    pub has_replay: bool,
    /// `launches:`: harness.cu writes one function a launch and hands the runtime their table.
    pub sequence: bool,
    /// Some tensor is `intermediate: true`.
    pub has_intermediates: bool,
    pub tma: Vec<TmaContext>,
    /// `trace:` stages: index, name (a C++ string literal's content), role enumerator.
    pub trace: Vec<TraceContext>,
    pub reference: ReferenceContext,
    pub check: CheckContext,
    pub build: BuildContext,
    /// build.sh: the harness's argument groups (after the arch), each argument shell-quoted and
    /// each origin safe for a comment.
    pub build_groups: Vec<ArgGroup>,
    /// build.sh: the spec's arch, the CUTLASS root, the host compiler flags and the runtime's
    /// own flags, shell-quoted.
    pub shell_arch: String,
    pub shell_cutlass_root: Option<String>,
    pub shell_host_compiler: Vec<String>,
    pub shell_runtime_flags: Vec<String>,
    /// CMakeLists.txt: the production flags, all of them as the one argument of
    /// `target_compile_options` that gives nvcc each as build.sh does (quote::cmake_shell_option);
    /// `None` without production flags.
    pub cmake_production_flags: Option<String>,
    /// CMakeLists.txt: the include dirs, each an argument that target_include_directories reads
    /// as exactly that folder (quote::cmake_include_dir), and the CUTLASS root, the value of a
    /// PATH cache entry that it reads as `${CUTLASS_DIR}/include` (quote::cmake_cache_path).
    pub cmake_include_dirs: Vec<String>,
    pub cmake_cutlass_root: Option<String>,
    /// `"90a-real"` for sm_90a, a CMake quoted argument.
    pub cmake_architectures: String,
    pub cmake_std: String,
    /// README: the include dirs as written.
    pub include_dirs: Vec<String>,
    pub has_expect: bool,
    /// The harness's options and exit codes, from the one table of them
    /// (crates/repro-contract/src/harness_options.rs), for the artifact's README.
    pub harness_options_table: String,
    pub harness_exit_codes: String,
    pub expect_ones: String,
    pub expect_random: String,
}

#[derive(Debug, Serialize)]
pub struct SizeContext {
    pub name: String,
    pub value: i64,
    /// The type of a compiled-in size: `int`, as the run-time locals are, unless the value needs
    /// more.
    pub cpp_type: &'static str,
}

#[derive(Debug, Serialize)]
pub struct TensorContext {
    pub name: String,
    pub dtype: &'static str,
    pub dtype_name: &'static str,
    pub bytes: usize,
    pub shape_text: String,
    pub output: bool,
    /// The tensor's `repro::TensorLayout` at the run's sizes, as a C++ initializer over the size
    /// locals: `repro::TensorLayout{2, {M, K}, {}, false, false}`. (Inits are not compiled in:
    /// the harness reads them from spec.yaml.)
    pub layout_cpp: String,
    /// `col_major`, `strides [K, 1]`, or empty for packed row-major (a comment).
    pub layout_text: String,
    /// The tensor's `repro::Lifetime` enumerator (`none` for inputs and outputs), and for an
    /// intermediate what it means (a comment).
    pub intermediate: String,
    pub intermediate_text: Option<&'static str>,
}

/// `kind: cutlass3`: which tensors are the GEMM's operands, and its scalars.
#[derive(Debug, Serialize)]
pub struct CutlassContext {
    pub formula: String,
    pub a: usize,
    pub b: usize,
    pub c: i64,
    pub out: usize,
    pub alpha: String,
    pub beta: String,
    /// `scale_a` and `scale_b` (a blockwise-scaled mainloop) as a `repro::cutlass3::BlockScales`
    /// initializer over the launch's `tensors`: `{&tensors[3], {1, 128}, &tensors[4], {128, 128}}`.
    pub scales: Option<String>,
    /// `op: grouped_gemm` with `layout: masked` (a grouped kernel): the masked_m tensor.
    pub masked_m: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct KernelContext {
    /// `global`, `device`, `cutlass3` or `replay`.
    pub kind: &'static str,
    /// Its place in `launches:` (0 for `kernel:`), and the path errors name it by.
    pub index: usize,
    pub path: String,
    /// cutlass3: the GemmUniversal type.
    pub gemm: String,
    pub instantiation: String,
    pub label: String,
    pub args: Vec<String>,
    pub grid: Vec<String>,
    pub block: Vec<String>,
    pub cluster: Option<Vec<String>>,
    pub smem: String,
    pub setup: Option<String>,
    /// The `tma:` descriptors this launch encodes: every one for `kernel:`; in a sequence, those
    /// its args or setup name (one that no launch names, the first launch).
    pub tma: Vec<TmaContext>,
    /// `kind: device` only.
    pub device_entry: Option<DeviceEntryContext>,
    /// `kind: replay` only.
    pub replay: Option<ReplayContext>,
}

/// `kind: replay`: the relocations of the captured parameter bytes, as C++ initializers. The
/// cubin and the parameter file are read from spec.yaml at run time (the launch's own, under
/// its path).
#[derive(Debug, Serialize)]
pub struct ReplayContext {
    /// The mangled symbol (validated: letters, digits, `_`, `$`, `.`).
    pub symbol: String,
    /// The C++ names of its tables of pointers and tensor maps: `kReplayPointers`, or in a
    /// sequence `kReplayPointers_1` (each replayed launch has its own).
    pub pointers_table: String,
    pub tensor_maps_table: String,
    pub pointers: Vec<ReplayPointerContext>,
    pub tensor_maps: Vec<ReplayMapContext>,
}

#[derive(Debug, Serialize)]
pub struct ReplayPointerContext {
    pub at: u64,
    pub tensor: usize,
    pub tensor_name: String,
    pub offset: u64,
}

/// A captured CUtensorMap as a `repro::ReplayTensorMap` initializer.
#[derive(Debug, Serialize)]
pub struct ReplayMapContext {
    pub at: u64,
    pub tensor: usize,
    pub tensor_name: String,
    pub offset: u64,
    pub data_type: String,
    pub rank: usize,
    pub dims: String,
    pub strides: String,
    pub box_dims: String,
    pub element_strides: String,
    pub interleave: &'static str,
    pub swizzle: &'static str,
    pub l2_promotion: &'static str,
    pub oob_fill: &'static str,
    /// One line for the comment above it.
    pub describe: String,
}

/// One `tma:` descriptor as a `repro::TmaRequest` initializer.
#[derive(Debug, Serialize)]
pub struct TmaContext {
    pub name: String,
    pub tensor: usize,
    pub tensor_name: String,
    /// The tensor's dimension names in the driver's order, e.g. `K, M`.
    pub dim_names: String,
    pub data_type: &'static str,
    pub data_type_name: &'static str,
    pub rank: usize,
    pub dims: String,
    pub strides_bytes: String,
    pub box_dims: String,
    pub element_strides: String,
    /// The tensor dimension behind each driver dimension, as a C++ brace list.
    pub order: String,
    pub interleave: &'static str,
    pub swizzle: &'static str,
    pub l2_promotion: &'static str,
    pub oob_fill: &'static str,
    pub interleave_name: &'static str,
    pub swizzle_name: &'static str,
    pub l2_promotion_name: &'static str,
    pub oob_fill_name: &'static str,
}

#[derive(Debug, Serialize)]
pub struct TraceContext {
    pub index: u32,
    pub name: String,
    pub role: &'static str,
}

/// `kind: device`: the `__global__` entry the harness writes around the `__device__` function.
#[derive(Debug, Serialize)]
pub struct DeviceEntryContext {
    /// `template <typename T3, ...>` or empty when no argument needs a deduced type.
    pub template_header: String,
    /// The entry's parameters, one per kernel argument.
    pub parameters: Vec<String>,
    /// The names the entry forwards to the task body.
    pub forward: Vec<String>,
    /// `repro_device_entry` or `repro_device_entry<decltype(...)...>`, as launched.
    pub instantiation: String,
    /// The entry's own name: `repro_device_entry`, or `repro_device_entry_1` for a sequence's
    /// second launch.
    pub name: String,
}

#[derive(Debug, Serialize)]
pub struct ReferenceContext {
    /// `reference.op` as written.
    pub op: &'static str,
    /// What the outputs are compared with, for comments and the README (one line).
    pub formula: String,
    /// The unit errors are localized by: the GEMM's tile, the custom op's block (`[256]`), or
    /// empty when the spec gives none.
    pub block: String,
    /// `op: custom`: the call reference.cu makes.
    pub custom: Option<CustomReferenceContext>,
    /// The intermediates' own references that are functions (`tensors.X.reference: { source,
    /// function }`), in the spec's tensor order: one function of reference.cu each.
    pub intermediates: Vec<IntermediateReferenceContext>,
    /// Every intermediate with a reference of its own (a function or a file), in the spec's
    /// tensor order: the table harness.cu hands the runtime.
    pub judged_intermediates: Vec<JudgedIntermediateContext>,
    /// The distinct headers reference.cu includes (op: custom's and the intermediates'), as
    /// `#include "..."` names them, in order of first use.
    pub headers: Vec<String>,
    /// What reference.cu calls, for build.sh's and CMakeLists.txt's comments ("your reference
    /// (refs/norm.h)", "your intermediates' references (workspace)"); `None` when there is no
    /// reference.cu (neither `op: custom` nor an intermediate's reference).
    pub compiled: Option<String>,
}

/// One entry of harness.cu's table of referenced intermediates: the tensor, and whether
/// reference.cu has its function (`intermediate_reference_<tensor>`) or the runtime reads its
/// file.
#[derive(Debug, Serialize)]
pub struct JudgedIntermediateContext {
    /// The intermediate's index among the spec's tensors.
    pub tensor: usize,
    pub name: String,
    /// A function reference, compiled into reference.cu; a file reference when false.
    pub compiled: bool,
}

/// An intermediate's own reference: reference.cu's `intermediate_reference_<tensor>` calls the
/// user's function with every input (`repro::In`) and then the intermediate (`repro::Out`).
#[derive(Debug, Serialize)]
pub struct IntermediateReferenceContext {
    /// The intermediate's index among the spec's tensors.
    pub tensor: usize,
    pub name: String,
    pub function: String,
    /// The header, safe for a comment.
    pub header_comment: String,
    pub arguments: Vec<CustomArgument>,
}

/// `op: custom`: reference.cu includes the user's header and calls their function with every
/// tensor, in the spec's order: inputs as `repro::In`, outputs as `repro::Out`.
#[derive(Debug, Serialize)]
pub struct CustomReferenceContext {
    pub function: String,
    /// The header relative to the artifact folder, as `#include "..."` names it (validation
    /// refuses quotes, backslashes, angle brackets and line breaks in it).
    pub header: String,
    /// The same, safe for a comment in any of the artifact's files (no control character).
    pub header_comment: String,
    pub arguments: Vec<CustomArgument>,
}

#[derive(Debug, Serialize)]
pub struct CustomArgument {
    /// `repro::In` or `repro::Out`.
    pub view: &'static str,
    pub index: usize,
    /// `X f32 [B, N]`, for a comment.
    pub comment: String,
}

#[derive(Debug, Serialize)]
pub struct CheckContext {
    pub rel_l2: String,
    pub rtol: String,
    pub atol: String,
    pub repeat: u32,
    pub timeout: String,
}

#[derive(Debug, Serialize)]
pub struct BuildContext {
    pub arch: String,
    pub cc_major: u32,
    pub cc_minor: u32,
    pub arch_specific: bool,
    pub std: String,
    pub command_text: String,
}

/// A double as a C++ literal that reads back to the same value.
pub fn cpp_double(x: f64) -> String {
    if x.is_nan() {
        return "std::numeric_limits<double>::quiet_NaN()".into();
    }
    let text = format!("{x:?}");
    if text.contains(['.', 'e', 'i']) {
        text
    } else {
        format!("{text}.0")
    }
}

/// Text as the inside of a C++ string literal.
pub fn cpp_string(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A C++ brace list: `{1, 2, 3}`.
fn brace_list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("{{{}}}", items.join(", "))
}

fn tma_context(spec: &ResolvedSpec, d: &TmaDescriptor) -> TmaContext {
    let tensor = &spec.tensors[d.tensor];
    TmaContext {
        name: d.name.clone(),
        tensor: d.tensor,
        tensor_name: tensor.name.clone(),
        dim_names: d
            .order
            .iter()
            .map(|&i| tensor.shape_text[i].clone())
            .collect::<Vec<_>>()
            .join(", "),
        data_type: d.data_type,
        data_type_name: tensor.dtype.name(),
        rank: d.dims.len(),
        dims: brace_list(&d.dims),
        // An empty brace list is not a valid initializer for an array member in every compiler
        // mode; rank-1 tensors get a zero that the driver ignores.
        strides_bytes: if d.strides_bytes.is_empty() {
            "{0}".into()
        } else {
            brace_list(&d.strides_bytes)
        },
        box_dims: brace_list(&d.box_dims),
        element_strides: brace_list(&d.element_strides),
        order: brace_list(&d.order.iter().map(|&i| i as i64).collect::<Vec<_>>()),
        interleave: d.interleave.cpp(),
        swizzle: d.swizzle.cpp(),
        l2_promotion: d.l2_promotion.cpp(),
        oob_fill: d.oob_fill.cpp(),
        interleave_name: d.interleave.name(),
        swizzle_name: d.swizzle.name(),
        l2_promotion_name: d.l2_promotion.name(),
        oob_fill_name: d.oob_fill.name(),
    }
}

/// `kind: replay`: pointers and tensor maps to rewrite in the captured parameter bytes of
/// `launches[index]` (`k`).
fn replay_context(
    spec: &ResolvedSpec,
    index: usize,
    k: &KernelLaunch,
    replay: &crate::spec::ReplayLaunch,
) -> ReplayContext {
    let list = |values: &[u64]| brace_list(&values.iter().map(|&v| v as i64).collect::<Vec<_>>());
    let mut pointers = Vec::new();
    let mut tensor_maps = Vec::new();
    for r in &replay.relocations {
        let tensor_name = spec.tensors[r.tensor].name.clone();
        let Some(map) = &r.tensor_map else {
            pointers.push(ReplayPointerContext {
                at: r.at,
                tensor: r.tensor,
                tensor_name,
                offset: r.offset,
            });
            continue;
        };
        let dims: Vec<String> = map.dims.iter().map(u64::to_string).collect();
        tensor_maps.push(ReplayMapContext {
            at: r.at,
            tensor: r.tensor,
            offset: r.offset,
            data_type: format!(
                "CU_TENSOR_MAP_DATA_TYPE_{}",
                map.data_type.to_ascii_uppercase()
            ),
            rank: map.dims.len(),
            dims: list(&map.dims),
            // An empty brace list is not a valid array initializer in every compiler mode.
            strides: if map.strides.is_empty() {
                "{0}".into()
            } else {
                list(&map.strides)
            },
            box_dims: list(
                &map.box_dims
                    .iter()
                    .map(|&v| u64::from(v))
                    .collect::<Vec<_>>(),
            ),
            element_strides: list(
                &map.element_strides
                    .iter()
                    .map(|&v| u64::from(v))
                    .collect::<Vec<_>>(),
            ),
            interleave: map.interleave.cpp(),
            swizzle: map.swizzle.cpp(),
            l2_promotion: map.l2_promotion.cpp(),
            oob_fill: map.oob_fill.cpp(),
            describe: format!(
                "{} over {tensor_name} + {} B: dims {{{}}} innermost first, swizzle {}",
                map.data_type,
                r.offset,
                dims.join(", "),
                map.swizzle.name()
            ),
            tensor_name,
        });
    }
    let suffix = if spec.is_sequence() {
        format!("_{index}")
    } else {
        String::new()
    };
    ReplayContext {
        symbol: k.name.clone(),
        pointers_table: format!("kReplayPointers{suffix}"),
        tensor_maps_table: format!("kReplayTensorMaps{suffix}"),
        pointers,
        tensor_maps,
    }
}

/// The `__global__` entry of a `kind: device` spec. Tensors arrive as `repro::DevicePointer`
/// (it converts to the task body's pointer type on the device), sizes as `int`, descriptors as
/// `CUtensorMap`, and anything else (a descriptor wrapper built in kernel.setup, a scalar) with
/// the type of its expression. Everything passed by value is `__grid_constant__`: the task body
/// may take the address of a descriptor (TMA wants the parameter's own address, not a copy).
fn device_entry(spec: &ResolvedSpec, k: &KernelLaunch, entry: &str) -> DeviceEntryContext {
    let mut template_params = Vec::new();
    let mut template_args = Vec::new();
    let mut parameters = Vec::new();
    let mut forward = Vec::new();
    for (i, arg) in k.args.iter().enumerate() {
        let (parameter, name) = match arg {
            KernelArg::Tensor(t) => {
                let tensor = &spec.tensors[*t];
                (
                    format!(
                        "repro::DevicePointer<{}> {}",
                        tensor.dtype.bytes(),
                        tensor.name
                    ),
                    tensor.name.clone(),
                )
            }
            KernelArg::Size(s) => (format!("int {s}"), s.clone()),
            KernelArg::Tma(d) => {
                let name = &spec.tma[*d].name;
                (
                    format!("const __grid_constant__ CUtensorMap {name}"),
                    name.clone(),
                )
            }
            KernelArg::Expr(e) => {
                // A descriptor built in kernel.setup keeps its name in the entry.
                let name = if crate::spec::names::is_cpp_identifier(e) {
                    e.clone()
                } else {
                    format!("arg{i}")
                };
                template_params.push(format!("typename Arg{i}"));
                template_args.push(format!("std::decay_t<decltype({e})>"));
                (format!("const __grid_constant__ Arg{i} {name}"), name)
            }
        };
        parameters.push(parameter);
        forward.push(name);
    }
    let (template_header, instantiation) = if template_params.is_empty() {
        (String::new(), entry.to_string())
    } else {
        (
            format!("template <{}>", template_params.join(", ")),
            format!("{entry}<{}>", template_args.join(", ")),
        )
    };
    DeviceEntryContext {
        name: entry.to_string(),
        template_header,
        parameters,
        forward,
        instantiation,
    }
}

/// One launch as harness.cu writes it: `launches[index]`, or the `kernel:`.
fn kernel_context(spec: &ResolvedSpec, index: usize) -> KernelContext {
    let k = &spec.launches[index];
    let paths = launch_paths(spec);
    let entry = if spec.is_sequence() {
        format!("repro_device_entry_{index}")
    } else {
        "repro_device_entry".to_string()
    };
    let args = k
        .args
        .iter()
        .map(|a| match a {
            KernelArg::Tensor(i) => spec.tensors[*i].name.clone(),
            KernelArg::Size(s) => s.clone(),
            KernelArg::Tma(i) => spec.tma[*i].name.clone(),
            KernelArg::Expr(e) => e.clone(),
        })
        .collect();
    let names = |k: &KernelLaunch| -> Vec<String> {
        let in_setup = k
            .setup
            .as_deref()
            .map(crate::spec::expr::identifiers)
            .unwrap_or_default();
        spec.tma
            .iter()
            .enumerate()
            .filter(|(i, d)| k.args.contains(&KernelArg::Tma(*i)) || in_setup.contains(&d.name))
            .map(|(_, d)| d.name.clone())
            .collect()
    };
    let named_by_some = |name: &String| spec.launches.iter().any(|l| names(l).contains(name));
    // A map no launch names is encoded (and printed) by the first launch built from source: a
    // replayed one encodes only its relocations (validation refuses `tma:` when every launch is
    // replayed).
    let holds_unnamed = spec
        .launches
        .iter()
        .position(|l| !matches!(l.kind, LaunchKind::Replay(_)))
        == Some(index);
    let own = names(k);
    let tma = spec
        .tma
        .iter()
        .filter(|d| {
            !spec.is_sequence()
                || own.contains(&d.name)
                || (holds_unnamed && !named_by_some(&d.name))
        })
        .map(|d| tma_context(spec, d))
        .collect();
    KernelContext {
        index,
        path: paths[index].clone(),
        tma,
        kind: match k.kind {
            LaunchKind::Global => "global",
            LaunchKind::Device => "device",
            LaunchKind::Cutlass3 { .. } => "cutlass3",
            LaunchKind::Replay(_) => "replay",
        },
        gemm: match &k.kind {
            LaunchKind::Cutlass3 { gemm } => gemm.clone(),
            _ => String::new(),
        },
        instantiation: k.instantiation(),
        label: cpp_string(&match k.kind {
            LaunchKind::Device => format!("{} (kind: device, in {entry})", k.instantiation()),
            // A capture names the one kernel it recorded; a sequence's replayed launches are
            // named by their symbols.
            LaunchKind::Replay(_) if spec.is_sequence() => k.name.clone(),
            LaunchKind::Replay(_) => {
                let capture = spec.document.capture.as_ref();
                let name = capture
                    .map(|c| c.kernel.clone())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| k.name.clone());
                match capture.map(|c| c.config.as_str()).filter(|c| !c.is_empty()) {
                    Some(config) => format!("{name} [{config}]"),
                    None => name,
                }
            }
            _ => k.instantiation(),
        }),
        args,
        grid: k.grid.to_vec(),
        block: k.block.to_vec(),
        cluster: k.cluster.as_ref().map(|c| c.to_vec()),
        smem: k.smem.clone(),
        // Indented into launch_kernel's body, so the generated code reads as one function.
        setup: k.setup.as_ref().map(|s| {
            s.lines()
                .map(|l| {
                    if l.is_empty() {
                        String::new()
                    } else {
                        format!("  {l}")
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
        device_entry: (k.kind == LaunchKind::Device).then(|| device_entry(spec, k, &entry)),
        replay: match &k.kind {
            LaunchKind::Replay(replay) => Some(replay_context(spec, index, k, replay)),
            _ => None,
        },
    }
}

/// `repro::TensorLayout{rank, {shape}, {strides}, explicit_strides, col_major}` over the size locals.
fn layout_cpp(shape: &[String], strides: &[String], col_major: bool) -> String {
    format!(
        "repro::TensorLayout{{{}, {{{}}}, {{{}}}, {}, {}}}",
        shape.len(),
        shape.join(", "),
        strides.join(", "),
        !strides.is_empty(),
        col_major
    )
}

/// The reference as a formula over the spec's tensor names, for a comment: the plain, batched or
/// block-scaled GEMM (with C and bias), or a grouped GEMM in its layout.
fn reference_formula(spec: &ResolvedSpec) -> String {
    let name_of = |i: usize| spec.tensors[i].name.clone();
    let names = |indices: &[usize]| -> String {
        indices
            .iter()
            .map(|&i| name_of(i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let r = match &spec.reference {
        Reference::Gemm(g) => g,
        Reference::Custom(c) => {
            let inputs: Vec<usize> = (0..spec.tensors.len())
                .filter(|&i| !spec.tensors[i].output)
                .collect();
            return format!(
                "{} = {}({}), your host reference, in f64",
                names(&c.outputs),
                c.function,
                names(&inputs)
            );
        }
        Reference::File(f) => {
            let outputs: Vec<usize> = f.expected.iter().map(|(i, _)| *i).collect();
            return format!(
                "{} compared with the expected outputs saved as .npy",
                names(&outputs)
            );
        }
        Reference::Attention(a) if a.backward.is_some() => {
            let g = a.backward.expect("matched");
            return format!(
                "{}, {}, {} = the gradients of softmax(scale * {} {}^T, causal {}) {} at {}, from {} and {}, in f64",
                name_of(g.dq),
                name_of(g.dk),
                name_of(g.dv),
                name_of(a.q),
                name_of(a.k),
                a.causal.name(),
                name_of(a.v),
                name_of(g.d_out),
                name_of(a.out),
                a.lse.map(name_of).unwrap_or_default()
            );
        }
        Reference::Attention(a) => {
            let scale = a
                .softmax_scale
                .map_or("1/sqrt(D)".to_string(), |s| s.to_string());
            let lse = a
                .lse
                .map(|l| format!(", {} = its log-sum-exp", name_of(l)))
                .unwrap_or_default();
            return format!(
                "{} = softmax({scale} * {} {}^T, causal {}) {}{lse}, in f64",
                name_of(a.out),
                name_of(a.q),
                name_of(a.k),
                a.causal.name(),
                name_of(a.v)
            );
        }
    };
    let (out, a, b) = (name_of(r.out), name_of(r.a), name_of(r.b));
    if let Some(g) = &r.grouped {
        // Also rendered for `kind: cutlass3`, which runs the masked layout without C (its
        // CUTLASS comment adds the block scales: cutlass_context).
        let meta = name_of(g.metadata);
        return match g.layout {
            GroupedLayout::Contiguous => format!(
                "{out}[m] = {} * {a}[m] @ {b}[{meta}[m]] for the rows whose group {meta}[m] is not -1, accumulated in f64",
                r.alpha
            ),
            GroupedLayout::Masked => format!(
                "{out}[g] = {} * {a}[g] @ {b}[g] over the first {meta}[g] rows of each group g, accumulated in f64",
                r.alpha
            ),
            GroupedLayout::KGrouped => format!(
                "{out}[g] = {} * {a}[:, Kg] @ {b}[Kg, :] with Kg the g-th range of {meta}[g] columns, accumulated in f64",
                r.alpha
            ),
            GroupedLayout::KGroupedBlocks => format!(
                "{out}[g] = {} * {a}_g @ {b}_g^T with {a}_g the g-th [M, {meta}[g]] block of {a}, {b}_g the g-th [N, {meta}[g]] block of {b}, accumulated in f64",
                r.alpha
            ),
        };
    }
    let mut f = format!("{out} = {} * {a} @ {b}", r.alpha);
    if let Some(c) = r.c {
        f += &format!(" + {} * {}", r.beta, name_of(c));
    }
    if let Some(bias) = r.bias {
        f += &format!(" + {}", name_of(bias));
    }
    for (operand, scale) in [(&a, &r.scale_a), (&b, &r.scale_b)] {
        if let Some(s) = scale {
            f += &format!(
                ", {operand} scaled per [{}, {}] block by {}",
                s.block[0],
                s.block[1],
                name_of(s.tensor)
            );
        }
    }
    f += if r.batched {
        ", per batch, accumulated in f64"
    } else {
        ", accumulated in f64"
    };
    if let (true, Some(c)) = (r.accumulate, r.c) {
        f += &format!(
            "; the kernel adds into {out}, which starts as {}",
            name_of(c)
        );
    }
    f
}

/// `kind: cutlass3`: the operands CUTLASS's arguments are built from. A plain GEMM (C and beta
/// optional), the same with block scales (the kernel's scale pointers and layouts), or a masked
/// grouped GEMM (one problem per group; validation refuses the other grouped layouts).
fn cutlass_context(spec: &ResolvedSpec) -> CutlassContext {
    let r = spec
        .reference
        .gemm()
        .expect("validation gives kind: cutlass3 a GEMM reference");
    let block = |b: &[i64; 2]| format!("{{{}, {}}}", b[0], b[1]);
    let scales = match (&r.scale_a, &r.scale_b) {
        (Some(sa), Some(sb)) => Some(format!(
            "{{&tensors[{}], {}, &tensors[{}], {}}}",
            sa.tensor,
            block(&sa.block),
            sb.tensor,
            block(&sb.block)
        )),
        _ => None,
    };
    let masked_m = r.grouped.as_ref().map(|g| g.metadata);
    let mut formula = reference_formula(spec);
    if let (Some(_), Some(sa), Some(sb)) = (&r.grouped, &r.scale_a, &r.scale_b) {
        // The grouped formula names no scales; a scaled grouped kernel reads group g's.
        let name_of = |i: usize| spec.tensors[i].name.as_str();
        formula += &format!(
            ", A scaled per [{}, {}] block by {}[g], B per [{}, {}] block by {}[g]",
            sa.block[0],
            sa.block[1],
            name_of(sa.tensor),
            sb.block[0],
            sb.block[1],
            name_of(sb.tensor)
        );
    }
    CutlassContext {
        formula: comment_text(&formula),
        a: r.a,
        b: r.b,
        c: r.c.map_or(-1, |c| c as i64),
        out: r.out,
        alpha: cpp_double(r.alpha),
        beta: cpp_double(r.beta),
        scales,
        masked_m,
    }
}

/// The user's reference functions reference.cu calls, as (header, function): `op: custom`'s, then
/// each intermediate's own, in the spec's tensor order.
pub fn user_references(spec: &ResolvedSpec) -> Vec<(&Path, &str)> {
    let custom = match &spec.reference {
        Reference::Custom(c) => Some((c.source.as_path(), c.function.as_str())),
        _ => None,
    };
    custom
        .into_iter()
        .chain(
            spec.tensors
                .iter()
                .filter_map(|t| t.intermediate_reference.as_ref()?.function()),
        )
        .collect()
}

fn reference_context(spec: &ResolvedSpec, artifact: &Path) -> ReferenceContext {
    let block = spec.reference.block();
    let argument = |index: usize, view: &'static str| {
        let t = &spec.tensors[index];
        CustomArgument {
            view,
            index,
            comment: comment_text(&format!(
                "{} {} [{}]",
                t.name,
                t.dtype.name(),
                t.shape_text.join(", ")
            )),
        }
    };
    let custom = match &spec.reference {
        Reference::Custom(c) => Some(CustomReferenceContext {
            function: c.function.clone(),
            header: relative_to(&c.source, artifact),
            header_comment: comment_text(&relative_to(&c.source, artifact)),
            arguments: spec
                .tensors
                .iter()
                .enumerate()
                .map(|(index, t)| {
                    argument(index, if t.output { "repro::Out" } else { "repro::In" })
                })
                .collect(),
        }),
        _ => None,
    };

    // Inputs are what no launch writes: neither outputs nor intermediates.
    let inputs: Vec<usize> = (0..spec.tensors.len())
        .filter(|&i| !spec.tensors[i].output && spec.tensors[i].intermediate.is_none())
        .collect();
    let intermediates: Vec<IntermediateReferenceContext> = spec
        .tensors
        .iter()
        .enumerate()
        .filter_map(|(index, t)| {
            let (source, function) = t.intermediate_reference.as_ref()?.function()?;
            Some(IntermediateReferenceContext {
                tensor: index,
                name: t.name.clone(),
                function: function.to_string(),
                header_comment: comment_text(&relative_to(source, artifact)),
                arguments: inputs
                    .iter()
                    .map(|&i| argument(i, "repro::In"))
                    .chain([argument(index, "repro::Out")])
                    .collect(),
            })
        })
        .collect();
    let mut headers: Vec<String> = Vec::new();
    for (source, _) in user_references(spec) {
        let header = relative_to(source, artifact);
        if !headers.contains(&header) {
            headers.push(header);
        }
    }
    let names: Vec<&str> = intermediates.iter().map(|i| i.name.as_str()).collect();
    let compiled = match (&custom, names.is_empty()) {
        (Some(c), true) => Some(format!("your reference ({})", c.header_comment)),
        (Some(c), false) => Some(format!(
            "your reference ({}) and your intermediates' ({})",
            c.header_comment,
            names.join(", ")
        )),
        (None, false) => Some(format!(
            "your intermediates' references ({})",
            names.join(", ")
        )),
        (None, true) => None,
    };
    // Every referenced intermediate, for the runtime's table: a file reference has no function
    // (the runtime reads the file spec.yaml names).
    let judged_intermediates = spec
        .tensors
        .iter()
        .enumerate()
        .filter_map(|(index, t)| {
            let reference = t.intermediate_reference.as_ref()?;
            Some(JudgedIntermediateContext {
                tensor: index,
                name: t.name.clone(),
                compiled: reference.function().is_some(),
            })
        })
        .collect();
    ReferenceContext {
        compiled,
        intermediates,
        judged_intermediates,
        headers,
        op: spec.reference.op(),
        formula: comment_text(&reference_formula(spec)),
        block: if block.is_empty() {
            String::new()
        } else {
            format!(
                "[{}]",
                block
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        custom,
    }
}

pub fn harness_context(
    spec: &ResolvedSpec,
    artifact: &Path,
    command: &BuildCommand,
) -> Result<HarnessContext, Error> {
    let include_dirs: Vec<String> = spec
        .include_dirs
        .iter()
        .map(|d| relative_to(d, artifact))
        .collect();
    let tensors = spec
        .tensors
        .iter()
        .map(|t| {
            let to_cpp = |texts: &[String]| -> Vec<String> {
                texts.iter().map(|x| crate::spec::expr::to_cpp(x)).collect()
            };
            let strides = t.strides_text.as_deref().map(to_cpp).unwrap_or_default();
            TensorContext {
                name: t.name.clone(),
                dtype: t.dtype.cpp_enumerator(),
                dtype_name: t.dtype.name(),
                bytes: t.dtype.bytes(),
                shape_text: format!("[{}]", t.shape_text.join(", ")),
                output: t.output,
                layout_cpp: layout_cpp(&to_cpp(&t.shape_text), &strides, t.col_major),
                layout_text: match &t.strides_text {
                    Some(s) => format!("strides [{}]", s.join(", ")),
                    None if t.col_major => "col_major".into(),
                    None => String::new(),
                },
                intermediate: format!(
                    "repro::Lifetime::{}",
                    t.intermediate.map_or("none", Lifetime::name)
                ),
                intermediate_text: t.intermediate.map(|l| match l {
                    Lifetime::Call => "intermediate, made afresh before every call",
                    Lifetime::Persist => "intermediate, kept across the calls of a check",
                }),
            }
        })
        .collect();
    let tolerance = |v: Option<f64>| cpp_double(v.unwrap_or(-1.0));
    let fixed_reason = sizes_fixed_reason(spec);
    let expect = spec.expect.as_ref();
    let cmake = cmake_values(command, &include_dirs)?;
    Ok(HarnessContext {
        name: spec.name().to_string(),
        about: comment_text(&spec.about),
        version: env!("CARGO_PKG_VERSION"),
        spec_display: comment_text(&relative_to(&spec.path, artifact)),
        includes: spec.includes.clone(),
        prelude: spec.prelude.clone(),
        cutlass: match spec.kernel().kind {
            LaunchKind::Cutlass3 { .. } => Some(cutlass_context(spec)),
            _ => None,
        },
        sizes: spec
            .sizes
            .iter()
            .map(|(n, v)| SizeContext {
                name: n.clone(),
                value: *v,
                cpp_type: if i32::try_from(*v).is_ok() {
                    "int"
                } else {
                    "int64_t"
                },
            })
            .collect(),
        sizes_runtime: fixed_reason.is_none(),
        sizes_fixed_reason: fixed_reason.as_deref().map(cpp_string).unwrap_or_default(),
        sizes_fixed_uses: compiled_size_uses(spec)
            .iter()
            .map(|u| comment_text(&format!("{}: {}", u.place, u.names())))
            .collect(),
        tensors,
        kernel: kernel_context(spec, 0),
        launches: match spec.kernel().kind {
            LaunchKind::Cutlass3 { .. } => Vec::new(),
            _ => (0..spec.launches.len())
                .map(|i| kernel_context(spec, i))
                .collect(),
        },
        has_replay: spec
            .launches
            .iter()
            .any(|l| matches!(l.kind, LaunchKind::Replay(_))),
        sequence: spec.is_sequence(),
        has_intermediates: spec.tensors.iter().any(|t| t.intermediate.is_some()),
        tma: spec.tma.iter().map(|d| tma_context(spec, d)).collect(),
        trace: spec
            .trace
            .iter()
            .map(|(index, name, role)| TraceContext {
                index: *index,
                name: cpp_string(name),
                role: role.name(),
            })
            .collect(),
        reference: reference_context(spec, artifact),
        check: CheckContext {
            rel_l2: tolerance(spec.check.rel_l2),
            rtol: tolerance(spec.check.rtol),
            atol: tolerance(spec.check.atol),
            repeat: spec.check.repeat,
            timeout: cpp_double(spec.check.timeout),
        },
        build: BuildContext {
            arch: spec.build.arch.clone(),
            cc_major: spec.build.cc_major,
            cc_minor: spec.build.cc_minor,
            arch_specific: spec.build.arch_specific,
            std: spec.build.std.clone(),
            command_text: std::iter::once("nvcc".to_string())
                .chain(
                    command
                        .arguments("librepro_runtime.a")
                        .iter()
                        .map(|a| shell_quote(a)),
                )
                .collect::<Vec<_>>()
                .join(" "),
        },
        // Every value from the spec is quoted so that it stays one inert word or argument: a
        // bundle's build.sh and CMakeLists.txt run on someone else's machine.
        build_groups: command
            .groups()
            .into_iter()
            .map(|g| ArgGroup {
                kind: g.kind,
                origin: comment_text(&g.origin),
                args: g.args.iter().map(|a| shell_quote(a)).collect(),
            })
            .collect(),
        shell_arch: shell_quote(&spec.build.arch),
        shell_cutlass_root: command.cutlass.as_deref().map(shell_quote),
        shell_host_compiler: command
            .host_compiler
            .iter()
            .map(|a| shell_quote(a))
            .collect(),
        shell_runtime_flags: RUNTIME_FLAGS.iter().map(|a| shell_quote(a)).collect(),
        cmake_production_flags: cmake.production_flags,
        cmake_include_dirs: cmake.include_dirs,
        cmake_cutlass_root: cmake.cutlass_root,
        cmake_architectures: cmake_quote(&format!(
            "{}-real",
            spec.build.arch.trim_start_matches("sm_")
        )),
        cmake_std: spec.build.std.trim_start_matches("c++").to_string(),
        include_dirs,
        has_expect: expect.is_some(),
        harness_options_table: repro_contract::harness_options::readme_table(),
        harness_exit_codes: repro_contract::harness_options::harness_exit_codes(),
        expect_ones: expect.and_then(|e| e.ones).map_or("-", |o| o.name()).into(),
        expect_random: expect
            .and_then(|e| e.random)
            .map_or("-", |o| o.name())
            .into(),
    })
}

/// CMakeLists.txt's arguments from the build command: the same production flags and folders
/// build.sh passes, each encoded for where CMake reads it.
struct CmakeValues {
    production_flags: Option<String>,
    include_dirs: Vec<String>,
    cutlass_root: Option<String>,
}

/// What these cannot carry (quote::Unrepresentable): a control character anywhere, a `;` in the
/// CUTLASS root. The spec loader refuses a control character in a flag (crates/repro-contract/src/spec/build.rs); the
/// folders are not checked there yet. Either way repro should have said so at the spec, so
/// generation stops as a bug in repro, naming the value.
fn cmake_values(command: &BuildCommand, include_dirs: &[String]) -> Result<CmakeValues, Error> {
    let refuse = |what: &str, e: repro_text::quote::Unrepresentable| {
        Error::Internal(format!(
            "{what} {e}; the spec should have been refused before CMakeLists.txt was written"
        ))
    };
    let flags = command.production_flags();
    let production_flags = if flags.is_empty() {
        None
    } else {
        Some(
            cmake_shell_option(&flags)
                .map_err(|e| refuse("a production flag (build.flags or build.flags_from)", e))?,
        )
    };
    Ok(CmakeValues {
        production_flags,
        include_dirs: include_dirs
            .iter()
            .map(|d| cmake_include_dir(d).map_err(|e| refuse("an include directory", e)))
            .collect::<Result<_, _>>()?,
        cutlass_root: command
            .cutlass
            .as_deref()
            .map(|root| cmake_cache_path(root).map_err(|e| refuse("the CUTLASS root", e)))
            .transpose()?,
    })
}
