// ---------------------------------------------------------------------------------------------
// repro/harness.h: what a generated harness.cu sees of the repro runtime.
//
// harness.cu is the kernel under test, compiled with the production flags; the runtime (inputs,
// the fp64 references, the comparison, probes, the report, the watchdog) is a static library
// built with flags of its own, so that no production flag can change a reference value. This
// header is the whole interface between the two, and it is ABI-neutral on purpose: plain
// structs, enums, C strings and function pointers, no std:: types. A harness.cu built with
// -std=c++20, -D_GLIBCXX_USE_CXX11_ABI=0 (PyTorch extensions) or --use_fast_math links with the
// same library as one built with none of them.
//
// Everything that may change without changing the kernel's code (inits, seeds, tolerances,
// repeats, timeouts, the reference and its provider, sizes) is read at run time from the
// artifact's spec.yaml; harness.cu holds only what the compiler must see.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

// Functions the device runs too (the harness's grid expressions may be used in device code).
#define REPRO_HD __host__ __device__

namespace repro {

// Exit codes, shared with `repro` itself (docs/cli.md).
inline constexpr int kExitPassed = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBuild = 3;
inline constexpr int kExitCudaError = 4;
inline constexpr int kExitHang = 5;
inline constexpr int kExitSanitizer = 6;
inline constexpr int kExitNoDevice = 7;

// The spec's dtypes (docs/spec.md), in the order repro numbers them.
enum class DType : int { f64, f32, tf32, f16, bf16, e4m3, e5m2, i8, u8, i32, u32, i64, boolean };

REPRO_HD inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::tf32: return "tf32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

// Bytes per element in storage (tf32 is stored as f32).
REPRO_HD inline size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::tf32:
    case DType::i32:
    case DType::u32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::e4m3:
    case DType::e5m2:
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 1;
}

// One tensor as harness.cu declares it.
struct TensorDecl {
  const char* name;
  DType dtype;
  bool output;  // outputs are poisoned (every byte 0xFF) before each launch
};

// A tensor's shape at the run's sizes, computed by harness.cu from the spec's shape expressions.
// strides (elements) are used when `explicit_strides`; otherwise the runtime packs the shape,
// row-major, or with the last two dimensions swapped for `col_major`.
struct TensorLayout {
  int rank;
  int64_t shape[4];
  int64_t strides[4];
  bool explicit_strides;
  bool col_major;
};

// A tensor as the launch sees it: its layout and its device memory.
struct TensorView {
  const char* name;
  DType dtype;
  int rank;
  int64_t shape[4];
  int64_t strides[4];
  void* device;
};

// The launch shape of the kernel under test, as launched.
struct Launch {
  const char* label = "";  // the kernel instantiation, e.g. tiled_gemm<128, 128, 32>
  dim3 grid, block, cluster;
  size_t smem_bytes = 0;
};

// A traced stage (spec: trace; templates/instrument/repro_trace.cuh in the kernel).
enum class TraceRole : int { operand, accumulator, output };
inline constexpr int kTraceSamples = 8;
struct TraceStage {
  const char* name;
  TraceRole role;
  float absmax;
  unsigned seen;
  unsigned samples;  // how many of value/row/col are filled
  float value[kTraceSamples];
  int row[kTraceSamples], col[kTraceSamples];
};

// The launch function of harness.cu: tensors in declaration order, sizes in declaration order.
// It records `start` and `stop` on `stream` around the kernel.
using LaunchFunction = Launch (*)(const TensorView* tensors, const int64_t* sizes, cudaStream_t stream,
                                  cudaEvent_t start, cudaEvent_t stop);

// Everything harness.cu tells the runtime.
struct HarnessSpec {
  const char* name;
  // build.arch: the device must be this compute capability (or, unless arch_specific, a later
  // minor of it).
  int built_cc_major, built_cc_minor;
  bool arch_specific;
  // The spec's sizes, in declaration order. Their values come from spec.yaml at run time, unless
  // the kernel needs them at compile time: then `fixed_sizes` holds the compiled values and
  // `sizes_fixed_reason` says why.
  int size_count;
  const char* const* size_names;
  const int64_t* fixed_sizes;
  const char* sizes_fixed_reason;
  int tensor_count;
  const TensorDecl* tensors;
  void (*layout)(const int64_t* sizes, TensorLayout* layouts);
  LaunchFunction launch;
  // spec: trace. Null when the spec traces nothing; read_trace fills at most `capacity` stages
  // and returns how many it filled.
  void (*reset_trace)();
  int (*read_trace)(TraceStage* stages, int capacity);
  // Built as PTX only (build.sh with ARCH=compute_XX): the driver JIT-compiles it for any GPU
  // of this compute capability or later.
  bool ptx;
};

// The run: options, spec.yaml, inputs, reference, launches, comparison, report. main() returns it.
int harness_main(int argc, char** argv, const HarnessSpec& spec);

// Prints `message` and the disposition, writes the JSON report if one was asked for, and exits
// without running destructors (they could block on a wedged device).
[[noreturn]] void fatal(int exit_code, const char* cls, const char* message);

// Called by REPRO_CUDA_CHECK when a CUDA runtime call fails: exit 4, naming the call.
[[noreturn]] void cuda_call_failed(const char* call, const char* file, int line, cudaError_t status);

// Before the launch: clusters must tile the grid, more than 8 blocks per cluster get the
// non-portable opt-in, and dynamic shared memory above 48 KiB is opted into (or named when the
// device has less).
void prepare_launch(const void* kernel, const Launch& launch);

// A launch that failed synchronously is exit 4 with the launch shape and the kernel's resources.
void check_launch(cudaError_t status, const void* kernel, const Launch& launch);

// Integer ceiling division: the spec's grid expressions such as ceil_div(N, 128).
REPRO_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// min and max of shape expressions, on int64_t whatever the literals' types.
REPRO_HD inline int64_t size_min(int64_t a, int64_t b) { return a < b ? a : b; }
REPRO_HD inline int64_t size_max(int64_t a, int64_t b) { return a < b ? b : a; }

// A tensor's device memory as a kernel argument: converts to whatever pointer type the kernel
// declares (`const __nv_bfloat16*`, `float*`, `cutlass::half_t*`...), after checking at compile
// time that the element size matches the dtype the spec gives the tensor. It converts on the
// device too, where a `kind: device` entry hands it to the task body.
template <size_t kElementBytes>
struct DevicePointer {
  void* pointer;
  template <typename T>
  __host__ __device__ operator T*() const {
    // void* takes any tensor; sizeof(void) must not even be named, hence the conditional type.
    static_assert(std::is_void<T>::value || sizeof(std::conditional_t<std::is_void<T>::value, char, T>) == kElementBytes,
                  "repro: the kernel's pointer type does not match the dtype the spec gives this tensor");
    return static_cast<T*>(pointer);
  }
};

}  // namespace repro

// Checks a CUDA runtime call; on failure names the call, where it is, and the error, then exits
// with kExitCudaError.
#define REPRO_CUDA_CHECK(call)                                             \
  do {                                                                     \
    const cudaError_t repro_status_ = (call);                              \
    if (repro_status_ != cudaSuccess)                                      \
      ::repro::cuda_call_failed(#call, __FILE__, __LINE__, repro_status_); \
  } while (0)
