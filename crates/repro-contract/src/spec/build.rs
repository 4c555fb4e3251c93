//! What the compiler gets: `source.include_dirs` (each an existing folder, relative to the
//! spec), and `build:`, the target, the C++ standard and the production flags, written in the
//! spec or read off a compile line (`flags_from`) with the include directories that line adds.
//! Flags the harness build sets itself (target, standard, output) are refused here, where the
//! spec names them, rather than left to conflict in nvcc; so are flags holding a control
//! character, which no nvcc argument needs and which the generated build files would carry raw,
//! and flags that would make the build run something besides the compiler: nvcc hands its
//! commands to `sh`, and some options run, read or write what they name (docs/spec.md, "What a
//! flag may hold").

use std::path::PathBuf;

use super::environment::FlagsFromLine;
use super::model::FlagsFrom;
use super::resolved::{BuildSettings, FlagGroup};
use super::validate::Validator;

impl<'a> Validator<'a> {
    pub(super) fn source(&mut self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for (i, d) in self.spec.source.include_dirs.iter().enumerate() {
            match self.environment.include_dirs.get(i).cloned().flatten() {
                Some(p) => {
                    if let Some((at, c)) = refused_in_path(&p.to_string_lossy()) {
                        self.error(
                            &format!("source.include_dirs[{i}]"),
                            format!(
                                "include directory `{}` holds {} at character {at}",
                                shown(&p.to_string_lossy()),
                                describe(c)
                            ),
                        )
                        .help = Some(format!(
                            "rename the folder or link it under another name: {}",
                            why_refused_in_path(c)
                        ));
                    }
                    dirs.push(p)
                }
                None => {
                    let abs = self.environment.dir.join(d);
                    self.error(
                        &format!("source.include_dirs[{i}]"),
                        format!("include directory `{}` does not exist", abs.display()),
                    )
                    .help = Some("include_dirs are relative to the spec file".into());
                }
            }
        }
        dirs
    }

