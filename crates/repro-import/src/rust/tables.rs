//! Where kernel functions are stored, and which kernel each holds: the tables kernels.rs fills
//! from a file (and from the `--search` folder) and the resolver's context (resolve.rs) carries.
//! Plain data, below both: it imports neither, so kernels.rs and resolve.rs form no loop.

use std::collections::HashMap;

/// Where kernel functions are stored, and which kernel each holds: (kernel name, how found).
#[derive(Debug, Default)]
pub(super) struct Tables {
    /// Struct field → what it is set to: `Struct { field: module.load_function("k")? }`, the
    /// shorthand `Struct { field }` of a `let` so bound, or `x.field = module.load_function(..)`.
    pub(super) fields: HashMap<String, Vec<(String, String)>>,
    /// Map (variable or field) → its entries.
    pub(super) maps: HashMap<String, MapTable>,
}

#[derive(Debug, Default)]
pub(super) struct MapTable {
    /// `map.insert("key", module.load_function("k")?)`: key → kernel.
    pub(super) entries: HashMap<String, Vec<(String, String)>>,
    /// `map.insert(name.to_string(), module.load_function(name)?)`: every key is the kernel's
    /// own name (where that insert is).
    pub(super) keyed_by_name: Option<String>,
}

impl Tables {
    pub(super) fn merge(&mut self, other: Tables) {
        for (field, found) in other.fields {
            self.fields.entry(field).or_default().extend(found);
        }
        for (map, table) in other.maps {
            let mine = self.maps.entry(map).or_default();
            for (key, found) in table.entries {
                mine.entries.entry(key).or_default().extend(found);
            }
            if mine.keyed_by_name.is_none() {
                mine.keyed_by_name = table.keyed_by_name;
            }
        }
    }
}

/// What `--search DIR` found in the other Rust files under DIR.
#[derive(Debug, Default)]
pub(super) struct Elsewhere {
    /// The folder searched (None: no `--search`).
    pub(super) dir: Option<String>,
    /// Rust files read and parsed there.
    pub(super) files: usize,
    pub(super) tables: Tables,
}
