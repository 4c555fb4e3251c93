#pragma once
// A "megakernel" task body: the TMA GEMM of tma_gemm.cuh as a __device__ function that one block
// runs to completion, looping over every output tile of D[M, N] = A[M, K] @ B[K, N] itself
// (persistent style), instead of a __global__ kernel with one block per tile. Persistent
// megakernels schedule work like this: a block picks up a task and owns its whole output.
//
// A is row-major [M, K], B is stored as a row-major [N, K] matrix (column-major [K, N], a
// linear-layer weight), D is row-major [M, N]; bf16 in and out, fp32 accumulation, K % 8 == 0
// (TMA's 16-byte row stride), any M, N >= 1.
//
// The descriptors come in the library's own wrapper type, tma_2d, built on the host and passed
// by value as __grid_constant__ kernel parameters; the task body hands TMA the address of the
// CUtensorMap inside (&a.map), which for a __grid_constant__ parameter is the parameter itself.
//
// The entry point (repro generates it; any persistent kernel would look the same):
//
//   template <typename T0, typename T1>
//   __global__ void repro_device_entry(const __grid_constant__ T0 desc_a, const __grid_constant__ T1 desc_b,
//                                      repro::DevicePointer<2> D, int M, int N, int K)
//   { task_kernels::gemm_task<task_kernels::TaskConfig>(desc_a, desc_b, D, M, N, K); }
//
// with T0 = T1 = task_kernels::tma_2d<__nv_bfloat16, 128, 64> (box 128 rows x 64 columns, for
// A over [M, K] and B over [N, K]). Launch: block (256, 1, 1), grid (1, 1, 1) (one block does
// all the tiles; a larger grid would only have every block compute the same D), dynamic shared
// memory sizeof(task_kernels::TaskConfig::Shared) + 1024 bytes (133,120 B: the + 1024 is for
// rounding the base up to 1024 bytes, see tma_kernels::aligned_shared_storage).
//
// No planted defect here: this is the correct kernel of tma_gemm.cuh, run persistently.

#include "tma_gemm.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000, PFN_cuGetErrorName_v6000
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace task_kernels {

// Driver entry points, fetched through the runtime (cudaGetDriverEntryPointByVersion) so that a
// program using tma_2d needs no -lcuda: the runtime already has the driver loaded. Asked for by
// the ABI version they were introduced with (12.0 and 6.0), which later drivers keep serving.
inline void* driver_entry_point(const char* symbol, unsigned int version)
{
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &query);
    if (status != cudaSuccess || query != cudaDriverEntryPointSuccess || fn == nullptr) {
        std::fprintf(stderr,
                     "tma_2d: cannot get the driver entry point %s (version %u): %s (%s), query result %d\n",
                     symbol, version, cudaGetErrorName(status), cudaGetErrorString(status), static_cast<int>(query));
        std::exit(4);  // the harness's exit code for a CUDA error
    }
    return fn;
}

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn()
{
    static const auto fn =
        reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(driver_entry_point("cuTensorMapEncodeTiled", 12000));
    return fn;
}

// "CUDA_ERROR_INVALID_VALUE" for 1, etc.; the number alone if even that lookup fails.
inline const char* cu_result_name(CUresult result)
{
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    const char* name = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &fn, 6000, cudaEnableDefault, &query) == cudaSuccess &&
        query == cudaDriverEntryPointSuccess && fn != nullptr &&
        reinterpret_cast<PFN_cuGetErrorName_v6000>(fn)(result, &name) == CUDA_SUCCESS && name != nullptr) {
        return name;
    }
    return "unknown CUresult";
}

