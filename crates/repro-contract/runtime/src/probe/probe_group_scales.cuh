// ---------------------------------------------------------------------------------------------
// repro harness runtime: the group scale probes of a grouped GEMM with block scales (docs/cli.md,
// `repro probe`; issue 61)
//
// The grouped suite (probe_ops.cuh) runs with every block scale 1, so a kernel that takes a
// group's scales from another group, or reads the activation scales at the wrong row, passes it.
// These probes follow it, A = B = 1 unless said:
//
//   probe            operands and scales                                   D must be
//   group scale d    B of group g = 2^w, its scale_b = 2^(w * 2^bits),     alpha*Kg*2^(w + (w << bits))
//                    w = digit d of g (base 2^bits); SA = 1
//   scale_a rows d   SA of row block i = 2^(digit d of i, base 16); SB = 1 alpha*Kg*2^digit
//   scale k s/S      A = 1 on K block s only; SA(., kb) = 2^(kb mod 4),    alpha*|s in Kg|*2^(a + 4b)
//                    SB(kb, .) = 2^(4 (kb mod 4))
//
// In the group scale probes the weights' code and the scales' code sit in separate bit fields of
// the output's exponent, as the K-block probes' a + 4b do: each row decodes to the group whose
// weights it was computed with and the group whose scale_b it used, in one run, so a scale
// mix-up ("rows 384-583 (group 1) used group 1's weights with group 0's scale_b blocks") is told
// from a group mix-up (another group's weights and its scales) and from a spill (those, where a
// tile of the other group covers the rows). The scale_a row
// blocks are numbered over the whole tensor: contiguous over M_total, masked over [G, M_max]
// (block i of group g is g * blocks + i), so a row that read its row within its group, or
// another group's rows, decodes to them. The K-block probes (as the plain suite's, per group)
// decode which K block's scales each group's rows used: a packed ue8m0 byte order.
//
// Every code is a power of two, so every scale is exact in ue8m0 and every product exact in the
// output (the digits shrink for a narrow output or scale dtype). Scales are set through
// fill_group_scales, the packing the generated inputs use; packed ue8m0 also gets the bytes past
// the last K block, as the blocks they would be, so a kernel that reads them decodes to a block.
// k_grouped runs the K-block probes only (its scales are windows of one tensor by K range), and
// so does k_grouped_blocks, its A and its scales set block by block (the K blocks counted over
// K_total; the tail past the last group set as the blocks it would hold).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "probe_ops.cuh"

namespace repro {

// ------------------------------------------------------------------ setting the scales

// Sets every scale of scale_a (is_a) or scale_b on the host from value(group, i_block, k_block),
// `group` the [G, ...] batch (0 for a tensor of one operand's scales), through fill_group_scales.
// Packed ue8m0 is filled to a whole element's four K blocks: the bytes past the last K block get
// the values of the blocks they would hold.
template <typename F>
inline void set_group_probe_scales(const ScaleSpec& spec, Tensor& t, bool is_a, int64_t i_extent, int64_t K, F value) {
  const ScaleOperand s = scale_operand(spec, t, t.host.data(), is_a);
  const int64_t k_blocks = ceil_div(K, s.block_k);
  const int64_t padded = spec.encoding == ScaleEncoding::ue8m0_packed ? ceil_div(k_blocks, 4) * 4 * s.block_k : K;
  fill_group_scales(s, t, i_extent, padded, value);
}

// k_grouped_blocks: the flat scale tensor of A (`lines` M) or B (N), group g's [lines, k_g / bk]
// block at lines * k0(g) / bk (docs/spec.md), set from value(group, line, K block), the K block
// counted over K_total as the other layouts count it; the tail past the last group is group G.
template <typename F>
inline void set_block_probe_scales(const GroupedProblem& p, Tensor& t, int64_t lines, int64_t block_k, F value) {
  const std::vector<int64_t> bounds = k_block_bounds(p);
  const int64_t numel = t.numel(), bk = std::max<int64_t>(block_k, 1);
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    const int64_t kb0 = bounds[b] / bk, blocks = bounds[b + 1] / bk - kb0;
    for (int64_t line = 0; line < lines; ++line)
      for (int64_t j = 0; j < blocks; ++j) {
        const int64_t index = lines * kb0 + line * blocks + j;
        if (index < numel) encode(t.dtype, t.host.data(), t.logical_offset(index), value(int64_t(b), line, kb0 + j));
      }
  }
}

