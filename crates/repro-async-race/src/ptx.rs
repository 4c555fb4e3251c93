//! The PTX rewrite behind `--sanitize async-race`: every shared-memory access and every
//! synchronization that orders the async proxy gets a call to the checker's device runtime
//! (crates/repro-contract/runtime/include/repro/async_race.cuh) placed beside it.
//!
//! Why PTX: the checker must see TMA (`cp.async.bulk.tensor`), bulk groups and proxy fences, for
//! which compute-sanitizer's patching API has no callback (docs/async-race.md), in kernels nobody
//! here wrote. CuTe, CUTLASS and hand-written kernels all reach those instructions through
//! inline asm, and after cicc inline asm is plain PTX text: the one place where every kernel's
//! TMA issue, `mbarrier` wait and `st.shared` look alike. The rewrite runs between cicc and
//! ptxas (the ptxas wrapper in [`super::toolkit`]), so the production flags stay as they are.
//!
//! The rewrite adds, never removes: each hook is a `call` in a `{ }` scope of its own with its
//! own registers, predicated as the instruction is, and an instruction whose result a hook needs
//! (a wait's predicate, a barrier's generation) is wrapped with its hooks in one scope.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::hooks::{plan, type_bits, Arg, Call, Plan, HOOK_PREFIX, PROTOTYPES};
use super::instruction::{parse_instruction, Instruction};

/// What a hook call site is, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Site {
    pub id: u32,
    /// The instruction as written in the PTX (mnemonic and operands).
    pub instruction: String,
    /// Source locations, innermost first (the helper an instruction was inlined from, then
    /// each caller), from `.loc` and its `inlined_at` chain; empty without `-lineinfo`.
    pub locations: Vec<Location>,
    /// The PTX function (mangled) the instruction is in.
    pub function: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
}

/// The rewritten module and its call sites.
#[derive(Debug, Default)]
pub struct Rewrite {
    pub ptx: String,
    pub sites: Vec<Site>,
    /// Instructions instrumented, by hook, for the build's one-line summary.
    pub counts: HashMap<&'static str, usize>,
}

/// Register widths by name, per scope: `.reg .b64 %rd<112>;` declares %rd0..%rd111.
#[derive(Debug, Default)]
struct Registers {
    scopes: Vec<HashMap<String, u32>>,
}

impl Registers {
    fn declare(&mut self, decl: &str) {
        // `.reg .TYPE name<N>, other;`
        let rest = decl.trim_start_matches(".reg").trim();
        let Some((ty, names)) = rest.split_once(char::is_whitespace) else {
            return;
        };
        let bits = type_bits(ty.trim_start_matches('.')).unwrap_or(4) * 8;
        let bits = if ty == ".pred" { 1 } else { bits };
        if self.scopes.is_empty() {
            self.scopes.push(HashMap::new());
        }
        let scope = self.scopes.last_mut().expect("a scope");
        for name in names.split(',') {
            let name = name.trim().trim_end_matches(';').trim();
            let base = name.split('<').next().unwrap_or(name).trim();
            if !base.is_empty() {
                scope.insert(base.to_string(), bits);
            }
        }
    }

    /// The width of a register operand, `None` when it is no register this module declared.
    fn bits(&self, operand: &str) -> Option<u32> {
        let name = operand.trim();
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        for scope in self.scopes.iter().rev() {
            if let Some(bits) = scope.get(name).or_else(|| scope.get(prefix)) {
                return Some(*bits);
            }
        }
        None
    }
}

/// The PTX state of the `.loc`/`.file` directives: where the next instruction comes from.
#[derive(Debug, Default)]
struct Locations {
    files: HashMap<u32, String>,
    current: Option<(u32, u32, u32)>,
    /// (file, line, column) → where that location was inlined.
    parents: HashMap<(u32, u32, u32), (u32, u32, u32)>,
}

