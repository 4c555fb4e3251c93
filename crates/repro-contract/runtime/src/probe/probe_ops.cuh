// ---------------------------------------------------------------------------------------------
// repro harness runtime: the probes of the scaled and grouped GEMMs (docs/cli.md, `repro probe`)
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
// on group g's own K range of B; k_grouped_blocks on group g's block of the flat B (and A), and
// codes A's blocks and B's blocks in probes of their own (group code A d, group code B d), the
// tail past the last group as group G, so that each row of A and column of B a group read decodes
// to the block it came from. These run with every block scale 1; a grouped GEMM with scales
// then runs the group scale probes (probe_group_scales.cuh), which decode which group's scales
// and which scale rows and K blocks each row used.
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

inline double output_at(const Tensor& out, int64_t logical_index) {
  return decode(out.dtype, out.host.data(), out.logical_offset(logical_index));
}

// ------------------------------------------------------------------ scale probes, per tile
//
// The row-block probes of scale_a and the column-block probes of scale_b, decoded per output
// tile: a kernel reads the scales of a tile (its rows' SA, its column block's SB) as one, so a
// scale taken from the wrong place is a tile's mistake ("tile (1,0) used scale_a row block 2
// instead of 1"). For scale_a the lines are the output's rows, sampled once per tile column at
// its first output; for scale_b the columns, once per tile row.

constexpr int64_t kNoScaleCode = -1;  // the sample is no power-of-two code (0, or another value)

struct ScaleSideDecode {
  bool is_a = true;
  int64_t M = 0, N = 0, tile_m = 1, tile_n = 1;
  int64_t block = 1, blocks = 1;  // the scale block along the lines, and how many there are
  int64_t lines = 0, across = 0;  // rows (A) or columns (B); tile columns (A) or tile rows (B)
  std::vector<int64_t> used;      // [lines][across]: the block whose code arrived, or kNoScaleCode
  std::vector<double> sample;     // [lines][across]: the digit-0 probe's output there
  int64_t expected(int64_t line) const { return line / block; }
};

inline ScaleSideDecode scale_side_decode(bool is_a, int64_t M, int64_t N, int64_t block, int64_t tile_m,
                                         int64_t tile_n) {
  ScaleSideDecode s;
  s.is_a = is_a, s.M = M, s.N = N, s.block = std::max<int64_t>(1, block);
  s.tile_m = tile_m > 0 ? tile_m : std::max<int64_t>(M, 1);
  s.tile_n = tile_n > 0 ? tile_n : std::max<int64_t>(N, 1);
  s.lines = is_a ? M : N;
  s.blocks = ceil_div(s.lines, s.block);
  s.across = is_a ? ceil_div(N, s.tile_n) : ceil_div(M, s.tile_m);
  s.used.assign(size_t(s.lines * s.across), 0);
  s.sample.assign(size_t(s.lines * s.across), 0.0);
  return s;
}

// Adds the output of the probe of digit d (base 2^bits): each sample's exponent is that digit
// of the block whose scale it used.
inline void add_scale_digit(ScaleSideDecode& s, const Tensor& out, int d, int bits, double unit) {
  for (int64_t line = 0; line < s.lines; ++line)
    for (int64_t t = 0; t < s.across; ++t) {
      const int64_t m = s.is_a ? line : t * s.tile_m, n = s.is_a ? t * s.tile_n : line;
      const double got = output_at(out, m * s.N + n);
      const size_t at = size_t(line * s.across + t);
      if (d == 0) s.sample[at] = got;
      const int e = decode_exponent(got, unit);
      if (e < 0 || e >= (1 << bits) || s.used[at] == kNoScaleCode) s.used[at] = kNoScaleCode;
      else s.used[at] += int64_t(e) << (bits * d);
    }
}

// "tile (1,0)", "tiles (2,0)-(3,1)" (a rectangle of tiles), or a list.
inline std::string tiles_text(const std::vector<std::pair<int64_t, int64_t>>& tiles) {
  const auto one = [](const std::pair<int64_t, int64_t>& t) {
    return strprintf("(%lld,%lld)", (long long)t.first, (long long)t.second);
  };
  if (tiles.size() == 1) return "tile " + one(tiles[0]);
  int64_t m0 = tiles[0].first, m1 = m0, n0 = tiles[0].second, n1 = n0;
  for (const auto& t : tiles) m0 = std::min(m0, t.first), m1 = std::max(m1, t.first), n0 = std::min(n0, t.second), n1 = std::max(n1, t.second);
  if (int64_t(tiles.size()) == (m1 - m0 + 1) * (n1 - n0 + 1)) return "tiles " + one({m0, n0}) + "-" + one({m1, n1});
  std::string text = "tiles ";
  for (size_t i = 0; i < tiles.size() && i < 4; ++i) text += (i ? ", " : "") + one(tiles[i]);
  if (tiles.size() > 4) text += strprintf(" and %zu more", tiles.size() - 4);
  return text;
}

