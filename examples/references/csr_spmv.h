// Reference of kernels/csr_spmv.cuh: y[r] = sum over k in [row_ptr[r], row_ptr[r + 1]) of
// values[k] * x[col_idx[k]], in f64. The integer tensors arrive as f64 holding their integers.
// Every index goes through the views' checked operator(), so a row pointer or a column index
// outside its array stops the run (exit 2, naming the tensor and the index) instead of
// reading garbage: the reference also validates the spec's CSR structure.
#pragma once
#include <repro/reference.h>

inline void csr_spmv_reference(repro::In row_ptr, repro::In col_idx, repro::In values, repro::In x,
                               repro::Out y)
{
    const int64_t R = y.shape(0);
    for (int64_t r = 0; r < R; ++r) {
        const auto begin = static_cast<int64_t>(row_ptr(r)), end = static_cast<int64_t>(row_ptr(r + 1));
        double sum = 0.0;
        for (int64_t k = begin; k < end; ++k) sum += values(k) * x(static_cast<int64_t>(col_idx(k)));
        y(r) = sum;
    }
}
