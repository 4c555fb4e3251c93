//! Which hook each PTX instruction gets: the device runtime's entry points
//! (crates/repro-contract/runtime/include/repro/async_race.cuh), their PTX prototypes and flag bits, and for
//! every instruction the checker follows (shared-memory accesses, TMA and bulk copies, bulk
//! groups, proxy fences, named barriers, mbarriers, wgmma, and in a module that rewrites tensor
//! maps the writes that may rewrite one and the tensormap proxy fences) the calls to place
//! before and after it with their arguments. [`super::ptx`] parses the module and writes the
//! calls; it may not import ptx.rs (the statement syntax both read is in instruction.rs).

use super::instruction::{bracket, Instruction};
use repro_text::split_top_level as split_operands;

/// Flag bits the hooks take (the device runtime's `repro::async_race::flags`).
pub mod flags {
    pub const WINDOW_CTA: u32 = 0;
    pub const WINDOW_CLUSTER: u32 = 1;
    pub const WINDOW_GENERIC: u32 = 2;
    pub const READ: u32 = 4;
    pub const WRITE: u32 = 8;
    pub const MATRIX: u32 = 16;
    pub const MULTICAST: u32 = 32;
    pub const DROP: u32 = 64;
    pub const NO_ARRIVAL: u32 = 128;
    pub const HAS_PARITY: u32 = 256;
    pub const WAITS: u32 = 512;
    pub const A_IN_REGISTERS: u32 = 1024;
    /// A global-memory address (`st.global`, a bulk copy's global destination).
    pub const WINDOW_GLOBAL: u32 = 3;
    /// A write that also releases tensor maps to the tensormap proxy (`tensormap.cp_fenceproxy`),
    /// or `fence.proxy.tensormap::generic.release`.
    pub const MAP_RELEASE: u32 = 2048;
    /// `fence.proxy.tensormap::generic.acquire [map], size`.
    pub const MAP_ACQUIRE: u32 = 4096;
    /// A generic store in a module that rewrites tensor maps: the runtime also checks it against
    /// the maps its TMA copies read.
    pub const MAP_CHECK: u32 = 8192;
    /// Bits 16..24: ldmatrix/stmatrix's matrix count.
    pub const MATRIX_COUNT_SHIFT: u32 = 16;
}

/// Prefix of every hook; functions so named are the runtime's and never rewritten.
pub const HOOK_PREFIX: &str = "repro_race_";

/// The hooks' PTX prototypes, declared once after `.address_size` so a call may precede the
/// definition (the runtime's header is compiled into the same module).
pub(super) const PROTOTYPES: &str = "\
.func repro_race_enter ();
.func repro_race_exit ();
.func repro_race_access (.param .b64 a, .param .b32 b, .param .b32 c, .param .b32 d);
.func repro_race_bulk_load (.param .b64 a, .param .b32 b, .param .b64 c, .param .b64 d, .param .b32 e, .param .b32 f);
.func repro_race_bulk_store (.param .b64 a, .param .b32 b, .param .b64 c, .param .b32 d, .param .b32 e);
.func repro_race_bulk_commit (.param .b32 a);
.func repro_race_bulk_wait (.param .b32 a, .param .b32 b);
.func repro_race_proxy_fence (.param .b32 a);
.func (.param .b32 r) repro_race_bar_arrive (.param .b32 a, .param .b32 b, .param .b32 c, .param .b32 d);
.func repro_race_bar_done (.param .b32 a, .param .b32 b);
.func repro_race_mbar_init (.param .b64 a, .param .b32 b, .param .b32 c, .param .b32 d);
.func repro_race_mbar_arrive (.param .b64 a, .param .b32 b, .param .b32 c, .param .b32 d, .param .b32 e);
.func repro_race_mbar_wait (.param .b64 a, .param .b32 b, .param .b32 c, .param .b32 d, .param .b32 e);
.func repro_race_mbar_inval (.param .b64 a, .param .b32 b, .param .b32 c);
.func repro_race_wgmma (.param .b64 a, .param .b64 b, .param .b32 c, .param .b32 d, .param .b32 e);
.func repro_race_wgmma_commit (.param .b32 a);
.func repro_race_wgmma_wait (.param .b32 a, .param .b32 b);
.func repro_race_map_write (.param .b64 a, .param .b32 b, .param .b32 c, .param .b32 d);
.func repro_race_map_fence (.param .b64 a, .param .b32 b, .param .b32 c);
";

