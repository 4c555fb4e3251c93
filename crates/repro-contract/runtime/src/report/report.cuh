// ---------------------------------------------------------------------------------------------
// repro harness runtime: the report (docs/cli.md, "Report": text lines, JSON report, error pattern)
// ---------------------------------------------------------------------------------------------
#pragma once

#include "compare.cuh"

namespace repro {

// A minimal JSON writer into a string: commas and nesting are tracked, strings escaped,
// non-finite numbers written as null (JSON has no NaN).
class JsonWriter {
 public:
  // Every call returns the writer, so members chain: w.key("grid").begin_array().value(3)...
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  JsonWriter& key(const std::string& name) {
    separate();
    write_string(name);
    text_ += ':';
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(const std::string& s) {
    separate();
    write_string(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string(s)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& value(double v) { return raw(json_number(v)); }
  template <typename Integer, typename std::enable_if<std::is_integral<Integer>::value &&
                                                          !std::is_same<Integer, bool>::value,
                                                      int>::type = 0>
  JsonWriter& value(Integer v) {
    return raw(std::to_string(v));
  }
  JsonWriter& null() { return raw("null"); }
  // A value that is already JSON text.
  JsonWriter& raw(const std::string& json) {
    separate();
    text_ += json;
    return *this;
  }
  // key(name) then value(v).
  template <typename T>
  JsonWriter& field(const std::string& name, const T& v) {
    return key(name).value(v);
  }

  const std::string& str() const { return text_; }

  // The shortest of %.15g / %.17g that reads back as the same double; null if not finite.
  static std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";
    std::string text = strprintf("%.15g", v);
    if (std::strtod(text.c_str(), nullptr) != v) text = strprintf("%.17g", v);
    return text;
  }

 private:
  JsonWriter& open(char bracket) {
    separate();
    text_ += bracket;
    first_in_scope_.push_back(true);
    return *this;
  }
  JsonWriter& close(char bracket) {
    text_ += bracket;
    first_in_scope_.pop_back();
    return *this;
  }
  // The comma before a member or element, except the first of its scope and after a key.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_in_scope_.empty()) {
      if (!first_in_scope_.back()) text_ += ',';
      first_in_scope_.back() = false;
    }
  }
  void write_string(const std::string& s) {
    text_ += '"';
    for (const char ch : s) {
      const unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': text_ += "\\\""; break;
        case '\\': text_ += "\\\\"; break;
        case '\n': text_ += "\\n"; break;
        case '\r': text_ += "\\r"; break;
        case '\t': text_ += "\\t"; break;
        case '\b': text_ += "\\b"; break;
        case '\f': text_ += "\\f"; break;
        default:
          if (c < 0x20) text_ += strprintf("\\u%04x", c);
          else text_ += ch;  // UTF-8 passes through
      }
    }
    text_ += '"';
  }

  std::string text_;
  std::vector<bool> first_in_scope_;
  bool after_key_ = false;
};

// ------------------------------------------------------------------ the JSON report (--json)
//
// main() adds already-serialized members as the run goes; fatal() and finish() (device.cuh) add
// the disposition and write the file, so even a hang or fault leaves a report behind.
inline std::string g_json_path;  // empty: no JSON report requested
inline std::vector<std::pair<std::string, std::string>> g_report_fields;

inline void set_json_path(const std::string& path) { g_json_path = path; }

// In a queue of checks (queue.cuh): the check's index, written first in its report, and the
// report appended to the --json file as one line; -1 for a harness that runs one check.
inline long long g_queue_check = -1;

// Sets member `key` of `fields` to `json` (JSON text), replacing an earlier value.
inline void set_report_field(std::vector<std::pair<std::string, std::string>>* fields, const std::string& key,
                             const std::string& json) {
  for (auto& field : *fields) {
    if (field.first == key) {
      field.second = json;
      return;
    }
  }
  fields->emplace_back(key, json);
}

// Sets member `key` of the running check's report.
inline void report_set(const std::string& key, const std::string& json) {
  set_report_field(&g_report_fields, key, json);
}

inline std::string json_string(const std::string& s) {
  JsonWriter w;
  w.value(s);
  return w.str();
}

