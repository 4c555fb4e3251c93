// ---------------------------------------------------------------------------------------------
// repro harness runtime: the device reference, cross-checked on the host
//
// A reference computed by the same GPU as the kernel under test could share its fault, so a
// sample of outputs of every device reference (the fp64 tensor cores' or the int8 emulation's)
// is recomputed on the host: a device reference that disagrees with the host ends the run
// instead of judging the kernel. The host computes its sample while the GPU computes the
// reference (on the device path, while it also runs the kernel and compares: the sample is judged
// just before the comparison's verdict). Its rows of A and columns of B are copied back on the
// device's stream, ahead of the GEMM, into page-locked memory, so the host waits for no copy
// either: the check costs the device a gather and the host the enqueuing.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_reference.cuh"

#include <deque>
#include <functional>
#include <future>

namespace repro {

// How many outputs the host recomputes to vouch for a device reference.
constexpr int64_t kCrossCheckSamples = 4096;

// Host memory that its owner fills before reading: not zeroed at allocation, so that its pages
// are first touched by the threads that fill it. (A zeroed vector of the sampled rows, 4 MiB at
// K = 8192, costs its one thread a page fault every 4 KiB before any data arrives; the fetch
// took ~0.8 ms a MiB of doubles in run 68.)
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U, typename... Args>
  void construct(U* place, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(place)) U;
    else ::new (static_cast<void*>(place)) U(std::forward<Args>(args)...);
  }
};
using HostValues = std::vector<double, UninitializedAllocator<double>>;

// Vector v of `count` elements starting at element bases[v] and `step` elements apart, as
// stored, into out[v * count ...]: the sampled rows of A (step: A's K stride) or columns of B;
// with count 1, single elements (fetch_sampled_device_values).
template <typename Word>
__global__ void gather_vectors_kernel(const Word* storage, const int64_t* bases, int64_t vectors, int64_t step,
                                      int64_t count, Word* out) {
  const int64_t total = vectors * count;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = storage[bases[i / count] + (i % count) * step];
}

// Elements as stored (each dtype_bytes(dtype) wide), not yet decoded: copied from the device
// into a page-locked block while the host went on (fetch_vectors: wait() before reading), or
// plain host memory (host_stored_values).
struct StoredValues {
  DType dtype = DType::f64;
  int64_t elements = 0;
  std::shared_ptr<unsigned char> block;  // holds the elements from byte `offset` on
  size_t offset = 0;
  std::shared_ptr<CUevent_st> fetched;   // marks the copy into `block` done; null when there is none

  int64_t count() const { return elements; }
  unsigned char* data() const { return block.get() + offset; }
  // Returns once the elements are there to read. Once they are, it calls CUDA no more: a
  // cross-check judged while the next check of a queue runs (deferred_check.cuh) must not see
  // an error that check's kernel left in the context.
  void wait() {
    if (fetched == nullptr) return;
    REPRO_CUDA_CHECK(cudaEventSynchronize(fetched.get()));
    fetched.reset();
  }
};

// `count` elements of plain host memory, for the host to fill.
inline StoredValues host_stored_values(DType dtype, int64_t count) {
  StoredValues stored;
  stored.dtype = dtype;
  stored.elements = count;
  stored.block.reset(new unsigned char[std::max<size_t>(size_t(count) * dtype_bytes(dtype), 1)],
                     std::default_delete<unsigned char[]>());
  return stored;
}

