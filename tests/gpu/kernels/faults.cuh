#pragma once
// Kernels that never finish or fault, for checking the harness's watchdog (exit 5) and its
// device-fault handling (exit 4) on a real GPU. Each has a GEMM signature so a normal spec
// drives it.

// Waits for a flag nothing ever sets: a barrier that is never arrived at, reduced to its essence.
// `flag` points into the output, which the harness poisons with 0xFF bytes, never 0x12345678.
__global__ void wait_forever(const float* A, const float* B, float* D, int M, int N, int K) {
  volatile unsigned* flag = reinterpret_cast<volatile unsigned*>(D);
  while (*flag != 0x12345678u) {
  }
  D[threadIdx.x] = A[0] * B[0] * K;
}

// Writes through a pointer offset far past the end of D: an illegal address.
__global__ void write_out_of_bounds(const float* A, const float* B, float* D, int M, int N, int K) {
  const size_t far = size_t(1) << 40;  // 1 TiB past D: no allocation there
  D[far + threadIdx.x] = A[0] * B[0] * static_cast<float>(M + N + K);
}
