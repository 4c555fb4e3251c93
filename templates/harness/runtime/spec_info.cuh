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

struct SpecInfo {
  const char* name = "";
  std::vector<Tensor> tensors;
  GemmOperands gemm;
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;  // tile_k 0: not given (probes use 32)
  double rel_l2 = -1, rtol = -1, atol = -1;  // negative: the default for the output dtype
  int repeat = 2;
  double timeout_seconds = 10;
  int built_cc_major = 0, built_cc_minor = 0;
  bool arch_specific = false;
  LaunchFunction launch = nullptr;
};

}  // namespace repro
