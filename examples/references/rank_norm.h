// Reference of kernels/rank_norm.cuh: Y[r, j] = #{k : X[r, k] < X[r, j]} / (N - 1), each row
// ranked on its own (equal elements share the lower rank; N = 1 gives 0). X arrives in logical
// order: its row pitch (the spec's strides) is the kernel's business, not the reference's.
#pragma once
#include <repro/reference.h>

#include <algorithm>
#include <vector>

inline void rank_norm_reference(repro::In X, repro::Out Y)
{
    const int64_t R = X.shape(0), N = X.shape(1);
    std::vector<double> sorted(static_cast<size_t>(N));
    for (int64_t r = 0; r < R; ++r) {
        for (int64_t j = 0; j < N; ++j) sorted[static_cast<size_t>(j)] = X(r, j);
        std::sort(sorted.begin(), sorted.end());
        for (int64_t j = 0; j < N; ++j) {
            // Elements strictly less than X[r, j]: the position of its first copy in the sorted row.
            const int64_t below = std::lower_bound(sorted.begin(), sorted.end(), X(r, j)) - sorted.begin();
            Y(r, j) = N > 1 ? static_cast<double>(below) / static_cast<double>(N - 1) : 0.0;
        }
    }
}
