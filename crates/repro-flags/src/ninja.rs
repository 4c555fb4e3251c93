//! `build.ninja` manifests (torch writes one per C++ extension, CMake's Ninja generator one per
//! project): variables, rules and build edges, expanded the way ninja builds a command line, so
//! that each edge whose command runs nvcc is an invocation ("build.ninja:31 (build gemm.cuda.o)").
//!
//! Scoping follows ninja: `$in`/`$out`, then the edge's bindings, then the rule's (expanded
//! lazily, in the edge's scope), then the file's (expanded where they are defined).
//! `include`/`subninja` are not followed: torch's and CMake's compile rules live in the file.

use std::cell::RefCell;
use std::collections::HashMap;

use super::log::find_command;
use super::{extract::is_source, Invocation};
use repro_text::quote::shell_quote;

type Vars = HashMap<String, String>;

/// A manifest has `rule` and `build` statements at the start of lines.
pub(crate) fn looks_like(text: &str) -> bool {
    let (mut rule, mut build) = (false, false);
    for line in text.lines() {
        rule |= line.starts_with("rule ");
        build |= line.starts_with("build ") && line.contains(':');
    }
    rule && build
}

struct Edge {
    line: usize,
    outs: Vec<String>,
    rule: String,
    ins: Vec<String>,
    vars: Vars,
}

/// Every edge whose command runs nvcc, in the manifest's order.
pub(crate) fn invocations(text: &str, name: &str) -> Vec<Invocation> {
    enum Scope {
        File,
        Rule(String),
        Edge(usize),
    }
    let mut file = Vars::new();
    let mut rules: HashMap<String, Vars> = HashMap::new();
    let mut edges: Vec<Edge> = Vec::new();
    let mut scope = Scope::File;
    for (number, line) in logical_lines(text) {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((key, value)) = trimmed.split_once('=') {
                let (key, value) = (key.trim().to_string(), value.trim_start());
                match &scope {
                    Scope::Rule(rule) => {
                        rules
                            .entry(rule.clone())
                            .or_default()
                            .insert(key, value.to_string());
                    }
                    Scope::Edge(i) => {
                        let value = expand(value, &|n| file.get(n).cloned());
                        edges[*i].vars.insert(key, value);
                    }
                    Scope::File => {}
                }
            }
            continue;
        }
        scope = Scope::File;
        if let Some(rule) = trimmed.strip_prefix("rule ") {
            scope = Scope::Rule(rule.trim().to_string());
        } else if let Some(rest) = trimmed.strip_prefix("build ") {
            if let Some(edge) = parse_edge(number, rest, &file) {
                edges.push(edge);
                scope = Scope::Edge(edges.len() - 1);
            }
        } else if let Some((key, value)) = trimmed.split_once('=') {
            let value = expand(value.trim_start(), &|n| file.get(n).cloned());
            file.insert(key.trim().to_string(), value);
        }
    }
    let mut out = Vec::new();
    for edge in &edges {
        let rule = rules.get(&edge.rule);
        let command =
            rule.and_then(|rule| edge_var("command", edge, rule, &file, &RefCell::default()));
        let Some((command, found)) = command.and_then(|c| Some((c.clone(), find_command(&c)?)))
        else {
            continue;
        };
        let outs = edge
            .outs
            .first()
            .map(|o| format!(" (build {o})"))
            .unwrap_or_default();
        let mut inv = Invocation::new(format!("{name}:{}{outs}", edge.line), command, found.args);
        inv.file = edge.ins.iter().find(|i| is_source(i)).cloned();
        out.push(inv);
    }
    out
}

/// A variable as the edge's command sees it. Rule variables are expanded once per edge
/// (`done`), so that a manifest whose variables refer to each other many times, or in a
/// cycle (which reads as empty), costs linear time.
fn edge_var(
    name: &str,
    edge: &Edge,
    rule: &Vars,
    file: &Vars,
    done: &RefCell<Vars>,
) -> Option<String> {
    let paths = |p: &[String]| {
        p.iter()
            .map(|p| shell_quote(p))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let rule_var = || {
        let raw = rule.get(name)?;
        if let Some(value) = done.borrow().get(name) {
            return Some(value.clone());
        }
        done.borrow_mut().insert(name.to_string(), String::new());
        let value = expand(raw, &|n| edge_var(n, edge, rule, file, done));
        done.borrow_mut().insert(name.to_string(), value.clone());
        Some(value)
    };
    match name {
        "in" => Some(paths(&edge.ins)),
        "out" => Some(paths(&edge.outs)),
        _ => edge.vars.get(name).cloned().or_else(rule_var),
    }
    .or_else(|| file.get(name).cloned())
}

/// `build OUTS [| IMPLICIT]: RULE INS [| IMPLICIT] [|| ORDER-ONLY]`.
fn parse_edge(line: usize, rest: &str, file: &Vars) -> Option<Edge> {
    let tokens = tokens(rest);
    let colon = tokens
        .iter()
        .position(|t| t.ends_with(':') && !t.ends_with("$:"))?;
    let word = |t: &str| expand(t, &|n| file.get(n).cloned());
    let mut outs: Vec<String> = tokens[..=colon]
        .iter()
        .take_while(|t| *t != "|")
        .map(|t| word(t))
        .collect();
    if let Some(last) = outs
        .last_mut()
        .filter(|_| tokens[..colon].iter().all(|t| t != "|"))
    {
        last.pop();
    }
    outs.retain(|o| !o.is_empty());
    let mut after = tokens[colon + 1..].iter();
    let rule = after.next()?.clone();
    let ins = after
        .take_while(|t| *t != "|" && *t != "||")
        .map(|t| word(t))
        .collect();
    Some(Edge {
        line,
        outs,
        rule,
        ins,
        vars: Vars::new(),
    })
}

/// Words separated by unescaped blanks (`$ ` is a blank inside a path).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '$' => {
                cur.push('$');
                cur.extend(chars.next());
            }
            c if c == ' ' || c == '\t' => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Longest expansion kept: `sh -c` takes the command as one argument, which Linux limits to
/// 128 KiB (MAX_ARG_STRLEN); a manifest whose variables double each other stops here.
const MAX_VALUE: usize = 128 << 10;

/// Expands `$var`, `${var}`, `$$`, `$ `, `$:`.
fn expand(raw: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let var_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next().filter(|_| out.len() <= MAX_VALUE) {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(c @ ('$' | ' ' | ':' | '\n')) => {
                chars.next();
                out.push(c);
            }
            Some('{') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                out.push_str(&lookup(&name).unwrap_or_default());
            }
            Some(c) if var_char(c) => {
                let mut name = String::new();
                while let Some(c) = chars.next_if(|&c| var_char(c)) {
                    name.push(c);
                }
                out.push_str(&lookup(&name).unwrap_or_default());
            }
            _ => {}
        }
    }
    out
}

/// Lines joined at a trailing `$` (the next line's indentation dropped), with their numbers.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut continued = false;
    for (i, line) in text.lines().enumerate() {
        let piece = if continued { line.trim_start() } else { line };
        let dollars = piece.chars().rev().take_while(|&c| c == '$').count();
        let body = if dollars % 2 == 1 {
            &piece[..piece.len() - 1]
        } else {
            piece
        };
        match out.last_mut() {
            Some((_, last)) if continued => last.push_str(body),
            _ => out.push((i + 1, body.to_string())),
        }
        continued = dollars % 2 == 1;
    }
    out
}
