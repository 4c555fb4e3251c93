#pragma once
// Column sums over a batch: D[n] = sum_b X[b, n], X [B, N] row-major f32, D [N] f32,
// f32 accumulation. A two-phase shared-memory reduction:
//
//   A block of (32, 8) threads owns a tile of 32 adjacent columns. Phase 1: thread (x, y) sums
//   rows y, y + 8, y + 16, ... of column x of its tile (warp y reads 32 adjacent floats of a
//   row: coalesced) and stores the partial in shared memory, partial[y][x]. __syncthreads().
//   Phase 2: the 32 threads with y == 0 (warp 0) add the 8 partials of their column in order,
//   so the summation order is fixed and every run gives bitwise the same D, and store it.
//
// The blocks walk the column tiles in a grid-stride loop, so any grid is right: one block per
// tile (grid ceil(N/32), the usual launch) or fewer blocks that take several tiles each. A
// second __syncthreads() ends every tile, so that the next tile's phase 1 cannot overwrite
// partials that phase 2 is still reading.
//
// The last tile, when N % 32 != 0, would run past column N-1. It is slid left to end at
// column N-1 (it starts at N-32), so every lane has a real column to read: no idle lanes and
// no masked loads in the tail. The slid tile repeats columns the tile before it wrote, and
// stores only its own new ones, the columns from its unslid start on. (For N < 32 the only
// tile starts at column 0 and the columns past N-1 are masked.)
//
// Defects (column_sum_kernels::ColumnSumDefect), each marked "PLANTED DEFECT" where it acts:
//   missed_tail  the slid tail tile stores its sums at the unslid columns: the last
//                N % 32 outputs get the sums of the columns 32 - N % 32 to their left.
//                Only the last partial tile is wrong; with --ones every column sum is B,
//                so it passes.
//   no_sync      no __syncthreads() between the phases: warp 0 reads the other warps'
//                partials while they may still be summing, and gets what the slot held
//                before (the previous tile's partial, or another kernel's leftovers): a
//                shared-memory race; the wrong columns change from run to run.
//
// Launch: block (32, 8, 1) exactly, grid (ceil(N/32), 1, 1) (or fewer blocks), no dynamic
// smem (1 KiB static). Args: (X, D, B, N).

namespace column_sum_kernels {

enum class ColumnSumDefect { none, missed_tail, no_sync };

constexpr int kCols = 32;  // columns per tile: blockDim.x, one warp wide
constexpr int kRows = 8;   // threads per column: blockDim.y, one partial each

}  // namespace column_sum_kernels

template <column_sum_kernels::ColumnSumDefect Defect = column_sum_kernels::ColumnSumDefect::none>
__global__ void __launch_bounds__(column_sum_kernels::kCols * column_sum_kernels::kRows)
column_sum(const float* __restrict__ X, float* __restrict__ D, int B, int N)
{
    using namespace column_sum_kernels;
    __shared__ float partial[kRows][kCols];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tiles = (N + kCols - 1) / kCols;

    // The trip count depends on blockIdx alone: every thread of the block reaches the barriers.
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int start = tile * kCols;                 // the tile's own first column
        const int first = max(0, min(start, N - kCols));  // slid left for the tail tile
        const int col = first + tx;

        // Phase 1: a strided partial sum down column `col`.
        float acc = 0.0f;
        if (col < N) {  // false only when N < 32
            for (int b = ty; b < B; b += kRows) acc += X[static_cast<size_t>(b) * N + col];
        }
        partial[ty][tx] = acc;

        if constexpr (Defect == ColumnSumDefect::no_sync) {
            // PLANTED DEFECT: the barrier between the phases is missing. Warp 0 goes on to
            // read partial[1..7][tx] as soon as ITS OWN phase 1 is done; warps 1..7 store
            // theirs when they finish, a little earlier or later (their loads return at
            // different times). A slot read too early still holds the previous tile's partial
            // (other columns) or, in a block's first tile, whatever the last kernel left in
            // that shared memory. racecheck reports the RAW hazard between the store above and
            // the load in phase 2. Should be __syncthreads(), as below.
        } else {
            __syncthreads();  // all 8 partials of every column are stored before phase 2 reads them
        }

        // Phase 2: warp 0 adds the 8 partials of its lane's column, in a fixed order.
        if (ty == 0) {
            float sum = 0.0f;
#pragma unroll
            for (int y = 0; y < kRows; ++y) sum += partial[y][tx];

            int out = col;
            if constexpr (Defect == ColumnSumDefect::missed_tail) {
                // PLANTED DEFECT: the store uses the unslid column, start + tx, as if the tile
                // had not been slid. For every full tile start == first and nothing changes;
                // in the tail tile lane tx summed column N - 32 + tx but writes column
                // start + tx, so its N % 32 stored outputs hold the sums of the columns
                // 32 - N % 32 to their left. Every load stays in bounds and every output is
                // written; only the last partial tile is wrong. Should be `col`.
                out = start + tx;
            }
            if (out >= start && out < N) D[out] = sum;  // the slid tail's repeated columns are skipped
        }
        __syncthreads();  // phase 2 has read every partial before the next tile overwrites them
    }
}
