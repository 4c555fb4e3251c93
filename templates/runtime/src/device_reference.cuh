// ---------------------------------------------------------------------------------------------
// repro harness runtime: the fp64 reference GEMM on the device (reference.provider: device)
//
// The same formula as the host reference (reference.cuh), computed from the operands already on
// the device, in their own dtypes and strides. Every operand element widens exactly to double,
// every product and sum is fp64: on sm_80 and later on the fp64 tensor cores (DMMA: mma.sync
// .f64, whose products and sums are IEEE fp64), before sm_80 with fp64 FMAs on the CUDA cores.
// The summation order differs from the host's, so the two agree to ~1e-15 of the terms'
// magnitude, far below any kernel's error.
//
// A reference computed by the same GPU as the kernel under test could share its fault, so a
// sample of outputs is recomputed on the host (the cross-check, below): a device reference
// that disagrees with the host ends the run instead of judging the kernel. The host computes its
// sample while the GPU computes the reference, so the check costs little more than fetching the
// sampled rows of A and columns of B.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device_inputs.cuh"

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

// Element (l, row, col) as a double: dtype.cuh's decode(), the host's own exact conversion, also
// compiled for the device.
__device__ inline double device_element(const DeviceMatrix& m, int64_t l, int64_t row, int64_t col) {
  return decode(m.dtype, m.data, l * m.batch_stride + row * m.row_stride + col * m.col_stride);
}

// ------------------------------------------------------------------------ packing the operands
//
// The GEMM kernel reads neither dtypes nor strides: each operand is first decoded once into a
// packed fp64 copy, K-major and zero-padded to whole tiles: A as [batch][Kp][Mp] (a[k][m]), B as
// [batch][Kp][Np] (b[k][n]), with Mp, Np multiples of 128 and Kp of 16. An operand without a
// batch dimension is packed once and shared by all batches. At 8192^3 with bf16 operands this
// takes about a millisecond and 1 GiB; in exchange the kernel's inner loop is copies and fp64
// MMAs only, with no bounds checks and no per-element decoding.
constexpr int kRefTileM = 128, kRefTileN = 128, kRefTileK = 16;

// `count` doubles of device memory for the reference: packed operands and the output. Running
// out is the user's problem to solve, not a CUDA error to decode, so it says what to do.
inline double* allocate_reference_doubles(int64_t count, const char* what) {
  double* data = nullptr;
  const size_t bytes = size_t(std::max<int64_t>(count, 1)) * sizeof(double);
  if (cudaMalloc(&data, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear it: the run ends here with its own message
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fatal(kExitCudaError, "fault",
          strprintf("the device reference needs %.2f GiB of device memory for %s, and %.2f GiB are free: rerun "
                    "with --reference host (the fp64 reference on the CPU)",
                    double(bytes) / (1 << 30), what, double(free_bytes) / (1 << 30)));
  }
  return data;
}

struct PackedOperand {
  double* data = nullptr;
  int64_t batch_stride = 0;  // Kp * Ip, or 0: one matrix shared by all batches
};

// packed[l][k][i] = operand element (i, k) of batch l (A: i = m; B: i = n), 0 in the padding.
// A scaled GEMM's operands are scaled here, element by element (scales.cuh), so the GEMM kernel
// is the plain one.
__global__ void pack_operand_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t batches,
                                    int64_t I, int64_t K, int64_t Ip, int64_t Kp, ScaleOperand scale, double* packed) {
  const int64_t total = batches * Kp * Ip;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % Ip, k = e / Ip % Kp, l = e / (Ip * Kp);
    packed[e] = i < I && k < K
                    ? decode(source.dtype, source.data, l * source.batch_stride + i * i_stride + k * k_stride) *
                          scale_at(scale, i, k)
                    : 0.0;
  }
}

// `i_stride`, `k_stride`: the source's strides along the packed copy's rows (I) and K.
inline PackedOperand pack_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t L,
                                  int64_t I, int64_t K, int64_t Ip, int64_t Kp, const ScaleOperand& scale) {
  PackedOperand packed;
  const int64_t batches = source.batch_stride == 0 ? 1 : L;
  packed.batch_stride = source.batch_stride == 0 ? 0 : Kp * Ip;
  const int64_t total = batches * Kp * Ip;
  packed.data = allocate_reference_doubles(total, "an fp64 copy of an operand");
  if (total > 0) {
    pack_operand_kernel<<<pipeline_blocks(total), kPipelineThreads>>>(source, i_stride, k_stride, batches, I, K, Ip,
                                                                      Kp, scale, packed.data);
    REPRO_CUDA_CHECK(cudaGetLastError());
  }
  return packed;
}

