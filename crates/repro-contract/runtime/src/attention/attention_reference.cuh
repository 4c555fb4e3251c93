// ---------------------------------------------------------------------------------------------
// repro harness runtime: attention's f64 reference on the host (op: attention and
// op: attention_backward; docs/spec.md, "Attention: `op: attention`")
//
// The problem's extents (AttentionShape: batches, heads, per-sequence lengths, the mask and the
// scale), where each row of every operand sits in logical order, and the references:
//
//   forward    O = softmax(scale * Q K^T + mask) V and each row's log-sum-exp, one row at a time
//              (attention_row: also the device reference's cross-check, attention_device.cuh)
//   backward   dQ, dK, dV from the O and lse given, as FlashAttention's backward computes them
// ---------------------------------------------------------------------------------------------
#pragma once

#include "custom.cuh"

#include <cmath>

namespace repro {

// The extents of the problem, read off the tensors (and cu_seqlens, whose values must be read
// first: they are inputs like any other) at the sizes the harness runs with.
struct AttentionShape {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  int64_t lse_rows = 0;  // lse's last extent: Sq, or total_q with variable lengths
  int64_t total_q = 0, total_k = 0;  // the rows of all sequences (B * S without variable lengths)
  bool varlen = false;
  std::vector<int64_t> q_begin, q_len, k_begin, k_len;  // per batch
  double scale = 0;                                     // the spec's, or 1 / sqrt(D)
  int causal = 0;                                       // 0 none, 1 top-left, 2 bottom-right
};

inline AttentionShape attention_shape(const SpecInfo& spec) {
  const AttentionOperands& a = spec.custom.attention;
  const Tensor& q = spec.tensors[size_t(a.q)];
  const Tensor& k = spec.tensors[size_t(a.k)];
  AttentionShape s;
  s.varlen = a.cu_seqlens_q >= 0;
  // [B, H, S, D], or [H, total, D] with variable lengths (the logical order of docs/spec.md, "Attention: `op: attention`").
  const int head_dim = s.varlen ? 0 : 1;
  s.head_dim = q.shape[q.rank - 1];
  s.heads_q = q.shape[head_dim];
  s.heads_kv = k.shape[head_dim];
  s.total_q = s.varlen ? q.shape[1] : q.shape[0] * q.shape[2];
  s.total_k = s.varlen ? k.shape[1] : k.shape[0] * k.shape[2];
  s.causal = a.causal;
  s.scale = a.softmax_scale > 0 ? a.softmax_scale : 1.0 / std::sqrt(double(s.head_dim));
  if (s.heads_kv < 1 || s.heads_q % s.heads_kv != 0 || k.shape[k.rank - 1] != s.head_dim)
    usage_error(strprintf("op: attention: %s has %lld heads of %lld and %s %lld heads of %lld: Hq must be a multiple "
                          "of Hk over one head dimension",
                          q.name.c_str(), (long long)s.heads_q, (long long)s.head_dim, k.name.c_str(),
                          (long long)s.heads_kv, (long long)k.shape[k.rank - 1]));
  if (!s.varlen) {
    s.batch = q.shape[0];
    for (int64_t b = 0; b < s.batch; ++b) {
      s.q_begin.push_back(b * q.shape[2]), s.q_len.push_back(q.shape[2]);
      s.k_begin.push_back(b * k.shape[2]), s.k_len.push_back(k.shape[2]);
    }
    s.lse_rows = q.shape[2];
    return s;
  }
  const Tensor& cq = spec.tensors[size_t(a.cu_seqlens_q)];
  const Tensor& ck = spec.tensors[size_t(a.cu_seqlens_k)];
  s.batch = cq.numel() - 1;
  for (int pass = 0; pass < 2; ++pass) {
    const Tensor& cu = pass == 0 ? cq : ck;
    const int64_t total = pass == 0 ? s.total_q : s.total_k;
    int64_t previous = 0;
    for (int64_t b = 0; b <= s.batch; ++b) {
      const int64_t at = int64_t(decode(cu.dtype, cu.host.data(), cu.logical_offset(b)));
      if ((b == 0 && at != 0) || at < previous || at > total)
        usage_error(strprintf("op: attention: %s[%lld] = %lld: the offsets must start at 0, never decrease and stay "
                              "within the %lld rows of %s",
                              cu.name.c_str(), (long long)b, (long long)at, (long long)total,
                              (pass == 0 ? q : k).name.c_str()));
      if (b > 0) (pass == 0 ? s.q_begin : s.k_begin).push_back(previous), (pass == 0 ? s.q_len : s.k_len).push_back(at - previous);
      previous = at;
    }
  }
  s.lse_rows = s.total_q;
  return s;
}

// The last key query `row` of batch b may see (-1: none): the mask's, clipped to the keys.
inline int64_t last_visible_key(const AttentionShape& s, int64_t b, int64_t row) {
  const int64_t keys = s.k_len[size_t(b)];
  if (s.causal == 0) return keys - 1;
  const int64_t last = row + (s.causal == 2 ? keys - s.q_len[size_t(b)] : 0);
  return std::min(last, keys - 1);
}

// Logical offsets of the first element of row `row` of batch b, head h: Q, O, dO and dQ
// [B, Hq, Sq, D] or [Hq, total_q, D]; K, V, dK and dV [B, Hk, Sk, D] or [Hk, total_k, D]; lse
// [B, Hq, Sq] or [Hq, total_q]. The storage may be anything strides say (FlashAttention's
// [B, S, H, D]: strides [S·H·D, D, H·D, 1]).
inline int64_t q_row_offset(const AttentionShape& s, int64_t b, int64_t h, int64_t row) {
  return s.varlen ? (h * s.total_q + s.q_begin[size_t(b)] + row) * s.head_dim
                  : ((b * s.heads_q + h) * s.q_len[size_t(b)] + row) * s.head_dim;
}
inline int64_t k_row_offset(const AttentionShape& s, int64_t b, int64_t h, int64_t row) {
  return s.varlen ? (h * s.total_k + s.k_begin[size_t(b)] + row) * s.head_dim
                  : ((b * s.heads_kv + h) * s.k_len[size_t(b)] + row) * s.head_dim;
}
inline int64_t lse_offset(const AttentionShape& s, int64_t b, int64_t head, int64_t row) {
  return s.varlen ? head * s.lse_rows + s.q_begin[size_t(b)] + row : (b * s.heads_q + head) * s.lse_rows + row;
}

// op: attention_backward: dQ, dK and dV of L = sum(dO * O) as FlashAttention's backward computes
// them, from the forward's O and lse as given (not recomputed): the probabilities are
// P = exp(scale * q k - lse), D_i = sum_d dO_i O_i, dS = P (dO v - D), dQ = scale dS K,
// dK = scale dS^T Q, dV = P^T dO, summed over the query heads that share a KV head.
inline std::vector<std::vector<double>> attention_backward_values(const SpecInfo& spec) {
  const AttentionOperands& a = spec.custom.attention;
  const AttentionShape s = attention_shape(spec);
  const std::vector<double> q = logical_values(spec.tensors[size_t(a.q)]);
  const std::vector<double> k = logical_values(spec.tensors[size_t(a.k)]);
  const std::vector<double> v = logical_values(spec.tensors[size_t(a.v)]);
  const std::vector<double> o = logical_values(spec.tensors[size_t(a.out)]);
  const std::vector<double> lse = logical_values(spec.tensors[size_t(a.lse)]);
  const std::vector<double> d_out = logical_values(spec.tensors[size_t(a.d_out)]);
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  const int64_t D = s.head_dim, group = s.heads_q / s.heads_kv;
  // One (batch, KV head) per task: dK and dV sum over its query heads, dQ rows are its own.
  parallel_for(s.batch * s.heads_kv, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t b = task / s.heads_kv, kv = task % s.heads_kv;
      for (int64_t h = kv * group; h < (kv + 1) * group; ++h)
        for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
          const int64_t visible = last_visible_key(s, b, row) + 1;
          const double row_lse = lse[size_t(lse_offset(s, b, h, row))];
          if (visible <= 0 || !std::isfinite(row_lse)) continue;
          const int64_t at_q = q_row_offset(s, b, h, row);
          double delta = 0;
          for (int64_t d = 0; d < D; ++d) delta += d_out[size_t(at_q + d)] * o[size_t(at_q + d)];
          for (int64_t j = 0; j < visible; ++j) {
            const int64_t at_k = k_row_offset(s, b, kv, j);
            double dot = 0, d_prob = 0;
            for (int64_t d = 0; d < D; ++d) {
              dot += q[size_t(at_q + d)] * k[size_t(at_k + d)];
              d_prob += d_out[size_t(at_q + d)] * v[size_t(at_k + d)];
            }
            const double prob = std::exp(s.scale * dot - row_lse);
            const double d_score = prob * (d_prob - delta);
            for (int64_t d = 0; d < D; ++d) {
              dv[size_t(at_k + d)] += prob * d_out[size_t(at_q + d)];
              dq[size_t(at_q + d)] += s.scale * d_score * k[size_t(at_k + d)];
              dk[size_t(at_k + d)] += s.scale * d_score * q[size_t(at_q + d)];
            }
          }
        }
    }
  });
  std::vector<std::vector<double>> want;
  for (int index : spec.custom.outputs) want.push_back(index == a.dq ? std::move(dq) : index == a.dk ? std::move(dk) : std::move(dv));
  return want;
}

