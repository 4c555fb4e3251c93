// ---------------------------------------------------------------------------------------------
// repro harness runtime: the device references' memory, allocated and freed in stream order
//
// A device reference allocates a gigabyte or more for a few milliseconds (fp64 copies of the
// operands, int8 planes, residues, its output) and frees it again. cudaFree waits for the whole
// device and unmaps the pages: the frees alone took 0.7-2.0 ms of an emulated reference of 9-23
// ms at 8192^3 (run 83, `erc stages`), and the comparison phase ended with a cudaFree of the
// 512 MiB reference. So the references take their buffers from the device's
// stream-ordered pool (cudaMallocAsync on the default stream) and give them back with
// cudaFreeAsync, which returns at once; the pool keeps what is freed for the next reference of
// the run (the probes compute several). What the pool keeps is given back when an allocation
// would otherwise fail, and when the device runs short after a reference (trim_device_pool):
// the kernel under test and its tensors come first.
//
// Memory allocated here is used on the stream it was allocated on (the default stream, where
// every reference kernel runs, unless a caller names another); a different stream must wait for
// that one before it touches it.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device.cuh"

namespace repro {

// The current device's default pool, set up once to keep the memory freed into it; null where
// the device has no stream-ordered allocator (then cudaMalloc and cudaFree serve).
inline cudaMemPool_t device_pool() {
  static const cudaMemPool_t pool = [] {
    int device = 0, supported = 0;
    cudaMemPool_t p = nullptr;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || !supported ||
        cudaDeviceGetDefaultMemPool(&p, device) != cudaSuccess) {
      cudaGetLastError();
      return cudaMemPool_t(nullptr);
    }
    uint64_t keep_all = ~uint64_t(0);
    if (cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep_all) != cudaSuccess) {
      cudaGetLastError();
      return cudaMemPool_t(nullptr);
    }
    return p;
  }();
  return pool;
}

// The pool's memory that no allocation holds, back to the device (waits for the device first:
// frees still in a stream's queue are not yet the pool's).
inline void trim_device_pool_now() {
  if (device_pool() == nullptr) return;
  cudaDeviceSynchronize();
  cudaMemPoolTrimTo(device_pool(), 0);
  cudaGetLastError();
}

// `bytes` of device memory in stream order on `stream` (at least 256-byte aligned, as
// cudaMalloc's), or null when the device has not that much even with the pool trimmed.
inline void* try_allocate_device(size_t bytes, cudaStream_t stream = cudaStreamLegacy) {
  bytes = std::max<size_t>(bytes, 1);
  void* data = nullptr;
  const auto allocate = [&] {
    const cudaError_t status =
        device_pool() != nullptr ? cudaMallocAsync(&data, bytes, stream) : cudaMalloc(&data, bytes);
    if (status == cudaSuccess) return true;
    cudaGetLastError();  // clear it: out of memory is answered by the caller
    data = nullptr;
    return false;
  };
  if (allocate()) {
    // TMA descriptors and the residuals' sub-buffers rely on cudaMalloc's alignment.
    if (reinterpret_cast<uintptr_t>(data) % 256 != 0)
      fatal(kExitCudaError, "fault", "the device's stream-ordered allocator returned memory not aligned to 256 bytes");
    return data;
  }
  if (device_pool() == nullptr) return nullptr;
  trim_device_pool_now();
  return allocate() ? data : nullptr;
}

// The same for a few bytes of working space, whose lack is the device's fault, not the size's.
inline void* allocate_device(size_t bytes, cudaStream_t stream = cudaStreamLegacy) {
  void* data = try_allocate_device(bytes, stream);
  if (data == nullptr)
    fatal(kExitCudaError, "fault", strprintf("the device has no %zu bytes left for the harness's working space", bytes));
  return data;
}

// Gives back memory of try_allocate_device in stream order: the work queued on `stream` (the
// one it was allocated on) before this call still reads it; nothing waits.
inline void release_device(void* data, cudaStream_t stream = cudaStreamLegacy) {
  if (data == nullptr) return;
  if (device_pool() != nullptr) cudaFreeAsync(data, stream);
  else cudaFree(data);
}

// After a reference: what the pool keeps goes back to the device when less than an eighth of
// the device's memory is free, so that the kernel under test, its tensors and its own
// allocations never find the device shorter than they would without the pool.
inline void trim_device_pool() {
  if (device_pool() == nullptr) return;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (free_bytes < total_bytes / 8) trim_device_pool_now();
}

}  // namespace repro
