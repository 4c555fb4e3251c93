// ---------------------------------------------------------------------------------------------
// repro harness runtime: attention (spec: reference: { op: attention } and
// { op: attention_backward }; docs/spec.md, "Attention: `op: attention`")
//
// The forward pass O = softmax(scale * Q K^T + mask) V of every batch and query head, and each
// row's log-sum-exp, in f64: on the host (attention_reference.cuh), or on the device at
// production sizes (attention_device.cuh). A run of such a spec is the run of a custom op
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
//                                                             and the lse against the normalizer
//                                                             Z = n_o / (1 - O[., 0]) O implies
//   ones, random                                              the plain comparison
//
// The verdicts: `nondeterministic` (a probe's runs differ: what it decodes is then noise), `mask`
// (queries saw other keys than the mask allows, with the ranges), `head_mapping` (query heads
// read the wrong KV heads), `softmax_scale` (the scale the kernel applied, and the factor it is
// off by), `lse` (the log-sum-exp disagrees with the output's own normalizer), else the custom
// ops' classes.
//
// The backward pass (op: attention_backward) has its own f64 reference, on the host (the
// gradients from the O and lse it is given, as FlashAttention's backward computes them) and two
// probes, all-ones and the spec's inputs.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "attention_device.cuh"
#include "attention_reference.cuh"
#include "custom.cuh"
#include "probe.cuh"
#include "probe_custom.cuh"

#include <cmath>
#include <map>

namespace repro {

// The reference: every output of the spec, in spec.custom.outputs' order. The forward runs on
// the device when the run chose it (production sizes), else on the host.
inline std::vector<std::vector<double>> attention_reference_values(const SpecInfo& spec) {
  if (spec.custom.attention.backward()) return attention_backward_values(spec);
  return spec.custom.reference_on_device ? attention_device_values(spec) : attention_host_values(spec);
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

// The scale probe's query rows whose O[., 0] tells something: rows that see even and odd keys,
// with O[., 0] away from 0 and 1. Calls row(b, h, row, even, odd, O[., 0]).
template <typename Row>
inline void for_each_scale_probe_row(const AttentionShape& s, const std::vector<double>& values, Row row_fn) {
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) {
        const int64_t visible = last_visible_key(s, b, row) + 1;
        const int64_t even = (visible + 1) / 2, odd = visible / 2;
        if (even < 1 || odd < 1) continue;
        const double o = values[size_t(q_row_offset(s, b, h, row))];
        if (o > 0.02 && o < 0.98) row_fn(b, h, row, even, odd, o);
      }
}

// The scale the kernel applied, from the scale probe (0 when no row could tell), and the factor
// to the spec's named where it is a known slip.
inline std::string scale_evidence(const AttentionShape& s, const std::vector<double>& values, double x) {
  std::vector<double> found;
  for_each_scale_probe_row(s, values, [&](int64_t, int64_t, int64_t, int64_t even, int64_t odd, double o) {
    found.push_back(std::log(o / (1 - o) * double(odd) / double(even)) / x);
  });
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

// The log-sum-exp against the normalizer the kernel's own output implies, on the scale probe's
// inputs. There O[., 0] = n_e e^a / Z with Z = n_e e^a + n_o (n_e, n_o the even and odd keys a
// query sees), so Z = n_o / (1 - O[., 0]) whatever scale the kernel applied, and its lse must be
// ln Z: a kernel whose O is right (or wrong by its scale alone) but whose lse is not gets the
// rows that disagree, and the slip named where the median ratio or difference is a known one.
// lse holds the kernel's values in logical order; out_dtype is O's (its rounding bounds the check).
inline std::string lse_evidence(const AttentionShape& s, const std::vector<double>& values,
                                const std::vector<double>& lse, DType out_dtype) {
  int64_t decoded = 0, wrong = 0;
  std::vector<double> ratios, differences;
  std::string example;
  for_each_scale_probe_row(s, values, [&](int64_t b, int64_t h, int64_t row, int64_t even, int64_t odd, double o) {
    const double implied = std::log(double(odd)) - std::log1p(-o);
    const double got = lse[size_t(lse_offset(s, b, h, row))];
    // O's rounding moves ln Z by up to ulp(O) / (1 - O); the kernel's f32 sums by far less.
    const uint64_t bits = encode_bits(out_dtype, o);
    const double ulp = std::fabs(decode_bits(out_dtype, bits + 1) - decode_bits(out_dtype, bits));
    const double tolerance = 2 * ulp / (1 - o) + 1e-3 * std::max(1.0, std::fabs(implied));
    ++decoded;
    if (std::fabs(got - implied) <= tolerance) return;
    if (++wrong == 1)
      example = strprintf("batch %lld head %lld query %lld: lse %.5g, ln Z %.5g", (long long)b, (long long)h,
                          (long long)row, got, implied);
    ratios.push_back(got / implied);
    // The row's largest scaled score, as the kernel's output says it: max(a, 0).
    const double a = std::log(o / (1 - o) * double(odd) / double(even));
    differences.push_back((got - implied) / std::max(a, 1e-300));
  });
  if (wrong <= std::max<int64_t>(1, decoded / 100)) return "";
  std::sort(ratios.begin(), ratios.end());
  std::sort(differences.begin(), differences.end());
  const double ratio = ratios[ratios.size() / 2], by_max = differences[differences.size() / 2];
  std::string named;
  if (std::fabs(ratio * std::log(2.0) - 1) < 0.01) named = " = 1 / ln 2: the lse in log2 units (max + log2 of the sum), the ln 2 factor left out";
  else if (std::fabs(ratio / std::log(2.0) - 1) < 0.01) named = " = ln 2: the ln 2 factor applied twice";
  else if (std::fabs(by_max + 1) < 0.01) named = "; lse = ln Z minus the row's largest score: the maximum left out of the lse";
  return strprintf("the log-sum-exp disagrees with the normalizer Z the kernel's own output implies (Z = n_odd / "
                   "(1 - O[., 0]) on this probe) in %lld of %lld decoded query rows, e.g. %s; lse / ln Z = %.4g "
                   "(median)%s",
                   (long long)wrong, (long long)decoded, example.c_str(), ratio, named.c_str());
}

inline int attention_class_rank(const std::string& cls) {
  static const char* const kOrder[] = {"nondeterministic", "mask",      "head_mapping", "softmax_scale", "lse",
                                       "unwritten",        "nonfinite", "boundary",     "layout",        "row_mapping",
                                       "col_mapping",      "scale",     "precision",    "scattered"};
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
  give_device_buffers(tensors);
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
  // The lse against the output's own normalizer: checked when the scale explains O (or O is right).
  const int lse_index = spec.custom.attention.lse;
  const std::string lse =
      mask.empty() && lse_index >= 0
          ? lse_evidence(s, scaled, logical_values(tensors[size_t(lse_index)]),
                         tensors[size_t(spec.custom.attention.out)].dtype)
          : "";
  if (!probes.back().passed && probes.back().differences == 0) {
    if (!scale.empty()) probes.back().pattern = Pattern{"softmax_scale", scale};
    else if (!lse.empty()) probes.back().pattern = Pattern{"lse", lse};
  }

  fill_qkv(spec, [](int, int64_t, int64_t, int64_t) { return 1.0; });
  probe("ones", "Q, K, V = 1");
  return finish_attention_probes(spec, stream, start, stop, timeout, repeat, spec_inputs, spec_want, probes,
                                 attention_class_rank);
}

}  // namespace repro
