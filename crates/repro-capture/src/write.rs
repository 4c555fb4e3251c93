//! Writes what `repro capture` recorded as a spec folder: `capture.yaml` (the spec, commented for
//! the person who reads it first), the inputs as `.npy` under `inputs/`, production's outputs
//! before and after the launch under `production/`, and for `kind: replay` the module's cubin
//! and the parameter bytes. Numbers, not expressions: the spec reproduces one launch.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::import::capture::npy_descr;
use crate::import::skeleton::Value;
use crate::spec::yaml::{scalar, Context};

use super::layout::{self, LaunchLayout, ParamRole};
use super::record::{self, read_buffer, Capture};
use super::tensor::BufferTensor;

/// A block value of the spec (`name:`, `about:`, `capture.command`...).
pub(crate) fn yaml_scalar(text: &str) -> String {
    scalar(text, Context::Block)
}

/// How the user asked for the spec.
#[derive(Debug, Clone, Default)]
pub struct SpecRequest {
    /// The spec's name; default from the kernel's name.
    pub name: Option<String>,
    /// `--kind replay`: replay even when the source could rebuild the launch.
    pub replay: bool,
    /// `--reference`: the reference section as YAML, checked by the spec loader.
    pub reference: Option<crate::spec::model::ReferenceSpec>,
    /// The program, as a shell would show it.
    pub command: String,
    /// `--source`: the kernel's declaration and the folder it was found under.
    pub source: Option<(crate::import::cuda::KernelDecl, PathBuf)>,
    /// `--tensor`: tensors carved out of the allocations pointers point into.
    pub views: Vec<super::views::TensorView>,
    /// What Triton left beside the captured cubin, when it compiled it.
    pub triton: Option<super::triton::TritonKernel>,
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    pub spec: PathBuf,
    pub kind: &'static str,
    /// Why the launch is replayed rather than rebuilt from source.
    pub replay_reason: Option<String>,
    pub tensors: Vec<BufferTensor>,
}

/// `bytes` (the tensor's storage, packed) as a .npy of `tensor`'s logical shape. A col_major
/// tensor's storage is transposed into logical row-major order, as the harness reads it.
pub(crate) fn write_npy(path: &Path, tensor: &BufferTensor, bytes: &[u8]) -> Result<(), String> {
    let shape: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
    let shape_text = if shape.len() == 1 {
        format!("({},)", shape[0])
    } else {
        format!("({})", shape.join(", "))
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        npy_descr(tensor.dtype)
    );
    // Magic, version, length, then the header padded with spaces to a multiple of 64, newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + tensor.bytes as usize);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    let data = &bytes[..tensor.bytes as usize];
    if let Some(strides) = &tensor.strides {
        // The logical elements, row-major, gathered through the strides (what `init: { file }`
        // reads and `--dump` writes).
        let size = tensor.dtype.bytes();
        for i in 0..tensor.numel() {
            let at = tensor.strided_element(strides, i) as usize * size;
            out.extend_from_slice(&data[at..at + size]);
        }
    } else if tensor.col_major && tensor.shape.len() == 2 {
        let (rows, cols) = (tensor.shape[0] as usize, tensor.shape[1] as usize);
        let size = tensor.dtype.bytes();
        for r in 0..rows {
            for c in 0..cols {
                let at = (c * rows + r) * size;
                out.extend_from_slice(&data[at..at + size]);
            }
        }
    } else {
        out.extend_from_slice(data);
    }
    std::fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A spec name from the kernel's: `capture_app::tma_gemm` -> `tma_gemm_capture`.
pub(crate) fn default_name(kernel: &str) -> String {
    let short = kernel.rsplit("::").next().unwrap_or(kernel);
    let mut name: String = short
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "kernel_");
    }
    name + "_capture"
}

