// ---------------------------------------------------------------------------------------------
// repro runtime: driver functions without -lcuda
//
// The few driver API functions the runtime calls (the TMA encoder, the error names) are looked
// up through the runtime (cudaGetDriverEntryPointByVersion), so the harness links no libcuda and
// runs with whatever driver is installed. Used by the TMA descriptors of a spec (tma.cuh) and by
// the emulated reference's own (emulated_gemm_tma.cuh).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device.cuh"

#include <cudaTypedefs.h>

namespace repro {

// A driver function by name, through the runtime (the harness links no libcuda): exit 4 naming
// it and `who` needs it if the driver lacks it.
template <typename Function>
Function driver_function(const char* name, int version, const char* who) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult query;
  const cudaError_t status = cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &query);
  if (status != cudaSuccess || query != cudaDriverEntryPointSuccess || fn == nullptr)
    fatal(kExitCudaError, "fault",
          strprintf("%s needs the driver's %s, and it has none (%s, query result %d)", who, name,
                    cudaGetErrorName(status), static_cast<int>(query)));
  return reinterpret_cast<Function>(fn);
}

// The driver's name for a CUresult ("CUDA_ERROR_INVALID_VALUE"), looked up like the encoder but
// never fatal: it names the error of a failure already being reported.
inline std::string cu_result_name(CUresult result) {
  static PFN_cuGetErrorName_v6000 get_name = nullptr;
  if (!get_name) {
    cudaDriverEntryPointQueryResult query;
    void* fn = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &fn, 6000, cudaEnableDefault, &query) == cudaSuccess &&
        query == cudaDriverEntryPointSuccess)
      get_name = reinterpret_cast<PFN_cuGetErrorName_v6000>(fn);
  }
  const char* text = nullptr;
  if (get_name && get_name(result, &text) == CUDA_SUCCESS && text) return text;
  return strprintf("CUresult %d", static_cast<int>(result));
}

}  // namespace repro
