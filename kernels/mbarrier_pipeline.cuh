#pragma once
// A producer/consumer pipeline through a ring of shared-memory stages guarded by mbarriers
// (sm_90): a matrix-vector product
//   y[r] = sum_k X[r, k] * w[k],   X [R, K] row-major f32, w [K] f32, y [R] f32,
// f32 accumulation in a fixed order, so every run gives bitwise the same y.
//
// A block is ConsumerWarps consumer warps (threads 0 .. 32 ConsumerWarps - 1) and one producer
// warp after them. Shared memory holds Stages stages of Chunk floats each, and two mbarriers per
// stage:
//   full[s]   32 arrivals per phase: every producer lane arrives (release) once it has stored its
//             part of the chunk into stage s;
//   empty[s]  32 ConsumerWarps arrivals per phase: every consumer thread arrives (release) once
//             it is done reading stage s.
// The k-th chunk this block moves (counted over all its rows) goes through stage s = k % Stages,
// round u = k / Stages. The producer, before filling it, waits for phase u - 1 of empty[s] (the
// previous round's readers are done; round 0 needs no wait), then stores it and arrives on
// full[s]; the consumers wait for phase u of full[s], read, and arrive on empty[s]. Parities:
// u & 1 on full, (u - 1) & 1 on empty. A phase can never be two ahead of a waiter, because
// each barrier's next phase needs the other barrier's current one.
//
// The producer is register-staged, as such producers usually are: it loads chunk k + 1 from
// global memory into registers right after publishing chunk k, and stores it once the stage is
// free, so a wait on empty[s] overlaps with the load. Each lane moves Chunk / 32 floats of a
// chunk (lane + 32 i: coalesced), zero beyond the row's end, so the last chunk of a row may be
// partial and K is arbitrary.
//
// Consumer thread c reads elements c, c + C, c + 2C, ... of each chunk (C = 32 ConsumerWarps
// threads: conflict-free), multiplies each with w at its column (read through the read-only
// cache) and accumulates into one register per row. At a row's end each consumer warp reduces
// its 32 partials with a fixed butterfly, lane 0 puts the warp's sum into red[parity][warp],
// the consumer warps meet at a named barrier (bar.sync 1, C: the producer does not take part),
// and consumer thread 0 adds the warp sums in warp order and stores y[r]. red is double-buffered
// by row parity, so the next row's sums cannot overwrite a slot thread 0 is still reading: one
// barrier per row suffices.
//
// Rows are handed out in tiles of kRowsPerTile = 16 consecutive rows (the reference's block),
// tile b, b + gridDim.x, ... to block b: a persistent launch of any grid size; the pipeline and
// its counters run on across rows and tiles.
//
// PLANTED DEFECT (pipeline_kernels::PipelineDefect::early_release): the consumers release a
// stage one phase early: they arrive on empty[s] right after full[s]'s wait, BEFORE reading the
// stage, and read it afterwards. Once every consumer has arrived, the producer may refill the
// stage while the last consumers to arrive still read it, and they sum the next round's values
// (another chunk, possibly another row's) into this row.
//
// Why the defect hides: the pipeline is producer-bound. One warp whose every chunk costs a round
// trip to L2 or DRAM feeds ConsumerWarps warps that need a few shared loads and FMAs per chunk,
// so the consumers are waiting on full[s] long before each chunk arrives, and a stage released
// early is refilled only Stages - 1 fills later, microseconds after its readers are done. Only
// when the ring runs full (consumers slower than the producer, e.g. held back by other work on
// the SM), is the producer waiting on empty[s] at the moment of release; it then stores its
// prefetched registers within tens of cycles, against the last consumer warp's loads issued just
// after its arrival: a race of a few dozen cycles, which a consumer warp delayed between its
// arrive and its loads loses. racecheck may or may not flag it (the reads and writes are ordered
// by nothing but an mbarrier that was arrived on too early; its mbarrier tracking decides).
//
// Delay points (Delays = true): repro::delay<Delays>(0) in the consumers right after full[s]'s
// wait (and, in the defect, after the early arrival), before the stage's reads (repro_trace.cuh):
// --stress jitter sleeps consumer warps there, so that the ring runs full and a warp that
// arrived falls behind its reads, which is what the defect needs to show: on the H200, 100 of 100
// invocations under jitter, 0 of 100 without stress (docs/gpu-validation.md, run 37). In the
// correct kernel the stage is not released before the reads, whatever the delay (0 of 50).
//
// Launch: block (32 ConsumerWarps + 32, 1, 1), grid (CTAS, 1, 1) for any CTAS >= 1, no dynamic
// shared memory (static: Stages * Chunk * 4 bytes of stages, the barriers, 2 ConsumerWarps
// floats). Args: (X, w, y, R, K). Chunk must be a multiple of 32 ConsumerWarps (and so of 32).

