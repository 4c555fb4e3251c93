// ---------------------------------------------------------------------------------------------
// repro harness runtime: which int8 GEMM kernel runs the emulated reference, and its launch
//
// The plan (how many slices each operand takes, emulated_reference.cuh decides), the step table
// every kernel follows (levels finest first, K tiles, pairs; where the int32 sums fold into the
// fp64 output), and the choice among the kernels of emulated_gemm.cuh and emulated_gemm_tma.cuh.
// Every kernel runs the same steps and folds, so every kernel gives the same bits
// (`tests/cpp/emulated_reference_check.cu kernels` checks that, and times them side by side).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_gemm_tma.cuh"

namespace repro {

// The slice counts of A and B (at least 1: an all-zero operand is one slice of zeros), the
// elements beyond them, and, where the operands cannot be emulated, why not.
struct EmulationPlan {
  int a_slices = 0, b_slices = 0;
  int64_t a_residuals = 0, b_residuals = 0;  // elements beyond the slices (emulated_residuals.cuh)
  double seconds = 0;                         // the estimate it was chosen by
  std::string refusal;  // empty: emulate
  int pairs() const { return a_slices * b_slices; }
  int levels() const { return a_slices + b_slices - 1; }
};

// Whether this build of the runtime has the wgmma kernel for this GPU (sm_90a code), asked once.
inline bool wgmma_available() {
  static const bool available = [] {
    int* flag = nullptr;
    int host = 0;
    REPRO_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    wgmma_available_kernel<<<1, 1>>>(flag);
    REPRO_CUDA_CHECK(cudaGetLastError());
    REPRO_CUDA_CHECK(cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost));
    cudaFree(flag);
    return host == 1;
  }();
  return available;
}

// The int8 GEMM kernels: mma.sync (sm_80 on), and on sm_90a wgmma fed by cp.async, by TMA, and
// by TMA multicast within clusters of two blocks.
enum class EmulatedKernel { mma_sync, wgmma, tma, tma_multicast };
constexpr int kEmulatedKernels = 4;
// As REPRO_EMULATED_KERNEL names them.
constexpr const char* kEmulatedKernelNames[kEmulatedKernels] = {"mma_sync", "wgmma", "tma", "tma_multicast"};

// As the `ref` line names them.
inline const char* emulated_kernel_title(EmulatedKernel kernel) {
  switch (kernel) {
    case EmulatedKernel::mma_sync: return "mma.sync";
    case EmulatedKernel::wgmma: return "wgmma";
    case EmulatedKernel::tma: return "wgmma, TMA";
    case EmulatedKernel::tma_multicast: return "wgmma, TMA multicast";
  }
  return "?";
}

// Whether this build and GPU run `kernel` (the wgmma ones need sm_90a code).
inline bool emulated_kernel_available(EmulatedKernel kernel) {
  return kernel == EmulatedKernel::mma_sync || wgmma_available();
}

// The kernel the emulated reference runs: the one REPRO_EMULATED_KERNEL names (the benchmarks
// time each), else wgmma where this build has it. The TMA kernels are not the default until
// they are measured faster on a GPU (docs/performance.md).
inline EmulatedKernel emulated_kernel() {
  static const EmulatedKernel chosen = [] {
    const char* name = std::getenv("REPRO_EMULATED_KERNEL");
    if (name == nullptr || *name == '\0') return wgmma_available() ? EmulatedKernel::wgmma : EmulatedKernel::mma_sync;
    for (int k = 0; k < kEmulatedKernels; ++k) {
      if (std::strcmp(name, kEmulatedKernelNames[k]) != 0) continue;
      if (!emulated_kernel_available(EmulatedKernel(k)))
        usage_error(strprintf("REPRO_EMULATED_KERNEL=%s needs sm_90a code for this GPU: unset it, or build for sm_90a",
                              name));
      return EmulatedKernel(k);
    }
    usage_error(strprintf("REPRO_EMULATED_KERNEL=%s is not a kernel of the emulated reference: use mma_sync, wgmma, "
                          "tma or tma_multicast, or unset it",
                          name));
  }();
  return chosen;
}

// Whether this build of the runtime runs the int8 kernel on this GPU (sm_80 and later code).
inline bool emulation_supported() {
  cudaFuncAttributes attributes;
  return kernel_code_path(reinterpret_cast<const void*>(emulated_gemm_kernel), &attributes) >= 80;
}

