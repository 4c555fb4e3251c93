//! The nvcc option table: every spelling nvcc accepts for an option (long `--name`, short
//! `-name`, `=value`, a separate value, a value glued to a one-letter option), the one spelling
//! the harness build uses, what the harness does with it, and whether it can change numerics or
//! code generation. [`parse`] groups a word list into options by this table; what each kind
//! means for the harness is decided in `extract`.

use super::shell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arity {
    /// `-G`, `--use_fast_math`.
    Bare,
    /// `-o f`, `-o=f`.
    Value,
    /// Also glued to the one-dash short name: `-Idir`, `-DX=1`, `-O3`, `-lfoo`.
    Glued,
    /// `--ftz=true`, `-ftz false`; bare means true.
    Bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Arch,
    Code,
    Gencode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Kept, in the canonical spelling.
    Keep,
    /// Dropped, for this reason.
    Drop(&'static str),
    /// The GPU target: carried by `arch`.
    Arch(Target),
    /// The dialect: carried by `std`.
    Std,
    /// An include directory, `-isystem` when `true`: carried by `include_dirs`.
    Include(bool),
    /// `-D`: kept, except the macros of a Python extension module (see `extract`).
    Define,
    /// A comma-separated list for another tool (`-Xcompiler`); with a reason, dropped whole.
    Forward(Option<&'static str>),
    /// `-ccbin`: kept, unless it is an MPI wrapper.
    HostCompiler,
    /// `-rdc`: `false` is kept, `true` dropped with a warning.
    Rdc,
    /// `--options-file`: expanded in place before parsing.
    OptionsFile,
}

#[derive(Debug)]
pub(crate) struct Spec {
    /// Spellings without their dashes: the long name, then the short one and aliases.
    pub names: &'static [&'static str],
    /// The harness's spelling: `-maxrregcount` gives `-maxrregcount=128`, glued `-O` gives `-O3`.
    pub canonical: &'static str,
    pub arity: Arity,
    pub kind: Kind,
    /// Can change numerics or code generation: never dropped without a warning.
    pub codegen: bool,
}

type Names = &'static [&'static str];

const fn o(names: Names, canonical: &'static str, arity: Arity, kind: Kind, codegen: bool) -> Spec {
    Spec {
        names,
        canonical,
        arity,
        kind,
        codegen,
    }
}

pub(crate) const EXE: &str = "the harness is compiled and linked as one executable";
const OUT: &str = "the harness names its own output";
const DEP: &str = "a dependency file for the build system";
const LINK: &str = "links the production binary; the harness links only the CUDA runtime";
const NVLINK: &str = "device-link options, which only a relocatable-device-code build uses";
const CHATTER: &str = "intermediate files and messages only";
const THREADS: &str = "compile-time parallelism only";
const SHARED: &str = "builds a shared library; the harness is an executable";
const LANG: &str = "the harness is a .cu file, compiled as CUDA";
pub(crate) const RDC: &str = "relocatable device code: the harness is one translation unit \
     compiled whole-program (-rdc=false) without device libraries, which can inline and allocate \
     registers differently; device calls into other files or libraries (nvshmem) cannot link";
const DC: &str = "compiles relocatable device code only (= -rdc=true -c): the harness is one \
     translation unit compiled whole-program (-rdc=false), which can inline and allocate \
     registers differently";
const DLTO: &str = "device link-time optimization needs a relocatable-device-code build; the \
     harness is compiled whole-program instead";

use Arity::{Bare, Bool, Glued, Value};
use Kind::{Arch, Define, Drop, Forward, HostCompiler, Include, Keep, OptionsFile, Rdc, Std};