pub(crate) fn list<T: ToString>(values: &[T]) -> String {
    format!(
        "[{}]",
        values
            .iter()
            .map(T::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Writes the spec folder `out` from the library's files in `raw`.
pub fn write(
    raw: &Path,
    out: &Path,
    capture: &Capture,
    request: &SpecRequest,
) -> Result<Written, String> {
    let params_path = record::raw_file(raw, &capture.params.file)?;
    let params = record::read_file(&params_path, crate::spec::MAX_PARAM_BYTES)?;
    let demangled = layout::parse_demangled(&capture.kernel.demangled);
    // A Triton kernel's signature names the parameters as a declaration would; it is never
    // rebuilt from it (Triton compiles Python, not CUDA C++).
    let triton_decl = request.triton.as_ref().map(|t| t.declaration());
    let decl = request
        .source
        .as_ref()
        .map(|(d, _)| d)
        .or(triton_decl.as_ref());
    let template_args = demangled
        .as_ref()
        .map(|d| d.template_args.clone())
        .unwrap_or_default();
    let mut launch: LaunchLayout =
        layout::lay_out(raw, capture, &params, decl, &template_args, &request.views)?;
    let mut replay_reason = launch.global_blocked.clone();
    if request.replay {
        replay_reason = Some("--kind replay".into());
        launch.global = None;
    }
    if request.source.is_none() && request.triton.is_some() {
        replay_reason =
            Some("it is a Triton kernel, compiled from Python: its cubin is replayed".into());
        launch.global = None;
        launch.sizes.clear();
    }
    if demangled.is_none() && launch.global.is_some() {
        replay_reason = Some(format!(
            "the kernel's name `{}` does not demangle to a function",
            capture.kernel.demangled
        ));
        launch.global = None;
    }
    if let Some(r) = &request.reference {
        if matches!(r.op.as_str(), "gemm" | "grouped_gemm")
            && !r.a.is_empty()
            && !r.b.is_empty()
            && !r.out.is_empty()
        {
            layout::shape_as_gemm(&mut launch.tensors, &r.a, &r.b, &r.out)?;
        }
    }
    if request.reference.is_some() {
        if let Some(decl) = decl {
            super::views::refuse_shared_outputs(&launch.tensors, capture, decl)?;
        }
    }
    let kind = if launch.global.is_some() {
        "global"
    } else {
        "replay"
    };

    // Files first: a spec never names a file that is not there.
    for dir in ["inputs", "production"] {
        let path = out.join(dir);
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    }
    let mut scratch = ReferenceScratch::of(request.reference.as_ref());
    let mut tensor_lines = String::new();
    let mut before = Vec::new();
    let mut after = Vec::new();
    for t in &launch.tensors {
        let buffer = capture
            .buffers
            .iter()
            .find(|b| b.id == t.buffer)
            .expect("every tensor is a buffer");
        let Some(before_file) = &buffer.before else {
            return Err(format!(
                "buffer {} ({} bytes) could not be copied before the launch: {}",
                buffer.id,
                buffer.size,
                buffer.error.as_deref().unwrap_or("no reason given")
            ));
        };
        let all_bytes = read_buffer(raw, before_file, buffer.size)?;
        let bytes = &all_bytes[t.start as usize..];
        let shape = list(&t.shape);
        let layout = t.layout_fields();
        let managed = if buffer.managed {
            "; managed memory in production"
        } else {
            ""
        };
        let after_bytes = match buffer.after.as_deref().filter(|_| t.output) {
            Some(after_file) => Some(read_buffer(raw, after_file, buffer.size)?),
            None => None,
        };
        // A view's own count of changed bytes; an allocation's, less what its views hold (each
        // changed byte is counted once, in the tensor that holds it). Either is an output only
        // where the launch changed bytes it counts.
        let span = t.start as usize..(t.start + t.bytes) as usize;
        let views_of_buffer: Vec<&BufferTensor> = launch
            .tensors
            .iter()
            .filter(|v| v.view && v.buffer == t.buffer)
            .collect();
        let changed = after_bytes.as_deref().and_then(|after| {
            let count = if t.view {
                after[span.clone()]
                    .iter()
                    .zip(&all_bytes[span.clone()])
                    .filter(|(a, b)| a != b)
                    .count() as u64
            } else if views_of_buffer.is_empty() {
                buffer.changed_bytes
            } else {
                let in_view = |at: u64| {
                    views_of_buffer
                        .iter()
                        .any(|v| v.start <= at && at < v.start + v.bytes)
                };
                after
                    .iter()
                    .zip(&all_bytes)
                    .enumerate()
                    .filter(|(at, (a, b))| a != b && !in_view(*at as u64))
                    .count() as u64
            };
            ((views_of_buffer.is_empty() && !t.view) || count > 0)
                .then_some((&after[t.start as usize..], count))
        });
        // An allocation kept whole beside its views: the harness's kernel writes a view's bytes
        // in the view, never in this copy, so production's after holds them as they were before.
        let patched: Option<Vec<u8>> = changed.as_ref().filter(|_| !t.view).map(|(after, _)| {
            let mut after = after.to_vec();
            for v in &views_of_buffer {
                let span = v.start as usize..(v.start + v.bytes) as usize;
                after[span.clone()].copy_from_slice(&all_bytes[span]);
            }
            after
        });
        let changed = changed.map(|(after, count)| (patched.as_deref().unwrap_or(after), count));
        if changed.is_some() && scratch.is_scratch(&t.name) {
            let file = format!("inputs/{}.npy", t.name);
            write_npy(&out.join(&file), t, bytes)?;
            let _ = writeln!(
                tensor_lines,
                "  {}: {{ dtype: {}, shape: {shape}{layout}, intermediate: true, init: {{ file: {file} }} }}   # the launch changed it and the reference judges only {}: the kernel's scratch, made from its state before the launch before every call; shape from {}{managed}",
                t.name,
                t.dtype.name(),
                scratch.judged(),
                t.origin
            );
        } else if let Some((after_bytes, changed_bytes)) = changed {
            let (b, a) = (
                format!("production/{}.before.npy", t.name),
                format!("production/{}.after.npy", t.name),
            );
            write_npy(&out.join(&b), t, bytes)?;
            write_npy(&out.join(&a), t, after_bytes)?;
            before.push((t.name.clone(), b));
            after.push((t.name.clone(), a.clone()));
            let _ = writeln!(
                tensor_lines,
                "  {}: {{ dtype: {}, shape: {shape}{layout}, output: true }}   # {} bytes changed by the launch; shape from {}{managed}",
                t.name,
                t.dtype.name(),
                changed_bytes,
                t.origin
            );
        } else {
            let file = format!("inputs/{}.npy", t.name);
            write_npy(&out.join(&file), t, bytes)?;
            let _ = writeln!(
                tensor_lines,
                "  {}: {{ dtype: {}, shape: {shape}{layout}, init: {{ file: {file} }} }}   # shape from {}{managed}",
                t.name,
                t.dtype.name(),
                t.origin
            );
        }
    }
    if let Some(refusal) = scratch.refusal("the launch").filter(|_| after.is_empty()) {
        return Err(refusal);
    }
    if after.is_empty() {
        return Err("the launch changed no buffer it can reach: there is no output to reproduce (did it fault, or write only through memory no parameter points into?)".into());
    }

    let name = request.name.clone().unwrap_or_else(|| {
        default_name(
            demangled
                .as_ref()
                .map_or(capture.kernel.mangled.as_str(), |d| d.name.as_str()),
        )
    });
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Captured by `repro capture` from: {}",
        request.command.replace('\n', " ")
    );
    let _ = writeln!(
        y,
        "# Kernel: {}",
        capture.kernel.demangled.replace('\n', " ")
    );
    if let Some(t) = &request.triton {
        let _ = writeln!(
            y,
            "# A Triton{} kernel, written at {}.",
            t.options
                .triton_version
                .as_deref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default(),
            t.location.as_deref().unwrap_or("(no location recorded)")
        );
        let _ = writeln!(y, "# Its config: {}.", t.config_text());
        if let Some(a) = &t.autotuned {
            let _ = writeln!(
                y,
                "# The autotuner's choice, the fastest of {} configs for key {} ({}).",
                a.candidates,
                a.key.replace('\n', " "),
                a.file.display()
            );
        }
        for note in &t.notes {
            let _ = writeln!(y, "# Note: {}.", note.replace('\n', " "));
        }
    }
    if let Some(decl) = decl {
        let integers = super::views::integer_parameters(capture, &params, decl);
        if !integers.is_empty() {
            let values: Vec<String> = integers.iter().map(|(n, v)| format!("{n} = {v}")).collect();
            let _ = writeln!(
                y,
                "# Integer parameters (for --tensor dimensions): {}.",
                values.join(", ")
            );
        }
    }
    let _ = writeln!(
        y,
        "# Launch {} of the kernels that matched, on {} (compute capability {}.{}), through {}.",
        capture.launch_number,
        capture.device.name.replace('\n', " "),
        capture.device.cc[0],
        capture.device.cc[1],
        capture.api
    );
    let _ = writeln!(y, "# `repro run` on this folder first says whether the harness reproduces production's output bit");
    let _ = writeln!(y, "# for bit (capture.after), then runs the usual checks. Inputs are production's own (inputs/).");
    match &replay_reason {
        Some(why) if kind == "replay" => {
            let _ = writeln!(y, "# kind: replay: production's machine code (module.cubin), as launched; not rebuilt from source");
            let _ = writeln!(y, "# because {}.", why.replace('\n', " "));
        }
        _ => {
            let _ = writeln!(y, "# kind: global: rebuilt from the kernel's source with build.flags: set them to production's.");
        }
    }
    let _ = writeln!(y, "version: 1");
    let _ = writeln!(y, "name: {}", yaml_scalar(&name));
    let _ = writeln!(
        y,
        "about: {}",
        yaml_scalar(&format!(
            "launch {} of {}{}",
            capture.launch_number,
            capture
                .kernel
                .demangled
                .chars()
                .take(200)
                .collect::<String>(),
            request
                .triton
                .as_ref()
                .map(|t| format!(" (Triton: {})", t.config_text()))
                .unwrap_or_default()
        ))
    );
    if !launch.sizes.is_empty() {
        let sizes: Vec<String> = launch
            .sizes
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        let _ = writeln!(y, "sizes: {{ {} }}", sizes.join(", "));
    }
    if let (Some((decl, _)), "global") = (&request.source, kind) {
        let file = &decl.path;
        let dir = file.parent().unwrap_or(Path::new("."));
        let dir = repro_text::paths::relative_to(
            &std::fs::canonicalize(dir).unwrap_or(dir.to_path_buf()),
            &std::fs::canonicalize(out).unwrap_or(out.to_path_buf()),
        );
        let include = file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(
            y,
            "source:\n  include_dirs: [{}]\n  includes: [{}]",
            scalar(&dir, Context::Flow),
            scalar(&include, Context::Flow)
        );
    }
    let _ = writeln!(y, "tensors:");
    y.push_str(&tensor_lines);

    match (&launch.global, &demangled) {
        (Some(roles), Some(d)) => write_global(&mut y, capture, &launch.tensors, roles, d),
        _ => write_replay(
            &mut y,
            out,
            raw,
            capture,
            &launch.tensors,
            &ReplayEntry::KERNEL,
        )?,
    }

    write_reference(
        &mut y,
        request.reference.as_ref(),
        &after,
        "# production computed. To judge the math itself, give the op (docs/spec.md), e.g.\n\
         # `reference: { op: gemm, a: A, b: B, out: D }`, and `repro probe` this folder.",
    );
    let _ = writeln!(y, "check: {{ repeat: 2 }}");
    let arch = capture_arch(capture.device.cc);
    if kind == "global" {
        let _ = writeln!(y, "build: {{ arch: {arch}, flags: [-O3] }}   # production's flags belong here (or flags_from: its build log)");
    } else {
        let _ = writeln!(y, "build: {{ arch: {arch} }}   # harness.cu holds no kernel: flags change nothing of a replay");
    }
    let _ = writeln!(y, "capture:");
    let _ = writeln!(y, "  command: {}", yaml_scalar(&request.command));
    let _ = writeln!(y, "  kernel: {}", yaml_scalar(&capture.kernel.demangled));
    let _ = writeln!(y, "  launch: {}", capture.launch_number);
    if let Some(t) = &request.triton {
        let _ = writeln!(
            y,
            "  config: {}",
            yaml_scalar(&format!("Triton: {}", t.config_text()))
        );
        if let Some(location) = &t.location {
            let _ = writeln!(y, "  source: {}", yaml_scalar(location));
        }
    }
    write_production_files(&mut y, &before, &after);

    let spec = out.join("capture.yaml");
    std::fs::write(&spec, y).map_err(|e| format!("cannot write {}: {e}", spec.display()))?;
    Ok(Written {
        spec,
        kind,
        replay_reason: if kind == "replay" {
            replay_reason
        } else {
            None
        },
        tensors: launch.tensors,
    })
}

/// `kind: global`: the instantiation, the arguments, the `tma:` entries.
fn write_global(
    y: &mut String,
    capture: &Capture,
    tensors: &[BufferTensor],
    roles: &[ParamRole],
    d: &layout::Demangled,
) {
    let maps: Vec<&ParamRole> = roles
        .iter()
        .filter(|r| matches!(r, ParamRole::TensorMap { .. }))
        .collect();
    if !maps.is_empty() {
        let _ = writeln!(y, "tma:   # as production encoded them (cuTensorMapEncodeTiled); box in each tensor's shape order");
        for role in maps {
            let ParamRole::TensorMap { tensor, map, name } = role else {
                continue;
            };
            let t = &tensors[*tensor];
            let m = &capture.tensor_maps[*map];
            let in_shape_order = |values: &[u32]| -> Vec<u32> {
                (0..t.shape.len())
                    .map(|dim| values[t.driver_dim(dim)])
                    .collect()
            };
            let _ = writeln!(
                y,
                "  {name}: {{ tensor: {}, box: {}, element_strides: {}, swizzle: {}, interleave: {}, l2_promotion: {}, oob_fill: {} }}",
                t.name,
                list(&in_shape_order(&m.box_dims)),
                list(&in_shape_order(&m.element_strides)),
                layout::swizzle_name(m.swizzle).unwrap_or("none"),
                layout::interleave_name(m.interleave).unwrap_or("none"),
                layout::l2_name(m.l2_promotion).unwrap_or("none"),
                layout::oob_name(m.oob_fill).unwrap_or("none"),
            );
        }
    }
    let args: Vec<String> = roles
        .iter()
        .map(|r| match r {
            ParamRole::Pointer {
                tensor,
                element_offset: 0,
                ..
            } => tensors[*tensor].name.clone(),
            ParamRole::Pointer {
                tensor,
                element_offset,
                element,
            } => {
                format!(
                    "static_cast<{element}*>({}) + {element_offset}",
                    tensors[*tensor].name
                )
            }
            ParamRole::Null => "nullptr".into(),
            ParamRole::TensorMap { name, .. } => name.clone(),
            ParamRole::Size { name, .. } => name.clone(),
            ParamRole::Literal(text) => text.clone(),
        })
        .map(|a| Value::known(a).render())
        .collect();
    let _ = writeln!(
        y,
        "kernel:\n  kind: global\n  name: {}",
        yaml_scalar(&d.name)
    );
    if !d.template_args.is_empty() {
        let targs: Vec<String> = d
            .template_args
            .iter()
            .map(|a| Value::known(a.as_str()).render())
            .collect();
        let _ = writeln!(
            y,
            "  template_args: [{}]   # from the demangled name",
            targs.join(", ")
        );
    }
    let _ = writeln!(y, "  args: [{}]", args.join(", "));
    write_launch_shape(y, capture, "  ");
}

/// grid, block, cluster and smem, each field after `indent`.
fn write_launch_shape(y: &mut String, capture: &Capture, indent: &str) {
    let _ = writeln!(
        y,
        "{indent}grid: {}\n{indent}block: {}",
        list(&capture.grid),
        list(&capture.block)
    );
    if let Some(cluster) = capture.cluster.filter(|c| c.iter().product::<u32>() > 1) {
        let _ = writeln!(y, "{indent}cluster: {}", list(&cluster));
    }
    let _ = writeln!(y, "{indent}smem: {}", capture.smem);
}

/// Where a replayed launch is written: the spec's `kernel:` (one launch), or an entry of its
/// `launches:` (a window's), and the names its cubin and parameter bytes get beside the spec.
pub(crate) struct ReplayEntry<'a> {
    /// What opens the entry, up to and including `kind: replay`.
    pub opening: &'a str,
    /// Each field's indentation.
    pub indent: &'a str,
    pub cubin: &'a str,
    pub params: &'a str,
}

impl ReplayEntry<'static> {
    const KERNEL: ReplayEntry<'static> = ReplayEntry {
        opening: "kernel:\n  kind: replay",
        indent: "  ",
        cubin: "module.cubin",
        params: "params.bin",
    };
}

