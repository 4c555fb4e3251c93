#pragma once
// A tiled attention forward pass with an online softmax (the FlashAttention recurrence), bf16
// in and out, fp32 inside, for sm_80 and up: O = softmax(scale * Q K^T + mask) V per batch and
// head, and optionally the log-sum-exp of each row's scores (natural log, scale applied).
//
// Layouts are FlashAttention's: Q and O [B, Sq, Hq, D], K and V [B, Sk, Hk, D], row-major, lse
// [B, Hq, Sq] (f32). Grouped-query heads: Hq a multiple of Hk, query head h reads KV head
// h / (Hq / Hk). Variable lengths: with cu_seqlens_q and cu_seqlens_k (i32, B + 1 offsets), Q
// and O are [total_q, Hq, D], K and V [total_k, Hk, D], batch b owning rows cu[b] to cu[b + 1],
// and lse is [Hq, total_q]; Sq and Sk are then the longest sequence (the grid covers it).
// Causal masks: top-left (query i sees keys 0..i) or bottom-right (query i sees keys
// 0..i + Sk - Sq, FlashAttention 2's convention when Sq != Sk). A query that sees no key writes
// zeros and an lse of -inf.
//
// One CTA of BlockQ threads per (query tile, head, batch), one thread per query row; each key
// tile of BlockK rows goes through shared memory as f32. Clarity over speed: this is a specimen
// for repro, not a fast kernel.
//
// AttentionDefect plants the bugs behind most public wrong-result reports of attention kernels:
//   causal_off_by_one  the mask compares key <= query + 1: every query sees one key past the diagonal
//   exp2_scale         exp2 of the scaled scores without the log2(e) factor: the softmax scale is
//                      off by ln 2 (a kernel moved from expf to exp2f)
//   kv_head_modulo     query head h reads KV head h % Hk instead of h / (Hq / Hk)
//   tile_reuse_race    the key tile's buffer is refilled without the barrier that waits for every
//                      thread to finish reading it (compute-sanitizer racecheck's hazard)
//   lse_log2           the log-sum-exp stored in the kernel's log2 units (max + log2 of the sum)
//                      without the ln 2 that brings it back to natural log: O is right, lse is not

#include <cuda_bf16.h>

#include <cstdint>

namespace attention_kernels {

enum class AttentionDefect { none, causal_off_by_one, exp2_scale, kv_head_modulo, tile_reuse_race, lse_log2 };

// 0: no mask, 1: top-left causal, 2: bottom-right causal.
enum CausalMode : int { kNoMask = 0, kTopLeft = 1, kBottomRight = 2 };

template <int HeadDim, int BlockQ, int BlockK, AttentionDefect Defect>
__global__ void __launch_bounds__(BlockQ)
    flash_forward(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
                  const __nv_bfloat16* __restrict__ V, __nv_bfloat16* __restrict__ O, float* __restrict__ lse,
                  const int* __restrict__ cu_seqlens_q, const int* __restrict__ cu_seqlens_k, int Sq, int Sk, int Hq,
                  int Hk, float softmax_scale, int causal) {
  __shared__ float k_tile[BlockK][HeadDim];
  __shared__ float v_tile[BlockK][HeadDim];

  const int batch = blockIdx.z, head = blockIdx.y;
  const int kv_head = Defect == AttentionDefect::kv_head_modulo ? head % Hk : head / (Hq / Hk);
  // This batch's rows: fixed-length batches are Sq (Sk) rows apart; variable ones start at cu[b].
  const int q_begin = cu_seqlens_q ? cu_seqlens_q[batch] : batch * Sq;
  const int q_len = cu_seqlens_q ? cu_seqlens_q[batch + 1] - q_begin : Sq;
  const int k_begin = cu_seqlens_k ? cu_seqlens_k[batch] : batch * Sk;
  const int k_len = cu_seqlens_k ? cu_seqlens_k[batch + 1] - k_begin : Sk;
  const int row = blockIdx.x * BlockQ + threadIdx.x;  // the query row within the sequence
  const bool active = row < q_len;

  // Scores in log2 units, so that the softmax is exp2: scale * log2(e) folded into q.
  constexpr float kLog2e = 1.4426950408889634f;
  const float q_scale = Defect == AttentionDefect::exp2_scale ? softmax_scale : softmax_scale * kLog2e;
  float q[HeadDim], acc[HeadDim];
  for (int d = 0; d < HeadDim; ++d) {
    q[d] = active ? __bfloat162float(Q[(int64_t(q_begin + row) * Hq + head) * HeadDim + d]) * q_scale : 0.f;
    acc[d] = 0.f;
  }
  // The last key this query may see.
  int last_key = k_len - 1;
  if (causal != kNoMask) {
    last_key = row + (causal == kBottomRight ? k_len - q_len : 0);
    if (Defect == AttentionDefect::causal_off_by_one) last_key += 1;
    last_key = min(last_key, k_len - 1);
  }
  float running_max = -INFINITY, running_sum = 0.f;

  for (int tile = 0; tile < k_len; tile += BlockK) {
    // Every thread is done reading the previous tile before it is overwritten.
    if (Defect != AttentionDefect::tile_reuse_race) __syncthreads();
    for (int e = threadIdx.x; e < BlockK * HeadDim; e += BlockQ) {
      const int j = e / HeadDim, d = e % HeadDim, key = tile + j;
      const int64_t at = (int64_t(k_begin + key) * Hk + kv_head) * HeadDim + d;
      k_tile[j][d] = key < k_len ? __bfloat162float(K[at]) : 0.f;
      v_tile[j][d] = key < k_len ? __bfloat162float(V[at]) : 0.f;
    }
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < BlockK; ++j) {
      const int key = tile + j;
      if (key >= k_len || key > last_key) break;
      float score = 0.f;
      for (int d = 0; d < HeadDim; ++d) score += q[d] * k_tile[j][d];
      const float new_max = fmaxf(running_max, score);
      const float correction = exp2f(running_max - new_max);  // 0 on the first key (-inf)
      const float p = exp2f(score - new_max);
      running_sum = running_sum * correction + p;
      for (int d = 0; d < HeadDim; ++d) acc[d] = acc[d] * correction + p * v_tile[j][d];
      running_max = new_max;
    }
  }
  if (!active) return;
  const float inv = running_sum > 0.f ? 1.f / running_sum : 0.f;
  for (int d = 0; d < HeadDim; ++d)
    O[(int64_t(q_begin + row) * Hq + head) * HeadDim + d] = __float2bfloat16(acc[d] * inv);
  if (lse != nullptr) {
    // Back to natural-log units: ln(sum exp(scale * s)) = (max + log2(sum)) * ln(2).
    constexpr float kLn2 = Defect == AttentionDefect::lse_log2 ? 1.f : 0.6931471805599453f;
    const float value = running_sum > 0.f ? (running_max + log2f(running_sum)) * kLn2 : -INFINITY;
    // [B, Hq, Sq], or [Hq, total_q] with variable lengths (total_q = cu_seqlens_q[B]).
    const int64_t at = cu_seqlens_q ? int64_t(head) * cu_seqlens_q[gridDim.z] + q_begin + row
                                    : (int64_t(batch) * Hq + head) * Sq + row;
    lse[at] = value;
  }
}

}  // namespace attention_kernels
