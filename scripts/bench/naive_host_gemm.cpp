// The baseline of scripts/bench.sh: the fp64 host GEMM anyone writes first, a triple loop with
// the rows split over every core, B transposed once so that the inner loop reads both operands
// contiguously, and nothing more: no blocking, no packing, no register tiles. It is what a
// reproducer's reference costs before anyone makes it fast (issue 9 measured such a loop at
// 5.0 s for 4096^3 on the H200 host), so time-to-verdict numbers are read against it.
//
//   g++ -O3 -std=c++17 -pthread -o naive_host_gemm naive_host_gemm.cpp
//   ./naive_host_gemm 4096          # M = N = K = 4096; prints seconds and GFLOP/s
//
// Inputs are bf16 values (uniform in [-1, 1), rounded to 8 significant bits) held as doubles;
// the values do not change the time, only that they are not all equal.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static double bf16_value(uint64_t index) {
  uint64_t z = index * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  const double u = double((z ^ (z >> 31)) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  return double(int64_t(u * 256.0)) / 256.0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SIZE   (M = N = K = SIZE)\n", argv[0]);
    return 2;
  }
  const int64_t n = std::atoll(argv[1]);
  // a is [M][K], bt is B transposed, [N][K].
  std::vector<double> a(size_t(n * n)), bt(size_t(n * n)), c(size_t(n * n));
  for (int64_t i = 0; i < n * n; ++i) a[size_t(i)] = bf16_value(uint64_t(i)), bt[size_t(i)] = bf16_value(uint64_t(i + n * n));
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int64_t m = n * t / threads; m < n * (t + 1) / threads; ++m)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t k = 0; k < n; ++k) sum += a[size_t(m * n + k)] * bt[size_t(j * n + k)];
          c[size_t(m * n + j)] = sum;
        }
    });
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double checksum = 0.0;
  for (double v : c) checksum += v;
  std::printf("naive host loop %lld^3: %.3f s, %.1f GFLOP/s on %u threads (checksum %.6g)\n", (long long)n, seconds,
              2.0 * double(n) * double(n) * double(n) / seconds * 1e-9, threads, checksum);
  return 0;
}