// ------------------------------------------------------------------------ the GEMM kernel
//
// A block computes 128 x 128 outputs with 8 warps (2 along M x 4 along N), a warp 64 x 32 as
// 4 x 4 tiles of 16 x 8: exactly the output tile of one mma.sync.m16n8k4.f64, whose
// accumulators it keeps in registers. K advances 16 at a time through a ring of 3 shared memory
// stages filled by asynchronous copies (cp.async), so the copies of the next two tiles are in
// flight while the tensor cores work on this one; GPUs with less than the 99 KiB this takes per
// block (sm_75: 64 KiB) get one stage. A tile row is 128 + 4 doubles long: the 4 of padding put
// the 4 k-rows that one fragment load touches on different banks.
constexpr int kRefThreads = 256, kRefPitch = kRefTileM + 4;
constexpr size_t kRefTileDoubles = size_t(kRefTileK) * kRefPitch;
constexpr size_t reference_shared_bytes(int stages) { return size_t(stages) * 2 * kRefTileDoubles * sizeof(double); }

struct DeviceGemmArgs {
  PackedOperand a, b;          // a[l][k][m], b[l][k][n]
  DeviceMatrix c, bias;        // c.data / bias.data null when unused
  double* out;                 // [L][M][N] doubles
  double alpha, beta;
  int64_t M, N, K, Mp, Np, Kp;
};

// 16 bytes from global to shared memory: asynchronously (cp.async) from sm_80 on, else plainly.
__device__ inline void copy_16_bytes(double* shared, const double* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
#else
  *reinterpret_cast<double2*>(shared) = *reinterpret_cast<const double2*>(global);
#endif
}

__device__ inline void copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most `kPending` committed groups of copies are still in flight.
template <int kPending>
__device__ inline void copy_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// One 16 x 128 tile of a packed operand (rows `pitch` doubles apart) into shared memory: 1024
// chunks of 16 bytes, 4 per thread, consecutive threads on consecutive chunks of a row.
__device__ inline void copy_tile(double* tile, const double* source, int64_t pitch, int thread) {
  constexpr int kChunksPerRow = kRefTileM / 2;
#pragma unroll
  for (int c = thread; c < kRefTileK * kChunksPerRow; c += kRefThreads) {
    const int row = c / kChunksPerRow, column = c % kChunksPerRow * 2;
    copy_16_bytes(tile + row * kRefPitch + column, source + row * pitch + column);
  }
}

// d += a * b for one 16 x 8 x 4 step, in the mma.sync fragment layout: with g = lane / 4 and
// t = lane % 4, a[0] = A[g][t], a[1] = A[g + 8][t], b = B[t][g], d[0..1] = D[g][2t..2t+1] and
// d[2..3] = D[g + 8][2t..2t+1]. sm_90 has this shape in one instruction; sm_80 to sm_89 do it as
// two 8 x 8 x 4 ones (rows g and g + 8), which is what the sm_90 instruction computes.
__device__ inline void mma_f64_16x8x4(double (&d)[4], const double (&a)[2], double b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 { %0, %1, %2, %3 }, { %4, %5 }, { %6 }, "
               "{ %0, %1, %2, %3 };\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a[0]), "d"(a[1]), "d"(b));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 { %0, %1 }, { %2 }, { %3 }, { %0, %1 };\n"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a[0]), "d"(b));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 { %0, %1 }, { %2 }, { %3 }, { %0, %1 };\n"
               : "+d"(d[2]), "+d"(d[3])
               : "d"(a[1]), "d"(b));
#else
  (void)d, (void)a, (void)b;  // not reached: older GPUs take the FMA path in the kernel
#endif
}

// Whether this compilation of the kernel uses the fp64 tensor cores.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define REPRO_REFERENCE_DMMA 0
#else
#define REPRO_REFERENCE_DMMA 1
#endif

