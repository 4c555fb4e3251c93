// ---------------------------------------------------------------------------------------------
// repro runtime: TMA descriptors (declared in include/repro/tma.h)
//
// The encoder is looked up through the runtime (driver.cuh), so the harness needs no -lcuda and
// runs with whatever driver is installed. repro checked the hardware rules when it read the spec;
// a failing encode is still named with its CUresult.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "driver.cuh"
#include "launch.cuh"

#include <repro/tma.h>

namespace repro {

template <typename T>
inline std::string tma_list(const T* values, cuuint32_t count) {
  std::string out = "{";
  for (cuuint32_t i = 0; i < count; ++i)
    out += strprintf("%s%llu", i ? ", " : "", static_cast<unsigned long long>(values[i]));
  return out + "}";
}

// "map_a = A (bf16): dims {520, 1000} [K, M] strides {1040} B, box {64, 128}, ..."
inline std::string describe(const TmaRequest& r) {
  return strprintf("%s = %s (%s): dims %s [%s] innermost first, strides %s B, box %s, element strides %s, "
                   "swizzle %s, interleave %s, l2 promotion %s, oob fill %s",
                   r.name, r.tensor, r.data_type_name, tma_list(r.dims, r.rank).c_str(), r.dim_names,
                   tma_list(r.strides_bytes, r.rank - 1).c_str(), tma_list(r.box, r.rank).c_str(),
                   tma_list(r.element_strides, r.rank).c_str(), r.swizzle_name, r.interleave_name,
                   r.l2_promotion_name, r.oob_fill_name);
}

inline std::string json(const TmaRequest& r) {
  JsonWriter w;
  w.begin_object();
  w.field("name", std::string(r.name));
  w.field("tensor", std::string(r.tensor));
  w.field("describe", describe(r));
  w.end_object();
  return w.str();
}

void set_tma_layout(TmaRequest& request, const TensorView& tensor, const int* order, int rank) {
  const int64_t bytes = int64_t(dtype_bytes(tensor.dtype));
  for (int i = 0; i < rank; ++i) {
    request.dims[i] = cuuint64_t(tensor.shape[order[i]]);
    if (i > 0) request.strides_bytes[i - 1] = cuuint64_t(tensor.strides[order[i]] * bytes);
  }
}

// Encodes `request` over `base` (the tensor's device memory). Printed on first use.
CUtensorMap encode_tma(const TmaRequest& request, void* base) {
  static const auto encode = driver_function<PFN_cuTensorMapEncodeTiled_v12000>(
      "cuTensorMapEncodeTiled", 12000, "TMA (a CUDA 12+ driver has it)");
  // CUtensorMap carries its own alignment (64 bytes in CUDA 12, 128 in CUDA 13), as the driver needs.
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  const CUresult result =
      encode(&map, request.data_type, request.rank, base, request.dims, request.strides_bytes, request.box,
             request.element_strides, request.interleave, request.swizzle, request.l2_promotion, request.oob_fill);
  if (result != CUDA_SUCCESS)
    fatal(kExitCudaError, "fault",
          strprintf("tma %s: cuTensorMapEncodeTiled failed: %s\n  %s\n  global address %p", request.name,
                    cu_result_name(result).c_str(), describe(request).c_str(), base));

  // Print each descriptor once per check (the launch runs once per repeat) and keep it for the
  // JSON report.
  TmaPrinted& printed = tma_printed();
  if (std::find(printed.names.begin(), printed.names.end(), request.name) == printed.names.end()) {
    printed.names.push_back(request.name);
    std::printf("tma     %s\n", describe(request).c_str());
    printed.json_list += (printed.json_list.empty() ? "" : ",") + json(request);
    report_set("tma", "[" + printed.json_list + "]");
  }
  return map;
}

}  // namespace repro
