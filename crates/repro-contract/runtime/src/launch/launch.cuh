// ---------------------------------------------------------------------------------------------
// repro harness runtime: launch
//
// The launch shape of the kernel under test, the checks made before it is launched (dynamic
// shared memory against the device's limit, raised above the 48 KiB default when asked), and
// the translation of a failed launch into a named result.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "reference_cache.cuh"

namespace repro {

// "grid (3,4,1) block (256,1,1) cluster (1,1,1) smem 49152 B"
inline std::string describe(const Launch& launch) {
  return strprintf("grid (%u,%u,%u) block (%u,%u,%u) cluster (%u,%u,%u) smem %zu B", launch.grid.x, launch.grid.y,
                   launch.grid.z, launch.block.x, launch.block.y, launch.block.z, launch.cluster.x, launch.cluster.y,
                   launch.cluster.z, launch.smem_bytes);
}

// The TMA descriptors a check printed (tma.cuh prints each once per check, and lists them in
// the report); a queue's next check starts with none (queue.cuh).
struct TmaPrinted {
  std::vector<std::string> names;
  std::string json_list;
};

inline TmaPrinted& tma_printed() {
  static TmaPrinted printed;
  return printed;
}

// The device the harness runs on; set by harness_main before the first launch.
inline DeviceInfo& current_device() {
  static DeviceInfo info;
  return info;
}

// Before the launch: a request for more dynamic shared memory than the device has is named with
// both numbers (the launch would only say "invalid argument"); above the 48 KiB default the
// kernel's limit is raised, as production code must do too.
// Declared in harness.h (this header is compiled once, into the library).
void prepare_launch(const void* kernel, const Launch& launch) {
  const DeviceInfo& device = current_device();
  // Clusters: the grid must be made of whole clusters (the launch would only say "invalid
  // argument"), and more than 8 blocks per cluster needs the non-portable opt-in.
  const unsigned cluster_blocks = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  if (launch.grid.x % launch.cluster.x || launch.grid.y % launch.cluster.y || launch.grid.z % launch.cluster.z) {
    fatal(kExitCudaError, "fault",
          strprintf("launch error: grid (%u,%u,%u) is not a whole number of clusters (%u,%u,%u); every grid "
                    "dimension must be a multiple of the cluster's\n  launch %s",
                    launch.grid.x, launch.grid.y, launch.grid.z, launch.cluster.x, launch.cluster.y,
                    launch.cluster.z, describe(launch).c_str()));
  }
  if (cluster_blocks > 8) {
    const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (status != cudaSuccess)
      fatal(kExitCudaError, "fault",
            strprintf("launch error: a cluster of %u blocks needs cudaFuncAttributeNonPortableClusterSizeAllowed, "
                      "which failed: %s (%s)\n  launch %s",
                      cluster_blocks, cudaGetErrorName(status), cudaGetErrorString(status),
                      describe(launch).c_str()));
  }
  if (launch.smem_bytes > device.smem_optin_bytes) {
    fatal(kExitCudaError, "fault",
          strprintf("launch error: %s asks for %zu B of dynamic shared memory; %s allows at most %zu B per block "
                    "(cudaDevAttrMaxSharedMemoryPerBlockOptin)\n  launch %s",
                    launch.label, launch.smem_bytes, device.name.c_str(), device.smem_optin_bytes,
                    describe(launch).c_str()));
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
                      describe(launch).c_str()));
    }
  }
}

// A launch that fails synchronously (bad configuration, too many resources) is exit 4 with the
// launch shape and, for resource errors, what the kernel needs against what the device has.
void check_launch(cudaError_t status, const void* kernel, const Launch& launch) {
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
  const unsigned cluster_blocks = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  if (cluster_blocks > 1) {
    // A cluster's blocks must be resident at once on one GPC: ask how many such clusters fit.
    cudaLaunchConfig_t config = {};
    config.gridDim = launch.grid;
    config.blockDim = launch.block;
    config.dynamicSmemBytes = launch.smem_bytes;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = launch.cluster.x;
    attribute.val.clusterDim.y = launch.cluster.y;
    attribute.val.clusterDim.z = launch.cluster.z;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = -1;
    const cudaError_t query = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    detail += query == cudaSuccess
                  ? strprintf("\n  cluster:     %u blocks; at most %d such clusters can be resident at once%s", cluster_blocks,
                              clusters, clusters == 0 ? " (none: the cluster cannot be scheduled with this block size and smem)" : "")
                  : strprintf("\n  cluster:     %u blocks; cudaOccupancyMaxActiveClusters: %s", cluster_blocks,
                              cudaGetErrorName(query));
    cudaGetLastError();  // the query's own error, if any, is reported above
  }
  fatal(kExitCudaError, "fault",
        strprintf("launch error: %s (%s) launching %s\n  launch %s%s", cudaGetErrorName(status),
                  cudaGetErrorString(status), launch.label, describe(launch).c_str(), detail.c_str()));
}

}  // namespace repro