impl Locations {
    fn file(&mut self, line: &str) {
        // .file 1 "/path/x.cuh" [, mtime, size]
        let rest = line.trim_start().trim_start_matches(".file").trim();
        let Some((number, path)) = rest.split_once(char::is_whitespace) else {
            return;
        };
        let Ok(number) = number.parse() else { return };
        let path = path.trim();
        if let Some(stripped) = path.strip_prefix('"') {
            if let Some(end) = stripped.find('"') {
                self.files.insert(number, stripped[..end].to_string());
            }
        }
    }

    fn loc(&mut self, line: &str) {
        // .loc 2 178 13[, function_name $L__info_string11, inlined_at 2 376 5]
        let rest = line.trim_start().trim_start_matches(".loc").trim();
        let mut parts = rest.split(',');
        let here = triple(parts.next().unwrap_or(""));
        let Some(here) = here else { return };
        self.current = Some(here);
        for part in parts {
            if let Some(at) = part.trim().strip_prefix("inlined_at") {
                if let Some(parent) = triple(at) {
                    self.parents.insert(here, parent);
                }
            }
        }
    }

    fn chain(&self) -> Vec<Location> {
        let mut out = Vec::new();
        let mut at = self.current;
        while let Some(here) = at {
            if out.len() >= 16 {
                break;
            }
            if here.1 != 0 {
                // `.file` directives follow the functions: the number now, the name at the end.
                let location = Location {
                    file: here.0.to_string(),
                    line: here.1,
                };
                if out.last() != Some(&location) {
                    out.push(location);
                }
            }
            at = self.parents.get(&here).copied().filter(|p| *p != here);
        }
        out
    }
}

fn triple(text: &str) -> Option<(u32, u32, u32)> {
    let mut numbers = text.split_whitespace().map(|n| n.parse::<u32>());
    Some((
        numbers.next()?.ok()?,
        numbers.next()?.ok()?,
        numbers.next().unwrap_or(Ok(0)).ok()?,
    ))
}

/// Splits one line into its statements, keeping labels and braces apart: `L: a; b; }` gives
/// `[Label("L:"), Stmt("a"), Stmt("b"), Brace("}")]`.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    Statement(&'a str),
}

fn pieces(line: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        if trimmed.is_empty() {
            break;
        }
        let lead = rest.len() - trimmed.len();
        if trimmed.starts_with('{') || trimmed.starts_with('}') {
            out.push(Piece::Text(&rest[..lead + 1]));
            rest = &rest[lead + 1..];
            continue;
        }
        if trimmed.starts_with("//") {
            out.push(Piece::Text(rest));
            break;
        }
        // A label: identifier followed by a single ':'.
        let ident_end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '%'))
            .unwrap_or(trimmed.len());
        if ident_end > 0
            && trimmed[ident_end..].starts_with(':')
            && !trimmed[ident_end..].starts_with("::")
        {
            out.push(Piece::Text(&rest[..lead + ident_end + 1]));
            rest = &rest[lead + ident_end + 1..];
            continue;
        }
        match trimmed.find(';') {
            Some(end) => {
                out.push(Piece::Statement(&rest[..lead + end + 1]));
                rest = &rest[lead + end + 1..];
            }
            None => {
                out.push(Piece::Text(rest));
                break;
            }
        }
    }
    out
}

/// Rewrites one PTX module. `module` tags its site ids (bits 24..32) so that the sites of the
/// two PTX files of a `-gencode` pair never collide.
pub fn instrument(ptx: &str, module: u8) -> Rewrite {
    instrument_except(ptx, module, &[])
}