// The same on the spec's scale tensor, uploaded; a GEMM without that scale is left alone.
template <typename F>
inline void fill_grouped_scales(SpecInfo& spec, const GroupedProblem& p, bool is_a, F value) {
  const GemmOperands& g = spec.gemm;
  const ScaleSpec& scale = is_a ? g.scale_a : g.scale_b;
  if (scale.tensor < 0) return;
  Tensor& t = spec.tensors[size_t(scale.tensor)];
  if (p.layout == GroupedLayout::k_grouped_blocks)
    set_block_probe_scales(p, t, is_a ? g.M : g.N, is_a ? scale.block[1] : scale.block[0], value);
  else
    set_group_probe_scales(scale, t, is_a, is_a ? g.M : g.N, g.K, value);
  REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
}

// Whether `value` is exact in a scale tensor of this dtype and encoding (ue8m0: any power of two).
inline bool scale_holds(DType dtype, ScaleEncoding encoding, double value) {
  return encoding != ScaleEncoding::value || round_to(dtype, value) == value;
}

// Whether alpha * K * 2^exponent, the largest output of a probe, is exact in the output.
inline bool output_holds(DType out, double unit, int exponent) {
  // K sums of one code each: exact in an fp32 accumulator while K is at most 2^24.
  const double top = std::fabs(unit) * std::ldexp(1.0, exponent);
  return std::fabs(unit) <= 16777216.0 && round_to(out, top) == top;
}

// ------------------------------------------------------------------ the codes

// The group scale probes' codes: digit d of group g (base 2^bits) is w; B of group g is 2^w and
// its scale_b 2^(w << bits), so the output's exponent is (weights' digit) + (scales' digit << bits).
struct GroupScaleCodes {
  int bits = 2;    // 0: the probes do not fit the dtypes
  int digits = 1;  // probes (of digits 0 .. digits-1)
  int64_t base() const { return int64_t(1) << bits; }
  int digit(int64_t g, int d) const { return int((g >> (bits * d)) & (base() - 1)); }
  double weights(int64_t g, int d) const { return std::ldexp(1.0, digit(g, d)); }
  double scale(int64_t g, int d) const { return std::ldexp(1.0, digit(g, d) << bits); }
  double product(int64_t g, int d) const { return weights(g, d) * scale(g, d); }
};

// The widest codes the B, scale and output dtypes hold exactly: 2 bits (exponents to 15), else 1
// (to 3); bits 0 when not even those fit.
inline GroupScaleCodes group_scale_codes(int64_t G, DType b, DType scale, ScaleEncoding encoding, DType out, double unit) {
  GroupScaleCodes c;
  for (int bits : {2, 1}) {
    const int top = int((int64_t(1) << bits) - 1);
    if (round_to(b, std::ldexp(1.0, top)) != std::ldexp(1.0, top) ||
        !scale_holds(scale, encoding, std::ldexp(1.0, top << bits)) || !output_holds(out, unit, top + (top << bits)))
      continue;
    c.bits = bits;
    c.digits = 1;
    for (int64_t reach = c.base(); reach < G && c.digits < 8 / bits; reach *= c.base()) ++c.digits;
    return c;
  }
  c.bits = 0;
  return c;
}

// ------------------------------------------------------------------ reading a row

constexpr int64_t kScaleVaries = -6;  // the row's column blocks read different scale codes
constexpr int64_t kRowCoded = -7;     // every output of the row (of each column block) alike: one code

// "rows 384-583 (group 1)" (contiguous) or "group 1 rows 0-199" (masked, k_grouped).
inline std::string group_rows_text(const GroupedProblem& p, int64_t group, const std::vector<int64_t>& rows) {
  const std::string text = ranges_text(rows);
  return p.layout == GroupedLayout::contiguous ? strprintf("rows %s (group %lld)", text.c_str(), (long long)group)
                                               : strprintf("group %lld rows %s", (long long)group, text.c_str());
}

