// The self-test's checks of the group scale probes of a grouped GEMM with block scales
// (probe_group_scales.cuh; issue 61). The kernel of kernels/fp8_grouped_gemm.cuh is emulated on
// the host as it computes (a row's group, its scale row, the group its scales come from, the byte
// of a packed ue8m0 element it reads), defects included, on the probes' own operands and on
// scales set by the probes' own fill (set_group_probe_scales, the generated inputs' packing); its
// outputs go through the decoders and the verdict. Included by runtime_selftest.cu after
// verdict_checks.h.
#pragma once

enum class EmulatedScaleDefect { none, previous_group_scales, scale_row_within_group, ue8m0_byte_order_group_1 };

// A grouped problem of the examples' shapes: contiguous (fp8_grouped_contiguous*: M_total 1152,
// groups [300, 200, 0, 410] padded to 128, f32 scales) or masked (fp8_grouped_masked_ue8m0*:
// M_max 200, masked_m [170, 200, 0, 90], packed ue8m0); K = 640 (five K blocks), N = 136 (two
// scale_b column blocks, the last partial) where the examples have 376 or 384, to keep it quick.
struct GroupedScaleFixture {
  Tensor a, b, meta, sa, sb;
  GroupedProblem p;
  bool ue8m0 = false;
  static constexpr int64_t kN = 136, kK = 640, kG = 4, kBlock = 128;

  explicit GroupedScaleFixture(bool masked) : ue8m0(masked) {
    std::string error;
    const int64_t KB = ceil_div(kK, kBlock), NB = ceil_div(kN, kBlock), M = masked ? 200 : 1152;
    if (masked) {
      meta = make_tensor("MM", DType::i32, {kG});
      meta.init.kind = InitKind::values;
      meta.init.values = {170, 200, 0, 90};
      a = make_tensor("A", DType::e4m3, {kG, M, kK});
      sa = make_tensor("SA", DType::i32, {kG, M, ceil_div(KB, 4)});
      sb = make_tensor("SB", DType::i32, {kG, ceil_div(KB, 4), NB});
    } else {
      meta = make_tensor("I", DType::i32, {M});
      meta.init.kind = InitKind::groups;
      meta.init.values = {300, 200, 0, 410};
      meta.init.align = 128;
      a = make_tensor("A", DType::e4m3, {M, kK});
      sa = make_tensor("SA", DType::f32, {M, KB});
      sb = make_tensor("SB", DType::f32, {kG, KB, NB});
    }
    b = make_tensor("B", DType::e4m3, {kG, kK, kN});
    fill_host(meta, "", &error);
    // The spec's packed ue8m0 holds 1.0 in every byte before the probes set theirs.
    sa.host.assign(sa.storage_bytes(), masked ? 127 : 0);
    sb.host.assign(sb.storage_bytes(), masked ? 127 : 0);
    p.layout = masked ? GroupedLayout::masked : GroupedLayout::contiguous;
    p.a = &a, p.b = &b, p.metadata = &meta, p.scale_a = &sa, p.scale_b = &sb;
    p.G = kG, p.M = M, p.N = kN, p.K = kK;
    p.scale_a_spec.tensor = 0, p.scale_b_spec.tensor = 1;
    p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = kBlock;
    p.scale_b_spec.block[0] = kBlock, p.scale_b_spec.block[1] = kBlock;
    if (masked) p.scale_a_spec.encoding = p.scale_b_spec.encoding = ScaleEncoding::ue8m0_packed;
    p.groups = read_group_metadata(p);
  }
  GroupedScaleFixture(const GroupedScaleFixture&) = delete;

  // The probes' scale fill: value(group, i_block, k_block).
  template <typename F>
  void set_scales(bool is_a, F value) {
    set_group_probe_scales(is_a ? p.scale_a_spec : p.scale_b_spec, is_a ? sa : sb, is_a, is_a ? p.M : p.N, p.K, value);
  }

