// ---------------------------------------------------------------------------------------------
// repro harness runtime: attention (spec: reference: { op: attention } and
// { op: attention_backward }; DESIGN §8)
//
// The forward pass O = softmax(scale * Q K^T + mask) V of every batch and query head, in f64 on
// the host, and each row's log-sum-exp. A run of such a spec is the run of a custom op
// (custom.cuh: outputs poisoned, repeated launches, every output compared and localized); only
// the reference values and the probes are attention's own:
//
//   probe        inputs                                      what it decodes
//   key ranges   Q = 0 (every visible key weighs the same),   each query's visible key range:
//                V[j, c] = 1 where j = c (mod m), m = D and   the output's channels hold how many
//                then D - 1 (two moduli: a range whose       visible keys fall in each residue,
//                length is a multiple of one is not of the   so the residues holding one more
//                other)                                       are the range's ends mod m
//   kv heads     Q = 0, V = 1 + the KV head                  which KV head each query head read
//   scale        Q[., 0] = x, K[j, 0] = V[j, 0] = j even,    the softmax scale the kernel applies:
//                other channels of V 1                        out = n_e e^(s x) / (n_e e^(s x) + n_o)
//   ones, random                                              the plain comparison
//
// The verdicts: `nondeterministic` (a probe's runs differ: what it decodes is then noise), `mask`
// (queries saw other keys than the mask allows, with the ranges), `head_mapping` (query heads
// read the wrong KV heads), `softmax_scale` (the scale the kernel applied, and the factor it is
// off by), else the custom ops' classes.
//
// The backward pass (op: attention_backward) has its own f64 reference (the gradients from the O
// and lse it is given, as FlashAttention's backward computes them) and two probes, all-ones and
// the spec's inputs.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "custom.cuh"
#include "probe.cuh"
#include "probe_custom.cuh"

#include <cmath>
#include <map>

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
  // [B, H, S, D], or [H, total, D] with variable lengths (DESIGN §8's logical order).
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
  for (int index : spec.custom.outputs) want.push_back(index == a.dq ? dq : index == a.dk ? dk : dv);
  return want;
}

// The reference: every output of the spec, in spec.custom.outputs' order.
inline std::vector<std::vector<double>> attention_reference_values(const SpecInfo& spec) {
  const AttentionOperands& a = spec.custom.attention;
  if (a.backward()) return attention_backward_values(spec);
  const AttentionShape s = attention_shape(spec);
  const std::vector<double> q = logical_values(spec.tensors[size_t(a.q)]);
  const std::vector<double> k = logical_values(spec.tensors[size_t(a.k)]);
  const std::vector<double> v = logical_values(spec.tensors[size_t(a.v)]);
  std::vector<double> out(size_t(spec.tensors[size_t(a.out)].numel()), 0.0);
  std::vector<double> lse(a.lse >= 0 ? size_t(spec.tensors[size_t(a.lse)].numel()) : 0, 0.0);
  const int64_t D = s.head_dim, group = s.heads_q / s.heads_kv;
  parallel_for(s.batch * s.heads_q, 1, [&](int64_t first, int64_t last) {
    std::vector<double> scores;
    for (int64_t bh = first; bh < last; ++bh) {
      const int64_t b = bh / s.heads_q, h = bh % s.heads_q, kv = h / group;
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
        const double* qr = &q[size_t(q_row_offset(s, b, h, row))];
        double* o = &out[size_t(q_row_offset(s, b, h, row))];
        const int64_t visible = last_visible_key(s, b, row) + 1;
        if (visible <= 0) {  // no key: zeros, and a log-sum-exp of -inf
          if (a.lse >= 0) lse[size_t(lse_offset(s, b, h, row))] = -INFINITY;
          continue;
        }
        scores.assign(size_t(visible), 0.0);
        double max_score = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const double* kr = &k[size_t(k_row_offset(s, b, kv, j))];
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qr[d] * kr[d];
          scores[size_t(j)] = s.scale * dot;
          max_score = std::max(max_score, scores[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(scores[size_t(j)] - max_score);
          sum += p;
          const double* vr = &v[size_t(k_row_offset(s, b, kv, j))];
          for (int64_t d = 0; d < D; ++d) o[d] += p * vr[d];
        }
        for (int64_t d = 0; d < D; ++d) o[d] /= sum;
        if (a.lse >= 0) lse[size_t(lse_offset(s, b, h, row))] = max_score + std::log(sum);
      }
    }
  });
  std::vector<std::vector<double>> want;
  for (int index : spec.custom.outputs) want.push_back(index == a.out ? out : lse);
  return want;
}

