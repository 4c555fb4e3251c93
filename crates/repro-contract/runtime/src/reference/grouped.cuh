// ---------------------------------------------------------------------------------------------
// repro harness runtime: the grouped (MoE) GEMM reference (reference.op: grouped_gemm;
// docs/spec.md, "Grouped GEMMs: `op: grouped_gemm`")
//
//   contiguous  A [M_total, K], group_index I [M_total], B [G, K, N]:  D[m] = A[m] @ B[I[m]];
//               rows with I[m] = -1 are padding, not compared
//   masked      A [G, M_max, K], masked_m MM [G], B [G, K, N]:  D[g] = A[g] @ B[g];
//               rows m >= MM[g] are not compared
//   k_grouped   A [M, K_total], B [K_total, N], k_sizes KS [G]:  D[g] = A[:, Kg] @ B[Kg, :],
//               Kg the g-th range of KS[g] columns (rows of B), the ranges in group order
//   k_grouped_blocks  the same GEMMs, each group's operands stored as blocks (DeepGEMM's
//               k-grouped weight gradient): A flat [M * K_total], group g's A an [M, KS[g]]
//               row-major block at M * k0(g); B flat [N * K_total], its B an [N, KS[g]] block
//               at N * k0(g): the row stride changes from group to group
//
// Each group is a plain GEMM on windows of the operands (a run of rows, one batch of B, a K range)
// computed by the host or the device reference unchanged, so a grouped reference is as exact,
// and per multiply-add as fast, as a plain one. Block scales (scale_a, scale_b) are windowed the
// same way: the activations' follow A's rows (contiguous: one tensor over M_total; masked: per
// group [G, M_max / bm, ...]), the weights' are per group ([G, K / bk, N / bn]); k_grouped scales
// are one tensor each, windowed by the group's K range. A group must begin on a scale block
// (checked when the metadata is read). Outputs not compared hold not_compared_value().
// The metadata is checked before anything runs: a group index outside [-1, G), a masked_m above
// M_max or k_sizes past K_total is a spec error (exit 2) naming the element, never a wrong
// reference.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "trace.cuh"

