// ---------------------------------------------------------------------------------------------
// repro harness runtime: the probes of the scaled and grouped GEMMs (DESIGN §8)
//
// Scale probes (a GEMM with scale_a / scale_b; the plain probes run first, with every scale 1):
//
//   probe              A, B                      scales                                 D must be
//   scale_a rows d     1, 1                      SA(ib, kb) = 2^(digit d of ib), SB 1   alpha*K*2^digit
//   scale_b cols d     1, 1                      SA 1, SB(kb, jb) = 2^(digit d of jb)   alpha*K*2^digit
//   scale k s          A = 1 on K block s only   SA(., kb) = 2^(kb mod 4),              alpha*|s|*2^(a + 4b)
//                                                SB(kb, .) = 2^(4 (kb mod 4))
//
// Digits are base 16 (base 4 for an f16 output, whose range is smaller), as many as the blocks
// need, so that every output decodes to the scale block it used: "rows 0-127 used scale_a block 5
// instead of 0". In the K probes only block s contributes, so the output's exponent is
// a + 4b: the K block whose A scale and whose B scale it used (mod 4, which is what a packed
// ue8m0 byte order or an off-by-one block confuses).
//
// Group probes (op: grouped_gemm), after ones:
//
//   group code d       A = 1, B of group g = 2^(digit d of g, base 4)   D = alpha*Kg*2^digit
//   k-slice s          A = 1, B = 1 on slice s of each group's K        D = alpha*|slice s of Kg|
//   row code d         A[m] = 2^(digit d of m, base 4), B = 1           D = alpha*Kg*2^digit
//   col code d         A = 1, B[., n] = 2^(digit d of n, base 4)        D = alpha*Kg*2^digit
//   tile ramp          A = 1 + (m / tile_m) mod P, B = 1                D = alpha*Kg*a
//
// so that a row computed with another group's weights, or written by another group's tile,
// decodes to that group ("rows 300-383 (group 0) hold group 1's product"), and the plain
// suite's K, row and column probes work within every group. k_grouped puts the codes and slices
// on group g's own K range of B.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "probe.cuh"

