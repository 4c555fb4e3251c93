// ---------------------------------------------------------------------------------------------
// repro harness runtime: the fp64 reference GEMM on the device (reference.provider: device)
//
// The same formula as the host reference (reference.cuh), computed from the operands already on
// the device, in their own dtypes and strides. Every operand element widens exactly to double,
// every product and sum is fp64: on sm_80 and later on the fp64 tensor cores (DMMA: mma.sync
// .f64, whose products and sums are IEEE fp64), before sm_80 with fp64 FMAs on the CUDA cores;
// from 1024^3 multiply-adds on, where cuBLAS is installed, by cuBLAS's DGEMM (cublas_gemm.cuh)
// from the same packed copies.
// The summation order differs from the host's, so the two agree to ~1e-15 of the terms'
// magnitude, far below any kernel's error. The int8 emulation (emulated_reference.cuh) shares
// its operand views, copies and epilogue; the host cross-check of both is
// reference_cross_check.cuh.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "cublas_gemm.cuh"

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

template <typename T>
__global__ void fill_kernel(T* out, int64_t count, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

// `bytes` of scratch (device.cuh) for `needed_by`. Running out is the user's problem to solve, not
// a CUDA error to decode: the run ends saying what needed the memory, how much, what is free,
// and `what_to_do`.
inline void* take_scratch_or_exit(size_t bytes, const std::string& needed_by, const char* what_to_do) {
  void* data = try_take_scratch(bytes);
  if (data == nullptr) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fatal(kExitCudaError, "fault",
          strprintf("%s needs %.2f GiB of device memory, and %.2f GiB are free: %s", needed_by.c_str(),
                    double(bytes) / (1 << 30), double(free_bytes) / (1 << 30), what_to_do));
  }
  return data;
}

// `count` doubles of device memory (take_scratch_or_exit).
inline double* allocate_device_doubles(int64_t count, const std::string& needed_by, const char* what_to_do) {
  return static_cast<double*>(
      take_scratch_or_exit(size_t(std::max<int64_t>(count, 1)) * sizeof(double), needed_by, what_to_do));
}

// `count` doubles for the reference: packed operands and the output.
inline double* allocate_reference_doubles(int64_t count, const char* what) {
  return allocate_device_doubles(count, strprintf("the device reference, for %s,", what),
                                 "rerun with --reference host (the fp64 reference on the CPU)");
}

// --ones's right answers, alpha * K everywhere (analytic_ones() on the host), made on the device
// for the device's comparison: [L][M][N] doubles, scratch: the caller gives them back.
inline double* device_answers_of_ones(const GemmProblem& p) {
  const int64_t count = p.L * p.M * p.N;
  double* want = allocate_device_doubles(count, "--ones, which compares on the device, for its right answers,",
                                         "run smaller sizes (--size)");
  fill_kernel<double><<<pipeline_blocks(count), kPipelineThreads>>>(want, count, p.alpha * double(p.K));
  REPRO_CUDA_CHECK(cudaGetLastError());
  return want;
}

struct PackedOperand {
  double* data = nullptr;
  int64_t batch_stride = 0;  // Kp * Ip, or 0: one matrix shared by all batches
};

// packed[l][k][i] = operand element (i, k) of batch l (A: i = m; B: i = n), 0 in the padding.
// A scaled GEMM's operands are scaled here, element by element (scales.cuh), so the GEMM kernel
// is the plain one. A block packs a 32 x 32 tile of one batch through shared memory: it reads
// the source along whichever of i and k is its contiguous axis and writes the copy along i, so
// both sides are coalesced whatever the operand's layout; the tile's position comes from the
// block's index, not from 64-bit divisions of a flat index (those made the packing of two
// 2048^2 operands take 0.27 ms, run 102, where its bytes take a tenth of that).
constexpr int kPackTile = 32, kPackRows = 8;  // a 32 x 32 tile, 32 x 8 threads