// An event for copies enqueued on the default stream, recorded after them (record_copies); the
// blocks they fill wait for it before they go back.
inline std::shared_ptr<CUevent_st> copies_event() {
  cudaEvent_t event = nullptr;
  REPRO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return std::shared_ptr<CUevent_st>(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
}

inline void record_copies(const std::shared_ptr<CUevent_st>& copies) {
  REPRO_CUDA_CHECK(cudaEventRecord(copies.get(), 0));
}

// The vectors' elements as stored, enqueued on the default stream and not waited for: gathered
// on the device at the element's width (a quarter of the bytes of doubles for bf16) and copied
// into a page-locked block. The caller records `copies` once every fetch of a sample is
// enqueued. On the default stream the fetch runs before the reference GEMM that the caller
// launches next, so the GEMM waits for nothing but the device's own copies and the host waits
// for nothing (a pageable copy back held the host ~0.2 ms a check at 1024^3, run 98).
inline StoredValues fetch_vectors(DType dtype, const void* device, const std::vector<int64_t>& bases, int64_t step,
                                  int64_t count, const std::shared_ptr<CUevent_st>& copies) {
  const int64_t total = int64_t(bases.size()) * count;
  const size_t width = dtype_bytes(dtype), base_bytes = bases.size() * sizeof(int64_t);
  StoredValues stored;
  stored.dtype = dtype;
  stored.elements = total;
  stored.fetched = copies;
  // One block: the bases going up (a pageable upload waits for its copy too), then the elements
  // coming back. It goes back to PinnedBlocks only after the copies: a sample dropped on an
  // error path must not hand out a block that a copy still reads or writes.
  stored.offset = (base_bytes + 15) / 16 * 16;
  const size_t block_bytes = stored.offset + size_t(total) * width;
  unsigned char* block = PinnedBlocks::instance().take(block_bytes);
  if (block == nullptr)
    fatal(kExitCudaError, "fault",
          strprintf("the host cross-check of the device reference needs %.2f GiB of host memory for its sampled rows "
                    "and columns, and the host has not that much: rerun with --reference host",
                    double(block_bytes) / (1 << 30)));
  stored.block = std::shared_ptr<unsigned char>(block, [copies](unsigned char* data) {
    cudaEventSynchronize(copies.get());
    PinnedBlocks::instance().give_back(data);
  });
  if (total == 0) return stored;
  std::memcpy(stored.block.get(), bases.data(), base_bytes);
  int64_t* device_bases = take_scratch<int64_t>(base_bytes);
  REPRO_CUDA_CHECK(cudaMemcpyAsync(device_bases, stored.block.get(), base_bytes, cudaMemcpyHostToDevice, 0));
  void* gathered = take_scratch(size_t(total) * width);
  with_element_word(dtype, [&](auto word) {
    using Word = decltype(word);
    gather_vectors_kernel<Word><<<pipeline_blocks(total), kPipelineThreads>>>(
        static_cast<const Word*>(device), device_bases, int64_t(bases.size()), step, count, static_cast<Word*>(gathered));
  });
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cudaMemcpyAsync(stored.data(), gathered, size_t(total) * width, cudaMemcpyDeviceToHost, 0));
  give_back_scratch(device_bases);
  give_back_scratch(gathered);
  return stored;
}

// Elements [begin, end) of `bytes` as doubles into values[begin, end).
inline void decode_range(DType dtype, const unsigned char* bytes, int64_t begin, int64_t end, double* values) {
  for (int64_t i = begin; i < end; ++i) values[i] = decode(dtype, bytes, i);
}

// Their values, decoded on every host core once the copy is there.
inline HostValues decode_stored(StoredValues& stored) {
  stored.wait();
  HostValues values(static_cast<size_t>(stored.count()));
  parallel_for(stored.count(), 1 << 13, [&](int64_t begin, int64_t end) {
    decode_range(stored.dtype, stored.data(), begin, end, values.data());
  });
  return values;
}

// A grid of outputs (up to 64 rows x 64 columns, over up to 4 batches) and what the host makes
// of them. Only what they need comes from the device: their rows of A, columns of B, C and bias
// values, so the check works the same whether the inputs were made on the device or uploaded.
struct CrossCheckSample {
  int64_t batches = 0, rows = 0, cols = 0;
  std::vector<int64_t> batch_of, row_of, col_of;  // the sampled batches, rows and columns
  StoredValues stored_a, stored_b;                // as fetched: [batch][row][K], [batch][column][K]
  StoredValues stored_c, stored_bias;             // as fetched: per sample; empty when the GEMM has none
  HostValues a, b;                                // their values (scaled), once decoded
  std::vector<double> c_values, bias_values;      // per sample, once decoded
  std::vector<double> host_values, magnitudes;    // per sample: the host's value, sum_k |a b|
  double decode_seconds = 0, host_seconds = 0;    // the host's time: decoding, and in all

