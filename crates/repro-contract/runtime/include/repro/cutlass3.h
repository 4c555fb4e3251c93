// ---------------------------------------------------------------------------------------------
// repro/cutlass3.h: CUTLASS 3.x kernels (kind: cutlass3)
//
// Included by harness.cu after the spec's prelude, so the CUTLASS headers and the kernel's own
// aliases are in scope; compiled with the production flags, as part of the kernel's own code. The
// spec names a cutlass::gemm::kernel::GemmUniversal<...> type; this part builds its Arguments from
// the spec's tensors (problem shape from their shapes, strides from their layouts, alpha/beta from
// the reference), asks CUTLASS whether it can run them, and launches through CUTLASS's own
// GemmUniversalAdapter, as production code does. Two runners:
//
//   Runner         reference op gemm: a plain GEMM (ProblemShape (M, N, K[, L])), or one with a
//                  blockwise-scaled mainloop (CUTLASS's sm90 FP8 blockwise collectives), whose
//                  scale pointers and layouts come from reference.scale_a / scale_b
//   GroupedRunner  reference op grouped_gemm, layout masked: a grouped GEMM (ProblemShape
//                  cutlass::gemm::GroupProblemShape<...>, a KernelPtrArray... schedule), one problem
//                  (masked_m[g], N, K) per group, pointer and stride arrays on the device; with
//                  CUTLASS's sm90 ptr-array FP8 blockwise mainloop, group g's scales SA[g], SB[g]
// ---------------------------------------------------------------------------------------------
#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/group_array_problem_shape.hpp>

#include <repro/harness.h>

