// repro/async_race.cuh — the checker behind `repro run --sanitize async-race`: shared-memory
// races between the async proxy (TMA loads and stores, bulk copies, wgmma reading shared
// memory) and ordinary loads and stores, decided by the order the kernel's own synchronization
// gives them, not by whether they happened to collide in this run.
//
// How it is wired: repro builds the harness with this header force-included (-include) and a
// ptxas wrapper that rewrites the kernel's PTX (crates/repro-async-race/src/ptx.rs): every shared-memory
// access, TMA/bulk copy, bulk group commit and wait, proxy fence, named barrier, mbarrier
// operation and wgmma gets a call to one of the repro_race_* functions below. Nothing else of
// the build changes. At exit the findings go to $REPRO_ASYNC_RACE_OUT (JSON lines) and repro
// names their source lines from the rewrite's site table.
//
// The model (docs/async-race.md says it in words):
//  * Agents are the warps of a CTA (program order within a warp), plus, per warp, three
//    asynchronous agents: its TMA/bulk loads, its TMA/bulk stores, its wgmma groups. Each warp
//    carries a vector clock over all of them.
//  * Releases: a named-barrier arrival, an mbarrier arrival; acquires: leaving a bar.sync, an
//    mbarrier wait that succeeded (it acquires what the arrivals and the TMA loads of the phase
//    it saw complete released). A load belongs to the phase of its mbarrier current at its
//    issue; a store completes at the issuing warp's cp.async.bulk.wait_group[.read]; a wgmma
//    at wgmma.wait_group.
//  * Shared memory is shadowed in 16-byte granules (TMA boxes are 16-byte multiples): the last
//    async write and read, the last generic write, the last generic readers.
//  * A race is an async access and a generic access of one granule that no chain of the above
//    orders, or a TMA store of bytes written through the generic proxy with no
//    fence.proxy.async between the write and the store.
//  * Tensor maps: each TMA copy's map (by address) keeps, per warp, the latest copy through it; a
//    write to the map's 128 bytes in global memory that one of them is not ordered before (its
//    mbarrier phase, its store group's wait, or a bulk-group drain in its warp) is a race, and
//    so is a copy through a rewritten map without the tensormap proxy's release and acquire.
// Bounded: state is fixed per resident CTA (about 1 MiB), findings deduplicated by their two
// source sites, at most kMaxFindings kinds kept.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

namespace repro {
namespace async_race {

// The hooks' flag bits (crates/repro-async-race/src/hooks.rs `flags`).
enum Flag : uint32_t {
    kWindowMask = 3,
    kWindowCta = 0,
    kWindowCluster = 1,
    kWindowGeneric = 2,
    kRead = 4,
    kWrite = 8,
    kMatrix = 16,
    kMulticast = 32,
    kDrop = 64,
    kNoArrival = 128,
    kHasParity = 256,
    kWaits = 512,
    kAInRegisters = 1024,
    kWindowGlobal = 3,
    kMapRelease = 2048,
    kMapAcquire = 4096,
    kMapCheck = 8192,
    kMatrixCountShift = 16,
};

constexpr uint32_t kGranuleBytes = 16;
constexpr uint32_t kMaxSharedBytes = 232448;  // 227 KiB of a Hopper CTA + the 1 KiB reserved
constexpr uint32_t kGranules = kMaxSharedBytes / kGranuleBytes;
constexpr int kMaxWarps = 32;
// Agents: warps 0..31, then each warp's loads, stores and wgmma groups.
constexpr int kLoadAgent = 32, kStoreAgent = 64, kWgmmaAgent = 96, kAgents = 128;
constexpr int kMBarriers = 64, kNamedBarriers = 16, kReaders = 4, kFences = 8, kGroups = 32;
constexpr uint32_t kSlotsPerSm = 16;
constexpr uint32_t kBlockMapSize = 1u << 22;
constexpr int kMaxFindings = 256;
// Tensor maps a CTA's TMA copies read (by generic address), and drains kept per warp.
constexpr int kMaps = 16, kDrains = 4;
constexpr uint32_t kMapBytes = 128;

// A stamp: agent (7 bits) and its clock (25 bits); 0 is "none" (clocks start at 1).
__host__ __device__ constexpr uint32_t stamp(uint32_t agent, uint32_t clock) { return agent << 25 | (clock & 0x1FFFFFFu); }
__host__ __device__ constexpr uint32_t stamp_agent(uint32_t s) { return s >> 25; }
__host__ __device__ constexpr uint32_t stamp_clock(uint32_t s) { return s & 0x1FFFFFFu; }

struct Granule {
    uint32_t async_write, async_write_site;
    uint32_t async_read, async_read_site;
    uint32_t generic_write, generic_write_site;
    uint32_t readers[kReaders], reader_sites[kReaders];
    uint32_t pad[2];
};

struct Warp {
    uint32_t clock[kAgents];
    uint32_t fences[kFences];
    uint32_t fence_count;
    uint32_t loads, stores, open_group, committed;
    uint32_t groups[kGroups];
    uint32_t wgmma_committed;
    // Tensor maps: the loads issued before each committed bulk group, and the last drains
    // (cp.async.bulk.wait_group[.read] completing such a group): the loads up to drain_seq,
    // drained when this warp's own clock was drain_clock.
    uint32_t group_loads[kGroups];
    uint32_t drain_seq[kDrains], drain_clock[kDrains], drain_count;
};

struct MBarrier {
    uint32_t key;  // shared offset + 1; 0 = free
    uint32_t lock;
    uint32_t parity;  // the hardware phase parity as last seen
    uint32_t released[2][kAgents];  // what the latest phase of each parity released
};

struct NamedBarrier {
    uint32_t arrived, generation;
    uint32_t released[2][kAgents];
};

// A tensor map (128 bytes of global memory) the CTA's TMA copies read, from their issue to their
// completion: per warp the latest load and store through it (a warp's copies complete in order,
// as the limits in docs/async-race.md say), and its latest rewrite by this CTA.
struct TensorMapRecord {
    unsigned long long address;  // generic address; 0 = free (records fill in order)
    uint32_t write, write_site;  // the latest write to its bytes (a warp's stamp)
    uint32_t released;           // a fence.proxy.tensormap::generic.release followed that write
    uint32_t pad;
    uint32_t loads[kMaxWarps], load_sites[kMaxWarps];
    uint32_t stores[kMaxWarps], store_sites[kMaxWarps];
    uint32_t acquired[kMaxWarps];  // the write each warp's fence.proxy.tensormap acquire covered
};

struct Slot {
    uint32_t block_key, exited, threads;
    uint32_t block[3];  // the block that used the slot last (for the debug dump)
    uint32_t pad[2];    // the granules stay 16-byte aligned (cleared as uint4)
    Warp warps[kMaxWarps];
    MBarrier mbarriers[kMBarriers];
    NamedBarrier named[kNamedBarriers];
    TensorMapRecord maps[kMaps];
    Granule granules[kGranules];
};
static_assert(offsetof(Slot, granules) % 16 == 0, "enter clears the granules 16 bytes at a time");
static_assert(offsetof(Slot, granules) - offsetof(Slot, warps) ==
                  sizeof(Warp) * kMaxWarps + sizeof(MBarrier) * kMBarriers + sizeof(NamedBarrier) * kNamedBarriers +
                      sizeof(TensorMapRecord) * kMaps,
              "enter clears the warps, barriers and maps as one run of words");

// One kind of finding: two sites, the first time it was seen, how often.
enum Kind : uint32_t {
    kAccessBeforeLoadDone = 1,   // generic access to bytes a TMA load may still be writing
    kWriteWhileAsyncReads = 2,   // generic write to bytes a TMA store / wgmma may still read
    kLoadOverUnordered = 3,      // TMA load over bytes a generic access not ordered before it touched
    kStoreOfUnordered = 4,       // TMA store of bytes a generic write not ordered before it wrote
    kStoreWithoutFence = 5,      // ordered, but no fence.proxy.async between the write and the store
    kAsyncOverlap = 6,           // TMA load over bytes a TMA store / wgmma may still read, or the reverse
    kWgmmaBeforeLoadDone = 7,    // wgmma reads bytes a TMA load may still be writing
    kMapRewrittenInUse = 8,      // a tensor map rewritten while a TMA copy may still read it
    kMapUsedWithoutFence = 9,    // a TMA copy through a map rewritten with no tensormap fences between
};

struct Finding {
    unsigned long long key;  // kind, site, other site; 0 = free
    uint32_t kind, site, other_site, count;
    uint32_t block[3], warp, other_warp, lo, hi, iteration, other_clock;
    uint32_t known;  // what the reporting warp knew of the other side's agent when it reported
    uint32_t pad;
    unsigned long long map;  // the tensor map's generic address (kinds 8 and 9), else 0
};

struct State {
    Slot* slots;
    uint32_t slot_count;
    uint32_t* block_map;  // block key & (kBlockMapSize - 1) → slot + 1
    Finding findings[kMaxFindings];
    uint32_t unchecked_blocks, unknown_sizes, remote_operations, dropped_findings;
    uint32_t checked_blocks, operations;
    uint32_t untracked_maps;  // TMA copies through a map past the kMaps a CTA follows
    uint32_t drain_ordered;   // map rewrites ordered after a load only by a bulk-group drain
};

}  // namespace async_race
}  // namespace repro

