// ---------------------------------------------------------------------------------------------
// repro runtime: spec_info
//
// What the run knows of the spec: the harness's declarations (include/repro/harness.h: tensors,
// sizes, the launch) and what spec.yaml says at run time (spec_file.cuh: inits, the reference
// GEMM's operands, the checks). The run (harness_main) and the probe suite (probe) both work
// from it.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "grouped.cuh"
#include "stress.cuh"

#include <map>

namespace repro {

// Indices into SpecInfo::tensors; -1 where the reference has no such operand.
struct GemmOperands {
  int a = -1, b = -1, c = -1, bias = -1, out = -1;
  double alpha = 1.0, beta = 0.0;
  bool batched = false;
  // Grouped: L is the output's batches (G for masked and k_grouped, else 1), M A's rows, K A's
  // K (K_total for k_grouped), `groups` G.
  int64_t L = 1, M = 0, N = 0, K = 0, groups = 1;
  ScaleSpec scale_a, scale_b;          // reference.scale_a / scale_b; tensor -1: none
  bool accumulate = false;             // reference.accumulate: out starts as c before each launch
  GroupedLayout grouped = GroupedLayout::none;
  int group_metadata = -1;  // group_index, masked_m or k_sizes
};

// What the outputs are compared with: the runtime's fp64 GEMM (gemm, grouped_gemm), the user's
// host function (custom) or expected outputs saved as .npy (file).
enum class ReferenceOp { gemm, custom, file, attention };

// `op: attention`: tensor indices (-1: not given), the mask (0 none, 1 top-left, 2
// bottom-right) and the scale (0: 1 / sqrt(D)).
struct AttentionOperands {
  int q = -1, k = -1, v = -1, out = -1, lse = -1, cu_seqlens_q = -1, cu_seqlens_k = -1;
  // op: attention_backward: `out` is the forward's output (an input), lse an input too.
  int d_out = -1, dq = -1, dk = -1, dv = -1;
  bool backward() const { return dq >= 0; }
  int causal = 0;
  double softmax_scale = 0;
};

// `op: custom`, `op: file` and `op: attention`: every output is judged, localized by the
// launch's block.
struct CustomOperands {
  ReferenceOp op = ReferenceOp::gemm;
  AttentionOperands attention;
  std::vector<int> outputs;            // indices into SpecInfo::tensors, in declaration order
  std::vector<std::string> expected;   // op: file: each output's .npy (spec.yaml's folder joined)
  std::vector<int64_t> block;          // reference.block, in the first output's index order
  // reference.upstream: per output (position in `outputs`), the outputs it is computed from.
  std::vector<std::vector<int>> upstream;
  // op: attention: the reference runs on the device (attention_device.cuh), decided by the run
  // once the inputs are made; the note says how the last one went, for the report.
  bool reference_on_device = false;
  mutable std::string reference_note;
};

// The GEMM's extents, read off the tensors (A [L?, M, K], output [L?, M, N]), so that they follow
// the sizes the harness runs with.
struct GemmDims {
  int64_t L = 1, M = 0, N = 0, K = 0;
};

inline GemmDims gemm_dims(const std::vector<Tensor>& tensors, int a, int out, bool batched, GroupedLayout grouped) {
  const Tensor& A = tensors[size_t(a)];
  const Tensor& D = tensors[size_t(out)];
  GemmDims dims;
  if (grouped == GroupedLayout::k_grouped_blocks) {
    // A flat [M * K_total], D [G, M, N]: M from D, K_total from A.
    dims.L = D.shape[0], dims.M = D.shape[1], dims.N = D.shape[2];
    dims.K = dims.M > 0 ? A.shape[0] / dims.M : 0;
    return dims;
  }
  if (grouped != GroupedLayout::none) {
    // contiguous: A [M_total, K], D [M_total, N]; masked: A [G, M_max, K], D [G, M_max, N];
    // k_grouped: A [M, K_total], D [G, M, N]. G from D (or, contiguous, from B: set by the caller).
    dims.M = A.shape[A.rank - 2];
    dims.K = A.shape[A.rank - 1];
    dims.N = D.shape[D.rank - 1];
    dims.L = D.rank == 3 ? D.shape[0] : 1;
    return dims;
  }
  dims.M = D.rank >= 2 ? D.shape[D.rank - 2] : 1;
  dims.N = D.shape[D.rank - 1];
  dims.K = A.shape[A.rank - 1];
  dims.L = batched ? D.shape[0] : 1;
  return dims;
}

struct SpecInfo {
  const HarnessSpec* harness = nullptr;
  const char* name = "";
  std::string base_dir = ".";  // spec.yaml's folder: `file:` inits are relative to it
  std::vector<int64_t> sizes;  // in the harness's order
  std::vector<Tensor> tensors;  // names and dtypes first; shapes once the sizes are settled
  std::vector<Init> inits;      // per tensor, from spec.yaml (unused for outputs)
  GemmOperands gemm;
  CustomOperands custom;  // op: custom and op: file
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;  // tile_k 0: not given (probes use 32)
  std::string reference_provider = "auto";     // reference.provider: host | device | auto
  double rel_l2 = -1, rtol = -1, atol = -1;    // negative: the default for the output dtype
  int repeat = 2;
  double timeout_seconds = 10;
  std::string stress = "none";  // check.stress: none, bandwidth, l2
  int stress_sms = 0;           // check.stress_sms
  int built_cc_major = 0, built_cc_minor = 0;
  bool arch_specific = false;
};

// A kind: replay launch's cubin and params from spec.yaml, joined to its folder (spec_file.cuh
// sets them, replay.cuh reads them).
struct ReplayFiles {
  std::string cubin, params;
  std::string cubin_as_written;  // as spec.yaml gives it: what the report prints, no machine's path
};

// The files of the launch at `path`: "kernel", or "launches[1]" in a sequence, where every
// replayed launch has its own. A path spec.yaml gives none for holds empty names.
inline ReplayFiles& replay_files(const std::string& path) {
  static std::map<std::string, ReplayFiles> files;  // std::map: references stay put
  return files[path];
}

// --size NAME=VALUE; false for a name the spec does not declare.
inline bool set_size(SpecInfo& spec, const std::string& name, int64_t value) {
  for (int i = 0; i < spec.harness->size_count; ++i)
    if (name == spec.harness->size_names[i]) return spec.sizes[size_t(i)] = value, true;
  return false;
}

// Shapes and strides at the settled sizes (harness.cu computes them from the spec's shape
// expressions), and each input's init.
inline void make_tensors(SpecInfo& spec) {
  std::vector<TensorLayout> layouts(spec.tensors.size());
  spec.harness->layout(spec.sizes.data(), layouts.data());
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    Tensor& t = spec.tensors[i];
    const TensorLayout& l = layouts[i];
    t.rank = l.rank;
    for (int d = 0; d < 4; ++d) t.shape[d] = d < l.rank ? l.shape[d] : 0;
    if (l.explicit_strides) {
      for (int d = 0; d < 4; ++d) t.strides[d] = d < l.rank ? l.strides[d] : 0;
    } else {
      set_packed_strides(t, l.col_major);
    }
    if (!t.output) t.init = spec.inits[i];
  }
}

