// ---------------------------------------------------------------------------------------------
// repro harness runtime: which of several outputs went wrong first (spec: reference.upstream)
//
// An output computed from other outputs (a normalization's Y from its Mean and Rstd) can be
// wrong by itself, or only because an output upstream of it is. When it is wrong, the harness
// computes its reference once more from the kernel's own upstream outputs (custom.cuh): if the
// kernel's output matches that, it *follows* from its upstream; if not, it is wrong by itself.
// The first wrong output is the first, upstream before downstream, that is wrong by itself:
// where the search for the defect starts. Plain host logic, tested without a GPU.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <vector>

namespace repro {

// The outputs (positions in CustomOperands::outputs) upstream before downstream, and in the
// spec's order where reference.upstream leaves it free. Empty when the upstream lists go round
// in a circle (repro refuses such a spec; a hand-edited spec.yaml is refused by its reader).
inline std::vector<int> upstream_order(const std::vector<std::vector<int>>& upstream) {
  const int count = int(upstream.size());
  std::vector<int> order;
  std::vector<char> placed(size_t(count), 0);
  while (int(order.size()) < count) {
    int next = -1;
    for (int k = 0; k < count && next < 0; ++k) {
      if (placed[size_t(k)]) continue;
      bool ready = true;
      for (int u : upstream[size_t(k)]) ready = ready && u >= 0 && u < count && placed[size_t(u)];
      if (ready) next = k;
    }
    if (next < 0) return {};
    placed[size_t(next)] = 1;
    order.push_back(next);
  }
  return order;
}

// What the judgement found for one output.
struct OutputStanding {
  bool wrong = false;        // against the reference of the inputs (values or run-to-run)
  bool recomputed = false;   // its reference was computed again from the kernel's upstream outputs
  bool right_given = false;  // and the kernel's output matched that one, in every run
  bool follows() const { return wrong && recomputed && right_given; }
  bool wrong_by_itself() const { return wrong && !follows(); }
};

// The wrong outputs directly upstream of output `k`: what a following output follows from.
// Empty when it follows although none of them is wrong (each right within its own tolerance,
// its small error grown in `k`).
inline std::vector<int> wrong_upstream(int k, const std::vector<std::vector<int>>& upstream,
                                       const std::vector<OutputStanding>& standing) {
  std::vector<int> wrong;
  for (int u : upstream[size_t(k)])
    if (standing[size_t(u)].wrong) wrong.push_back(u);
  return wrong;
}

// The first wrong output: the first, upstream before downstream, that is wrong by itself; else
// (every wrong output follows from upstream values within their tolerance) the first wrong one;
// -1 when every output is right.
inline int first_wrong_output(const std::vector<int>& order, const std::vector<OutputStanding>& standing) {
  for (int k : order)
    if (standing[size_t(k)].wrong_by_itself()) return k;
  for (int k : order)
    if (standing[size_t(k)].wrong) return k;
  return -1;
}

}  // namespace repro
