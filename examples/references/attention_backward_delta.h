// Reference of kernels/flash_attention_backward_split.cuh's DELTA, the preprocess launch's result:
// DELTA[b, h, i] = sum over d of dO[b, h, i, d] * O[b, h, i, d] (the row sum of dO * O over the
// whole head dimension), summed in f64. The other inputs are given too, and not read.
#pragma once
#include <repro/reference.h>

inline void attention_backward_delta_reference(repro::In Q, repro::In K, repro::In V, repro::In O, repro::In LSE,
                                               repro::In DO, repro::Out DELTA)
{
    (void)Q, (void)K, (void)V, (void)LSE;
    const int64_t B = O.shape(0), H = O.shape(1), S = O.shape(2), D = O.shape(3);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < S; ++i) {
                double sum = 0.0;
                for (int64_t d = 0; d < D; ++d) sum += DO(b, h, i, d) * O(b, h, i, d);
                DELTA(b, h, i) = sum;
            }
}
