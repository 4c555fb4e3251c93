//! What `repro capture` writes into a spec (docs/spec.md, `kind: replay` and `capture`):
//! `kind: replay`, a captured module's own machine code launched with the captured parameter
//! bytes (the `kernel:`, or any entry of `launches:`), and `capture:`, production's outputs
//! before and after its launch.
//!
//! A replayed launch has no source: the harness loads the cubin, takes the parameter bytes as
//! they were, and rewrites only what points into production's memory (`relocate:`): each
//! address becomes the same byte of the harness's tensor, each CUtensorMap is encoded again, with
//! the parameters production encoded it with, over the harness's tensor.

use std::path::PathBuf;

use super::model::{KernelSpec, TensorMapSpec, Value};
use super::resolved::{
    CaptureResolved, KernelLaunch, LaunchKind, Relocation, ReplayLaunch, TensorSpecResolved,
};
use super::validate::Validator;

/// Kernel parameters are at most 32 KiB (CUDA 12.1+ on Volta and later).
pub const MAX_PARAM_BYTES: u64 = 32 * 1024;

/// The `CU_TENSOR_MAP_DATA_TYPE_*` names a tensor map may have, lowercase without the prefix,
/// in the enum's order, with their element sizes in bytes (the packed 4- and 6-bit types count
/// as one byte: a box's inner extent is checked by the driver, not here).
pub const TENSOR_MAP_TYPES: [(&str, u64); 16] = [
    ("uint8", 1),
    ("uint16", 2),
    ("uint32", 4),
    ("int32", 4),
    ("uint64", 8),
    ("int64", 8),
    ("float16", 2),
    ("float32", 4),
    ("float64", 8),
    ("bfloat16", 2),
    ("float32_ftz", 4),
    ("tfloat32", 4),
    ("tfloat32_ftz", 4),
    ("16u4_align8b", 1),
    ("16u4_align16b", 1),
    ("16u6_align16b", 1),
];

