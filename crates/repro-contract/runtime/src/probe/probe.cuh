// ---------------------------------------------------------------------------------------------
// repro harness runtime: the probe suite (--probe; docs/cli.md, `repro probe`)
//
// One process, one context, one build: the kernel is launched on a series of controlled inputs
// whose right answers are known in closed form, each compared exactly, and the pattern of which
// probes fail names the defect:
//
//   probe       A                        B                          D must be
//   ones        1                        1                          alpha*K
//   k-slice s   1                        1 on K slice s, else 0     alpha*|slice s|
//   row code j  2^(digit j of m, base 4) 1                          alpha*K*2^digit
//   col code j  1                        2^(digit j of n, base 4)   alpha*K*2^digit
//   identity    (m + 2k) mod 7 + 1       1 where k = n mod K        alpha*A[m, n mod K]
//   random      the spec's inputs        the spec's inputs          the fp64 reference
//
// Every value above is a small integer or a power of two times K, exact in every input and
// output dtype the ones test is exact in; C and bias are zero. Each probe runs twice and its
// runs are compared bitwise (a race shows as a difference before it shows as a wrong number);
// outputs that differ but are wrong in every run are stale reads, and leave the verdict to the
// structure of the errors (a TMA box that leaves rows unfilled is row_mapping, noisy or not).
// Powers of two make the codes decodable: an output of alpha*K*4 in row m says that row m got
// the A row of a row whose digit is 2, so "row m holds row m^1" can be read off two probes.
//
// K slices tell a K loop from an operand's addressing: a K loop that misses or repeats a K tile
// does so in every output tile, so a slice probe's outputs are all alike (0, or twice the
// slice); an operand tile loaded from the wrong coordinates gives values that change along one
// axis of the output (columns for B, rows for A). The verdict is `operand_layout` when no slice
// is right, some change along one axis only, and the identity (or that side's code probes)
// fails in whole columns or rows on the same side (operand_layout_evidence).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "probe_values.cuh"
#include "spec_info.cuh"

namespace repro {

struct ProbeOutcome {
  std::string name;    // "k-slice 3"
  std::string inputs;  // "A = 1, B = 1 on k 96-127"
  bool passed = false;
  int64_t differences = 0;  // outputs that differ bitwise between the probe's runs
  // Of those, the outputs no run got right. A race on the result shows as an output right in one
  // run and wrong in another; an output wrong in every run, each time differently, is a read of
  // data nobody wrote (shared memory a load never filled): its errors keep their structure, and
  // that structure, not the noise, names the defect.
  int64_t stale_differences = 0;
  int64_t wrong_in_runs = 0;  // outputs wrong in the first run or in the most different later one
  RunDifferences run_differences_seen() const { return RunDifferences{differences, stale_differences, wrong_in_runs}; }
  Comparison comparison;
  Pattern pattern;
  std::string note;  // what the failure says in the probe's own terms
  std::string output;  // op: custom: the output `comparison` is of (empty: the GEMM's one output)
  bool only_under_stress = false;  // its runs differed, and only the stressed ones (--stress)
  ErrorAxes axes;  // how its errors vary over the output (set when ones or a K slice failed)
  // Non-empty when its runs differ only in which of two stores reached an output last, each
  // store's value the same in every run (a grouped GEMM's tile that spills into another group's
  // rows, racing with that group's own store): what differs is an order of stores, not a value
  // computed from racing data, so it is not read as nondeterministic; this says why.
  std::string store_race;
};

// The state a probe needs: the spec, the launch, and the device scratch its patterns and runs
// use (from the buffer pool, given back by release()).
struct ProbeContext {
  SpecInfo* spec;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  double timeout;
  int repeat;  // launches per analytic probe
  Launch launch;
  std::vector<ProbeOutcome> outcomes;
  std::vector<bool> stressed;  // the last probe's launches: which ran under --stress
  // The spec's random inputs' fp64 reference, [L][M][N], when it was computed on the device
  // (null: the random probe judges against the host's).
  const double* random_want = nullptr;
  bool inputs_on_device = false;     // the spec's generated inputs were made on the device
  ProbeTables tables;                // the tables of the pattern being expanded
  double* want = nullptr;            // the right answers of the probe being judged
  std::vector<void*> earlier_runs;   // every run's output but the last, which stays in the output
  PhaseTimes* times = nullptr;       // the run's phases, ended with `probes` when they are judged

