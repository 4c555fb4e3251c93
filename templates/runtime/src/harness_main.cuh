// ---------------------------------------------------------------------------------------------
// repro harness runtime: harness_main
//
// The run itself, the same for every spec: options, inputs, reference, launches with poisoned
// outputs and a watchdog, comparison, report. harness.cu hands over a HarnessSpec (its tensors,
// sizes and launch function); spec.yaml gives the rest (spec_file.cuh).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "bench.cuh"
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
  std::string reference;  // --reference host|device|auto; empty: the spec's reference.provider
  std::string reference_cache;  // --reference-cache DIR: reuse a reference of the same operands
  bool check_device_inputs = false;  // compare every element made on the device with the host's
  bool bench = false;     // --bench: time the kernel, check nothing (bench.cuh)
  BenchOptions bench_options;
  std::string bench_only_flag;  // --warmup or --flush-l2, when given: they need --bench
};

inline void print_usage(const char* argv0) {
  std::printf(
      "usage: %s [--ones] [--init T=PATTERN]... [--seed N] [--repeat N] [--timeout S] [--json FILE] [--dump DIR]\n"
      "  --ones             A = B = 1 (C, bias = 0): every output must equal alpha*K exactly\n"
      "  --probe            the probe suite: ones, K slices, row and column codes, identity, random; a verdict\n"
      "  --size NAME=VALUE  run at another value of one of the spec's sizes (repro sweep, repro shrink)\n"
      "  --init T=PATTERN   ones | zeros | iota | identity | uniform[:LO:HI] | int_uniform[:LO:HI] |\n"
      "                     normal[:MEAN:STD] | file:PATH   (PATH relative to spec.yaml's folder)\n"
      "  --seed N           seed of every random tensor\n"
      "  --repeat N         launch N times; outputs are compared bitwise between runs\n"
      "  --timeout S        seconds one launch may take before it counts as a hang (exit 5)\n"
      "  --reference WHERE  host | device | auto: where the fp64 reference GEMM runs (default: the spec's)\n"
      "  --reference-cache DIR  reuse the reference of a run with the same operands and GEMM, kept in DIR\n"
      "  --check-device-inputs  compare every input element made on the device with the host generator\n"
      "  --spec FILE        the resolved spec to run (default: the artifact's spec.yaml, found from here): inits,\n"
      "                     seeds, checks and the reference are read from it at run time\n"
      "  --json FILE        write the whole report as JSON\n"
      "  --dump DIR         write inputs, outputs and the reference as .npy into DIR\n"
      "  --emit-inputs DIR  write the generated inputs as .npy and exit (no GPU needed)\n"
      "  --bench            time the kernel instead of checking it: --warmup N launches (default 5), then\n"
      "                     --repeat N timed ones (default 20); --flush-l2 empties the L2 before each\n"
      "exit: 0 passed, 1 mismatch, 2 usage, 4 CUDA error/fault, 5 hang, 7 no usable device\n",
      argv0);
}