template <int kStages>
__global__ void __launch_bounds__(kRefThreads, 1) reference_gemm_kernel(DeviceGemmArgs p) {
  extern __shared__ __align__(16) double stages[];  // [stage][a, b][k][128 + 4]
  const int thread = threadIdx.x, lane = thread % 32, warp = thread / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_m = (warp / 4) * 64, warp_n = (warp % 4) * 32;
  const int64_t l = blockIdx.z, m0 = int64_t(blockIdx.y) * kRefTileM, n0 = int64_t(blockIdx.x) * kRefTileN;
  const double* a_source = p.a.data + l * p.a.batch_stride + m0;  // + k * Mp: row k of the tile
  const double* b_source = p.b.data + l * p.b.batch_stride + n0;
  const int64_t tiles = p.Kp / kRefTileK;
  const auto fetch = [&](int64_t tile) {
    double* stage = stages + (tile % kStages) * 2 * kRefTileDoubles;
    copy_tile(stage, a_source + tile * kRefTileK * p.Mp, p.Mp, thread);
    copy_tile(stage + kRefTileDoubles, b_source + tile * kRefTileK * p.Np, p.Np, thread);
  };

  double acc[4][4][4] = {};  // [16-row tile][8-column tile][fragment element]
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) fetch(s);
    copy_commit();  // (an empty group where K is short: the count below stays right)
  }
  for (int64_t tile = 0; tile < tiles; ++tile) {
    if constexpr (kStages == 1) {
      fetch(tile);
      copy_commit();
      copy_wait<0>();
      __syncthreads();
    } else {
      copy_wait<kStages - 2>();  // this tile's copies are done (this thread's) ...
      __syncthreads();           // ... and every thread's; the stage refilled next is free
      if (tile + kStages - 1 < tiles) fetch(tile + kStages - 1);
      copy_commit();
    }
    const double(*a_tile)[kRefPitch] =
        reinterpret_cast<const double(*)[kRefPitch]>(stages + (tile % kStages) * 2 * kRefTileDoubles);
    const double(*b_tile)[kRefPitch] = a_tile + kRefTileK;
#pragma unroll
    for (int k4 = 0; k4 < kRefTileK; k4 += 4) {
#if REPRO_REFERENCE_DMMA
      double a[4][2], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        a[i][0] = a_tile[k4 + t][warp_m + 16 * i + g], a[i][1] = a_tile[k4 + t][warp_m + 16 * i + 8 + g];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = b_tile[k4 + t][warp_n + 8 * j + g];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_f64_16x8x4(acc[i][j], a[i], b[j]);
#else
      // The same outputs, each from its own row and column, with fp64 FMAs.
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][j][e] = fma(a_tile[k4 + kk][warp_m + 16 * i + g + 8 * (e / 2)],
                                 b_tile[k4 + kk][warp_n + 8 * j + 2 * t + e % 2], acc[i][j][e]);
#endif
    }
    if constexpr (kStages == 1) __syncthreads();  // before the next fetch overwrites the tile
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t m = m0 + warp_m + 16 * i + g + 8 * (e / 2), n = n0 + warp_n + 8 * j + 2 * t + e % 2;
        if (m < p.M && n < p.N) p.out[(l * p.M + m) * p.N + n] = p.alpha * acc[i][j][e];
      }
}

// out += beta * C, then + bias: the rest of the epilogue, in a pass of its own (in the GEMM
// kernel, 64 outputs a thread unrolled over every dtype of C and bias made it 15 times longer).
__global__ void reference_epilogue_kernel(DeviceGemmArgs p, int64_t L) {
  const int64_t total = L * p.M * p.N;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = e % p.N, m = e / p.N % p.M, l = e / (p.M * p.N);
    double value = p.out[e];
    if (p.c.data != nullptr) value += p.beta * device_element(p.c, l, m, n);
    if (p.bias.data != nullptr) value += decode(p.bias.dtype, p.bias.data, n * p.bias.col_stride);
    p.out[e] = value;
  }
}

// What computes the reference on this GPU: the architecture the driver picked the kernel's
// code for decides between the two inner loops of reference_gemm_kernel.
inline std::string reference_engine() {
  cudaFuncAttributes attributes;
  REPRO_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reference_gemm_kernel<1>));
  // A PTX build is JIT-compiled for this GPU from an older virtual arch, whose inner loop it keeps.
  const std::string jit = attributes.ptxVersion > 0 && attributes.ptxVersion != attributes.binaryVersion
                              ? strprintf(", JIT-compiled from compute_%d PTX", attributes.ptxVersion)
                              : "";
  const int path = jit.empty() ? attributes.binaryVersion : attributes.ptxVersion;
  return path >= 80 ? strprintf("fp64 tensor cores, sm_%d code%s", attributes.binaryVersion, jit.c_str())
                    : strprintf("fp64 FMA on CUDA cores, sm_%d code%s", attributes.binaryVersion, jit.c_str());
}

