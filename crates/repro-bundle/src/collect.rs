//! What files come into a bundle and from where (docs/cli.md, `repro bundle`): the kernel's own
//! headers (those nvcc read, from its dependency list), the input files, `op: custom`'s header
//! and the headers it reads, `op: file`'s expected outputs, intermediates' own references (their
//! headers or files), a capture's cubin, parameter bytes and production outputs. Each is checked
//! by [`Tree::admit`] (inside the spec's tree, a regular file, what it claims to be), listed with
//! its origin, copied under a name of its own, and the bundle's spec pointed at the copy.

use std::path::{Path, PathBuf};

use super::listing::{LeftOut, Listing};
use super::toolkit::{Toolkit, TOOLKIT};
use super::tree::{copy_checked, Claim, Tree};
use super::BundleError;
use crate::build;
use crate::generate::artifact;
use crate::plan::Plan;
use crate::spec::{InitSource, IntermediateReference, LaunchKind, Reference, ResolvedSpec};

/// What [`make_bundle`] leaves for the README and the warning.
pub struct Collected {
    pub listing: Listing,
    pub cutlass: bool,
}

/// Where the files come from, and the folders a header may be left out from.
struct Sources<'a> {
    plan: &'a Plan,
    tree: Tree,
    toolkit: Toolkit,
    /// The artifact's own files (its runtime/ included): the bundle writes its own.
    artifact: PathBuf,
}

impl Sources<'_> {
    /// The headers nvcc read for `depfile` (below the artifact's .repro/build/), the toolchain's
    /// counted and left out, the artifact's own skipped.
    fn headers(&self, depfile: &str, listing: &mut Listing) -> Result<Vec<PathBuf>, BundleError> {
        let path = self.plan.dir.join(".repro/build").join(depfile);
        let deps = std::fs::read_to_string(&path).map_err(BundleError::io("read", &path))?;
        let read: Vec<PathBuf> = build::parse_depfile(&deps)
            .into_iter()
            .skip(1)
            .map(|dep| repro_text::paths::absolute(&self.plan.dir.join(&dep)))
            .collect();
        // The toolkit's include folder is where nvcc found cuda_runtime.h, whatever nvcc said
        // of itself (a wrapper that hides `--dryrun`).
        let found_here = self.toolkit.include_folders_in(&read, &self.tree.roots);
        let mut headers = Vec::new();
        for header in read {
            if header.starts_with(&self.artifact) {
                continue;
            }
            if let Some(whose) = self.toolkit.whose(&header).or_else(|| {
                found_here
                    .iter()
                    .any(|f| header.starts_with(f))
                    .then_some(TOOLKIT)
            }) {
                *listing.toolchain.entry(whose).or_default() += 1;
                continue;
            }
            headers.push(header);
        }
        Ok(headers)
    }

    /// A file the spec names, checked and copied into `dir/folder/` under a name no other copy
    /// has, and `path` pointed at the copy.
    #[allow(clippy::too_many_arguments)]
    fn bring(
        &self,
        listing: &mut Listing,
        dir: &Path,
        folder: &str,
        path: &mut PathBuf,
        reached_by: &str,
        why: String,
        claim: Claim,
    ) -> Result<(), BundleError> {
        let source = self.tree.admit(path, &self.tree.roots, reached_by, claim)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bundled = listing.place(folder, &name, &source);
        if listing.add(bundled.clone(), &source, self.tree.origin(path), why) {
            copy_checked(&source, &dir.join(&bundled))?;
        }
        *path = dir.join(bundled);
        Ok(())
    }
}

