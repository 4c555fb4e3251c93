#pragma once
// fp8 grouped (MoE) GEMM with block scales, DeepGEMM's scaling per group (issue 61), on plain
// CUDA cores: one thread per output element, written for reading, not for speed.
//
//   D[row, n] = sum over K-blocks kb of SA(row, kb) * SB[g](kb, n / 128)
//                 * sum over k in kb of A[row, k] * B[g][k, n]
//
// with g the row's group. One fp32 partial sum per K-block, promoted into the fp32 accumulator
// with its two scales, as DeepGEMM does with each K-block's tensor-core accumulator.
//
// Layouts (template parameter Layout):
//   contiguous  A e4m3 [M_total, K] row-major; group_index I [M_total] (-1: a padding row, not
//               written); B e4m3 [G, K, N] stored [G, N, K] (K contiguous, like expert weights);
//               SA [M_total, KB] (per row, as A's rows); SB [G, KB, NB]; D bf16 [M_total, N].
//   masked      A e4m3 [G, M_max, K]; masked_m MM [G] (rows m >= MM[g] not written); B as above;
//               SA [G, M_max, KB]; SB [G, KB, NB]; D bf16 [G, M_max, N].
// KB = ceil(K / 128), NB = ceil(N / 128): SA's block is [1, 128], SB's [128, 128].
//
// Scale formats (template parameter ScaleFormat, fp8_scaled_gemm.cuh): f32 (the elements are
// the scales), or ue8m0 packed four K-blocks to an int32 along K (byte kb % 4 of element kb / 4,
// the least significant first): SA then has ceil(KB / 4) elements a row, SB ceil(KB / 4) rows.
//
// Accumulate (template parameter, default false): the kernel adds its product into D, as a weight
// gradient kernel adds into the gradient it is given (D += ...); the spec says
// `accumulate: true` with D's initial contents as `c`.
//
// Launch: block (16, 16, 1); grid (ceil(N / 16), ceil(rows / 16), 1) for contiguous (rows =
// M_total), (ceil(N / 16), ceil(M_max / 16), G) for masked. Arguments: (A, B, I or MM, SA, SB,
// D, M, N, K, G) with M = M_total or M_max.
//
// Planted defects (template parameter GroupScaleDefect), each marked PLANTED DEFECT below. With
// every scale 1 (f32 1.0f, ue8m0 byte 127) each is invisible, so --ones passes:
//   previous_group_scales     group g > 0 reads the weight scales SB of group g - 1.
//   scale_row_within_group    (contiguous) the activation scale of a row is read at its row
//                             within its group (row - the group's first row) instead of at its
//                             row of A: SA follows A's rows, so every group after the first
//                             reads the first rows' scales.
//   ue8m0_byte_order_group_1  (ue8m0) group 1 alone reads K-block kb's scale from byte
//                             3 - kb % 4 of SA and SB: the K-blocks of each four swap scales.

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "fp8_scaled_gemm.cuh"