namespace repro {

// The exponent e with got == unit * 2^e, or -1 when got is no such power of two.
inline int decode_exponent(double got, double unit) {
  if (!(got > 0) || !(unit > 0)) return -1;
  int e = 0;
  const double fraction = std::frexp(got / unit, &e);
  return fraction == 0.5 && e >= 1 && e <= 64 ? e - 1 : -1;
}

// "rows 128-255 used scale_a row blocks 0-127 instead of 128-255; ..." from per-line (used,
// expected) blocks: a run of lines whose used block is off from their own by one constant is one
// clause (a tile that reads another tile's scales). `what` names the blocks ("scale_a row
// blocks").
inline std::string block_findings(const std::vector<int64_t>& used, const std::vector<int64_t>& expected,
                                  const char* noun, const char* what) {
  std::string text;
  int clauses = 0, more = 0;
  const auto span = [](int64_t lo, int64_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  };
  for (size_t line = 0; line < used.size();) {
    const bool readable = used[line] >= 0;
    const int64_t offset = used[line] - expected[line];
    size_t end = line + 1;
    while (end < used.size() && (used[end] >= 0) == readable &&
           (!readable || used[end] - expected[end] == offset))
      ++end;
    if (!readable || offset != 0) {
      if (clauses < 4) {
        const std::string lines = strprintf("%s %s", noun, span(int64_t(line), int64_t(end - 1)).c_str());
        text += (clauses ? "; " : "") +
                (!readable ? lines + " got no power-of-two code (" + what + " unreadable)"
                           : strprintf("%s used %s %s instead of %s", lines.c_str(), what,
                                       span(used[line], used[end - 1]).c_str(),
                                       span(expected[line], expected[end - 1]).c_str()));
        ++clauses;
      } else {
        ++more;
      }
    }
    line = end;
  }
  if (more > 0) text += strprintf("; and %d more runs", more);
  return text;
}

inline double output_at(const Tensor& out, int64_t logical_index) {
  return decode(out.dtype, out.host.data(), out.logical_offset(logical_index));
}

// Whether a scaled GEMM: the plain probes then run with every scale 1.
inline bool has_scales(const GemmOperands& g) { return g.scale_a.tensor >= 0 || g.scale_b.tensor >= 0; }

// Sets the scales of A (is_a) or B from f(i_block, k_block); a GEMM without them is left alone.
template <typename F>
inline void fill_operand_scales(SpecInfo& spec, bool is_a, F value) {
  const GemmOperands& g = spec.gemm;
  const ScaleSpec& scale = is_a ? g.scale_a : g.scale_b;
  if (scale.tensor < 0) return;
  Tensor& t = spec.tensors[size_t(scale.tensor)];
  fill_scales(scale_operand(scale, t, t.host.data(), is_a), t, is_a ? g.M : g.N, g.K, value);
}

inline void fill_unit_scales(SpecInfo& spec) {
  for (bool is_a : {true, false}) fill_operand_scales(spec, is_a, [](int64_t, int64_t) { return 1.0; });
}

// The scale probes; appends them to ctx.outcomes and returns the finding (empty: all passed).
inline std::string run_scale_probes(SpecInfo& spec, ProbeContext& ctx) {
  const GemmOperands& g = spec.gemm;
  std::vector<Tensor>& tensors = spec.tensors;
  Tensor& A = tensors[size_t(g.a)];
  Tensor& B = tensors[size_t(g.b)];
  Tensor& out = tensors[size_t(g.out)];
  const double alpha = g.alpha, K = double(g.K);
  const bool narrow = out.dtype == DType::f16;  // 2^15 * K would overflow an f16 output
  const int64_t base = narrow ? 4 : 16;
  const int bits = narrow ? 2 : 4;
  std::vector<ProbeOutcome>& probes = ctx.outcomes;
  std::vector<std::string> findings;
  fill_matrix(A, [](int64_t, int64_t, int64_t) { return 1.0; });
  fill_matrix(B, [](int64_t, int64_t, int64_t) { return 1.0; });

  // Row blocks of SA, column blocks of SB: digits of the block index.
  for (bool is_a : {true, false}) {
    const ScaleSpec& scale = is_a ? g.scale_a : g.scale_b;
    if (scale.tensor < 0) continue;
    const int64_t extent = is_a ? g.M : g.N, block = is_a ? scale.block[0] : scale.block[1];
    const int64_t blocks = ceil_div(extent, block);
    if (blocks <= 1) continue;  // one scale along this axis: the K probes and ones cover it
    int digits = 1;
    for (int64_t reach = base; reach < blocks && digits < 3; reach *= base) ++digits;
    std::vector<int64_t> used(size_t(extent), 0), expected(size_t(extent), 0);
    bool failed = false;
    const char* side = is_a ? "scale_a rows" : "scale_b cols";
    for (int d = 0; d < digits; ++d) {
      const auto digit = [&](int64_t b) { return int((b >> (bits * d)) & (base - 1)); };
      fill_unit_scales(spec);
      fill_operand_scales(spec, is_a, [&](int64_t ib, int64_t) { return std::ldexp(1.0, digit(ib)); });
      ProbeOutcome o = run_analytic_probe(
          ctx, strprintf("%s %d", side, d),
          strprintf("A = B = 1, %s block code 2^(digit %d, base %lld)", is_a ? "scale_a row" : "scale_b column", d,
                    (long long)base),
          [&](int64_t, int64_t m, int64_t n) { return alpha * K * std::ldexp(1.0, digit((is_a ? m : n) / block)); });
      failed = failed || !o.passed;
      for (int64_t line = 0; line < extent; ++line) {
        const int64_t index = is_a ? line * g.N : line;  // the line's first output
        const int e = decode_exponent(output_at(out, index), alpha * K);
        if (e < 0 || e >= base || used[size_t(line)] < 0) used[size_t(line)] = -1;
        else used[size_t(line)] += int64_t(e) << (bits * d);
        expected[size_t(line)] += int64_t(digit(line / block)) << (bits * d);
      }
      probes.push_back(o);
      print_probe(probes.back());
    }
    if (failed) {
      const std::string text =
          block_findings(used, expected, is_a ? "rows" : "columns", is_a ? "scale_a row blocks" : "scale_b column blocks");
      if (!text.empty()) {
        findings.push_back(text);
        probes.back().note = text;
      }
    }
  }

  // K blocks: only block s of A is 1, so only its scales reach the output.
  const int64_t block_k = g.scale_a.tensor >= 0 ? g.scale_a.block[1] : g.scale_b.block[0];
  const int64_t k_blocks = ceil_div(g.K, block_k);
  if (k_blocks > 1) {
    const int64_t mod = narrow ? 2 : 4;
    const int b_shift = narrow ? 1 : 2;  // B's code sits above A's
    fill_operand_scales(spec, true, [&](int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % mod)); });
    // (fill_scales hands over (i_block, k_block): for B, the column block first.)
    fill_operand_scales(spec, false, [&](int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % mod) << b_shift); });
    const auto code = [&](int64_t kb) {
      return int(g.scale_a.tensor >= 0 ? kb % mod : 0) + (int(g.scale_b.tensor >= 0 ? kb % mod : 0) << b_shift);
    };
    std::vector<std::string> k_findings;
    const std::vector<int64_t> probed = slices_to_probe(k_blocks);
    for (int64_t s : probed) {
      const int64_t k0 = s * block_k, k1 = std::min(g.K, k0 + block_k);
      fill_matrix(A, [&](int64_t, int64_t, int64_t k) { return k >= k0 && k < k1 ? 1.0 : 0.0; });
      const double unit = alpha * double(k1 - k0);
      ProbeOutcome o = run_analytic_probe(
          ctx, strprintf("scale k %lld/%lld", (long long)s, (long long)k_blocks),
          strprintf("A = 1 on k %lld-%lld, K-block scale codes", (long long)k0, (long long)(k1 - 1)),
          [&](int64_t, int64_t, int64_t) { return unit * std::ldexp(1.0, code(s)); });
      if (!o.passed) {
        // What the first wrong output used.
        const Mismatch* first = o.comparison.first.empty() ? nullptr : &o.comparison.first.front();
        const int e = first ? decode_exponent(first->got, unit) : -1;
        std::string note;
        if (e < 0) {
          note = strprintf("K block %lld: output %s is no power-of-two multiple of %s", (long long)s,
                           first ? format_value(first->got).c_str() : "?", format_value(unit).c_str());
        } else {
          const int a = e & ((1 << b_shift) - 1), b = e >> b_shift;
          std::string parts;
          if (g.scale_a.tensor >= 0 && a != int(s % mod))
            parts += strprintf("scale_a K block %d (mod %lld)", a, (long long)mod);
          if (g.scale_b.tensor >= 0 && b != int(s % mod))
            parts += (parts.empty() ? "" : " and ") + strprintf("scale_b K block %d (mod %lld)", b, (long long)mod);
          note = strprintf("K block %lld used %s instead of its own (%lld of %lld outputs)", (long long)s,
                           parts.empty() ? "its own scales yet is wrong" : parts.c_str(), (long long)o.comparison.bad,
                           (long long)o.comparison.count);
        }
        o.note = note;
        k_findings.push_back(note);
      }
      probes.push_back(o);
      print_probe(probes.back());
    }
    if (!k_findings.empty()) {
      std::string text;
      for (size_t i = 0; i < k_findings.size() && i < 4; ++i) text += (i ? "; " : "") + k_findings[i];
      if (k_findings.size() > 4) text += strprintf("; and %zu more K blocks", k_findings.size() - 4);
      findings.push_back(text);
    }
  }
  std::string all;
  for (size_t i = 0; i < findings.size(); ++i) all += (i ? "; " : "") + findings[i];
  return all;
}