// How a row reads in the probe whose output is `out0` (bytes of `out`) when it holds no code:
// never written (the poison in every output), zeros, or a mixture; kRowCoded when the outputs of
// each column block (from samples[i] on) are alike: one code, to be decoded.
inline int64_t row_reading_kind(const Tensor& out, const std::vector<unsigned char>& out0, int64_t flat_row, int64_t N,
                                const std::vector<int64_t>& samples) {
  int64_t poison = 0, zeros = 0;
  bool alike = true;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t at = out.logical_offset(flat_row * N + n);
    if (is_poison(out.dtype, out0.data(), at)) {
      ++poison;
      continue;
    }
    const double got = decode(out.dtype, out0.data(), at);
    zeros += got == 0.0;
    // Alike within each column block (samples: its first columns): the codes are per block.
    const int64_t block = int64_t(std::upper_bound(samples.begin(), samples.end(), n) - samples.begin()) - 1;
    const double sample = decode(out.dtype, out0.data(), out.logical_offset(flat_row * N + samples[size_t(block)]));
    alike = alike && got == sample;
  }
  if (poison == N) return kRowPoison;
  if (zeros == N) return kRowZeros;
  return poison == 0 && alike ? kRowCoded : kRowMixture;
}

// One clause of a decode: a group's rows that read alike.
struct RowClause {
  int64_t group;
  std::string reading;
  std::vector<int64_t> rows;
};

inline void add_to_clause(std::vector<RowClause>& clauses, int64_t group, const std::string& reading, int64_t row) {
  for (RowClause& c : clauses)
    if (c.group == group && c.reading == reading) {
      c.rows.push_back(row);
      return;
    }
  clauses.push_back(RowClause{group, reading, {row}});
}

inline std::string clauses_text(const GroupedProblem& p, const std::vector<RowClause>& clauses) {
  std::string text;
  for (size_t i = 0; i < clauses.size() && i < 4; ++i)
    text += (i ? "; " : "") + group_rows_text(p, clauses[i].group, clauses[i].rows) + clauses[i].reading;
  if (clauses.size() > 4) text += strprintf("; and %zu more", clauses.size() - 4);
  return text;
}

// The first column of each scale_b column block (block_n wide): the places a row is sampled.
inline std::vector<int64_t> column_block_starts(int64_t N, int64_t block_n) {
  std::vector<int64_t> starts;
  for (int64_t n = 0; n < N; n += std::max<int64_t>(block_n, 1)) starts.push_back(n);
  if (starts.empty()) starts.push_back(0);
  return starts;
}

// ------------------------------------------------------------------ decoding the group scale probes

// Row by row: the group whose weights and the group whose scale_b the row used, from the outputs
// of the probes of every digit (`outputs[d]`, the bytes of `out`), sampled at the first column of
// each scale_b column block (`block_n` wide). Rows of another group's product (its weights and
// its scales) are a group mix-up, or, where a tile of that group covers them (covering_tile, the
// spec's tile_m), a store that spills over; rows with no code say what they hold.
inline GroupScaleFinding decode_group_scales(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                                             const Tensor& out, const GroupScaleCodes& codes, int64_t block_n,
                                             int64_t tile_m) {
  GroupScaleFinding finding;
  std::vector<RowClause> clauses;
  const std::vector<int64_t> samples = column_block_starts(p.N, block_n);
  const int64_t base = codes.base();
  for (const GroupGemm& gg : group_gemms(p)) {
    if (gg.k == 0) continue;
    const double unit = p.alpha * double(gg.k);
    for (int64_t r = 0; r < gg.rows; ++r) {
      const int64_t flat = gg.batch * p.M + gg.row0 + r;
      int64_t weights = -1, scales = -1;
      int64_t kind = row_reading_kind(out, outputs.front(), flat, p.N, samples);
      for (size_t s = 0; s < samples.size() && kind == kRowCoded; ++s) {
        int64_t w = 0, sc = 0;
        for (size_t d = 0; d < outputs.size(); ++d) {
          const int e = decode_exponent(decode(out.dtype, outputs[d].data(), out.logical_offset(flat * p.N + samples[s])), unit);
          if (e < 0 || (e >> codes.bits) >= base) {
            kind = kRowMixture;
            break;
          }
          w += int64_t(e & (base - 1)) << (codes.bits * int(d));
          sc += int64_t(e >> codes.bits) << (codes.bits * int(d));
        }
        if (kind != kRowCoded) break;
        if (s == 0) weights = w, scales = sc;
        if (w != weights) kind = kRowMixture;
        else if (sc != scales) scales = kScaleVaries;
      }
      if (kind == kRowCoded && (weights >= p.G || scales >= p.G)) kind = kRowMixture;
      const int64_t row = gg.row0 + r;
      if (kind != kRowCoded) {
        ++finding.no_code_rows;
        add_to_clause(clauses, gg.group, std::string(row_reading(kind)), row);
        continue;
      }
      if (weights == gg.group && scales == gg.group) continue;
      std::string reading;
      if (weights != gg.group) ++finding.weight_rows;
      else ++finding.scale_rows;
      if (scales == kScaleVaries)
        reading = strprintf(" used group %lld's weights with the scale_b blocks of different groups in different "
                            "column blocks",
                            (long long)weights);
      else if (weights != gg.group && scales == weights) {
        reading = strprintf(" hold group %lld's product (its weights and its scale_b blocks)", (long long)weights);
        const CoveringTile tile = covering_tile(p, gg, row, row, tile_m, weights);
        if (tile.group >= 0) reading += spill_clause(p, tile, weights);
      } else
        reading = strprintf(" used group %lld's weights with group %lld's scale_b blocks", (long long)weights,
                            (long long)scales);
      add_to_clause(clauses, gg.group, reading, row);
    }
  }
  finding.text = clauses_text(p, clauses);
  return finding;
}

