// ---------------------------------------------------------------------------------------------
// repro harness runtime: TMA descriptors
//
// The spec's `tma:` entries become CUtensorMap values made with cuTensorMapEncodeTiled. The
// driver function is looked up through the runtime (cudaGetDriverEntryPointByVersion), so the
// harness needs no -lcuda and runs with whatever driver is installed. repro checked the
// hardware rules when it read the spec; a failing encode is still named with its CUresult.
// Each descriptor is printed once, in the driver's order (innermost dimension first), so it can
// be compared line by line with the production code that builds the same descriptor.
// ---------------------------------------------------------------------------------------------
#include <cuda.h>
#include <cudaTypedefs.h>

namespace repro {

// One descriptor as the spec resolved it; arrays are in the driver's order (innermost first).
struct TmaRequest {
  const char* name;        // the spec's name for it (tma.<name>)
  const char* tensor;      // the tensor it describes
  const char* dim_names;   // the tensor's dimensions in driver order, e.g. "K, M"
  CUtensorMapDataType data_type;
  const char* data_type_name;
  cuuint32_t rank;
  cuuint64_t dims[5];
  cuuint64_t strides_bytes[4];  // rank - 1 entries: dimensions 1.. (dimension 0 is contiguous)
  cuuint32_t box[5];
  cuuint32_t element_strides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2_promotion;
  CUtensorMapFloatOOBfill oob_fill;
  const char* interleave_name;
  const char* swizzle_name;
  const char* l2_promotion_name;
  const char* oob_fill_name;

  template <typename T>
  static std::string list(const T* values, cuuint32_t count) {
    std::string out = "{";
    for (cuuint32_t i = 0; i < count; ++i)
      out += strprintf("%s%llu", i ? ", " : "", static_cast<unsigned long long>(values[i]));
    return out + "}";
  }

  // "map_a = A (bf16): dims {520, 1000} [K, M] strides {1040} B, box {64, 128}, ..."
  std::string describe() const {
    return strprintf("%s = %s (%s): dims %s [%s] innermost first, strides %s B, box %s, element strides %s, "
                     "swizzle %s, interleave %s, l2 promotion %s, oob fill %s",
                     name, tensor, data_type_name, list(dims, rank).c_str(), dim_names,
                     list(strides_bytes, rank - 1).c_str(), list(box, rank).c_str(),
                     list(element_strides, rank).c_str(), swizzle_name, interleave_name, l2_promotion_name,
                     oob_fill_name);
  }

  std::string json() const {
    JsonWriter w;
    w.begin_object();
    w.field("name", std::string(name));
    w.field("tensor", std::string(tensor));
    w.field("describe", describe());
    w.end_object();
    return w.str();
  }
};

// Global dims and byte strides from the tensor itself (so they follow --size): driver dimension
// i is the tensor's dimension order[i], innermost first.
inline void set_tma_layout(TmaRequest& request, const Tensor& tensor, std::initializer_list<int> order) {
  const int64_t bytes = int64_t(dtype_bytes(tensor.dtype));
  cuuint32_t i = 0;
  for (int d : order) {
    request.dims[i] = cuuint64_t(tensor.shape[d]);
    if (i > 0) request.strides_bytes[i - 1] = cuuint64_t(tensor.strides[d] * bytes);
    ++i;
  }
}

// The driver's name for a CUresult ("CUDA_ERROR_INVALID_VALUE"), looked up like the encoder.
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

// Encodes `request` over `base` (the tensor's device memory). Printed on first use.
inline CUtensorMap encode_tma(const TmaRequest& request, void* base) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (!encode) {
    cudaDriverEntryPointQueryResult query;
    void* fn = nullptr;
    const cudaError_t status =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &query);
    if (status != cudaSuccess || query != cudaDriverEntryPointSuccess || !fn)
      fatal(kExitCudaError, "fault",
            strprintf("tma %s: the driver has no cuTensorMapEncodeTiled (%s, query result %d); TMA needs a CUDA 12+ "
                      "driver",
                      request.name, cudaGetErrorName(status), static_cast<int>(query)));
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  // CUtensorMap carries its own alignment (64 bytes in CUDA 12, 128 in CUDA 13), as the driver needs.
  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  const CUresult result =
      encode(&map, request.data_type, request.rank, base, request.dims, request.strides_bytes, request.box,
             request.element_strides, request.interleave, request.swizzle, request.l2_promotion, request.oob_fill);
  if (result != CUDA_SUCCESS)
    fatal(kExitCudaError, "fault",
          strprintf("tma %s: cuTensorMapEncodeTiled failed: %s\n  %s\n  global address %p", request.name,
                    cu_result_name(result).c_str(), request.describe().c_str(), base));

  // Print each descriptor once (the launch runs once per repeat) and keep it for the JSON report.
  static std::vector<std::string> printed;
  if (std::find(printed.begin(), printed.end(), request.name) == printed.end()) {
    printed.push_back(request.name);
    std::printf("tma     %s\n", request.describe().c_str());
    static std::string json_list;
    json_list += (json_list.empty() ? "" : ",") + request.json();
    report_set("tma", "[" + json_list + "]");
  }
  return map;
}

}  // namespace repro