// ------------------------------------------------------------------------ grouped GEMMs

// Fills A with 1 and B with value(g, k, n) on each group's part, k counted within the group: B[g]
// for contiguous and masked, group g's K range of rows for k_grouped (rows of no group: 0).
template <typename F>
inline void fill_group_b(const GroupedProblem& p, Tensor& A, Tensor& B, F value) {
  fill_matrix(A, [](int64_t, int64_t, int64_t) { return 1.0; });
  if (p.layout == GroupedLayout::k_grouped) {
    std::vector<int64_t> group_of(size_t(p.K), -1), local_k(size_t(p.K), 0);
    for (int64_t g = 0, k = 0; g < p.G; ++g)
      for (int64_t i = 0; i < p.groups[size_t(g)]; ++i, ++k) group_of[size_t(k)] = g, local_k[size_t(k)] = i;
    fill_matrix(B, [&](int64_t, int64_t k, int64_t n) {
      return group_of[size_t(k)] < 0 ? 0.0 : value(group_of[size_t(k)], local_k[size_t(k)], n);
    });
  } else {
    fill_matrix(B, [&](int64_t g, int64_t k, int64_t n) { return value(g, k, n); });
  }
}

// The same with B's value a function of the group alone.
template <typename F>
inline void fill_group_operands(const GroupedProblem& p, Tensor& A, Tensor& B, F value) {
  fill_group_b(p, A, B, [&](int64_t g, int64_t, int64_t) { return value(g); });
}