namespace repro {
namespace cutlass3 {

// printf into a std::string (a std::string never crosses into the runtime library).
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  char buffer[4096];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

// The spec dtype of a CUTLASS element type, so that `dtype: bf16` in the spec and
// `cutlass::bfloat16_t` in the kernel are checked against each other instead of cast.
template <typename T> struct ElementDType { static constexpr bool known = false; };
#define REPRO_CUTLASS_ELEMENT(type, dtype) \
  template <> struct ElementDType<type> { static constexpr bool known = true; static constexpr DType value = DType::dtype; };
REPRO_CUTLASS_ELEMENT(double, f64)
REPRO_CUTLASS_ELEMENT(float, f32)
REPRO_CUTLASS_ELEMENT(cutlass::tfloat32_t, tf32)
REPRO_CUTLASS_ELEMENT(cutlass::half_t, f16)
REPRO_CUTLASS_ELEMENT(cutlass::bfloat16_t, bf16)
REPRO_CUTLASS_ELEMENT(cutlass::float_e4m3_t, e4m3)
REPRO_CUTLASS_ELEMENT(cutlass::float_e5m2_t, e5m2)
REPRO_CUTLASS_ELEMENT(int8_t, i8)
REPRO_CUTLASS_ELEMENT(uint8_t, u8)
REPRO_CUTLASS_ELEMENT(int32_t, i32)
REPRO_CUTLASS_ELEMENT(uint32_t, u32)
REPRO_CUTLASS_ELEMENT(int64_t, i64)
#undef REPRO_CUTLASS_ELEMENT

// Problems found while building the arguments: spec errors (exit 2), not kernel failures.
struct Problems {
  std::vector<std::string> messages;
  void add(const std::string& m) { messages.push_back(m); }
};

template <typename Element>
void check_element(const char* role, const TensorView& t, Problems* problems) {
  if constexpr (!ElementDType<Element>::known) {
    problems->add(strprintf("%s: the kernel's Element%s is a type repro does not map to a spec dtype (%zu bytes); "
                            "tensor %s is %s",
                            role, role, sizeof(Element), t.name, dtype_name(t.dtype)));
  } else if (ElementDType<Element>::value != t.dtype) {
    problems->add(strprintf("%s: tensor %s is %s in the spec, but the kernel's Element%s is %s; make them agree "
                            "(the spec describes the production data, the kernel type its instantiation)",
                            role, t.name, dtype_name(t.dtype), role,
                            dtype_name(ElementDType<Element>::value)));
  }
}

// Fills a CuTe stride (modes e.g. M, K, L for A) from the spec tensor's strides. A mode whose
// stride is fixed in the kernel's type (cute::Int<1> for the contiguous mode) must match the
// spec; otherwise the layout pasted into the kernel contradicts the data, which is exactly the
// mistake a reproducer must catch before it launches anything.
template <typename Stride>
Stride make_stride(const char* role, const TensorView& t, const char* const mode_names[3], const int64_t wanted[3],
                   const int64_t extents[3], Problems* problems) {
  Stride stride{};
  cute::for_each(cute::make_seq<3>{}, [&](auto i) {
    constexpr int mode = decltype(i)::value;
    // A static mode (cute::Int<1>) comes back by value, a dynamic one by reference.
    using S = cute::remove_cvref_t<decltype(cute::get<mode>(stride))>;
    if constexpr (cute::is_static<S>::value) {
      if (extents[mode] > 1 && static_cast<int64_t>(S::value) != wanted[mode]) {
        problems->add(strprintf(
            "%s: the kernel's Stride%s fixes the stride of mode %s to %lld, but tensor %s has stride %lld there "
            "(its layout in the spec and the kernel's Layout%s disagree: fix `layout:`/`strides:` of %s, or the "
            "layout in the prelude)",
            role, role, mode_names[mode], static_cast<long long>(S::value), t.name,
            static_cast<long long>(wanted[mode]), role, t.name));
      }
    } else {
      cute::get<mode>(stride) = static_cast<S>(wanted[mode]);
    }
  });
  return stride;
}

// TMA (which every sm90 CUTLASS mainloop and epilogue use) needs each non-unit stride to be a
// multiple of 16 bytes; can_implement refuses otherwise and CUTLASS does not say why.
inline void explain_alignment(const char* role, const TensorView& t, const int64_t strides[3], const int64_t extents[3],
                              const char* const mode_names[3], std::vector<std::string>* reasons) {
  const size_t bytes = dtype_bytes(t.dtype);
  for (int mode = 0; mode < 3; ++mode) {
    if (extents[mode] <= 1 || strides[mode] == 1) continue;
    const int64_t stride_bytes = strides[mode] * static_cast<int64_t>(bytes);
    if (stride_bytes % 16 != 0)
      reasons->push_back(strprintf("%s (%s): the stride of mode %s is %lld elements = %lld B, not a multiple of the "
                                   "16 B TMA requires",
                                   role, t.name, mode_names[mode], static_cast<long long>(strides[mode]),
                                   static_cast<long long>(stride_bytes)));
  }
}

// Strides of a spec tensor in CUTLASS's (row, column, batch) modes. A rank-2 tensor in a
// batched problem would be shared by the batches; CUTLASS expresses that with batch stride 0.
inline void modes_of(const TensorView& t, int row_dim, int col_dim, int64_t strides[3], int64_t L) {
  const int base = t.rank - 2;
  strides[0] = t.strides[base + row_dim];
  strides[1] = t.strides[base + col_dim];
  strides[2] = t.rank == 3 ? t.strides[0] : (L > 1 ? 0 : t.shape[base] * t.shape[base + 1]);
}

// The GEMM's extents from its tensors (A [L?, M, K], D [L?, M, N]), as the reference reads them.
struct Extents {
  int64_t L, M, N, K;
};
inline Extents extents(const TensorView& a, const TensorView& d) {
  return {d.rank == 3 ? d.shape[0] : 1, d.rank >= 2 ? d.shape[d.rank - 2] : 1, d.shape[d.rank - 1],
          a.shape[a.rank - 1]};
}

// What the kernel type is: a grouped GEMM, a blockwise-scaled mainloop.
template <typename T> struct IsGroupProblemShape : std::false_type {
  using Underlying = T;
};
template <typename S> struct IsGroupProblemShape<cutlass::gemm::GroupProblemShape<S>> : std::true_type {
  using Underlying = S;  // one group's (M, N, K)
};

// A mainloop with block scales, as CUTLASS's sm90 FP8 blockwise collectives have them
// (KernelTmaWarpSpecialized{Cooperative,Pingpong}FP8Blockwise, alias ...FP8BlockScaledAccum):
// the granularities are compile-time constants of LayoutSFA / LayoutSFB, the scales are
// ElementBlockScale (the accumulator type).
template <typename Mainloop, typename = void> struct BlockwiseScaled : std::false_type {};
template <typename Mainloop>
struct BlockwiseScaled<Mainloop,
                       std::void_t<typename Mainloop::LayoutSFA, typename Mainloop::LayoutSFB,
                                   typename Mainloop::ElementBlockScale, decltype(Mainloop::ScaleGranularityM),
                                   decltype(Mainloop::ScaleGranularityN), decltype(Mainloop::ScaleGranularityK)>>
    : std::true_type {};

// Whether the mainloop loads SFA / SFB with TMA (it does for a scale operand with 32 or more
// scales per tile along M / N that are contiguous in memory): then their strides must be
// multiples of 16 bytes, as any TMA operand's.
template <typename Mainloop, typename = void> struct ScalesByTma {
  static constexpr bool a = false, b = false;
};
template <typename Mainloop>
struct ScalesByTma<Mainloop, std::void_t<decltype(Mainloop::IsTmaLoadSFA), decltype(Mainloop::IsTmaLoadSFB)>> {
  static constexpr bool a = Mainloop::IsTmaLoadSFA, b = Mainloop::IsTmaLoadSFB;
};

// The block scales of a scaled GEMM (reference.scale_a / scale_b): SA [ceil(M/bm), ceil(K/bk)],
// SB [ceil(K/bk), ceil(N/bn)], one f32 per block, strides from the tensors' layouts.
struct BlockScales {
  const TensorView* a;
  int64_t block_a[2];  // [bm, bk]
  const TensorView* b;
  int64_t block_b[2];  // [bk, bn]
};

// Mode I... of a CuTe shape or stride: a reference for a dynamic mode, a value for a static one.
template <int I, int... Rest, typename Tuple>
decltype(auto) mode_of(Tuple&& tuple) {
  if constexpr (sizeof...(Rest) == 0) return cute::get<I>(static_cast<Tuple&&>(tuple));
  else return mode_of<Rest...>(cute::get<I>(static_cast<Tuple&&>(tuple)));
}

// Sets a dynamic mode to `value`; a static mode (cute::Int<N>) stays, and says whether it holds
// `value` already.
template <int... I, typename Tuple>
bool set_mode(Tuple& tuple, int64_t value) {
  using Mode = cute::remove_cvref_t<decltype(mode_of<I...>(tuple))>;
  if constexpr (cute::is_static<Mode>::value) {
    return static_cast<int64_t>(Mode::value) == value;
  } else {
    mode_of<I...>(tuple) = static_cast<Mode>(value);
    return true;
  }
}

// CUTLASS's layout of a scale operand, ((granularity, blocks), (granularity_k, blocks_k), L) with
// strides ((0, s), (0, s_k), s_L), from scale tensor `t` whose axis `i_axis` holds the M (or N)
// blocks and the other the K blocks. The kernel's type fixes one of the two block strides to 1
// (MN-major: consecutive M or N blocks adjacent; K-major: consecutive K blocks adjacent); the
// tensor's layout must agree, or the kernel would read the scales transposed.
template <typename LayoutSF>
LayoutSF scale_layout(const char* role, const char* layout_name, const char* i_name, const TensorView& t, int i_axis,
                      Problems* problems) {
  using Shape = cute::remove_cvref_t<decltype(LayoutSF{}.shape())>;
  using Stride = cute::remove_cvref_t<decltype(LayoutSF{}.stride())>;
  const int k_axis = 1 - i_axis;
  const int64_t blocks[2] = {t.shape[i_axis], t.shape[k_axis]};
  const int64_t strides[2] = {t.strides[i_axis], t.strides[k_axis]};
  Shape shape{};
  Stride stride{};
  set_mode<0, 1>(shape, blocks[0]);
  set_mode<1, 1>(shape, blocks[1]);
  set_mode<2>(shape, 1);
  const bool fixed_ok[2] = {set_mode<0, 1>(stride, strides[0]) || blocks[0] <= 1,
                            set_mode<1, 1>(stride, strides[1]) || blocks[1] <= 1};
  // One batch: its stride is the scales' span (CUTLASS's own helpers give it so), never read.
  set_mode<2>(stride, std::max(strides[0] * blocks[0], strides[1] * blocks[1]));
  for (int m = 0; m < 2; ++m) {
    if (fixed_ok[m]) continue;
    const char* axis = m == 0 ? i_name : "K";
    const int axis_index = m == 0 ? i_axis : k_axis;
    problems->add(strprintf(
        "%s: the kernel's %s is %s-major (consecutive %s blocks adjacent, stride 1), but scale tensor %s [%lld, %lld] "
        "has stride %lld between its %s blocks: give %s `layout: %s`, or make the kernel's scale config %s-major",
        role, layout_name, m == 0 ? "MN" : "K", axis, t.name, static_cast<long long>(t.shape[0]),
        static_cast<long long>(t.shape[1]), static_cast<long long>(strides[m]), axis, t.name,
        axis_index == 1 ? "row_major" : "col_major", m == 0 ? "K" : "MN"));
  }
  return LayoutSF(shape, stride);
}

// A scale operand the mainloop loads with TMA: 16-byte strides, and a whole number of 16 bytes
// along its contiguous axis (CUTLASS's check_alignment of the layout).
inline void explain_tma_scales(const char* role, const TensorView& t, std::vector<std::string>* reasons) {
  const size_t bytes = dtype_bytes(t.dtype);
  for (int axis = 0; axis < 2; ++axis) {
    if (t.strides[axis] == 1) {
      const int64_t run = t.shape[axis] * static_cast<int64_t>(bytes);
      if (t.shape[axis] > 1 && run % 16 != 0)
        reasons->push_back(strprintf("%s (%s): CUTLASS loads these scales with TMA, and the %lld scales along its "
                                     "contiguous axis %d are %lld B, not a multiple of 16 B",
                                     role, t.name, static_cast<long long>(t.shape[axis]), axis,
                                     static_cast<long long>(run)));
    } else if (t.shape[axis] > 1 && t.strides[axis] * static_cast<int64_t>(bytes) % 16 != 0) {
      reasons->push_back(strprintf("%s (%s): CUTLASS loads these scales with TMA, and the stride of axis %d is %lld "
                                   "elements = %lld B, not a multiple of 16 B (pad it: explicit `strides:`)",
                                   role, t.name, axis, static_cast<long long>(t.strides[axis]),
                                   static_cast<long long>(t.strides[axis] * static_cast<int64_t>(bytes))));
    }
  }
}

// A blockwise-scaled mainloop's granularities are part of its type: the spec's blocks must be
// exactly those (SA [gm, gk], SB [gk, gn]), and the scale tensors of its ElementBlockScale.
template <typename Mainloop>
void check_scale_blocks(const BlockScales& scales, Problems* problems) {
  using ElementScale = typename Mainloop::ElementBlockScale;
  const TensorView& sa = *scales.a;
  const TensorView& sb = *scales.b;
  const int64_t gm = Mainloop::ScaleGranularityM, gn = Mainloop::ScaleGranularityN, gk = Mainloop::ScaleGranularityK;
  // One operand's block against the kernel's compile-time granularity (rows, columns).
  const auto check_block = [&](const char* role, const char* field, const int64_t* block, int64_t rows,
                               int64_t cols, const char* row_name, const char* col_name, const char* layout) {
    if (block[0] == rows && block[1] == cols) return;
    problems->add(strprintf(
        "%s: reference.%s.block is [%lld, %lld], but the kernel scales %c per [%lld, %lld] block "
        "(%s = %lld, %s = %lld in its %s); CUTLASS's sm90 blockwise mainloop fixes its granularity at compile "
        "time: make the block [%lld, %lld], or the kernel's scale config match the production scales",
        role, field, static_cast<long long>(block[0]), static_cast<long long>(block[1]), role[1],
        static_cast<long long>(rows), static_cast<long long>(cols), row_name, static_cast<long long>(rows), col_name,
        static_cast<long long>(cols), layout, static_cast<long long>(rows), static_cast<long long>(cols)));
  };
  check_block("SA", "scale_a", scales.block_a, gm, gk, "ScaleGranularityM", "ScaleGranularityK", "LayoutSFA");
  check_block("SB", "scale_b", scales.block_b, gk, gn, "ScaleGranularityK", "ScaleGranularityN", "LayoutSFB");
  for (const TensorView* t : {&sa, &sb}) {
    const char* role = t == &sa ? "SA" : "SB";
    if constexpr (!ElementDType<ElementScale>::known) {
      problems->add(strprintf("%s: the kernel reads its block scales as ElementBlockScale, a type repro does not map "
                              "to a spec dtype (%zu bytes); scale tensor %s is %s",
                              role, sizeof(ElementScale), t->name, dtype_name(t->dtype)));
    } else if (ElementDType<ElementScale>::value != t->dtype) {
      problems->add(strprintf("%s: scale tensor %s is %s in the spec, but the kernel reads its block scales as "
                              "ElementBlockScale = %s (the accumulator type): make %s %s",
                              role, t->name, dtype_name(t->dtype), dtype_name(ElementDType<ElementScale>::value),
                              t->name, dtype_name(ElementDType<ElementScale>::value)));
    }
  }
}

// The kernel scales blockwise, the spec gives no scales.
template <typename Mainloop>
std::string scales_missing() {
  return strprintf(
      "the kernel's mainloop scales A and B blockwise (LayoutSFA/LayoutSFB: one scale per %d x %d block of A, "
      "per %d x %d block of B), but the reference has no scales: give `reference.scale_a: { tensor: SA, block: "
      "[%d, %d] }` and `scale_b: { tensor: SB, block: [%d, %d] }` with f32 scale tensors",
      int(Mainloop::ScaleGranularityM), int(Mainloop::ScaleGranularityK), int(Mainloop::ScaleGranularityK),
      int(Mainloop::ScaleGranularityN), int(Mainloop::ScaleGranularityM), int(Mainloop::ScaleGranularityK),
      int(Mainloop::ScaleGranularityK), int(Mainloop::ScaleGranularityN));
}

// The spec gives scales, the kernel takes none; `schedule` and `layouts` are what would.
inline std::string kernel_unscaled(const char* schedule, const char* layouts) {
  return strprintf("reference.scale_a/scale_b: the spec scales A and B per block, but the kernel's mainloop takes no "
                   "block scales (its CollectiveMainloop has no LayoutSFA/LayoutSFB): build it with a %s schedule "
                   "and %s layouts, as the production kernel does",
                   schedule, layouts);
}

[[noreturn]] inline void refuse(const Problems& problems) {
  for (const std::string& m : problems.messages) std::fprintf(stderr, "spec error: %s\n", m.c_str());
  std::fflush(stderr);
  fatal(kExitUsage, "spec", "the spec does not describe the data the CUTLASS kernel expects (see above)");
}

inline std::string joined(const std::vector<std::string>& reasons) {
  std::string why;
  for (const std::string& r : reasons) why += "\n  " + r;
  if (why.empty())
    why = "\n  (no stride misalignment found; CUTLASS gives no reason: rebuild with -DCUTLASS_DEBUG_TRACE_LEVEL=1 "
          "to see its trace)";
  return why;
}

// A copy of `host` on the device, kept for the process: the arguments of a grouped GEMM point
// into it at every launch.
template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* device = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), std::max<size_t>(host.size(), 1) * sizeof(T)));
  if (!host.empty())
    REPRO_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

