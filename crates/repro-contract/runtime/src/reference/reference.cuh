// ---------------------------------------------------------------------------------------------
// repro harness runtime: host reference GEMM in f64
//
//   ref[l][m][n] = alpha * sum_k A[l,m,k] * B[l,k,n] + beta * C[l,m,n] + bias[n]
//
// Operands are read through their own strides and dtypes and accumulated in double, which is
// exact for the integer-valued probes and ~1e-16 relative otherwise: far below any kernel's
// error. In a batched problem a rank-2 operand is shared by every batch.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "scales.cuh"
#include <memory>

namespace repro {

struct GemmProblem {
  const Tensor* a;     // [M, K] or [L, M, K]
  const Tensor* b;     // [K, N] or [L, K, N]
  const Tensor* c;     // nullable; [M, N] or [L, M, N]; read only when beta != 0 (BLAS convention)
  const Tensor* bias;  // nullable; [N]
  const Tensor* out;   // [M, N] or [L, M, N]
  double alpha, beta;
  int64_t L, M, N, K;
  bool batched;  // rank-3 operands carry a leading batch dimension
  // reference.scale_a / scale_b (scales.cuh): the scale tensors, null without scales.
  const Tensor* scale_a = nullptr;
  const Tensor* scale_b = nullptr;
  ScaleSpec scale_a_spec = ScaleSpec(), scale_b_spec = ScaleSpec();
};

// The scales of A (is_a) or B, reading the scale tensor's host bytes or its device copy; a view
// with no data (every scale 1) when the GEMM has none.
inline ScaleOperand problem_scales(const GemmProblem& p, bool is_a, bool device) {
  const Tensor* t = is_a ? p.scale_a : p.scale_b;
  if (t == nullptr) return ScaleOperand();
  return scale_operand(is_a ? p.scale_a_spec : p.scale_b_spec, *t,
                       device ? static_cast<const unsigned char*>(t->device) : t->host.data(), is_a);
}

// The value of a reference element that is not compared (a grouped GEMM's padding rows, rows past
// masked_m): a NaN whose payload no arithmetic produces. Comparisons skip it and count it.
constexpr uint64_t kNotComparedBits = 0x7FFC0DE0C0FFEE00ull;
REPRO_HD inline double not_compared_value() { return double_from_bits(kNotComparedBits); }
REPRO_HD inline bool is_not_compared(double want) { return double_bits(want) == kNotComparedBits; }

// Element (l, row, col) of a matrix operand, or of its only matrix when it has no batch dimension.
inline int64_t matrix_offset(const Tensor& t, int64_t l, int64_t row, int64_t col) {
  const int64_t batch_offset = t.rank == 3 ? l * t.strides[0] : 0;
  return batch_offset + row * t.strides[t.rank - 2] + col * t.strides[t.rank - 1];
}

inline double matrix_element(const Tensor& t, int64_t l, int64_t row, int64_t col) {
  return decode(t.dtype, t.host.data(), matrix_offset(t, l, row, col));
}

// The GEMM is cache- and register-blocked (the classic Goto/BLIS structure): both operands are
// decoded once into zero-padded panels, and a small micro-kernel keeps an MR x NR tile of
// accumulators in registers while it streams one panel of A and one of B. Every output still sums
// its K products in plain sequential order into one running double: a K-block starts from the
// partial sum the previous K-block left in the output, so blocking, panel sizes and thread count
// never change a bit of the result.
//
// The micro-kernel's inner statement is acc[i][j] += a[k][i] * b[k][j] with j contiguous: the
// accumulators are independent, so the compiler vectorizes over j without reassociating anything
// (no -ffast-math), with whatever vector width the production flags allow (SSE2 at least).
//
// The register tile holds as many accumulators as the vector registers take with room left for
// the operands: 4 x 8 fills 8 of the 16 AVX registers. With only SSE2 (the x86-64 baseline, what
// a build without -march gets) 4 x 8 would take all 16 and spill; 3 x 8 takes 12 and runs 10-20%
// faster. A CPU with AVX-512 gets a second copy of the micro-kernel compiled for it whatever the
// build's flags (gemm_micro_kernel_avx512, chosen at run time): one 8-wide register per row of
// the tile, 1.7x the SSE2 one's speed. Neither uses FMA, so both round every product and every
// sum as the plain C++ does: the same bits on every machine.
#if defined(__AVX__)
constexpr int64_t kGemmMRBuild = 4;  // rows of A per panel, and of the register tile
#else
constexpr int64_t kGemmMRBuild = 3;
#endif
constexpr int64_t kGemmMRMax = 4;  // the larger of the two tiles' rows
constexpr int64_t kGemmNR = 8;    // columns of B per panel, and of the register tile
constexpr int64_t kGemmKC = 256;  // K-block: a B panel of it (16 KiB) stays in L1
// Per work item: 32 panels of rows (its A block, MC x KC, stays in L2) and of columns.
constexpr int64_t kGemmPanelsPerItem = 32;
constexpr int64_t kGemmNC = kGemmPanelsPerItem * kGemmNR;

// Decodes a matrix operand into panels of `width` consecutive rows (of A: m; of B: n) for every
// batch it has. Each batch is [K-block][panel][k within the block][width], with rows past `rows`
// zero: one K-block of one panel is contiguous, and so are all panels of one K-block, which a
// work item reads together (panels a whole K apart would land in the same cache sets at
// power-of-two K). `transpose` reads the operand as [k][row] (B) instead of [row][k] (A).
// The buffer is left uninitialized (not a std::vector) and written once, padding included, by
// the worker threads: no serial zero-fill, and its pages are first touched in parallel.
// Each element is multiplied by its block's scale (`scale`; 1 when it has no data).
REPRO_HOST_HOT inline std::unique_ptr<double[]> pack_panels(const Tensor& t, int64_t rows, int64_t K, int64_t width,
                                                            bool transpose, const ScaleOperand& scale) {
  const int64_t batches = t.rank == 3 ? t.shape[0] : 1;
  const int64_t panels = (rows + width - 1) / width, padded = panels * width;
  std::unique_ptr<double[]> packed(new double[size_t(batches * padded * K)]);
  double* out = packed.get();
  // Work items: one K-block of one panel of one batch.
  const int64_t kblocks = (K + kGemmKC - 1) / kGemmKC;
  parallel_for(batches * kblocks * panels, 16, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t l = item / (kblocks * panels), kb = item / panels % kblocks, panel = item % panels;
      const int64_t k0 = kb * kGemmKC, kc = std::min(kGemmKC, K - k0), r0 = panel * width;
      const int64_t valid = std::min(width, rows - r0);
      double* block = out + l * padded * K + k0 * padded + panel * kc * width;
      const ScaleOperand batch_scale = scale_of_batch(scale, l);  // [L, ...] scales: batch l's
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < valid; ++r)
          block[k * width + r] =
              (transpose ? matrix_element(t, l, k0 + k, r0 + r) : matrix_element(t, l, r0 + r, k0 + k)) *
              scale_at(batch_scale, r0 + r, k0 + k);
        for (int64_t r = valid; r < width; ++r) block[k * width + r] = 0.0;
      }
    }
  });
  return packed;
}

