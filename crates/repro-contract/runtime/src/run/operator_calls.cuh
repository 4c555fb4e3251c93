// ---------------------------------------------------------------------------------------------
// repro harness runtime: an operator's calls
//
// An operator is one launch or several (spec: launches), and may keep state between its calls in
// intermediate tensors (spec: intermediate, lifetime: persist): stream-K tile counters, split-K
// locks, a buffer "zeroed once at allocation". A check that repeats the operator judges each call
// against the reference, so that "right on the first call, wrong on the second" is named as such
// (docs/spec.md, "Operators of several kernels"), and reports the launches of a call one by one.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <string>
#include <vector>

#include "report.cuh"
#include "spec_info.cuh"

namespace repro {

inline bool has_intermediates(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.intermediate != Lifetime::none) return true;
  return false;
}

inline bool has_persistent_intermediates(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.intermediate == Lifetime::persist) return true;
  return false;
}

// Which calls of a repeated check went wrong: call 1 by the comparison, each later call by its
// wrong outputs against the first call's (a later call went wrong when it has more of them).
struct CallJudgement {
  bool first_run_wrong = false;
  std::vector<int> wrong_calls;        // 2-based call numbers, in order
  std::vector<int64_t> wrong_outputs;  // and the outputs wrong in each

  void record(int run, int64_t first_wrong, int64_t later_wrong) {
    if (later_wrong <= first_wrong) return;
    wrong_calls.push_back(run + 1);
    wrong_outputs.push_back(later_wrong);
  }

  // 1-based; 0 when every call was right.
  int first_wrong_call() const {
    if (first_run_wrong) return 1;
    return wrong_calls.empty() ? 0 : wrong_calls.front();
  }

  bool all_later_wrong(int repeat) const { return int(wrong_calls.size()) == repeat - 1 && repeat > 1; }

  std::string describe(int repeat) const {
    if (first_wrong_call() == 0) return strprintf("all %d calls right", repeat);
    std::string line = first_run_wrong ? "call 1 wrong" : "call 1 right";
    for (size_t i = 0; i < wrong_calls.size(); ++i)
      line += strprintf("; call %d: %lld outputs wrong", wrong_calls[i], (long long)wrong_outputs[i]);
    if (!first_run_wrong && !all_later_wrong(repeat)) line += "; the other calls right";
    return line;
  }
};

// Right on the first call, wrong on every later one: the operator's state outlives the call.
inline Pattern state_across_calls(const CallJudgement& calls, const std::vector<Tensor>& tensors, int repeat) {
  std::string kept;
  for (const Tensor& t : tensors)
    if (t.intermediate == Lifetime::persist) kept += (kept.empty() ? "" : ", ") + t.name;
  const int64_t first_outputs = calls.wrong_outputs.empty() ? 0 : calls.wrong_outputs.front();
  return Pattern{"state_across_calls",
                 strprintf("call 1 matches the reference; call %d is the first wrong one (%lld outputs), and every "
                           "later call of the %d is wrong too: the operator does not leave what it keeps between "
                           "calls (%s, lifetime: persist) as it found it",
                           calls.first_wrong_call(), (long long)first_outputs, repeat, kept.c_str())};
}

// An operator of several kernels: each launch of a call on a line of its own.
inline void print_call_launches(const SpecInfo& spec) {
  if (spec.harness->launch_count == 0) return;
  const std::vector<Launch>& launches = last_call_launches();
  for (size_t i = 0; i < launches.size(); ++i)
    std::printf("        %zu of %zu: %s  %s\n", i + 1, launches.size(), launches[i].label, describe(launches[i]).c_str());
}

// The report's `launches`: an operator's launches of one call, in order (docs/cli.md).
inline void report_call_launches(const SpecInfo& spec) {
  if (spec.harness->launch_count == 0) return;
  JsonWriter w;
  w.begin_array();
  for (const Launch& launch : last_call_launches()) {
    w.begin_object();
    w.field("kernel", std::string(launch.label));
    w.key("grid").begin_array().value(launch.grid.x).value(launch.grid.y).value(launch.grid.z).end_array();
    w.key("block").begin_array().value(launch.block.x).value(launch.block.y).value(launch.block.z).end_array();
    w.field("smem_bytes", launch.smem_bytes);
    w.end_object();
  }
  w.end_array();
  report_set("launches", w.str());
}

}  // namespace repro