// One query row of the forward pass, the host's and the device cross-check's: o[0, D) gets the
// softmax-weighted mean of the `visible` first rows of v, weighted by scale * q . k; returns the
// row's log-sum-exp (-inf, and o zeros, for a row that sees no key). k and v point at the first
// key of the row's KV head, rows D apart (logical order). magnitude, when given, gets each
// channel's sum_j p_j |v_jd| / sum_j p_j: the size of the terms the output is a mean of, which
// a difference between two f64 computations is measured against.
inline double attention_row(int64_t visible, int64_t D, double scale, const double* q, const double* k,
                            const double* v, std::vector<double>& scores, double* o, double* magnitude = nullptr) {
  std::fill(o, o + D, 0.0);
  if (magnitude != nullptr) std::fill(magnitude, magnitude + D, 0.0);
  if (visible <= 0) return -INFINITY;
  scores.assign(size_t(visible), 0.0);
  double max_score = -INFINITY;
  for (int64_t j = 0; j < visible; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += q[d] * k[j * D + d];
    scores[size_t(j)] = scale * dot;
    max_score = std::max(max_score, scores[size_t(j)]);
  }
  double sum = 0;
  for (int64_t j = 0; j < visible; ++j) {
    const double p = std::exp(scores[size_t(j)] - max_score);
    sum += p;
    for (int64_t d = 0; d < D; ++d) o[d] += p * v[j * D + d];
    if (magnitude != nullptr)
      for (int64_t d = 0; d < D; ++d) magnitude[d] += p * std::fabs(v[j * D + d]);
  }
  for (int64_t d = 0; d < D; ++d) o[d] /= sum;
  if (magnitude != nullptr)
    for (int64_t d = 0; d < D; ++d) magnitude[d] /= sum;
  return max_score + std::log(sum);
}

