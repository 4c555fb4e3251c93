// Tensors for the C++ tests of the device references: a logical shape with optional strides,
// host bytes, a device copy. Shared by device_reference_check.cu and emulated_reference_check.cu,
// which include the runtime (runtime.cu) before this.
#pragma once
#include <vector>

struct Operand {
  repro::DType dtype;
  std::vector<int64_t> shape, strides;  // strides empty: row-major
};

inline repro::Tensor make_tensor(const char* name, const Operand& o, bool output = false) {
  repro::Tensor t;
  t.name = name;
  t.dtype = o.dtype;
  t.rank = int(o.shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = o.shape[size_t(d)];
    t.strides[d] = o.strides.empty() ? stride : o.strides[size_t(d)];
    stride *= o.shape[size_t(d)];
  }
  t.output = output;
  t.host.assign(t.storage_bytes(), 0);
  return t;
}

inline void upload(repro::Tensor& t) {
  REPRO_CUDA_CHECK(cudaMalloc(&t.device, std::max<size_t>(t.storage_bytes(), 1)));
  REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
}

// The GPU checks' first step: without a device they say so and exit 7 (kExitNoDevice), as
// tests/suite/runtime.rs expects.
inline bool no_cuda_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return false;
  std::printf("no CUDA device\n");
  return true;
}