/// [`instrument`] without the hooks named in `skip` (a diagnosis aid: which hooks a kernel's
/// register budget cannot take).
pub fn instrument_except(ptx: &str, module: u8, skip: &[String]) -> Rewrite {
    let mut out = Rewrite::default();
    let mut registers = Registers::default();
    let mut locations = Locations::default();
    let mut depth = 0usize;
    let mut function = String::new();
    let mut in_entry = false;
    let mut skip_function = false;
    let mut entry_hooked = false;
    let mut pending_header = String::new();
    let mut scratch = 0usize;
    let maps = super::hooks::rewrites_tensor_maps(ptx);
    for line in ptx.lines() {
        let code = line.trim_start();
        if code.starts_with(".address_size") {
            out.ptx.push_str(line);
            out.ptx.push('\n');
            out.ptx.push_str(PROTOTYPES);
            continue;
        }
        if code.starts_with(".file") {
            locations.file(code);
        }
        if code.starts_with(".loc") {
            locations.loc(code);
        }
        if depth == 0 {
            // Function headers: `.visible .entry name(`, `.func (.param..) name(`.
            if code.contains(".entry") || code.contains(".func") {
                pending_header.clear();
                pending_header.push_str(code);
                in_entry = code.contains(".entry");
                function = function_name(code).unwrap_or_default();
                skip_function = function.starts_with(HOOK_PREFIX);
                entry_hooked = false;
            }
        }
        let mut rewritten = String::new();
        let mut changed = false;
        for piece in pieces(line) {
            match piece {
                Piece::Text(text) => {
                    for c in text.chars() {
                        if c == '{' {
                            depth += 1;
                            registers.scopes.push(HashMap::new());
                        } else if c == '}' {
                            depth = depth.saturating_sub(1);
                            registers.scopes.pop();
                        }
                    }
                    rewritten.push_str(text);
                }
                Piece::Statement(statement) => {
                    let body = statement.trim();
                    if body.starts_with(".reg") {
                        registers.declare(body);
                    }
                    let hookable = depth >= 1
                        && !skip_function
                        && !body.starts_with('.')
                        && !function.is_empty();
                    if hookable && in_entry && !entry_hooked {
                        entry_hooked = true;
                        rewritten.push_str("\n\t{ call.uni repro_race_enter, (); }\n");
                        *out.counts.entry("enter").or_default() += 1;
                        changed = true;
                    }
                    // setmaxnreg moves registers between warpgroups (a CUTLASS producer keeps 40):
                    // a hook is a call, whose callee's registers must fit every warp that makes
                    // it. Dropped in this build only; it never changes what a kernel computes.
                    if hookable && body.starts_with("setmaxnreg") {
                        rewritten.push_str("\n\t// repro async-race: dropped ");
                        rewritten.push_str(body);
                        *out.counts.entry("setmaxnreg dropped").or_default() += 1;
                        changed = true;
                        continue;
                    }
                    let planned = if hookable {
                        parse_instruction(body)
                            .and_then(|i| plan(&i, in_entry, maps).map(|p| (i, p)))
                            .map(|(i, mut p)| {
                                p.before.retain(|c| !skip.iter().any(|s| s == c.hook));
                                p.after.retain(|c| !skip.iter().any(|s| s == c.hook));
                                (i, p)
                            })
                            .filter(|(_, p)| !p.before.is_empty() || !p.after.is_empty())
                    } else {
                        None
                    };
                    match planned {
                        Some((instruction, plan)) => {
                            let id = (u32::from(module) << 24) | out.sites.len() as u32;
                            out.sites.push(Site {
                                id,
                                instruction: body.trim_end_matches(';').to_string(),
                                locations: locations.chain(),
                                function: function.clone(),
                            });
                            for call in plan.before.iter().chain(plan.after.iter()) {
                                *out.counts.entry(call.hook).or_default() += 1;
                            }
                            emit(
                                &mut rewritten,
                                statement,
                                &instruction,
                                &plan,
                                id,
                                &registers,
                                &mut scratch,
                            );
                            changed = true;
                        }
                        None => rewritten.push_str(statement),
                    }
                }
            }
        }
        if changed {
            out.ptx.push_str(&rewritten);
        } else {
            out.ptx.push_str(line);
        }
        out.ptx.push('\n');
    }
    for site in &mut out.sites {
        for location in &mut site.locations {
            if let Some(name) = location
                .file
                .parse()
                .ok()
                .and_then(|n: u32| locations.files.get(&n))
            {
                location.file = name.clone();
            }
        }
    }
    out
}

