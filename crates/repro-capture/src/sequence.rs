//! A window of launches (`repro capture --launches N` / `--through REGEX`, docs/cli.md) as a spec
//! of `launches:`, each a `kind: replay` entry (docs/spec.md, `kind: replay`, "In a sequence").
//!
//! The injection library records each launch of the window as it records one launch (a launch
//! record: module, symbol, parameter bytes, shape, pointers, tensor maps) and the allocations
//! they point into once for the whole window (record.rs, `Window`). Each launch is laid out by
//! the one-launch code (layout.rs, over its own record with the window's buffers it reaches) and
//! written by write.rs's replay writer; this module merges their tensors, one per allocation,
//! shared by name across the launches, and decides what each allocation is to the operator:
//!
//! - changed by the window (its copy after the last launch differs from the one before the first
//!   launch that reached it): an output, with `capture.before`/`after`;
//! - changed by a launch and left as it was found: an intermediate (`intermediate: true`), made
//!   from its captured contents before every call;
//! - never changed: an input.
//!
//! `--tensor` views name a launch's parameters (`NAME=...` every launch's, `launchK.NAME=...` one
//! launch's), each made by views.rs; `--source` is one launch's, and refused here.

use std::fmt::Write as _;
use std::path::Path;

use crate::spec::dtype::DType;

use super::layout;
use super::record::{self, read_buffer, Window};
use super::tensor::BufferTensor;
use super::triton::TritonKernel;
use super::write::{self, ReplayEntry, SpecRequest, Written};
use super::{CaptureError, CaptureRequest, WindowRequest};

/// What a window cannot be captured with (exit 2 before the program runs).
pub fn refuse_unsupported(request: &CaptureRequest) -> Result<(), String> {
    if request.source.is_some() {
        return Err("--source rebuilds one launch from its source (kind: global); a window (--launches, --through) \
                    replays each of its launches from production's cubin: drop --source, or capture one launch"
            .into());
    }
    Ok(())
}

/// `, and the 3 launches from it, whatever their kernel` for the line that starts the program.
pub fn describe(window: &WindowRequest) -> String {
    match (&window.launches, &window.through) {
        (Some(n), None) => format!(", and the {n} launches from it, whatever their kernel"),
        (None, Some(t)) => format!(", and the launches after it through the first matching `{t}`"),
        (Some(n), Some(t)) => {
            format!(", and the launches after it through the first matching `{t}`, at most {n}")
        }
        (None, None) => String::new(),
    }
}

/// Writes the window's spec and scaffolds it, as `capture` does for one launch.
pub fn finish(
    raw: &Path,
    out: &Path,
    window: &Window,
    request: &CaptureRequest,
) -> Result<u8, CaptureError> {
    let fail = |m: String| CaptureError::Run(m);
    let tritons: Vec<Option<TritonKernel>> = window
        .launches
        .iter()
        .map(|launch| super::triton_kernel(raw, launch))
        .collect();
    eprintln!("capture: a window of {} launches:", window.launches.len());
    for (k, launch) in window.launches.iter().enumerate() {
        eprintln!(
            "capture:   launch {}: {} (grid {}, block {}){}",
            k + 1,
            launch.kernel.demangled,
            write::list(&launch.grid),
            write::list(&launch.block),
            tritons[k]
                .as_ref()
                .map(|t| format!(", Triton: {}", t.config_text()))
                .unwrap_or_default()
        );
        if let Some(error) = &launch.launch_error {
            eprintln!("capture:   launch {} failed in production: {error}", k + 1);
        }
    }
    for note in memory_notes(window, None) {
        eprintln!("capture: note: {note}");
    }
    let written = write_sequence(raw, out, window, &request.spec, &tritons).map_err(fail)?;
    super::scaffold(raw, out, &written)
}

