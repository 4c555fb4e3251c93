//! One PTX statement split into guard, mnemonic and operands: the syntax that hooks.rs plans
//! calls from and ptx.rs rewrites. It sits below both and imports neither, so hooks.rs (which
//! says what to call) and ptx.rs (which writes the calls) form no loop.

// Operands split at commas outside `[...]` and `{...}` (a TMA copy's `[map, {x, y}]`).
use repro_text::split_top_level as split_operands;

/// A PTX statement split from its line: guard, mnemonic, operands.
#[derive(Debug)]
pub(super) struct Instruction<'a> {
    pub(super) guard: Option<&'a str>,
    pub(super) opcode: &'a str,
    pub(super) operands: Vec<String>,
}

pub(super) fn parse_instruction(statement: &str) -> Option<Instruction<'_>> {
    let mut text = statement.trim().trim_end_matches(';').trim_end();
    let mut guard = None;
    if let Some(rest) = text.strip_prefix('@') {
        let (g, rest) = rest.split_once(char::is_whitespace)?;
        guard = Some(g);
        text = rest.trim_start();
    }
    let (opcode, rest) = match text.split_once(char::is_whitespace) {
        Some((o, r)) => (o, r.trim()),
        None => (text, ""),
    };
    Some(Instruction {
        guard,
        opcode,
        operands: split_operands(rest),
    })
}

/// `[x]` → `x`.
pub(super) fn bracket(operand: &str) -> Option<&str> {
    operand
        .trim()
        .strip_prefix('[')
        .and_then(|o| o.strip_suffix(']'))
        .map(str::trim)
}