impl Validator<'_> {
    /// `kind: replay`: a cubin, the mangled symbol, the parameter bytes and their relocations;
    /// `k` is the `kernel:` or an entry of `launches:`, its errors named under `path` (`kernel`
    /// or `launches[i]`).
    pub(super) fn replay_launch(
        &mut self,
        k: &KernelSpec,
        path: &str,
        tensors: &[TensorSpecResolved],
    ) -> Option<KernelLaunch> {
        for (field, given) in [
            ("gemm", k.gemm.is_some()),
            ("template_args", !k.template_args.is_empty()),
            ("args", !k.args.is_empty()),
            ("setup", k.setup.is_some()),
        ] {
            if given {
                self.key_error(
                    &format!("{path}.{field}"),
                    format!("`{path}.{field}` does not apply to `kind: replay`"),
                )
                .help = Some("a replayed kernel is the captured machine code with the captured parameter bytes (`params:`); pointers and tensor maps in them are rewritten by `relocate:`".into());
            }
        }
        // In a sequence, `tma:` is for the launches built from source; a replayed launch's own
        // maps are its relocations either way.
        if self.spec.kernel.is_some() && !self.spec.tma.is_empty() {
            self.key_error("tma", "`tma:` does not apply to `kind: replay`").help = Some(
                "a replayed launch's tensor maps are `relocate:` entries with `tensor_map:`, encoded as production encoded them".into(),
            );
        }
        let name = k.name.clone();
        if name.is_none() {
            self.error(
                path,
                "`kind: replay` needs `name:`, the kernel's mangled symbol",
            )
            .help = Some(
                "as `cuobjdump -symbols module.cubin` lists it, e.g. `_Z8tma_gemmILi128E...`"
                    .into(),
            );
        }
        if let Some(n) = &name {
            if n.is_empty()
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.')
            {
                self.error(&format!("{path}.name"), format!("`{n}` is not a mangled symbol"))
                    .help = Some("`kind: replay` loads the function by its symbol in the cubin (letters, digits, `_`, `$`, `.`); the demangled name goes in `capture.kernel`".into());
            }
        }
        let cubin_field = format!("{path}.cubin");
        let cubin = match &k.cubin {
            Some(file) => self.reference_file(&cubin_field, file, &cubin_field),
            None => {
                self.error(
                    path,
                    "`kind: replay` needs `cubin:`, the module's machine code",
                )
                .help = Some("the module.cubin `repro capture` wrote".into());
                None
            }
        };
        let params_field = format!("{path}.params");
        let params = match &k.params {
            Some(file) => self.reference_file(&params_field, file, &params_field),
            None => {
                self.error(
                    path,
                    "`kind: replay` needs `params:`, the launch's parameter bytes",
                )
                .help = Some("the params.bin `repro capture` wrote".into());
                None
            }
        };
        let params_size = params
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len());
        if let Some(size) = params_size {
            if size > MAX_PARAM_BYTES {
                self.error(
                    &params_field,
                    format!("{size} bytes of parameters; a kernel takes at most {MAX_PARAM_BYTES}"),
                );
            }
        }
        let relocations = self.relocations(k, path, tensors, params_size);
        let grid = self.replay_triple(path, "grid", k.grid.as_ref(), true);
        let block = self.replay_triple(path, "block", k.block.as_ref(), true);
        let cluster = self.replay_triple(path, "cluster", k.cluster.as_ref(), false);
        let smem = match &k.smem {
            None => "0".to_string(),
            Some(Value::Int(n)) if *n >= 0 => n.to_string(),
            Some(_) => {
                self.error(
                    &format!("{path}.smem"),
                    "a replayed launch's dynamic shared memory is a byte count",
                );
                return None;
            }
        };
        Some(KernelLaunch {
            kind: LaunchKind::Replay(ReplayLaunch {
                cubin: cubin?,
                params: params?,
                params_size: params_size?,
                relocations: relocations?,
            }),
            name: name?,
            template_args: Vec::new(),
            args: Vec::new(),
            setup: None,
            grid: grid?,
            block: block?,
            cluster,
            smem,
        })
    }

    /// A replayed launch shape is what production launched: numbers, not expressions (there is
    /// no source for an expression to mean anything in).
    fn replay_triple(
        &mut self,
        owner: &str,
        field: &str,
        values: Option<&Vec<Value>>,
        required: bool,
    ) -> Option<[String; 3]> {
        let path = format!("{owner}.{field}");
        let Some(list) = values else {
            if required {
                self.error(owner, format!("`{path}` is missing")).help =
                    Some("the launch's [x, y, z] as production launched it".into());
            }
            return None;
        };
        if list.is_empty() || list.len() > 3 {
            self.error(
                &path,
                format!("expected 1 to 3 entries, found {}", list.len()),
            );
            return None;
        }
        let mut out = [String::from("1"), String::from("1"), String::from("1")];
        for (i, v) in list.iter().enumerate() {
            match v {
                Value::Int(n) if *n >= 1 && *n <= i64::from(u32::MAX) => out[i] = n.to_string(),
                other => {
                    self.error(
                        &format!("{path}[{i}]"),
                        format!("`{}` is not a positive integer", other.to_cpp()),
                    )
                    .help = Some("`kind: replay` launches exactly what was captured".into());
                    return None;
                }
            }
        }
        Some(out)
    }

    /// `relocate:` of the launch `k` at `owner`: each names a tensor of the spec (shared by name
    /// with every other launch) and bytes inside the parameters that no other entry rewrites.
    fn relocations(
        &mut self,
        k: &KernelSpec,
        owner: &str,
        tensors: &[TensorSpecResolved],
        params_size: Option<u64>,
    ) -> Option<Vec<Relocation>> {
        let mut out = Vec::new();
        let mut ok = true;
        let mut taken: Vec<(u64, u64)> = Vec::new();
        for (i, r) in k.relocate.iter().enumerate() {
            let path = format!("{owner}.relocate[{i}]");
            let Some(tensor) = self.tensor_index(tensors, &format!("{path}.tensor"), &r.tensor)
            else {
                ok = false;
                continue;
            };
            let t = &tensors[tensor];
            let bytes = t.numel().max(1) as u64 * t.dtype.bytes() as u64;
            if r.offset >= bytes {
                self.error(
                    &format!("{path}.offset"),
                    format!(
                        "byte {} is past the end of `{}` ({bytes} bytes)",
                        r.offset, t.name
                    ),
                );
                ok = false;
            }
            // Addresses are 8 bytes, a CUtensorMap 128. Both sit at least 8-byte aligned; a map is
            // 64-byte aligned on the device, but `at` counts in the driver's parameter-bank
            // offsets (cuFuncGetParamInfo), where sm_90 may start the first parameter at 112.
            let width = if r.tensor_map.is_some() { 128 } else { 8 };
            if r.at % 8 != 0 {
                self.error(
                    &format!("{path}.at"),
                    format!("byte {} is not 8-byte aligned", r.at),
                );
                ok = false;
            }
            // Checked: an `at` near 2^64 would wrap past the bound and reach the generated code.
            let Some(end) =
                r.at.checked_add(width)
                    .filter(|&end| end <= MAX_PARAM_BYTES)
            else {
                self.error(
                    &format!("{path}.at"),
                    format!(
                        "byte {} is past the {MAX_PARAM_BYTES} bytes of parameters a kernel takes",
                        r.at
                    ),
                )
                .help = Some("`at` is the byte of params.bin where the address starts, inside the launch's parameters".into());
                ok = false;
                continue;
            };
            if let Some(size) = params_size {
                if end > size {
                    self.error(
                        &format!("{path}.at"),
                        format!("bytes {}..{end} are past the {size} parameter bytes", r.at),
                    );
                    ok = false;
                }
            }
            if let Some(&(at, _)) = taken.iter().find(|(at, w)| r.at < at + w && *at < end) {
                self.error(
                    &format!("{path}.at"),
                    format!("overlaps the relocation at byte {at}"),
                );
                ok = false;
            }
            taken.push((r.at, width));
            if let Some(map) = &r.tensor_map {
                ok &= self.tensor_map(&format!("{path}.tensor_map"), map);
            }
            out.push(Relocation {
                at: r.at,
                tensor,
                offset: r.offset,
                tensor_map: r.tensor_map.clone(),
            });
        }
        ok.then_some(out)
    }

    /// The encode's parameters are checked by the driver when the harness encodes; here only
    /// what would make the generated code wrong (counts that do not fit the rank).
    fn tensor_map(&mut self, path: &str, map: &TensorMapSpec) -> bool {
        let mut ok = true;
        if !TENSOR_MAP_TYPES
            .iter()
            .any(|(name, _)| *name == map.data_type)
        {
            let names: Vec<&str> = TENSOR_MAP_TYPES.iter().map(|(n, _)| *n).collect();
            self.error(
                &format!("{path}.data_type"),
                format!("`{}` is not a tensor map data type", map.data_type),
            )
            .help = Some(format!("one of {}", names.join(", ")));
            ok = false;
        }
        let rank = map.dims.len();
        if !(1..=5).contains(&rank) {
            self.error(
                &format!("{path}.dims"),
                format!("{rank} dimensions; a tensor map has 1 to 5"),
            );
            return false;
        }
        for (field, len, want) in [
            ("strides", map.strides.len(), rank - 1),
            ("box", map.box_dims.len(), rank),
            ("element_strides", map.element_strides.len(), rank),
        ] {
            if len != want {
                self.error(
                    &format!("{path}.{field}"),
                    format!("{len} entries for a rank-{rank} map; it takes {want}"),
                );
                ok = false;
            }
        }
        ok
    }

    /// `capture:`: its outputs' files exist and name outputs.
    pub(super) fn capture(&mut self, tensors: &[TensorSpecResolved]) -> Option<CaptureResolved> {
        let capture = self.spec.capture.as_ref()?;
        let mut resolved = CaptureResolved::default();
        for (field, files) in [("before", &capture.before), ("after", &capture.after)] {
            for (name, file) in files {
                let path = format!("capture.{field}.{name}");
                let Some(index) = self.tensor_index(tensors, &path, name) else {
                    continue;
                };
                if !tensors[index].output {
                    self.key_error(&path, format!("`{name}` is not an output"))
                        .help = Some("`capture.before` and `capture.after` hold the outputs' contents around production's launch".into());
                    continue;
                }
                let Some(file) = self.reference_file(&path, file, &format!("capture.{field}"))
                else {
                    continue;
                };
                let list: &mut Vec<(usize, PathBuf)> = if field == "before" {
                    &mut resolved.before
                } else {
                    &mut resolved.after
                };
                list.push((index, file));
            }
        }
        Some(resolved)
    }
}