namespace repro {

enum class GroupedLayout : int { none, contiguous, masked, k_grouped, k_grouped_blocks };

// Whether the groups split K: one A and one B, a K range per group, D [G, M, N].
inline bool splits_k(GroupedLayout layout) {
  return layout == GroupedLayout::k_grouped || layout == GroupedLayout::k_grouped_blocks;
}

inline const char* grouped_layout_name(GroupedLayout layout) {
  switch (layout) {
    case GroupedLayout::none: return "none";
    case GroupedLayout::contiguous: return "contiguous";
    case GroupedLayout::masked: return "masked";
    case GroupedLayout::k_grouped: return "k_grouped";
    case GroupedLayout::k_grouped_blocks: return "k_grouped_blocks";
  }
  return "?";
}

struct GroupedProblem {
  GroupedLayout layout = GroupedLayout::none;
  const Tensor *a = nullptr, *b = nullptr, *metadata = nullptr, *out = nullptr;
  const Tensor *scale_a = nullptr, *scale_b = nullptr;  // null: not scaled
  ScaleSpec scale_a_spec, scale_b_spec;
  const Tensor* c = nullptr;  // beta C, C shaped as the output; null: none
  double alpha = 1.0, beta = 0.0;
  int64_t G = 0, M = 0, N = 0, K = 0;  // M: A's rows (M_total, M_max, M); K: A's K (K_total)
  std::vector<int64_t> groups;          // the checked metadata: per row (contiguous) or per group
  // The output's batches: G for masked and k_grouped ([G, M, N]), 1 for contiguous.
  int64_t batches() const { return layout == GroupedLayout::contiguous ? 1 : G; }
  int64_t output_count() const { return batches() * M * N; }
  // K range of group g (k_grouped): columns k_begin(g) .. k_begin(g) + groups[g].
  int64_t k_begin(int64_t g) const {
    int64_t k = 0;
    for (int64_t h = 0; h < g; ++h) k += groups[size_t(h)];
    return k;
  }
};

// Reads the metadata tensor's host values and checks them; exit 2 at the first bad element.
inline std::vector<int64_t> read_group_metadata(const GroupedProblem& p) {
  const Tensor& t = *p.metadata;
  std::vector<int64_t> values(size_t(t.numel()));
  int64_t k_total = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = decode(t.dtype, t.host.data(), t.logical_offset(i));
    values[size_t(i)] = int64_t(v);
    const auto bad = [&](const char* what) {
      usage_error(strprintf("%s[%lld] = %s, but %s (reference.%s, %s layout)", t.name.c_str(), (long long)i,
                            format_value(v).c_str(), what,
                            p.layout == GroupedLayout::contiguous ? "group_index"
                            : p.layout == GroupedLayout::masked   ? "masked_m"
                                                                  : "k_sizes",
                            grouped_layout_name(p.layout)));
    };
    if (p.layout == GroupedLayout::contiguous && !(v >= -1 && v < double(p.G)))
      bad(strprintf("a group index must be in [-1, G = %lld)", (long long)p.G).c_str());
    if (p.layout == GroupedLayout::masked && !(v >= 0 && v <= double(p.M)))
      bad(strprintf("a masked_m must be in [0, M_max = %lld]", (long long)p.M).c_str());
    if (splits_k(p.layout)) {
      if (!(v >= 0)) bad("a K extent must not be negative");
      k_total += int64_t(v);
      if (k_total > p.K) bad(strprintf("the K extents up to here sum to %lld, past K_total = %lld", (long long)k_total,
                                       (long long)p.K).c_str());
    }
  }
  return values;
}

// A rank-2 window of `t`: rows x cols from storage element `base`, rows `row_stride` and columns
// `col_stride` elements apart (t's own strides). The device pointer points into t's device
// copy; the host bytes are copied from t's (base to the window's last element) when `host_bytes`
// and t has them.
inline Tensor window(const Tensor& t, int64_t base, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                     bool host_bytes) {
  Tensor w;
  w.name = t.name;
  w.dtype = t.dtype;
  w.rank = 2;
  w.shape[0] = rows, w.shape[1] = cols;
  w.strides[0] = row_stride, w.strides[1] = col_stride;
  w.init = t.init;
  const size_t bytes = dtype_bytes(t.dtype);
  if (t.device != nullptr) w.device = static_cast<unsigned char*>(t.device) + size_t(base) * bytes;
  if (host_bytes && !t.host.empty() && rows > 0 && cols > 0) {
    const size_t begin = size_t(base) * bytes, end = begin + w.storage_bytes();
    w.host.assign(t.host.begin() + std::ptrdiff_t(begin), t.host.begin() + std::ptrdiff_t(std::min(end, t.host.size())));
    w.host.resize(w.storage_bytes(), 0);
  }
  return w;
}

// One group's GEMM: its rows of the output (rows `rows` from output row `row0` of batch `batch`
// of the [batches][M][N] reference) and its K range of A's columns and B's rows (`k` from `k0`;
// k0 is 0 but for k_grouped). The extents alone: the probes' expected values need no operands.
struct GroupGemm {
  int64_t group, batch, row0, rows, k0, k;
};

