//! Production flags from real compile lines: `repro flags` (docs/cli.md) and `build.flags_from`
//! (docs/spec.md).
//!
//! A reproducer built with other flags than production proves nothing, and users have those
//! flags only as a line in a build log, a JIT log, a `build.ninja` or a `compile_commands.json`.
//! This module finds the nvcc invocations there ([`log`], [`ninja`], [`compdb`]), splits them as
//! the shell does ([`shell`]), reads every spelling nvcc accepts ([`nvcc`]), picks the invocation
//! that compiles the kernel ([`select`]) and turns it into flags for an *executable* harness
//! build, each kept, moved (into `arch`/`std`/include dirs) or dropped with its reason
//! ([`extract`]); [`render`] prints that for people and as a `build:` block for a spec.
//!
//! Nothing that can change numerics or code generation is dropped without a warning.
//!
//! A crate of its own (README.md, "Layout"), the lowest feature: it sits on the contract and the
//! engine only. It also holds [`machine`], the spec's `Lookups` answered for this machine (a
//! build log's compile line, the toolchain's CUTLASS), because every feature that loads a spec from
//! a file passes it: bisect, bundle, campaign and capture depend on this crate, never it on them.

mod compdb;
mod extract;
mod log;
pub mod machine;
mod ninja;
mod nvcc;
mod render;
mod select;
mod shell;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_contract::{file_kind, spec};
use repro_engine::build;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use render::{render_build_yaml, render_report};

/// What was read off one compile line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Extraction {
    /// Where the chosen invocation came from ("logs/build.log:42", "compile_commands.json entry 3").
    pub origin: String,
    /// The file it compiles, as the line names it.
    pub source_file: Option<String>,
    /// The directory it ran in, when the input says.
    pub directory: Option<PathBuf>,
    /// The other nvcc invocations of the input (origin, source file), for "which one did you mean".
    pub others: Vec<(String, Option<String>)>,
    /// The SASS target (`sm_90a`); the highest when the line builds several (see `notes`).
    pub arch: Option<String>,
    /// The C++ dialect (`c++17`) from `-std`.
    pub std: Option<String>,
    /// Include directories in order, absolute when the directory is known.
    pub include_dirs: Vec<IncludeDir>,
    /// Every option of the line, in order, with its verdict.
    pub flags: Vec<Flag>,
    /// Dropped options that can change numerics or code generation, missing include dirs,
    /// ambiguity, a host compiler that is an MPI wrapper...
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IncludeDir {
    pub path: PathBuf,
    /// From `-isystem`.
    pub system: bool,
    /// Whether it exists on this machine.
    pub exists: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flag {
    /// The option as it appeared (possibly several words, e.g. ["-Xcompiler", "-fPIC"]).
    pub original: Vec<String>,
    /// The arguments to give nvcc for the harness build, in one canonical spelling; empty when
    /// dropped or when carried by `arch`/`std`/`include_dirs`.
    pub normalized: Vec<String>,
    pub verdict: Verdict,
    /// Why it was dropped, moved or changed; None for plain kept flags.
    pub reason: Option<String>,
    /// Whether the option can change numerics or code generation.
    pub affects_codegen: bool,
    /// Where the words came from when not from the line itself: a response file's path, or
    /// `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS` set on the line.
    pub from: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Kept,
    Dropped,
    /// Carried by `arch`, `std` or `include_dirs` instead.
    Moved,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Kept => "kept",
            Verdict::Dropped => "dropped",
            Verdict::Moved => "moved",
        }
    }
}

/// What the text to read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A build or JIT log: ninja, make, CMake, a Python logger..., anything with nvcc lines in it.
    Log,
    /// A ninja manifest (`build.ninja`), with its variables and rules.
    Ninja,
    /// CMake's `compile_commands.json`.
    CompileCommands,
    /// One command line given by the user: it must be nvcc (or only nvcc options).
    CommandLine,
}

/// A text to read compile lines from.
#[derive(Debug, Clone)]
pub struct Input {
    /// For messages and origins ("logs/build.log").
    pub name: String,
    pub text: String,
    pub format: Format,
    /// Where relative response files are looked for when the invocation's directory is unknown
    /// or lacks them: the input file's folder, or the current directory for a command line.
    pub base_dir: Option<PathBuf>,
}

