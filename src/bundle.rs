//! `repro bundle`: a folder and a `.tar.gz` to attach to a bug report (docs/cli.md).
//!
//! The bundle is an artifact made for another machine: the kernel's own headers (the ones nvcc
//! actually read, from its dependency list) and the input files are copied in and the build
//! points at those copies; toolkit and CUTLASS headers are what the receiver provides. It holds
//! `env.txt`, the results of the runs made here, and a README that starts with the two commands
//! that reproduce them. No absolute path, user name or home folder of this machine goes in.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::build::{self, toolchain};
use crate::error::{exit, Error};
use crate::generate::{self, artifact};
use crate::plan::{prepare, Plan};
use crate::spec::{InitSource, LaunchKind, Reference, ResolvedSpec};

/// Folders whose headers come with the CUDA toolkit, the host compiler or CUTLASS: the receiver
/// has their own, and copying them would ship the sender's toolchain. Actual folders (the nvcc
/// that built the harness, the CUTLASS it used), not name patterns: a project folder that happens
/// to be called `cuda/` is the kernel's and must be copied.
fn toolchain_roots(spec: &ResolvedSpec, nvcc: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["/usr/include", "/usr/lib", "/usr/local/cuda"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(root) = nvcc.parent().and_then(Path::parent) {
        roots.push(generate::paths::absolute(root));
    }
    roots.extend(spec.cutlass.iter().cloned());
    // CUTLASS given through the spec's own include_dirs is the receiver's to provide too.
    roots.extend(
        spec.include_dirs
            .iter()
            .filter(|d| d.join("cutlass/cutlass.h").is_file())
            .cloned(),
    );
    roots
}

/// `repro bundle`: the bundle of `target` in `output` [default: bundles/<name>] and beside it
/// `output.tar.gz`, with the results of a run here unless `no_run`.
pub fn bundle(
    target: &Path,
    output: Option<&Path>,
    no_run: bool,
    nvcc_override: Option<&Path>,
) -> Result<u8, Error> {
    let plan = prepare(target, None)?;
    // nvcc's dependency list says which headers the kernel really needs.
    build::build(&plan, nvcc_override)?;
    let nvcc = toolchain::find_nvcc(nvcc_override)?;
    let name = plan.spec.name().to_string();
    let out = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("bundles").join(&name));
    if out.exists() {
        return Err(Error::WouldOverwrite {
            path: out,
            command: "bundle",
            fix: "remove it or pass -o elsewhere",
        });
    }
    let bundle = make_bundle(&plan, &out, &toolchain_roots(&plan.spec, &nvcc.path))?;
    if !bundle.missing.is_empty() {
        // The README says so too, but the sender is the one who can still add them.
        eprintln!(
            "warning: the build read headers the bundle cannot carry (outside the spec's include dirs, or the reference's project folder): {}; the receiver must provide them (or add their folders to source.include_dirs)",
            bundle.missing.join(", ")
        );
    }
    let code = if no_run {
        None
    } else {
        Some(run_and_record(&bundle, nvcc_override)?)
    };
    write_env(&bundle)?;
    write_readme(&bundle, &plan.spec, code, &introduced_by(&plan.dir))?;
    let stale = leaks(&bundle.dir)?;
    if !stale.is_empty() {
        return Err(Error::Internal(format!(
            "the bundle in {} would leak this machine's paths: {}",
            bundle.dir.display(),
            stale.join(", ")
        )));
    }
    let tarball = out.with_extension("tar.gz");
    pack(&bundle.dir, &name, &tarball)?;
    println!(
        "bundle: {}/ and {}",
        bundle.dir.display(),
        tarball.display()
    );
    if let Some(code) = code {
        println!("results: exit {code} (results.txt, results.json)");
    }
    Ok(exit::PASSED)
}

struct Bundle {
    dir: PathBuf,
    /// The kernel headers that could not be copied (outside every include dir).
    missing: Vec<String>,
    cutlass: bool,
}