// ---- probes ---------------------------------------------------------------------------------

// The output's values as f64, logical order (the first run's, which launch_runs leaves on the host).
inline std::vector<double> output_values(const SpecInfo& spec) {
  return logical_values(spec.tensors[size_t(spec.custom.attention.out)]);
}

// Sets Q, K and V from value(role, flat row, head, channel): role 0 Q, 1 K, 2 V; the flat row
// counts the rows of all sequences (b · S + row, or the packed row with variable lengths).
template <typename F>
inline void fill_qkv(SpecInfo& spec, F value) {
  const AttentionOperands& a = spec.custom.attention;
  const int roles[3] = {a.q, a.k, a.v};
  for (int role = 0; role < 3; ++role) {
    Tensor& t = spec.tensors[size_t(roles[role])];
    // [B, H, S, D], or [H, total, D].
    const int64_t D = t.shape[t.rank - 1], S = t.shape[t.rank - 2], H = t.shape[t.rank == 3 ? 0 : 1];
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t row = (i / D) % S, head = (i / (D * S)) % H, batch = i / (D * S * H);
      encode(t.dtype, t.host.data(), t.logical_offset(i), value(role, batch * S + row, head, i % D));
    }
  }
}

// Key row `flat_row` of K or V (the row of the whole tensor) as the index of the key within its
// sequence: fixed lengths repeat every Sk rows, variable ones start at cu_seqlens_k[b].
inline int64_t key_in_sequence(const AttentionShape& s, int64_t flat_row) {
  if (!s.varlen) return flat_row % std::max<int64_t>(s.k_len[0], 1);
  const auto next = std::upper_bound(s.k_begin.begin(), s.k_begin.end(), flat_row);
  return flat_row - (next == s.k_begin.begin() ? 0 : *(next - 1));
}

// A query's visible keys as the probe decoded them: [first, last], or none found.
struct KeyRange {
  bool found = false;
  int64_t first = 0, last = -1;
};

// From one query row's channels x[0..m) under V[j, c] = [j = c mod m]: the residues holding
// the larger count are a cyclic run from first mod m to last mod m (none when the range's length
// is a multiple of m). The candidates nearest the mask's range are taken: the probe tells a
// range's ends apart from their neighbours, not from ends m keys away.
inline KeyRange decode_key_range(const double* x, int64_t m, int64_t expected_first, int64_t expected_last,
                                 int64_t keys) {
  KeyRange r;
  double low = INFINITY, high = -INFINITY;
  for (int64_t c = 0; c < m; ++c) low = std::min(low, x[c]), high = std::max(high, x[c]);
  if (!(high > 0) || !(high - low > 0.01 * high)) return r;  // all residues equal: undecided
  const double middle = 0.5 * (low + high);
  int64_t starts = 0, start = -1, end = -1;
  for (int64_t c = 0; c < m; ++c) {
    const bool up = x[c] > middle, before = x[(c + m - 1) % m] > middle, after = x[(c + 1) % m] > middle;
    if (up && !before) ++starts, start = c;
    if (up && !after) end = c;
  }
  if (starts != 1) return r;  // not one contiguous range
  const auto nearest = [&](int64_t residue, int64_t target) {
    int64_t best = residue, best_distance = INT64_MAX;
    for (int64_t base = ((target - residue) / m - 1) * m; base <= target + m; base += m) {
      const int64_t candidate = base + residue;
      if (candidate < 0 || candidate >= keys) continue;
      const int64_t distance = std::llabs(candidate - target);
      if (distance < best_distance) best = candidate, best_distance = distance;
    }
    return best;
  };
  r.found = true;
  r.first = nearest(start, expected_first);
  r.last = nearest(end, expected_last);
  return r;
}