// Set by the host before the first launch; null (nothing checked) otherwise.
__device__ repro::async_race::State* repro_race_state = nullptr;

namespace repro {
namespace async_race {

__device__ __forceinline__ uint32_t linear_thread()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ uint32_t block_key()
{
    return 1u + blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
__device__ __forceinline__ uint32_t lane() { return threadIdx.x & 31u; }

__device__ __forceinline__ Slot* current_slot()
{
    State* s = repro_race_state;
    if (s == nullptr) return nullptr;
    const uint32_t key = block_key();
    const uint32_t entry = *(volatile uint32_t*)&s->block_map[key & (kBlockMapSize - 1)];
    if (entry == 0) return nullptr;
    Slot* slot = &s->slots[entry - 1];
    return *(volatile uint32_t*)&slot->block_key == key ? slot : nullptr;
}

// Where this CTA's shared memory starts in the shared window. Not 0 in a cluster: on the H200
// the window of cluster rank r starts at r x 16 MiB, for shared::cta addresses (cvta, ld.shared)
// as for shared::cluster ones (mapa), which are the same addresses for the CTA's own memory
// (measured, docs/async-race.md); mapa of address 0 to this rank says where, without assuming.
__device__ __forceinline__ uint32_t own_shared_base()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t rank, base;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(base) : "r"(0u), "r"(rank));
    return base;
#else
    return 0;
#endif
}

// A shared-memory address of any window as an offset in this CTA's shared memory; false when it
// is no shared memory of this CTA (a peer's, in a cluster; or global memory).
__device__ __forceinline__ bool to_offset(uint64_t address, uint32_t window, uint32_t* offset)
{
    uint32_t a = static_cast<uint32_t>(address);
    if (window == kWindowGeneric) {
        const void* p = reinterpret_cast<const void*>(address);
        if (!__isShared(p)) return false;
        a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    }
    const uint32_t base = own_shared_base();
    if (a < base) return false;
    *offset = a - base;
    return *offset < kMaxSharedBytes;
}
__device__ __forceinline__ uint32_t warp_index() { return linear_thread() / 32u; }

__device__ __forceinline__ uint32_t leader(uint32_t mask) { return __ffs(mask) - 1; }

// Records a finding of `kind` between `site` and `other_site`: one entry per kind and pair of
// sites, claimed by hashing the three into the table (a compare-and-swap on the key), so that
// threads reporting the same pair at once still make one entry.
__device__ void report(Kind kind, uint32_t site, uint32_t other_site, uint32_t warp, uint32_t other_stamp,
                       uint32_t other_warp, uint32_t offset, uint32_t iteration, unsigned long long map = 0)
{
    State* s = repro_race_state;
    const unsigned long long key =
        (unsigned long long)kind << 56 | (unsigned long long)(site & 0xFFFFFFF) << 28 | (other_site & 0xFFFFFFF);
    uint32_t h = static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 40) % kMaxFindings;
    #pragma unroll 1
    for (int probe = 0; probe < kMaxFindings; ++probe, h = (h + 1) % kMaxFindings) {
        Finding& f = s->findings[h];
        const unsigned long long seen = atomicCAS(&f.key, 0ull, key);
        if (seen == key) {  // someone's entry: count this one
            atomicAdd(&f.count, 1u);
            atomicMin(&f.lo, offset);
            atomicMax(&f.hi, offset + kGranuleBytes);
            return;
        }
        if (seen != 0ull) continue;
        f.site = site, f.other_site = other_site;
        f.block[0] = blockIdx.x, f.block[1] = blockIdx.y, f.block[2] = blockIdx.z;
        f.warp = warp, f.other_warp = other_warp, f.lo = offset, f.hi = offset + kGranuleBytes;
        f.iteration = iteration, f.other_clock = stamp_clock(other_stamp), f.map = map;
        if (Slot* slot = current_slot()) f.known = slot->warps[warp].clock[stamp_agent(other_stamp)];
        atomicAdd(&f.count, 1u);
        __threadfence();
        atomicExch(&f.kind, (uint32_t)kind);  // last: whoever sees the kind sees the rest
        return;
    }
    atomicAdd(&s->dropped_findings, 1u);
}

// Does warp `w` know that `s` (an agent's clock) happened before it?
__device__ __forceinline__ bool known(const Warp& w, uint32_t s)
{
    if (s == 0) return true;
    return *(volatile const uint32_t*)&w.clock[stamp_agent(s)] >= stamp_clock(s);
}