  // The scale of K block kb in a row of SA (`row` its scale row) or of group `group`'s SB at
  // column block nb, read as the kernel reads it: element kb (f32), or byte kb % 4 of element
  // kb / 4, byte 3 - kb % 4 when `reversed` (ue8m0).
  double scale(bool is_a, int64_t row_or_group, int64_t kb, int64_t nb, bool reversed) const {
    const int64_t KB = ceil_div(kK, kBlock), NB = ceil_div(kN, kBlock), per_row = ue8m0 ? ceil_div(KB, 4) : KB;
    const int64_t k_index = ue8m0 ? kb / 4 : kb;
    const int64_t element = is_a ? row_or_group * per_row + k_index : (row_or_group * per_row + k_index) * NB + nb;
    const Tensor& t = is_a ? sa : sb;
    if (!ue8m0) return decode(DType::f32, t.host.data(), element);
    const int64_t byte = reversed ? 3 - kb % 4 : kb % 4;
    return ue8m0_value(t.host[size_t(element * 4 + byte)]);
  }

  // fp8_grouped_gemm's output (alpha 1) on operands constant over each 128-wide K block, as every
  // probe's are: a_of(batch, row, kb), b_of(group, kb, n). Rows it does not write are 0 (they are
  // not compared).
  Tensor emulate(EmulatedScaleDefect defect, const std::function<double(int64_t, int64_t, int64_t)>& a_of,
                 const std::function<double(int64_t, int64_t, int64_t)>& b_of) const {
    const int64_t KB = ceil_div(kK, kBlock), batches = p.batches();
    std::vector<double> d(size_t(batches * p.M * kN), 0.0);
    for (int64_t l = 0; l < batches; ++l)
      for (int64_t m = 0; m < p.M; ++m) {
        int64_t g = l, scale_row = l * p.M + m;
        if (p.layout == GroupedLayout::contiguous) {
          g = p.groups[size_t(m)];
          if (g < 0) continue;
          if (defect == EmulatedScaleDefect::scale_row_within_group) {
            int64_t first = m;
            while (first > 0 && p.groups[size_t(first - 1)] == g) --first;
            scale_row = m - first;
          }
        } else if (m >= p.groups[size_t(g)]) {
          continue;
        }
        const int64_t scale_group = defect == EmulatedScaleDefect::previous_group_scales && g > 0 ? g - 1 : g;
        const bool reversed = defect == EmulatedScaleDefect::ue8m0_byte_order_group_1 && g == 1;
        for (int64_t n = 0; n < kN; ++n) {
          double acc = 0;
          for (int64_t kb = 0; kb < KB; ++kb) {
            const double width = double(std::min(kK, (kb + 1) * kBlock) - kb * kBlock);
            const double partial = width * a_of(l, m, kb) * b_of(g, kb, n);
            acc += partial * scale(true, scale_row, kb, 0, reversed) * scale(false, scale_group, kb, n / kBlock, reversed);
          }
          d[size_t((l * p.M + m) * kN + n)] = acc;
        }
      }
    return output_with(DType::bf16, {batches * p.M, kN}, d);
  }
};

// A probe's outcome as judge_probe reads it: the emulated output against the probe's answers.
ProbeOutcome emulated_grouped_probe(const GroupedProblem& p, const std::string& name, const Tensor& out,
                                    const ProbeValues& want) {
  ProbeOutcome o;
  o.name = name;
  const std::vector<double> answers = expand_on_host(want, p.batches(), p.M, p.N);
  o.comparison = compare_output(out, answers, p.batches(), p.M, p.N, kExact, 16, 16);
  o.passed = o.comparison.passed;
  if (!o.passed) o.pattern = classify(o.comparison, 0, kExact);
  return o;
}

// The three kinds of group scale probe on an emulated kernel, as run_group_scale_probes runs
// them: their outcomes, and what their decoders say.
struct GroupScaleRun {
  std::vector<ProbeOutcome> probes;
  GroupScaleFinding groups, rows, k_blocks;
};

