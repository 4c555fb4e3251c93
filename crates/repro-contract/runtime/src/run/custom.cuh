// ---------------------------------------------------------------------------------------------
// repro harness runtime: the run of a kernel that is no GEMM (spec: reference op custom or file)
//
// The same instrument as the GEMM run, for any number of outputs of any rank: inputs from the
// spec, outputs poisoned before every launch, repeated launches compared bitwise, each output
// compared with its reference and its errors localized by index (the last partial block of the
// launch, the border, whole rows or columns, a shifted or periodic index, unwritten, non-finite).
// The reference is the user's host function (reference.cu, built with the runtime's flags, called
// through HarnessSpec::custom_reference) or the expected outputs saved as .npy.
//
// An output of rank r is compared as the [L, M, N] frame compare_output knows: rank 1 is [1, 1,
// N], rank 2 [1, M, N], rank 3 [L, M, N], rank 4 [s0 * s1, M, N]; `reference.block` plays the
// role of the GEMM's tile over its last one or two dimensions.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "operator_calls.cuh"
#include "output_order.cuh"
#include "production.cuh"
#include "run_options.cuh"

#include <repro/reference.h>

namespace repro {

// The reference cannot judge the kernel (an output it left unwritten, an index outside a tensor,
// a NaN where the kernel is finite, an expected file that does not fit): exit 2, with the
// disposition and the JSON report, since the fix is in the spec's reference.
[[noreturn]] inline void reference_error(const std::string& message) {
  fatal(kExitUsage, "reference", "error: " + message);
}

// The comparison frame of an output: [L, M, N] and the block over [M, N].
struct OutputFrame {
  int64_t L = 1, M = 1, N = 1, block_m = 0, block_n = 0;
};

inline OutputFrame output_frame(const Tensor& t, const std::vector<int64_t>& block) {
  OutputFrame f;
  const int r = t.rank;
  f.N = r >= 1 ? t.shape[r - 1] : 1;
  f.M = r >= 2 ? t.shape[r - 2] : 1;
  f.L = 1;
  for (int d = 0; d + 2 < r; ++d) f.L *= t.shape[d];
  // A one-extent block covers the last dimension (one row of it); two cover the last two.
  if (block.size() == 1) f.block_m = 1, f.block_n = block[0];
  if (block.size() == 2) f.block_m = r >= 2 ? block[0] : 1, f.block_n = block[1];
  return f;
}

// Integer-typed inputs are structure (row pointers, indices, group ids): --ones, the probes'
// inputs and every analytic pattern leave them as the spec makes them.
inline bool is_structure(const Tensor& t) { return is_input(t) && !dtype_is_float(t.dtype); }

// Where the reference of each output comes from, for the report.
inline std::string describe_custom_reference(const SpecInfo& spec) {
  const CustomOperands& c = spec.custom;
  if (c.op == ReferenceOp::custom) return "the custom reference (host, f64)";
  if (c.op == ReferenceOp::file) return "the expected outputs (.npy)";
  if (c.attention.backward()) return "the attention backward reference (host, f64)";
  return c.reference_on_device ? "the attention reference (device, f64)" : "the attention reference (host, f64)";
}

// op: attention's reference values (attention.cuh), and whether the forward's runs on the
// device (attention_device.cuh): reference.provider or --reference, auto by the problem's size.
inline std::vector<std::vector<double>> attention_reference_values(const SpecInfo& spec);
inline bool attention_reference_on_device(const SpecInfo& spec, const std::string& provider);

// Every output's reference values, logical row-major: the user's function on the inputs as the
// host holds them, or the expected files. A reference that leaves an element unwritten, or an
// expected file that does not fit its output, stops the run (exit 2).
//
// `given` (op: custom, reference.upstream): per output, the kernel's values (logical row-major)
// or nothing. A given output reads as the kernel's values in the reference and keeps them, and
// its writes are dropped (include/repro/reference.h), so the other outputs are computed from it.
inline std::vector<std::vector<double>> custom_reference_values(const SpecInfo& spec,
                                                                const std::vector<std::vector<double>>* given = nullptr) {
  const CustomOperands& c = spec.custom;
  if (c.op == ReferenceOp::attention) return attention_reference_values(spec);
  std::vector<std::vector<double>> want(c.outputs.size());
  if (c.op == ReferenceOp::file) {
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const Tensor& out = spec.tensors[size_t(c.outputs[k])];
      const std::string& path = c.expected[k];
      std::string error;
      bool misfit = false;
      if (!load_expected_values(path, out, out.name + "'s expected output", &want[k], &misfit, &error))
        reference_error(misfit ? strprintf("reference.expected.%s: %s (the expected output must have the output's "
                                           "shape, %s, and its dtype %s, or f32 or f64%s)",
                                           out.name.c_str(), error.c_str(), format_shape(out.rank, out.shape).c_str(),
                                           dtype_name(out.dtype),
                                           spec.sizes.empty() ? "" : "; op: file compares at the sizes it was saved at")
                               : "reference.expected." + out.name + ": " + error);
    }
    return want;
  }
  // op: custom. Inputs as their values; outputs filled with the unwritten marker, or given.
  std::vector<std::vector<double>> values(spec.tensors.size());
  std::vector<ReferenceTensor> views(spec.tensors.size());
  std::vector<char> is_given(spec.tensors.size(), 0);
  for (size_t k = 0; given != nullptr && k < c.outputs.size(); ++k)
    if (!(*given)[k].empty()) values[size_t(c.outputs[k])] = (*given)[k], is_given[size_t(c.outputs[k])] = 1;
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    const Tensor& t = spec.tensors[i];
    if (!is_given[i])
      values[i] = t.output ? std::vector<double>(size_t(t.numel()), double_from_bits(kReferenceUnwrittenBits))
                           : logical_values(t);
    views[i] = reference_view(t, values[i], t.output, is_given[i] ? values[i].data() : nullptr);
  }
  spec.harness->custom_reference(views.data());
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const Tensor& out = spec.tensors[size_t(c.outputs[k])];
    std::vector<double>& v = values[size_t(c.outputs[k])];
    if (is_given[size_t(c.outputs[k])]) {
      want[k] = std::move(v);
      continue;
    }
    int64_t unwritten = 0, first = -1;
    for (int64_t i = 0; i < out.numel(); ++i)
      if (double_bits(v[size_t(i)]) == kReferenceUnwrittenBits) unwritten += 1, first = first < 0 ? i : first;
    if (unwritten > 0)
      reference_error(strprintf("the custom reference wrote no value to %s (and %lld more of its %lld elements): a "
                            "reference must write every element of every output (reference.source, reference.function)",
                            element_name(out, first).c_str(), (long long)(unwritten - 1), (long long)out.numel()));
    want[k] = std::move(v);
  }
  return want;
}

