// ---------------------------------------------------------------------------------------------
// repro harness runtime: an operator's calls
//
// An operator is one launch or several (spec: launches), and may keep state between its calls in
// intermediate tensors (spec: intermediate, lifetime: persist): stream-K tile counters, split-K
// locks, a buffer "zeroed once at allocation". A check that repeats the operator judges each call
// against the reference, so that "right on the first call, wrong on the second" is named as such
// (docs/spec.md, "Operators of several kernels"), and reports the launches of a call one by one.
// When the outputs are wrong and some intermediates have references of their own (spec:
// tensors.X.reference), it runs the launches one at a time and names the first whose result is
// wrong (report_first_wrong_launch).
// ---------------------------------------------------------------------------------------------
#pragma once

#include <string>
#include <vector>

#include <repro/reference.h>

#include "device_inputs.cuh"
#include "report.cuh"
#include "run_options.cuh"
#include "spec_info.cuh"

namespace repro {

// An element a custom reference left unwritten: a NaN whose payload no arithmetic makes.
constexpr uint64_t kReferenceUnwrittenBits = 0x7FF5EF0000C0FFEEull;

// A tensor's values as f64, logical row-major: what a custom reference reads. From `storage`
// laid out as t is on the device (its host copy unless given).
inline std::vector<double> logical_values(const Tensor& t, const unsigned char* storage = nullptr) {
  if (storage == nullptr) storage = t.host.data();
  std::vector<double> values(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) values[size_t(i)] = decode(t.dtype, storage, t.logical_offset(i));
  return values;
}

// "D[3, 17]" for logical element i of t.
inline std::string element_name(const Tensor& t, int64_t i) {
  std::string index;
  for (int d = t.rank - 1; d >= 0; --d) {
    index = std::to_string(i % t.shape[d]) + (index.empty() ? "" : ", ") + index;
    i /= t.shape[d];
  }
  return t.name + "[" + index + "]";
}

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
    write_launch_shape(w, launch);
    w.end_object();
  }
  w.end_array();
  report_set("launches", w.str());
}

// ---- the first launch whose result is wrong (spec: tensors.X.reference) ----

// One referenced intermediate through a diagnosis: its reference values, and what it held after
// the launch that first changed it (its producer).
struct IntermediateTrace {
  int tensor = -1;
  std::vector<double> want;            // logical row-major, from its reference
  std::string unjudged;                // why it is not judged (a reference that left elements unwritten,
                                       // a reference file for other inputs than this run's)
  std::vector<unsigned char> initial;  // its storage as made from its init
  int producer = -1;                   // 0-based launch that first changed it; -1: none did
  int64_t wrong = 0, first_wrong = -1;
  double got_first = 0, want_first = 0;
};

// Tensor t as a reference function sees it: packed row-major over its f64 copy `values`,
// whatever the tensor's own strides.
inline ReferenceTensor reference_view(const Tensor& t, std::vector<double>& values, bool output, const double* given) {
  ReferenceTensor v;
  v.name = t.name.c_str();
  v.rank = t.rank;
  for (int d = 0; d < 4; ++d) v.shape[d] = d < t.rank ? t.shape[d] : 1, v.strides[d] = 0;
  for (int64_t d = t.rank - 1, stride = 1; d >= 0; --d) v.strides[d] = stride, stride *= t.shape[d];
  v.values = values.data();
  v.output = output;
  v.given = given;
  return v;
}

// Tensor t's storage on the device, copied back (the stream is idle).
inline std::vector<unsigned char> device_storage(const Tensor& t) {
  std::vector<unsigned char> storage(t.storage_bytes());
  if (!storage.empty()) REPRO_CUDA_CHECK(cudaMemcpy(storage.data(), t.device, storage.size(), cudaMemcpyDeviceToHost));
  return storage;
}