__device__ __forceinline__ void join(uint32_t* into, const uint32_t* from)
{
    #pragma unroll 1
    for (int i = 0; i < kAgents; ++i) {
        const uint32_t v = *(volatile const uint32_t*)&from[i];
        if (v > *(volatile const uint32_t*)&into[i]) atomicMax(&into[i], v);  // most are known already
    }
}

__device__ __forceinline__ void lock(uint32_t* l)
{
    while (atomicCAS(l, 0u, 1u) != 0u) __nanosleep(32);
    __threadfence();
}
__device__ __forceinline__ void unlock(uint32_t* l)
{
    __threadfence();
    atomicExch(l, 0u);
}

// The mbarrier at `offset`, created when `create` (mbarrier.init); null when unknown.
__device__ MBarrier* find_mbarrier(Slot* slot, uint32_t offset, bool create)
{
    const uint32_t key = offset + 1;
    const uint32_t start = (offset / 8) % kMBarriers;
    #pragma unroll 1
    for (int i = 0; i < kMBarriers; ++i) {
        MBarrier* b = &slot->mbarriers[(start + i) % kMBarriers];
        const uint32_t k = *(volatile uint32_t*)&b->key;
        if (k == key) return b;
        if (k == 0) {
            if (!create) return nullptr;
            if (atomicCAS(&b->key, 0u, key) == 0u) return b;
            if (*(volatile uint32_t*)&b->key == key) return b;
        }
    }
    return nullptr;
}

__device__ __forceinline__ uint32_t hardware_parity(uint32_t offset)
{
    const uint32_t address = own_shared_base() + offset;
    uint32_t done;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(address));
    return done;  // phase 0's parity completed: the current phase is odd
}

// Under the barrier's lock: notices phases completed since it last looked.
__device__ __forceinline__ uint32_t current_parity(MBarrier* b, uint32_t offset)
{
    const uint32_t now = hardware_parity(offset);
    if (now != b->parity) {
        b->parity = now;
        #pragma unroll 1
        for (int i = 0; i < kAgents; ++i) b->released[now][i] = 0;
    }
    return now;
}

__device__ __forceinline__ void tick(Warp& w, uint32_t warp) { w.clock[warp] += 1; }

// ---- Tensor maps (docs/async-race.md, "Tensor maps rewritten in global memory") ----
// A TMA copy reads its map (128 bytes, in .param, .const or global memory; never shared) through
// the tensormap proxy, at some time between its issue and its completion. The runtime learns a
// map's address from the copies that use it and follows, per CTA, up to kMaps of them.

// The record of the map at `address`, registered when `create`; null when unknown (or full).
__device__ TensorMapRecord* find_map(Slot* slot, uint64_t address, bool create)
{
    #pragma unroll 1
    for (int i = 0; i < kMaps; ++i) {
        TensorMapRecord* m = &slot->maps[i];
        const unsigned long long a = *(volatile unsigned long long*)&m->address;
        if (a == address) return m;
        if (a != 0) continue;
        if (!create) return nullptr;  // records fill in order: none past a free one
        const unsigned long long seen = atomicCAS(&m->address, 0ull, (unsigned long long)address);
        if (seen == 0ull || seen == address) return m;
    }
    if (create) atomicAdd(&repro_race_state->untracked_maps, 1u);
    return nullptr;
}

// Did warp `w` drain its loads up to `seq` (cp.async.bulk.commit_group, then a wait_group that
// completes that group), in a way warp `r` has learned of? The PTX ISA batches only bulk_group
// copies into a group, so this is the drain CUTLASS's and DeepGEMM's grouped GEMMs rely on, not
// an order the ISA states for mbarrier-completed loads: counted, not reported.
__device__ bool drained(Slot* slot, uint32_t w, uint32_t seq, uint32_t r)
{
    const Warp& issuer = slot->warps[w];
    const uint32_t n = min(*(volatile const uint32_t*)&issuer.drain_count, (uint32_t)kDrains);
    #pragma unroll 1
    for (uint32_t i = 0; i < n; ++i) {
        if (issuer.drain_seq[i] < seq) continue;
        if (r == w || *(volatile const uint32_t*)&slot->warps[r].clock[w] >= issuer.drain_clock[i]) return true;
    }
    return false;
}

// A write of `bytes` at global `address` by this thread: for each map it touches, every TMA copy
// that may still read the map's old contents must be ordered before it.
__device__ void map_rewrite(Slot* slot, uint64_t address, uint32_t bytes, uint32_t site, bool release)
{
    const uint32_t r = warp_index();
    Warp& warp = slot->warps[r];
    const uint32_t me = stamp(r, *(volatile uint32_t*)&warp.clock[r]);
    #pragma unroll 1
    for (int i = 0; i < kMaps; ++i) {
        TensorMapRecord* m = &slot->maps[i];
        const unsigned long long a = *(volatile unsigned long long*)&m->address;
        if (a == 0) break;
        if (address >= a + kMapBytes || address + max(bytes, 1u) <= a) continue;
        const uint32_t offset = address > a ? static_cast<uint32_t>(address - a) & ~(kGranuleBytes - 1) : 0;
        #pragma unroll 1
        for (uint32_t w = 0; w < (uint32_t)kMaxWarps; ++w) {
            const uint32_t loaded = *(volatile uint32_t*)&m->loads[w];
            if (loaded != 0 && !known(warp, stamp(kLoadAgent + w, loaded))) {
                if (drained(slot, w, loaded, r))
                    atomicAdd(&repro_race_state->drain_ordered, 1u);
                else
                    report(kMapRewrittenInUse, site, m->load_sites[w], r, stamp(kLoadAgent + w, loaded), w, offset, loaded, a);
            }
            const uint32_t stored = *(volatile uint32_t*)&m->stores[w];
            if (stored != 0 && !known(warp, stamp(kStoreAgent + w, stored)))
                report(kMapRewrittenInUse, site, m->store_sites[w], r, stamp(kStoreAgent + w, stored), w, offset, stored, a);
        }
        m->write = me;
        m->write_site = site;
        m->released = release ? 1u : 0u;
    }
}

// A TMA copy by warp `w` (its load or store number `seq`) reading the map at `map`: registers
// the use, and checks that the map's latest rewrite reached the tensormap proxy before it.
__device__ void map_use(Slot* slot, uint64_t map, uint32_t w, uint32_t seq, bool load, uint32_t site)
{
    if (map == 0) return;
    TensorMapRecord* m = find_map(slot, map, true);
    if (m == nullptr) return;
    const uint32_t written = *(volatile uint32_t*)&m->write;
    if (written != 0) {
        const Warp& warp = slot->warps[w];
        const bool fenced = *(volatile uint32_t*)&m->released != 0 && *(volatile uint32_t*)&m->acquired[w] == written;
        if (!known(warp, written) || !fenced)
            report(kMapUsedWithoutFence, site, m->write_site, w, written, stamp_agent(written), 0, seq, map);
    }
    if (load) {
        atomicMax(&m->loads[w], seq);
        m->load_sites[w] = site;
    } else {
        atomicMax(&m->stores[w], seq);
        m->store_sites[w] = site;
    }
}

}  // namespace async_race
}  // namespace repro

