// ---------------------------------------------------------------------------------------------
// repro/replay.h: a captured launch, replayed from its own machine code (`kind: replay`).
//
// `repro capture` records one launch of a running program: the module's cubin, the parameter
// bytes, and where those bytes pointed into production's memory. harness.cu lists the places to
// rewrite (ReplayPointer, ReplayTensorMap); the runtime loads the cubin and the bytes named by
// spec.yaml's kernel.cubin and kernel.params (a sequence's launches[i].cubin and
// launches[i].params: each replayed launch its own), rewrites each address to the same byte of the
// harness's tensor, encodes each CUtensorMap again as production encoded it but over the
// harness's tensor, and launches the symbol with cuLaunchKernelEx. Driver functions are looked
// up through the runtime (cudaGetDriverEntryPointByVersion): the harness needs no -lcuda.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <cuda.h>

#include <repro/harness.h>

namespace repro {

// Bytes [at, at + 8) of the parameters hold the address of byte `offset` of tensor `tensor`.
struct ReplayPointer {
  unsigned at;
  int tensor;
  unsigned long long offset;
};

// Bytes [at, at + 128) hold a CUtensorMap over byte `offset` of tensor `tensor`, encoded with
// cuTensorMapEncodeTiled and these arguments (dimensions innermost first, strides in bytes).
struct ReplayTensorMap {
  unsigned at;
  int tensor;
  unsigned long long offset;
  CUtensorMapDataType data_type;
  cuuint32_t rank;
  cuuint64_t dims[5];
  cuuint64_t strides[4];
  cuuint32_t box[5];
  cuuint32_t element_strides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2_promotion;
  CUtensorMapFloatOOBfill oob_fill;
};

struct ReplayKernel {
  const char* symbol;  // the mangled name in the cubin
  const ReplayPointer* pointers;
  int pointer_count;
  const ReplayTensorMap* tensor_maps;
  int tensor_map_count;
  // Where spec.yaml gives its cubin and params: "launches[1]" in a sequence; null for `kernel:`.
  const char* path;
};

// Launches the replayed kernel on `stream` between `start` and `stop` with `launch`'s shape:
// exit 2 if the cubin or the parameters cannot be read, exit 4 naming the driver's error if the
// module does not load or the launch fails. Without events for one launch of a sequence (spec:
// launches), whose call the runtime times as a whole, between one pair around every launch.
void replay_launch(const ReplayKernel& kernel, const TensorView* tensors, const Launch& launch, cudaStream_t stream,
                   cudaEvent_t start = nullptr, cudaEvent_t stop = nullptr);

}  // namespace repro
