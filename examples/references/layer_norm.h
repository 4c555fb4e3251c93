// Reference of kernels/layer_norm.cuh: Mean and Rstd of every row, then Y from them. Y and Rstd
// read Mean and Rstd back as outputs, so that when the spec's `reference.upstream` gives them the
// kernel's values, Y's reference is what the kernel's own statistics make (a wrong Y that matches
// it is wrong only because of them).
#pragma once
#include <repro/reference.h>

#include <cmath>

inline void layer_norm_reference(repro::In X, repro::In W, repro::In B, repro::Out Y, repro::Out Mean,
                                 repro::Out Rstd)
{
    const int64_t R = X.shape(0), N = X.shape(1);
    const double eps = 1e-5;
    for (int64_t r = 0; r < R; ++r) {
        double sum = 0;
        for (int64_t j = 0; j < N; ++j) sum += X(r, j);
        Mean(r) = sum / N;
        double squares = 0;
        for (int64_t j = 0; j < N; ++j) {
            const double centered = X(r, j) - Mean(r);
            squares += centered * centered;
        }
        Rstd(r) = 1.0 / std::sqrt(squares / N + eps);
        for (int64_t j = 0; j < N; ++j) Y(r, j) = (X(r, j) - Mean(r)) * Rstd(r) * W(j) + B(j);
    }
}
