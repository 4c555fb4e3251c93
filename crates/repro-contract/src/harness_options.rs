//! Every option the generated harness reads (`parse_options` in
//! crates/repro-contract/runtime/src/run/harness_main.cuh), in one table, and the exit codes it
//! shares with `repro` (`crate::exit`).
//!
//! The code that hands options to the harness (src/run/, crates/repro-bundle/src/report.rs) spells them through
//! this table, and the table renders the harness's `--help` (a generated part of harness_main.cuh
//! that `print_usage` prints), the exit-code constants of
//! crates/repro-contract/runtime/include/repro/harness.h, the tables of harness options in
//! README.md and docs/cli.md, and (at generation time) the artifact README's table and exit codes.
//! [`GENERATED_PARTS`] also holds the runtime's table of init patterns, rendered by
//! `crate::init_patterns`. A unit test fails when one of them, or the harness's parser, drifts
//! from the table; it rewrites them with `REPRO_BLESS=1 cargo test -p repro-contract
//! harness_options` (then `scripts/regenerate.sh`: the runtime's files are hashed into every
//! artifact's manifest).

use std::fmt::Display;

use crate::exit;

/// The headings the harness's `--help` groups its options under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Inputs,
    Checks,
    Modes,
    Files,
}

impl Group {
    pub const ALL: [Group; 4] = [Group::Inputs, Group::Checks, Group::Modes, Group::Files];

    pub fn name(self) -> &'static str {
        match self {
            Group::Inputs => "inputs",
            Group::Checks => "checks",
            Group::Modes => "modes",
            Group::Files => "files",
        }
    }

    fn heading(self) -> &'static str {
        match self {
            Group::Inputs => "Inputs:",
            Group::Checks => "Checks:",
            Group::Modes => "Instead of one checked run:",
            Group::Files => "Files:",
        }
    }
}

/// One option of the harness: `--name` alone, or `--name VALUE` (also `--name=VALUE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessOption {
    pub name: &'static str,
    /// The value's placeholder; None for a flag.
    pub value: Option<&'static str>,
    pub group: Group,
    /// One line (the usage text wraps it).
    pub help: &'static str,
}

impl HarnessOption {
    /// The flag, as one argument.
    pub fn flag(&self) -> String {
        debug_assert!(self.value.is_none(), "{} takes a value", self.name);
        self.name.to_string()
    }

    /// The option and its value, as two arguments.
    pub fn with(&self, value: impl Display) -> [String; 2] {
        debug_assert!(self.value.is_some(), "{} is a flag", self.name);
        [self.name.to_string(), value.to_string()]
    }

    /// `--name VALUE` or `--name`, as the usage text and the README show it.
    pub fn synopsis(&self) -> String {
        match self.value {
            Some(value) => format!("{} {value}", self.name),
            None => self.name.to_string(),
        }
    }
}

const fn flag(name: &'static str, group: Group, help: &'static str) -> HarnessOption {
    HarnessOption {
        name,
        value: None,
        group,
        help,
    }
}

const fn valued(
    name: &'static str,
    value: &'static str,
    group: Group,
    help: &'static str,
) -> HarnessOption {
    HarnessOption {
        name,
        value: Some(value),
        group,
        help,
    }
}

