// The self-test's checks of scaled, grouped and custom-reference GEMMs (scales.cuh, grouped.cuh,
// custom.cuh, probe_custom.cuh): block scales read as the kernels do, group offsets and their
// references, and custom classes. Included by runtime_selftest.cu after its check framework.
#pragma once

// ------------------------------------------------------------------ scaled and grouped GEMMs

void test_scales() {
  // Packed ue8m0: K block kb is byte kb % 4 of element kb / 4 along the K-block axis.
  Tensor sb = make_tensor("SB", DType::i32, {2, 3});  // [ceil(KB/4), NB] with KB = 6
  sb.host.assign(sb.storage_bytes(), 0x7F);
  ScaleSpec spec_b;
  spec_b.tensor = 0;
  spec_b.encoding = ScaleEncoding::ue8m0_packed;
  spec_b.block[0] = 16, spec_b.block[1] = 8;  // [bk, bn]
  const ScaleOperand s = scale_operand(spec_b, sb, sb.host.data(), false);
  CHECK(same_bits(scale_at(s, 0, 0), 1.0));
  set_scale(s, sb.host.data(), 2, 5, 0.25);  // n block 2, K block 5: element (1, 2), byte 1
  CHECK(same_bits(scale_of_block(s, 2, 5), 0.25));
  CHECK(same_bits(scale_at(s, 16 + 7, 5 * 16 + 15), 0.25));
  CHECK_EQ(int(sb.host[size_t((1 * 3 + 2) * 4 + 1)]), 125);
  CHECK(same_bits(scale_of_block(s, 2, 4), 1.0));  // its neighbour byte is untouched
  CHECK(std::isnan(ue8m0_value(255)));
  CHECK(same_bits(ue8m0_value(127 + 3), 8.0));

  // D = sum over K blocks of SA(m, kb) SB(kb, n) A B against a naive loop: SA f32 per row and
  // 128 of K, SB ue8m0 in u8 per [128, 16]; K = 300 ends in a partial block.
  const int64_t M = 37, N = 29, K = 300, KB = 3;
  Tensor a = make_tensor("A", DType::bf16, {M, K});
  Tensor b = make_tensor("B", DType::bf16, {K, N}, {1, K});
  std::string error;
  fill_host(a, "", &error);
  fill_host(b, "", &error);
  Tensor sa = make_tensor("SA", DType::f32, {M, KB});
  Tensor sb8 = make_tensor("SB", DType::u8, {KB, 2});
  sa.host.assign(sa.storage_bytes(), 0);
  sb8.host.assign(sb8.storage_bytes(), 0);
  for (int64_t i = 0; i < M * KB; ++i) set_logical(sa, i, 0.5 + double(i % 7) / 4);
  for (int64_t i = 0; i < KB * 2; ++i) sb8.host[size_t(i)] = static_cast<unsigned char>(124 + i);
  Tensor d = make_tensor("D", DType::f32, {M, N}, {}, true);
  GemmProblem p{&a, &b, nullptr, nullptr, &d, 2.0, 0.0, 1, M, N, K, false};
  p.scale_a = &sa, p.scale_b = &sb8;
  p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = 128;
  p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0;
  p.scale_b_spec.block[0] = 128, p.scale_b_spec.block[1] = 16;
  std::vector<double> ref;
  reference_gemm(p, &ref);
  double worst = 0.0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t kb = 0; kb < KB; ++kb) {
        double partial = 0.0;
        for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k)
          partial += get_logical(a, m * K + k) * get_logical(b, k * N + n);
        sum += get_logical(sa, m * KB + kb) * std::ldexp(1.0, int(124 + kb * 2 + n / 16) - 127) * partial;
      }
      worst = std::max(worst, std::fabs(ref[size_t(m * N + n)] - 2.0 * sum) / (std::fabs(2.0 * sum) + 1e-300));
    }
  record(worst < 1e-13, __FILE__, __LINE__, strprintf("scaled reference_gemm vs naive loop: worst %.3g", worst));
}