// The GEMMs the grouped problem is made of, in output order. A contiguous layout gets one per
// run of rows of the same group (the rows of a group need not be contiguous); masked one per
// group over its first masked_m rows; k_grouped one per group over its K range.
inline std::vector<GroupGemm> group_gemms(const GroupedProblem& p) {
  std::vector<GroupGemm> out;
  switch (p.layout) {
    case GroupedLayout::contiguous:
      for (int64_t m = 0; m < p.M;) {
        const int64_t g = p.groups[size_t(m)];
        int64_t end = m + 1;
        while (end < p.M && p.groups[size_t(end)] == g) ++end;
        if (g >= 0) out.push_back(GroupGemm{g, 0, m, end - m, 0, p.K});
        m = end;
      }
      break;
    case GroupedLayout::masked:
      for (int64_t g = 0; g < p.G; ++g)
        if (p.groups[size_t(g)] > 0) out.push_back(GroupGemm{g, g, 0, p.groups[size_t(g)], 0, p.K});
      break;
    case GroupedLayout::k_grouped:
    case GroupedLayout::k_grouped_blocks:
      for (int64_t g = 0; g < p.G; ++g) out.push_back(GroupGemm{g, g, 0, p.M, p.k_begin(g), p.groups[size_t(g)]});
      break;
    case GroupedLayout::none: break;
  }
  return out;
}

// Every group begins on a scale block: a contiguous group's first row on a block of scale_a's
// rows, a k_grouped group's K range on a K block of each scale (on an element's first block when
// the ue8m0 scales are packed four to an element). Otherwise two groups would share a scale,
// which no kernel means: exit 2 naming the group (listed metadata is checked by repro already).
inline void check_group_scale_blocks(const GroupedProblem& p) {
  for (const GroupGemm& gg : group_gemms(p)) {
    for (int is_a = 1; is_a >= 0; --is_a) {
      const Tensor* t = is_a ? p.scale_a : p.scale_b;
      if (t == nullptr) continue;
      const ScaleSpec& s = is_a ? p.scale_a_spec : p.scale_b_spec;
      const char* field = is_a ? "scale_a" : "scale_b";
      const int64_t block_k = is_a ? s.block[1] : s.block[0];
      if (is_a && p.layout == GroupedLayout::contiguous && gg.row0 % s.block[0] != 0)
        usage_error(strprintf("group %lld's rows begin at row %lld, inside a block of %lld rows of %s (%s): align "
                              "the groups' rows to %lld",
                              (long long)gg.group, (long long)gg.row0, (long long)s.block[0], field, t->name.c_str(),
                              (long long)s.block[0]));
      if (!splits_k(p.layout) || gg.k == 0) continue;
      const int64_t per_element = s.encoding == ScaleEncoding::ue8m0_packed ? 4 : 1;
      // Blocks: each group's scales are a block of whole K blocks, the last group's too.
      if (p.layout == GroupedLayout::k_grouped_blocks && gg.k % block_k != 0)
        usage_error(strprintf("group %lld's K extent is %lld, not a multiple of the K block of %s (%s, %lld): with "
                              "k_grouped_blocks every group's scales are whole K blocks",
                              (long long)gg.group, (long long)gg.k, field, t->name.c_str(), (long long)block_k));
      if (gg.k0 % (block_k * per_element) != 0)
        usage_error(strprintf("group %lld's K range begins at k = %lld, not on a%s K block of %s (%s, %lld wide%s): "
                              "make each k_sizes entry a multiple of %lld",
                              (long long)gg.group, (long long)gg.k0, per_element > 1 ? " packed element's first" : "",
                              field, t->name.c_str(), (long long)block_k,
                              per_element > 1 ? ", four to an i32 element" : "", (long long)(block_k * per_element)));
    }
  }
}

// The windows of A and B one group's GEMM reads, and of their scales.
struct GroupOperands {
  Tensor a, b;
  Tensor scale_a, scale_b;  // empty (rank 0) when not scaled
  Tensor c;                 // the group's rows of C; empty when the GEMM has none
};

