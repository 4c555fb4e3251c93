//! What the compiler gets: `source.include_dirs` (each an existing folder, relative to the
//! spec), and `build:`, the target, the C++ standard and the production flags, written in the
//! spec or read off a compile line (`flags_from`) with the include directories that line adds.
//! Flags the harness build sets itself (target, standard, output) are refused here, where the
//! spec names them, rather than left to conflict in nvcc; so are flags holding a control
//! character, which no nvcc argument needs and which the generated build files would carry raw.

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
                    if let Some((at, c)) = refused_character(&p.to_string_lossy()) {
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
                            why_refused(c)
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
                        if let Some((at, c)) = refused_character(&dir.to_string_lossy()) {
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
                                why_refused(c)
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
                    let kept = extraction.kept_flags();
                    for flag in &kept {
                        if let Some((at, c)) = refused_character(flag) {
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
                                "a flag is one nvcc argument: {}; mend the compile line in {}, \
                                 or give the flags in `build.flags`, one flag per list entry",
                                why_refused(c),
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
            if let Some((at, c)) = refused_character(flag) {
                self.error(
                    &path,
                    format!(
                        "build.flags[{i}] `{}` holds {} at character {at}",
                        shown(flag),
                        describe(c)
                    ),
                )
                .help = Some(format!(
                    "give one flag per list entry (`flags: [-O3, -DNDEBUG]`), each one nvcc \
                     argument: {}",
                    why_refused(c)
                ));
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

/// The first character of `flag` that no nvcc argument may hold: a control character (newline,
/// carriage return, tab, NUL, the rest of U+0000-U+001F, DEL, the C1 controls), or a backtick.
/// Its position, counted in characters from 1, and the character. Flags are written into
/// build.sh and CMake's files, where a newline ends the line it is written on; and nvcc itself
/// hands `-D` values and include folders to `sh` inside double quotes, escaping `$` but not a
/// backtick, so `-DX=`cmd`` runs cmd on whoever builds the artifact (measured with nvcc 13.0).
fn refused_character(flag: &str) -> Option<(usize, char)> {
    flag.chars()
        .enumerate()
        .find(|(_, c)| c.is_control() || *c == '`')
        .map(|(i, c)| (i + 1, c))
}

/// Why the character `refused_character` found is refused, for the error's help.
fn why_refused(c: char) -> &'static str {
    if c == '`' {
        "nvcc hands -D values and include folders to a shell inside double quotes, where a \
         backtick runs the command it encloses on whoever builds the artifact (a bundle is built \
         by someone else)"
    } else {
        "a control character would reach the generated build files raw"
    }
}

/// A control character named for a message.
fn describe(c: char) -> String {
    match c {
        '\n' => "a newline (\\n)".into(),
        '\r' => "a carriage return (\\r)".into(),
        '\t' => "a tab (\\t)".into(),
        '\0' => "a NUL (\\0)".into(),
        '`' => "a backtick (`)".into(),
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
