#pragma once
// TMA loads with the descriptor options no example uses (tests/gpu/tma_options.yaml): swizzle 32B
// and 64B, L2 promotion 64B and 128B, an element stride and a NaN out-of-bounds fill; an
// interleaved rank-3 descriptor is passed but not loaded (tma_box_geometry.h says why). Block (b, k) loads box b of descriptor k with
// one cp.async.bulk.tensor and writes the sum of its elements to S[k][b] and the count of NaN
// elements (the fill past the tensor's edge) to NANS[k][b]. A sum does not depend on where in
// shared memory the swizzle or the interleave put each element, so the host reference needs only
// which elements a box holds (tma_box_geometry.h): a wrong option reaching the driver, or a
// descriptor encoded from other dimensions or strides, changes the sums.
//
// Launch: grid (kMaxBoxes, kMaps, 1), block (128, 1, 1), no dynamic shared memory.
#include <cuda.h>

#include <cstdint>

#include "tma_box_geometry.h"
#include "tma_gemm.cuh"

namespace tma_box_sums {

// Box b of descriptor g, as coordinates innermost first; false past the last box.
__device__ __forceinline__ bool box_origin(const BoxGeometry& g, int b, int R, int C, int H, int W, int (&c)[3]) {
  const int64_t extents[3] = {g.tensor == 0 ? C : 4, g.tensor == 0 ? R : W, H};
  int64_t rest = b;
  for (int d = 0; d < g.rank; ++d) {
    const int64_t boxes = boxes_along(g, d, extents[d]);
    c[d] = int(rest % boxes) * g.box[d];
    rest /= boxes;
  }
  return rest == 0;
}

// Thread 0 loads the box into `data` and waits for it; the other threads wait with it
// (kernels/tma_gemm.cuh's mbarrier and TMA helpers).
__device__ __forceinline__ void load_box(const CUtensorMap* map, const BoxGeometry& g, const int (&c)[3], float* data,
                                         uint64_t* full) {
  using namespace tma_kernels;
  if (threadIdx.x == 0) {
    mbarrier_init(full, 1);
    fence_barrier_init();
    mbarrier_arrive_expect_tx(full, uint32_t(loaded_elements(g)) * sizeof(float));
    if (g.rank == 2) tma_load_2d(data, map, full, c[0], c[1]);
    else tma_load_3d(data, map, full, c[0], c[1], c[2]);
  }
  __syncthreads();  // the barrier is initialized before anyone waits on it
  mbarrier_wait(full, 0);
}

}  // namespace tma_box_sums

__global__ void tma_box_sums_kernel(const __grid_constant__ CUtensorMap map_swizzle32,
                                    const __grid_constant__ CUtensorMap map_row_stride,
                                    const __grid_constant__ CUtensorMap map_nan_fill,
                                    const __grid_constant__ CUtensorMap map_interleaved, float* S, float* NANS, int R,
                                    int C, int H, int W) {
  using namespace tma_box_sums;
  // The largest box is 32 x 32 f32 (4 KiB); 1 KiB more to start it on a 1024-byte boundary, where
  // the 128-byte swizzle's pattern begins.
  __shared__ alignas(128) unsigned char raw[4096 + 1024];
  __shared__ alignas(8) uint64_t full;
  __shared__ float warp_sums[4], warp_nans[4];
  const int k = blockIdx.y, b = blockIdx.x;
  const BoxGeometry g = geometry(k);
  const CUtensorMap* maps[kMaps] = {&map_swizzle32, &map_row_stride, &map_nan_fill, &map_interleaved};
  float* data = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));

  int c[3] = {0, 0, 0};
  if (!g.loaded || !box_origin(g, b, R, C, H, W, c)) {  // not loaded, or past its last box: zeros
    if (threadIdx.x == 0) S[k * kMaxBoxes + b] = 0.f, NANS[k * kMaxBoxes + b] = 0.f;
    return;
  }
  load_box(maps[k], g, c, data, &full);

  // Integers in, integer sums out: exact in f32 in any order while below 2^24.
  float sum = 0.f, nans = 0.f;
  for (int i = threadIdx.x; i < loaded_elements(g); i += blockDim.x) {
    const float v = data[i];
    if (isnan(v)) nans += 1.f;
    else sum += v;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
    nans += __shfl_down_sync(0xffffffffu, nans, offset);
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum, warp_nans[threadIdx.x / 32] = nans;
  __syncthreads();
  if (threadIdx.x == 0) {
    S[k * kMaxBoxes + b] = warp_sums[0] + warp_sums[1] + warp_sums[2] + warp_sums[3];
    NANS[k * kMaxBoxes + b] = warp_nans[0] + warp_nans[1] + warp_nans[2] + warp_nans[3];
  }
}