// The window of a scale tensor group gg reads: `i_first` its first block along the operand's
// non-K axis, `k_first` its first K block (k_grouped), `batch` the [G, ...] batch (-1: the
// tensor has none). Host bytes always: the host cross-check scales its samples with them.
inline Tensor scale_window(const Tensor& t, const ScaleSpec& spec, bool is_a, int64_t batch, int64_t i_first,
                           int64_t k_first) {
  const int rank = t.rank;
  const int64_t rows = t.shape[rank - 2], cols = t.shape[rank - 1];
  const int64_t row_stride = t.strides[rank - 2], col_stride = t.strides[rank - 1];
  // Packed ue8m0 holds four K blocks an element: k_first is a multiple of 4 (checked).
  const int64_t k_element = spec.encoding == ScaleEncoding::ue8m0_packed ? k_first / 4 : k_first;
  // SA is [I blocks, K blocks], SB [K blocks, I blocks] (the operand's logical order).
  const int64_t row0 = is_a ? i_first : k_element, col0 = is_a ? k_element : i_first;
  const int64_t base = (batch >= 0 ? batch * t.strides[0] : 0) + row0 * row_stride + col0 * col_stride;
  return window(t, base, rows - row0, cols - col0, row_stride, col_stride, /*host_bytes*/ true);
}

// k_grouped_blocks: group gg's operands are blocks of the flat A and B, each with its own row
// stride (its K extent): A's [M, k] block at M * k0, row-major; B's [N, k] block at N * k0, read
// as the [k, N] operand (k contiguous). The scales, flat too, are blocks of one scale per row
// (column) and K block: SA's [M, k / bk] at M * k0 / bk, SB's [N, k / bk] at N * k0 / bk.
inline GroupOperands group_block_operands(const GroupedProblem& p, const GroupGemm& gg, bool host_bytes) {
  GroupOperands operands{window(*p.a, p.M * gg.k0, p.M, gg.k, gg.k, 1, host_bytes),
                         window(*p.b, p.N * gg.k0, gg.k, p.N, 1, gg.k, host_bytes), Tensor(), Tensor(), Tensor()};
  if (p.scale_a != nullptr) {
    const int64_t bk = p.scale_a_spec.block[1], blocks = ceil_div(gg.k, bk);
    operands.scale_a = window(*p.scale_a, p.M * (gg.k0 / bk), p.M, blocks, blocks, 1, /*host_bytes*/ true);
  }
  if (p.scale_b != nullptr) {
    const int64_t bk = p.scale_b_spec.block[0], blocks = ceil_div(gg.k, bk);
    operands.scale_b = window(*p.scale_b, p.N * (gg.k0 / bk), blocks, p.N, 1, blocks, /*host_bytes*/ true);
  }
  if (p.c != nullptr) {
    const Tensor& C = *p.c;
    operands.c = window(C, gg.batch * C.strides[0], p.M, p.N, C.strides[1], C.strides[2], host_bytes);
  }
  return operands;
}

