#pragma once
// kernels/flash_attention_backward.cuh's backward pass split into three kernels, as FlashAttention
// 2 and 3 split theirs, so that a reproducer has to launch them in order and carry two
// intermediate tensors from one to the next:
//
//   1. flash_backward_preprocess   Delta[b, h, i] = sum_d dO[b, i, h, d] O[b, i, h, d] in f32, one
//                                  value per query row (FA2's dot_do_o), into DELTA [B, Hq, S].
//   2. flash_backward_main         the backward math of flash_backward, reading Delta from DELTA
//                                  instead of computing it: dS = P (dO.v - Delta), dQ = scale dS K
//                                  into the f32 accumulator DQ_ACCUM [B, Hq, S, D] (contiguous),
//                                  dK = scale dS^T Q and dV = P^T dO (f32) into dK and dV.
//   3. flash_backward_convert_dq   dQ = scale * DQ_ACCUM, rounded to bf16, in dQ's [B, S, Hq, D]
//                                  layout (FA2's convert_dQ; its scale is 1 here, since the main
//                                  kernel already applied the softmax scale).
//
// Layouts as flash_backward's: Q, O, dO, dQ [B, S, Hq, D]; K, V, dK, dV [B, S, Hk, D]; lse and
// Delta [B, Hq, S]; DQ_ACCUM [B, Hq, S, D] (dense, the main kernel's own layout, as FA2 keeps its
// dq_accum in a layout of its own). Sq = Sk = S, top-left causal or no mask.
//
// Deterministic like flash_backward: no atomics anywhere. FA2's dQ CTAs are key tiles that add
// their share of every query row into dq_accum with float atomics, which is why its preprocess
// zeroes dq_accum first; here a query-tile CTA owns its query rows and stores their whole dQ once,
// so nothing has to be zeroed and every run gives the same bits.
//
// Launches (D = HeadDim):
//   preprocess   block (Rows, 1, 1),    grid (ceil(S / Rows), Hq, B); one thread per query row
//   main         block (Block, 1, 1),   grid (2 * ceil(S / Block), Hk, B); as flash_backward:
//                x <  ceil(S / Block): a query tile (dQ), x >= ceil(S / Block): a key tile of the
//                KV head blockIdx.y (dK, dV)
//   convert_dq   block (Threads, 1, 1), grid (ceil(S * D / Threads), Hq, B); one thread per element
//
// PreprocessDefect plants a defect in the preprocess alone (the main and convert kernels are the
// same in both variants):
//   half_head_dim  the row sum loads dO and O two bf16 at a time and its loop runs over the
//                  element index d in steps of 2, but is bounded by the number of pairs, D / 2,
//                  instead of D: Delta sums d < D / 2 only. dS = P (dO.v - Delta) is then wrong
//                  wherever dO.O of the upper half is not 0, and with it dQ and dK; dV = P^T dO
//                  does not read Delta and stays right.

#include <cuda_bf16.h>

#include <cstdint>

