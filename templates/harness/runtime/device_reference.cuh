// ---------------------------------------------------------------------------------------------
// repro harness runtime: the fp64 reference GEMM on the device (reference.provider: device)
//
// The same formula as the host reference (reference.cuh), computed by a register-blocked fp64
// kernel from the operands already on the device, in their own dtypes and strides. Host fp64 at
// 8192^3 takes tens of seconds; this takes a fraction of one. Products and sums are fp64 with a
// different summation order than the host's, so the two agree to ~1e-15 relative, far below any
// kernel's error.
//
// A reference computed by the same GPU as the kernel under test could share its fault, so a
// sample of outputs is recomputed on the host and compared (cross_check_device_reference): a device
// reference that disagrees with the host ends the run instead of judging the kernel.
// ---------------------------------------------------------------------------------------------
#include <cuda_fp8.h>

namespace repro {

// One matrix operand as the device kernel reads it: element (l, row, col) is at
// l * batch_stride + row * row_stride + col * col_stride (batch_stride 0: shared by all batches).
struct DeviceMatrix {
  const unsigned char* data = nullptr;
  DType dtype = DType::f64;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};

inline DeviceMatrix device_matrix(const Tensor& t) {
  DeviceMatrix d;
  d.data = static_cast<const unsigned char*>(t.device);
  d.dtype = t.dtype;
  d.batch_stride = t.rank == 3 ? t.strides[0] : 0;
  d.row_stride = t.rank >= 2 ? t.strides[t.rank - 2] : 0;
  d.col_stride = t.strides[t.rank - 1];
  return d;
}

// Exact conversions of every storage type to double (f16, bf16 and fp8 widen exactly).
__device__ inline double device_decode(DType dtype, const unsigned char* base, int64_t element) {
  switch (dtype) {
    case DType::f64: return reinterpret_cast<const double*>(base)[element];
    case DType::f32:
    case DType::tf32: return reinterpret_cast<const float*>(base)[element];
    case DType::f16: return __half2float(reinterpret_cast<const __half*>(base)[element]);
    case DType::bf16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(base)[element]);
    case DType::e4m3: return __half2float(__half(__nv_cvt_fp8_to_halfraw(base[element], __NV_E4M3)));
    case DType::e5m2: return __half2float(__half(__nv_cvt_fp8_to_halfraw(base[element], __NV_E5M2)));
    case DType::i8: return double(reinterpret_cast<const int8_t*>(base)[element]);
    case DType::u8: return double(base[element]);
    case DType::i32: return double(reinterpret_cast<const int32_t*>(base)[element]);
    case DType::u32: return double(reinterpret_cast<const uint32_t*>(base)[element]);
    case DType::i64: return double(reinterpret_cast<const int64_t*>(base)[element]);
    case DType::boolean: return base[element] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

__device__ inline double device_element(const DeviceMatrix& m, int64_t l, int64_t row, int64_t col) {
  return device_decode(m.dtype, m.data, l * m.batch_stride + row * m.row_stride + col * m.col_stride);
}

// 64 x 64 outputs per block of 16 x 16 threads, 4 x 4 per thread (rows ty + 16i, columns
// tx + 16j, so a warp's shared-memory reads are broadcasts or consecutive), K in steps of 16.
constexpr int kRefTile = 64, kRefStep = 16, kRefThreads = 16;

struct DeviceGemmArgs {
  DeviceMatrix a, b, c, bias;  // c.data / bias.data null when unused
  double* out;                 // [L][M][N] doubles
  double alpha, beta;
  int64_t M, N, K;
};

__global__ void __launch_bounds__(kRefThreads* kRefThreads) reference_gemm_kernel(DeviceGemmArgs p) {
  __shared__ double As[kRefStep][kRefTile];
  __shared__ double Bs[kRefStep][kRefTile];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kRefThreads + tx;
  const int64_t l = blockIdx.z, m0 = int64_t(blockIdx.y) * kRefTile, n0 = int64_t(blockIdx.x) * kRefTile;
  double acc[4][4] = {};
  for (int64_t k0 = 0; k0 < p.K; k0 += kRefStep) {
    // 16 x 64 elements of each operand, four per thread, decoded once into shared memory.
    for (int e = t; e < kRefStep * kRefTile; e += kRefThreads * kRefThreads) {
      const int kk = e / kRefTile, i = e % kRefTile;
      const int64_t k = k0 + kk;
      As[kk][i] = (m0 + i < p.M && k < p.K) ? device_element(p.a, l, m0 + i, k) : 0.0;
      Bs[kk][i] = (n0 + i < p.N && k < p.K) ? device_element(p.b, l, k, n0 + i) : 0.0;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kRefStep; ++kk) {
      double av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + kRefThreads * i], bv[i] = Bs[kk][tx + kRefThreads * i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t m = m0 + ty + kRefThreads * i, n = n0 + tx + kRefThreads * j;
      if (m >= p.M || n >= p.N) continue;
      double value = p.alpha * acc[i][j];
      if (p.c.data != nullptr) value += p.beta * device_element(p.c, l, m, n);
      if (p.bias.data != nullptr) value += device_decode(p.bias.dtype, p.bias.data, n * p.bias.col_stride);
      p.out[(l * p.M + m) * p.N + n] = value;
    }
}

// Computes the reference into a new device buffer *out ([L][M][N] doubles; the caller frees it)
// from the operands' device copies, which must be there already. Returns the kernel's time in
// milliseconds.
inline double reference_gemm_device(const GemmProblem& p, double** out) {
  DeviceGemmArgs args;
  args.a = device_matrix(*p.a);
  args.b = device_matrix(*p.b);
  if (reads_c(p)) args.c = device_matrix(*p.c);
  if (p.bias != nullptr) args.bias = device_matrix(*p.bias);
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.M = p.M, args.N = p.N, args.K = p.K;
  const size_t count = size_t(p.L * p.M * p.N);
  REPRO_CUDA_CHECK(cudaMalloc(&args.out, std::max<size_t>(count, 1) * sizeof(double)));
  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  const dim3 grid(unsigned((p.N + kRefTile - 1) / kRefTile), unsigned((p.M + kRefTile - 1) / kRefTile), unsigned(p.L));
  REPRO_CUDA_CHECK(cudaEventRecord(start));
  reference_gemm_kernel<<<grid, dim3(kRefThreads, kRefThreads)>>>(args);
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cudaEventRecord(stop));
  REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *out = args.out;
  return ms;
}

// How many outputs the host recomputes to vouch for a device reference.
constexpr int64_t kCrossCheckSamples = 4096;

struct CrossCheck {
  int64_t samples = 0;
  double max_relative = 0;  // max |device - host| / sum_k |a b|, over the samples
};

// Recomputes a grid of outputs on the host (up to 64 rows x 64 columns, over up to 4 batches) and
// compares them with the device reference. Only what they need comes back from the device: their
// rows of A, columns of B, C and bias values and reference values, so the check works the same
// whether the inputs were made on the device or uploaded. The bound: fp64 sums of K terms in two
// different orders differ by at most ~K * 2^-53 of the sum of |terms|; 1e-10 of it leaves room
// and still catches any real fault (a wrong element is off by a sizeable fraction of its terms).
inline CrossCheck cross_check_device_reference(const GemmProblem& p, const double* want_device) {
  const int64_t batches = std::min<int64_t>(p.L, 4);
  const int64_t rows = std::min<int64_t>(p.M, kCrossCheckSamples / 64 / batches);
  const int64_t cols = std::min<int64_t>(p.N, 64);
  // (static_cast, not size_t(batches): that would declare functions)
  std::vector<int64_t> batch_of(static_cast<size_t>(batches)), row_of(static_cast<size_t>(batches * rows)),
      col_of(static_cast<size_t>(batches * cols));
  std::vector<int64_t> a_offsets, b_offsets, want_offsets, c_offsets, bias_offsets;
  for (int64_t g = 0; g < batches; ++g) {
    batch_of[size_t(g)] = batches == 1 ? 0 : g * (p.L - 1) / (batches - 1);
    const int64_t l = batch_of[size_t(g)];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t m = row_of[size_t(g * rows + r)] = spread_index(r, p.M, 0xA0 + uint64_t(g));
      for (int64_t k = 0; k < p.K; ++k) a_offsets.push_back(matrix_offset(*p.a, l, m, k));
    }
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t n = col_of[size_t(g * cols + c)] = spread_index(c, p.N, 0xB0 + uint64_t(g));
      for (int64_t k = 0; k < p.K; ++k) b_offsets.push_back(matrix_offset(*p.b, l, k, n));
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t m = row_of[size_t(g * rows + r)], n = col_of[size_t(g * cols + c)];
        want_offsets.push_back((l * p.M + m) * p.N + n);
        if (reads_c(p)) c_offsets.push_back(matrix_offset(*p.c, l, m, n));
        if (p.bias != nullptr) bias_offsets.push_back(n * p.bias->strides[0]);
      }
  }
  const auto fetch = [](DType dtype, const void* device, const std::vector<int64_t>& offsets) {
    std::vector<double> values(offsets.size());
    if (offsets.empty()) return values;
    const std::vector<uint64_t> bits = gather_bits(dtype, device, offsets);
    for (size_t i = 0; i < bits.size(); ++i) values[i] = decode_bits(dtype, bits[i]);
    return values;
  };
  const std::vector<double> a = fetch(p.a->dtype, p.a->device, a_offsets);
  const std::vector<double> b = fetch(p.b->dtype, p.b->device, b_offsets);
  const std::vector<double> want = fetch(DType::f64, want_device, want_offsets);
  const std::vector<double> c_values = c_offsets.empty() ? std::vector<double>() : fetch(p.c->dtype, p.c->device, c_offsets);
  const std::vector<double> bias_values =
      bias_offsets.empty() ? std::vector<double>() : fetch(p.bias->dtype, p.bias->device, bias_offsets);