// ---------------------------------------------------------------------------------------------
// The hooks (names and parameters are the rewrite's, crates/repro-async-race/src/hooks.rs PROTOTYPES).
// ---------------------------------------------------------------------------------------------
using namespace repro::async_race;

extern "C" __device__ __noinline__ void repro_race_enter()
{
    State* s = repro_race_state;
    if (s == nullptr) return;
    const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
    if (linear_thread() == 0) {
        uint32_t sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        const uint32_t key = block_key();
        const uint32_t start = (sm * kSlotsPerSm) % s->slot_count;
        bool found = false;
        #pragma unroll 1
        for (uint32_t i = 0; i < s->slot_count && !found; ++i) {
            const uint32_t index = (start + i) % s->slot_count;
            if (atomicCAS(&s->slots[index].block_key, 0u, key) == 0u) {
                s->slots[index].exited = 0;
                s->slots[index].threads = threads;
                s->slots[index].block[0] = blockIdx.x, s->slots[index].block[1] = blockIdx.y;
                s->slots[index].block[2] = blockIdx.z;
                atomicExch(&s->block_map[key & (kBlockMapSize - 1)], index + 1);
                found = true;
            }
        }
        atomicAdd(found ? &s->checked_blocks : &s->unchecked_blocks, 1u);
        __threadfence();
    }
    __syncthreads();
    Slot* slot = current_slot();
    if (slot != nullptr) {
        uint32_t shared_bytes;
        asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(shared_bytes));
        const uint32_t granules = min(kGranules, (shared_bytes + 1024 + kGranuleBytes - 1) / kGranuleBytes);
        uint4* g = reinterpret_cast<uint4*>(slot->granules);
        #pragma unroll 1
        for (uint32_t i = linear_thread(); i < granules * (sizeof(Granule) / 16); i += threads) g[i] = make_uint4(0, 0, 0, 0);
        uint32_t* rest = reinterpret_cast<uint32_t*>(slot->warps);
        const uint32_t words = (sizeof(Warp) * kMaxWarps + sizeof(MBarrier) * kMBarriers + sizeof(NamedBarrier) * kNamedBarriers +
                                sizeof(TensorMapRecord) * kMaps) / 4;
        #pragma unroll 1
        for (uint32_t i = linear_thread(); i < words; i += threads) rest[i] = 0;
        __syncthreads();
        // Every warp starts at clock 1: stamps of 0 mean "nothing".
        if (lane() == 0) slot->warps[warp_index()].clock[warp_index()] = 1;
        __threadfence_block();
    }
    __syncthreads();
}

extern "C" __device__ __noinline__ void repro_race_exit()
{
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    __threadfence();
    if (atomicAdd(&slot->exited, 1u) + 1 == slot->threads) {
        State* s = repro_race_state;
        atomicExch(&s->block_map[block_key() & (kBlockMapSize - 1)], 0u);
        __threadfence();
        atomicExch(&slot->block_key, 0u);
    }
}

// A generic-proxy access of `bytes` at `address` (ldmatrix/stmatrix: 16 bytes per lane of the
// first 8 x count lanes).
extern "C" __device__ __noinline__ void repro_race_access(uint64_t address, uint32_t bytes, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(address), "r"(bytes), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    if ((flags & kMatrix) && lane() >= 8 * ((flags >> kMatrixCountShift) & 0xFF)) return;
    if ((flags & kMapCheck) && !__isShared(reinterpret_cast<const void*>(address))) {
        map_rewrite(slot, address, bytes, site, false);  // a generic store to global memory
        return;
    }
    uint32_t offset;
    if (!to_offset(address, flags & kWindowMask, &offset)) return;
    const uint32_t w = warp_index();
    Warp& warp = slot->warps[w];
    const uint32_t me = stamp(w, *(volatile uint32_t*)&warp.clock[w]);
    const uint32_t last = min(offset + max(bytes, 1u) - 1, kMaxSharedBytes - 1) / kGranuleBytes;
    #pragma unroll 1
    for (uint32_t g = offset / kGranuleBytes; g <= last; ++g) {
        Granule& gr = slot->granules[g];
        const uint32_t loaded = *(volatile uint32_t*)&gr.async_write;
        if (!known(warp, loaded))
            report(kAccessBeforeLoadDone, site, gr.async_write_site, w, loaded, stamp_agent(loaded) - kLoadAgent,
                   g * kGranuleBytes, stamp_clock(loaded));
        if (flags & kWrite) {
            const uint32_t reading = *(volatile uint32_t*)&gr.async_read;
            if (!known(warp, reading))
                report(kWriteWhileAsyncReads, site, gr.async_read_site, w, reading, stamp_agent(reading) % 32,
                       g * kGranuleBytes, stamp_clock(reading));
            gr.generic_write = me;
            gr.generic_write_site = site;
        }
        if (flags & kRead) {
            int pick = -1;
            #pragma unroll 1
            for (int r = 0; r < kReaders; ++r) {
                const uint32_t v = gr.readers[r];
                if (v == 0 || stamp_agent(v) == w) {
                    pick = r;
                    break;
                }
            }
            if (pick < 0) pick = w % kReaders;
            gr.readers[pick] = me;
            gr.reader_sites[pick] = site;
        }
    }
}

// Was the generic write `written` (a warp's stamp) followed, in that warp, by a proxy fence
// that `acquirer` has since learned of?
__device__ bool fenced(Slot* slot, uint32_t written, uint32_t acquirer)
{
    const uint32_t v = stamp_agent(written);
    const Warp& writer = slot->warps[v];
    const uint32_t limit = v == acquirer ? 0xFFFFFFFFu : slot->warps[acquirer].clock[v];
    const uint32_t n = *(volatile const uint32_t*)&writer.fence_count;
    #pragma unroll 1
    for (uint32_t i = n > kFences ? n - kFences : 0; i < n; ++i) {
        const uint32_t f = writer.fences[i % kFences];
        if (f >= stamp_clock(written) && f < limit) return true;
    }
    // Older than the fences kept: take it as fenced (a missed finding, never a false one).
    return n > kFences && stamp_clock(written) < writer.fences[(n - kFences) % kFences];
}

