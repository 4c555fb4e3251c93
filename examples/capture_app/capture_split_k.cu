// capture_split_k: a small "production" program around the split-K GEMM of
// kernels/split_k_gemm.cuh (an operator of two kernels: partial sums into a workspace, then a
// reduction into D), for `repro capture --through` to record the whole operator from the outside,
// unmodified.
//
// D [M, N] f32 = A [M, K] bf16 @ B [K, N] bf16, with M = 200, N = 136, K = 1000 and 4 splits
// (examples/split_k_gemm.yaml's shape). Each call refills A (a new batch) with a fill kernel,
// then runs partials and reduce; the program makes two calls, so a capture of the second call's
// operator is
//   repro capture --kernel 'split_k_kernels::partials' --launch 2 --through 'split_k_kernels::reduce'
// (a window of two launches), and `--launches 2` records the same. The workspace lives across
// calls, as an operator's workspace does (the partials overwrite it before the reduction reads
// it), so the window changes it: it is an output of the window too.
//
//   ./capture_split_k [--defect drop_last_split] [--calls C]
//
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -lineinfo -I../../kernels capture_split_k.cu
//        (scripts/gpu-capture.sh builds it so)

#include "split_k_gemm.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_CHECK(expr)                                                                                    \
    do {                                                                                                    \
        const cudaError_t err_ = (expr);                                                                    \
        if (err_ != cudaSuccess) {                                                                          \
            std::fprintf(stderr, "capture_split_k: %s failed at %s:%d: %s\n", #expr, __FILE__, __LINE__,    \
                         cudaGetErrorString(err_));                                                         \
            std::exit(1);                                                                                   \
        }                                                                                                   \
    } while (0)

// Named namespace: the fill kernel's symbol is the same on every build.
namespace capture_split_k {

constexpr int kM = 200, kN = 136, kK = 1000, kSplits = 4;
constexpr int kBM = 64, kBN = 64, kBK = 32;

// A new batch for call `call`: small integers scaled to bf16, different per call.
__global__ void fill_batch(split_k_kernels::bf16* A, size_t count, int call) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
        A[i] = __float2bfloat16(float(int((i * 7 + call * 13) % 17) - 8) * 0.125f);
}

template <split_k_kernels::SplitKDefect Defect>
void call(const split_k_kernels::bf16* A, const split_k_kernels::bf16* B, float* workspace, float* D,
          cudaStream_t stream) {
    const dim3 grid((kN + kBN - 1) / kBN, (kM + kBM - 1) / kBM, kSplits);
    split_k_kernels::partials<kBM, kBN, kBK, Defect><<<grid, split_k_kernels::kThreads, 0, stream>>>(
        A, B, workspace, kM, kN, kK, kSplits);
    CUDA_CHECK(cudaGetLastError());
    split_k_kernels::reduce<Defect><<<(kM * kN + 255) / 256, split_k_kernels::kThreads, 0, stream>>>(
        workspace, D, kM, kN, kSplits, 1.0f);
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace capture_split_k

int main(int argc, char** argv) {
    using namespace capture_split_k;
    bool drop_last_split = false;
    int calls = 2;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--defect") && i + 1 < argc && !std::strcmp(argv[i + 1], "drop_last_split")) {
            drop_last_split = true, ++i;
        } else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) {
            calls = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: %s [--defect drop_last_split] [--calls C]\n", argv[0]);
            return 2;
        }
    }
    std::vector<split_k_kernels::bf16> b(size_t(kK) * kN);
    for (size_t i = 0; i < b.size(); ++i) b[i] = __float2bfloat16(float(int((i * 5) % 11) - 5) * 0.25f);
    split_k_kernels::bf16 *A = nullptr, *B = nullptr;
    float *workspace = nullptr, *D = nullptr;
    CUDA_CHECK(cudaMalloc(&A, sizeof(split_k_kernels::bf16) * kM * kK));
    CUDA_CHECK(cudaMalloc(&B, sizeof(split_k_kernels::bf16) * kK * kN));
    CUDA_CHECK(cudaMalloc(&workspace, sizeof(float) * kSplits * kM * kN));
    CUDA_CHECK(cudaMalloc(&D, sizeof(float) * kM * kN));
    CUDA_CHECK(cudaMemcpy(B, b.data(), sizeof(split_k_kernels::bf16) * b.size(), cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    std::vector<float> d(size_t(kM) * kN);
    for (int c = 1; c <= calls; ++c) {
        fill_batch<<<64, 256, 0, stream>>>(A, size_t(kM) * kK, c);
        CUDA_CHECK(cudaGetLastError());
        if (drop_last_split) call<split_k_kernels::SplitKDefect::drop_last_split>(A, B, workspace, D, stream);
        else call<split_k_kernels::SplitKDefect::none>(A, B, workspace, D, stream);
        CUDA_CHECK(cudaMemcpyAsync(d.data(), D, sizeof(float) * d.size(), cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        double sum = 0;
        for (float x : d) sum += x;
        std::printf("call %d: sum of D = %.6f\n", c, sum);
    }
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(B));
    CUDA_CHECK(cudaFree(workspace));
    CUDA_CHECK(cudaFree(D));
    return 0;
}