// A check's report as it ends: its members, disposition, class and message, and the line that
// says its disposition. A queued check whose device reference is still being cross-checked on
// the host keeps it back (deferred_check.cuh) until the cross-check is judged.
struct FinishedReport {
  long long check = -1;  // g_queue_check when it ended
  std::vector<std::pair<std::string, std::string>> fields;
  int exit_code = 0;
  std::string disposition, cls, message;
  std::string disposition_line;  // "Disposition: Passed"
};

// While non-null, a check's end (conclude) fills it instead of printing its disposition and
// writing its report.
inline FinishedReport* g_report_held = nullptr;

// While non-null, a check that ends after a held one (its output held too) adds its report here
// instead of writing it: the reports file keeps the checks' order.
inline std::vector<FinishedReport>* g_reports_waiting = nullptr;

// The report's JSON text, one line.
inline std::string format_json_report(const FinishedReport& report) {
  JsonWriter w;
  w.begin_object();
  if (report.check >= 0) w.field("check", int64_t(report.check));
  for (const auto& field : report.fields) {
    w.key(field.first);
    w.raw(field.second);
  }
  w.field("disposition", report.disposition);
  w.field("class", report.cls);
  w.field("exit_code", report.exit_code);
  w.field("message", report.message);
  w.end_object();
  return w.str();
}

// Writes the report to the --json file (appended, one line, in a queue); on failure to write,
// says so on stderr and returns false.
inline bool emit_json_report(const FinishedReport& report) {
  if (g_json_path.empty()) return true;
  std::string error;
  const std::string text = format_json_report(report);
  const bool written = report.check >= 0 ? append_line(g_json_path, text, &error)
                                         : write_text_file(g_json_path, text + "\n", &error);
  if (!written) {
    std::fprintf(stderr, "warning: no JSON report: %s\n", error.c_str());
    return false;
  }
  return true;
}

// The report of the check that ends now, with its disposition ("passed" / "failed"), class and
// message.
inline FinishedReport finished_report(int exit_code, const std::string& disposition, const std::string& cls,
                                      const std::string& message) {
  FinishedReport report;
  report.check = g_queue_check;
  report.fields = g_report_fields;
  report.exit_code = exit_code;
  report.disposition = disposition;
  report.cls = cls;
  report.message = message;
  return report;
}

// Writes the report with its disposition ("passed" / "failed"), class and message; on failure
// to write, says so on stderr and returns false.
inline bool write_json_report(int exit_code, const std::string& disposition, const std::string& cls,
                              const std::string& message) {
  return emit_json_report(finished_report(exit_code, disposition, cls, message));
}

// ------------------------------------------------------------------ text report lines

inline std::string format_fixed4(double v) { return std::isfinite(v) ? strprintf("%.4f", v) : format_value(v); }

// "D       relL2 0.000e+00  max_abs 0  ratio 1.0000  bad 0/196608  nan 0  unwritten 0"
// (an "inf N" field follows only when an output is infinite where the reference is finite).
inline std::string format_comparison_line(const char* tensor_name, const Comparison& c) {
  std::string line = strprintf("%-7s relL2 %.3e  max_abs %s  ratio %s  bad %lld/%lld  nan %lld  unwritten %lld",
                               tensor_name, c.rel_l2, format_value(c.max_abs).c_str(), format_fixed4(c.ratio).c_str(),
                               (long long)c.bad, (long long)c.count, (long long)c.nan, (long long)c.unwritten);
  if (c.inf > 0) line += strprintf("  inf %lld", (long long)c.inf);
  if (c.not_compared > 0) line += strprintf("  (%lld not compared)", (long long)c.not_compared);
  return line;
}

inline void print_comparison_line(const char* tensor_name, const Comparison& c) {
  std::printf("%s\n", format_comparison_line(tensor_name, c).c_str());
}

// What one unit of localization is called: a GEMM's output tile, a custom op's launch block.
inline const char* unit_noun(const Comparison& c) { return c.rank > 0 ? "block" : "tile"; }