// A sequence's launches as one label: "partials<...> -> reduce<...>" (spec: launches).
inline const char* sequence_label(const SpecInfo& spec) {
  static std::string label;
  label.clear();
  for (int i = 0; i < spec.harness->launch_count; ++i)
    label += (i ? " -> " : "") + std::string(spec.harness->launch_steps[i].label);
  return label.c_str();
}

// The launches of the last call, one per launch of the sequence (spec: launches), or the one
// launch: what the report's `launches` lists.
inline std::vector<Launch>& last_call_launches() {
  static std::vector<Launch> launches;
  return launches;
}

// An operator's intermediates of lifetime `call` (and `persist` ones too when asked) made again
// as their init made them (the host keeps that content: intermediates are filled on the host,
// never replaced by probes or --ones), ordered on `stream` before the call's first launch.
inline void remake_intermediates(const std::vector<Tensor>& tensors, cudaStream_t stream, bool persistent_too) {
  for (const Tensor& t : tensors) {
    const bool remade = t.intermediate == Lifetime::call || (persistent_too && t.intermediate == Lifetime::persist);
    if (remade && t.storage_bytes() > 0)
      REPRO_CUDA_CHECK(cudaMemcpyAsync(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice, stream));
  }
}

// The tensors as harness.cu's launch functions see them: layouts and device memory.
inline std::vector<TensorView> tensor_views(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TensorView& v = views[i];
    v.name = t.name.c_str();
    v.dtype = t.dtype;
    v.rank = t.rank;
    for (int d = 0; d < 4; ++d) v.shape[d] = t.shape[d], v.strides[d] = t.strides[d];
    v.device = t.device;
  }
  return views;
}

// Launches the kernel under test through harness.cu over the tensors' device memory: one call of
// the operator, every launch of a sequence in order between `start` and `stop`.
inline Launch launch_kernel(const SpecInfo& spec, const std::vector<Tensor>& tensors, cudaStream_t stream,
                            cudaEvent_t start, cudaEvent_t stop) {
  const std::vector<TensorView> views = tensor_views(tensors);
  remake_intermediates(tensors, stream, /*persistent_too*/ false);
  // Under --stress every second launch runs beside the stressor (stress.cuh).
  stress_before_launch(stream);
  std::vector<Launch>& launches = last_call_launches();
  launches.clear();
  Launch launch;
  if (spec.harness->launch_count > 0) {
    REPRO_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < spec.harness->launch_count; ++i)
      launches.push_back(spec.harness->launch_steps[i].run(views.data(), spec.sizes.data(), stream));
    REPRO_CUDA_CHECK(cudaEventRecord(stop, stream));
    launch = launches.front();
    launch.label = sequence_label(spec);
  } else {
    launch = spec.harness->launch(views.data(), spec.sizes.data(), stream, start, stop);
    launches.push_back(launch);
  }
  stress_after_launch(stream);
  stress_state().last_grid_blocks = launch.grid.x * launch.grid.y * launch.grid.z;
  return launch;
}

inline bool traces(const SpecInfo& spec) { return spec.harness->read_trace != nullptr; }

inline void reset_trace(const SpecInfo& spec) {
  if (spec.harness->reset_trace) spec.harness->reset_trace();
}

// The traced stages after a launch (spec: trace).
inline std::vector<TraceReading> read_trace(const SpecInfo& spec) {
  std::vector<TraceReading> out;
  if (!traces(spec)) return out;
  TraceStage stages[64];
  const int count = spec.harness->read_trace(stages, 64);
  for (int i = 0; i < count && i < 64; ++i) {
    const TraceStage& s = stages[i];
    TraceReading reading;
    reading.name = s.name;
    reading.role = s.role;
    reading.absmax = s.absmax;
    reading.seen = s.seen;
    for (unsigned k = 0; k < s.samples && k < unsigned(kTraceSamples); ++k)
      reading.samples.push_back(TraceSample{s.value[k], s.row[k], s.col[k]});
    out.push_back(reading);
  }
  return out;
}

}  // namespace repro
