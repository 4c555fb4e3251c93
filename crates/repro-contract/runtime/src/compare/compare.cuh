// ---------------------------------------------------------------------------------------------
// repro harness runtime: comparing an output with its reference
// ---------------------------------------------------------------------------------------------
#pragma once

#include "reference.cuh"

namespace repro {

// exact: analytic mode (--ones and the probes, docs/tolerances.md). The right answer is known in
// closed form, so an element passes only if it is the output dtype's value of it: no tolerance at
// all, except where that value is not representable, where one ulp of the output dtype is allowed.
// Otherwise an element is bad when |got - want| > atol + rtol * |want|, and the whole output
// also fails when its relative L2 error exceeds rel_l2.
struct Tolerance {
  double rel_l2;
  double rtol;
  double atol;  // absolute; see default_tolerance()
  bool exact;
};

// Default random-input tolerances.
//
// Inputs are seeded random values, the reference is accumulated in f64, so the difference is the
// kernel's own rounding: products and sums in its accumulator, then one rounding to the output
// dtype. That last rounding dominates for narrow outputs; with unit roundoff u of the output
// (2^-24 f32, 2^-11 f16, 2^-8 bf16, 2^-4 e4m3, 2^-3 e5m2) its relative L2 error is about u/sqrt(3):
//
//   output  rel_l2   rtol     reasoning
//   f64     1e-12    1e-10    f64 accumulation; error grows ~sqrt(K) u, u = 2^-53
//   f32     1e-5     1e-4     f32 accumulation over K in the thousands: ~sqrt(K) u ~ 1e-6..1e-5
//   f16     2e-3     4e-3     rounding to f16: u = 4.9e-4; rtol ~ 8u
//   bf16    1e-2     1.6e-2   rounding to bf16: u = 3.9e-3; rtol ~ 4u
//   e4m3    1e-1     1.25e-1  3 fraction bits: u = 6.25e-2; rtol = 2u
//   e5m2    2e-1     2.5e-1   2 fraction bits: u = 1.25e-1; rtol = 2u
//   ints    0        0        integer arithmetic is exact: any difference is a bug
//
// Inputs can be narrower than the output's rounding suggests:
//   tf32 operands: the kernel rounds them to 10 fraction bits (u = 4.9e-4) before multiplying,
//     an error the f32 reference inputs do not have, so an f32 output gets 5e-3 / 2e-2.
//   fp8 operands: products are exact, but Hopper's fp8 tensor-core MMA keeps only about 14 bits
//     of its f32 accumulator unless the kernel promotes partial sums (DeepSeek-V3 report,
//     §3.3.2), so a wider output is held to no more than 5e-3 / 2e-2 either.
//
// rtol alone would flag outputs near zero, where cancellation leaves a sum far smaller than its
// terms but with their absolute error. atol = rtol * ref_rms puts the floor at the error size of a
// typical output instead.
inline Tolerance default_tolerance(DType out, DType a, DType b, double ref_rms) {
  double rel_l2 = 0.0, rtol = 0.0;
  switch (out) {
    case DType::f64: rel_l2 = 1e-12, rtol = 1e-10; break;
    case DType::f32:
    case DType::tf32: rel_l2 = 1e-5, rtol = 1e-4; break;
    case DType::f16: rel_l2 = 2e-3, rtol = 4e-3; break;
    case DType::bf16: rel_l2 = 1e-2, rtol = 1.6e-2; break;
    case DType::e4m3: rel_l2 = 1e-1, rtol = 1.25e-1; break;
    case DType::e5m2: rel_l2 = 2e-1, rtol = 2.5e-1; break;
    default: break;  // integers and bool: exact
  }
  const auto loosens = [&](DType operand) {
    return operand == DType::tf32 || operand == DType::e4m3 || operand == DType::e5m2;
  };
  if (dtype_is_float(out) && (loosens(a) || loosens(b))) {
    rel_l2 = std::max(rel_l2, 5e-3);
    rtol = std::max(rtol, 2e-2);
  }
  return Tolerance{rel_l2, rtol, rtol * ref_rms, false};
}

// Root mean square of the finite values: the size of a typical reference output.
inline double reference_rms(const std::vector<double>& values) {
  double sum = 0.0;
  int64_t count = 0;
  for (double v : values) {
    if (std::isfinite(v)) {
      sum += v * v;
      ++count;
    }
  }
  return count ? std::sqrt(sum / double(count)) : 0.0;
}

struct Mismatch {
  int64_t l, m, n;
  double got, want;
  bool poison;  // never written: got is meaningless
};

struct Comparison {
  int64_t L = 0, M = 0, N = 0;
  int64_t count = 0;      // elements compared (L * M * N, less not_compared)
  int64_t not_compared = 0;  // outputs the reference does not judge (grouped: padding rows)
  int64_t bad = 0;        // failing elements, including the nan, inf and unwritten ones
  int64_t nan = 0;        // NaN outputs where the reference is finite (poison not included)
  int64_t inf = 0;        // Inf outputs where the reference is finite
  int64_t unwritten = 0;  // outputs still holding the poison
  // Over elements that were written and are finite in both output and reference:
  double rel_l2 = 0.0;    // ||out - ref|| / ||ref||
  double max_abs = 0.0;   // max |out - ref|
  double max_rel = 0.0;   // max |out - ref| / |ref| where ref != 0
  double ratio = 0.0;     // least-squares scale <out, ref> / <ref, ref>
  double residual = 0.0;  // ||out - ratio * ref|| / ||out||: how far out is from a multiple of ref
  double ref_rms = 0.0;   // rms of the finite reference values
  std::vector<Mismatch> first;  // the first kMaxMismatches bad elements in row-major order
  int64_t tile_m = 0, tile_n = 0, tiles_m = 0, tiles_n = 0;
  std::vector<int64_t> bad_per_tile;  // [tiles_m][tiles_n], summed over batches
  // Where the bad elements are, for naming their pattern (summed over batches): per output row,
  // per output column, and per residue class (m mod 8, n mod 8), with the class sizes.
  std::vector<int64_t> bad_per_row, bad_per_col;
  static constexpr int kPeriod = 8;
  // Evidence of a row or column mapping (find_line_mapping), when one explains the errors.
  std::string row_mapping, col_mapping;
  int64_t bad_by_residue[kPeriod * kPeriod] = {};
  int64_t count_by_residue[kPeriod * kPeriod] = {};
  // The rows and columns the unwritten elements span (valid when unwritten > 0).
  int64_t unwritten_row_min = 0, unwritten_row_max = 0, unwritten_col_min = 0, unwritten_col_max = 0;
  // Not a GEMM (op: custom, op: file): the output's own rank (1-4; 0 for a GEMM's [L?, M, N]),
  // its second extent for rank 4 (L = shape[0] * shape[1]), and its bad outputs on the border
  // (first or last row or column: an image stencil's edge).
  int rank = 0;
  int64_t inner_batch = 1;
  int64_t bad_on_border = 0;
  bool passed = false;
};

constexpr size_t kMaxMismatches = 10;

// The element test for a written, finite output `got` against a finite reference `want`.
REPRO_HD inline bool element_matches(DType dtype, double got, double want, const Tolerance& tol) {
  if (tol.exact) {
    const double representable = round_to(dtype, want);
    return got == representable || (representable != want && std::fabs(got - want) <= ulp_at(dtype, want));
  }
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

// What an element that fails is, besides out of tolerance: each is counted apart, on the host
// and on the device alike.
enum class ElementFault { none, unwritten, nan, inf };

// The test for one compared element (its reference is not the not-compared marker): `unwritten`
// says the output still holds the poison pattern the reference does not explain.
REPRO_HD inline bool judge_element(DType dtype, double got, double want, bool unwritten, const Tolerance& tol,
                                   ElementFault& fault) {
  fault = ElementFault::none;
  if (unwritten) fault = ElementFault::unwritten;
  else if (!std::isfinite(want)) return std::isnan(want) ? std::isnan(got) : got == want;  // to be matched
  else if (std::isnan(got)) fault = ElementFault::nan;
  else if (std::isinf(got)) fault = ElementFault::inf;
  else return element_matches(dtype, got, want, tol);
  return false;
}

// ------------------------------------------------------------------ line mappings
//
// "Row m holds the reference's row f(m)": an epilogue that stores rows in the wrong place, a
// load that reads the neighbouring row. Checked only after a failed comparison, for a few
// candidate mappings, on the rows (or columns) that have bad outputs.

// A candidate: output line i holds reference line map(i).
struct LineMapping {
  const char* rule;  // how the evidence names it, e.g. "2i and 2i+1 exchanged"
  int64_t (*map)(int64_t);
};

inline const std::vector<LineMapping>& line_mappings() {
  static const std::vector<LineMapping> mappings = {
      {"2i and 2i+1 exchanged", [](int64_t i) { return i ^ 1; } },
      {"each holds the next one's values (i <- i+1)", [](int64_t i) { return i + 1; } },
      {"each holds the previous one's values (i <- i-1)", [](int64_t i) { return i - 1; } },
  };
  return mappings;
}

// A mapping names the pattern when it explains at least this share of the lines with errors.
constexpr double kMappingMinShare = 0.9;

// The evidence for the best candidate mapping of rows (`rows`) or columns, or "" when none
// explains at least kMappingMinShare of the lines that have bad outputs.
inline std::string find_line_mapping(const Tensor& out, const std::vector<double>& want, int64_t L, int64_t M,
                                     int64_t N, const Tolerance& tol, bool rows,
                                     const std::vector<int64_t>& bad_per_line, int rank = 0) {
  const int64_t extent = rows ? M : N, across = rows ? N : M;
  std::vector<int64_t> bad_lines;
  for (int64_t i = 0; i < extent; ++i)
    if (bad_per_line[size_t(i)] > 0) bad_lines.push_back(i);
  if (bad_lines.empty()) return "";
  const auto holds = [&](int64_t line, int64_t source) {
    for (int64_t l = 0; l < L; ++l)
      for (int64_t j = 0; j < across; ++j) {
        const int64_t m = rows ? line : j, n = rows ? j : line;
        const int64_t sm = rows ? source : j, sn = rows ? j : source;
        const double got = decode(out.dtype, out.host.data(), out.logical_offset((l * M + m) * N + n));
        const double w = want[size_t((l * M + sm) * N + sn)];
        if (!std::isfinite(got) || !std::isfinite(w) || !element_matches(out.dtype, got, w, tol)) return false;
      }
    return true;
  };
  // A 1-D output's "columns" are its elements.
  const char* noun = rank == 1 ? "elements" : rows ? "rows" : "columns";
  const char* one = rank == 1 ? "element" : rows ? "row" : "column";
  for (const LineMapping& mapping : line_mappings()) {
    int64_t explained = 0, checked = 0;
    for (int64_t line : bad_lines) {
      const int64_t source = mapping.map(line);
      ++checked;
      if (source >= 0 && source < extent && source != line && holds(line, source)) ++explained;
      // Give up on a candidate as soon as it cannot reach the share any more.
      if (double(explained + int64_t(bad_lines.size()) - checked) < kMappingMinShare * double(bad_lines.size()))
        break;
    }
    if (double(explained) >= kMappingMinShare * double(bad_lines.size()))
      return strprintf("%s %s: %lld of the %lld %s with errors hold exactly the reference's values of that other %s",
                       noun, mapping.rule, (long long)explained, (long long)bad_lines.size(), noun, one);
  }
  return "";
}

// A comparison of an [L, M, N] output with nothing counted yet: its extents, its tiles (a tile
// of 0 is the whole extent) and zeroed tables (compare_output, and device_comparison).
inline Comparison comparison_frame(int64_t L, int64_t M, int64_t N, int64_t tile_m, int64_t tile_n) {
  Comparison c;
  c.L = L;
  c.M = M;
  c.N = N;
  c.count = L * M * N;
  c.tile_m = tile_m > 0 ? tile_m : std::max<int64_t>(M, 1);
  c.tile_n = tile_n > 0 ? tile_n : std::max<int64_t>(N, 1);
  c.tiles_m = (M + c.tile_m - 1) / c.tile_m;
  c.tiles_n = (N + c.tile_n - 1) / c.tile_n;
  c.bad_per_tile.assign(size_t(c.tiles_m * c.tiles_n), 0);
  c.bad_per_row.assign(size_t(M), 0);
  c.bad_per_col.assign(size_t(N), 0);
  return c;
}

// relL2 and the least-squares ratio from the sums over measurable elements: sum (out - ref)^2,
// sum ref^2, sum out * ref.
inline void set_norms(Comparison& c, double diff2, double ref2, double cross) {
  c.rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : (diff2 > 0.0 ? HUGE_VAL : 0.0);
  c.ratio = ref2 > 0.0 ? cross / ref2 : std::nan("");
}

// The verdict of a comparison: nothing bad, and (random inputs) relL2 within its tolerance.
inline void set_passed(Comparison& c, const Tolerance& tol) {
  c.passed = c.bad == 0 && (tol.exact || c.rel_l2 <= tol.rel_l2);
}

// Compares output tensor `out` (logical [M, N] or [L, M, N], read through its strides from
// out.host) with `want` (logical row-major [L][M][N]).
//
// rank: 0 for a GEMM's output; a custom op's output rank (1-4), seen as [L, M, N] (custom.cuh).
inline Comparison compare_output(const Tensor& out, const std::vector<double>& want, int64_t L, int64_t M,
                                 int64_t N, const Tolerance& tol, int64_t tile_m, int64_t tile_n, int rank = 0) {
  Comparison c = comparison_frame(L, M, N, tile_m, tile_n);
  c.rank = rank;
  if (rank == 4) c.inner_batch = out.shape[1];
  const bool border_counts = rank >= 2 && M >= 3 && N >= 3;
  c.ref_rms = reference_rms(want);

  const DType dtype = out.dtype;
  const unsigned char* storage = out.host.data();
  // An integer output may legitimately equal the poison (-1 in i8): only where the reference
  // disagrees does a poison element count as unwritten.
  const auto unwritten_at = [&](int64_t offset, double got, double want_value) {
    return is_poison(dtype, storage, offset) && !(got == round_to(dtype, want_value));
  };
  // Elements that enter the norms: written, and finite in both.
  const auto measurable = [&](int64_t offset, double got, double want_value) {
    return std::isfinite(got) && std::isfinite(want_value) && !unwritten_at(offset, got, want_value);
  };

  // The outputs are split into a fixed number of chunks in logical order, compared in parallel,
  // and merged in chunk order: the sums (and so the report) do not depend on the machine's core
  // count, and a 2^24-output comparison takes a fraction of a second instead of seconds.
  struct Part {
    int64_t bad = 0, nan = 0, inf = 0, unwritten = 0, not_compared = 0, bad_on_border = 0;
    int64_t unwritten_row_min = 0, unwritten_row_max = 0, unwritten_col_min = 0, unwritten_col_max = 0;
    double diff2 = 0.0, ref2 = 0.0, cross = 0.0, got2 = 0.0, max_abs = 0.0, max_rel = 0.0, residual2 = 0.0;
    std::vector<Mismatch> first;
    // Where the chunk's bad outputs are; sized at its first bad output, so a passing comparison
    // allocates none of them.
    std::vector<int64_t> bad_per_tile, bad_per_row, bad_per_col;
    int64_t bad_by_residue[Comparison::kPeriod * Comparison::kPeriod] = {};
    int64_t count_by_residue[Comparison::kPeriod * Comparison::kPeriod] = {};
  };
  // The chunks split every output; c.count itself drops the not-compared ones at the merge, and
  // the residual's pass after it must still visit all (it once missed the last ones).
  const int64_t outputs = c.count;
  const int64_t chunk_count = std::max<int64_t>(1, std::min<int64_t>(64, outputs / 65536));
  std::vector<Part> parts(static_cast<size_t>(chunk_count));
  const auto chunk_begin = [&](int64_t chunk) { return outputs * chunk / chunk_count; };
  parallel_for(chunk_count, 1, [&](int64_t chunk_first, int64_t chunk_last) {
    for (int64_t chunk = chunk_first; chunk < chunk_last; ++chunk) {
      Part& part = parts[size_t(chunk)];
      for (int64_t i = chunk_begin(chunk); i < chunk_begin(chunk + 1); ++i) {
        const int64_t l = i / (M * N), m = (i / N) % M, n = i % N;
        const int64_t offset = out.logical_offset(i);
        const double got = decode(dtype, storage, offset);
        const double w = want[size_t(i)];
        if (is_not_compared(w)) {
          ++part.not_compared;
          continue;
        }
        ElementFault fault;
        const bool unwritten = unwritten_at(offset, got, w);
        const bool ok = judge_element(dtype, got, w, unwritten, tol, fault);
        if (unwritten) {
          if (part.unwritten == 0) {
            part.unwritten_row_min = part.unwritten_row_max = m;
            part.unwritten_col_min = part.unwritten_col_max = n;
          }
          ++part.unwritten;
          part.unwritten_row_min = std::min(part.unwritten_row_min, m);
          part.unwritten_row_max = std::max(part.unwritten_row_max, m);
          part.unwritten_col_min = std::min(part.unwritten_col_min, n);
          part.unwritten_col_max = std::max(part.unwritten_col_max, n);
        }
        part.nan += fault == ElementFault::nan;
        part.inf += fault == ElementFault::inf;

        if (measurable(offset, got, w)) {
          const double diff = got - w;
          part.diff2 += diff * diff;
          part.ref2 += w * w;
          part.cross += got * w;
          part.got2 += got * got;
          part.max_abs = std::max(part.max_abs, std::fabs(diff));
          if (w != 0.0) part.max_rel = std::max(part.max_rel, std::fabs(diff) / std::fabs(w));
        }
        const int residue = int(m % Comparison::kPeriod) * Comparison::kPeriod + int(n % Comparison::kPeriod);
        ++part.count_by_residue[residue];
        if (!ok) {
          if (part.bad++ == 0) {
            part.bad_per_tile.assign(c.bad_per_tile.size(), 0);
            part.bad_per_row.assign(c.bad_per_row.size(), 0);
            part.bad_per_col.assign(c.bad_per_col.size(), 0);
          }
          ++part.bad_per_tile[size_t((m / c.tile_m) * c.tiles_n + n / c.tile_n)];
          ++part.bad_per_row[size_t(m)];
          ++part.bad_per_col[size_t(n)];
          ++part.bad_by_residue[residue];
          if (border_counts && (m == 0 || m == M - 1 || n == 0 || n == N - 1)) ++part.bad_on_border;
          if (part.first.size() < kMaxMismatches) part.first.push_back(Mismatch{l, m, n, got, w, unwritten});
        }
      }
    }
  });

  double diff2 = 0.0, ref2 = 0.0, cross = 0.0, got2 = 0.0;
  for (const Part& part : parts) {
    if (part.unwritten > 0) {
      if (c.unwritten == 0) {
        c.unwritten_row_min = part.unwritten_row_min, c.unwritten_row_max = part.unwritten_row_max;
        c.unwritten_col_min = part.unwritten_col_min, c.unwritten_col_max = part.unwritten_col_max;
      }
      c.unwritten_row_min = std::min(c.unwritten_row_min, part.unwritten_row_min);
      c.unwritten_row_max = std::max(c.unwritten_row_max, part.unwritten_row_max);
      c.unwritten_col_min = std::min(c.unwritten_col_min, part.unwritten_col_min);
      c.unwritten_col_max = std::max(c.unwritten_col_max, part.unwritten_col_max);
    }
    c.bad += part.bad, c.nan += part.nan, c.inf += part.inf, c.unwritten += part.unwritten;
    c.not_compared += part.not_compared;
    c.bad_on_border += part.bad_on_border;
    c.count -= part.not_compared;
    diff2 += part.diff2, ref2 += part.ref2, cross += part.cross, got2 += part.got2;
    c.max_abs = std::max(c.max_abs, part.max_abs);
    c.max_rel = std::max(c.max_rel, part.max_rel);
    for (const Mismatch& mismatch : part.first)
      if (c.first.size() < kMaxMismatches) c.first.push_back(mismatch);
    for (int r = 0; r < Comparison::kPeriod * Comparison::kPeriod; ++r) {
      c.count_by_residue[r] += part.count_by_residue[r];
      c.bad_by_residue[r] += part.bad_by_residue[r];
    }
    if (part.bad > 0) {
      for (size_t t = 0; t < c.bad_per_tile.size(); ++t) c.bad_per_tile[t] += part.bad_per_tile[t];
      for (size_t r = 0; r < c.bad_per_row.size(); ++r) c.bad_per_row[r] += part.bad_per_row[r];
      for (size_t n = 0; n < c.bad_per_col.size(); ++n) c.bad_per_col[n] += part.bad_per_col[n];
    }
  }

  set_norms(c, diff2, ref2, cross);
  // The residual in a second pass: from the sums alone it would cancel catastrophically exactly
  // when it matters, for an output that is almost a multiple of the reference.
  if (got2 > 0.0 && ref2 > 0.0) {
    parallel_for(chunk_count, 1, [&](int64_t chunk_first, int64_t chunk_last) {
      for (int64_t chunk = chunk_first; chunk < chunk_last; ++chunk) {
        Part& part = parts[size_t(chunk)];
        for (int64_t i = chunk_begin(chunk); i < chunk_begin(chunk + 1); ++i) {
          const int64_t offset = out.logical_offset(i);
          const double got = decode(dtype, storage, offset), w = want[size_t(i)];
          if (!measurable(offset, got, w)) continue;
          const double r = got - c.ratio * w;
          part.residual2 += r * r;
        }
      }
    });
    double residual2 = 0.0;
    for (const Part& part : parts) residual2 += part.residual2;
    c.residual = std::sqrt(residual2 / got2);
  }
  set_passed(c, tol);
  // Mapping hypotheses cost a pass over the bad lines each; not worth it for outputs so large
  // that one pass takes seconds, nor when the outputs were never written.
  if (!c.passed && c.bad > 0 && c.unwritten == 0 && c.count <= (int64_t(1) << 28)) {
    if (rank != 1) c.row_mapping = find_line_mapping(out, want, L, M, N, tol, true, c.bad_per_row, rank);
    if (c.row_mapping.empty()) c.col_mapping = find_line_mapping(out, want, L, M, N, tol, false, c.bad_per_col, rank);
  }
  return c;
}

// How the errors of an output (got - want, over the compared outputs) vary: along m within a
// column, along n within a row, and the range of the values the output holds. Under analytic
// inputs a defect on the B side of a GEMM (a B tile loaded from the wrong place) gives errors
// that change from column to column and not from row to row, one on the A side the reverse, and
// a K loop that misses or repeats a K tile the same error everywhere (every output tile runs the
// same K loop): which of the three a failing probe shows tells them apart.
struct ErrorAxes {
  bool along_m = false, along_n = false;
  double low = 0.0, high = 0.0;  // the smallest and largest value written (finite, not poison)
  bool any_value = false;
  bool uniform() const { return !along_m && !along_n; }
};

inline ErrorAxes error_axes(const Tensor& out, const std::vector<double>& want, int64_t L, int64_t M, int64_t N) {
  ErrorAxes axes;
  const auto error_at = [&](int64_t index, double* error) {
    const double w = want[size_t(index)];
    if (is_not_compared(w)) return false;
    const int64_t offset = out.logical_offset(index);
    const double got = decode(out.dtype, out.host.data(), offset);
    // Poison and non-finite outputs are errors of one kind each, comparable by their bits.
    *error = is_poison(out.dtype, out.host.data(), offset) ? HUGE_VAL : std::isfinite(got) ? got - w : got;
    if (std::isfinite(got) && !is_poison(out.dtype, out.host.data(), offset)) {
      axes.low = axes.any_value ? std::min(axes.low, got) : got;
      axes.high = axes.any_value ? std::max(axes.high, got) : got;
      axes.any_value = true;
    }
    return true;
  };
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  std::vector<double> first_row(static_cast<size_t>(N), 0.0), first_col(static_cast<size_t>(M), 0.0);
  std::vector<bool> row_known(static_cast<size_t>(N), false), col_known(static_cast<size_t>(M), false);
  for (int64_t l = 0; l < L; ++l) {
    std::fill(row_known.begin(), row_known.end(), false);
    std::fill(col_known.begin(), col_known.end(), false);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double e = 0.0;
        if (!error_at((l * M + m) * N + n, &e)) continue;
        if (!row_known[size_t(n)]) first_row[size_t(n)] = e, row_known[size_t(n)] = true;
        else if (!same(first_row[size_t(n)], e)) axes.along_m = true;
        if (!col_known[size_t(m)]) first_col[size_t(m)] = e, col_known[size_t(m)] = true;
        else if (!same(first_col[size_t(m)], e)) axes.along_n = true;
      }
  }
  return axes;
}

// Outputs that differ bit for bit between two runs of the kernel on the same inputs (the first
// run's storage and a later one's), and of those the stale ones: wrong in both runs. A race on
// the result shows as an output right in one run and wrong in another; an output wrong in every
// run, each time differently, is computed from memory nobody wrote (shared memory a load left
// unfilled, or read before it was written), and its errors keep the structure that names the
// defect.
struct RunDifferences {
  int64_t total = 0;  // outputs whose bits differ
  int64_t stale = 0;  // of those, wrong in both runs
  int64_t wrong = 0;  // outputs wrong in at least one of the two runs (differing or not)
  int64_t first_wrong = 0, later_wrong = 0;  // outputs wrong in the first run, in the later one
};

inline RunDifferences run_differences(const Tensor& out, const std::vector<unsigned char>& first,
                                      const std::vector<unsigned char>& later, const std::vector<double>& want,
                                      const Tolerance& tol) {
  const size_t bytes = dtype_bytes(out.dtype);
  const int64_t count = out.numel();
  // Fixed chunks, counted in parallel: integer counts, so the order of adding them is free.
  const int64_t chunk_count = std::max<int64_t>(1, std::min<int64_t>(64, count / 65536));
  std::vector<RunDifferences> parts(static_cast<size_t>(chunk_count));
  parallel_for(chunk_count, 1, [&](int64_t chunk_first, int64_t chunk_last) {
    for (int64_t chunk = chunk_first; chunk < chunk_last; ++chunk) {
      RunDifferences& d = parts[size_t(chunk)];
      for (int64_t i = count * chunk / chunk_count; i < count * (chunk + 1) / chunk_count; ++i) {
        const int64_t offset = out.logical_offset(i);
        const double w = want[size_t(i)];
        if (is_not_compared(w)) continue;  // whatever a padding row holds, it is not judged
        const auto right = [&](const std::vector<unsigned char>& storage) {
          const double got = decode(out.dtype, storage.data(), offset);
          return std::isfinite(got) && std::isfinite(w) && element_matches(out.dtype, got, w, tol);
        };
        const bool first_right = right(first);
        d.first_wrong += !first_right;
        if (std::memcmp(later.data() + size_t(offset) * bytes, first.data() + size_t(offset) * bytes, bytes) == 0) {
          if (!first_right) ++d.wrong, ++d.later_wrong;
          continue;
        }
        ++d.total;
        const bool later_right = right(later);
        d.later_wrong += !later_right;
        if (!first_right || !later_right) ++d.wrong;
        if (!first_right && !later_right) ++d.stale;
      }
    }
  });
  RunDifferences d;
  for (const RunDifferences& part : parts) {
    d.total += part.total, d.stale += part.stale, d.wrong += part.wrong;
    d.first_wrong += part.first_wrong, d.later_wrong += part.later_wrong;
  }
  return d;
}

// Whether run-to-run differences are a race on the result. A race moves the errors: outputs
// right in one run are wrong in another ("flipped"). Stale data (shared memory a load left
// unfilled) leaves the same outputs wrong in every run, only with other values, except where a
// stale value happens to be the right one, which structured inputs make common (a probe's A
// repeats every 7 rows). So a race takes flipped outputs in a third of all the wrong ones at
// least: on the H200, a missing __syncthreads flips 70% of its wrong outputs, a TMA box that
// leaves rows unfilled flips under 1% (docs/gpu-validation.md).
inline bool is_race(const RunDifferences& d) { return d.total > d.stale && 3 * (d.total - d.stale) > d.wrong; }

// The evidence that differences which are not a race add to a pattern; `where` names the probe
// ("probe ones: ") or is empty for a run.
inline std::string stale_note(const RunDifferences& d, const std::string& where) {
  return strprintf("the wrong outputs also change between runs (%s%lld of %lld outputs that differ are right in no "
                   "run): they are computed from memory nobody wrote, such as shared memory a load left unfilled",
                   where.c_str(), (long long)d.stale, (long long)d.total);
}

// The run with the most differences against the first.
inline void keep_most(RunDifferences& most, const RunDifferences& run) {
  if (run.total > most.total) most = run;
}

}  // namespace repro