// The expected [batches][M][N] of a probe: value(gg, m, n) for the outputs group GEMM gg writes
// (m the output row within its batch), not_compared_value() elsewhere.
template <typename F>
inline std::vector<double> grouped_outputs(const GroupedProblem& p, F value) {
  std::vector<double> want(size_t(p.output_count()), not_compared_value());
  for (const GroupGemm& gg : group_gemms(p))
    for (int64_t r = 0; r < gg.rows; ++r)
      for (int64_t n = 0; n < p.N; ++n)
        want[size_t(output_offset(p, gg) + r * p.N + n)] = value(gg, gg.row0 + r, n);
  return want;
}

// alpha * Kg * code(g) * row(batch, m): a probe whose B of group g is code(g) and whose A has
// the value row(batch, m) on row m (1 unless the probe varies it).
template <typename F, typename R>
inline std::vector<double> grouped_expected(const GroupedProblem& p, F code, R row) {
  return grouped_outputs(p, [&](const GroupGemm& gg, int64_t m, int64_t) {
    return p.alpha * double(gg.k) * code(gg.group) * row(gg.batch, m);
  });
}

template <typename F>
inline std::vector<double> grouped_expected(const GroupedProblem& p, F code) {
  return grouped_expected(p, code, [](int64_t, int64_t) { return 1.0; });
}

inline ProbeOutcome run_grouped_probe(ProbeContext& ctx, const std::string& name, const std::string& inputs,
                                      const std::vector<double>& want) {
  Tensor& out = ctx.spec->tensors[size_t(ctx.spec->gemm.out)];
  ProbeOutcome o;
  o.name = name;
  o.inputs = inputs;
  const std::vector<std::vector<unsigned char>> runs = probe_launch(ctx, out);
  judge_probe(o, *ctx.spec, out, runs, want, Tolerance{0, 0, 0, true}, &ctx.stressed);
  return o;
}

// The group each compared output row decodes to, from the group code probes' outputs (first
// column of the row): -1 where no code of a group arrived.
struct GroupFinding {
  std::string text;
  int64_t rows = 0;  // rows holding another group's product (not those that decode to none)
};