// A mismatch's index in its output's own coordinates: "130, 7" (a custom op's rank-1 output:
// "517"; rank 4: "l0, l1, m, n").
inline std::string index_text(const Comparison& c, const Mismatch& x, bool batched) {
  switch (c.rank) {
    case 1: return std::to_string(x.n);
    case 2: return strprintf("%lld, %lld", (long long)x.m, (long long)x.n);
    case 3: return strprintf("%lld, %lld, %lld", (long long)x.l, (long long)x.m, (long long)x.n);
    case 4:
      return strprintf("%lld, %lld, %lld, %lld", (long long)(x.l / c.inner_batch), (long long)(x.l % c.inner_batch),
                       (long long)x.m, (long long)x.n);
    default:
      return (batched ? std::to_string(x.l) + ", " : std::string()) +
             strprintf("%lld, %lld", (long long)x.m, (long long)x.n);
  }
}

// One line per recorded mismatch, coordinates decomposed by output tile:
//   "  D[130, 7] tile (1,0) at (2,7): got 2000 want 1000"
// (a rank-1 custom output: "  D[517] block 16 at 5: ..."), then how many more there are.
inline std::string format_mismatches(const char* tensor_name, const Comparison& c, bool batched) {
  std::string text;
  for (const Mismatch& x : c.first) {
    const std::string where =
        c.rank == 1 ? strprintf("block %lld at %lld", (long long)(x.n / c.tile_n), (long long)(x.n % c.tile_n))
                    : strprintf("%s (%lld,%lld) at (%lld,%lld)", unit_noun(c), (long long)(x.m / c.tile_m),
                                (long long)(x.n / c.tile_n), (long long)(x.m % c.tile_m), (long long)(x.n % c.tile_n));
    text += strprintf("  %s[%s] %s: got %s want %s\n", tensor_name, index_text(c, x, batched).c_str(), where.c_str(),
                      x.poison ? "poison (never written)" : format_value(x.got).c_str(), format_value(x.want).c_str());
  }
  if (c.bad > int64_t(c.first.size()))
    text += strprintf("  ... and %lld more\n", (long long)(c.bad - int64_t(c.first.size())));
  return text;
}

inline void print_mismatches(const char* tensor_name, const Comparison& c, bool batched) {
  std::printf("%s", format_mismatches(tensor_name, c, batched).c_str());
}

// Outputs in tile (tm, tn), over all batches: edge tiles are smaller.
inline int64_t tile_elements(const Comparison& c, int64_t tm, int64_t tn) {
  const int64_t h = std::min(c.tile_m, c.M - tm * c.tile_m), w = std::min(c.tile_n, c.N - tn * c.tile_n);
  return std::max<int64_t>(h, 0) * std::max<int64_t>(w, 0) * c.L;
}

// The heatmap's characters: '.' no bad output, '1'-'9' up to 10%-90% bad, '#' more than 90%.
inline char heat_char(double share) {
  if (share <= 0) return '.';
  if (share > 0.9) return '#';
  return char('0' + std::max(1, std::min(9, int(std::ceil(share * 10)))));  // (0.4, 0.5] -> 5
}

// Where the bad outputs are, one character per output tile (m down, n across), at most 64
// columns by 32 rows (larger grids are pooled: a character shows its worst tile). People see a
// stripe or an edge here long before they read one in a table.
inline std::string format_heatmap(const Comparison& c) {
  if (c.tiles_m * c.tiles_n <= 1 || c.bad == 0) return "";
  const int64_t cols = std::min<int64_t>(c.tiles_n, 64), rows = std::min<int64_t>(c.tiles_m, 32);
  const char* unit = unit_noun(c);
  const std::string extent = c.rank == 1 ? strprintf("%lld-output", (long long)c.tile_n)
                                         : strprintf("%lldx%lld output", (long long)c.tile_m, (long long)c.tile_n);
  std::string text = strprintf("%-7s bad share per %s %s, %lld x %lld %ss%s ('.' none, 1-9 tenths, '#' over 90%%):\n",
                               c.rank > 0 ? "blocks" : "tiles", extent.c_str(), unit, (long long)c.tiles_m,
                               (long long)c.tiles_n, unit, cols < c.tiles_n || rows < c.tiles_m ? ", pooled" : "");
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tm0 = r * c.tiles_m / rows, tm1 = (r + 1) * c.tiles_m / rows;
    std::string line;
    for (int64_t q = 0; q < cols; ++q) {
      const int64_t tn0 = q * c.tiles_n / cols, tn1 = (q + 1) * c.tiles_n / cols;
      double worst = 0;
      for (int64_t tm = tm0; tm < tm1; ++tm)
        for (int64_t tn = tn0; tn < tn1; ++tn) {
          const int64_t elements = tile_elements(c, tm, tn);
          if (elements > 0)
            worst = std::max(worst, double(c.bad_per_tile[size_t(tm * c.tiles_n + tn)]) / double(elements));
        }
      line += heat_char(worst);
    }
    text += strprintf("  %s %6lld  %s\n", c.rank == 1 ? "i" : "m", (long long)(tm0 * c.tile_m), line.c_str());
  }
  return text;
}

