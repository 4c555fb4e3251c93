// ---------------------------------------------------------------------------------------------
// repro harness runtime: the comparison where the reference is (issue 9)
//
// With the reference computed on the device, the output and the reference are both there; 8192^2
// fp64 reference values are 512 MiB, and copying them back and comparing on the host took longer
// than everything else in the run. So the device reduces them to the numbers a passing verdict
// needs (bad, NaN, Inf and unwritten counts, the norms, the largest errors), with the element
// test the host uses (element_matches, REPRO_HD), and only those cross PCIe.
//
// A failing run needs more than sums: where the bad outputs are, which rows they came from, the
// first mismatches. Then the output and the reference are copied back and the host's
// compare_output() does the full analysis, as for a host reference. Repeated launches are
// compared bitwise on the device too; when they differ, the host looks at which ones.
//
// Every reduction is deterministic: each thread sums its grid-stride elements in order, each
// block reduces in a fixed tree, and one block adds the blocks' results in a fixed order.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "reference_cross_check.cuh"

namespace repro {

// A pass's numbers: a thread's with 32-bit counts (a thread sees at most a grid stride's share
// of the elements, and every register counts in the compare pass: it held 80 and spilled), a
// block's and the total with 64-bit ones.
template <typename Count>
struct PassSums {
  double diff2, ref2, cross, got2, diff_cross, max_abs, max_rel, residual2, finite_ref2;
  Count bad, nan, inf, unwritten, finite_ref, differences, not_compared;
};
using ThreadSums = PassSums<int>;
using DeviceSums = PassSums<long long>;

inline __device__ DeviceSums widen(const ThreadSums& x) {
  return DeviceSums{x.diff2, x.ref2, x.cross, x.got2, x.diff_cross, x.max_abs, x.max_rel, x.residual2,
                    x.finite_ref2, x.bad, x.nan, x.inf, x.unwritten, x.finite_ref, x.differences,
                    x.not_compared};
}

REPRO_HD inline void add_sums(DeviceSums& into, const DeviceSums& x) {
  into.diff2 += x.diff2, into.ref2 += x.ref2, into.cross += x.cross, into.got2 += x.got2;
  into.diff_cross += x.diff_cross;
  into.max_abs = into.max_abs > x.max_abs ? into.max_abs : x.max_abs;
  into.max_rel = into.max_rel > x.max_rel ? into.max_rel : x.max_rel;
  into.residual2 += x.residual2, into.finite_ref2 += x.finite_ref2;
  into.bad += x.bad, into.nan += x.nan, into.inf += x.inf, into.unwritten += x.unwritten;
  into.finite_ref += x.finite_ref, into.differences += x.differences, into.not_compared += x.not_compared;
}

// Lane i's sums from lane i + offset of the same warp.
__device__ inline DeviceSums shuffle_down(const DeviceSums& x, int offset) {
  DeviceSums y;
  const auto down = [offset](auto value) { return __shfl_down_sync(0xFFFFFFFFu, value, offset); };
  y.diff2 = down(x.diff2), y.ref2 = down(x.ref2), y.cross = down(x.cross), y.got2 = down(x.got2);
  y.diff_cross = down(x.diff_cross);
  y.max_abs = down(x.max_abs), y.max_rel = down(x.max_rel), y.residual2 = down(x.residual2);
  y.finite_ref2 = down(x.finite_ref2);
  y.bad = down(x.bad), y.nan = down(x.nan), y.inf = down(x.inf), y.unwritten = down(x.unwritten);
  y.finite_ref = down(x.finite_ref), y.differences = down(x.differences), y.not_compared = down(x.not_compared);
  return y;
}

enum class DevicePass : int {
  reference_rms,  // the reference's finite values: sum of squares and count
  compare,        // the element test and the norms
  residual,       // ||out - ratio * ref||^2, once ratio is known
  differences,    // outputs that differ bit for bit from another run's
};

// One element's share of a pass: `w` the reference, `bits` the output's storage bits, `other`
// another run's (DevicePass::differences).
template <DevicePass pass>
__device__ inline void add_element(DType dtype, double w, uint64_t bits, uint64_t other,
                                   const Tolerance& tol, double ratio, ThreadSums& s) {
  if constexpr (pass == DevicePass::reference_rms) {
    if (std::isfinite(w)) s.finite_ref2 += w * w, ++s.finite_ref;
    return;
  }
  if constexpr (pass == DevicePass::differences) {
    if (bits != other) ++s.differences;
    return;
  }
  if (is_not_compared(w)) {
    if (pass == DevicePass::compare) ++s.not_compared;
    return;
  }
  const double got = decode_bits(dtype, bits);
  const bool unwritten = is_poison_bits(dtype, bits) && !(got == round_to(dtype, w));
  const bool measurable = std::isfinite(got) && std::isfinite(w) && !unwritten;
  if constexpr (pass == DevicePass::residual) {
    if (measurable) {
      const double r = got - ratio * w;
      s.residual2 += r * r;
    }
    return;
  }
  ElementFault fault;
  s.bad += !judge_element(dtype, got, w, unwritten, tol, fault);
  s.unwritten += fault == ElementFault::unwritten;
  s.nan += fault == ElementFault::nan;
  s.inf += fault == ElementFault::inf;
  if (measurable) {
    const double diff = got - w;
    s.diff2 += diff * diff;
    s.ref2 += w * w;
    s.cross += got * w;
    s.got2 += got * got;
    s.diff_cross += diff * w;
    const double abs_diff = std::fabs(diff);
    s.max_abs = s.max_abs > abs_diff ? s.max_abs : abs_diff;
    if (w != 0.0) {
      const double rel = abs_diff / std::fabs(w);
      s.max_rel = s.max_rel > rel ? s.max_rel : rel;
    }
  }
}

// A block's threads' sums into *into: a fixed tree, within each warp by shuffles, then the warps'
// sums in order. (A shared array of every thread's sums, 30 KiB a block, let two blocks at most
// share an SM.)
__device__ inline void reduce_block_sums(DeviceSums s, DeviceSums* into) {
  __shared__ DeviceSums shared[kPipelineThreads / 32];
  for (int lane_offset = 16; lane_offset > 0; lane_offset /= 2) add_sums(s, shuffle_down(s, lane_offset));
  const int warp = int(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) shared[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kPipelineThreads / 32; ++w) add_sums(shared[0], shared[w]);
    *into = shared[0];
  }
}

