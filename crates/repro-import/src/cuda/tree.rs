//! The file tree: which files are scanned (extensions, skipped folders), reading one safely (no
//! fifo, device or huge file), `#include` resolution inside the tree, and the per-file cache of
//! what each file lends its includers (macros, aliases) for [`Tree::scan`]. Also the include
//! directories a kernel's file needs, for the skeleton.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use walkdir::WalkDir;

use super::declarations::{scan_tokens, FileContext, Scan};
use super::lex::{lex, Kind, Lexed};
use super::macros::{parse_define, Expander, Macro, MacroEntry, MacroTable};
use super::types::{collect_aliases, merge_aliases, Aliases};
use super::{ImportError, EXTENSIONS};

/// Files larger than this are not read (generated tables, embedded binaries).
const MAX_FILE_BYTES: u64 = 16 << 20;

// ---------------------------------------------------------------------------------------------
// The tree

fn skipped_folder(name: &str) -> bool {
    name.starts_with('.')
        || matches!(
            name,
            "build" | "CMakeFiles" | "target" | "node_modules" | "__pycache__" | "dist" | "_deps"
        )
        || name.starts_with("build-")
        || name.starts_with("cmake-build-")
}

fn has_source_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e))
}

/// The source files under `root` (or `root` itself), in a deterministic order.
pub fn source_files(root: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let meta = std::fs::metadata(root).map_err(|source| ImportError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        // A file, or a fifo or device given by mistake: the reading says which.
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    let walk = WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_dir()
                || !skipped_folder(&e.file_name().to_string_lossy())
        });
    for entry in walk.flatten() {
        let path = entry.path();
        // Not only regular files: a fifo or device named like a source is noted when read.
        if entry.depth() > 0 && has_source_extension(path) && !path.is_dir() {
            files.push(path.to_path_buf());
        }
    }
    Ok(files)
}

fn read_lossy(path: &Path) -> Option<String> {
    read_checked(path).ok()
}

