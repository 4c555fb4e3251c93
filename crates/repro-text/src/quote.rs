//! Quoting for the places a spec's values are written into code: a POSIX shell word (build.sh),
//! CMake arguments (CMakeLists.txt), a comment line. Each keeps a value inert: no spec value ever
//! becomes shell or CMake code. YAML's quoting is not here (crates/repro-contract/src/spec/yaml.rs holds all YAML);
//! imports nothing of repro.

/// Quotes an argument for a POSIX shell so that it stays one inert word: anything but plain
/// characters is single-quoted (`$`, backticks, `\` and newlines included), a `'` inside closed,
/// escaped and reopened.
pub fn shell_quote(arg: &str) -> String {
    if is_plain_word(arg) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Characters no shell, no `SHELL:` option parser and no CMake layer treats specially: a word of
/// only these needs no quotes (and is left bare, so that ordinary flags read as written).
fn is_plain_word(arg: &str) -> bool {
    !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+,./:@%".contains(c))
}

/// A value that a CMake build file cannot carry where it goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unrepresentable {
    /// CMake writes a compile flag or an include directory into the Makefile as it is (a
    /// newline there ends the line, and the next one can be a command), and Ninja's escape for a
    /// newline drops it: no quoting keeps a control character. The spec loader refuses them in
    /// the production flags (repro's crates/repro-contract/src/spec/build.rs), where the spec can name them.
    #[error("{value:?} holds a control character (U+{:04X}), which no CMake build file can pass on", u32::from(*character))]
    ControlCharacter { value: String, character: char },
    /// A PATH cache entry is split at `;` and joined again, which takes the `\` off a `\;`, and
    /// turns any other `\` into `/`: nothing written there comes out of a later list split as
    /// one element holding a `;`.
    #[error("{value:?} holds a `;`, which a CMake PATH cache entry cannot keep inside one folder's name")]
    SemicolonInCachePath { value: String },
}

fn refuse_control_characters(value: &str) -> Result<(), Unrepresentable> {
    match value.chars().find(|c| c.is_control()) {
        Some(character) => Err(Unrepresentable::ControlCharacter {
            value: value.to_string(),
            character,
        }),
        None => Ok(()),
    }
}

