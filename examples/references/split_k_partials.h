// Reference of kernels/split_k_gemm.cuh's workspace, the partials launch's result:
// workspace[s, m, n] = sum over split s's K columns of A[m, k] * B[k, n], summed in f64.
// Split s covers K columns [s * Ks, min(K, (s + 1) * Ks)) with Ks = ceil_div(ceil_div(K, SPLITS),
// BK) * BK and BK = 32 (the examples' K tile); trailing splits past K are all zeros.
#pragma once
#include <repro/reference.h>

#include <algorithm>

inline void split_k_partials_reference(repro::In A, repro::In B, repro::Out workspace)
{
    const int64_t splits = workspace.shape(0), M = A.shape(0), K = A.shape(1), N = B.shape(1);
    const int64_t BK = 32;
    const int64_t per_split = (K + splits - 1) / splits;
    const int64_t Ks = (per_split + BK - 1) / BK * BK;
    for (int64_t s = 0; s < splits; ++s) {
        const int64_t begin = std::min(K, s * Ks), end = std::min(K, (s + 1) * Ks);
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double sum = 0.0;
                for (int64_t k = begin; k < end; ++k) sum += A(m, k) * B(k, n);
                workspace(s, m, n) = sum;
            }
    }
}