fn function_name(header: &str) -> Option<String> {
    // `.visible .entry NAME(` or `.func (.param .b32 r) NAME(`
    let after = if let Some(i) = header.find(".entry") {
        &header[i + 6..]
    } else {
        let i = header.find(".func")?;
        let rest = header[i + 5..].trim_start();
        if rest.starts_with('(') {
            &rest[rest.find(')')? + 1..]
        } else {
            rest
        }
    };
    let name: String = after
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Writes the hooks around one statement, in a scope of their own.
fn emit(
    out: &mut String,
    statement: &str,
    instruction: &Instruction,
    plan: &Plan,
    site: u32,
    registers: &Registers,
    scratch: &mut usize,
) {
    *scratch += 1;
    let n = *scratch;
    let guard = instruction
        .guard
        .map(|g| format!("@{g} "))
        .unwrap_or_default();
    let _ = write!(
        out,
        "\n\t{{ // repro async-race site {site}\n\t.reg .b32 %rrt{n};\n\t.reg .b32 %rr{n}_<8>;\n\t.reg .b64 %rrd{n}_<8>;\n\t.reg .pred %rrp{n};\n\tmov.u32 %rrt{n}, 0;\n"
    );
    let write_call = |out: &mut String, call: &Call| {
        let mut params = Vec::new();
        for (i, arg) in call.args.iter().enumerate() {
            let (ty, value) = materialize(out, arg, i, n, site, registers);
            params.push((ty, value));
        }
        let _ = writeln!(out, "\t{{");
        for (i, (ty, _)) in params.iter().enumerate() {
            let _ = writeln!(out, "\t.param .{ty} rrarg{i};");
        }
        if call.returns_token {
            let _ = writeln!(out, "\t.param .b32 rrret;");
        }
        for (i, (ty, value)) in params.iter().enumerate() {
            let _ = writeln!(out, "\tst.param.{ty} [rrarg{i}], {value};");
        }
        let names: Vec<String> = (0..params.len()).map(|i| format!("rrarg{i}")).collect();
        let ret = if call.returns_token { "(rrret), " } else { "" };
        let _ = writeln!(
            out,
            "\t{guard}call {ret}{}, ({});",
            call.hook,
            names.join(", ")
        );
        if call.returns_token {
            let _ = writeln!(out, "\tld.param.b32 %rrt{n}, [rrret];");
        }
        let _ = writeln!(out, "\t}}");
    };
    for call in &plan.before {
        write_call(out, call);
    }
    out.push('\t');
    out.push_str(statement.trim());
    out.push('\n');
    for call in &plan.after {
        write_call(out, call);
    }
    out.push_str("\t}");
}

/// Puts one argument's value in a scratch register of the hook's scope; returns the `.param`
/// type and the operand to store.
fn materialize(
    out: &mut String,
    arg: &Arg,
    index: usize,
    n: usize,
    site: u32,
    registers: &Registers,
) -> (&'static str, String) {
    let r32 = format!("%rr{n}_{index}");
    let r64 = format!("%rrd{n}_{index}");
    match arg {
        Arg::Token => ("b32", format!("%rrt{n}")),
        Arg::U32(value) if value == "SITE" => ("b32", site.to_string()),
        Arg::U32(value) => {
            let value = value.trim();
            match registers.bits(value) {
                Some(64) => {
                    let _ = writeln!(out, "\tcvt.u32.u64 {r32}, {value};");
                }
                Some(16) => {
                    let _ = writeln!(out, "\tcvt.u32.u16 {r32}, {value};");
                }
                _ => {
                    let _ = writeln!(out, "\tmov.u32 {r32}, {value};");
                }
            }
            ("b32", r32)
        }
        Arg::U64(value) => {
            let value = value.trim();
            match registers.bits(value) {
                Some(64) => {
                    let _ = writeln!(out, "\tmov.b64 {r64}, {value};");
                }
                Some(_) => {
                    let _ = writeln!(out, "\tcvt.u64.u32 {r64}, {value};");
                }
                None if value.starts_with(|c: char| c.is_ascii_digit()) => {
                    let _ = writeln!(out, "\tmov.b64 {r64}, {value};");
                }
                None => {
                    // A symbol (a kernel's __grid_constant__ CUtensorMap parameter): its generic
                    // address.
                    let _ = writeln!(out, "\tmov.b64 {r64}, {value};");
                    let _ = writeln!(out, "\tcvta.param.u64 {r64}, {r64};");
                }
            }
            ("b64", r64)
        }
        Arg::Address(text) => {
            // reg, reg+imm, sym, sym+imm, imm
            let (base, offset) = match text.split_once('+') {
                Some((b, o)) => (b.trim(), o.trim().to_string()),
                None => (text.trim(), "0".to_string()),
            };
            match registers.bits(base) {
                Some(64) => {
                    let _ = writeln!(out, "\tadd.s64 {r64}, {base}, {offset};");
                }
                Some(_) => {
                    let _ = writeln!(out, "\tcvt.u64.u32 {r64}, {base};");
                    let _ = writeln!(out, "\tadd.s64 {r64}, {r64}, {offset};");
                }
                None if base.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                    let _ = writeln!(out, "\tmov.b64 {r64}, {base};");
                    let _ = writeln!(out, "\tadd.s64 {r64}, {r64}, {offset};");
                }
                None => {
                    // A symbol of the instruction's own window (a __shared__ array): mov gives
                    // its address in that window.
                    let _ = writeln!(out, "\tmov.u32 {r32}, {base};");
                    let _ = writeln!(out, "\tcvt.u64.u32 {r64}, {r32};");
                    let _ = writeln!(out, "\tadd.s64 {r64}, {r64}, {offset};");
                }
            }
            ("b64", r64)
        }
        Arg::Predicate(p) => {
            let p = p.trim();
            let _ = writeln!(out, "\tselp.u32 {r32}, 1, 0, {p};");
            ("b32", r32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_text::split_top_level as split_operands;

    #[test]
    fn pieces_keep_labels_and_braces() {
        let p = pieces(
            "LAB_WAIT: mbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2; @P1 bra DONE; }",
        );
        assert_eq!(p[0], Piece::Text("LAB_WAIT:"));
        assert!(matches!(p[1], Piece::Statement(s) if s.contains("try_wait")));
        assert!(matches!(p[2], Piece::Statement(s) if s.contains("bra DONE")));
        assert_eq!(p[3], Piece::Text(" }"));
    }

    #[test]
    fn operands_split_at_the_top_level() {
        let ops = split_operands("[%r277], [%rd4, {%r283, %r1066}], [%r282]");
        assert_eq!(ops, ["[%r277]", "[%rd4, {%r283, %r1066}]", "[%r282]"]);
    }

    #[test]
    fn setmaxnreg_is_dropped_and_the_rest_hooked() {
        let ptx = ".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<4>;\n\tsetmaxnreg.dec.sync.aligned.u32 40;\n\tst.shared.u32 [%r1+16], %r2;\n\tret;\n}\n";
        let rewrite = instrument(ptx, 0);
        assert!(rewrite
            .ptx
            .contains("// repro async-race: dropped setmaxnreg.dec.sync.aligned.u32 40;"));
        assert!(!rewrite
            .ptx
            .lines()
            .any(|l| l.trim_start().starts_with("setmaxnreg")));
        assert_eq!(rewrite.counts.get("setmaxnreg dropped"), Some(&1));
        assert_eq!(rewrite.counts.get("repro_race_access"), Some(&1));
        assert_eq!(rewrite.counts.get("repro_race_exit"), Some(&1));
        assert_eq!(rewrite.counts.get("enter"), Some(&1));
        // The address: the register plus the offset, as 64 bits.
        assert!(rewrite
            .ptx
            .contains("cvt.u64.u32 %rrd1_0, %r1;\n\tadd.s64 %rrd1_0, %rrd1_0, 16;"));
    }

    #[test]
    fn function_names() {
        assert_eq!(
            function_name(".visible .entry _Z3fooPf(").as_deref(),
            Some("_Z3fooPf")
        );
        assert_eq!(
            function_name(".func  (.param .b32 func_retval0) repro_race_bar_arrive(").as_deref(),
            Some("repro_race_bar_arrive")
        );
    }
}
