// The self-test's checks of attention.cuh (op: attention), included by runtime_selftest.cu after
// its check framework: the f64 reference against closed forms and a second, plain computation,
// and the probes' decoders on outputs built from known key ranges, heads and scales.
#pragma once

// A spec with Q [B, Hq, Sq, D], K and V [B, Hk, Sk, D] (or, with `cu`, [H, total, D] and i32
// offsets), O like Q and lse, values from `value(role, flat row, head, channel)`. Q is stored as
// FlashAttention does ([B, S, H, D] in memory, through strides): the reference reads logical
// elements, so the storage must not matter.
template <typename F>
SpecInfo attention_spec(int64_t B, int64_t Sq, int64_t Sk, int64_t Hq, int64_t Hk, int64_t D, int causal,
                        std::vector<int> cu_q, std::vector<int> cu_k, F value) {
  SpecInfo spec;
  const bool varlen = !cu_q.empty();
  const int64_t rows_q = varlen ? cu_q.back() : B * Sq, rows_k = varlen ? cu_k.back() : B * Sk;
  const auto shape = [&](int64_t rows, int64_t per, int64_t heads) {
    return varlen ? std::vector<int64_t>{heads, rows, D} : std::vector<int64_t>{rows / per, heads, per, D};
  };
  const std::vector<int64_t> bshd = varlen ? std::vector<int64_t>{D, Hq * D, 1}
                                           : std::vector<int64_t>{Sq * Hq * D, D, Hq * D, 1};
  spec.tensors.push_back(make_tensor("Q", DType::f64, shape(rows_q, Sq, Hq), bshd));
  spec.tensors.push_back(make_tensor("K", DType::f64, shape(rows_k, Sk, Hk)));
  spec.tensors.push_back(make_tensor("V", DType::f64, shape(rows_k, Sk, Hk)));
  spec.tensors.push_back(make_tensor("O", DType::f64, shape(rows_q, Sq, Hq), {}, true));
  spec.tensors.push_back(make_tensor("LSE", DType::f64, varlen ? std::vector<int64_t>{Hq, rows_q}
                                                               : std::vector<int64_t>{B, Hq, Sq}, {}, true));
  AttentionOperands& a = spec.custom.attention;
  a.q = 0, a.k = 1, a.v = 2, a.out = 3, a.lse = 4, a.causal = causal;
  if (varlen) {
    spec.tensors.push_back(make_tensor("CQ", DType::i32, {int64_t(cu_q.size())}));
    spec.tensors.push_back(make_tensor("CK", DType::i32, {int64_t(cu_k.size())}));
    a.cu_seqlens_q = 5, a.cu_seqlens_k = 6;
  }
  spec.custom.op = ReferenceOp::attention;
  spec.custom.outputs = {3, 4};
  for (Tensor& t : spec.tensors) t.host.assign(t.storage_bytes(), 0);
  for (int role = 0; role < 3; ++role) {
    Tensor& t = spec.tensors[size_t(role)];
    const int64_t S = t.shape[t.rank - 2], H = t.shape[t.rank == 3 ? 0 : 1];
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int64_t row = (i / D) % S, head = (i / (D * S)) % H, batch = i / (D * S * H);
      set_logical(t, i, value(role, batch * S + row, head, i % D));
    }
  }
  for (size_t k = 0; k < cu_q.size(); ++k) set_logical(spec.tensors[5], int64_t(k), cu_q[k]), set_logical(spec.tensors[6], int64_t(k), cu_k[k]);
  return spec;
}

// The same attention, written out the plain way: all scores, a max, exps, sums.
double plain_attention(const SpecInfo& spec, int64_t b, int64_t h, int64_t row, int64_t d, double* lse) {
  const AttentionShape s = attention_shape(spec);
  const Tensor &q = spec.tensors[0], &k = spec.tensors[1], &v = spec.tensors[2];
  const int64_t D = s.head_dim, kv = h / (s.heads_q / s.heads_kv);
  const int64_t shift = s.causal == 2 ? s.k_len[size_t(b)] - s.q_len[size_t(b)] : 0;
  std::vector<double> scores;
  for (int64_t j = 0; j < s.k_len[size_t(b)]; ++j) {
    if (s.causal != 0 && j > row + shift) break;
    double dot = 0;
    for (int64_t c = 0; c < D; ++c)
      dot += get_logical(q, q_row_offset(s, b, h, row) + c) * get_logical(k, k_row_offset(s, b, kv, j) + c);
    scores.push_back(dot * s.scale);
  }
  if (scores.empty()) {
    *lse = -INFINITY;
    return 0;
  }
  double top = scores[0], sum = 0, out = 0;
  for (double x : scores) top = std::max(top, x);
  for (size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scores[j] - top);
    sum += p;
    out += p * get_logical(v, k_row_offset(s, b, kv, int64_t(j)) + d);
  }
  *lse = top + std::log(sum);
  return out / sum;
}