// An intermediate's reference file (spec: tensors.X.reference.file): its values for the spec's own
// inputs, in the intermediate's dtype, f32 or f64 (as op: file's expected outputs). Not judged
// when this run's inputs are not the spec's (`inputs_changed_by` names the option that changed
// them), nor when the file does not fit the intermediate: the kernel's verdict stands, and only
// this judgement is lost.
inline void intermediate_reference_file_values(const Tensor& t, const char* inputs_changed_by,
                                               IntermediateTrace* trace) {
  const std::string what = t.name + "'s reference file";
  if (inputs_changed_by[0] != '\0') {
    trace->unjudged = strprintf("%s holds its values for the spec's own inputs, and %s changed them", what.c_str(),
                                inputs_changed_by);
    return;
  }
  std::string error;
  bool misfit = false;
  if (!load_expected_values(t.reference_file, t, t.name + "'s reference", &trace->want, &misfit, &error))
    trace->unjudged = misfit ? strprintf("%s: %s (it must have the intermediate's shape, %s, and its dtype %s, or f32 "
                                         "or f64)",
                                         what.c_str(), error.c_str(), format_shape(t.rank, t.shape).c_str(),
                                         dtype_name(t.dtype))
                             : what + ": " + error;
}

// The intermediate's reference values: its function given every input as the kernels read them
// (copied back from the device: on the device path the host may not hold them) and the
// intermediate's elements as "not written" markers; or its file's.
inline void intermediate_reference_values(const std::vector<Tensor>& tensors, const IntermediateReference& reference,
                                          const char* inputs_changed_by, IntermediateTrace* trace) {
  if (reference.compute == nullptr) {
    intermediate_reference_file_values(tensors[size_t(reference.tensor)], inputs_changed_by, trace);
    return;
  }
  std::vector<std::vector<double>> values(tensors.size());
  std::vector<ReferenceTensor> views(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (int(i) == reference.tensor) {
      values[i].assign(size_t(t.numel()), double_from_bits(kReferenceUnwrittenBits));
    } else if (is_input(t)) {
      values[i] = logical_values(t, device_storage(t).data());
    }
    // Outputs and the other intermediates are not passed to the intermediate's function.
    views[i] = reference_view(t, values[i], int(i) == reference.tensor, nullptr);
  }
  reference.compute(views.data());
  const Tensor& t = tensors[size_t(reference.tensor)];
  std::vector<double>& want = values[size_t(reference.tensor)];
  int64_t unwritten = 0, first = -1;
  for (int64_t e = 0; e < t.numel(); ++e)
    if (double_bits(want[size_t(e)]) == kReferenceUnwrittenBits) unwritten += 1, first = first < 0 ? e : first;
  // Not a stop (exit 2) as for op: custom: the kernel's verdict stands, and only this judgement
  // is lost.
  if (unwritten > 0)
    trace->unjudged = strprintf("%s's reference wrote no value to %s (and %lld more of its %lld elements)",
                                t.name.c_str(), element_name(t, first).c_str(), (long long)(unwritten - 1),
                                (long long)t.numel());
  trace->want = std::move(want);
}

// Compares intermediate `t`'s storage with its reference, element by element, at the default
// tolerance of its dtype (as if it were an output).
inline void judge_intermediate(const Tensor& t, const std::vector<unsigned char>& storage, IntermediateTrace* trace) {
  const Tolerance tolerance = default_tolerance(t.dtype, t.dtype, t.dtype, reference_rms(trace->want));
  trace->wrong = 0, trace->first_wrong = -1;
  for (int64_t e = 0; e < t.numel(); ++e) {
    const double got = decode(t.dtype, storage.data(), t.logical_offset(e));
    const double want = trace->want[size_t(e)];
    const bool matches = (std::isnan(got) && std::isnan(want)) || element_matches(t.dtype, got, want, tolerance);
    if (matches) continue;
    if (trace->first_wrong < 0) trace->first_wrong = e, trace->got_first = got, trace->want_first = want;
    trace->wrong += 1;
  }
}

// What the report says of the first launch whose result is wrong.
struct LaunchDiagnosis {
  int first_wrong_launch = 0;  // 1-based; 0: none named
  std::string evidence;
};

// "launch 2 of 3 (label)".
inline std::string launch_name(const SpecInfo& spec, int launch) {
  return strprintf("launch %d of %d (%s)", launch + 1, spec.harness->launch_count,
                   spec.harness->launch_steps[launch].label);
}

// "A", "A and B", "A, B and C".
inline std::string name_list(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return list;
}

