// ---------------------------------------------------------------------------------------------
// repro runtime: a captured launch's own output (spec: capture)
//
// A spec that `repro capture` wrote carries production's outputs around its launch:
// `capture.before`, what each output held before it (the run starts its outputs from these
// instead of the poison, since production's kernel may have read or kept them), and
// `capture.after`, what the launch left. Before the usual checks, the run launches once on the
// captured inputs and compares every output with `after` bit for bit: the first thing a
// maintainer wants to know is whether the standalone harness is production's bug at all.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "run_options.cuh"

namespace repro {

// The outputs' `capture.before` contents, on the device beside each output: poison_device_outputs
// copies them in before every launch of the run instead of poisoning. Probes keep the poison.
inline void load_capture_before(std::vector<Tensor>& tensors, const std::string& base_dir) {
  for (Tensor& t : tensors) {
    if (!t.output || t.capture_before.empty()) continue;
    std::vector<unsigned char> logical;
    std::string error;
    const std::string path = resolve_path(base_dir, t.capture_before);
    if (!load_tensor_file(path, t.name.c_str(), t.dtype, t.rank, t.shape, &logical, &error))
      usage_error("capture.before." + t.name + ": " + error);
    std::vector<unsigned char> storage(t.storage_bytes(), 0);
    const size_t bytes = dtype_bytes(t.dtype);
    for (int64_t i = 0; i < t.numel(); ++i)
      std::memcpy(storage.data() + t.logical_offset(i) * int64_t(bytes), logical.data() + i * int64_t(bytes), bytes);
    REPRO_CUDA_CHECK(cudaMalloc(&t.initial_device, std::max<size_t>(storage.size(), 1)));
    REPRO_CUDA_CHECK(cudaMemcpy(t.initial_device, storage.data(), storage.size(), cudaMemcpyHostToDevice));
  }
}

// Why the run's inputs are not production's, or "" when they are: every input read from a file,
// as repro capture wrote them, and no option that replaces them.
inline std::string inputs_not_captured(const std::vector<Tensor>& tensors, const Options& options) {
  if (options.ones) return "--ones replaces the captured inputs";
  if (!options.inits.empty()) return "--init replaces captured inputs";
  for (const Tensor& t : tensors)
    if (!t.output && t.init.kind != InitKind::file) return "input " + t.name + " is not read from a file";
  return "";
}

// One launch on the captured inputs, every output compared with capture.after bit for bit.
// Returns whether all were reproduced (true when there is nothing to compare).
inline bool check_production(SpecInfo& spec, const Options& options, cudaStream_t stream, cudaEvent_t start,
                             cudaEvent_t stop, double timeout) {
  std::vector<Tensor>& tensors = spec.tensors;
  bool any = false;
  for (const Tensor& t : tensors) any = any || !t.capture_after.empty();
  if (!any) return true;
  const std::string skipped = inputs_not_captured(tensors, options);
  if (!skipped.empty()) {
    std::printf("production  not compared: %s\n", skipped.c_str());
    report_set("production", "{\"compared\":false}");
    return true;
  }
  for (const Tensor& t : tensors)
    if (!t.output) REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  poison_device_outputs(tensors);
  const Launch launch = launch_kernel(spec, tensors, stream, start, stop);
  wait_for_kernel(stop, timeout, launch.label, describe(launch));
  bool all = true;
  JsonWriter w;
  w.begin_object();
  w.field("compared", true);
  w.key("outputs");
  w.begin_array();
  for (const Tensor& t : tensors) {
    if (t.capture_after.empty()) continue;
    std::vector<unsigned char> want;
    std::string error;
    if (!load_tensor_file(resolve_path(spec.base_dir, t.capture_after), t.name.c_str(), t.dtype, t.rank, t.shape, &want,
                          &error))
      usage_error("capture.after." + t.name + ": " + error);
    std::vector<unsigned char> got(t.storage_bytes());
    REPRO_CUDA_CHECK(cudaMemcpy(got.data(), t.device, got.size(), cudaMemcpyDeviceToHost));
    const size_t bytes = dtype_bytes(t.dtype);
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (std::memcmp(got.data() + t.logical_offset(i) * int64_t(bytes), want.data() + i * int64_t(bytes), bytes) == 0)
        continue;
      if (first < 0) first = i;
      ++differ;
    }
    all = all && differ == 0;
    if (differ == 0) {
      std::printf("production  %s: reproduced bit for bit (%lld elements equal production's output)\n", t.name.c_str(),
                  (long long)t.numel());
    } else {
      std::printf("production  %s: NOT reproduced: %lld of %lld elements differ from production's output; the first, "
                  "element %lld, is 0x%llx here and 0x%llx in production\n",
                  t.name.c_str(), (long long)differ, (long long)t.numel(), (long long)first,
                  (unsigned long long)load_bits(t.dtype, got.data(), t.logical_offset(first)),
                  (unsigned long long)load_bits(t.dtype, want.data(), first));
    }
    w.begin_object();
    w.field("name", t.name);
    w.field("elements", t.numel());
    w.field("differ", differ);
    w.end_object();
  }
  w.end_array();
  w.field("reproduced", all);
  w.end_object();
  report_set("production", w.str());
  if (!all)
    std::printf("production  the harness does not compute what production computed: the checks below judge the "
                "harness's launch, not production's (see docs/cli.md, repro capture)\n");
  return all;
}

}  // namespace repro