// What every kind shares: the adapter, its arguments and workspace, the launch.
template <typename GemmKernel>
struct Adapter {
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using ProblemShape = typename GemmKernel::ProblemShape;
  using Mainloop = typename GemmKernel::CollectiveMainloop;
  using ElementA = typename GemmKernel::ElementA;
  using ElementB = typename GemmKernel::ElementB;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;

  Gemm gemm;
  typename Gemm::Arguments arguments;
  void* workspace = nullptr;
  bool prepared = false;

  void set_hw_info() {
    int device = 0;
    REPRO_CUDA_CHECK(cudaGetDevice(&device));
    REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&arguments.hw_info.sm_count, cudaDevAttrMultiProcessorCount, device));
    arguments.hw_info.device_id = device;
  }

  void allocate_workspace() {
    const size_t workspace_bytes = Gemm::get_workspace_size(arguments);
    if (workspace_bytes > 0) REPRO_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    prepared = true;
  }

  Launch launch(const char* label, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) {
    const cutlass::Status initialized = gemm.initialize(arguments, workspace, stream);
    if (initialized != cutlass::Status::kSuccess)
      fatal(kExitCudaError, "fault",
            strprintf("CUTLASS initialize failed for %s: %s", label, cutlass::cutlassGetStatusString(initialized))
                .c_str());
    Launch launch;
    launch.label = label;
    launch.grid = Gemm::get_grid_shape(gemm.params());
    launch.block = GemmKernel::get_block_shape();
    using ClusterShape = typename GemmKernel::DispatchPolicy::ClusterShape;
    launch.cluster = dim3(cute::size<0>(ClusterShape{}), cute::size<1>(ClusterShape{}), cute::size<2>(ClusterShape{}));
    launch.smem_bytes = GemmKernel::SharedStorageSize;
    REPRO_CUDA_CHECK(cudaEventRecord(start, stream));
    const cutlass::Status ran = gemm.run(stream);
    if (ran != cutlass::Status::kSuccess) {
      const cudaError_t error = cudaGetLastError();
      fatal(kExitCudaError, "fault",
            strprintf("launch error: CUTLASS run failed for %s: %s (%s)\n  launch grid (%u,%u,%u) block (%u,%u,%u) "
                      "cluster (%u,%u,%u) smem %zu B",
                      label, cutlass::cutlassGetStatusString(ran), cudaGetErrorName(error), launch.grid.x,
                      launch.grid.y, launch.grid.z, launch.block.x, launch.block.y, launch.block.z, launch.cluster.x,
                      launch.cluster.y, launch.cluster.z, launch.smem_bytes)
                .c_str());
    }
    REPRO_CUDA_CHECK(cudaEventRecord(stop, stream));
    return launch;
  }
};

