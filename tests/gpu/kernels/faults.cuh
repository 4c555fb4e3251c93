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

// A right GEMM (one thread per output, f32) at every size but M == 65, where it writes far past
// D: a queue of checks over sizes faults in its middle (scripts/gpu-queue.sh), and the checks
// after it must still run, in a fresh process, and pass.
__global__ void fault_at_m65(const float* A, const float* B, float* D, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[size_t(m) * K + k], B[size_t(k) * N + n], acc);
  const size_t far = M == 65 ? size_t(1) << 40 : 0;  // 1 TiB past D: no allocation there
  D[far + size_t(m) * N + n] = acc;
}
