// Row-wise scaled add, the custom CUDA kernel of extension.py:
//   out[r, c] = x[r, c] + alpha * bias[c]      x, out: row-major [rows, cols]; bias: [cols]
// Standalone (no torch headers) so that `repro capture --source examples/capture_torch` finds
// the kernel's declaration here and can compile it without PyTorch.
//
// Launch: block (256, 1, 1), grid (ceil(cols / (256 * VEC)), rows, 1), no shared memory.
// Each thread handles VEC consecutive elements of one row; blockIdx.y is the row, so bias[c] is
// read once per element without any division by cols.
#ifndef CAPTURE_TORCH_SCALED_ADD_CUH
#define CAPTURE_TORCH_SCALED_ADD_CUH

// T needs float arithmetic (float, double): torch builds extensions with the implicit half and
// bf16 conversions switched off, so those types would need explicit intrinsics here.
template <typename T, int VEC>
__global__ void __launch_bounds__(256) scaled_add(const T* __restrict__ x, const T* __restrict__ bias,
                                                  T* __restrict__ out, float alpha, int rows, int cols)
{
    const int row = static_cast<int>(blockIdx.y);
    if (row >= rows) return;
    const int c0 = (static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
    // 64-bit row offset: rows * cols may pass 2^31 elements for large activations.
    const long long base = static_cast<long long>(row) * cols;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
        const int c = c0 + v;
        if (c < cols) out[base + c] = x[base + c] + static_cast<T>(alpha) * bias[c];
    }
}

#endif  // CAPTURE_TORCH_SCALED_ADD_CUH
