// ---------------------------------------------------------------------------------------------
// repro harness runtime: probe operands and their right answers, made on the device (issue 60)
//
// A probe suite is ~25 launches, each on operands set to a closed-form pattern and judged
// against the closed-form answer. Made on the host, those patterns cost more than everything
// else: at Llama-3-8B's gate_up shape (M 2048, N 28672, K 4096) B alone is 117 M elements, set
// about twenty times, and every answer is 58 M doubles; a probe run took 27 s there, the GPU idle
// nearly all of it. So the host only states each pattern (ProbeValues: a factor times a value
// per row and a value per column, each table O(rows) or O(columns) long, one of the identity
// patterns, or k_grouped_blocks' blocks of a flat operand from tables O(M + K_total) long), and
// kernels expand it: into the operand's storage (fill_probe_operand) and into the
// right answers (probe_expected). The same REPRO_HD function (ProbeValuesView::at) computes an
// element on both sides, and a spread sample of every expansion is read back and compared with
// the host's value of it, bit for bit, as device-made random inputs are (check_device_inputs):
// a GPU that filled an operand wrong must not be able to vouch for the kernel it then tests.
//
// The right answers stay on the device and the output is compared there (device_compare.cuh);
// the host sees sums when a probe passes, and the runs and answers, copied back, when it fails
// or its runs differ: then the host's analysis (compare_output, the code decoders) runs as it
// always did.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device_buffers.cuh"
#include "device_compare.cuh"
#include "device_inputs.cuh"
#include "grouped.cuh"
#include "reference.cuh"

namespace repro {

// Where a probe suite's time goes, summed over its probes (the report's `probe_phases_ms`): the
// operands' expansions and their sampled checks, the right answers', the launches (outputs
// poisoned, launched, waited for, copied aside), and the judging. A probe run is most of a
// queued campaign's time (docs/performance.md), and these say which part of it.
struct ProbeClock {
  double operands = 0, answers = 0, launches = 0, judging = 0;  // seconds
  int64_t probes = 0;
  static ProbeClock& instance() {
    static ProbeClock clock;
    return clock;
  }
  // Adds the time from its making to its end to `phase`.
  struct Scope {
    double& phase;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    explicit Scope(double& into) : phase(into) {}
    ~Scope() { phase += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  };
};

// What a probe operand holds, or what a probe's outputs must be, at (batch, row, column).
struct ProbeValues {
  enum class Kind : int {
    product,          // factor * rows[batch][row] * columns[batch][column]
    identity_a,       // factor * ((row + 2 column) mod 7 + 1): A[m, k] of the identity probe
    identity_b,       // factor * (row == column mod modulus): B[k, n] = I, repeated every K columns
    identity_output,  // factor * ((row + 2 (column mod modulus)) mod 7 + 1): its right answers
    k_blocks,         // a flat operand of k_grouped_blocks (below): factor * rows[line] * columns[k]
  };
  Kind kind = Kind::product;
  double factor = 1.0;
  // [row_batches][row_extent] and [column_batches][column_extent]; empty: 1 everywhere. A table
  // of one batch holds for every batch. A row value that is not_compared_value() makes the whole
  // row not compared (grouped outputs no group GEMM writes).
  std::vector<double> rows, columns;
  int64_t row_batches = 0, row_extent = 0, column_batches = 0, column_extent = 0;
  int64_t modulus = 1;  // the identity kinds: K
  // k_blocks: the flat operand is blocks of `lines` rows, block b [lines, bounds[b + 1] - bounds[b]]
  // row-major from element lines * bounds[b]; its element (line, k) is the operand's K index
  // bounds[b] + k. The rows table is per line, the columns table per K index (K_total long): a
  // group's block of A or B, each with its own row stride, from tables O(M + K_total) long.
  std::vector<double> bounds;
  int64_t lines = 0;

  static ProbeValues constant(double value) {
    ProbeValues v;
    v.factor = value;
    return v;
  }
  static ProbeValues k_blocks(int64_t lines, const std::vector<int64_t>& bounds) {
    ProbeValues v;
    v.kind = Kind::k_blocks;
    v.lines = lines;
    v.bounds.assign(bounds.begin(), bounds.end());
    return v;
  }
  static ProbeValues identity(Kind kind, double factor, int64_t K) {
    ProbeValues v;
    v.kind = kind;
    v.factor = factor;
    v.modulus = std::max<int64_t>(K, 1);
    return v;
  }
  // This times value(batch, row), over `batches` batches (1: the same in every batch).
  template <typename F>
  ProbeValues with_rows(int64_t batches, int64_t extent, F value) const {
    ProbeValues v = *this;
    v.row_batches = batches, v.row_extent = extent;
    v.rows.assign(size_t(batches * extent), 1.0);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t r = 0; r < extent; ++r) v.rows[size_t(b * extent + r)] = value(b, r);
    return v;
  }
  // This times value(batch, column).
  template <typename F>
  ProbeValues with_columns(int64_t batches, int64_t extent, F value) const {
    ProbeValues v = *this;
    v.column_batches = batches, v.column_extent = extent;
    v.columns.assign(size_t(batches * extent), 1.0);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t c = 0; c < extent; ++c) v.columns[size_t(b * extent + c)] = value(b, c);
    return v;
  }
};