impl Input {
    /// A text whose format is told by its content: a JSON array of objects is a compilation
    /// database, `rule`/`build` statements are a ninja manifest, anything else a log.
    pub fn from_text(name: impl Into<String>, text: impl Into<String>) -> Input {
        let text = text.into();
        let format = if compdb::looks_like(&text) {
            Format::CompileCommands
        } else if ninja::looks_like(&text) {
            Format::Ninja
        } else {
            Format::Log
        };
        Input {
            name: name.into(),
            text,
            format,
            base_dir: None,
        }
    }
}

/// Which invocation to take when there are several.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Take the invocations whose line contains this.
    pub match_pattern: Option<String>,
    /// Prefer invocations whose source file (or line) contains one of these, or their stem
    /// (`tiled_gemm.cuh` also matches `tiled_gemm.cu`).
    pub hints: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is {kind}, not a build log; write the log to a file first (e.g. `ninja -v > build.log`) and pass that", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{} is {}, above the {} MiB a build log is read to; pass the part with the compile line (e.g. `grep nvcc {} > nvcc.log`)", path.display(), crate::file_kind::mib(*bytes), MAX_LOG_BYTES >> 20, path.display())]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("{name} is not a valid compile_commands.json: {message}")]
    CompileCommands { name: String, message: String },
    #[error("no nvcc invocation that compiles a source file in {name} (looked at {lines} lines{}); pass the compile line itself, or --match PATTERN", idle_lines(*idle, example))]
    NoInvocation {
        name: String,
        lines: usize,
        idle: usize,
        example: Option<(String, String)>,
    },
    #[error("no nvcc invocation in {name} contains `{pattern}`; the candidates are:\n{}\nhelp: --match takes a substring of the compile line, e.g. the source file's name", list(candidates))]
    NoMatch {
        name: String,
        pattern: String,
        candidates: Vec<String>,
    },
    #[error("{name} has {} nvcc invocations{why}, with different flags:\n{}\nhelp: pick one with --match PATTERN (a substring of its line, e.g. the source file's name)", candidates.len(), list(candidates))]
    Ambiguous {
        name: String,
        why: String,
        candidates: Vec<String>,
    },
    #[error("response file `{file}` named at {origin} not found (looked for {}); copy it next to the log, or pass the compile line with its contents", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    ResponseFile {
        origin: String,
        file: String,
        tried: Vec<PathBuf>,
    },
    #[error(
        "response files named at {origin} nest deeper than {depth} levels (a file naming itself?)"
    )]
    ResponseDepth { origin: String, depth: usize },
    #[error("the command line runs `{program}`, not nvcc; pass an nvcc command line (ccache, env and VAR=value before it are fine) or just nvcc's options")]
    NotNvcc { program: String },
    #[error("the command line ends inside a {quote} quote; quote it for your shell so that nvcc's own quotes reach repro")]
    Unterminated { quote: char },
    #[error("the command line is empty")]
    Empty,
}

fn idle_lines(idle: usize, example: &Option<(String, String)>) -> String {
    match example {
        Some((origin, text)) => {
            format!("; {idle} nvcc line(s) compile nothing, e.g. {origin}: `{text}`")
        }
        None => String::new(),
    }
}

/// The most candidates an error lists: a log of a large project has tens of thousands of compile
/// lines, and a message of all of them (16 MB for one such log) helps no one.
const MAX_LISTED: usize = 20;

/// The candidates, one a line, the first [`MAX_LISTED`] of them and how many more.
fn list(candidates: &[String]) -> String {
    let mut lines: Vec<String> = candidates
        .iter()
        .take(MAX_LISTED)
        .map(|c| format!("  {c}"))
        .collect();
    if candidates.len() > MAX_LISTED {
        lines.push(format!("  ... and {} more", candidates.len() - MAX_LISTED));
    }
    lines.join("\n")
}