GroupScaleRun run_emulated_group_scales(GroupedScaleFixture& f, EmulatedScaleDefect defect) {
  const GroupedProblem& p = f.p;
  GroupScaleRun run;
  const auto one = [](int64_t, int64_t, int64_t) { return 1.0; };
  const double K = double(p.K);
  const DType out_dtype = DType::bf16;  // the examples' D

  // Group scale: B of group g = 2^w, its scale_b 2^(4w); SA 1.
  const GroupScaleCodes codes = group_scale_codes(p.G, f.b.dtype, f.sb.dtype, p.scale_b_spec.encoding, out_dtype, K);
  CHECK_EQ(codes.bits, 2);
  CHECK_EQ(codes.digits, 1);
  f.set_scales(true, one);
  std::vector<std::vector<unsigned char>> outputs;
  Tensor last;
  for (int d = 0; d < codes.digits; ++d) {
    f.set_scales(false, [&](int64_t g, int64_t, int64_t) { return codes.scale(g, d); });
    last = f.emulate(defect, one, [&](int64_t g, int64_t, int64_t) { return codes.weights(g, d); });
    run.probes.push_back(emulated_grouped_probe(p, strprintf("group scale %d", d), last,
                                                grouped_expected(p, [&](int64_t g) { return codes.product(g, d); })));
    outputs.push_back(last.host);
  }
  run.groups = decode_group_scales(p, outputs, last, codes, 128, 16);

  // scale_a rows: block i (of group g: g * blocks + i) = 2^(digit d of it, base 16); SB 1.
  ScaleRowBlocks rows;
  rows.blocks = p.M;
  rows.per_group = p.layout == GroupedLayout::masked;
  const int64_t lines = rows.per_group ? p.G * p.M : p.M;
  const int digits = lines > 256 ? 3 : 2;
  f.set_scales(false, one);
  outputs.clear();
  for (int d = 0; d < digits; ++d) {
    const auto code = [&](int64_t line) { return std::ldexp(1.0, int((line >> (4 * d)) & 15)); };
    f.set_scales(true, [&](int64_t g, int64_t ib, int64_t) { return code((rows.per_group ? g * rows.blocks : 0) + ib); });
    last = f.emulate(defect, one, one);
    run.probes.push_back(emulated_grouped_probe(p, strprintf("scale_a rows %d", d), last, grouped_values(p, [&](const GroupGemm& gg, int64_t m) {
                                                  return K * code(own_scale_row(rows, gg, m));
                                                })));
    outputs.push_back(last.host);
  }
  run.rows = decode_scale_rows(p, outputs, last, rows, 4);

  // K blocks 0-4: A = 1 on block s; SA(., kb) = 2^(kb mod 4), SB(kb, .) = 2^(4 (kb mod 4)).
  KBlockCodes kc;
  f.set_scales(true, [](int64_t, int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % 4)); });
  f.set_scales(false, [](int64_t, int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % 4) << 2); });
  const std::vector<int64_t> blocks = slices_to_probe(5);
  outputs.clear();
  for (int64_t s : blocks) {
    last = f.emulate(defect, [&](int64_t, int64_t, int64_t kb) { return kb == s ? 1.0 : 0.0; }, one);
    run.probes.push_back(emulated_grouped_probe(p, strprintf("scale k %lld/5", (long long)s), last,
                                                grouped_values(p, [&](const GroupGemm&, int64_t) {
                                                  return 128.0 * std::ldexp(1.0, kc.code(s));
                                                })));
    outputs.push_back(last.host);
  }
  const bool packed = p.scale_a_spec.encoding == ScaleEncoding::ue8m0_packed;
  run.k_blocks = decode_k_block_scales(p, blocks, outputs, last, kc, 128, packed, packed);
  return run;
}