// "mask" evidence, or "" when every decoded range is the mask's.
inline std::string key_range_evidence(const AttentionShape& s,
                                      const std::vector<std::vector<double>>& runs_by_modulus,
                                      const std::vector<int64_t>& moduli) {
  std::map<std::pair<int64_t, int64_t>, int64_t> shifts;  // (first - expected, last - expected) -> rows
  std::map<std::pair<int64_t, int64_t>, std::string> example;
  int64_t decoded = 0, wrong = 0, first_wrong_row = -1, last_wrong_row = -1;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
        const int64_t expected_last = last_visible_key(s, b, row);
        if (expected_last < 0) continue;
        KeyRange r;
        for (size_t p = 0; p < moduli.size() && !r.found; ++p) {
          const double* x = &runs_by_modulus[p][size_t(q_row_offset(s, b, h, row))];
          r = decode_key_range(x, moduli[p], 0, expected_last, s.k_len[size_t(b)]);
        }
        if (!r.found) continue;
        ++decoded;
        const std::pair<int64_t, int64_t> shift{r.first, r.last - expected_last};
        if (shift.first == 0 && shift.second == 0) continue;
        ++wrong;
        if (b == 0 && h == 0) {
          if (first_wrong_row < 0) first_wrong_row = row;
          last_wrong_row = row;
        }
        if (shifts[shift]++ == 0)
          example[shift] = strprintf("batch %lld head %lld query %lld saw keys %lld-%lld where the mask allows 0-%lld",
                                     (long long)b, (long long)h, (long long)row, (long long)r.first, (long long)r.last,
                                     (long long)expected_last);
      }
  if (wrong == 0) return "";
  // The most common shift names the defect.
  auto most = shifts.begin();
  for (auto it = shifts.begin(); it != shifts.end(); ++it)
    if (it->second > most->second) most = it;
  const int64_t past = most->first.second;
  std::string what = most->first.first != 0 ? strprintf("the first visible key is %lld, not 0", (long long)most->first.first)
                     : past == 1            ? "one key past the diagonal"
                     : past == -1           ? "one key short of the diagonal"
                     : past > 0             ? strprintf("%lld keys past the mask", (long long)past)
                                            : strprintf("%lld keys short of the mask", (long long)-past);
  std::string evidence = strprintf("%lld of %lld decoded query rows saw other keys than the mask (causal %s) allows; "
                                   "%lld of them %s, e.g. %s",
                                   (long long)wrong, (long long)decoded,
                                   s.causal == 0 ? "none" : s.causal == 1 ? "top_left" : "bottom_right",
                                   (long long)most->second, what.c_str(), example[most->first].c_str());
  if (first_wrong_row >= 0)
    evidence += strprintf(" (batch 0 head 0: queries %lld-%lld)", (long long)first_wrong_row, (long long)last_wrong_row);
  return evidence;
}

// "head_mapping" evidence from the kv-heads probe's output, or "".
inline std::string head_evidence(const AttentionShape& s, const std::vector<double>& values) {
  const int64_t group = s.heads_q / s.heads_kv;
  std::vector<int64_t> read(size_t(s.heads_q), -1);
  bool wrong = false;
  for (int64_t h = 0; h < s.heads_q; ++h) {
    // The first query row of batch 0 that sees a key.
    for (int64_t row = 0; row < s.q_len[0]; ++row) {
      if (last_visible_key(s, 0, row) < 0) continue;
      const double x = values[size_t(q_row_offset(s, 0, h, row))];
      read[size_t(h)] = std::isfinite(x) ? int64_t(std::llround(x)) - 1 : -2;
      break;
    }
    wrong = wrong || read[size_t(h)] != h / group;
  }
  if (!wrong) return "";
  std::string got, want;
  for (int64_t h = 0; h < s.heads_q; ++h) {
    got += (h ? " " : "") + (read[size_t(h)] >= 0 ? std::to_string(read[size_t(h)]) : std::string("?"));
    want += (h ? " " : "") + std::to_string(h / group);
  }
  return strprintf("query heads 0-%lld read KV heads [%s]; %lld query heads over %lld KV heads read [%s] "
                   "(head h reads h / %lld)",
                   (long long)(s.heads_q - 1), got.c_str(), (long long)s.heads_q, (long long)s.heads_kv, want.c_str(),
                   (long long)group);
}

