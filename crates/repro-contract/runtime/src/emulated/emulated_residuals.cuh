// ---------------------------------------------------------------------------------------------
// repro harness runtime: the elements the slices leave out, added exactly enough (residuals)
//
// Exact slices follow an operand's widest row: one element 2^-20 below its row's largest makes
// that row need 4 slices of bf16, and then every row takes 4. The plan (emulated_reference.cuh)
// may take fewer bits than that (slices of 7 bits, or the integers of the moduli); each element
// they cannot hold exactly leaves a residual r = x - (what they hold), itself exact in fp64.
// With A = Â + R_A and B = B̂ + R_B,
//
//     A B = Â B̂ (the int8 GEMMs) + R_A B + Â R_B,
//
// and R_A, R_B are sparse: their products are added here, per output, as Dot2 sums (error-free
// products and sums: as if in twice the working precision), so that each correction costs the
// bound one rounding of its sum, one of alpha's product and one of the addition to the output.
// The residuals are sorted by (batch, row, k) on the device, so the sums run in a fixed order:
// the reference is the same, bit for bit, on every run.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <cub/cub.cuh>

#include "emulated_gemm_launch.cuh"

namespace repro {

// x as `bits` bits below its row's top hold it: x with the bits below 2^(top + 1 - bits) cleared
// (7 bits a slice). Exact: scaling by powers of two, and an integer part (a scaled value small
// enough to lose bits is below 1, and its integer part is 0 either way). Scaled, not divided by
// the unit: an fp64 division is a long sequence on the GPU, and this runs once per residual term.
REPRO_HD inline double truncated_to_bits(double x, int top, int bits) {
  if (x == 0 || top == kNoTop) return 0.0;
  return copysign(ldexp(floor(ldexp(fabs(x), bits - 1 - top)), top + 1 - bits), x);
}

// One operand's residuals: sorted keys (batch * I + row) * K + k, their values, and the runs of
// equal (batch, row) with where each starts.
struct Residuals {
  int64_t count = 0, runs = 0;
  int64_t* keys = nullptr;  // [count], sorted
  double* values = nullptr;  // [count]
  int64_t* run_rows = nullptr;  // [runs]: batch * I + row
  int* run_counts = nullptr;  // [runs]
  int* run_offsets = nullptr;  // [runs]
};

// Every element of the operand that its `bits` do not hold exactly, at `counter`'s next place:
// read like the analysis (emulated_analysis.cuh), as bits where it reads them (kBits: only a
// residual is decoded, the residuals being few), else as values.
template <typename Word, bool kBits>
__global__ void collect_residuals_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t I, int64_t K,
                                         ScaleOperand scale, BitsFormat format, bool k_contiguous, const int* tops,
                                         int bits, unsigned long long* counter, int64_t capacity, int64_t* keys,
                                         double* values) {
  const RowWalk walk = row_walk(k_contiguous);
  const int64_t l = blockIdx.z, i0 = int64_t(blockIdx.x) * kExtentRows, k0 = int64_t(blockIdx.y) * kExtentChunk;
  const int64_t k1 = min(K, k0 + kExtentChunk);
  for (int r = walk.first_row; r < kExtentRows; r += walk.row_step) {
    const int64_t i = i0 + r;
    if (i >= I) break;
    const int top = tops[l * I + i];
    const auto collect = [&](int64_t k, double x) {
      const unsigned long long at = atomicAdd(counter, 1ull);
      if (int64_t(at) >= capacity) return;  // counted: collect_residuals stops the run
      keys[at] = (l * I + i) * K + k;
      values[at] = x - truncated_to_bits(x, top, bits);
    };
    const int64_t row_base = l * source.batch_stride + i * i_stride;
    if constexpr (kBits) {
      for_row_words<Word>(source, row_base, k_stride, k0 + walk.k_offset, k1, walk.k_step, [&](int64_t k, uint64_t word) {
        if (element_width(format, word, top) > bits) collect(k, decode_bits(source.dtype, word));
      });
    } else {
      for_row_elements<Word>(source, row_base, k_stride, i, k0 + walk.k_offset, k1, walk.k_step, scale,
                             [&](int64_t k, double x) {
                               if (width_needed(x, top) > bits) collect(k, x);
                             });
    }
  }
}

__global__ void residual_rows_kernel(const int64_t* keys, int64_t count, int64_t K, int64_t* rows) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x)
    rows[e] = keys[e] / K;
}