/// One nvcc run found in an input, before its options are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invocation {
    pub origin: String,
    /// The whole command as written, for `--match`.
    pub text: String,
    pub directory: Option<PathBuf>,
    /// nvcc's arguments (the words after the program).
    pub args: Vec<String>,
    /// `NVCC_PREPEND_FLAGS` / `NVCC_APPEND_FLAGS` set on the line: nvcc splices them in.
    pub prepend: Vec<String>,
    pub append: Vec<String>,
    /// The source file a compilation database names.
    pub file: Option<String>,
    /// Problems reading the line (a quote left open by a truncating logger).
    pub warnings: Vec<String>,
}

impl Invocation {
    pub(crate) fn new(origin: String, text: String, args: Vec<String>) -> Invocation {
        Invocation {
            origin,
            text,
            directory: None,
            args,
            prepend: Vec::new(),
            append: Vec::new(),
            file: None,
            warnings: Vec::new(),
        }
    }
}

/// Largest log read. A build log with `-v` of a large project, or its compile_commands.json, is
/// tens of MiB; the bound keeps `--from-log /dev/zero`'s like (a file named by mistake) from
/// filling the memory.
pub const MAX_LOG_BYTES: u64 = 256 << 20;

/// Reads a log, a ninja manifest, a compile_commands.json, or a file holding one command line;
/// the format is told by the content. Only a regular file of at most [`MAX_LOG_BYTES`] is read:
/// a fifo would block (a log is written to a file first), a device never ends.
pub fn read_input(path: &Path) -> Result<Input, FlagsError> {
    use crate::file_kind::{read_regular, ReadError};
    let bytes = read_regular(path, MAX_LOG_BYTES).map_err(|e| match e {
        ReadError::Io(source) => FlagsError::Read {
            path: path.into(),
            source,
        },
        ReadError::NotAFile(kind) => FlagsError::NotAFile {
            path: path.into(),
            kind,
        },
        ReadError::TooLarge { bytes } => FlagsError::TooLarge {
            path: path.into(),
            bytes,
        },
    })?;
    let mut input = Input::from_text(path.display().to_string(), String::from_utf8_lossy(&bytes));
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
    input.base_dir = Some(folder.unwrap_or(Path::new(".")).to_path_buf());
    Ok(input)
}

/// A single command line given on the command line: an nvcc invocation, or only its options.
pub fn from_command_line(line: &str) -> Result<Input, FlagsError> {
    let split = shell::split(line, shell::Mode::Command);
    if let Some(quote) = split.unterminated {
        return Err(FlagsError::Unterminated { quote });
    }
    if split.words.is_empty() {
        return Err(FlagsError::Empty);
    }
    let program = log::skip_wrappers(&split.words).next();
    let options_only = program.map_or(true, |p| p.starts_with(['-', '@']));
    if !options_only && log::find_command(line).is_none() {
        let program = program.cloned().unwrap_or_default();
        if !log::is_nvcc(&program) {
            return Err(FlagsError::NotNvcc { program });
        }
    }
    Ok(Input {
        name: "the command line".into(),
        text: line.into(),
        format: Format::CommandLine,
        base_dir: std::env::current_dir().ok(),
    })
}

/// Finds the nvcc invocations of `input`, picks one with `selector`, and reads its flags.
pub fn extract(input: &Input, selector: &Selector) -> Result<Extraction, FlagsError> {
    let invocations = match input.format {
        Format::Log => log::invocations(&input.text, &input.name),
        Format::Ninja => ninja::invocations(&input.text, &input.name),
        Format::CompileCommands => compdb::invocations(&input.text, &input.name)?,
        Format::CommandLine => vec![log::command_line(&input.text, &input.name)],
    };
    select::choose(input, invocations, selector)
}

impl Extraction {
    /// The arguments of the kept flags, in order: what the harness build adds to its own
    /// `-gencode`, `-std`, include dirs and `-o`.
    pub fn kept_flags(&self) -> Vec<String> {
        self.flags
            .iter()
            .filter(|f| f.verdict == Verdict::Kept)
            .flat_map(|f| f.normalized.iter().cloned())
            .collect()
    }
}