// GCC's loop vectorizer turns the register tile into lane-swapping SLP-reduction code that runs
// 20-40% slower than what its basic-block vectorizer makes of the unrolled body; and the kernel
// stays out of line, so that these options (not the caller's) are the ones it is compiled with.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDA_ARCH__)
#define REPRO_GEMM_KERNEL __attribute__((noinline, optimize("O3", "no-tree-loop-vectorize", "fp-contract=off")))
#else
#define REPRO_GEMM_KERNEL REPRO_HOST_HOT
#endif

// c[i * ldc + j] += sum over k < kc of a[k][i] * b[k][j], k in order, for an MR x NR tile.
// Inlined into each compiled copy below, so that it is compiled with that copy's target.
template <int64_t kMR>
__attribute__((always_inline)) inline void gemm_micro_kernel_body(const double* __restrict__ a,
                                                                  const double* __restrict__ b, int64_t kc,
                                                                  double* __restrict__ c, int64_t ldc) {
  // A local copy of the tile: an array whose address never escapes is what the compiler reliably
  // keeps in registers across the k loop.
  double acc[kMR][kGemmNR];
  for (int64_t i = 0; i < kMR; ++i)
    for (int64_t j = 0; j < kGemmNR; ++j) acc[i][j] = c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k) {
    const double* ak = a + k * kMR;
    const double* bk = b + k * kGemmNR;
    for (int64_t i = 0; i < kMR; ++i)
      for (int64_t j = 0; j < kGemmNR; ++j) acc[i][j] += ak[i] * bk[j];
  }
  for (int64_t i = 0; i < kMR; ++i)
    for (int64_t j = 0; j < kGemmNR; ++j) c[i * ldc + j] = acc[i][j];
}

