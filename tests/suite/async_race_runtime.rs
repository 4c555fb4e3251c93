//! The async-race checker's device runtime
//! (crates/repro-contract/runtime/include/repro/async_race.cuh), where its decisions are plain
//! functions a host program can call: compiled with the real nvcc into a small program that runs on
//! the CPU (no GPU) and prints what they decide.
//!
//! The wgmma operand ranges: DeepGEMM's sm90_fp8_gemm_1d1d puts its stages at 256 mod 1024 (two
//! 128-byte tensor maps before the f32 D tile), and a range rounded to the 1024-byte swizzle
//! atom reached 256 bytes before each stage: over the end of D (a false
//! `write_while_async_reads` against the epilogue's st.shared) and over the end of the previous
//! stage (a false `async_accesses_overlap` against the next TMA load), docs/async-race.md,
//! "Third-party kernels".

use std::path::Path;
use std::process::Command;

use crate::common;

/// Compiles `source` (a host program including the runtime) and returns what it prints.
fn run_host_program(source: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("probe.cu");
    std::fs::write(&cu, source).unwrap();
    let exe = dir.path().join("probe");
    let include = common::repo().join("crates/repro-contract/runtime/include");
    let output = Command::new(common::nvcc())
        .args(["-std=c++17", "-arch=sm_90a", "-I"])
        .arg(&include)
        .arg("-o")
        .arg(&exe)
        .arg(&cu)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nvcc failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let run = Command::new(Path::new(&exe)).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    String::from_utf8(run.stdout).unwrap()
}

const DESCRIPTOR_PROBE: &str = r#"
#include "repro/async_race.cuh"
#include <cstdio>

// A K-major wgmma descriptor as CUTLASS's GmmaDescriptor and DeepGEMM's make_smem_desc build it:
// start >> 4 in bits 0-13, SBO >> 4 in bits 32-45, the swizzle in bits 62-63 (1 = 128B, 2 = 64B).
static uint64_t descriptor(uint32_t address, uint32_t sbo, uint64_t layout)
{
    return uint64_t((address >> 4) & 0x3FFF) | (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (layout << 62);
}

static void show(const char* name, uint64_t desc, uint32_t rows)
{
    uint32_t lo = 0, hi = 0;
    const bool followed = descriptor_range(desc, rows, &lo, &hi);
    std::printf("%s %d %u %u\n", name, followed ? 1 : 0, lo, hi);
}

int main()
{
    // DeepGEMM's 1d1d kernel, BLOCK_M 128, BLOCK_N 136, BLOCK_K 128, 4 stages: its dynamic shared
    // memory at window byte 1024 (after the 1 KiB the system reserves), two tensor maps (256
    // bytes), D (128 x 136 floats), then the A stages (16384 bytes) and the B stages (17408).
    const uint32_t base = 1024, d_end = base + 256 + 69632;
    const uint32_t a0 = d_end, b1 = a0 + 4 * 16384 + 17408;
    for (uint32_t k = 0; k < 4; ++k) {
        char name[32];
        std::snprintf(name, sizeof name, "a0_wg0_k%u", k);
        show(name, descriptor(a0 + 32 * k, 1024, 1), 64);
        std::snprintf(name, sizeof name, "a0_wg1_k%u", k);
        show(name, descriptor(a0 + 8192 + 32 * k, 1024, 1), 64);
        std::snprintf(name, sizeof name, "b1_n136_k%u", k);
        show(name, descriptor(b1 + 32 * k, 1024, 1), 136);
    }
    // CUTLASS's layouts: stages 1024-aligned; a 64B swizzle (atoms of 8 x 64 bytes, SBO 512).
    show("aligned_128b", descriptor(4096 + 64, 1024, 1), 64);
    show("aligned_64b", descriptor(8192 + 32, 512, 2), 64);
    show("no_swizzle", descriptor(8192, 512, 0), 64);
    std::printf("layout %u %u %u\n", d_end, a0, b1);
    return 0;
}
"#;

#[test]
fn wgmma_operands_start_at_their_stage_not_at_the_swizzle_atom_before_it() {
    let out = run_host_program(DESCRIPTOR_PROBE);
    let value = |name: &str| -> Vec<u32> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let (d_end, a0, b1) = (70912u32, 70912u32, 153856u32);
    assert_eq!(value("layout"), [d_end, a0, b1]);
    for k in 0..4 {
        // Each K step reads the same 64 rows of the stage: the stage's bytes, none of D's.
        assert_eq!(value(&format!("a0_wg0_k{k}")), [1, a0, a0 + 8192], "{out}");
        assert_eq!(
            value(&format!("a0_wg1_k{k}")),
            [1, a0 + 8192, a0 + 16384],
            "{out}"
        );
        // N = 136: 17 atoms of 8 rows, the stage's 17408 bytes, none of the next stage's.
        assert_eq!(
            value(&format!("b1_n136_k{k}")),
            [1, b1, b1 + 17408],
            "{out}"
        );
    }
    assert_eq!(value("aligned_128b"), [1, 4096, 4096 + 8192]);
    assert_eq!(value("aligned_64b"), [1, 8192, 8192 + 7 * 512 + 512]);
    assert_eq!(value("no_swizzle")[0], 0, "not followed: {out}");
}