inline GroupFinding decode_groups(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                                  const Tensor& out, int bits) {
  const int64_t base = int64_t(1) << bits;
  GroupFinding finding;
  std::vector<std::string> clauses;
  int more = 0;
  for (const GroupGemm& gg : group_gemms(p)) {
    const double unit = p.alpha * double(gg.k);
    // Runs of rows of this GEMM decoding to the same group.
    int64_t run_start = 0, run_group = -2;
    const auto close_run = [&](int64_t end) {
      if (run_group == gg.group || run_group == -2) return;
      // Only a row that decodes to another group is a group mapping; one that decodes to none
      // (a short K range gives another multiple of the code) is reported, not counted.
      if (run_group >= 0) finding.rows += end - run_start;
      const int64_t r0 = gg.row0 + run_start, r1 = gg.row0 + end - 1;
      const std::string where = p.layout == GroupedLayout::contiguous
                                    ? strprintf("rows %lld-%lld (group %lld)", (long long)r0, (long long)r1, (long long)gg.group)
                                    : strprintf("group %lld rows %lld-%lld", (long long)gg.group, (long long)r0, (long long)r1);
      if (clauses.size() >= 4) {
        ++more;
        return;
      }
      clauses.push_back(run_group < 0 ? where + " hold no group's product (a mixture, or another K extent)"
                                      : strprintf("%s hold group %lld's product", where.c_str(), (long long)run_group));
    };
    for (int64_t r = 0; r < gg.rows; ++r) {
      const int64_t index = (gg.batch * p.M + gg.row0 + r) * p.N;
      int64_t used = 0;
      for (size_t d = 0; d < outputs.size() && used >= 0; ++d) {
        Tensor o = out;
        o.host = outputs[d];
        const int e = decode_exponent(output_at(o, index), unit);
        used = e < 0 || e >= base ? -1 : used + (int64_t(e) << (bits * int(d)));
      }
      if (used >= p.G) used = -1;
      if (used != run_group) {
        close_run(r);
        run_start = r, run_group = used;
      }
    }
    close_run(gg.rows);
  }
  for (size_t i = 0; i < clauses.size(); ++i) finding.text += (i ? "; " : "") + clauses[i];
  if (more > 0) finding.text += strprintf("; and %d more", more);
  return finding;
}