// A TMA or bulk load of `bytes` (0: the tensor map's box) to `dst`, completing on `mbar`.
extern "C" __device__ __noinline__ void repro_race_bulk_load(uint64_t dst, uint32_t bytes, uint64_t map, uint64_t mbar, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(dst), "r"(bytes), "l"(map), "l"(mbar), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    State* s = repro_race_state;
    atomicAdd(&s->operations, 1u);
    uint32_t offset, barrier;
    if (!to_offset(dst, flags & kWindowMask, &offset) || !to_offset(mbar, flags & kWindowMask, &barrier)) {
        atomicAdd(&s->remote_operations, 1u);
        return;
    }
    if (bytes == 0 && map != 0) bytes = *reinterpret_cast<const uint32_t*>(map + 64);  // the box's bytes (CUtensorMap word 16)
    if (bytes == 0 || bytes % 16 != 0 || bytes > kMaxSharedBytes) {
        atomicAdd(&s->unknown_sizes, 1u);
        return;
    }
    const uint32_t w = warp_index();
    Warp& warp = slot->warps[w];
    const uint32_t seq = atomicAdd(&warp.loads, 1u) + 1;
    const uint32_t me = stamp(kLoadAgent + w, seq);
    map_use(slot, map, w, seq, true, site);
    const uint32_t last = min(offset + bytes - 1, kMaxSharedBytes - 1) / kGranuleBytes;
    #pragma unroll 1
    for (uint32_t g = offset / kGranuleBytes; g <= last; ++g) {
        Granule& gr = slot->granules[g];
        const uint32_t written = gr.generic_write;
        if (written != 0 && stamp_agent(written) != w && !known(warp, written))
            report(kLoadOverUnordered, site, gr.generic_write_site, w, written, stamp_agent(written), g * kGranuleBytes, seq);
        #pragma unroll 1
        for (int r = 0; r < kReaders; ++r) {
            const uint32_t read = gr.readers[r];
            if (read != 0 && stamp_agent(read) != w && !known(warp, read))
                report(kLoadOverUnordered, site, gr.reader_sites[r], w, read, stamp_agent(read), g * kGranuleBytes, seq);
            gr.readers[r] = 0;
        }
        const uint32_t reading = gr.async_read;
        if (!known(warp, reading))
            report(kAsyncOverlap, site, gr.async_read_site, w, reading, stamp_agent(reading) % 32, g * kGranuleBytes, seq);
        gr.generic_write = 0;
        gr.async_write = me;
        gr.async_write_site = site;
    }
    MBarrier* b = find_mbarrier(slot, barrier, false);
    if (b == nullptr) return;
    lock(&b->lock);
    const uint32_t parity = current_parity(b, barrier);
    atomicMax(&b->released[parity][kLoadAgent + w], seq);
    unlock(&b->lock);
}

// A TMA or bulk store reading `bytes` (0: the tensor map's box) of shared memory at `src`.
extern "C" __device__ __noinline__ void repro_race_bulk_store(uint64_t src, uint32_t bytes, uint64_t map, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(src), "r"(bytes), "l"(map), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    State* s = repro_race_state;
    atomicAdd(&s->operations, 1u);
    uint32_t offset;
    if (!to_offset(src, flags & kWindowMask, &offset)) {
        atomicAdd(&s->remote_operations, 1u);
        return;
    }
    if (bytes == 0 && map != 0) bytes = *reinterpret_cast<const uint32_t*>(map + 64);
    if (bytes == 0 || bytes % 16 != 0 || bytes > kMaxSharedBytes) {
        atomicAdd(&s->unknown_sizes, 1u);
        return;
    }
    const uint32_t w = warp_index();
    Warp& warp = slot->warps[w];
    const uint32_t seq = atomicAdd(&warp.stores, 1u) + 1;
    atomicMax(&warp.open_group, seq);
    const uint32_t me = stamp(kStoreAgent + w, seq);
    map_use(slot, map, w, seq, false, site);
    const uint32_t last = min(offset + bytes - 1, kMaxSharedBytes - 1) / kGranuleBytes;
    #pragma unroll 1
    for (uint32_t g = offset / kGranuleBytes; g <= last; ++g) {
        Granule& gr = slot->granules[g];
        const uint32_t written = gr.generic_write;
        if (written != 0) {
            if (stamp_agent(written) != w && !known(warp, written))
                report(kStoreOfUnordered, site, gr.generic_write_site, w, written, stamp_agent(written), g * kGranuleBytes, seq);
            else if (!fenced(slot, written, w))
                report(kStoreWithoutFence, site, gr.generic_write_site, w, written, stamp_agent(written), g * kGranuleBytes, seq);
        }
        const uint32_t loaded = gr.async_write;
        if (!known(warp, loaded))
            report(kAsyncOverlap, site, gr.async_write_site, w, loaded, stamp_agent(loaded) - kLoadAgent, g * kGranuleBytes, seq);
        gr.async_read = me;
        gr.async_read_site = site;
    }
}

extern "C" __device__ __noinline__ void repro_race_bulk_commit(uint32_t unused0)
{
    asm volatile("" ::"r"(unused0));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t mask = __activemask();
    if (lane() == leader(mask)) {
        Warp& warp = slot->warps[warp_index()];
        warp.groups[warp.committed % kGroups] = warp.open_group;
        warp.group_loads[warp.committed % kGroups] = *(volatile uint32_t*)&warp.loads;
        warp.committed += 1;
    }
    __syncwarp(mask);
}

// After cp.async.bulk.wait_group[.read] `pending`: every group but the newest `pending` is done
// (reading, at least).
extern "C" __device__ __noinline__ void repro_race_bulk_wait(uint32_t pending, uint32_t unused1)
{
    asm volatile("" ::"r"(pending), "r"(unused1));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t mask = __activemask();
    const uint32_t w = warp_index();
    if (lane() == leader(mask)) {
        Warp& warp = slot->warps[w];
        if (warp.committed > pending) {
            const uint32_t group = (warp.committed - 1 - pending) % kGroups;
            atomicMax(&warp.clock[kStoreAgent + w], warp.groups[group]);
            if (warp.group_loads[group] != 0) {
                const uint32_t k = warp.drain_count % kDrains;
                warp.drain_seq[k] = warp.group_loads[group];
                warp.drain_clock[k] = warp.clock[w];
                __threadfence_block();
                warp.drain_count += 1;
            }
        }
    }
    __syncwarp(mask);
}

extern "C" __device__ __noinline__ void repro_race_proxy_fence(uint32_t unused0)
{
    asm volatile("" ::"r"(unused0));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t mask = __activemask();
    const uint32_t w = warp_index();
    if (lane() == leader(mask)) {
        Warp& warp = slot->warps[w];
        warp.fences[warp.fence_count % kFences] = warp.clock[w];
        warp.fence_count += 1;
        tick(warp, w);  // writes after the fence are not covered by it
    }
    __syncwarp(mask);
}

