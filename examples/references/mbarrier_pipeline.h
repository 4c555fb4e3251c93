// Reference of kernels/mbarrier_pipeline.cuh: y[r] = sum_k X[r, k] * w[k], summed in f64.
#pragma once
#include <repro/reference.h>

inline void mbarrier_pipeline_reference(repro::In X, repro::In w, repro::Out y)
{
    const int64_t R = X.shape(0), K = X.shape(1);
    for (int64_t r = 0; r < R; ++r) {
        double sum = 0.0;
        for (int64_t k = 0; k < K; ++k) sum += X(r, k) * w(k);
        y(r) = sum;
    }
}
