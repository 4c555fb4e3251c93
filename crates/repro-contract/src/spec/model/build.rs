//! `build:` as written: target, C++ standard, flags, and `flags_from`, a compile line to read
//! them off (a path, or a path and a pattern).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSpec {
    /// Default `sm_90a`, or the arch of the `flags_from` compile line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Default `c++17`, or the standard of the `flags_from` compile line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags_from: Option<FlagsFrom>,
}

/// `flags_from: LOG` or `flags_from: { file: LOG, match: PATTERN }`: a build log,
/// compile_commands.json or a file holding one nvcc command line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlagsFrom {
    pub file: String,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_pattern: Option<String>,
}

impl<'de> Deserialize<'de> for FlagsFrom {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            file: String,
            #[serde(rename = "match")]
            match_pattern: Option<String>,
        }
        struct FlagsFromVisitor;
        impl<'de> serde::de::Visitor<'de> for FlagsFromVisitor {
            type Value = FlagsFrom;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a log file path, or { file: PATH, match: PATTERN }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FlagsFrom, E> {
                Ok(FlagsFrom {
                    file: v.to_string(),
                    match_pattern: None,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<FlagsFrom, A::Error> {
                let t = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(FlagsFrom {
                    file: t.file,
                    match_pattern: t.match_pattern,
                })
            }
        }
        deserializer.deserialize_any(FlagsFromVisitor)
    }
}
