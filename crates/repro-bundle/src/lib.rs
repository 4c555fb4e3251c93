//! `repro bundle`: a folder and a `.tar.gz` to attach to a bug report (docs/cli.md).
//!
//! The bundle is an artifact made for another machine, sent to strangers: the kernel's own
//! headers (the ones nvcc actually read, from its dependency list) and the input files are copied
//! in and the build points at those copies; toolkit and CUTLASS headers are what the receiver
//! provides. Only files inside the spec's tree come in, each checked for what it claims to be and
//! listed with its origin (collect.rs, tree.rs, listing.rs). It holds `env.txt`, the results of
//! the runs made here, and a README that starts with the two commands that reproduce them. No
//! absolute path, user name or home folder of this machine goes in (pack.rs). The folder is
//! written under a temporary name beside its target and renamed at the end, so a failure leaves
//! nothing behind; nothing that exists is written over.
//!
//! A crate of its own (README.md, "Layout"), above the engine, `repro-flags` (the machine that
//! answers the spec's lookups) and `repro-bisect` (the answer a bundle's README quotes); it fails
//! with [`BundleError`].

mod collect;
mod error;
mod listing;
mod pack;
mod report;
mod toolkit;
mod tree;

// The layers below, under the names this code has always used (crate::spec, crate::machine, ...).
use repro_bisect as bisect;
use repro_contract::{file_kind, inputs, spec};
use repro_engine::{build, engine_error, generate, plan, run};
use repro_flags::machine;

pub use error::BundleError;

use std::path::{Path, PathBuf};

use crate::build::toolchain;
use crate::plan::prepare;
use listing::Listing;
use repro_contract::exit;

/// A bundle being written: its folder (the temporary one until the end) and what it carries.
pub struct Bundle {
    dir: PathBuf,
    listing: Listing,
    cutlass: bool,
}

/// `repro bundle`: the bundle of `target` in `output` [default: bundles/<name>] and beside it
/// `output.tar.gz`, with the results of a run here unless `no_run`.
pub fn bundle(
    target: &Path,
    output: Option<&Path>,
    no_run: bool,
    nvcc_override: Option<&Path>,
) -> Result<u8, BundleError> {
    let plan = prepare(target, None, &crate::machine::Machine)?;
    let name = plan.spec.name().to_string();
    let (out, tarball) = destination(output, &name)?;
    // nvcc's dependency list says which headers the kernel really needs.
    build::build(&plan, nvcc_override)?;
    let nvcc = toolchain::find_nvcc(nvcc_override)?;
    let parent = match out.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => parent.to_path_buf(),
        None => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(BundleError::io("create", &parent))?;
    let folder = out.file_name().expect("destination names a folder");
    let partial = Partial::new(&parent, &folder.to_string_lossy())?;
    let collected = collect::make_bundle(&plan, &partial.dir, &nvcc.path)?;
    let bundle = Bundle {
        dir: partial.dir.clone(),
        listing: collected.listing,
        cutlass: collected.cutlass,
    };
    let left_out = bundle.listing.left_out_names();
    if !left_out.is_empty() {
        // The README says so too, but the sender is the one who can still add them.
        eprintln!(
            "warning: the build read headers the bundle cannot carry (outside the spec's include dirs, or the reference's project folder): {}; the receiver must provide them (or add their folders to source.include_dirs)",
            left_out.join(", ")
        );
    }
    let code = if no_run {
        None
    } else {
        Some(report::run_and_record(&bundle, nvcc_override)?)
    };
    report::write_env(&bundle)?;
    report::write_readme(&bundle, &plan.spec, code, &report::introduced_by(&plan.dir))?;
    pack::check_leaks(&bundle.dir, &plan.spec.path)?;
    // What strangers will get, before it is packed.
    print!("{}", bundle.listing.to_terminal());
    pack::pack(&bundle.dir, &name, &tarball)?;
    if let Err(e) = partial.finish(&out) {
        // The tarball is this run's own (pack made it as a new file).
        let _ = std::fs::remove_file(&tarball);
        return Err(e);
    }
    println!("bundle: {}/ and {}", out.display(), tarball.display());
    if let Some(code) = code {
        println!("results: exit {code} (results.txt, results.json)");
    }
    Ok(exit::PASSED)
}

/// The bundle's folder and its tarball, `<out>.tar.gz` exactly (`-o notes.v2` gives
/// `notes.v2.tar.gz`); refused when either exists, before anything is built or written.
fn destination(output: Option<&Path>, name: &str) -> Result<(PathBuf, PathBuf), BundleError> {
    let out = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("bundles").join(name));
    let Some(folder) = out.file_name().filter(|_| {
        !matches!(
            out.components().next_back(),
            Some(std::path::Component::ParentDir | std::path::Component::CurDir)
        )
    }) else {
        return Err(BundleError::BadOutput { path: out });
    };
    let mut tarball_name = folder.to_os_string();
    tarball_name.push(".tar.gz");
    // `-o report/` is the folder `report`: its tarball is `report.tar.gz` beside it.
    let (out, tarball) = match out.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => (parent.join(folder), parent.join(tarball_name)),
        None => (PathBuf::from(folder), PathBuf::from(tarball_name)),
    };
    for (path, fix) in [
        (&out, "remove it or pass -o elsewhere"),
        (
            &tarball,
            "the tarball beside the bundle's folder: remove it or pass -o elsewhere",
        ),
    ] {
        if path.symlink_metadata().is_ok() {
            return Err(BundleError::WouldOverwrite {
                path: path.clone(),
                command: "bundle",
                fix,
            });
        }
    }
    Ok((out, tarball))
}

/// The bundle's folder while it is written: a new folder beside the target, renamed to it at the
/// end and removed on any error (a retry does not stop on a half-written bundle).
struct Partial {
    dir: PathBuf,
    done: bool,
}

impl Partial {
    fn new(parent: &Path, name: &str) -> Result<Partial, BundleError> {
        let parent = parent
            .canonicalize()
            .map_err(BundleError::io("resolve", parent))?;
        let mut n = 0u32;
        loop {
            let dir = parent.join(format!(".{name}.partial-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Partial { dir, done: false }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                Err(e) => return Err(BundleError::io("create", &dir)(e)),
            }
        }
    }

    /// Renamed to `out`, unless something took that name meanwhile.
    fn finish(mut self, out: &Path) -> Result<(), BundleError> {
        if out.symlink_metadata().is_ok() {
            return Err(BundleError::WouldOverwrite {
                path: out.to_path_buf(),
                command: "bundle",
                fix:
                    "something made it while the bundle was written; remove it or pass -o elsewhere",
            });
        }
        std::fs::rename(&self.dir, out).map_err(BundleError::io("rename into place", out))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