namespace attention_kernels {

enum class PreprocessDefect { none, half_head_dim };

namespace split_backward {

// Element offsets of a row in the [B, S, H, D] tensors (Q, O, dO, dQ with Hq heads; K, V, dK, dV
// with Hk), and of a query row in the [B, Hq, S] ones (lse, Delta).
template <int HeadDim>
__device__ __forceinline__ int64_t row_offset(int batch, int row, int head, int S, int heads) {
  return ((int64_t(batch) * S + row) * heads + head) * HeadDim;
}
__device__ __forceinline__ int64_t per_row_offset(int batch, int head, int row, int S, int Hq) {
  return (int64_t(batch) * Hq + head) * S + row;
}
// DQ_ACCUM's element offset of (batch, head, row, 0): dense [B, Hq, S, D].
template <int HeadDim>
__device__ __forceinline__ int64_t accumulator_offset(int batch, int head, int row, int S, int Hq) {
  return ((int64_t(batch) * Hq + head) * S + row) * HeadDim;
}

// Loads the K and V rows first_key .. first_key + Block - 1 of the KV head into shared memory as
// f32, rows past S zero.
template <int HeadDim, int Block>
__device__ __forceinline__ void load_key_tile(const __nv_bfloat16* __restrict__ K,
                                              const __nv_bfloat16* __restrict__ V,
                                              float (*k_rows)[HeadDim], float (*v_rows)[HeadDim],
                                              int batch, int kv_head, int first_key, int S, int Hk) {
  for (int e = threadIdx.x; e < Block * HeadDim; e += Block) {
    const int j = e / HeadDim, d = e % HeadDim, key = first_key + j;
    const bool inside = key < S;
    const int64_t at = row_offset<HeadDim>(batch, inside ? key : 0, kv_head, S, Hk) + d;
    k_rows[j][d] = inside ? __bfloat162float(K[at]) : 0.f;
    v_rows[j][d] = inside ? __bfloat162float(V[at]) : 0.f;
  }
}

// A query-tile CTA: the dQ of query row `row` (one per thread) for every query head of the KV
// head, the keys streaming through shared memory Block rows at a time. The whole row is stored
// into DQ_ACCUM once, no atomics. flash_backward's dQ half, with Delta read instead of computed.
template <int HeadDim, int Block>
__device__ __forceinline__ void query_tile_dq(const __nv_bfloat16* __restrict__ Q,
                                              const __nv_bfloat16* __restrict__ K,
                                              const __nv_bfloat16* __restrict__ V,
                                              const float* __restrict__ lse,
                                              const __nv_bfloat16* __restrict__ dO,
                                              const float* __restrict__ delta_rows,
                                              float* __restrict__ dq_accum, float (*k_rows)[HeadDim],
                                              float (*v_rows)[HeadDim], int batch, int kv_head, int row,
                                              int S, int Hq, int Hk, float softmax_scale, int causal) {
  const int group = Hq / Hk;
  const bool active = row < S;
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    float q[HeadDim], d_out[HeadDim], dq[HeadDim];
    float row_lse = 0.f, delta = 0.f;
    if (active) {
      row_lse = lse[per_row_offset(batch, head, row, S, Hq)];
      delta = delta_rows[per_row_offset(batch, head, row, S, Hq)];
      const int64_t at = row_offset<HeadDim>(batch, row, head, S, Hq);
      for (int d = 0; d < HeadDim; ++d) {
        q[d] = __bfloat162float(Q[at + d]);
        d_out[d] = __bfloat162float(dO[at + d]);
        dq[d] = 0.f;
      }
    }
    const int last_key = causal ? row : S - 1;
    for (int key_tile = 0; key_tile < S; key_tile += Block) {
      __syncthreads();  // every thread is done with the previous key tile
      load_key_tile<HeadDim, Block>(K, V, k_rows, v_rows, batch, kv_head, key_tile, S, Hk);
      __syncthreads();
      if (!active) continue;
      for (int j = 0; j < Block && key_tile + j <= last_key && key_tile + j < S; ++j) {
        float score = 0.f, d_prob = 0.f;
        for (int d = 0; d < HeadDim; ++d) score += q[d] * k_rows[j][d], d_prob += d_out[d] * v_rows[j][d];
        const float prob = expf(softmax_scale * score - row_lse);
        const float d_score = prob * (d_prob - delta);
        for (int d = 0; d < HeadDim; ++d) dq[d] += softmax_scale * d_score * k_rows[j][d];
      }
    }
    if (active) {
      const int64_t at = accumulator_offset<HeadDim>(batch, head, row, S, Hq);
      for (int d = 0; d < HeadDim; ++d) dq_accum[at + d] = dq[d];
    }
  }
}

// A key-tile CTA: dK and dV of key row `row` (one per thread), summed over every query row of the
// query heads that read the KV head; the CTA's K and V rows stay in shared memory, the query rows
// (Q, dO, lse, Delta) stream through it QTile at a time. flash_backward's dK/dV half, with Delta
// read instead of computed, and its barrier before every refill always there.
template <int HeadDim, int Block, int QTile>
__device__ __forceinline__ void key_tile_dk_dv(const __nv_bfloat16* __restrict__ Q,
                                               const __nv_bfloat16* __restrict__ K,
                                               const __nv_bfloat16* __restrict__ V,
                                               const float* __restrict__ lse,
                                               const __nv_bfloat16* __restrict__ dO,
                                               const float* __restrict__ delta_rows, float* __restrict__ dK,
                                               float* __restrict__ dV, float (*k_rows)[HeadDim],
                                               float (*v_rows)[HeadDim], float (*q_tile)[HeadDim],
                                               float (*do_tile)[HeadDim], float* lse_tile, float* delta_tile,
                                               int batch, int kv_head, int tile, int S, int Hq, int Hk,
                                               float softmax_scale, int causal) {
  const int group = Hq / Hk;
  const int row = tile * Block + threadIdx.x;
  const bool active = row < S;
  load_key_tile<HeadDim, Block>(K, V, k_rows, v_rows, batch, kv_head, tile * Block, S, Hk);
  float dk[HeadDim], dv[HeadDim];
  for (int d = 0; d < HeadDim; ++d) dk[d] = dv[d] = 0.f;
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    // Queries before this tile's first key see none of its keys under the mask.
    for (int first = causal ? tile * Block : 0; first < S; first += QTile) {
      __syncthreads();  // every thread is done reading the previous query tile (and the key rows are in)
      for (int e = threadIdx.x; e < QTile * HeadDim; e += Block) {
        const int i = e / HeadDim, d = e % HeadDim, query = first + i;
        const bool inside = query < S;
        const int64_t at = row_offset<HeadDim>(batch, inside ? query : 0, head, S, Hq) + d;
        q_tile[i][d] = inside ? __bfloat162float(Q[at]) : 0.f;
        do_tile[i][d] = inside ? __bfloat162float(dO[at]) : 0.f;
      }
      for (int i = threadIdx.x; i < QTile; i += Block) {
        const int query = first + i;
        const bool inside = query < S;
        const int64_t at = per_row_offset(batch, head, inside ? query : 0, S, Hq);
        lse_tile[i] = inside ? lse[at] : 0.f;
        delta_tile[i] = inside ? delta_rows[at] : 0.f;
      }
      __syncthreads();
      if (!active) continue;
      for (int i = 0; i < QTile && first + i < S; ++i) {
        if (causal && first + i < row) continue;  // query first + i does not see this key
        float score = 0.f, d_prob = 0.f;
        for (int d = 0; d < HeadDim; ++d)
          score += q_tile[i][d] * k_rows[threadIdx.x][d], d_prob += do_tile[i][d] * v_rows[threadIdx.x][d];
        const float prob = expf(softmax_scale * score - lse_tile[i]);
        const float d_score = prob * (d_prob - delta_tile[i]);
        for (int d = 0; d < HeadDim; ++d) {
          dv[d] += prob * do_tile[i][d];
          dk[d] += softmax_scale * d_score * q_tile[i][d];
        }
      }
    }
  }
  if (!active) return;
  const int64_t at = row_offset<HeadDim>(batch, row, kv_head, S, Hk);
  for (int d = 0; d < HeadDim; ++d) dK[at + d] = dk[d], dV[at + d] = dv[d];
}

}  // namespace split_backward