// The reference index error of include/repro/reference.h: the reference is wrong, not the kernel.
[[noreturn]] inline void stop_on_reference_index(const ReferenceTensor& t, int count, const int64_t* indices,
                                                 int dimension) {
  if (count < 0)
    reference_error(strprintf("the custom reference asked %s.shape(%lld), but `%s` has %d dimensions", t.name,
                          (long long)indices[0], t.name, t.rank));
  std::string index;
  for (int d = 0; d < count; ++d) index += (d ? ", " : "") + std::to_string(indices[d]);
  std::string shape;
  for (int d = 0; d < t.rank; ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
  if (dimension < 0)
    reference_error(strprintf("the custom reference indexed %s(%s) with %d indices, but `%s` has %d dimensions [%s]",
                          t.name, index.c_str(), count, t.name, t.rank, shape.c_str()));
  reference_error(strprintf("the custom reference indexed %s(%s): index %lld is outside dimension %d of [%s]", t.name,
                        index.c_str(), (long long)indices[dimension], dimension, shape.c_str()));
}

// Whether every input of the run holds integers (ones, iota, codes, int_uniform, integer files)
// and every reference value is an integer within 2^24: then any order of adding the inputs in
// f32 gives the reference exactly, and the comparison is exact (docs/tolerances.md).
inline bool exact_comparison(const SpecInfo& spec, const std::vector<std::vector<double>>& want) {
  for (const Tensor& t : spec.tensors) {
    if (t.output) continue;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = decode(t.dtype, t.host.data(), t.logical_offset(i));
      if (v != std::floor(v) || std::fabs(v) > 16777216.0) return false;
    }
  }
  for (const std::vector<double>& w : want)
    for (double v : w)
      if (!(v == std::floor(v)) || std::fabs(v) > 16777216.0) return false;
  return true;
}

