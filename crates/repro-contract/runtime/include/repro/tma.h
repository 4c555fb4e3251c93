// ---------------------------------------------------------------------------------------------
// repro/tma.h: the spec's `tma:` entries, as harness.cu encodes them.
//
// harness.cu fills a TmaRequest per entry (the values repro checked when it read the spec), sets
// the global dims and strides from the tensor as the run sized it, and asks the runtime for the
// CUtensorMap, which the launch passes by value. The runtime encodes it with
// cuTensorMapEncodeTiled, looked up through cudaGetDriverEntryPointByVersion (no -lcuda), names
// a failing encode with its CUresult, and prints each descriptor once, innermost dimension first,
// to be compared line by line with the production code that builds the same descriptor.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <cuda.h>

#include <repro/harness.h>

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
};

// Global dims and byte strides from the tensor itself (so they follow --size): driver dimension
// i is the tensor's dimension order[i], innermost first.
void set_tma_layout(TmaRequest& request, const TensorView& tensor, const int* order, int rank);

// Encodes `request` over `base` (the tensor's device memory): exit 4 naming the CUresult if the
// driver refuses it. Printed on first use.
CUtensorMap encode_tma(const TmaRequest& request, void* base);

}  // namespace repro
