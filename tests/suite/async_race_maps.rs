//! The async-race checker and tensor maps rewritten in global memory (docs/async-race.md,
//! "Tensor maps rewritten in global memory"): a kernel that edits a map in shared memory with
//! `tensormap.replace`, publishes it to global memory (generic stores, `st.global`, a
//! `cp.async.bulk` copy, `tensormap.cp_fenceproxy`), fences it to the tensormap proxy and loads
//! through it, compiled to PTX with the real nvcc; the rewrite must hook every one of those forms
//! and the real ptxas must still assemble the result.

use std::process::Command;

use crate::common;

use repro::async_race::ptx::instrument;

/// A grouped kernel's producer, as the forms the issue names (DeepGEMM's k-grouped GEMM and the
/// kernels of examples/): one thread rewrites the CTA's map per group and loads through it.
const KERNEL: &str = r#"
#include "repro/async_race.cuh"

struct alignas(64) Map { unsigned long long words[16]; };

__global__ void grouped(const __grid_constant__ Map base, Map* maps, float* data, int groups)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    Map* smem_map = reinterpret_cast<Map*>(smem);
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 256);
    unsigned char* tile = smem + 1024;
    Map* map = maps + blockIdx.x;
    const unsigned smem_map_addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_map));
    const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    const unsigned tile_addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    if (threadIdx.x == 0) {
        *smem_map = base;
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int g = 0; g < groups; ++g) {
            asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                         :: "r"(smem_map_addr), "l"(reinterpret_cast<unsigned long long>(data + 1024 * g)) : "memory");
            asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;"
                         :: "r"(smem_map_addr), "r"(g + 1) : "memory");
            if (g % 3 == 0) {
                *map = *smem_map;  // generic stores of the 128 bytes
            } else if (g % 3 == 1) {
                const uint4 half = *reinterpret_cast<const uint4*>(smem_map);
                asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                             :: "l"(map), "r"(half.x), "r"(half.y), "r"(half.z), "r"(half.w) : "memory");
            } else {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 128;"
                             :: "l"(map), "r"(smem_map_addr) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
            }
            asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;"
                         :: "l"(map), "l"(reinterpret_cast<unsigned long long>(data)) : "memory");
            asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(map) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                         " [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(tile_addr), "l"(map), "r"(0), "r"(g), "r"(bar_addr) : "memory");
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" :: "r"(bar_addr) : "memory");
            // The drain before the next group's rewrite (DeepGEMM's PR #343).
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
    }
    if (threadIdx.x < 32) {
        // A map published by the whole warp: copy and release in one instruction.
        asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
                     " [%0], [%1], 128;" :: "l"(map), "r"(smem_map_addr) : "memory");
    }
}
"#;

#[test]
fn every_way_of_rewriting_a_tensor_map_is_hooked_and_ptxas_takes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("grouped.cu");
    std::fs::write(&cu, KERNEL).unwrap();
    let ptx = dir.path().join("grouped.ptx");
    let include = common::repo().join("crates/repro-contract/runtime/include");
    let output = Command::new(common::nvcc())
        .args(["-std=c++17", "-arch=sm_90a", "-lineinfo", "-ptx", "-I"])
        .arg(&include)
        .arg("-o")
        .arg(&ptx)
        .arg(&cu)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nvcc -ptx failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&ptx).unwrap();
    let rewrite = instrument(&text, 0);

    let sites_of = |prefix: &str| {
        rewrite
            .sites
            .iter()
            .filter(|s| s.function.contains("grouped") && s.instruction.starts_with(prefix))
            .count()
    };
    for (prefix, at_least) in [
        ("tensormap.replace.tile.global_address.shared::cta", 1),
        ("tensormap.replace.tile.global_dim.shared::cta", 1),
        ("tensormap.replace.tile.global_address.global", 1),
        ("st.global.v4.u32", 1),
        ("cp.async.bulk.global.shared::cta.bulk_group", 1),
        ("tensormap.cp_fenceproxy", 1),
        ("fence.proxy.tensormap::generic.release", 1),
        ("fence.proxy.tensormap::generic.acquire", 1),
        ("cp.async.bulk.tensor.2d.shared::cluster.global", 1),
        ("cp.async.bulk.wait_group.read", 1),
        ("cp.async.bulk.commit_group", 2),
    ] {
        assert!(
            sites_of(prefix) >= at_least,
            "no hook at {prefix}: {:#?}",
            rewrite
                .sites
                .iter()
                .map(|s| &s.instruction)
                .collect::<Vec<_>>()
        );
    }
    // The struct copy's stores (generic or st.global, as cicc chooses) are checked too: 128
    // bytes, at most 16 at a time, 8 or more hooks besides the explicit st.global.
    let map_writes = rewrite
        .counts
        .get("repro_race_map_write")
        .copied()
        .unwrap_or(0);
    let generic_checked = rewrite.ptx.matches(", 8202;").count(); // generic | write | map check
    assert!(
        map_writes + generic_checked >= 5 + 8,
        "map writes {map_writes}, generic stores checked {generic_checked}: {:?}",
        rewrite.counts
    );
    // One release and one acquire per group (cicc may unroll the loop).
    let fences = rewrite
        .counts
        .get("repro_race_map_fence")
        .copied()
        .unwrap_or(0);
    assert!(fences >= 2 && fences % 2 == 0, "{:?}", rewrite.counts);

    // The real ptxas assembles the rewritten module.
    let rewritten = dir.path().join("grouped.rewritten.ptx");
    std::fs::write(&rewritten, &rewrite.ptx).unwrap();
    let ptxas = common::nvcc().parent().unwrap().join("ptxas");
    let output = Command::new(&ptxas)
        .args(["-arch=sm_90a", "-o"])
        .arg(dir.path().join("grouped.cubin"))
        .arg(&rewritten)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "ptxas rejected the rewritten PTX:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_module_that_rewrites_no_map_keeps_its_global_stores_unhooked() {
    // A CUTLASS-style kernel prefetches its descriptor and stores to global memory: no map is
    // rewritten, and its stores stay as they are.
    let ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 k_param_0)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [k_param_0];\n\tprefetch.tensormap [%rd1];\n\tst.global.u32 [%rd1+16], %r2;\n\tst.u32 [%rd1+20], %r2;\n\tret;\n}\n";
    let rewrite = instrument(ptx, 0);
    assert_eq!(rewrite.counts.get("repro_race_map_write"), None);
    assert!(!rewrite.ptx.contains(", 8202;"), "{}", rewrite.ptx);
    // The same kernel with a tensormap fence: its global stores are checked.
    let with_fence = ptx.replace(
        "\tret;",
        "\tfence.proxy.tensormap::generic.release.gpu;\n\tret;",
    );
    let rewrite = instrument(&with_fence, 0);
    assert_eq!(rewrite.counts.get("repro_race_map_write"), Some(&1));
    assert!(rewrite.ptx.contains(", 8202;"), "{}", rewrite.ptx);
    assert_eq!(rewrite.counts.get("repro_race_map_fence"), Some(&1));
}