// ProbeValues by value, its tables wherever the side that reads them has them.
struct ProbeValuesView {
  ProbeValues::Kind kind;
  double factor;
  const double* rows;     // null: 1
  const double* columns;  // null: 1
  int64_t row_batches, row_extent, column_batches, column_extent, modulus;
  const double* bounds;  // k_blocks: its bounds (bound_count of them)
  int64_t bound_count, lines;

  // k_blocks: element `index` of the flat operand. The block holding it by bisection (the last
  // block beginning at or before it, so an empty block is never the one), its line and K index.
  REPRO_HD double block_at(int64_t index) const {
    int64_t lo = 0, hi = bound_count - 1;
    if (bound_count < 2 || index >= lines * int64_t(bounds[hi])) return 0.0;  // past every block
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (index >= lines * int64_t(bounds[mid])) lo = mid;
      else hi = mid;
    }
    const int64_t begin = int64_t(bounds[lo]), extent = int64_t(bounds[lo + 1]) - begin;
    const int64_t local = index - lines * begin;
    double value = factor;
    if (rows != nullptr) value *= rows[local / extent];
    if (columns != nullptr) value *= columns[begin + local % extent];
    return value;
  }

  REPRO_HD double at(int64_t batch, int64_t row, int64_t column) const {
    switch (kind) {
      case ProbeValues::Kind::identity_a: return factor * double((row + 2 * column) % 7 + 1);
      case ProbeValues::Kind::identity_b: return row == column % modulus ? factor : 0.0;
      case ProbeValues::Kind::identity_output: return factor * double((row + 2 * (column % modulus)) % 7 + 1);
      case ProbeValues::Kind::k_blocks: return block_at(column);  // a flat operand: one row
      case ProbeValues::Kind::product: break;
    }
    double value = factor;
    if (rows != nullptr) {
      const double r = rows[(row_batches > 1 ? batch : 0) * row_extent + row];
      if (is_not_compared(r)) return r;
      value *= r;
    }
    if (columns != nullptr) value *= columns[(column_batches > 1 ? batch : 0) * column_extent + column];
    return value;
  }
};

// The host's view: its tables in host memory.
inline ProbeValuesView host_view(const ProbeValues& v) {
  return ProbeValuesView{v.kind,
                         v.factor,
                         v.rows.empty() ? nullptr : v.rows.data(),
                         v.columns.empty() ? nullptr : v.columns.data(),
                         v.row_batches,
                         v.row_extent,
                         v.column_batches,
                         v.column_extent,
                         v.modulus,
                         v.bounds.empty() ? nullptr : v.bounds.data(),
                         int64_t(v.bounds.size()),
                         v.lines};
}