pub const ONES: HarnessOption = flag(
    "--ones",
    Group::Inputs,
    "A = B = 1, C and bias 0: every output must equal alpha*K, compared exactly (op: custom: every \
     floating-point input 1, against your reference)",
);
pub const INIT: HarnessOption = valued(
    "--init",
    "T=PATTERN",
    Group::Inputs,
    "tensor T's values: ones, zeros, iota, identity, uniform[:LO:HI], int_uniform[:LO:HI], \
     normal[:MEAN:STD], row_ramp (1 + the row: every tile of rows differs) or file:PATH (relative \
     to spec.yaml's folder); once per tensor",
);
pub const SEED: HarnessOption = valued(
    "--seed",
    "N",
    Group::Inputs,
    "seed of every random tensor (counter-based generators: same seed, same values, any machine)",
);
pub const SIZE: HarnessOption = valued(
    "--size",
    "NAME=VALUE",
    Group::Inputs,
    "run at another value of one of the spec's sizes (repro sweep, repro shrink); once per size",
);
pub const REPEAT: HarnessOption = valued(
    "--repeat",
    "N",
    Group::Checks,
    "launch N times and compare the outputs bitwise between runs (with --bench: N timed launches, \
     default 20)",
);
pub const TIMEOUT: HarnessOption = valued(
    "--timeout",
    "S",
    Group::Checks,
    "seconds one launch may take before it counts as a hang (exit 5)",
);
pub const STRESS: HarnessOption = valued(
    "--stress",
    "MODE",
    Group::Checks,
    "bandwidth, l2 or jitter: every second launch runs beside a stressor kernel on a second \
     stream (DRAM traffic, or the L2 thrashed), or sleeps random nanoseconds at the kernel's \
     repro::delay points (jitter), so that races with a short window show (default: the spec's \
     check.stress)",
);
pub const JITTER_NS: HarnessOption = valued(
    "--jitter-ns",
    "N",
    Group::Checks,
    "with --stress jitter: a delay point sleeps a random 0 to N ns, one draw per warp and call \
     (default 2000; at most 1000000)",
);
pub const STRESS_SMS: HarnessOption = valued(
    "--stress-sms",
    "N",
    Group::Checks,
    "with --stress: the stressor's SMs (default: those the grid leaves free); a grid of \
     repro::persistent_sm_count() gets N fewer CTAs on a stressed launch",
);
pub const REFERENCE: HarnessOption = valued(
    "--reference",
    "WHERE",
    Group::Checks,
    "host, device, emulated or auto: where the fp64 reference of a GEMM or of attention's \
     forward runs; emulated: a GEMM's from int8 tensor cores (default: the spec's \
     reference.provider)",
);
pub const REFERENCE_CACHE: HarnessOption = valued(
    "--reference-cache",
    "DIR",
    Group::Checks,
    "reuse the fp64 reference of an earlier run with the same operands and GEMM, kept in DIR",
);
pub const CHECK_DEVICE_INPUTS: HarnessOption = flag(
    "--check-device-inputs",
    Group::Checks,
    "compare every input element made on the device with the host generator (default: a sample)",
);
pub const PROBE: HarnessOption = flag(
    "--probe",
    Group::Modes,
    "the probe suite: ones, K slices, row and column codes, identity, tile ramp (scaled GEMMs: scale \
     codes; grouped: group codes; op: custom: ones, iota, block codes), random; then a verdict",
);
pub const BENCH: HarnessOption = flag(
    "--bench",
    Group::Modes,
    "time the kernel with device events instead of checking it",
);
pub const WARMUP: HarnessOption = valued(
    "--warmup",
    "N",
    Group::Modes,
    "with --bench: untimed launches before the timed ones (default 5)",
);
pub const FLUSH_L2: HarnessOption = flag(
    "--flush-l2",
    Group::Modes,
    "with --bench: write over a buffer twice the L2's size before each timed launch",
);
pub const EMIT_INPUTS: HarnessOption = valued(
    "--emit-inputs",
    "DIR",
    Group::Modes,
    "write the generated inputs as .npy into DIR and exit (no GPU needed)",
);
pub const QUEUE: HarnessOption = valued(
    "--queue",
    "FILE",
    Group::Modes,
    "run a queue of checks in this one process: one per line of FILE (- for standard input), its \
     options separated by tabs; with --json, one JSON line per check",
);
pub const SPEC: HarnessOption = valued(
    "--spec",
    "FILE",
    Group::Files,
    "the resolved spec to run (default: the artifact's spec.yaml, found from the executable's \
     folder): inits, seeds, checks and the reference are read from it at run time",
);
pub const JSON: HarnessOption = valued(
    "--json",
    "FILE",
    Group::Files,
    "write the whole report as JSON",
);
pub const DUMP: HarnessOption = valued(
    "--dump",
    "DIR",
    Group::Files,
    "write inputs, outputs and the reference as .npy into DIR",
);
pub const HELP: HarnessOption = flag(
    "--help",
    Group::Files,
    "print the options and exit (also -h)",
);

/// Every option the harness reads, in the order its `--help` lists them (by group).
pub const ALL: &[HarnessOption] = &[
    ONES,
    INIT,
    SEED,
    SIZE,
    REPEAT,
    TIMEOUT,
    STRESS,
    STRESS_SMS,
    JITTER_NS,
    REFERENCE,
    REFERENCE_CACHE,
    CHECK_DEVICE_INPUTS,
    PROBE,
    BENCH,
    WARMUP,
    FLUSH_L2,
    EMIT_INPUTS,
    QUEUE,
    SPEC,
    JSON,
    DUMP,
    HELP,
];