// `host_bytes`: copy the windows' host bytes too (the host reference reads them; the device
// reference, and its cross-check, read the device copies).
inline GroupOperands group_operands(const GroupedProblem& p, const GroupGemm& gg, bool host_bytes = true) {
  const Tensor &A = *p.a, &B = *p.b;
  if (p.layout == GroupedLayout::k_grouped_blocks) return group_block_operands(p, gg, host_bytes);
  const int64_t a_row = A.strides[A.rank - 2], a_col = A.strides[A.rank - 1];
  // A: its rows of this batch (masked: of group g), columns k0 ..; B: batch g (contiguous,
  // masked) or rows k0 .. (k_grouped).
  const int64_t a_base = (A.rank == 3 ? gg.batch * A.strides[0] : 0) + gg.row0 * a_row + gg.k0 * a_col;
  const int64_t b_batch = B.rank == 3 ? gg.group * B.strides[0] : 0;
  const int64_t b_row = B.strides[B.rank - 2], b_col = B.strides[B.rank - 1];
  GroupOperands operands{window(A, a_base, gg.rows, gg.k, a_row, a_col, host_bytes),
                         window(B, b_batch + gg.k0 * b_row, gg.k, p.N, b_row, b_col, host_bytes), Tensor(),
                         Tensor(), Tensor()};
  // C has the output's shape: the rows this group's GEMM writes, of its batch.
  if (p.c != nullptr) {
    const Tensor& C = *p.c;
    const int64_t c_row = C.strides[C.rank - 2], c_col = C.strides[C.rank - 1];
    const int64_t c_base = (C.rank == 3 ? gg.batch * C.strides[0] : 0) + gg.row0 * c_row;
    operands.c = window(C, c_base, gg.rows, p.N, c_row, c_col, host_bytes);
  }
  // The scales: A's rows from the group's first row block (of its batch, masked), K from its K
  // range's first block (k_grouped); B's of its group, or of its K range.
  const bool k_grouped = p.layout == GroupedLayout::k_grouped;
  if (p.scale_a != nullptr) {
    const ScaleSpec& s = p.scale_a_spec;
    operands.scale_a = scale_window(*p.scale_a, s, true, p.scale_a->rank == 3 ? gg.batch : -1, gg.row0 / s.block[0],
                                    k_grouped ? gg.k0 / s.block[1] : 0);
  }
  if (p.scale_b != nullptr) {
    const ScaleSpec& s = p.scale_b_spec;
    operands.scale_b = scale_window(*p.scale_b, s, false, p.scale_b->rank == 3 ? gg.group : -1, 0,
                                    k_grouped ? gg.k0 / s.block[0] : 0);
  }
  return operands;
}

inline GemmProblem group_problem(const GroupedProblem& p, const GroupGemm& gg, const GroupOperands& operands) {
  GemmProblem sub;
  sub.a = &operands.a;
  sub.b = &operands.b;
  sub.c = p.c != nullptr ? &operands.c : nullptr;
  sub.bias = nullptr;
  sub.out = p.out;
  sub.alpha = p.alpha;
  sub.beta = p.c != nullptr ? p.beta : 0.0;
  sub.L = 1;
  sub.M = gg.rows;
  sub.N = p.N;
  sub.K = gg.k;
  sub.batched = false;
  if (p.scale_a != nullptr) sub.scale_a = &operands.scale_a, sub.scale_a_spec = p.scale_a_spec;
  if (p.scale_b != nullptr) sub.scale_b = &operands.scale_b, sub.scale_b_spec = p.scale_b_spec;
  return sub;
}

// Outputs no group GEMM writes stay not_compared_value(): padding rows, rows past masked_m.
// (k_grouped writes every output; a group of K extent 0 is all zeros.)
inline int64_t output_offset(const GroupedProblem& p, const GroupGemm& gg) {
  return (gg.batch * p.M + gg.row0) * p.N;
}

// The host reference, [batches][M][N].
inline void reference_grouped_gemm(const GroupedProblem& p, std::vector<double>* want) {
  want->assign(size_t(p.output_count()), not_compared_value());
  for (const GroupGemm& gg : group_gemms(p)) {
    std::vector<double> values;
    const GroupOperands operands = group_operands(p, gg);
    if (gg.k == 0) {  // an empty K range: no product, beta C alone
      values.assign(size_t(gg.rows * p.N), 0.0);
      if (p.c != nullptr)
        for (int64_t i = 0; i < gg.rows * p.N; ++i)
          values[size_t(i)] = p.beta * decode(operands.c.dtype, operands.c.host.data(), operands.c.logical_offset(i));
    } else {
      reference_gemm(group_problem(p, gg, operands), &values);
    }
    std::copy(values.begin(), values.end(), want->begin() + std::ptrdiff_t(output_offset(p, gg)));
  }
}

// --ones: alpha * (the group's K extent) where compared.
inline void analytic_grouped_ones(const GroupedProblem& p, std::vector<double>* want) {
  want->assign(size_t(p.output_count()), not_compared_value());
  for (const GroupGemm& gg : group_gemms(p))
    std::fill_n(want->begin() + std::ptrdiff_t(output_offset(p, gg)), size_t(gg.rows * p.N),
                p.alpha * double(gg.k));
}

