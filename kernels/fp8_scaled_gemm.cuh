#pragma once
// fp8 block-scaled GEMM (DeepGEMM-style scaling, plain CUDA cores):
//
//   D[m, n] = alpha * sum over K-blocks kb of SA(m, kb) * SB(kb, n / 128)
//                       * sum over k in kb of A[m, k] * B[k, n]
//
// A   e4m3 [M, K], row-major.
// B   e4m3, logically [K, N], column-major: stored as a row-major [N, K] matrix
//     (K contiguous, like a linear-layer weight).
// D   bf16 [M, N], row-major, rounded to nearest even (__float2bfloat16_rn).
// K-blocks are 128 wide; the last one may be partial (K need not be a multiple
// of 128, nor of anything else: see "Loads" below).
// SA  one scale per row and K-block: logical [M, KB], KB = ceil(K / 128), block [1, 128].
// SB  one scale per 128 x 128 block of B: logical [KB, ceil(N / 128)], block [128, 128].
//
// Scale formats (template parameter ScaleFormat):
//   f32    SA is float [M, KB], SB is float [KB, ceil(N / 128)], both row-major.
//   ue8m0  a byte e stands for 2^(e - 127). Four consecutive K-blocks share one
//          int32: K-block kb is byte (kb % 4) of element kb / 4, byte 0 the least
//          significant (DeepGEMM's packing). SA is int32 [M, ceil(KB / 4)], SB is
//          int32 [ceil(KB / 4), ceil(N / 128)], both row-major. When KB % 4 != 0
//          the high bytes of the last element of a row are padding, never read
//          by the correct kernel. e = 0 decodes to 2^-127 (a subnormal; flushed
//          to 0 under -ftz / --use_fast_math), e = 255 to NaN (as in the OCP MX
//          spec).
//
// Arithmetic: fp32 throughout. For each K-block a thread sums its products in
// an fp32 partial accumulator, then "promotes" it: acc += partial * (sa * sb),
// as DeepGEMM does with the tensor-core accumulator of each K-block. The
// e4m3 -> fp32 conversions are exact (through cvt.rn.f16x2.e4m3x2, sm_89+).
//
// Tiling: one block (256 threads) computes a BM x 128 tile of D, BM = 64 or
// 128. Per K-block it stages the A tile (BM x 128 bytes) and the B tile
// (128 x 128 bytes, n-major as stored) in static shared memory, plus the tile's
// BM row scales and its one column-block scale, decoded to float. Thread
// (ty, tx) = (threadIdx.x / 16, threadIdx.x % 16) owns rows ty + 16 i
// (i < BM / 16) and columns tx + 16 j (j < 8) of the tile: a strided register
// tile, so that the 16 threads of a half-warp read 16 different B rows of
// shared memory in 16 different banks (rows are padded to 33 words), and the
// stores of D are 32-byte runs. Partial tiles are zero-filled on load and
// masked on store, so any M, N, K >= 1 is valid.
//
// Loads: each operand tile is read in chunks of 16, 8 or 4 bytes, the widest
// that K and the A and B base addresses allow (K % 16 == 0 and 16-byte aligned
// pointers, which cudaMalloc gives, for 16); otherwise byte by byte, four bytes
// a chunk. So K has no alignment requirement; only the speed depends on it.
//
// Tile order ("swizzle"): the grid is 1-D, gridDim.x = tiles_m * tiles_n with
// tiles_m = ceil(M / BM) and tiles_n = ceil(N / 128); grouped_tile() below maps
// block b to its tile through a grouped raster of kGroupM = 8 M-tiles, the way
// production kernels improve L2 reuse (see grouped_tile for the formula).
// Blocks past tiles_m * tiles_n return at once.
//
// Launch: block (256, 1, 1), grid (ceil(M / BM) * ceil(N / 128), 1, 1), dynamic
// shared memory 0 (all static: (BM + 128) * 132 + BM * 4 + 4 bytes, i.e. 34308
// for BM = 128 and 25604 for BM = 64).
// Arguments: (A, B, SA, SB, D, M, N, K, alpha).
//
// Planted defects (template parameter ScaleDefect), each marked PLANTED DEFECT
// below; with every scale 1.0 (f32 1.0f, ue8m0 byte 127) the first two are
// invisible, and the third shows only where it reads past the end of SA:
//   unswizzled_tile    the data tile is the swizzled (grouped) one, but the
//                      scales are read for the tile of the plain row-major
//                      raster, (b / tiles_n, b % tiles_n), i.e. what a 2-D grid
//                      (x = N tile, y = M tile) would give. The rows and the
//                      column block of a tile get another tile's scales
//                      wherever the two orders disagree.
//   ue8m0_byte_order   (packed ue8m0 only) the scale of K-block kb is taken
//                      from byte 3 - kb % 4 instead of kb % 4: the K-blocks of
//                      each group of four get each other's scales, reversed.
//   scale_row_stride   (BM = 64 shows it) the SA rows of M-tile i start at
//                      i * kBlockK (128) instead of i * BM, and the guard that
//                      keeps the scale load inside SA tests the data row: tile 1
//                      takes rows 128-191 (another tile's), and the tiles whose
//                      scale rows start at or past M read past SA's end.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace fp8_gemm {

