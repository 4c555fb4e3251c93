// Reference of examples/capture_triton/softmax.py's kernel: y[r, :] = softmax(x[r, :]), in f64,
// for `repro capture --reference '{op: custom, source: .../softmax_reference.h, function:
// softmax_rows}'` with the views x_ptr=[ROWS, n_cols] and y_ptr=[ROWS, n_cols] (in that order:
// one parameter per tensor, in the spec's order).
#pragma once
#include <repro/reference.h>

#include <algorithm>
#include <cmath>

inline void softmax_rows(repro::In x, repro::Out y)
{
    const int64_t rows = x.shape(0), cols = x.shape(1);
    for (int64_t r = 0; r < rows; ++r) {
        double max = x(r, 0);
        for (int64_t c = 1; c < cols; ++c) max = std::max(max, x(r, c));
        double sum = 0.0;
        for (int64_t c = 0; c < cols; ++c) sum += std::exp(x(r, c) - max);
        for (int64_t c = 0; c < cols; ++c) y(r, c) = std::exp(x(r, c) - max) / sum;
    }
}