  int64_t count() const { return batches * rows * cols; }
  // Returns once every fetched operand is on the host; from then on the sample needs no CUDA.
  void wait_for_copies() {
    for (StoredValues* stored : {&stored_a, &stored_b, &stored_c, &stored_bias}) stored->wait();
  }
  int64_t batch(int64_t sample) const { return batch_of[size_t(sample / (rows * cols))]; }
  int64_t row(int64_t sample) const { return row_of[size_t(sample / (rows * cols) * rows + sample / cols % rows)]; }
  int64_t col(int64_t sample) const { return col_of[size_t(sample / (rows * cols) * cols + sample % cols)]; }
  int64_t output_offset(const GemmProblem& p, int64_t sample) const {
    return (batch(sample) * p.M + row(sample)) * p.N + col(sample);
  }
};

// Chooses the sample and enqueues the fetch of its operands on the default stream (before the
// reference GEMM starts, which then runs after it), waiting for nothing: the host decodes them
// once they are there (decode_cross_check_sample), while the GEMM runs. Decoded here, 2^20
// sampled elements took 3 ms of a fetch of 6 (run 77: the first touch of 8 MiB of doubles, and
// a decode then 8 ns an element).
// `samples`: how many outputs at most (a grouped GEMM shares kCrossCheckSamples among its groups).
inline CrossCheckSample fetch_cross_check_sample(const GemmProblem& p, int64_t samples = kCrossCheckSamples) {
  CrossCheckSample s;
  s.batches = std::min<int64_t>(p.L, 4);
  s.cols = std::min<int64_t>(p.N, std::max<int64_t>(8, std::min<int64_t>(64, samples / 64)));
  s.rows = std::min<int64_t>(p.M, std::max<int64_t>(1, samples / s.cols / std::max<int64_t>(s.batches, 1)));
  std::vector<int64_t> a_bases, b_bases, c_offsets, bias_offsets;
  for (int64_t g = 0; g < s.batches; ++g) {
    const int64_t l = s.batches == 1 ? 0 : g * (p.L - 1) / (s.batches - 1);
    s.batch_of.push_back(l);
    for (int64_t r = 0; r < s.rows; ++r) {
      s.row_of.push_back(spread_index(r, p.M, 0xA0 + uint64_t(g)));
      a_bases.push_back(matrix_offset(*p.a, l, s.row_of.back(), 0));
    }
    for (int64_t c = 0; c < s.cols; ++c) {
      s.col_of.push_back(spread_index(c, p.N, 0xB0 + uint64_t(g)));
      b_bases.push_back(matrix_offset(*p.b, l, 0, s.col_of.back()));
    }
  }
  for (int64_t sample = 0; sample < s.count(); ++sample) {
    if (reads_c(p)) c_offsets.push_back(matrix_offset(*p.c, s.batch(sample), s.row(sample), s.col(sample)));
    if (p.bias != nullptr) bias_offsets.push_back(s.col(sample) * p.bias->strides[0]);
  }
  // A row of A steps along K by A's column stride; a column of B by B's row stride.
  const std::shared_ptr<CUevent_st> copies = copies_event();
  s.stored_a = fetch_vectors(p.a->dtype, p.a->device, a_bases, matrix_offset(*p.a, 0, 0, 1), p.K, copies);
  s.stored_b = fetch_vectors(p.b->dtype, p.b->device, b_bases, matrix_offset(*p.b, 0, 1, 0), p.K, copies);
  if (reads_c(p)) s.stored_c = fetch_vectors(p.c->dtype, p.c->device, c_offsets, 0, 1, copies);
  if (p.bias != nullptr) s.stored_bias = fetch_vectors(p.bias->dtype, p.bias->device, bias_offsets, 0, 1, copies);
  record_copies(copies);
  return s;
}