// Launch 1: Delta of every query row, one thread per row.
template <int HeadDim, int Rows, PreprocessDefect Defect>
__global__ void __launch_bounds__(Rows)
    flash_backward_preprocess(const __nv_bfloat16* __restrict__ O, const __nv_bfloat16* __restrict__ dO,
                              float* __restrict__ delta_rows, int S, int Hq) {
  static_assert(HeadDim % 2 == 0, "the rows are read two bf16 at a time");
  const int batch = blockIdx.z, head = blockIdx.y, row = blockIdx.x * Rows + threadIdx.x;
  if (row >= S) return;
  const int64_t at = split_backward::row_offset<HeadDim>(batch, row, head, S, Hq);
  // Two bf16 per load: a row starts at a multiple of HeadDim elements, so every pair is 4-byte
  // aligned (given 4-byte-aligned tensors).
  const auto* o_pairs = reinterpret_cast<const __nv_bfloat162*>(O + at);
  const auto* do_pairs = reinterpret_cast<const __nv_bfloat162*>(dO + at);
  // PLANTED DEFECT (half_head_dim): the loop runs over the element index d in steps of 2, and its
  // bound is the number of bf16 pairs, HeadDim / 2, a count of a different unit: it stops at the
  // middle of the row. The right bound is HeadDim (or a loop over pair indices up to
  // HeadDim / 2).
  constexpr int end = Defect == PreprocessDefect::half_head_dim ? HeadDim / 2 : HeadDim;
  float delta = 0.f;
  for (int d = 0; d < end; d += 2) {
    const float2 o = __bfloat1622float2(o_pairs[d / 2]);
    const float2 d_out = __bfloat1622float2(do_pairs[d / 2]);
    // In element order, as flash_backward sums it.
    delta += d_out.x * o.x;
    delta += d_out.y * o.y;
  }
  delta_rows[split_backward::per_row_offset(batch, head, row, S, Hq)] = delta;
}