// A reference GEMM under way: its output, its packed operands (freed when it is done) and the
// events around packing and GEMM.
struct ReferenceGemmLaunch {
  double* out = nullptr;  // [L][M][N] doubles; the caller frees it
  double *packed_a = nullptr, *packed_b = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Starts the reference from the operands' device copies, which must be there already, on the
// default stream. Returns at once: the host works while the GPU computes. The output goes to
// `into` when given (L*M*N doubles the caller owns: a grouped GEMM's groups write their part of
// one output), else to a new allocation the caller frees.
inline ReferenceGemmLaunch launch_reference_gemm(const GemmProblem& p, double* into = nullptr) {
  ReferenceGemmLaunch launch;
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.start));
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.stop));
  DeviceGemmArgs args;
  args.M = p.M, args.N = p.N, args.K = p.K;
  args.Mp = ceil_div(p.M, kRefTileM) * kRefTileM, args.Np = ceil_div(p.N, kRefTileN) * kRefTileN;
  args.Kp = ceil_div(p.K, kRefTileK) * kRefTileK;
  const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
  REPRO_CUDA_CHECK(cudaEventRecord(launch.start));
  args.a = pack_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, args.Mp, args.Kp, problem_scales(p, true, true));
  args.b = pack_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, args.Np, args.Kp, problem_scales(p, false, true));
  launch.packed_a = args.a.data, launch.packed_b = args.b.data;
  if (reads_c(p)) args.c = device_matrix(*p.c);
  if (p.bias != nullptr) args.bias = device_matrix(*p.bias);
  args.alpha = p.alpha;
  args.beta = p.beta;
  const size_t count = size_t(p.L * p.M * p.N);
  args.out = into != nullptr ? into : allocate_reference_doubles(int64_t(count), "its output");
  if (count > 0) {
    int device = 0, shared_limit = 0;
    REPRO_CUDA_CHECK(cudaGetDevice(&device));
    REPRO_CUDA_CHECK(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const dim3 grid(unsigned(args.Np / kRefTileN), unsigned(args.Mp / kRefTileM), unsigned(p.L));
    if (size_t(shared_limit) >= reference_shared_bytes(3)) {
      REPRO_CUDA_CHECK(cudaFuncSetAttribute(reference_gemm_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(reference_shared_bytes(3))));
      reference_gemm_kernel<3><<<grid, kRefThreads, reference_shared_bytes(3)>>>(args);
    } else {
      reference_gemm_kernel<1><<<grid, kRefThreads, reference_shared_bytes(1)>>>(args);
    }
    REPRO_CUDA_CHECK(cudaGetLastError());
    if (args.c.data != nullptr || args.bias.data != nullptr) {
      reference_epilogue_kernel<<<pipeline_blocks(int64_t(count)), kPipelineThreads>>>(args, p.L);
      REPRO_CUDA_CHECK(cudaGetLastError());
    }
  }
  REPRO_CUDA_CHECK(cudaEventRecord(launch.stop));
  launch.out = args.out;
  return launch;
}

// Waits for the reference; returns the time of packing and GEMM in milliseconds.
inline double finish_reference_gemm(ReferenceGemmLaunch* launch) {
  REPRO_CUDA_CHECK(cudaEventSynchronize(launch->stop));
  float ms = 0;
  REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, launch->start, launch->stop));
  cudaEventDestroy(launch->start);
  cudaEventDestroy(launch->stop);
  cudaFree(launch->packed_a);
  cudaFree(launch->packed_b);
  launch->packed_a = launch->packed_b = nullptr;
  return ms;
}

// ------------------------------------------------------------------------ the cross-check

// How many outputs the host recomputes to vouch for a device reference.
constexpr int64_t kCrossCheckSamples = 4096;

// Vector v of `count` elements starting at element bases[v] and `step` elements apart, decoded
// into out[v * count ...]: the sampled rows of A (step: A's K stride) or columns of B; with
// count 1, single elements (gather_values).
__global__ void gather_vectors_kernel(DType dtype, const unsigned char* storage, const int64_t* bases,
                                      int64_t vectors, int64_t step, int64_t count, double* out) {
  const int64_t total = vectors * count;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = decode(dtype, storage, bases[i / count] + (i % count) * step);
}