// Whether no two logical elements share storage (no stride 0 on an extent above 1, no dimension
// overlapping another): then their elements can be written from several threads at once.
inline bool elements_distinct(const Tensor& t) {
  const int rank = std::min(t.rank, 4);
  int order[4] = {0, 1, 2, 3};
  // By stride, smallest first (an insertion sort: four at most).
  for (int i = 1; i < rank; ++i)
    for (int j = i; j > 0 && t.strides[order[j]] < t.strides[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
  int64_t reach = 0;  // the largest offset the dimensions taken so far reach
  for (int i = 0; i < rank; ++i) {
    const int d = order[i];
    if (t.shape[d] <= 1) continue;
    if (t.strides[d] <= reach) return false;
    reach += (t.shape[d] - 1) * t.strides[d];
  }
  return true;
}

// The [batches, rows, columns] a matrix tensor's logical elements run over ([rows, cols] is one
// batch; a vector is one row).
struct MatrixExtents {
  int64_t rows, columns;
};
inline MatrixExtents matrix_extents(const Tensor& t) {
  return MatrixExtents{t.rank >= 2 ? t.shape[t.rank - 2] : 1, t.shape[t.rank - 1]};
}

// Whether the tables fit a matrix of these extents with `batches` batches: a pattern built for
// another shape is a bug here, not something to read past the end of a table for.
inline void check_tables_fit(const ProbeValues& v, int64_t batches, int64_t rows, int64_t columns, const char* what) {
  if (v.kind == ProbeValues::Kind::k_blocks) {
    // One row: the flat operand. Its blocks within it, a row value per line, a column value per K.
    const int64_t k_total = v.bounds.empty() ? 0 : int64_t(v.bounds.back());
    if (batches * rows != 1 || v.lines * k_total > columns || (!v.rows.empty() && v.row_extent != v.lines) ||
        (!v.columns.empty() && v.column_extent != k_total))
      usage_error(strprintf("a bug in repro's probes (please report it): a probe pattern for %s has blocks of %lld "
                            "lines over K %lld and tables of %lld rows and %lld columns, the operand is %lld x %lld "
                            "x %lld",
                            what, (long long)v.lines, (long long)k_total, (long long)v.row_extent,
                            (long long)v.column_extent, (long long)batches, (long long)rows, (long long)columns));
    return;
  }
  const bool rows_fit = v.rows.empty() || (v.row_extent == rows && (v.row_batches == 1 || v.row_batches == batches));
  const bool columns_fit =
      v.columns.empty() || (v.column_extent == columns && (v.column_batches == 1 || v.column_batches == batches));
  if (!rows_fit || !columns_fit)
    usage_error(strprintf("a bug in repro's probes (please report it): a probe pattern for %s has tables of %lld x "
                          "%lld rows and %lld x %lld columns, the matrix is %lld x %lld x %lld",
                          what, (long long)v.row_batches, (long long)v.row_extent, (long long)v.column_batches,
                          (long long)v.column_extent, (long long)batches, (long long)rows, (long long)columns));
}

// The device's copies of the tables of the pattern being expanded; one pair, reused (every
// expansion is waited for before the next one uploads its tables).
struct ProbeTables {
  double* device = nullptr;
  size_t capacity = 0;  // doubles

  ProbeValuesView upload(const ProbeValues& v) {
    const size_t need = v.rows.size() + v.columns.size() + v.bounds.size();
    if (need > capacity) {
      device_buffer_pool().give(device);
      device = static_cast<double*>(device_buffer_pool().take(need * sizeof(double)));
      capacity = need;
    }
    if (!v.rows.empty())
      REPRO_CUDA_CHECK(cudaMemcpy(device, v.rows.data(), v.rows.size() * sizeof(double), cudaMemcpyHostToDevice));
    if (!v.columns.empty())
      REPRO_CUDA_CHECK(cudaMemcpy(device + v.rows.size(), v.columns.data(), v.columns.size() * sizeof(double),
                                  cudaMemcpyHostToDevice));
    if (!v.bounds.empty())
      REPRO_CUDA_CHECK(cudaMemcpy(device + v.rows.size() + v.columns.size(), v.bounds.data(),
                                  v.bounds.size() * sizeof(double), cudaMemcpyHostToDevice));
    ProbeValuesView view = host_view(v);
    view.rows = v.rows.empty() ? nullptr : device;
    view.columns = v.columns.empty() ? nullptr : device + v.rows.size();
    view.bounds = v.bounds.empty() ? nullptr : device + v.rows.size() + v.columns.size();
    return view;
  }
  void release() {
    device_buffer_pool().give(device);
    device = nullptr;
    capacity = 0;
  }
};

__global__ void probe_fill_kernel(DeviceLayout layout, unsigned char* storage, ProbeValuesView values, int64_t rows,
                                  int64_t columns, int64_t numel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel; i += int64_t(gridDim.x) * blockDim.x)
    encode(layout.dtype, storage, layout.logical_offset(i),
           values.at(i / (rows * columns), (i / columns) % rows, i % columns));
}

__global__ void probe_expected_kernel(double* want, ProbeValuesView values, int64_t M, int64_t N, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    want[i] = values.at(i / (M * N), (i / N) % M, i % N);
}

// How many elements of each expansion are read back and compared with the host's values.
constexpr int64_t kProbeCheckSamples = 1024;

// The spread sample of an expansion against the host's values, bit for bit; a difference ends
// the run (exit 4, class fault): every later probe would judge the kernel on inputs or answers
// that are not the ones it names.
template <typename OffsetOf>
inline void check_expansion(const char* what, DType dtype, const void* device, const ProbeValues& v, int64_t numel,
                            int64_t rows, int64_t columns, OffsetOf offset_of) {
  const int64_t count = std::min(numel, kProbeCheckSamples);
  std::vector<int64_t> indices(size_t(std::max<int64_t>(count, 0))), offsets(indices.size());
  for (int64_t s = 0; s < count; ++s) {
    indices[size_t(s)] = spread_index(s, numel, 0x9B0Eull);
    offsets[size_t(s)] = offset_of(indices[size_t(s)]);
  }
  const ProbeValuesView host = host_view(v);
  const SampleMismatch m = compare_sampled_bits(dtype, device, indices, offsets, [&](int64_t i) {
    const double value = host.at(i / (rows * columns), (i / columns) % rows, i % columns);
    // Answers are stored as computed, not encoded: a row not compared keeps its NaN payload,
    // which encode_bits would make the canonical NaN.
    return dtype == DType::f64 ? double_bits(value) : encode_bits(dtype, value);
  });
  if (m.index >= 0)
    fatal(kExitCudaError, "fault",
          strprintf("the device made %s wrong: element %lld is 0x%llx on the device, 0x%llx on the host; the GPU "
                    "cannot be trusted to run the probes",
                    what, (long long)m.index, (unsigned long long)m.device_bits, (unsigned long long)m.host_bits));
}

// Sets every logical element of a matrix tensor ([rows, cols] or [L, rows, cols], any strides)
// to the pattern, on the device; the host copy is left as it was (the probes read outputs, never
// operands, back). Aliased storage (a stride 0 on an extent above 1, overlapping dimensions) is
// written on the host, in order, as the last write must win the same way every time, and
// uploaded.
inline void fill_probe_operand(Tensor& t, const ProbeValues& v, ProbeTables& tables) {
  const ProbeClock::Scope timed(ProbeClock::instance().operands);
  const int64_t numel = t.numel();
  // A k_blocks pattern reads its operand as flat: one row of every element.
  const MatrixExtents e = v.kind == ProbeValues::Kind::k_blocks ? MatrixExtents{1, numel} : matrix_extents(t);
  if (numel == 0) return;
  const int64_t batches = numel / std::max<int64_t>(e.rows * e.columns, 1);
  check_tables_fit(v, batches, e.rows, e.columns, t.name.c_str());
  if (!elements_distinct(t)) {
    const ProbeValuesView host = host_view(v);
    for (int64_t i = 0; i < numel; ++i)
      encode(t.dtype, t.host.data(), t.logical_offset(i), host.at(i / (e.rows * e.columns), (i / e.columns) % e.rows, i % e.columns));
    REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
    return;
  }
  const ProbeValuesView view = tables.upload(v);
  probe_fill_kernel<<<pipeline_blocks(numel), kPipelineThreads>>>(device_layout(t), static_cast<unsigned char*>(t.device),
                                                                   view, e.rows, e.columns, numel);
  REPRO_CUDA_CHECK(cudaGetLastError());
  check_expansion(t.name.c_str(), t.dtype, t.device, v, numel, e.rows, e.columns,
                  [&](int64_t i) { return t.logical_offset(i); });
}

// The right answers of a probe, [L][M][N] doubles, made on the device into `want`.
inline void probe_expected(double* want, const ProbeValues& v, int64_t L, int64_t M, int64_t N, ProbeTables& tables) {
  const ProbeClock::Scope timed(ProbeClock::instance().answers);
  const int64_t count = L * M * N;
  if (count == 0) return;
  check_tables_fit(v, L, M, N, "the probe's outputs");
  const ProbeValuesView view = tables.upload(v);
  probe_expected_kernel<<<pipeline_blocks(count), kPipelineThreads>>>(want, view, M, N, count);
  REPRO_CUDA_CHECK(cudaGetLastError());
  check_expansion("the probe's right answers", DType::f64, want, v, count, M, N, [](int64_t i) { return i; });
}

// The right answers of a grouped GEMM probe: row_value(gg, m) * column_value(n) on the outputs
// group GEMM gg writes (m the output row within its batch), not compared elsewhere (padding rows,
// rows past masked_m). Rows, not elements: what a group's rows hold never depends on the column
// but through column_value.
template <typename R, typename C>
inline ProbeValues grouped_values(const GroupedProblem& p, R row_value, C column_value) {
  const int64_t batches = p.output_count() / std::max<int64_t>(p.M * p.N, 1);
  ProbeValues v = ProbeValues::constant(1.0).with_rows(batches, p.M, [](int64_t, int64_t) { return not_compared_value(); });
  for (const GroupGemm& gg : group_gemms(p))
    for (int64_t r = 0; r < gg.rows; ++r) v.rows[size_t(output_offset(p, gg) / p.N + r)] = row_value(gg, gg.row0 + r);
  return v.with_columns(1, p.N, [&](int64_t, int64_t n) { return column_value(n); });
}

template <typename R>
inline ProbeValues grouped_values(const GroupedProblem& p, R row_value) {
  return grouped_values(p, row_value, [](int64_t) { return 1.0; });
}

}  // namespace repro