void test_attention_reference() {
  // Fixed lengths, GQA 4 over 2, Sq != Sk, each mask: the reference against the plain one.
  for (int causal : {0, 1, 2}) {
    const SpecInfo spec = attention_spec(2, 5, 7, 4, 2, 3, causal, {}, {}, [](int role, int64_t row, int64_t head, int64_t c) {
      return std::sin(0.7 * double(role * 131 + row * 17 + head * 5 + c) + 0.3);
    });
    const auto want = attention_reference_values(spec);
    const AttentionShape s = attention_shape(spec);
    double worst = 0;
    bool lse_ok = true;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t row = 0; row < 5; ++row)
          for (int64_t d = 0; d < 3; ++d) {
            double lse = 0;
            const double plain = plain_attention(spec, b, h, row, d, &lse);
            worst = std::max(worst, std::fabs(plain - want[0][size_t(q_row_offset(s, b, h, row) + d)]));
            const double got = want[1][size_t(lse_offset(s, b, h, row))];
            lse_ok = lse_ok && (std::isinf(lse) ? got == lse : std::fabs(got - lse) < 1e-12);
          }
    CHECK(worst < 1e-12);
    CHECK(lse_ok);
  }
  // Bottom-right with Sq > Sk: the first queries see no key (zeros, lse -inf).
  {
    const SpecInfo spec = attention_spec(1, 6, 4, 1, 1, 2, 2, {}, {}, [](int, int64_t row, int64_t, int64_t c) {
      return double((row + c) % 3) - 1;
    });
    const auto want = attention_reference_values(spec);
    CHECK_EQ(want[0][0], 0.0);
    CHECK(std::isinf(want[1][0]) && want[1][0] < 0);
    CHECK(std::isinf(want[1][1]) && std::isfinite(want[1][2]));  // query 2 sees key 0
  }
  // Q = 0: every output row is the mean of the visible V rows, lse = ln(count).
  {
    const SpecInfo spec = attention_spec(1, 8, 8, 2, 1, 2, 1, {}, {}, [](int role, int64_t row, int64_t, int64_t c) {
      return role == 0 ? 0.0 : role == 1 ? 1.0 : double(row * 2 + c);
    });
    const auto want = attention_reference_values(spec);
    CHECK_EQ(want[0][size_t(q_row_offset(attention_shape(spec), 0, 1, 3))], 3.0);  // query 3, head 1, channel 0: mean of 0, 2, 4, 6
    CHECK(std::fabs(want[1][size_t(1 * 8 + 3)] - std::log(4.0)) < 1e-15);
  }
  // Variable lengths: sequences of 3 and 5 queries over 4 and 6 keys, bottom-right.
  {
    const SpecInfo spec = attention_spec(2, 0, 0, 2, 2, 2, 2, {0, 3, 8}, {0, 4, 10}, [](int role, int64_t row, int64_t head, int64_t c) {
      return std::cos(double(role * 7 + row * 3 + head + c));
    });
    const AttentionShape s = attention_shape(spec);
    CHECK_EQ(s.batch, int64_t(2));
    CHECK_EQ(s.q_len[1], int64_t(5));
    CHECK_EQ(s.k_begin[1], int64_t(4));
    const auto want = attention_reference_values(spec);
    double worst = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row)
        for (int64_t h = 0; h < 2; ++h) {
          double lse = 0;
          const double plain = plain_attention(spec, b, h, row, 1, &lse);
          worst = std::max(worst, std::fabs(plain - want[0][size_t(q_row_offset(s, b, h, row) + 1)]));
          worst = std::max(worst, std::fabs(lse - want[1][size_t(lse_offset(s, b, h, row))]));
        }
    CHECK(worst < 1e-12);
    CHECK_EQ(key_in_sequence(s, 5), int64_t(1));
    CHECK_EQ(key_in_sequence(s, 3), int64_t(3));
  }
}

