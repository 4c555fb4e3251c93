// ---------------------------------------------------------------------------------------------
// repro harness runtime: inputs made on the device, and small reads back (issue 9)
//
// At production sizes the host spends more time making inputs than the GPU spends on the whole
// check: 2 x 8192^2 generated values are 0.65 s on 16 cores, and copying them up is more. The
// generators and conversions are pure functions marked REPRO_HD, so a kernel runs the very same
// code and writes the very bits fill_host() would; a sample of every tensor so made is checked
// against the host's anyway (check_device_inputs), because a difference here would silently
// change what every later number means.
//
// The host still needs a few operand values: the cross-check of the device reference reads
// sampled rows of A and columns of B. gather_bits() fetches exactly those elements.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device.cuh"

namespace repro {

// A tensor's layout by value, for kernels (Tensor itself holds host vectors and strings).
struct DeviceLayout {
  DType dtype;
  int rank;
  int64_t shape[4];
  int64_t strides[4];
  // Row-major without gaps: an element's offset is its logical index. Most outputs are; the
  // divisions of the general case cost more than the rest of a comparison pass.
  bool dense;

  REPRO_HD int64_t logical_offset(int64_t logical_index) const {
    return dense ? logical_index : repro::logical_offset(rank, shape, strides, logical_index);
  }
};

inline DeviceLayout device_layout(const Tensor& t) {
  DeviceLayout layout{t.dtype, t.rank, {0, 0, 0, 0}, {0, 0, 0, 0}, true};
  for (int d = 0; d < 4; ++d) layout.shape[d] = t.shape[d], layout.strides[d] = t.strides[d];
  // A dimension of extent 1 never moves the offset, whatever its stride.
  int64_t expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) layout.dense = false;
    expected *= t.shape[d];
  }
  return layout;
}

// Grid-stride launches: enough blocks to fill the GPU, few enough that a thread does many elements.
constexpr int kPipelineThreads = 256;
inline unsigned pipeline_blocks(int64_t count) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((count + kPipelineThreads - 1) / kPipelineThreads, 4096)));
}

__global__ void generate_kernel(DeviceLayout layout, InitValues init, uint64_t stream, int64_t numel,
                                unsigned char* storage) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel; i += int64_t(gridDim.x) * blockDim.x)
    encode(layout.dtype, storage, layout.logical_offset(i), generate_value(init, stream, i, layout.rank, layout.shape));
}

// Whether fill_host() would generate this tensor's values (rather than poison or read a file).
inline bool is_generated_input(const Tensor& t) {
  return is_input(t) && t.init.kind != InitKind::file && t.init.kind != InitKind::values &&
         t.init.kind != InitKind::groups && !t.scale_tensor;
}

// t.device gets what fill_host() gives t.host, padding (zero) included.
inline void generate_on_device(const Tensor& t) {
  REPRO_CUDA_CHECK(cudaMemset(t.device, 0, std::max<size_t>(t.storage_bytes(), 1)));
  if (t.numel() == 0) return;
  generate_kernel<<<pipeline_blocks(t.numel()), kPipelineThreads>>>(
      device_layout(t), values_of(t.init), stream_of(t.name.c_str()), t.numel(), static_cast<unsigned char*>(t.device));
  REPRO_CUDA_CHECK(cudaGetLastError());
}

// Every output's device buffer set to poison (every byte 0xFF, as fill_host() poisons the host
// copies) and waited for: before every launch, so an element the kernel never writes is caught
// even when an earlier launch wrote it.
inline void poison_device_outputs(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (!t.output) continue;
    if (t.initial_device != nullptr)  // production's contents before its launch (production.cuh)
      REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.initial_device, t.storage_bytes(), cudaMemcpyDeviceToDevice));
    else
      REPRO_CUDA_CHECK(cudaMemset(t.device, 0xFF, t.storage_bytes()));
  }
  REPRO_CUDA_CHECK(cudaDeviceSynchronize());
}

__global__ void gather_bits_kernel(DType dtype, const unsigned char* storage, const int64_t* offsets, int64_t count,
                                   uint64_t* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = load_bits(dtype, storage, offsets[i]);
}