// reference op gemm: a plain GEMM, optionally with block scales.
template <typename GemmKernel>
struct Runner : Adapter<GemmKernel> {
  using Base = Adapter<GemmKernel>;
  using typename Base::ElementA;
  using typename Base::ElementB;
  using typename Base::ElementC;
  using typename Base::ElementD;
  using typename Base::Mainloop;
  using typename Base::ProblemShape;
  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC;
  using StrideD = typename GemmKernel::StrideD;

  // a [M,K], b [K,N], c and d [M,N] (each optionally with a leading L); scales: the block scales
  // of a scaled GEMM, or none.
  void prepare(const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d, double alpha, double beta,
               int64_t L, int64_t M, int64_t N, int64_t K, const BlockScales* scales = nullptr) {
    Problems problems;
    if constexpr (IsGroupProblemShape<ProblemShape>::value) {
      problems.add("the kernel is a grouped GEMM (its ProblemShape is cutlass::gemm::GroupProblemShape<...>), but the "
                   "reference is one GEMM: describe the groups with `reference: { op: grouped_gemm, layout: masked, "
                   "masked_m: ... }`");
      refuse(problems);
    } else {
      auto& arguments = this->arguments;
      check_element<ElementA>("A", a, &problems);
      check_element<ElementB>("B", b, &problems);
      check_element<ElementD>("D", d, &problems);
      if constexpr (!std::is_void<ElementC>::value) {
        if (c != nullptr) check_element<ElementC>("C", *c, &problems);
      } else if (c != nullptr) {
        problems.add(strprintf("C: the spec gives reference.c (%s), but the kernel's epilogue has no source "
                               "(ElementC is void)", c->name));
      }
      static const char* const kModesA[3] = {"M", "K", "L"};
      static const char* const kModesB[3] = {"N", "K", "L"};
      static const char* const kModesD[3] = {"M", "N", "L"};
      int64_t sa[3], sb[3], sc[3], sd[3];
      modes_of(a, 0, 1, sa, L);  // A [M, K] -> (M, K, L)
      modes_of(b, 1, 0, sb, L);  // B [K, N] -> (N, K, L): CUTLASS puts N first
      modes_of(d, 0, 1, sd, L);  // D [M, N] -> (M, N, L)
      if (c != nullptr) modes_of(*c, 0, 1, sc, L);
      const int64_t ea[3] = {M, K, L}, eb[3] = {N, K, L}, ed[3] = {M, N, L};
      const StrideA stride_a = make_stride<StrideA>("A", a, kModesA, sa, ea, &problems);
      const StrideB stride_b = make_stride<StrideB>("B", b, kModesB, sb, eb, &problems);
      const StrideD stride_d = make_stride<StrideD>("D", d, kModesD, sd, ed, &problems);
      const StrideC stride_c = c != nullptr ? make_stride<StrideC>("C", *c, kModesD, sc, ed, &problems)
                                            : make_stride<StrideC>("C", d, kModesD, sd, ed, &problems);
      ProblemShape shape{};
      if constexpr (cute::rank(ProblemShape{}) == 4) {
        shape = ProblemShape{static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<int>(L)};
      } else {
        if (L > 1) problems.add("the kernel's ProblemShape has no batch mode (Shape<int,int,int>) but the spec is batched");
        shape = ProblemShape{static_cast<int>(M), static_cast<int>(N), static_cast<int>(K)};
      }
      if constexpr (BlockwiseScaled<Mainloop>::value) {
        if (scales == nullptr) problems.add(scales_missing<Mainloop>());
        else prepare_scales(*scales, &problems);
      } else if (scales != nullptr) {
        problems.add(kernel_unscaled("KernelTmaWarpSpecialized{Cooperative,Pingpong}FP8Blockwise",
                                     "cute::tuple<Layout, LayoutSF>"));
      }
      if (!problems.messages.empty()) refuse(problems);

      arguments.mode = L > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm;
      arguments.problem_shape = shape;
      arguments.mainloop.ptr_A = static_cast<const ElementA*>(a.device);
      arguments.mainloop.dA = stride_a;
      arguments.mainloop.ptr_B = static_cast<const ElementB*>(b.device);
      arguments.mainloop.dB = stride_b;
      if constexpr (!std::is_void<ElementC>::value) {
        arguments.epilogue.ptr_C = c != nullptr ? static_cast<const ElementC*>(c->device) : nullptr;
      }
      arguments.epilogue.dC = stride_c;
      arguments.epilogue.ptr_D = static_cast<ElementD*>(d.device);
      arguments.epilogue.dD = stride_d;
      // The default fusion (LinearCombination) and its activation variants take alpha and beta.
      arguments.epilogue.thread.alpha = static_cast<decltype(arguments.epilogue.thread.alpha)>(alpha);
      arguments.epilogue.thread.beta = static_cast<decltype(arguments.epilogue.thread.beta)>(c != nullptr ? beta : 0.0);
      this->set_hw_info();

      const cutlass::Status implementable = this->gemm.can_implement(arguments);
      if (implementable != cutlass::Status::kSuccess) {
        std::vector<std::string> reasons;
        explain_alignment("A", a, sa, ea, kModesA, &reasons);
        explain_alignment("B", b, sb, eb, kModesB, &reasons);
        explain_alignment("D", d, sd, ed, kModesD, &reasons);
        if (c != nullptr) explain_alignment("C", *c, sc, ed, kModesD, &reasons);
        if (scales != nullptr) {
          if (ScalesByTma<Mainloop>::a) explain_tma_scales("SA", *scales->a, &reasons);
          if (ScalesByTma<Mainloop>::b) explain_tma_scales("SB", *scales->b, &reasons);
        }
        fatal(kExitUsage, "spec",
              strprintf("CUTLASS can_implement refused this problem (M=%lld N=%lld K=%lld L=%lld): %s%s",
                        static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                        static_cast<long long>(L), cutlass::cutlassGetStatusString(implementable),
                        joined(reasons).c_str())
                  .c_str());
      }
      this->allocate_workspace();
    }
  }