/// The bundle's files into `dir` (a new, empty folder) and its spec, pointed at them; returns
/// the listing of what came in and what was left out.
pub fn make_bundle(plan: &Plan, dir: &Path, nvcc: &Path) -> Result<Collected, BundleError> {
    let spec = &plan.spec;
    let tree = Tree::new(&spec_folder(plan), &spec.include_dirs);
    let toolkit = Toolkit::find(spec, nvcc, &tree.roots);
    let mut listing = Listing::default();
    listing.notes = toolkit.not_toolkit.clone();
    let sources = Sources {
        plan,
        tree,
        toolkit,
        artifact: repro_text::paths::absolute(&plan.dir),
    };
    let tree = &sources.tree;
    let mut bundled = spec.clone();
    bundled.path = dir.join("spec.yaml");
    bundled.dir = dir.to_path_buf();
    // Each include dir becomes include/<n>/ holding the headers nvcc read under it.
    let mut include_dirs = Vec::new();
    for n in 0..spec.include_dirs.len() {
        let target = dir.join("include").join(n.to_string());
        std::fs::create_dir_all(&target).map_err(BundleError::io("create", &target))?;
        include_dirs.push(target);
    }
    for path in sources.headers("harness.d", &mut listing)? {
        let (bundled_path, inc, beside) = match spec
            .include_dirs
            .iter()
            .position(|inc| path.starts_with(inc))
        {
            Some(n) => {
                let rel = path.strip_prefix(&spec.include_dirs[n]).expect("checked");
                (format!("include/{n}/{}", rel.display()), n, None)
            }
            // A header beside an include dir (`../common/util.cuh` from one of its headers) goes
            // beside that dir's copy, where the same relative include finds it.
            None => match beside_an_include_dir(&path, &tree.spec_dir, &spec.include_dirs) {
                Some((rel, n, project)) if !takes_a_copys_name(&rel, spec.include_dirs.len()) => {
                    (format!("include/{}", rel.display()), n, Some(project))
                }
                _ => {
                    listing.left_out.push(LeftOut {
                        name: file_name(&path),
                        origin: tree.origin(&path),
                        why:
                            "outside the spec's include dirs and the folder that holds the spec \
                              and an include dir: no place in the bundle where its include finds it"
                                .into(),
                    });
                    continue;
                }
            },
        };
        let inc_origin = tree.origin(&spec.include_dirs[inc]);
        let mut area = tree.roots.clone();
        area.extend(beside.clone());
        let reached_by = format!("include dir {inc_origin} (source.include_dirs)");
        let source = tree.admit(&path, &area, &reached_by, Claim::Header)?;
        let why = match beside {
            None => format!("kernel header (include dir {inc_origin})"),
            Some(_) => format!("kernel header (beside include dir {inc_origin})"),
        };
        if listing.add(bundled_path.clone(), &source, tree.origin(&path), why) {
            copy_checked(&source, &dir.join(&bundled_path))?;
        }
    }
    bundled.include_dirs = include_dirs;
    let names: Vec<String> = spec.tensors.iter().map(|t| t.name.clone()).collect();
    for t in bundled.tensors.iter_mut() {
        let claim = Claim::Input {
            dtype: t.dtype,
            numel: t.numel(),
        };
        let name = t.name.clone();
        if let InitSource::File(path) = &mut t.init.source {
            sources.bring(
                &mut listing,
                dir,
                "inputs",
                path,
                &format!("tensor {name}'s init.file"),
                format!("input of tensor {name} (init.file)"),
                claim,
            )?;
        }
    }
    copy_reference(&sources, &mut listing, &mut bundled, dir, &names)?;
    copy_intermediate_references(&sources, &mut listing, &mut bundled, dir)?;
    copy_capture(&sources, &mut listing, &mut bundled, dir, &names)?;
    // CUTLASS is the receiver's: build.sh reads $CUTLASS_DIR, or a cutlass/ folder in the bundle.
    let cutlass = bundled.cutlass.is_some();
    if cutlass {
        bundled.cutlass = Some(dir.join("cutlass"));
    }
    let plan = Plan::for_spec(bundled, dir.to_path_buf())?;
    let files = plan.artifact.as_ref().expect("a spec's plan has its files");
    artifact::write(files, &plan.spec.path, false)?;
    // The manifest points back at this machine's spec; a bundle has no use for it.
    let _ = std::fs::remove_dir_all(dir.join(".repro"));
    Ok(Collected { listing, cutlass })
}

/// The folder that holds the spec: the spec file's, or for an artifact folder given as TARGET,
/// that of the spec it was generated from (its manifest names it; the artifact's own spec.yaml
/// points at the inputs beside that spec), when that spec is still there.
fn spec_folder(plan: &Plan) -> PathBuf {
    if plan.artifact.is_none() {
        if let Some(folder) = artifact::Manifest::read(&plan.dir)
            .map(|m| plan.dir.join(m.spec))
            .filter(|spec| spec.is_file())
            .and_then(|spec| spec.parent()?.canonicalize().ok())
        {
            return folder;
        }
    }
    plan.spec.dir.clone()
}