// The element type's CUtensorMapDataType. bf16 is all the task needs.
template <typename T>
constexpr CUtensorMapDataType tensor_map_data_type()
{
    static_assert(std::is_same_v<T, __nv_bfloat16>, "tma_2d: only __nv_bfloat16 elements are supported");
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// A 2-D TMA descriptor over a row-major [rows, cols] matrix of T at `base` (device memory), with
// a BoxRows x BoxCols box (driver order: box {BoxCols, BoxRows}), 128B swizzle, zero fill out of
// bounds. The box shape is part of the type, so a task body can check at compile time that the
// descriptors it is given match its tile (a box smaller than the tile would leave part of each
// stage unwritten, as tma_gemm's planted defect (a) shows).
//
// Trivially copyable and aligned like the CUtensorMap it wraps (TMA wants the descriptor on a
// 64-byte boundary; CUDA 13's cuda.h declares CUtensorMap alignas(128), CUDA 12's alignas(64)),
// so it can be a `const __grid_constant__` kernel parameter by value, and &param.map handed to
// TMA: the map is the first member, at the parameter's own, sufficiently aligned address.
template <typename T, int BoxRows, int BoxCols>
struct alignas(alignof(CUtensorMap)) tma_2d {
    using Element = T;
    static constexpr int kBoxRows = BoxRows;
    static constexpr int kBoxCols = BoxCols;
    static_assert(BoxRows >= 1 && BoxRows <= 256 && BoxCols >= 1 && BoxCols <= 256, "TMA boxes are 1..256 per dimension");
    static_assert(BoxCols * sizeof(T) % 16 == 0, "a box row must be a multiple of 16 bytes");
    static_assert(BoxCols * sizeof(T) <= 128, "128B swizzle takes box rows of at most 128 bytes");

    CUtensorMap map;

    // Host only: encodes the descriptor, or prints why the driver refused it and exits with 4.
    __host__ tma_2d(const void* base, int rows, int cols)
    {
        const size_t row_bytes = static_cast<size_t>(cols) * sizeof(T);
        if (rows < 1 || cols < 1 || row_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(base) % 16 != 0) {
            std::fprintf(stderr,
                         "tma_2d: cannot describe a [%d, %d] matrix at %p: TMA needs at least one row and column, a "
                         "row stride that is a multiple of 16 bytes (here %zu B) and a 16-byte aligned base\n",
                         rows, cols, base, row_bytes);
            std::exit(4);
        }
        const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};  // innermost first
        const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};  // of dims 1.., in bytes
        const cuuint32_t box[2] = {static_cast<cuuint32_t>(BoxCols), static_cast<cuuint32_t>(BoxRows)};
        const cuuint32_t element_strides[2] = {1, 1};
        const CUresult result = encode_tiled_fn()(
            &map, tensor_map_data_type<T>(), 2, const_cast<void*>(base), dims, strides, box, element_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // FILL_NONE: out-of-bounds elements read as zeros
        if (result != CUDA_SUCCESS) {
            std::fprintf(stderr,
                         "tma_2d: cuTensorMapEncodeTiled failed with CUresult %d (%s) for a [%d, %d] matrix at %p, "
                         "box [%d, %d], swizzle 128B\n",
                         static_cast<int>(result), cu_result_name(result), rows, cols, base, BoxRows, BoxCols);
            std::exit(4);
        }
    }
};

static_assert(std::is_trivially_copyable_v<tma_2d<__nv_bfloat16, 128, 64>>,
              "tma_2d must be trivially copyable to be a kernel parameter");
static_assert(alignof(tma_2d<__nv_bfloat16, 128, 64>) == alignof(CUtensorMap) && alignof(CUtensorMap) >= 64 &&
                  sizeof(tma_2d<__nv_bfloat16, 128, 64>) == sizeof(CUtensorMap),
              "tma_2d must be laid out like the CUtensorMap it wraps");

// The task's tiling: tma_gemm's correct instantiation (128 x 128 tiles, 64-wide k-tiles, a
// 4-deep ring, 256 threads). Launch with sizeof(Shared) + 1024 bytes of dynamic shared memory.
struct TaskConfig {
    static constexpr int BM = 128, BN = 128, BK = 64, Stages = 4;
    static constexpr int kThreads = 256;
    using Shared = tma_kernels::TmaGemmShared<BM, BN, BK, Stages>;
};

// The task body: every thread of one 256-thread block calls it, with the same arguments. It
// walks the output tiles in row-major order (tile index t: row block t / tiles_n, column block
// t % tiles_n), each with tma_kernels::gemm_tile, carrying one PipelineState from tile to tile:
// the barriers are initialized once for the whole task, so their phases keep counting across
// tiles and PipelineState is what knows where they stand (see gemm_tile).
template <typename Cfg, typename DescA, typename DescB>
__device__ void gemm_task(const DescA& a, const DescB& b, __nv_bfloat16* D, int M, int N, int K)
{
    using Shared = typename Cfg::Shared;
    static_assert(std::is_same_v<typename DescA::Element, __nv_bfloat16> &&
                      std::is_same_v<typename DescB::Element, __nv_bfloat16>,
                  "gemm_task: bf16 operands");
    // The boxes must be the tiles: the stage is BM (BN) rows of BK, and the barrier expects the
    // bytes of whole boxes. A smaller A box would leave rows unwritten (tma_gemm's defect (a)); a
    // larger one would write past the stage.
    static_assert(DescA::kBoxRows == Cfg::BM && DescA::kBoxCols == Cfg::BK, "A's box must be BM x BK");
    static_assert(DescB::kBoxRows == Cfg::BN && DescB::kBoxCols == Cfg::BK, "B's box must be BN x BK");
    static_assert(tma_kernels::WarpTiling<Cfg::BM, Cfg::BN>::kThreads == Cfg::kThreads, "8 warps per block");

    Shared& sh = tma_kernels::aligned_shared_storage<Shared>();
    tma_kernels::init_pipeline(sh, &a.map, &b.map);

    const int tiles_m = (M + Cfg::BM - 1) / Cfg::BM, tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
    const int tiles = tiles_m * tiles_n;
    tma_kernels::PipelineState<Cfg::Stages> pipe;  // shared position of all tiles, see gemm_tile
    for (int tile = 0; tile < tiles; ++tile) {
        const int m0 = tile / tiles_n * Cfg::BM, n0 = tile % tiles_n * Cfg::BN;
        tma_kernels::gemm_tile<Cfg::BM, Cfg::BN, Cfg::BK, Cfg::Stages, DescA::kBoxRows, tma_kernels::SmemSwizzle::B128>(
            sh, &a.map, &b.map, D, M, N, K, m0, n0, pipe);
    }

    // Hand the shared memory back clean: a next task may use it for anything.
    tma_kernels::release_pipeline(sh);
}

}  // namespace task_kernels
