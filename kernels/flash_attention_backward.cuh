#pragma once
// The backward pass of kernels/flash_attention.cuh: dQ, dK and dV of L = sum(dO * O), bf16 Q, K,
// V, O and dO in, the forward's f32 log-sum-exp in, f32 gradients out. As FlashAttention's
// backward, it rebuilds the probabilities from the lse (P = exp(scale * q.k - lse)) instead of
// recomputing the softmax, and uses D_i = sum_d dO_i O_i: dS = P (dO.v - D), dQ = scale dS K,
// dK = scale dS^T Q, dV = P^T dO, dK and dV summed over the query heads of a KV head.
//
// Layouts as the forward's: Q, O, dO, dQ [B, S, Hq, D]; K, V, dK, dV [B, S, Hk, D]; lse
// [B, Hq, S]; Sq = Sk = S, top-left causal or no mask. No atomics, so every run gives the same
// bits: the grid's x holds two kinds of CTA, ceil(S / Block) of each per (head, batch):
//   x <  ceil(S / Block): a query tile; one thread per query row sums its dQ over the keys;
//   x >= ceil(S / Block): a key tile of the KV head; one thread per key row sums its dK and dV
//                         over every query row of the query heads that read it, QTile query
//                         rows at a time through shared memory.
// Launch: block (Block, 1, 1), grid (2 * ceil(S / Block), Hk, B) (blockIdx.y is the KV head).
//
// BackwardDefect plants the race of the issue (a backward pass's most common one):
//   q_tile_reuse_race  the query tile's shared-memory buffers (Q, dO, lse, D of QTile rows) are
//                      refilled for the next tile without the barrier that waits for every
//                      thread to finish reading them
// Run on the H200 (docs/gpu-validation.md, runs 47-48): correct, it passes and its four launches
// agree bit for bit; with the race, DK and DV go wrong in some rows, the launches differ, and
// racecheck names the refill against the reads.

#include <cuda_bf16.h>

#include <cstdint>

namespace attention_kernels {

enum class BackwardDefect { none, q_tile_reuse_race };

template <int HeadDim, int Block, int QTile, BackwardDefect Defect>
__global__ void __launch_bounds__(Block)
    flash_backward(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
                   const __nv_bfloat16* __restrict__ V, const __nv_bfloat16* __restrict__ O,
                   const float* __restrict__ lse, const __nv_bfloat16* __restrict__ dO, float* __restrict__ dQ,
                   float* __restrict__ dK, float* __restrict__ dV, int S, int Hq, int Hk, float softmax_scale,
                   int causal) {
  // The key tile (dQ CTAs) or this CTA's own key rows (dK/dV CTAs), and the query tile.
  __shared__ float k_rows[Block][HeadDim];
  __shared__ float v_rows[Block][HeadDim];
  __shared__ float q_tile[QTile][HeadDim];
  __shared__ float do_tile[QTile][HeadDim];
  __shared__ float lse_tile[QTile], delta_tile[QTile];

  const int batch = blockIdx.z, kv_head = blockIdx.y, group = Hq / Hk;
  const int tiles = (S + Block - 1) / Block;
  const bool query_cta = int(blockIdx.x) < tiles;
  const int tile = query_cta ? blockIdx.x : blockIdx.x - tiles;
  const int row = tile * Block + threadIdx.x;  // the query row (dQ CTAs) or key row (dK/dV CTAs)
  const auto q_at = [&](int r, int h) { return (int64_t(batch * S + r) * Hq + h) * HeadDim; };
  const auto k_at = [&](int r) { return (int64_t(batch * S + r) * Hk + kv_head) * HeadDim; };

  if (query_cta) {
    // dQ of query row `row`, for each query head of this KV head in turn.
    for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
      float q[HeadDim], d_out[HeadDim], dq[HeadDim];
      float row_lse = 0.f, delta = 0.f;
      const bool active = row < S;
      if (active) {
        row_lse = lse[(int64_t(batch) * Hq + head) * S + row];
        for (int d = 0; d < HeadDim; ++d) {
          q[d] = __bfloat162float(Q[q_at(row, head) + d]);
          d_out[d] = __bfloat162float(dO[q_at(row, head) + d]);
          delta += d_out[d] * __bfloat162float(O[q_at(row, head) + d]);
          dq[d] = 0.f;
        }
      }
      const int last_key = causal ? row : S - 1;
      for (int key_tile = 0; key_tile < S; key_tile += Block) {
        __syncthreads();  // every thread is done with the previous key tile
        for (int e = threadIdx.x; e < Block * HeadDim; e += Block) {
          const int j = e / HeadDim, d = e % HeadDim, key = key_tile + j;
          k_rows[j][d] = key < S ? __bfloat162float(K[k_at(key) + d]) : 0.f;
          v_rows[j][d] = key < S ? __bfloat162float(V[k_at(key) + d]) : 0.f;
        }
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
      if (active)
        for (int d = 0; d < HeadDim; ++d) dQ[q_at(row, head) + d] = dq[d];
    }
    return;
  }

  // dK and dV of key row `row`: its K and V rows stay in shared memory, the query rows stream.
  const bool active = row < S;
  for (int e = threadIdx.x; e < Block * HeadDim; e += Block) {
    const int j = e / HeadDim, d = e % HeadDim, key = tile * Block + j;
    k_rows[j][d] = key < S ? __bfloat162float(K[k_at(key) + d]) : 0.f;
    v_rows[j][d] = key < S ? __bfloat162float(V[k_at(key) + d]) : 0.f;
  }
  float dk[HeadDim], dv[HeadDim];
  for (int d = 0; d < HeadDim; ++d) dk[d] = dv[d] = 0.f;
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    // Queries before this key's row see it only without the mask.
    for (int first = causal ? tile * Block : 0; first < S; first += QTile) {
      // Every thread is done reading the previous query tile before it is overwritten.
      if (Defect != BackwardDefect::q_tile_reuse_race) __syncthreads();
      for (int e = threadIdx.x; e < QTile * HeadDim; e += Block) {
        const int i = e / HeadDim, d = e % HeadDim, query = first + i;
        q_tile[i][d] = query < S ? __bfloat162float(Q[q_at(query, head) + d]) : 0.f;
        do_tile[i][d] = query < S ? __bfloat162float(dO[q_at(query, head) + d]) : 0.f;
      }
      for (int i = threadIdx.x; i < QTile; i += Block) {
        const int query = first + i;
        float delta = 0.f;
        if (query < S)
          for (int d = 0; d < HeadDim; ++d)
            delta += __bfloat162float(dO[q_at(query, head) + d]) * __bfloat162float(O[q_at(query, head) + d]);
        lse_tile[i] = query < S ? lse[(int64_t(batch) * Hq + head) * S + query] : 0.f;
        delta_tile[i] = delta;
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
  for (int d = 0; d < HeadDim; ++d) dK[k_at(row) + d] = dk[d], dV[k_at(row) + d] = dv[d];
}

}  // namespace attention_kernels