/// Every nvcc option repro knows. Unknown options are kept verbatim with a note.
#[rustfmt::skip]
pub(crate) static OPTIONS: &[Spec] = &[
    // What the build produces: the harness is one executable.
    o(&["output-file", "o"], "-o", Value, Drop(OUT), false),
    o(&["output-directory", "odir"], "-odir", Value, Drop(OUT), false),
    o(&["compile", "c"], "-c", Bare, Drop(EXE), false),
    o(&["device-c", "dc"], "-dc", Bare, Drop(DC), true),
    o(&["device-w", "dw"], "-dw", Bare, Drop(EXE), false),
    o(&["device-link", "dlink"], "-dlink", Bare, Drop(EXE), false),
    o(&["link"], "--link", Bare, Drop(EXE), false),
    o(&["lib"], "--lib", Bare, Drop(EXE), false),
    o(&["run"], "--run", Bare, Drop(EXE), false),
    o(&["ptx"], "-ptx", Bare, Drop(EXE), false),
    o(&["cubin"], "-cubin", Bare, Drop(EXE), false),
    o(&["fatbin"], "-fatbin", Bare, Drop(EXE), false),
    o(&["optix-ir"], "-optix-ir", Bare, Drop(EXE), false),
    o(&["preprocess", "E"], "-E", Bare, Drop(EXE), false),
    o(&["shared"], "-shared", Bare, Drop(SHARED), false),
    o(&["x"], "-x", Value, Drop(LANG), false),
    // Dependency files.
    o(&["generate-dependencies-with-compile", "MD"], "-MD", Bare, Drop(DEP), false),
    o(&["generate-nonsystem-dependencies-with-compile", "MMD"], "-MMD", Bare, Drop(DEP), false),
    o(&["generate-dependencies", "M"], "-M", Bare, Drop(DEP), false),
    o(&["generate-nonsystem-dependencies", "MM"], "-MM", Bare, Drop(DEP), false),
    o(&["generate-dependency-targets", "MP"], "-MP", Bare, Drop(DEP), false),
    o(&["dependency-output", "MF"], "-MF", Value, Drop(DEP), false),
    o(&["dependency-target-name", "MT"], "-MT", Value, Drop(DEP), false),
    // Libraries and linking.
    o(&["library", "l"], "-l", Glued, Drop(LINK), false),
    o(&["library-path", "L"], "-L", Glued, Drop(LINK), false),
    o(&["linker-options", "Xlinker"], "-Xlinker", Value, Forward(Some(LINK)), false),
    o(&["nvlink-options", "Xnvlink"], "-Xnvlink", Value, Forward(Some(NVLINK)), false),
    o(&["archive-options", "Xarchive"], "-Xarchive", Value, Forward(Some(EXE)), false),
    o(&["cudart"], "--cudart", Value, Keep, false),
    o(&["cudadevrt"], "--cudadevrt", Value, Keep, false),
    // Build-system chatter.
    o(&["threads", "t"], "--threads", Value, Drop(THREADS), false),
    o(&["keep"], "--keep", Bare, Drop(CHATTER), false),
    o(&["keep-dir"], "--keep-dir", Value, Drop(CHATTER), false),
    o(&["save-temps"], "--save-temps", Bare, Drop(CHATTER), false),
    o(&["verbose", "v"], "-v", Bare, Drop(CHATTER), false),
    o(&["dryrun"], "--dryrun", Bare, Drop(CHATTER), false),
    o(&["time"], "--time", Value, Drop(CHATTER), false),
    o(&["version", "V"], "--version", Bare, Drop(CHATTER), false),
    // Target, dialect, headers, macros.
    o(&["gpu-architecture", "arch"], "-arch", Value, Arch(Target::Arch), true),
    o(&["gpu-code", "code"], "-code", Value, Arch(Target::Code), true),
    o(&["generate-code", "gencode"], "-gencode", Value, Arch(Target::Gencode), true),
    o(&["std"], "-std", Value, Std, true),
    o(&["include-path", "I"], "-I", Glued, Include(false), false),
    o(&["system-include", "isystem"], "-isystem", Glued, Include(true), false),
    o(&["pre-include", "include"], "--pre-include", Value, Keep, true),
    o(&["define-macro", "D"], "-D", Glued, Define, true),
    o(&["undefine-macro", "U"], "-U", Glued, Keep, true),
    // Code generation.
    o(&["optimize", "O"], "-O", Glued, Keep, true),
    o(&["dopt"], "-dopt", Value, Keep, true),
    o(&["device-debug", "G"], "-G", Bare, Keep, true),
    o(&["debug", "g"], "-g", Bare, Keep, false),
    o(&["generate-line-info", "lineinfo"], "-lineinfo", Bare, Keep, false),
    o(&["use_fast_math"], "--use_fast_math", Bare, Keep, true),
    o(&["ftz"], "--ftz", Bool, Keep, true),
    o(&["prec-div"], "--prec-div", Bool, Keep, true),
    o(&["prec-sqrt"], "--prec-sqrt", Bool, Keep, true),
    o(&["fmad"], "--fmad", Bool, Keep, true),
    o(&["maxrregcount"], "-maxrregcount", Value, Keep, true),
    o(&["relocatable-device-code", "rdc"], "-rdc", Bool, Rdc, true),
    o(&["dlink-time-opt", "dlto"], "-dlto", Bare, Drop(DLTO), true),
    o(&["extra-device-vectorization"], "--extra-device-vectorization", Bare, Keep, true),
    o(&["restrict"], "--restrict", Bare, Keep, true),
    o(&["expt-relaxed-constexpr"], "--expt-relaxed-constexpr", Bare, Keep, true),
    o(&["extended-lambda", "expt-extended-lambda"], "--extended-lambda", Bare, Keep, false),
    o(&["default-stream"], "--default-stream", Value, Keep, true),
    o(&["split-compile"], "--split-compile", Value, Keep, true),
    o(&["device-stack-protector"], "--device-stack-protector", Bool, Keep, true),
    o(&["extensible-whole-program", "ewp"], "-ewp", Bare, Keep, true),
    o(&["keep-device-functions"], "--keep-device-functions", Bare, Keep, false),
    o(&["machine", "m"], "--machine", Value, Keep, false),
    o(&["m64"], "-m64", Bare, Keep, false),
    // Other tools and the host compiler.
    o(&["compiler-options", "Xcompiler"], "-Xcompiler", Value, Forward(None), true),
    o(&["ptxas-options", "Xptxas"], "-Xptxas", Value, Forward(None), true),
    o(&["Xcudafe"], "-Xcudafe", Value, Forward(None), false),
    o(&["Xfatbin"], "-Xfatbin", Value, Forward(None), false),
    o(&["compiler-bindir", "ccbin"], "-ccbin", Value, HostCompiler, true),
    o(&["allow-unsupported-compiler"], "-allow-unsupported-compiler", Bare, Keep, false),
    o(&["forward-unknown-to-host-compiler"], "--forward-unknown-to-host-compiler", Bare, Keep, false),
    o(&["forward-unknown-to-host-linker"], "--forward-unknown-to-host-linker", Bare, Keep, false),
    o(&["use-local-env"], "--use-local-env", Bare, Keep, false),
    o(&["options-file", "optf"], "--options-file", Value, OptionsFile, false),
    // Diagnostics.
    o(&["diag-suppress"], "--diag-suppress", Value, Keep, false),
    o(&["diag-error"], "--diag-error", Value, Keep, false),
    o(&["diag-warn"], "--diag-warn", Value, Keep, false),
    o(&["diag-default"], "--diag-default", Value, Keep, false),
    o(&["Werror"], "-Werror", Value, Keep, false),
    o(&["disable-warnings", "w"], "-w", Bare, Keep, false),
    o(&["display-error-number", "err-no"], "--display-error-number", Bare, Keep, false),
    o(&["no-display-error-number", "no-err-no"], "--no-display-error-number", Bare, Keep, false),
    o(&["resource-usage", "res-usage"], "--resource-usage", Bare, Keep, false),
    o(&["source-in-ptx"], "--source-in-ptx", Bare, Keep, false),
    o(&["Wno-deprecated-gpu-targets"], "-Wno-deprecated-gpu-targets", Bare, Keep, false),
    o(&["Wno-deprecated-declarations"], "-Wno-deprecated-declarations", Bare, Keep, false),
    o(&["Wreorder"], "-Wreorder", Bare, Keep, false),
    o(&["Wdefault-stream-launch"], "-Wdefault-stream-launch", Bare, Keep, false),
    o(&["Wmissing-launch-bounds"], "-Wmissing-launch-bounds", Bare, Keep, false),
    o(&["Wext-lambda-captures-this"], "-Wext-lambda-captures-this", Bare, Keep, false),

];

