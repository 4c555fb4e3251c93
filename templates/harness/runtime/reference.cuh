// ---------------------------------------------------------------------------------------------
// repro harness runtime: host reference GEMM in f64
//
//   ref[l][m][n] = alpha * sum_k A[l,m,k] * B[l,k,n] + beta * C[l,m,n] + bias[n]
//
// Operands are read through their own strides and dtypes and accumulated in double, which is
// exact for the integer-valued probes and ~1e-16 relative otherwise: far below any kernel's
// error. In a batched problem a rank-2 operand is shared by every batch.
// ---------------------------------------------------------------------------------------------
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
};

// Element (l, row, col) of a matrix operand, or of its only matrix when it has no batch dimension.
inline double matrix_element(const Tensor& t, int64_t l, int64_t row, int64_t col) {
  const int64_t batch_offset = t.rank == 3 ? l * t.strides[0] : 0;
  return decode(t.dtype, t.host.data(), batch_offset + row * t.strides[t.rank - 2] + col * t.strides[t.rank - 1]);
}

// Writes dst[(l * rows + r) * cols + c] = operand(l, r, c), or its transpose when `transpose`
// (dst[(l * cols + c) * rows + r]), for every batch the operand has.
REPRO_HOST_HOT inline void decode_matrix(const Tensor& t, int64_t rows, int64_t cols, bool transpose,
                                         std::vector<double>* dst) {
  const int64_t batches = t.rank == 3 ? t.shape[0] : 1;
  dst->resize(size_t(batches * rows * cols));
  double* out = dst->data();
  parallel_for(batches * rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t lr = begin; lr < end; ++lr) {
      const int64_t l = lr / rows, r = lr % rows;
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t index = transpose ? (l * cols + c) * rows + r : lr * cols + c;
        out[index] = matrix_element(t, l, r, c);
      }
    }
  });
}

// A 4x4 block of dot products over contiguous rows of A ([.][K]) and of B transposed ([.][K]):
// sixteen independent accumulators keep the FP pipes full; k innermost streams both operands.
constexpr int kBlock = 4;

REPRO_HOST_HOT inline void dot_block(const double* a, const double* bt, int64_t K, double acc[kBlock][kBlock]) {
  for (int i = 0; i < kBlock; ++i)
    for (int j = 0; j < kBlock; ++j) acc[i][j] = 0.0;
  for (int64_t k = 0; k < K; ++k) {
    double av[kBlock], bv[kBlock];
    for (int i = 0; i < kBlock; ++i) av[i] = a[i * K + k];
    for (int j = 0; j < kBlock; ++j) bv[j] = bt[j * K + k];
    for (int i = 0; i < kBlock; ++i)
      for (int j = 0; j < kBlock; ++j) acc[i][j] += av[i] * bv[j];
  }
}

REPRO_HOST_HOT inline double dot(const double* a, const double* bt, int64_t K) {
  double sum = 0.0;
  for (int64_t k = 0; k < K; ++k) sum += a[k] * bt[k];
  return sum;
}

// alpha * sum + beta * C[l, m, n] + bias[n]: what becomes of a dot product (the host reference,
// and the host's cross-check of the device reference).
inline double reference_epilogue(const GemmProblem& p, int64_t l, int64_t m, int64_t n, double sum) {
  double value = p.alpha * sum;
  if (p.c != nullptr && p.beta != 0.0) value += p.beta * matrix_element(*p.c, l, m, n);
  if (p.bias != nullptr) value += decode(p.bias->dtype, p.bias->host.data(), n * p.bias->strides[0]);
  return value;
}

// ref is resized to L*M*N and filled in logical row-major order [L][M][N].
REPRO_HOST_HOT inline void reference_gemm(const GemmProblem& p, std::vector<double>* ref) {
  std::vector<double> a, bt;  // A as [La][M][K], B transposed as [Lb][N][K]
  decode_matrix(*p.a, p.M, p.K, false, &a);
  decode_matrix(*p.b, p.K, p.N, true, &bt);
  const bool a_batched = p.a->rank == 3, b_batched = p.b->rank == 3;
  ref->assign(size_t(p.L * p.M * p.N), 0.0);
  double* out = ref->data();

  const auto epilogue = [&](int64_t l, int64_t m, int64_t n, double sum) {
    out[(l * p.M + m) * p.N + n] = reference_epilogue(p, l, m, n, sum);
  };

  // Work items: one band of kBlock rows of one batch.
  const int64_t bands = (p.M + kBlock - 1) / kBlock;
  parallel_for(p.L * bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t l = item / bands, m0 = (item % bands) * kBlock;
      const double* a_rows = a.data() + ((a_batched ? l : 0) * p.M + m0) * p.K;
      const double* b_cols = bt.data() + (b_batched ? l : 0) * p.N * p.K;
      const int64_t rows = std::min<int64_t>(kBlock, p.M - m0);
      int64_t n0 = 0;
      if (rows == kBlock) {
        for (; n0 + kBlock <= p.N; n0 += kBlock) {
          double acc[kBlock][kBlock];
          dot_block(a_rows, b_cols + n0 * p.K, p.K, acc);
          for (int i = 0; i < kBlock; ++i)
            for (int j = 0; j < kBlock; ++j) epilogue(l, m0 + i, n0 + j, acc[i][j]);
        }
      }
      // The ragged right edge, and a band of fewer than kBlock rows at the bottom.
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t n = n0; n < p.N; ++n) epilogue(l, m0 + i, n, dot(a_rows + i * p.K, b_cols + n * p.K, p.K));
    }
  });
}

// The closed-form answer of the --ones mode (A = B = 1, C and bias 0): alpha * K everywhere.
inline void analytic_ones(const GemmProblem& p, std::vector<double>* expected) {
  expected->assign(size_t(p.L * p.M * p.N), p.alpha * double(p.K));
}

}  // namespace repro