/// The bundle's spec: include dirs and input files moved into the bundle.
fn make_bundle(plan: &Plan, out: &Path, toolchain: &[PathBuf]) -> Result<Bundle, Error> {
    let spec = &plan.spec;
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let dir = out.canonicalize().map_err(Error::io("resolve", out))?;
    let depfile = plan.dir.join(".repro/build/harness.d");
    let deps = std::fs::read_to_string(&depfile).map_err(Error::io("read", &depfile))?;
    let mut bundled = spec.clone();
    bundled.path = dir.join("spec.yaml");
    bundled.dir = dir.clone();
    let mut missing = Vec::new();
    // Each include dir becomes include/<n>/ holding the headers nvcc read under it.
    let mut include_dirs = Vec::new();
    for n in 0..spec.include_dirs.len() {
        let target = dir.join("include").join(n.to_string());
        std::fs::create_dir_all(&target).map_err(Error::io("create", &target))?;
        include_dirs.push(target);
    }
    // The runtime's headers come with every artifact (runtime/), the bundle's own included.
    let runtime = generate::paths::absolute(&plan.dir.join(crate::plan::command::RUNTIME_DIR));
    for dep in build::parse_depfile(&deps).into_iter().skip(1) {
        let path = generate::paths::absolute(&plan.dir.join(&dep));
        if toolchain.iter().any(|root| path.starts_with(root)) || path.starts_with(&runtime) {
            continue;
        }
        match spec
            .include_dirs
            .iter()
            .position(|inc| path.starts_with(inc))
        {
            Some(n) => {
                let rel = path.strip_prefix(&spec.include_dirs[n]).expect("checked");
                copy_into(&path, &include_dirs[n].join(rel))?;
            }
            // A header beside an include dir (`../common/util.cuh` from one of its headers) goes
            // beside that dir's copy, where the same relative include finds it.
            None => match beside_an_include_dir(&path, &spec.include_dirs) {
                Some(rel) if !takes_a_copys_name(&rel, spec.include_dirs.len()) => {
                    copy_into(&path, &dir.join("include").join(rel))?;
                }
                _ => missing.push(file_name(&path)),
            },
        }
    }
    bundled.include_dirs = include_dirs;
    for t in bundled.tensors.iter_mut() {
        if let InitSource::File(path) = &mut t.init.source {
            bring(&dir, "inputs", path)?;
        }
    }
    missing.extend(copy_reference(
        plan,
        &mut bundled,
        &dir,
        toolchain,
        &runtime,
    )?);
    copy_capture(&mut bundled, &dir)?;
    // CUTLASS is the receiver's: build.sh reads $CUTLASS_DIR, or a cutlass/ folder in the bundle.
    let cutlass = bundled.cutlass.is_some();
    if cutlass {
        bundled.cutlass = Some(dir.join("cutlass"));
    }
    let plan = Plan::for_spec(bundled, dir.clone())?;
    let files = plan.artifact.as_ref().expect("a spec's plan has its files");
    artifact::write(files, &plan.spec.path, false)?;
    // The manifest points back at this machine's spec; a bundle has no use for it.
    let _ = std::fs::remove_dir_all(dir.join(".repro"));
    Ok(Bundle {
        dir,
        missing,
        cutlass,
    })
}

/// Where a header outside every include dir goes below the bundle's `include/`, if it lies in the
/// folder that holds an include dir (in a sibling of it, or beside it): its path from that folder.
/// Include dir n is copied as `include/<n>/`, so `include/<n>/../` is `include/` and a relative
/// include out of the include dir reaches the copy. The shortest such path wins; a name that an
/// include dir's copy already takes (`0/`, `1/`...) is refused by the caller.
fn beside_an_include_dir(header: &Path, include_dirs: &[PathBuf]) -> Option<PathBuf> {
    include_dirs
        .iter()
        .filter_map(|inc| header.strip_prefix(inc.parent()?).ok())
        .filter(|rel| rel.components().count() > 0)
        .min_by_key(|rel| rel.components().count())
        .map(Path::to_path_buf)
}

/// Whether `rel` (below the bundle's `include/`) would land in an include dir's copy,
/// `include/<n>/`, which holds that dir's headers only.
fn takes_a_copys_name(rel: &Path, include_dirs: usize) -> bool {
    rel.components()
        .next()
        .and_then(|first| first.as_os_str().to_str()?.parse::<usize>().ok())
        .is_some_and(|n| n < include_dirs)
}

/// `from` copied to `to`, its folders made first.
fn copy_into(from: &Path, to: &Path) -> Result<(), Error> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("create", parent))?;
    }
    std::fs::copy(from, to).map_err(Error::io("copy", from))?;
    Ok(())
}

