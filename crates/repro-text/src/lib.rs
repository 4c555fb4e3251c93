//! repro's ground layer: the general text and path helpers that every feature uses and none owns.
//! Quoting a value for a shell word or a CMake argument (quote), paths written relative to an
//! artifact's folder (paths), splitting a list at its top-level commas (split), and the closest
//! name to a typo (suggest), and writing a file whole through a new file renamed over it (file).
//!
//! It may import nothing of repro: no spec, no CUDA, no harness, no command. Cargo enforces that
//! (this crate does not depend on the repro crate, and a dependency back would be a cycle);
//! README.md's "Layout" says which layers sit above it. YAML is not here: all of it is in
//! crates/repro-contract/src/spec/yaml.rs.

mod file;
pub mod paths;
pub mod quote;
mod split;
mod suggest;

pub use file::{replace_file, ReplaceError};
pub use split::split_top_level;
pub use suggest::did_you_mean;