// out[r, n] = beta * C[r, n] over a rows x cols window of C: an empty group's outputs.
__global__ void beta_c_kernel(double* out, const unsigned char* c, DType dtype, int64_t row_stride, int64_t col_stride,
                              int64_t rows, int64_t cols, double beta) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = beta * decode(dtype, c, (i / cols) * row_stride + (i % cols) * col_stride);
}

// The device reference: each group's GEMM on the device, written straight into its part of the
// output, and cross-checked on the host as a plain one, kCrossCheckSamples shared among the
// groups. In four passes per round of groups, so that the GPU never waits for the host: every
// group's sample is fetched, every GEMM started, every sample computed on the host while they
// run, then judged.
inline DeviceReference compute_device_grouped_reference(const GroupedProblem& p, ReferenceMethod method) {
  DeviceReference total;
  const int64_t count = p.output_count();
  total.values = allocate_reference_doubles(count, "its output");
  if (count > 0) {
    fill_kernel<double><<<pipeline_blocks(count), kPipelineThreads>>>(total.values, count, not_compared_value());
    REPRO_CUDA_CHECK(cudaGetLastError());
  }
  const std::vector<GroupGemm> gemms = group_gemms(p);
  std::vector<GroupOperands> operands;  // the problems point into it: reserved, never moved
  operands.reserve(gemms.size());
  std::vector<GemmProblem> problems;
  std::vector<double*> places;
  for (const GroupGemm& gg : gemms) {
    double* place = total.values + output_offset(p, gg);
    if (gg.k == 0) {  // an empty K range: no GEMM, zeros (or beta C)
      fill_kernel<double><<<pipeline_blocks(gg.rows * p.N), kPipelineThreads>>>(place, gg.rows * p.N, 0.0);
      REPRO_CUDA_CHECK(cudaGetLastError());
      if (p.c != nullptr) {
        const Tensor c = group_operands(p, gg, /*host_bytes*/ false).c;
        beta_c_kernel<<<pipeline_blocks(gg.rows * p.N), kPipelineThreads>>>(
            place, static_cast<const unsigned char*>(c.device), c.dtype, c.strides[0], c.strides[1], gg.rows, p.N,
            p.beta);
        REPRO_CUDA_CHECK(cudaGetLastError());
      }
      continue;
    }
    operands.push_back(group_operands(p, gg, /*host_bytes*/ false));  // the device reads its own copies
    problems.push_back(group_problem(p, gg, operands.back()));
    places.push_back(place);
  }
  const int64_t share = std::max<int64_t>(64, kCrossCheckSamples / std::max<int64_t>(1, int64_t(problems.size())));
  // Groups in rounds whose packed fp64 operands stay under 8 GiB together (every group of a
  // round holds its copies until the round ends), so that many groups need no more memory than
  // a few.
  const auto packed_doubles = [](const GemmProblem& sub) {
    const int64_t kp = ceil_div(sub.K, kRefTileK) * kRefTileK;
    return double(kp) * double(ceil_div(sub.M, kRefTileM) * kRefTileM + ceil_div(sub.N, kRefTileN) * kRefTileN);
  };
  constexpr double kRoundDoubles = double(int64_t(1) << 30);  // 8 GiB of doubles
  double judge_seconds = 0;
  for (size_t first = 0; first < problems.size();) {
    size_t end = first + 1;
    for (double doubles = packed_doubles(problems[first]);
         end < problems.size() && doubles + packed_doubles(problems[end]) <= kRoundDoubles; ++end)
      doubles += packed_doubles(problems[end]);
    auto phase_start = std::chrono::steady_clock::now();
    std::vector<CrossCheckSample> samples;
    for (size_t i = first; i < end; ++i) samples.push_back(fetch_cross_check_sample(problems[i], share));
    total.fetch_seconds += seconds_since(phase_start);
    std::vector<ReferenceGemmLaunch> launches;
    for (size_t i = first; i < end; ++i) {
      launches.push_back(launch_reference_gemm(problems[i], method, places[i]));
      total.describe(launches.back());
    }
    std::vector<StoredValues> device_values;
    for (size_t i = first; i < end; ++i)
      device_values.push_back(fetch_sampled_device_values(problems[i], samples[i - first], places[i]));
    for (size_t i = first; i < end; ++i) {
      compute_cross_check_sample(problems[i], &samples[i - first]);
      total.host_seconds += samples[i - first].host_seconds;
      total.decode_seconds += samples[i - first].decode_seconds;
    }
    for (ReferenceGemmLaunch& launch : launches) total.kernel_ms += finish_reference_gemm(&launch);
    phase_start = std::chrono::steady_clock::now();
    for (size_t i = first; i < end; ++i) {
      const CrossCheck check = judge_cross_check_sample(problems[i], samples[i - first], device_values[i - first]);
      total.check.samples += check.samples;
      total.check.max_relative = std::max(total.check.max_relative, check.max_relative);
    }
    judge_seconds += seconds_since(phase_start);
    first = end;
  }
  total.check_seconds = std::max(0.0, total.host_seconds - total.kernel_ms / 1e3) + judge_seconds;
  if (total.engine.empty()) total.engine = "no GEMM: every group's K is 0";
  return total;
}