#include "../crates/repro-contract/instrument/repro_trace.cuh"

#include <cstddef>
#include <cstdint>

namespace pipeline_kernels {

enum class PipelineDefect { none, early_release };

constexpr int kRowsPerTile = 16;          // consecutive rows per work item of a block
constexpr uint32_t kConsumerBarrier = 1;  // named barrier id of the consumer warps

__device__ __forceinline__ uint32_t smem_addr(const void* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}

// Release: this thread's earlier shared-memory accesses (the stores of a fill, the loads of a
// read) are ordered before the arrival, for whoever then sees the phase complete.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Acquire: returns once the phase of parity `parity` has completed. try_wait may give up after a
// hardware time limit, hence the loop.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity)
{
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n"
            "  .reg .pred p;\n"
            "  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
            "  selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

template <int Stages, int Chunk, int ConsumerWarps>
struct PipelineShared {
    float stage[Stages][Chunk];
    alignas(8) uint64_t full[Stages];
    alignas(8) uint64_t empty[Stages];
    float red[2][ConsumerWarps];  // per-warp row sums, double-buffered by row parity
};

// Position in the ring: the stage of the next chunk and its round's parity; advanced once per
// chunk by producer and consumers alike, each with its own copy.
template <int Stages>
struct RingPosition {
    int stage = 0;
    uint32_t round = 0;  // rounds completed through this stage index: the phase number

    __device__ __forceinline__ void advance()
    {
        if (++stage == Stages) {
            stage = 0;
            ++round;
        }
    }
};

}  // namespace pipeline_kernels

template <int Stages, int Chunk, int ConsumerWarps,
          pipeline_kernels::PipelineDefect Defect = pipeline_kernels::PipelineDefect::none, bool Delays = false>
__global__ void __launch_bounds__(32 * ConsumerWarps + 32)
mbarrier_pipeline(const float* __restrict__ X, const float* __restrict__ w, float* __restrict__ y, int R, int K)
{
    using namespace pipeline_kernels;
    constexpr int kConsumers = 32 * ConsumerWarps;
    constexpr int kPerLane = Chunk / 32;        // floats a producer lane moves per chunk
    constexpr int kPerConsumer = Chunk / kConsumers;  // floats a consumer thread reads per chunk
    static_assert(Stages >= 2, "a ring of at least two stages");
    static_assert(Chunk % kConsumers == 0, "every consumer thread reads the same number of floats");

    __shared__ PipelineShared<Stages, Chunk, ConsumerWarps> sh;

    const int tid = static_cast<int>(threadIdx.x);
    if (tid == 0) {
        for (int s = 0; s < Stages; ++s) {
            mbar_init(&sh.full[s], 32);
            mbar_init(&sh.empty[s], kConsumers);
        }
    }
    __syncthreads();  // the initialized barriers are visible to every thread; the last block-wide barrier

    const int chunks_per_row = (K + Chunk - 1) / Chunk;
    const int row_tiles = (R + kRowsPerTile - 1) / kRowsPerTile;
    RingPosition<Stages> pos;

    if (tid >= kConsumers) {
        // ---- Producer warp ----
        const int lane = tid - kConsumers;
        // The chunks of this block, in order: (tile, row of the tile, chunk of the row).
        int tile = static_cast<int>(blockIdx.x), row = 0, chunk = 0;
        if (tile >= row_tiles) return;
        auto row_of = [&]() { return tile * kRowsPerTile + row; };
        auto load = [&](float (&regs)[kPerLane]) {
            const float* src = X + static_cast<size_t>(row_of()) * K;
            const int k0 = chunk * Chunk;
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                const int k = k0 + lane + 32 * i;
                regs[i] = k < K ? __ldg(src + k) : 0.0f;
            }
        };
        // Steps to the next chunk; false past the block's last one.
        auto next = [&]() {
            if (++chunk < chunks_per_row) return true;
            chunk = 0;
            if (++row < kRowsPerTile && row_of() < R) return true;
            row = 0;
            tile += static_cast<int>(gridDim.x);
            return tile < row_tiles;
        };

        float regs[kPerLane];
        load(regs);
        bool more = true;
        while (more) {
            if (pos.round > 0) mbar_wait(&sh.empty[pos.stage], (pos.round - 1) & 1u);  // readers of round - 1 done
            float* dst = sh.stage[pos.stage];
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) dst[lane + 32 * i] = regs[i];
            mbar_arrive(&sh.full[pos.stage]);  // this lane's part of the chunk is there
            pos.advance();
            more = next();
            if (more) load(regs);  // the next chunk's loads overlap the next wait on empty
        }
        return;
    }

    // ---- Consumer warps ----
    const int lane = tid % 32, warp = tid / 32;
    uint32_t row_parity = 0;
    for (int tile = static_cast<int>(blockIdx.x); tile < row_tiles; tile += static_cast<int>(gridDim.x)) {
        for (int row = tile * kRowsPerTile; row < min(R, (tile + 1) * kRowsPerTile); ++row) {
            float acc = 0.0f;
            for (int chunk = 0; chunk < chunks_per_row; ++chunk) {
                mbar_wait(&sh.full[pos.stage], pos.round & 1u);  // the chunk has landed
                const float* src = sh.stage[pos.stage];
                const int k0 = chunk * Chunk;
                if constexpr (Defect == PipelineDefect::early_release) {
                    // PLANTED DEFECT: the stage is released one phase early: the arrival on
                    // empty[s] comes BEFORE the reads below, so once every consumer has arrived
                    // the producer may store the next round's chunk over the values this thread
                    // is about to read. Invisible while the producer is still loading that chunk
                    // from global memory when the last consumer arrives (the usual case: the
                    // pipeline is producer-bound). Should come after the loop below, as in
                    // PipelineDefect::none.
                    mbar_arrive(&sh.empty[pos.stage]);
                }
                repro::delay<Delays>(0);  // --stress jitter: a consumer warp may fall behind here
                float x[kPerConsumer];
#pragma unroll
                for (int i = 0; i < kPerConsumer; ++i) x[i] = src[tid + kConsumers * i];
                if constexpr (Defect == PipelineDefect::none) {
                    mbar_arrive(&sh.empty[pos.stage]);  // done reading: the producer may refill the stage
                }
#pragma unroll
                for (int i = 0; i < kPerConsumer; ++i) {
                    const int k = k0 + tid + kConsumers * i;
                    if (k < K) acc = fmaf(x[i], __ldg(w + k), acc);  // the zero tail adds nothing anyway
                }
                pos.advance();
            }

            // The row's sum: a fixed butterfly per warp, then the warp sums in warp order.
#pragma unroll
            for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
            if (lane == 0) sh.red[row_parity][warp] = acc;
            named_barrier_sync(kConsumerBarrier, kConsumers);
            if (tid == 0) {
                float sum = 0.0f;
#pragma unroll
                for (int i = 0; i < ConsumerWarps; ++i) sum += sh.red[row_parity][i];
                y[row] = sum;
            }
            row_parity ^= 1u;
        }
    }
}