// The channels a query's output holds under V[j, c] = [j = c mod m], Q = 0, for keys first..last.
std::vector<double> residue_channels(int64_t first, int64_t last, int64_t m) {
  std::vector<double> x(size_t(m), 0.0);
  for (int64_t j = first; j <= last; ++j) x[size_t(j % m)] += 1.0;
  for (double& v : x) v = round_to(DType::bf16, v / double(last - first + 1));  // as a bf16 output holds it
  return x;
}

void test_attention_probe_decoders() {
  // Key ranges: short ranges, ranges that wrap, one key past, and a length that is a multiple of m.
  const struct {
    int64_t first, last, expected_last;
  } cases[] = {{0, 0, 0}, {0, 10, 10}, {0, 11, 10}, {0, 100, 100}, {0, 254, 253}, {0, 4095, 4095}, {0, 4094, 4095}};
  for (const auto& c : cases) {
    const std::vector<double> x = residue_channels(c.first, c.last, 64);
    const KeyRange r = decode_key_range(x.data(), 64, 0, c.expected_last, 4096);
    if ((c.last - c.first + 1) % 64 == 0) {
      CHECK(!r.found);  // undecided under this modulus: the other one decides
      const std::vector<double> y = residue_channels(c.first, c.last, 63);
      const KeyRange other = decode_key_range(y.data(), 63, 0, c.expected_last, 4096);
      CHECK(other.found && other.first == c.first && other.last == c.last);
    } else {
      CHECK(r.found && r.first == c.first && r.last == c.last);
    }
  }
  // Two separate ranges are no range.
  std::vector<double> split(64, 0.0);
  split[3] = split[40] = 0.5;
  CHECK(!decode_key_range(split.data(), 64, 0, 50, 128).found);

  // Key-range evidence: every query of a causal 1 x 1 x 70 problem saw one key past the diagonal.
  AttentionShape s;
  s.batch = 1, s.heads_q = 1, s.heads_kv = 1, s.head_dim = 64, s.causal = 1, s.scale = 0.125;
  s.q_begin = {0}, s.q_len = {70}, s.k_begin = {0}, s.k_len = {70};
  std::vector<std::vector<double>> runs(2, std::vector<double>(size_t(70 * 64), 0.0));
  for (int p = 0; p < 2; ++p)
    for (int64_t row = 0; row < 70; ++row) {
      const std::vector<double> x = residue_channels(0, std::min<int64_t>(row + 1, 69), p == 0 ? 64 : 63);
      std::copy(x.begin(), x.end(), runs[size_t(p)].begin() + row * 64);
    }
  const std::string mask = key_range_evidence(s, runs, {64, 63});
  CHECK_CONTAINS(mask, "69 of 70 decoded query rows saw other keys than the mask (causal top_left) allows");
  CHECK_CONTAINS(mask, "one key past the diagonal, e.g. batch 0 head 0 query 0 saw keys 0-1 where the mask allows 0-0");
  for (int64_t row = 0; row < 70; ++row) {  // the right ranges: no evidence
    for (int p = 0; p < 2; ++p) {
      const std::vector<double> x = residue_channels(0, row, p == 0 ? 64 : 63);
      std::copy(x.begin(), x.end(), runs[size_t(p)].begin() + row * 64);
    }
  }
  CHECK_EQ(key_range_evidence(s, runs, {64, 63}), std::string());

  // KV heads: 8 query heads over 2, read as h % 2.
  AttentionShape h = s;
  h.heads_q = 8, h.heads_kv = 2, h.causal = 0, h.q_len = {4}, h.k_len = {4}, h.head_dim = 2;
  std::vector<double> heads(size_t(4 * 8 * 2), 0.0);
  for (int64_t row = 0; row < 4; ++row)
    for (int64_t head = 0; head < 8; ++head) heads[size_t(q_row_offset(h, 0, head, row))] = 1.0 + double(head % 2);
  CHECK_CONTAINS(head_evidence(h, heads), "query heads 0-7 read KV heads [0 1 0 1 0 1 0 1]");
  CHECK_CONTAINS(head_evidence(h, heads), "read [0 0 0 0 1 1 1 1] (head h reads h / 4)");
  for (int64_t row = 0; row < 4; ++row)
    for (int64_t head = 0; head < 8; ++head) heads[size_t(q_row_offset(h, 0, head, row))] = 1.0 + double(head / 4);
  CHECK_EQ(head_evidence(h, heads), std::string());

  // The scale: outputs made at ln 2 times the spec's scale decode to it, and name the slip.
  AttentionShape sc = s;
  sc.causal = 0, sc.q_len = {16}, sc.k_len = {16}, sc.head_dim = 4;
  std::vector<double> scaled(size_t(16 * 4), 0.0);
  const double x = 8, applied = 0.125 * std::log(2.0);
  for (int64_t row = 0; row < 16; ++row) {
    const double e = 8 * std::exp(applied * x), o = e / (e + 8);
    scaled[size_t(row * 4)] = round_to(DType::bf16, o);
  }
  const std::string scale = scale_evidence(sc, scaled, x);
  CHECK_CONTAINS(scale, "where the spec's is 0.125");
  CHECK_CONTAINS(scale, "ln 2: exp2 of the scores without the log2(e) factor");
  for (int64_t row = 0; row < 16; ++row) scaled[size_t(row * 4)] = round_to(DType::bf16, std::exp(1.0) / (std::exp(1.0) + 1));
  CHECK_EQ(scale_evidence(sc, scaled, x), std::string());

  // The lse against the normalizer O implies (Z = n_odd / (1 - O[., 0])): a natural-log lse of
  // the same Z agrees, whatever O's rounding; one in log2 units is named.
  std::vector<double> lse(16, std::log(8 * std::exp(1.0) + 8));
  CHECK_EQ(lse_evidence(sc, scaled, lse, DType::bf16), std::string());
  for (double& value : lse) value /= std::log(2.0);
  const std::string log2 = lse_evidence(sc, scaled, lse, DType::bf16);
  CHECK_CONTAINS(log2, "in 16 of 16 decoded query rows");
  CHECK_CONTAINS(log2, "the lse in log2 units (max + log2 of the sum), the ln 2 factor left out");
  for (double& value : lse) value = std::log(8 * std::exp(1.0) + 8) - 1.0;  // the max (a = 1) left out
  CHECK_CONTAINS(lse_evidence(sc, scaled, lse, DType::bf16), "the maximum left out of the lse");
  CHECK(attention_class_rank("softmax_scale") < attention_class_rank("lse"));
  CHECK(attention_class_rank("nondeterministic") < attention_class_rank("mask"));
  CHECK(attention_class_rank("mask") < attention_class_rank("softmax_scale"));
}

