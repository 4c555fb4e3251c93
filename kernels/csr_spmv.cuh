#pragma once
// Sparse matrix-vector product with the matrix in CSR form: y = A x, A [R, C] sparse,
//
//   y[r] = sum_{k = row_ptr[r]}^{row_ptr[r + 1] - 1} values[k] * x[col_idx[k]],
//
// row_ptr int32 [R + 1] (row_ptr[0] = 0, row_ptr[R] = NNZ, non-decreasing), col_idx int32
// [NNZ] in [0, C), values f32 [NNZ], x f32 [C], y f32 [R]; f32 accumulation in storage order.
// An empty row (row_ptr[r] == row_ptr[r + 1]) gives 0.
//
// One thread per row (the "scalar" CSR kernel: simple, and fine for rows of a few entries).
// The end of a row's range is clamped to NNZ, so a corrupt row pointer cannot send the loop
// past col_idx and values; with a valid row_ptr the clamp never acts.
//
// Defects (spmv_kernels::SpmvDefect), marked "PLANTED DEFECT" where it acts:
//   row_ptr_past  row r sums the range [row_ptr[r + 1], row_ptr[r + 2]): row r + 1's
//                 entries, so y[r] holds the right answer's y[r + 1]. The last row reads
//                 row_ptr[R + 1], one element past the array: compute-sanitizer memcheck
//                 reports that read ("Invalid __global__ read of size 4 bytes ... 1 bytes
//                 after the nearest allocation", i.e. right at its end). A plain run does not
//                 fault (allocations are mapped in far larger units), and the range
//                 [NNZ, min(whatever was read, NNZ)) is empty, so y[R - 1] = 0 whatever those
//                 bytes hold: no hang, and no read past col_idx or values.
//
// Launch: block (128, 1, 1) (any size), grid (ceil(R/128), 1, 1), no shared memory.
// Args: (row_ptr, col_idx, values, x, y, R, NNZ).

namespace spmv_kernels {

enum class SpmvDefect { none, row_ptr_past };

}  // namespace spmv_kernels

template <spmv_kernels::SpmvDefect Defect = spmv_kernels::SpmvDefect::none>
__global__ void csr_spmv(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                         const float* __restrict__ values, const float* __restrict__ x,
                         float* __restrict__ y, int R, int NNZ)
{
    using namespace spmv_kernels;
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;

    int first = r;  // the row_ptr entry where row r's range begins
    if constexpr (Defect == SpmvDefect::row_ptr_past) {
        // PLANTED DEFECT: one past. The author skipped row_ptr[0] as "the leading zero" (as
        // if row_ptr held each row's END, R entries), but kept the R + 1-entry reading of
        // row_ptr[first + 1] as the end: both ends move one row down. Should be r.
        first = r + 1;
    }
    const int begin = row_ptr[first];
    const int end = min(row_ptr[first + 1], NNZ);  // a guard: never past col_idx / values

    float acc = 0.0f;
    for (int k = begin; k < end; ++k) acc += values[k] * x[col_idx[k]];
    y[r] = acc;
}