// The step table: levels finest first, then K tiles, then the level's pairs; a fold after a
// level's last step and within a level every kTilePairsPerFold tile-pairs. `folds` counts them.
inline std::vector<EmulationStep> emulation_steps(const EmulationPlan& plan, const SlicedOperand& a,
                                                  const SlicedOperand& b, int* folds) {
  std::vector<EmulationStep> steps;
  const int64_t k_tiles = a.Kp / kEmulatedTileK;
  *folds = 0;
  for (int level = plan.levels() - 1; level >= 0; --level) {
    const int first_t = std::max(0, level - (plan.b_slices - 1)), last_t = std::min(plan.a_slices - 1, level);
    const int64_t tiles_per_fold = std::max(1, kTilePairsPerFold / (last_t - first_t + 1));
    for (int64_t k_tile = 0; k_tile < k_tiles; ++k_tile)
      for (int t = first_t; t <= last_t; ++t) {
        EmulationStep step{t * a.slice_stride() + k_tile * kEmulatedTileK,
                           (level - t) * b.slice_stride() + k_tile * kEmulatedTileK, 0};
        if (t == last_t && (k_tile == k_tiles - 1 || (k_tile + 1) % tiles_per_fold == 0)) {
          step.fold = 1 + level;
          ++*folds;
        }
        steps.push_back(step);
      }
  }
  if (!steps.empty()) steps.back().fold = -steps.back().fold;
  return steps;
}

// Starts the emulated GEMM from the sliced operands with `kernel`; returns the step table's
// device copy (the launch frees it with the other scratch buffers) and sets `roundings` (the
// bound's factor: one per fold, one for alpha).
inline EmulationStep* launch_emulated_gemm(const GemmProblem& p, const EmulationPlan& plan, const SlicedOperand& a,
                                           const SlicedOperand& b, double* out, int* roundings,
                                           EmulatedKernel kernel = emulated_kernel()) {
  int folds = 0;
  const std::vector<EmulationStep> steps = emulation_steps(plan, a, b, &folds);
  *roundings = folds + 1;
  EmulatedGemmArgs args;
  args.a = a, args.b = b, args.out = out, args.alpha = p.alpha;
  args.M = p.M, args.N = p.N, args.step_count = int64_t(steps.size());
  EmulationStep* device_steps = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(&device_steps, std::max<size_t>(1, steps.size()) * sizeof(EmulationStep)));
  REPRO_CUDA_CHECK(
      cudaMemcpy(device_steps, steps.data(), steps.size() * sizeof(EmulationStep), cudaMemcpyHostToDevice));
  args.steps = device_steps;
  if (steps.empty()) {  // K = 0: the product is 0
    fill_kernel<double><<<pipeline_blocks(p.L * p.M * p.N), kPipelineThreads>>>(out, p.L * p.M * p.N, 0.0);
    REPRO_CUDA_CHECK(cudaGetLastError());
    return device_steps;
  }
  switch (kernel) {
    case EmulatedKernel::mma_sync: {
      const dim3 grid(unsigned(b.Ip / kEmulatedTile), unsigned(a.Ip / kEmulatedTile), unsigned(p.L));
      REPRO_CUDA_CHECK(cudaFuncSetAttribute(emulated_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(kEmulatedSharedBytes)));
      emulated_gemm_kernel<<<grid, kEmulatedThreads, kEmulatedSharedBytes>>>(args);
      break;
    }
    case EmulatedKernel::wgmma: {
      const dim3 grid(unsigned(b.Ip / kWgmmaTileN), unsigned(a.Ip / kWgmmaTileM), unsigned(p.L));
      REPRO_CUDA_CHECK(cudaFuncSetAttribute(emulated_gemm_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(kWgmmaSharedBytes)));
      emulated_gemm_wgmma_kernel<<<grid, kWgmmaThreads, kWgmmaSharedBytes>>>(args);
      break;
    }
    case EmulatedKernel::tma: launch_tma_emulated_gemm<1>(args, p.L); break;
    case EmulatedKernel::tma_multicast: launch_tma_emulated_gemm<2>(args, p.L); break;
  }
  REPRO_CUDA_CHECK(cudaGetLastError());
  return device_steps;
}

}  // namespace repro