/// `kind: replay`: the cubin and the parameter bytes beside the spec, and their relocations.
/// A cubin already there (a window's launches of one module) is not copied again.
pub(crate) fn write_replay(
    y: &mut String,
    out: &Path,
    raw: &Path,
    capture: &Capture,
    tensors: &[BufferTensor],
    entry: &ReplayEntry,
) -> Result<(), String> {
    let Some(module) = &capture.module else {
        return Err(format!(
            "no cubin of the kernel's module was captured ({}), so it cannot be replayed; give --source DIR to rebuild it from source",
            capture.module_note.as_deref().unwrap_or("CUPTI did not hand it over")
        ));
    };
    for (from, to) in [
        (module.file.as_str(), entry.cubin),
        (capture.params.file.as_str(), entry.params),
    ] {
        let to = out.join(to);
        if to == out.join(entry.cubin) && to.exists() {
            continue;
        }
        // Read through the same checks as every file of the record, then written anew.
        let from = record::raw_file(raw, from)?;
        let bytes = record::read_file(&from, super::MAX_CUBIN_BYTES)?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&to, bytes)
            .map_err(|e| format!("cannot copy {} into {}: {e}", from.display(), out.display()))?;
    }
    let tensor_of = |buffer: usize, at: u64| {
        super::tensor::tensor_at(tensors, buffer, at)
            .map(|(i, offset)| (tensors[i].name.as_str(), offset))
    };
    let indent = entry.indent;
    let _ = writeln!(
        y,
        "{}\n{indent}name: {}   # the symbol in {}",
        entry.opening,
        yaml_scalar(&capture.kernel.mangled),
        entry.cubin
    );
    let _ = writeln!(
        y,
        "{indent}cubin: {}\n{indent}params: {}   # {} bytes, as production passed them",
        entry.cubin, entry.params, capture.params.size
    );
    write_launch_shape(y, capture, indent);
    if !capture.pointers.is_empty() || !capture.tensor_maps.is_empty() {
        let _ = writeln!(
            y,
            "{indent}relocate:   # where the parameters point into production's memory"
        );
    }
    for p in &capture.pointers {
        let Some((name, offset)) = tensor_of(p.buffer, p.byte_offset) else {
            continue;
        };
        let _ = writeln!(
            y,
            "{indent}  - {{ at: {}, tensor: {name}, offset: {offset} }}   # parameter {}",
            p.offset, p.param
        );
    }
    for m in &capture.tensor_maps {
        let Some((name, offset)) = m.buffer.and_then(|b| tensor_of(b, m.byte_offset)) else {
            return Err(format!(
                "the tensor map at parameter byte {} points into no captured buffer",
                m.offset
            ));
        };
        let Some((data_type, _)) = layout::tensor_map_type(m.data_type) else {
            return Err(format!(
                "the tensor map at parameter byte {} has data type {}, which repro does not know",
                m.offset, m.data_type
            ));
        };
        let names = [
            ("interleave", layout::interleave_name(m.interleave)),
            ("swizzle", layout::swizzle_name(m.swizzle)),
            ("l2_promotion", layout::l2_name(m.l2_promotion)),
            ("oob_fill", layout::oob_name(m.oob_fill)),
        ];
        if let Some((field, _)) = names.iter().find(|(_, v)| v.is_none()) {
            return Err(format!(
                "the tensor map at parameter byte {} has a {field} this repro does not know",
                m.offset
            ));
        }
        if m.kind != "tiled" {
            return Err(format!("the tensor map at parameter byte {} was encoded with {}: kind: replay re-encodes tiled maps only", m.offset, m.kind));
        }
        let _ = writeln!(
            y,
            "{indent}  - {{ at: {}, tensor: {name}, offset: {}, tensor_map: {{ data_type: {data_type}, dims: {}, strides: {}, box: {}, element_strides: {}, interleave: {}, swizzle: {}, l2_promotion: {}, oob_fill: {} }} }}   # parameter {}",
            m.offset,
            offset,
            list(&m.dims),
            list(&m.strides),
            list(&m.box_dims),
            list(&m.element_strides),
            names[0].1.unwrap_or_default(),
            names[1].1.unwrap_or_default(),
            names[2].1.unwrap_or_default(),
            names[3].1.unwrap_or_default(),
            m.param
        );
    }
    Ok(())
}

