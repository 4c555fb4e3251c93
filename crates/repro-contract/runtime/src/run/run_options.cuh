// ---------------------------------------------------------------------------------------------
// repro harness runtime: run_options
//
// What a run was asked for on the command line (parse_options in harness_main.cuh reads it),
// and where its wall time goes: shared by the GEMM run (harness_main) and the run of the other
// ops (custom.cuh).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "bench.cuh"
#include "device_buffers.cuh"
#include "spec_file.cuh"

namespace repro {

struct Options {
  bool ones = false;
  bool probe = false;
  std::vector<std::pair<std::string, std::string>> inits;  // --init T=PATTERN, in order
  std::vector<std::pair<std::string, int64_t>> sizes;      // --size NAME=VALUE, in order
  bool has_seed = false;
  uint64_t seed = 0;
  int repeat = -1;
  double timeout_seconds = -1;
  std::string json_path, dump_dir, emit_inputs_dir;
  std::string spec_path;  // --spec FILE; empty: the artifact's (default_spec_path)
  std::string reference;  // --reference host|device|emulated|auto; empty: the spec's reference.provider
  std::string reference_cache;  // --reference-cache DIR: reuse a reference of the same operands
  bool check_device_inputs = false;  // compare every element made on the device with the host's
  bool bench = false;     // --bench: time the kernel, check nothing (bench.cuh)
  BenchOptions bench_options;
  std::string bench_only_flag;  // --warmup or --flush-l2, when given: they need --bench
  std::string stress;    // --stress MODE; empty: the spec's check.stress
  int stress_sms = 0;    // --stress-sms N; 0: the spec's check.stress_sms
  int jitter_ns = 0;     // --jitter-ns N; 0: the default (stress.cuh)
  std::string queue_path;  // --queue FILE: a queue of checks in this process (queue.cuh)
};

// The option that makes this run's inputs other than the spec's own (--ones, --init, --seed,
// --size), or "" when they are the spec's: a reference file (an intermediate's) holds values for
// the spec's own inputs only.
inline const char* inputs_changed_by(const Options& options) {
  if (options.ones) return "--ones";
  if (!options.inits.empty()) return "--init";
  if (options.has_seed) return "--seed";
  if (!options.sizes.empty()) return "--size";
  return "";
}

// The device, after the inputs (which need none): the report's name, inputs and mode, then the
// banner and a context, created here rather than in the first copy. Returns 0 to go on, or the
// run's exit code when there is no usable device (it then ends as `Not run`).
inline int open_device(const SpecInfo& spec, const char* mode, const std::string& inputs_line,
                       const std::string& sizes_line) {
  DeviceInfo& device = current_device();
  const int device_status = require_device(&device, spec.built_cc_major, spec.built_cc_minor, spec.arch_specific,
                                          spec.harness->ptx);
  report_set("name", json_string(spec.name));
  report_set("inputs", json_string(inputs_line));
  report_set("mode", json_string(mode));
  if (device_status != 0) {
    std::printf("repro %s | no usable CUDA device: the harness is built and can run on a machine with one\n",
                spec.name);
    return conclude(device_status, "no_device", "no usable CUDA device");
  }
  report_set("device", device_json(device));
  std::printf("repro %s | %s\n", spec.name, device_summary(device).c_str());
  if (!sizes_line.empty()) std::printf("sizes   %s (--size; the spec says otherwise)\n", sizes_line.c_str());
  std::printf("inputs  %s\n", inputs_line.c_str());
  std::fflush(stdout);
  REPRO_CUDA_CHECK(cudaFree(nullptr));
  return 0;
}

// --stress and check.stress, with --stress-sms: set for every launch of the run (stress.cuh).
// --jitter-ns belongs to jitter, --stress-sms to the stressor kernels; jitter needs the kernel's
// delay points.
inline void apply_stress(const SpecInfo& spec, const HarnessSpec& harness, const Options& options, double timeout) {
  StressState& s = stress_state();
  parse_stress_mode(options.stress.empty() ? spec.stress : options.stress, &s.mode);
  s.requested_sms = options.stress_sms > 0 ? options.stress_sms : spec.stress_sms;
  s.timeout_seconds = timeout;
  if (options.jitter_ns > 0 && s.mode != StressMode::jitter)
    usage_error("--jitter-ns is the longest sleep of --stress jitter, and the run's stress is not jitter");
  if (options.jitter_ns > 0) s.jitter_ns = unsigned(options.jitter_ns);
  if (s.mode != StressMode::jitter) return;
  if (options.stress_sms > 0)
    usage_error("--stress-sms gives SMs to a stressor kernel, and --stress jitter runs none (it sleeps the kernel's "
                "own warps)");
  s.requested_sms = 0;  // a spec's stress_sms (for its own mode) takes no CTAs from a jittered launch
  if (harness.set_delays == nullptr)
    usage_error("--stress jitter: the kernel does not include repro_trace.cuh, so it has no repro::delay points to "
                "sleep at. Put repro::delay<true>(point) in a copy of the kernel where a thread could fall behind "
                "(after an arrival, before a read) and include the header (docs/instrumenting.md, \"Delay points\")");
  s.set_delays = harness.set_delays;
  s.read_delays = harness.read_delays;
}

inline bool is_random(InitKind kind) {
  return kind == InitKind::uniform || kind == InitKind::int_uniform || kind == InitKind::normal;
}

// --dump and --emit-inputs create the folder they are given.
inline void make_directories_or_die(const std::string& dir) {
  const std::string error = make_directories(dir);
  if (!error.empty()) usage_error(error);
}

inline void write_npy_or_die(const std::string& path, const Tensor& t) {
  std::string error;
  if (!write_npy(path, t, t.host.data(), &error)) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    exit_now(kExitUsage);
  }
}