/// Where a header outside every include dir goes below the bundle's `include/`, if it lies in the
/// folder that holds an include dir (in a sibling of it, or beside it) and within the folder
/// that holds the spec and that include dir: its path from that folder, the include dir's
/// number and the folder holding the spec and it (where the header must stay, symlinks
/// followed). Include dir n is copied as `include/<n>/`, so `include/<n>/../` is `include/` and
/// a relative include out of the include dir reaches the copy. The shortest such path wins; a
/// name that an include dir's copy already takes (`0/`, `1/`...) is refused by the caller.
fn beside_an_include_dir(
    header: &Path,
    spec_dir: &Path,
    include_dirs: &[PathBuf],
) -> Option<(PathBuf, usize, PathBuf)> {
    include_dirs
        .iter()
        .enumerate()
        .filter_map(|(n, inc)| {
            let project = common_folder(spec_dir, inc);
            // The file system's root holds everything: no project.
            if project.parent().is_none() || !header.starts_with(&project) {
                return None;
            }
            let rel = header.strip_prefix(inc.parent()?).ok()?;
            Some((rel.to_path_buf(), n, project))
        })
        .filter(|(rel, _, _)| rel.components().count() > 0)
        .min_by_key(|(rel, _, _)| rel.components().count())
}

/// Whether `rel` (below the bundle's `include/`) would land in an include dir's copy,
/// `include/<n>/`, which holds that dir's headers only.
fn takes_a_copys_name(rel: &Path, include_dirs: usize) -> bool {
    rel.components()
        .next()
        .and_then(|first| first.as_os_str().to_str()?.parse::<usize>().ok())
        .is_some_and(|n| n < include_dirs)
}

/// A header's name, as the warning and the README list what a bundle could not carry.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The headers and files of intermediates' own references (`tensors.X.reference.source` or
/// `.file`) into `reference/`, the spec pointed at the copies. Only the header itself: unlike
/// op: custom's, no compile has listed what it includes yet, so a header that includes others of
/// the user's must be self-contained to build in the bundle. A file is checked as op: file's
/// expected outputs are (inside the spec's tree, a regular file, a .npy).
fn copy_intermediate_references(
    sources: &Sources,
    listing: &mut Listing,
    bundled: &mut ResolvedSpec,
    dir: &Path,
) -> Result<(), BundleError> {
    for t in bundled.tensors.iter_mut() {
        let Some(reference) = &mut t.intermediate_reference else {
            continue;
        };
        let (path, field, claim) = match reference {
            IntermediateReference::Function { source, .. } => (source, "source", Claim::Header),
            IntermediateReference::File(file) => (file, "file", Claim::Npy),
        };
        sources.bring(
            listing,
            dir,
            "reference",
            path,
            &format!("tensor {}'s reference.{field}", t.name),
            format!(
                "the reference of intermediate {} (reference.{field})",
                t.name
            ),
            claim,
        )?;
    }
    Ok(())
}

/// The reference's own files into the bundle, the spec pointed at the copies: `op: custom`'s
/// header into `reference/` with the headers its compile read (nvcc's dependency list of
/// reference.cu), `op: file`'s expected outputs into `expected/`.
fn copy_reference(
    sources: &Sources,
    listing: &mut Listing,
    bundled: &mut ResolvedSpec,
    dir: &Path,
    names: &[String],
) -> Result<(), BundleError> {
    let tree = &sources.tree;
    match &mut bundled.reference {
        Reference::Custom(c) => {
            let reached_by = "reference.source (op: custom)";
            let header_source = tree.admit(&c.source, &tree.roots, reached_by, Claim::Header)?;
            let folder = c.source.parent().map(Path::to_path_buf).unwrap_or_default();
            let headers = sources.headers("reference.d", listing)?;
            // The header may reach others by relative includes out of its folder
            // (`../kernels/geometry.h`, shared with the kernel): the copies keep their places
            // below the deepest folder that holds them all, so that each include still resolves.
            // Only within the folder that holds the spec and the header: a root above it would
            // put this machine's folder names into the bundle's paths.
            let project = common_folder(&tree.spec_dir, &folder);
            let root = headers
                .iter()
                .filter(|path| path.starts_with(&project))
                .filter_map(|path| path.parent())
                .fold(folder, |root, parent| common_folder(&root, parent));
            let header = PathBuf::from("reference").join(
                c.source
                    .strip_prefix(&root)
                    .unwrap_or_else(|_| Path::new(c.source.file_name().unwrap_or_default())),
            );
            let header = header.display().to_string();
            if listing.add(
                header.clone(),
                &header_source,
                tree.origin(&c.source),
                "the spec's own reference (reference.source)".into(),
            ) {
                copy_checked(&header_source, &dir.join(&header))?;
            }
            let mut area = tree.roots.clone();
            area.push(root.clone());
            for path in &headers {
                match path.strip_prefix(&root) {
                    Ok(rel) => {
                        let bundled_path = format!("reference/{}", rel.display());
                        if bundled_path == header {
                            // reference.source itself, listed above.
                            continue;
                        }
                        let source = tree.admit(path, &area, reached_by, Claim::Header)?;
                        if listing.add(
                            bundled_path.clone(),
                            &source,
                            tree.origin(path),
                            "header of the spec's own reference (reference.source includes it)"
                                .into(),
                        ) {
                            copy_checked(&source, &dir.join(&bundled_path))?;
                        }
                    }
                    Err(_) => listing.left_out.push(LeftOut {
                        name: file_name(path),
                        origin: tree.origin(path),
                        why: "outside the folder that holds the spec and the reference".into(),
                    }),
                }
            }
            c.source = dir.join(header);
        }
        Reference::File(f) => {
            for (i, path) in f.expected.iter_mut() {
                let name = &names[*i];
                sources.bring(
                    listing,
                    dir,
                    "expected",
                    path,
                    &format!("reference.expected's {name}"),
                    format!("expected output {name} (reference.expected)"),
                    Claim::Npy,
                )?;
            }
        }
        Reference::Gemm(_) | Reference::Attention(_) => {}
    }
    Ok(())
}