// A reference NaN is matched only by a NaN. Where the reference says NaN and the kernel wrote a
// finite value, the reference is the suspect (a read past its inputs, a division by zero): the
// run stops there (exit 2) rather than call the kernel wrong.
inline void check_reference_nans(const Tensor& out, const std::vector<double>& want) {
  int64_t count = 0, first = -1;
  double got_first = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (!std::isnan(want[size_t(i)])) continue;
    const int64_t offset = out.logical_offset(i);
    const double got = decode(out.dtype, out.host.data(), offset);
    if (std::isfinite(got) && !is_poison(out.dtype, out.host.data(), offset)) {
      if (first < 0) first = i, got_first = got;
      ++count;
    }
  }
  if (count > 0)
    reference_error(strprintf("the reference is NaN at %s where the kernel wrote %s (and at %lld more outputs the kernel "
                          "wrote finite values): fix the reference (a read outside its inputs, a division by zero); "
                          "if NaN is the right answer there, the kernel is wrong at those outputs",
                          element_name(out, first).c_str(), format_value(got_first).c_str(), (long long)(count - 1)));
}

// The tolerance of output `out` against `want`: exact, or the output dtype's defaults with the
// spec's check: values.
inline Tolerance custom_tolerance(const SpecInfo& spec, const Tensor& out, const std::vector<double>& want,
                                  bool exact) {
  Tolerance tolerance = default_tolerance(out.dtype, out.dtype, out.dtype, reference_rms(want));
  if (spec.rel_l2 >= 0) tolerance.rel_l2 = spec.rel_l2;
  if (spec.rtol >= 0) tolerance.rtol = spec.rtol;
  if (spec.atol >= 0) tolerance.atol = spec.atol;
  tolerance.exact = exact;
  return tolerance;
}

inline Comparison compare_custom_output(const SpecInfo& spec, const Tensor& out, const std::vector<double>& want,
                                        const Tolerance& tolerance) {
  const OutputFrame f = output_frame(out, spec.custom.block);
  return compare_output(out, want, f.L, f.M, f.N, tolerance, f.block_m, f.block_n, std::max(out.rank, 1));
}

// Launches the kernel `repeat` times on poisoned outputs; returns every output's storage per run
// (run-major) and leaves the first run's in each output's host buffer.
inline std::vector<std::vector<std::vector<unsigned char>>> launch_runs(SpecInfo& spec, int repeat,
                                                                        cudaStream_t stream, cudaEvent_t start,
                                                                        cudaEvent_t stop, double timeout,
                                                                        Launch* launch, std::vector<double>* ms,
                                                                        std::vector<bool>* stressed = nullptr) {
  std::vector<std::vector<std::vector<unsigned char>>> runs;
  stress_new_sequence();
  for (Tensor& t : spec.tensors)
    if (!t.output) REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  for (int run = 0; run < repeat; ++run) {
    poison_device_outputs(spec.tensors);
    *launch = launch_kernel(spec, spec.tensors, stream, start, stop);
    if (stressed) stressed->push_back(last_launch_stressed());
    wait_for_kernel(stop, timeout, launch->label, describe(*launch));
    float kernel_ms = 0;
    REPRO_CUDA_CHECK(cudaEventElapsedTime(&kernel_ms, start, stop));
    if (ms) ms->push_back(kernel_ms);
    std::vector<std::vector<unsigned char>> outputs;
    for (int index : spec.custom.outputs) {
      Tensor& t = spec.tensors[size_t(index)];
      REPRO_CUDA_CHECK(cudaMemcpy(t.host.data(), t.device, t.storage_bytes(), cudaMemcpyDeviceToHost));
      outputs.push_back(t.host);
    }
    runs.push_back(std::move(outputs));
  }
  for (size_t k = 0; k < spec.custom.outputs.size(); ++k) spec.tensors[size_t(spec.custom.outputs[k])].host = runs[0][k];
  return runs;
}

