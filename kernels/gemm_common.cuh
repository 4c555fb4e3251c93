#pragma once
// Helpers shared by the example GEMM kernels in this directory: element
// conversions and the layout tag of the B operand. They live in a namespace so
// that the headers can be included next to other code (a test harness, a
// CUTLASS build) without name clashes; the kernels themselves are global.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace gemm_kernels {

// Storage order of the B operand, which is logically [K, N].
//   RowMajor: B[k, n] lives at B[k * N + n]
//   ColMajor: B[k, n] lives at B[n * K + k], i.e. B is stored as an [N, K]
//             row-major matrix, like the weight of a linear layer (D = X @ W^T).
enum class Layout { RowMajor, ColMajor };

// Element <-> fp32 conversions. They use the intrinsics rather than
// __nv_bfloat16's and __half's implicit conversions, because those are compiled
// out by -D__CUDA_NO_BFLOAT16_CONVERSIONS__ and -D__CUDA_NO_HALF_CONVERSIONS__,
// which PyTorch extensions build with.
template <typename T>
__device__ __forceinline__ float to_float(T x)
{
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __bfloat162float(x);
    } else if constexpr (std::is_same_v<T, __half>) {
        return __half2float(x);
    } else {
        static_assert(std::is_same_v<T, float>, "element type must be float, __nv_bfloat16 or __half");
        return x;
    }
}

template <typename T>
__device__ __forceinline__ T from_float(float x)
{
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __float2bfloat16_rn(x);  // round to nearest even, like the host reference
    } else if constexpr (std::is_same_v<T, __half>) {
        return __float2half_rn(x);
    } else {
        static_assert(std::is_same_v<T, float>, "element type must be float, __nv_bfloat16 or __half");
        return x;
    }
}

}  // namespace gemm_kernels