enum class ScaleFormat { f32, ue8m0 };
enum class ScaleDefect { none, unswizzled_tile, ue8m0_byte_order, scale_row_stride };

constexpr int kBlockK = 128;                  // K-block of the scales, and the K step of the main loop
constexpr int kTileN = 128;                   // tile width = SB's block width, so one SB column per tile
constexpr int kGroupM = 8;                    // M-tiles per group of the swizzled tile order
constexpr int kThreads = 256;                 // threads per block
constexpr int kThreadsN = 16;                 // threads along N (tx); kThreads / kThreadsN = 16 along M (ty)
constexpr int kThreadsM = kThreads / kThreadsN;
constexpr int kTN = kTileN / kThreadsN;       // 8 columns per thread
constexpr int kRowWords = kBlockK / 4 + 1;    // 33: a staged row of 128 fp8 bytes, padded by one word

// The element type of SA and SB in each format.
template <ScaleFormat F>
using ScaleT = std::conditional_t<F == ScaleFormat::f32, float, int32_t>;

__host__ __device__ constexpr int div_up(int a, int b) { return (a + b - 1) / b; }

struct TileCoord {
    int m, n;  // tile indices: rows [m * BM, m * BM + BM), columns [n * 128, n * 128 + 128)
};

// The swizzled tile order: a grouped raster. The M-tiles are cut into groups
// of kGroupM consecutive ones (the last group may be smaller: `rows` below);
// each group takes kGroupM * tiles_n consecutive block indices, and within a
// group consecutive blocks walk M first:
//   per_group = kGroupM * tiles_n,  group = b / per_group,  first_m = group * kGroupM,
//   rows = min(tiles_m - first_m, kGroupM),  r = b % per_group,
//   tile = (first_m + r % rows, r / rows).
// So blocks that run at the same time share a few columns of B (and rows of
// A), which stay in L2. A bijection of [0, tiles_m * tiles_n) onto the tiles.
__host__ __device__ inline TileCoord grouped_tile(int b, int tiles_m, int tiles_n)
{
    const int per_group = kGroupM * tiles_n;
    const int group = b / per_group;
    const int first_m = group * kGroupM;
    const int rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
    const int r = b - group * per_group;
    return {first_m + r % rows, r / rows};
}

// The plain row-major tile order, (b / tiles_n, b % tiles_n): the order of a
// 2-D grid (x = N tile, y = M tile) numbered as one. Only the unswizzled_tile
// defect uses it.
__host__ __device__ inline TileCoord raster_tile(int b, int tiles_n) { return {b / tiles_n, b % tiles_n}; }

// ue8m0 byte -> float: 2^(e - 127), exactly.
__device__ __forceinline__ float decode_ue8m0(uint32_t e)
{
    if (e == 0u) return __uint_as_float(0x00400000u);    // 2^-127, subnormal
    if (e == 255u) return __uint_as_float(0x7fc00000u);  // NaN
    return __uint_as_float(e << 23);                     // biased exponent e, mantissa 0
}

// The scale of K-block kb in a packed ue8m0 element.
template <ScaleDefect Defect>
__device__ __forceinline__ float unpack_ue8m0(int32_t packed, int kb)
{
    int byte = kb % 4;
    if constexpr (Defect == ScaleDefect::ue8m0_byte_order) {
        // PLANTED DEFECT: the bytes are read from the most significant end:
        // K-block kb takes byte 3 - kb % 4, so K-blocks 0..3 of each element
        // get the scales of K-blocks 3..0. DeepGEMM packs K-block kb into byte
        // kb % 4, the least significant first. With every byte 127 (scale 1.0)
        // nothing changes; with different scales per K-block the output is
        // wrong. (When KB % 4 != 0 the last element's padding bytes are read.)
        byte = 3 - byte;
    }
    return decode_ue8m0((static_cast<uint32_t>(packed) >> (8 * byte)) & 0xffu);
}