// One output's verdict over a set of runs: its comparison (first run), its run-to-run
// differences, and the named pattern when it fails.
struct OutputJudgement {
  Comparison comparison;
  RunDifferences differences;
  StressSplit stress_split;  // filled when the runs' stress is known
  Pattern pattern;
  bool passed = false;
};

inline OutputJudgement judge_output(const SpecInfo& spec, size_t k,
                                    const std::vector<std::vector<std::vector<unsigned char>>>& runs,
                                    const std::vector<double>& want, const Tolerance& tolerance,
                                    const std::vector<bool>* stressed = nullptr) {
  const Tensor& out = spec.tensors[size_t(spec.custom.outputs[k])];
  OutputJudgement j;
  for (size_t r = 1; r < runs.size(); ++r) {
    const RunDifferences d = run_differences(out, runs[0][k], runs[r][k], want, tolerance);
    keep_most(j.differences, d);
    if (stressed != nullptr && r < stressed->size()) j.stress_split.add((*stressed)[r], d.total);
  }
  j.comparison = compare_custom_output(spec, out, want, tolerance);
  j.passed = j.comparison.passed && j.differences.total == 0;
  if (!j.passed) {
    const bool race = is_race(j.differences);
    j.pattern = classify(j.comparison, race ? j.differences.total : 0, tolerance);
    if (j.differences.total > 0 && !race) j.pattern.evidence += "; " + stale_note(j.differences, "");
  }
  return j;
}

// Every output judged over the runs, in the spec's order; then each wrong output with upstream
// outputs (reference.upstream) judged again, against its reference computed from the kernel's
// own upstream outputs (the first run's): it follows from them when it matches, and its runs
// differ only where an upstream output's do too. Which output went wrong first is
// output_order.cuh's question, answered here for the report.
struct OutputsJudgement {
  std::vector<OutputJudgement> outputs;
  std::vector<Comparison> given;  // against the reference from the kernel's upstream, where recomputed
  std::vector<OutputStanding> standing;
  std::vector<int> order;  // upstream before downstream (output_order.cuh), else the spec's order
  int first_wrong = -1;    // a position in CustomOperands::outputs; -1: every output is right
};