/// What a `--reference` op that names its outputs judges (docs/cli.md, `repro capture`): those
/// outputs alone. Anything else the launches left changed (a split-K workspace, FlashAttention's
/// dq accumulator) is the operator's scratch, written as an intermediate made from its state
/// before; a reference none of whose outputs changed is refused, naming what did change. Ops
/// that judge every output (`custom`, `file`) have no scratch.
pub(crate) struct ReferenceScratch<'a> {
    judged: Option<Vec<&'a str>>,
    scratch: Vec<String>,
}

impl<'a> ReferenceScratch<'a> {
    pub(crate) fn of(reference: Option<&'a crate::spec::model::ReferenceSpec>) -> Self {
        ReferenceScratch {
            judged: reference.and_then(crate::spec::model::ReferenceSpec::named_outputs),
            scratch: Vec::new(),
        }
    }

    /// Whether `name`, which the launches changed, is scratch (and so recorded).
    pub(crate) fn is_scratch(&mut self, name: &str) -> bool {
        let scratch = self
            .judged
            .as_ref()
            .is_some_and(|names| !names.contains(&name));
        if scratch {
            self.scratch.push(name.to_string());
        }
        scratch
    }

    /// The outputs the reference judges, for a scratch tensor's comment.
    pub(crate) fn judged(&self) -> String {
        self.judged.as_deref().unwrap_or_default().join(", ")
    }