__global__ void __launch_bounds__(kPackTile* kPackRows)
    pack_operand_kernel(DeviceMatrix source, int64_t i_stride, int64_t k_stride, int64_t batches, int64_t I, int64_t K,
                        int64_t Ip, int64_t Kp, ScaleOperand scale, bool k_contiguous, double* packed) {
  __shared__ double tile[kPackTile][kPackTile + 1];  // [i][k]; the padding spreads a column over banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i0 = int64_t(blockIdx.x) * kPackTile, k_tiles = ceil_div(Kp, kPackTile);
  // The grid's y and z stop at 65535: K tiles and batches beyond them are looped over.
  for (int64_t l = blockIdx.z; l < batches; l += gridDim.z)
    for (int64_t k_tile = blockIdx.y; k_tile < k_tiles; k_tile += gridDim.y) {
      const int64_t k0 = k_tile * kPackTile;
      const ScaleOperand batch_scale = scale_of_batch(scale, l);
      for (int row = ty; row < kPackTile; row += kPackRows) {
        // Consecutive threads on the source's contiguous axis.
        const int di = k_contiguous ? row : tx, dk = k_contiguous ? tx : row;
        const int64_t i = i0 + di, k = k0 + dk;
        tile[di][dk] = i < I && k < K ? decode(source.dtype, source.data,
                                               l * source.batch_stride + i * i_stride + k * k_stride) *
                                            scale_at(batch_scale, i, k)
                                      : 0.0;
      }
      __syncthreads();
      double* out = packed + l * Kp * Ip;
      for (int row = ty; row < kPackTile; row += kPackRows)
        if (k0 + row < Kp && i0 + tx < Ip) out[(k0 + row) * Ip + i0 + tx] = tile[tx][row];
      __syncthreads();  // before the next tile overwrites this one
    }
}