// The parts of one device buffer, each aligned for any element type: the residuals' nine
// buffers and the sort's temporary storage come from one allocation (emulated_analysis.cuh:
// allocate_emulation_bytes), which goes into the launch's scratch list.
class DeviceParts {
 public:
  // Reserves `count` elements of T (at least one); the pointer is set by allocate().
  template <typename T>
  void add(T** part, int64_t count) {
    places_.push_back({reinterpret_cast<void**>(part), bytes_});
    bytes_ += (size_t(std::max<int64_t>(count, 1)) * sizeof(T) + kAlign - 1) / kAlign * kAlign;
  }
  void allocate(const char* what, std::vector<void*>* scratch) {
    unsigned char* base = static_cast<unsigned char*>(allocate_emulation_buffer(bytes_, what, scratch));
    for (const Place& place : places_) *place.part = base + place.offset;
  }

 private:
  static constexpr size_t kAlign = 256;  // cudaMalloc's own alignment
  struct Place {
    void** part;
    size_t offset;
  };
  std::vector<Place> places_;
  size_t bytes_ = 0;
};

// The residuals of an operand at `bits` bits: `expected` of them (the analysis's count),
// collected, sorted and cut into runs of one row each.
inline Residuals collect_residuals(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t batches,
                                   int64_t I, int64_t K, const ScaleOperand& scale, const int* tops, int bits,
                                   int64_t expected, std::vector<void*>* scratch) {
  Residuals r;
  if (expected == 0) return r;
  r.count = expected;
  int64_t *keys = nullptr, *rows = nullptr, *runs = nullptr;
  double* values = nullptr;
  unsigned long long* counter = nullptr;
  // The key's bits: enough for batches * I * K, so the sort makes no more passes than needed.
  int end_bit = 1;
  while (end_bit < 63 && (int64_t(1) << end_bit) < batches * I * K) ++end_bit;
  const int n = int(expected);
  size_t sort_bytes = 0, encode_bytes = 0, scan_bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, r.keys, values, r.values, n, 0, end_bit);
  cub::DeviceRunLengthEncode::Encode(nullptr, encode_bytes, rows, r.run_rows, r.run_counts, runs, n);
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, r.run_counts, r.run_offsets, n);
  unsigned char* temporary = nullptr;
  DeviceParts parts;
  parts.add(&keys, expected), parts.add(&values, expected), parts.add(&counter, 1);
  parts.add(&r.keys, expected), parts.add(&r.values, expected), parts.add(&rows, expected);
  parts.add(&r.run_rows, expected), parts.add(&r.run_counts, expected), parts.add(&r.run_offsets, expected);
  parts.add(&runs, 1), parts.add(&temporary, int64_t(std::max({sort_bytes, encode_bytes, scan_bytes})));
  parts.allocate("its residuals", scratch);
  REPRO_CUDA_CHECK(cudaMemset(counter, 0, sizeof(unsigned long long)));
  const BitsFormat format = analysis_format(source.dtype, scale);
  with_operand_reading(source.dtype, format, [&](auto word, auto read_bits) {
    collect_residuals_kernel<decltype(word), decltype(read_bits)::value>
        <<<row_pass_grid(batches, I, K), kAnalysisThreads>>>(source, i_stride, k_stride, I, K, scale, format,
                                                             k_is_contiguous(i_stride, k_stride), tops, bits,
                                                             counter, expected, keys, values);
  });
  REPRO_CUDA_CHECK(cudaGetLastError());
  // The analysis counted the residuals and the plan weighed them: a collection that finds any
  // other number would carry some elements inexactly, or none at all. That is a fault of the
  // emulation, never a reference to judge by.
  unsigned long long found = 0;
  REPRO_CUDA_CHECK(cudaMemcpy(&found, counter, sizeof found, cudaMemcpyDeviceToHost));
  if (int64_t(found) != expected)
    fatal(kExitCudaError, "fault",
          strprintf("the emulated reference found %llu residual elements where its analysis counted %lld: rerun "
                    "with --reference device, and report this",
                    found, (long long)expected));
  REPRO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temporary, sort_bytes, keys, r.keys, values, r.values, n, 0, end_bit));
  residual_rows_kernel<<<pipeline_blocks(expected), kPipelineThreads>>>(r.keys, expected, K, rows);
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temporary, encode_bytes, rows, r.run_rows, r.run_counts, runs, n));
  REPRO_CUDA_CHECK(cudaMemcpy(&r.runs, runs, sizeof(int64_t), cudaMemcpyDeviceToHost));
  REPRO_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temporary, scan_bytes, r.run_counts, r.run_offsets, int(r.runs)));
  return r;
}

