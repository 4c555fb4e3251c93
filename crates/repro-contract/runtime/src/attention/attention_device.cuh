// ---------------------------------------------------------------------------------------------
// repro harness runtime: attention's f64 reference on the device (op: attention at production
// sizes: reference.provider device, or auto above kAttentionDeviceMinMacs)
//
// The host reference (attention_reference.cuh) is one f64 multiply-add per score and channel,
// twice: batch 8, 32 heads, 4096 tokens and head dim 128 are 1.1e12 of them, an hour on 16
// cores. This kernel computes the same O and lse in f64 on the GPU, tiled the way FlashAttention
// tiles the kernel under test, so neither the scores nor the probabilities are ever stored:
//
//   one CTA per (64 query rows, query head, batch)   Q tile decoded once into shared memory (f64)
//   for each tile of 32 keys the rows may see:       K, V tiles decoded into shared memory (f64)
//     S = scale * Q K^T, masked                      2 x 4 scores per thread
//     running max m, sum l, P = exp(S - m)           one warp per row, warp shuffles
//     O = O * exp(m_old - m) + P V                   O in shared memory, 8 x 4 outputs per thread
//   O / l, lse = m + log(l)                          written as doubles in logical order
//
// Every product and sum is IEEE f64 (FMAs on the CUDA cores), the operands widened exactly by
// dtype.cuh's decode(), in their own dtypes and strides; only the order of the sums and the
// running rescaling differ from the host's, a few units of 2^-53 of the terms' magnitude.
// Head dims up to 128 use 64 x 32 tiles, up to 256 32 x 16 tiles (shared memory holds Q, O, K
// and V in f64); larger ones stay on the host.
//
// As for the GEMM (device_reference.cuh), a reference computed on the GPU under test could
// share its fault: a sample of rows is recomputed on the host while the kernel runs, and a
// disagreement ends the run instead of judging the kernel.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "attention_reference.cuh"
#include "device_reference.cuh"

namespace repro {

// auto: the device above 2^30 multiply-adds (scores and outputs), where the host reference
// takes about a second on 16 cores; the examples' sizes stay on the host.
constexpr double kAttentionDeviceMinMacs = 1073741824.0;
constexpr int64_t kAttentionDeviceMaxHeadDim = 256;
constexpr int kAttentionReferenceThreads = 256;

// Multiply-adds of the host reference: two per visible (query, key) pair and channel.
inline double attention_macs(const AttentionShape& s) {
  double pairs = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t row = 0; row < s.q_len[size_t(b)]; ++row) pairs += double(last_visible_key(s, b, row) + 1);
  return 2.0 * pairs * double(s.heads_q) * double(s.head_dim);
}

inline bool attention_reference_on_device(const SpecInfo& spec, const std::string& provider) {
  if (provider == "device") return true;
  if (provider == "host") return false;
  const AttentionShape s = attention_shape(spec);
  return s.head_dim <= kAttentionDeviceMaxHeadDim && attention_macs(s) >= kAttentionDeviceMinMacs;
}

// An operand as the kernel reads it: element (b, h, row, d) is at
// b * batch + h * head + (row_base[b] + row) * row + d * channel, row_base the sequence's first
// row with variable lengths ([H, total, D]: batch 0), else 0.
struct AttentionOperandView {
  const unsigned char* data = nullptr;
  DType dtype = DType::f64;
  int64_t batch = 0, head = 0, row = 0, channel = 0;
};

inline AttentionOperandView attention_operand_view(const Tensor& t, bool varlen) {
  AttentionOperandView view;
  view.data = static_cast<const unsigned char*>(t.device);
  view.dtype = t.dtype;
  const int first = varlen ? -1 : 0;  // [B, H, S, D], or [H, total, D]
  view.batch = varlen ? 0 : t.strides[0];
  view.head = t.strides[first + 1], view.row = t.strides[first + 2], view.channel = t.strides[first + 3];
  return view;
}