    /// Build settings, and the include directories a `flags_from` compile line adds.
    pub(super) fn build(&mut self) -> (Option<BuildSettings>, Vec<PathBuf>) {
        let b = &self.spec.build;
        let mut flag_groups = Vec::new();
        let mut extra_include_dirs = Vec::new();
        let (mut arch, mut std) = (b.arch.clone(), b.std.clone());
        if let Some(from) = &b.flags_from {
            match self.flags_from(from) {
                Some(line) => {
                    let extraction = &line.extraction;
                    if arch.is_none() {
                        arch = extraction.arch.clone();
                    }
                    if std.is_none() {
                        std = extraction.std.clone();
                    }
                    // Existing include directories of the production line come along (the kernel's
                    // headers may need them), except the CUDA toolkit's own, which nvcc adds itself
                    // and whose path differs from machine to machine (Environment::gather picks
                    // them). Missing ones are warned about by the extraction.
                    for dir in &line.include_dirs {
                        if let Some((at, c)) = refused_in_path(&dir.to_string_lossy()) {
                            self.error(
                                "build.flags_from",
                                format!(
                                    "the include directory `{}` read from {} holds {} at character {at}",
                                    shown(&dir.to_string_lossy()),
                                    from.file,
                                    describe(c)
                                ),
                            )
                            .help = Some(format!(
                                "rename the folder or link it under another name: {}",
                                why_refused_in_path(c)
                            ));
                        }
                    }
                    extra_include_dirs.extend(line.include_dirs.iter().cloned());
                    self.warnings.extend(
                        extraction
                            .warnings
                            .iter()
                            .map(|w| format!("{}: {w}", from.file)),
                    );
                    let kept = extraction.flags.clone();
                    for (j, flag) in kept.iter().enumerate() {
                        let previous = j.checked_sub(1).map(|p| kept[p].as_str());
                        if let Some(refused) = refused_option(flag, previous) {
                            self.error(
                                "build.flags_from",
                                format!(
                                    "the flag `{}` read from {} {}",
                                    shown(flag),
                                    from.file,
                                    refused.why
                                ),
                            )
                            .help = Some(format!(
                                "{}; mend the compile line in {}, or give the flags in \
                                 `build.flags`",
                                refused.instead, from.file
                            ));
                        }
                        if let Some((at, c)) = refused_in_flag(flag) {
                            self.error(
                                "build.flags_from",
                                format!(
                                    "the flag `{}` read from {} holds {} at character {at}",
                                    shown(flag),
                                    from.file,
                                    describe(c)
                                ),
                            )
                            .help = Some(format!(
                                "{}{}; mend the compile line in {}, or give the flags in \
                                 `build.flags`, one flag per list entry",
                                if c.is_control() {
                                    "a flag is one nvcc argument: "
                                } else {
                                    ""
                                },
                                why_refused_in_flag(c),
                                from.file
                            ));
                        }
                    }
                    flag_groups.push(FlagGroup {
                        // As the spec names the log, not this machine's absolute path.
                        origin: format!(
                            "build.flags_from: {}",
                            extraction
                                .origin
                                .replace(&line.path.display().to_string(), &from.file)
                        ),
                        flags: kept,
                    });
                }
                None => return (None, Vec::new()),
            }
        }
        let arch = arch.unwrap_or_else(|| "sm_90a".to_string());
        let std = std.unwrap_or_else(|| "c++17".to_string());
        let digits = arch.strip_prefix("sm_");
        let (number, specific) = match digits {
            Some(d) if d.ends_with('a') || d.ends_with('f') => (&d[..d.len() - 1], true),
            Some(d) => (d, false),
            None => ("", false),
        };
        let parsed = number.parse::<u32>().ok().filter(|n| *n >= 50);
        let Some(cc) = parsed else {
            self.error("build.arch", format!("`{arch}` is not a CUDA architecture"))
                .help = Some("write it like sm_90a (Hopper with wgmma/TMA), sm_90, sm_80".into());
            return (None, Vec::new());
        };
        if !["c++17", "c++20"].contains(&std.as_str()) {
            self.error(
                "build.std",
                format!("`{std}` is not a standard the harness can be built with"),
            )
            .help = Some("c++17 or c++20 (the harness itself needs C++17)".into());
        }
        for (i, flag) in b.flags.iter().enumerate() {
            let path = format!("build.flags[{i}]");
            // A newline in a flag was once written raw into the Makefile CMake generated, where
            // the text after it ran as a command of its own.
            if let Some((at, c)) = refused_in_flag(flag) {
                self.error(
                    &path,
                    format!(
                        "build.flags[{i}] `{}` holds {} at character {at}",
                        shown(flag),
                        describe(c)
                    ),
                )
                .help = Some(match c.is_control() {
                    true => format!(
                        "give one flag per list entry (`flags: [-O3, -DNDEBUG]`), each one nvcc \
                         argument: {}",
                        why_refused_in_flag(c)
                    ),
                    false => why_refused_in_flag(c).to_string(),
                });
                continue;
            }
            let previous = i.checked_sub(1).map(|p| b.flags[p].as_str());
            if let Some(refused) = refused_option(flag, previous) {
                self.error(&path, format!("build.flags[{i}] `{flag}` {}", refused.why))
                    .help = Some(refused.instead.to_string());
                continue;
            }
            let conflicts: &[(&str, &str)] = &[
                ("-arch", "the target comes from `build.arch`"),
                ("--gpu-architecture", "the target comes from `build.arch`"),
                ("-gencode", "the target comes from `build.arch`"),
                ("--generate-code", "the target comes from `build.arch`"),
                ("-code", "the target comes from `build.arch`"),
                ("-std", "the standard comes from `build.std`"),
                ("--std", "the standard comes from `build.std`"),
                ("-o", "the harness decides its output file"),
                ("-c", "the harness is built as an executable"),
                ("-shared", "the harness is built as an executable"),
            ];
            let stem = flag.split(['=', ' ']).next().unwrap_or(flag);
            if let Some((_, why)) = conflicts.iter().find(|(f, _)| *f == stem) {
                self.error(&path, format!("`{flag}` cannot be a harness flag: {why}"));
            }
        }
        if !b.flags.is_empty() {
            flag_groups.push(FlagGroup {
                origin: "build.flags: the production flags, verbatim".into(),
                flags: b.flags.clone(),
            });
        }
        let settings = BuildSettings {
            arch,
            cc_major: cc / 10,
            cc_minor: cc % 10,
            arch_specific: specific,
            std,
            flags: flag_groups
                .iter()
                .flat_map(|g| g.flags.iter().cloned())
                .collect(),
            flag_groups,
        };
        (Some(settings), extra_include_dirs)
    }

