//! `tensors:` and `inputs:` as written: a tensor's dtype, shape and strides (`Value`: an
//! integer or an expression, also what launch values are), and how its elements are filled
//! (`init:`: a generator, a file, explicit values or a grouped GEMM's group index). `Value` and
//! `InitPattern` read their untagged forms with hand-written visitors, so a wrong one is named.

use serde::{Deserialize, Serialize};

use crate::spec::dtype::DType;

/// The init patterns a generator makes: their one list is the contract's (`init_patterns`).
pub use crate::init_patterns::Generator;

/// A dimension, stride or launch value: an integer, or text (a size name, an expression).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Float(f64),
    Text(String),
}

impl Value {
    /// The value as C++ source text.
    pub fn to_cpp(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(x) => format!("{x:?}"),
            Value::Text(t) => t.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    RowMajor,
    ColMajor,
}

/// When an intermediate tensor is made from its init (docs/spec.md, `intermediate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    /// Before every call of the operator (every launch of the sequence, every repeat).
    Call,
    /// Once per check: what one call leaves is what the next call finds.
    Persist,
}

impl Lifetime {
    pub fn name(self) -> &'static str {
        match self {
            Lifetime::Call => "call",
            Lifetime::Persist => "persist",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output: bool,
    /// The operator's own state between its launches (a workspace, partial sums, a semaphore):
    /// neither an input nor compared, made from its init (zeros unless given) as `lifetime` says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intermediate: bool,
    /// An intermediate's lifetime: made afresh before every call (`call`, the default), or once
    /// per check and kept across its calls (`persist`), as a production allocator keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<Lifetime>,
    /// An intermediate's own reference: what it should hold once the launch that writes it has
    /// run, for naming the first launch whose result is wrong (docs/spec.md, `launches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<IntermediateReferenceSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitPattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// An intermediate's `reference:`, in one of two forms: `{ source, function }`, a host C++
/// function in a header beside the spec, called with every input and then the intermediate (as
/// `op: custom`'s reference is); or `{ file }`, a `.npy` beside the spec holding what the
/// intermediate should hold for the spec's own inputs. Every field is an option so that a
/// missing one, or a mix of the two forms, is named by validation, at the tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntermediateReferenceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// `init:` — a generator name, or `{ file: PATH }`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InitPattern {
    Generator(Generator),
    File(FileInit),
    /// `{ values: [...] }`: every element, in logical row-major order (masked_m, k_sizes).
    Values(ValuesInit),
    /// `{ groups: [rows...], align: A }`: a contiguous grouped GEMM's group index.
    Groups(GroupsInit),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValuesInit {
    #[serde(serialize_with = "integers_as_integers")]
    pub values: Vec<f64>,
}

/// Whole numbers as integers (`- 200`, not `- 200.0`): the resolved spec.yaml is read by people.
fn integers_as_integers<S: serde::Serializer>(
    values: &[f64],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = serializer.serialize_seq(Some(values.len()))?;
    for &v in values {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            seq.serialize_element(&(v as i64))?;
        } else {
            seq.serialize_element(&v)?;
        }
    }
    seq.end()
}

/// Group g's rows get index g, each group's run padded with -1 rows to a multiple of `align`,
/// from row 0 in group order; the rows after the last group's padding are -1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsInit {
    pub groups: Vec<i64>,
    #[serde(default = "GroupsInit::default_align")]
    pub align: i64,
}

impl GroupsInit {
    fn default_align() -> i64 {
        1
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileInit {
    /// `.npy`, or `.bin` raw in the tensor's dtype; relative to the spec file.
    pub file: String,
}

/// The default init for every non-output tensor that names none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsSpec {
    #[serde(default = "InputsSpec::default_init")]
    pub init: InitPattern,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl InputsSpec {
    fn default_init() -> InitPattern {
        InitPattern::Generator(Generator::Uniform)
    }
}

impl Default for InputsSpec {
    fn default() -> Self {
        InputsSpec {
            init: InputsSpec::default_init(),
            range: None,
            mean: None,
            std: None,
            seed: None,
        }
    }
}

// Hand-written visitors instead of `#[serde(untagged)]`: untagged enums fail with "data did not
// match any variant", which tells a user nothing. These say what was expected.

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl serde::de::Visitor<'_> for ValueVisitor {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string (a size name or a C++ expression)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom(format!("{v} does not fit a 64-bit integer")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Text(v.to_string()))
            }
            // `template_args: [MyEnum::A, true]`: YAML reads the bool; C++ wants its spelling.
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for InitPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InitVisitor;
        impl<'de> serde::de::Visitor<'de> for InitVisitor {
            type Value = InitPattern;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(
                    f,
                    "a generator ({}), {{ file: PATH }}, {{ values: [...] }} or {{ groups: [...], align: N }}",
                    crate::init_patterns::names()
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<InitPattern, E> {
                Generator::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(InitPattern::Generator)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<InitPattern, A::Error> {
                // One struct with every form's keys, so that a misspelt key is still an error,
                // then exactly one form.
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct InitMap {
                    file: Option<String>,
                    values: Option<Vec<f64>>,
                    groups: Option<Vec<i64>>,
                    align: Option<i64>,
                }
                let m = InitMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let custom = |why: &str| <A::Error as serde::de::Error>::custom(why);
                if m.align.is_some() && m.groups.is_none() {
                    return Err(custom("`align` belongs to `{ groups: [...], align: N }`"));
                }
                match (m.file, m.values, m.groups) {
                    (Some(file), None, None) => Ok(InitPattern::File(FileInit { file })),
                    (None, Some(values), None) => Ok(InitPattern::Values(ValuesInit { values })),
                    (None, None, Some(groups)) => Ok(InitPattern::Groups(GroupsInit {
                        groups,
                        align: m.align.unwrap_or_else(GroupsInit::default_align),
                    })),
                    (None, None, None) => Err(custom(
                        "an init map takes `file`, `values` or `groups` (with `align`)",
                    )),
                    _ => Err(custom(
                        "an init map takes one of `file`, `values` and `groups`, not several",
                    )),
                }
            }
        }
        deserializer.deserialize_any(InitVisitor)
    }
}
