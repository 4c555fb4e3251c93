//! `repro doctor`: which nvcc, CUDA headers, CUTLASS headers, host compiler, GPU and driver repro
//! finds, and where, so "it does not build here" starts from facts.

use std::process::Command;

use std::path::Path;

use crate::build::toolchain;
use crate::error::{exit, Error};

/// Prints what repro finds, `nvcc` the user's `--nvcc`; exit 3 when nvcc or CUDA's headers are
/// missing (nothing can be built here).
pub fn doctor(nvcc: Option<&Path>) -> Result<u8, Error> {
    let mut ok = true;
    match toolchain::find_nvcc(nvcc) {
        Ok(nvcc) => {
            println!("nvcc      {} (found via {})", nvcc.path.display(), nvcc.how);
            println!(
                "          {}",
                toolchain::nvcc_version(&nvcc.path)
                    .unwrap_or_else(|| "version unknown: `nvcc --version` failed".into())
            );
            match crate::run::sanitize::find(&nvcc.path) {
                Some(s) => println!("sanitizer {} (repro run --sanitize)", s.display()),
                None => println!(
                    "warning:  compute-sanitizer not found (WSL2 and some container images lack it): `repro run \
                     --sanitize` cannot run here. Every other check still runs: outputs poisoned before each \
                     launch (unwritten outputs are found), exact --ones and probe comparisons, bitwise repeats \
                     (races that change results), the watchdog (hangs) and CUDA errors (an illegal address \
                     faults the launch, exit 4); out-of-bounds reads that do not fault and races that leave \
                     results unchanged need the sanitizer, on another machine"
                ),
            }
            let include = nvcc
                .path
                .parent()
                .and_then(|b| b.parent())
                .map(|r| r.join("include"));
            match include.filter(|i| i.join("cuda_runtime.h").is_file()) {
                Some(i) => println!("CUDA      headers in {}", i.display()),
                None => {
                    ok = false;
                    println!("CUDA      headers: cuda_runtime.h not found next to nvcc")
                }
            }
        }
        Err(e) => {
            ok = false;
            println!(
                "nvcc      not found\n          {}",
                e.to_string().replace('\n', "\n          ")
            );
        }
    }
    match toolchain::find_cutlass() {
            Some(c) => println!(
                "CUTLASS   {} in {} (found via {})",
                toolchain::cutlass_version(&c.path).unwrap_or_else(|| "version unknown".into()),
                c.path.display(),
                c.how
            ),
            None => println!("CUTLASS   not found ($CUTLASS_DIR unset and no project toolchain; only needed for CUTLASS kernels)"),
        }
    match toolchain::host_compiler() {
        Some(cxx) => println!(
            "host C++  {} (nvcc's host compiler unless -ccbin says otherwise)",
            cxx.display()
        ),
        None => println!("host C++  not found"),
    }
    let smi = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,compute_cap,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .output();
    match smi {
            Ok(out) if out.status.success() => {
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    println!("GPU       {line}");
                }
            }
            _ => println!("GPU       none visible (nvidia-smi absent or failed): harnesses build here and run elsewhere (exit 7)"),
        }
    let entries = crate::build::runtime::entries();
    println!(
        "runtime   cache in {} ({} built runtime librar{}; REPRO_CACHE_DIR moves it)",
        crate::build::runtime::cache_root()
            .join("runtime")
            .display(),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    );
    for (dir, entry, size) in &entries {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        match entry {
            Some(e) => println!(
                "          {name}  {:.1} MB  {}, {}, built in {:.0} s",
                *size as f64 / 1e6,
                e.arch,
                e.nvcc_version,
                e.build_seconds
            ),
            None => println!("          {name}  damaged: rebuilt on next use"),
        }
    }
    Ok(if ok { exit::PASSED } else { exit::BUILD })
}