// Launch 2: dQ (into the f32 accumulator), dK and dV, from Delta.
template <int HeadDim, int Block, int QTile>
__global__ void __launch_bounds__(Block)
    flash_backward_main(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
                        const __nv_bfloat16* __restrict__ V, const float* __restrict__ lse,
                        const __nv_bfloat16* __restrict__ dO, const float* __restrict__ delta_rows,
                        float* __restrict__ dq_accum, float* __restrict__ dK, float* __restrict__ dV, int S,
                        int Hq, int Hk, float softmax_scale, int causal) {
  __shared__ float k_rows[Block][HeadDim];
  __shared__ float v_rows[Block][HeadDim];
  __shared__ float q_tile[QTile][HeadDim];
  __shared__ float do_tile[QTile][HeadDim];
  __shared__ float lse_tile[QTile], delta_tile[QTile];

  const int batch = blockIdx.z, kv_head = blockIdx.y;
  const int tiles = (S + Block - 1) / Block;
  if (int(blockIdx.x) < tiles) {
    split_backward::query_tile_dq<HeadDim, Block>(Q, K, V, lse, dO, delta_rows, dq_accum, k_rows, v_rows,
                                                  batch, kv_head, blockIdx.x * Block + threadIdx.x, S, Hq,
                                                  Hk, softmax_scale, causal);
  } else {
    split_backward::key_tile_dk_dv<HeadDim, Block, QTile>(Q, K, V, lse, dO, delta_rows, dK, dV, k_rows,
                                                          v_rows, q_tile, do_tile, lse_tile, delta_tile,
                                                          batch, kv_head, blockIdx.x - tiles, S, Hq, Hk,
                                                          softmax_scale, causal);
  }
}

// Launch 3: dQ = scale * DQ_ACCUM as bf16, from the accumulator's [B, Hq, S, D] into dQ's
// [B, S, Hq, D]. One thread per element; the reads are contiguous, the writes contiguous within a
// row.
template <int HeadDim, int Threads>
__global__ void __launch_bounds__(Threads)
    flash_backward_convert_dq(const float* __restrict__ dq_accum, __nv_bfloat16* __restrict__ dQ, int S,
                              int Hq, float scale) {
  const int batch = blockIdx.z, head = blockIdx.y;
  const int64_t e = int64_t(blockIdx.x) * Threads + threadIdx.x;
  if (e >= int64_t(S) * HeadDim) return;
  const int row = int(e / HeadDim), d = int(e % HeadDim);
  const float value = dq_accum[split_backward::accumulator_offset<HeadDim>(batch, head, 0, S, Hq) + e];
  dQ[split_backward::row_offset<HeadDim>(batch, row, head, S, Hq) + d] = __float2bfloat16_rn(scale * value);
}

}  // namespace attention_kernels
