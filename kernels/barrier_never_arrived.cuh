#pragma once
// Warp-specialized f32 GEMM, D[M, N] = A[M, K] @ B[K, N], all row-major: one producer warp
// copies each K tile of A and B into shared memory and tells the consumers through an mbarrier
// (sm_90's transaction barrier in shared memory) that the tile is there; BM * BN consumer
// threads, one per output of the block's BM x BN tile, wait on it, accumulate, and release the
// tile through a second mbarrier so the producer can overwrite it.
//
// PLANTED DEFECT: the "full" barrier is initialized for kProducerWarps = 2 arrivals, one per
// producer warp, from when A and B had a producer warp each. A refactor merged them into the one
// producer warp below and left the count alone. Each K tile gets one arrival of the two, so the
// barrier's first phase never completes: every consumer spins in try_wait on tile 0, the producer
// spins on the "empty" barrier before tile 1, and the kernel never finishes.
//
// Launch: block (BM * BN + 32, 1, 1), i.e. one producer warp after the consumers (BM * BN a
// multiple of 32); grid (ceil(N / BN), ceil(M / BM), 1); static shared memory only. Apart from
// the defect, any M, N, K >= 1: partial tiles are zero-filled and masked on store.

#include <cstddef>
#include <cstdint>

namespace gemm_kernels {

// The few mbarrier operations this kernel needs, as PTX (ISA 7.8+, sm_90): an mbarrier is a
// 64-bit word in shared memory holding the expected arrival count, the arrivals still pending
// and a phase bit that flips each time the pending count reaches zero.
__device__ __forceinline__ uint32_t smem_address(const void* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t expected_arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)),
                 "r"(expected_arrivals)
                 : "memory");
}

// Release semantics: the caller's earlier shared-memory writes are visible to a thread that
// then sees the phase complete.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar))
                 : "memory");
}

// Waits (acquire) until the phase of the given parity has completed. try_wait gives up after a
// hardware-defined time, hence the loop; nothing bounds the loop itself.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            "  .reg .pred p;\n"
            "  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
            "  selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(smem_address(bar)), "r"(parity)
            : "memory");
    }
}

}  // namespace gemm_kernels

template <int BM, int BN, int BK>
__global__ void barrier_never_arrived(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ D, int M, int N, int K)
{
    using namespace gemm_kernels;
    constexpr int kConsumers = BM * BN;  // threads 0 .. kConsumers-1; the producer warp follows
    constexpr int kProducerWarps = 2;    // PLANTED DEFECT: stale; there is one producer warp now
    static_assert(kConsumers % 32 == 0, "the producer must be a whole warp of its own");

    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    __shared__ uint64_t full;   // the tile in As/Bs is ready: one arrival per producer warp
    __shared__ uint64_t empty;  // the consumers are done with it: one arrival per consumer

    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const int tid = threadIdx.x;

    if (tid == 0) {
        // PLANTED DEFECT: expects kProducerWarps = 2 arrivals per phase, gets 1.
        mbarrier_init(&full, kProducerWarps);
        mbarrier_init(&empty, kConsumers);
    }
    __syncthreads();  // the initialized barriers are visible to every thread of the block

    const int k_tiles = (K + BK - 1) / BK;
    if (tid >= kConsumers) {
        // Producer warp: 32 lanes copy the tile, zero-filling outside A and B.
        const int lane = tid - kConsumers;
        for (int kt = 0; kt < k_tiles; ++kt) {
            // Tile kt - 1 must be consumed before it is overwritten: phase kt - 1 of `empty`.
            if (kt > 0) mbarrier_wait(&empty, (kt - 1) & 1);
            const int k0 = kt * BK;
            for (int i = lane; i < BM * BK; i += 32) {
                const int m = m0 + i / BK, k = k0 + i % BK;
                As[i / BK][i % BK] = (m < M && k < K) ? A[static_cast<size_t>(m) * K + k] : 0.0f;
            }
            for (int i = lane; i < BK * BN; i += 32) {
                const int k = k0 + i / BN, n = n0 + i % BN;
                Bs[i / BN][i % BN] = (k < K && n < N) ? B[static_cast<size_t>(k) * N + n] : 0.0f;
            }
            __syncwarp();  // orders all lanes' stores before lane 0's release-arrive
            if (lane == 0) mbarrier_arrive(&full);  // the one arrival per tile
        }
        return;
    }

    // Consumers: thread (r, c) of the BM x BN tile.
    const int r = tid / BN, c = tid % BN;
    float acc = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbarrier_wait(&full, kt & 1);  // tile kt is phase kt of `full`: never completes (defect)
        for (int k = 0; k < BK; ++k) acc = fmaf(As[r][k], Bs[k][c], acc);
        mbarrier_arrive(&empty);
    }
    const int m = m0 + r, n = n0 + c;
    if (m < M && n < N) D[static_cast<size_t>(m) * N + n] = acc;
}