/// A header's name, as the warning and the README list what a bundle could not carry.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A file the spec names, copied into `dir/folder/` under its own name, and `path` pointed at
/// the copy.
fn bring(dir: &Path, folder: &str, path: &mut PathBuf) -> Result<(), Error> {
    let target = dir.join(folder);
    std::fs::create_dir_all(&target).map_err(Error::io("create", &target))?;
    let to = target.join(path.file_name().unwrap_or_default());
    std::fs::copy(&*path, &to).map_err(Error::io("copy", &*path))?;
    *path = to;
    Ok(())
}

/// The reference's own files into the bundle, the spec pointed at the copies: `op: custom`'s
/// header into `reference/` with the headers its compile read (nvcc's dependency list of
/// reference.cu), `op: file`'s expected outputs into `expected/`. Returns the names of the
/// headers it could not carry.
fn copy_reference(
    plan: &Plan,
    bundled: &mut ResolvedSpec,
    dir: &Path,
    toolchain: &[PathBuf],
    runtime: &Path,
) -> Result<Vec<String>, Error> {
    let mut missing = Vec::new();
    match &mut bundled.reference {
        Reference::Custom(c) => {
            let folder = c.source.parent().map(Path::to_path_buf).unwrap_or_default();
            let target = dir.join("reference");
            let depfile = plan.dir.join(".repro/build/reference.d");
            let deps = std::fs::read_to_string(&depfile).map_err(Error::io("read", &depfile))?;
            let headers: Vec<PathBuf> = build::parse_depfile(&deps)
                .into_iter()
                .skip(1)
                .map(|dep| generate::paths::absolute(&plan.dir.join(&dep)))
                .filter(|path| {
                    !toolchain.iter().any(|root| path.starts_with(root))
                        && !path.starts_with(runtime)
                })
                .collect();
            // The header may reach others by relative includes out of its folder
            // (`../kernels/geometry.h`, shared with the kernel): the copies keep their places
            // below the deepest folder that holds them all, so that each include still resolves.
            // Only within the folder that holds the spec and the header: a root above it would
            // put this machine's folder names into the bundle's paths.
            let project = common_folder(&plan.spec.dir, &folder);
            let root = headers
                .iter()
                .filter(|path| path.starts_with(&project))
                .filter_map(|path| path.parent())
                .fold(folder, |root, parent| common_folder(&root, parent));
            for path in &headers {
                match path.strip_prefix(&root) {
                    Ok(rel) => copy_into(path, &target.join(rel))?,
                    Err(_) => missing.push(file_name(path)),
                }
            }
            let header = target.join(
                c.source
                    .strip_prefix(&root)
                    .unwrap_or_else(|_| Path::new(c.source.file_name().unwrap_or_default())),
            );
            copy_into(&c.source, &header)?;
            c.source = header;
        }
        Reference::File(f) => {
            for (_, path) in f.expected.iter_mut() {
                bring(dir, "expected", path)?;
            }
        }
        Reference::Gemm(_) | Reference::Attention(_) => {}
    }
    Ok(missing)
}