/// The memsets and copies the window made into memory it had already copied, in words.
/// `names` gives each buffer's tensor name once the tensors are known.
fn memory_notes(window: &Window, names: Option<&[(usize, String)]>) -> Vec<String> {
    window
        .memory_operations
        .iter()
        .map(|m| {
            let buffer = names
                .and_then(|n| n.iter().find(|(id, _)| *id == m.buffer))
                .map(|(_, name)| match *name == format!("buffer{}", m.buffer) {
                    true => name.clone(),
                    false => format!("{name} (buffer {})", m.buffer),
                })
                .unwrap_or_else(|| format!("buffer {}", m.buffer));
            let between = if m.after_launch as usize >= window.launches.len() {
                format!("after launch {}", m.after_launch)
            } else {
                format!("between launches {} and {}", m.after_launch, m.after_launch + 1)
            };
            format!(
                "{} wrote into {buffer} at {} {between} of the window: replaying the launches does not repeat it, \
                 so a tensor it wrote may not reproduce bit for bit",
                m.api, m.address
            )
        })
        .collect()
}

/// One tensor per allocation of the window, from the launches' own layouts: the first launch
/// that types it (a tensor map, a pointer's element type) gives its dtype and shape, the first
/// that names it (a parameter's name) its name; the rest stay the allocation's bytes.
fn merge_tensors(window: &Window, per_launch: &[Vec<BufferTensor>]) -> Vec<BufferTensor> {
    let mut taken: Vec<String> = Vec::new();
    let mut merged = Vec::new();
    for buffer in &window.buffers {
        let fallback = format!("buffer{}", buffer.id);
        let candidates: Vec<&BufferTensor> = per_launch
            .iter()
            .flatten()
            .filter(|t| t.buffer == buffer.id && !t.view)
            .collect();
        let Some(first) = candidates.first() else {
            continue;
        };
        // The furthest byte any launch's pointer or map reaches into it: a tensor that a map
        // typed over part of the allocation cannot hold another launch's pointer past that part.
        let reach = window
            .launches
            .iter()
            .flat_map(|l| {
                l.pointers
                    .iter()
                    .filter(|p| p.buffer == buffer.id)
                    .map(|p| p.byte_offset)
                    .chain(
                        l.tensor_maps
                            .iter()
                            .filter(|m| m.buffer == Some(buffer.id))
                            .map(|m| m.byte_offset),
                    )
            })
            .max()
            .unwrap_or(0);
        let holds = |t: &&&BufferTensor| t.bytes > reach;
        let typed = candidates
            .iter()
            .find(|t| t.dtype != DType::U8 && holds(t))
            .or_else(|| candidates.iter().find(holds))
            .unwrap_or(first);
        let named = candidates
            .iter()
            .map(|t| t.name.as_str())
            .find(|n| !n.starts_with(&fallback))
            .unwrap_or(&fallback);
        let mut tensor = (*typed).clone();
        tensor.name = unique(named, &mut taken);
        tensor.output = buffer.after.is_some();
        merged.push(tensor);
    }
    merged
}

/// A C++ kernel's allocations typed by its demangled name, when nothing else types them: a whole
/// pointer parameter `__nv_bfloat16 const*` at an allocation's first byte makes it bf16 (a window
/// has no `--source`; the one-launch capture keeps its bytes, as it always did).
fn type_by_demangled_name(tensors: &mut [BufferTensor], capture: &record::Capture) {
    let Some(demangled) = layout::parse_demangled(&capture.kernel.demangled) else {
        return;
    };
    for t in tensors
        .iter_mut()
        .filter(|t| !t.view && t.dtype == DType::U8 && t.start == 0)
    {
        let whole_parameter = capture.pointers.iter().find(|p| {
            p.buffer == t.buffer
                && p.byte_offset == 0
                && capture
                    .params
                    .layout
                    .get(p.param)
                    .is_some_and(|slot| slot.offset == p.offset && slot.size == 8)
        });
        let Some(text) = whole_parameter.and_then(|p| demangled.params.get(p.param)) else {
            continue;
        };
        let Some(pointee) = text.trim().strip_suffix('*').filter(|e| !e.contains('*')) else {
            continue;
        };
        let element: Vec<&str> = pointee
            .split_whitespace()
            .filter(|word| !matches!(*word, "const" | "volatile" | "__restrict__"))
            .collect();
        let dtype = crate::import::cuda::spec_dtype(&element.join(" ")).and_then(DType::from_name);
        if let Some(dtype) = dtype.filter(|d| *d != DType::U8 && t.bytes % d.bytes() as u64 == 0) {
            t.dtype = dtype;
            t.shape = vec![t.bytes / dtype.bytes() as u64];
            t.origin = "the demangled name's pointer type, over the whole allocation".into();
        }
    }
}