using GemmMicroKernel = void (*)(const double*, const double*, int64_t, double*, int64_t);

REPRO_GEMM_KERNEL inline void gemm_micro_kernel_build(const double* a, const double* b, int64_t kc, double* c,
                                                      int64_t ldc) {
  gemm_micro_kernel_body<kGemmMRBuild>(a, b, kc, c, ldc);
}

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDA_ARCH__) && defined(__x86_64__) && !defined(__AVX512F__)
#define REPRO_GEMM_AVX512 1
// Only where the AVX-512 copy exists: an unused constant is a warning (#177) elsewhere.
constexpr int64_t kGemmMRAvx512 = 4;
__attribute__((target("avx512f"))) REPRO_GEMM_KERNEL inline void gemm_micro_kernel_avx512(const double* a,
                                                                                           const double* b, int64_t kc,
                                                                                           double* c, int64_t ldc) {
  gemm_micro_kernel_body<kGemmMRAvx512>(a, b, kc, c, ldc);
}
#endif

// The micro-kernel for this CPU and its tile's rows (MR).
struct GemmKernelChoice {
  GemmMicroKernel kernel;
  int64_t mr;
};

inline GemmKernelChoice choose_gemm_kernel() {
#if defined(REPRO_GEMM_AVX512)
  if (__builtin_cpu_supports("avx512f")) return GemmKernelChoice{gemm_micro_kernel_avx512, kGemmMRAvx512};
#endif
  return GemmKernelChoice{gemm_micro_kernel_build, kGemmMRBuild};
}

// Whether the epilogue reads C (BLAS: not when beta is 0, so a C of NaN does not matter).
inline bool reads_c(const GemmProblem& p) { return p.c != nullptr && p.beta != 0.0; }

// alpha * sum + beta * c + bias: what becomes of a dot product, given the C and bias values of
// its output (unused where the problem has none). The host reference, and the host's
// cross-check of the device reference, on values it fetched.
inline double epilogue_value(const GemmProblem& p, double sum, double c, double bias) {
  double value = p.alpha * sum;
  if (reads_c(p)) value += p.beta * c;
  if (p.bias != nullptr) value += bias;
  return value;
}

// The same, reading C[l, m, n] and bias[n] from the host copies.
inline double reference_epilogue(const GemmProblem& p, int64_t l, int64_t m, int64_t n, double sum) {
  return epilogue_value(p, sum, reads_c(p) ? matrix_element(*p.c, l, m, n) : 0.0,
                        p.bias != nullptr ? decode(p.bias->dtype, p.bias->host.data(), n * p.bias->strides[0]) : 0.0);
}