// ------------------------------------------------------------------ decoding the scale_a rows

// The scale_a row blocks of a grouped GEMM, numbered over the whole tensor: block i of batch l of
// a [G, rows, K blocks] tensor is l * blocks + i; a [rows, K blocks] tensor's, i.
struct ScaleRowBlocks {
  int64_t block = 1;       // rows a block
  int64_t blocks = 1;      // per batch
  bool per_group = false;  // [G, ...]: masked
};

inline int64_t own_scale_row(const ScaleRowBlocks& s, const GroupGemm& gg, int64_t row) {
  return (s.per_group ? gg.batch * s.blocks : 0) + row / s.block;
}

// "scale_a rows 0-199" (blocks of one row) or "scale_a row blocks 0-1" of a list of blocks
// (sorted, unique).
inline std::string scale_rows_text(const ScaleRowBlocks& s, const std::vector<int64_t>& blocks) {
  return strprintf("scale_a %s %s", s.block == 1 ? "rows" : "row blocks", ranges_text(blocks).c_str());
}

// Row by row: the scale_a row block whose code arrived (the outputs of the probes of every digit,
// base 2^bits), against the row's own. Clauses say which rows were read instead, and whether
// they are the rows within the group (contiguous: a row's index counted from its group's first
// row) or another group's (masked).
inline GroupScaleFinding decode_scale_rows(const GroupedProblem& p, const std::vector<std::vector<unsigned char>>& outputs,
                                           const Tensor& out, const ScaleRowBlocks& s, int bits) {
  GroupScaleFinding finding;
  const int64_t base = int64_t(1) << bits;
  int64_t reach = 1;
  for (size_t d = 0; d < outputs.size(); ++d) reach *= base;
  const int64_t lines = s.per_group ? p.G * s.blocks : s.blocks;
  // Per (group, what was read): the rows, the blocks read and the blocks due.
  struct Clause {
    int64_t group;
    std::string key;
    std::vector<int64_t> rows, used, own;
    bool within = true;  // every row read its row within the group
  };
  std::vector<Clause> clauses;
  const std::vector<int64_t> samples = {0};
  for (const GroupGemm& gg : group_gemms(p)) {
    if (gg.k == 0) continue;
    const double unit = p.alpha * double(gg.k);
    for (int64_t r = 0; r < gg.rows; ++r) {
      const int64_t row = gg.row0 + r, flat = gg.batch * p.M + row;
      const int64_t own = own_scale_row(s, gg, row);
      int64_t kind = row_reading_kind(out, outputs.front(), flat, p.N, samples), used = 0;
      for (size_t d = 0; d < outputs.size() && kind == kRowCoded; ++d) {
        const int e = decode_exponent(decode(out.dtype, outputs[d].data(), out.logical_offset(flat * p.N)), unit);
        if (e < 0 || e >= base) kind = kRowMixture;
        else used += int64_t(e) << (bits * int(d));
      }
      if (kind == kRowCoded && used == own % reach) continue;  // right (codes repeat past the reach)
      std::string key;
      int64_t used_group = -1;
      if (kind != kRowCoded) {
        ++finding.no_code_rows;
        key = std::string(row_reading(kind)) + " (no scale_a row's code arrived)";
      } else if (used >= lines) {
        ++finding.no_code_rows;
        key = strprintf(" got the codes of scale_a rows that do not exist (there are %lld)", (long long)lines);
      } else {
        ++finding.scale_rows;
        used_group = s.per_group ? used / s.blocks : -1;
        key = strprintf("used %lld", (long long)used_group);
      }
      Clause* clause = nullptr;
      for (Clause& c : clauses)
        if (c.group == gg.group && c.key == key) clause = &c;
      if (clause == nullptr) {
        clauses.push_back(Clause{gg.group, key, {}, {}, {}, true});
        clause = &clauses.back();
      }
      clause->rows.push_back(row);
      if (kind == kRowCoded && used < lines) {
        clause->used.push_back(used);
        clause->own.push_back(own);
        clause->within = clause->within && used == own - (s.per_group ? 0 : gg.row0 / s.block);
      }
    }
  }
  std::string text;
  for (size_t i = 0; i < clauses.size() && i < 4; ++i) {
    Clause& c = clauses[i];
    text += (i ? "; " : "") + group_rows_text(p, c.group, c.rows);
    if (c.used.empty()) {
      text += c.key;
      continue;
    }
    const auto sorted = [](std::vector<int64_t> v) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      return v;
    };
    if (!s.per_group) {
      text += " used " + scale_rows_text(s, sorted(c.used)) + (c.within ? " (the rows within the group)" : "") +
              " instead of " + ranges_text(sorted(c.own));
      continue;
    }
    // Masked: the group the rows came from, and the rows within it.
    std::vector<int64_t> used_rows, own_rows;
    for (int64_t u : c.used) used_rows.push_back(u % s.blocks);
    for (int64_t o : c.own) own_rows.push_back(o % s.blocks);
    const int64_t from = c.used.front() / s.blocks;
    const std::string used_text = scale_rows_text(s, sorted(used_rows)), own_text = ranges_text(sorted(own_rows));
    if (from == c.group)
      text += " used its own " + used_text + " instead of " + own_text;
    else
      text += strprintf(" used group %lld's %s instead of its own (%s)", (long long)from, used_text.c_str(),
                        own_text.c_str());
  }
  if (clauses.size() > 4) text += strprintf("; and %zu more", clauses.size() - 4);
  finding.text = text;
  return finding;
}