// SA(m, kb) as a float.
template <ScaleFormat F, ScaleDefect Defect>
__device__ __forceinline__ float load_scale_a(const ScaleT<F>* __restrict__ SA, int m, int kb, int num_kb)
{
    if constexpr (F == ScaleFormat::f32) {
        return SA[static_cast<size_t>(m) * num_kb + kb];
    } else {
        const int words = div_up(num_kb, 4);
        return unpack_ue8m0<Defect>(SA[static_cast<size_t>(m) * words + kb / 4], kb);
    }
}

// SB(kb, nb) as a float; nb is the 128-column block, tiles_n = ceil(N / 128) columns.
template <ScaleFormat F, ScaleDefect Defect>
__device__ __forceinline__ float load_scale_b(const ScaleT<F>* __restrict__ SB, int kb, int nb, int tiles_n)
{
    if constexpr (F == ScaleFormat::f32) {
        return SB[static_cast<size_t>(kb) * tiles_n + nb];
    } else {
        return unpack_ue8m0<Defect>(SB[static_cast<size_t>(kb / 4) * tiles_n + nb], kb);
    }
}

// Global -> shared: rows [row0, row0 + ROWS) and columns [k0, k0 + 128) of a
// row-major [rows, K] fp8 matrix, into dst as [ROWS][kRowWords] words (128
// bytes of data, one word of padding a row). Bytes outside the matrix are
// zero. kVec is the width of one global load: 16, 8 or 4 bytes, which needs K
// and src to be multiples of it (so a chunk is wholly inside or wholly
// outside); 1 reads the four bytes of a chunk one at a time, for any K.
template <int ROWS, int kVec>
__device__ __forceinline__ void load_fp8_tile(uint32_t* dst, const uint8_t* __restrict__ src, int rows, int K,
                                              int row0, int k0)
{
    constexpr int kBytes = kVec == 1 ? 4 : kVec;  // bytes per chunk
    constexpr int kWords = kBytes / 4;
    constexpr int kChunksPerRow = kBlockK / kBytes;  // 8, 16 or 32: divides kThreads
    constexpr int kStep = kThreads / kChunksPerRow;  // rows between a thread's chunks
    constexpr int kPerThread = ROWS / kStep;
    static_assert(kThreads % kChunksPerRow == 0 && ROWS % kStep == 0,
                  "the chunks must divide evenly among the threads");

    // Thread t loads chunk t % kChunksPerRow of rows t / kChunksPerRow + s * kStep.
    const int r0 = static_cast<int>(threadIdx.x) / kChunksPerRow;
    const int c = static_cast<int>(threadIdx.x) % kChunksPerRow * kBytes;  // byte column in the K-block
    const int rows_left = rows - row0 - r0;  // chunk s is inside the matrix iff s * kStep < rows_left ...
    const int k_left = K - k0 - c;           // ... and k_left > 0 (its byte q iff q < k_left)
    // One pointer walked down the rows: indexing each chunk from src instead
    // lets nvcc hoist kPerThread 64-bit addresses out of the K loop (and spill).
    const uint8_t* p = src + (static_cast<size_t>(row0 + r0) * K + k0 + c);
    const size_t step = static_cast<size_t>(kStep) * K;
    uint32_t* d = dst + r0 * kRowWords + c / 4;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
        const bool in = s * kStep < rows_left && k_left > 0;
        uint32_t w[kWords];
        if constexpr (kVec == 16) {
            const uint4 v = in ? *reinterpret_cast<const uint4*>(p) : make_uint4(0u, 0u, 0u, 0u);
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else if constexpr (kVec == 8) {
            const uint2 v = in ? *reinterpret_cast<const uint2*>(p) : make_uint2(0u, 0u);
            w[0] = v.x, w[1] = v.y;
        } else if constexpr (kVec == 4) {
            w[0] = in ? *reinterpret_cast<const uint32_t*>(p) : 0u;
        } else {
            static_assert(kVec == 1, "chunk loads are 16, 8, 4 or 1 byte wide");
            uint32_t v = 0u;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if (in && q < k_left) v |= static_cast<uint32_t>(p[q]) << (8 * q);
            }
            w[0] = v;
        }
#pragma unroll
        for (int q = 0; q < kWords; ++q) d[q] = w[q];
        p += step;
        d += kStep * kRowWords;
    }
}