inline std::vector<double> gather_vectors(DType dtype, const void* device, const std::vector<int64_t>& bases,
                                          int64_t step, int64_t count) {
  std::vector<double> values(bases.size() * size_t(count));
  if (values.empty()) return values;
  int64_t* device_bases = upload_int64(bases);
  double* device_values = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(&device_values, values.size() * sizeof(double)));
  gather_vectors_kernel<<<pipeline_blocks(int64_t(values.size())), kPipelineThreads>>>(
      dtype, static_cast<const unsigned char*>(device), device_bases, int64_t(bases.size()), step, count,
      device_values);
  REPRO_CUDA_CHECK(cudaGetLastError());
  REPRO_CUDA_CHECK(cudaMemcpy(values.data(), device_values, values.size() * sizeof(double), cudaMemcpyDeviceToHost));
  cudaFree(device_bases);
  cudaFree(device_values);
  return values;
}

// The decoded values of the elements at `offsets` of a device buffer.
inline std::vector<double> gather_values(DType dtype, const void* device, const std::vector<int64_t>& offsets) {
  return gather_vectors(dtype, device, offsets, 0, 1);
}

// A grid of outputs (up to 64 rows x 64 columns, over up to 4 batches) and what the host makes
// of them. Only what they need comes from the device: their rows of A, columns of B, C and bias
// values, so the check works the same whether the inputs were made on the device or uploaded.
struct CrossCheckSample {
  int64_t batches = 0, rows = 0, cols = 0;
  std::vector<int64_t> batch_of, row_of, col_of;  // the sampled batches, rows and columns
  std::vector<double> a, b;                       // [batch][row][K], [batch][column][K]
  std::vector<double> c_values, bias_values;      // per sample; empty when the GEMM has none
  std::vector<double> host_values, magnitudes;    // per sample: the host's value, sum_k |a b|

  int64_t count() const { return batches * rows * cols; }
  int64_t batch(int64_t sample) const { return batch_of[size_t(sample / (rows * cols))]; }
  int64_t row(int64_t sample) const { return row_of[size_t(sample / (rows * cols) * rows + sample / cols % rows)]; }
  int64_t col(int64_t sample) const { return col_of[size_t(sample / (rows * cols) * cols + sample % cols)]; }
  int64_t output_offset(const GemmProblem& p, int64_t sample) const {
    return (batch(sample) * p.M + row(sample)) * p.N + col(sample);
  }
};

// Chooses the sample and fetches its operands (before the reference GEMM starts: the fetch
// would otherwise wait for it on the default stream).
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
  s.a = gather_vectors(p.a->dtype, p.a->device, a_bases, matrix_offset(*p.a, 0, 0, 1), p.K);
  s.b = gather_vectors(p.b->dtype, p.b->device, b_bases, matrix_offset(*p.b, 0, 1, 0), p.K);
  // A scaled GEMM: the host scales the fetched rows and columns itself, from its own copies of
  // the scales (they are made on the host).
  // One scale per K block, decoded once: a million scale_at calls would take as long as the
  // whole fetch.
  const auto scale_vectors = [&](const ScaleOperand& scale, const std::vector<int64_t>& lines, std::vector<double>& v) {
    if (scale.data == nullptr) return;
    for (size_t line = 0; line < lines.size(); ++line)
      for (int64_t k0 = 0; k0 < p.K; k0 += scale.block_k) {
        const double factor = scale_of_block(scale, lines[line] / scale.block_i, k0 / scale.block_k);
        for (int64_t k = k0; k < std::min(p.K, k0 + scale.block_k); ++k) v[line * size_t(p.K) + size_t(k)] *= factor;
      }
  };
  scale_vectors(problem_scales(p, true, false), s.row_of, s.a);
  scale_vectors(problem_scales(p, false, false), s.col_of, s.b);
  if (reads_c(p)) s.c_values = gather_values(p.c->dtype, p.c->device, c_offsets);
  if (p.bias != nullptr) s.bias_values = gather_values(p.bias->dtype, p.bias->device, bias_offsets);
  return s;
}