// Each block reduces its threads' sums and writes one DeviceSums. A thread loads kElementsInFlight
// elements (a grid stride apart) before it adds any: one load at a time per thread left the
// memory system mostly idle, and the passes ran at a tenth of the bandwidth.
// One kernel per pass: the compare pass's element test alone holds more registers than the
// others need, and sharing one body limited them all to its occupancy.
constexpr int kElementsInFlight = 4;
// Blocks an SM must hold, and so the register cap: 3 gives the compare pass 80 registers (852
// bytes spilled), 2 gives it 128 (252 spilled), 1 leaves it uncapped. Timed with each on the
// H200 (run 74, tests/cpp/device_reference_check.cu's `compare` mode): rms + comparison of
// 8192^2 bf16 outputs 2.68 / 3.03 / 3.55 ms, of 16384^2 7.24 / 8.35 / 10.96 ms. (Those were the
// run-time dtype's kernel; with the dtype fixed, f32, bf16, f16 and f64 outputs take 64
// registers and spill nothing: ncu on the H200, run 87, rms 0.16 + comparison 0.47 ms at 8192^2
// bf16.)
constexpr int kCompareBlocksPerSm = 3;
// kDense: the output is row-major without gaps (DeviceLayout::dense), its offsets the logical
// indices; the general case keeps the layout's shape and strides in local memory. kDtype: the
// output's dtype fixed at compile time, for the common ones (one decode path: the compare pass
// fits 64 registers, where the run-time switch over every dtype held 80 and spilled ~700
// bytes), or kAnyDtype, the output's own at run time.
constexpr int kAnyDtype = -1;

