#pragma once
// Row sums with a block-wide reduction: y[m] = sum_k A[m, k] * x[k], i.e. the GEMM
// D[M, 1] = A[M, K] @ B[K, 1] with B = x (a matrix-vector product). A is row-major.
// T is float or double, in and out, and the accumulator is T as well.
//
// One block per row m. Each thread accumulates a strided partial sum over k, then the block
// reduces its blockDim.x partials through dynamic shared memory with the classic tree
// (halve the active threads, __syncthreads() between the steps).
//
// Launch: block (256, 1, 1) (any power of two up to 1024), grid (M, 1, 1), and
// blockDim.x * sizeof(T) bytes of dynamic shared memory, one partial per thread: 256 * sizeof(T).
//
// PLANTED DEFECT (in the launch, not in this file): the production launch that the
// block_rowsum_smem_* specs copy asks for 8 * sizeof(T) bytes. Its author thought of one slot
// per warp (8 warps, as in a shuffle-then-smem reduction), but this kernel keeps one slot per
// *thread*, so it stores 8 * 32 = 256 entries into room for 8. The kernel itself is correct:
// with 256 * sizeof(T) bytes (spec block_rowsum_f32) it passes. Nothing checks the size at
// launch; what the overrun does depends on how much shared memory the hardware actually gives
// the block beyond what was asked (see kernels/README.md for the prediction), and
// compute-sanitizer memcheck reports it either way.

#include <cstddef>

template <typename T>
__global__ void block_rowsum(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                             int M, int K)
{
    // Declared as bytes so that every instantiation shares one extern declaration (an
    // `extern __shared__ T partial[]` would clash between float and double); 16-byte alignment
    // covers both.
    extern __shared__ __align__(16) unsigned char block_rowsum_smem[];
    T* partial = reinterpret_cast<T*>(block_rowsum_smem);

    const int m = blockIdx.x;
    if (m >= M) return;  // uniform over the block: no thread is left waiting at a barrier

    // Strided over k so that a warp reads consecutive elements of the row (coalesced).
    const T* a = A + static_cast<size_t>(m) * K;
    T acc = T(0);
    for (int k = threadIdx.x; k < K; k += blockDim.x) acc += a[k] * x[k];

    // PLANTED DEFECT: this store needs blockDim.x * sizeof(T) bytes of dynamic shared memory
    // (one slot per thread); the launch in the block_rowsum_smem_* specs gives 8 * sizeof(T),
    // so threads 8 and up write past the end, and the tree below reads those slots back.
    partial[threadIdx.x] = acc;
    __syncthreads();

    for (int active = blockDim.x / 2; active > 0; active /= 2) {
        if (threadIdx.x < active) partial[threadIdx.x] += partial[threadIdx.x + active];
        __syncthreads();  // every step reads what the previous one wrote
    }
    if (threadIdx.x == 0) y[m] = partial[0];
}
