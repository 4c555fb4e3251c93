// ---------------------------------------------------------------------------------------------
// repro runtime: replaying a captured launch (declared in include/repro/replay.h)
//
// The module is loaded once per process (a run launches it many times), from the cubin spec.yaml
// names; the parameter bytes are read once too. Each launch copies the bytes, rewrites the
// relocations for this run's tensors (their addresses do not change between launches, but
// nothing here relies on that), and launches. A production program may have raised the kernel's
// dynamic shared memory limit or allowed non-portable clusters: the same attributes are set
// from the launch's own shape, as prepare_launch does for a compiled kernel.
//
// A sequence (spec: launches) may replay several launches: each has its own module, function and
// bytes, found by its path in spec.yaml (`launches[1]`; `kernel` for the one kernel), and goes
// through the same code, without events of its own (the runtime times the call around them all).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "tma.cuh"

#include <repro/replay.h>

#include <map>

namespace repro {

inline void check_driver(CUresult result, const std::string& what) {
  if (result != CUDA_SUCCESS)
    fatal(kExitCudaError, "fault", strprintf("%s: %s", what.c_str(), cu_result_name(result).c_str()));
}

struct LoadedReplay {
  CUfunction function = nullptr;
  std::vector<unsigned char> params;
};

// Where spec.yaml gives the launch's files: `kernel`, or `launches[i]` in a sequence.
inline std::string replay_path(const ReplayKernel& kernel) { return kernel.path ? kernel.path : "kernel"; }

inline const LoadedReplay& load_replay(const ReplayKernel& kernel) {
  static std::map<std::string, LoadedReplay> every;  // by path; std::map: references stay put
  const std::string path = replay_path(kernel);
  LoadedReplay& loaded = every[path];
  if (loaded.function != nullptr) return loaded;
  const ReplayFiles& files = replay_files(path);
  if (files.cubin.empty() || files.params.empty())
    usage_error(strprintf("%s: spec.yaml gives no `%s` for this replayed launch", path.c_str(),
                          files.cubin.empty() ? "cubin" : "params"));
  std::vector<unsigned char> cubin;
  std::string error;
  if (!read_file_bytes(files.cubin, &cubin, &error)) usage_error(path + ".cubin: " + error);
  if (!read_file_bytes(files.params, &loaded.params, &error, 32 * 1024)) usage_error(path + ".params: " + error);
  // The runtime made the context current (cudaFree(0) in open_device); the module loads into it.
  auto load_data = driver_function<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", 2000, "kind: replay");
  auto get_function = driver_function<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction", 2000, "kind: replay");
  CUmodule module = nullptr;
  check_driver(load_data(&module, cubin.data()),
               strprintf("kind: replay: cuModuleLoadData(%s, %zu bytes)", files.cubin.c_str(), cubin.size()));
  check_driver(get_function(&loaded.function, module, kernel.symbol),
               strprintf("kind: replay: cuModuleGetFunction(%s) in %s", kernel.symbol, files.cubin.c_str()));
  for (int i = 0; i < kernel.pointer_count; ++i)
    if (size_t(kernel.pointers[i].at) + 8 > loaded.params.size())
      usage_error(strprintf("%s.relocate: an address at byte %u is past the %zu parameter bytes of %s", path.c_str(),
                            kernel.pointers[i].at, loaded.params.size(), files.params.c_str()));
  for (int i = 0; i < kernel.tensor_map_count; ++i)
    if (size_t(kernel.tensor_maps[i].at) + sizeof(CUtensorMap) > loaded.params.size())
      usage_error(strprintf("%s.relocate: a tensor map at byte %u is past the %zu parameter bytes of %s", path.c_str(),
                            kernel.tensor_maps[i].at, loaded.params.size(), files.params.c_str()));
  std::printf("replay  %s from %s, %zu parameter bytes, %d addresses and %d tensor maps relocated\n", kernel.symbol,
              files.cubin_as_written.c_str(), loaded.params.size(), kernel.pointer_count, kernel.tensor_map_count);
  return loaded;
}

// A CUtensorMap as production encoded it, over the harness's tensor.
inline CUtensorMap encode_replayed_map(const ReplayTensorMap& m, const TensorView& tensor, const ReplayKernel& kernel) {
  // The runtime prints each map once by name: one name per relocation (std::map keeps them put),
  // `relocate@112`, or in a sequence `launches[1].relocate@112`.
  static std::map<std::pair<std::string, unsigned>, std::string> names;
  std::string& name = names[{replay_path(kernel), m.at}];
  if (name.empty()) name = kernel.path ? strprintf("%s.relocate@%u", kernel.path, m.at) : strprintf("relocate@%u", m.at);
  TmaRequest request = {};
  request.name = name.c_str();
  request.tensor = tensor.name;
  request.dim_names = "as captured";
  request.data_type = m.data_type;
  request.data_type_name = "as captured";
  request.rank = m.rank;
  for (cuuint32_t d = 0; d < m.rank && d < 5; ++d) {
    request.dims[d] = m.dims[d];
    request.box[d] = m.box[d];
    request.element_strides[d] = m.element_strides[d];
    if (d > 0) request.strides_bytes[d - 1] = m.strides[d - 1];
  }
  request.interleave = m.interleave, request.swizzle = m.swizzle;
  request.l2_promotion = m.l2_promotion, request.oob_fill = m.oob_fill;
  request.interleave_name = request.swizzle_name = request.l2_promotion_name = request.oob_fill_name = "as captured";
  return encode_tma(request, static_cast<char*>(tensor.device) + m.offset);
}

// `start` and `stop` are recorded just around the launch itself (the copy and relocation of the
// bytes are host work, not the kernel's), or not at all when null (a launch of a sequence).
void replay_launch(const ReplayKernel& kernel, const TensorView* tensors, const Launch& launch, cudaStream_t stream,
                   cudaEvent_t start, cudaEvent_t stop) {
  const LoadedReplay& loaded = load_replay(kernel);
  std::vector<unsigned char> params = loaded.params;
  for (int i = 0; i < kernel.pointer_count; ++i) {
    const ReplayPointer& p = kernel.pointers[i];
    const uint64_t address = reinterpret_cast<uint64_t>(tensors[p.tensor].device) + p.offset;
    std::memcpy(params.data() + p.at, &address, sizeof address);
  }
  for (int i = 0; i < kernel.tensor_map_count; ++i) {
    const ReplayTensorMap& m = kernel.tensor_maps[i];
    const CUtensorMap map = encode_replayed_map(m, tensors[m.tensor], kernel);
    std::memcpy(params.data() + m.at, &map, sizeof map);
  }

  static auto set_attribute = driver_function<PFN_cuFuncSetAttribute_v9000>("cuFuncSetAttribute", 9000, "kind: replay");
  static auto launch_ex = driver_function<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", 11060, "kind: replay");
  if (launch.smem_bytes > 48 * 1024)
    check_driver(set_attribute(loaded.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(launch.smem_bytes)),
                 strprintf("kind: replay: %zu bytes of dynamic shared memory", launch.smem_bytes));
  const unsigned cluster_size = launch.cluster.x * launch.cluster.y * launch.cluster.z;
  if (cluster_size > 8)
    check_driver(set_attribute(loaded.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                 strprintf("kind: replay: a cluster of %u blocks", cluster_size));

  size_t size = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig config = {};
  config.gridDimX = launch.grid.x, config.gridDimY = launch.grid.y, config.gridDimZ = launch.grid.z;
  config.blockDimX = launch.block.x, config.blockDimY = launch.block.y, config.blockDimZ = launch.block.z;
  config.sharedMemBytes = unsigned(launch.smem_bytes);
  config.hStream = stream;
  CUlaunchAttribute cluster;
  if (cluster_size > 1) {
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = launch.cluster.x;
    cluster.value.clusterDim.y = launch.cluster.y;
    cluster.value.clusterDim.z = launch.cluster.z;
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  if (start != nullptr) REPRO_CUDA_CHECK(cudaEventRecord(start, stream));
  const CUresult result = launch_ex(&config, loaded.function, nullptr, extra);
  if (result != CUDA_SUCCESS)
    fatal(kExitCudaError, "fault",
          strprintf("kind: replay: cuLaunchKernelEx(%s) failed: %s\n  %s", kernel.symbol, cu_result_name(result).c_str(),
                    describe(launch).c_str()));
  if (stop != nullptr) REPRO_CUDA_CHECK(cudaEventRecord(stop, stream));
}

}  // namespace repro