struct DeviceAttentionArgs {
  AttentionOperandView q, k, v;
  // Per batch, on the device: each sequence's first row (of all sequences) and length.
  const int64_t *q_begin = nullptr, *q_len = nullptr, *k_begin = nullptr, *k_len = nullptr;
  int64_t heads_q = 0, group = 1, head_dim = 0, total_q = 0, lse_rows = 0;
  bool varlen = false;
  int causal = 0;
  double scale = 0;
  double *out = nullptr, *lse = nullptr;  // logical order; lse may be null
};

__device__ inline double attention_element(const AttentionOperandView& t, const DeviceAttentionArgs& p, int64_t b,
                                           int64_t h, int64_t first_row, int64_t row, int64_t d) {
  const int64_t base = p.varlen ? first_row : 0;
  return decode(t.dtype, t.data, b * t.batch + h * t.head + (base + row) * t.row + d * t.channel);
}

__device__ inline double warp_max(double x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ inline double warp_sum(double x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Row strides in shared memory: an odd number of doubles, so the rows a warp reads at once fall
// in different banks.
__host__ __device__ inline int64_t attention_odd_stride(int64_t d) { return d | 1; }

template <int TileQ, int TileK>
inline size_t attention_reference_shared_bytes(int64_t D) {
  const int64_t ld = attention_odd_stride(D);
  return size_t(TileQ * ld + TileQ * D + TileK * ld + TileK * D + TileQ * (TileK + 1) + 3 * TileQ) * sizeof(double);
}

template <int TileQ, int TileK>
__global__ void __launch_bounds__(kAttentionReferenceThreads) attention_reference_kernel(DeviceAttentionArgs p) {
  static_assert(TileK <= 32 && TileK % 4 == 0 && TileQ % 8 == 0, "a warp per score row, 4 keys per thread");
  extern __shared__ double shared[];
  const int64_t D = p.head_dim, ld = attention_odd_stride(D);
  double* q_tile = shared;                   // [TileQ][ld]
  double* o_tile = q_tile + TileQ * ld;      // [TileQ][D], unnormalized
  double* k_tile = o_tile + TileQ * D;       // [TileK][ld]
  double* v_tile = k_tile + TileK * ld;      // [TileK][D]
  double* p_tile = v_tile + TileK * D;       // [TileQ][TileK + 1]: scores, then probabilities
  double* row_max = p_tile + TileQ * (TileK + 1);
  double* row_sum = row_max + TileQ;
  double* row_rescale = row_sum + TileQ;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, warps = kAttentionReferenceThreads / 32;
  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = int64_t(blockIdx.x) * TileQ;
  const int64_t q_len = p.q_len[b], k_len = p.k_len[b];
  if (q0 >= q_len) return;
  const int64_t kv = h / p.group, rows = q_len - q0 < TileQ ? q_len - q0 : TileQ;
  const int64_t shift = p.causal == 2 ? k_len - q_len : 0;  // bottom-right: the last query sees the last key
  for (int64_t i = tid; i < TileQ * D; i += kAttentionReferenceThreads) {
    const int64_t r = i / D, d = i % D;
    q_tile[r * ld + d] = r < rows ? attention_element(p.q, p, b, h, p.q_begin[b], q0 + r, d) : 0.0;
    o_tile[r * D + d] = 0.0;
  }
  for (int r = tid; r < TileQ; r += kAttentionReferenceThreads) row_max[r] = -INFINITY, row_sum[r] = 0.0;
  // The last key any row of the tile may see.
  const int64_t last_key = p.causal == 0 || q0 + rows - 1 + shift > k_len - 1 ? k_len - 1 : q0 + rows - 1 + shift;
  for (int64_t key0 = 0; key0 <= last_key; key0 += TileK) {
    __syncthreads();  // the previous tile's P and V are read
    for (int64_t i = tid; i < TileK * D; i += kAttentionReferenceThreads) {
      const int64_t j = i / D, d = i % D;
      const bool key = key0 + j < k_len;
      k_tile[j * ld + d] = key ? attention_element(p.k, p, b, kv, p.k_begin[b], key0 + j, d) : 0.0;
      v_tile[j * D + d] = key ? attention_element(p.v, p, b, kv, p.k_begin[b], key0 + j, d) : 0.0;
    }
    __syncthreads();
    // Scores: thread (tx, ty) computes rows ty, ty + TileQ / 2 and keys tx + j * TileK / 4.
    constexpr int kColumns = TileK / 4, kRows = TileQ / 2;
    if (tid < kColumns * kRows) {
      const int tx = tid % kColumns, ty = tid / kColumns;
      double dot[2][4] = {};
      for (int64_t d = 0; d < D; ++d) {
        const double q_a = q_tile[ty * ld + d], q_b = q_tile[(ty + kRows) * ld + d];
        for (int j = 0; j < 4; ++j) {
          const double k_value = k_tile[(tx + j * kColumns) * ld + d];
          dot[0][j] = fma(q_a, k_value, dot[0][j]);
          dot[1][j] = fma(q_b, k_value, dot[1][j]);
        }
      }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t r = ty + i * kRows, c = tx + j * kColumns, key = key0 + c;
          const bool visible = key < k_len && (p.causal == 0 || key <= q0 + r + shift);
          p_tile[r * (TileK + 1) + c] = visible ? p.scale * dot[i][j] : -INFINITY;
        }
    }
    __syncthreads();
    // The online softmax: a warp per row.
    for (int r = warp; r < TileQ; r += warps) {
      const double score = lane < TileK ? p_tile[r * (TileK + 1) + lane] : -INFINITY;
      const double old_max = row_max[r], new_max = fmax(old_max, warp_max(score));
      // A row that has seen no visible key yet keeps m = -inf, P = 0 and O = 0.
      const double probability = new_max == -INFINITY ? 0.0 : exp(score - new_max);
      if (lane < TileK) p_tile[r * (TileK + 1) + lane] = probability;
      const double sum = warp_sum(probability);
      if (lane == 0) {
        const double rescale = new_max == -INFINITY ? 1.0 : exp(old_max - new_max);
        row_rescale[r] = rescale;
        row_sum[r] = row_sum[r] * rescale + sum;
        row_max[r] = new_max;
      }
    }
    __syncthreads();
    // O = O * rescale + P V: warp w owns rows w + 8 i, lane the channels c0 + lane + 32 j.
    for (int64_t c0 = 0; c0 < D; c0 += 128) {
      double acc[TileQ / 8][4];
      for (int i = 0; i < TileQ / 8; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t r = warp + i * 8, c = c0 + lane + 32 * j;
          acc[i][j] = c < D ? o_tile[r * D + c] * row_rescale[r] : 0.0;
        }
      for (int kk = 0; kk < TileK; ++kk) {
        double v_value[4];
        for (int j = 0; j < 4; ++j) {
          const int64_t c = c0 + lane + 32 * j;
          v_value[j] = c < D ? v_tile[kk * D + c] : 0.0;
        }
        for (int i = 0; i < TileQ / 8; ++i) {
          const double probability = p_tile[(warp + i * 8) * (TileK + 1) + kk];
          for (int j = 0; j < 4; ++j) acc[i][j] = fma(probability, v_value[j], acc[i][j]);
        }
      }
      for (int i = 0; i < TileQ / 8; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t r = warp + i * 8, c = c0 + lane + 32 * j;
          if (c < D) o_tile[r * D + c] = acc[i][j];
        }
    }
  }
  __syncthreads();
  // Logical order, as the host's: [B, Hq, Sq, D] or [Hq, total_q, D]; lse [B, Hq, Sq] or [Hq, total_q].
  for (int64_t i = tid; i < rows * D; i += kAttentionReferenceThreads) {
    const int64_t r = i / D, d = i % D, row = q0 + r;
    const int64_t at = p.varlen ? (h * p.total_q + p.q_begin[b] + row) * D : ((b * p.heads_q + h) * q_len + row) * D;
    p.out[at + d] = row_sum[r] > 0 ? o_tile[r * D + d] / row_sum[r] : 0.0;
  }
  if (p.lse != nullptr)
    for (int64_t r = tid; r < rows; r += kAttentionReferenceThreads) {
      const int64_t row = q0 + r;
      const int64_t at = p.varlen ? h * p.lse_rows + p.q_begin[b] + row : (b * p.heads_q + h) * p.lse_rows + row;
      p.lse[at] = row_sum[r] > 0 ? row_max[r] + log(row_sum[r]) : -INFINITY;
    }
}

// One instantiation, with the dynamic shared memory it needs for the head dim.
template <int TileQ, int TileK>
inline void launch_attention_reference(dim3 grid, const DeviceAttentionArgs& args) {
  const size_t shared = attention_reference_shared_bytes<TileQ, TileK>(args.head_dim);
  REPRO_CUDA_CHECK(cudaFuncSetAttribute(attention_reference_kernel<TileQ, TileK>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
  attention_reference_kernel<TileQ, TileK><<<grid, kAttentionReferenceThreads, shared>>>(args);
  REPRO_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------ the cross-check

// How many query rows the host recomputes to vouch for the device reference.
constexpr int64_t kAttentionCrossCheckRows = 48;

struct AttentionSampleRow {
  int64_t b = 0, h = 0, row = 0;
  std::vector<double> out, magnitude;  // the host's row, and its terms' magnitude per channel
  double lse = 0;
};

// The sampled rows: the first and last row of the first and last (batch, head), and rows spread
// over the rest by a fixed hash, so every run checks the same rows of the same problem.
inline std::vector<AttentionSampleRow> attention_sample_rows(const AttentionShape& s) {
  std::vector<AttentionSampleRow> rows;
  std::vector<int64_t> batches;
  for (int64_t b = 0; b < s.batch; ++b)
    if (s.q_len[size_t(b)] > 0) batches.push_back(b);
  if (batches.empty()) return rows;
  const auto add = [&](int64_t b, int64_t h, int64_t row) {
    AttentionSampleRow sample;
    sample.b = b, sample.h = h, sample.row = row;
    rows.push_back(sample);
  };
  add(batches.front(), 0, 0);
  add(batches.back(), s.heads_q - 1, s.q_len[size_t(batches.back())] - 1);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  while (int64_t(rows.size()) < kAttentionCrossCheckRows) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t b = batches[size_t((state >> 33) % batches.size())];
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t h = int64_t((state >> 33) % uint64_t(s.heads_q));
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    add(b, h, int64_t((state >> 33) % uint64_t(s.q_len[size_t(b)])));
  }
  return rows;
}

// The sample's rows on the host, from the inputs as the host holds them: only the sampled rows'
// Q and their heads' K and V are decoded.
inline void compute_attention_sample(const SpecInfo& spec, const AttentionShape& s,
                                     std::vector<AttentionSampleRow>* rows) {
  const AttentionOperands& a = spec.custom.attention;
  const Tensor& q = spec.tensors[size_t(a.q)];
  const Tensor& k = spec.tensors[size_t(a.k)];
  const Tensor& v = spec.tensors[size_t(a.v)];
  const int64_t D = s.head_dim, group = s.heads_q / s.heads_kv;
  const auto decode_rows = [&](const Tensor& t, int64_t first, int64_t count) {
    std::vector<double> values(size_t(count * D));
    for (int64_t i = 0; i < count * D; ++i) values[size_t(i)] = decode(t.dtype, t.host.data(), t.logical_offset(first + i));
    return values;
  };
  parallel_for(int64_t(rows->size()), 1, [&](int64_t first, int64_t last) {
    std::vector<double> scores;
    for (int64_t i = first; i < last; ++i) {
      AttentionSampleRow& r = (*rows)[size_t(i)];
      const int64_t visible = last_visible_key(s, r.b, r.row) + 1, kv = r.h / group;
      const std::vector<double> q_row = decode_rows(q, q_row_offset(s, r.b, r.h, r.row), 1);
      const std::vector<double> keys = decode_rows(k, k_row_offset(s, r.b, kv, 0), std::max<int64_t>(visible, 0));
      const std::vector<double> values = decode_rows(v, k_row_offset(s, r.b, kv, 0), std::max<int64_t>(visible, 0));
      r.out.assign(size_t(D), 0.0), r.magnitude.assign(size_t(D), 0.0);
      r.lse = attention_row(visible, D, s.scale, q_row.data(), keys.data(), values.data(), scores, r.out.data(),
                            r.magnitude.data());
    }
  });
}

// The bound, as for the GEMM: two f64 computations of the same mean in different orders differ
// by a few units of 2^-53 of its terms' magnitude; 1e-10 leaves room and catches any real fault.
inline double judge_attention_sample(const SpecInfo& spec, const AttentionShape& s,
                                     const std::vector<AttentionSampleRow>& rows, const std::vector<double>& out,
                                     const std::vector<double>& lse) {
  double max_relative = 0;
  const auto disagree = [&](const AttentionSampleRow& r, const std::string& what, double device, double host) {
    fatal(kExitCudaError, "fault",
          strprintf("the device attention reference disagrees with the host at %s of batch %lld, head %lld, query "
                    "%lld: device %s, host %s. A reference computed on a faulty GPU cannot judge the kernel: rerun "
                    "with --reference host",
                    what.c_str(), (long long)r.b, (long long)r.h, (long long)r.row, format_value(device).c_str(),
                    format_value(host).c_str()));
  };
  for (const AttentionSampleRow& r : rows) {
    const int64_t at = q_row_offset(s, r.b, r.h, r.row);
    for (int64_t d = 0; d < s.head_dim; ++d) {
      const double device = out[size_t(at + d)], host = r.out[size_t(d)];
      const double difference = std::fabs(device - host) / (r.magnitude[size_t(d)] + std::fabs(host) + 1e-300);
      if (!(difference <= 1e-10)) disagree(r, strprintf("channel %lld", (long long)d), device, host);
      max_relative = std::max(max_relative, difference);
    }
    if (spec.custom.attention.lse < 0) continue;
    const double device = lse[size_t(lse_offset(s, r.b, r.h, r.row))];
    if (std::isinf(r.lse) && device == r.lse) continue;
    const double difference = std::fabs(device - r.lse) / (std::fabs(r.lse) + 1.0);
    if (!(difference <= 1e-10)) disagree(r, "the log-sum-exp", device, r.lse);
    max_relative = std::max(max_relative, difference);
  }
  return max_relative;
}

// ------------------------------------------------------------------------ the reference

// The forward reference on the device, from the inputs as the host holds them (copied up here:
// a probe changes them between calls), cross-checked on the host. Every output of the spec, in
// spec.custom.outputs' order; spec.custom.reference_note gets how it went.
inline std::vector<std::vector<double>> attention_device_values(const SpecInfo& spec) {
  const AttentionOperands& a = spec.custom.attention;
  const AttentionShape s = attention_shape(spec);
  if (s.head_dim > kAttentionDeviceMaxHeadDim)
    usage_error(strprintf("op: attention: the device reference holds a head in shared memory, up to head dim %lld; "
                          "this one is %lld: use --reference host",
                          (long long)kAttentionDeviceMaxHeadDim, (long long)s.head_dim));
  // One CTA per (query tile, head, batch): grid y and z hold at most 65535.
  if (s.heads_q > 65535 || s.batch > 65535)
    usage_error(strprintf("op: attention: the device reference launches a CTA per head and batch, at most 65535 of "
                          "each; this problem has %lld query heads and %lld batches: use --reference host",
                          (long long)s.heads_q, (long long)s.batch));
  const auto total_start = std::chrono::steady_clock::now();
  for (int index : {a.q, a.k, a.v}) {
    const Tensor& t = spec.tensors[size_t(index)];
    REPRO_CUDA_CHECK(cudaMemcpy(t.device, t.host.data(), t.storage_bytes(), cudaMemcpyHostToDevice));
  }
  const Tensor& out_tensor = spec.tensors[size_t(a.out)];
  DeviceAttentionArgs args;
  args.q = attention_operand_view(spec.tensors[size_t(a.q)], s.varlen);
  args.k = attention_operand_view(spec.tensors[size_t(a.k)], s.varlen);
  args.v = attention_operand_view(spec.tensors[size_t(a.v)], s.varlen);
  args.heads_q = s.heads_q, args.group = s.heads_q / s.heads_kv, args.head_dim = s.head_dim;
  args.total_q = s.total_q, args.lse_rows = s.lse_rows, args.varlen = s.varlen, args.causal = s.causal;
  args.scale = s.scale;
  int64_t* lengths[4] = {upload_int64(s.q_begin), upload_int64(s.q_len), upload_int64(s.k_begin), upload_int64(s.k_len)};
  args.q_begin = lengths[0], args.q_len = lengths[1], args.k_begin = lengths[2], args.k_len = lengths[3];
  args.out = allocate_reference_doubles(out_tensor.numel(), "the attention output");
  if (a.lse >= 0) args.lse = allocate_reference_doubles(spec.tensors[size_t(a.lse)].numel(), "the log-sum-exp");

  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  const int64_t longest_q = s.q_len.empty() ? 0 : *std::max_element(s.q_len.begin(), s.q_len.end());
  const bool wide = s.head_dim > 128;
  const int tile_q = wide ? 32 : 64;
  const dim3 grid(unsigned(ceil_div(std::max<int64_t>(longest_q, 1), tile_q)), unsigned(s.heads_q),
                  unsigned(s.batch));
  REPRO_CUDA_CHECK(cudaEventRecord(start));
  if (s.batch > 0 && s.heads_q > 0 && longest_q > 0) {
    if (wide) launch_attention_reference<32, 16>(grid, args);
    else launch_attention_reference<64, 32>(grid, args);
  }
  REPRO_CUDA_CHECK(cudaEventRecord(stop));
  // The host's sample while the GPU computes.
  auto phase_start = std::chrono::steady_clock::now();
  std::vector<AttentionSampleRow> sample = attention_sample_rows(s);
  compute_attention_sample(spec, s, &sample);
  const double host_seconds = seconds_since(phase_start);
  REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
  float kernel_ms = 0;
  REPRO_CUDA_CHECK(cudaEventElapsedTime(&kernel_ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);

  phase_start = std::chrono::steady_clock::now();
  std::vector<double> out(size_t(out_tensor.numel())), lse;
  REPRO_CUDA_CHECK(cudaMemcpy(out.data(), args.out, out.size() * sizeof(double), cudaMemcpyDeviceToHost));
  if (args.lse != nullptr) {
    lse.resize(size_t(spec.tensors[size_t(a.lse)].numel()));
    REPRO_CUDA_CHECK(cudaMemcpy(lse.data(), args.lse, lse.size() * sizeof(double), cudaMemcpyDeviceToHost));
  }
  const double copy_seconds = seconds_since(phase_start);
  give_back_scratch(args.out);
  give_back_scratch(args.lse);
  for (int64_t* lengths_device : lengths) give_back_scratch(lengths_device);
  const double max_relative = judge_attention_sample(spec, s, sample, out, lse);

  cudaFuncAttributes attributes;
  REPRO_CUDA_CHECK(cudaFuncGetAttributes(&attributes, attention_reference_kernel<64, 32>));
  spec.custom.reference_note = strprintf(
      "f64 FMA on CUDA cores (sm_%d code), %.1f ms for %.3g multiply-adds, %.2f s in all (inputs up, outputs back "
      "in %.2f s); host cross-check of %lld rows, recomputed while the kernel ran (%.3f s), max difference %.1e of "
      "the terms' magnitude",
      attributes.binaryVersion, kernel_ms, attention_macs(s), seconds_since(total_start), copy_seconds,
      (long long)sample.size(), host_seconds, max_relative);
  report_set("reference_kernel_ms", JsonWriter().value(double(kernel_ms)).str());
  std::vector<std::vector<double>> want;
  for (int index : spec.custom.outputs) want.push_back(index == a.out ? std::move(out) : std::move(lse));
  return want;
}

}  // namespace repro