/// One exit code as the runtime names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCode {
    /// The C++ constant in repro/harness.h.
    pub cpp_name: &'static str,
    pub code: u8,
    pub meaning: &'static str,
    /// Whether the harness itself exits with it (3 and 6 are repro's: a failed build, findings
    /// of compute-sanitizer around the harness).
    pub harness: bool,
}

/// The exit codes `repro` and the harness share, from `crate::exit` (all but repro's own
/// `INTERNAL`, which the harness never returns).
pub const EXIT_CODES: &[ExitCode] = &[
    ExitCode {
        cpp_name: "kExitPassed",
        code: exit::PASSED,
        meaning: "passed",
        harness: true,
    },
    ExitCode {
        cpp_name: "kExitMismatch",
        code: exit::MISMATCH,
        meaning: "mismatch",
        harness: true,
    },
    ExitCode {
        cpp_name: "kExitUsage",
        code: exit::USAGE,
        meaning: "usage or spec error",
        harness: true,
    },
    ExitCode {
        cpp_name: "kExitBuild",
        code: exit::BUILD,
        meaning: "build failed",
        harness: false,
    },
    ExitCode {
        cpp_name: "kExitCudaError",
        code: exit::CUDA_ERROR,
        meaning: "CUDA error or device fault",
        harness: true,
    },
    ExitCode {
        cpp_name: "kExitHang",
        code: exit::HANG,
        meaning: "hang",
        harness: true,
    },
    ExitCode {
        cpp_name: "kExitSanitizer",
        code: exit::SANITIZER,
        meaning: "sanitizer errors",
        harness: false,
    },
    ExitCode {
        cpp_name: "kExitNoDevice",
        code: exit::NO_DEVICE,
        meaning: "no usable CUDA device",
        harness: true,
    },
];

/// How to rewrite the generated texts, for the messages that say they are stale.
pub const REGENERATE: &str =
    "REPRO_BLESS=1 cargo test -p repro-contract harness_options, then scripts/regenerate.sh";

/// The usage text's width: options, then help wrapped to this many columns.
const USAGE_WIDTH: usize = 100;

/// Words of `text` in lines of at most `width` characters (a longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The harness's option list as `--help` prints it, one heading per group.
pub fn usage_text() -> String {
    let column = ALL.iter().map(|o| o.synopsis().len()).max().unwrap_or(0) + 4;
    let mut text = String::new();
    for group in Group::ALL {
        text.push_str(group.heading());
        text.push('\n');
        for option in ALL.iter().filter(|o| o.group == group) {
            let lines = wrap(option.help, USAGE_WIDTH - column);
            for (i, line) in lines.iter().enumerate() {
                let left = if i == 0 {
                    format!("  {}", option.synopsis())
                } else {
                    String::new()
                };
                text.push_str(&format!("{left:<column$}{line}\n"));
            }
        }
    }
    text
}

/// The codes the harness exits with: `0 passed, 1 mismatch, ...`.
pub fn harness_exit_codes() -> String {
    let codes: Vec<String> = EXIT_CODES
        .iter()
        .filter(|c| c.harness)
        .map(|c| format!("{} {}", c.code, c.meaning))
        .collect();
    codes.join(", ")
}

/// The usage text's last line: the codes the harness exits with.
pub fn usage_exit_line() -> String {
    format!("exit: {}\n", harness_exit_codes())
}