  // The scale pointers and layouts of a blockwise-scaled mainloop (SA [gm, gk] blocks, SB [gk, gn]).
  void prepare_scales(const BlockScales& scales, Problems* problems) {
    if constexpr (BlockwiseScaled<Mainloop>::value) {
      using ElementScale = typename Mainloop::ElementBlockScale;
      check_scale_blocks<Mainloop>(scales, problems);
      const TensorView& sa = *scales.a;
      const TensorView& sb = *scales.b;
      using LayoutSFA = typename Mainloop::LayoutSFA;
      using LayoutSFB = typename Mainloop::LayoutSFB;
      // SA [M blocks, K blocks]; SB [K blocks, N blocks].
      const LayoutSFA layout_sfa = scale_layout<LayoutSFA>("SA", "LayoutSFA", "M", sa, 0, problems);
      const LayoutSFB layout_sfb = scale_layout<LayoutSFB>("SB", "LayoutSFB", "N", sb, 1, problems);
      this->arguments.mainloop.ptr_SFA = static_cast<const ElementScale*>(sa.device);
      this->arguments.mainloop.layout_SFA = layout_sfa;
      this->arguments.mainloop.ptr_SFB = static_cast<const ElementScale*>(sb.device);
      this->arguments.mainloop.layout_SFB = layout_sfb;
    }
  }
};