fn lookup(name: &str) -> Option<&'static Spec> {
    OPTIONS.iter().find(|s| s.names.contains(&name))
}

/// One option (or positional word) of a command line.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    /// The words as written: one, or an option and its separate value.
    pub words: Vec<String>,
    /// Its table entry; None for positional words and unknown options.
    pub spec: Option<&'static Spec>,
    /// The value, without the option's name.
    pub value: Option<String>,
}

/// The table entry and value of one option word, and whether its value is the next word.
fn read(word: &str, next: Option<&String>) -> (Option<&'static Spec>, Option<String>, bool) {
    let Some(name) = word.strip_prefix("--").or_else(|| word.strip_prefix('-')) else {
        return (None, None, false);
    };
    if let Some((spec, v)) = name
        .split_once('=')
        .and_then(|(n, v)| Some((lookup(n)?, v)))
    {
        if spec.arity != Bare {
            return (Some(spec), Some(v.to_string()), false);
        }
    }
    if let Some(spec) = lookup(name) {
        let takes = next.is_some_and(|n| match spec.arity {
            Bare => false,
            // A list for another tool is made of options; other values are not.
            Value | Glued => matches!(spec.kind, Forward(_)) || !n.starts_with('-') || n == "-",
            Bool => n.eq_ignore_ascii_case("true") || n.eq_ignore_ascii_case("false"),
        });
        let value = match (takes, spec.arity) {
            (true, _) => next.cloned(),
            (false, Bool) => Some("true".into()),
            _ => None,
        };
        return (Some(spec), value, takes);
    }
    if word.starts_with("--") {
        return (None, None, false);
    }
    // A value glued to the longest short name that prefixes the word (`-isystem` before `-I`).
    let glued = OPTIONS
        .iter()
        .filter(|s| s.arity == Glued)
        .filter_map(|s| Some((s, name.strip_prefix(s.names[1])?)))
        .filter(|(_, v)| !v.is_empty())
        .min_by_key(|(_, v)| v.len());
    match glued {
        Some((spec, v)) => (Some(spec), Some(v.to_string()), false),
        None => (None, None, false),
    }
}

