// =====================================================================================================
// repro_capture.cuh: dump device tensors from production code, to replay them in a reproducer.
//
//   #include "repro_capture.cuh"      // this file; it needs only the CUDA runtime
//   ...
//   repro::capture("A", a_ptr, {M, K}, stream);            // dtype from the pointer type
//   repro::capture("B", b_ptr, {K, N}, stream, {1, K});    // strides in elements, when not packed
//   repro::capture("W", w_ptr, {N, K}, stream, {}, "bf16"); // a type it cannot tell (cutlass::bfloat16_t)
//
// Off unless REPRO_CAPTURE_DIR names a folder: then each call copies the tensor as it is at that
// point of `stream` (the copy is ordered on the stream and waited for) and writes
//   $REPRO_CAPTURE_DIR/<name>.<call>.npy        the logical elements, row-major, in storage bits
//   $REPRO_CAPTURE_DIR/manifest.jsonl           one line per capture: name, call, file, dtype,
//                                               shape, strides, npy descr
// Only the first REPRO_CAPTURE_LIMIT calls per name are captured (default 1), so the line can stay
// in a loop or a hot path. Calls from many threads and streams are safe (one lock, appends of
// whole lines). bf16 and fp8 are written as raw bits (<u2, |u1), with the dtype in the manifest:
// numpy has no such types; repro's harness reads them back as they are.
//
// `repro import capture DIR` turns the manifest into a spec's `tensors:` with `init: { file: ... }`.
// A capture failure (a bad pointer, no device) prints one line on stderr and skips that capture:
// instrumentation must never take the production program down.
// =====================================================================================================
#pragma once

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace repro {
namespace capture_detail {

// The spec's dtype name, the element size and the npy descr for a C++ element type. Types are
// matched by name where including their header is optional (fp8, CUTLASS).
template <typename T>
struct TypeOf {
  static constexpr const char* dtype = nullptr;  // unknown: pass the dtype explicitly
};
template <> struct TypeOf<double> { static constexpr const char* dtype = "f64"; };
template <> struct TypeOf<float> { static constexpr const char* dtype = "f32"; };
template <> struct TypeOf<int8_t> { static constexpr const char* dtype = "i8"; };
template <> struct TypeOf<uint8_t> { static constexpr const char* dtype = "u8"; };
template <> struct TypeOf<int32_t> { static constexpr const char* dtype = "i32"; };
template <> struct TypeOf<uint32_t> { static constexpr const char* dtype = "u32"; };
template <> struct TypeOf<int64_t> { static constexpr const char* dtype = "i64"; };
template <> struct TypeOf<bool> { static constexpr const char* dtype = "bool"; };
#ifdef __CUDA_FP16_TYPES_EXIST__
template <> struct TypeOf<__half> { static constexpr const char* dtype = "f16"; };
#endif
#ifdef __CUDA_BF16_TYPES_EXIST__
template <> struct TypeOf<__nv_bfloat16> { static constexpr const char* dtype = "bf16"; };
#endif
#ifdef __CUDA_FP8_TYPES_EXIST__
template <> struct TypeOf<__nv_fp8_e4m3> { static constexpr const char* dtype = "e4m3"; };
template <> struct TypeOf<__nv_fp8_e5m2> { static constexpr const char* dtype = "e5m2"; };
#endif

inline int dtype_bytes(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64") return 8;
  if (dtype == "f32" || dtype == "tf32" || dtype == "i32" || dtype == "u32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "e4m3" || dtype == "e5m2" || dtype == "i8" || dtype == "u8" || dtype == "bool") return 1;
  return 0;
}

// What numpy is told: the real type where numpy has one, the raw bits where it does not.
inline const char* npy_descr(const std::string& dtype) {
  if (dtype == "f64") return "<f8";
  if (dtype == "f32" || dtype == "tf32") return "<f4";
  if (dtype == "f16") return "<f2";
  if (dtype == "bf16") return "<u2";
  if (dtype == "i64") return "<i8";
  if (dtype == "i32") return "<i4";
  if (dtype == "u32") return "<u4";
  if (dtype == "i8") return "|i1";
  if (dtype == "bool") return "|b1";
  return "|u1";  // u8, e4m3, e5m2
}

struct State {
  std::mutex lock;
  std::map<std::string, int> calls;  // per name
};

inline State& state() {
  static State s;
  return s;
}

inline void warn(const std::string& message) { std::fprintf(stderr, "repro::capture: %s\n", message.c_str()); }

inline std::string list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

inline bool write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                      const std::vector<unsigned char>& data) {
  std::string dict = std::string("{'descr': '") + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // Magic, version 1.0, a header padded with spaces to a multiple of 64 bytes, ending in '\n'.
  const size_t unpadded = 10 + dict.size() + 1;
  dict += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::string header = "\x93NUMPY";
  header += char(1);
  header += char(0);
  header += char(dict.size() & 0xFF);
  header += char((dict.size() >> 8) & 0xFF);
  header += dict;
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                  std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(partial.c_str(), path.c_str()) == 0;
}

inline void record(const char* name, int call, const std::string& folder, const std::string& dtype,
                   const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, const unsigned char* storage);

// This name's call number; false past REPRO_CAPTURE_LIMIT (default 1).
inline bool next_call(const char* name, int* call) {
  const char* limit_text = std::getenv("REPRO_CAPTURE_LIMIT");
  const int limit = limit_text ? std::atoi(limit_text) : 1;
  std::lock_guard<std::mutex> guard(state().lock);
  *call = state().calls[name]++;
  return *call < limit;
}

// Elements the view spans in storage (largest offset + 1); false for a bad shape or stride.
inline bool span_of(const char* name, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t* span) {
  *span = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0 || strides[d] < 0) {
      warn(std::string(name) + ": bad shape or stride");
      return false;
    }
    *span += (shape[d] - 1) * strides[d];
  }
  return true;
}

