#pragma once
// A 3x3 smoothing stencil (the binomial blur) over an [H, W] f32 image, row-major, packed:
//
//   out[y, x] = (1/16) * sum_{dy, dx in -1..1} w[dy] * w[dx] * in[y + dy, x + dx],
//   w = (1, 2, 1), i.e. weights 1 2 1 / 2 4 2 / 1 2 1,
//
// with the border replicated: a neighbour outside the image is the nearest edge pixel
// (row clamped to [0, H-1], column to [0, W-1]). The weights sum to 16, so a constant image
// comes back unchanged, exactly (the sums of small integers are exact in f32 and 1/16 is a
// power of two).
//
// One thread per output pixel, a block of (32, 8) threads covering 32 columns x 8 rows. The
// 9 neighbours are read straight from global memory: a block's rows overlap, and the L1 cache
// serves the repeats. Each thread sums the three rows' 1 2 1 combinations, then those with
// 1 2 1, in a fixed order.
//
// Defects (stencil_kernels::StencilDefect), marked "PLANTED DEFECT" where it acts:
//   border_off_by_one  the right neighbour's column is clamped to W instead of W - 1. For the
//                      last column, x + 1 = W is not clamped, and in[yy, W] is element
//                      yy * W + W of the storage: the first pixel of the next row. So the
//                      whole last column is wrong, the rest right. For yy = H - 1 that is
//                      element H * W, 4 bytes past the image: read by the pixels (H-2, W-1)
//                      and (H-1, W-1). A plain run does not fault there (an allocation is
//                      mapped in far larger units) and those two pixels get whatever those 4
//                      bytes hold; compute-sanitizer memcheck reports the two reads ("Invalid
//                      __global__ read of size 4 bytes ... 1 bytes after the nearest
//                      allocation", i.e. right at its end).
//
// Launch: block (32, 8, 1), grid (ceil(W/32), ceil(H/8), 1), no shared memory.
// Args: (in, out, H, W).

#include <cstddef>

namespace stencil_kernels {

enum class StencilDefect { none, border_off_by_one };

// 1 2 1 along a row of the image: the taps at columns xl, x, xr of row `row`.
__device__ __forceinline__ float smooth_row(const float* __restrict__ row, int xl, int x, int xr)
{
    return row[xl] + 2.0f * row[x] + row[xr];
}

}  // namespace stencil_kernels

template <stencil_kernels::StencilDefect Defect = stencil_kernels::StencilDefect::none>
__global__ void __launch_bounds__(256)
stencil3x3(const float* __restrict__ in, float* __restrict__ out, int H, int W)
{
    using namespace stencil_kernels;
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;  // the partial blocks at the right and bottom edges

    // Replicated border: clamp each neighbour's row and column to the image.
    const int yu = max(y - 1, 0), yd = min(y + 1, H - 1);
    const int xl = max(x - 1, 0);
    int xr = min(x + 1, W - 1);
    if constexpr (Defect == StencilDefect::border_off_by_one) {
        // PLANTED DEFECT: the clamp's upper bound is W, the column COUNT, where the last
        // column's index, W - 1, is meant (the same slip as `x <= W` in a loop). It never
        // bites inside the image; in the last column x + 1 = W survives the clamp and
        // row[W] is the next row's first pixel (or, in the last row, 4 bytes past the
        // image). Should be min(x + 1, W - 1).
        xr = min(x + 1, W);
    }

    const auto row = [&](int yy) { return in + static_cast<size_t>(yy) * W; };
    const float sum = smooth_row(row(yu), xl, x, xr) + 2.0f * smooth_row(row(y), xl, x, xr) +
                      smooth_row(row(yd), xl, x, xr);
    out[static_cast<size_t>(y) * W + x] = sum * (1.0f / 16.0f);
}