/// The deepest folder holding both `a` and `b` (absolute paths).
fn common_folder(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// A captured launch's files into the bundle, the spec pointed at the copies: every `kind:
/// replay` launch's cubin and parameter bytes into `replay/`, production's outputs (`capture.before`/`after`)
/// into `production/`. Without them the receiver could neither launch the kernel nor see
/// whether it reproduced production.
fn copy_capture(
    sources: &Sources,
    listing: &mut Listing,
    bundled: &mut ResolvedSpec,
    dir: &Path,
    names: &[String],
) -> Result<(), BundleError> {
    // Every replayed launch's, each named by its path (`kernel`, or `launches[i]` of a sequence).
    let paths: Vec<String> = bundled
        .document
        .launch_entries()
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    for (launch, path) in bundled.launches.iter_mut().zip(&paths) {
        let LaunchKind::Replay(replay) = &mut launch.kind else {
            continue;
        };
        sources.bring(
            listing,
            dir,
            "replay",
            &mut replay.cubin,
            &format!("{path}.cubin"),
            format!("the replayed kernel's module ({path}.cubin)"),
            Claim::Cubin,
        )?;
        sources.bring(
            listing,
            dir,
            "replay",
            &mut replay.params,
            &format!("{path}.params"),
            format!("the launch's parameter bytes ({path}.params)"),
            Claim::Bytes,
        )?;
    }
    if let Some(capture) = &mut bundled.capture {
        for (field, files) in [
            ("capture.before", &mut capture.before),
            ("capture.after", &mut capture.after),
        ] {
            for (i, path) in files.iter_mut() {
                let name = &names[*i];
                sources.bring(
                    listing,
                    dir,
                    "production",
                    path,
                    &format!("{field}'s {name}"),
                    format!("production's output {name} ({field})"),
                    Claim::Npy,
                )?;
            }
        }
    }
    if let Some(capture) = &mut bundled.document.capture {
        capture.command = without_folders(&capture.command);
        // A Triton kernel's `matmul.py:30`, without the folder it sits in on this machine.
        capture.source = without_folders(&capture.source);
    }
    Ok(())
}

/// The captured command line with every absolute path cut to its file name: the receiver has
/// none of this machine's folders, and a bundle must not carry them; the program's and its
/// files' names are what tell the story.
fn without_folders(command: &str) -> String {
    command
        .split(' ')
        .map(|word| {
            let quote = word.starts_with('\'');
            let bare = word.trim_start_matches('\'');
            match (bare.starts_with('/'), bare.rsplit('/').next()) {
                (true, Some(name)) if quote => format!("'{name}"),
                (true, Some(name)) => name.to_string(),
                _ => word.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::without_folders;

    #[test]
    fn a_captured_command_keeps_names_and_loses_folders() {
        assert_eq!(
            without_folders("python3 /work/main/examples/capture_torch/matmul.py --n 3"),
            "python3 matmul.py --n 3"
        );
        assert_eq!(
            without_folders("'/tmp/app' --defect box"),
            "'app' --defect box"
        );
        assert_eq!(without_folders("./app -o out/x"), "./app -o out/x");
        assert_eq!(
            without_folders("/work/main/examples/capture_triton/matmul.py:30"),
            "matmul.py:30"
        );
    }
}
