//! An extraction for people (`repro flags`: a table of every option with its verdict and
//! reason, then warnings) and for specs (a `build:` block to paste, flags quoted for YAML).

use std::fmt::Write;

use super::{Extraction, Verdict};
use crate::spec::yaml::{scalar, Context};
use repro_text::quote::shell_quote;

/// A value of the `build:` block, which is block YAML.
fn yaml_scalar(text: &str) -> String {
    scalar(text, Context::Block)
}

fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The report: the chosen line, each option with its verdict, the harness settings, warnings.
pub fn render_report(e: &Extraction) -> String {
    let mut out = format!("nvcc line   {}\n", e.origin);
    let directory = e.directory.as_ref().map(|d| d.display().to_string());
    let others = e.others.iter().map(|(o, s)| match s {
        Some(s) => format!("{o} ({s})"),
        None => o.clone(),
    });
    let mut others: Vec<String> = others.take(8).collect();
    if e.others.len() > 8 {
        others.push(format!("and {} more", e.others.len() - 8));
    }
    let others = Some(others.join(", ")).filter(|o| !o.is_empty());
    for (name, value) in [
        ("source", &e.source_file),
        ("directory", &directory),
        ("also found", &others),
    ] {
        if let Some(value) = value {
            let _ = writeln!(out, "{name:<11} {value}");
        }
    }
    out.push('\n');
    let shown: Vec<String> = e.flags.iter().map(|f| shell_line(&f.original)).collect();
    let width = shown
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .min(44);
    for (flag, shown) in e.flags.iter().zip(&shown) {
        let mut detail = Vec::new();
        if flag.verdict == Verdict::Kept {
            detail.push(format!("-> {}", shell_line(&flag.normalized)));
        }
        detail.extend(flag.reason.clone());
        detail.extend(flag.from.as_ref().map(|from| format!("[from {from}]")));
        let verdict = flag.verdict.as_str();
        let _ = writeln!(out, "  {verdict:<8} {shown:<width$}  {}", detail.join("  "));
    }
    if e.flags.is_empty() {
        out.push_str("  (no options)\n");
    }
    let unknown = "(not on the line)";
    let _ = write!(
        out,
        "\narch        {}\n",
        e.arch.as_deref().unwrap_or(unknown)
    );
    let _ = writeln!(out, "std         {}", e.std.as_deref().unwrap_or(unknown));
    let _ = writeln!(out, "flags       {}", shell_line(&e.kept_flags()));
    for (i, dir) in e.include_dirs.iter().enumerate() {
        let label = if i == 0 { "include" } else { "" };
        let system = if dir.system { "  (system)" } else { "" };
        let missing = if dir.exists { "" } else { "  (missing)" };
        let _ = writeln!(out, "{label:<11} {}{system}{missing}", dir.path.display());
    }
    for (title, items) in [("warning", &e.warnings), ("note", &e.notes)] {
        if !items.is_empty() {
            out.push('\n');
        }
        for item in items {
            let _ = writeln!(out, "{title}: {item}");
        }
    }
    out
}

/// A `build:` block for a spec: arch, std and the kept flags, with the include dirs, warnings
/// and notes as comments.
pub fn render_build_yaml(e: &Extraction) -> String {
    let line = |s: &str| s.replace(['\n', '\r'], " ");
    let source = e
        .source_file
        .as_ref()
        .map(|s| format!(" ({})", line(s)))
        .unwrap_or_default();
    let mut out = format!(
        "# production flags from {}{source}\nbuild:\n",
        line(&e.origin)
    );
    let _ = match &e.arch {
        Some(arch) => writeln!(out, "  arch: {}", yaml_scalar(arch)),
        None => writeln!(
            out,
            "  # arch: the line names no SASS target; set yours, e.g. sm_90a"
        ),
    };
    let _ = match &e.std {
        Some(std) => writeln!(out, "  std: {}", yaml_scalar(std)),
        None => writeln!(
            out,
            "  # std: the line sets none; the harness defaults to c++17"
        ),
    };
    let flags = e.kept_flags();
    out.push_str(if flags.is_empty() {
        "  flags: []\n"
    } else {
        "  flags:\n"
    });
    for flag in &flags {
        let _ = writeln!(out, "    - {}", yaml_scalar(flag));
    }
    if !e.include_dirs.is_empty() {
        out.push_str("# include dirs of the production line, for source.include_dirs:\n");
    }
    for dir in &e.include_dirs {
        let missing = if dir.exists {
            ""
        } else {
            "  (missing on this machine)"
        };
        let _ = writeln!(
            out,
            "#   {}{missing}",
            line(&dir.path.display().to_string())
        );
    }
    for (title, items) in [("warning", &e.warnings), ("note", &e.notes)] {
        for item in items {
            let _ = writeln!(out, "# {title}: {}", line(item));
        }
    }
    out
}
