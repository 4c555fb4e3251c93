//! The init patterns a generator makes (docs/spec.md, `inputs`): their one list, with each
//! pattern's name, its parameters' syntax and their defaults.
//!
//! The spec model reads `init: NAME` into a [`Generator`], the Rust generators
//! (`inputs::generators`) compute it, and the harness runtime's `InitKind` enum and its table of
//! `--init` forms (a generated part of crates/repro-contract/runtime/src/inputs/generators.cuh,
//! rendered by [`generators_cpp`]; `harness_options::GENERATED_PARTS` lists it) come from the same
//! list, so that a pattern added here reaches the spec, `repro` and the harness at once. The
//! arithmetic of each pattern is written twice (generators.cuh and inputs/generators.rs) and
//! compared bit for bit by tests/suite/runtime.rs.

use serde::{Deserialize, Serialize};

/// An init pattern a generator makes: spec.yaml's `init: NAME`, the harness's `--init NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    Ones,
    Zeros,
    /// The logical row-major index itself.
    Iota,
    /// 1 where the last two logical coordinates are equal; a rank-1 tensor is one row, so e_0.
    Identity,
    /// `[p0, p1)`.
    Uniform,
    /// Integers in `[p0, p1]`, both integral and within ±2^52.
    IntUniform,
    /// Mean `p0`, standard deviation `p1`.
    Normal,
    /// 1 + the row: every row (every tile of rows) holds its own values.
    RowRamp,
}

impl Generator {
    /// Every pattern, in the order the harness's `--help` and error messages list them.
    pub const ALL: [Generator; 8] = [
        Generator::Ones,
        Generator::Zeros,
        Generator::Iota,
        Generator::Identity,
        Generator::Uniform,
        Generator::IntUniform,
        Generator::Normal,
        Generator::RowRamp,
    ];

    /// The name spec.yaml and `--init` spell it with (serde's snake_case of the variant).
    pub fn name(self) -> &'static str {
        match self {
            Generator::Ones => "ones",
            Generator::Zeros => "zeros",
            Generator::Iota => "iota",
            Generator::Identity => "identity",
            Generator::Uniform => "uniform",
            Generator::IntUniform => "int_uniform",
            Generator::Normal => "normal",
            Generator::RowRamp => "row_ramp",
        }
    }

    /// The parameters `--init` may give after the name (`uniform:LO:HI`), as its syntax
    /// shows them; None for a pattern that takes none.
    pub fn parameters(self) -> Option<&'static str> {
        match self {
            Generator::Uniform | Generator::IntUniform => Some(":LO:HI"),
            Generator::Normal => Some(":MEAN:STD"),
            _ => None,
        }
    }

    /// `(p0, p1)` when the spec or `--init` gives none: uniform `[-1, 1)`, int_uniform
    /// `[-4, 4]`, normal mean 0 std 1; `(0, 0)` for a pattern without parameters.
    pub fn default_parameters(self) -> (f64, f64) {
        match self {
            Generator::Uniform => (-1.0, 1.0),
            Generator::IntUniform => (-4.0, 4.0),
            Generator::Normal => (0.0, 1.0),
            _ => (0.0, 0.0),
        }
    }

    /// The pattern as `--init`'s syntax writes it: `uniform[:LO:HI]`, `ones`.
    pub fn form(self) -> String {
        match self.parameters() {
            Some(parameters) => format!("{}[{parameters}]", self.name()),
            None => self.name().to_string(),
        }
    }
}

/// The patterns' names, comma-separated: `ones, zeros, ..., row_ramp`.
pub fn names() -> String {
    Generator::ALL.map(Generator::name).join(", ")
}

/// The generated part of generators.cuh: the runtime's `InitKind` (the generated patterns, then
/// those read from elsewhere), the table `parse_init` and `read_init` look names up in, and the
/// `--init` syntax their messages show.
pub fn generators_cpp() -> String {
    let kinds: Vec<&str> = Generator::ALL.iter().map(|g| g.name()).collect();
    let mut text = String::from(
        "// The init patterns: those a generator makes, then file, and values and groups, which list\n\
         // their elements (fill_host() writes them).\n",
    );
    text.push_str(&format!(
        "enum class InitKind {{ {}, file, values, groups }};\n\n",
        kinds.join(", ")
    ));
    text.push_str(
        "// Each generated pattern by name, the parameters --init may give after it (\"\" for none) and\n\
         // their defaults.\n\
         struct InitForm {\n  \
           const char* name;\n  \
           InitKind kind;\n  \
           const char* parameters;\n  \
           double default_p0, default_p1;\n\
         };\n\
         inline constexpr InitForm kInitPatterns[] = {\n",
    );
    for generator in Generator::ALL {
        let (p0, p1) = generator.default_parameters();
        text.push_str(&format!(
            "    {{\"{}\", InitKind::{}, \"{}\", {p0}, {p1}}},\n",
            generator.name(),
            generator.name(),
            generator.parameters().unwrap_or(""),
        ));
    }
    text.push_str("};\n");
    let forms: Vec<String> = Generator::ALL.iter().map(|g| g.form()).collect();
    text.push_str(&format!(
        "inline constexpr const char* kInitNames = \"{}\";\n\
         inline constexpr const char* kInitForms = \"{} | file:PATH\";\n",
        names(),
        forms.join(" | ")
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name` is what serde reads and writes, so the spec, `--init` and the runtime spell a
    /// pattern alike.
    #[test]
    fn names_are_serdes_spelling() {
        for generator in Generator::ALL {
            let written = serde_yaml::to_string(&generator).unwrap();
            assert_eq!(written.trim(), generator.name());
            let read: Generator = serde_yaml::from_str(generator.name()).unwrap();
            assert_eq!(read, generator);
        }
        assert_eq!(
            names(),
            "ones, zeros, iota, identity, uniform, int_uniform, normal, row_ramp"
        );
    }

    /// The harness's `--help` (a hand-written line of harness_options) offers every pattern.
    #[test]
    fn the_harness_help_names_every_pattern() {
        let help = crate::harness_options::INIT.help;
        for generator in Generator::ALL {
            assert!(
                help.contains(&generator.form()),
                "--init's help misses {}: {help}",
                generator.form()
            );
        }
    }

    #[test]
    fn the_runtime_table_is_cpp() {
        let text = generators_cpp();
        assert!(text.contains(
            "enum class InitKind { ones, zeros, iota, identity, uniform, int_uniform, normal, \
             row_ramp, file, values, groups };"
        ));
        assert!(text.contains("    {\"int_uniform\", InitKind::int_uniform, \":LO:HI\", -4, 4},\n"));
        assert!(text.contains("    {\"ones\", InitKind::ones, \"\", 0, 0},\n"));
        assert!(text.contains(
            "kInitForms = \"ones | zeros | iota | identity | uniform[:LO:HI] | int_uniform[:LO:HI] \
             | normal[:MEAN:STD] | row_ramp | file:PATH\";"
        ));
    }
}