// A batched scaled GEMM: SA f32 [L, M, KB] and SB packed ue8m0 [L, 1, NB] (one per batch, each
// batch's different), then SB shared ([1, NB]), against a naive loop over every batch. The fill
// of [L, ...] ue8m0 scales numbers the blocks on from one batch to the next.
void test_batched_scales() {
  const int64_t L = 3, M = 21, N = 19, K = 300, KB = 3, NB = 2;
  Tensor a = make_tensor("A", DType::bf16, {L, M, K});
  Tensor b = make_tensor("B", DType::bf16, {L, K, N}, {K * N, 1, K});
  std::string error;
  fill_host(a, "", &error);
  fill_host(b, "", &error);
  Tensor sa = make_tensor("SA", DType::f32, {L, M, KB});
  sa.host.assign(sa.storage_bytes(), 0);
  for (int64_t i = 0; i < L * M * KB; ++i) set_logical(sa, i, 0.5 + double(i % 11) / 8);
  Tensor sb = make_tensor("SB", DType::i32, {L, 1, NB});
  sb.host.assign(sb.storage_bytes(), 0x7F);
  ScaleSpec spec_b;
  spec_b.tensor = 1, spec_b.encoding = ScaleEncoding::ue8m0_packed;
  spec_b.block[0] = 128, spec_b.block[1] = 16;  // [bk, bn]
  const ScaleOperand sb_view = scale_operand(spec_b, sb, sb.host.data(), false);
  CHECK_EQ(sb_view.batch_stride, NB);
  // SB(l, kb, nb) = 2^(l - kb + nb): every batch's scales differ.
  const auto sb_value = [](int64_t l, int64_t kb, int64_t nb) { return std::ldexp(1.0, int(l - kb + nb)); };
  for (int64_t l = 0; l < L; ++l)
    for (int64_t kb = 0; kb < KB; ++kb)
      for (int64_t nb = 0; nb < NB; ++nb) set_scale(sb_view, group_scale_data(sb, l), nb, kb, sb_value(l, kb, nb));
  CHECK(same_bits(scale_of_block(scale_of_batch(sb_view, 2), 1, 2), sb_value(2, 2, 1)));
  CHECK(same_bits(scale_at(scale_of_batch(sb_view, 1), 17, 130), sb_value(1, 1, 1)));
  Tensor d = make_tensor("D", DType::f32, {L, M, N}, {}, true);
  GemmProblem p{&a, &b, nullptr, nullptr, &d, 2.0, 0.0, L, M, N, K, true};
  p.scale_a = &sa, p.scale_b = &sb;
  p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = 128;
  p.scale_b_spec = spec_b;
  const auto check = [&](const char* what, const std::function<double(int64_t, int64_t, int64_t)>& sb_of, int line) {
    std::vector<double> ref;
    reference_gemm(p, &ref);
    double worst = 0.0;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double sum = 0.0;
          for (int64_t kb = 0; kb < KB; ++kb) {
            double partial = 0.0;
            for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k)
              partial += get_logical(a, (l * M + m) * K + k) * get_logical(b, (l * K + k) * N + n);
            sum += get_logical(sa, (l * M + m) * KB + kb) * sb_of(l, kb, n / 16) * partial;
          }
          const double want = 2.0 * sum, have = ref[size_t((l * M + m) * N + n)];
          worst = std::max(worst, std::fabs(have - want) / (std::fabs(want) + 1e-300));
        }
    record(worst < 1e-13, __FILE__, line, strprintf("%s reference_gemm vs naive loop: worst %.3g", what, worst));
  };
  check("batched scaled ([L, ...] scales)", sb_value, __LINE__);
  // SB shared by every batch: batch 1's scales alone, as a 2-D tensor.
  Tensor shared = make_tensor("SB", DType::i32, {1, NB});
  shared.host.assign(group_scale_data(sb, 1), group_scale_data(sb, 1) + NB * 4);
  p.scale_b = &shared;
  CHECK_EQ(problem_scales(p, false, false).batch_stride, 0);
  check("batched scaled (SB shared)", [&](int64_t, int64_t kb, int64_t nb) { return sb_value(1, kb, nb); }, __LINE__);

  // ue8m0 from an init over [L, ...]: the blocks numbered on across the batches (the Rust mirror,
  // inputs::input_bits, numbers them so); batches get different scales.
  Tensor su = make_tensor("SU", DType::u8, {L, M, KB});
  su.host.assign(su.storage_bytes(), 0);
  su.init.kind = InitKind::uniform, su.init.seed = 7;
  ScaleSpec spec_u;
  spec_u.encoding = ScaleEncoding::ue8m0, spec_u.block[0] = 1, spec_u.block[1] = 128;
  fill_ue8m0_scales(scale_operand(spec_u, su, su.host.data(), true), su, M, K);
  const uint64_t stream = stream_of("SU");
  int64_t mismatched = 0, same_as_batch_0 = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t i = 0; i < M * KB; ++i) {
      const uint64_t bits = counter_hash(7, stream, uint64_t(l * M * KB + i), 0);
      mismatched += su.host[size_t(l * M * KB + i)] != 127 + int(bits % 7) - 3;
      same_as_batch_0 += l > 0 && su.host[size_t(l * M * KB + i)] == su.host[size_t(i)];
    }
  CHECK_EQ(mismatched, 0);
  CHECK(same_as_batch_0 < (L - 1) * M * KB / 2);
}