// The grouped suite: ones, group codes, K slices and row and column codes within the groups, a
// tile ramp, the spec's random inputs; then a verdict.
inline int run_grouped_probes(SpecInfo& spec, ProbeContext& ctx, const GroupedProblem& p,
                              const std::vector<double>& random_reference, const Tolerance& random_tolerance,
                              const std::vector<std::vector<unsigned char>>& random_inputs) {
  const GemmOperands& g = spec.gemm;
  std::vector<Tensor>& tensors = spec.tensors;
  Tensor& A = tensors[size_t(g.a)];
  Tensor& B = tensors[size_t(g.b)];
  Tensor& out = tensors[size_t(g.out)];
  std::vector<ProbeOutcome>& probes = ctx.outcomes;
  std::printf("groups  %s\n", describe_groups(p).c_str());

  fill_group_operands(p, A, B, [](int64_t) { return 1.0; });
  probes.push_back(run_grouped_probe(ctx, "ones", "A = 1, B = 1", grouped_expected(p, [](int64_t) { return 1.0; })));
  print_probe(probes.back());

  // Group codes, base 4 (2^3 is exact in every B dtype, fp8 included).
  const int bits = 2;
  int digits = 1;
  for (int64_t reach = 4; reach < p.G && digits < 4; reach *= 4) ++digits;
  std::vector<std::vector<unsigned char>> code_outputs;
  bool codes_failed = false;
  for (int d = 0; d < digits; ++d) {
    const auto code = [&](int64_t group) { return std::ldexp(1.0, int((group >> (bits * d)) & 3)); };
    fill_group_operands(p, A, B, code);
    probes.push_back(run_grouped_probe(ctx, strprintf("group code %d", d),
                                       strprintf("A = 1, B of group g = 2^(digit %d of g, base 4)", d),
                                       grouped_expected(p, code)));
    codes_failed = codes_failed || !probes.back().passed;
    code_outputs.push_back(out.host);
    print_probe(probes.back());
  }
  GroupFinding finding;
  if (codes_failed) {
    finding = decode_groups(p, code_outputs, out, bits);
    if (!finding.text.empty()) probes[probes.size() - size_t(digits)].note = finding.text;
  }

  // K slices of every group, sized by the kernel's K tile: B = 1 on slice s of each group's K
  // (the whole K for contiguous and masked, the group's own range for k_grouped), else 0.
  const int64_t tile_k = spec.tile_k > 0 ? spec.tile_k : 32;
  int64_t longest_k = 0;
  for (const GroupGemm& gg : group_gemms(p)) longest_k = std::max(longest_k, gg.k);
  std::vector<size_t> slice_probes;
  const int64_t slice_count = ceil_div(longest_k, tile_k);
  for (int64_t s : slices_to_probe(slice_count)) {
    const int64_t k0 = s * tile_k, k1 = k0 + tile_k;
    fill_group_b(p, A, B, [&](int64_t, int64_t k, int64_t) { return k >= k0 && k < k1 ? 1.0 : 0.0; });
    probes.push_back(run_grouped_probe(
        ctx, strprintf("k-slice %lld/%lld", (long long)s, (long long)slice_count),
        strprintf("A = 1, B = 1 on k %lld-%lld of each group", (long long)k0, (long long)(k1 - 1)),
        grouped_outputs(p, [&](const GroupGemm& gg, int64_t, int64_t) {
          return p.alpha * double(std::max<int64_t>(0, std::min(gg.k, k1) - k0));
        })));
    slice_probes.push_back(probes.size() - 1);
    print_probe(probes.back());
  }

  // Row and column codes within the groups, two base-4 digits each, as in the plain suite.
  const auto line_code = [](int digit, int64_t i) { return double(1 << ((i >> (2 * digit)) & 3)); };
  std::vector<size_t> row_probes, col_probes;
  for (int digit = 0; digit < 2; ++digit) {
    fill_group_operands(p, A, B, [](int64_t) { return 1.0; });
    fill_matrix(A, [&](int64_t, int64_t m, int64_t) { return line_code(digit, m); });
    probes.push_back(run_grouped_probe(
        ctx, strprintf("row code %d", digit), strprintf("A[m,k] = 2^(digit %d of m, base 4), B = 1", digit),
        grouped_expected(p, [](int64_t) { return 1.0; }, [&](int64_t, int64_t m) { return line_code(digit, m); })));
    row_probes.push_back(probes.size() - 1);
    print_probe(probes.back());
  }
  for (int digit = 0; digit < 2; ++digit) {
    fill_group_b(p, A, B, [&](int64_t, int64_t, int64_t n) { return line_code(digit, n); });
    probes.push_back(run_grouped_probe(
        ctx, strprintf("col code %d", digit), strprintf("A = 1, B[k,n] = 2^(digit %d of n, base 4)", digit),
        grouped_outputs(p, [&](const GroupGemm& gg, int64_t, int64_t n) {
          return p.alpha * double(gg.k) * line_code(digit, n);
        })));
    col_probes.push_back(probes.size() - 1);
    print_probe(probes.back());
  }

  // Tile ramp: every row tile of A its own value (and, masked, every group), B = 1: a tile
  // computed from another tile's rows shows even where the groups are right.
  const int64_t ramp = tile_ramp_period({A.dtype, B.dtype}, out.dtype, p.alpha * double(p.K));
  const ProbeOutcome* ramp_probe = nullptr;
  if (ramp > 1) {
    const int64_t tm = std::max<int64_t>(1, spec.tile_m);
    const auto a_of = [&](int64_t batch, int64_t m) { return double(1 + (m / tm + batch) % ramp); };
    fill_group_operands(p, A, B, [](int64_t) { return 1.0; });
    fill_matrix(A, [&](int64_t l, int64_t m, int64_t) { return a_of(p.layout == GroupedLayout::masked ? l : 0, m); });
    probes.push_back(run_grouped_probe(
        ctx, "tile ramp", strprintf("A = 1 + (m / %lld) mod %lld, B = 1", (long long)tm, (long long)ramp),
        grouped_expected(p, [](int64_t) { return 1.0; },
                         [&](int64_t batch, int64_t m) { return a_of(p.layout == GroupedLayout::masked ? batch : 0, m); })));
    print_probe(probes.back());
  }

  probes.push_back(run_random_probe(ctx, random_reference, random_tolerance, random_inputs));
  ramp_probe = ramp > 1 ? &probes[probes.size() - 2] : nullptr;  // pointers taken once every probe is in
  print_probe(probes.back());
  const auto first_failed = [&](const std::vector<size_t>& indices) -> const ProbeOutcome* {
    for (size_t i : indices)
      if (!probes[i].passed) return &probes[i];
    return nullptr;
  };
  int failed_slices = 0;
  std::string slice_text;
  for (size_t i : slice_probes)
    if (!probes[i].passed && failed_slices++ < 4)
      slice_text += (slice_text.empty() ? "" : "; ") + probes[i].name + ": " + probes[i].pattern.evidence;
  show_first_failure(probes, out);

  Pattern verdict;
  const ProbeOutcome& ones = probes.front();
  const ProbeOutcome* race = nullptr;
  for (const ProbeOutcome& o : probes)
    if (race == nullptr && is_race(o.run_differences_seen())) race = &o;
  if (race != nullptr) {
    verdict = {"nondeterministic", strprintf("probe %s: %lld outputs differ bitwise between two runs on the same inputs "
                                             "(a race, or an uninitialized read)%s%s%s",
                                             race->name.c_str(), (long long)race->differences,
                                             race->only_under_stress ? ", only when the run was under stress" : "",
                                             finding.text.empty() ? "" : "; group codes: ", finding.text.c_str())};
  } else if (finding.rows > 0) {
    verdict = {"group_mapping", "group codes: " + finding.text};
  } else if (!ones.passed) {
    const std::string cls = ones.pattern.cls;
    if (cls == "unwritten" || cls == "nonfinite")
      verdict = {cls, "ones: " + ones.pattern.evidence};
    else
      verdict = {"k_coverage", "ones: " + ones.pattern.evidence +
                                   (finding.text.empty() ? "" : "; group codes: " + finding.text) +
                                   " (a group's outputs are not alpha * its K extent)"};
  } else if (codes_failed) {
    verdict = {"group_mapping", "ones passes, the group codes fail: " +
                                    (finding.text.empty() ? probes[1].pattern.evidence : finding.text)};
  } else if (failed_slices > 0) {
    verdict = {"k_coverage", strprintf("ones and the group codes pass, but %d of the %zu K slices probed are wrong: %s",
                                       failed_slices, slice_probes.size(), slice_text.c_str())};
  } else if (const ProbeOutcome* rows = first_failed(row_probes)) {
    verdict = {"row_mapping", "row codes within the groups: " + rows->pattern.evidence};
  } else if (const ProbeOutcome* cols = first_failed(col_probes)) {
    verdict = {"col_mapping", "column codes within the groups: " + cols->pattern.evidence};
  } else if (ramp_probe != nullptr && !ramp_probe->passed) {
    verdict = {ramp_probe->pattern.cls, "ones and the group codes pass, the tile ramp (every row tile its own value) "
                                        "fails: " + ramp_probe->pattern.evidence +
                                            " (a tile computed from another tile's rows)"};
  } else if (!probes.back().passed) {
    verdict = {probes.back().pattern.cls, "only random inputs fail: " + probes.back().pattern.evidence};
  } else {
    verdict = {"ok", "every probe passes"};
  }
  return conclude_probes(probes, verdict);
}

}  // namespace repro
