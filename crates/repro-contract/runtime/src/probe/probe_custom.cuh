// ---------------------------------------------------------------------------------------------
// repro harness runtime: the probe suite of a kernel that is no GEMM (op: custom; `repro probe`)
//
// A custom op has no closed form the runtime knows, but its reference does: each probe sets the
// floating-point inputs to a controlled pattern, runs the user's reference on them, launches the
// kernel on them `repeat` (at least 2) times, and compares every output.
//
//   probe         floating-point inputs                            why
//   ones          1                                                the simplest answer there is
//   iota          the logical index mod P (P prime, exact in the   every element distinct: a read
//                 dtype: 4093, 2039 for f16, 251 for bf16)         from the wrong index shows
//   block codes   1 + (the element's block along the last one or   a block that reads or writes
//                 two dimensions, by reference.block) mod 7        another block's data
//   random        the spec's inputs                                what the kernel sees in use
//
// Integer inputs (row pointers, indices: structure) keep the spec's values in every probe. A
// probe compares exactly when its inputs and its reference are integers below 2^24 (then every
// order of adding gives the reference exactly, custom.cuh), otherwise within the tolerance. The
// runs of each probe are compared bitwise, so a race shows even where its values happen to be
// right. The verdict is the most specific class among the failed probes' patterns.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "custom.cuh"
#include "probe.cuh"

namespace repro {

// P for the iota probe: a prime below the largest integer the dtype holds exactly.
inline int64_t iota_period(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 251;
    case DType::f16: return 2039;
    case DType::e4m3: return 13;
    case DType::e5m2: return 7;
    default: return 4093;
  }
}

// Sets every floating-point input from `value(tensor, logical index)`.
template <typename F>
inline void fill_float_inputs(SpecInfo& spec, F value) {
  for (Tensor& t : spec.tensors) {
    if (!is_input(t) || is_structure(t)) continue;
    for (int64_t i = 0; i < t.numel(); ++i) encode(t.dtype, t.host.data(), t.logical_offset(i), value(t, i));
  }
}

// The block an input element falls in: the launch's block laid over the input's last one or two
// dimensions (inputs of other shapes get a pattern all the same).
inline int64_t input_block(const Tensor& t, int64_t i, const std::vector<int64_t>& block) {
  const int64_t cols = t.rank >= 1 ? t.shape[t.rank - 1] : 1;
  const int64_t col = i % cols, row = t.rank >= 2 ? (i / cols) % t.shape[t.rank - 2] : 0;
  const int64_t block_n = block.empty() ? std::max<int64_t>(cols, 1) : block.back();
  const int64_t block_m = block.size() == 2 ? block[0] : 1;
  const int64_t blocks_n = ceil_div(cols, block_n);
  return (block.size() == 2 ? row / block_m : 0) * blocks_n + col / block_n;
}

// The class the verdict takes when several probes fail: the most specific evidence first.
inline int custom_class_rank(const std::string& cls) {
  static const char* const kOrder[] = {"nondeterministic", "unwritten", "nonfinite", "boundary",   "layout",
                                       "row_mapping",      "col_mapping", "scale",   "precision", "scattered"};
  for (int i = 0; i < int(sizeof(kOrder) / sizeof(kOrder[0])); ++i)
    if (cls == kOrder[i]) return i;
  return 100;
}

// The most specific class among the failed probes (`rank`: lower is more specific); among probes
// of that class, the one with the most bad outputs (its evidence shows the whole defect, not the
// few outputs one input pattern exposes).
inline Pattern most_specific_failure(const std::vector<ProbeOutcome>& probes, int (*rank_of)(const std::string&)) {
  Pattern verdict{"ok", "every probe passes"};
  int best = 1000;
  int64_t best_bad = -1;
  for (const ProbeOutcome& o : probes) {
    if (o.passed) continue;
    const int rank = rank_of(o.pattern.cls);
    if (rank < best || (rank == best && o.comparison.bad > best_bad)) {
      best = rank, best_bad = o.comparison.bad;
      verdict = Pattern{o.pattern.cls, o.name + ": " + o.pattern.evidence};
    }
  }
  return verdict;
}

// One probe: inputs already set on the host; every output judged, the first wrong one kept
// (upstream before downstream, custom.cuh), with the outputs that follow from it named.
inline ProbeOutcome run_custom_probe(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                     double timeout, int repeat, const std::string& name, const std::string& inputs,
                                     const std::vector<std::vector<double>>* given_want) {
  ProbeOutcome o;
  o.name = name;
  o.inputs = inputs;
  const std::vector<std::vector<double>> want = given_want ? *given_want : custom_reference_values(spec);
  const bool exact = exact_comparison(spec, want);
  Launch launch;
  std::vector<bool> stressed;
  const auto runs = launch_runs(spec, repeat, stream, start, stop, timeout, &launch, nullptr, &stressed);
  const OutputsJudgement judged = judge_outputs(spec, runs, want, exact, &stressed);
  o.passed = judged.first_wrong < 0;
  if (!o.passed) {
    const size_t k = size_t(judged.first_wrong);
    const OutputJudgement& j = judged.outputs[k];
    const Tensor& out = spec.tensors[size_t(spec.custom.outputs[k])];
    o.comparison = j.comparison;
    o.output = out.name;
    o.pattern = j.pattern;
    if (spec.custom.outputs.size() > 1)
      o.pattern.evidence = out.name + ": " + o.pattern.evidence + followers_text(spec, judged);
    o.differences = j.differences.total;
    o.only_under_stress = j.stress_split.stressed > 0 && j.stress_split.unstressed == 0;
    o.stale_differences = j.differences.stale;
    o.wrong_in_runs = j.differences.wrong;
  }
  if (!exact) o.inputs += " (tolerance)";
  print_probe(o);
  return o;
}

inline int run_custom_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                             double timeout, int repeat, const std::vector<std::vector<double>>& spec_want) {
  std::vector<Tensor>& tensors = spec.tensors;
  std::vector<std::vector<unsigned char>> spec_inputs;
  for (const Tensor& t : tensors) spec_inputs.push_back(t.host);
  std::vector<ProbeOutcome> probes;
  const auto probe = [&](const std::string& name, const std::string& inputs, auto value) {
    fill_float_inputs(spec, value);
    probes.push_back(run_custom_probe(spec, stream, start, stop, timeout, repeat, name, inputs, nullptr));
  };
  probe("ones", "floating-point inputs 1", [](const Tensor&, int64_t) { return 1.0; });
  probe("iota", "index mod P (P prime)",
        [](const Tensor& t, int64_t i) { return double(i % iota_period(t.dtype)); });
  probe("block codes", "1 + (block index mod 7)", [&](const Tensor& t, int64_t i) {
    return double(1 + input_block(t, i, spec.custom.block) % 7);
  });
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].output) tensors[i].host = spec_inputs[i];
  probes.push_back(run_custom_probe(spec, stream, start, stop, timeout, std::max(3, repeat), "random",
                                    "the spec's inputs", &spec_want));

  const Pattern verdict = most_specific_failure(probes, custom_class_rank);
  show_first_failure(probes, tensors[size_t(spec.custom.outputs[0])]);
  give_device_buffers(tensors);
  return conclude_probes(probes, verdict);
}

}  // namespace repro