// The comparison of output `tensor_name` as a JSON object, written as the next value of `w`.
inline void write_comparison_json(JsonWriter& w, const std::string& tensor_name, const Comparison& c) {
  w.begin_object();
  w.field("tensor", tensor_name);
  w.field("passed", c.passed);
  w.field("count", c.count);
  w.field("bad", c.bad);
  w.field("nan", c.nan);
  w.field("inf", c.inf);
  w.field("unwritten", c.unwritten);
  w.field("not_compared", c.not_compared);
  w.field("rel_l2", c.rel_l2);
  w.field("max_abs", c.max_abs);
  w.field("max_rel", c.max_rel);
  w.field("ratio", c.ratio);
  w.field("residual", c.residual);
  w.field("ref_rms", c.ref_rms);
  w.key("shape").begin_array().value(c.L).value(c.M).value(c.N).end_array();
  w.key("tile").begin_array().value(c.tile_m).value(c.tile_n).end_array();
  w.key("bad_per_tile").begin_array();
  for (int64_t count : c.bad_per_tile) w.value(count);
  w.end_array();
  w.key("first_mismatches").begin_array();
  for (const Mismatch& x : c.first) {
    w.begin_object();
    if (c.rank == 0) {
      w.key("index").begin_array().value(x.l).value(x.m).value(x.n).end_array();
    } else {
      // A custom op's output: its own coordinates, one per dimension.
      const int64_t all[4] = {x.l / c.inner_batch, x.l % c.inner_batch, x.m, x.n};
      w.key("index").begin_array();
      for (int d = 4 - c.rank; d < 4; ++d) w.value(c.rank == 3 && d == 1 ? x.l : all[d]);
      w.end_array();
    }
    if (x.poison) w.field("got", "poison");
    else w.field("got", x.got);
    w.field("want", x.want);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// ------------------------------------------- error pattern (docs/cli.md, "Verdict classes")

// A verdict class and the evidence for it, in one sentence.
struct Pattern {
  std::string cls;
  std::string evidence;
};

// scale: at least this fraction of outputs is bad. A uniform factor moves nearly every output;
// the few that survive are near-zero outputs that atol covers.
constexpr double kScaleMinBadFraction = 0.5;
// scale: one factor explains every output. With exact (analytic) inputs a true factor leaves no
// residual at all; with random inputs it leaves the output dtype's rounding, which the spec's
// rel_l2 tolerance already bounds. A residual above that means the ratio varies from output to
// output (a K range or a tile range missing, operands from the wrong place), which is no scale:
// the probes that locate errors decide then.
constexpr double kScaleExactMaxResidual = 1e-6;  // f32 rounding of an exact multiple
// precision: at most this fraction of outputs is bad, and relL2 is within this factor of its
// tolerance. Errors of that size and spread are how a lower-precision accumulation looks; a
// logic error (a dropped tile, a wrong index) moves outputs by much more.
constexpr double kPrecisionMaxBadFraction = 0.1;
constexpr double kPrecisionMaxToleranceFactor = 10.0;

// Whole lines: a row (column) counts as wrong when at least this share of it is bad; a pattern
// of whole lines needs every other line clean.
constexpr double kWholeLineShare = 0.9;
// ... and a line with at most this share bad still counts as a right one (stray errors
// elsewhere do not hide a dominant line pattern; the evidence counts them).
constexpr double kStrayLineShare = 0.02;
// layout: a residue class (m mod 8, n mod 8) is right at or below this bad share, wrong at or
// above the next; every class must be one or the other.
constexpr double kResidueRightMax = 0.05;
constexpr double kResidueWrongMin = 0.75;

// "row 7" or "rows 128-129"
inline std::string span_text(const char* what, int64_t lo, int64_t hi) {
  if (lo == hi) return std::string(what) + " " + std::to_string(lo);
  return std::string(what) + "s " + std::to_string(lo) + "-" + std::to_string(hi);
}

// "64-127, 192-255, 300 (and 4 more)": sorted integers as ranges.
inline std::string ranges_text(const std::vector<int64_t>& sorted, size_t max_ranges = 6) {
  std::string out;
  size_t ranges = 0, i = 0;
  while (i < sorted.size()) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (ranges == max_ranges) {
      size_t left = 0;
      for (size_t k = i; k < sorted.size(); ++k) left += k == i || sorted[k] != sorted[k - 1] + 1;
      return out + strprintf(" (and %zu more)", left);
    }
    out += (ranges ? ", " : "") + (i == j ? std::to_string(sorted[i])
                                          : std::to_string(sorted[i]) + "-" + std::to_string(sorted[j]));
    ++ranges;
    i = j + 1;
  }
  return out;
}

// The lines (rows or columns) whose outputs are wrong as a whole, when every other line is
// clean; empty when the errors are not organized that way.
inline std::vector<int64_t> whole_bad_lines(const std::vector<int64_t>& bad_per_line, int64_t per_line) {
  std::vector<int64_t> lines;
  for (size_t i = 0; i < bad_per_line.size(); ++i) {
    const double share = double(bad_per_line[i]) / double(per_line);
    if (share <= kStrayLineShare) continue;
    if (share < kWholeLineShare) return {};
    lines.push_back(int64_t(i));
  }
  if (lines.size() == bad_per_line.size()) return {};  // everything wrong: not a line pattern
  return lines;
}

// Bad outputs outside `lines`: " (and 3 stray bad outputs elsewhere)", or "".
inline std::string stray_text(const std::vector<int64_t>& bad_per_line, const std::vector<int64_t>& lines,
                              int64_t total_bad) {
  int64_t in_lines = 0;
  for (int64_t line : lines) in_lines += bad_per_line[size_t(line)];
  const int64_t stray = total_bad - in_lines;
  return stray > 0 ? strprintf(" (and %lld stray bad outputs elsewhere)", (long long)stray) : std::string();
}

// Where whole wrong lines are, in tile terms when they repeat in every tile:
// "rows 64-127 of every 128-row tile (452 rows)", else "rows 3-5, 17".
inline std::string lines_text(const std::vector<int64_t>& lines, int64_t extent, int64_t tile, const char* noun) {
  if (tile > 0 && tile < extent && extent >= 2 * tile) {
    std::vector<int64_t> offsets;
    for (int64_t line : lines)
      if (line < tile) offsets.push_back(line);
    bool periodic = !offsets.empty();
    for (int64_t start = 0; periodic && start < extent; start += tile) {
      // Every tile (the partial last one up to its end) has exactly these offsets wrong.
      for (int64_t o = 0; o < tile && start + o < extent; ++o) {
        const bool wrong = std::binary_search(lines.begin(), lines.end(), start + o);
        const bool in_set = std::binary_search(offsets.begin(), offsets.end(), o);
        if (wrong != in_set) periodic = false;
      }
    }
    if (periodic)
      return strprintf("%s %s of every %lld-%s tile (%zu %s)", noun, ranges_text(offsets).c_str(), (long long)tile,
                       std::string(noun).substr(0, std::string(noun).size() - 1).c_str(), lines.size(), noun);
  }
  return std::string(noun) + " " + ranges_text(lines);
}

// layout: right and wrong outputs alternate with a period of 2, 4 or 8 in both m and n, the
// mark of an element permutation inside rows or columns. Empty when that is not the pattern.
inline std::string residue_pattern(const Comparison& c) {
  constexpr int P = Comparison::kPeriod;
  if (c.rank == 1) {
    // A 1-D output: right and wrong by i mod 8 (class (0, i mod 8)), a stride or period error.
    if (c.N < 2 * P) return "";
    std::vector<int64_t> right;
    for (int r = 0; r < P; ++r) {
      const double share = double(c.bad_by_residue[r]) / double(std::max<int64_t>(1, c.count_by_residue[r]));
      if (share > kResidueRightMax && share < kResidueWrongMin) return "";
      if (share <= kResidueRightMax) right.push_back(r);
    }
    if (right.empty() || right.size() == size_t(P)) return "";
    return strprintf("right only where i mod 8 is %s, wrong elsewhere (%lld of %lld outputs bad): a stride or period "
                     "error, as from a vectorized access of the wrong width or an index scaled by the wrong stride",
                     ranges_text(right).c_str(), (long long)c.bad, (long long)c.count);
  }
  if (c.M < P || c.N < P) return "";
  bool right[P * P];
  int right_count = 0;
  for (int r = 0; r < P * P; ++r) {
    if (c.count_by_residue[r] == 0) return "";
    const double share = double(c.bad_by_residue[r]) / double(c.count_by_residue[r]);
    if (share > kResidueRightMax && share < kResidueWrongMin) return "";
    right[r] = share <= kResidueRightMax;
    right_count += right[r];
  }
  if (right_count == 0 || right_count == P * P) return "";
  // It must depend on both m and n; a dependence on one alone is a line pattern.
  bool varies_in_m = false, varies_in_n = false;
  for (int a = 0; a < P; ++a)
    for (int b = 1; b < P; ++b) {
      varies_in_n |= right[a * P + b] != right[a * P];
      varies_in_m |= right[b * P + a] != right[a];
    }
  if (!varies_in_m || !varies_in_n) return "";
  bool diagonal = true;
  for (int a = 0; a < P; ++a)
    for (int b = 0; b < P; ++b) diagonal &= right[a * P + b] == (a == b);
  const std::string where =
      diagonal ? std::string("right only where m = n (mod 8)")
               : strprintf("right in %d of the 64 classes (m mod 8, n mod 8)", right_count);
  return strprintf("%s, wrong elsewhere (%lld of %lld outputs bad): an element permutation inside rows or columns, as "
                   "from a shared-memory layout or swizzle that does not match, or a transposed operand",
                   where.c_str(), (long long)c.bad, (long long)c.count);
}

// Names the pattern of a failed (or nondeterministic) comparison, most specific evidence first.
// repeat_differences: outputs that differed bitwise between repeated runs of the same inputs.
inline Pattern classify(const Comparison& c, int64_t repeat_differences, const Tolerance& tol) {
  const double bad_fraction = c.count ? double(c.bad) / double(c.count) : 0.0;
  int64_t bad_tiles = 0;
  for (int64_t count : c.bad_per_tile) bad_tiles += count > 0;
  const std::string spread = std::to_string(bad_tiles) + " of " + std::to_string(c.bad_per_tile.size()) + " " +
                             unit_noun(c) + "s";
  const bool gemm = c.rank == 0;

  if (c.unwritten > 0)
    return {"unwritten", strprintf("%lld of %lld outputs were never written (still poison): %s",
                                   (long long)c.unwritten, (long long)c.count,
                                   c.rank == 1 ? span_text("element", c.unwritten_col_min, c.unwritten_col_max).c_str()
                                               : (span_text("row", c.unwritten_row_min, c.unwritten_row_max) + ", " +
                                                  span_text("column", c.unwritten_col_min, c.unwritten_col_max))
                                                     .c_str())};
  if (c.nan > 0 || c.inf > 0)
    return {"nonfinite", strprintf("%lld NaN and %lld Inf outputs where the reference is finite, in %s",
                                   (long long)c.nan, (long long)c.inf, spread.c_str())};
  if (repeat_differences > 0)
    return {"nondeterministic", strprintf("%lld of %lld outputs differ bitwise between runs on the same inputs",
                                          (long long)repeat_differences, (long long)c.count)};
  if (c.passed) return {"ok", "every output matches the reference within tolerance"};

  const double departure = std::fabs(c.ratio - 1.0);
  // Every output written and 0 where the reference is not: a factor of 0 is no scale; nothing the
  // K loop accumulated reached the output.
  if (gemm && c.ratio == 0.0 && bad_fraction >= kScaleMinBadFraction && c.max_abs > 0 && c.unwritten == 0) {
    bool all_zero = true;
    for (const Mismatch& m : c.first) all_zero = all_zero && !m.poison && m.got == 0.0;
    if (all_zero)
      return {"k_coverage", strprintf("every output is 0 where the reference is not (%lld of %lld outputs bad): they "
                                      "were written, but nothing the K loop accumulated reached them (a K loop that "
                                      "ran no iteration, a dropped last K tile that was the only one, or an "
                                      "accumulator that was never added to)",
                                      (long long)c.bad, (long long)c.count)};
  }
  const double max_residual = tol.exact ? kScaleExactMaxResidual : std::max(tol.rel_l2, kScaleExactMaxResidual);
  const bool uniform_factor = std::isfinite(c.ratio) && c.ratio != 0.0 && bad_fraction >= kScaleMinBadFraction &&
                              departure > (tol.exact ? 0.0 : tol.rel_l2) && c.residual <= max_residual;
  if (uniform_factor)
    return {"scale", strprintf("every output is %.3fx the reference (least-squares ratio %.4f, residual %.1e)", c.ratio,
                               c.ratio, c.residual)};

  // A custom op's border (a stencil's edge): every bad output on the first or last row or column.
  if (!gemm && c.bad > 0 && c.bad_on_border == c.bad) {
    // The edges holding bad outputs, most first (a corner is on two edges, and counted on both).
    std::vector<std::pair<int64_t, std::string>> edges = {
        {c.bad_per_col[size_t(c.N - 1)], strprintf("the last column (%lld)", (long long)(c.N - 1))},
        {c.bad_per_row[size_t(c.M - 1)], strprintf("the last row (%lld)", (long long)(c.M - 1))},
        {c.bad_per_col[0], "the first column (0)"},
        {c.bad_per_row[0], "the first row (0)"}};
    std::stable_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string where;
    for (const auto& edge : edges)
      if (edge.first > 0) where += strprintf("%s%s: %lld", where.empty() ? "" : ", ", edge.second.c_str(), (long long)edge.first);
    return {"boundary", strprintf("all %lld bad outputs lie on the output's border (%s); every inner output is right",
                                  (long long)c.bad, where.c_str())};
  }
  // boundary: every bad output lies in a partial tile at the bottom or right edge.
  const bool ragged_m = c.M % c.tile_m != 0, ragged_n = c.N % c.tile_n != 0;
  // Only meaningful when there are full tiles to be right: with N below the tile width every
  // tile is an edge tile.
  const bool full_tiles_exist = c.M >= c.tile_m && c.N >= c.tile_n;
  if ((ragged_m || ragged_n) && c.bad > 0 && full_tiles_exist) {
    bool only_edges = true;
    for (int64_t tm = 0; tm < c.tiles_m; ++tm)
      for (int64_t tn = 0; tn < c.tiles_n; ++tn) {
        const bool edge = (ragged_m && tm == c.tiles_m - 1) || (ragged_n && tn == c.tiles_n - 1);
        if (!edge && c.bad_per_tile[size_t(tm * c.tiles_n + tn)] > 0) only_edges = false;
      }
    if (only_edges && c.rank == 1) {
      return {"boundary", strprintf("all %lld bad outputs lie in the last, partial block of the launch: elements "
                                    "%lld-%lld (N %% %lld = %lld); full blocks are right",
                                    (long long)c.bad, (long long)((c.tiles_n - 1) * c.tile_n), (long long)(c.N - 1),
                                    (long long)c.tile_n, (long long)(c.N % c.tile_n))};
    }
    if (only_edges) {
      std::string where;
      if (ragged_m)
        where += strprintf("the last %s row (rows %lld-%lld, M %% %lld = %lld)", unit_noun(c),
                           (long long)((c.tiles_m - 1) * c.tile_m), (long long)(c.M - 1), (long long)c.tile_m,
                           (long long)(c.M % c.tile_m));
      if (ragged_m && ragged_n) where += " or ";
      if (ragged_n)
        where += strprintf("the last %s column (columns %lld-%lld, N %% %lld = %lld)", unit_noun(c),
                           (long long)((c.tiles_n - 1) * c.tile_n), (long long)(c.N - 1), (long long)c.tile_n,
                           (long long)(c.N % c.tile_n));
      return {"boundary", strprintf("all %lld bad outputs lie in partial edge %ss: %s; full %ss are right",
                                    (long long)c.bad, unit_noun(c), where.c_str(), unit_noun(c))};
    }
  }
  // A 1-D output whose elements hold other elements' values (i <- i+1): an index that is off.
  if (c.rank == 1 && !c.col_mapping.empty()) return {"layout", c.col_mapping};

  // Rows or columns in the wrong place, then whole rows or columns wrong.
  if (!c.row_mapping.empty()) return {"row_mapping", c.row_mapping};
  if (!c.col_mapping.empty()) return {"col_mapping", c.col_mapping};
  const int64_t per_row = c.L * c.N, per_col = c.L * c.M;
  const std::vector<int64_t> rows = c.rank == 1 ? std::vector<int64_t>() : whole_bad_lines(c.bad_per_row, per_row);
  if (!rows.empty())
    return {"row_mapping", strprintf("whole rows are wrong and every other row is right: %s%s; %s",
                                     lines_text(rows, c.M, c.tile_m, "rows").c_str(),
                                     stray_text(c.bad_per_row, rows, c.bad).c_str(),
                                     gemm ? "a row of A (or of the output) is lost or misplaced"
                                          : "a row's index, stride or offset is wrong")};
  const std::vector<int64_t> cols = c.rank == 1 ? std::vector<int64_t>() : whole_bad_lines(c.bad_per_col, per_col);
  if (!cols.empty())
    return {"col_mapping", strprintf("whole columns are wrong and every other column is right: %s%s; %s",
                                     lines_text(cols, c.N, c.tile_n, "columns").c_str(),
                                     stray_text(c.bad_per_col, cols, c.bad).c_str(),
                                     gemm ? "a column of B (or of the output) is lost or misplaced"
                                          : "a column's index or offset is wrong")};
  const std::string layout = residue_pattern(c);
  if (!layout.empty()) return {"layout", layout};

  if (!tol.exact && bad_fraction <= kPrecisionMaxBadFraction &&
      c.rel_l2 <= kPrecisionMaxToleranceFactor * tol.rel_l2) {
    const std::string outliers =
        c.bad == 0 ? "no single output is outside rtol/atol: a small error spread everywhere"
                   : strprintf("%lld outputs (%.2f%%) outside rtol/atol, spread over %s", (long long)c.bad,
                               100.0 * bad_fraction, spread.c_str());
    return {"precision",
            strprintf("relL2 %.2e against a tolerance of %.1e; %s", c.rel_l2, tol.rel_l2, outliers.c_str())};
  }

  return {"scattered", strprintf("%lld of %lld outputs are bad (%.2f%%), in %s; relL2 %.2e, least-squares ratio %s",
                                 (long long)c.bad, (long long)c.count, 100.0 * bad_fraction, spread.c_str(), c.rel_l2,
                                 format_fixed4(c.ratio).c_str())};
}

// Where a run's wall time goes, phase by phase (the `time` line and the report's `timings`):
// what to speed up when time-to-verdict matters (docs/performance.md).
struct PhaseTimes {
  std::chrono::steady_clock::time_point begin = std::chrono::steady_clock::now(), last = begin;
  std::vector<std::pair<const char*, double>> phases;
  void end(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    phases.emplace_back(phase, std::chrono::duration<double>(now - last).count());
    last = now;
  }
  void report() const {
    std::string line;
    JsonWriter w;
    w.begin_object();
    for (const auto& phase : phases) {
      line += strprintf("%s %.3f s  ", phase.first, phase.second);
      w.field(phase.first, phase.second);
    }
    const double total = std::chrono::duration<double>(last - begin).count();
    w.field("total", total);
    w.end_object();
    std::printf("time    %stotal %.3f s (in this process)\n", line.c_str(), total);
    report_set("timings", w.str());
  }
};

}  // namespace repro