// The host side of the device reference (attention_device.cuh): its size rule, and its
// cross-check, whose sampled rows must agree with the host reference to a few units of 2^-53.
void test_attention_device_reference_host_side() {
  // Top-left causal, 5 queries over 7 keys: 1 + 2 + 3 + 4 + 5 visible pairs per head and batch.
  const SpecInfo spec = attention_spec(2, 5, 7, 4, 2, 3, 1, {}, {}, [](int role, int64_t row, int64_t head, int64_t c) {
    return std::cos(0.3 * double(role * 37 + row * 11 + head * 3 + c));
  });
  const AttentionShape s = attention_shape(spec);
  CHECK_EQ(attention_macs(s), 2.0 * (2 * 15) * 4 * 3);
  CHECK(!attention_reference_on_device(spec, "auto"));  // far below 2^30: the host
  CHECK(!attention_reference_on_device(spec, "host"));
  CHECK(attention_reference_on_device(spec, "device"));
  // The sample: the first and the last row, 48 rows in all, every one inside its batch.
  const std::vector<AttentionSampleRow> rows = attention_sample_rows(s);
  CHECK_EQ(rows.size(), size_t(kAttentionCrossCheckRows));
  CHECK(rows.front().b == 0 && rows.front().h == 0 && rows.front().row == 0);
  CHECK(rows[1].b == 1 && rows[1].h == 3 && rows[1].row == 4);
  bool inside = true;
  for (const AttentionSampleRow& r : rows) inside = inside && r.row < s.q_len[size_t(r.b)] && r.h < s.heads_q;
  CHECK(inside);
  // Recomputed from the tensors' storage, the sample agrees with the host reference.
  std::vector<AttentionSampleRow> sample = rows;
  compute_attention_sample(spec, s, &sample);
  const auto want = attention_host_values(spec);
  CHECK(judge_attention_sample(spec, s, sample, want[0], want[1]) < 1e-14);
  // Variable lengths with an empty sequence: no sampled row falls in it.
  const SpecInfo varlen = attention_spec(3, 0, 0, 2, 1, 2, 2, {0, 3, 3, 8}, {0, 4, 6, 12},
                                         [](int, int64_t row, int64_t, int64_t c) { return 0.1 * double(row + c); });
  const AttentionShape v = attention_shape(varlen);
  bool no_empty = true;
  for (const AttentionSampleRow& r : attention_sample_rows(v)) no_empty = no_empty && r.b != 1;
  CHECK(no_empty);
}