inline OutputsJudgement judge_outputs(const SpecInfo& spec,
                                      const std::vector<std::vector<std::vector<unsigned char>>>& runs,
                                      const std::vector<std::vector<double>>& want, bool exact,
                                      const std::vector<bool>* stressed) {
  const CustomOperands& c = spec.custom;
  OutputsJudgement j;
  j.given.resize(c.outputs.size());
  j.standing.resize(c.outputs.size());
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const Tensor& out = spec.tensors[size_t(c.outputs[k])];
    check_reference_nans(out, want[k]);
    j.outputs.push_back(judge_output(spec, k, runs, want[k], custom_tolerance(spec, out, want[k], exact), stressed));
    j.standing[k].wrong = !j.outputs[k].passed;
  }
  for (size_t k = 0; k < c.outputs.size() && k < c.upstream.size(); ++k) {
    if (!j.standing[k].wrong || c.upstream[k].empty()) continue;
    // The host buffers hold the first run's outputs (launch_runs).
    std::vector<std::vector<double>> given(c.outputs.size());
    bool upstream_differs = false;
    for (int u : c.upstream[k]) {
      given[size_t(u)] = logical_values(spec.tensors[size_t(c.outputs[size_t(u)])]);
      upstream_differs = upstream_differs || j.outputs[size_t(u)].differences.total > 0;
    }
    const std::vector<std::vector<double>> want_given = custom_reference_values(spec, &given);
    const Tensor& out = spec.tensors[size_t(c.outputs[k])];
    const Tolerance tolerance = custom_tolerance(spec, out, want_given[k], exact_comparison(spec, want_given));
    j.given[k] = compare_custom_output(spec, out, want_given[k], tolerance);
    j.standing[k].recomputed = true;
    j.standing[k].right_given = j.given[k].passed && (j.outputs[k].differences.total == 0 || upstream_differs);
  }
  j.order = upstream_order(c.upstream);
  if (j.order.empty())  // no reference.upstream (op: file, attention)
    for (size_t k = 0; k < c.outputs.size(); ++k) j.order.push_back(int(k));
  j.first_wrong = first_wrong_output(j.order, j.standing);
  return j;
}

// "Mean, Rstd": the names of outputs at `positions`.
inline std::string output_names(const SpecInfo& spec, const std::vector<int>& positions) {
  std::string names;
  for (int k : positions) names += (names.empty() ? "" : ", ") + spec.tensors[size_t(spec.custom.outputs[size_t(k)])].name;
  return names;
}

// What became of output k, for the `outputs` line: "Mean right", "Rstd wrong (the first)",
// "Y follows from Rstd", "Y wrong by itself (also from the kernel's Mean, Rstd)".
inline std::string output_standing_text(const SpecInfo& spec, const OutputsJudgement& j, int k) {
  const CustomOperands& c = spec.custom;
  const std::string name = spec.tensors[size_t(c.outputs[size_t(k)])].name;
  const OutputStanding& s = j.standing[size_t(k)];
  if (!s.wrong) return name + " right";
  const std::string first = k == j.first_wrong ? " (the first)" : "";
  if (s.follows()) {
    const std::vector<int> from = wrong_upstream(k, c.upstream, j.standing);
    return name + first + " follows from " +
           (from.empty() ? "the kernel's " + output_names(spec, c.upstream[size_t(k)]) + " (each right within tolerance)"
                         : output_names(spec, from));
  }
  if (s.recomputed) return name + " wrong by itself" + first + " (also from the kernel's own " +
                           output_names(spec, c.upstream[size_t(k)]) + ")";
  return name + " wrong" + first;
}

// What the verdict's evidence adds after the first wrong output's own: "; Y follows from Rstd",
// for each output that follows (run and probes alike).
inline std::string followers_text(const SpecInfo& spec, const OutputsJudgement& j) {
  std::string followers;
  for (size_t k = 0; k < j.standing.size(); ++k)
    if (j.standing[k].follows()) followers += "; " + output_standing_text(spec, j, int(k));
  return followers;
}