/// `--tensor` in a window: `NAME=...` carves a tensor at the pointer parameter NAME of every
/// launch that has one (they must point at the same bytes, or the views are told apart with
/// `launchK.NAME`), `launchK.NAME=...` at launch K's only. Each launch's view is made by the
/// one-launch code (views.rs, with its checks and messages); views of several launches over the
/// same bytes are one tensor. An allocation a view is carved from is then its views alone: every
/// pointer and tensor map of every launch into it must land in one (else exit 2, naming it).
fn apply_views(
    tensors: &mut Vec<BufferTensor>,
    raw: &Path,
    window: &Window,
    records: &[record::Capture],
    params: &[Vec<u8>],
    tritons: &[Option<TritonKernel>],
    views: &[super::views::TensorView],
) -> Result<(), String> {
    let mut carved: Vec<BufferTensor> = Vec::new();
    for view in views {
        if let Some(k) = view.launch.filter(|k| *k > records.len()) {
            return Err(format!(
                "--tensor {}: the window has {} launches, no launch {k}",
                view.text,
                records.len()
            ));
        }
        let mut found = false;
        for (k, capture) in records.iter().enumerate() {
            if view.launch.is_some_and(|wanted| wanted != k + 1) {
                continue;
            }
            let decl = tritons
                .get(k)
                .and_then(Option::as_ref)
                .map(TritonKernel::declaration);
            // `NAME@BYTE`: every launch with a pointer at that byte of its parameters (the
            // kernels of one operator that take one parameter struct).
            let has_it = match view.at {
                Some(byte) => capture.pointers.iter().any(|p| p.offset == byte),
                None => decl.as_ref().is_some_and(|d| {
                    d.params.iter().any(|p| {
                        p.name.as_deref() == Some(view.name.as_str())
                            && matches!(p.ty, crate::import::cuda::ParamType::Pointer { .. })
                    })
                }),
            };
            // A view for every launch skips those without the parameter; one for launch K says
            // why launch K has none (views.rs's message).
            if !has_it && view.launch.is_none() {
                continue;
            }
            found = true;
            let mut scratch = Vec::new();
            super::views::apply(
                &mut scratch,
                raw,
                capture,
                &params[k],
                decl.as_ref(),
                &[],
                std::slice::from_ref(view),
            )
            .map_err(|e| format!("launch {} of the window: {e}", k + 1))?;
            let origin = format!("--tensor {}", view.text);
            let Some(mut tensor) = scratch.into_iter().find(|t| t.view && t.origin == origin)
            else {
                continue;
            };
            let same = |t: &BufferTensor| {
                t.buffer == tensor.buffer && t.start == tensor.start && t.bytes == tensor.bytes
            };
            if carved.iter().any(|t| same(t) && t.name == tensor.name) {
                continue;
            }
            if let Some(other) = carved.iter().find(|t| {
                t.buffer == tensor.buffer
                    && t.start < tensor.start + tensor.bytes
                    && tensor.start < t.start + t.bytes
            }) {
                return Err(format!(
                    "--tensor {}: launch {}'s view overlaps the view {} ({}); views of several launches over one \
                     allocation must be the same bytes, or apart",
                    view.text,
                    k + 1,
                    other.name,
                    other.origin
                ));
            }
            if carved.iter().any(|t| t.name == tensor.name) {
                tensor.name = format!("{}_launch{}", tensor.name, k + 1);
            }
            tensor.origin = format!("{origin} (launch {})", k + 1);
            carved.push(tensor);
        }
        if !found && view.at.is_some() {
            return Err(format!(
                "--tensor {}: no launch of the window holds a pointer into a device allocation at byte {} of its \
                 parameters (a capture without views lists them: `at:` in each launch's `relocate:`)",
                view.text,
                view.at.unwrap_or_default()
            ));
        }
        if !found {
            return Err(format!(
                "--tensor {}: no launch of the window has a pointer parameter `{}` (parameters are named by a \
                 Triton kernel's signature; a window's C++ kernels have no names)",
                view.text, view.name
            ));
        }
    }
    if carved.is_empty() {
        return Ok(());
    }
    // Every launch's pointers and maps into an allocation with views must land in a view.
    for (k, capture) in records.iter().enumerate() {
        let reaches = capture
            .pointers
            .iter()
            .map(|p| (p.buffer, p.byte_offset, format!("parameter {}", p.param)))
            .chain(capture.tensor_maps.iter().filter_map(|m| {
                Some((
                    m.buffer?,
                    m.byte_offset,
                    format!("the tensor map of parameter {}", m.param),
                ))
            }));
        for (buffer, at, what) in reaches {
            let viewed = carved.iter().any(|t| t.buffer == buffer);
            let inside = carved
                .iter()
                .any(|t| t.buffer == buffer && t.start <= at && at < t.start + t.bytes);
            if viewed && !inside {
                return Err(format!(
                    "launch {} of the window ({}): its {what} points at byte {at} of an allocation that views are \
                     carved from, outside every view: give it a view too (--tensor launch{}.NAME=[...])",
                    k + 1,
                    capture.kernel.demangled,
                    k + 1
                ));
            }
        }
    }
    // What the window wrote outside every view would be written past the views' tensors in the
    // harness: a view too small, or a tensor the kernels write that has no view.
    for buffer in window
        .buffers
        .iter()
        .filter(|b| carved.iter().any(|v| v.buffer == b.id))
    {
        let (Some(before), Some(after)) = (&buffer.before, &buffer.after) else {
            continue;
        };
        let before = read_buffer(raw, before, buffer.size)?;
        let after = read_buffer(raw, after, buffer.size)?;
        let outside: Vec<usize> = (0..before.len())
            .filter(|&at| before[at] != after[at])
            .filter(|&at| {
                !carved.iter().any(|v| {
                    v.buffer == buffer.id && v.start <= at as u64 && (at as u64) < v.start + v.bytes
                })
            })
            .collect();
        if let (Some(first), Some(last)) = (outside.first(), outside.last()) {
            let names: Vec<&str> = carved
                .iter()
                .filter(|v| v.buffer == buffer.id)
                .map(|v| v.name.as_str())
                .collect();
            return Err(format!(
                "the window changed {} bytes of the allocation {} is carved from outside every view (bytes {first} to \
                 {last}): a view too small, or a tensor the launches write with no view of its own",
                outside.len(),
                names.join(", ")
            ));
        }
    }
    tensors.retain(|t| !carved.iter().any(|v| v.buffer == t.buffer));
    for t in tensors.iter_mut() {
        if carved.iter().any(|v| v.name == t.name) {
            t.name = format!("buffer{}", t.buffer);
        }
    }
    tensors.extend(carved);
    // In the allocations' order, a view where its allocation was.
    tensors.sort_by_key(|t| (t.buffer, t.start));
    Ok(())
}

