#pragma once
// The four TMA descriptors of tests/gpu/tma_options.yaml as the kernel (tma_box_sums.cuh) and the
// host reference (../references/tma_box_sums.h) both need them: which tensor, the box and the
// element strides innermost first (the driver's order), and the out-of-bounds fill. The spec's
// `tma:` section says the same in `shape` order; a mismatch shows as wrong sums on the GPU.
#include <cstdint>

// Callable from the kernel and from the host reference (which nvcc compiles too).
#if defined(__CUDACC__)
#define TMA_BOX_HOST_DEVICE __host__ __device__
#else
#define TMA_BOX_HOST_DEVICE
#endif

namespace tma_box_sums {

struct BoxGeometry {
  int tensor;         // 0: X [R, C], 1: Y [H, W, 4]
  int rank;           // 2 for X, 3 for Y
  int box[3];         // elements traversed along each dimension, innermost first
  int stride[3];      // element strides, innermost first (the innermost is 1 unless interleaved)
  bool nan_fill;      // oob_fill: nan (else zeros)
  bool loaded;        // false: encoded only, its boxes 0 (below)
};

constexpr int kMaps = 4;
// Outputs S and NANS are [kMaps, kMaxBoxes]: map k's box b at [k][b], zeros past its last box.
constexpr int kMaxBoxes = 72;

// map_swizzle32: X, box [16, 8], swizzle 32B, l2 64B.
// map_row_stride: X, box [8, 16], element_strides [2, 1] (every other row), swizzle 64B, l2 128B.
// map_nan_fill: X, box [32, 32], swizzle 128B, l2 256B, oob_fill nan (the edge boxes hold NaN).
// map_interleaved: Y, box [2, 16, 4], interleave 16B (4 f32 channels: one 16-byte chunk): encoded
//   (the driver accepts it), but not loaded. On an H100 (run 89) no load through an interleaved
//   descriptor completed: f32 with 16B, bf16 [.., 8] with 16B, f32 [.., 8] with 32B and swizzle
//   32B, each with the transaction count as counted, halved, doubled and quadrupled; the same box
//   without interleave loads right. Why is not known.
TMA_BOX_HOST_DEVICE constexpr BoxGeometry geometry(int k) {
  switch (k) {
    case 0: return {0, 2, {8, 16, 1}, {1, 1, 1}, false, true};
    case 1: return {0, 2, {16, 8, 1}, {1, 2, 1}, false, true};
    case 2: return {0, 2, {32, 32, 1}, {1, 1, 1}, true, true};
    default: return {1, 3, {4, 16, 2}, {1, 1, 1}, false, false};
  }
}

// Elements a box holds along dimension d: ceil(box / stride) (cuTensorMapEncodeTiled).
TMA_BOX_HOST_DEVICE constexpr int loaded(const BoxGeometry& g, int d) { return (g.box[d] + g.stride[d] - 1) / g.stride[d]; }

TMA_BOX_HOST_DEVICE constexpr int loaded_elements(const BoxGeometry& g) {
  int n = 1;
  for (int d = 0; d < g.rank; ++d) n *= loaded(g, d);
  return n;
}

// Boxes along dimension d of a tensor with `extent` elements there.
TMA_BOX_HOST_DEVICE constexpr int64_t boxes_along(const BoxGeometry& g, int d, int64_t extent) {
  return (extent + g.box[d] - 1) / g.box[d];
}

}  // namespace tma_box_sums