// The sampled rows and columns decoded and, for a scaled GEMM, scaled; C's and the bias's
// sampled values decoded.
inline void decode_cross_check_sample(const GemmProblem& p, CrossCheckSample* s) {
  StoredValues &a = s->stored_a, &b = s->stored_b;
  HostWorkers::instance().alert();  // the threads wake while the copy comes
  s->wait_for_copies();
  s->a = HostValues(size_t(a.count()));
  s->b = HostValues(size_t(b.count()));
  // A's rows and B's columns in one pass over the host's cores: every pass wakes the parked
  // threads again.
  parallel_for(a.count() + b.count(), 1 << 13, [&](int64_t begin, int64_t end) {
    if (begin < a.count()) decode_range(a.dtype, a.data(), begin, std::min(end, a.count()), s->a.data());
    if (end > a.count())
      decode_range(b.dtype, b.data(), std::max(begin, a.count()) - a.count(), end - a.count(), s->b.data());
  });
  const auto decode_small = [](StoredValues& stored, std::vector<double>* values) {
    if (stored.block == nullptr) return;
    values->resize(size_t(stored.count()));
    decode_range(stored.dtype, stored.data(), 0, stored.count(), values->data());
  };
  decode_small(s->stored_c, &s->c_values);
  decode_small(s->stored_bias, &s->bias_values);
  // A scaled GEMM: the host scales the fetched rows and columns itself, from its own copies of
  // the scales (they are made on the host).
  // One scale per K block, decoded once: a million scale_at calls would take as long as the
  // whole fetch.
  // `per_batch`: the lines of one sampled batch (s->rows, s->cols); [L, ...] scales are its own.
  const auto scale_vectors = [&](const ScaleOperand& scale, const std::vector<int64_t>& lines, int64_t per_batch,
                                 HostValues& v) {
    if (scale.data == nullptr) return;
    for (size_t line = 0; line < lines.size(); ++line)
      for (int64_t k0 = 0; k0 < p.K; k0 += scale.block_k) {
        const ScaleOperand batch_scale = scale_of_batch(scale, s->batch_of[line / size_t(per_batch)]);
        const double factor = scale_of_block(batch_scale, lines[line] / scale.block_i, k0 / scale.block_k);
        for (int64_t k = k0; k < std::min(p.K, k0 + scale.block_k); ++k) v[line * size_t(p.K) + size_t(k)] *= factor;
      }
  };
  scale_vectors(problem_scales(p, true, false), s->row_of, s->rows, s->a);
  scale_vectors(problem_scales(p, false, false), s->col_of, s->cols, s->b);
}

// The host's value of every sampled output, on every core (K multiply-adds each), its rows and
// columns decoded first. The sample is a grid, so it is computed as a small GEMM in tiles of 4
// sampled rows by 4 sampled columns: each k loads 4 values of A and 4 of B for 16 products,
// where one sample at a time loads 2 for 1, and the 16 sums are 16 independent chains of adds
// (one sum per sample is a chain of K dependent adds, K add latencies long). At 64 x 64 samples
// and K = 1024 on one core: 3.0 ms one sample at a time with four partial sums, 1.7 ms in tiles.
constexpr int kSampleTile = 4;
inline void compute_cross_check_sample(const GemmProblem& p, CrossCheckSample* s) {
  const auto start = std::chrono::steady_clock::now();
  decode_cross_check_sample(p, s);
  s->decode_seconds = seconds_since(start);
  s->host_values.assign(size_t(s->count()), 0.0);
  s->magnitudes.assign(size_t(s->count()), 0.0);
  const int64_t row_tiles = (s->rows + kSampleTile - 1) / kSampleTile;
  const int64_t col_tiles = (s->cols + kSampleTile - 1) / kSampleTile;
  parallel_for(s->batches * row_tiles * col_tiles, 4, [&](int64_t begin, int64_t end) {
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t g = tile / (row_tiles * col_tiles);
      const int64_t r0 = tile / col_tiles % row_tiles * kSampleTile, c0 = tile % col_tiles * kSampleTile;
      // A tile past the grid's last row or column reads that row or column again (so the
      // loops stay fixed at 4 x 4) and writes only what lies inside the grid.
      const double* a_rows[kSampleTile];
      const double* b_cols[kSampleTile];
      for (int i = 0; i < kSampleTile; ++i) {
        a_rows[i] = s->a.data() + (g * s->rows + std::min<int64_t>(r0 + i, s->rows - 1)) * p.K;
        b_cols[i] = s->b.data() + (g * s->cols + std::min<int64_t>(c0 + i, s->cols - 1)) * p.K;
      }
      double sums[kSampleTile][kSampleTile] = {}, magnitudes[kSampleTile][kSampleTile] = {};
      for (int64_t k = 0; k < p.K; ++k) {
        double b_k[kSampleTile];
        for (int j = 0; j < kSampleTile; ++j) b_k[j] = b_cols[j][k];
        for (int i = 0; i < kSampleTile; ++i) {
          const double a_k = a_rows[i][k];
          for (int j = 0; j < kSampleTile; ++j) {
            const double term = a_k * b_k[j];
            sums[i][j] += term;
            magnitudes[i][j] += std::fabs(term);
          }
        }
      }
      for (int i = 0; i < kSampleTile && r0 + i < s->rows; ++i)
        for (int j = 0; j < kSampleTile && c0 + j < s->cols; ++j) {
          const size_t sample = size_t((g * s->rows + r0 + i) * s->cols + c0 + j);
          s->host_values[sample] = epilogue_value(p, sums[i][j], s->c_values.empty() ? 0.0 : s->c_values[sample],
                                                  s->bias_values.empty() ? 0.0 : s->bias_values[sample]);
          s->magnitudes[sample] = magnitudes[i][j];
        }
    }
  });
  s->host_seconds = seconds_since(start);
}

