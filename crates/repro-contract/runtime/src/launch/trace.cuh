// ---------------------------------------------------------------------------------------------
// repro harness runtime: in-kernel stage tracing (spec: trace; the kernel includes
// crates/repro-contract/instrument/repro_trace.cuh)
//
// After the first launch the harness reads each traced stage's largest |value| and first values.
// Under --ones every stage's right value is known: an operand is 1, the accumulator K, the output
// alpha*K. The first stage that is wrong names where the defect is: the load (or TMA) path, the
// MMA, or the epilogue.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "tma.cuh"

namespace repro {

inline const char* trace_role_name(TraceRole role) {
  switch (role) {
    case TraceRole::operand: return "operand";
    case TraceRole::accumulator: return "accumulator";
    case TraceRole::output: return "output";
  }
  return "?";
}

struct TraceSample {
  float value;
  int row, col;
};

struct TraceReading {
  std::string name;
  TraceRole role = TraceRole::operand;
  double absmax = 0;
  uint64_t seen = 0;
  std::vector<TraceSample> samples;
};

// The right absmax of a stage under --ones.
inline double trace_expected(TraceRole role, double K, double alpha) {
  switch (role) {
    case TraceRole::operand: return 1.0;
    case TraceRole::accumulator: return K;
    case TraceRole::output: return std::fabs(alpha) * K;
  }
  return 0;
}

// "2.000x" or "got 7, want 1"
inline std::string trace_departure(double got, double want) {
  if (want != 0 && std::isfinite(got)) return strprintf("%.3fx the right %s", got / want, format_value(want).c_str());
  return strprintf("where %s is right", format_value(want).c_str());
}

// The stage the defect is in, from --ones readings: `load`, `mma`, `epilogue`, `unreached` or `ok`.
inline Pattern trace_verdict(const std::vector<TraceReading>& stages, double K, double alpha) {
  for (const TraceReading& s : stages)
    if (s.seen == 0)
      return {"unreached", strprintf("stage `%s` recorded nothing: the probe is not in the instantiation that ran "
                                     "(its compile-time gate), or the kernel never got there",
                                     s.name.c_str())};
  const auto wrong = [&](const TraceReading& s) { return s.absmax != trace_expected(s.role, K, alpha); };
  for (const TraceReading& s : stages)
    if (s.role == TraceRole::operand && wrong(s))
      return {"load", strprintf("operand stage `%s` has absmax %s, %s: the operands the MMA consumes are wrong, so the "
                                "load path (global loads, TMA, the shared-memory layout) is where to look",
                                s.name.c_str(), format_value(s.absmax).c_str(),
                                trace_departure(s.absmax, 1.0).c_str())};
  for (const TraceReading& s : stages)
    if (s.role == TraceRole::accumulator && wrong(s))
      return {"mma", strprintf("operands right, accumulator `%s` has absmax %s, %s (K = %s): the MMA stage over- or "
                               "under-counts",
                               s.name.c_str(), format_value(s.absmax).c_str(),
                               trace_departure(s.absmax, K).c_str(), format_value(K).c_str())};
  for (const TraceReading& s : stages)
    if (s.role == TraceRole::output && wrong(s))
      return {"epilogue", strprintf("operands and accumulator right, output `%s` has absmax %s, %s (alpha*K): the "
                                    "epilogue is wrong",
                                    s.name.c_str(), format_value(s.absmax).c_str(),
                                    trace_departure(s.absmax, trace_expected(TraceRole::output, K, alpha)).c_str())};
  return {"ok", "every traced stage has its right value"};
}

// One report line per stage: "trace   acc (accumulator)  absmax 1040  want 520  2.000x  1048576 values".
inline void print_trace(const std::vector<TraceReading>& stages, bool analytic, double K, double alpha) {
  for (const TraceReading& s : stages) {
    std::string line = strprintf("trace   %-28s absmax %-10s", (s.name + " (" + trace_role_name(s.role) + ")").c_str(),
                                 format_value(s.absmax).c_str());
    if (analytic) {
      const double want = trace_expected(s.role, K, alpha);
      line += strprintf(" want %-10s %s", format_value(want).c_str(), s.absmax == want ? "ok" : "WRONG");
    }
    line += strprintf("  (%llu values", static_cast<unsigned long long>(s.seen));
    if (!s.samples.empty())
      line += strprintf("; first: %s at [%d, %d]", format_value(s.samples[0].value).c_str(), s.samples[0].row,
                        s.samples[0].col);
    std::printf("%s)\n", line.c_str());
  }
}

}  // namespace repro