  // The device buffer for a probe's right answers, [L][M][N] doubles.
  double* answers() {
    if (want == nullptr) {
      const GemmOperands& g = spec->gemm;
      want = static_cast<double*>(device_buffer_pool().take(size_t(g.L * g.M * g.N) * sizeof(double)));
    }
    return want;
  }
  // The device scratch back to the pool, and the probes' phase into the report's timings.
  void release() {
    if (times != nullptr) {
      const ProbeClock& clock = ProbeClock::instance();
      JsonWriter w;
      w.begin_object();
      w.field("probes", double(clock.probes));
      w.field("operands", clock.operands * 1e3);
      w.field("answers", clock.answers * 1e3);
      w.field("launches", clock.launches * 1e3);
      w.field("judging", clock.judging * 1e3);
      w.end_object();
      report_set("probe_phases_ms", w.str());
      times->end("probes");
      times->report();
      times = nullptr;
    }
    ProbeClock::instance() = ProbeClock{};  // a queue's next probe run counts from zero
    tables.release();
    device_buffer_pool().give(want);
    want = nullptr;
    for (void* run : earlier_runs) device_buffer_pool().give(run);
    earlier_runs.clear();
  }
};

// Launches `ctx.repeat` times on poisoned outputs, the operands as the probe set them on the
// device; every run's output but the last is copied aside on the device (ctx.earlier_runs), the
// last stays in out.device.
inline void probe_launches(ProbeContext& ctx, Tensor& out) {
  const ProbeClock::Scope timed(ProbeClock::instance().launches);
  ++ProbeClock::instance().probes;
  std::vector<Tensor>& tensors = ctx.spec->tensors;
  const size_t bytes = std::max<size_t>(out.storage_bytes(), 1);
  while (ctx.earlier_runs.size() + 1 < size_t(ctx.repeat)) ctx.earlier_runs.push_back(device_buffer_pool().take(bytes));
  ctx.stressed.clear();
  stress_new_sequence();
  for (int run = 0; run < ctx.repeat; ++run) {
    poison_device_outputs(tensors);
    ctx.launch = launch_kernel(*ctx.spec, tensors, ctx.stream, ctx.start, ctx.stop);
    ctx.stressed.push_back(last_launch_stressed());
    wait_for_kernel(ctx.stop, ctx.timeout, ctx.launch.label, describe(ctx.launch));
    if (run + 1 < ctx.repeat)
      REPRO_CUDA_CHECK(cudaMemcpy(ctx.earlier_runs[size_t(run)], out.device, out.storage_bytes(), cudaMemcpyDeviceToDevice));
  }
}

// Every run's output storage, in run order, copied back; the first run's also into out.host.
inline std::vector<std::vector<unsigned char>> probe_runs_on_host(const ProbeContext& ctx, Tensor& out) {
  std::vector<std::vector<unsigned char>> runs(size_t(ctx.repeat), std::vector<unsigned char>(out.storage_bytes()));
  for (int run = 0; run < ctx.repeat; ++run)
    REPRO_CUDA_CHECK(cudaMemcpy(runs[size_t(run)].data(), run + 1 < ctx.repeat ? ctx.earlier_runs[size_t(run)] : out.device,
                                out.storage_bytes(), cudaMemcpyDeviceToHost));
  out.host = runs.front();
  return runs;
}

// Compares the probe's first run against `want` and its runs against each other, and names the
// pattern of its failure. The runs' differences count per output (the most in any later run
// against the first), split into stale ones (no run right) and the others.
inline void judge_probe(ProbeOutcome& o, const SpecInfo& spec, Tensor& out,
                        const std::vector<std::vector<unsigned char>>& runs, const std::vector<double>& want,
                        const Tolerance& tol, const std::vector<bool>* stressed = nullptr) {
  const GemmOperands& g = spec.gemm;
  RunDifferences most;
  StressSplit split;
  for (size_t r = 1; r < runs.size(); ++r) {
    const RunDifferences d = run_differences(out, runs[0], runs[r], want, tol);
    keep_most(most, d);
    if (stressed != nullptr && r < stressed->size()) split.add((*stressed)[r], d.total);
  }
  o.only_under_stress = split.stressed > 0 && split.unstressed == 0;
  o.differences = most.total;
  o.stale_differences = most.stale;
  o.wrong_in_runs = most.wrong;
  o.comparison = compare_output(out, want, g.L, g.M, g.N, tol, spec.tile_m, spec.tile_n);
  o.passed = o.comparison.passed && o.differences == 0;
  // Stale reads leave the pattern to the wrong outputs; a race is the pattern (is_race).
  if (!o.passed) {
    o.pattern = classify(o.comparison, is_race(most) ? o.differences : 0, tol);
    // Read by the operand_layout rule, which looks at ones and the K slices only: a pass over
    // the outputs spared for the others.
    if (o.name == "ones" || o.name.rfind("k-slice", 0) == 0) o.axes = error_axes(out, want, g.L, g.M, g.N);
  }
}

// What judging a probe left on the host: nothing when it passed on the device and nobody asked;
// the runs (one copy when they agree bit for bit) and, when the host judged it, the answers.
struct ProbeJudgement {
  std::vector<std::vector<unsigned char>> runs;
  std::vector<double> want;  // empty when the device judged it
};

// Judges the probe just launched (probe_launches) against right answers on the device, [L][M]
// [N]: on the device while it passes and its runs agree bit for bit, which is the common case
// and crosses PCIe with sums only; otherwise on the host, the runs and the answers copied back,
// with every reading the host's analysis makes. `keep` asks for the output on the host anyway
// (the code probes' decoders read it; out.host holds it then).
inline ProbeJudgement judge_on_device(ProbeOutcome& o, ProbeContext& ctx, Tensor& out, const double* want,
                                      const Tolerance& tol, bool keep) {
  const ProbeClock::Scope timed(ProbeClock::instance().judging);
  const GemmOperands& g = ctx.spec->gemm;
  ProbeJudgement judged;
  int64_t differences = 0;
  for (int run = 0; run + 1 < ctx.repeat; ++run)
    differences = std::max(differences, device_differences(out, ctx.earlier_runs[size_t(run)]));
  if (differences == 0) {
    const Comparison c = device_comparison(out, want, g.L, g.M, g.N, tol, ctx.spec->tile_m, ctx.spec->tile_n, 0.0);
    if (c.passed) {
      o.passed = true;
      o.comparison = c;
      if (keep) {
        REPRO_CUDA_CHECK(cudaMemcpy(out.host.data(), out.device, out.storage_bytes(), cudaMemcpyDeviceToHost));
        judged.runs.push_back(out.host);
      }
      return judged;
    }
  }
  judged.runs = probe_runs_on_host(ctx, out);
  judged.want.resize(size_t(g.L * g.M * g.N));
  REPRO_CUDA_CHECK(cudaMemcpy(judged.want.data(), want, judged.want.size() * sizeof(double), cudaMemcpyDeviceToHost));
  judge_probe(o, *ctx.spec, out, judged.runs, judged.want, tol, &ctx.stressed);
  return judged;
}

// One analytic probe: operands already set (fill_probe_operand), `want` its exact answers.
inline ProbeOutcome run_analytic_probe(ProbeContext& ctx, const std::string& name, const std::string& inputs,
                                       const ProbeValues& want, bool keep_output = false,
                                       ProbeJudgement* judged = nullptr) {
  const GemmOperands& g = ctx.spec->gemm;
  Tensor& out = ctx.spec->tensors[g.out];
  ProbeOutcome o;
  o.name = name;
  o.inputs = inputs;
  probe_expected(ctx.answers(), want, g.L, g.M, g.N, ctx.tables);
  probe_launches(ctx, out);
  ProbeJudgement j = judge_on_device(o, ctx, out, ctx.want, Tolerance{0, 0, 0, true}, keep_output);
  if (judged != nullptr) *judged = std::move(j);
  return o;
}

// "every bad output is 128 where 64 is right (counted twice)" for a K-slice probe.
inline std::string slice_note(const ProbeOutcome& o, double want) {
  const Comparison& c = o.comparison;
  if (c.unwritten > 0) return strprintf("%lld outputs never written", (long long)c.unwritten);
  // With a constant right answer, "every output has the same wrong value" is errors alike
  // over the whole output (judge_probe's error_axes; without them, a zero residual against a
  // multiple of the reference). A first wrong output of 0 says nothing about the others.
  const bool alike = o.axes.any_value ? o.axes.uniform() : c.residual == 0.0;
  const bool uniform = !c.first.empty() && c.bad == c.count && c.nan == 0 && c.inf == 0 && alike;
  if (!uniform) {
    const char* along = o.axes.along_n == o.axes.along_m ? ""
                        : o.axes.along_n                 ? ", changing from column to column only"
                                                         : ", changing from row to row only";
    const std::string held = !o.axes.any_value ? std::string()
                             : o.axes.low == o.axes.high
                                 ? ", holding " + format_value(o.axes.low)
                                 : ", holding " + format_value(o.axes.low) + "-" + format_value(o.axes.high);
    return strprintf("%lld of %lld outputs wrong%s where %s is right%s (%s)", (long long)c.bad, (long long)c.count,
                     held.c_str(), format_value(want).c_str(), along, o.pattern.cls.c_str());
  }
  const double got = c.first.front().got;
  if (got == 0) return strprintf("every output 0 where %s is right: the slice is missing", format_value(want).c_str());
  if (want != 0 && got == 2 * want)
    return strprintf("every output %s where %s is right: the slice is counted twice", format_value(got).c_str(),
                     format_value(want).c_str());
  return strprintf("every output %s where %s is right", format_value(got).c_str(), format_value(want).c_str());
}

// Decodes the row (or column) code probes: for each line with bad outputs, the digit (base 4)
// of the line whose code arrived there, or -1 for 0 (nothing arrived), -2 for a mixture.
inline int decode_digit(double got, double unit) {
  if (got == 0) return -1;
  for (int d = 0; d < 4; ++d)
    if (got == unit * double(1 << d)) return d;
  return -2;
}

// What the two code probes of one side say, e.g. "rows 2i and 2i+1 exchanged (130 of the 130
// misplaced rows)" or "rows 64-127 of every 128-row tile receive nothing". out0 and out1 are the
// outputs of the digit-0 and digit-1 probes ([M, N], first batch); the candidate mappings are the
// single-run classifier's (line_mappings in compare.cuh).
inline std::string decode_lines(const Tensor& out0, const Tensor& out1, int64_t N, int64_t extent, int64_t tile,
                                double unit, bool rows) {
  const char* noun = rows ? "rows" : "columns";
  // Per line: the decoded source residue mod 16 from the first column (row) of each probe.
  std::vector<int64_t> zero_lines, moved_lines;
  const std::vector<LineMapping>& mappings = line_mappings();
  std::vector<int64_t> explained(mappings.size(), 0);
  std::vector<std::string> examples;
  for (int64_t line = 0; line < extent; ++line) {
    const int64_t m = rows ? line : 0, n = rows ? 0 : line;
    const int64_t index = m * N + n;
    const double g0 = decode(out0.dtype, out0.host.data(), out0.logical_offset(index));
    const double g1 = decode(out1.dtype, out1.host.data(), out1.logical_offset(index));
    const int d0 = decode_digit(g0, unit), d1 = decode_digit(g1, unit);
    const int own = int(line % 16);
    if (d0 == int(line % 4) && d1 == int((line / 4) % 4)) continue;  // right
    if (d0 == -1 && d1 == -1) {
      zero_lines.push_back(line);
      continue;
    }
    moved_lines.push_back(line);
    if (d0 < 0 || d1 < 0) {
      if (examples.size() < 4) examples.push_back(strprintf("%s %lld holds a mixture", rows ? "row" : "column", (long long)line));
      continue;
    }
    const int source = d0 + 4 * d1;
    for (size_t c = 0; c < mappings.size(); ++c) {
      const int64_t candidate = mappings[c].map(line);
      if (candidate >= 0 && candidate < extent && int(candidate % 16) == source) ++explained[c];
    }
    if (examples.size() < 4)
      examples.push_back(strprintf("%s %lld holds the code of a %s = %d (mod 16), not %d", rows ? "row" : "column",
                                   (long long)line, rows ? "row" : "column", source, own));
  }
  std::string text;
  if (!zero_lines.empty())
    text += strprintf("%s receive%s nothing (the output is 0: no %s values arrive)",
                      lines_text(zero_lines, extent, tile, noun).c_str(), zero_lines.size() == 1 ? "s" : "",
                      rows ? "A row" : "B column");
  if (!moved_lines.empty()) {
    size_t best = 0;
    for (size_t c = 1; c < mappings.size(); ++c)
      if (explained[c] > explained[best]) best = c;
    if (!text.empty()) text += "; ";
    if (double(explained[best]) >= kMappingMinShare * double(moved_lines.size()))
      text += strprintf("%s %s (%lld of the %zu misplaced %s)", noun, mappings[best].rule, (long long)explained[best],
                        moved_lines.size(), noun);
    else {
      text += strprintf("%zu %s hold another %s's code: ", moved_lines.size(), noun, rows ? "row" : "column");
      for (size_t i = 0; i < examples.size(); ++i) text += (i ? "; " : "") + examples[i];
    }
  }
  return text;
}

// What the scale probes of a scaled GEMM decoded (probe_ops.cuh, run_scale_probes), per output
// tile of the spec's tile grid.
struct ScaleFinding {
  std::string text;  // the decode of the failed scale probes ("" when every scale probe passes)
  // Tiles whose outputs carry the code of another scale block that exists: the kernel read its
  // scales from inside the scale tensor, at the wrong place.
  int64_t misused_tiles = 0;
  // Per tile ([tiles_m][tiles_n]): no scale block's code arrived (the output is 0, or a value no
  // block's code gives): the scales came from outside the scale tensor, or were never read.
  std::vector<bool> foreign;
  int64_t tiles_m = 0, tiles_n = 0;
  bool any_foreign() const { return std::find(foreign.begin(), foreign.end(), true) != foreign.end(); }
};

inline Pattern structural_verdict(const std::vector<ProbeOutcome>& probes, const std::string& row_finding,
                                  const std::string& col_finding, const ScaleFinding& scale);

// The verdict from the probes that ran, most specific first (see the table at the top).
inline Pattern probe_verdict(const std::vector<ProbeOutcome>& probes, const std::string& row_finding,
                             const std::string& col_finding, const ScaleFinding& scale = ScaleFinding()) {
  for (const ProbeOutcome& o : probes)
    if (is_race(o.run_differences_seen()) && o.store_race.empty())
      return {"nondeterministic", strprintf("probe %s: %lld outputs differ bitwise between two runs on the same inputs "
                                            "(a race, or an uninitialized read)%s",
                                            o.name.c_str(), (long long)o.differences,
                                            o.only_under_stress ? ", only when the run was under stress" : "")};
  Pattern verdict = structural_verdict(probes, row_finding, col_finding, scale);
  // Outputs wrong in every run, differently each time: the pattern above names the defect, and
  // the noise says the wrong outputs are computed from data nobody wrote.
  for (const ProbeOutcome& o : probes)
    if (o.differences > 0 && o.store_race.empty()) {
      verdict.evidence += "; " + stale_note(o.run_differences_seen(), "probe " + o.name + ": ");
      break;
    }
  return verdict;
}

// "k-slice 1/17 (k 64-127)": a slice probe's name and its K range.
inline std::string slice_label(const ProbeOutcome& s) {
  const size_t at = s.inputs.rfind("k ");
  return at == std::string::npos ? s.name : s.name + " (" + s.inputs.substr(at) + ")";
}

// "0-256 where 64 is right": the values a failed probe of one right answer holds.
inline std::string held_values(const ProbeOutcome& o) {
  const std::string right = o.comparison.first.empty() ? "?" : format_value(o.comparison.first.front().want);
  const std::string held = o.axes.low == o.axes.high ? format_value(o.axes.low)
                                                      : format_value(o.axes.low) + "-" + format_value(o.axes.high);
  return held + " where " + right + " is right";
}

// operand_layout: every K slice probed fails, but not the way a K loop fails. A K loop that
// misses or repeats a K tile does so in every output tile, so each slice probe's outputs are all
// alike (0 everywhere, or twice the slice). Here some slices arrive with values that change
// along one axis of the output only: what an operand tile holds depends on where the tile is in
// the output, not on K, so the operand's tile loads take their data from the wrong coordinates
// (and the slices that never arrive were read as zeros, out of bounds). The axis names the
// operand: A = 1 in every slice probe, so errors that change from column to column come from B,
// from row to row from A. A second witness must agree: the identity probe, or that side's code
// probes, fail in whole columns (B) or whole rows (A), the block structure the loads leave.
// Empty when the evidence is not all there.
inline std::string operand_layout_evidence(const std::vector<ProbeOutcome>& probes,
                                           const std::vector<const ProbeOutcome*>& slices, const ProbeOutcome& ones) {
  if (slices.empty()) return "";
  std::vector<const ProbeOutcome*> foreign, missing;
  bool along_m = false, along_n = false;
  for (const ProbeOutcome* s : slices) {
    if (s->passed) return "";  // some K is covered right: a K coverage reading applies
    if (s->comparison.unwritten > 0 || s->comparison.nan > 0 || s->comparison.inf > 0) return "";
    if (s->axes.uniform()) {
      if (s->axes.high != 0.0 || s->axes.low != 0.0) return "";  // uniformly off: how a K loop errs
      missing.push_back(s);
      continue;
    }
    foreign.push_back(s);
    along_m |= s->axes.along_m;
    along_n |= s->axes.along_n;
  }
  if (foreign.empty() || along_m == along_n) return "";
  const bool b_side = along_n;
  // ones (A = B = 1) must not vary along the other axis either.
  if (!ones.passed && (b_side ? ones.axes.along_m : ones.axes.along_n)) return "";
  const char* lines = b_side ? "col_mapping" : "row_mapping";
  const ProbeOutcome* witness = nullptr;
  for (const ProbeOutcome& o : probes)
    if (!o.passed && o.pattern.cls == lines &&
        (o.name == "identity" || o.name.rfind(b_side ? "col code" : "row code", 0) == 0)) {
      witness = &o;
      break;
    }
  if (witness == nullptr) return "";
  const char* operand = b_side ? "B" : "A";
  // The line pattern's evidence without the classifier's generic reading of it, which this
  // verdict replaces ("; a column of B (or of the output) is lost or misplaced").
  std::string lines_evidence = witness->pattern.evidence;
  const size_t reading = lines_evidence.rfind(b_side ? "; a column of B" : "; a row of A");
  if (reading != std::string::npos) lines_evidence.erase(reading);
  const char* along = b_side ? "from column to column but not from row to row" : "from row to row but not from column to column";
  const auto labels = [](const std::vector<const ProbeOutcome*>& listed, bool with_values) {
    std::string text;
    for (size_t i = 0; i < listed.size() && i < 4; ++i)
      text += (i ? (with_values ? "; " : ", ") : "") + slice_label(*listed[i]) +
              (with_values ? ": " + held_values(*listed[i]) : "");
    if (listed.size() > 4) text += strprintf(", and %zu more", listed.size() - 4);
    return text;
  };
  std::string text = strprintf("%s is read from the wrong place: %s: %s; ", operand,
                               witness->name == "identity" ? "the identity probe (B = I)" : witness->name.c_str(),
                               lines_evidence.c_str());
  if (!missing.empty())
    text += strprintf("%zu of the %zu K slices probed never reach the output (%s: read as zeros) and ", missing.size(),
                      slices.size(), labels(missing, false).c_str());
  const std::string arriving = foreign.size() == 1 ? (missing.empty() ? "the one slice arrives" : "the other one arrives")
                                                   : strprintf("%s%zu arrive", missing.empty() ? "all " : "the other ",
                                                               foreign.size());
  text += strprintf("%s with values that change %s (%s): what %s tile holds depends on the tile's place in the "
                    "output, not on K, so %s's tile loads take their data from the wrong coordinates (K and %s "
                    "exchanged, a wrong stride, offset or box), where a K loop that missed or repeated K tiles would "
                    "leave every output of a slice alike",
                    arriving.c_str(), along, labels(foreign, true).c_str(), b_side ? "a B" : "an A", operand, b_side ? "N" : "M");
  if (!ones.passed)
    text += "; ones: " + (ones.axes.uniform() || (b_side ? ones.axes.along_m : ones.axes.along_n)
                              ? ones.pattern.evidence
                              : held_values(ones) + ", changing " + along);
  return text;
}

// Whether every failed plain probe (run with every scale 1) fails only in tiles where the scale
// probes got no block's code: with every scale 1, a scale read from the wrong block inside the
// scale tensor is still 1 and invisible; one read from outside the tensor is not.
inline bool plain_failures_in_foreign_tiles(const std::vector<ProbeOutcome>& probes, const ScaleFinding& scale,
                                            std::string* failed_names) {
  if (!scale.any_foreign()) return false;
  int failed = 0;
  for (const ProbeOutcome& o : probes) {
    if (o.name.rfind("scale", 0) == 0 || o.name == "random" || o.passed) continue;
    if (o.comparison.bad_per_tile.size() != scale.foreign.size() || o.differences > 0) return false;
    for (size_t t = 0; t < scale.foreign.size(); ++t)
      if (o.comparison.bad_per_tile[t] > 0 && !scale.foreign[t]) return false;
    if (failed++ < 3) *failed_names += (failed > 1 ? ", " : "") + o.name;
  }
  if (failed > 3) *failed_names += strprintf(" and %d more", failed - 3);
  return failed > 0;
}

inline Pattern plain_verdict(const std::vector<ProbeOutcome>& probes, const std::string& row_finding,
                             const std::string& col_finding, const ScaleFinding& scale);

// The verdict from the probes' wrong values, runs that differed aside. A scaled GEMM whose scale
// probes decode to another block's scale somewhere, and whose plain probes fail only where no
// block's code arrived, reads its scales from the wrong place, partly from outside the tensor:
// the plain failures are that, not a defect of their own.
inline Pattern structural_verdict(const std::vector<ProbeOutcome>& probes, const std::string& row_finding,
                                  const std::string& col_finding, const ScaleFinding& scale) {
  std::string failed_names;
  const bool plain_from_scales = plain_failures_in_foreign_tiles(probes, scale, &failed_names);
  if (plain_from_scales && scale.misused_tiles > 0)
    return {"scale_mapping", strprintf("the plain probes (every scale 1) fail (%s) only in the output tiles where the "
                                       "scale probes got no block's code; the scale probes: %s",
                                       failed_names.c_str(), scale.text.c_str())};
  Pattern verdict = plain_verdict(probes, row_finding, col_finding, scale);
  if (plain_from_scales && verdict.cls != "scale_mapping")
    verdict.evidence += "; the scale probes got no scale block's code in the same output tiles: if the kernel reads "
                        "its scales from outside the scale tensor, `repro run SPEC --sanitize memcheck` shows the reads";
  return verdict;
}

inline Pattern plain_verdict(const std::vector<ProbeOutcome>& probes, const std::string& row_finding,
                             const std::string& col_finding, const ScaleFinding& scale) {
  const auto find = [&](const std::string& prefix) {
    std::vector<const ProbeOutcome*> found;
    for (const ProbeOutcome& o : probes)
      if (o.name.rfind(prefix, 0) == 0) found.push_back(&o);
    return found;
  };
  const ProbeOutcome* ones = find("ones").front();
  std::vector<const ProbeOutcome*> slices = find("k-slice"), failed_slices;
  for (const ProbeOutcome* s : slices)
    if (!s->passed) failed_slices.push_back(s);
  // "k-slice 0/25 (k 0-31): every output 64 where 32 is right: ...; and 3 more"
  const auto list_slices = [&](const std::vector<const ProbeOutcome*>& listed) {
    std::string which;
    for (size_t i = 0; i < listed.size() && i < 4; ++i) which += (i ? "; " : "") + slice_label(*listed[i]) + ": " + listed[i]->note;
    if (listed.size() > 4) which += strprintf("; and %zu more", listed.size() - 4);
    return which;
  };
  const auto listed_slices = [&]() { return list_slices(failed_slices); };
  // Slices that never reach the output: every output 0 where the slice's length is right.
  std::vector<const ProbeOutcome*> missing_slices;
  for (const ProbeOutcome* s : failed_slices)
    if (s->comparison.ratio == 0.0 && s->comparison.bad == s->comparison.count && s->comparison.unwritten == 0)
      missing_slices.push_back(s);
  if (!ones->passed) {
    const std::string& cls = ones->pattern.cls;
    if (cls == "unwritten" || cls == "nonfinite" || cls == "boundary" || cls == "layout")
      return {cls, "ones: " + ones->pattern.evidence};
    if (cls == "row_mapping")
      return {cls, "ones: " + ones->pattern.evidence + (row_finding.empty() ? "" : "; row codes: " + row_finding)};
    if (cls == "col_mapping")
      return {cls, "ones: " + ones->pattern.evidence + (col_finding.empty() ? "" : "; column codes: " + col_finding)};
    if (!failed_slices.empty() && failed_slices.size() < slices.size())
      return {"k_coverage", strprintf("ones: %s; %zu of the %zu K slices probed are wrong, the others right: %s",
                                      ones->pattern.evidence.c_str(), failed_slices.size(), slices.size(),
                                      listed_slices().c_str())};
    // "Every K slice is off by the same factor" only when each slice says so, with the ones'
    // factor: a factor that changes from slice to slice is a K coverage defect.
    const auto same_factor = [&](const ProbeOutcome* s) {
      return s->pattern.cls == "scale" &&
             std::fabs(s->comparison.ratio - ones->comparison.ratio) <= 1e-9 * std::fabs(ones->comparison.ratio);
    };
    if (cls == "scale" && !slices.empty() && failed_slices.size() == slices.size() &&
        std::all_of(slices.begin(), slices.end(), same_factor))
      return {"scale", "ones: " + ones->pattern.evidence + strprintf("; every K slice is off by the same factor %.4f", ones->comparison.ratio) +
                           ", so the accumulation itself over- or under-counts (MMA, or alpha)"};
    // No slice right, and the wrong ones not alike over the output: an operand's addressing.
    const std::string operand = operand_layout_evidence(probes, slices, *ones);
    if (!operand.empty()) return {"operand_layout", operand};
    // Slices that contribute nothing name a K coverage defect even when no slice is right (the
    // others then read their operands from the wrong place too).
    if (!missing_slices.empty() && cls != "scale")
      return {"k_coverage",
              strprintf("ones: %s; %zu of the %zu K slices probed never reach the output%s: %s",
                        ones->pattern.evidence.c_str(), missing_slices.size(), slices.size(),
                        missing_slices.size() < failed_slices.size()
                            ? ", and the others are wrong too (operands from the wrong place)"
                            : "",
                        list_slices(missing_slices).c_str())};
    if (cls == "scale" && !failed_slices.empty())
      return {"k_coverage", strprintf("ones: %s; but the K slices are off by different factors, so K is covered "
                                      "unevenly: %s",
                                      ones->pattern.evidence.c_str(), listed_slices().c_str())};
    return {cls, "ones: " + ones->pattern.evidence};
  }
  if (!failed_slices.empty()) {
    const std::string operand = operand_layout_evidence(probes, slices, *ones);
    if (!operand.empty()) return {"operand_layout", "ones passes; " + operand};
  }
  if (!failed_slices.empty())
    return {"k_coverage", strprintf("ones passes, but %zu of the %zu K slices probed are wrong: %s", failed_slices.size(),
                                    slices.size(), listed_slices().c_str())};
  for (const ProbeOutcome* o : find("row code"))
    if (!o->passed) return {"row_mapping", "row codes: " + (row_finding.empty() ? o->pattern.evidence : row_finding)};
  for (const ProbeOutcome* o : find("col code"))
    if (!o->passed) return {"col_mapping", "column codes: " + (col_finding.empty() ? o->pattern.evidence : col_finding)};
  for (const ProbeOutcome* o : find("identity"))
    if (!o->passed)
      return {"layout", "ones, K slices, row and column codes pass, B = identity fails: " + o->pattern.evidence +
                            " (elements inside a tile land in the wrong place: layout, swizzle, transposition)"};
  for (const ProbeOutcome* o : find("tile ramp"))
    if (!o->passed)
      return {o->pattern.cls, "ones, K slices, row and column codes and identity pass; the tile ramp (every output "
                              "tile its own value) fails: " +
                                  o->pattern.evidence +
                                  " (a tile computed from another tile's operands: a stale buffer, a wrong tile index)"};
  for (const ProbeOutcome* o : find("scale"))
    if (!o->passed)
      return {"scale_mapping", "the plain probes pass with every scale 1; the scale probes fail: " +
                                   (scale.text.empty() ? o->name + ": " + o->pattern.evidence : scale.text)};
  for (const ProbeOutcome* o : find("random"))
    if (!o->passed) return {o->pattern.cls, "only random inputs fail: " + o->pattern.evidence};
  return {"ok", "every probe passes"};
}

inline void print_probe(const ProbeOutcome& o) {
  std::string result = o.passed ? "pass" : "FAIL";
  if (!o.passed) {
    result += "  " + (o.note.empty() ? o.pattern.cls + ": " + o.pattern.evidence : o.note);
    if (o.differences > 0)
      result += strprintf(" (%lld outputs differ between runs, %lld of them right in no run%s)", (long long)o.differences,
                          (long long)o.stale_differences, o.only_under_stress ? ", only under stress" : "");
  }
  std::printf("probe   %-18s %-44s %s\n", o.name.c_str(), o.inputs.c_str(), result.c_str());
  std::fflush(stdout);
}

// The K slices to probe: all of them when there are at most kMaxSlices, otherwise the first and
// last four and evenly spaced ones between (where pipelines and remainders go wrong).
constexpr int64_t kMaxSlices = 16;
inline std::vector<int64_t> slices_to_probe(int64_t count) {
  std::vector<int64_t> out;
  if (count <= kMaxSlices) {
    for (int64_t s = 0; s < count; ++s) out.push_back(s);
    return out;
  }
  for (int64_t s = 0; s < 4; ++s) out.push_back(s);
  for (int64_t i = 1; i <= kMaxSlices - 8; ++i) out.push_back(4 + i * (count - 8) / (kMaxSlices - 7));
  for (int64_t s = count - 4; s < count; ++s) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The period P of the tile ramp (A[m,k] = 1 + (m / tile_m) mod P, B likewise by n): the largest
// of 16, 8, 4, 2 whose values 1..P every operand dtype holds exactly and whose largest output,
// unit * P^2, an fp32 accumulator and the output dtype hold exactly; 1: no ramp fits.
inline int64_t tile_ramp_period(const std::vector<DType>& operands, DType out, double unit) {
  for (int64_t period : {16, 8, 4, 2}) {
    bool exact = std::fabs(unit) * double(period * period) <= 16777216.0 &&
                 (out != DType::f16 || std::fabs(unit) * double(period * period) <= 65504.0);
    for (DType dtype : operands)
      for (int64_t v = 1; v <= period && exact; ++v) exact = round_to(dtype, double(v)) == double(v);
    if (exact) return period;
  }
  return 1;
}

// The spec's own (random) inputs, restored from `random_inputs`, against the fp64 reference,
// launched three times at least.
inline ProbeOutcome run_random_probe(ProbeContext& ctx, const std::vector<double>& random_reference,
                                     const Tolerance& random_tolerance,
                                     const std::vector<std::vector<unsigned char>>& random_inputs,
                                     ProbeJudgement* judged = nullptr) {
  std::vector<Tensor>& tensors = ctx.spec->tensors;
  Tensor& out = tensors[size_t(ctx.spec->gemm.out)];
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor& t = tensors[i];
    if (t.output) continue;
    // Inputs made on the device are made there again (the host never had them); the others
    // come back from the host's copies.
    if (ctx.inputs_on_device && is_generated_input(t)) {
      generate_on_device(t);
      continue;
    }
    t.host = random_inputs[i];
    REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  }
  ProbeOutcome o;
  o.name = "random";
  o.inputs = "the spec's inputs, fp64 reference";
  const int saved = ctx.repeat;
  ctx.repeat = std::max(3, saved);
  probe_launches(ctx, out);
  ProbeJudgement j;
  if (ctx.random_want != nullptr) {
    j = judge_on_device(o, ctx, out, ctx.random_want, random_tolerance, judged != nullptr);
  } else {
    j.runs = probe_runs_on_host(ctx, out);
    judge_probe(o, *ctx.spec, out, j.runs, random_reference, random_tolerance, &ctx.stressed);
  }
  ctx.repeat = saved;
  if (judged != nullptr) *judged = std::move(j);
  return o;
}

// The picture of the first failing probe: where its errors are (also the report's `output`).
inline void show_first_failure(const std::vector<ProbeOutcome>& probes, const Tensor& out) {
  for (const ProbeOutcome& o : probes)
    if (!o.passed && o.comparison.bad > 0) {
      // One block (no `block:` given) has no picture; the line would run into the verdict's.
      const std::string heatmap = format_heatmap(o.comparison);
      if (!heatmap.empty()) std::printf("probe   %s: %s", o.name.c_str(), heatmap.c_str());
      JsonWriter w;
      write_comparison_json(w, o.output.empty() ? out.name : o.output, o.comparison);
      report_set("output", w.str());
      return;
    }
}

// The scale probes of a scaled GEMM (probe_ops.cuh).
inline bool has_scales(const GemmOperands& g);
inline void fill_unit_scales(SpecInfo& spec);
inline ScaleFinding run_scale_probes(SpecInfo& spec, ProbeContext& ctx);

// Prints the verdict, writes the probes and the verdict into the report, and concludes the run:
// exit 0 when the verdict is ok, 1 otherwise.
inline int conclude_probes(const std::vector<ProbeOutcome>& probes, const Pattern& verdict) {
  report_stress();
  std::printf("verdict %s: %s\n", verdict.cls.c_str(), verdict.evidence.c_str());
  JsonWriter w;
  w.begin_array();
  for (const ProbeOutcome& o : probes) {
    w.begin_object();
    w.field("name", o.name);
    w.field("inputs", o.inputs);
    w.field("passed", o.passed);
    w.field("bad", o.comparison.bad);
    w.field("differences", o.differences);
    w.field("stale_differences", o.stale_differences);
    w.field("wrong_in_runs", o.wrong_in_runs);
    if (!o.passed) {
      w.field("class", o.pattern.cls);
      w.field("evidence", o.pattern.evidence);
      if (!o.note.empty()) w.field("note", o.note);
    }
    w.end_object();
  }
  w.end_array();
  report_set("probes", w.str());
  report_set("verdict", json_string(verdict.cls));
  report_set("evidence", json_string(verdict.evidence));
  const bool ok = verdict.cls == "ok";
  return conclude(ok ? kExitPassed : kExitMismatch, verdict.cls, ok ? "" : verdict.evidence);
}

// Runs the suite; returns the exit code (0 when the verdict is ok, 1 otherwise).
inline int run_probes(SpecInfo& spec, ProbeContext& ctx, const std::vector<double>& random_reference,
                      const Tolerance& random_tolerance, const std::vector<std::vector<unsigned char>>& random_inputs) {
  const GemmOperands& g = spec.gemm;
  std::vector<Tensor>& tensors = spec.tensors;
  Tensor& A = tensors[g.a];
  Tensor& B = tensors[g.b];
  Tensor& out = tensors[g.out];
  const auto fill = [&](Tensor& t, const ProbeValues& values) { fill_probe_operand(t, values, ctx.tables); };
  const ProbeValues one = ProbeValues::constant(1.0);
  for (int index : {g.c, g.bias})
    if (index >= 0) fill(tensors[index], ProbeValues::constant(0.0));
  const double alpha = g.alpha, K = double(g.K);
  // Extents of the operands' tables: A is [M, K], B is [K, N] (logically; any storage order).
  const int64_t M = g.M, N = g.N;
  std::vector<ProbeOutcome>& probes = ctx.outcomes;
  if (has_scales(g)) fill_unit_scales(spec);  // the plain probes see a plain GEMM

  // ones
  fill(A, one);
  fill(B, one);
  probes.push_back(run_analytic_probe(ctx, "ones", "A = 1, B = 1", ProbeValues::constant(alpha * K)));
  print_probe(probes.back());

  // K slices, sized by the kernel's K tile.
  const int64_t tile_k = spec.tile_k > 0 ? spec.tile_k : 32;
  const int64_t slice_count = (g.K + tile_k - 1) / tile_k;
  for (int64_t s : slices_to_probe(slice_count)) {
    const int64_t k0 = s * tile_k, k1 = std::min(g.K, k0 + tile_k);
    fill(B, one.with_rows(1, g.K, [&](int64_t, int64_t k) { return k >= k0 && k < k1 ? 1.0 : 0.0; }));
    const double want = alpha * double(k1 - k0);
    ProbeOutcome o = run_analytic_probe(ctx, strprintf("k-slice %lld/%lld", (long long)s, (long long)slice_count),
                                        strprintf("A = 1, B = 1 on k %lld-%lld", (long long)k0, (long long)(k1 - 1)),
                                        ProbeValues::constant(want));
    if (!o.passed) o.note = slice_note(o, want);
    probes.push_back(o);
    print_probe(probes.back());
  }

  // Row codes (A side) and column codes (B side), two base-4 digits each: line i's code in the
  // probe of digit d is 2^(digit d of i).
  const auto code = [](int digit, int64_t i) { return double(1 << ((i >> (2 * digit)) & 3)); };
  std::vector<unsigned char> row_outputs[2], col_outputs[2];
  size_t row_probe[2] = {0, 0}, col_probe[2] = {0, 0};
  fill(B, one);
  for (int digit = 0; digit < 2; ++digit) {
    const auto row_code = [&](int64_t, int64_t m) { return code(digit, m); };
    fill(A, one.with_rows(1, M, row_code));
    probes.push_back(run_analytic_probe(ctx, strprintf("row code %d", digit),
                                        strprintf("A[m,k] = 2^(digit %d of m, base 4), B = 1", digit),
                                        ProbeValues::constant(alpha * K).with_rows(1, M, row_code), true));
    row_outputs[digit] = out.host;
    row_probe[digit] = probes.size() - 1;
    print_probe(probes.back());
  }
  fill(A, one);
  for (int digit = 0; digit < 2; ++digit) {
    const auto column_code = [&](int64_t, int64_t n) { return code(digit, n); };
    fill(B, one.with_columns(1, N, column_code));
    probes.push_back(run_analytic_probe(ctx, strprintf("col code %d", digit),
                                        strprintf("A = 1, B[k,n] = 2^(digit %d of n, base 4)", digit),
                                        ProbeValues::constant(alpha * K).with_columns(1, N, column_code), true));
    col_outputs[digit] = out.host;
    col_probe[digit] = probes.size() - 1;
    print_probe(probes.back());
  }
  const auto finding = [&](std::vector<unsigned char>* outputs, const size_t* index, bool rows) {
    if (probes[index[0]].passed && probes[index[1]].passed) return std::string();
    Tensor o0 = out, o1 = out;
    o0.host = outputs[0];
    o1.host = outputs[1];
    return decode_lines(o0, o1, g.N, rows ? g.M : g.N, rows ? spec.tile_m : spec.tile_n, alpha * K, rows);
  };
  const std::string row_finding = finding(row_outputs, row_probe, true);
  const std::string col_finding = finding(col_outputs, col_probe, false);
  if (!row_finding.empty()) probes[row_probe[0]].note = row_finding;
  if (!col_finding.empty()) probes[col_probe[0]].note = col_finding;

  // Identity-like B: D[m, n] = alpha * A[m, n mod K], A[m, k] = (m + 2k) mod 7 + 1, small
  // integers.
  fill(A, ProbeValues::identity(ProbeValues::Kind::identity_a, 1.0, g.K));
  fill(B, ProbeValues::identity(ProbeValues::Kind::identity_b, 1.0, g.K));
  probes.push_back(run_analytic_probe(ctx, "identity", "A[m,k] = (m+2k) mod 7 + 1, B = I (k = n mod K)",
                                      ProbeValues::identity(ProbeValues::Kind::identity_output, alpha, g.K)));
  print_probe(probes.back());

  // Tile ramp: every output tile holds a value of its own, alpha*K*a*b with a = 1 + (m / tile_m)
  // mod P and b = 1 + (n / tile_n) mod P. The row and column codes repeat every 16 lines, so a
  // tile computed from another tile's operands (a stale shared-memory buffer, a wrong tile
  // index) looks right to them; here it cannot.
  const int64_t ramp = tile_ramp_period({A.dtype, B.dtype}, out.dtype, alpha * K);
  if (ramp > 1) {
    const int64_t tm = std::max<int64_t>(1, spec.tile_m), tn = std::max<int64_t>(1, spec.tile_n);
    const auto a_of = [&](int64_t, int64_t m) { return double(1 + (m / tm) % ramp); };
    const auto b_of = [&](int64_t, int64_t n) { return double(1 + (n / tn) % ramp); };
    fill(A, one.with_rows(1, M, a_of));
    fill(B, one.with_columns(1, N, b_of));
    probes.push_back(run_analytic_probe(
        ctx, "tile ramp",
        strprintf("A = 1 + (m / %lld) mod %lld, B = 1 + (n / %lld) mod %lld", (long long)tm, (long long)ramp,
                  (long long)tn, (long long)ramp),
        ProbeValues::constant(alpha * K).with_rows(1, M, a_of).with_columns(1, N, b_of)));
    print_probe(probes.back());
  }

  // A scaled GEMM: which scale block each output used (probe_ops.cuh).
  const ScaleFinding scale_finding = has_scales(g) ? run_scale_probes(spec, ctx) : ScaleFinding();

  probes.push_back(run_random_probe(ctx, random_reference, random_tolerance, random_inputs));
  print_probe(probes.back());
  ctx.release();
  show_first_failure(probes, out);
  const Pattern verdict = probe_verdict(probes, row_finding, col_finding, scale_finding);
  return conclude_probes(probes, verdict);
}

}  // namespace repro