// ref is resized to L*M*N and filled in logical row-major order [L][M][N].
REPRO_HOST_HOT inline void reference_gemm(const GemmProblem& p, std::vector<double>* ref) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const GemmKernelChoice choice = choose_gemm_kernel();
  const int64_t mr = choice.mr;
  // Panels of MR rows of A, and of NR columns of B (pack_panels).
  const std::unique_ptr<double[]> a = pack_panels(*p.a, M, K, mr, false, problem_scales(p, true, false));
  const std::unique_ptr<double[]> b = pack_panels(*p.b, N, K, kGemmNR, true, problem_scales(p, false, false));
  const int64_t m_padded = ceil_div(M, mr) * mr;
  const int64_t n_padded = ceil_div(N, kGemmNR) * kGemmNR;
  const bool a_batched = p.a->rank == 3, b_batched = p.b->rank == 3;
  // The running sums live in the output itself until the epilogue: zero is where every sum starts.
  ref->assign(size_t(p.L * M * N), 0.0);
  double* out = ref->data();

  // Work items: one MC x NC block of the output of one batch, all of K, each written by one thread.
  // K cannot be split (its order is fixed), so a small output gets smaller blocks, until there
  // are a few items per core or they are single register tiles (MC and NC are MR and NR times a
  // power of two, so halving keeps them whole numbers of panels).
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  int64_t mc = kGemmPanelsPerItem * mr, nc = kGemmNC;
  const auto items = [&] { return p.L * ((M + mc - 1) / mc) * ((N + nc - 1) / nc); };
  while (items() < 4 * cores && (mc > mr || nc > kGemmNR)) {
    if (nc > kGemmNR && (nc >= mc || mc == mr)) nc /= 2;
    else mc /= 2;
  }
  const int64_t m_blocks = (M + mc - 1) / mc, n_blocks = (N + nc - 1) / nc;
  parallel_for(items(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t l = item / (m_blocks * n_blocks);
      const int64_t m0 = item / n_blocks % m_blocks * mc, n0 = item % n_blocks * nc;
      const int64_t m1 = std::min(M, m0 + mc), n1 = std::min(N, n0 + nc);
      const double* a_batch = a.get() + (a_batched ? l : 0) * m_padded * K;
      const double* b_batch = b.get() + (b_batched ? l : 0) * n_padded * K;
      double* c_batch = out + l * M * N;
      // K-blocks in order, each adding onto the sums the one before left: sequential k per output.
      for (int64_t k0 = 0; k0 < K; k0 += kGemmKC) {
        const int64_t kc = std::min(kGemmKC, K - k0);
        const double* a_block = a_batch + k0 * m_padded;
        const double* b_block = b_batch + k0 * n_padded;
        // One B panel stays in L1 while every A panel of the item passes it.
        for (int64_t n = n0; n < n1; n += kGemmNR) {
          const double* b_panel = b_block + n / kGemmNR * kc * kGemmNR;
          for (int64_t m = m0; m < m1; m += mr) {
            const double* a_panel = a_block + m / mr * kc * mr;
            double* c = c_batch + m * N + n;
            if (m + mr <= M && n + kGemmNR <= N) {
              choice.kernel(a_panel, b_panel, kc, c, N);
              continue;
            }
            // A ragged edge tile: the padded panels give zero products past the edge; only the
            // valid part goes through a full tile and back.
            const int64_t rows = std::min(mr, M - m), cols = std::min(kGemmNR, N - n);
            double tile[kGemmMRMax * kGemmNR] = {};
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j) tile[i * kGemmNR + j] = c[i * N + j];
            choice.kernel(a_panel, b_panel, kc, tile, kGemmNR);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j) c[i * N + j] = tile[i * kGemmNR + j];
          }
        }
      }
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = n0; n < n1; ++n) c_batch[m * N + n] = reference_epilogue(p, l, m, n, c_batch[m * N + n]);
    }
  });
}

// The closed-form answer of the --ones mode (A = B = 1, C and bias 0, scales 1): alpha * K
// everywhere.
inline void analytic_ones(const GemmProblem& p, std::vector<double>* expected) {
  expected->assign(size_t(p.L * p.M * p.N), p.alpha * double(p.K));
}

}  // namespace repro