// reference op grouped_gemm, layout masked: A [G, M_max, K], B [G, K, N], D [G, M_max, N],
// masked_m [G]. Group g is the problem (masked_m[g], N, K) at A[g], B[g], D[g] (rows past
// masked_m[g] are neither computed nor compared); a group of 0 rows is passed as CUTLASS takes
// it, a problem with M = 0. A blockwise-scaled grouped kernel (CUTLASS's sm90 ptr-array FP8
// blockwise mainloop) also gets group g's scales, SA[g] [M blocks, K blocks] and SB[g] [K blocks,
// N blocks], as pointer arrays.
template <typename GemmKernel>
struct GroupedRunner : Adapter<GemmKernel> {
  using Base = Adapter<GemmKernel>;
  using typename Base::ElementA;
  using typename Base::ElementB;
  using typename Base::ElementC;
  using typename Base::ElementD;
  using typename Base::Mainloop;
  using typename Base::ProblemShape;

  std::vector<int> rows;  // masked_m, as read from the device at prepare time
  // The groups' (M, N, K), also on the host: CUTLASS reads them there in can_implement and
  // initialize.
  std::vector<typename IsGroupProblemShape<ProblemShape>::Underlying> host_shapes;

  // Group g's first element of tensor `t` [G, ...] on the device.
  static unsigned char* group_at(const TensorView& t, int64_t g) {
    return static_cast<unsigned char*>(t.device) + size_t(g * t.strides[0]) * dtype_bytes(t.dtype);
  }