inline Options parse_options(int argc, char** argv) {
  Options options;
  auto value_of = [&](int& i, const char* flag) -> std::string {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos && arg.substr(0, eq) == flag) return arg.substr(eq + 1);
    if (i + 1 >= argc) usage_error(strprintf("%s needs a value", flag));
    return argv[++i];
  };
  auto number_of = [&](const std::string& text, const char* flag) -> double {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') usage_error(strprintf("%s takes a number, not `%s`", flag, text.c_str()));
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto is = [&](const char* flag) { return arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0; };
    if (arg == "--help" || arg == "-h") {
      print_usage(argv[0]);
      std::exit(kExitPassed);
    } else if (arg == "--ones") {
      options.ones = true;
    } else if (arg == "--probe") {
      options.probe = true;
    } else if (is("--init")) {
      const std::string v = value_of(i, "--init");
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) usage_error("--init takes T=PATTERN, e.g. --init B=identity");
      options.inits.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (is("--size")) {
      const std::string v = value_of(i, "--size");
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) usage_error("--size takes NAME=VALUE, e.g. --size M=129");
      const double n = number_of(v.substr(eq + 1), "--size");
      if (n < 1 || n != std::floor(n) || n > 9.0e15) usage_error("--size takes a positive integer value");
      options.sizes.emplace_back(v.substr(0, eq), static_cast<int64_t>(n));
    } else if (is("--seed")) {
      const double v = number_of(value_of(i, "--seed"), "--seed");
      if (v < 0 || v != std::floor(v)) usage_error("--seed takes a non-negative integer");
      options.has_seed = true;
      options.seed = static_cast<uint64_t>(v);
    } else if (is("--repeat")) {
      const double v = number_of(value_of(i, "--repeat"), "--repeat");
      if (v < 1 || v != std::floor(v)) usage_error("--repeat takes an integer >= 1");
      options.repeat = static_cast<int>(v);
    } else if (is("--timeout")) {
      options.timeout_seconds = number_of(value_of(i, "--timeout"), "--timeout");
      if (!(options.timeout_seconds > 0)) usage_error("--timeout takes a positive number of seconds");
    } else if (is("--reference")) {
      options.reference = value_of(i, "--reference");
      if (options.reference != "host" && options.reference != "device" && options.reference != "auto")
        usage_error(strprintf("--reference takes host, device or auto, not `%s`", options.reference.c_str()));
    } else if (arg == "--check-device-inputs") {
      options.check_device_inputs = true;
    } else if (is("--reference-cache")) {
      options.reference_cache = value_of(i, "--reference-cache");
    } else if (is("--spec")) {
      options.spec_path = value_of(i, "--spec");
    } else if (is("--json")) {
      options.json_path = value_of(i, "--json");
    } else if (is("--dump")) {
      options.dump_dir = value_of(i, "--dump");
    } else if (arg == "--bench") {
      options.bench = true;
    } else if (arg == "--flush-l2") {
      options.bench_options.flush_l2 = true;
      options.bench_only_flag = "--flush-l2";
    } else if (is("--warmup")) {
      const double v = number_of(value_of(i, "--warmup"), "--warmup");
      if (v < 0 || v != std::floor(v)) usage_error("--warmup takes an integer >= 0");
      options.bench_options.warmup = static_cast<int>(v);
      options.bench_only_flag = "--warmup";
    } else if (is("--emit-inputs")) {
      options.emit_inputs_dir = value_of(i, "--emit-inputs");
    } else {
      usage_error(strprintf("unknown option `%s`", arg.c_str()));
    }
  }
  if (options.probe && (options.ones || !options.inits.empty() || !options.dump_dir.empty()))
    usage_error("--probe chooses its own inputs: it cannot be combined with --ones, --init or --dump");
  if (options.bench && (options.probe || !options.dump_dir.empty()))
    usage_error("--bench times the kernel and checks nothing: it cannot be combined with --probe or --dump");
  if (!options.bench && !options.bench_only_flag.empty())
    usage_error(options.bench_only_flag + " times launches: it needs --bench");
  if (options.bench && options.repeat > 0) options.bench_options.repeat = options.repeat;
  return options;
}

