#pragma once
// Rank normalization of every row: Y[r, j] = (number of k with X[r, k] < X[r, j]) / (N - 1),
// so the smallest element of a row maps to 0 and, without ties, the largest to 1 (equal
// elements share the lower rank; a row of N = 1 gives 0). X [R, N] f32 with a row pitch
// `ld` >= N (elements between the starts of consecutive rows: a pitched allocation), Y [R, N]
// f32 packed (pitch N).
//
// One block per row. The block copies its row into dynamic shared memory, __syncthreads(),
// then each thread ranks the elements j = threadIdx.x, threadIdx.x + blockDim.x, ... by
// comparing each with the whole row: N^2 comparisons per row, every thread of a warp reading
// the same shared element at a time (a broadcast, no bank conflicts). The count is exact
// (an integer), and the one rounding is the division, count / (N - 1), in f32.
//
// Defects (rank_norm_kernels::RankDefect), marked "PLANTED DEFECT" where it acts:
//   wrong_stride  row r is read at X + r * N, the packed pitch, instead of X + r * ld. Row 0
//                 is right; every other row ranks a window of N elements that straddles
//                 two rows and the padding between them (zeros in repro's storage), so its
//                 outputs are the ranks of the wrong values. Every read stays inside X's
//                 storage ((R - 1) * ld + N elements). With ld == N it is correct.
//
// Launch: block (256, 1, 1) (any size), grid (R, 1, 1), dynamic smem N * sizeof(float).
// Args: (X, Y, R, N, ld).

#include <cstddef>

namespace rank_norm_kernels {

enum class RankDefect { none, wrong_stride };

}  // namespace rank_norm_kernels

template <rank_norm_kernels::RankDefect Defect = rank_norm_kernels::RankDefect::none>
__global__ void rank_norm(const float* __restrict__ X, float* __restrict__ Y, int R, int N, int ld)
{
    using namespace rank_norm_kernels;
    extern __shared__ __align__(16) unsigned char rank_norm_smem[];
    float* row = reinterpret_cast<float*>(rank_norm_smem);  // [N]

    const int r = blockIdx.x;
    if (r >= R) return;  // uniform over the block: no thread is left waiting at the barrier

    size_t pitch = static_cast<size_t>(ld);
    if constexpr (Defect == RankDefect::wrong_stride) {
        // PLANTED DEFECT: the row offset uses the row length N as the pitch, the packed
        // layout's, as if X had no padding. Y is packed and is indexed with N, right, which is
        // how the two got mixed up. With a padded pitch (ld > N) row r reads elements
        // r*N .. r*N + N-1 of X's storage: the tail of an earlier row, the zero padding after
        // it, the head of the next. Should be ld.
        pitch = static_cast<size_t>(N);
    }
    const float* x = X + static_cast<size_t>(r) * pitch;
    for (int j = threadIdx.x; j < N; j += blockDim.x) row[j] = x[j];
    __syncthreads();  // the whole row is in shared memory before anyone compares against it

    float* y = Y + static_cast<size_t>(r) * N;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        const float v = row[j];
        int below = 0;
        for (int k = 0; k < N; ++k) below += row[k] < v ? 1 : 0;
        // The count is exact; dividing (not multiplying by 1 / (N - 1)) rounds once. N == 1:
        // the single element's rank is 0.
        y[j] = N > 1 ? static_cast<float>(below) / static_cast<float>(N - 1) : 0.0f;
    }
}
