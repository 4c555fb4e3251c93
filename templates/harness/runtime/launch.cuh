// ---------------------------------------------------------------------------------------------
// repro harness runtime: launch
//
// The launch shape of the kernel under test, the checks made before it is launched (dynamic
// shared memory against the device's limit, raised above the 48 KiB default when asked), and
// the translation of a failed launch into a named result.
// ---------------------------------------------------------------------------------------------
namespace repro {

// A tensor's device memory as a kernel argument: converts to whatever pointer type the kernel
// declares (`const __nv_bfloat16*`, `float*`, `cutlass::half_t*`...), after checking at compile
// time that the element size matches the dtype the spec gives the tensor.
template <size_t kElementBytes>
struct DevicePointer {
  void* pointer;
  template <typename T>
  operator T*() const {
    static_assert(std::is_void<T>::value || sizeof(T) == kElementBytes,
                  "repro: the kernel's pointer type does not match the dtype the spec gives this tensor");
    return static_cast<T*>(pointer);
  }
};

// Integer ceiling division, for grid expressions such as ceil_div(N, 128).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Launch {
  std::string label;  // the kernel instantiation, e.g. tiled_gemm<128, 128, 32>
  dim3 grid, block, cluster;
  size_t smem_bytes = 0;

  std::string describe() const {
    return strprintf("grid (%u,%u,%u) block (%u,%u,%u) cluster (%u,%u,%u) smem %zu B", grid.x, grid.y, grid.z,
                     block.x, block.y, block.z, cluster.x, cluster.y, cluster.z, smem_bytes);
  }
};

// The device the harness runs on; set by harness_main before the first launch.
inline DeviceInfo& current_device() {
  static DeviceInfo info;
  return info;
}

// Before the launch: a request for more dynamic shared memory than the device has is named with
// both numbers (the launch would only say "invalid argument"); above the 48 KiB default the
// kernel's limit is raised, as production code must do too.
inline void prepare_launch(const void* kernel, const Launch& launch) {
  const DeviceInfo& device = current_device();
  if (launch.smem_bytes > device.smem_optin_bytes) {
    fatal(kExitCudaError, "fault",
          strprintf("launch error: %s asks for %zu B of dynamic shared memory; %s allows at most %zu B per block "
                    "(cudaDevAttrMaxSharedMemoryPerBlockOptin)\n  launch %s",
                    launch.label.c_str(), launch.smem_bytes, device.name.c_str(), device.smem_optin_bytes,
                    launch.describe().c_str()));
  }
  if (launch.smem_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(launch.smem_bytes));
    if (status != cudaSuccess) {
      cudaFuncAttributes attributes = {};
      cudaFuncGetAttributes(&attributes, kernel);
      fatal(kExitCudaError, "fault",
            strprintf("launch error: cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %zu) failed: %s (%s); the kernel "
                      "also uses %zu B of static shared memory, the device allows %zu B per block in total\n  launch %s",
                      launch.smem_bytes, cudaGetErrorName(status), cudaGetErrorString(status),
                      static_cast<size_t>(attributes.sharedSizeBytes), device.smem_optin_bytes,
                      launch.describe().c_str()));
    }
  }
}

// A launch that fails synchronously (bad configuration, too many resources) is exit 4 with the
// launch shape and, for resource errors, what the kernel needs against what the device has.
inline void check_launch(cudaError_t status, const void* kernel, const Launch& launch) {
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status == cudaSuccess) return;
  cudaFuncAttributes attributes = {};
  cudaFuncGetAttributes(&attributes, kernel);
  const DeviceInfo& device = current_device();
  const unsigned threads = launch.block.x * launch.block.y * launch.block.z;
  std::string detail = strprintf(
      "\n  kernel asks: %d registers/thread x %u threads = %lld registers, %zu B static + %zu B dynamic smem, "
      "%u threads/block (the kernel allows %d)"
      "\n  device has:  %d registers/block, %zu B smem/block (opt-in), %d SMs",
      attributes.numRegs, threads, static_cast<long long>(attributes.numRegs) * threads,
      static_cast<size_t>(attributes.sharedSizeBytes), launch.smem_bytes, threads, attributes.maxThreadsPerBlock,
      device.regs_per_block, device.smem_optin_bytes, device.sm_count);
  fatal(kExitCudaError, "fault",
        strprintf("launch error: %s (%s) launching %s\n  launch %s%s", cudaGetErrorName(status),
                  cudaGetErrorString(status), launch.label.c_str(), launch.describe().c_str(), detail.c_str()));
}

}  // namespace repro
