#pragma once
// The reference of tests/gpu/tma_options.yaml: for each TMA descriptor k and each of its boxes b,
// the sum of the elements the box holds (S[k][b]) and how many of them are NaN (NANS[k][b]),
// following the driver's rules (cuTensorMapEncodeTiled): a box of `box` elements with element
// stride s along a dimension holds ceil(box / s) of them, s apart, from its origin (a multiple of
// `box`); an element past the tensor's edge is 0, or NaN with `oob_fill: nan`.
#include <repro/reference.h>

#include "../kernels/tma_box_geometry.h"

inline void tma_box_sums_reference(repro::In X, repro::In Y, repro::Out S, repro::Out NANS) {
  using namespace tma_box_sums;
  for (int k = 0; k < kMaps; ++k) {
    const BoxGeometry g = geometry(k);
    // Extents innermost first, as the descriptor's dimensions.
    const int64_t extents[3] = {g.tensor == 0 ? X.shape(1) : Y.shape(2), g.tensor == 0 ? X.shape(0) : Y.shape(1),
                                g.tensor == 0 ? 1 : Y.shape(0)};
    int64_t boxes[3] = {1, 1, 1}, count = 1;
    for (int d = 0; d < g.rank; ++d) count *= boxes[d] = boxes_along(g, d, extents[d]);
    for (int64_t b = 0; b < kMaxBoxes; ++b) {
      double sum = 0, nans = 0;
      if (b < count && g.loaded) {  // a descriptor only encoded: zeros, as the kernel
        const int64_t origin[3] = {b % boxes[0] * g.box[0], b / boxes[0] % boxes[1] * g.box[1],
                                   b / (boxes[0] * boxes[1]) * g.box[2]};
        for (int64_t i2 = 0; i2 < (g.rank == 3 ? loaded(g, 2) : 1); ++i2)
          for (int64_t i1 = 0; i1 < loaded(g, 1); ++i1)
            for (int64_t i0 = 0; i0 < loaded(g, 0); ++i0) {
              const int64_t e0 = origin[0] + i0 * g.stride[0], e1 = origin[1] + i1 * g.stride[1],
                            e2 = origin[2] + i2 * g.stride[2];
              if (e0 >= extents[0] || e1 >= extents[1] || e2 >= extents[2]) {
                if (g.nan_fill) nans += 1;  // else a zero, which adds nothing
              } else {
                sum += g.tensor == 0 ? X(e1, e0) : Y(e2, e1, e0);
              }
            }
      }
      S(k, b) = sum;
      NANS(k, b) = nans;
    }
  }
}