/// The deepest folder holding both `a` and `b` (absolute paths).
fn common_folder(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// A captured launch's files into the bundle, the spec pointed at the copies: `kind: replay`'s
/// cubin and parameter bytes into `replay/`, production's outputs (`capture.before`/`after`)
/// into `production/`. Without them the receiver could neither launch the kernel nor see
/// whether it reproduced production.
fn copy_capture(bundled: &mut ResolvedSpec, dir: &Path) -> Result<(), Error> {
    if let LaunchKind::Replay(replay) = &mut bundled.kernel.kind {
        bring(dir, "replay", &mut replay.cubin)?;
        bring(dir, "replay", &mut replay.params)?;
    }
    if let Some(capture) = &mut bundled.capture {
        for (_, path) in capture.before.iter_mut().chain(capture.after.iter_mut()) {
            bring(dir, "production", path)?;
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

/// Builds the bundle's own harness and runs it with --ones and with the spec's inputs, from
/// inside the bundle, so the results name nothing outside it.
fn run_and_record(bundle: &Bundle, nvcc: Option<&Path>) -> Result<u8, Error> {
    let plan = Plan::for_artifact(&bundle.dir)?;
    build::build(&plan, nvcc)?;
    let mut text = String::new();
    let mut last = 0u8;
    use crate::run::harness_options as opt;
    // Expected outputs belong to the spec's inputs: an `op: file` bundle runs those alone.
    let file_reference = matches!(plan.spec.reference, Reference::File(_));
    for (mode, shown, json) in [
        ("ones", vec![opt::ONES.flag()], "results-ones.json"),
        ("random", vec![], "results.json"),
    ] {
        if file_reference && mode == "ones" {
            continue;
        }
        let mut args = shown.clone();
        args.extend(opt::JSON.with(json));
        let output = Command::new("./harness")
            .args(&args)
            .current_dir(&bundle.dir)
            .output()
            .map_err(|source| Error::Launch {
                path: bundle.dir.join("harness"),
                source,
            })?;
        let code = output.status.code().map_or(exit::CUDA_ERROR, |c| c as u8);
        text.push_str(&format!("$ ./harness {}\n", shown.join(" ")));
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        text.push_str(&format!("-> exit {code} ({mode})\n\n"));
        last = code;
    }
    std::fs::write(bundle.dir.join("results.txt"), text)
        .map_err(Error::io("write", bundle.dir.join("results.txt")))?;
    // Sources only: the receiver builds with their own toolkit.
    for leftover in ["harness", ".repro"] {
        let path = bundle.dir.join(leftover);
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
    Ok(last)
}

fn first_line(program: &str, args: &[&str], pick: impl Fn(&str) -> bool) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find(|l| pick(l))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "not available".into())
}

/// env.txt: versions only, never paths.
fn write_env(bundle: &Bundle) -> Result<(), Error> {
    let nvcc = toolchain::find_nvcc(None)
        .ok()
        .and_then(|f| toolchain::nvcc_version(&f.path))
        .unwrap_or_else(|| "not found".into());
    let gpu = first_line(
        "nvidia-smi",
        &[
            "--query-gpu=name,compute_cap,driver_version",
            "--format=csv,noheader",
        ],
        |_| true,
    );
    let cxx = toolchain::host_compiler()
        .map(|c| first_line(&c.to_string_lossy(), &["--version"], |_| true))
        .unwrap_or_else(|| "not found".into());
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.into());
    let kernel = first_line("uname", &["-sr"], |_| true);
    let mut text = format!(
        "repro     {}\nnvcc      {nvcc}\nGPU       {gpu} (name, compute capability, driver)\nhost C++  {cxx}\nOS        {os}, {kernel}\n",
        env!("CARGO_PKG_VERSION")
    );
    if bundle.cutlass {
        let version = toolchain::find_cutlass()
            .and_then(|c| toolchain::cutlass_version(&c.path))
            .unwrap_or_else(|| "unknown".into());
        text.push_str(&format!("CUTLASS   {version}\n"));
    }
    std::fs::write(bundle.dir.join("env.txt"), text)
        .map_err(Error::io("write", bundle.dir.join("env.txt")))
}

/// What the artifact's last `repro bisect` named (`.repro/bisect/result.json`): the commit that
/// introduced the failure and the files it changed, as README lines; none without an answer.
fn introduced_by(artifact: &Path) -> Vec<String> {
    let Some(answer) = std::fs::read_to_string(crate::bisect::result_path(artifact))
        .ok()
        .and_then(|t| serde_json::from_str::<crate::bisect::report::Answer>(&t).ok())
    else {
        return Vec::new();
    };
    let Some(line) = answer.introduced_by() else {
        return Vec::new();
    };
    let mut lines = vec![format!("**Introduced by** {line}.")];
    if let Some(at) = &answer.at_first_bad {
        lines.push(format!("At that commit: `{}: {}`.", at.class, at.evidence));
    }
    if !answer.diff_stat.is_empty() {
        lines.push(format!("\n```\n{}\n```", answer.diff_stat));
    }
    lines
}

fn write_readme(
    bundle: &Bundle,
    spec: &ResolvedSpec,
    code: Option<u8>,
    introduced: &[String],
) -> Result<(), Error> {
    let file_reference = matches!(spec.reference, Reference::File(_));
    let mut text = String::from(if file_reference {
        "./build.sh\n./harness\n\n"
    } else {
        "./build.sh\n./harness --ones && ./harness\n\n"
    });
    text.push_str(&format!("# repro bundle: `{}`\n\n", spec.name()));
    if !spec.about.is_empty() {
        text.push_str(&format!("{}\n\n", spec.about));
    }
    if !introduced.is_empty() {
        text.push_str(&format!("{}\n\n", introduced.join("\n")));
    }
    text.push_str(
        "The two commands above rebuild the harness with the production flags (`NVCC=` and `ARCH=` \
         override) and rerun what produced `results.txt`: ",
    );
    text.push_str(match spec.reference {
        Reference::Gemm(_) => {
            "all-ones inputs first, then the spec's seeded inputs against an fp64 host reference"
        }
        Reference::Custom(_) => {
            "all-ones inputs first, then the spec's inputs, each against the spec's own host \
             reference (`reference/`, built with the runtime's flags)"
        }
        Reference::File(_) => "the spec's inputs against the expected outputs in `expected/`",
        Reference::Attention(_) => {
            "all-ones inputs first, then the spec's seeded inputs against the runtime's fp64 \
             attention on the host"
        }
    });
    text.push_str(". Nothing else is needed but the CUDA toolkit");
    if bundle.cutlass {
        text.push_str(
            " and the CUTLASS headers (set `CUTLASS_DIR`, or put a CUTLASS checkout in `cutlass/`)",
        );
    }
    text.push_str(".\n\n| file | what |\n|---|---|\n");
    text.push_str(
        "| `harness.cu` | the reproducer: the kernel included verbatim, its tensors and its launch |\n",
    );
    text.push_str(
        "| `runtime/` | the harness runtime (inputs, fp64 reference, comparison, report), built as a library with its own flags |\n",
    );
    text.push_str("| `build.sh`, `CMakeLists.txt` | the exact build: the runtime library, then the kernel with the production flags |\n");
    text.push_str("| `spec.yaml` | the spec the harness was generated from |\n");
    text.push_str(
        "| `include/` | the kernel's own headers (those nvcc read), as the build expects them |\n",
    );
    if dir_has(&bundle.dir.join("inputs")) {
        text.push_str("| `inputs/` | the input files the spec reads |\n");
    }
    if dir_has(&bundle.dir.join("reference")) {
        text.push_str("| `reference/`, `reference.cu` | the spec's own reference (`op: custom`) and the call of it |\n");
    }
    if dir_has(&bundle.dir.join("expected")) {
        text.push_str(
            "| `expected/` | the expected outputs the harness compares with (`op: file`) |\n",
        );
    }
    text.push_str("| `env.txt` | the sender's toolkit, GPU, driver, host compiler, OS |\n");
    if let Some(code) = code {
        text.push_str(&format!(
            "| `results.txt`, `results.json` | what the runs printed on the sender's machine (last exit code {code}) |\n"
        ));
    }
    if !bundle.missing.is_empty() {
        text.push_str(&format!(
            "\nNot included (outside the spec's include dirs or the reference's project folder; the receiver must provide): {}\n",
            bundle.missing.join(", ")
        ));
    }
    std::fs::write(bundle.dir.join("README.md"), text)
        .map_err(Error::io("write", bundle.dir.join("README.md")))
}

fn dir_has(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

/// Paths of this machine that must not be in a bundle, found in any of its files.
fn leaks(dir: &Path) -> Result<Vec<String>, Error> {
    let mut needles: Vec<String> = Vec::new();
    if let Some(home) = std::env::var_os("HOME")
        .map(|h| h.to_string_lossy().into_owned())
        .filter(|h| h.len() > 1)
    {
        needles.push(home);
    }
    if let Ok(cwd) = std::env::current_dir() {
        needles.push(cwd.to_string_lossy().into_owned());
    }
    needles.push(dir.to_string_lossy().into_owned());
    // "/" would match everything.
    needles.retain(|n| n.trim_end_matches('/').len() > 1);
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
    {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for needle in &needles {
            if text.contains(needle.as_str()) {
                found.push(format!(
                    "{} in {}",
                    needle,
                    entry
                        .path()
                        .strip_prefix(dir)
                        .unwrap_or(entry.path())
                        .display()
                ));
            }
        }
    }
    Ok(found)
}

fn pack(dir: &Path, name: &str, tarball: &Path) -> Result<(), Error> {
    let file = std::fs::File::create(tarball).map_err(Error::io("create", tarball))?;
    let encoder = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut archive = tar::Builder::new(encoder);
    archive
        .append_dir_all(name, dir)
        .map_err(Error::io("pack", tarball))?;
    archive
        .into_inner()
        .and_then(|encoder| encoder.finish())
        .map_err(Error::io("pack", tarball))?;
    Ok(())
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