// Runs one call of the operator again, launch by launch, from intermediates made afresh from their
// inits (persistent ones too: the call starts as the check's first did) and poisoned outputs, and
// after each launch compares each referenced intermediate with its reference. An intermediate's
// producer is the first launch after which it differs from its init. The first launch whose
// result is wrong is the first producer of an intermediate that is wrong after it; when every
// referenced intermediate is right, the launches after the last producer, which turn right
// inputs into the wrong outputs `wrong_outputs`.
inline LaunchDiagnosis diagnose_launches(const SpecInfo& spec, const std::vector<Tensor>& tensors,
                                         const std::vector<std::string>& wrong_outputs, cudaStream_t stream,
                                         cudaEvent_t done, double timeout, const char* inputs_changed_by) {
  const HarnessSpec& harness = *spec.harness;
  REPRO_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<IntermediateTrace> traces(size_t(harness.intermediate_reference_count));
  for (int r = 0; r < harness.intermediate_reference_count; ++r) {
    traces[size_t(r)].tensor = harness.intermediate_references[r].tensor;
    intermediate_reference_values(tensors, harness.intermediate_references[r], inputs_changed_by, &traces[size_t(r)]);
  }
  // Every intermediate as its init made it, persistent ones too, every output poisoned.
  remake_intermediates(tensors, stream, /*persistent_too*/ true);
  poison_device_outputs(tensors);
  REPRO_CUDA_CHECK(cudaDeviceSynchronize());
  for (IntermediateTrace& trace : traces) trace.initial = device_storage(tensors[size_t(trace.tensor)]);

  const std::vector<TensorView> views = tensor_views(tensors);
  for (int launch = 0; launch < harness.launch_count; ++launch) {
    const Launch shape = harness.launch_steps[launch].run(views.data(), spec.sizes.data(), stream);
    REPRO_CUDA_CHECK(cudaEventRecord(done, stream));
    wait_for_kernel(done, timeout, harness.launch_steps[launch].label, describe(shape));
    for (IntermediateTrace& trace : traces) {
      if (trace.producer >= 0) continue;
      const Tensor& t = tensors[size_t(trace.tensor)];
      const std::vector<unsigned char> storage = device_storage(t);
      if (storage == trace.initial) continue;
      trace.producer = launch;
      if (trace.unjudged.empty()) judge_intermediate(t, storage, &trace);
    }
  }
  // An intermediate no launch changed is judged as it was left: its init.
  for (IntermediateTrace& trace : traces)
    if (trace.producer < 0 && trace.unjudged.empty()) judge_intermediate(tensors[size_t(trace.tensor)], trace.initial, &trace);

  LaunchDiagnosis diagnosis;
  std::string unjudged;
  for (const IntermediateTrace& trace : traces)
    if (!trace.unjudged.empty()) unjudged += "; " + trace.unjudged + ": not judged";
  // The first producer of a wrong intermediate, and what it wrote wrong.
  int first = -1;
  for (const IntermediateTrace& trace : traces)
    if (trace.unjudged.empty() && trace.wrong > 0 && trace.producer >= 0 && (first < 0 || trace.producer < first))
      first = trace.producer;
  if (first >= 0) {
    std::string wrote;
    for (const IntermediateTrace& trace : traces) {
      if (trace.producer != first || trace.wrong == 0 || !trace.unjudged.empty()) continue;
      const Tensor& t = tensors[size_t(trace.tensor)];
      wrote += strprintf("%sit wrote %s, and %lld of %lld values are wrong (%s = %s, reference %s)",
                         wrote.empty() ? "" : "; ", t.name.c_str(), (long long)trace.wrong, (long long)t.numel(),
                         element_name(t, trace.first_wrong).c_str(), format_value(trace.got_first).c_str(),
                         format_value(trace.want_first).c_str());
    }
    const int after = harness.launch_count - first - 1;
    diagnosis.first_wrong_launch = first + 1;
    diagnosis.evidence = launch_name(spec, first) + ": " + wrote +
                         (after == 0   ? ""
                          : after == 1 ? "; the launch after it reads it"
                                       : "; the launches after it read it") +
                         unjudged;
    return diagnosis;
  }
  // An intermediate that no launch wrote and that is not what its reference says: the launch
  // that should have written it is not known.
  std::vector<std::string> unwritten;
  for (const IntermediateTrace& trace : traces)
    if (trace.unjudged.empty() && trace.wrong > 0) unwritten.push_back(tensors[size_t(trace.tensor)].name);
  if (!unwritten.empty()) {
    const IntermediateTrace* trace = nullptr;
    for (const IntermediateTrace& t : traces)
      if (t.unjudged.empty() && t.wrong > 0 && trace == nullptr) trace = &t;
    const Tensor& t = tensors[size_t(trace->tensor)];
    diagnosis.evidence =
        strprintf("no launch wrote %s: after all %d launches %s as %s init made %s, and %lld of %lld values of %s differ "
                  "from the reference (%s = %s, reference %s)",
                  name_list(unwritten).c_str(), harness.launch_count, unwritten.size() == 1 ? "it holds" : "they hold",
                  unwritten.size() == 1 ? "its" : "their", unwritten.size() == 1 ? "it" : "them",
                  (long long)trace->wrong, (long long)t.numel(), t.name.c_str(),
                  element_name(t, trace->first_wrong).c_str(), format_value(trace->got_first).c_str(),
                  format_value(trace->want_first).c_str()) +
        unjudged;
    return diagnosis;
  }
  // Every judged intermediate is right: the launches after the last producer made the outputs
  // wrong from right inputs.
  int last_producer = -1;
  std::vector<std::string> right;
  for (const IntermediateTrace& trace : traces) {
    if (!trace.unjudged.empty()) continue;
    last_producer = std::max(last_producer, trace.producer);
    right.push_back(tensors[size_t(trace.tensor)].name);
  }
  if (right.empty()) {
    diagnosis.evidence = "not named: " + unjudged.substr(2);
    return diagnosis;
  }
  // A last producer that is the last launch leaves that launch, which may write the outputs too.
  const int from = std::min(last_producer + 1, harness.launch_count - 1);
  const int count = harness.launch_count - from;
  const std::string inputs = right.size() == 1 ? "input " + right[0] + " matches the reference"
                                               : "inputs " + name_list(right) + " match their references";
  const std::string outputs = wrong_outputs.size() == 1 ? "output " + wrong_outputs[0] + " does not"
                                                        : "outputs " + name_list(wrong_outputs) + " do not";
  diagnosis.first_wrong_launch = from + 1;
  if (count == 1) {
    diagnosis.evidence = launch_name(spec, from) + ": its " + inputs + ", its " + outputs;
  } else {
    std::string labels;
    for (int launch = from; launch < harness.launch_count; ++launch)
      labels += (labels.empty() ? "" : ", ") + std::string(harness.launch_steps[launch].label);
    diagnosis.evidence = strprintf("launches %d to %d of %d (%s): their ", from + 1, harness.launch_count,
                                   harness.launch_count, labels.c_str()) +
                         inputs + ", their " + outputs;
  }
  diagnosis.evidence += unjudged;
  return diagnosis;
}