// Both operand tiles of the K-block at k0.
template <int BM, int kVec>
__device__ __forceinline__ void load_operands(uint32_t* As, uint32_t* Bs, const uint8_t* __restrict__ A,
                                              const uint8_t* __restrict__ B, int M, int N, int K, int m0, int n0,
                                              int k0)
{
    load_fp8_tile<BM, kVec>(As, A, M, K, m0, k0);
    load_fp8_tile<kTileN, kVec>(Bs, B, N, K, n0, k0);  // B as stored: [N, K]
}

// Two e4m3 values (the low 16 bits of `bits`, the lower byte first) -> float2.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t bits)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits & 0xffffu), __NV_E4M3);
    return __half22float2(__half2(h));
}

}  // namespace fp8_gemm

// __launch_bounds__(256, 1): one resident block per SM is enough, and it lets
// ptxas use up to 255 registers (two TM x 8 fp32 accumulators per thread).
template <int BM, fp8_gemm::ScaleFormat Format, fp8_gemm::ScaleDefect Defect = fp8_gemm::ScaleDefect::none>
__global__ void __launch_bounds__(fp8_gemm::kThreads, 1)
fp8_scaled_gemm(const __nv_fp8_e4m3* __restrict__ A, const __nv_fp8_e4m3* __restrict__ B,
                const fp8_gemm::ScaleT<Format>* __restrict__ SA, const fp8_gemm::ScaleT<Format>* __restrict__ SB,
                __nv_bfloat16* __restrict__ D, int M, int N, int K, float alpha)
{
    using namespace fp8_gemm;
    static_assert(BM == 64 || BM == 128, "BM is 64 or 128");
    static_assert(Defect != ScaleDefect::ue8m0_byte_order || Format == ScaleFormat::ue8m0,
                  "the byte-order defect needs packed ue8m0 scales");
    constexpr int TM = BM / kThreadsM;  // rows per thread: 4 or 8

    __shared__ uint32_t As[BM * kRowWords];      // [BM][33] words: A tile, 128 k's a row
    __shared__ uint32_t Bs[kTileN * kRowWords];  // [128][33] words: B tile, n-major as stored
    __shared__ float sa_s[BM];                   // SA of the tile's rows, this K-block
    __shared__ float sb_s;                       // SB of the tile's column block, this K-block

    const int tiles_m = div_up(M, BM), tiles_n = div_up(N, kTileN);
    const int b = static_cast<int>(blockIdx.x);
    if (b >= tiles_m * tiles_n) return;  // the whole block: no barrier is left waiting

    const TileCoord tile = grouped_tile(b, tiles_m, tiles_n);  // the tile this block computes
    TileCoord scale_tile = tile;                                // the tile whose scales it reads
    if constexpr (Defect == ScaleDefect::unswizzled_tile) {
        // PLANTED DEFECT: the scales are read for the tile of the unswizzled
        // (row-major) order, while A, B and D use the swizzled one. Left over
        // from the 2-D-grid version of this kernel, where blockIdx.y / blockIdx.x
        // were the tile; the data path was moved to grouped_tile() and the
        // scale path was not. Every tile whose two coordinates differ scales its
        // rows by another tile's SA rows and its columns by another column
        // block's SB. With all scales 1.0 the output is still right.
        scale_tile = raster_tile(b, tiles_n);
    }

    const int m0 = tile.m * BM, n0 = tile.n * kTileN;
    int scale_m0 = scale_tile.m * BM;
    if constexpr (Defect == ScaleDefect::scale_row_stride) {
        // PLANTED DEFECT: the tile's first scale row counted in K-blocks of
        // rows (kBlockK = 128, the BM of the instantiation this was written
        // for) instead of BM. Right for BM = 128; for BM = 64, M-tile i reads
        // the SA rows of rows 128 i .. 128 i + 63: tile 1 another tile's rows,
        // and every tile with 128 i >= M rows past the end of SA (see the
        // guard below). Should be scale_tile.m * BM.
        scale_m0 = scale_tile.m * kBlockK;
    }
    const int num_kb = div_up(K, kBlockK);
    const int tx = static_cast<int>(threadIdx.x) % kThreadsN, ty = static_cast<int>(threadIdx.x) / kThreadsN;

    const auto* A8 = reinterpret_cast<const uint8_t*>(A);
    const auto* B8 = reinterpret_cast<const uint8_t*>(B);
    // The widest chunk that K and both base addresses allow (uniform over the grid).
    const unsigned align = static_cast<unsigned>(K) | static_cast<unsigned>(reinterpret_cast<uintptr_t>(A8)) |
                           static_cast<unsigned>(reinterpret_cast<uintptr_t>(B8));
    const int vec = align % 16u == 0u ? 16 : align % 8u == 0u ? 8 : align % 4u == 0u ? 4 : 1;

    float acc[TM][kTN] = {};  // the promoted, scaled sum over K-blocks

    for (int kb = 0; kb < num_kb; ++kb) {
        const int k0 = kb * kBlockK;
        switch (vec) {
            case 16: load_operands<BM, 16>(As, Bs, A8, B8, M, N, K, m0, n0, k0); break;
            case 8: load_operands<BM, 8>(As, Bs, A8, B8, M, N, K, m0, n0, k0); break;
            case 4: load_operands<BM, 4>(As, Bs, A8, B8, M, N, K, m0, n0, k0); break;
            default: load_operands<BM, 1>(As, Bs, A8, B8, M, N, K, m0, n0, k0); break;
        }
        // Rows past M read row M - 1's scale: such rows are never stored, and
        // every scale load stays inside SA.
        for (int r = static_cast<int>(threadIdx.x); r < BM; r += kThreads) {
            int m = scale_m0 + r < M ? scale_m0 + r : M - 1;
            if constexpr (Defect == ScaleDefect::scale_row_stride) {
                // PLANTED DEFECT, continued: the guard tests the data row the
                // scale is for (m0 + r), which is inside M, not the scale row
                // it reads, so a scale row past M is loaded from past the end
                // of SA. Should test scale_m0 + r, as above.
                m = m0 + r < M ? scale_m0 + r : M - 1;
            }
            sa_s[r] = load_scale_a<Format, Defect>(SA, m, kb, num_kb);
        }
        if (threadIdx.x == 0) sb_s = load_scale_b<Format, Defect>(SB, kb, scale_tile.n, tiles_n);
        __syncthreads();  // tiles and scales are in shared memory before anyone reads them

        // This K-block's unscaled partial sums, in fp32.
        float part[TM][kTN] = {};
        const uint32_t* a_rows = As + ty * kRowWords;  // row ty + 16 i is i * 16 * kRowWords further
        const uint32_t* b_rows = Bs + tx * kRowWords;  // row (column of D) tx + 16 j likewise
#pragma unroll 2
        for (int w = 0; w < kBlockK / 4; ++w) {  // four k's a word
            uint32_t aw[TM], bw[kTN];
#pragma unroll
            for (int i = 0; i < TM; ++i) aw[i] = a_rows[i * kThreadsM * kRowWords + w];
#pragma unroll
            for (int j = 0; j < kTN; ++j) bw[j] = b_rows[j * kThreadsN * kRowWords + w];
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // k = 4w + 2h and 4w + 2h + 1
                float2 a[TM], bv[kTN];
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = e4m3x2_to_float2(aw[i] >> (16 * h));
#pragma unroll
                for (int j = 0; j < kTN; ++j) bv[j] = e4m3x2_to_float2(bw[j] >> (16 * h));
#pragma unroll
                for (int i = 0; i < TM; ++i) {
#pragma unroll
                    for (int j = 0; j < kTN; ++j) {
                        part[i][j] = fmaf(a[i].x, bv[j].x, part[i][j]);
                        part[i][j] = fmaf(a[i].y, bv[j].y, part[i][j]);
                    }
                }
            }
        }

        // Promotion: acc += partial * SA(m, kb) * SB(kb, n / 128).
        const float sb = sb_s;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float s = sa_s[ty + i * kThreadsM] * sb;
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(part[i][j], s, acc[i][j]);
        }
        __syncthreads();  // everyone is done with the tiles and scales before the next K-block overwrites them
    }

    // Epilogue: D = bf16_rn(alpha * acc), masked to the matrix.
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty + i * kThreadsM;
        if (m >= M) break;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int n = n0 + tx + j * kThreadsN;
            if (n < N) D[static_cast<size_t>(m) * N + n] = __float2bfloat16_rn(alpha * acc[i][j]);
        }
    }
}