template <DevicePass pass, bool kDense, int kDtype>
__global__ void __launch_bounds__(kPipelineThreads, kCompareBlocksPerSm) device_compare_kernel(DeviceLayout out, const unsigned char* storage,
                                      const unsigned char* other_run, const double* want, int64_t count,
                                      Tolerance tol, double ratio, DeviceSums* partials) {
  const DType dtype = kDtype == kAnyDtype ? out.dtype : DType(kDtype);
  ThreadSums t = {};
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  constexpr bool reads_output = pass != DevicePass::reference_rms;
  for (int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; first < count;
       first += kElementsInFlight * stride) {
    double w[kElementsInFlight];
    uint64_t bits[kElementsInFlight], other[kElementsInFlight];
#pragma unroll
    for (int u = 0; u < kElementsInFlight; ++u) {
      const int64_t i = first + u * stride;
      w[u] = 0.0, bits[u] = 0, other[u] = 0;
      if (i >= count) continue;
      if (want != nullptr) w[u] = want[i];
      const int64_t offset = !reads_output ? 0 : kDense ? i : out.logical_offset(i);
      if (reads_output) bits[u] = load_bits(dtype, storage, offset);
      if (other_run != nullptr) other[u] = load_bits(dtype, other_run, offset);
    }
#pragma unroll
    for (int u = 0; u < kElementsInFlight; ++u)
      if (first + u * stride < count) add_element<pass>(dtype, w[u], bits[u], other[u], tol, ratio, t);
  }
  reduce_block_sums(widen(t), partials + blockIdx.x);
}

// The blocks' sums in one: thread t adds blocks t, t + kPipelineThreads, ... in order, then the
// block's fixed tree. (Copying every block's sums to the host, up to 4096 of them, and adding
// them there took longer than the pass itself at 1024^2 outputs.)
__global__ void __launch_bounds__(kPipelineThreads) add_block_sums_kernel(DeviceSums* partials, unsigned blocks) {
  DeviceSums s = {};
  for (unsigned b = threadIdx.x; b < blocks; b += kPipelineThreads) add_sums(s, partials[b]);
  __syncthreads();  // every block's sums read before the total overwrites the first
  reduce_block_sums(s, partials);
}

// The kernel of `pass` for this output: dense or not, and for the passes that decode the output
// (compare, residual), its dtype fixed where it is a common one.
template <DevicePass pass, typename Launch>
inline void launch_device_pass(const DeviceLayout& layout, Launch&& launch) {
  if constexpr (pass == DevicePass::reference_rms) {
    launch(device_compare_kernel<pass, true, kAnyDtype>);  // reads the reference alone
  } else {
    if (!layout.dense) return launch(device_compare_kernel<pass, false, kAnyDtype>);
    if constexpr (pass == DevicePass::compare || pass == DevicePass::residual) {
      switch (layout.dtype) {
        case DType::f32: return launch(device_compare_kernel<pass, true, int(DType::f32)>);
        case DType::bf16: return launch(device_compare_kernel<pass, true, int(DType::bf16)>);
        case DType::f16: return launch(device_compare_kernel<pass, true, int(DType::f16)>);
        case DType::f64: return launch(device_compare_kernel<pass, true, int(DType::f64)>);
        default: break;
      }
    }
    launch(device_compare_kernel<pass, true, kAnyDtype>);
  }
}

// A pass launches no more blocks than the device holds at once (its SMs times
// kCompareBlocksPerSm), each thread taking more elements: a million outputs were 4096 blocks'
// sums, and 4096 sums added after, 0.11 ms a check at 1024^3 against 0.05 (run 109, an H100's
// 396 blocks). The sums' order follows the grid: the same device model, the same bits.
inline unsigned compare_blocks(int64_t count) {
  static const unsigned resident = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0) {
      cudaGetLastError();
      return 0u;
    }
    return unsigned(sms) * unsigned(kCompareBlocksPerSm);
  }();
  const unsigned blocks = pipeline_blocks(count);
  return resident > 0 ? std::min(blocks, resident) : blocks;
}