/// A source file's text, or why it was not read: not a regular file (a fifo blocks on open,
/// `/dev/zero` never ends), above [`MAX_FILE_BYTES`], or unreadable. The check comes before the
/// open, and the read is bounded too, for a file that grows after the check.
pub(super) fn read_checked(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a source file",
            crate::file_kind::describe(&meta)
        ));
    }
    let too_large = |bytes: u64| {
        format!(
            "{:.1} MiB, above the {} MiB read of a source file (a generated table or an embedded binary)",
            bytes as f64 / (1u64 << 20) as f64,
            MAX_FILE_BYTES >> 20
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Lexical normalization (`a/./b/../c` → `a/c`), no file system access.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c.as_os_str()),
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Include {
    name: String,
    quoted: bool,
}

fn includes_of(lexed: &Lexed) -> Vec<Include> {
    let mut out = Vec::new();
    for d in &lexed.directives {
        if !d
            .tokens
            .first()
            .is_some_and(|t| t.is("include") || t.is("include_next") || t.is("import"))
        {
            continue;
        }
        match d.tokens.get(1) {
            Some(t) if t.kind == Kind::Str => out.push(Include {
                name: t.text.clone(),
                quoted: true,
            }),
            Some(t) if t.is("<") => {
                let end = d
                    .tokens
                    .iter()
                    .position(|t| t.is(">"))
                    .unwrap_or(d.tokens.len());
                let name: String = d
                    .tokens
                    .get(2..end)
                    .unwrap_or(&[])
                    .iter()
                    .map(|t| t.text.as_str())
                    .collect();
                if !name.is_empty() {
                    out.push(Include {
                        name,
                        quoted: false,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// What a file lends the files that include it: its macros, its aliases, the tree files it
/// includes.
#[derive(Debug, Default)]
struct FileInfo {
    macros: Vec<(String, Rc<Macro>)>,
    aliases: Aliases,
    includes: Vec<usize>,
}

/// The scanned files, with what each lends its includers cached (tokens are not kept).
pub(super) struct Tree {
    files: Vec<PathBuf>,
    normalized: Vec<PathBuf>,
    by_path: HashMap<PathBuf, usize>,
    info: HashMap<usize, Rc<FileInfo>>,
    /// `#include` names without a `./`-relative hit, resolved by path suffix.
    by_suffix: HashMap<String, Option<usize>>,
}

impl Tree {
    pub(super) fn new(files: Vec<PathBuf>) -> Tree {
        let normalized: Vec<PathBuf> = files.iter().map(|f| normalize(f)).collect();
        let by_path = normalized
            .iter()
            .enumerate()
            .map(|(k, f)| (f.clone(), k))
            .collect();
        Tree {
            files,
            normalized,
            by_path,
            info: HashMap::new(),
            by_suffix: HashMap::new(),
        }
    }

    fn info(&mut self, k: usize, lexed: Option<&Lexed>) -> Rc<FileInfo> {
        if let Some(i) = self.info.get(&k) {
            return i.clone();
        }
        let owned;
        let lexed = match lexed {
            Some(l) => l,
            None => {
                owned = lex(&read_lossy(&self.files[k]).unwrap_or_default());
                &owned
            }
        };
        let mut info = FileInfo::default();
        for d in &lexed.directives {
            if let Some((name, m)) = parse_define(d) {
                info.macros.push((name, Rc::new(m)));
            }
        }
        collect_aliases(&lexed.code, &mut info.aliases);
        for inc in includes_of(lexed) {
            if let Some(g) = self.resolve(k, &inc) {
                if g != k && !info.includes.contains(&g) {
                    info.includes.push(g);
                }
            }
        }
        let info = Rc::new(info);
        self.info.insert(k, info.clone());
        info
    }

    /// The tree file an `#include` in file `from` names, if any.
    fn resolve(&mut self, from: usize, inc: &Include) -> Option<usize> {
        let name = Path::new(&inc.name);
        if inc.quoted {
            if let Some(dir) = self.files[from].parent() {
                if let Some(&k) = self.by_path.get(&normalize(&dir.join(name))) {
                    return Some(k);
                }
            }
        }
        if let Some(hit) = self.by_suffix.get(&inc.name) {
            return *hit;
        }
        let suffix = normalize(name);
        let hit = if suffix.components().count() == 0 {
            None
        } else {
            self.normalized.iter().position(|f| f.ends_with(&suffix))
        };
        self.by_suffix.insert(inc.name.clone(), hit);
        hit
    }

    pub(super) fn scan(&mut self, k: usize, text: &str) -> Scan {
        let lexed = lex(text);
        self.info.remove(&k);
        self.info(k, Some(&lexed));
        // File `k` and the tree files it includes, transitively (at most 256).
        let mut closure = vec![k];
        let mut queue = VecDeque::from([k]);
        while let Some(f) = queue.pop_front() {
            for &g in &self.info(f, None).includes {
                if !closure.contains(&g) && closure.len() < 256 {
                    closure.push(g);
                    queue.push_back(g);
                }
            }
        }
        let mut table = MacroTable::default();
        let mut aliases = Aliases::new();
        for &f in &closure {
            let info = self.info(f, None);
            for (name, m) in &info.macros {
                table.define(name, m);
            }
            merge_aliases(&mut aliases, &info.aliases);
        }
        table.finish();
        let ambiguous: HashSet<String> = table
            .entries
            .iter()
            .filter(|(_, e)| matches!(e, MacroEntry::Ambiguous))
            .map(|(n, _)| n.clone())
            .collect();
        let mut expander = Expander {
            table: &table,
            budget: 200_000 + 8 * lexed.code.len(),
        };
        let tokens = expander.expand(&lexed.code, &mut Vec::new(), 0);
        let cx = FileContext {
            path: &self.files[k],
            aliases: &aliases,
            ambiguous: &ambiguous,
            alternatives: &table.alternatives,
        };
        scan_tokens(&tokens, &cx)
    }
}

/// Absolute form of `path` (no symbolic links resolved).
pub(super) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path)
        .map(|p| normalize(&p))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// CUDA toolkit and CUTLASS headers, which `repro` finds itself (some projects include them with
/// quotes).
fn library_header(name: &str) -> bool {
    let first = name.split('/').next().unwrap_or(name);
    matches!(
        first,
        "cutlass" | "cute" | "cub" | "thrust" | "cuda" | "nv" | "cooperative_groups" | "crt"
    ) || [
        "cuda",
        "cublas",
        "cufft",
        "curand",
        "cusparse",
        "cusolver",
        "nvrtc",
        "nvml",
        "mma.h",
        "vector_types",
        "device_",
    ]
    .iter()
    .any(|p| first.starts_with(p))
}

/// Include directories that the kernel's file and the local headers it includes need (beyond
/// its own folder), and the quoted includes that were found nowhere under the tree.
pub(super) fn include_dirs_for(file: &Path, root: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let root_dir = absolute(if root.is_file() {
        root.parent().unwrap_or(Path::new("."))
    } else {
        root
    });
    let file = absolute(file);
    // The harness's -I list: the kernel's folder first.
    let mut dirs: Vec<PathBuf> = file.parent().map(Path::to_path_buf).into_iter().collect();
    let mut missing = Vec::new();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut tree: Option<Vec<PathBuf>> = None;
    let mut queue = VecDeque::from([file]);
    while let Some(f) = queue.pop_front() {
        if !seen.insert(f.clone()) || seen.len() > 256 {
            continue;
        }
        let Some(text) = read_lossy(&f) else { continue };
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        for inc in includes_of(&lex(&text)) {
            let own = dir.join(&inc.name);
            if inc.quoted && own.is_file() {
                queue.push_back(normalize(&own));
                continue;
            }
            if let Some(found) = dirs.iter().map(|d| d.join(&inc.name)).find(|p| p.is_file()) {
                queue.push_back(normalize(&found));
                continue;
            }
            // An ancestor of the including file, within the tree, that holds it; else any folder
            // of the tree that does (`include/lib/api.cuh` for "lib/api.cuh" from `src/`).
            let name = normalize(Path::new(&inc.name));
            let depth = name.components().count();
            let hit = dir
                .ancestors()
                .take_while(|a| a.starts_with(&root_dir))
                .find(|a| a.join(&inc.name).is_file())
                .map(Path::to_path_buf)
                .or_else(|| {
                    let files = tree.get_or_insert_with(|| {
                        source_files(&root_dir)
                            .unwrap_or_default()
                            .iter()
                            .map(|f| absolute(f))
                            .collect()
                    });
                    files
                        .iter()
                        // `<mma.h>` is CUDA's, not some folder's `mma.h`
                        .find(|f| (depth > 1 || (depth == 1 && inc.quoted)) && f.ends_with(&name))
                        .and_then(|f| f.ancestors().nth(depth))
                        .map(Path::to_path_buf)
                });
            match hit {
                Some(a) => {
                    queue.push_back(normalize(&a.join(&inc.name)));
                    dirs.push(a);
                }
                None if inc.quoted && !library_header(&inc.name) => {
                    let shown = format!("\"{}\"", inc.name);
                    if !missing.contains(&shown) {
                        missing.push(shown);
                    }
                }
                None => {}
            }
        }
    }
    (dirs, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn rel(root: &Path, files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn build_and_hidden_folders_are_skipped_vendored_code_is_not() {
        for name in [
            ".git",
            ".venv",
            "build",
            "build-release",
            "cmake-build-debug",
            "CMakeFiles",
            "target",
            "node_modules",
            "__pycache__",
            "dist",
            "_deps",
        ] {
            assert!(skipped_folder(name), "{name}");
        }
        for name in ["src", "third_party", "external", "builder", "kernels"] {
            assert!(!skipped_folder(name), "{name}");
        }
        assert!(has_source_extension(Path::new("a/k.cuh")));
        assert!(has_source_extension(Path::new("k.inl")));
        assert!(!has_source_extension(Path::new("k.cpp")));
        assert!(!has_source_extension(Path::new("cu")));
    }

    #[test]
    fn the_walk_filters_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "src/k.cu",
            "src/k.txt",
            "build/x.cu",
            ".git/y.cuh",
            "cmake-build-debug/z.cu",
            "third_party/t.cuh",
            "b.h",
            "a.hpp",
        ] {
            write(root, f, "");
        }
        let files = source_files(root).unwrap();
        assert_eq!(
            rel(root, &files),
            ["a.hpp", "b.h", "src/k.cu", "third_party/t.cuh"]
        );
        // A folder given as the root is scanned even when its name is on the list.
        assert_eq!(
            rel(root, &source_files(&root.join("build")).unwrap()),
            ["build/x.cu"]
        );
        // A file is itself, whatever its extension.
        assert_eq!(
            source_files(&root.join("src/k.txt")).unwrap(),
            [root.join("src/k.txt")]
        );
        assert!(matches!(
            source_files(&root.join("nope")),
            Err(ImportError::Io { .. })
        ));
    }

    #[test]
    fn odd_files_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_checked(dir.path()).unwrap_err();
        assert_eq!(err, "a folder, not a source file");
        let big = dir.path().join("big.cuh");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        assert!(read_checked(&big)
            .unwrap_err()
            .contains("above the 16 MiB read"));
        let ok = write(dir.path(), "ok.cuh", "int \u{fffd}x;");
        assert_eq!(read_checked(&ok).unwrap(), "int \u{fffd}x;");
    }

    #[test]
    fn lexical_normalization() {
        assert_eq!(normalize(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(normalize(Path::new("../x/./y")), PathBuf::from("../x/y"));
        assert_eq!(normalize(Path::new("./")), PathBuf::new());
    }

    #[test]
    fn include_directives() {
        let lexed = lex("#include \"a/b.h\"\n#include <cuda/std/utility>\n#  include_next <x.h>\n#include MACRO\n#import \"m.h\"\n");
        let got: Vec<(String, bool)> = includes_of(&lexed)
            .into_iter()
            .map(|i| (i.name, i.quoted))
            .collect();
        assert_eq!(
            got,
            [
                ("a/b.h".to_string(), true),
                ("cuda/std/utility".to_string(), false),
                ("x.h".to_string(), false),
                ("m.h".to_string(), true),
            ]
        );
    }

    #[test]
    fn a_scan_sees_the_macros_of_included_tree_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let text = "#include \"b.cuh\"\nREAL_GLOBAL void k(REAL* x);\n";
        let k = write(root, "src/k.cuh", text);
        let b = write(
            root,
            "inc/b.cuh",
            "#define REAL float\n#define REAL_GLOBAL __global__\n",
        );
        // `b.cuh` is not next to `k.cuh`: found by its path's suffix.
        let mut tree = Tree::new(vec![b, k]);
        let found = tree.scan(1, text).found;
        let [f] = found.as_slice() else {
            panic!("{found:?}")
        };
        assert_eq!(f.decl.signature, "__global__ void k(float* x)");
        assert_eq!(f.decl.macros, ["REAL_GLOBAL", "REAL"]);
        assert_eq!(tree.info(1, None).includes, [0]);
    }

    #[test]
    fn include_dirs_for_headers_elsewhere_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let k = write(
            root,
            "src/k.cu",
            "#include \"lib/api.cuh\"\n#include \"missing.h\"\n#include \"cutlass/gemm.h\"\n",
        );
        write(root, "include/lib/api.cuh", "#include \"detail.cuh\"\n");
        write(root, "include/lib/detail.cuh", "");
        let (dirs, missing) = include_dirs_for(&k, root);
        let root = absolute(root);
        assert_eq!(dirs, [root.join("src"), root.join("include")]);
        assert_eq!(missing, ["\"missing.h\""]);
    }

    #[test]
    fn library_headers_are_not_local() {
        for h in [
            "cutlass/gemm.h",
            "cute/tensor.hpp",
            "cuda_fp16.h",
            "cuda/barrier",
            "mma.h",
            "cublas_v2.h",
        ] {
            assert!(library_header(h), "{h}");
        }
        assert!(!library_header("mylib/a.h"));
        assert!(!library_header("gemm.cuh"));
    }
}