// The report of several outputs' judgement: a `given` line per recomputed output, then the
// `outputs` line; the JSON's `first_wrong_output` and `upstream`.
inline void report_outputs_judgement(const SpecInfo& spec, const OutputsJudgement& j) {
  const CustomOperands& c = spec.custom;
  if (c.outputs.size() < 2 || j.first_wrong < 0) return;
  JsonWriter upstream_json;
  upstream_json.begin_array();
  bool recomputed = false;
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    if (!j.standing[k].recomputed) continue;
    recomputed = true;
    const std::string name = spec.tensors[size_t(c.outputs[k])].name;
    std::printf("given   %s from the kernel's own %s: %s\n", name.c_str(), output_names(spec, c.upstream[k]).c_str(),
                format_comparison_line(name.c_str(), j.given[k]).c_str());
    upstream_json.begin_object();
    upstream_json.field("tensor", name);
    upstream_json.key("upstream").begin_array();
    for (int u : c.upstream[k]) upstream_json.value(spec.tensors[size_t(c.outputs[size_t(u)])].name);
    upstream_json.end_array();
    upstream_json.field("follows", j.standing[k].follows());
    upstream_json.key("follows_from").begin_array();
    if (j.standing[k].follows())
      for (int u : wrong_upstream(int(k), c.upstream, j.standing))
        upstream_json.value(spec.tensors[size_t(c.outputs[size_t(u)])].name);
    upstream_json.end_array();
    upstream_json.key("given");
    write_comparison_json(upstream_json, name, j.given[k]);
    upstream_json.end_object();
  }
  upstream_json.end_array();
  std::string line;
  for (int k : j.order) line += (line.empty() ? "" : "; ") + output_standing_text(spec, j, k);
  std::printf("outputs %s\n", line.c_str());
  report_set("first_wrong_output", json_string(spec.tensors[size_t(c.outputs[size_t(j.first_wrong)])].name));
  report_set("outputs_standing", json_string(line));
  if (recomputed) report_set("upstream", upstream_json.str());
}

// The custom ops' probe suite (probe_custom.cuh) and attention's (attention.cuh).
inline int run_custom_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                             double timeout, int repeat, const std::vector<std::vector<double>>& spec_want);
inline int run_attention_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                double timeout, int repeat, const std::vector<std::vector<double>>& spec_want);
inline int run_attention_backward_probes(SpecInfo& spec, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                                         double timeout, int repeat,
                                         const std::vector<std::vector<double>>& spec_want);