namespace fp8_grouped {

enum class Layout { contiguous, masked };
enum class GroupScaleDefect { none, previous_group_scales, scale_row_within_group, ue8m0_byte_order_group_1 };
using fp8_gemm::ScaleFormat;
using fp8_gemm::ScaleT;

constexpr int kBlockK = 128;  // the K-block of both scales
constexpr int kBlockN = 128;  // SB's block along N

__device__ __forceinline__ float e4m3(uint8_t bits)
{
    __nv_fp8_e4m3 x;
    x.__x = bits;
    return static_cast<float>(x);
}

// The ue8m0 scale of K-block kb in its packed element: byte kb % 4, or byte 3 - kb % 4 when
// `reversed`.
__device__ __forceinline__ float unpack_ue8m0(int32_t packed, int kb, bool reversed)
{
    const int byte = reversed ? 3 - kb % 4 : kb % 4;
    return fp8_gemm::decode_ue8m0((static_cast<uint32_t>(packed) >> (8 * byte)) & 0xffu);
}

// SA(row, kb), from the row's scales: element kb (f32), or in element kb / 4 (ue8m0).
template <ScaleFormat F>
__device__ __forceinline__ float scale_a_of(const ScaleT<F>* row, int kb, bool reversed)
{
    if constexpr (F == ScaleFormat::f32) return row[kb];
    else return unpack_ue8m0(row[kb / 4], kb, reversed);
}

// SB(kb, nb) of one group: row kb of its [KB, NB] (f32), or in row kb / 4 of its
// [ceil(KB / 4), NB] (ue8m0).
template <ScaleFormat F>
__device__ __forceinline__ float scale_b_of(const ScaleT<F>* group, int kb, int nb, int num_nb, bool reversed)
{
    if constexpr (F == ScaleFormat::f32) return group[static_cast<size_t>(kb) * num_nb + nb];
    else return unpack_ue8m0(group[static_cast<size_t>(kb / 4) * num_nb + nb], kb, reversed);
}

template <Layout L, ScaleFormat F, GroupScaleDefect Defect, bool Accumulate = false>
__global__ void fp8_grouped_gemm(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B,
                                 const int32_t* __restrict__ groups, const ScaleT<F>* __restrict__ SA,
                                 const ScaleT<F>* __restrict__ SB, __nv_bfloat16* __restrict__ D, int M, int N,
                                 int K, int G)
{
    const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const int m = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
    if (n >= N || m >= M) return;
    const int num_kb = fp8_gemm::div_up(K, kBlockK);
    const int num_nb = fp8_gemm::div_up(N, kBlockN);
    // Scale elements per row of SA and per K-block row of SB: one per K-block, or one per four.
    const int kb_elements = F == ScaleFormat::f32 ? num_kb : fp8_gemm::div_up(num_kb, 4);

    // The row's group, its row of A (and of SA, which follows A's rows) and of D.
    int g = 0;
    size_t row = 0;
    size_t scale_row = 0;
    if constexpr (L == Layout::contiguous) {
        g = groups[m];
        if (g < 0 || g >= G) return;  // padding: no group, nothing to write
        row = static_cast<size_t>(m);
        scale_row = row;
        if constexpr (Defect == GroupScaleDefect::scale_row_within_group) {
            // PLANTED DEFECT: the scale row is counted from the group's first row, as if SA held
            // one [rows of the group, KB] block per group; it holds one row per row of A.
            int first = m;
            while (first > 0 && groups[first - 1] == g) --first;
            scale_row = static_cast<size_t>(m - first);
        }
    } else {
        g = static_cast<int>(blockIdx.z);
        if (m >= groups[g]) return;  // past masked_m: not a row of this group
        row = static_cast<size_t>(g) * M + m;
        scale_row = row;
    }
    int scale_group = g;
    if constexpr (Defect == GroupScaleDefect::previous_group_scales) {
        // PLANTED DEFECT: the weight scales of the group before (a group index off by one where
        // the scale pointer is advanced, the data pointer right).
        scale_group = g > 0 ? g - 1 : 0;
    }
    const bool reversed = Defect == GroupScaleDefect::ue8m0_byte_order_group_1 && g == 1;  // PLANTED DEFECT

    const uint8_t* a = A + row * K;
    const uint8_t* b = B + (static_cast<size_t>(g) * N + n) * K;  // B[g] stored [N, K]
    const ScaleT<F>* sa = SA + scale_row * kb_elements;
    const ScaleT<F>* sb_group = SB + static_cast<size_t>(scale_group) * kb_elements * num_nb;
    const int nb = n / kBlockN;

    float acc = 0.0f;
    for (int kb = 0; kb < num_kb; ++kb) {
        float partial = 0.0f;
        const int k_end = min(K, (kb + 1) * kBlockK);
        for (int k = kb * kBlockK; k < k_end; ++k) partial += e4m3(a[k]) * e4m3(b[k]);
        acc += partial * (scale_a_of<F>(sa, kb, reversed) * scale_b_of<F>(sb_group, kb, nb, num_nb, reversed));
    }
    if constexpr (Accumulate) acc += __bfloat162float(D[row * N + n]);
    D[row * N + n] = __float2bfloat16_rn(acc);
}

// ------------------------------------------------------------------ k-grouped, stored as blocks
//
// The weight-gradient GEMM of an MoE layer (DeepGEMM's sm90 fp8 1d1d k-grouped kernel stores
// its operands so): group g's K range of k_g = KS[g] tokens, its operands blocks of flat buffers:
//
//   A  e4m3, group g's [M, k_g] row-major block at M * k0(g)   (k0(g) = KS[0] + ... + KS[g-1])
//   B  e4m3, group g's [N, k_g] row-major block at N * k0(g)
//   SA f32, group g's [M, k_g / 128] block at M * k0(g) / 128   (per row and 128 of K)
//   SB f32, group g's [N, k_g / 128] block at N * k0(g) / 128   (per column and 128 of K)
//   D  f32 [G, M, N]: D[g] (+)= sum over K-blocks of SA * SB * (A_g @ B_g^T over the block)
//
// Every k_g is a multiple of 128. The row stride of a group's block is its own k_g: one stride
// pair cannot say where group g's rows are. Accumulate adds into D (the gradient it is given).
// Launch: block (16, 16, 1), grid (ceil(N / 16), ceil(M / 16), G); args (A, B, KS, SA, SB, D, M,
// N, G).
//
// Planted defect (KBlocksDefect::next_group_block, marked PLANTED DEFECT below): the block is
// found at the next group's start, k0(g) + k_g, and read with group g's own extent: group g reads
// the beginning of group g + 1's block with the wrong row stride (the last group, the buffer's
// tail past the groups). With every input 1 nothing shows (--ones passes).
enum class KBlocksDefect { none, next_group_block };

template <KBlocksDefect Defect, bool Accumulate>
__global__ void fp8_k_grouped_blocks_gemm(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B,
                                          const int32_t* __restrict__ k_sizes, const float* __restrict__ SA,
                                          const float* __restrict__ SB, float* __restrict__ D, int M, int N, int G)
{
    const int n = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const int m = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
    const int g = static_cast<int>(blockIdx.z);
    if (n >= N || m >= M || g >= G) return;
    size_t k0 = 0;
    for (int h = 0; h < g; ++h) k0 += static_cast<size_t>(k_sizes[h]);
    const int kg = k_sizes[g];
    size_t block_start = k0;
    if constexpr (Defect == KBlocksDefect::next_group_block) {
        // PLANTED DEFECT: the group's block is taken to start where the group ends (a prefix sum
        // that counts the group itself), and read with the group's own extent.
        block_start = k0 + static_cast<size_t>(kg);
    }
    const int num_kb = fp8_gemm::div_up(kg, kBlockK);
    const uint8_t* a = A + static_cast<size_t>(M) * block_start + static_cast<size_t>(m) * kg;
    const uint8_t* b = B + static_cast<size_t>(N) * block_start + static_cast<size_t>(n) * kg;
    const float* sa = SA + static_cast<size_t>(M) * (block_start / kBlockK) + static_cast<size_t>(m) * num_kb;
    const float* sb = SB + static_cast<size_t>(N) * (block_start / kBlockK) + static_cast<size_t>(n) * num_kb;
    float acc = 0.0f;
    for (int kb = 0; kb < num_kb; ++kb) {
        float partial = 0.0f;
        const int k_end = min(kg, (kb + 1) * kBlockK);
        for (int k = kb * kBlockK; k < k_end; ++k) partial += e4m3(a[k]) * e4m3(b[k]);
        acc += partial * (sa[kb] * sb[kb]);
    }
    float* out = D + (static_cast<size_t>(g) * M + m) * N + n;
    *out = Accumulate ? *out + acc : acc;
}

}  // namespace fp8_grouped