// The verdict of a grouped suite whose group probes (every scale 1) passed, then these.
Pattern group_scale_verdict(const GroupScaleRun& run) {
  ProbeOutcome ones;
  ones.name = "ones", ones.passed = true;
  ProbeOutcome code = ones;
  code.name = "group code 0";
  std::vector<ProbeOutcome> probes = {ones, code};
  probes.insert(probes.end(), run.probes.begin(), run.probes.end());
  GroupScaleFinding all;
  add_finding(all, run.groups), add_finding(all, run.rows), add_finding(all, run.k_blocks);
  return grouped_verdict(probes, GroupFinding(), all);
}

// The names of the failed probes, in order: "group scale 0, scale k 1/5".
std::string failed_probes(const GroupScaleRun& run) {
  std::string names;
  for (const ProbeOutcome& o : run.probes)
    if (!o.passed) names += (names.empty() ? "" : ", ") + o.name;
  return names;
}

void test_group_scale_probes() {
  {  // The correct kernels, contiguous f32 and masked packed ue8m0: every probe passes.
    for (bool masked : {false, true}) {
      GroupedScaleFixture f(masked);
      const GroupScaleRun run = run_emulated_group_scales(f, EmulatedScaleDefect::none);
      bool all_pass = true;
      for (const ProbeOutcome& o : run.probes) all_pass = all_pass && o.passed;
      CHECK(all_pass);
      CHECK_EQ(run.groups.text + run.rows.text + run.k_blocks.text, std::string());
      CHECK_EQ(group_scale_verdict(run).cls, std::string("ok"));
    }
  }
  {  // previous_group_scales: groups 1 and 3 take the scale_b of groups 0 and 2.
    GroupedScaleFixture f(false);
    const GroupScaleRun run = run_emulated_group_scales(f, EmulatedScaleDefect::previous_group_scales);
    CHECK_EQ(run.groups.text, std::string("rows 384-583 (group 1) used group 1's weights with group 0's scale_b blocks; "
                                          "rows 640-1049 (group 3) used group 3's weights with group 2's scale_b blocks"));
    CHECK_EQ(failed_probes(run), std::string("group scale 0"));
    CHECK_EQ(run.groups.scale_rows, int64_t(610));
    CHECK_EQ(run.groups.weight_rows, int64_t(0));
    CHECK_EQ(run.rows.text + run.k_blocks.text, std::string());  // the same SA rows, the same K codes in every group
    const Pattern v = group_scale_verdict(run);
    CHECK_EQ(v.cls, std::string("scale_mapping"));
    CHECK_CONTAINS(v.evidence, "the group scale probes fail: rows 384-583 (group 1) used group 1's weights with group "
                               "0's scale_b blocks");
  }
  {  // scale_row_within_group: groups 1 and 3 read the scale_a rows of their rows within the group.
    GroupedScaleFixture f(false);
    const GroupScaleRun run = run_emulated_group_scales(f, EmulatedScaleDefect::scale_row_within_group);
    CHECK_EQ(run.rows.text, std::string("rows 384-583 (group 1) used scale_a rows 0-199 (the rows within the group) "
                                        "instead of 384-583; rows 640-1049 (group 3) used scale_a rows 0-409 (the rows "
                                        "within the group) instead of 640-1049"));
    CHECK_EQ(run.groups.text + run.k_blocks.text, std::string());
    // Digit 0 (row mod 16) passes: the groups begin at rows 384 and 640, multiples of 16.
    CHECK_EQ(failed_probes(run), std::string("scale_a rows 1, scale_a rows 2"));
    const Pattern v = group_scale_verdict(run);
    CHECK_EQ(v.cls, std::string("scale_mapping"));
    CHECK_CONTAINS(v.evidence, "rows 384-583 (group 1) used scale_a rows 0-199 (the rows within the group)");
  }
  {  // ue8m0_byte_order_group_1: group 1 reads each packed element's bytes reversed; K block 4
     // reads the padding byte of block 7, which the probe set as block 7's code.
    GroupedScaleFixture f(true);
    const GroupScaleRun run = run_emulated_group_scales(f, EmulatedScaleDefect::ue8m0_byte_order_group_1);
    CHECK_EQ(run.k_blocks.text,
             std::string("group 1 rows 0-199: K blocks 0-4 used the scale_a and scale_b of K blocks 3, 2, 1, 0, 3 (mod 4) "
                         "instead of 0, 1, 2, 3, 0 (scale_a's and scale_b's packed ue8m0 bytes read in reverse order: "
                         "K block kb from byte 3 - kb % 4)"));
    CHECK_EQ(run.k_blocks.scale_rows, int64_t(200));
    CHECK_EQ(failed_probes(run), std::string("scale k 0/5, scale k 1/5, scale k 2/5, scale k 3/5, scale k 4/5"));
    CHECK_EQ(run.groups.text + run.rows.text, std::string());
    CHECK_EQ(group_scale_verdict(run).cls, std::string("scale_mapping"));
  }

  // Masked scale_a rows of another group, and weights of another group with their scales: what
  // a group index off by one makes (the rows emulated directly).
  GroupedScaleFixture f(true);
  const GroupedProblem& p = f.p;
  ScaleRowBlocks rows;
  rows.blocks = p.M, rows.per_group = true;
  std::vector<std::vector<unsigned char>> outputs;
  Tensor out;
  for (int d = 0; d < 3; ++d) {
    out = grouped_output(p, [&](int64_t l, int64_t m, int64_t) {
      const int64_t line = (l == 3 ? 2 : l) * p.M + m;  // group 3 reads group 2's scale_a rows
      return 640.0 * std::ldexp(1.0, int((line >> (4 * d)) & 15));
    });
    outputs.push_back(out.host);
  }
  GroupScaleFinding rf = decode_scale_rows(p, outputs, out, rows, 4);
  CHECK_EQ(rf.text, std::string("group 3 rows 0-89 used group 2's scale_a rows 0-89 instead of its own (0-89)"));
  const GroupScaleCodes codes = group_scale_codes(p.G, DType::e4m3, DType::i32, ScaleEncoding::ue8m0_packed, DType::bf16, 640);
  out = grouped_output(p, [&](int64_t l, int64_t m, int64_t) {
    const int64_t g = l == 1 && m >= 100 ? 0 : l;  // rows 100-199 of group 1: group 0's weights and scales
    return 640.0 * codes.product(g, 0);
  });
  GroupScaleFinding gf = decode_group_scales(p, {out.host}, out, codes, 128, 128);
  CHECK_EQ(gf.text, std::string("group 1 rows 100-199 hold group 0's product (its weights and its scale_b blocks)"));
  CHECK_EQ(gf.weight_rows, int64_t(100));
  // The same in the rows group 0's last 128-row tile reaches (grouped_masked_spill): a spill.
  out = grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return 640.0 * codes.product(l == 1 && m < 56 ? 0 : l, 0); });
  gf = decode_group_scales(p, {out.host}, out, codes, 128, 128);
  CHECK_EQ(gf.text, std::string("group 1 rows 0-55 hold group 0's product (its weights and its scale_b blocks): they lie "
                                "in the footprint of group 0's tile at its rows 128-255, 128 rows tall where group 0 has "
                                "170 valid rows and M_max is 200: it reaches group 1's rows 0-55, a store that spills "
                                "across the group boundary"));
  // One column block of another group's scales: the rows read differently across column blocks.
  out = grouped_output(p, [&](int64_t l, int64_t, int64_t n) {
    return 640.0 * codes.weights(l, 0) * codes.scale(l == 1 && n >= 128 ? 2 : l, 0);
  });
  gf = decode_group_scales(p, {out.host}, out, codes, 128, 128);
  CHECK_EQ(gf.text, std::string("group 1 rows 0-199 used group 1's weights with the scale_b blocks of different groups "
                                "in different column blocks"));
  // Rows never written: no code, said so.
  out = grouped_output(p, [&](int64_t l, int64_t, int64_t) { return 640.0 * codes.product(l, 0); }, {3 * 200 + 5});
  gf = decode_group_scales(p, {out.host}, out, codes, 128, 128);
  CHECK_EQ(gf.text, std::string("group 3 rows 5 were never written (they still hold the poison)"));
  CHECK_EQ(gf.no_code_rows, int64_t(1));
  // A weights mix-up the scale probes see is group_mapping, not scale_mapping.
  GroupScaleRun mixed;
  mixed.groups = decode_group_scales(p, {grouped_output(p, [&](int64_t l, int64_t, int64_t) {
                                             return 640.0 * codes.product(l == 1 ? 0 : l, 0);
                                           }).host},
                                     out, codes, 128, 128);
  ProbeOutcome failed;
  failed.name = "group scale 0";
  failed.pattern = {"scattered", "200 rows"};
  mixed.probes = {failed};
  CHECK_EQ(group_scale_verdict(mixed).cls, std::string("group_mapping"));

  // Six groups: two digits (base 4). Group 5 (digits 1, 1) uses group 4's scales (0, 1).
  Tensor six = make_tensor("MM", DType::i32, {6});
  six.init.kind = InitKind::values;
  six.init.values = {4, 4, 4, 4, 4, 4};
  std::string six_error;
  fill_host(six, "", &six_error);
  GroupedProblem sp;
  sp.layout = GroupedLayout::masked, sp.metadata = &six, sp.G = 6, sp.M = 4, sp.N = 8, sp.K = 640;
  sp.groups = read_group_metadata(sp);
  const GroupScaleCodes two = group_scale_codes(6, DType::e4m3, DType::f32, ScaleEncoding::value, DType::bf16, 640);
  CHECK_EQ(two.digits, 2);
  outputs.clear();
  for (int d = 0; d < two.digits; ++d) {
    out = grouped_output(sp, [&](int64_t l, int64_t, int64_t) {
      return 640.0 * two.weights(l, d) * two.scale(l == 5 ? 4 : l, d);
    });
    outputs.push_back(out.host);
  }
  CHECK_EQ(decode_group_scales(sp, outputs, out, two, 128, 16).text,
           std::string("group 5 rows 0-3 used group 5's weights with group 4's scale_b blocks"));

  // k_grouped (KS [256, 128, 256], K = 640): a kernel that reads scale_a at the K block counted
  // from its group's first (kb - k0 / 128) where the scales are one tensor over K_total.
  Tensor ks = make_tensor("KS", DType::i32, {3});
  ks.init.kind = InitKind::values;
  ks.init.values = {256, 128, 256};
  std::string error;
  fill_host(ks, "", &error);
  GroupedProblem kp;
  kp.layout = GroupedLayout::k_grouped, kp.metadata = &ks, kp.G = 3, kp.M = 8, kp.N = 8, kp.K = 640;
  kp.groups = read_group_metadata(kp);
  KBlockCodes kc;
  const std::vector<int64_t> blocks = slices_to_probe(5);
  outputs.clear();
  for (int64_t s : blocks) {
    out = grouped_output(kp, [&](int64_t g, int64_t, int64_t) {
      const int64_t k0 = kp.k_begin(g) / 128, k1 = k0 + kp.groups[size_t(g)] / 128;
      if (s < k0 || s >= k1) return 0.0;
      return 128.0 * std::ldexp(1.0, int((s - k0) % 4) + (int(s % 4) << 2));
    });
    outputs.push_back(out.host);
  }
  GroupScaleFinding kf = decode_k_block_scales(kp, blocks, outputs, out, kc, 128, false, false);
  CHECK_EQ(kf.text, std::string("group 1 rows 0-7: K block 2 used scale_a K block 0 (mod 4) instead of 2; group 2 rows "
                                "0-7: K blocks 3-4 used scale_a K blocks 0, 1 (mod 4) instead of 3, 0"));
  CHECK_EQ(kf.scale_rows, int64_t(16));

  // The probe fill of packed ue8m0: the bytes past the last K block (K blocks 5-7 of element 1)
  // hold the values of the blocks they would be, through the generated inputs' packing.
  f.set_scales(true, [](int64_t g, int64_t ib, int64_t kb) { return std::ldexp(1.0, int(kb) - int(g) - int(ib % 2)); });
  CHECK_EQ(f.scale(true, 2 * 200 + 7, 6, 0, false), std::ldexp(1.0, 6 - 2 - 1));
  CHECK_EQ(f.scale(true, 2 * 200 + 7, 4, 0, false), std::ldexp(1.0, 4 - 2 - 1));
  CHECK_EQ(f.scale(true, 2 * 200 + 7, 0, 0, true), std::ldexp(1.0, 3 - 2 - 1));
}

