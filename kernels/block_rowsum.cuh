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

// The same row sums with the other classic reduction: shuffles inside each warp, then one
// partial per *warp* through dynamic shared memory, reduced by warp 0. Correct launch: block
// (256, 1, 1), grid (M, 1, 1), and kMaxWarps * sizeof(T) = 32 * sizeof(T) bytes of dynamic
// shared memory, because the kernel clears a slot for every warp a block could have (up to 1024
// threads), so that warp 0 can reduce all 32 lanes without asking how many warps there are.
//
// PLANTED DEFECT (in the launch): the block_rowsum_warps_smem_* specs give it 8 * sizeof(T), the
// 8 warps a 256-thread block has. The stores to slots 8..31 land past the request: 96 bytes for
// float, 192 for double. Unlike block_rowsum above, that overrun is small enough that whether it
// faults depends on how much room the hardware rounds the block's allocation up to, which is the
// point of the example: the f32 launch may run silently (and give the right answer), and only
// compute-sanitizer memcheck sees it; the f64 launch reaches further.
template <typename T>
__global__ void block_rowsum_warps(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                                   int M, int K)
{
    constexpr int kMaxWarps = 32;
    extern __shared__ __align__(16) unsigned char block_rowsum_smem[];
    T* warp_sums = reinterpret_cast<T*>(block_rowsum_smem);

    const int m = blockIdx.x;
    if (m >= M) return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

    // PLANTED DEFECT: kMaxWarps slots cleared; the launch sized the buffer for 8.
    if (warp == 0) warp_sums[lane] = T(0);
    __syncthreads();

    const T* a = A + static_cast<size_t>(m) * K;
    T acc = T(0);
    for (int k = threadIdx.x; k < K; k += blockDim.x) acc += a[k] * x[k];
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();

    if (warp == 0) {
        T sum = warp_sums[lane];  // slots past the block's warps were cleared to zero above
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
        if (lane == 0) y[m] = sum;
    }
    static_assert(kMaxWarps == 32, "warp 0 reduces one slot per lane");
}