// Before bar.sync / bar.arrive / bar.red: releases this warp's clock into the barrier's current
// generation; returns the barrier and that generation (generation << 4 | id) for
// repro_race_bar_done.
extern "C" __device__ __noinline__ uint32_t repro_race_bar_arrive(uint32_t id, uint32_t threads, uint32_t unused2, uint32_t unused3)
{
    asm volatile("" ::"r"(id), "r"(threads), "r"(unused2), "r"(unused3));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr || id >= kNamedBarriers) return 0xFFFFFFFFu;
    const uint32_t mask = __activemask();
    const uint32_t w = warp_index();
    uint32_t generation = 0;
    if (lane() == leader(mask)) {
        NamedBarrier& b = slot->named[id];
        Warp& warp = slot->warps[w];
        if (threads == 0) threads = blockDim.x * blockDim.y * blockDim.z;
        generation = *(volatile uint32_t*)&b.generation;
        join(b.released[generation & 1], warp.clock);
        __threadfence();
        // Threads count, not warps: a warp that reaches the hook split in two (after a per-thread
        // wait loop) arrives as two groups, whose threads add up to the warp.
        const uint32_t arriving = __popc(mask);
        if (atomicAdd(&b.arrived, arriving) + arriving >= threads) {
            // The last arrival of this generation: the next one's record starts empty.
            #pragma unroll 1
            for (int i = 0; i < kAgents; ++i) b.released[(generation + 1) & 1][i] = 0;
            b.arrived = 0;
            __threadfence();
            atomicAdd(&b.generation, 1u);
        }
        tick(warp, w);
    }
    return __shfl_sync(mask, generation, leader(mask)) << 4 | id;
}

// After bar.sync / bar.red: acquires what every warp of the generation released.
extern "C" __device__ __noinline__ void repro_race_bar_done(uint32_t token, uint32_t unused1)
{
    asm volatile("" ::"r"(token), "r"(unused1));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr || token == 0xFFFFFFFFu) return;
    const uint32_t mask = __activemask();
    const uint32_t w = warp_index();
    if (lane() == leader(mask)) join(slot->warps[w].clock, slot->named[token & 15].released[(token >> 4) & 1]);
    __syncwarp(mask);
}

extern "C" __device__ __noinline__ void repro_race_mbar_init(uint64_t address, uint32_t unused1, uint32_t flags, uint32_t unused3)
{
    asm volatile("" ::"l"(address), "r"(unused1), "r"(flags), "r"(unused3));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    uint32_t offset;
    if (!to_offset(address, flags & kWindowMask, &offset)) return;
    MBarrier* b = find_mbarrier(slot, offset, true);
    if (b == nullptr) return;
    lock(&b->lock);
    b->parity = 0;
    #pragma unroll 1
    for (int i = 0; i < 2 * kAgents; ++i) (&b->released[0][0])[i] = 0;
    unlock(&b->lock);
}

// mbarrier arrivals and waits are followed per thread, with no warp-wide step: the lanes of a
// warp may arrive on different barriers (CUTLASS's consumers release a stage to every CTA of a
// multicast, one lane per CTA) and leave a try_wait loop in different rounds, and a warp-wide
// step among lanes in different calls of one hook deadlocked the warp (mbarrier_pipeline, H200).

extern "C" __device__ __noinline__ void repro_race_mbar_arrive(uint64_t address, uint32_t unused1, uint32_t unused2, uint32_t flags, uint32_t unused4)
{
    asm volatile("" ::"l"(address), "r"(unused1), "r"(unused2), "r"(flags), "r"(unused4));  // every parameter stays: the rewrite passes them all
    if (flags & kNoArrival) return;  // expect_tx alone releases nothing
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    uint32_t offset;
    if (!to_offset(address, flags & kWindowMask, &offset)) {
        atomicAdd(&repro_race_state->remote_operations, 1u);
        return;
    }
    MBarrier* b = find_mbarrier(slot, offset, false);
    if (b == nullptr) return;
    const uint32_t w = warp_index();
    Warp& warp = slot->warps[w];
    lock(&b->lock);
    join(b->released[current_parity(b, offset)], warp.clock);
    unlock(&b->lock);
    atomicAdd(&warp.clock[w], 1u);  // what this thread does next is not covered by the arrival
}

extern "C" __device__ __noinline__ void repro_race_mbar_wait(uint64_t address, uint32_t parity, uint32_t flags,
                                                             uint32_t complete, uint32_t unused4)
{
    asm volatile("" ::"l"(address), "r"(parity), "r"(flags), "r"(complete), "r"(unused4));  // every parameter stays: the rewrite passes them all
    if (complete == 0) return;  // a failed try (a try_wait loop calls this on every round)
    Slot* slot = current_slot();
    uint32_t offset;
    if (slot == nullptr || !to_offset(address, flags & kWindowMask, &offset)) return;
    const MBarrier* b = find_mbarrier(slot, offset, false);
    if (b == nullptr) return;
    // The phase the wait saw complete: the one of the parity asked for, or, waiting on a state
    // token, the one before the current phase. This thread acquires its release before its next
    // access is checked against the warp's clock.
    const uint32_t seen = (flags & kHasParity) ? (parity & 1) : (hardware_parity(offset) ^ 1);
    join(slot->warps[warp_index()].clock, b->released[seen]);
}

extern "C" __device__ __noinline__ void repro_race_mbar_inval(uint64_t address, uint32_t flags, uint32_t unused2)
{
    asm volatile("" ::"l"(address), "r"(flags), "r"(unused2));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    uint32_t offset;
    if (!to_offset(address, flags & kWindowMask, &offset)) return;
    MBarrier* b = find_mbarrier(slot, offset, false);
    if (b != nullptr) atomicExch(&b->key, 0u);
}

// wgmma reading shared memory through descriptors: K-major swizzled operands, whose bytes are
// `rows / 8` atoms of 8 rows of one swizzle width (128, 64 or 32 bytes), SBO apart (the layouts
// CUTLASS and DeepGEMM use); others are not followed.
// The start address is in this CTA's window (14 bits of address >> 4: the low 18 bits, which is
// the CTA's own offset in a cluster too). A kernel steps K inside a swizzled row by advancing the
// start (DeepGEMM: +32 bytes per fp8 k-step), so the operand's first row is the start rounded
// down to the row width. It is not the start rounded down to the 8-row atom (1024 bytes at
// 128B): a stage need not begin at a 1024-byte boundary (DeepGEMM's 1d1d kernel puts its stages
// at 256 mod 1024, behind two 128-byte tensor maps), and rounding that far put every operand
// 256 bytes early, over the bytes before the stage (docs/async-race.md, "Third-party kernels").
// The last atom ends 8 rows after its start; the operand ends there, not a whole SBO later.
__host__ __device__ __forceinline__ bool descriptor_range(uint64_t desc, uint32_t rows, uint32_t* lo, uint32_t* hi)
{
    const uint32_t start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
    const uint32_t stride = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
    const uint32_t layout = static_cast<uint32_t>(desc >> 62);
    if (layout == 0 || stride == 0 || rows < 8) return false;
    const uint32_t width = layout == 1 ? 128 : layout == 2 ? 64 : 32;
    *lo = start & ~(width - 1);
    *hi = *lo + (rows / 8 - 1) * stride + 8 * width;
    return *hi <= kMaxSharedBytes && *hi - *lo <= 65536;
}