// The grouped reference of `p` (its metadata read and checked, as the harness does) against
// `want(batch, m, n)`, a naive loop's values or not_compared_value().
void check_grouped_reference(GroupedProblem& p, const char* what,
                             const std::function<double(int64_t, int64_t, int64_t)>& want, int line) {
  p.groups = read_group_metadata(p);
  check_group_scale_blocks(p);
  std::vector<double> got;
  reference_grouped_gemm(p, &got);
  int64_t wrong = 0;
  for (int64_t l = 0; l < p.batches(); ++l)
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N; ++n) {
        const double w = want(l, m, n), have = got[size_t((l * p.M + m) * p.N + n)];
        wrong += is_not_compared(w) ? !is_not_compared(have) : std::fabs(have - w) > 1e-12 * (std::fabs(w) + 1);
      }
  record(got.size() == size_t(p.output_count()) && wrong == 0, __FILE__, line,
         strprintf("grouped %s reference vs naive: %lld outputs wrong", what, (long long)wrong));
}

void test_grouped() {
  std::string error;
  const int64_t N = 11, K = 13;
  // contiguous: groups [5, 0, 9] aligned to 4 take rows 0-7 (5 of group 0), 8-19 (9 of group 2).
  Init groups;
  groups.kind = InitKind::groups;
  groups.values = {5, 0, 9};
  groups.align = 4;
  const std::vector<double> index = listed_values(groups, 22);
  CHECK(index == std::vector<double>({0, 0, 0, 0, 0, -1, -1, -1, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, -1, -1, -1}));
  const auto naive = [](const Tensor& a, const Tensor& b, int64_t a_row, int64_t b_base, int64_t k0, int64_t kg,
                        int64_t n, int64_t a_k, int64_t b_n) {
    double sum = 0.0;
    for (int64_t k = k0; k < k0 + kg; ++k) sum += get_logical(a, a_row * a_k + k) * get_logical(b, b_base + k * b_n + n);
    return sum;
  };
  const auto check_layout = [](GroupedProblem& p, const char* what, const std::function<double(int64_t, int64_t, int64_t)>& want) {
    check_grouped_reference(p, what, want, __LINE__);
  };
  {
    const int64_t M = 22, G = 3;
    Tensor a = make_tensor("A", DType::bf16, {M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("I", DType::i32, {M}), d = make_tensor("D", DType::f32, {M, N}, {}, true);
    meta.init = groups;
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::contiguous, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K;
    check_layout(p, "contiguous", [&](int64_t, int64_t m, int64_t n) {
      const int64_t g = int64_t(index[size_t(m)]);
      return g < 0 ? not_compared_value() : naive(a, b, m, g * K * N, 0, K, n, K, N);
    });
    std::vector<double> ones;
    analytic_grouped_ones(p, &ones);
    CHECK(same_bits(ones[0], double(K)) && is_not_compared(ones[size_t(5 * N)]));
    CHECK_CONTAINS(describe_groups(p), "8 of 22 rows are padding");
  }
  {
    const int64_t M = 7, G = 3;
    Tensor a = make_tensor("A", DType::f32, {G, M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("MM", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    meta.init.kind = InitKind::values;
    meta.init.values = {7, 0, 3};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.alpha = 0.5;
    const int64_t rows[] = {7, 0, 3};
    check_layout(p, "masked", [&](int64_t g, int64_t m, int64_t n) {
      return m >= rows[g] ? not_compared_value() : 0.5 * naive(a, b, g * M + m, g * K * N, 0, K, n, K, N);
    });
  }
  {
    const int64_t M = 5, G = 3, K_total = 20;
    Tensor a = make_tensor("A", DType::bf16, {M, K_total}), b = make_tensor("B", DType::bf16, {K_total, N});
    Tensor meta = make_tensor("KS", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    meta.init.kind = InitKind::values;
    meta.init.values = {8, 0, 9};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K_total;
    const int64_t k0[] = {0, 8, 8}, kg[] = {8, 0, 9};
    check_layout(p, "k_grouped", [&](int64_t g, int64_t m, int64_t n) {
      return naive(a, b, m, 0, k0[g], kg[g], n, K_total, N);
    });
  }

  // Not-compared outputs are skipped and counted, whatever the output holds there.
  Tensor out = make_tensor("D", DType::f32, {2, 3}, {}, true);
  out.host.assign(out.storage_bytes(), 0);
  for (int64_t i = 0; i < 6; ++i) set_logical(out, i, double(i));
  std::vector<double> want = {0, 1, 2, 3, 4, 5};
  want[4] = not_compared_value();
  set_logical(out, 4, 1e30);
  const Comparison c = compare_output(out, want, 1, 2, 3, Tolerance{0, 0, 0, true}, 0, 0);
  CHECK(c.passed);
  CHECK_EQ(c.not_compared, int64_t(1));
  CHECK_EQ(c.count, int64_t(5));
  CHECK_CONTAINS(format_comparison_line("D", c), "(1 not compared)");
}

// Grouped GEMMs with block scales (issue 61): each group's scales windowed from the tensors
// as grouped.cuh says, against a naive loop that indexes them directly. K blocks of 4 (K = 13
// ends in a partial one), B's blocks 4 wide along N.
void test_grouped_scales() {
  std::string error;
  const int64_t N = 11, K = 13, BK = 4, BN = 4, KB = 4, NB = 3;
  const auto fill_values = [](Tensor& t, double first) {
    t.host.assign(t.storage_bytes(), 0);
    for (int64_t i = 0; i < t.numel(); ++i) set_logical(t, i, first + double(i % 5) / 4);
  };
  const auto compare = [](GroupedProblem& p, const char* what, const std::function<double(int64_t, int64_t, int64_t)>& want) {
    check_grouped_reference(p, what, want, __LINE__);
  };
  ScaleSpec spec_a, spec_b;
  spec_a.block[0] = 1, spec_a.block[1] = BK;
  spec_b.block[0] = BK, spec_b.block[1] = BN;
  {  // contiguous: SA [M_total, KB] over A's rows, SB [G, KB, NB] f32
    const int64_t M = 22, G = 3;
    Init groups;
    groups.kind = InitKind::groups;
    groups.values = {5, 0, 9};
    groups.align = 4;
    const std::vector<double> index = listed_values(groups, M);
    Tensor a = make_tensor("A", DType::bf16, {M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("I", DType::i32, {M}), d = make_tensor("D", DType::f32, {M, N}, {}, true);
    Tensor sa = make_tensor("SA", DType::f32, {M, KB}), sb = make_tensor("SB", DType::f32, {G, KB, NB});
    meta.init = groups;
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    fill_values(sa, 0.5), fill_values(sb, 0.25);
    GroupedProblem p;
    p.layout = GroupedLayout::contiguous, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec = spec_a, p.scale_b_spec = spec_b;
    compare(p, "contiguous", [&](int64_t, int64_t m, int64_t n) {
      const int64_t g = int64_t(index[size_t(m)]);
      if (g < 0) return not_compared_value();
      double sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += get_logical(a, m * K + k) * get_logical(b, (g * K + k) * N + n) * get_logical(sa, m * KB + k / BK) *
               get_logical(sb, (g * KB + k / BK) * NB + n / BN);
      return sum;
    });
  }
  {  // masked: SA [G, M_max, KB] f32, SB [G, 1, NB] ue8m0 packed (four K blocks an i32)
    const int64_t M = 7, G = 3;
    Tensor a = make_tensor("A", DType::bf16, {G, M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("MM", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    Tensor sa = make_tensor("SA", DType::f32, {G, M, KB}), sb = make_tensor("SB", DType::i32, {G, 1, NB});
    meta.init.kind = InitKind::values;
    meta.init.values = {7, 0, 3};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    fill_values(sa, 0.5);
    sb.host.assign(sb.storage_bytes(), 0);
    for (size_t i = 0; i < sb.host.size(); ++i) sb.host[i] = static_cast<unsigned char>(124 + i % 7);
    GroupedProblem p;
    p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec = spec_a, p.scale_b_spec = spec_b;
    p.scale_b_spec.encoding = ScaleEncoding::ue8m0_packed;
    const int64_t rows[] = {7, 0, 3};
    compare(p, "masked, packed ue8m0", [&](int64_t g, int64_t m, int64_t n) {
      if (m >= rows[g]) return not_compared_value();
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        const unsigned byte = sb.host[size_t((g * NB + n / BN) * 4 + (k / BK) % 4)];
        sum += get_logical(a, (g * M + m) * K + k) * get_logical(b, (g * K + k) * N + n) *
               get_logical(sa, (g * M + m) * KB + k / BK) * ue8m0_value(byte);
      }
      return sum;
    });
  }
  {  // contiguous with beta C (C shaped as the output: every group's rows in place), no scales
    const int64_t M = 22, G = 3;
    Init groups;
    groups.kind = InitKind::groups;
    groups.values = {5, 0, 9};
    groups.align = 4;
    const std::vector<double> index = listed_values(groups, M);
    Tensor a = make_tensor("A", DType::bf16, {M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("I", DType::i32, {M}), d = make_tensor("D", DType::f32, {M, N}, {}, true);
    Tensor c = make_tensor("C", DType::f32, {M, N}, {1, M});  // column-major: its own strides
    meta.init = groups;
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error), fill_host(c, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::contiguous, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.alpha = 2.0, p.c = &c, p.beta = 0.5;
    compare(p, "contiguous, beta C", [&](int64_t, int64_t m, int64_t n) {
      const int64_t g = int64_t(index[size_t(m)]);
      if (g < 0) return not_compared_value();
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += get_logical(a, m * K + k) * get_logical(b, (g * K + k) * N + n);
      return 2.0 * sum + 0.5 * get_logical(c, m * N + n);
    });
  }
  {  // masked with beta C [G, M_max, N] and f32 scales
    const int64_t M = 7, G = 3;
    Tensor a = make_tensor("A", DType::bf16, {G, M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("MM", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    Tensor c = make_tensor("C", DType::f32, {G, M, N});
    Tensor sa = make_tensor("SA", DType::f32, {G, M, KB}), sb = make_tensor("SB", DType::f32, {G, KB, NB});
    meta.init.kind = InitKind::values;
    meta.init.values = {7, 0, 3};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error), fill_host(c, "", &error);
    fill_values(sa, 0.5), fill_values(sb, 0.25);
    GroupedProblem p;
    p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.c = &c, p.beta = 1.0, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec = spec_a, p.scale_b_spec = spec_b;
    const int64_t rows[] = {7, 0, 3};
    compare(p, "masked, beta C, scaled", [&](int64_t g, int64_t m, int64_t n) {
      if (m >= rows[g]) return not_compared_value();
      double sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += get_logical(a, (g * M + m) * K + k) * get_logical(b, (g * K + k) * N + n) *
               get_logical(sa, (g * M + m) * KB + k / BK) * get_logical(sb, (g * KB + k / BK) * NB + n / BN);
      return sum + get_logical(c, (g * M + m) * N + n);
    });
  }
  {  // k_grouped_blocks: A flat [M * K_total], group g's [M, k_g] block at M * k0; B flat, its
     // [N, k_g] block at N * k0; SA flat, [M, k_g / BK] blocks; SB flat, [N, k_g / BK] blocks; C
    const int64_t M = 5, G = 3, K_total = 20;
    Tensor a = make_tensor("A", DType::bf16, {M * K_total}), b = make_tensor("B", DType::bf16, {N * K_total});
    Tensor meta = make_tensor("KS", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    Tensor sa = make_tensor("SA", DType::f32, {M * K_total / BK}), sb = make_tensor("SB", DType::f32, {N * K_total / BK});
    Tensor c = make_tensor("C", DType::f32, {G, M, N});
    meta.init.kind = InitKind::values;
    meta.init.values = {8, 0, 12};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error), fill_host(c, "", &error);
    fill_values(sa, 0.5), fill_values(sb, 0.25);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped_blocks, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K_total, p.scale_a = &sa, p.scale_b = &sb, p.c = &c, p.beta = 1.0;
    p.scale_a_spec = spec_a;
    p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = 1;
    const int64_t k0[] = {0, 8, 8}, kg[] = {8, 0, 12};
    compare(p, "k_grouped_blocks, scaled, beta C", [&](int64_t g, int64_t m, int64_t n) {
      double sum = 0;
      for (int64_t k = 0; k < kg[g]; ++k)
        sum += get_logical(a, M * k0[g] + m * kg[g] + k) * get_logical(b, N * k0[g] + n * kg[g] + k) *
               get_logical(sa, M * k0[g] / BK + m * (kg[g] / BK) + k / BK) *
               get_logical(sb, N * k0[g] / BK + n * (kg[g] / BK) + k / BK);
      return sum + get_logical(c, (g * M + m) * N + n);
    });
  }
  {  // k_grouped: SA [M, K_total / BK], SB [K_total / BK, NB]; K ranges 8, 0, 12 (whole blocks)
    const int64_t M = 5, G = 3, K_total = 20, KBT = 5;
    Tensor a = make_tensor("A", DType::bf16, {M, K_total}), b = make_tensor("B", DType::bf16, {K_total, N});
    Tensor meta = make_tensor("KS", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    Tensor sa = make_tensor("SA", DType::f32, {M, KBT}), sb = make_tensor("SB", DType::f32, {KBT, NB});
    meta.init.kind = InitKind::values;
    meta.init.values = {8, 0, 12};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    fill_values(sa, 0.5), fill_values(sb, 0.25);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K_total, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec = spec_a, p.scale_b_spec = spec_b;
    const int64_t k0[] = {0, 8, 8}, kg[] = {8, 0, 12};
    compare(p, "k_grouped", [&](int64_t g, int64_t m, int64_t n) {
      double sum = 0;
      for (int64_t k = k0[g]; k < k0[g] + kg[g]; ++k)
        sum += get_logical(a, m * K_total + k) * get_logical(b, k * N + n) * get_logical(sa, m * KBT + k / BK) *
               get_logical(sb, (k / BK) * NB + n / BN);
      return sum;
    });
  }
}

// Kernels that are no GEMM (custom.cuh): outputs of any rank, localized by index with the
// launch's block, and the frame, exactness and reference checks around them.
void test_custom_classify() {
  TestRng rng{18};
  // The frame: rank 1 is [1, 1, N]; rank 4 folds its two leading dimensions into L.
  const OutputFrame f1 = output_frame(make_tensor("D", DType::f32, {1000}), {256});
  CHECK(f1.L == 1 && f1.M == 1 && f1.N == 1000 && f1.block_m == 1 && f1.block_n == 256);
  const OutputFrame f4 = output_frame(make_tensor("D", DType::f32, {2, 3, 8, 32}), {8, 32});
  CHECK(f4.L == 6 && f4.M == 8 && f4.N == 32 && f4.block_m == 8 && f4.block_n == 32);
  CHECK_EQ(element_name(make_tensor("Y", DType::f32, {5, 7}), 17), std::string("Y[2, 3]"));

  const int64_t N = 1000;
  std::vector<double> ref(static_cast<size_t>(N));
  for (double& v : ref) v = rng.uniform() * 2 - 1;
  const Tolerance tol = default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(ref));
  const auto run1 = [&](const std::vector<double>& got, const std::vector<int64_t>& unwritten = {}) {
    const Comparison c = compare_output(output_with(DType::f32, {N}, got, unwritten), ref, 1, 1, N, tol, 1, 256, 1);
    return classify(c, 0, tol);
  };
  CHECK_EQ(run1(ref).cls, std::string("ok"));
  // The last, partial block of a 1-D launch (elements 768-999) wrong, full blocks right.
  std::vector<double> got = ref;
  for (int64_t i = 768; i < N; ++i) got[size_t(i)] += 1.0;
  Pattern p = run1(got);
  CHECK_EQ(p.cls, std::string("boundary"));
  CHECK_CONTAINS(p.evidence, "the last, partial block of the launch: elements 768-999 (N % 256 = 232)");
  // Element i holds the reference's i + 1 (a row pointer read one past): layout, not columns.
  for (int64_t i = 0; i < N; ++i) got[size_t(i)] = i + 1 < N ? ref[size_t(i + 1)] : 0.0;
  p = run1(got);
  CHECK_EQ(p.cls, std::string("layout"));
  CHECK_CONTAINS(p.evidence, "elements each holds the next one's values (i <- i+1)");
  // Every fourth element wrong: a period.
  got = ref;
  for (int64_t i = 3; i < N; i += 4) got[size_t(i)] += 1.0;
  p = run1(got);
  CHECK_EQ(p.cls, std::string("layout"));
  CHECK_CONTAINS(p.evidence, "right only where i mod 8 is 0-2, 4-6, wrong elsewhere");
  // Unwritten elements are named as elements.
  p = run1(ref, {5, 6, 7});
  CHECK_EQ(p.cls, std::string("unwritten"));
  CHECK_CONTAINS(p.evidence, "3 of 1000 outputs were never written (still poison): elements 5-7");
  // A 1-D output has no whole columns: scattered single errors stay scattered.
  got = ref;
  for (int64_t i : {3, 250, 600}) got[size_t(i)] += 1.0;
  CHECK_EQ(run1(got).cls, std::string("scattered"));

  // 2-D: the image border (the last column) is boundary even where the blocks are full; whole
  // rows say a row's index; the mismatch lines name blocks.
  const int64_t H = 64, W = 64;
  std::vector<double> image(static_cast<size_t>(H * W));
  for (double& v : image) v = rng.uniform() * 2 - 1;
  const Tolerance tol2 = default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(image));
  const auto run2 = [&](const std::vector<double>& values) {
    return compare_output(output_with(DType::f32, {H, W}, values), image, 1, H, W, tol2, 8, 32, 2);
  };
  got = image;
  for (int64_t y = 0; y < H; ++y) got[size_t(y * W + W - 1)] += 1.0;
  Comparison c = run2(got);
  p = classify(c, 0, tol2);
  CHECK_EQ(p.cls, std::string("boundary"));
  CHECK_CONTAINS(p.evidence, "all 64 bad outputs lie on the output's border (the last column (63): 64, the last row (63): 1, the first row (0): 1)");
  CHECK_CONTAINS(format_mismatches("D", c, false), "  D[0, 63] block (0,1) at (0,31): got");
  got = image;
  for (int64_t x = 0; x < W; ++x) got[size_t(5 * W + x)] += 1.0, got[size_t(9 * W + x)] += 1.0;
  p = classify(run2(got), 0, tol2);
  CHECK_EQ(p.cls, std::string("row_mapping"));
  CHECK_CONTAINS(p.evidence, "rows 5, 9; a row's index, stride or offset is wrong");
  // All zeros is no k_coverage outside a GEMM.
  CHECK_EQ(classify(run2(std::vector<double>(image.size(), 0.0)), 0, tol2).cls, std::string("scattered"));
  CHECK_CONTAINS(format_heatmap(run2(got)), "blocks  bad share per 8x32 output block, 8 x 2 blocks");

  // Exactness: integer inputs and an integer reference below 2^24.
  SpecInfo spec;
  spec.tensors.push_back(make_tensor("X", DType::f32, {4}));
  std::string error;
  spec.tensors[0].init = Init{InitKind::ones, 0, 0, 0, "", {}, 1};
  fill_host(spec.tensors[0], "", &error);
  CHECK(exact_comparison(spec, {{4.0, 16777216.0}}));
  CHECK(!exact_comparison(spec, {{0.5}}));
  CHECK(!exact_comparison(spec, {{33554432.0}}));
  set_logical(spec.tensors[0], 2, 0.25);
  CHECK(!exact_comparison(spec, {{4.0}}));
  CHECK_EQ(iota_period(DType::bf16), int64_t(251));
  // The block an input element falls in, for the block-code probe: [8, 32] over a [16, 64] input.
  const Tensor in = make_tensor("X", DType::f32, {16, 64});
  CHECK_EQ(input_block(in, 0, {8, 32}), int64_t(0));
  CHECK_EQ(input_block(in, 40, {8, 32}), int64_t(1));
  CHECK_EQ(input_block(in, 9 * 64 + 33, {8, 32}), int64_t(3));
  CHECK_EQ(custom_class_rank("nondeterministic") < custom_class_rank("boundary"), true);
}

// ------------------------------------------------------------------ outputs computed from outputs

// A reference of the shape reference.upstream serves (examples/references/layer_norm.h, cut
// down): Mean per row, then Y from it, read back as an output.
void centered_rows_reference(const ReferenceTensor* tensors) {
  const In X(tensors[0]);
  const Out Mean(tensors[1]), Y(tensors[2]);
  for (int64_t r = 0; r < X.shape(0); ++r) {
    Mean(r) = 0;
    for (int64_t j = 0; j < X.shape(1); ++j) Mean(r) += X(r, j);
    Mean(r) /= double(X.shape(1));
    for (int64_t j = 0; j < X.shape(1); ++j) Y(r, j) = X(r, j) - Mean(r);
  }
}

void test_output_order() {
  // Upstream before downstream, the spec's order otherwise; a circle gives no order.
  CHECK((upstream_order({{}, {}, {}}) == std::vector<int>{0, 1, 2}));
  CHECK((upstream_order({{1, 2}, {2}, {}}) == std::vector<int>{2, 1, 0}));
  CHECK((upstream_order({{2}, {}, {}}) == std::vector<int>{1, 2, 0}));
  CHECK(upstream_order({{1}, {0}}).empty());

  // Y [0] from Mean [1] and Rstd [2], Rstd from Mean. Rstd wrong by itself, Y following: the
  // first wrong output is Rstd, and Y follows from it alone (Mean is right).
  const std::vector<std::vector<int>> upstream = {{1, 2}, {}, {1}};
  const std::vector<int> order = upstream_order(upstream);
  CHECK((order == std::vector<int>{1, 2, 0}));
  std::vector<OutputStanding> s(3);
  s[0].wrong = true, s[0].recomputed = true, s[0].right_given = true;
  s[2].wrong = true, s[2].recomputed = true, s[2].right_given = false;
  CHECK_EQ(first_wrong_output(order, s), 2);
  CHECK(s[0].follows() && !s[0].wrong_by_itself() && s[2].wrong_by_itself());
  CHECK((wrong_upstream(0, upstream, s) == std::vector<int>{2}));
  // Y wrong even from the kernel's statistics, and listed first in the spec: still after them.
  s[2] = OutputStanding{};
  s[0].right_given = false;
  CHECK_EQ(first_wrong_output(order, s), 0);
  // Every wrong output follows (its upstream right within tolerance): the first wrong one.
  s[0].right_given = true;
  CHECK_EQ(first_wrong_output(order, s), 0);
  CHECK(wrong_upstream(0, upstream, s).empty());
  CHECK_EQ(first_wrong_output(order, std::vector<OutputStanding>(3)), -1);

  // An output element: assigned and read; a given one reads the kernel's value, drops writes.
  double slot = 0, kernel = 5;
  OutputElement own(&slot, nullptr), given(&slot, &kernel);
  own = 2, own += 1, own *= 4;
  CHECK_EQ(double(own), 12.0);
  given = 7, given += 1;
  CHECK_EQ(double(given), 5.0);
  CHECK_EQ(slot, 12.0);
  own = given;  // the value, not the element
  CHECK_EQ(slot, 5.0);

  // The reference called with Mean given the kernel's (wrong) values: Y is computed from them,
  // Mean's own writes are dropped, and Mean's values come back as given.
  HarnessSpec harness{};
  harness.custom_reference = &centered_rows_reference;
  SpecInfo spec;
  spec.harness = &harness;
  spec.custom.op = ReferenceOp::custom;
  spec.tensors.push_back(make_tensor("X", DType::f32, {2, 3}));
  spec.tensors.push_back(make_tensor("Mean", DType::f32, {2}, {}, true));
  spec.tensors.push_back(make_tensor("Y", DType::f32, {2, 3}, {}, true));
  for (Tensor& t : spec.tensors) t.host.assign(t.storage_bytes(), 0);
  const double x[6] = {1, 2, 3, 4, 4, 7};
  for (int i = 0; i < 6; ++i) set_logical(spec.tensors[0], i, x[i]);
  spec.custom.outputs = {1, 2};
  spec.custom.upstream = {{}, {0}};
  const std::vector<std::vector<double>> own_values = custom_reference_values(spec);
  CHECK((own_values[0] == std::vector<double>{2, 5}));
  CHECK((own_values[1] == std::vector<double>{-1, 0, 1, -1, -1, 2}));
  const std::vector<std::vector<double>> given_mean = {{1, 4}, {}};
  const std::vector<std::vector<double>> from_kernel = custom_reference_values(spec, &given_mean);
  CHECK((from_kernel[0] == std::vector<double>{1, 4}));
  CHECK((from_kernel[1] == std::vector<double>{0, 1, 2, 0, 0, 3}));
}