    /// The compile line `build.flags_from` points at, as the environment read it.
    fn flags_from(&mut self, from: &FlagsFrom) -> Option<&'a FlagsFromLine> {
        let environment = self.environment;
        match environment.flags_from.as_ref()? {
            Ok(line) => Some(line),
            Err(message) => {
                self.error("build.flags_from", format!("cannot take production flags from {}: {message}", from.file))
                    .help = Some("flags_from is a build log, compile_commands.json or a file with one nvcc command line, relative to the spec; `repro flags --from-log FILE` shows what it finds".into());
                None
            }
        }
    }
}

/// The first character of an include folder's path that nvcc cannot take: a control character
/// (newline, carriage return, tab, NUL, the rest of U+0000-U+001F, DEL, the C1 controls), which
/// the generated build files would carry raw, or a backtick: nvcc 13.0 writes `-I` folders into
/// the command it hands to `sh` inside double quotes, escaping `$` but not a backtick. Its
/// position, counted in characters from 1, and the character.
fn refused_in_path(path: &str) -> Option<(usize, char)> {
    path.chars()
        .enumerate()
        .find(|(_, c)| c.is_control() || *c == '`')
        .map(|(i, c)| (i + 1, c))
}

/// Why the character `refused_in_path` found is refused, for the error's help.
fn why_refused_in_path(c: char) -> &'static str {
    if c == '`' {
        "nvcc hands include folders to a shell inside double quotes, where a backtick runs the \
         command it encloses on whoever builds the artifact (a bundle is built by someone else)"
    } else {
        "a control character would reach the generated build files raw"
    }
}

/// The characters no flag may hold besides control characters, because nvcc itself hands flags
/// to `sh` (docs/spec.md, "What a flag may hold"; measured with nvcc 13.0.88 in
/// tests/suite/nvcc_shell.rs). nvcc quotes some options' values and not others, and a flag's
/// option may be the list entry before it (`[-Xcompiler, VALUE]`), so a character that is live
/// in any option's value is refused in every flag:
/// - `$` and the backtick: nvcc writes -D, -U and --define-macro values inside double quotes
///   and -Xcompiler / --compiler-options values bare, escaping neither, so `$(...)` and
///   `` `...` `` run a command and `$NAME` reads the builder's environment;
/// - `;`, `|`, `&`, `<`, `>`: nvcc writes -Xcompiler, -Xlinker, -Xptxas, -Xcudafe, -Xfatbin,
///   -Xnvlink and -l values bare, where these end the command (the rest runs as one of its own)
///   or redirect it.
///
/// With these gone the command nvcc hands to `sh` is one simple command whose program nvcc
/// chose: quotes, backslashes, spaces, globs, `#`, `~`, braces and parentheses can at most change
/// the arguments (or make the line a syntax error), and they stay allowed (`-DNAME="text"`).
const SHELL_LIVE: &[char] = &['$', '`', ';', '|', '&', '<', '>'];

/// The first character of `flag` that no flag may hold: a control character (newline, carriage
/// return, tab, NUL, the rest of U+0000-U+001F, DEL, the C1 controls), which the generated build
/// files would carry raw, or one of `SHELL_LIVE`. Its position, counted in characters from 1,
/// and the character.
fn refused_in_flag(flag: &str) -> Option<(usize, char)> {
    flag.chars()
        .enumerate()
        .find(|(_, c)| c.is_control() || SHELL_LIVE.contains(c))
        .map(|(i, c)| (i + 1, c))
}

