// ---------------------------------------------------------------------------------------------
// repro harness runtime: device_buffers
//
// The tensors' device buffers, and the stream and events a check launches on. A harness that
// runs one check allocates them once and exits; a harness that runs a queue of checks
// (queue.cuh) keeps them: a check takes the buffers it needs from what the one before gave back,
// so a queue of same-shaped checks allocates nothing after its first, and the context never
// waits on cudaMalloc/cudaFree between checks.
//
// Memory stays bounded on any queue: what is held is at most what one check needed, since a
// request that no free buffer fits frees every free buffer before it allocates (a larger check
// after smaller ones grows the set instead of adding to it).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device.cuh"
#include "tensor.cuh"

namespace repro {

class DeviceBufferPool {
 public:
  // A buffer of at least `bytes` (at least one byte: a zero-size tensor still has an address).
  void* take(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes)) best = i;
    if (best == free_.size()) {
      release_free();
      Buffer buffer{nullptr, bytes};
      // What the scratch pool keeps is given back first if the device is short (device.cuh).
      if (cudaMalloc(&buffer.pointer, bytes) != cudaSuccess) {
        cudaGetLastError();
        trim_scratch_pool();
        REPRO_CUDA_CHECK(cudaMalloc(&buffer.pointer, bytes));
      }
      in_use_.push_back(buffer);
      return buffer.pointer;
    }
    const Buffer buffer = free_[best];
    free_.erase(free_.begin() + std::ptrdiff_t(best));
    in_use_.push_back(buffer);
    return buffer.pointer;
  }

  // Hands `pointer` (from take) back for the next check; null is ignored.
  void give(void* pointer) {
    if (pointer == nullptr) return;
    for (size_t i = 0; i < in_use_.size(); ++i) {
      if (in_use_[i].pointer != pointer) continue;
      free_.push_back(in_use_[i]);
      in_use_.erase(in_use_.begin() + std::ptrdiff_t(i));
      return;
    }
  }

  // Every buffer back: the check that took them is over (queue.cuh calls this between checks, so
  // a check that ended early without giving its buffers back cannot make the set grow).
  void reclaim() {
    free_.insert(free_.end(), in_use_.begin(), in_use_.end());
    in_use_.clear();
  }

  size_t held_bytes() const {
    size_t total = 0;
    for (const Buffer& b : free_) total += b.bytes;
    for (const Buffer& b : in_use_) total += b.bytes;
    return total;
  }

 private:
  struct Buffer {
    void* pointer;
    size_t bytes;
  };
  void release_free() {
    for (const Buffer& b : free_) cudaFree(b.pointer);
    free_.clear();
  }
  std::vector<Buffer> free_, in_use_;
};

inline DeviceBufferPool& device_buffer_pool() {
  static DeviceBufferPool pool;
  return pool;
}

// Every tensor's device buffer (outputs are poisoned before each launch, so a reused buffer's
// old contents never reach a comparison; inputs are uploaded or made over it).
inline void take_device_buffers(std::vector<Tensor>& tensors) {
  for (Tensor& t : tensors) t.device = device_buffer_pool().take(t.storage_bytes());
}

inline void give_device_buffers(std::vector<Tensor>& tensors) {
  for (Tensor& t : tensors) {
    device_buffer_pool().give(t.device);
    t.device = nullptr;
  }
}

// The stream the kernel under test runs on and the events that time it: made once per process.
struct CheckStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

inline const CheckStream& check_stream() {
  static CheckStream s;
  if (s.stream == nullptr) {
    REPRO_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    REPRO_CUDA_CHECK(cudaEventCreate(&s.start));
    REPRO_CUDA_CHECK(cudaEventCreate(&s.stop));
  }
  return s;
}

}  // namespace repro