  // The dot products on every core (K multiply-adds each, 4096 of them), then judged in order.
  const int64_t samples = batches * rows * cols;
  std::vector<double> host_values(static_cast<size_t>(samples)), differences(static_cast<size_t>(samples));
  parallel_for(samples, 64, [&](int64_t begin, int64_t end) {
    for (int64_t sample = begin; sample < end; ++sample) {
      const int64_t g = sample / (rows * cols), r = sample / cols % rows, c = sample % cols;
      const double* a_row = a.data() + (g * rows + r) * p.K;
      const double* b_col = b.data() + (g * cols + c) * p.K;
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double term = a_row[k] * b_col[k];
        sum += term;
        magnitude += std::fabs(term);
      }
      const double value = epilogue_value(p, sum, c_values.empty() ? 0.0 : c_values[size_t(sample)],
                                          bias_values.empty() ? 0.0 : bias_values[size_t(sample)]);
      const double scale = std::fabs(p.alpha) * magnitude + std::fabs(value) + 1e-300;
      host_values[size_t(sample)] = value;
      differences[size_t(sample)] = std::fabs(want[size_t(sample)] - value) / scale;
    }
  });
  CrossCheck check;
  for (int64_t sample = 0; sample < samples; ++sample) {
    const int64_t g = sample / (rows * cols), r = sample / cols % rows, c = sample % cols;
    if (!(differences[size_t(sample)] <= 1e-10))
      fatal(kExitCudaError, "fault",
            strprintf("the device reference disagrees with the host at output [%lld, %lld, %lld]: device %s, host "
                      "%s. A reference computed on a faulty GPU cannot judge the kernel: rerun with --reference host",
                      (long long)batch_of[size_t(g)], (long long)row_of[size_t(g * rows + r)],
                      (long long)col_of[size_t(g * cols + c)], format_value(want[size_t(sample)]).c_str(),
                      format_value(host_values[size_t(sample)]).c_str()));
    check.max_relative = std::max(check.max_relative, differences[size_t(sample)]);
    ++check.samples;
  }
  return check;
}

}  // namespace repro