// The host's value of every sampled output, on every core (K multiply-adds each).
inline void compute_cross_check_sample(const GemmProblem& p, CrossCheckSample* s) {
  s->host_values.assign(size_t(s->count()), 0.0);
  s->magnitudes.assign(size_t(s->count()), 0.0);
  parallel_for(s->count(), 64, [&](int64_t begin, int64_t end) {
    for (int64_t sample = begin; sample < end; ++sample) {
      const int64_t g = sample / (s->rows * s->cols), r = sample / s->cols % s->rows, c = sample % s->cols;
      const double* a_row = s->a.data() + (g * s->rows + r) * p.K;
      const double* b_col = s->b.data() + (g * s->cols + c) * p.K;
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        const double term = a_row[k] * b_col[k];
        sum += term;
        magnitude += std::fabs(term);
      }
      s->host_values[size_t(sample)] =
          epilogue_value(p, sum, s->c_values.empty() ? 0.0 : s->c_values[size_t(sample)],
                         s->bias_values.empty() ? 0.0 : s->bias_values[size_t(sample)]);
      s->magnitudes[size_t(sample)] = magnitude;
    }
  });
}

struct CrossCheck {
  int64_t samples = 0;
  double max_relative = 0;  // max |device - host| / sum_k |a b|, over the samples
};

// Judges the device reference on the sample. The bound: fp64 sums of K terms in two different
// orders differ by at most ~K * 2^-53 of the sum of |terms|; 1e-10 of it leaves room and still
// catches any real fault (a wrong element is off by a sizeable fraction of its terms).
inline CrossCheck judge_cross_check_sample(const GemmProblem& p, const CrossCheckSample& s, const double* want_device) {
  std::vector<int64_t> want_offsets;
  for (int64_t sample = 0; sample < s.count(); ++sample) want_offsets.push_back(s.output_offset(p, sample));
  const std::vector<double> want = gather_values(DType::f64, want_device, want_offsets);
  CrossCheck check;
  for (int64_t sample = 0; sample < s.count(); ++sample) {
    const double host = s.host_values[size_t(sample)], device = want[size_t(sample)];
    const double scale = std::fabs(p.alpha) * s.magnitudes[size_t(sample)] + std::fabs(host) + 1e-300;
    const double difference = std::fabs(device - host) / scale;
    if (!(difference <= 1e-10))
      fatal(kExitCudaError, "fault",
            strprintf("the device reference disagrees with the host at output [%lld, %lld, %lld]: device %s, host "
                      "%s. A reference computed on a faulty GPU cannot judge the kernel: rerun with --reference host",
                      (long long)s.batch(sample), (long long)s.row(sample), (long long)s.col(sample),
                      format_value(device).c_str(), format_value(host).c_str()));
    check.max_relative = std::max(check.max_relative, difference);
    ++check.samples;
  }
  return check;
}

// A device reference and how it was made.
struct DeviceReference {
  double* values = nullptr;  // [L][M][N] doubles on the device; the caller frees it
  double kernel_ms = 0;      // packing and GEMM kernels, device events
  double fetch_seconds = 0;  // fetching the sample's rows and columns
  double check_seconds = 0;  // the host's sample and judging it, beyond the kernel's time
  std::string engine;        // reference_engine()
  CrossCheck check;
};

// The reference on the device, cross-checked on the host: fetch the sample, start the GEMM,
// compute the sample on the host meanwhile, then judge the GEMM's values at the sample.
inline DeviceReference compute_device_reference(const GemmProblem& p) {
  DeviceReference reference;
  reference.engine = reference_engine();
  auto phase_start = std::chrono::steady_clock::now();
  CrossCheckSample sample = fetch_cross_check_sample(p);
  reference.fetch_seconds = seconds_since(phase_start);
  ReferenceGemmLaunch launch = launch_reference_gemm(p);
  reference.values = launch.out;
  phase_start = std::chrono::steady_clock::now();
  compute_cross_check_sample(p, &sample);
  const double host_seconds = seconds_since(phase_start);
  reference.kernel_ms = finish_reference_gemm(&launch);
  // The host's share that the kernels did not hide, then the judging.
  const double not_hidden = std::max(0.0, host_seconds - reference.kernel_ms / 1e3);
  phase_start = std::chrono::steady_clock::now();
  reference.check = judge_cross_check_sample(p, sample, reference.values);
  reference.check_seconds = not_hidden + seconds_since(phase_start);
  return reference;
}

}  // namespace repro