// A copy of `values` on the device (at least one element's room), scratch: the caller gives it
// back (give_back_scratch).
inline int64_t* upload_int64(const std::vector<int64_t>& values) {
  int64_t* device = take_scratch<int64_t>(values.size() * sizeof(int64_t));
  if (!values.empty())
    REPRO_CUDA_CHECK(cudaMemcpy(device, values.data(), values.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  return device;
}

// The storage bits of the elements at `offsets` (in elements) of a device buffer.
inline std::vector<uint64_t> gather_bits(DType dtype, const void* device, const std::vector<int64_t>& offsets) {
  std::vector<uint64_t> bits(offsets.size());
  if (offsets.empty()) return bits;
  int64_t* device_offsets = upload_int64(offsets);
  uint64_t* device_bits = take_scratch<uint64_t>(offsets.size() * sizeof(uint64_t));
  gather_bits_kernel<<<pipeline_blocks(int64_t(offsets.size())), kPipelineThreads>>>(
      dtype, static_cast<const unsigned char*>(device), device_offsets, int64_t(offsets.size()), device_bits);
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cudaMemcpy(bits.data(), device_bits, bits.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  give_back_scratch(device_offsets);
  give_back_scratch(device_bits);
  return bits;
}

// The first sampled element whose device storage bits differ from the host's, both masked to
// the dtype's width (index -1: none).
struct SampleMismatch {
  int64_t index = -1;
  uint64_t device_bits = 0, host_bits = 0;
};

// Gathers the elements at `offsets` of a device buffer and compares each with host_bits(index)
// for its logical index in `indices`: what every check of device-made values against the host's
// shares (the generated inputs here, the probes' operands and answers in probe_values.cuh).
template <typename HostBits>
inline SampleMismatch compare_sampled_bits(DType dtype, const void* device, const std::vector<int64_t>& indices,
                                           const std::vector<int64_t>& offsets, HostBits host_bits) {
  const std::vector<uint64_t> device_bits = gather_bits(dtype, device, offsets);
  const uint64_t mask = dtype_bytes(dtype) == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * dtype_bytes(dtype))) - 1;
  for (size_t s = 0; s < indices.size(); ++s) {
    const uint64_t host = host_bits(indices[s]) & mask, device_value = device_bits[s] & mask;
    if (host != device_value) return SampleMismatch{indices[s], device_value, host};
  }
  return SampleMismatch();
}

// How many elements of each device-made tensor are compared with the host's generator.
constexpr int64_t kInputCheckSamples = 4096;

// The device-made values against the host generator: every element with `full`, else a spread
// sample (the first and last elements always in). A difference ends the run: inputs that are not
// the spec's would make every later number wrong without a sign of it.
inline int64_t check_device_inputs(const Tensor& t, bool full) {
  const int64_t numel = t.numel();
  const int64_t count = full ? numel : std::min(numel, kInputCheckSamples);
  std::vector<int64_t> indices(size_t(std::max<int64_t>(count, 0))), offsets(indices.size());
  for (int64_t s = 0; s < count; ++s) {
    indices[size_t(s)] = full ? s : spread_index(s, numel, 0x5EEDull);
    offsets[size_t(s)] = t.logical_offset(indices[size_t(s)]);
  }
  const uint64_t stream = stream_of(t.name.c_str());
  const SampleMismatch m = compare_sampled_bits(t.dtype, t.device, indices, offsets, [&](int64_t i) {
    return encode_bits(t.dtype, generate_value(t.init, stream, i, t.rank, t.shape));
  });
  if (m.index >= 0)
    fatal(kExitCudaError, "fault",
          strprintf("input %s made on the device differs from the host generator at logical element %lld: device "
                    "bits 0x%llx, host 0x%llx. The harness cannot trust its own inputs on this GPU: rerun with "
                    "--reference host (inputs made on the host)",
                    t.name.c_str(), (long long)m.index, (unsigned long long)m.device_bits,
                    (unsigned long long)m.host_bits));
  return count;
}

}  // namespace repro