extern "C" __device__ __noinline__ void repro_race_wgmma(uint64_t desc_a, uint64_t desc_b, uint32_t n, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(desc_a), "l"(desc_b), "r"(n), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t w = warp_index();
    if (w % 4 != 0) return;  // one warp of the warpgroup follows the group's reads
    Warp& warp = slot->warps[w];
    const uint32_t me = stamp(kWgmmaAgent + w, warp.wgmma_committed + 1);
    #pragma unroll 1
    for (int operand = 0; operand < 2; ++operand) {
        if (operand == 0 && (flags & kAInRegisters)) continue;
        uint32_t lo, hi;
        if (!descriptor_range(operand == 0 ? desc_a : desc_b, operand == 0 ? 64 : n, &lo, &hi)) continue;
        #pragma unroll 1
        for (uint32_t g = lo / kGranuleBytes + lane(); g < hi / kGranuleBytes; g += 32) {
            Granule& gr = slot->granules[g];
            const uint32_t loaded = *(volatile uint32_t*)&gr.async_write;
            if (!known(warp, loaded))
                report(kWgmmaBeforeLoadDone, site, gr.async_write_site, w, loaded, stamp_agent(loaded) - kLoadAgent,
                       g * kGranuleBytes, stamp_clock(loaded));
            gr.async_read = me;
            gr.async_read_site = site;
        }
    }
}

extern "C" __device__ __noinline__ void repro_race_wgmma_commit(uint32_t unused0)
{
    asm volatile("" ::"r"(unused0));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    if (lane() == 0) slot->warps[warp_index()].wgmma_committed += 1;
    __syncwarp();
}

extern "C" __device__ __noinline__ void repro_race_wgmma_wait(uint32_t pending, uint32_t unused1)
{
    asm volatile("" ::"r"(pending), "r"(unused1));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t w = warp_index();
    if (lane() == 0) {
        Warp& warp = slot->warps[w];
        if (warp.wgmma_committed > pending) {
            // The groups are the warpgroup's: its first warp's agent holds their reads.
            atomicMax(&warp.clock[kWgmmaAgent + (w & ~3u)], warp.wgmma_committed - pending);
        }
    }
    __syncwarp();
}

// A write that may rewrite a tensor map: a global store (st.global, or a generic st in a module
// that rewrites maps, from repro_race_access), tensormap.replace, a bulk copy into global memory,
// tensormap.cp_fenceproxy (with kMapRelease: the copy and its release in one, by the whole warp).
// Maps in shared memory are not followed: no TMA copy reads one (PTX: the map operand is a .param,
// .const or .global address); their copy into global memory is the rewrite.
extern "C" __device__ __noinline__ void repro_race_map_write(uint64_t address, uint32_t bytes, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(address), "r"(bytes), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t window = flags & kWindowMask;
    if (window == kWindowCta || window == kWindowCluster) return;
    if (window == kWindowGeneric && __isShared(reinterpret_cast<const void*>(address))) return;
    if ((flags & kMapRelease) && lane() != leader(__activemask())) return;  // one per warp
    map_rewrite(slot, address, bytes, site, (flags & kMapRelease) != 0);
}

// fence.proxy.tensormap::generic.release (kMapRelease): the maps this warp wrote reach the
// tensormap proxy; .acquire [map] (kMapAcquire): this warp's later copies through that map see
// the released write.
extern "C" __device__ __noinline__ void repro_race_map_fence(uint64_t address, uint32_t flags, uint32_t site)
{
    asm volatile("" ::"l"(address), "r"(flags), "r"(site));  // every parameter stays: the rewrite passes them all
    Slot* slot = current_slot();
    if (slot == nullptr) return;
    const uint32_t w = warp_index();
    #pragma unroll 1
    for (int i = 0; i < kMaps; ++i) {
        TensorMapRecord* m = &slot->maps[i];
        const unsigned long long a = *(volatile unsigned long long*)&m->address;
        if (a == 0) break;
        const uint32_t written = *(volatile uint32_t*)&m->write;
        if ((flags & kMapRelease) && written != 0 && stamp_agent(written) == w) m->released = 1;
        if ((flags & kMapAcquire) && address >= a && address < a + kMapBytes)
            m->acquired[w] = *(volatile uint32_t*)&m->released ? written : 0u;
    }
}

// The hooks must reach ptxas even when nothing calls them yet (the rewrite adds the calls):
// one kernel that no one launches references them all.
// Its arguments come from its parameters, so that no call passes a constant cicc could fold
// into the hook (that would change the hook's PTX signature the rewrite calls).
__global__ void repro_race_keep_hooks(int never, uint32_t x, uint64_t y)
{
    if (never != 0x7e57) return;
    repro_race_enter();
    repro_race_exit();
    repro_race_access(y, x, x + 1, x + 2);
    repro_race_bulk_load(y, x, y + 1, y + 2, x + 1, x + 2);
    repro_race_bulk_store(y, x, y + 1, x + 1, x + 2);
    repro_race_bulk_commit(x);
    repro_race_bulk_wait(x, x + 1);
    repro_race_proxy_fence(x);
    repro_race_bar_done(repro_race_bar_arrive(x, x + 1, x + 2, x + 3), x + 4);
    repro_race_mbar_init(y, x, x + 1, x + 2);
    repro_race_mbar_arrive(y, x, x + 1, x + 2, x + 3);
    repro_race_mbar_wait(y, x, x + 1, x + 2, x + 3);
    repro_race_mbar_inval(y, x, x + 1);
    repro_race_wgmma(y, y + 1, x, x + 1, x + 2);
    repro_race_wgmma_commit(x);
    repro_race_wgmma_wait(x, x + 1);
    repro_race_map_write(y, x, x + 1, x + 2);
    repro_race_map_fence(y, x, x + 1);
}