// ------------------------------------------------------------------ decoding the K blocks

// The K-block codes: SA(., kb) = 2^(kb mod `mod`), SB(kb, .) = 2^((kb mod `mod`) << shift).
struct KBlockCodes {
  int64_t mod = 4;
  int shift = 2;
  bool a = true, b = true;  // which scales the GEMM has
  int code(int64_t kb) const { return int(a ? kb % mod : 0) + (int(b ? kb % mod : 0) << shift); }
};

// Row by row, over the K blocks probed (`blocks[i]`, its output `outputs[i]`, `block_k` wide): the
// K block (mod `mod`) whose scale_a and scale_b each row used. Rows that read alike make a clause
// ("group 1 rows 0-199: K blocks 0-4 used the scale_a and scale_b of K blocks 3, 2, 1, 0, 3 (mod
// 4) instead of 0, 1, 2, 3, 0"); a packed ue8m0 scale read in reverse byte order is named.
inline GroupScaleFinding decode_k_block_scales(const GroupedProblem& p, const std::vector<int64_t>& blocks,
                                               const std::vector<std::vector<unsigned char>>& outputs, const Tensor& out,
                                               const KBlockCodes& codes, int64_t block_k, bool a_packed, bool b_packed) {
  GroupScaleFinding finding;
  std::vector<RowClause> clauses;
  const std::vector<int64_t> samples = {0};
  const int mask = (1 << codes.shift) - 1;
  for (const GroupGemm& gg : group_gemms(p)) {
    for (int64_t r = 0; r < gg.rows; ++r) {
      const int64_t row = gg.row0 + r, flat = gg.batch * p.M + row;
      // Per K block probed: the wrong ones, what their A and B codes were; or a row with no code.
      std::vector<int64_t> wrong;
      std::vector<int> got_a, got_b;
      int64_t no_code = 0;
      for (size_t i = 0; i < blocks.size() && no_code == 0; ++i) {
        const int64_t k0 = blocks[i] * block_k, k1 = k0 + block_k;
        const int64_t width = std::max<int64_t>(0, std::min(gg.k0 + gg.k, k1) - std::max(gg.k0, k0));
        const int64_t kind = row_reading_kind(out, outputs[i], flat, p.N, samples);
        const double got = decode(out.dtype, outputs[i].data(), out.logical_offset(flat * p.N));
        if (width == 0) {  // a K block outside the group's range must leave 0
          if (kind != kRowZeros) no_code = kRowMixture;
          continue;
        }
        const int e = kind == kRowCoded ? decode_exponent(got, p.alpha * double(width)) : -1;
        if (e < 0 || (e >> codes.shift) >= codes.mod || (e & mask) >= codes.mod) {
          no_code = kind == kRowCoded ? kRowMixture : kind;
          continue;
        }
        if (e == codes.code(blocks[i])) continue;
        wrong.push_back(blocks[i]);
        got_a.push_back(e & mask);
        got_b.push_back(e >> codes.shift);
      }
      if (no_code != 0) {
        ++finding.no_code_rows;
        add_to_clause(clauses, gg.group, std::string(row_reading(no_code)) + " in a K block probe (no K block's code)", row);
        continue;
      }
      if (wrong.empty()) continue;
      ++finding.scale_rows;
      const auto list = [](const std::vector<int>& v) {
        std::string text;
        for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
        return text;
      };
      std::vector<int> own;
      bool a_wrong = false, b_wrong = false, reversed_a = codes.a && codes.mod == 4, reversed_b = codes.b && codes.mod == 4;
      for (size_t i = 0; i < wrong.size(); ++i) {
        const int mine = int(wrong[i] % codes.mod);
        own.push_back(mine);
        a_wrong = a_wrong || (codes.a && got_a[i] != mine);
        b_wrong = b_wrong || (codes.b && got_b[i] != mine);
        const int reverse = int(3 - wrong[i] % 4);
        reversed_a = reversed_a && got_a[i] == reverse;
        reversed_b = reversed_b && got_b[i] == reverse;
      }
      // Every K block of the group probed must be wrong for a byte order to be the reading.
      int64_t probed_in_group = 0;
      for (int64_t kb : blocks) probed_in_group += kb * block_k < gg.k0 + gg.k && (kb + 1) * block_k > gg.k0;
      const bool whole = probed_in_group == int64_t(wrong.size());
      const std::string blocks_of = wrong.size() == 1 ? "K block " : "K blocks ";
      std::string used;
      if (a_wrong && b_wrong && got_a == got_b)
        used = "the scale_a and scale_b of " + blocks_of + list(got_a);
      else if (a_wrong && b_wrong)
        used = "scale_a " + blocks_of + list(got_a) + " and scale_b " + blocks_of + list(got_b);
      else if (a_wrong)
        used = "scale_a " + blocks_of + list(got_a);
      else
        used = "scale_b " + blocks_of + list(got_b);
      std::vector<int64_t> sorted_wrong = wrong;
      std::string reading = strprintf(": K block%s %s used %s (mod %lld) instead of %s", wrong.size() == 1 ? "" : "s",
                                      ranges_text(sorted_wrong).c_str(), used.c_str(), (long long)codes.mod,
                                      list(own).c_str());
      const bool a_rev = whole && a_wrong && reversed_a && a_packed, b_rev = whole && b_wrong && reversed_b && b_packed;
      if (a_rev || b_rev)
        reading += strprintf(" (%s packed ue8m0 bytes read in reverse order: K block kb from byte 3 - kb %% 4)",
                             a_rev && b_rev ? "scale_a's and scale_b's" : a_rev ? "scale_a's" : "scale_b's");
      add_to_clause(clauses, gg.group, reading, row);
    }
  }
  finding.text = clauses_text(p, clauses);
  return finding;
}