    /// With no output left to compare: the refusal when the reference named outputs (`what`: the
    /// window or the launch), else `None`.
    pub(crate) fn refusal(&self, what: &str) -> Option<String> {
        self.judged.as_ref()?;
        Some(format!(
            "the reference judges {}, and {what} left none of them changed{}: name the operator's outputs in \
             --reference",
            self.judged(),
            if self.scratch.is_empty() {
                String::new()
            } else {
                format!(" (it changed {})", self.scratch.join(", "))
            }
        ))
    }
}

/// The spec's `reference:`: the op given with --reference, else production's outputs as the
/// expected values, with `op_hint` (comment lines) saying how to judge the math instead.
pub(crate) fn write_reference(
    y: &mut String,
    reference: Option<&crate::spec::model::ReferenceSpec>,
    after: &[(String, String)],
    op_hint: &str,
) {
    match reference {
        Some(r) => {
            let _ = writeln!(y, "reference:   # given with --reference");
            y.push_str(&crate::spec::yaml::reference_block(r));
        }
        None => {
            let _ = writeln!(y, "# What production wrote is the expected value: this checks that the harness computes what");
            let _ = writeln!(y, "{op_hint}");
            let expected: Vec<String> = after.iter().map(|(n, f)| format!("{n}: {f}")).collect();
            let _ = writeln!(
                y,
                "reference:\n  op: file\n  expected: {{ {} }}",
                expected.join(", ")
            );
        }
    }
}