// The forward reference on the host: every output of the spec, in spec.custom.outputs' order.
inline std::vector<std::vector<double>> attention_host_values(const SpecInfo& spec) {
  const AttentionOperands& a = spec.custom.attention;
  const AttentionShape s = attention_shape(spec);
  const std::vector<double> q = logical_values(spec.tensors[size_t(a.q)]);
  const std::vector<double> k = logical_values(spec.tensors[size_t(a.k)]);
  const std::vector<double> v = logical_values(spec.tensors[size_t(a.v)]);
  std::vector<double> out(size_t(spec.tensors[size_t(a.out)].numel()), 0.0);
  std::vector<double> lse(a.lse >= 0 ? size_t(spec.tensors[size_t(a.lse)].numel()) : 0, 0.0);
  const int64_t group = s.heads_q / s.heads_kv;
  parallel_for(s.batch * s.heads_q, 1, [&](int64_t first, int64_t last) {
    std::vector<double> scores;
    for (int64_t bh = first; bh < last; ++bh) {
      const int64_t b = bh / s.heads_q, h = bh % s.heads_q, kv = h / group;
      const int64_t keys = k_row_offset(s, b, kv, 0);
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
        const int64_t at = q_row_offset(s, b, h, row);
        const double row_lse = attention_row(last_visible_key(s, b, row) + 1, s.head_dim, s.scale, q.data() + at,
                                             k.data() + keys, v.data() + keys, scores, out.data() + at);
        if (a.lse >= 0) lse[size_t(lse_offset(s, b, h, row))] = row_lse;
      }
    }
  });
  std::vector<std::vector<double>> want;
  for (int index : spec.custom.outputs) want.push_back(index == a.out ? std::move(out) : std::move(lse));
  return want;
}

}  // namespace repro