/// One argument of a hook call: how to get its value into a fresh register.
#[derive(Debug, Clone)]
pub(super) enum Arg {
    /// A 32-bit value: an immediate or a register of the instruction.
    U32(String),
    /// A 64-bit value: an immediate or a 64-bit register.
    U64(String),
    /// A shared-memory or generic address operand (`[...]` content), as a 64-bit number.
    Address(String),
    /// A predicate register (or its negation `!p`), as 0 or 1.
    Predicate(String),
    /// The token a previous hook of the same scope returned.
    Token,
}

/// A hook call to place before or after an instruction.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) hook: &'static str,
    pub(super) args: Vec<Arg>,
    pub(super) returns_token: bool,
}

/// The argument a hook's site id takes (filled in when the site is numbered).
pub(super) fn site() -> Arg {
    Arg::U32("SITE".into())
}

/// A hook call that returns nothing.
pub(super) fn call(hook: &'static str, args: Vec<Arg>) -> Call {
    Call {
        hook,
        args,
        returns_token: false,
    }
}

/// What to do with one instruction.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) before: Vec<Call>,
    pub(super) after: Vec<Call>,
}

/// Bytes of a PTX scalar type (`b32` is 4), `None` for what is no type.
pub(super) fn type_bits(ty: &str) -> Option<u32> {
    Some(match ty {
        "b8" | "u8" | "s8" | "e4m3" | "e5m2" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

/// The address window an opcode's memory operand is in.
pub(super) fn window(parts: &[&str]) -> Option<u32> {
    if parts.contains(&"shared::cluster") {
        Some(flags::WINDOW_CLUSTER)
    } else if parts.iter().any(|p| *p == "shared" || *p == "shared::cta") {
        Some(flags::WINDOW_CTA)
    } else if parts
        .iter()
        .any(|p| matches!(*p, "global" | "local" | "const" | "param" | "tex"))
    {
        None
    } else {
        Some(flags::WINDOW_GENERIC)
    }
}

/// Bytes one lane moves with a `ld`/`st`/`atom` of these qualifiers (`.v4.b32` is 16).
pub(super) fn access_bytes(parts: &[&str]) -> u32 {
    let vector = parts
        .iter()
        .find_map(|p| match *p {
            "v2" => Some(2),
            "v4" => Some(4),
            "v8" => Some(8),
            _ => None,
        })
        .unwrap_or(1);
    let element = parts.iter().rev().find_map(|p| type_bits(p)).unwrap_or(4);
    vector * element
}

/// Does a module rewrite tensor maps? Only then are its global stores checked against the maps
/// its TMA copies read: a kernel that rewrites a map must publish it to the tensormap proxy
/// (`fence.proxy.tensormap::generic` or `tensormap.cp_fenceproxy`), and usually edits it with
/// `tensormap.replace`. `prefetch.tensormap` alone (every CUTLASS kernel) does not count.
pub fn rewrites_tensor_maps(ptx: &str) -> bool {
    [
        "tensormap.replace",
        "tensormap.cp_fenceproxy",
        "fence.proxy.tensormap",
    ]
    .iter()
    .any(|form| ptx.contains(form))
}

/// The global write of `bytes` at `address` a tensor map may be rewritten by.
fn map_write(address: &str, bytes: String, flags: u32) -> Call {
    call(
        "repro_race_map_write",
        vec![
            Arg::Address(address.into()),
            Arg::U32(bytes),
            Arg::U32(flags.to_string()),
            site(),
        ],
    )
}

/// The hooks for one instruction, `None` for an instruction the checker does not follow.
/// `maps`: the module rewrites tensor maps ([`rewrites_tensor_maps`]).
pub(super) fn plan(instruction: &Instruction, in_entry: bool, maps: bool) -> Option<Plan> {
    let parts: Vec<&str> = instruction.opcode.split('.').collect();
    let ops = &instruction.operands;
    let head = parts[0];
    let mut plan = Plan::default();
    match head {
        "st" | "atom" | "red" if maps && !parts.contains(&"async") && parts.contains(&"global") => {
            let address = if head == "atom" {
                ops.get(1)?
            } else {
                ops.first()?
            };
            plan.before.push(map_write(
                bracket(address)?,
                access_bytes(&parts[1..]).to_string(),
                flags::WINDOW_GLOBAL,
            ));
        }
        "ld" | "st" | "ldu" | "atom" | "red" if !parts.contains(&"async") || head == "st" => {
            let window = window(&parts[1..])?;
            let (address, kind) = match head {
                "ld" | "ldu" => (ops.get(1)?, flags::READ),
                "st" => (ops.first()?, flags::WRITE),
                "atom" => (ops.get(1)?, flags::READ | flags::WRITE),
                _ => (ops.first()?, flags::READ | flags::WRITE),
            };
            let address = bracket(address)?;
            let bytes = access_bytes(&parts[1..]);
            let check = if maps && window == flags::WINDOW_GENERIC && kind & flags::WRITE != 0 {
                flags::MAP_CHECK
            } else {
                0
            };
            plan.before.push(call(
                "repro_race_access",
                vec![
                    Arg::Address(address.into()),
                    Arg::U32(bytes.to_string()),
                    Arg::U32((window | kind | check).to_string()),
                    site(),
                ],
            ));
        }
        "ldmatrix" | "stmatrix" => {
            let window = window(&parts[1..])?;
            let count: u32 = parts
                .iter()
                .find_map(|p| p.strip_prefix('x').and_then(|n| n.parse().ok()))
                .unwrap_or(1);
            let (address, kind) = if head == "ldmatrix" {
                (ops.get(1)?, flags::READ)
            } else {
                (ops.first()?, flags::WRITE)
            };
            plan.before.push(call(
                "repro_race_access",
                vec![
                    Arg::Address(bracket(address)?.into()),
                    Arg::U32("16".into()),
                    Arg::U32(
                        (window | kind | flags::MATRIX | (count << flags::MATRIX_COUNT_SHIFT))
                            .to_string(),
                    ),
                    site(),
                ],
            ));
        }
        "cp" => return plan_cp(&parts, ops, maps),
        // tensormap.replace.mode.field{.ss}.b1024.type [map], {ordinal,} value: an edit of the
        // whole 128-byte map (the PTX ISA treats it as a write of the entire object).
        "tensormap" if parts.get(1) == Some(&"replace") => {
            let window = if parts.contains(&"global") {
                flags::WINDOW_GLOBAL
            } else if parts.iter().any(|p| p.starts_with("shared")) {
                flags::WINDOW_CTA
            } else {
                flags::WINDOW_GENERIC
            };
            plan.before
                .push(map_write(bracket(ops.first()?)?, "128".into(), window));
        }
        // tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.SCOPE.sync.aligned
        // [dst], [src], size: a copy of a map into global memory and its release in one.
        "tensormap" if parts.get(1) == Some(&"cp_fenceproxy") => {
            plan.before.push(map_write(
                bracket(ops.first()?)?,
                ops.get(2)?.clone(),
                flags::WINDOW_GLOBAL | flags::MAP_RELEASE,
            ));
        }
        // fence.proxy.tensormap::generic.release.SCOPE; / .acquire.SCOPE [map], size;
        "fence"
            if parts.get(1) == Some(&"proxy")
                && parts.get(2).is_some_and(|p| p.starts_with("tensormap")) =>
        {
            let (address, kind) = if parts.contains(&"acquire") {
                (
                    Arg::Address(bracket(ops.first()?)?.into()),
                    flags::MAP_ACQUIRE,
                )
            } else {
                (Arg::U64("0".into()), flags::MAP_RELEASE)
            };
            plan.before.push(call(
                "repro_race_map_fence",
                vec![address, Arg::U32(kind.to_string()), site()],
            ));
        }
        // fence.proxy.async{.shared::cta|.shared::cluster|.global}: all but the global-only one.
        "fence"
            if parts.get(1) == Some(&"proxy")
                && parts.get(2).is_some_and(|p| p.starts_with("async"))
                && (!parts.contains(&"global")
                    || parts.iter().any(|p| p.starts_with("shared"))) =>
        {
            plan.before
                .push(call("repro_race_proxy_fence", vec![site()]));
        }
        "bar" | "barrier" => {
            let kind = parts
                .iter()
                .skip(1)
                .find(|p| matches!(**p, "sync" | "arrive" | "red" | "warp" | "cluster"))?;
            let (id, threads) = match *kind {
                "sync" | "arrive" => (ops.first()?, ops.get(1)),
                // bar.red.popc.u32 d, a{, b}, {!}c
                "red" => (ops.get(1)?, if ops.len() == 4 { ops.get(2) } else { None }),
                _ => return None, // bar.warp.sync, barrier.cluster.*: not CTA barriers
            };
            let waits = *kind != "arrive";
            plan.before.push(Call {
                hook: "repro_race_bar_arrive",
                args: vec![
                    Arg::U32(id.clone()),
                    Arg::U32(threads.cloned().unwrap_or_else(|| "0".into())),
                    Arg::U32(if waits { flags::WAITS } else { 0 }.to_string()),
                    site(),
                ],
                returns_token: true,
            });
            if waits {
                plan.after
                    .push(call("repro_race_bar_done", vec![Arg::Token, site()]));
            }
        }
        "mbarrier" => return plan_mbarrier(&parts, ops),
        "wgmma" => match parts.get(1).copied() {
            Some("mma_async") => {
                let n: u32 = parts
                    .iter()
                    .find_map(|p| {
                        p.strip_prefix("m64n")
                            .and_then(|r| r.split('k').next())
                            .and_then(|n| n.parse().ok())
                    })
                    .unwrap_or(0);
                let a = ops.get(1)?;
                let (a_arg, a_flags) = if a.starts_with('{') {
                    (Arg::U64("0".into()), flags::A_IN_REGISTERS)
                } else {
                    (Arg::U64(a.clone()), 0)
                };
                plan.before.push(call(
                    "repro_race_wgmma",
                    vec![
                        a_arg,
                        Arg::U64(ops.get(2)?.clone()),
                        Arg::U32(n.to_string()),
                        Arg::U32(a_flags.to_string()),
                        site(),
                    ],
                ));
            }
            // After the commit: a call between the last wgmma and its commit is one ptxas cannot
            // always allocate registers around (a CUTLASS consumer at setmaxnreg 232 fails).
            Some("commit_group") => plan
                .after
                .push(call("repro_race_wgmma_commit", vec![site()])),
            Some("wait_group") => plan.after.push(call(
                "repro_race_wgmma_wait",
                vec![Arg::U32(ops.first()?.clone()), site()],
            )),
            _ => return None,
        },
        "ret" | "exit" if in_entry => plan.before.push(call("repro_race_exit", vec![])),
        _ => return None,
    }
    Some(plan)
}

/// `cp.async*`: bulk and tensor copies (async proxy), their groups, and the Ampere `cp.async`.
fn plan_cp(parts: &[&str], ops: &[String], maps: bool) -> Option<Plan> {
    let mut plan = Plan::default();
    let async_at = parts.iter().position(|p| *p == "async")?;
    let reduce = parts.get(1) == Some(&"reduce");
    let rest = &parts[async_at + 1..];
    if rest.first() == Some(&"mbarrier") {
        // cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]
        let window = window(&rest[1..]).unwrap_or(flags::WINDOW_CTA);
        let count = if rest.contains(&"noinc") { "1" } else { "0" };
        plan.before.push(call(
            "repro_race_mbar_arrive",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32(count.into()),
                Arg::U32("0".into()),
                Arg::U32(window.to_string()),
                site(),
            ],
        ));
        return Some(plan);
    }
    if rest.first() != Some(&"bulk") {
        // cp.async.ca.shared.global [dst], [src], size: a generic-proxy write, followed as one
        // when it is issued (its completion is cp.async.wait_group's, a thread's own order).
        plan.before.push(call(
            "repro_race_access",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32(ops.get(2)?.clone()),
                Arg::U32((flags::WINDOW_CTA | flags::WRITE).to_string()),
                site(),
            ],
        ));
        return Some(plan);
    }
    let bulk = &rest[1..];
    match bulk.first().copied() {
        Some("commit_group") => {
            plan.before
                .push(call("repro_race_bulk_commit", vec![site()]));
            return Some(plan);
        }
        Some("wait_group") => {
            plan.after.push(call(
                "repro_race_bulk_wait",
                vec![Arg::U32(ops.first()?.clone()), site()],
            ));
            return Some(plan);
        }
        Some("prefetch") => return None,
        _ => {}
    }
    let tensor = bulk.first() == Some(&"tensor");
    let spaces: Vec<&str> = bulk
        .iter()
        .copied()
        .filter(|p| p.starts_with("shared") || *p == "global")
        .collect();
    let (destination, source) = (*spaces.first()?, *spaces.get(1)?);
    let multicast = bulk.iter().any(|p| p.starts_with("multicast"));
    let window_of = |space: &str| {
        if space == "shared::cluster" {
            flags::WINDOW_CLUSTER
        } else {
            flags::WINDOW_CTA
        }
    };
    if tensor {
        // load: [dst], [map, {coords}], [mbar]...; store/reduce: [map, {coords}], [src]
        if destination.starts_with("shared") {
            let map = bracket(ops.get(1)?)?;
            let map = split_operands(map).first()?.clone();
            let mut f = window_of(destination);
            if multicast {
                f |= flags::MULTICAST;
            }
            plan.before.push(call(
                "repro_race_bulk_load",
                vec![
                    Arg::Address(bracket(ops.first()?)?.into()),
                    Arg::U32("0".into()),
                    Arg::U64(map),
                    Arg::Address(bracket(ops.get(2)?)?.into()),
                    Arg::U32(f.to_string()),
                    site(),
                ],
            ));
        } else {
            let map = bracket(ops.first()?)?;
            let map = split_operands(map).first()?.clone();
            plan.before.push(call(
                "repro_race_bulk_store",
                vec![
                    Arg::Address(bracket(ops.get(1)?)?.into()),
                    Arg::U32("0".into()),
                    Arg::U64(map),
                    Arg::U32(window_of(source).to_string()),
                    site(),
                ],
            ));
        }
        return Some(plan);
    }
    // Non-tensor bulk copies: [dst], [src], size{, [mbar]}
    let size = ops.get(2)?.clone();
    if maps && destination == "global" {
        // A copy into global memory may rewrite a tensor map (a map edited in shared memory,
        // then published with cp.async.bulk).
        plan.before.push(map_write(
            bracket(ops.first()?)?,
            size.clone(),
            flags::WINDOW_GLOBAL,
        ));
    }
    if source.starts_with("shared") {
        plan.before.push(call(
            "repro_race_bulk_store",
            vec![
                Arg::Address(bracket(ops.get(1)?)?.into()),
                Arg::U32(size.clone()),
                Arg::U64("0".into()),
                Arg::U32(window_of(source).to_string()),
                site(),
            ],
        ));
    }
    if destination.starts_with("shared") && !reduce {
        let mut f = window_of(destination);
        if multicast {
            f |= flags::MULTICAST;
        }
        plan.before.push(call(
            "repro_race_bulk_load",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32(size),
                Arg::U64("0".into()),
                Arg::Address(bracket(ops.get(3)?)?.into()),
                Arg::U32(f.to_string()),
                site(),
            ],
        ));
    }
    if plan.before.is_empty() {
        return None;
    }
    Some(plan)
}