struct CrossCheck {
  int64_t samples = 0;
  double max_relative = 0;  // max |device - host| / sum_k |a b|, over the samples
};

// REPRO_TEST_CORRUPT_REFERENCE=N, a testing aid (docs/cli.md): the N-th check of this process
// (1 for a check alone) sees its device reference's first sampled value damaged, as a faulty
// GPU would leave it, so that the cross-check's refusal can be shown on a healthy one.
inline bool reference_damage_requested() {
  static const long long check = [] {
    const char* value = std::getenv("REPRO_TEST_CORRUPT_REFERENCE");
    return value == nullptr ? 0LL : std::atoll(value);
  }();
  return check > 0 && check == (g_queue_check >= 0 ? g_queue_check + 1 : 1);
}

// The device reference's values at the sample's outputs, enqueued on the default stream right
// behind the reference GEMM that writes them (fetch_sampled_device_values) and read once there
// (read_sampled_device_values). Gathered after the comparison instead, they cost a check a
// gather, a copy and a wait on the host's critical path (about 0.1 ms at 1024^3, run 107's parts);
// behind the GEMM the copy is done long before the judgement.
inline StoredValues fetch_sampled_device_values(const GemmProblem& p, const CrossCheckSample& s,
                                                const double* want_device) {
  std::vector<int64_t> want_offsets;
  for (int64_t sample = 0; sample < s.count(); ++sample) want_offsets.push_back(s.output_offset(p, sample));
  const std::shared_ptr<CUevent_st> copies = copies_event();
  StoredValues stored = fetch_vectors(DType::f64, want_device, want_offsets, 0, 1, copies);
  record_copies(copies);
  return stored;
}

inline std::vector<double> read_sampled_device_values(StoredValues& stored) {
  const HostValues decoded = decode_stored(stored);
  std::vector<double> values(decoded.begin(), decoded.end());
  if (!values.empty() && reference_damage_requested()) values[0] += 1.0 + std::fabs(values[0]);
  return values;
}

// Judges the device reference's sampled values (read_sampled_device_values) against the host's, on
// the host alone. The bound: fp64 sums of K terms in two different orders differ by at most
// ~K * 2^-53 of the sum of |terms|; 1e-10 of it leaves room and still catches any real fault (a
// wrong element is off by a sizeable fraction of its terms). A disagreement is said in
// `disagreement` (empty when there is none), with what it means.
inline CrossCheck judge_sampled_values(const GemmProblem& p, const CrossCheckSample& s,
                                       const std::vector<double>& want, std::string* disagreement) {
  CrossCheck check;
  disagreement->clear();
  for (int64_t sample = 0; sample < s.count(); ++sample) {
    const double host = s.host_values[size_t(sample)], device = want[size_t(sample)];
    // The same value, or NaN on both sides: agreement (inf - inf would read as a NaN distance).
    const bool same = device == host || (std::isnan(device) && std::isnan(host));
    const double scale = std::fabs(p.alpha) * s.magnitudes[size_t(sample)] + std::fabs(host) + 1e-300;
    const double difference = same ? 0.0 : std::fabs(device - host) / scale;
    if (!(difference <= 1e-10)) {
      *disagreement = strprintf(
          "the device reference disagrees with the host at output [%lld, %lld, %lld]: device %s, host %s. A "
          "reference computed on a faulty GPU cannot judge the kernel: rerun with --reference host",
          (long long)s.batch(sample), (long long)s.row(sample), (long long)s.col(sample),
          format_value(device).c_str(), format_value(host).c_str());
      return check;
    }
    check.max_relative = std::max(check.max_relative, difference);
    ++check.samples;
  }
  return check;
}

