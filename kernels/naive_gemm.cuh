#pragma once
// Naive GEMM: D[M, N] = A[M, K] @ B[K, N], all row-major, fp32 accumulation.
//
// One thread per output element, no shared memory: the simplest kernel that
// is obviously right, useful as a known-good baseline for the harness itself.
// T is __nv_bfloat16 (bf16 in and out) or float (f32 in and out).
//
// Launch: block (32, 8, 1), grid (ceil(N / 32), ceil(M / 8), 1); no dynamic
// shared memory. Any M, N, K >= 1 is valid.

#include "gemm_common.cuh"

#include <cstddef>

template <typename T>
__global__ void naive_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ D,
                           int M, int N, int K)
{
    using gemm_kernels::from_float;
    using gemm_kernels::to_float;

    // x walks along N so that a warp reads consecutive elements of a B row and
    // writes consecutive elements of a D row (coalesced); the A element is the
    // same for the whole warp (a broadcast).
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;

    const T* a = A + static_cast<size_t>(m) * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(to_float(a[k]), to_float(B[static_cast<size_t>(k) * N + n]), acc);
    }
    D[static_cast<size_t>(m) * N + n] = from_float<T>(acc);
}