// op: attention_backward against finite differences of the forward: with O and lse the
// forward's own, dQ, dK and dV are the gradients of L = sum(dO * O(Q, K, V)).
void test_attention_backward() {
  const auto value = [](int role, int64_t row, int64_t head, int64_t c) {
    return 0.5 * std::sin(1.3 * double(role * 37 + row * 11 + head * 3 + c) + 0.2);
  };
  for (int causal : {0, 2}) {
    SpecInfo forward = attention_spec(1, 4, 5, 2, 1, 3, causal, {}, {}, value);
    const auto fwd = attention_reference_values(forward);
    SpecInfo backward;
    for (int i = 0; i < 3; ++i) backward.tensors.push_back(forward.tensors[size_t(i)]);
    Tensor o = forward.tensors[3], lse = forward.tensors[4];
    o.output = lse.output = false;
    for (int64_t i = 0; i < o.numel(); ++i) set_logical(o, i, fwd[0][size_t(i)]);
    for (int64_t i = 0; i < lse.numel(); ++i) set_logical(lse, i, fwd[1][size_t(i)]);
    Tensor d_out = make_tensor("dO", DType::f64, {1, 2, 4, 3});
    d_out.host.assign(d_out.storage_bytes(), 0);
    for (int64_t i = 0; i < d_out.numel(); ++i) set_logical(d_out, i, std::cos(0.9 * double(i)));
    backward.tensors.push_back(o);
    backward.tensors.push_back(lse);
    backward.tensors.push_back(d_out);
    for (int i = 0; i < 3; ++i) {
      Tensor g = forward.tensors[size_t(i)];
      g.name = i == 0 ? "dQ" : i == 1 ? "dK" : "dV";
      g.output = true;
      backward.tensors.push_back(g);
    }
    AttentionOperands& a = backward.custom.attention;
    a = forward.custom.attention;
    a.out = 3, a.lse = 4, a.d_out = 5, a.dq = 6, a.dk = 7, a.dv = 8;
    backward.custom.op = ReferenceOp::attention;
    backward.custom.outputs = {6, 7, 8};
    const auto grads = attention_reference_values(backward);

    // L at the forward's inputs with one element moved by `step`.
    const auto loss = [&](int role, int64_t i, double step) {
      SpecInfo moved = forward;
      Tensor& t = moved.tensors[size_t(role)];
      set_logical(t, i, get_logical(t, i) + step);
      const auto out = attention_reference_values(moved);
      double sum = 0;
      for (int64_t j = 0; j < d_out.numel(); ++j) sum += get_logical(d_out, j) * out[0][size_t(j)];
      return sum;
    };
    double worst = 0;
    for (int role = 0; role < 3; ++role)
      for (int64_t i = 0; i < forward.tensors[size_t(role)].numel(); ++i) {
        const double h = 1e-6;
        const double numeric = (loss(role, i, h) - loss(role, i, -h)) / (2 * h);
        worst = std::max(worst, std::fabs(numeric - grads[size_t(role)][size_t(i)]));
      }
    CHECK(worst < 1e-7);
  }
}
