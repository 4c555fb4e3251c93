#pragma once
// Two outputs from one input, one thread per element: y = 2x and z = x + 1. With
// kTailDefect the last, partial block of the launch adds 2 instead of 1 to z (y stays
// right): the run must judge each output on its own and name the one that is wrong.
template <bool kTailDefect>
__global__ void two_outputs(const float* x, float* y, float* z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool tail_block = (blockIdx.x + 1) * blockDim.x > unsigned(n);
  y[i] = 2.0f * x[i];
  z[i] = x[i] + (kTailDefect && tail_block ? 2.0f : 1.0f);
}