/// `mbarrier.*`: init, arrivals, transaction counts, waits, invalidation.
fn plan_mbarrier(parts: &[&str], ops: &[String]) -> Option<Plan> {
    let mut plan = Plan::default();
    let window = window(&parts[1..]).unwrap_or(flags::WINDOW_GENERIC);
    match parts.get(1).copied()? {
        "init" => plan.before.push(call(
            "repro_race_mbar_init",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32(ops.get(1)?.clone()),
                Arg::U32(window.to_string()),
                site(),
            ],
        )),
        "inval" => plan.before.push(call(
            "repro_race_mbar_inval",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32(window.to_string()),
                site(),
            ],
        )),
        "expect_tx" => plan.before.push(call(
            "repro_race_mbar_arrive",
            vec![
                Arg::Address(bracket(ops.first()?)?.into()),
                Arg::U32("0".into()),
                Arg::U32(ops.get(1)?.clone()),
                Arg::U32((window | flags::NO_ARRIVAL).to_string()),
                site(),
            ],
        )),
        kind @ ("arrive" | "arrive_drop") => {
            // mbarrier.arrive{.expect_tx|.noComplete}... state, [addr]{, count|txCount}
            let expect_tx = parts.contains(&"expect_tx");
            let mut f = window;
            if kind == "arrive_drop" {
                f |= flags::DROP;
            }
            let extra = ops.get(2).cloned();
            let (count, tx) = match (expect_tx, extra) {
                (true, Some(tx)) => ("1".to_string(), tx),
                (false, Some(count)) => (count, "0".to_string()),
                (_, None) => ("1".to_string(), "0".to_string()),
            };
            plan.before.push(call(
                "repro_race_mbar_arrive",
                vec![
                    Arg::Address(bracket(ops.get(1)?)?.into()),
                    Arg::U32(count),
                    Arg::U32(tx),
                    Arg::U32(f.to_string()),
                    site(),
                ],
            ));
        }
        "try_wait" | "test_wait" => {
            let has_parity = parts.contains(&"parity");
            let mut f = window;
            if has_parity {
                f |= flags::HAS_PARITY;
            }
            let parity = if has_parity {
                Arg::U32(ops.get(2)?.clone())
            } else {
                Arg::U32("0".into())
            };
            plan.after.push(call(
                "repro_race_mbar_wait",
                vec![
                    Arg::Address(bracket(ops.get(1)?)?.into()),
                    parity,
                    Arg::U32(f.to_string()),
                    Arg::Predicate(ops.first()?.clone()),
                    site(),
                ],
            ));
        }
        _ => return None,
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::super::instruction::parse_instruction;
    use super::*;

    #[test]
    fn access_sizes() {
        assert_eq!(access_bytes(&["shared", "v4", "b32"]), 16);
        assert_eq!(access_bytes(&["shared", "u16"]), 2);
        assert_eq!(access_bytes(&["shared", "v2", "f32"]), 8);
    }

    /// The hook and its arguments, as text, for one instruction.
    fn hooked(statement: &str) -> Vec<String> {
        let i = parse_instruction(statement).unwrap();
        let p = plan(&i, true, false).unwrap_or_default();
        p.before
            .iter()
            .chain(p.after.iter())
            .map(|c| format!("{} {:?}", c.hook, c.args))
            .collect()
    }

    #[test]
    fn the_barrier_forms_of_deepgemm_and_cutlass_are_followed() {
        // ClusterBarrier::arrive(): one lane per math warp releases the stage.
        let arrive = hooked("mbarrier.arrive.shared::cta.b64 _, [%r12];");
        assert_eq!(arrive.len(), 1, "{arrive:?}");
        assert!(
            arrive[0].starts_with(
                "repro_race_mbar_arrive [Address(\"%r12\"), U32(\"1\"), U32(\"0\"), U32(\"0\")"
            ),
            "{arrive:?}"
        );
        // The cluster forms (ClusterBarrier::arrive(cta_id, pred), PTX 8.0's .release.cluster).
        for form in [
            "@p mbarrier.arrive.shared::cluster.b64 _, [remAddr32];",
            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5];",
        ] {
            let calls = hooked(form);
            assert!(
                calls.len() == 1
                    && calls[0].contains(&format!("U32(\"{}\")", flags::WINDOW_CLUSTER)),
                "{form}: {calls:?}"
            );
        }
        let release = hooked("mbarrier.arrive.release.cta.shared::cta.b64 %rd4, [%r5], 2;");
        assert!(release[0].contains("U32(\"2\")"), "the count: {release:?}");
        let tx = hooked("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], %r3;");
        assert!(tx[0].contains("U32(\"%r3\")"), "{tx:?}");
        // A wait with a suspend-time hint: the parity is the third operand.
        let wait = hooked("mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2, %r4;");
        assert!(
            wait[0].starts_with("repro_race_mbar_wait [Address(\"%r1\"), U32(\"%r2\")"),
            "{wait:?}"
        );
        // DeepGEMM's own wgmma wrappers (ptx/wgmma.cuh).
        assert!(
            hooked("wgmma.commit_group.sync.aligned;")[0].starts_with("repro_race_wgmma_commit")
        );
        assert!(hooked("wgmma.wait_group.sync.aligned 0;")[0]
            .starts_with("repro_race_wgmma_wait [U32(\"0\")"));
    }

    #[test]
    fn global_and_param_accesses_are_left_alone() {
        let i = parse_instruction("ld.global.nc.v4.u32 {%r1,%r2,%r3,%r4}, [%rd5];").unwrap();
        assert!(plan(&i, true, true).is_none());
        let i = parse_instruction("ld.param.u32 %r77, [k_param_3];").unwrap();
        assert!(plan(&i, true, true).is_none());
        let i = parse_instruction("st.shared.u32 [%r5+16], %r6;").unwrap();
        assert!(plan(&i, true, false).is_some());
        // A global store is a tensor map's rewrite only in a module that rewrites maps.
        let i = parse_instruction("st.global.v4.u32 [%rd9+16], {%r1, %r2, %r3, %r4};").unwrap();
        assert!(plan(&i, true, false).is_none());
        assert!(plan(&i, true, true).is_some());
    }
}
