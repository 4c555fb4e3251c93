#pragma once
// fp8 batched GEMM with block scales per batch (issue 61): L independent GEMMs, each with its own
// scales, on plain CUDA cores: one thread per output element, written for reading, not for speed.
//
//   D[l, m, n] = sum over K-blocks kb of SA[l](m, kb) * SB[l](kb, n / 128)
//                  * sum over k in kb of A[l, m, k] * B[l, k, n]
//
// One fp32 partial sum per K-block, promoted into the fp32 accumulator with its two scales, as
// DeepGEMM does with each K-block's tensor-core accumulator.
//
//   A   e4m3 [L, M, K] row-major.
//   B   e4m3 [L, K, N] stored [L, N, K] (K contiguous, like a linear layer's weights).
//   SA  [L, M, KB] (per row and 128 of K), SB [L, KB, NB] (per 128 x 128 block of B[l]),
//       KB = ceil(K / 128), NB = ceil(N / 128); f32, or ue8m0 packed four K-blocks to an int32
//       along K (ScaleFormat, fp8_scaled_gemm.cuh): then ceil(KB / 4) in place of KB.
//   D   bf16 [L, M, N] row-major, rounded to nearest even.
//
// Launch: block (16, 16, 1); grid (ceil(N / 16), ceil(M / 16), L). Arguments: (A, B, SA, SB, D,
// M, N, K).
//
// Planted defect (template parameter BatchScaleDefect, marked PLANTED DEFECT below):
//   batch0_scales  every batch reads batch 0's scales: the data pointers are advanced to batch l,
//                  the scale pointers are not. With every scale 1 (f32 1.0f, ue8m0 byte 127) it
//                  is invisible, so --ones passes; batch 0 is right whatever the scales.

#include <cuda_bf16.h>

#include <cstdint>

#include "fp8_grouped_gemm.cuh"

namespace fp8_batched {

enum class BatchScaleDefect { none, batch0_scales };
using fp8_gemm::ScaleFormat;
using fp8_gemm::ScaleT;

template <ScaleFormat F, BatchScaleDefect Defect>
__global__ void fp8_batched_scaled_gemm(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B,
                                        const ScaleT<F>* __restrict__ SA, const ScaleT<F>* __restrict__ SB,
                                        __nv_bfloat16* __restrict__ D, int M, int N, int K)
{
    const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const int m = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
    const size_t l = blockIdx.z;
    if (n >= N || m >= M) return;
    const int num_kb = fp8_gemm::div_up(K, fp8_grouped::kBlockK);
    const int num_nb = fp8_gemm::div_up(N, fp8_grouped::kBlockN);
    // Scale elements per row of SA and per K-block row of SB: one per K-block, or one per four.
    const int kb_elements = F == ScaleFormat::f32 ? num_kb : fp8_gemm::div_up(num_kb, 4);

    size_t scale_batch = l;
    if constexpr (Defect == BatchScaleDefect::batch0_scales) {
        // PLANTED DEFECT: the scale pointers stay at batch 0 (the batch stride of the scales
        // left out where the operands' was added).
        scale_batch = 0;
    }
    const uint8_t* a = A + (l * M + m) * K;
    const uint8_t* b = B + (l * N + n) * K;  // B[l] stored [N, K]
    const ScaleT<F>* sa = SA + (scale_batch * M + m) * kb_elements;
    const ScaleT<F>* sb = SB + scale_batch * kb_elements * num_nb;
    const int nb = n / fp8_grouped::kBlockN;

    float acc = 0.0f;
    for (int kb = 0; kb < num_kb; ++kb) {
        float partial = 0.0f;
        const int k_end = min(K, (kb + 1) * fp8_grouped::kBlockK);
        for (int k = kb * fp8_grouped::kBlockK; k < k_end; ++k)
            partial += fp8_grouped::e4m3(a[k]) * fp8_grouped::e4m3(b[k]);
        acc += partial * (fp8_grouped::scale_a_of<F>(sa, kb, false) *
                          fp8_grouped::scale_b_of<F>(sb, kb, nb, num_nb, false));
    }
    D[(l * M + m) * N + n] = __float2bfloat16_rn(acc);
}

}  // namespace fp8_batched
