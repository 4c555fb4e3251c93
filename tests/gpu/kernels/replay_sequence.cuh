#pragma once
// Kernels of tests/gpu/replay_sequence.yaml and replay_sequence_mixed.yaml: one small operator of
// two launches, Y = (2 X + 1)^2 + X over an intermediate W. tests/gpu/replay/make.sh compiles
// each into a cubin of its own, which the specs replay (`kind: replay` in `launches:`); the mixed
// spec builds the first from this source instead. One thread an element: the grid covers N.
// make.sh defines REPLAY_SEQUENCE_ONLY (1 or 2) so that each cubin holds its own launch's kernel
// alone: a harness that looked a symbol up in the other launch's module would fail to load it.

namespace replay_sequence_kernels {

#if !defined(REPLAY_SEQUENCE_ONLY) || REPLAY_SEQUENCE_ONLY == 1
// Launch 1: W = 2 X + 1.
__global__ void scale_add(const float* X, float* W) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  W[i] = 2.f * X[i] + 1.f;
}
#endif

#if !defined(REPLAY_SEQUENCE_ONLY) || REPLAY_SEQUENCE_ONLY == 2
// Launch 2: Y = W^2 + X; it reads what launch 1 wrote.
__global__ void square_add(const float* W, const float* X, float* Y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  Y[i] = W[i] * W[i] + X[i];
}
#endif

}  // namespace replay_sequence_kernels