// The scale the kernel applied, from the scale probe (0 when no row could tell), and the factor
// to the spec's named where it is a known slip.
inline std::string scale_evidence(const AttentionShape& s, const std::vector<double>& values, double x) {
  std::vector<double> found;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
        const int64_t visible = last_visible_key(s, b, row) + 1;
        const int64_t even = (visible + 1) / 2, odd = visible / 2;
        if (even < 1 || odd < 1) continue;
        const double o = values[size_t(q_row_offset(s, b, h, row))];
        if (!(o > 0.02 && o < 0.98)) continue;
        found.push_back(std::log(o / (1 - o) * double(odd) / double(even)) / x);
      }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  const double applied = found[found.size() / 2], ratio = applied / s.scale;
  if (std::fabs(ratio - 1) < 0.02) return "";
  const struct {
    double factor;
    const char* why;
  } known[] = {{std::log(2.0), "ln 2: exp2 of the scores without the log2(e) factor"},
               {1 / std::log(2.0), "1 / ln 2: the log2(e) factor applied twice, or exp of scores scaled for exp2"},
               {std::sqrt(double(s.head_dim)), "sqrt(D): the scale left out"},
               {1 / std::sqrt(double(s.head_dim)), "1 / sqrt(D): the scale applied twice, or 1 / D for 1 / sqrt(D)"}};
  std::string named;
  for (const auto& k : known)
    if (std::fabs(ratio / k.factor - 1) < 0.02) {
      named = std::string(" = ") + k.why;
      break;
    }
  return strprintf("the kernel's softmax scale is %.4g where the spec's is %.4g: x%.4g%s (median of %zu query rows)",
                   applied, s.scale, ratio, named.c_str(), found.size());
}

inline int attention_class_rank(const std::string& cls) {
  static const char* const kOrder[] = {"nondeterministic", "mask", "head_mapping", "softmax_scale", "unwritten",
                                       "nonfinite",        "boundary", "layout",   "row_mapping",   "col_mapping",
                                       "scale",            "precision", "scattered"};
  for (int i = 0; i < int(sizeof(kOrder) / sizeof(kOrder[0])); ++i)
    if (cls == kOrder[i]) return i;
  return 100;
}

// Outputs that differ between runs of the same inputs come first: a race, or a read of shared
// memory nobody wrote (a buffer refilled too early reads as both). What the other probes decode
// from such outputs is noise, so their classes wait until the runs agree.
inline void call_differing_runs_nondeterministic(std::vector<ProbeOutcome>& probes) {
  for (ProbeOutcome& o : probes)
    if (!o.passed && o.differences > 0 && o.pattern.cls != "nondeterministic")
      o.pattern = Pattern{"nondeterministic",
                          strprintf("%lld outputs differ between runs of the same inputs (%lld of them right in no "
                                    "run): a race, or a read of memory nobody wrote; --sanitize racecheck names the "
                                    "accesses",
                                    (long long)o.differences, (long long)o.stale_differences)};
}

// The last probe of both suites, the spec's own inputs (restored, launched at least three times),
// then the verdict: differing runs first, then the most specific class by `rank`.
inline int finish_attention_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                   double timeout, int repeat,
                                   const std::vector<std::vector<unsigned char>>& spec_inputs,
                                   const std::vector<std::vector<double>>& spec_want, std::vector<ProbeOutcome>& probes,
                                   int (*rank)(const std::string&)) {
  std::vector<Tensor>& tensors = spec.tensors;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].output) tensors[i].host = spec_inputs[i];
  probes.push_back(run_custom_probe(spec, stream, start, stop, timeout, std::max(3, repeat), "random",
                                    "the spec's inputs", &spec_want));
  call_differing_runs_nondeterministic(probes);
  const Pattern verdict = most_specific_failure(probes, rank);
  show_first_failure(probes, tensors[size_t(spec.custom.outputs[0])]);
  for (Tensor& t : tensors) cudaFree(t.device);
  return conclude_probes(probes, verdict);
}