/// Why the character `refused_in_flag` found is refused, and what to write instead, for the
/// error's help.
fn why_refused_in_flag(c: char) -> &'static str {
    match c {
        '$' | '`' => {
            "nvcc hands flags to `sh` and leaves `$` and backticks live in -D/-U values and \
             -Xcompiler options, where `$(...)` and backticks run a command on whoever builds \
             the artifact and `$NAME` takes the builder's environment; write the value itself \
             (a macro that needs the character can be defined in a header the kernel includes)"
        }
        ';' | '|' | '&' | '<' | '>' => {
            "nvcc hands -Xcompiler, -Xlinker, -Xptxas, -Xcudafe, -Xfatbin, -Xnvlink and -l \
             values to `sh` unquoted, where this character ends the command or redirects it and \
             the rest runs on whoever builds the artifact; it is refused in every flag (an \
             option's value can be the next list entry): drop it, or define a macro that needs \
             it in a header the kernel includes"
        }
        _ => "a control character would reach the generated build files raw",
    }
}

/// An nvcc option a flag may not be, because it runs, reads or writes something the spec names
/// besides the compile: what it does (completing "build.flags[i] `FLAG` ...") and what to write
/// instead.
struct RefusedOption {
    why: &'static str,
    instead: &'static str,
}

/// Host-compiler and linker options that run a program or load code the value names (gcc's
/// `-wrapper`, specs files, plugins, response files, `--ld-path`; ld's plugins), refused among
/// the items of an -Xcompiler / -Xlinker value; and gcc's `-B` (where to find cc1plus, as, ld)
/// among -Xcompiler's, where ld's `-Bstatic` and `-Bsymbolic` are not meant.
const HOST_RUNNERS: &[&str] = &[
    "-wrapper",
    "-specs",
    "--specs",
    "-fplugin",
    "@",
    "--ld-path",
    "-plugin",
    "--plugin",
];

/// Whether `flag` (with the list entry before it, whose value it may be) is an nvcc option that
/// runs, reads or writes something the spec names besides the compile.
fn refused_option(flag: &str, previous: Option<&str>) -> Option<RefusedOption> {
    let stem = flag.split(['=', ' ']).next().unwrap_or(flag);
    let inline_value = flag
        .get(stem.len() + 1..)
        .filter(|_| stem.len() < flag.len());
    let is = |names: &[&str], s: &str| names.contains(&s);
    const CCBIN: &[&str] = &["-ccbin", "--compiler-bindir"];
    const FORWARDS: &[&str] = &[
        "-Xcompiler",
        "--compiler-options",
        "-Xlinker",
        "--linker-options",
    ];
    if is(
        &["--options-file", "-options-file", "-optf", "--optf"],
        stem,
    ) || flag.starts_with('@')
    {
        return Some(RefusedOption {
            why: "reads more flags from a file that repro does not check",
            instead: "write those flags into `build.flags`, one per list entry",
        });
    }
    if is(&["--run", "-run", "--run-args", "-run-args"], stem) {
        return Some(RefusedOption {
            why: "makes nvcc run the program it built",
            instead: "drop it: `repro run` runs the harness",
        });
    }
    if is(
        &[
            "--forward-unknown-to-host-compiler",
            "-forward-unknown-to-host-compiler",
            "--forward-unknown-to-host-linker",
            "-forward-unknown-to-host-linker",
            "--forward-unknown-opts",
            "-forward-unknown-opts",
        ],
        stem,
    ) {
        return Some(RefusedOption {
            why: "hands every option nvcc does not know to the host compiler or linker unchecked",
            instead: "pass host-compiler options with -Xcompiler and linker options with -Xlinker",
        });
    }
    if is(
        &[
            "--keep-dir",
            "-keep-dir",
            "-odir",
            "--output-directory",
            "-MF",
            "--dependency-output",
            "--time",
            "-time",
        ],
        stem,
    ) {
        return Some(RefusedOption {
            why: "makes nvcc write files where the flag says, outside the artifact",
            instead: "drop it: the harness build decides where its files go",
        });
    }
    // `-ccbin g++-12` and `-ccbin /opt/gcc/bin/g++` name a compiler installed on the machine
    // that builds; `-ccbin ./tools/cc` names a program the spec's own tree (a bundle) could
    // carry, which nvcc would run.
    let ccbin = match previous {
        Some(p) if is(CCBIN, p) => Some(flag),
        _ if is(CCBIN, stem) => inline_value,
        _ => None,
    };
    if ccbin.is_some_and(|v| v.contains('/') && !v.starts_with('/')) {
        return Some(RefusedOption {
            why: "names a host compiler by a relative path: nvcc would run a program the spec's \
                  folder (or a bundle) brings along",
            instead: "name an installed compiler (`-ccbin g++-12`) or give its absolute path",
        });
    }
    let (forwarded, to_compiler) = match previous {
        Some(p) if is(FORWARDS, p) => (Some(flag), is(&FORWARDS[..2], p)),
        _ if is(FORWARDS, stem) => (inline_value, is(&FORWARDS[..2], stem)),
        _ => (None, false),
    };
    let runs = |item: &str| {
        let item = item.trim_matches(['\'', '"']);
        HOST_RUNNERS.iter().any(|r| item.starts_with(r)) || (to_compiler && item.starts_with("-B"))
    };
    if forwarded.is_some_and(|v| v.split([',', ' ']).any(runs)) {
        return Some(RefusedOption {
            why: "hands the host compiler or linker an option that runs or loads a program the \
                  flag names (-wrapper, -B, -specs, -fplugin, a @response file, --ld-path, a \
                  linker plugin)",
            instead: "drop it: building the harness runs the compiler and nothing else",
        });
    }
    None
}

