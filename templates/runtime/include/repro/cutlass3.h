// ---------------------------------------------------------------------------------------------
// repro/cutlass3.h: CUTLASS 3.x kernels (kind: cutlass3)
//
// Included by harness.cu after the spec's prelude, so the CUTLASS headers and the kernel's own
// aliases are in scope; compiled with the production flags, as part of the kernel's own code. The spec names a cutlass::gemm::kernel::GemmUniversal<...> type; this part builds its
// Arguments from the spec's tensors (problem shape from their shapes, strides from their
// layouts, alpha/beta from the reference), asks CUTLASS whether it can run them, and launches
// through CUTLASS's own GemmUniversalAdapter, as production code does.
// ---------------------------------------------------------------------------------------------
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include <cutlass/gemm/device/gemm_universal_adapter.h>

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

template <typename GemmKernel>
struct Runner {
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using ProblemShape = typename GemmKernel::ProblemShape;
  using ElementA = typename GemmKernel::ElementA;
  using ElementB = typename GemmKernel::ElementB;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;
  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC;
  using StrideD = typename GemmKernel::StrideD;

  Gemm gemm;
  typename Gemm::Arguments arguments;
  void* workspace = nullptr;
  bool prepared = false;

  // a [M,K], b [K,N], c and d [M,N] (each optionally with a leading L).
  void prepare(const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d, double alpha, double beta,
               int64_t L, int64_t M, int64_t N, int64_t K) {
    Problems problems;
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
    if (!problems.messages.empty()) {
      for (const std::string& m : problems.messages) std::fprintf(stderr, "spec error: %s\n", m.c_str());
      std::fflush(stderr);
      fatal(kExitUsage, "spec", "the spec does not describe the data the CUTLASS kernel expects (see above)");
    }

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
    int device = 0;
    REPRO_CUDA_CHECK(cudaGetDevice(&device));
    REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&arguments.hw_info.sm_count, cudaDevAttrMultiProcessorCount, device));
    arguments.hw_info.device_id = device;

    const cutlass::Status implementable = gemm.can_implement(arguments);
    if (implementable != cutlass::Status::kSuccess) {
      std::vector<std::string> reasons;
      explain_alignment("A", a, sa, ea, kModesA, &reasons);
      explain_alignment("B", b, sb, eb, kModesB, &reasons);
      explain_alignment("D", d, sd, ed, kModesD, &reasons);
      if (c != nullptr) explain_alignment("C", *c, sc, ed, kModesD, &reasons);
      std::string why;
      for (const std::string& r : reasons) why += "\n  " + r;
      if (why.empty())
        why = "\n  (no stride misalignment found; CUTLASS gives no reason: rebuild with -DCUTLASS_DEBUG_TRACE_LEVEL=1 "
              "to see its trace)";
      fatal(kExitUsage, "spec",
            strprintf("CUTLASS can_implement refused this problem (M=%lld N=%lld K=%lld L=%lld): %s%s",
                      static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                      static_cast<long long>(L), cutlass::cutlassGetStatusString(implementable), why.c_str())
                .c_str());
    }
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

}  // namespace cutlass3
}  // namespace repro