// Judges the device reference on the sample: exit 4 when they disagree.
inline CrossCheck judge_cross_check_sample(const GemmProblem& p, const CrossCheckSample& s, StoredValues& device_values) {
  std::string disagreement;
  const CrossCheck check = judge_sampled_values(p, s, read_sampled_device_values(device_values), &disagreement);
  if (!disagreement.empty()) fatal(kExitCudaError, "fault", disagreement);
  return check;
}

// The thread the host's samples of a process's checks run on, made once and parked between
// them (never destroyed: exit leaves it parked): a thread made for each check cost the check
// ~0.04 ms at 1024^3 (run 109's reference_start_ms), a tenth of its reference. It runs one
// sample at a time, in the order they come: a queued check's sample waits for the one before
// it, which its check settles first anyway (deferred_check.cuh).
class SampleThread {
 public:
  static SampleThread& instance() {
    static SampleThread* thread = new SampleThread();
    return *thread;
  }

  // Runs `job` on the thread, after the jobs before it; the future is ready once it has run.
  std::future<void> post(std::function<void()> job) {
    std::packaged_task<void()> task(std::move(job));
    std::future<void> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { serve(); });
      jobs_.push_back(std::move(task));
    }
    wake_.notify_one();
    return done;
  }

 private:
  SampleThread() = default;
  void serve() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !jobs_.empty(); });
        task = std::move(jobs_.front());
        jobs_.pop_front();
      }
      task();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  std::thread thread_;
};

// The host's half of a cross-check left running on the sample thread while the device works
// on (the reference GEMM, then the kernel's launches and the comparison): at 1024^3 the GEMM
// alone took 0.4 ms and the host's sample about 2 ms more, most of the reference's time. What
// the host computes is unchanged, and finish_cross_check judges the reference before anything
// is concluded from it.
// It may outlive the check's tensors (deferred_check.cuh: judged while the next check of a queue
// runs), so what its host half reads of them, the scales' host copies, is its own; the
// operands' pointers are not followed after the fetch.
struct PendingCrossCheck {
  GemmProblem problem;
  CrossCheckSample sample;
  std::future<void> done;  // ready once the host's sample is computed (SampleThread)
  std::promise<void> copied;  // set once the sample's operands are on the host (no CUDA after)
  StoredValues device_values;  // the reference at the sample, fetched behind its GEMM
  Tensor scale_a, scale_b;    // copies of the problem's scale tensors, which `problem` points to
  ~PendingCrossCheck() {
    if (done.valid()) done.wait();
  }

  void take(const GemmProblem& p) {
    problem = p;
    if (p.scale_a != nullptr) scale_a = *p.scale_a, problem.scale_a = &scale_a;
    if (p.scale_b != nullptr) scale_b = *p.scale_b, problem.scale_b = &scale_b;
  }
};

// A judged cross-check's buffers (its sample's rows and columns, their page-locked blocks, its
// copies of the scales) go back on the sample thread, after the samples queued there: freed on
// the check's thread they held up its comparison or, in a queue, the next check's reference,
// whose host work is its critical path at 1024^3.
inline void release_on_sample_thread(std::shared_ptr<PendingCrossCheck> judged) {
  if (judged == nullptr) return;
  // Freed inside the job, which runs there (the job object itself may end on either thread).
  auto owner = std::make_shared<std::shared_ptr<PendingCrossCheck>>(std::move(judged));
  SampleThread::instance().post([owner] { owner->reset(); });
}

// A device reference and how it was made.
struct DeviceReference {
  double* values = nullptr;  // [L][M][N] doubles on the device, scratch: the caller gives it back
  double kernel_ms = 0;      // analysis, packing or slicing, and GEMM kernels, device events
  double fetch_seconds = 0;  // enqueuing the fetch of the sample's rows and columns
  double check_seconds = 0;  // the host's sample and judging it, beyond the device's time
  double host_seconds = 0;   // the host's sample alone, hidden or not (of which decoding: decode_seconds)
  double decode_seconds = 0;
  double settle_seconds = 0;  // in a queue: settling the check held before this one (its judgement, its text)
  double start_seconds = 0;   // in a queue: taking the operands and starting the host's sample
  double launch_seconds = 0;  // enqueuing the GEMM (and its packing) and the fetch of its sampled values,
  double pack_seconds = 0;    // of which the packing
  double values_seconds = 0;  // and the fetch
  double wait_seconds = 0;    // waiting for the GEMM once the host's own work is done
  std::string engine;        // what computed it (ReferenceGemmLaunch::engine)
  bool emulated = false;     // int8 tensor cores
  std::string fallback;      // why an emulated reference that was asked for is the fp64 one
  CrossCheck check;
  std::shared_ptr<PendingCrossCheck> pending;  // a cross-check not judged yet (finish_cross_check)