/// A control character named for a message.
fn describe(c: char) -> String {
    match c {
        '\n' => "a newline (\\n)".into(),
        '\r' => "a carriage return (\\r)".into(),
        '\t' => "a tab (\\t)".into(),
        '\0' => "a NUL (\\0)".into(),
        '`' => "a backtick (`)".into(),
        '$' => "a dollar sign ($)".into(),
        ';' => "a semicolon (;)".into(),
        '|' => "a pipe (|)".into(),
        '&' => "an ampersand (&)".into(),
        '<' => "a less-than sign (<)".into(),
        '>' => "a greater-than sign (>)".into(),
        c => format!("the control character U+{:04X}", u32::from(c)),
    }
}

/// `flag` as a message can show it: control characters escaped, so that the message stays on
/// its line and shows where they are.
fn shown(flag: &str) -> String {
    flag.chars()
        .map(|c| match c {
            '\n' => "\\n".into(),
            '\r' => "\\r".into(),
            '\t' => "\\t".into(),
            '\0' => "\\0".into(),
            c if c.is_control() => format!("\\u{{{:x}}}", u32::from(c)),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{refused_in_flag, refused_option};

    #[test]
    fn usual_flags_pass() {
        let usual: &[(&str, Option<&str>)] = &[
            ("-O3", None),
            ("-DFOO=\"bar\"", None),
            ("-DNAME=value", None),
            ("-Xptxas=-v", None),
            ("-Xcompiler=-fno-strict-aliasing,-Wall", None),
            ("--use_fast_math", None),
            ("-maxrregcount=128", None),
            ("--keep", None),
            ("-ccbin=g++-12", None),
            ("-ccbin=/opt/rh/gcc-toolset-13/root/usr/bin/g++", None),
            ("g++-12", Some("-ccbin")),
            // ld's -B options, not gcc's program prefix.
            ("-Xlinker=-Bstatic", None),
            ("-Bsymbolic", Some("-Xlinker")),
            ("-Xcompiler=-Wl,-rpath,/opt/lib", None),
        ];
        for (flag, previous) in usual {
            assert!(refused_in_flag(flag).is_none(), "{flag}");
            assert!(refused_option(flag, *previous).is_none(), "{flag}");
        }
    }

    #[test]
    fn options_that_run_what_they_name_are_refused_in_every_spelling() {
        let refused: &[(&str, Option<&str>)] = &[
            ("-ccbin=tools/cc", None),
            ("--compiler-bindir ./cc", None),
            ("./cc", Some("-ccbin")),
            ("-optf=more.flags", None),
            ("@more.flags", None),
            ("-Xcompiler=-B/x/", None),
            ("-B./x", Some("--compiler-options")),
            ("-Xcompiler=-O2,-wrapper,sh", None),
            ("-Xcompiler=\"-specs=x.specs\"", None),
            ("--linker-options=-plugin,x.so", None),
            ("-Xlinker=@args", None),
            ("-run-args=x", None),
            ("-odir", None),
            ("-forward-unknown-opts", None),
        ];
        for (flag, previous) in refused {
            assert!(refused_option(flag, *previous).is_some(), "{flag}");
        }
    }
}