/// `text` as a C++ string literal, one source line per line of text.
fn cpp_string_lines(text: &str, indent: &str) -> String {
    let escape = |line: &str| line.replace('\\', "\\\\").replace('"', "\\\"");
    text.split_inclusive('\n')
        .map(|line| {
            format!(
                "{indent}\"{}{}\"",
                escape(line.trim_end_matches('\n')),
                if line.ends_with('\n') { "\\n" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The generated part of harness_main.cuh: the option list and exit line `print_usage` prints.
pub fn usage_cpp() -> String {
    format!(
        "// The options parse_options reads, as --help lists them (crates/repro-contract/src/harness_options.rs).\n\
         inline constexpr const char* kUsageOptions =\n{};\n\
         inline constexpr const char* kUsageExitCodes = {};\n",
        cpp_string_lines(&usage_text(), "    "),
        cpp_string_lines(&usage_exit_line(), "").trim_start()
    )
}

/// The generated part of repro/harness.h: the exit codes as constants.
pub fn exit_codes_cpp() -> String {
    let mut text = String::from(
        "// Exit codes, shared with `repro` itself: the constants of `mod exit` in src/error.rs.\n",
    );
    let width = EXIT_CODES
        .iter()
        .map(|c| c.cpp_name.len())
        .max()
        .unwrap_or(0);
    for c in EXIT_CODES {
        let note = if c.harness {
            ""
        } else {
            " (repro's, never the harness's own)"
        };
        let declaration = format!("inline constexpr int {} = {};", c.cpp_name, c.code);
        text.push_str(&format!(
            "{declaration:<w$}  // {}{note}\n",
            c.meaning,
            w = width + 26
        ));
    }
    text
}

/// The README's table of harness options.
pub fn readme_table() -> String {
    let escape = |text: &str| text.replace('|', "\\|").replace('*', "\\*");
    let mut text = String::from("| option | kind | what |\n|---|---|---|\n");
    for group in Group::ALL {
        for option in ALL.iter().filter(|o| o.group == group) {
            text.push_str(&format!(
                "| `{}` | {} | {} |\n",
                option.synopsis(),
                group.name(),
                escape(option.help)
            ));
        }
    }
    text
}

/// A committed file with a part generated from this table, between two marker lines.
pub struct GeneratedPart {
    /// Relative to the repository root.
    pub path: &'static str,
    pub begin: &'static str,
    pub end: &'static str,
    pub render: fn() -> String,
}

/// Every generated part of a committed file.
pub const GENERATED_PARTS: &[GeneratedPart] = &[
    GeneratedPart {
        path: "crates/repro-contract/runtime/src/run/harness_main.cuh",
        begin: "// ---- generated by repro from crates/repro-contract/src/harness_options.rs; do not edit ----",
        end: "// ---- end of the generated part ----",
        render: usage_cpp,
    },
    GeneratedPart {
        path: "crates/repro-contract/runtime/include/repro/harness.h",
        begin: "// ---- generated by repro from crates/repro-contract/src/exit.rs and harness_options.rs; do not edit ----",
        end: "// ---- end of the generated part ----",
        render: exit_codes_cpp,
    },
    GeneratedPart {
        path: "crates/repro-contract/runtime/src/inputs/generators.cuh",
        begin: "// ---- generated by repro from crates/repro-contract/src/init_patterns.rs; do not edit ----",
        end: "// ---- end of the generated part ----",
        render: crate::init_patterns::generators_cpp,
    },
    GeneratedPart {
        path: "docs/cli.md",
        begin: "<!-- harness-options:begin: generated by repro from crates/repro-contract/src/harness_options.rs; do not edit -->",
        end: "<!-- harness-options:end -->",
        render: readme_table,
    },
    GeneratedPart {
        path: "README.md",
        begin: "<!-- harness-options:begin: generated by repro from crates/repro-contract/src/harness_options.rs; do not edit -->",
        end: "<!-- harness-options:end -->",
        render: readme_table,
    },
];

impl GeneratedPart {
    /// `text` with this part rendered anew between its markers; None when a marker is missing.
    pub fn splice(&self, text: &str) -> Option<String> {
        let begin = text.find(self.begin)? + self.begin.len();
        let begin = begin + text[begin..].find('\n')? + 1;
        let end = begin + text[begin..].find(self.end)?;
        Some(format!(
            "{}{}{}",
            &text[..begin],
            (self.render)(),
            &text[end..]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    /// The repository's root: the generated parts' paths are written from there.
    fn root() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    /// Fails when a committed generated part is stale; rewrites it under REPRO_BLESS=1.
    #[test]
    fn generated_parts_match_the_table() {
        let bless = std::env::var_os("REPRO_BLESS").is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for part in GENERATED_PARTS {
            let path = root().join(part.path);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let wanted = part.splice(&text).unwrap_or_else(|| {
                panic!(
                    "{} has no generated part between `{}` and `{}`",
                    part.path, part.begin, part.end
                )
            });
            if wanted == text {
                continue;
            }
            if bless {
                std::fs::write(&path, &wanted)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
                eprintln!("rewrote the generated part of {}", part.path);
            } else {
                stale.push(part.path);
            }
        }
        assert!(
            stale.is_empty(),
            "{} drifted from the table its marker names (crates/repro-contract/src/harness_options.rs or init_patterns.rs); regenerate: {REGENERATE}",
            stale.join(", ")
        );
    }

    /// The body of parse_options in harness_main.cuh.
    fn parser_source() -> String {
        let text = std::fs::read_to_string(
            root().join("crates/repro-contract/runtime/src/run/harness_main.cuh"),
        )
        .expect("harness_main.cuh");
        let start = text
            .find("inline Options parse_options(")
            .expect("parse_options in harness_main.cuh");
        let end = start + text[start..].find("\n}\n").expect("end of parse_options");
        text[start..end].to_string()
    }

    /// The option names after each occurrence of `prefix` (`is("`, `arg == "`).
    fn names_after(source: &str, prefix: &str) -> BTreeSet<String> {
        source
            .match_indices(prefix)
            .filter_map(|(i, _)| {
                let rest = &source[i + prefix.len()..];
                let name = &rest[..rest.find('"')?];
                name.starts_with("--").then(|| name.to_string())
            })
            .collect()
    }

    /// Every option the harness parses is in the table, and takes a value exactly when the
    /// table gives it one; every option in the table is parsed.
    #[test]
    fn the_harness_parses_exactly_the_tables_options() {
        let source = parser_source();
        let valued = names_after(&source, "is(\"");
        let flags = names_after(&source, "arg == \"");
        let values_read = names_after(&source, "value_of(i, \"");
        let table_valued: BTreeSet<String> = ALL
            .iter()
            .filter(|o| o.value.is_some())
            .map(|o| o.name.to_string())
            .collect();
        let table_flags: BTreeSet<String> = ALL
            .iter()
            .filter(|o| o.value.is_none())
            .map(|o| o.name.to_string())
            .collect();
        assert_eq!(
            valued, table_valued,
            "options with a value: parse_options (is(\"--x\")) vs crates/repro-contract/src/harness_options.rs"
        );
        assert_eq!(
            values_read, table_valued,
            "every option with a value reads it under its own name (value_of(i, \"--x\"))"
        );
        assert_eq!(
            flags, table_flags,
            "flags: parse_options (arg == \"--x\") vs crates/repro-contract/src/harness_options.rs"
        );
        let names: BTreeSet<&str> = ALL.iter().map(|o| o.name).collect();
        assert_eq!(names.len(), ALL.len(), "an option is in the table twice");
    }

    /// Every constant of exit.rs but repro's own INTERNAL has a C++ name.
    #[test]
    fn every_shared_exit_code_reaches_the_runtime() {
        let declared: BTreeSet<u8> = include_str!("exit.rs")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter(|l| !l.starts_with("INTERNAL:"))
            .map(|l| {
                l.rsplit('=')
                    .next()
                    .and_then(|v| v.trim().trim_end_matches(';').parse().ok())
                    .unwrap_or_else(|| panic!("cannot read `pub const {l}`"))
            })
            .collect();
        let table: BTreeSet<u8> = EXIT_CODES.iter().map(|c| c.code).collect();
        assert_eq!(declared, table, "exit.rs's codes vs EXIT_CODES");
        assert!(!table.contains(&exit::INTERNAL));
    }

    #[test]
    fn the_usage_text_is_wrapped_and_escaped() {
        let text = usage_text();
        assert!(text.lines().all(|l| l.len() <= USAGE_WIDTH), "{text}");
        assert!(text.contains("  --init T=PATTERN"), "{text}");
        assert_eq!(
            usage_exit_line(),
            "exit: 0 passed, 1 mismatch, 2 usage or spec error, 4 CUDA error or device fault, \
             5 hang, 7 no usable CUDA device\n"
        );
        assert_eq!(
            cpp_string_lines("a \"b\"\\\nc\n", ""),
            "\"a \\\"b\\\"\\\\\\n\"\n\"c\\n\""
        );
        assert_eq!(REFERENCE.with("host"), ["--reference", "host"]);
        assert_eq!(ONES.flag(), "--ones");
    }

    #[test]
    fn a_part_is_spliced_between_its_markers() {
        let part = GeneratedPart {
            path: "x",
            begin: "// begin",
            end: "// end",
            render: || "new\n".to_string(),
        };
        assert_eq!(
            part.splice("a\n// begin (do not edit)\nold\n// end\nb\n")
                .as_deref(),
            Some("a\n// begin (do not edit)\nnew\n// end\nb\n")
        );
        assert_eq!(part.splice("a\n// end\n"), None);
    }
}