  // One launch's description into the reference's (a grouped GEMM's groups may differ).
  void describe(const ReferenceGemmLaunch& launch) {
    if (engine.empty()) engine = launch.engine;
    else if (engine.find(launch.engine) == std::string::npos) engine += "; " + launch.engine;
    emulated = emulated || launch.emulated;
    if (fallback.empty()) fallback = launch.fallback;
  }
};

// Waits for the host's sample of a pending cross-check and judges the reference on it (exit 4
// when they disagree); nothing to do when there is none.
inline void finish_cross_check(DeviceReference* reference) {
  if (reference->pending == nullptr) return;
  const auto phase_start = std::chrono::steady_clock::now();
  reference->pending->done.wait();
  reference->host_seconds = reference->pending->sample.host_seconds;
  reference->decode_seconds = reference->pending->sample.decode_seconds;
  reference->check = judge_cross_check_sample(reference->pending->problem, reference->pending->sample,
                                              reference->pending->device_values);
  reference->check_seconds = seconds_since(phase_start);
  release_on_sample_thread(std::move(reference->pending));
}

// The reference on the device, cross-checked on the host: fetch the sample, start the GEMM,
// compute the sample on the host meanwhile, then judge the GEMM's values at the sample. With
// `later`, the host's sample goes on while the caller uses the device, and the caller judges it
// (finish_cross_check) before it concludes anything from the reference.
inline DeviceReference compute_device_reference(const GemmProblem& p, ReferenceMethod method, bool later = false) {
  DeviceReference reference;
  auto phase_start = std::chrono::steady_clock::now();
  CrossCheckSample sample = fetch_cross_check_sample(p);
  reference.fetch_seconds = seconds_since(phase_start);
  phase_start = std::chrono::steady_clock::now();
  ReferenceGemmLaunch launch = launch_reference_gemm(p, method);
  reference.describe(launch);
  reference.values = launch.out;
  reference.pack_seconds = launch.pack_seconds;
  const auto values_start = std::chrono::steady_clock::now();
  StoredValues device_values = fetch_sampled_device_values(p, sample, launch.out);
  reference.values_seconds = seconds_since(values_start);
  reference.launch_seconds = seconds_since(phase_start);
  if (later) {
    reference.pending = std::make_shared<PendingCrossCheck>();
    PendingCrossCheck* pending = reference.pending.get();
    phase_start = std::chrono::steady_clock::now();
    pending->take(p);
    pending->sample = std::move(sample);
    pending->device_values = std::move(device_values);
    pending->done = SampleThread::instance().post([pending] {
      HostWorkers::instance().alert();  // the threads wake while the copy comes
      pending->sample.wait_for_copies();
      pending->copied.set_value();
      compute_cross_check_sample(pending->problem, &pending->sample);
    });
    reference.start_seconds = seconds_since(phase_start);
    phase_start = std::chrono::steady_clock::now();
    host_idle();
    reference.settle_seconds = seconds_since(phase_start);
    phase_start = std::chrono::steady_clock::now();
    reference.kernel_ms = finish_reference_gemm(&launch);
    reference.wait_seconds = seconds_since(phase_start);
    return reference;
  }
  host_idle();
  compute_cross_check_sample(p, &sample);
  reference.host_seconds = sample.host_seconds;
  reference.decode_seconds = sample.decode_seconds;
  reference.kernel_ms = finish_reference_gemm(&launch);
  // The host's share that the kernels did not hide, then the judging.
  const double not_hidden = std::max(0.0, sample.host_seconds - reference.kernel_ms / 1e3);
  phase_start = std::chrono::steady_clock::now();
  reference.check = judge_cross_check_sample(p, sample, device_values);
  reference.check_seconds = not_hidden + seconds_since(phase_start);
  return reference;
}

}  // namespace repro