// ------------------------------------------------------------------ the probes

inline void add_finding(GroupScaleFinding& all, const GroupScaleFinding& f) {
  if (!f.text.empty()) all.text += (all.text.empty() ? "" : "; ") + f.text;
  all.weight_rows += f.weight_rows, all.scale_rows += f.scale_rows, all.no_code_rows += f.no_code_rows;
}

inline GroupScaleFinding run_group_scale_probes(SpecInfo& spec, ProbeContext& ctx, const GroupedProblem& p) {
  const GemmOperands& g = spec.gemm;
  std::vector<Tensor>& tensors = spec.tensors;
  Tensor& A = tensors[size_t(g.a)];
  Tensor& B = tensors[size_t(g.b)];
  Tensor& out = tensors[size_t(g.out)];
  std::vector<ProbeOutcome>& probes = ctx.outcomes;
  ProbeTables& tables = ctx.tables;
  GroupScaleFinding finding;
  const auto unit_scales = [&](bool is_a) { fill_grouped_scales(spec, p, is_a, [](int64_t, int64_t, int64_t) { return 1.0; }); };
  const bool k_split = splits_k(p.layout);
  int64_t longest_k = 0;
  for (const GroupGemm& gg : group_gemms(p)) longest_k = std::max(longest_k, gg.k);
  const double top_unit = p.alpha * double(std::max<int64_t>(longest_k, 1));
  // Runs a probe; returns its first run's output, kept on the host for the decoders.
  std::vector<std::vector<unsigned char>> runs;
  const auto probe = [&](const std::string& name, const std::string& inputs, const ProbeValues& want) {
    runs.clear();
    probes.push_back(run_grouped_probe(ctx, p, name, inputs, want, &runs));
    return runs.empty() ? out.host : runs.front();
  };
  // A decode goes with the first failed probe of its kind (the last `count`), and into the finding.
  const auto note = [&](size_t count, const GroupScaleFinding& f) {
    for (size_t i = probes.size() - count; i < probes.size() && !f.text.empty(); ++i)
      if (!probes[i].passed) {
        probes[i].note = f.text;
        break;
      }
    add_finding(finding, f);
  };

  // Group scale probes: each group's weights and its scale_b coded at once.
  const Tensor* sb = g.scale_b.tensor >= 0 ? &tensors[size_t(g.scale_b.tensor)] : nullptr;
  if (!k_split && sb != nullptr && scale_groups(*sb) == p.G && p.G > 1) {
    const GroupScaleCodes codes = group_scale_codes(p.G, B.dtype, sb->dtype, g.scale_b.encoding, out.dtype, top_unit);
    if (codes.bits > 0) {
      unit_scales(true);
      std::vector<std::vector<unsigned char>> outputs;
      bool failed = false;
      for (int d = 0; d < codes.digits; ++d) {
        fill_group_operands(p, A, B, tables, [&](int64_t group) { return codes.weights(group, d); });
        fill_grouped_scales(spec, p, false, [&](int64_t group, int64_t, int64_t) { return codes.scale(group, d); });
        outputs.push_back(probe(strprintf("group scale %d", d),
                                strprintf("A = 1, B of group g = 2^w, its scale_b 2^(%lld w) (w: digit %d of g, base %lld)",
                                          (long long)codes.base(), d, (long long)codes.base()),
                                grouped_expected(p, [&](int64_t group) { return codes.product(group, d); })));
        failed = failed || !probes.back().passed;
        print_probe(probes.back());
      }
      if (failed)
        note(size_t(codes.digits), decode_group_scales(p, outputs, out, codes, g.scale_b.block[1], spec.tile_m));
    }
  }

  // scale_a row blocks, numbered over the whole tensor.
  const Tensor* sa = g.scale_a.tensor >= 0 ? &tensors[size_t(g.scale_a.tensor)] : nullptr;
  if (!k_split && sa != nullptr) {
    ScaleRowBlocks rows;
    rows.block = std::max<int64_t>(1, g.scale_a.block[0]);
    rows.blocks = ceil_div(p.M, rows.block);
    rows.per_group = p.layout == GroupedLayout::masked && scale_groups(*sa) == p.G;
    const int64_t lines = rows.per_group ? p.G * rows.blocks : rows.blocks;
    int bits = 0;
    for (int b : {4, 2, 1})
      if (bits == 0 && scale_holds(sa->dtype, g.scale_a.encoding, std::ldexp(1.0, (1 << b) - 1)) &&
          output_holds(out.dtype, top_unit, (1 << b) - 1))
        bits = b;
    if (lines > 1 && bits > 0) {
      const int64_t base = int64_t(1) << bits;
      int digits = 1;
      for (int64_t reach = base; reach < lines && digits < 20 / bits; reach *= base) ++digits;
      unit_scales(false);
      fill_group_operands(p, A, B, tables, [](int64_t) { return 1.0; });
      std::vector<std::vector<unsigned char>> outputs;
      bool failed = false;
      for (int d = 0; d < digits; ++d) {
        const auto code = [&](int64_t line) { return std::ldexp(1.0, int((line >> (bits * d)) & (base - 1))); };
        fill_grouped_scales(spec, p, true, [&](int64_t group, int64_t ib, int64_t) {
          return code((rows.per_group ? group * rows.blocks : 0) + ib);
        });
        outputs.push_back(probe(
            strprintf("scale_a rows %d", d),
            strprintf("A = B = 1, scale_a row block i%s = 2^(digit %d of %s, base %lld)", rows.per_group ? " of group g" : "",
                      d, rows.per_group ? strprintf("g*%lld + i", (long long)rows.blocks).c_str() : "i", (long long)base),
            grouped_values(p, [&](const GroupGemm& gg, int64_t m) {
              return p.alpha * double(gg.k) * code(own_scale_row(rows, gg, m));
            })));
        failed = failed || !probes.back().passed;
        print_probe(probes.back());
      }
      if (failed) note(size_t(digits), decode_scale_rows(p, outputs, out, rows, bits));
    }
  }

  // K blocks: only block s of A is 1, so only its scales reach the output.
  const int64_t block_k = sa != nullptr ? g.scale_a.block[1] : g.scale_b.block[0];
  const int64_t k_blocks = ceil_div(p.K, std::max<int64_t>(block_k, 1));
  KBlockCodes kc;
  kc.a = sa != nullptr, kc.b = sb != nullptr;
  if (!output_holds(out.dtype, p.alpha * double(block_k), 15)) kc.mod = 2, kc.shift = 1;
  const int top = int(kc.mod - 1);
  const bool k_fits = (sa == nullptr || scale_holds(sa->dtype, g.scale_a.encoding, std::ldexp(1.0, top))) &&
                      (sb == nullptr || scale_holds(sb->dtype, g.scale_b.encoding, std::ldexp(1.0, top << kc.shift))) &&
                      output_holds(out.dtype, p.alpha * double(block_k), top + (top << kc.shift));
  if (k_blocks > 1 && k_fits) {
    fill_grouped_scales(spec, p, true, [&](int64_t, int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % kc.mod)); });
    fill_grouped_scales(spec, p, false,
                        [&](int64_t, int64_t, int64_t kb) { return std::ldexp(1.0, int(kb % kc.mod) << kc.shift); });
    const std::vector<int64_t> blocks = slices_to_probe(k_blocks);
    std::vector<std::vector<unsigned char>> outputs;
    bool failed = false;
    fill_group_operands(p, A, B, tables, [](int64_t) { return 1.0; });
    for (int64_t s : blocks) {
      const int64_t k0 = s * block_k, k1 = std::min(p.K, k0 + block_k);
      const auto in_block = [&](int64_t k) { return k >= k0 && k < k1 ? 1.0 : 0.0; };
      if (p.layout == GroupedLayout::k_grouped_blocks)
        fill_block_operand(p, A, p.M, tables, [](int64_t) { return 1.0; },
                           [&](int64_t group, int64_t k) { return in_block(p.k_begin(group) + k); });
      else
        fill_probe_operand(A, ProbeValues::constant(1.0).with_columns(1, p.K, [&](int64_t, int64_t k) { return in_block(k); }),
                           tables);
      outputs.push_back(probe(strprintf("scale k %lld/%lld", (long long)s, (long long)k_blocks),
                              strprintf("A = 1 on k %lld-%lld, K-block scale codes", (long long)k0, (long long)(k1 - 1)),
                              grouped_values(p, [&](const GroupGemm& gg, int64_t) {
                                const int64_t width = std::max<int64_t>(0, std::min(gg.k0 + gg.k, k1) - std::max(gg.k0, k0));
                                return p.alpha * double(width) * std::ldexp(1.0, kc.code(s));
                              })));
      failed = failed || !probes.back().passed;
      print_probe(probes.back());
    }
    if (failed)
      note(blocks.size(), decode_k_block_scales(p, blocks, outputs, out, kc, block_k,
                                                g.scale_a.encoding == ScaleEncoding::ue8m0_packed,
                                                g.scale_b.encoding == ScaleEncoding::ue8m0_packed));
  }
  return finding;
}

}  // namespace repro