// ---------------------------------------------------------------------------------------------
// Host: the state is made before main (a static object), the findings written at exit.
// ---------------------------------------------------------------------------------------------
namespace repro {
namespace async_race {

inline State*& host_state()
{
    static State* state = nullptr;
    return state;
}

// A diagnosis aid (docs/async-race.md): the clocks, mbarrier records and named barriers a slot
// was left with (slots are not cleared at exit), for the slots of the first two blocks with a
// finding, else for the first two slots.
inline void write_debug_dump(FILE* out, const State& state)
{
    struct Header {
        uint32_t block_key, exited, threads, block[3];
    };
    static_assert(offsetof(Slot, warps) >= sizeof(Header), "a slot starts with its header");
    std::vector<Header> headers(state.slot_count);
    if (cudaMemcpy2D(headers.data(), sizeof(Header), state.slots, sizeof(Slot), sizeof(Header), state.slot_count,
                     cudaMemcpyDeviceToHost) != cudaSuccess)
        return;
    std::vector<uint32_t> chosen;
    for (const Finding& f : state.findings) {
        if (f.kind == 0) continue;
        for (uint32_t i = 0; i < state.slot_count && chosen.size() < 2; ++i) {
            const Header& h = headers[i];
            const bool same = h.threads != 0 && h.block[0] == f.block[0] && h.block[1] == f.block[1] && h.block[2] == f.block[2];
            if (same && std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
        }
    }
    for (uint32_t i = 0; chosen.size() < 2 && i < state.slot_count; ++i)
        if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
    static Slot slot;
    for (const uint32_t i : chosen) {
        if (cudaMemcpy(&slot, state.slots + i, sizeof(Slot), cudaMemcpyDeviceToHost) != cudaSuccess) break;
        std::fprintf(out, "{\"debug_slot\": %u, \"block\": [%u, %u, %u]}\n", i, slot.block[0], slot.block[1], slot.block[2]);
        for (int w = 0; w < kMaxWarps; ++w) {
            if (slot.warps[w].clock[w] == 0) continue;  // no such warp
            std::fprintf(out, "{\"debug_slot\": %u, \"warp\": %d, \"clock\": {", i, w);
            const char* separator = "";
            for (int a = 0; a < kAgents; ++a)
                if (slot.warps[w].clock[a] != 0) {
                    std::fprintf(out, "%s\"%d\": %u", separator, a, slot.warps[w].clock[a]);
                    separator = ", ";
                }
            std::fprintf(out, "}, \"loads\": %u, \"stores\": %u, \"committed\": %u, \"fences\": %u}\n",
                         slot.warps[w].loads, slot.warps[w].stores, slot.warps[w].committed, slot.warps[w].fence_count);
        }
        for (int b = 0; b < kMBarriers; ++b) {
            const MBarrier& m = slot.mbarriers[b];
            if (m.key == 0) continue;
            std::fprintf(out, "{\"debug_mbarrier\": %u, \"parity\": %u, \"released\": [", m.key - 1, m.parity);
            const char* separator = "";
            for (int p = 0; p < 2; ++p)
                for (int a = 0; a < kAgents; ++a)
                    if (m.released[p][a] != 0) {
                        std::fprintf(out, "%s\"parity %d agent %d: %u\"", separator, p, a, m.released[p][a]);
                        separator = ", ";
                    }
            std::fprintf(out, "]}\n");
        }
        for (int m = 0; m < kMaps; ++m) {
            const TensorMapRecord& r = slot.maps[m];
            if (r.address == 0) break;
            std::fprintf(out, "{\"debug_map\": %llu, \"write\": %u, \"write_site\": %u, \"released\": %u, \"loads\": [",
                         r.address, r.write, r.write_site, r.released);
            const char* separator = "";
            for (int w = 0; w < kMaxWarps; ++w)
                if (r.loads[w] != 0 || r.stores[w] != 0 || r.acquired[w] != 0) {
                    std::fprintf(out, "%s\"warp %d: load %u store %u acquired %u\"", separator, w, r.loads[w], r.stores[w],
                                 r.acquired[w]);
                    separator = ", ";
                }
            std::fprintf(out, "]}\n");
        }
        for (int w = 0; w < kMaxWarps; ++w)
            if (slot.warps[w].drain_count != 0)
                std::fprintf(out, "{\"debug_slot\": %u, \"warp\": %d, \"drains\": %u, \"last_drain_seq\": %u}\n", i, w,
                             slot.warps[w].drain_count, slot.warps[w].drain_seq[(slot.warps[w].drain_count - 1) % kDrains]);
        for (int b = 0; b < 3; ++b)
            std::fprintf(out,
                         "{\"debug_named\": %d, \"generation\": %u, \"arrived\": %u, \"released0\": [%u, %u, %u], "
                         "\"released1\": [%u, %u, %u]}\n",
                         b, slot.named[b].generation, slot.named[b].arrived, slot.named[b].released[0][0],
                         slot.named[b].released[0][1], slot.named[b].released[0][2], slot.named[b].released[1][0],
                         slot.named[b].released[1][1], slot.named[b].released[1][2]);
    }
}

inline void write_findings()
{
    State* device = host_state();
    const char* path = std::getenv("REPRO_ASYNC_RACE_OUT");
    if (device == nullptr || path == nullptr) return;
    FILE* out = std::fopen(path, "w");
    if (out == nullptr) return;
    const cudaError_t sync = cudaDeviceSynchronize();
    State state;
    const cudaError_t copy = cudaMemcpy(&state, device, sizeof(State), cudaMemcpyDeviceToHost);
    if (sync != cudaSuccess || copy != cudaSuccess) {
        std::fprintf(out, "{\"error\": \"%s\"}\n", cudaGetErrorString(sync != cudaSuccess ? sync : copy));
        std::fclose(out);
        return;
    }
    std::fprintf(out,
                 "{\"summary\": {\"checked_blocks\": %u, \"unchecked_blocks\": %u, \"operations\": %u, "
                 "\"unknown_sizes\": %u, \"remote_operations\": %u, \"dropped_findings\": %u, "
                 "\"untracked_maps\": %u, \"drain_ordered\": %u}}\n",
                 state.checked_blocks, state.unchecked_blocks, state.operations, state.unknown_sizes,
                 state.remote_operations, state.dropped_findings, state.untracked_maps, state.drain_ordered);
    if (std::getenv("REPRO_ASYNC_RACE_DEBUG") != nullptr) write_debug_dump(out, state);
    for (uint32_t i = 0; i < (uint32_t)kMaxFindings; ++i) {
        const Finding& f = state.findings[i];
        if (f.kind == 0) continue;
        std::fprintf(out,
                     "{\"kind\": %u, \"site\": %u, \"other_site\": %u, \"count\": %u, \"block\": [%u, %u, %u], "
                     "\"warp\": %u, \"other_warp\": %u, \"lo\": %u, \"hi\": %u, \"iteration\": %u, \"other_clock\": %u, \"known\": %u, "
                     "\"map\": %llu}\n",
                     f.kind, f.site, f.other_site, f.count, f.block[0], f.block[1], f.block[2], f.warp, f.other_warp, f.lo,
                     f.hi, f.iteration, f.other_clock, f.known, f.map);
    }
    std::fclose(out);
}

struct Installer {
    Installer()
    {
        if (std::getenv("REPRO_ASYNC_RACE_OUT") == nullptr) return;
        int device = 0, sms = 0;
        if (cudaGetDevice(&device) != cudaSuccess) return;
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return;
        State host{};
        host.slot_count = static_cast<uint32_t>(sms) * kSlotsPerSm;
        if (cudaMalloc(&host.slots, sizeof(Slot) * host.slot_count) != cudaSuccess) return;
        if (cudaMalloc(&host.block_map, sizeof(uint32_t) * kBlockMapSize) != cudaSuccess) return;
        cudaMemset(host.slots, 0, sizeof(Slot) * host.slot_count);
        cudaMemset(host.block_map, 0, sizeof(uint32_t) * kBlockMapSize);
        State* device_state = nullptr;
        if (cudaMalloc(&device_state, sizeof(State)) != cudaSuccess) return;
        cudaMemcpy(device_state, &host, sizeof(State), cudaMemcpyHostToDevice);
        cudaMemcpyToSymbol(repro_race_state, &device_state, sizeof(device_state));
        host_state() = device_state;
        std::atexit(write_findings);
    }
};

static Installer installer;

}  // namespace async_race
}  // namespace repro