// Per tile: right, another existing block's scale ("used scale_a row blocks 128-191 instead of
// 64-127"), or no block's code (foreign). Tiles with the same finding make one clause. Adds to
// the finding's tile tables; returns the clauses' text ("" when every tile is right).
inline std::string scale_tile_findings(const ScaleSideDecode& s, ScaleFinding& f) {
  const int64_t tiles_m = ceil_div(s.M, s.tile_m), tiles_n = ceil_div(s.N, s.tile_n);
  if (f.foreign.empty()) {
    f.tiles_m = tiles_m, f.tiles_n = tiles_n;
    f.foreign.assign(size_t(tiles_m * tiles_n), false);
  }
  std::vector<bool> misused(size_t(tiles_m * tiles_n), false);
  const char* what = s.is_a ? "scale_a row block" : "scale_b column block";
  std::vector<std::string> keys;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> members;
  const auto span = [](int64_t lo, int64_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  };
  for (int64_t tm = 0; tm < tiles_m; ++tm)
    for (int64_t tn = 0; tn < tiles_n; ++tn) {
      // The tile's lines, at its place across.
      const int64_t tile_index = s.is_a ? tm : tn, t = s.is_a ? tn : tm;
      const int64_t size = s.is_a ? s.tile_m : s.tile_n;
      const int64_t first = tile_index * size, last = std::min(s.lines, first + size) - 1;
      int64_t lo = INT64_MAX, hi = INT64_MIN, want_lo = INT64_MAX, want_hi = INT64_MIN, phantom_lo = INT64_MAX,
              phantom_hi = INT64_MIN;
      bool wrong = false, none = false, zeros = true;
      double odd = 0.0;
      for (int64_t line = first; line <= last; ++line) {
        const size_t at = size_t(line * s.across + t);
        const int64_t used = s.used[at], own = s.expected(line);
        want_lo = std::min(want_lo, own), want_hi = std::max(want_hi, own);
        zeros = zeros && s.sample[at] == 0.0;
        if (used == kNoScaleCode) {
          if (s.sample[at] != 0.0) odd = s.sample[at];
          none = true;
        } else if (used >= s.blocks) {
          phantom_lo = std::min(phantom_lo, used), phantom_hi = std::max(phantom_hi, used);
        } else {
          lo = std::min(lo, used), hi = std::max(hi, used);
          wrong = wrong || used != own;
        }
      }
      std::string key;
      if (none || phantom_lo != INT64_MAX) {
        f.foreign[size_t(tm * tiles_n + tn)] = true;
        if (none && zeros)
          key = strprintf("no %s's code arrived (the output is 0)", what);
        else if (none)
          key = strprintf("no %s's code arrived (values such as %s, no power-of-two code)", what,
                          format_value(odd).c_str());
        else
          key = strprintf("the codes of %ss %s arrived, which do not exist (there are %lld)", what,
                          span(phantom_lo, phantom_hi).c_str(), (long long)s.blocks);
      } else if (wrong) {
        misused[size_t(tm * tiles_n + tn)] = true;
        key = strprintf("used %s%s %s instead of %s", what, lo == hi && want_lo == want_hi ? "" : "s", span(lo, hi).c_str(),
                        span(want_lo, want_hi).c_str());
      } else {
        continue;
      }
      const auto found = std::find(keys.begin(), keys.end(), key);
      if (found == keys.end()) {
        keys.push_back(key);
        members.push_back({{tm, tn}});
      } else {
        members[size_t(found - keys.begin())].push_back({tm, tn});
      }
    }
  for (size_t t = 0; t < misused.size(); ++t)
    if (misused[t] && !f.foreign[t]) ++f.misused_tiles;
  // The rows (A) or columns (B) a clause's tiles cover, when they are one run.
  const auto lines_of = [&](const std::vector<std::pair<int64_t, int64_t>>& tiles) {
    std::vector<int64_t> along;
    for (const auto& t : tiles) along.push_back(s.is_a ? t.first : t.second);
    std::sort(along.begin(), along.end());
    along.erase(std::unique(along.begin(), along.end()), along.end());
    if (along.back() - along.front() + 1 != int64_t(along.size())) return std::string();
    const int64_t size = s.is_a ? s.tile_m : s.tile_n;
    return strprintf(" (%s %s)", s.is_a ? "rows" : "columns",
                     span(along.front() * size, std::min(s.lines, (along.back() + 1) * size) - 1).c_str());
  };
  std::string text;
  for (size_t i = 0; i < keys.size() && i < 4; ++i)
    text += (i ? "; " : "") + tiles_text(members[i]) + lines_of(members[i]) + " " + keys[i];
  if (keys.size() > 4) {
    size_t more = 0;
    for (size_t i = 4; i < keys.size(); ++i) more += members[i].size();
    text += strprintf("; and %zu more tiles", more);
  }
  return text;
}

// Says where the scales came from when no block's code arrived.
inline std::string outside_scales_note() {
  return "where no block's code arrived, the scales were read from outside the scale tensor (or not at all): "
         "`repro run SPEC --sanitize memcheck` shows reads past its end";
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
  // Scale tensors are small (one value per block of 128 or more operand elements, packings and
  // layouts of their own: scales.cuh): set on the host and uploaded.
  REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
}

inline void fill_unit_scales(SpecInfo& spec) {
  for (bool is_a : {true, false}) fill_operand_scales(spec, is_a, [](int64_t, int64_t) { return 1.0; });
}