/// Groups `words` (nvcc's arguments) into options.
pub(crate) fn parse(words: &[String]) -> Vec<Parsed> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (spec, value, takes) = read(&words[i], words.get(i + 1));
        let end = i + 1 + usize::from(takes);
        out.push(Parsed {
            words: words[i..end].to_vec(),
            spec,
            value,
        });
        i = end;
    }
    out
}

/// The items of a `-Xcompiler`-style list: nvcc splits it at commas and runs the tool through a
/// shell, so each item is shell words (torch writes `--compiler-options "'-fPIC'"`).
pub(crate) fn forward_items(value: &str) -> Vec<String> {
    value.split(',').flat_map(shell::words).collect()
}

/// The items joined back for nvcc, each quoted for the tool's shell where it needs it.
pub(crate) fn join_items(items: &[String]) -> String {
    let quote = |i: &String| match i.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c))
    {
        true => format!("'{}'", i.replace('\'', r"'\''")),
        false => i.clone(),
    };
    items.iter().map(quote).collect::<Vec<_>>().join(",")
}

/// The `arch=` and `code=` targets of a `-gencode` value
/// (`arch=compute_90a,code=[sm_90a,compute_90a]`, or the code list in quotes).
pub(crate) fn gencode_targets(value: &str) -> (Option<String>, Vec<String>) {
    let (mut parts, mut depth, mut quoted, mut cur) = (Vec::new(), 0i32, false, String::new());
    for c in value.chars() {
        match c {
            '"' | '\'' => quoted = !quoted,
            ',' if depth <= 0 && !quoted => parts.push(std::mem::take(&mut cur)),
            c => {
                depth += i32::from(c == '[') - i32::from(c == ']');
                cur.push(c);
            }
        }
    }
    parts.push(cur);
    let (mut arch, mut code) = (None, Vec::new());
    for part in parts {
        match part.trim().split_once('=') {
            Some(("arch", a)) => arch = Some(a.trim().to_string()),
            Some(("code", c)) => code.extend(target_list(c)),
            _ => {}
        }
    }
    (arch, code)
}

/// `sm_90a,compute_90a` or `[sm_90a,compute_90a]` as a list.
pub(crate) fn target_list(value: &str) -> Vec<String> {
    let junk = |c: char| matches!(c, '[' | ']' | '"' | '\'') || c.is_whitespace();
    let targets = value.split(',').map(|t| t.trim_matches(junk));
    targets
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}