// Dot2's step: (s, c) += a * b, with the product's and the sum's rounding errors kept in c.
__device__ inline void dot2_add(double a, double b, double* s, double* c) {
  const double product = a * b, product_error = fma(a, b, -product);
  const double t = *s + product, z = t - *s, sum_error = (*s - (t - z)) + (product - z);
  *s = t;
  *c += product_error + sum_error;
}

struct CorrectionArgs {
  DeviceMatrix a, b;
  ScaleOperand scale_a, scale_b;
  const int* a_tops;  // [A's batches][M]
  int a_bits;  // what A's planes hold exactly (7 bits a slice)
  int64_t a_batches, b_batches;  // 1: shared by every batch of the output
  double* out;
  double alpha;
  int64_t L, M, N, K;
};

// out[l][i][n] += alpha * sum over the row's residuals r_k of r_k * b[l][k][n]: a block per
// (residual row of A, 256 columns), per output batch when A is shared.
__global__ void correct_a_residuals_kernel(CorrectionArgs p, Residuals r) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= p.N) return;
  for (int64_t run = blockIdx.y; run < r.runs; run += gridDim.y) {
  const int64_t row = r.run_rows[run], i = row % p.M;
  const int64_t l = p.a_batches == 1 ? blockIdx.z : row / p.M;
  const int64_t lb = p.b_batches == 1 ? 0 : l;
  double s = 0, c = 0;
  for (int e = r.run_offsets[run], end = e + r.run_counts[run]; e < end; ++e) {
    const int64_t k = r.keys[e] % p.K;
    const double b = decode(p.b.dtype, p.b.data, lb * p.b.batch_stride + k * p.b.row_stride + n * p.b.col_stride) *
                     scale_at(p.scale_b, n, k);
    dot2_add(r.values[e], b, &s, &c);
  }
  p.out[(l * p.M + i) * p.N + n] += p.alpha * (s + c);
  }
}

// out[l][m][j] += alpha * sum over column j's residuals r_k of â[l][m][k] * r_k, where â is A
// as its planes hold it. A thread per (residual column of B, output row m), the threads of a
// warp on consecutive columns of one row: their stores fall in a few sectors of one output row
// and their loads in one row of A, which the blocks beside them (the same rows, other columns)
// read again from cache. (A thread per row of one column wrote a column of the output, one
// sector per output, and read a column of A.) Each output's sum runs in the residuals' order,
// so the result does not depend on the grid.
constexpr int kCorrectionRowsPerBlock = 8;

__global__ void correct_b_residuals_kernel(CorrectionArgs p, Residuals r) {
  const int64_t run = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (run >= r.runs) return;
  const int64_t row = r.run_rows[run], j = row % p.N;
  const int64_t l = p.b_batches == 1 ? blockIdx.z : row / p.N;
  const int64_t la = p.a_batches == 1 ? 0 : l;
  const int first = r.run_offsets[run], end = first + r.run_counts[run];
  for (int64_t m0 = int64_t(blockIdx.y) * kCorrectionRowsPerBlock; m0 < p.M;
       m0 += int64_t(gridDim.y) * kCorrectionRowsPerBlock) {
    for (int64_t m = m0; m < min(p.M, m0 + kCorrectionRowsPerBlock); ++m) {
      const int top = p.a_tops[la * p.M + m];
      double s = 0, c = 0;
      for (int e = first; e < end; ++e) {
        const int64_t k = r.keys[e] % p.K;
        const double a = decode(p.a.dtype, p.a.data, la * p.a.batch_stride + m * p.a.row_stride + k * p.a.col_stride) *
                         scale_at(p.scale_a, m, k);
        dot2_add(truncated_to_bits(a, top, p.a_bits), r.values[e], &s, &c);
      }
      p.out[(l * p.M + m) * p.N + j] += p.alpha * (s + c);
    }
  }
}

// Adds both corrections to the output, A's first (stream order keeps them deterministic).
inline void launch_residual_corrections(const CorrectionArgs& args, const Residuals& a, const Residuals& b) {
  if (a.runs > 0) {
    const dim3 grid(unsigned(ceil_div(args.N, 256)), unsigned(std::min<int64_t>(a.runs, 65535)),
                    unsigned(args.a_batches == 1 ? args.L : 1));
    correct_a_residuals_kernel<<<grid, 256>>>(args, a);
    REPRO_CUDA_CHECK(cudaGetLastError());
  }
  if (b.runs > 0) {
    const dim3 grid(unsigned(ceil_div(b.runs, 256)), unsigned(std::min<int64_t>(ceil_div(args.M, kCorrectionRowsPerBlock), 65535)),
                    unsigned(args.b_batches == 1 ? args.L : 1));
    correct_b_residuals_kernel<<<grid, 256>>>(args, b);
    REPRO_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace repro