// The scale probes; appends them to ctx.outcomes and returns what they decode (empty text: all
// passed).
inline ScaleFinding run_scale_probes(SpecInfo& spec, ProbeContext& ctx) {
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
  ScaleFinding finding;
  std::vector<std::string> findings;
  bool outside = false;  // some output got no block's code
  const ProbeValues one = ProbeValues::constant(1.0);
  fill_probe_operand(A, one, ctx.tables);
  fill_probe_operand(B, one, ctx.tables);

  // Row blocks of SA, column blocks of SB: digits of the block index.
  for (bool is_a : {true, false}) {
    const ScaleSpec& scale = is_a ? g.scale_a : g.scale_b;
    if (scale.tensor < 0) continue;
    const int64_t extent = is_a ? g.M : g.N, block = is_a ? scale.block[0] : scale.block[1];
    const int64_t blocks = ceil_div(extent, block);
    if (blocks <= 1) continue;  // one scale along this axis: the K probes and ones cover it
    int digits = 1;
    for (int64_t reach = base; reach < blocks && digits < 3; reach *= base) ++digits;
    ScaleSideDecode decoded = scale_side_decode(is_a, g.M, g.N, block, spec.tile_m, spec.tile_n);
    bool failed = false;
    const char* side = is_a ? "scale_a rows" : "scale_b cols";
    for (int d = 0; d < digits; ++d) {
      const auto digit = [&](int64_t b) { return int((b >> (bits * d)) & (base - 1)); };
      fill_unit_scales(spec);
      fill_operand_scales(spec, is_a, [&](int64_t ib, int64_t) { return std::ldexp(1.0, digit(ib)); });
      const auto line_code = [&](int64_t, int64_t line) { return std::ldexp(1.0, digit(line / block)); };
      const ProbeValues unit = ProbeValues::constant(alpha * K);
      ProbeOutcome o = run_analytic_probe(
          ctx, strprintf("%s %d", side, d),
          strprintf("A = B = 1, %s block code 2^(digit %d, base %lld)", is_a ? "scale_a row" : "scale_b column", d,
                    (long long)base),
          is_a ? unit.with_rows(1, g.M, line_code) : unit.with_columns(1, g.N, line_code), true);
      failed = failed || !o.passed;
      add_scale_digit(decoded, out, d, bits, alpha * K);
      probes.push_back(o);
      print_probe(probes.back());
    }
    if (failed) {
      const bool foreign_before = finding.any_foreign();
      const std::string text = scale_tile_findings(decoded, finding);
      outside = outside || (finding.any_foreign() && !foreign_before);
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
      fill_probe_operand(A, one.with_columns(1, g.K, [&](int64_t, int64_t k) { return k >= k0 && k < k1 ? 1.0 : 0.0; }),
                         ctx.tables);
      const double unit = alpha * double(k1 - k0);
      ProbeOutcome o = run_analytic_probe(
          ctx, strprintf("scale k %lld/%lld", (long long)s, (long long)k_blocks),
          strprintf("A = 1 on k %lld-%lld, K-block scale codes", (long long)k0, (long long)(k1 - 1)),
          ProbeValues::constant(unit * std::ldexp(1.0, code(s))));
      if (!o.passed) {
        // What the first wrong output used.
        const Mismatch* first = o.comparison.first.empty() ? nullptr : &o.comparison.first.front();
        const int e = first ? decode_exponent(first->got, unit) : -1;
        std::string note;
        if (e < 0) {
          outside = outside || first != nullptr;
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
  if (outside) findings.push_back(outside_scales_note());
  for (size_t i = 0; i < findings.size(); ++i) finding.text += (i ? "; " : "") + findings[i];
  return finding;
}

// ------------------------------------------------------------------------ grouped GEMMs

// ------------------------------------------------------------------ k_grouped_blocks operands
//
// A and B (and their scales) are flat, group g's part an [M, k_g] (B: [N, k_g]) row-major block at
// M * k0(g): there are no rows of K to set. The probes set the blocks instead, on the device, from
// a value per line (row of A, column of B) and per K index (ProbeValues::k_blocks). What lies past
// the last group's block (K_total beyond the sum of k_sizes) is block G, a group that does not
// exist: a kernel that reads it decodes to "the tail past the last group".

// The K bounds of the blocks: k0(0) = 0, k0(1), ..., k0(G) (the sum of k_sizes), K_total.
inline std::vector<int64_t> k_block_bounds(const GroupedProblem& p) {
  std::vector<int64_t> bounds;
  for (int64_t g = 0; g <= p.G; ++g) bounds.push_back(p.k_begin(g));
  bounds.push_back(std::max(p.K, bounds.back()));
  return bounds;
}

// The pattern of a flat operand of `lines` lines (M for A, N for B): line_value(line) *
// k_value(group, k within the group), group G the tail.
template <typename L, typename V>
inline ProbeValues block_probe_values(const GroupedProblem& p, int64_t lines, L line_value, V k_value) {
  const std::vector<int64_t> bounds = k_block_bounds(p);
  std::vector<int64_t> group_of(size_t(bounds.back()), p.G);
  for (int64_t g = 0; g < p.G; ++g)
    for (int64_t k = bounds[size_t(g)]; k < bounds[size_t(g) + 1]; ++k) group_of[size_t(k)] = g;
  return ProbeValues::k_blocks(lines, bounds)
      .with_rows(1, lines, [&](int64_t, int64_t line) { return line_value(line); })
      .with_columns(1, bounds.back(), [&](int64_t, int64_t k) {
        const int64_t g = group_of[size_t(k)];
        return k_value(g, k - bounds[size_t(g)]);
      });
}

template <typename L, typename V>
inline void fill_block_operand(const GroupedProblem& p, Tensor& t, int64_t lines, ProbeTables& tables, L line_value,
                               V k_value) {
  fill_probe_operand(t, block_probe_values(p, lines, line_value, k_value), tables);
}

// Fills A with 1 and B with row_value(g, k) * column_value(n) on each group's part, k counted
// within the group: B[g] for contiguous and masked, group g's K range of rows for k_grouped
// (rows of no group: 0), group g's block for k_grouped_blocks (the tail as group G).
template <typename R, typename C>
inline void fill_group_b(const GroupedProblem& p, Tensor& A, Tensor& B, ProbeTables& tables, R row_value,
                         C column_value) {
  const ProbeValues one = ProbeValues::constant(1.0);
  fill_probe_operand(A, one, tables);
  if (p.layout == GroupedLayout::k_grouped_blocks) {
    fill_block_operand(p, B, p.N, tables, column_value, row_value);
    return;
  }
  ProbeValues b;
  if (p.layout == GroupedLayout::k_grouped) {
    std::vector<int64_t> group_of(size_t(p.K), -1), local_k(size_t(p.K), 0);
    for (int64_t g = 0, k = 0; g < p.G; ++g)
      for (int64_t i = 0; i < p.groups[size_t(g)]; ++i, ++k) group_of[size_t(k)] = g, local_k[size_t(k)] = i;
    b = one.with_rows(1, p.K, [&](int64_t, int64_t k) {
      return group_of[size_t(k)] < 0 ? 0.0 : row_value(group_of[size_t(k)], local_k[size_t(k)]);
    });
  } else {
    b = one.with_rows(p.G, p.K, row_value);
  }
  fill_probe_operand(B, b.with_columns(1, p.N, [&](int64_t, int64_t n) { return column_value(n); }), tables);
}

// The same with B's value a function of the group alone.
template <typename F>
inline void fill_group_operands(const GroupedProblem& p, Tensor& A, Tensor& B, ProbeTables& tables, F value) {
  fill_group_b(p, A, B, tables, [&](int64_t g, int64_t) { return value(g); }, [](int64_t) { return 1.0; });
}

// A with the value row(batch, m) on row m (of every group's block, for k_grouped_blocks), where
// batches is 1 but for masked.
template <typename R>
inline void fill_group_a_rows(const GroupedProblem& p, Tensor& A, ProbeTables& tables, R row) {
  if (p.layout == GroupedLayout::k_grouped_blocks) {
    fill_block_operand(p, A, p.M, tables, [&](int64_t m) { return row(0, m); }, [](int64_t, int64_t) { return 1.0; });
    return;
  }
  const bool masked = p.layout == GroupedLayout::masked;
  fill_probe_operand(A, ProbeValues::constant(1.0).with_rows(masked ? p.G : 1, p.M, row), tables);
}

// alpha * Kg * code(g) * row(batch, m): the right answers of a probe whose B of group g is
// code(g) and whose A has the value row(batch, m) on row m (1 unless the probe varies it).
template <typename F, typename R>
inline ProbeValues grouped_expected(const GroupedProblem& p, F code, R row) {
  return grouped_values(p, [&](const GroupGemm& gg, int64_t m) {
    return p.alpha * double(gg.k) * code(gg.group) * row(gg.batch, m);
  });
}

template <typename F>
inline ProbeValues grouped_expected(const GroupedProblem& p, F code) {
  return grouped_expected(p, code, [](int64_t, int64_t) { return 1.0; });
}

// Whether a probe's runs differ only as two stores racing for the same outputs would make them:
// every output that differs lies in a row another group's tile also covers, and holds, in every
// run, either its right value or one wrong value, the same bits in every run where it is wrong.
// Then the runs disagree about which store came last, not about a value computed from racing
// data. Returns the evidence ("" when that is not what the runs show).
inline std::string store_race_note(const GroupedProblem& p, const Tensor& out,
                                   const std::vector<std::vector<unsigned char>>& runs,
                                   const std::vector<double>& want, const Tolerance& tol, int64_t tile_m) {
  if (runs.size() < 2) return "";
  const std::vector<bool> reach = rows_other_tiles_reach(p, tile_m);
  const size_t bytes = dtype_bytes(out.dtype);
  int64_t differing = 0, zeros = 0;
  std::vector<int64_t> rows;  // flat rows ([batches][M]) holding differing outputs
  for (int64_t i = 0; i < out.numel() && i < int64_t(want.size()); ++i) {
    const size_t at = size_t(out.logical_offset(i)) * bytes;
    bool differs = false;
    for (size_t r = 1; r < runs.size() && !differs; ++r) differs = std::memcmp(runs[r].data() + at, runs[0].data() + at, bytes) != 0;
    if (!differs || is_not_compared(want[size_t(i)])) continue;  // outputs not judged are not counted either
    if (!reach[size_t(i / p.N)]) return "";
    const unsigned char* wrong = nullptr;
    for (const std::vector<unsigned char>& run : runs) {
      const int64_t offset = int64_t(at / bytes);
      const double got = decode(out.dtype, run.data(), offset);
      if (std::isfinite(got) && element_matches(out.dtype, got, want[size_t(i)], tol)) continue;
      if (wrong == nullptr) {
        wrong = run.data() + at;
        zeros += got == 0.0 && !is_poison(out.dtype, run.data(), offset);
      } else if (std::memcmp(wrong, run.data() + at, bytes) != 0) {
        return "";  // two different wrong values: computed from racing data
      }
    }
    ++differing;
    if (rows.empty() || rows.back() != i / p.N) rows.push_back(i / p.N);
  }
  if (differing == 0) return "";
  const int64_t batch = rows.front() / p.M;
  std::vector<int64_t> first_batch;
  for (int64_t flat : rows)
    if (flat / p.M == batch) first_batch.push_back(flat % p.M);
  const std::string where = p.layout == GroupedLayout::masked
                                ? strprintf("group %lld rows %s", (long long)batch, ranges_text(first_batch).c_str())
                                : "rows " + ranges_text(first_batch);
  return strprintf("its runs differ in %lld outputs (%s%s), each right in some runs and %s in the others, in rows "
                   "that another group's tile also covers: two stores race for them, that tile's and the group's "
                   "own, and which lands last changes; no value is computed from racing data",
                   (long long)differing, where.c_str(), rows.back() / p.M != batch ? ", and more" : "",
                   zeros == differing ? "0 (written, not the poison)" : "the same wrong value");
}

inline ProbeOutcome run_grouped_probe(ProbeContext& ctx, const GroupedProblem& p, const std::string& name,
                                      const std::string& inputs, const ProbeValues& want,
                                      std::vector<std::vector<unsigned char>>* runs_out = nullptr) {
  Tensor& out = ctx.spec->tensors[size_t(ctx.spec->gemm.out)];
  ProbeJudgement judged;
  ProbeOutcome o = run_analytic_probe(ctx, name, inputs, want, runs_out != nullptr, &judged);
  if (o.differences > 0)
    o.store_race = store_race_note(p, out, judged.runs, judged.want, Tolerance{0, 0, 0, true}, ctx.spec->tile_m);
  if (runs_out != nullptr) *runs_out = std::move(judged.runs);
  return o;
}

// What the group code probes decode to, row by row: the group whose weights each compared row
// was computed with, or, where no group's code arrived, whether the row was written with zeros,
// never written (the poison), or holds something else (a mixture, another K extent).
struct GroupFinding {
  std::string text;
  int64_t rows = 0;        // rows holding another group's product
  int64_t spill_rows = 0;  // wrong rows written by a tile of another group (covering_tile)
  int64_t wrong_rows = 0;  // rows not holding their own group's product, of any kind
};

// How a row that decodes to no group reads: written with zeros (every output, or every wrong
// one, the others right), never written (the poison), or anything else.
constexpr int64_t kRowMixture = -1, kRowZeros = -3, kRowSomeZeros = -4, kRowPoison = -5;

inline const char* row_reading(int64_t kind) {
  switch (kind) {
    case kRowZeros: return " were written with zeros (every output 0, stored: not the poison)";
    case kRowSomeZeros: return " were written with zeros in part (every wrong output 0, stored; the others right)";
    case kRowPoison: return " were never written (they still hold the poison)";
    default: return " hold no group's product (a mixture, or another K extent)";
  }
}

// The clause for rows that another group's tile covers: what wrote them.
inline std::string spill_clause(const GroupedProblem& p, const CoveringTile& tile, int64_t product) {
  if (p.layout == GroupedLayout::masked)
    return ": they lie in " + tile.where + ", a store that spills across the group boundary";
  return strprintf(": they lie in %s, whose pass stored the whole tile over them (a store that spills across the "
                   "group boundary)%s",
                   tile.where.c_str(),
                   product >= 0 ? strprintf(", unless their own pass used group %lld's weights", (long long)product).c_str()
                                : "");
}

inline GroupFinding decode_groups(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                                  const Tensor& out, int bits, int64_t tile_m) {
  const int64_t base = int64_t(1) << bits;
  GroupFinding finding;
  // One clause per (group, reading, covering tile), its rows gathered: a store race can leave
  // every other few rows of the same kind ("group 1 rows 0-3, 8-11, 16-19 were written ...").
  struct Clause {
    int64_t group, reading;
    CoveringTile tile;
    std::vector<int64_t> rows;
  };
  std::vector<Clause> clauses;
  // Output d's value at a logical index, read in place.
  const auto value = [&](size_t d, int64_t index) { return decode(out.dtype, outputs[d].data(), out.logical_offset(index)); };
  for (const GroupGemm& gg : group_gemms(p)) {
    const double unit = p.alpha * double(gg.k);
    // Runs of rows of this GEMM that read the same way.
    int64_t run_start = 0, run_group = -2;
    const auto close_run = [&](int64_t end) {
      if (run_group == gg.group || run_group == -2) return;
      const int64_t r0 = gg.row0 + run_start, r1 = gg.row0 + end - 1;
      finding.wrong_rows += end - run_start;
      // Only a row that decodes to another group is a group mapping; one that decodes to none
      // (a short K range gives another multiple of the code) is reported, not counted, unless
      // another group's tile covers it (zeros or a mixture stored by a tile that spills over).
      if (run_group >= 0) finding.rows += end - run_start;
      const CoveringTile tile = run_group == kRowPoison ? CoveringTile() : covering_tile(p, gg, r0, r1, tile_m, run_group);
      if (tile.group >= 0) finding.spill_rows += end - run_start;
      Clause* clause = nullptr;
      for (Clause& c : clauses)
        if (c.group == gg.group && c.reading == run_group && c.tile.where == tile.where) clause = &c;
      if (clause == nullptr) {
        clauses.push_back(Clause{gg.group, run_group, tile, {}});
        clause = &clauses.back();
      }
      for (int64_t r = r0; r <= r1; ++r) clause->rows.push_back(r);
    };
    const double own = unit * std::ldexp(1.0, int(gg.group & (base - 1)));  // digit 0 of its own code
    for (int64_t r = 0; r < gg.rows; ++r) {
      const int64_t row = (gg.batch * p.M + gg.row0 + r) * p.N;
      int64_t used = 0;
      for (size_t d = 0; d < outputs.size() && used >= 0; ++d) {
        const int e = decode_exponent(value(d, row), unit);
        used = e < 0 || e >= base ? kRowMixture : used + (int64_t(e) << (bits * int(d)));
      }
      if (used >= p.G) used = kRowMixture;
      // A row whose first output is another group's code is that group's product. Any other row
      // is read whole (in the digit-0 probe): right only if every output is its own code; else
      // zeros, poison, or a mixture (a store race can leave a row partly each).
      if (used < 0 || used == gg.group) {
        int64_t zeros = 0, poison = 0, right = 0;
        for (int64_t n = 0; n < p.N; ++n) {
          if (is_poison(out.dtype, outputs.front().data(), out.logical_offset(row + n))) {
            ++poison;
            continue;
          }
          const double got = value(0, row + n);
          zeros += got == 0.0;
          right += got == own;
        }
        used = right == p.N                        ? gg.group
               : poison == p.N                     ? kRowPoison
               : zeros == p.N                      ? kRowZeros
               : zeros > 0 && zeros + right == p.N ? kRowSomeZeros
                                                  : kRowMixture;
      }
      if (used != run_group) {
        close_run(r);
        run_start = r, run_group = used;
      }
    }
    close_run(gg.rows);
  }
  for (size_t i = 0; i < clauses.size() && i < 4; ++i) {
    const Clause& c = clauses[i];
    const std::string rows = ranges_text(c.rows);
    const std::string where = p.layout == GroupedLayout::contiguous
                                  ? strprintf("rows %s (group %lld)", rows.c_str(), (long long)c.group)
                                  : strprintf("group %lld rows %s", (long long)c.group, rows.c_str());
    const std::string what =
        c.reading >= 0 ? strprintf(" hold group %lld's product", (long long)c.reading) : std::string(row_reading(c.reading));
    finding.text += (i ? "; " : "") + where + what + (c.tile.group >= 0 ? spill_clause(p, c.tile, c.reading) : "");
  }
  if (clauses.size() > 4) finding.text += strprintf("; and %zu more", clauses.size() - 4);
  return finding;
}

// ------------------------------------------------------------------ k_grouped_blocks: the blocks each group read
//
// The group codes of k_grouped_blocks code A's blocks (B = 1) and B's blocks (A = 1) in separate
// probes, the tail past the last group as group G. Output (m, n) of group g sums A's row m (or
// B's column n) as the kernel read it, so row m of the A probes says which block that row of A
// came from, column n of the B probes which block that column of B came from: "group 0 (k 256)
// read A rows 0-99 from group 1's block, rows 100-199 from group 2's block". A line that spans
// two blocks holds no single code (a mixture).

// A block a line read, as block_reading gives it, over a run of lines.
struct BlockRun {
  int64_t source, first, last;
};

// A prediction's "anything": the line lies past the end of the operand.
constexpr int64_t kBlockAnywhere = -8;

// The block whose code arrived at output `index` of the code probes (`outputs[d]`: digit d): a
// group, G for the tail (when there is one), or kRowZeros, kRowPoison, kRowMixture.
inline int64_t block_reading(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                             const Tensor& out, int64_t index, double unit, int bits) {
  const int64_t at = out.logical_offset(index), base = int64_t(1) << bits;
  if (is_poison(out.dtype, outputs.front().data(), at)) return kRowPoison;
  int64_t code = 0;
  for (size_t d = 0; d < outputs.size(); ++d) {
    const double got = decode(out.dtype, outputs[d].data(), at);
    if (d == 0 && got == 0.0) return kRowZeros;
    const int e = decode_exponent(got, unit);
    if (e < 0 || e >= base) return kRowMixture;
    code += int64_t(e) << (bits * int(d));
  }
  const bool tail = p.K > p.k_begin(p.G);
  return code < p.G || (code == p.G && tail) ? code : kRowMixture;
}

inline std::vector<BlockRun> block_runs(const std::vector<int64_t>& sources) {
  std::vector<BlockRun> runs;
  for (int64_t i = 0; i < int64_t(sources.size()); ++i) {
    if (!runs.empty() && runs.back().source == sources[size_t(i)]) runs.back().last = i;
    else runs.push_back(BlockRun{sources[size_t(i)], i, i});
  }
  return runs;
}

// The block each line of a group of extent k reads when its block is taken to begin at K index
// `start` with row stride k: a block (G: the tail), kRowMixture where the line spans two, and
// kBlockAnywhere past the operand's end.
inline std::vector<int64_t> predicted_blocks(const std::vector<int64_t>& bounds, int64_t lines, int64_t start, int64_t k) {
  const int64_t end = lines * bounds.back();
  const auto block_of = [&](int64_t index) {
    int64_t b = 0;
    while (b + 2 < int64_t(bounds.size()) && index >= lines * bounds[size_t(b) + 1]) ++b;
    return b;
  };
  std::vector<int64_t> blocks(static_cast<size_t>(lines));
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t first = lines * start + line * k, last = first + k - 1;
    blocks[size_t(line)] = last >= end ? kBlockAnywhere : block_of(first) == block_of(last) ? block_of(first) : kRowMixture;
  }
  return blocks;
}

inline bool matches_prediction(const std::vector<int64_t>& got, const std::vector<int64_t>& predicted) {
  for (size_t i = 0; i < got.size(); ++i)
    if (predicted[i] != kBlockAnywhere && predicted[i] != got[i]) return false;
  return true;
}

inline std::string block_source_text(const GroupedProblem& p, int64_t own, int64_t source) {
  if (source == own) return "its own block";
  if (source >= 0 && source < p.G) return strprintf("group %lld's block", (long long)source);
  if (source == p.G)
    return strprintf("the tail past the last group (k %lld-%lld)", (long long)p.k_begin(p.G), (long long)(p.K - 1));
  if (source == kRowZeros) return "no block (the outputs are 0, stored: not the poison)";
  if (source == kRowPoison) return "no block (the outputs were never written: the poison)";
  return "no single block (a mixture)";
}

// "A rows 0-99 from group 1's block, rows 100-199 from group 2's block".
inline std::string block_runs_text(const GroupedProblem& p, int64_t own, const char* operand, const char* line,
                                   const std::vector<BlockRun>& runs) {
  std::string text = operand;
  for (size_t i = 0; i < runs.size() && i < 4; ++i) {
    const BlockRun& r = runs[i];
    const std::string span =
        r.first == r.last ? std::to_string(r.first) : strprintf("%lld-%lld", (long long)r.first, (long long)r.last);
    text += strprintf("%s%s%s %s from %s", i ? ", " : " ", line, r.first == r.last ? "" : "s", span.c_str(),
                      block_source_text(p, own, r.source).c_str());
  }
  if (runs.size() > 4) text += strprintf(" and %zu more runs of %ss", runs.size() - 4, line);
  return text;
}

// The group code probes of k_grouped_blocks: `outputs` the A probes' (one per digit), then the B
// probes'. Each group's A rows and B columns decoded to the blocks they came from; where every
// group read from where its own block ends (k0(g) + k_g) with its own row stride, that is said
// first: it is the whole pattern (the next group's block, and past it; the last group the tail).
inline GroupFinding decode_group_blocks(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                                        const Tensor& out, int bits) {
  GroupFinding finding;
  const size_t digits = outputs.size() / 2;
  const std::vector<std::vector<unsigned char>> a_outputs(outputs.begin(), outputs.begin() + std::ptrdiff_t(digits)),
      b_outputs(outputs.begin() + std::ptrdiff_t(digits), outputs.end());
  const std::vector<int64_t> bounds = k_block_bounds(p);
  std::vector<std::string> clauses;
  bool at_block_end = true;  // every group read as if its block began where it ends
  int64_t groups_read = 0;   // groups with a K extent
  for (const GroupGemm& gg : group_gemms(p)) {
    if (gg.k == 0) continue;
    ++groups_read;
    const double unit = p.alpha * double(gg.k);
    const int64_t first_row = gg.batch * p.M;
    std::vector<int64_t> a_sources(size_t(p.M)), b_sources(size_t(p.N));
    for (int64_t m = 0; m < p.M; ++m) a_sources[size_t(m)] = block_reading(p, a_outputs, out, (first_row + m) * p.N, unit, bits);
    for (int64_t n = 0; n < p.N; ++n) b_sources[size_t(n)] = block_reading(p, b_outputs, out, first_row * p.N + n, unit, bits);
    const int64_t end = gg.k0 + gg.k;
    at_block_end = at_block_end && matches_prediction(a_sources, predicted_blocks(bounds, p.M, end, gg.k)) &&
                   matches_prediction(b_sources, predicted_blocks(bounds, p.N, end, gg.k));
    const std::vector<BlockRun> a_runs = block_runs(a_sources), b_runs = block_runs(b_sources);
    const bool a_own = a_runs.size() == 1 && a_runs[0].source == gg.group;
    const bool b_own = b_runs.size() == 1 && b_runs[0].source == gg.group;
    if (a_own && b_own) continue;
    // Rows: those whose A row came from another block, every row when a B column did.
    int64_t coded_rows = 0, wrong_rows = 0;
    bool b_coded = false, b_wrong = false;
    for (int64_t source : b_sources) {
      b_coded = b_coded || (source >= 0 && source != gg.group);
      b_wrong = b_wrong || source != gg.group;
    }
    for (int64_t source : a_sources) {
      coded_rows += b_coded || (source >= 0 && source != gg.group);
      wrong_rows += b_wrong || source != gg.group;
    }
    finding.rows += coded_rows, finding.wrong_rows += wrong_rows;
    const std::string group = strprintf("group %lld (k %lld)", (long long)gg.group, (long long)gg.k);
    if (a_runs.size() == 1 && b_runs.size() == 1 && a_runs[0].source == b_runs[0].source) {
      const int64_t source = a_runs[0].source;
      if (source >= 0 && source < p.G)
        clauses.push_back(strprintf("%s read group %lld's A and B blocks", group.c_str(), (long long)source));
      else if (source == p.G)
        clauses.push_back(group + " read its A and B from " + block_source_text(p, gg.group, source));
      else
        clauses.push_back(strprintf("group %lld rows 0-%lld%s", (long long)gg.group, (long long)(p.M - 1), row_reading(source)));
      continue;
    }
    std::string text = group + " read ";
    if (!a_own) text += block_runs_text(p, gg.group, "A", "row", a_runs);
    if (!b_own) text += (a_own ? "" : ", and ") + block_runs_text(p, gg.group, "B", "column", b_runs);
    clauses.push_back(text);
  }
  for (size_t i = 0; i < clauses.size() && i < 4; ++i) finding.text += (i ? "; " : "") + clauses[i];
  if (clauses.size() > 4) finding.text += strprintf("; and %zu more groups", clauses.size() - 4);
  if (!clauses.empty() && at_block_end && groups_read == int64_t(clauses.size()))
    finding.text = "every group read from where its own block ends (its A and B taken to begin at k0(g) + k_g, read "
                   "with its own row stride k_g): " +
                   finding.text;
  return finding;
}

// The decode of the run (launch) of the group code probes whose rows are most wrong: a spill
// that races with the group's own store may land in one run and not in another. `runs[d][r]`:
// run r of the probe of digit d.
inline GroupFinding decode_group_runs(const GroupedProblem& p, const std::vector<std::vector<std::vector<unsigned char>>>& runs,
                                      const Tensor& out, int bits, int64_t tile_m) {
  GroupFinding best;
  size_t best_run = 0, count = runs.empty() ? 0 : runs.front().size();
  for (size_t r = 0; r < count; ++r) {
    std::vector<std::vector<unsigned char>> outputs;
    for (const auto& digit : runs) outputs.push_back(digit[r]);
    GroupFinding f = p.layout == GroupedLayout::k_grouped_blocks ? decode_group_blocks(p, outputs, out, bits)
                                                                 : decode_groups(p, outputs, out, bits, tile_m);
    if (r == 0 || f.wrong_rows > best.wrong_rows) best = f, best_run = r;
  }
  if (best_run > 0 && !best.text.empty())
    best.text += strprintf(" (in launch %zu of %zu of the group code probes; the first had fewer wrong rows)",
                           best_run + 1, count);
  return best;
}

// What the group scale probes of a grouped GEMM with block scales decoded (probe_group_scales.cuh).
struct GroupScaleFinding {
  std::string text;           // their decode ("" when they pass, or decode nothing)
  int64_t weight_rows = 0;    // rows computed with another group's weights
  int64_t scale_rows = 0;     // rows that used another group's scale_b, other scale_a rows, other K blocks
  int64_t no_code_rows = 0;   // rows where no code arrived (0, the poison, a mixture)
};

// The group scale probes: appends them to ctx.outcomes (probe_group_scales.cuh).
inline GroupScaleFinding run_group_scale_probes(SpecInfo& spec, ProbeContext& ctx, const GroupedProblem& p);
template <typename F>
inline void fill_grouped_scales(SpecInfo& spec, const GroupedProblem& p, bool is_a, F value);

// The verdict of the grouped suite from its probes (named as run_grouped_probes names them) and
// the decode of its group codes: a race; rows holding another group's product, or written by
// another group's tile (group_mapping); ones failing; the group codes failing otherwise; K
// slices; row codes; column codes; the tile ramp; the group scale probes (scale_mapping, or
// group_mapping where a row decodes to another group's weights); the random inputs; ok.
inline Pattern grouped_verdict(const std::vector<ProbeOutcome>& probes, const GroupFinding& finding,
                               const GroupScaleFinding& scales = GroupScaleFinding()) {
  const auto find = [&](const std::string& prefix) {
    std::vector<const ProbeOutcome*> found;
    for (const ProbeOutcome& o : probes)
      if (o.name.rfind(prefix, 0) == 0) found.push_back(&o);
    return found;
  };
  const auto first_failed = [&](const std::string& prefix) -> const ProbeOutcome* {
    for (const ProbeOutcome* o : find(prefix))
      if (!o->passed) return o;
    return nullptr;
  };
  // Runs that differ as two stores race (store_race_note) say so; they are no race of values.
  std::string races;
  for (const ProbeOutcome& o : probes)
    if (!o.store_race.empty() && races.empty()) races = "; probe " + o.name + ": " + o.store_race;
  const ProbeOutcome& ones = *find("ones").front();
  for (const ProbeOutcome& o : probes)
    if (is_race(o.run_differences_seen()) && o.store_race.empty())
      return {"nondeterministic", strprintf("probe %s: %lld outputs differ bitwise between two runs on the same inputs "
                                            "(a race, or an uninitialized read)%s%s%s",
                                            o.name.c_str(), (long long)o.differences,
                                            o.only_under_stress ? ", only when the run was under stress" : "",
                                            finding.text.empty() ? "" : "; group codes: ", finding.text.c_str())};
  if (finding.rows > 0 || finding.spill_rows > 0)
    return {"group_mapping", "group codes: " + finding.text + (ones.passed ? "" : "; ones: " + ones.pattern.evidence) + races};
  // A tile's store that races with the group's own, and lost in the runs the codes decoded.
  if (!races.empty()) return {"group_mapping", "another group's tile stores over a group's rows in some runs" + races};
  if (!ones.passed) {
    const std::string& cls = ones.pattern.cls;
    if (cls == "unwritten" || cls == "nonfinite") return {cls, "ones: " + ones.pattern.evidence};
    return {"k_coverage", "ones: " + ones.pattern.evidence + (finding.text.empty() ? "" : "; group codes: " + finding.text) +
                              " (a group's outputs are not alpha * its K extent)"};
  }
  if (const ProbeOutcome* code = first_failed("group code"))
    return {"group_mapping", "ones passes, the group codes fail: " + (finding.text.empty() ? code->pattern.evidence : finding.text)};
  int failed_slices = 0;
  std::string slice_text;
  const std::vector<const ProbeOutcome*> slices = find("k-slice");
  for (const ProbeOutcome* s : slices)
    if (!s->passed && failed_slices++ < 4) slice_text += (slice_text.empty() ? "" : "; ") + s->name + ": " + s->pattern.evidence;
  if (failed_slices > 0)
    return {"k_coverage", strprintf("ones and the group codes pass, but %d of the %zu K slices probed are wrong: %s",
                                    failed_slices, slices.size(), slice_text.c_str())};
  if (const ProbeOutcome* rows = first_failed("row code"))
    return {"row_mapping", "row codes within the groups: " + rows->pattern.evidence};
  if (const ProbeOutcome* cols = first_failed("col code"))
    return {"col_mapping", "column codes within the groups: " + cols->pattern.evidence};
  if (const ProbeOutcome* ramp = first_failed("tile ramp"))
    return {ramp->pattern.cls, "ones and the group codes pass, the tile ramp (every row tile its own value) fails: " +
                                   ramp->pattern.evidence + " (a tile computed from another tile's rows)"};
  for (const char* prefix : {"group scale", "scale_a rows", "scale k"})
    if (const ProbeOutcome* scale = first_failed(prefix)) {
      const std::string decoded = scales.text.empty() ? scale->name + ": " + scale->pattern.evidence : scales.text;
      if (scales.weight_rows > 0)
        return {"group_mapping", "the group probes pass with every scale 1; with group and scale codes: " + decoded};
      return {"scale_mapping", "the group probes pass with every scale 1; the group scale probes fail: " + decoded};
    }
  if (const ProbeOutcome* random = first_failed("random"))
    return {random->pattern.cls, "only random inputs fail: " + random->pattern.evidence};
  return {"ok", "every probe passes"};
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
  const bool blocks = p.layout == GroupedLayout::k_grouped_blocks;
  // Block scales all 1 (and the padding bytes of packed ue8m0, the tail of k_grouped_blocks): the
  // group probes read the groups, not the scales; the group scale probes, after them, read the
  // scales.
  for (bool is_a : {true, false}) fill_grouped_scales(spec, p, is_a, [](int64_t, int64_t, int64_t) { return 1.0; });
  // C zero: the probes' right answers are the product alone (and an output the kernel adds
  // into starts as 0).
  if (g.c >= 0) fill_probe_operand(tensors[size_t(g.c)], ProbeValues::constant(0.0), ctx.tables);

  ProbeTables& tables = ctx.tables;
  fill_group_operands(p, A, B, tables, [](int64_t) { return 1.0; });
  probes.push_back(run_grouped_probe(ctx, p, "ones", "A = 1, B = 1", grouped_expected(p, [](int64_t) { return 1.0; })));
  print_probe(probes.back());

  // Group codes, base 4 (2^3 is exact in every B dtype, fp8 included). k_grouped_blocks codes A's
  // blocks and B's blocks in probes of their own (the tail past the groups as group G), as a
  // kernel can take either from the wrong place.
  const int bits = 2;
  const int64_t codes = blocks ? p.G + 1 : p.G;
  int digits = 1;
  for (int64_t reach = 4; reach < codes && digits < 4; reach *= 4) ++digits;
  std::vector<std::vector<std::vector<unsigned char>>> code_runs;
  bool codes_failed = false;
  const size_t first_code_probe = probes.size();
  for (const char* operand : blocks ? std::vector<const char*>{"A", "B"} : std::vector<const char*>{""}) {
    for (int d = 0; d < digits; ++d) {
      const auto code = [&](int64_t group) { return std::ldexp(1.0, int((group >> (bits * d)) & 3)); };
      std::string name = strprintf("group code %d", d), inputs = strprintf("A = 1, B of group g = 2^(digit %d of g, base 4)", d);
      if (!blocks) {
        fill_group_operands(p, A, B, tables, code);
      } else if (operand[0] == 'A') {
        fill_probe_operand(B, ProbeValues::constant(1.0), tables);
        fill_block_operand(p, A, p.M, tables, [](int64_t) { return 1.0; }, [&](int64_t group, int64_t) { return code(group); });
        name = strprintf("group code A %d", d);
        inputs = strprintf("B = 1, A's block of group g = 2^(digit %d of g, base 4), the tail's g = G", d);
      } else {
        fill_group_operands(p, A, B, tables, code);
        name = strprintf("group code B %d", d);
        inputs = strprintf("A = 1, B's block of group g = 2^(digit %d of g, base 4), the tail's g = G", d);
      }
      code_runs.emplace_back();
      probes.push_back(run_grouped_probe(ctx, p, name, inputs, grouped_expected(p, code), &code_runs.back()));
      codes_failed = codes_failed || !probes.back().passed;
      print_probe(probes.back());
    }
  }
  GroupFinding finding;
  if (codes_failed) {
    finding = decode_group_runs(p, code_runs, out, bits, spec.tile_m);
    if (!finding.text.empty()) probes[first_code_probe].note = finding.text;
  }

  // K slices of every group, sized by the kernel's K tile: B = 1 on slice s of each group's K
  // (the whole K for contiguous and masked, the group's own range for k_grouped, its block for
  // k_grouped_blocks), else 0.
  const int64_t tile_k = spec.tile_k > 0 ? spec.tile_k : 32;
  int64_t longest_k = 0;
  for (const GroupGemm& gg : group_gemms(p)) longest_k = std::max(longest_k, gg.k);
  const int64_t slice_count = ceil_div(longest_k, tile_k);
  for (int64_t s : slices_to_probe(slice_count)) {
    const int64_t k0 = s * tile_k, k1 = k0 + tile_k;
    fill_group_b(p, A, B, tables, [&](int64_t, int64_t k) { return k >= k0 && k < k1 ? 1.0 : 0.0; },
                 [](int64_t) { return 1.0; });
    probes.push_back(run_grouped_probe(
        ctx, p, strprintf("k-slice %lld/%lld", (long long)s, (long long)slice_count),
        strprintf("A = 1, B = 1 on k %lld-%lld of each group", (long long)k0, (long long)(k1 - 1)),
        grouped_values(p, [&](const GroupGemm& gg, int64_t) {
          return p.alpha * double(std::max<int64_t>(0, std::min(gg.k, k1) - k0));
        })));
    print_probe(probes.back());
  }

  // Row and column codes within the groups, two base-4 digits each, as in the plain suite.
  const auto line_code = [](int digit, int64_t i) { return double(1 << ((i >> (2 * digit)) & 3)); };
  for (int digit = 0; digit < 2; ++digit) {
    fill_group_operands(p, A, B, tables, [](int64_t) { return 1.0; });
    fill_group_a_rows(p, A, tables, [&](int64_t, int64_t m) { return line_code(digit, m); });
    probes.push_back(run_grouped_probe(
        ctx, p, strprintf("row code %d", digit), strprintf("A[m,k] = 2^(digit %d of m, base 4), B = 1", digit),
        grouped_expected(p, [](int64_t) { return 1.0; }, [&](int64_t, int64_t m) { return line_code(digit, m); })));
    print_probe(probes.back());
  }
  for (int digit = 0; digit < 2; ++digit) {
    fill_group_b(p, A, B, tables, [](int64_t, int64_t) { return 1.0; }, [&](int64_t n) { return line_code(digit, n); });
    probes.push_back(run_grouped_probe(
        ctx, p, strprintf("col code %d", digit), strprintf("A = 1, B[k,n] = 2^(digit %d of n, base 4)", digit),
        grouped_values(p, [&](const GroupGemm& gg, int64_t) { return p.alpha * double(gg.k); },
                       [&](int64_t n) { return line_code(digit, n); })));
    print_probe(probes.back());
  }

  // Tile ramp: every row tile of A its own value (and, masked, every group), B = 1: a tile
  // computed from another tile's rows shows even where the groups are right.
  const int64_t ramp = tile_ramp_period({A.dtype, B.dtype}, out.dtype, p.alpha * double(p.K));
  if (ramp > 1) {
    const int64_t tm = std::max<int64_t>(1, spec.tile_m);
    const auto a_of = [&](int64_t batch, int64_t m) { return double(1 + (m / tm + batch) % ramp); };
    fill_group_operands(p, A, B, tables, [](int64_t) { return 1.0; });
    const bool masked = p.layout == GroupedLayout::masked;
    fill_group_a_rows(p, A, tables, [&](int64_t l, int64_t m) { return a_of(masked ? l : 0, m); });
    probes.push_back(run_grouped_probe(
        ctx, p, "tile ramp", strprintf("A = 1 + (m / %lld) mod %lld, B = 1", (long long)tm, (long long)ramp),
        grouped_expected(p, [](int64_t) { return 1.0; },
                         [&](int64_t batch, int64_t m) { return a_of(p.layout == GroupedLayout::masked ? batch : 0, m); })));
    print_probe(probes.back());
  }

  // Block scales: which group's scale_b, which scale_a rows and which K blocks each row used.
  const GroupScaleFinding scale_finding = has_scales(g) ? run_group_scale_probes(spec, ctx, p) : GroupScaleFinding();

  ProbeJudgement random_judged;
  probes.push_back(run_random_probe(ctx, random_reference, random_tolerance, random_inputs, &random_judged));
  if (probes.back().differences > 0)
    probes.back().store_race = store_race_note(p, out, random_judged.runs,
                                               random_judged.want.empty() ? random_reference : random_judged.want,
                                               random_tolerance, spec.tile_m);
  print_probe(probes.back());
  ctx.release();
  show_first_failure(probes, out);
  return conclude_probes(probes, grouped_verdict(probes, finding, scale_finding));
}

}  // namespace repro
