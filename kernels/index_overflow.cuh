#pragma once
// One-thread-per-output bf16 GEMM, D[M, N] = A[M, K] @ B[K, N], all row-major, fp32
// accumulation, in two versions that differ in one line: how the output's flat index is computed.
//
//   index_overflow        PLANTED DEFECT: `int idx = m * N + n`. Right as long as M * N <= 2^31 - 1
//                         (every test shape anyone tried), wrong past it: the product wraps to a
//                         negative int (signed overflow, undefined behaviour; in practice two's
//                         complement), which is sign-extended into a store about 4 GiB *before* D.
//   index_overflow_fixed  the same index in 64 bits: size_t(m) * N + n.
//
// Only D needs 64 bits at the example's shape (M = N = 46341, K = 8: m * K and k * N + n stay far
// below 2^31), and the reads already use size_t, so that the store is the one difference.
//
// Launch: block (256, 1, 1), grid (ceil(N / 256), M, 1); no dynamic shared memory. The grid's y
// is one row each, so M <= 65535 (CUDA's limit on grid.y); any N, K >= 1.

#include "gemm_common.cuh"

#include <cstddef>

namespace gemm_kernels {

// Row m of A times column n of B in fp32: the body both kernels share.
__device__ __forceinline__ float row_dot_col(const __nv_bfloat16* __restrict__ A,
                                             const __nv_bfloat16* __restrict__ B, int m, int n,
                                             int N, int K)
{
    const __nv_bfloat16* a = A + static_cast<size_t>(m) * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(to_float(a[k]), to_float(B[static_cast<size_t>(k) * N + n]), acc);
    }
    return acc;
}

}  // namespace gemm_kernels

__global__ void index_overflow(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                               __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    // x walks along N: a warp reads consecutive elements of a B row and writes consecutive
    // elements of a D row (coalesced).
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y;
    if (m >= M || n >= N) return;

    const float acc = gemm_kernels::row_dot_col(A, B, m, n, N, K);
    // PLANTED DEFECT: the flat index in 32-bit int. Once m * N + n passes 2^31 - 1 it wraps to
    // about -2^31, and D[idx] stores 4 GiB below D instead of into its last elements.
    const int idx = m * N + n;
    D[idx] = gemm_kernels::from_float<__nv_bfloat16>(acc);
}

__global__ void index_overflow_fixed(const __nv_bfloat16* __restrict__ A,
                                     const __nv_bfloat16* __restrict__ B,
                                     __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y;
    if (m >= M || n >= N) return;

    const float acc = gemm_kernels::row_dot_col(A, B, m, n, N, K);
    // The fix: widen before multiplying (size_t(m * N) would widen the already-wrapped product).
    const size_t idx = static_cast<size_t>(m) * N + n;
    D[idx] = gemm_kernels::from_float<__nv_bfloat16>(acc);
}