// Shape checks and packed strides; false (with a warning) when the capture cannot be made.
inline bool prepare(const char* name, const std::string& dtype, const std::vector<int64_t>& shape,
                    std::vector<int64_t>* strides) {
  if (dtype_bytes(dtype) == 0) {
    warn(std::string(name) + ": unknown dtype `" + dtype + "`");
    return false;
  }
  if (shape.empty() || shape.size() > 4) {
    warn(std::string(name) + ": shapes are 1- to 4-D");
    return false;
  }
  if (strides->empty()) {  // packed row-major
    strides->assign(shape.size(), 1);
    for (size_t d = shape.size() - 1; d > 0; --d) (*strides)[d - 1] = (*strides)[d] * shape[d];
  }
  if (strides->size() != shape.size()) {
    warn(std::string(name) + ": as many strides as dimensions, please");
    return false;
  }
  return true;
}

// The capture itself, with the dtype known.
inline void capture_bytes(const char* name, const void* device, const std::string& dtype,
                          const std::vector<int64_t>& shape, std::vector<int64_t> strides, cudaStream_t stream) {
  const char* dir = std::getenv("REPRO_CAPTURE_DIR");
  if (dir == nullptr || *dir == '\0') return;
  if (!prepare(name, dtype, shape, &strides)) return;
  const int element = dtype_bytes(dtype);

  int call = 0;
  if (!next_call(name, &call)) return;
  int64_t span = 0;
  if (!span_of(name, shape, strides, &span)) return;
  // The storage the view spans (its largest offset + 1), copied in stream order.
  std::vector<unsigned char> storage(size_t(span) * size_t(element));
  cudaError_t status = cudaMemcpyAsync(storage.data(), device, storage.size(), cudaMemcpyDefault, stream);
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  if (status != cudaSuccess) {
    cudaGetLastError();  // do not leave the error for the program's own checks
    return warn(std::string(name) + ": copying from the device failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
  }
  record(name, call, dir, dtype, shape, strides, storage.data());
}

// Writes the .npy and the manifest line for storage already on the host.
inline void record(const char* name, int call, const std::string& folder, const std::string& dtype,
                   const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, const unsigned char* storage) {
  const int element = dtype_bytes(dtype);
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  std::vector<unsigned char> logical(size_t(count) * size_t(element));
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      offset += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    std::memcpy(logical.data() + i * element, storage + offset * element, size_t(element));
  }

  const std::string file = std::string(name) + "." + std::to_string(call) + ".npy";
  if (!write_npy(folder + "/" + file, dtype, shape, logical))
    return warn(std::string(name) + ": cannot write " + folder + "/" + file + ": " + std::strerror(errno));
  const std::string line = std::string("{\"name\": \"") + name + "\", \"call\": " + std::to_string(call) +
                           ", \"file\": \"" + file + "\", \"dtype\": \"" + dtype + "\", \"shape\": " + list(shape) +
                           ", \"strides\": " + list(strides) + ", \"npy\": \"" + npy_descr(dtype) + "\"}\n";
  std::lock_guard<std::mutex> guard(state().lock);
  std::FILE* manifest = std::fopen((folder + "/manifest.jsonl").c_str(), "a");
  if (!manifest) return warn("cannot append to " + folder + "/manifest.jsonl: " + std::strerror(errno));
  std::fwrite(line.data(), 1, line.size(), manifest);
  std::fclose(manifest);
}

}  // namespace capture_detail

// The same for a tensor already in host memory (a CPU-side operand, a test).
inline void capture_host(const char* name, const void* host, const char* dtype, std::initializer_list<int64_t> shape,
                         std::initializer_list<int64_t> strides = {}) {
  const char* dir = std::getenv("REPRO_CAPTURE_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::vector<int64_t> dims(shape), steps(strides);
  int call = 0;
  int64_t span = 0;
  if (!capture_detail::prepare(name, dtype, dims, &steps) || !capture_detail::next_call(name, &call) ||
      !capture_detail::span_of(name, dims, steps, &span))
    return;
  capture_detail::record(name, call, dir, dtype, dims, steps, static_cast<const unsigned char*>(host));
}

// Captures `shape` elements of T at `device` (strides in elements; empty: packed row-major).
template <typename T>
inline void capture(const char* name, const T* device, std::initializer_list<int64_t> shape, cudaStream_t stream = 0,
                    std::initializer_list<int64_t> strides = {}, const char* dtype = nullptr) {
  using Element = typename std::remove_cv<T>::type;
  const char* known = dtype ? dtype : capture_detail::TypeOf<Element>::dtype;
  if (known == nullptr) {
    capture_detail::warn(std::string(name) + ": cannot tell the dtype of this pointer type; pass it: "
                         "repro::capture(name, ptr, shape, stream, strides, \"bf16\")");
    return;
  }
  capture_detail::capture_bytes(name, static_cast<const void*>(device), known, std::vector<int64_t>(shape),
                                std::vector<int64_t>(strides), stream);
}

}  // namespace repro