/// A CMake quoted argument (`"..."`) whose value, once CMake has read the file, is exactly
/// `arg`: `\` and `"` are escaped, since they end the argument or start an escape; `$` is
/// escaped, since `${VAR}`, `$ENV{VAR}` and `$CACHE{VAR}` expand inside a quoted argument (every
/// `$`, so that no neighbour can complete a reference); a newline, tab or carriage return is
/// written as its escape, so that the file keeps its lines. Nothing else is special there: `;`,
/// `#`, `(`, `)`, spaces and `@` (which `@VAR@` expands only in configure_file, under policy
/// CMP0053, set by cmake_minimum_required 3.1 and later) stay as they are.
///
/// This is only the first of the layers CMake reads a value through: the command that receives
/// the argument may go on to split it into a list at `;` and evaluate `$<...>` generator
/// expressions in it. A value that reaches such a command needs those layers too
/// ([`cmake_shell_option`], [`cmake_include_dir`], [`cmake_cache_path`]).
pub fn cmake_quote(arg: &str) -> String {
    let mut out = String::from("\"");
    for c in arg.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text that a generator-expression evaluation gives back as `text`: each `$` is written
/// `$<1:$>` (the expression `$<1:...>` evaluates to its content, and a `$` not followed by `<`
/// is plain text). Only `$<` opens an expression; `>`, `:` and `,` outside one are plain text,
/// and once every `$` is an expression of its own none of them is inside one of the value's.
fn cmake_genex_literal(text: &str) -> String {
    text.replace('$', "$<1:$>")
}

/// Text that CMake's list splitting (cmList: at each `;` not escaped and not inside `[...]`)
/// gives back as the single element `text`: each `;` is written `\;`, the one escape that
/// splitting undoes (a `\` before anything else stays a `\`, so a `\` of the value before a
/// `;` of it comes back too). An empty element is dropped, so callers never make one.
fn cmake_list_element(text: &str) -> String {
    text.replace(';', "\\;")
}

/// The argument of `target_compile_options` that gives nvcc each of `flags` (plain strings, as
/// nvcc receives them) as exactly one argument, byte for byte, in order: `-O3`, `-DA=x;y` and
/// `it's` as `"SHELL:-O3 '-DA=x\\;y' 'it\\'s'"`.
///
/// Written as plain options, CMake would evaluate `$<...>` in a flag, split one at `;`, merge
/// one ending in `\` with the next (the options are joined with `;`, and `\;` escapes it),
/// drop an empty one and de-duplicate a repeated one (a second `-Xcompiler`). So all of them go
/// into one `SHELL:` option, which CMake takes apart itself, after the steps every compile
/// option takes. The encoding is those steps undone in the reverse of the order CMake takes
/// them:
///
/// 1. `SHELL:`'s own parser (kwsys's Unix command-line parser) splits at whitespace outside
///    quotes, and honours a `\` anywhere, even inside single quotes: each flag is a plain word
///    or single-quoted with `\` and `'` backslash-escaped (an empty flag is `''`, still an
///    argument);
/// 2. before that, the option list is split at `;`: `cmake_list_element`;
/// 3. before that, generator expressions are evaluated: `cmake_genex_literal`;
/// 4. first of all, CMake reads the quoted argument from the file: [`cmake_quote`].
///
/// CMake then quotes each argument for make or Ninja and the shell itself, which keeps anything
/// but a control character: that is refused (the spec loader refuses it in a flag already, so
/// this error is a bug in repro).
pub fn cmake_shell_option(flags: &[String]) -> Result<String, Unrepresentable> {
    let mut words = Vec::with_capacity(flags.len());
    for flag in flags {
        refuse_control_characters(flag)?;
        words.push(if is_plain_word(flag) {
            flag.clone()
        } else {
            format!("'{}'", flag.replace('\\', "\\\\").replace('\'', "\\'"))
        });
    }
    let option = format!("SHELL:{}", words.join(" "));
    Ok(cmake_quote(&cmake_genex_literal(&cmake_list_element(
        &option,
    ))))
}

/// An argument of `target_include_directories` that names exactly the folder `path` (relative
/// to the CMakeLists.txt's folder, or absolute), as build.sh's `-I` does.
///
/// target_include_directories makes a relative path absolute (prefixing the source folder)
/// unless it starts with a generator expression; at generation it evaluates generator
/// expressions, splits the list at `;`, and turns each `\` into `/` (repro's paths have `/`
/// already). So, in the reverse order: `;` as `cmake_list_element`, `$` as
/// `cmake_genex_literal`, a relative path that starts with `$` behind `./` (it would start
/// with an expression, and be left relative; see `anchored`), and [`cmake_quote`] for reading
/// the file. A control character is refused, as in a flag.
pub fn cmake_include_dir(path: &str) -> Result<String, Unrepresentable> {
    refuse_control_characters(path)?;
    Ok(cmake_quote(&cmake_genex_literal(&cmake_list_element(
        &anchored(path),
    ))))
}

/// The value for `set(VAR <here> CACHE PATH ...)` where `"${VAR}/sub"` is then an argument of
/// `target_include_directories` (the CUTLASS root): `${VAR}/sub` names exactly `path`'s `sub`.
///
/// Between the file and target_include_directories, a PATH cache entry is split into a list and
/// joined again, each element with `\` turned into `/`, and `~` or `~user` at its start turned
/// into a home folder. So [`cmake_include_dir`]'s layers, a relative path starting with `~`
/// behind `./` as well, and a `;` refused: the `\;` that would keep it does not survive the
/// cache ([`Unrepresentable::SemicolonInCachePath`]).
pub fn cmake_cache_path(path: &str) -> Result<String, Unrepresentable> {
    refuse_control_characters(path)?;
    if path.contains(';') {
        return Err(Unrepresentable::SemicolonInCachePath {
            value: path.to_string(),
        });
    }
    Ok(cmake_quote(&cmake_genex_literal(&anchored(path))))
}

/// A relative path that CMake would take for something else at its start, behind `./`: `$`
/// (which `cmake_genex_literal` makes an expression) or `~` (a home folder, in a PATH cache
/// entry).
fn anchored(path: &str) -> String {
    if path.starts_with(['$', '~']) {
        format!("./{path}")
    } else {
        path.to_string()
    }
}

/// Text for one comment line of a script or C++ file: control characters (a newline would end
/// the comment and make the rest code) become spaces.
pub fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that would change on the way through some layer if it were not quoted for it.
    fn hostile() -> Vec<String> {
        [
            "",
            "-O3",
            "a;b",
            ";",
            "\\;",
            "a\\",
            "\\",
            "\\\\",
            "$<1:x>",
            "$<SEMICOLON>",
            "$<",
            "$",
            "$$",
            ">:,",
            "${HOME}",
            "$ENV{HOME}",
            "$CACHE{X}",
            "@CMAKE_COMMAND@",
            "'",
            "\"",
            "'x'\"y\"",
            "#x",
            "a b  c",
            " ",
            "[a;b",
            "]a;b[",
            "é✓ ünï",
            "$(touch x)`id`",
            "SHELL:-DX",
            "PUBLIC",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// CMake reading a quoted argument from the file (cmake-language(7)), for the escapes
    /// cmake_quote writes; a variable reference would expand, so finding one fails the test.
    fn read_quoted(text: &str) -> String {
        let inner = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or_else(|| panic!("not a quoted argument: {text}"));
        let mut out = String::new();
        let mut chars = inner.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some(';') => out.push_str("\\;"),
                    Some(e) if !e.is_ascii_alphanumeric() => out.push(e),
                    e => panic!("invalid escape \\{e:?} in {text}"),
                },
                '"' => panic!("an unescaped quote ends the argument early: {text}"),
                '$' => {
                    let rest: String = chars.clone().collect();
                    assert!(
                        !(rest.starts_with('{')
                            || rest.starts_with("ENV{")
                            || rest.starts_with("CACHE{")),
                        "a variable reference in {text}"
                    );
                    out.push('$');
                }
                c => out.push(c),
            }
        }
        out
    }

    /// Generator-expression evaluation (cmGeneratorExpressionLexer/Parser): `$<` opens an
    /// expression; the only one the encoding writes is `$<1:$>`, any other fails the test.
    fn evaluate_genex(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("$<") {
            out.push_str(&rest[..at]);
            let after = &rest[at..];
            assert!(
                after.starts_with("$<1:$>"),
                "an expression other than $<1:$> is evaluated: {after}"
            );
            out.push('$');
            rest = &after["$<1:$>".len()..];
        }
        out.push_str(rest);
        out
    }

    /// CMake's list splitting (cmList::Insert with ExpandElements): at `;` outside `[...]`,
    /// `\;` kept as `;`, empty elements dropped.
    fn split_list(text: &str) -> Vec<String> {
        let bytes = text.as_bytes();
        let (mut out, mut element) = (Vec::new(), Vec::new());
        let (mut nesting, mut i) = (0i32, 0);
        while i < bytes.len() {
            match bytes[i] {
                b'\\' if bytes.get(i + 1) == Some(&b';') => {
                    element.push(b';');
                    i += 1;
                }
                b'[' => {
                    nesting += 1;
                    element.push(b'[');
                }
                b']' => {
                    nesting -= 1;
                    element.push(b']');
                }
                b';' if nesting == 0 => {
                    if !element.is_empty() {
                        out.push(String::from_utf8(std::mem::take(&mut element)).unwrap());
                    }
                }
                b => element.push(b),
            }
            i += 1;
        }
        if !element.is_empty() {
            out.push(String::from_utf8(element).unwrap());
        }
        out
    }

    /// `SHELL:`'s parser (kwsys's kwsysSystem__ParseUnixCommand): a `\` escapes the next byte
    /// anywhere, quotes toggle, whitespace outside quotes separates.
    fn parse_shell(text: &str) -> Vec<String> {
        let (mut out, mut arg) = (Vec::new(), Vec::new());
        let (mut in_arg, mut escape, mut single, mut double) = (false, false, false, false);
        for &b in text.as_bytes() {
            if escape {
                in_arg = true;
                arg.push(b);
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'\'' && !double {
                single = !single;
                in_arg = true;
            } else if b == b'"' && !single {
                double = !double;
                in_arg = true;
            } else if b.is_ascii_whitespace() || b == 0x0b {
                if single || double {
                    arg.push(b);
                } else if in_arg {
                    out.push(String::from_utf8(std::mem::take(&mut arg)).unwrap());
                    in_arg = false;
                }
            } else {
                in_arg = true;
                arg.push(b);
            }
        }
        if in_arg {
            out.push(String::from_utf8(arg).unwrap());
        }
        out
    }

    /// What nvcc receives from `target_compile_options(harness PRIVATE <text>)`.
    fn compile_options(text: &str) -> Vec<String> {
        let elements = split_list(&evaluate_genex(&read_quoted(text)));
        assert_eq!(elements.len(), 1, "the option split: {elements:?}");
        let option = elements[0]
            .strip_prefix("SHELL:")
            .unwrap_or_else(|| panic!("not a SHELL: option: {}", elements[0]));
        parse_shell(option)
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("-O3"), "-O3");
        assert_eq!(shell_quote("-DNAME=a b"), "'-DNAME=a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_quote("-DROOT=${HOME}$(touch /tmp/x)"),
            "'-DROOT=${HOME}$(touch /tmp/x)'"
        );
        assert_eq!(shell_quote("`id`"), "'`id`'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a;b"), "'a;b'");
        assert_eq!(shell_quote("a\\"), "'a\\'");
        assert_eq!(shell_quote("#x"), "'#x'");
        assert_eq!(shell_quote("é"), "'é'");
        assert_eq!(shell_quote("a\nb"), "'a\nb'");
    }

    #[test]
    fn shell_quote_round_trips_through_a_shell_parser() {
        // A POSIX shell and `SHELL:`'s parser agree on single quotes without backslashes.
        for value in hostile().iter().filter(|v| !v.contains('\\')) {
            assert_eq!(parse_shell(&shell_quote(value)), vec![value.clone()]);
        }
    }

    #[test]
    fn cmake_quoting() {
        assert_eq!(cmake_quote("-O3"), "\"-O3\"");
        assert_eq!(cmake_quote(""), "\"\"");
        assert_eq!(cmake_quote("-DA=x\\"), "\"-DA=x\\\\\"");
        assert_eq!(
            cmake_quote(") \nexecute_process(COMMAND touch /tmp/x) #"),
            "\") \\nexecute_process(COMMAND touch /tmp/x) #\""
        );
        // Only the file layer: a `;` stays a `;` (the receiving command's list separator) and
        // `$<...>` stays an expression; `${...}` never expands.
        assert_eq!(cmake_quote("${HOME};a"), "\"\\${HOME};a\"");
        assert_eq!(cmake_quote("$<1:x>"), "\"\\$<1:x>\"");
        assert_eq!(cmake_quote("say \"hi\" #x é"), "\"say \\\"hi\\\" #x é\"");
        for value in hostile() {
            assert_eq!(read_quoted(&cmake_quote(&value)), value);
        }
    }

    #[test]
    fn cmake_shell_option_text() {
        let flags = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cmake_shell_option(&flags(&["-O3", "-DNDEBUG"])).unwrap(),
            "\"SHELL:-O3 -DNDEBUG\""
        );
        assert_eq!(
            cmake_shell_option(&flags(&["-DA=x;y", "", "a b"])).unwrap(),
            "\"SHELL:'-DA=x\\\\;y' '' 'a b'\""
        );
        assert_eq!(
            cmake_shell_option(&flags(&["-DA=x\\", "it's"])).unwrap(),
            "\"SHELL:'-DA=x\\\\\\\\' 'it\\\\'s'\""
        );
        assert_eq!(
            cmake_shell_option(&flags(&["${HOME}", "$<1:x>"])).unwrap(),
            "\"SHELL:'\\$<1:\\$>{HOME}' '\\$<1:\\$><1:x>'\""
        );
        assert_eq!(
            cmake_shell_option(&flags(&["\"q\"", "#x", "é"])).unwrap(),
            "\"SHELL:'\\\"q\\\"' '#x' 'é'\""
        );
    }

    #[test]
    fn cmake_shell_option_gives_each_flag_back() {
        let all = hostile();
        assert_eq!(compile_options(&cmake_shell_option(&all).unwrap()), all);
        for value in &all {
            let one = vec![value.clone()];
            assert_eq!(compile_options(&cmake_shell_option(&one).unwrap()), one);
            // Next to its neighbours, so that a trailing `\` or an open quote would show.
            let three = vec!["-x".to_string(), value.clone(), value.clone()];
            assert_eq!(compile_options(&cmake_shell_option(&three).unwrap()), three);
        }
    }

    #[test]
    fn cmake_shell_option_refuses_control_characters() {
        for bad in [
            "-DX=1\n\ttouch x",
            "\r",
            "a\tb",
            "\u{1}",
            "\u{7f}",
            "\u{85}",
        ] {
            let flags = vec!["-O3".to_string(), bad.to_string()];
            let error = cmake_shell_option(&flags).unwrap_err();
            let Unrepresentable::ControlCharacter { value, character } = &error else {
                panic!("{error:?}");
            };
            assert_eq!(value, bad);
            assert_eq!(Some(*character), bad.chars().find(|c| c.is_control()));
            assert!(error.to_string().contains("holds a control character"));
            assert!(matches!(
                cmake_include_dir(bad),
                Err(Unrepresentable::ControlCharacter { .. })
            ));
            assert!(matches!(
                cmake_cache_path(bad),
                Err(Unrepresentable::ControlCharacter { .. })
            ));
        }
    }

    #[test]
    fn cmake_include_dir_text() {
        assert_eq!(
            cmake_include_dir("../../kernels").unwrap(),
            "\"../../kernels\""
        );
        assert_eq!(cmake_include_dir("/abs/a b#é").unwrap(), "\"/abs/a b#é\"");
        assert_eq!(cmake_include_dir("a;b").unwrap(), "\"a\\\\;b\"");
        assert_eq!(
            cmake_include_dir("x/${HOME}").unwrap(),
            "\"x/\\$<1:\\$>{HOME}\""
        );
        // A relative path that would start with an expression is anchored, or CMake would leave
        // it relative.
        assert_eq!(
            cmake_include_dir("$<1:x>").unwrap(),
            "\"./\\$<1:\\$><1:x>\""
        );
        assert_eq!(cmake_include_dir("$d").unwrap(), "\"./\\$<1:\\$>d\"");
        assert_eq!(cmake_include_dir("/$d").unwrap(), "\"/\\$<1:\\$>d\"");
        assert_eq!(cmake_include_dir("q\"\\").unwrap(), "\"q\\\"\\\\\"");
        assert_eq!(cmake_include_dir("~x").unwrap(), "\"./~x\"");
        for value in hostile().iter().filter(|v| !v.is_empty()) {
            let text = cmake_include_dir(value).unwrap();
            let elements = split_list(&evaluate_genex(&read_quoted(&text)));
            assert_eq!(elements, vec![anchored(value)], "{text}");
        }
    }

    /// A PATH cache entry as cmCacheManager::AddCacheEntry stores it: split into a list, each
    /// element with `\` as `/` and a leading `~/` or `~user` made a home folder, joined again.
    fn store_path(value: &str) -> String {
        split_list(value)
            .into_iter()
            .map(|element| {
                assert!(
                    !element.starts_with('~'),
                    "{element} would name a home folder"
                );
                element.replace('\\', "/")
            })
            .collect::<Vec<_>>()
            .join(";")
    }

    #[test]
    fn cmake_cache_path_text() {
        assert_eq!(
            cmake_cache_path("../../.toolchain/cutlass").unwrap(),
            "\"../../.toolchain/cutlass\""
        );
        assert_eq!(cmake_cache_path("~").unwrap(), "\"./~\"");
        assert_eq!(cmake_cache_path("~/x").unwrap(), "\"./~/x\"");
        assert_eq!(cmake_cache_path("$x").unwrap(), "\"./\\$<1:\\$>x\"");
        assert_eq!(
            cmake_cache_path("/a ${B}#é\"").unwrap(),
            "\"/a \\$<1:\\$>{B}#é\\\"\""
        );
        assert_eq!(
            cmake_cache_path("a;b"),
            Err(Unrepresentable::SemicolonInCachePath {
                value: "a;b".into()
            })
        );
        // `"${VAR}/include"` in target_include_directories: the folder's include/.
        for value in hostile()
            .iter()
            .filter(|v| !v.is_empty() && !v.contains(['\\', ';']))
        {
            let stored = store_path(&read_quoted(&cmake_cache_path(value).unwrap()));
            let elements = split_list(&evaluate_genex(&format!("{stored}/include")));
            assert_eq!(elements, vec![format!("{}/include", anchored(value))]);
        }
    }

    #[test]
    fn comments() {
        assert_eq!(comment_text("a\nb\rc\td"), "a b c d");
        assert_eq!(
            comment_text("build.flags_from: x.log:3 (é)"),
            "build.flags_from: x.log:3 (é)"
        );
    }
}