// `i_stride`, `k_stride`: the source's strides along the packed copy's rows (I) and K.
inline PackedOperand pack_operand(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t L,
                                  int64_t I, int64_t K, int64_t Ip, int64_t Kp, const ScaleOperand& scale) {
  PackedOperand packed;
  // One copy for all batches only where they share the operand and its scales ([L, ...] scales
  // make a copy per batch even of a shared operand).
  const bool shared = source.batch_stride == 0 && scale.batch_stride == 0;
  const int64_t batches = shared ? 1 : L;
  packed.batch_stride = shared ? 0 : Kp * Ip;
  const int64_t total = batches * Kp * Ip;
  packed.data = allocate_reference_doubles(total, "an fp64 copy of an operand");
  if (total > 0) {
    // Ip and Kp are whole tiles of the GEMM (multiples of 128 and 16): the grid covers them.
    const dim3 grid(unsigned(ceil_div(Ip, kPackTile)), unsigned(std::min<int64_t>(ceil_div(Kp, kPackTile), 65535)),
                    unsigned(std::min<int64_t>(batches, 65535)));
    pack_operand_kernel<<<grid, dim3(kPackTile, kPackRows)>>>(source, i_stride, k_stride, batches, I, K, Ip, Kp, scale,
                                                              std::llabs(k_stride) <= std::llabs(i_stride), packed.data);
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

// The architecture whose code path of `kernel` runs on this GPU: the binary's, or for a PTX build
// JIT-compiled from an older virtual arch, that arch (its #if branches are the ones compiled).
inline int kernel_code_path(const void* kernel, cudaFuncAttributes* attributes) {
  REPRO_CUDA_CHECK(cudaFuncGetAttributes(attributes, kernel));
  const bool jit = attributes->ptxVersion > 0 && attributes->ptxVersion != attributes->binaryVersion;
  return jit ? attributes->ptxVersion : attributes->binaryVersion;
}

// What computes the reference on this GPU: the architecture the driver picked the kernel's
// code for decides between the two inner loops of reference_gemm_kernel.
inline std::string reference_engine() {
  cudaFuncAttributes attributes;
  const int path = kernel_code_path(reinterpret_cast<const void*>(reference_gemm_kernel<1>), &attributes);
  const std::string jit = path != attributes.binaryVersion
                              ? strprintf(", JIT-compiled from compute_%d PTX", attributes.ptxVersion)
                              : "";
  return path >= 80 ? strprintf("fp64 tensor cores, sm_%d code%s", attributes.binaryVersion, jit.c_str())
                    : strprintf("fp64 FMA on CUDA cores, sm_%d code%s", attributes.binaryVersion, jit.c_str());
}

// A reference GEMM under way: its output, its scratch buffers (packed or sliced operands, freed
// when it is done), the events around it, and what computes it.
struct ReferenceGemmLaunch {
  double* out = nullptr;  // [L][M][N] doubles, scratch: the caller gives it back
  std::vector<void*> scratch;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::string engine;     // reference_engine(), or the emulation's slices
  bool emulated = false;  // int8 tensor cores (emulated_reference.cuh)
  int roundings = 0;      // emulated: the error bound's factor (docs/tolerances.md)
  std::string fallback;   // why an emulated reference that was asked for is the fp64 one instead
  double pack_seconds = 0;  // the host's time enqueuing the operands' packing (benchmarks)
};

// Starts the fp64 tensor cores' reference from the operands' device copies, which must be there
// already, on the default stream, after `launch->start` (recorded by the caller). Returns at
// once: the host works while the GPU computes. The output goes to `into` when given (L*M*N
// doubles the caller owns: a grouped GEMM's groups write their part of one output), else to a
// new allocation (scratch) the caller gives back.
inline void launch_dmma_reference_gemm(const GemmProblem& p, double* into, ReferenceGemmLaunch* launch) {
  launch->engine = reference_engine();
  DeviceGemmArgs args;
  args.M = p.M, args.N = p.N, args.K = p.K;
  args.Mp = ceil_div(p.M, kRefTileM) * kRefTileM, args.Np = ceil_div(p.N, kRefTileN) * kRefTileN;
  args.Kp = ceil_div(p.K, kRefTileK) * kRefTileK;
  const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
  const auto pack_start = std::chrono::steady_clock::now();
  args.a = pack_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, args.Mp, args.Kp, problem_scales(p, true, true));
  args.b = pack_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, args.Np, args.Kp, problem_scales(p, false, true));
  launch->pack_seconds += seconds_since(pack_start);
  launch->scratch.push_back(args.a.data);
  launch->scratch.push_back(args.b.data);
  args.alpha = p.alpha;
  const size_t count = size_t(p.L * p.M * p.N);
  args.out = into != nullptr ? into : allocate_reference_doubles(int64_t(count), "its output");
  // cuBLAS's DGEMM from the same packed copies where it computes a GEMM of this size
  // (cublas_gemm.cuh), else repro's own kernel.
  if (count > 0 && p.K > 0 && cublas_computes(p.L, p.M, p.N, p.K) &&
      cublas_reference_gemm(args.a.data, args.a.batch_stride, args.b.data, args.b.batch_stride, args.out, args.alpha,
                            p.L, p.M, p.N, p.K, args.Mp, args.Np, &launch->engine)) {
    launch->out = args.out;
    return;
  }
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
  }
  launch->out = args.out;
}

// out += beta * C, then + bias, after either reference GEMM (they write alpha * A B).
inline void launch_reference_epilogue(const GemmProblem& p, double* out) {
  DeviceGemmArgs args;
  if (reads_c(p)) args.c = device_matrix(*p.c);
  if (p.bias != nullptr) args.bias = device_matrix(*p.bias);
  if (args.c.data == nullptr && args.bias.data == nullptr) return;
  args.out = out, args.beta = p.beta, args.M = p.M, args.N = p.N;
  const int64_t count = p.L * p.M * p.N;
  if (count == 0) return;
  reference_epilogue_kernel<<<pipeline_blocks(count), kPipelineThreads>>>(args, p.L);
  REPRO_CUDA_CHECK(cudaGetLastError());
}

// Waits for the reference; returns the time of packing and GEMM in milliseconds.
inline double finish_reference_gemm(ReferenceGemmLaunch* launch) {
  REPRO_CUDA_CHECK(cudaEventSynchronize(launch->stop));
  float ms = 0;
  REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, launch->start, launch->stop));
  cudaEventDestroy(launch->start);
  cudaEventDestroy(launch->stop);
  for (void* buffer : launch->scratch) give_back_scratch(buffer);
  launch->scratch.clear();
  return ms;
}

}  // namespace repro