// One pass over the output (or the reference) on the device, its total made there too.
inline DeviceSums device_pass(DevicePass pass, const Tensor& out, const void* other_run, const double* want,
                              int64_t count, const Tolerance& tol, double ratio) {
  const unsigned blocks = compare_blocks(count);
  DeviceSums* partials = take_scratch<DeviceSums>(blocks * sizeof(DeviceSums));
  const DeviceLayout layout = device_layout(out);
  const auto launch = [&](auto kernel) {
    kernel<<<blocks, kPipelineThreads>>>(layout, static_cast<const unsigned char*>(out.device),
                                         static_cast<const unsigned char*>(other_run), want, count, tol, ratio,
                                         partials);
  };
  switch (pass) {
    case DevicePass::reference_rms: launch_device_pass<DevicePass::reference_rms>(layout, launch); break;
    case DevicePass::compare: launch_device_pass<DevicePass::compare>(layout, launch); break;
    case DevicePass::residual: launch_device_pass<DevicePass::residual>(layout, launch); break;
    case DevicePass::differences: launch_device_pass<DevicePass::differences>(layout, launch); break;
  }
  add_block_sums_kernel<<<1, kPipelineThreads>>>(partials, blocks);
  REPRO_CUDA_CHECK(cudaGetLastError());
  DeviceSums total;
  REPRO_CUDA_CHECK(cudaMemcpy(&total, partials, sizeof(DeviceSums), cudaMemcpyDeviceToHost));
  give_back_scratch(partials);
  return total;
}

// The reference's rms (reference_rms() of the host), for the default tolerance.
inline double device_reference_rms(const Tensor& out, const double* want, int64_t count) {
  const DeviceSums s = device_pass(DevicePass::reference_rms, out, nullptr, want, count, Tolerance{}, 0.0);
  return s.finite_ref ? std::sqrt(s.finite_ref2 / double(s.finite_ref)) : 0.0;
}

// Outputs (logical elements) whose bits differ between the device output and another run's copy.
inline int64_t device_differences(const Tensor& out, const void* other_run) {
  return device_pass(DevicePass::differences, out, other_run, nullptr, out.numel(), Tolerance{}, 0.0).differences;
}

// ||out - ratio * ref||^2 with ratio = cross / ref2. From the compare pass's sums: with d = out -
// ref it is diff2 - diff_cross^2 / ref2 (diff_cross = sum d ref), which loses nothing while at
// most half of diff2 cancels: an output that is rounding away from the reference, whose
// differences are no multiple of it. Otherwise (an output that is nearly a multiple of the
// reference, where the residual is what matters) a second pass over the elements, which every
// comparison made before: a read of the output and the reference as long as the first.
inline double residual_squares(const DeviceSums& s, const Tensor& out, const double* want, int64_t outputs,
                               const Tolerance& tol, double ratio) {
  const double along_reference = s.diff_cross * s.diff_cross / s.ref2;
  if (along_reference <= 0.5 * s.diff2) return s.diff2 - along_reference;
  return device_pass(DevicePass::residual, out, nullptr, want, outputs, tol, ratio).residual2;
}

// The comparison of the device output against the device reference, when it passes: the counts
// and norms, nothing located (there is nothing to locate). `passed` false means the host must do
// the full analysis (compare_output) on copies.
inline Comparison device_comparison(const Tensor& out, const double* want, int64_t L, int64_t M, int64_t N,
                                    const Tolerance& tol, int64_t tile_m, int64_t tile_n, double ref_rms) {
  Comparison c = comparison_frame(L, M, N, tile_m, tile_n);
  c.ref_rms = ref_rms;
  const int64_t outputs = c.count;
  const DeviceSums s = device_pass(DevicePass::compare, out, nullptr, want, outputs, tol, 0.0);
  c.bad = s.bad, c.nan = s.nan, c.inf = s.inf, c.unwritten = s.unwritten;
  c.not_compared = s.not_compared;
  c.count -= s.not_compared;
  c.max_abs = s.max_abs, c.max_rel = s.max_rel;
  set_norms(c, s.diff2, s.ref2, s.cross);
  if (s.got2 > 0.0 && s.ref2 > 0.0) c.residual = std::sqrt(residual_squares(s, out, want, outputs, tol, c.ratio) / s.got2);
  // The residue classes' sizes, for the report's tables: (m mod 8, n mod 8) over L batches.
  for (int r = 0; r < Comparison::kPeriod; ++r)
    for (int q = 0; q < Comparison::kPeriod; ++q) {
      const int64_t rows = M > r ? (M - 1 - r) / Comparison::kPeriod + 1 : 0;
      const int64_t cols = N > q ? (N - 1 - q) / Comparison::kPeriod + 1 : 0;
      c.count_by_residue[r * Comparison::kPeriod + q] = L * rows * cols;
    }
  set_passed(c, tol);
  return c;
}

}  // namespace repro