  // scales: the block scales of a blockwise-scaled kernel, SA [G, M blocks, K blocks] and SB [G,
  // K blocks, N blocks], or none.
  void prepare_masked(const TensorView& a, const TensorView& b, const TensorView& masked_m, const TensorView& d,
                      double alpha, const BlockScales* scales = nullptr) {
    Problems problems;
    if constexpr (!IsGroupProblemShape<ProblemShape>::value) {
      problems.add("reference op grouped_gemm: the kernel is not a grouped GEMM (its ProblemShape is one (M, N, K[, L]) "
                   "shape); a grouped kernel has ProblemShape cutlass::gemm::GroupProblemShape<cute::Shape<int, int, "
                   "int>>, layouts given as pointers (LayoutA *, ...) and a KernelPtrArrayTmaWarpSpecialized... "
                   "schedule");
      refuse(problems);
    } else {
      using Shape = typename ProblemShape::UnderlyingProblemShape;
      using StrideA = typename GemmKernel::InternalStrideA;
      using StrideB = typename GemmKernel::InternalStrideB;
      using StrideC = typename GemmKernel::InternalStrideC;
      using StrideD = typename GemmKernel::InternalStrideD;
      auto& arguments = this->arguments;
      check_element<ElementA>("A", a, &problems);
      check_element<ElementB>("B", b, &problems);
      check_element<ElementD>("D", d, &problems);
      const int64_t G = a.shape[0], M = a.shape[1], K = a.shape[2], N = d.shape[2];

      // masked_m [G] (i32), read back from the device: the values the launch will see (after
      // whatever wrote them there).
      rows.assign(size_t(G), 0);
      if (G > 0) {
        REPRO_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<int32_t> raw(size_t((G - 1) * masked_m.strides[0] + 1));
        REPRO_CUDA_CHECK(cudaMemcpy(raw.data(), masked_m.device, raw.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (int64_t g = 0; g < G; ++g) {
          const int32_t r = raw[size_t(g * masked_m.strides[0])];
          if (r < 0 || r > M)
            problems.add(strprintf("%s[%lld] = %d, but a group's row count must be in [0, M_max = %lld]", masked_m.name,
                                   static_cast<long long>(g), r, static_cast<long long>(M)));
          rows[size_t(g)] = r;
        }
      }

      // Every group's strides are its operands' own: (M, K) of A[g], (N, K) of B[g], (M, N) of D[g].
      static const char* const kModesA[3] = {"M", "K", "L"};
      static const char* const kModesB[3] = {"N", "K", "L"};
      static const char* const kModesD[3] = {"M", "N", "L"};
      const int64_t sa[3] = {a.strides[1], a.strides[2], 0}, sb[3] = {b.strides[2], b.strides[1], 0},
                    sd[3] = {d.strides[1], d.strides[2], 0};
      const int64_t ea[3] = {M, K, 1}, eb[3] = {N, K, 1}, ed[3] = {M, N, 1};
      const StrideA stride_a = make_stride<StrideA>("A", a, kModesA, sa, ea, &problems);
      const StrideB stride_b = make_stride<StrideB>("B", b, kModesB, sb, eb, &problems);
      const StrideD stride_d = make_stride<StrideD>("D", d, kModesD, sd, ed, &problems);
      const StrideC stride_c = make_stride<StrideC>("C", d, kModesD, sd, ed, &problems);
      if constexpr (BlockwiseScaled<Mainloop>::value) {
        if (scales == nullptr) problems.add(scales_missing<Mainloop>());
        else prepare_group_scales(*scales, G, N, K, &problems);
      } else if (scales != nullptr) {
        problems.add(kernel_unscaled("KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong}FP8Blockwise",
                                     "cute::tuple<Layout *, LayoutSF *>"));
      }
      if (!problems.messages.empty()) refuse(problems);

      std::vector<Shape>& shapes = host_shapes;
      shapes.clear();
      std::vector<const ElementA*> ptr_a;
      std::vector<const ElementB*> ptr_b;
      std::vector<ElementD*> ptr_d;
      for (int64_t g = 0; g < G; ++g) {
        shapes.push_back(Shape{rows[size_t(g)], static_cast<int>(N), static_cast<int>(K)});
        ptr_a.push_back(reinterpret_cast<const ElementA*>(group_at(a, g)));
        ptr_b.push_back(reinterpret_cast<const ElementB*>(group_at(b, g)));
        ptr_d.push_back(reinterpret_cast<ElementD*>(group_at(d, g)));
      }

      arguments.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
      arguments.problem_shape = ProblemShape{static_cast<int32_t>(G), device_copy(shapes), shapes.data()};
      arguments.mainloop.ptr_A = device_copy(ptr_a);
      arguments.mainloop.dA = device_copy(std::vector<StrideA>(size_t(G), stride_a));
      arguments.mainloop.ptr_B = device_copy(ptr_b);
      arguments.mainloop.dB = device_copy(std::vector<StrideB>(size_t(G), stride_b));
      arguments.epilogue.ptr_C = nullptr;  // no C: grouped_gemm has no beta term
      arguments.epilogue.dC = device_copy(std::vector<StrideC>(size_t(G), stride_c));
      arguments.epilogue.ptr_D = device_copy(ptr_d);
      arguments.epilogue.dD = device_copy(std::vector<StrideD>(size_t(G), stride_d));
      arguments.epilogue.thread.alpha = static_cast<decltype(arguments.epilogue.thread.alpha)>(alpha);
      arguments.epilogue.thread.beta = static_cast<decltype(arguments.epilogue.thread.beta)>(0.0);
      this->set_hw_info();

      const cutlass::Status implementable = this->gemm.can_implement(arguments);
      if (implementable != cutlass::Status::kSuccess) {
        std::vector<std::string> reasons;
        explain_alignment("A", a, sa, ea, kModesA, &reasons);
        explain_alignment("B", b, sb, eb, kModesB, &reasons);
        explain_alignment("D", d, sd, ed, kModesD, &reasons);
        fatal(kExitUsage, "spec",
              strprintf("CUTLASS can_implement refused this grouped problem (G=%lld M_max=%lld N=%lld K=%lld): %s%s",
                        static_cast<long long>(G), static_cast<long long>(M), static_cast<long long>(N),
                        static_cast<long long>(K), cutlass::cutlassGetStatusString(implementable),
                        joined(reasons).c_str())
                  .c_str());
      }
      this->allocate_workspace();
    }
  }

  // The per-group scales of CUTLASS's sm90 ptr-array FP8 blockwise mainloop: arrays of group g's
  // SFA and SFB pointers (SA[g], SB[g]) and layouts. The kernel does not read the layouts it is
  // given: its load_init builds group g's from the group's (M_g, N, K) alone, with the scale
  // config's tile_atom_to_shape_SFA/SFB, so the scales at each pointer must be laid out exactly
  // so. That layout's strides depend on the config's majorness: a K-major SFA steps ceil(K/gk)
  // between M blocks (the same for every group), an MN-major one ceil(M_g/gm) between K blocks
  // (the group's own row count, not SA's M_max). Each group's layout is checked against the spec
  // tensor's strides before anything runs; the arrays passed are those same layouts, as CUTLASS's
  // grouped examples fill them.
  void prepare_group_scales(const BlockScales& scales, int64_t G, int64_t N, int64_t K, Problems* problems) {
    if constexpr (BlockwiseScaled<Mainloop>::value) {
      using ElementScale = typename Mainloop::ElementBlockScale;
      using ScaleConfig = typename Mainloop::ScaleConfig;
      using LayoutSFA = cute::remove_pointer_t<typename Mainloop::LayoutSFA>;
      using LayoutSFB = cute::remove_pointer_t<typename Mainloop::LayoutSFB>;
      check_scale_blocks<Mainloop>(scales, problems);
      const TensorView& sa = *scales.a;
      const TensorView& sb = *scales.b;
      // A scale tensor with a leading G (what the spec's masked layout has) gives each group its
      // own; one without would be every group's.
      const auto group_scales = [](const TensorView& t, int64_t g) {
        return reinterpret_cast<const ElementScale*>(t.rank == 3 ? group_at(t, g) : static_cast<unsigned char*>(t.device));
      };
      std::vector<const ElementScale*> ptr_sfa, ptr_sfb;
      std::vector<LayoutSFA> layouts_sfa;
      std::vector<LayoutSFB> layouts_sfb;
      bool reported_a = false, reported_b = false;
      for (int64_t g = 0; g < G; ++g) {
        const int m = rows[size_t(g)];
        const auto mnkl = cute::make_shape(m, static_cast<int>(N), static_cast<int>(K), 1);
        const LayoutSFA layout_sfa = ScaleConfig::tile_atom_to_shape_SFA(mnkl);
        const LayoutSFB layout_sfb = ScaleConfig::tile_atom_to_shape_SFB(mnkl);
        // SA [G, M blocks, K blocks]: its M blocks on axis rank-2; SB [G, K blocks, N blocks]: its
        // N blocks on axis rank-1.
        if (!reported_a)
          reported_a = !group_scale_layout_fits("SA", "SFA", "M", sa, sa.rank - 2, layout_sfa, g, m, problems);
        if (!reported_b)
          reported_b = !group_scale_layout_fits("SB", "SFB", "N", sb, sb.rank - 1, layout_sfb, g, m, problems);
        ptr_sfa.push_back(group_scales(sa, g));
        ptr_sfb.push_back(group_scales(sb, g));
        layouts_sfa.push_back(layout_sfa);
        layouts_sfb.push_back(layout_sfb);
      }
      auto& mainloop = this->arguments.mainloop;
      mainloop.ptr_SFA = device_copy(ptr_sfa);
      mainloop.layout_SFA = device_copy(layouts_sfa);
      mainloop.ptr_SFB = device_copy(ptr_sfb);
      mainloop.layout_SFB = device_copy(layouts_sfb);
    }
  }

  // Whether scale tensor `t` (its operand's non-K blocks on axis `i_axis`, K blocks on the other
  // of its last two) holds group g's scales where the kernel reads them, through `layout`, CUTLASS's
  // ((granularity, blocks), (granularity_k, blocks_k), L) layout for the group. Only strides
  // between two or more blocks matter. Otherwise says how they differ, and what fits.
  template <typename LayoutSF>
  static bool group_scale_layout_fits(const char* role, const char* sf, const char* i_name, const TensorView& t,
                                      int i_axis, const LayoutSF& layout, int64_t g, int m, Problems* problems) {
    const int k_axis = t.rank == 3 ? 3 - i_axis : 1 - i_axis;
    const int64_t kernel_blocks[2] = {static_cast<int64_t>(cute::get<0, 1>(layout.shape())),
                                      static_cast<int64_t>(cute::get<1, 1>(layout.shape()))};
    const int64_t kernel_strides[2] = {static_cast<int64_t>(cute::get<0, 1>(layout.stride())),
                                       static_cast<int64_t>(cute::get<1, 1>(layout.stride()))};
    const int64_t strides[2] = {t.strides[i_axis], t.strides[k_axis]};
    // A group of no rows has no tiles: the kernel reads none of its scales.
    if (m == 0) return true;
    bool fits = true;
    for (int mode = 0; mode < 2; ++mode)
      fits = fits && (kernel_blocks[mode] <= 1 || kernel_strides[mode] == strides[mode]);
    if (fits) return true;
    // MN-major: the non-K blocks adjacent (stride 1 in the kernel's type).
    using IStride = cute::remove_cvref_t<decltype(cute::get<0, 1>(layout.stride()))>;
    constexpr bool mn_major = cute::is_static<IStride>::value;
    const bool is_a = i_name[0] == 'M';
    std::string fix;
    if (mn_major && is_a) {
      fix = strprintf("an MN-major SFA steps ceil(masked_m[g] / ScaleGranularityM) between a group's K blocks, its own "
                      "row count, so no [G, M_max blocks, K blocks] tensor fits every group; make the kernel's scale "
                      "config K-major for SFA (cutlass::detail::Sm90BlockwiseScaleConfig<gm, gn, gk, "
                      "cute::GMMA::Major::K, ...>) and %s row-major, its K blocks contiguous",
                      t.name);
    } else {
      // The packed layout that matches: the non-K blocks contiguous (MN-major) or the K blocks.
      const bool i_contiguous = mn_major;
      const bool row_major = i_contiguous == (i_axis == t.rank - 1);
      fix = strprintf("give %s `layout: %s` (packed, its %s blocks contiguous), or make the kernel's scale config for "
                      "%s %s-major",
                      t.name, row_major ? "row_major" : "col_major", i_contiguous ? i_name : "K", sf,
                      mn_major ? "K" : "MN");
    }
    problems->add(strprintf(
        "%s: CUTLASS's grouped blockwise mainloop reads group %lld's scales (masked_m = %d) through the layout its "
        "scale config gives the group's (M, N, K) (ScaleConfig::tile_atom_to_shape_%s, %s-major): stride %lld "
        "between %s blocks, %lld between K blocks; scale tensor %s has %lld and %lld there: %s",
        role, static_cast<long long>(g), m, sf, mn_major ? "MN" : "K", static_cast<long long>(kernel_strides[0]),
        i_name, static_cast<long long>(kernel_strides[1]), t.name, static_cast<long long>(strides[0]),
        static_cast<long long>(strides[1]), fix.c_str()));
    return false;
  }
};

}  // namespace cutlass3
}  // namespace repro
