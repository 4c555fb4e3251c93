#pragma once
// Layer normalization of every row, with its statistics as outputs (as Triton's fused LayerNorm
// and Apex's write them for the backward pass):
//   Mean[r] = sum_j X[r, j] / N
//   Rstd[r] = 1 / sqrt(sum_j (X[r, j] - Mean[r])^2 / N + eps)
//   Y[r, j] = (X[r, j] - Mean[r]) * Rstd[r] * W[j] + B[j]
// X, Y [R, N], W, B [N], Mean, Rstd [R], all f32, packed.
//
// One block of 256 threads per row. The row is covered by a power-of-two block of 512 lanes,
// two per thread (columns t and t + 256), lanes at or past N masked: loaded as 0 and never
// stored. Sums go through warp shuffles, then one partial per warp in shared memory.
//
// Defects (layer_norm_kernels::NormDefect), marked "PLANTED DEFECT" where they act:
//   padded_variance   the variance sums (x - mean)^2 over all 512 lanes: each padding lane adds
//                     mean^2. The statistics are wrong (Rstd; Mean is right), and Y only through
//                     them. The bug of a released Triton LayerNorm (the mask left off the
//                     centered row before squaring).
//   affine_first_half the affine step of the second lane (columns 256..N-1) reads the weight and
//                     bias of the first (W[t], B[t] instead of W[t + 256], B[t + 256]): Mean and
//                     Rstd are right, Y is wrong by itself in those columns.
//
// Launch: block (256, 1, 1), grid (R, 1, 1); N <= 512. Args: (X, W, B, Y, Mean, Rstd, N, eps).

namespace layer_norm_kernels {

enum class NormDefect { none, padded_variance, affine_first_half };

constexpr int kThreads = 256;
constexpr int kLanes = 2 * kThreads;  // the power-of-two block over a row: N <= 512

// The sum of `value` over the block's 256 threads, returned to every thread.
__device__ inline float block_sum(float value, float* partials /* [kThreads / 32] */) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partials[warp] = value;
    __syncthreads();  // every warp's partial is in shared memory
    float total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += partials[w];
    __syncthreads();  // every thread has read the partials before the next sum overwrites them
    return total;
}

}  // namespace layer_norm_kernels

template <layer_norm_kernels::NormDefect Defect = layer_norm_kernels::NormDefect::none>
__global__ void layer_norm(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ B,
                           float* __restrict__ Y, float* __restrict__ Mean, float* __restrict__ Rstd, int N,
                           float eps)
{
    using namespace layer_norm_kernels;
    __shared__ float partials[kThreads / 32];
    const int r = blockIdx.x;
    const int t = threadIdx.x;
    const float* x = X + static_cast<size_t>(r) * N;

    // The two lanes of this thread, masked lanes loaded as 0.
    const int col[2] = {t, t + kThreads};
    const bool valid[2] = {col[0] < N, col[1] < N};
    const float v[2] = {valid[0] ? x[col[0]] : 0.0f, valid[1] ? x[col[1]] : 0.0f};

    const float mean = block_sum(v[0] + v[1], partials) / N;
    float d[2];
    for (int i = 0; i < 2; ++i) {
        d[i] = valid[i] ? v[i] - mean : 0.0f;
        if constexpr (Defect == NormDefect::padded_variance) {
            // PLANTED DEFECT: the centered row is not masked, so every padding lane (x = 0)
            // adds mean^2 to the variance. Should be `valid[i] ? v[i] - mean : 0`.
            d[i] = v[i] - mean;
        }
    }
    const float variance = block_sum(d[0] * d[0] + d[1] * d[1], partials) / N;
    const float rstd = 1.0f / sqrtf(variance + eps);
    if (t == 0) Mean[r] = mean, Rstd[r] = rstd;

    float* y = Y + static_cast<size_t>(r) * N;
    for (int i = 0; i < 2; ++i) {
        if (!valid[i]) continue;
        int affine = col[i];
        if constexpr (Defect == NormDefect::affine_first_half) {
            // PLANTED DEFECT: the second lane reads the first lane's weight and bias. Should be
            // col[i].
            affine = col[0];
        }
        y[col[i]] = (v[i] - mean) * rstd * W[affine] + B[affine];
    }
}
