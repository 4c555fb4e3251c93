// ---------------------------------------------------------------------------------------------
// repro harness runtime: spec_info
//
// What the spec-specific part of harness.cu hands the runtime: the tensors, the reference GEMM's
// operands, the checks and the launch function. The run (harness_main) and the probe suite
// (probe) both work from it.
// ---------------------------------------------------------------------------------------------
namespace repro {

using LaunchFunction = Launch (*)(std::vector<Tensor>& tensors, cudaStream_t stream, cudaEvent_t start,
                                  cudaEvent_t stop);

// Indices into SpecInfo::tensors; -1 where the reference has no such operand.
struct GemmOperands {
  int a = -1, b = -1, c = -1, bias = -1, out = -1;
  double alpha = 1.0, beta = 0.0;
  bool batched = false;
  int64_t L = 1, M = 0, N = 0, K = 0;
};

// The GEMM's extents, read off the tensors (A [L?, M, K], output [L?, M, N]), so that they follow
// the sizes the harness runs with.
struct GemmDims {
  int64_t L = 1, M = 0, N = 0, K = 0;
};

inline GemmDims gemm_dims(const std::vector<Tensor>& tensors, int a, int out, bool batched) {
  const Tensor& A = tensors[size_t(a)];
  const Tensor& D = tensors[size_t(out)];
  GemmDims dims;
  dims.M = D.rank >= 2 ? D.shape[D.rank - 2] : 1;
  dims.N = D.shape[D.rank - 1];
  dims.K = A.shape[A.rank - 1];
  dims.L = batched ? D.shape[0] : 1;
  return dims;
}

struct SpecInfo {
  const char* name = "";
  std::vector<Tensor> tensors;  // made by make_tensors once the sizes are settled
  std::vector<Tensor> (*make_tensors)() = nullptr;
  bool (*set_size)(const std::string& name, int64_t value) = nullptr;
  const char* sizes_fixed = "";  // why --size is refused, or empty
  GemmOperands gemm;
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;  // tile_k 0: not given (probes use 32)
  const char* reference_provider = "auto";  // reference.provider: host | device | auto
  double rel_l2 = -1, rtol = -1, atol = -1;  // negative: the default for the output dtype
  int repeat = 2;
  double timeout_seconds = 10;
  int built_cc_major = 0, built_cc_minor = 0;
  bool arch_specific = false;
  LaunchFunction launch = nullptr;
  // spec: trace. Null when the spec traces nothing.
  void (*reset_trace)() = nullptr;
  std::vector<TraceReading> (*read_trace)() = nullptr;
};

}  // namespace repro