// ------------------------------------------------------------------ k_grouped_blocks

// The group code probes of k_grouped_blocks on examples/fp8_k_grouped_blocks*.yaml's shapes (M
// 200, N 136, k_sizes [256, 128, 384, 256], K_total 1408: a tail of 384 past the groups), the
// kernel of kernels/fp8_grouped_gemm.cuh emulated on the host on the probes' own operands (the
// k_blocks patterns expanded by the host's view, the one the device's fill is checked against),
// with and without KBlocksDefect::next_group_block; every scale 1, as in the group probes.
void test_k_grouped_blocks_probes() {
  Tensor ks = make_tensor("KS", DType::i32, {4});
  ks.init.kind = InitKind::values;
  ks.init.values = {256, 128, 384, 256};
  std::string error;
  fill_host(ks, "", &error);
  GroupedProblem p;
  p.layout = GroupedLayout::k_grouped_blocks, p.metadata = &ks, p.G = 4, p.M = 200, p.N = 136, p.K = 1408;
  p.groups = read_group_metadata(p);
  CHECK(k_block_bounds(p) == std::vector<int64_t>({0, 256, 384, 768, 1024, 1408}));

  // The patterns: group g's block [lines, k_g] at lines * k0(g), row-major; the tail is group G.
  const auto expand = [](const ProbeValues& v, int64_t numel) {
    const ProbeValuesView view = host_view(v);
    std::vector<double> values(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) values[size_t(i)] = view.at(0, 0, i);
    return values;
  };
  const std::vector<double> probe = expand(
      block_probe_values(p, p.M, [](int64_t m) { return double(m + 1); },
                         [](int64_t g, int64_t k) { return double(1000 * (g + 1) + k); }),
      p.M * p.K);
  CHECK_EQ(probe[size_t(p.M * 384 + 3 * 384 + 5)], 4.0 * 3005.0);   // group 2, row 3, k 5
  CHECK_EQ(probe[size_t(p.M * 1024 + 7 * 384 + 383)], 8.0 * 5383.0);  // the tail, line 7, k 383
  CHECK_EQ(probe[size_t(p.M * 256 - 1)], 200.0 * 1255.0);             // group 0's last element

  // Block scales: group g's [lines, k_g / 128] block at lines * k0(g) / 128, K blocks over K_total.
  Tensor sa = make_tensor("SA", DType::f32, {p.M * p.K / 128});
  sa.host.assign(sa.storage_bytes(), 0);
  set_block_probe_scales(p, sa, p.M, 128,
                         [](int64_t g, int64_t line, int64_t kb) { return double(1000 * g + 10 * line + kb); });
  CHECK_EQ(decode(DType::f32, sa.host.data(), p.M * 3 + 5 * 3 + 1), 2000.0 + 50.0 + 4.0);  // group 2, row 5, block 4
  CHECK_EQ(decode(DType::f32, sa.host.data(), p.M * 8 + 2 * 3 + 2), 4000.0 + 20.0 + 10.0);  // the tail's last block

  // fp8_k_grouped_blocks_gemm: group g's block taken at k0(g) (+ k_g with the defect).
  const auto emulate = [&](bool defect, const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> d(size_t(p.G * p.M * p.N), 0.0);
    for (int64_t g = 0; g < p.G; ++g) {
      const int64_t kg = p.groups[size_t(g)], start = p.k_begin(g) + (defect ? kg : 0);
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t n = 0; n < p.N; ++n) {
          const double* a_row = a.data() + p.M * start + m * kg;
          const double* b_col = b.data() + p.N * start + n * kg;
          double acc = 0;
          for (int64_t k = 0; k < kg; ++k) acc += a_row[k] * b_col[k];
          d[size_t((g * p.M + m) * p.N + n)] = acc;
        }
    }
    return output_with(DType::f32, {p.G, p.M, p.N}, d);
  };
  const std::vector<double> a_ones(size_t(p.M * p.K), 1.0), b_ones(size_t(p.N * p.K), 1.0);
  for (bool defect : {false, true}) {
    // Ones passes either way: every block, the tail too, holds 1.
    const Tensor ones = emulate(defect, a_ones, b_ones);
    std::vector<ProbeOutcome> probes = {
        emulated_grouped_probe(p, "ones", ones, grouped_expected(p, [](int64_t) { return 1.0; }))};
    CHECK(probes.back().passed);
    // The group codes, two digits (five codes: four groups and the tail), A's then B's.
    std::vector<std::vector<unsigned char>> outputs;
    Tensor last;
    for (const char* operand : {"A", "B"})
      for (int d = 0; d < 2; ++d) {
        const auto code = [&](int64_t group) { return std::ldexp(1.0, int((group >> (2 * d)) & 3)); };
        const bool is_a = operand[0] == 'A';
        const std::vector<double> coded =
            expand(block_probe_values(p, is_a ? p.M : p.N, [](int64_t) { return 1.0; },
                                      [&](int64_t group, int64_t) { return code(group); }),
                   (is_a ? p.M : p.N) * p.K);
        last = emulate(defect, is_a ? coded : a_ones, is_a ? b_ones : coded);
        probes.push_back(emulated_grouped_probe(p, strprintf("group code %s %d", operand, d), last, grouped_expected(p, code)));
        outputs.push_back(last.host);
      }
    const GroupFinding f = decode_group_blocks(p, outputs, last, 2);
    if (!defect) {
      bool all_pass = true;
      for (const ProbeOutcome& o : probes) all_pass = all_pass && o.passed;
      CHECK(all_pass);
      CHECK_EQ(f.text, std::string());
      CHECK_EQ(grouped_verdict(probes, f).cls, std::string("ok"));
      continue;
    }
    const std::string expected =
        "every group read from where its own block ends (its A and B taken to begin at k0(g) + k_g, read with its own "
        "row stride k_g): group 0 (k 256) read A rows 0-99 from group 1's block, rows 100-199 from group 2's block, and "
        "B columns 0-67 from group 1's block, columns 68-135 from group 2's block; group 1 (k 128) read group 2's A and "
        "B blocks; group 2 (k 384) read A rows 0-132 from group 3's block, row 133 from no single block (a mixture), "
        "rows 134-199 from the tail past the last group (k 1024-1407), and B columns 0-89 from group 3's block, column "
        "90 from no single block (a mixture), columns 91-135 from the tail past the last group (k 1024-1407); group 3 "
        "(k 256) read its A and B from the tail past the last group (k 1024-1407)";
    CHECK_EQ(f.text, expected);
    CHECK_EQ(f.rows, int64_t(4 * 200));
    const Pattern v = grouped_verdict(probes, f);
    CHECK_EQ(v.cls, std::string("group_mapping"));
    CHECK_EQ(v.evidence, "group codes: " + expected);
  }

  // One group reading another's block whole, the others right: no "every group" summary.
  std::vector<std::vector<unsigned char>> outputs;
  Tensor out;
  for (int d = 0; d < 4; ++d) {
    out = grouped_output(p, [&](int64_t l, int64_t, int64_t) {
      const int64_t source = l == 1 ? 3 : l;
      return double(p.groups[size_t(l)]) * std::ldexp(1.0, int((source >> (2 * (d % 2))) & 3));
    });
    outputs.push_back(out.host);
  }
  CHECK_EQ(decode_group_blocks(p, outputs, out, 2).text, std::string("group 1 (k 128) read group 3's A and B blocks"));
}
