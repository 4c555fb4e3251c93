// ---------------------------------------------------------------------------------------------
// repro runtime: the library's one translation unit.
//
// Built once per (runtime content, nvcc, arch, host compiler) into librepro_runtime.a with the
// runtime's own fixed flags (build.sh and `repro build` give them; never the production ones),
// and linked into every harness. It defines what include/repro/harness.h and tma.h declare.
// ---------------------------------------------------------------------------------------------
#include "harness_main.cuh"
#include "replay.cuh"

namespace repro {

int harness_main(int argc, char** argv, const HarnessSpec& spec) { return run_harness(argc, argv, spec); }

int persistent_sm_count() {
  const StressState& s = stress_state();
  const int sms = current_device().sm_count;
  return s.current_stressed && s.requested_sms > 0 ? std::max(1, sms - s.requested_sms) : sms;
}

void reference_index_error(const ReferenceTensor& tensor, int count, const int64_t* indices, int dimension) {
  stop_on_reference_index(tensor, count, indices, dimension);
}

void fatal(int exit_code, const char* cls, const char* message) { fatal(exit_code, cls, std::string(message)); }

void cuda_call_failed(const char* call, const char* file, int line, cudaError_t status) {
  const std::string message = strprintf("CUDA error: %s failed at %s:%d: %s (%s)", call, file, line,
                                        cudaGetErrorName(status), cudaGetErrorString(status));
  std::fprintf(stderr, "%s\n", message.c_str());
  fatal(kExitCudaError, "fault", message);
}

}  // namespace repro
