// ---------------------------------------------------------------------------------------------
// repro harness runtime: which int8 GEMM kernel runs the emulated reference, and its launch
//
// The plan (the scheme and how many planes each operand takes; emulated_reference.cuh decides),
// the step table every kernel follows (which planes and K tile each step multiplies, where the
// int32 sums fold), and the choice among the kernels of emulated_gemm.cuh and
// emulated_gemm_tma.cuh.
// Every kernel runs the same steps and folds, so every kernel gives the same bits
// (`tests/cpp/emulated_reference_check.cu kernels` checks that, and times them side by side).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_gemm_tma.cuh"

namespace repro {

// How the operands become int8 planes: 7-bit slices (emulated_slices.cuh) or residues of
// integers modulo small moduli (emulated_moduli.cuh).
enum class EmulationScheme { slices, moduli };

// The planes of A and B (at least 1: an all-zero operand is one slice of zeros), the widths they
// hold exactly, the elements beyond them, and, where the operands cannot be emulated, why not.
struct EmulationPlan {
  EmulationScheme scheme = EmulationScheme::slices;
  int a_slices = 0, b_slices = 0;  // planes: slices of each operand, or (moduli) the moduli, both
  int a_bits = 0, b_bits = 0;      // what the planes hold: 7 bits a slice, or the moduli's integer widths
  int64_t a_residuals = 0, b_residuals = 0;  // elements beyond them (emulated_residuals.cuh)
  double seconds = 0;                         // the estimate it was chosen by
  std::string refusal;  // empty: emulate
  bool moduli() const { return scheme == EmulationScheme::moduli; }
  // The int8 GEMMs: a pair of slices each, or one per modulus.
  int pairs() const { return moduli() ? a_slices : a_slices * b_slices; }
  int levels() const { return a_slices + b_slices - 1; }  // slices: the powers of two the pairs fall on
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
// time each), else wgmma fed by TMA multicast where this build has it (run 79: 1.3-1.4x the
// rate of TMA alone, whose blocks each stream 48 KiB a step from L2 where these stream 32;
// docs/performance.md), else mma.sync.
inline EmulatedKernel emulated_kernel() {
  static const EmulatedKernel chosen = [] {
    const char* name = std::getenv("REPRO_EMULATED_KERNEL");
    if (name == nullptr || *name == '\0')
      return wgmma_available() ? EmulatedKernel::tma_multicast : EmulatedKernel::mma_sync;
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

// The step table. Slices: levels finest first, then K tiles, then the level's pairs; a fold
// after a level's last step and within a level every kTilePairsPerFold tile-pairs. Moduli: per
// modulus its K tiles, a fold after the last and every kTilePairsPerFold. `folds` counts them.
inline std::vector<EmulationStep> emulation_steps(const EmulationPlan& plan, const SlicedOperand& a,
                                                  const SlicedOperand& b, int* folds) {
  std::vector<EmulationStep> steps;
  const int64_t k_tiles = a.Kp / kEmulatedTileK;
  *folds = 0;
  if (plan.moduli()) {
    for (int n = 0; n < plan.pairs(); ++n)
      for (int64_t k_tile = 0; k_tile < k_tiles; ++k_tile) {
        EmulationStep step{n * a.slice_stride() + k_tile * kEmulatedTileK,
                           n * b.slice_stride() + k_tile * kEmulatedTileK,
                           n,
                           n,
                           int(k_tile),
                           0,
                           0};
        if (k_tile == k_tiles - 1 || (k_tile + 1) % kTilePairsPerFold == 0) {
          step.fold = 1 + n;
          step.fresh = k_tile < kTilePairsPerFold;  // the modulus's first fold
          ++*folds;
        }
        steps.push_back(step);
      }
  } else {
    for (int level = plan.levels() - 1; level >= 0; --level) {
      const int first_t = std::max(0, level - (plan.b_slices - 1)), last_t = std::min(plan.a_slices - 1, level);
      const int64_t tiles_per_fold = std::max(1, kTilePairsPerFold / (last_t - first_t + 1));
      for (int64_t k_tile = 0; k_tile < k_tiles; ++k_tile)
        for (int t = first_t; t <= last_t; ++t) {
          EmulationStep step{t * a.slice_stride() + k_tile * kEmulatedTileK,
                             (level - t) * b.slice_stride() + k_tile * kEmulatedTileK,
                             t,
                             level - t,
                             int(k_tile),
                             0,
                             0};
          if (t == last_t && (k_tile == k_tiles - 1 || (k_tile + 1) % tiles_per_fold == 0)) {
            step.fold = 1 + level;
            step.fresh = *folds == 0;  // every later fold adds to the output
            ++*folds;
          }
          steps.push_back(step);
        }
    }
  }
  if (!steps.empty()) steps.back().fold = -steps.back().fold;
  return steps;
}

// A device buffer of the emulated GEMM (allocate_emulation_bytes) that goes into `scratch`,
// freed with the launch's other scratch buffers.
inline void* allocate_emulation_buffer(size_t bytes, const char* what, std::vector<void*>* scratch) {
  void* data = allocate_emulation_bytes(bytes, what);
  scratch->push_back(data);
  return data;
}

// Starts the emulated GEMM from the operands' planes with `kernel`, its buffers (the step
// table's device copy, the moduli's residue planes) into `scratch`, and sets `roundings` (the
// bound's factor). Slices: one rounding per fold, one for alpha. Moduli: the exact integer
// product rounded once, then alpha's product.
inline void launch_emulated_gemm(const GemmProblem& p, const EmulationPlan& plan, const SlicedOperand& a,
                                 const SlicedOperand& b, double* out, int* roundings, std::vector<void*>* scratch,
                                 EmulatedKernel kernel = emulated_kernel()) {
  int folds = 0;
  const std::vector<EmulationStep> steps = emulation_steps(plan, a, b, &folds);
  *roundings = plan.moduli() ? 2 : folds + 1;
  EmulatedGemmArgs args;
  args.a = a, args.b = b, args.out = out, args.alpha = p.alpha, args.residues = nullptr;
  args.M = p.M, args.N = p.N, args.outputs = p.L * p.M * p.N, args.step_count = int64_t(steps.size());
  EmulationStep* device_steps = static_cast<EmulationStep*>(
      allocate_emulation_buffer(std::max<size_t>(1, steps.size()) * sizeof(EmulationStep), "its step table", scratch));
  REPRO_CUDA_CHECK(
      cudaMemcpy(device_steps, steps.data(), steps.size() * sizeof(EmulationStep), cudaMemcpyHostToDevice));
  args.steps = device_steps;
  if (steps.empty()) {  // K = 0: the product is 0
    fill_kernel<double><<<pipeline_blocks(p.L * p.M * p.N), kPipelineThreads>>>(out, p.L * p.M * p.N, 0.0);
    REPRO_CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (plan.moduli())
    args.residues = static_cast<unsigned char*>(
        allocate_emulation_buffer(size_t(plan.pairs()) * size_t(args.outputs), "the residues of its outputs", scratch));
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
  if (plan.moduli()) {
    ReconstructionArgs reconstruction;
    reconstruction.residues = args.residues, reconstruction.a_top = a.top, reconstruction.b_top = b.top;
    reconstruction.a_batches = a.batches, reconstruction.b_batches = b.batches;
    reconstruction.a_bits = a.bits, reconstruction.b_bits = b.bits, reconstruction.alpha = p.alpha;
    reconstruction.out = out, reconstruction.L = p.L, reconstruction.M = p.M, reconstruction.N = p.N;
    reconstruction.moduli = moduli_constants(plan.pairs());
    launch_moduli_reconstruction(reconstruction);
    REPRO_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace repro