// ------------------------------------------------------------------ tiles that reach other groups
//
// A grouped kernel computes a group's rows in tiles of tile_m rows, and a tile's store writes
// its whole footprint unless it is masked to the group: a masked group's last tile runs past
// masked_m and, when M_max is no multiple of the tile, past the group's end into the next
// group's rows of the [G * M_max, N] buffer; a contiguous tile that holds the end of one group
// and the start of another is stored by each group's pass. Wrong rows that such a footprint
// covers are the mark of a store that spills across the group boundary. Which tiles a kernel
// computes the runtime cannot know; these are the ones that hold a valid row of their group.

// A tile of another group that covers rows r0..r1 of group GEMM gg (row numbers as in
// group_gemms: within the batch): for masked, the nearest earlier group's tile whose footprint
// reaches these rows; for contiguous, the tile holding them when another group has rows in it.
// `product`: the group the rows decode to (-1: none), which the tile's group must be if it is one.
struct CoveringTile {
  int64_t group = -1;  // the tile's group; -1: no tile of another group covers the rows
  std::string where;   // "the footprint of group 0's tile at its rows 128-255, ..."
};

inline CoveringTile covering_tile(const GroupedProblem& p, const GroupGemm& gg, int64_t r0, int64_t r1,
                                  int64_t tile_m, int64_t product = -1) {
  CoveringTile found;
  if (tile_m <= 0) return found;
  if (p.layout == GroupedLayout::masked) {
    const int64_t flat0 = gg.batch * p.M + r0, flat1 = gg.batch * p.M + r1;
    for (int64_t h = gg.group - 1; h >= 0; --h) {
      if (product >= 0 && product != h) continue;
      for (int64_t t = 0; t * tile_m < p.groups[size_t(h)]; ++t) {
        const int64_t begin = h * p.M + t * tile_m, end = begin + tile_m;  // the footprint, flat rows
        if (begin > flat0 || flat1 >= end) continue;
        found.group = h;
        found.where = strprintf("the footprint of group %lld's tile at its rows %lld-%lld, %lld rows tall where "
                                "group %lld has %lld valid rows and M_max is %lld: it reaches group %lld's rows %lld-%lld",
                                (long long)h, (long long)(t * tile_m), (long long)(t * tile_m + tile_m - 1),
                                (long long)tile_m, (long long)h, (long long)p.groups[size_t(h)], (long long)p.M,
                                (long long)gg.group, (long long)std::max<int64_t>(0, begin - gg.batch * p.M),
                                (long long)std::min(p.M - 1, end - 1 - gg.batch * p.M));
        return found;
      }
    }
    return found;
  }
  if (p.layout != GroupedLayout::contiguous) return found;
  const int64_t begin = r0 / tile_m * tile_m, end = std::min(p.M, begin + tile_m);
  if (r1 >= end) return found;
  int64_t lo = -1, hi = -1;
  for (int64_t m = begin; m < end; ++m) {
    const int64_t h = p.groups[size_t(m)];
    if (h < 0 || h == gg.group || (product >= 0 && h != product)) continue;
    if (found.group < 0) found.group = h;
    if (h == found.group) lo = lo < 0 ? m : lo, hi = m;
  }
  if (found.group >= 0)
    found.where = strprintf("the %lld-row tile at rows %lld-%lld, which they share with group %lld (rows %lld-%lld)",
                            (long long)tile_m, (long long)begin, (long long)(end - 1), (long long)found.group,
                            (long long)lo, (long long)hi);
  return found;
}