// --init T=PATTERN and --seed N, applied to the spec's inits (--ones is the op's own).
inline void apply_init_options(std::vector<Tensor>& tensors, const Options& options) {
  for (const auto& override_init : options.inits) {
    Tensor* target = nullptr;
    std::string names;
    for (Tensor& t : tensors) {
      if (t.name == override_init.first) target = &t;
      if (is_input(t)) names += (names.empty() ? "" : ", ") + t.name;
    }
    if (target == nullptr)
      usage_error(strprintf("--init %s=...: no tensor `%s`; inputs are: %s", override_init.first.c_str(),
                            override_init.first.c_str(), names.c_str()));
    if (target->output)
      usage_error(strprintf("--init %s=...: `%s` is an output (it is poisoned before launch, not initialized)",
                            override_init.first.c_str(), override_init.first.c_str()));
    std::string error;
    if (!parse_init(override_init.second, &target->init, &error))
      usage_error(strprintf("--init %s=%s: %s", override_init.first.c_str(), override_init.second.c_str(),
                            error.c_str()));
  }
  if (options.has_seed)
    for (Tensor& t : tensors)
      if (is_random(t.init.kind)) t.init.seed = options.seed;
}

// --emit-inputs DIR: every input as .npy, then the run ends (no GPU needed).
inline int emit_inputs(const std::vector<Tensor>& tensors, const std::string& dir) {
  make_directories_or_die(dir);
  for (const Tensor& t : tensors)
    if (!t.output) write_npy_or_die(join_path(dir, t.name + ".npy"), t);
  return kExitPassed;
}

// --dump: `want` (the reference of `out`, logical row-major f64) as OUT_reference.npy.
inline void write_reference_npy(const std::string& dir, const Tensor& out, const std::vector<double>& want) {
  Tensor reference = out;
  reference.name = out.name + "_reference";
  reference.dtype = DType::f64;
  for (int64_t d = reference.rank - 1, stride = 1; d >= 0; --d) reference.strides[d] = stride, stride *= reference.shape[d];
  reference.host.assign(reinterpret_cast<const unsigned char*>(want.data()),
                        reinterpret_cast<const unsigned char*>(want.data() + want.size()));
  write_npy_or_die(join_path(dir, reference.name + ".npy"), reference);
}

// The report's `launch`: the shape the kernel was launched with and each launch's time.
// A launch's shape as the report writes it, into an open object: kernel, grid, block, cluster,
// smem_bytes.
inline void write_launch_shape(JsonWriter& w, const Launch& launch) {
  w.field("kernel", std::string(launch.label));
  w.key("grid").begin_array().value(launch.grid.x).value(launch.grid.y).value(launch.grid.z).end_array();
  w.key("block").begin_array().value(launch.block.x).value(launch.block.y).value(launch.block.z).end_array();
  w.key("cluster").begin_array().value(launch.cluster.x).value(launch.cluster.y).value(launch.cluster.z).end_array();
  w.field("smem_bytes", launch.smem_bytes);
}

inline void report_launch(const Launch& launch, const std::vector<double>& kernel_ms) {
  JsonWriter w;
  w.begin_object();
  write_launch_shape(w, launch);
  w.key("kernel_ms").begin_array();
  for (double ms : kernel_ms) w.value(ms);
  w.end_array();
  w.end_object();
  report_set("launch", w.str());
}

}  // namespace repro
