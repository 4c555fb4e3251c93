//! What a bundle says besides its files: the results of running its harness here
//! (`results.txt`, `results.json`), `env.txt` (versions, never paths), and the README that starts
//! with the two commands reproducing them and ends with the listing of the files it carries.

use std::path::Path;
use std::process::Command;

use super::Bundle;
use super::BundleError;
use crate::build::{self, toolchain};
use crate::engine_error::EngineError;
use crate::plan::Plan;
use crate::spec::{Reference, ResolvedSpec};
use repro_contract::exit;

/// Builds the bundle's own harness and runs it with --ones and with the spec's inputs, from
/// inside the bundle, so the results name nothing outside it.
pub fn run_and_record(bundle: &Bundle, nvcc: Option<&Path>) -> Result<u8, BundleError> {
    let plan = Plan::for_artifact(&bundle.dir, &crate::machine::Machine)?;
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
            .map_err(|source| EngineError::Launch {
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
        .map_err(BundleError::io("write", bundle.dir.join("results.txt")))?;
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
pub fn write_env(bundle: &Bundle) -> Result<(), BundleError> {
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
        .map_err(BundleError::io("write", bundle.dir.join("env.txt")))
}

/// What the artifact's last `repro bisect` named (`.repro/bisect/result.json`): the commit that
/// introduced the failure and the files it changed, as README lines; none without an answer.
pub fn introduced_by(artifact: &Path) -> Vec<String> {
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

pub fn write_readme(
    bundle: &Bundle,
    spec: &ResolvedSpec,
    code: Option<u8>,
    introduced: &[String],
) -> Result<(), BundleError> {
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
    let left_out = &bundle.listing.left_out;
    if !left_out.is_empty() {
        let names: Vec<String> = left_out.iter().map(|l| l.name.clone()).collect();
        text.push_str(&format!(
            "\nNot included (outside the spec's include dirs or the reference's project folder; the receiver must provide): {}\n",
            names.join(", ")
        ));
    }
    text.push_str(&bundle.listing.to_readme());
    std::fs::write(bundle.dir.join("README.md"), text)
        .map_err(BundleError::io("write", bundle.dir.join("README.md")))
}

fn dir_has(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}
