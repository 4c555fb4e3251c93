// Reference of kernels/stencil3x3.cuh: the 3x3 binomial blur (1 2 1 / 2 4 2 / 1 2 1) / 16 with
// the border replicated (neighbour rows and columns clamped to the image), in f64.
#pragma once
#include <repro/reference.h>

#include <algorithm>

inline void stencil3x3_reference(repro::In in, repro::Out out)
{
    const int64_t H = in.shape(0), W = in.shape(1);
    const double w[3] = {1.0, 2.0, 1.0};
    for (int64_t y = 0; y < H; ++y) {
        for (int64_t x = 0; x < W; ++x) {
            double sum = 0.0;
            for (int dy = -1; dy <= 1; ++dy) {
                const int64_t yy = std::clamp<int64_t>(y + dy, 0, H - 1);
                for (int dx = -1; dx <= 1; ++dx) {
                    const int64_t xx = std::clamp<int64_t>(x + dx, 0, W - 1);
                    sum += w[dy + 1] * w[dx + 1] * in(yy, xx);
                }
            }
            out(y, x) = sum / 16.0;
        }
    }
}
