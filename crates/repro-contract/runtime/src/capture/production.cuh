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

// Writes zeros over all of every SM's shared memory: several CTAs per SM, each taking the most
// dynamic shared memory a block may opt into. Shared memory keeps what the last kernel on that
// SM left, so a kernel that reads shared memory it never wrote computes from whatever ran before
// it, in production and here alike.
__global__ void zero_shared_memory(unsigned words) {
  extern __shared__ uint4 words_of_smem[];
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) words_of_smem[i] = make_uint4(0, 0, 0, 0);
}

inline void zero_all_shared_memory(cudaStream_t stream) {
  int device = 0, optin = 0, sms = 0;
  REPRO_CUDA_CHECK(cudaGetDevice(&device));
  REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  REPRO_CUDA_CHECK(cudaFuncSetAttribute(zero_shared_memory, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  const unsigned bytes = unsigned(optin) / 16 * 16;
  zero_shared_memory<<<4 * sms, 1024, bytes, stream>>>(bytes / 16);
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cudaStreamSynchronize(stream));
}

struct ProductionDifference {
  const Tensor* tensor;
  int64_t differ = 0, first = -1;
  unsigned long long here = 0, production = 0;  // the bits of element `first`
};

// One launch on the captured inputs, its outputs compared with capture.after bit for bit.
inline std::vector<ProductionDifference> launch_against_production(SpecInfo& spec, cudaStream_t stream,
                                                                   cudaEvent_t start, cudaEvent_t stop, double timeout,
                                                                   bool zero_shared) {
  std::vector<Tensor>& tensors = spec.tensors;
  for (const Tensor& t : tensors)
    if (!t.output) REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  poison_device_outputs(tensors);
  if (zero_shared) zero_all_shared_memory(stream);
  const Launch launch = launch_kernel(spec, tensors, stream, start, stop);
  wait_for_kernel(stop, timeout, launch.label, describe(launch));
  std::vector<ProductionDifference> result;
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
    ProductionDifference d{&t};
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (std::memcmp(got.data() + t.logical_offset(i) * int64_t(bytes), want.data() + i * int64_t(bytes), bytes) == 0)
        continue;
      if (d.first < 0) {
        d.first = i;
        d.here = load_bits(t.dtype, got.data(), t.logical_offset(i));
        d.production = load_bits(t.dtype, want.data(), i);
      }
      ++d.differ;
    }
    result.push_back(d);
  }
  return result;
}

inline bool all_reproduced(const std::vector<ProductionDifference>& outputs) {
  for (const ProductionDifference& d : outputs)
    if (d.differ != 0) return false;
  return true;
}

// Whether the harness computes what production computed: one launch on the captured inputs,
// every output compared with capture.after bit for bit. When that fails, a second launch after
// zeroing every SM's shared memory: a kernel that reads shared memory it never wrote gives
// production's output only when it finds what production found there, and zeros are what a
// program whose earlier kernels use little shared memory leaves. Saying which of the two
// reproduced is itself a finding. Returns whether either did (true when nothing is compared).
inline bool check_production(SpecInfo& spec, const Options& options, cudaStream_t stream, cudaEvent_t start,
                             cudaEvent_t stop, double timeout) {
  bool any = false;
  for (const Tensor& t : spec.tensors) any = any || !t.capture_after.empty();
  if (!any) return true;
  const std::string skipped = inputs_not_captured(spec.tensors, options);
  if (!skipped.empty()) {
    std::printf("production  not compared: %s\n", skipped.c_str());
    report_set("production", "{\"compared\":false}");
    return true;
  }
  const std::vector<ProductionDifference> as_is = launch_against_production(spec, stream, start, stop, timeout, false);
  const bool reproduced = all_reproduced(as_is);
  std::vector<ProductionDifference> zeroed;
  if (!reproduced) zeroed = launch_against_production(spec, stream, start, stop, timeout, true);
  const bool with_zeroed_shared = !reproduced && all_reproduced(zeroed);
  JsonWriter w;
  w.begin_object();
  w.field("compared", true);
  w.key("outputs");
  w.begin_array();
  for (const ProductionDifference& d : as_is) {
    const Tensor& t = *d.tensor;
    if (d.differ == 0) {
      std::printf("production  %s: reproduced bit for bit (%lld elements equal production's output)\n", t.name.c_str(),
                  (long long)t.numel());
    } else if (with_zeroed_shared) {
      std::printf("production  %s: reproduced bit for bit once shared memory was zeroed before the launch; with the "
                  "shared memory the harness's earlier kernels left, %lld of %lld elements differ: the kernel reads "
                  "shared memory it never wrote\n",
                  t.name.c_str(), (long long)d.differ, (long long)t.numel());
    } else {
      std::printf("production  %s: NOT reproduced: %lld of %lld elements differ from production's output; the first, "
                  "element %lld, is 0x%llx here and 0x%llx in production\n",
                  t.name.c_str(), (long long)d.differ, (long long)t.numel(), (long long)d.first, d.here, d.production);
    }
    w.begin_object();
    w.field("name", t.name);
    w.field("elements", t.numel());
    w.field("differ", d.differ);
    w.end_object();
  }
  w.end_array();
  w.field("reproduced", reproduced || with_zeroed_shared);
  if (!reproduced) w.field("reproduced_with_shared_memory_zeroed", with_zeroed_shared);
  w.end_object();
  report_set("production", w.str());
  if (!reproduced && !with_zeroed_shared)
    std::printf("production  the harness does not compute what production computed (nor with shared memory zeroed "
                "first): the checks below judge the harness's launch, not production's (see docs/cli.md, repro "
                "capture)\n");
  return reproduced || with_zeroed_shared;
}

}  // namespace repro