// Per output row ([batches][M]): whether another group's tile also covers it (see above).
inline std::vector<bool> rows_other_tiles_reach(const GroupedProblem& p, int64_t tile_m) {
  std::vector<bool> reach(size_t(p.batches() * p.M), false);
  if (tile_m <= 0) return reach;
  if (p.layout == GroupedLayout::masked) {
    for (int64_t h = 0; h < p.G; ++h)
      for (int64_t t = 0; t * tile_m < p.groups[size_t(h)]; ++t)
        for (int64_t flat = std::max((h + 1) * p.M, h * p.M + t * tile_m);
             flat < std::min(p.G * p.M, h * p.M + (t + 1) * tile_m); ++flat)
          reach[size_t(flat)] = true;
  } else if (p.layout == GroupedLayout::contiguous) {
    for (int64_t begin = 0; begin < p.M; begin += tile_m) {
      const int64_t end = std::min(p.M, begin + tile_m);
      int64_t first = -1;
      bool shared = false;
      for (int64_t m = begin; m < end; ++m) {
        const int64_t h = p.groups[size_t(m)];
        if (h < 0) continue;
        if (first < 0) first = h;
        shared = shared || h != first;
      }
      if (shared)
        for (int64_t m = begin; m < end; ++m) reach[size_t(m)] = true;
    }
  }
  return reach;
}

// "4 groups; 120 of 1024 rows are padding (group index -1), not compared"
inline std::string describe_groups(const GroupedProblem& p) {
  int64_t skipped_rows = 0;
  if (p.layout == GroupedLayout::contiguous)
    for (int64_t g : p.groups) skipped_rows += g < 0;
  if (p.layout == GroupedLayout::masked)
    for (int64_t rows : p.groups) skipped_rows += p.M - rows;
  switch (p.layout) {
    case GroupedLayout::contiguous:
      return strprintf("grouped GEMM (contiguous), %lld groups; %lld of %lld rows are padding (group index -1), not compared",
                       (long long)p.G, (long long)skipped_rows, (long long)p.M);
    case GroupedLayout::masked:
      return strprintf("grouped GEMM (masked), %lld groups of up to %lld rows; %lld of %lld rows are past masked_m, not compared",
                       (long long)p.G, (long long)p.M, (long long)skipped_rows, (long long)(p.G * p.M));
    case GroupedLayout::k_grouped:
    case GroupedLayout::k_grouped_blocks: {
      std::string ks;
      for (int64_t k : p.groups) ks += (ks.empty() ? "" : ", ") + std::to_string(k);
      return strprintf("grouped GEMM (%s), %lld groups, K extents [%s] of K_total %lld", grouped_layout_name(p.layout),
                       (long long)p.G, ks.c_str(), (long long)p.K);
    }
    case GroupedLayout::none: break;
  }
  return "";
}

}  // namespace repro