// The run of an op: custom or op: file spec, after the sizes are settled (run_harness).
inline int run_custom(SpecInfo& spec, const Options& options, PhaseTimes& times, const std::string& sizes_line) {
  const CustomOperands& c = spec.custom;
  const int repeat = options.repeat > 0 ? options.repeat : spec.repeat;
  const double timeout = options.timeout_seconds > 0 ? options.timeout_seconds : spec.timeout_seconds;
  const std::string op = c.op == ReferenceOp::custom           ? "custom"
                         : c.op == ReferenceOp::file           ? "file"
                         : c.attention.backward()              ? "attention_backward"
                                                               : "attention";
  const std::string provider = options.reference.empty() ? spec.reference_provider : options.reference;
  const bool attention_forward = c.op == ReferenceOp::attention && !c.attention.backward();
  if (provider == "device" && !attention_forward)
    usage_error("op: " + op + " has no device reference: its reference is computed on the host (drop --reference device)");
  if (provider == "emulated")
    usage_error("op: " + op + " has no emulated reference: the int8 emulation computes GEMMs (op: gemm and grouped_gemm); "
                "drop --reference emulated");
  if (options.check_device_inputs)
    usage_error("--check-device-inputs checks inputs made on the device, which only GEMM references do");
  if (c.op == ReferenceOp::file && options.probe)
    usage_error("--probe chooses its own inputs, and op: file has expected outputs for the spec's inputs only: give "
                "the spec an op: custom reference to probe it");
  if (c.op == ReferenceOp::file && (options.ones || !options.inits.empty() || options.has_seed))
    usage_error("op: file compares with expected outputs of the spec's own inputs: --ones, --init and --seed would "
                "change the inputs but not the expected outputs");

  // Inputs: --ones sets every floating-point input to 1 (integer inputs are structure: row
  // pointers, indices), then --init and --seed as for a GEMM.
  std::vector<Tensor>& tensors = spec.tensors;
  if (options.ones)
    for (Tensor& t : tensors)
      if (is_input(t) && !is_structure(t)) t.init = Init{InitKind::ones, 0, 0, 0, "", {}, 1};
  apply_init_options(tensors, options);
  std::string inputs_line;
  for (const Tensor& t : tensors)
    if (is_input(t)) inputs_line += (inputs_line.empty() ? "" : ", ") + t.name + " " + describe_init(t.init);
  inputs_line += " -> " + describe_custom_reference(spec);
  for (Tensor& t : tensors) {
    std::string error;
    if (!fill_host(t, spec.base_dir, &error)) usage_error(strprintf("tensor %s: %s", t.name.c_str(), error.c_str()));
  }
  times.end("inputs");
  if (!options.emit_inputs_dir.empty()) return emit_inputs(tensors, options.emit_inputs_dir);

  // The reference before the device: it needs none, so a reference that fails (an index outside
  // a tensor, an output left unwritten, an expected file that does not fit) shows on any machine.
  // It comes before the kernel too: a kernel that kills the context still leaves one. Attention
  // at production sizes is computed on the device instead, once the tensors are there, still
  // before the kernel's first launch (--bench needs no reference).
  spec.custom.reference_on_device = attention_forward && !options.bench && attention_reference_on_device(spec, provider);
  std::vector<std::vector<double>> want;
  double reference_seconds = 0;
  const auto compute_reference = [&] {
    const auto reference_start = std::chrono::steady_clock::now();
    want = custom_reference_values(spec);
    reference_seconds = seconds_since(reference_start);
    times.end("reference");
    report_set("reference_provider", json_string(spec.custom.reference_on_device ? "device" : "host"));
  };
  if (!spec.custom.reference_on_device) compute_reference();

  report_set("reference_op", json_string(op));
  if (const int code = open_device(spec, options.ones ? "ones" : "reference", inputs_line, sizes_line)) return code;
  times.end("context");

  take_device_buffers(tensors);
  const CheckStream& check = check_stream();
  cudaStream_t stream = check.stream;
  cudaEvent_t start = check.start, stop = check.stop;
  if (spec.custom.reference_on_device) compute_reference();
  if (options.bench) {
    for (Tensor& t : tensors)
      if (!t.output) REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
    Launch launch;
    const BenchResult result = bench_kernel(spec, options.bench_options, stream, start, stop, timeout, &launch);
    std::printf("launch  %s\n", describe(launch).c_str());
    report_bench(result, options.bench_options, spec);
    times.report();
    return conclude_timed();
  }
  // The attention probes decode the forward pass; the backward has its own short suite.
  if (options.probe && c.op == ReferenceOp::attention) {
    std::printf("ref     %s, computed for each probe's inputs (the spec's: %.2f s%s)\n",
                describe_custom_reference(spec).c_str(), reference_seconds,
                c.reference_note.empty() ? "" : (", " + c.reference_note).c_str());
    return c.attention.backward()
               ? run_attention_backward_probes(spec, stream, start, stop, timeout, std::max(2, repeat), want)
               : run_attention_probes(spec, stream, start, stop, timeout, std::max(2, repeat), want);
  }
  if (options.probe) return run_custom_probes(spec, stream, start, stop, timeout, std::max(2, repeat), want);

  load_capture_before(tensors, spec.base_dir);
  check_production(spec, options, stream, start, stop, timeout);
  Launch launch;
  std::vector<double> kernel_ms;
  std::vector<bool> stressed;
  const auto runs = launch_runs(spec, repeat, stream, start, stop, timeout, &launch, &kernel_ms, &stressed);
  times.end("launches");
  std::vector<double> sorted_ms = kernel_ms;
  std::sort(sorted_ms.begin(), sorted_ms.end());
  const double median_ms = 0.5 * (sorted_ms[(sorted_ms.size() - 1) / 2] + sorted_ms[sorted_ms.size() / 2]);
  std::printf("launch  %s   kernel %.3f ms%s\n", describe(launch).c_str(), median_ms,
              repeat > 1 ? strprintf(" (median of %d)", repeat).c_str() : "");
  print_call_launches(spec);
  std::printf("ref     %s, %.2f s%s\n", describe_custom_reference(spec).c_str(), reference_seconds,
              c.reference_note.empty() ? "" : (": " + c.reference_note).c_str());

  const bool exact = exact_comparison(spec, want);
  if (exact) std::printf("compare exact: integer inputs and an integer reference below 2^24\n");
  const OutputsJudgement judged = judge_outputs(spec, runs, want, exact, &stressed);
  const bool passed = judged.first_wrong < 0;
  Pattern verdict;
  StressSplit stress_split;  // over every output: the most differences of any of them
  JsonWriter outputs_json;
  outputs_json.begin_array();
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const Tensor& out = tensors[size_t(c.outputs[k])];
    const OutputJudgement& j = judged.outputs[k];
    stress_split.stressed_runs = j.stress_split.stressed_runs;
    stress_split.unstressed_runs = j.stress_split.unstressed_runs;
    stress_split.stressed = std::max(stress_split.stressed, j.stress_split.stressed);
    stress_split.unstressed = std::max(stress_split.unstressed, j.stress_split.unstressed);
    print_comparison_line(out.name.c_str(), j.comparison);
    if (repeat > 1 && j.differences.total > 0)
      std::printf("repeat  %s: %lld outputs differ from the first run (%lld of them right in no run)\n",
                  out.name.c_str(), (long long)j.differences.total, (long long)j.differences.stale);
    if (!j.passed) {
      print_mismatches(out.name.c_str(), j.comparison, false);
      std::printf("%s", format_heatmap(j.comparison).c_str());
      std::printf("pattern %s: %s\n", j.pattern.cls.c_str(), j.pattern.evidence.c_str());
    }
    // The report's `output`: the first wrong output's comparison, or the first output's.
    if (int(k) == judged.first_wrong) {
      verdict = j.pattern;
      if (c.outputs.size() > 1) verdict.evidence = out.name + ": " + verdict.evidence;
      JsonWriter w;
      write_comparison_json(w, out.name, j.comparison);
      report_set("output", w.str());
    } else if (k == 0 && passed) {
      JsonWriter w;
      write_comparison_json(w, out.name, j.comparison);
      report_set("output", w.str());
    }
    write_comparison_json(outputs_json, out.name, j.comparison);
    report_set("repeat_differences", JsonWriter().value(j.differences.total).str());
  }
  outputs_json.end_array();
  report_set("outputs", outputs_json.str());
  report_outputs_judgement(spec, judged);
  if (c.outputs.size() > 1) verdict.evidence += followers_text(spec, judged);
  // An operator of several kernels with wrong outputs: which launch went wrong first, from the
  // intermediates' own references (operator_calls.cuh).
  std::vector<std::string> wrong_outputs;
  for (size_t k = 0; k < c.outputs.size(); ++k)
    if (!judged.outputs[k].comparison.passed) wrong_outputs.push_back(tensors[size_t(c.outputs[k])].name);
  report_first_wrong_launch(spec, tensors, wrong_outputs, stream, stop, timeout, inputs_changed_by(options));
  if (repeat > 1 && passed) std::printf("repeat  %d runs, outputs bitwise identical\n", repeat);
  report_stress();
  stress_split.report();
  times.end("compare");

  if (!options.dump_dir.empty()) {
    make_directories_or_die(options.dump_dir);
    for (const Tensor& t : tensors) write_npy_or_die(join_path(options.dump_dir, t.name + ".npy"), t);
    for (size_t k = 0; k < c.outputs.size(); ++k)
      write_reference_npy(options.dump_dir, tensors[size_t(c.outputs[k])], want[k]);
  }
  report_launch(launch, kernel_ms);
  report_call_launches(spec);
  report_set("reference_seconds", JsonWriter().value(reference_seconds).str());
  report_set("repeat", JsonWriter().value(repeat).str());
  times.end("report");
  times.report();
  give_device_buffers(tensors);
  return conclude(passed ? kExitPassed : kExitMismatch, verdict.cls, passed ? "" : verdict.evidence);
}

}  // namespace repro