/// `name`, or `name_2`, `name_3`... when another allocation took it.
fn unique(name: &str, taken: &mut Vec<String>) -> String {
    let mut candidate = name.to_string();
    let mut k = 2;
    while taken.contains(&candidate) {
        candidate = format!("{name}_{k}");
        k += 1;
    }
    taken.push(candidate.clone());
    candidate
}

/// What the window did to an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Input,
    Intermediate,
    Output,
}

fn launches_text(launches: &[usize]) -> String {
    let numbers: Vec<String> = launches.iter().map(usize::to_string).collect();
    match numbers.as_slice() {
        [one] => format!("launch {one}"),
        _ => format!("launches {}", numbers.join(", ")),
    }
}

/// Writes the spec folder `out` of a window: `capture.yaml` with `launches:`, the inputs, the
/// outputs before and after the window, each launch's parameter bytes and each module's cubin
/// under `replay/`.
pub fn write_sequence(
    raw: &Path,
    out: &Path,
    window: &Window,
    request: &SpecRequest,
    tritons: &[Option<TritonKernel>],
) -> Result<Written, String> {
    let Some(first) = window.launches.first() else {
        return Err("the window holds no launch".into());
    };
    // Each launch laid out by the one-launch code, over the window's buffers it reaches.
    let mut records = Vec::new();
    let mut per_launch = Vec::new();
    let mut launch_params = Vec::new();
    for k in 0..window.launches.len() {
        let capture = window.launch(k);
        let label = format!(
            "launch {} of the window ({})",
            k + 1,
            capture.kernel.demangled
        );
        let params_path = record::raw_file(raw, &capture.params.file)?;
        let params = record::read_file(&params_path, crate::spec::MAX_PARAM_BYTES)
            .map_err(|e| format!("{label}: {e}"))?;
        let template_args = layout::parse_demangled(&capture.kernel.demangled)
            .map(|d| d.template_args)
            .unwrap_or_default();
        let decl = tritons
            .get(k)
            .and_then(Option::as_ref)
            .map(TritonKernel::declaration);
        let mut launch =
            layout::lay_out(raw, &capture, &params, decl.as_ref(), &template_args, &[])
                .map_err(|e| format!("{label}: {e}"))?;
        if decl.is_none() {
            type_by_demangled_name(&mut launch.tensors, &capture);
        }
        per_launch.push(launch.tensors);
        records.push(capture);
        launch_params.push(params);
    }
    let mut tensors = merge_tensors(window, &per_launch);
    apply_views(
        &mut tensors,
        raw,
        window,
        &records,
        &launch_params,
        tritons,
        &request.views,
    )?;
    if let Some(r) = &request.reference {
        if matches!(r.op.as_str(), "gemm" | "grouped_gemm")
            && !r.a.is_empty()
            && !r.b.is_empty()
            && !r.out.is_empty()
        {
            layout::shape_as_gemm(&mut tensors, &r.a, &r.b, &r.out)?;
        }
    }

    // Files first: a spec never names a file that is not there.
    for dir in ["inputs", "production", "replay"] {
        let path = out.join(dir);
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    }
    let mut reference_scratch = write::ReferenceScratch::of(request.reference.as_ref());
    let mut tensor_lines = String::new();
    let mut before = Vec::new();
    let mut after = Vec::new();
    for t in &tensors {
        let buffer = window
            .buffers
            .iter()
            .find(|b| b.id == t.buffer)
            .expect("every tensor is a buffer");
        let Some(before_file) = &buffer.before else {
            return Err(format!(
                "buffer {} ({} bytes) could not be copied before launch {} of the window: {}",
                buffer.id,
                buffer.size,
                buffer.first_launch,
                buffer.error.as_deref().unwrap_or("no reason given")
            ));
        };
        let all_bytes = read_buffer(raw, before_file, buffer.size)?;
        let bytes = &all_bytes[t.start as usize..];
        let after_bytes = match &buffer.after {
            Some(after_file) => Some(read_buffer(raw, after_file, buffer.size)?),
            None => None,
        };
        // A view is an output where the window changed its own bytes, else an input: which
        // launch wrote which part of an allocation is not known, so no view is an intermediate.
        let span = t.start as usize..(t.start + t.bytes) as usize;
        let view_changed = after_bytes.as_ref().map_or(0, |after| {
            after[span.clone()]
                .iter()
                .zip(&all_bytes[span.clone()])
                .filter(|(a, b)| a != b)
                .count() as u64
        });
        let role = match (&after_bytes, buffer.written_by.is_empty()) {
            _ if t.view && view_changed > 0 => Role::Output,
            _ if t.view => Role::Input,
            (Some(_), _) => Role::Output,
            (None, false) => Role::Intermediate,
            (None, true) => Role::Input,
        };
        // A reference that names its outputs judges those alone: the window's other outputs
        // are its scratch (write::ReferenceScratch).
        let scratch = role == Role::Output && reference_scratch.is_scratch(&t.name);
        let role = if scratch { Role::Intermediate } else { role };
        let changed_bytes = if t.view {
            view_changed
        } else {
            buffer.changed_bytes
        };
        let shape = write::list(&t.shape);
        let layout = t.layout_fields();
        let managed = if buffer.managed {
            "; managed memory in production"
        } else {
            ""
        };
        let first_seen = format!("first reached by launch {}", buffer.first_launch);
        match role {
            Role::Output => {
                let after_bytes = after_bytes.as_deref().expect("an output has its after");
                let (b, a) = (
                    format!("production/{}.before.npy", t.name),
                    format!("production/{}.after.npy", t.name),
                );
                write::write_npy(&out.join(&b), t, bytes)?;
                write::write_npy(&out.join(&a), t, &after_bytes[t.start as usize..])?;
                before.push((t.name.clone(), b));
                after.push((t.name.clone(), a));
                let _ = writeln!(
                    tensor_lines,
                    "  {}: {{ dtype: {}, shape: {shape}{layout}, output: true }}   # {} bytes changed by the window ({} wrote it), {first_seen}; shape from {}{managed}",
                    t.name,
                    t.dtype.name(),
                    changed_bytes,
                    launches_text(&buffer.written_by),
                    t.origin
                );
            }
            Role::Intermediate | Role::Input => {
                let file = format!("inputs/{}.npy", t.name);
                write::write_npy(&out.join(&file), t, bytes)?;
                let (field, why) = if scratch {
                    (
                        ", intermediate: true",
                        format!(
                            "{} changed it and the reference judges only {}: the operator's scratch, made from its state before the window before every call; ",
                            launches_text(&buffer.written_by),
                            reference_scratch.judged()
                        ),
                    )
                } else if role == Role::Intermediate {
                    (
                        ", intermediate: true",
                        format!(
                            "{} wrote it and the window left it as it found it: the operator's own state, made from this file before every call; ",
                            launches_text(&buffer.written_by)
                        ),
                    )
                } else {
                    ("", String::new())
                };
                let _ = writeln!(
                    tensor_lines,
                    "  {}: {{ dtype: {}, shape: {shape}{layout}{field}, init: {{ file: {file} }} }}   # {why}{first_seen}; shape from {}{managed}",
                    t.name,
                    t.dtype.name(),
                    t.origin
                );
            }
        }
    }
    if let Some(refusal) = reference_scratch
        .refusal("the window")
        .filter(|_| after.is_empty())
    {
        return Err(refusal);
    }
    if after.is_empty() {
        return Err(format!(
            "the window's {} launches changed no buffer they can reach: there is no output to reproduce (did a launch fault, or write only through memory no parameter points into?)",
            window.launches.len()
        ));
    }

    let demangled = layout::parse_demangled(&first.kernel.demangled);
    let name = request.name.clone().unwrap_or_else(|| {
        write::default_name(
            demangled
                .as_ref()
                .map_or(first.kernel.mangled.as_str(), |d| d.name.as_str()),
        )
    });
    let one_line = |text: &str| text.replace('\n', " ");
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Captured by `repro capture` from: {}",
        one_line(&request.command)
    );
    let bounds = &window.window;
    let _ = writeln!(
        y,
        "# A window of {} launches, from launch {} of the kernels matching `{}`{}, on {} (compute capability {}.{}):",
        window.launches.len(),
        bounds.first,
        one_line(&bounds.kernel),
        bounds
            .through
            .as_deref()
            .map(|t| format!(" through the first later launch matching `{}`", one_line(t)))
            .unwrap_or_default(),
        one_line(&first.device.name),
        first.device.cc[0],
        first.device.cc[1]
    );
    for (k, launch) in window.launches.iter().enumerate() {
        let _ = writeln!(
            y,
            "#   launch {}: {}, through {}{}",
            k + 1,
            one_line(&launch.kernel.demangled),
            launch.api,
            tritons
                .get(k)
                .and_then(Option::as_ref)
                .map(|t| format!(
                    " (a Triton kernel, {}; {})",
                    t.location.as_deref().unwrap_or("its source unknown"),
                    t.config_text()
                ))
                .unwrap_or_default()
        );
        if let Some(error) = &launch.launch_error {
            let _ = writeln!(
                y,
                "#   launch {} failed in production: {}",
                k + 1,
                one_line(error)
            );
        }
    }
    let names: Vec<(usize, String)> = tensors.iter().map(|t| (t.buffer, t.name.clone())).collect();
    for note in memory_notes(window, Some(&names)) {
        let _ = writeln!(y, "# Note: {note}.");
    }
    let _ = writeln!(y, "# `repro run` on this folder first runs the whole sequence once on production's inputs and says");
    let _ = writeln!(y, "# whether each output is reproduced bit for bit (capture.after), then runs the usual checks.");
    let _ = writeln!(y, "# Each launch is replayed from production's machine code (replay/*.cubin) with its own parameter");
    let _ = writeln!(
        y,
        "# bytes; the tensors are the allocations the launches point into, shared by name."
    );
    let _ = writeln!(y, "version: 1");
    let _ = writeln!(y, "name: {}", write::yaml_scalar(&name));
    let short: Vec<String> = window
        .launches
        .iter()
        .map(|l| {
            layout::parse_demangled(&l.kernel.demangled)
                .map(|d| d.name)
                .unwrap_or_else(|| l.kernel.demangled.chars().take(60).collect())
        })
        .collect();
    let _ = writeln!(
        y,
        "about: {}",
        write::yaml_scalar(&format!(
            "a window of {} launches from launch {} of `{}`: {}",
            window.launches.len(),
            bounds.first,
            bounds.kernel,
            short.join(" -> ").chars().take(400).collect::<String>()
        ))
    );
    let _ = writeln!(y, "tensors:");
    y.push_str(&tensor_lines);
    let _ = writeln!(y, "launches:");
    for (k, capture) in records.iter().enumerate() {
        let module = capture.module.as_ref().ok_or_else(|| {
            format!(
                "launch {} of the window ({}): no cubin of its module was captured ({}), so it cannot be replayed",
                k + 1,
                capture.kernel.demangled,
                capture
                    .module_note
                    .as_deref()
                    .unwrap_or("CUPTI did not hand it over")
            )
        })?;
        // launches/m2.cubin -> replay/module2.cubin: launches of one module share its file.
        let stem = Path::new(&module.file)
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix('m'))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(str::to_string)
            .unwrap_or_else(|| format!("_of_launch{}", k + 1));
        let cubin = format!("replay/module{stem}.cubin");
        let params = format!("replay/launch{}.params.bin", k + 1);
        let opening = format!("  - kind: replay   # launch {}: {}", k + 1, short[k]);
        write::write_replay(
            &mut y,
            out,
            raw,
            capture,
            &tensors,
            &ReplayEntry {
                opening: &opening,
                indent: "    ",
                cubin: &cubin,
                params: &params,
            },
        )
        .map_err(|e| {
            format!(
                "launch {} of the window ({}): {e}",
                k + 1,
                capture.kernel.demangled
            )
        })?;
    }
    write::write_reference(
        &mut y,
        request.reference.as_ref(),
        &after,
        "# production computed. To judge the math itself, give the op (docs/spec.md).",
    );
    let _ = writeln!(y, "check: {{ repeat: 2 }}");
    let _ = writeln!(
        y,
        "build: {{ arch: {} }}   # harness.cu holds no kernel: flags change nothing of a replay",
        write::capture_arch(first.device.cc)
    );
    let _ = writeln!(y, "capture:");
    let _ = writeln!(y, "  command: {}", write::yaml_scalar(&request.command));
    let _ = writeln!(
        y,
        "  kernel: {}",
        write::yaml_scalar(&first.kernel.demangled)
    );
    let _ = writeln!(y, "  launch: {}", bounds.first);
    let _ = writeln!(y, "  window:");
    let _ = writeln!(
        y,
        "    kernel: {}   # --kernel",
        write::yaml_scalar(&bounds.kernel)
    );
    if let Some(n) = bounds.launches {
        let _ = writeln!(y, "    launches: {n}   # --launches");
    }
    if let Some(t) = &bounds.through {
        let _ = writeln!(y, "    through: {}   # --through", write::yaml_scalar(t));
    }
    let _ = writeln!(y, "    kernels:");
    for launch in &window.launches {
        let _ = writeln!(
            y,
            "      - {}",
            write::yaml_scalar(&launch.kernel.demangled)
        );
    }
    write::write_production_files(&mut y, &before, &after);

    let spec = out.join("capture.yaml");
    std::fs::write(&spec, y).map_err(|e| format!("cannot write {}: {e}", spec.display()))?;
    Ok(Written {
        spec,
        kind: "replay",
        replay_reason: Some(format!(
            "a window of {} launches is replayed launch by launch",
            window.launches.len()
        )),
        tensors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two launches over one allocation of 64 bytes: launch 1 points at byte 0, launch 2 at
    /// byte 48.
    fn window() -> Window {
        let launch = |index: usize, at: u64| {
            format!(
                r#"{{"kernel": {{"mangled": "k{index}", "demangled": "k{index}"}}, "launch_number": {index},
                    "device": {{"ordinal": 0, "name": "H100", "cc": [9, 0]}},
                    "grid": [1, 1, 1], "block": [32, 1, 1], "smem": 0,
                    "params": {{"file": "launches/l{index}.params.bin", "size": 8,
                               "layout": [{{"index": 0, "offset": 0, "size": 8}}]}},
                    "pointers": [{{"param": 0, "offset": 0, "buffer": 0, "byte_offset": {at}}}],
                    "buffers": []}}"#
            )
        };
        serde_json::from_str(&format!(
            r#"{{"window": {{"kernel": "k1", "first": 1, "launches": 2}},
                "launches": [{}, {}],
                "buffers": [{{"id": 0, "size": 64, "before": "buffers/b0.before.bin",
                             "after": "buffers/b0.after.bin", "first_launch": 1, "written_by": [2]}}]}}"#,
            launch(1, 0),
            launch(2, 48)
        ))
        .unwrap()
    }

    fn tensor(name: &str, dtype: DType, bytes: u64) -> BufferTensor {
        BufferTensor {
            buffer: 0,
            name: name.into(),
            dtype,
            shape: vec![bytes / dtype.bytes() as u64],
            col_major: false,
            strides: None,
            view: false,
            start: 0,
            bytes,
            output: false,
            origin: String::new(),
        }
    }

    /// The first name that is not the allocation's fallback, the first type that holds every
    /// launch's pointer: a map's 32 typed bytes cannot hold launch 2's pointer at byte 48.
    #[test]
    fn one_tensor_per_allocation_named_and_typed_by_the_launches() {
        let window = window();
        let merged = merge_tensors(
            &window,
            &[
                vec![tensor("buffer0", DType::Bf16, 32)],
                vec![tensor("x_ptr", DType::F32, 64)],
            ],
        );
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].name, "x_ptr");
        assert_eq!(merged[0].dtype, DType::F32);
        assert!(merged[0].output);
        let merged = merge_tensors(
            &window,
            &[
                vec![tensor("buffer0", DType::Bf16, 32)],
                vec![tensor("buffer0", DType::U8, 64)],
            ],
        );
        assert_eq!((merged[0].dtype, merged[0].bytes), (DType::U8, 64));
        assert_eq!(merged[0].name, "buffer0");
    }

    #[test]
    fn the_window_is_described_as_asked() {
        let describe_flags = |launches, through: Option<&str>| {
            describe(&WindowRequest {
                launches,
                through: through.map(str::to_string),
            })
        };
        assert_eq!(
            describe_flags(Some(3), None),
            ", and the 3 launches from it, whatever their kernel"
        );
        assert!(describe_flags(Some(8), Some("reduce")).ends_with("matching `reduce`, at most 8"));
    }
}