// op: attention_backward's probes: all-ones inputs (lse 1 too), then the spec's. The custom ops'
// index patterns would make scores of thousands, whose exp(score - lse) no dtype holds.
inline int run_attention_backward_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                         double timeout, int repeat, const std::vector<std::vector<double>>& spec_want) {
  std::vector<Tensor>& tensors = spec.tensors;
  std::vector<std::vector<unsigned char>> spec_inputs;
  for (const Tensor& t : tensors) spec_inputs.push_back(t.host);
  std::vector<ProbeOutcome> probes;
  fill_float_inputs(spec, [](const Tensor&, int64_t) { return 1.0; });
  probes.push_back(run_custom_probe(spec, stream, start, stop, timeout, repeat, "ones", "every input 1", nullptr));
  return finish_attention_probes(spec, stream, start, stop, timeout, repeat, spec_inputs, spec_want, probes,
                                 custom_class_rank);
}

inline int run_attention_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                double timeout, int repeat, const std::vector<std::vector<double>>& spec_want) {
  std::vector<Tensor>& tensors = spec.tensors;
  std::vector<std::vector<unsigned char>> spec_inputs;
  for (const Tensor& t : tensors) spec_inputs.push_back(t.host);
  const AttentionShape s = attention_shape(spec);
  std::vector<ProbeOutcome> probes;
  const auto probe = [&](const std::string& name, const std::string& inputs) {
    probes.push_back(run_custom_probe(spec, stream, start, stop, timeout, repeat, name, inputs, nullptr));
    return output_values(spec);
  };

  // Key ranges, under two moduli.
  std::vector<std::vector<double>> by_modulus;
  std::vector<int64_t> moduli;
  for (int64_t m : {s.head_dim, s.head_dim - 1}) {
    if (m < 2) continue;
    fill_qkv(spec, [&](int role, int64_t row, int64_t, int64_t c) {
      if (role == 0) return 0.0;
      if (role == 1) return 1.0;
      return c < m && key_in_sequence(s, row) % m == c ? 1.0 : 0.0;
    });
    by_modulus.push_back(probe(strprintf("key ranges mod %lld", (long long)m),
                               strprintf("Q = 0, V[j, c] = 1 where j = c (mod %lld)", (long long)m)));
    moduli.push_back(m);
  }
  const std::string mask = key_range_evidence(s, by_modulus, moduli);
  for (size_t p = probes.size() - moduli.size(); p < probes.size() && !mask.empty(); ++p)
    if (!probes[p].passed && probes[p].differences == 0) probes[p].pattern = Pattern{"mask", mask};

  fill_qkv(spec, [&](int role, int64_t, int64_t head, int64_t) { return role == 0 ? 0.0 : role == 1 ? 1.0 : 1.0 + head; });
  const std::vector<double> heads = probe("kv heads", "Q = 0, V = 1 + the KV head");
  const std::string head_mapping = head_evidence(s, heads);
  if (!head_mapping.empty() && !probes.back().passed && probes.back().differences == 0)
    probes.back().pattern = Pattern{"head_mapping", head_mapping};

  // x: about 1 / scale, as the dtype of Q holds it.
  const Tensor& q = tensors[size_t(spec.custom.attention.q)];
  const double x = round_to(q.dtype, 1.0 / s.scale);
  fill_qkv(spec, [&](int role, int64_t row, int64_t, int64_t c) {
    if (role == 0) return c == 0 ? x : 0.0;
    const double even = key_in_sequence(s, row) % 2 == 0 ? 1.0 : 0.0;
    if (role == 1) return c == 0 ? even : 0.0;
    return c == 0 ? even : 1.0;
  });
  const std::vector<double> scaled = probe("scale", strprintf("Q[., 0] = %g, K[j, 0] = V[j, 0] = (j even)", x));
  const std::string scale = mask.empty() ? scale_evidence(s, scaled, x) : "";
  if (!scale.empty() && !probes.back().passed && probes.back().differences == 0)
    probes.back().pattern = Pattern{"softmax_scale", scale};

  fill_qkv(spec, [](int, int64_t, int64_t, int64_t) { return 1.0; });
  probe("ones", "Q, K, V = 1");
  return finish_attention_probes(spec, stream, start, stop, timeout, repeat, spec_inputs, spec_want, probes,
                                 attention_class_rank);
}

}  // namespace repro