/// The build target of the captured device: `sm_90a` from compute capability 9 on (the
/// architecture-specific features production's kernels may use), else `sm_XY`.
pub(crate) fn capture_arch(cc: [u32; 2]) -> String {
    format!("sm_{}{}{}", cc[0], cc[1], if cc[0] >= 9 { "a" } else { "" })
}

/// The `capture:` section's `before:` and `after:` maps (output name to file), one line each.
pub(crate) fn write_production_files(
    y: &mut String,
    before: &[(String, String)],
    after: &[(String, String)],
) {
    let pairs = |files: &[(String, String)]| {
        files
            .iter()
            .map(|(n, f)| format!("{n}: {f}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(y, "  before: {{ {} }}", pairs(before));
    let _ = writeln!(y, "  after: {{ {} }}", pairs(after));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Triton softmax's launch as the injection library records it: `y_ptr` and `x_ptr` are two
    /// tensors in one allocation of PyTorch's caching allocator (x at byte 0, y at byte 32), and
    /// two trailing scratch pointers that Triton's launcher adds (null).
    fn softmax_capture(raw: &Path) -> Capture {
        std::fs::create_dir_all(raw.join("buffers")).unwrap();
        let x: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let mut before = x.clone();
        before.extend([0xAAu8; 32]);
        let mut after = x.clone();
        after.extend((0..8).flat_map(|i| (0.125f32 * i as f32).to_le_bytes()));
        std::fs::write(raw.join("buffers/b0.before.bin"), &before).unwrap();
        std::fs::write(raw.join("buffers/b0.after.bin"), &after).unwrap();
        std::fs::write(raw.join("module.cubin"), b"cubin").unwrap();
        let mut params = Vec::new();
        params.extend(0x7000_0020u64.to_le_bytes()); // y_ptr
        params.extend(0x7000_0000u64.to_le_bytes()); // x_ptr
        params.extend(4i32.to_le_bytes()); // n_cols
        params.extend([0u8; 4]);
        params.extend([0u8; 16]); // global_scratch, profile_scratch
        std::fs::write(raw.join("params.bin"), &params).unwrap();
        serde_json::from_str(
            r#"{"kernel": {"mangled": "softmax_kernel", "demangled": "softmax_kernel"}, "launch_number": 1,
                "api": "cuLaunchKernelEx", "device": {"ordinal": 0, "name": "H200", "cc": [9, 0]},
                "grid": [2, 1, 1], "block": [128, 1, 1], "smem": 0,
                "params": {"file": "params.bin", "size": 40, "layout": [
                    {"index": 0, "offset": 0, "size": 8}, {"index": 1, "offset": 8, "size": 8},
                    {"index": 2, "offset": 16, "size": 4}, {"index": 3, "offset": 24, "size": 8},
                    {"index": 4, "offset": 32, "size": 8}]},
                "pointers": [{"param": 0, "offset": 0, "buffer": 0, "byte_offset": 32},
                             {"param": 1, "offset": 8, "buffer": 0, "byte_offset": 0}],
                "buffers": [{"id": 0, "size": 64, "before": "buffers/b0.before.bin",
                             "after": "buffers/b0.after.bin", "changed_bytes": 28}],
                "module": {"file": "module.cubin", "size": 5}}"#,
        )
        .unwrap()
    }

    fn softmax_triton() -> super::super::triton::TritonKernel {
        let ir = r#"#loc = loc("/app/softmax.py":21:0)
  tt.func public @softmax_kernel(%y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("y_ptr"(#loc)), %x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc)), %n_cols: i32 loc("n_cols"(#loc))) attributes {noinline = false} {"#;
        super::super::triton::TritonKernel {
            name: "softmax_kernel".into(),
            entry: PathBuf::from("/cache/E"),
            params: super::super::triton::signature(ir, "softmax_kernel"),
            options: serde_json::from_str(
                r#"{"num_warps": 4, "num_ctas": 1, "num_stages": 3, "triton_version": "3.6.0"}"#,
            )
            .unwrap(),
            location: Some("/app/softmax.py:21".into()),
            autotuned: None,
            notes: Vec::new(),
        }
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn a_triton_launch_is_named_by_its_signature_and_views_carve_its_tensors() {
        let tmp = tempfile::tempdir().unwrap();
        let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
        let capture = softmax_capture(&raw);
        std::fs::create_dir_all(&out).unwrap();
        let request = SpecRequest {
            command: "python3 softmax.py".into(),
            triton: Some(softmax_triton()),
            views: vec![
                super::super::views::parse("x_ptr=[2, n_cols]").unwrap(),
                super::super::views::parse("y_ptr=[2, n_cols]").unwrap(),
            ],
            ..SpecRequest::default()
        };
        let written = write(&raw, &out, &capture, &request).unwrap();
        assert_eq!(written.kind, "replay");
        let spec = read(&written.spec);
        for expected in [
            "# A Triton 3.6.0 kernel, written at /app/softmax.py:21.",
            "# Its config: num_warps=4, num_ctas=1, num_stages=3.",
            "# Integer parameters (for --tensor dimensions): n_cols = 4.",
            // The input view and the output view, each its own tensor; the allocation is gone.
            "  x_ptr: { dtype: f32, shape: [2, 4], init: { file: inputs/x_ptr.npy } }",
            "  y_ptr: { dtype: f32, shape: [2, 4], output: true }",
            "    - { at: 0, tensor: y_ptr, offset: 0 }   # parameter 0",
            "    - { at: 8, tensor: x_ptr, offset: 0 }   # parameter 1",
            "  config: \"Triton: num_warps=4, num_ctas=1, num_stages=3\"",
            "  source: /app/softmax.py:21",
        ] {
            assert!(spec.contains(expected), "{expected}\n{spec}");
        }
        assert!(!spec.contains("buffer0"), "{spec}");
        // The .npy files hold the views' own bytes: x from byte 0, y after the launch from byte 32.
        let npy = |name: &str| {
            let bytes = std::fs::read(out.join(name)).unwrap();
            bytes[bytes.len() - 32..].to_vec()
        };
        let x: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
        assert_eq!(npy("inputs/x_ptr.npy"), x);
        let y: Vec<u8> = (0..8)
            .flat_map(|i| (0.125f32 * i as f32).to_le_bytes())
            .collect();
        assert_eq!(npy("production/y_ptr.after.npy"), y);
        assert_eq!(npy("production/y_ptr.before.npy"), vec![0xAA; 32]);
    }

    #[test]
    fn without_views_the_shared_allocation_is_one_tensor_named_by_its_first_pointer() {
        let tmp = tempfile::tempdir().unwrap();
        let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
        let capture = softmax_capture(&raw);
        std::fs::create_dir_all(&out).unwrap();
        let request = SpecRequest {
            triton: Some(softmax_triton()),
            ..SpecRequest::default()
        };
        let spec = read(&write(&raw, &out, &capture, &request).unwrap().spec);
        // Typed by the pointer's element (f32), relocated at both offsets.
        assert!(
            spec.contains("  y_ptr: { dtype: f32, shape: [16], output: true }"),
            "{spec}"
        );
        assert!(
            spec.contains("    - { at: 8, tensor: y_ptr, offset: 0 }"),
            "{spec}"
        );
        assert!(
            spec.contains("    - { at: 0, tensor: y_ptr, offset: 32 }"),
            "{spec}"
        );
    }

    #[test]
    fn views_that_do_not_fit_are_refused_with_what_was_captured() {
        let tmp = tempfile::tempdir().unwrap();
        let (raw, out) = (tmp.path().join("raw"), tmp.path().join("out"));
        let capture = softmax_capture(&raw);
        std::fs::create_dir_all(&out).unwrap();
        for (view, says) in [
            ("y_ptr=[3, n_cols]", "reaches past it"),
            (
                "y_ptr=[2, rows]",
                "`rows` is no integer parameter (they are: n_cols = 4)",
            ),
            (
                "z_ptr=[2]",
                "`z_ptr` is no pointer parameter of softmax_kernel (its pointers: y_ptr, x_ptr)",
            ),
            ("x_ptr=[12]", "overlaps the view of"),
        ] {
            let mut views = vec![super::super::views::parse(view).unwrap()];
            if view.starts_with("x_ptr") {
                views.insert(0, super::super::views::parse("y_ptr=[2, n_cols]").unwrap());
            }
            let request = SpecRequest {
                triton: Some(softmax_triton()),
                views,
                ..SpecRequest::default()
            };
            let e = write(&raw, &out, &capture, &request).unwrap_err();
            assert!(e.contains(says), "{view}: {e}");
        }
        // Without names (no source, no Triton signature) a view cannot say which parameter.
        let request = SpecRequest {
            views: vec![super::super::views::parse("y_ptr=[2, 4]").unwrap()],
            ..SpecRequest::default()
        };
        let e = write(&raw, &out, &capture, &request).unwrap_err();
        assert!(e.contains("have no names: give --source DIR"), "{e}");
    }

    #[test]
    fn names_from_kernels() {
        assert_eq!(default_name("capture_app::tma_gemm"), "tma_gemm_capture");
        assert_eq!(default_name("_Z3fooPf"), "_z3foopf_capture");
        assert_eq!(default_name("9x"), "kernel_9x_capture");
    }
}