// The folder of this executable: `file:` inputs in the spec are relative to it, so the artifact
// folder can be moved or bundled as a whole.
inline std::string executable_dir() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return ".";
  std::string path(buffer, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The artifact's spec.yaml: beside the executable (./build.sh), or one folder up (CMake's
// build/harness) or two (repro's .repro/build/harness-lineinfo).
inline std::string default_spec_path() {
  const std::string dir = executable_dir();
  for (const char* up : {"", "/..", "/../.."}) {
    const std::string candidate = dir + up + "/spec.yaml";
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return join_path(dir, "spec.yaml");
}

inline bool is_random(InitKind kind) {
  return kind == InitKind::uniform || kind == InitKind::int_uniform || kind == InitKind::normal;
}

// --ones, --init and --seed, applied to the spec's inits. Returns the "inputs" report line.
inline std::string apply_input_options(SpecInfo& spec, const Options& options) {
  std::vector<Tensor>& tensors = spec.tensors;
  if (options.ones) {
    for (int index : {spec.gemm.a, spec.gemm.b}) tensors[index].init = Init{InitKind::ones, 0, 0, 0, ""};
    for (int index : {spec.gemm.c, spec.gemm.bias})
      if (index >= 0) tensors[index].init = Init{InitKind::zeros, 0, 0, 0, ""};
  }
  for (const auto& override_init : options.inits) {
    Tensor* target = nullptr;
    std::string names;
    for (Tensor& t : tensors) {
      if (t.name == override_init.first) target = &t;
      if (!t.output) names += (names.empty() ? "" : ", ") + t.name;
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

  const GemmOperands& g = spec.gemm;
  const bool analytic = options.ones && options.inits.empty();
  if (analytic) {
    return strprintf("ones -> analytic %s == alpha*K == %s", tensors[g.out].name.c_str(),
                     format_value(g.alpha * static_cast<double>(g.K)).c_str());
  }
  std::string line;
  for (const Tensor& t : tensors) {
    if (t.output) continue;
    line += (line.empty() ? "" : ", ") + t.name + " " + describe_init(t.init);
  }
  return line;
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
    std::_Exit(kExitUsage);
  }
}

// The random-input tolerance: the output dtype's defaults (compare.cuh), where the spec's
// `check:` does not set its own.
inline Tolerance spec_tolerance(const SpecInfo& spec, double ref_rms) {
  const GemmOperands& g = spec.gemm;
  Tolerance tolerance = default_tolerance(spec.tensors[size_t(g.out)].dtype, spec.tensors[size_t(g.a)].dtype,
                                          spec.tensors[size_t(g.b)].dtype, ref_rms);
  if (spec.rel_l2 >= 0) tolerance.rel_l2 = spec.rel_l2;
  if (spec.rtol >= 0) tolerance.rtol = spec.rtol;
  if (spec.atol >= 0) tolerance.atol = spec.atol;
  return tolerance;
}

// auto: the device above 2^27 multiply-adds (512^3), where the host's fp64 GEMM starts to take
// longer than the device's fixed costs (a kernel, a copy back, the cross-check).
constexpr double kDeviceReferenceMinMacs = 134217728.0;

inline bool use_device_reference(const std::string& provider, const GemmOperands& g) {
  if (provider == "device") return true;
  if (provider == "host") return false;
  return double(g.L) * double(g.M) * double(g.N) * double(g.K) >= kDeviceReferenceMinMacs;
}

// Where a run's wall time goes, phase by phase (the `time` line and the report's `timings`):
// what to speed up when time-to-verdict matters (docs/performance.md).
struct PhaseTimes {
  std::chrono::steady_clock::time_point begin = std::chrono::steady_clock::now(), last = begin;
  std::vector<std::pair<const char*, double>> phases;
  void end(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    phases.emplace_back(phase, std::chrono::duration<double>(now - last).count());
    last = now;
  }
  void report() const {
    std::string line;
    JsonWriter w;
    w.begin_object();
    for (const auto& phase : phases) {
      line += strprintf("%s %.3f s  ", phase.first, phase.second);
      w.field(phase.first, phase.second);
    }
    const double total = std::chrono::duration<double>(last - begin).count();
    w.field("total", total);
    w.end_object();
    std::printf("time    %stotal %.3f s (in this process)\n", line.c_str(), total);
    report_set("timings", w.str());
  }
};

inline int run_harness(int argc, char** argv, const HarnessSpec& harness) {
  PhaseTimes times;
  set_command_line(argc, argv);
  const Options options = parse_options(argc, argv);
  SpecInfo spec;
  load_spec_file(options.spec_path.empty() ? default_spec_path() : options.spec_path, harness, &spec);
  if (!options.json_path.empty()) set_json_path(options.json_path);
  const int repeat = options.repeat > 0 ? options.repeat : spec.repeat;
  const double timeout = options.timeout_seconds > 0 ? options.timeout_seconds : spec.timeout_seconds;
  // Sizes first: every tensor and the GEMM's extents follow from them.
  std::string sizes_line;
  for (const auto& size : options.sizes) {
    if (harness.fixed_sizes != nullptr)
      usage_error(strprintf("--size %s=%lld: the sizes are compile-time constants in this harness: %s",
                            size.first.c_str(), (long long)size.second, harness.sizes_fixed_reason));
    if (!set_size(spec, size.first, size.second))
      usage_error(strprintf("--size %s=...: the spec declares no size `%s`", size.first.c_str(), size.first.c_str()));
    sizes_line += strprintf("%s%s=%lld", sizes_line.empty() ? "" : " ", size.first.c_str(), (long long)size.second);
  }
  make_tensors(spec);
  // A leading batch dimension on the output makes the GEMM batched (as repro resolves it).
  spec.gemm.batched = spec.tensors[size_t(spec.gemm.out)].rank == 3;
  {
    const GemmDims dims = gemm_dims(spec.tensors, spec.gemm.a, spec.gemm.out, spec.gemm.batched);
    spec.gemm.L = dims.L, spec.gemm.M = dims.M, spec.gemm.N = dims.N, spec.gemm.K = dims.K;
  }
  if (!sizes_line.empty()) report_set("sizes", json_string(sizes_line));
  const GemmOperands& g = spec.gemm;
  std::vector<Tensor>& tensors = spec.tensors;
  Tensor& out = tensors[g.out];

  // Inputs first: they need no GPU, so a spec's input problems show on any machine.
  std::string inputs_line = apply_input_options(spec, options);
  const bool analytic = options.ones && options.inits.empty();
  const bool device_reference =
      !analytic && use_device_reference(options.reference.empty() ? spec.reference_provider : options.reference, g);
  // The device path (device_inputs.cuh, device_compare.cuh): with the reference on the device,
  // the inputs are made there too and the output compared there; the host sees sums, samples,
  // and the whole output only when something failed. Probes, --dump and --emit-inputs need the
  // inputs on the host, and take the host path.
  const bool device_path = device_reference && !options.probe && !options.bench && options.dump_dir.empty() &&
                           options.emit_inputs_dir.empty();
  if (options.check_device_inputs && !device_path)
    usage_error("--check-device-inputs checks inputs made on the device, which happens with the device reference "
                "(--reference device, or auto at large sizes) and random inputs, without --probe, --dump or --bench");
  if (options.bench) inputs_line += " (timing only: nothing is checked)";
  else if (!analytic)
    inputs_line += device_path        ? " -> made on the device, fp64 device reference, compared on the device"
                   : device_reference ? " -> fp64 device reference"
                                      : " -> fp64 host reference";
  const std::string& base_dir = spec.base_dir;
  for (Tensor& t : tensors) {
    if (device_path && is_generated_input(t)) continue;  // made on the device, after the context
    std::string error;
    if (!fill_host(t, base_dir, &error)) usage_error(strprintf("tensor %s: %s", t.name.c_str(), error.c_str()));
  }
  times.end("inputs");
  if (!options.emit_inputs_dir.empty()) {
    make_directories_or_die(options.emit_inputs_dir);
    for (const Tensor& t : tensors)
      if (!t.output) write_npy_or_die(join_path(options.emit_inputs_dir, t.name + ".npy"), t);
    return kExitPassed;
  }

  DeviceInfo& device = current_device();
  const int device_status = require_device(&device, spec.built_cc_major, spec.built_cc_minor, spec.arch_specific,
                                          spec.harness->ptx);
  report_set("name", json_string(spec.name));
  report_set("inputs", json_string(inputs_line));
  report_set("mode", json_string(options.ones && options.inits.empty() ? "ones" : "reference"));
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
  REPRO_CUDA_CHECK(cudaFree(nullptr));  // the context, created here rather than in the first copy
  times.end("context");

  // Device buffers first: the device reference reads the inputs there. Outputs are poisoned
  // before every launch (poison_device_outputs).
  for (Tensor& t : tensors) {
    REPRO_CUDA_CHECK(cudaMalloc(&t.device, std::max<size_t>(t.storage_bytes(), 1)));
    if (t.output) continue;
    if (device_path && is_generated_input(t)) generate_on_device(t);
    else REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  }
  if (device_path) {
    REPRO_CUDA_CHECK(cudaDeviceSynchronize());
    int64_t checked = 0;
    for (const Tensor& t : tensors)
      if (is_generated_input(t)) checked += check_device_inputs(t, options.check_device_inputs);
    std::printf("inputs  made on the device; %lld elements checked against the host generator, bit for bit%s\n",
                (long long)checked, options.check_device_inputs ? " (every element: --check-device-inputs)" : "");
  }
  times.end("uploads");

  cudaStream_t stream;
  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  if (options.bench) {
    Launch launch;
    const BenchResult result = bench_kernel(spec, options.bench_options, stream, start, stop, timeout, &launch);
    times.end("launches");
    std::printf("launch  %s\n", describe(launch).c_str());
    report_bench(result, options.bench_options, spec);
    times.report();
    for (Tensor& t : tensors) cudaFree(t.device);
    return conclude_timed();
  }

  // The reference comes before the kernel: a kernel that kills the context still leaves one.
  GemmProblem problem;
  problem.a = &tensors[g.a];
  problem.b = &tensors[g.b];
  problem.c = g.c >= 0 ? &tensors[g.c] : nullptr;
  problem.bias = g.bias >= 0 ? &tensors[g.bias] : nullptr;
  problem.out = &out;
  problem.alpha = g.alpha;
  problem.beta = g.beta;
  problem.L = g.L;
  problem.M = g.M;
  problem.N = g.N;
  problem.K = g.K;
  problem.batched = g.batched;
  std::vector<double> want;
  double* want_device = nullptr;  // the device path's reference, [L][M][N]
  const int64_t output_count = problem.L * problem.M * problem.N;
  const auto reference_start = std::chrono::steady_clock::now();
  std::string reference_line;
  ReferenceCache cache;
  bool from_cache = false;
  // The device path does not cache: the device recomputes the reference faster than a disk
  // reads it back (8192^2 doubles are 512 MiB).
  if (!analytic && !device_path && !options.reference_cache.empty()) {
    cache.dir = options.reference_cache;
    cache.key = reference_key(problem);
  }
  if (analytic) {
    analytic_ones(problem, &want);
  } else if ((from_cache = cache.load(size_t(problem.L * problem.M * problem.N), &want))) {
    reference_line = strprintf("fp64 reference from the cache, %.2f s (the same operands and GEMM as an earlier run: %s)",
                               seconds_since(reference_start), cache.path().c_str());
    report_set("reference_provider", json_string("cache"));
  } else if (device_reference) {
    // Kept on the device on the device path; copied back for the probes and --dump.
    const DeviceReference reference = compute_device_reference(problem);
    want_device = reference.values;
    std::string where = "kept on the device";
    if (!device_path) {
      const auto copy_start = std::chrono::steady_clock::now();
      want.resize(size_t(output_count));
      REPRO_CUDA_CHECK(cudaMemcpy(want.data(), want_device, want.size() * sizeof(double), cudaMemcpyDeviceToHost));
      cudaFree(want_device);
      want_device = nullptr;
      where = strprintf("copied back in %.2f s", seconds_since(copy_start));
    }
    reference_line = strprintf(
        "fp64 device GEMM (%s), %.1f ms, %s; host cross-check of %lld outputs: their rows and columns fetched in "
        "%.3f s, recomputed while the GEMM ran (%.3f s more), max difference %.1e of the terms' magnitude",
        reference.engine.c_str(), reference.kernel_ms, where.c_str(), (long long)reference.check.samples,
        reference.fetch_seconds, reference.check_seconds, reference.check.max_relative);
    report_set("reference_kernel_ms", JsonWriter().value(reference.kernel_ms).str());
    report_set("reference_provider", json_string("device"));
  } else {
    reference_gemm(problem, &want);
    reference_line = strprintf("fp64 host GEMM, %u threads, %.2f s", std::max(1u, std::thread::hardware_concurrency()),
                               seconds_since(reference_start));
    report_set("reference_provider", json_string("host"));
  }
  if (!analytic && !from_cache && !cache.dir.empty())
    reference_line += "; " + cache.store(want);
  const double reference_seconds = seconds_since(reference_start);
  times.end("reference");

  if (options.probe) {
    ProbeContext context{&spec, stream, start, stop, timeout, std::max(2, repeat), Launch(), {} };
    std::vector<std::vector<unsigned char>> spec_inputs;
    for (const Tensor& t : tensors) spec_inputs.push_back(t.host);
    const int code = run_probes(spec, context, want, spec_tolerance(spec, reference_rms(want)), spec_inputs);
    for (Tensor& t : tensors) cudaFree(t.device);
    return code;
  }

  Launch launch;
  std::vector<TraceReading> trace;  // stages read after the first launch (spec: trace)
  std::vector<double> kernel_ms;
  std::vector<unsigned char> first_run;
  const double ref_rms = device_path ? device_reference_rms(out, want_device, output_count) : reference_rms(want);
  Tolerance tolerance = spec_tolerance(spec, ref_rms);
  tolerance.exact = analytic;
  RunDifferences repeat_differences;  // the most any later run differs from the first
  void* first_run_device = nullptr;   // the device path's copy of the first run's output
  int64_t device_differences_seen = 0;
  if (device_path && repeat > 1) REPRO_CUDA_CHECK(cudaMalloc(&first_run_device, std::max<size_t>(out.storage_bytes(), 1)));
  for (int run = 0; run < repeat; ++run) {
    poison_device_outputs(tensors);
    if (run == 0) reset_trace(spec);
    launch = launch_kernel(spec, tensors, stream, start, stop);
    wait_for_kernel(stop, timeout, launch.label, describe(launch));
    if (run == 0) trace = read_trace(spec);
    float ms = 0;
    REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    kernel_ms.push_back(ms);
    if (device_path) {
      if (run == 0 && first_run_device != nullptr)
        REPRO_CUDA_CHECK(cudaMemcpy(first_run_device, out.device, out.storage_bytes(), cudaMemcpyDeviceToDevice));
      else if (run > 0)
        device_differences_seen = std::max(device_differences_seen, device_differences(out, first_run_device));
      continue;
    }
    for (Tensor& t : tensors)
      if (t.output) REPRO_CUDA_CHECK(cudaMemcpy(t.host.data(), t.device, t.storage_bytes(), cudaMemcpyDeviceToHost));
    if (run == 0) {
      first_run = out.host;
    } else {
      keep_most(repeat_differences, run_differences(out, first_run, out.host, want, tolerance));
    }
  }
  times.end("launches");
  // Report the first run's output (later runs only serve the bitwise comparison). The device
  // path has it on the device.
  std::vector<unsigned char> last_run;
  if (!device_path) {
    last_run = out.host;
    out.host = first_run;
  }

  std::vector<double> sorted_ms = kernel_ms;
  std::sort(sorted_ms.begin(), sorted_ms.end());
  const size_t runs = sorted_ms.size();
  const double median_ms = 0.5 * (sorted_ms[(runs - 1) / 2] + sorted_ms[runs / 2]);

  Comparison comparison;
  std::string compared_where = "host";
  if (device_path) {
    comparison = device_comparison(out, want_device, g.batched ? g.L : 1, g.M, g.N, tolerance, spec.tile_m,
                                   spec.tile_n, ref_rms);
    compared_where = "device";
    if (!comparison.passed || device_differences_seen > 0) {
      // Something to locate: the reference and the output come back for the host's analysis
      // (the first run's output, and the last run's against it).
      compared_where = "device, then host (to locate the failure)";
      want.resize(size_t(output_count));
      REPRO_CUDA_CHECK(cudaMemcpy(want.data(), want_device, want.size() * sizeof(double), cudaMemcpyDeviceToHost));
      REPRO_CUDA_CHECK(cudaMemcpy(out.host.data(), out.device, out.storage_bytes(), cudaMemcpyDeviceToHost));
      if (first_run_device != nullptr) {
        last_run = out.host;
        REPRO_CUDA_CHECK(cudaMemcpy(out.host.data(), first_run_device, out.storage_bytes(), cudaMemcpyDeviceToHost));
        repeat_differences = run_differences(out, out.host, last_run, want, tolerance);
      }
      comparison = compare_output(out, want, g.batched ? g.L : 1, g.M, g.N, tolerance, spec.tile_m, spec.tile_n);
    }
  } else {
    comparison = compare_output(out, want, g.batched ? g.L : 1, g.M, g.N, tolerance, spec.tile_m, spec.tile_n);
  }
  if (first_run_device != nullptr) cudaFree(first_run_device);
  if (want_device != nullptr) cudaFree(want_device);
  report_set("compared_on", json_string(compared_where));
  times.end("compare");

  std::printf("launch  %s   kernel %.3f ms%s\n", describe(launch).c_str(), median_ms,
              repeat > 1 ? strprintf(" (median of %d)", repeat).c_str() : "");
  if (!analytic) std::printf("ref     %s\n", reference_line.c_str());
  print_comparison_line(out.name.c_str(), comparison);
  if (device_path) std::printf("compare on the %s\n", compared_where.c_str());
  if (!trace.empty()) {
    print_trace(trace, analytic, double(g.K), g.alpha);
    JsonWriter w;
    w.begin_array();
    for (const TraceReading& s : trace) {
      w.begin_object();
      w.field("name", s.name);
      w.field("role", std::string(trace_role_name(s.role)));
      w.field("absmax", s.absmax);
      w.field("seen", s.seen);
      w.end_object();
    }
    w.end_array();
    report_set("trace", w.str());
    if (analytic) {
      const Pattern stage = trace_verdict(trace, double(g.K), g.alpha);
      std::printf("trace   stage %s: %s\n", stage.cls.c_str(), stage.evidence.c_str());
      report_set("trace_stage", json_string(stage.cls));
      report_set("trace_evidence", json_string(stage.evidence));
    }
  }
  if (repeat > 1) {
    if (repeat_differences.total == 0)
      std::printf("repeat  %d runs, outputs bitwise identical\n", repeat);
    else
      std::printf("repeat  %d runs: %lld outputs differ from the first run (%lld of them right in no run)\n", repeat,
                  static_cast<long long>(repeat_differences.total), static_cast<long long>(repeat_differences.stale));
  }
  const bool passed = comparison.passed && repeat_differences.total == 0;
  Pattern pattern;
  if (!passed) {
    print_mismatches(out.name.c_str(), comparison, g.batched);
    std::printf("%s", format_heatmap(comparison).c_str());
    // Stale reads (outputs wrong in every run) leave the pattern to the structure of the errors;
    // a race (is_race) is the pattern.
    const bool race = is_race(repeat_differences);
    pattern = classify(comparison, race ? repeat_differences.total : 0, tolerance);
    if (repeat_differences.total > 0 && !race)
      pattern.evidence += "; " + stale_note(repeat_differences, "");
    std::printf("pattern %s: %s\n", pattern.cls.c_str(), pattern.evidence.c_str());
  }

  if (!options.dump_dir.empty()) {
    make_directories_or_die(options.dump_dir);
    for (const Tensor& t : tensors) write_npy_or_die(join_path(options.dump_dir, t.name + ".npy"), t);
    Tensor reference = out;
    reference.name = out.name + "_reference";
    reference.dtype = DType::f64;
    for (int64_t d = reference.rank - 1, stride = 1; d >= 0; --d) {
      reference.strides[d] = stride;
      stride *= reference.shape[d];
    }
    reference.host.assign(reinterpret_cast<const unsigned char*>(want.data()),
                          reinterpret_cast<const unsigned char*>(want.data() + want.size()));
    write_npy_or_die(join_path(options.dump_dir, reference.name + ".npy"), reference);
    if (repeat > 1) {
      Tensor last = out;
      last.name = out.name + "_last_run";
      last.host = last_run;
      write_npy_or_die(join_path(options.dump_dir, last.name + ".npy"), last);
    }
  }

  const int exit_code = passed ? kExitPassed : kExitMismatch;
  {
    JsonWriter w;
    w.begin_object();
    w.field("kernel", std::string(launch.label));
    w.key("grid").begin_array().value(launch.grid.x).value(launch.grid.y).value(launch.grid.z).end_array();
    w.key("block").begin_array().value(launch.block.x).value(launch.block.y).value(launch.block.z).end_array();
    w.key("cluster").begin_array().value(launch.cluster.x).value(launch.cluster.y).value(launch.cluster.z).end_array();
    w.field("smem_bytes", launch.smem_bytes);
    w.key("kernel_ms").begin_array();
    for (double ms : kernel_ms) w.value(ms);
    w.end_array();
    w.end_object();
    report_set("launch", w.str());
  }
  if (!analytic) report_set("reference_seconds", JsonWriter().value(reference_seconds).str());
  {
    JsonWriter w;
    w.begin_object();
    w.field("exact", tolerance.exact);
    w.field("rel_l2", tolerance.rel_l2);
    w.field("rtol", tolerance.rtol);
    w.field("atol", tolerance.atol);
    w.end_object();
    report_set("tolerance", w.str());
  }
  {
    JsonWriter w;
    write_comparison_json(w, out.name, comparison);
    report_set("output", w.str());
  }
  report_set("repeat", JsonWriter().value(repeat).str());
  report_set("repeat_differences", JsonWriter().value(repeat_differences.total).str());
  report_set("repeat_stale_differences", JsonWriter().value(repeat_differences.stale).str());
  report_set("repeat_wrong", JsonWriter().value(repeat_differences.wrong).str());
  if (!passed) report_set("evidence", json_string(pattern.evidence));

  times.end("report");
  times.report();
  for (Tensor& t : tensors) cudaFree(t.device);
  return conclude(exit_code, pattern.cls, passed ? "" : pattern.evidence);
}

}  // namespace repro