// After a check's verdict: for an operator of several kernels whose outputs `wrong_outputs` are
// wrong and whose intermediates have references, the `launches` line and the report's
// `first_wrong_launch` and `launch_evidence` (docs/cli.md). Every operator of several kernels
// reports `first_wrong_launch`, 0 when nothing was diagnosed. `inputs_changed_by`: the option that
// made this run's inputs other than the spec's own (run_options.cuh), which reference files
// cannot judge; "" for the spec's own.
inline void report_first_wrong_launch(const SpecInfo& spec, const std::vector<Tensor>& tensors,
                                      const std::vector<std::string>& wrong_outputs, cudaStream_t stream,
                                      cudaEvent_t done, double timeout, const char* inputs_changed_by) {
  const HarnessSpec& harness = *spec.harness;
  if (harness.launch_count == 0) return;
  LaunchDiagnosis diagnosis;
  if (!wrong_outputs.empty() && harness.intermediate_reference_count > 0) {
    diagnosis = diagnose_launches(spec, tensors, wrong_outputs, stream, done, timeout, inputs_changed_by);
    std::printf("launches %s\n", diagnosis.evidence.c_str());
    report_set("launch_evidence", json_string(diagnosis.evidence));
  }
  report_set("first_wrong_launch", JsonWriter().value(diagnosis.first_wrong_launch).str());
}

}  // namespace repro
