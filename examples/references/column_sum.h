// Reference of kernels/column_sum.cuh: D[n] = sum_b X[b, n], summed in f64.
#pragma once
#include <repro/reference.h>

inline void column_sum_reference(repro::In X, repro::Out D)
{
    const int64_t B = X.shape(0), N = X.shape(1);
    for (int64_t n = 0; n < N; ++n) {
        double sum = 0.0;
        for (int64_t b = 0; b < B; ++b) sum += X(b, n);
        D(n) = sum;
    }
}
