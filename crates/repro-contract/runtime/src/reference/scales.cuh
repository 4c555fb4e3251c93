// ---------------------------------------------------------------------------------------------
// repro harness runtime: block scales of a scaled GEMM (reference.scale_a / scale_b;
// docs/spec.md, "Scaled GEMMs: `scale_a`, `scale_b`")
//
//   D[m,n] = alpha * sum over K blocks of SA(m, kb) * SB(kb, n) * sum_{k in kb} A[m,k] B[k,n]
//
// which is the plain GEMM of the scaled operands A'[m,k] = SA(m/bm, k/bk) * A[m,k] and
// B'[k,n] = SB(k/bk, n/bn) * B[k,n]. The references scale every operand element as they widen it
// to double (host: pack_panels; device: pack_operand_kernel), so the fp64 GEMM itself, and its
// speed, are those of the plain GEMM. With power-of-two scales (ue8m0, and every probe) the
// scaled operands are exact; with f32 scales each is exact too (an 8- or 16-bit operand times a
// 24-bit scale fits a double's 53 bits).
//
// A scale tensor holds one scale per block, in its operand's logical order: SA [ceil(M/bm),
// ceil(K/bk)], SB [ceil(K/bk), ceil(N/bn)]. Formats: `f32` (the elements are the scales, any
// float dtype); `ue8m0` in u8 (2^(e - 127), e = 255 is NaN); `ue8m0` in i32, four K blocks per
// element (DeepGEMM's packing): K block kb is byte kb % 4 (byte 0 the least significant) of
// element kb / 4 along the K-block axis. A batched GEMM's scale tensor is [L, ...] (one per batch:
// scale_of_batch views batch l's) or the 2-D shape (shared by every batch: batch_stride 0).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "tensor.cuh"

namespace repro {

enum class ScaleEncoding : int { value, ue8m0, ue8m0_packed };

// One scale operand as both references read it: on the host from `data` = the tensor's host
// bytes, on the device from its device copy.
struct ScaleOperand {
  const unsigned char* data = nullptr;  // null: no scales (every scale 1)
  DType dtype = DType::f32;
  ScaleEncoding encoding = ScaleEncoding::value;
  int64_t strides[2] = {0, 0};  // of the scale tensor, elements
  // The operand's block: block_i along its non-K axis (A: M, B: N), block_k along K.
  int64_t block_i = 1, block_k = 1;
  int i_axis = 0;  // which scale-tensor axis is the non-K one: 0 for SA [M, K], 1 for SB [K, N]
  // Elements from one batch's scales to the next: the leading stride of [L, ...] scales (or a
  // grouped GEMM's [G, ...]), 0 for scales every batch shares.
  int64_t batch_stride = 0;
};

// The scales of batch l (of group l): `s` with its data moved to that batch's; `s` itself when
// every batch shares them or it has none.
REPRO_HD inline ScaleOperand scale_of_batch(ScaleOperand s, int64_t l) {
  if (s.data != nullptr) s.data += l * s.batch_stride * int64_t(dtype_bytes(s.dtype));
  return s;
}

// 2^(e - 127) for a ue8m0 byte; e = 255 is NaN (OCP MX).
REPRO_HD inline double ue8m0_value(unsigned e) { return e == 255 ? NAN : ldexp(1.0, int(e) - 127); }

// The byte of K block kb: of element kb itself, or byte kb % 4 of element kb / 4.
REPRO_HD inline int64_t scale_offset(const ScaleOperand& s, int64_t i_block, int64_t k_block) {
  const int64_t k_index = s.encoding == ScaleEncoding::ue8m0_packed ? k_block / 4 : k_block;
  return s.i_axis == 0 ? i_block * s.strides[0] + k_index * s.strides[1] : k_index * s.strides[0] + i_block * s.strides[1];
}

// The scale of block (i_block, k_block): (m / bm, k / bk) for A, (n / bn, k / bk) for B.
REPRO_HD inline double scale_of_block(const ScaleOperand& s, int64_t i_block, int64_t k_block) {
  const int64_t offset = scale_offset(s, i_block, k_block);
  switch (s.encoding) {
    case ScaleEncoding::value: return decode(s.dtype, s.data, offset);
    case ScaleEncoding::ue8m0: return ue8m0_value(s.data[offset]);
    case ScaleEncoding::ue8m0_packed: return ue8m0_value(s.data[offset * 4 + k_block % 4]);
  }
  return 1.0;
}

// The scale of operand element (i, k): A's (m, k), B's (n, k).
REPRO_HD inline double scale_at(const ScaleOperand& s, int64_t i, int64_t k) {
  if (s.data == nullptr) return 1.0;
  return scale_of_block(s, i / s.block_i, k / s.block_k);
}

// Sets the scale of block (i_block, k_block), which must be a power of two for ue8m0.
inline void set_scale(const ScaleOperand& s, unsigned char* data, int64_t i_block, int64_t k_block, double value) {
  const int64_t offset = scale_offset(s, i_block, k_block);
  if (s.encoding == ScaleEncoding::value) {
    encode(s.dtype, data, offset, value);
    return;
  }
  int exponent = 0;
  std::frexp(value, &exponent);  // value = 0.5 * 2^exponent for a power of two
  const unsigned char byte = static_cast<unsigned char>(std::min(254, std::max(0, exponent - 1 + 127)));
  if (s.encoding == ScaleEncoding::ue8m0) data[offset] = byte;
  else data[offset * 4 + k_block % 4] = byte;
}

// A scaled GEMM's scale tensor: which tensor, how it encodes, the block it scales.
struct ScaleSpec {
  int tensor = -1;  // index into the spec's tensors; -1: no scales
  ScaleEncoding encoding = ScaleEncoding::value;
  int64_t block[2] = {1, 1};  // in the operand's logical order: [bm, bk] for A, [bk, bn] for B
};

// The operand view of scale `spec` over tensor `t`, reading `data` (t's host or device bytes).
// A grouped GEMM's scales of one operand per group are [G, ...], a batched GEMM's may be
// [L, ...]: this views group (batch) 0's, the last two dimensions; scale_of_batch() (and, on the
// host, group_scale_data()) give the others.
inline ScaleOperand scale_operand(const ScaleSpec& spec, const Tensor& t, const unsigned char* data, bool is_a) {
  ScaleOperand s;
  s.data = data;
  s.dtype = t.dtype;
  s.encoding = spec.encoding;
  s.strides[0] = t.strides[t.rank - 2];
  s.strides[1] = t.strides[t.rank - 1];
  s.batch_stride = t.rank == 3 ? t.strides[0] : 0;
  s.i_axis = is_a ? 0 : 1;
  s.block_i = is_a ? spec.block[0] : spec.block[1];
  s.block_k = is_a ? spec.block[1] : spec.block[0];
  return s;
}

// The scale blocks of an operand of extents i_extent x K: [blocks along I, blocks along K].
inline void scale_blocks(const ScaleOperand& s, int64_t i_extent, int64_t K, int64_t* i_blocks, int64_t* k_blocks) {
  *i_blocks = ceil_div(i_extent, s.block_i);
  *k_blocks = ceil_div(K, s.block_k);
}

// The groups a scale tensor holds the scales of: G for a grouped GEMM's [G, ...] scales (L for a
// batched GEMM's [L, ...]), else 1.
inline int64_t scale_groups(const Tensor& t) { return t.rank == 3 ? t.shape[0] : 1; }

// The host bytes where group g's scales begin.
inline unsigned char* group_scale_data(Tensor& t, int64_t g) {
  return t.host.data() + size_t(t.rank == 3 ? g * t.strides[0] : 0) * dtype_bytes(t.dtype);
}

// Sets every scale from f(group, i_block, k_block) on the host copy of the scale tensor (group 0
// when it holds one operand's).
template <typename F>
inline void fill_group_scales(const ScaleOperand& s, Tensor& t, int64_t i_extent, int64_t K, F value) {
  int64_t i_blocks = 0, k_blocks = 0;
  scale_blocks(s, i_extent, K, &i_blocks, &k_blocks);
  for (int64_t g = 0; g < scale_groups(t); ++g)
    for (int64_t ib = 0; ib < i_blocks; ++ib)
      for (int64_t kb = 0; kb < k_blocks; ++kb) set_scale(s, group_scale_data(t, g), ib, kb, value(g, ib, kb));
}

// Sets every scale from f(i_block, k_block), the same in every group.
template <typename F>
inline void fill_scales(const ScaleOperand& s, Tensor& t, int64_t i_extent, int64_t K, F value) {
  fill_group_scales(s, t, i_extent, K, [&](int64_t, int64_t ib, int64_t kb) { return value(ib, kb); });
}

// The scales a ue8m0 tensor gets from its init: 1 for `ones`, random powers of two 2^-3 .. 2^3
// for the random patterns (a counter-based hash of the tensor's seed and the block, as the
// generators do), the file's bytes for `file:` and `values:` (left as loaded). An f32-format
// tensor keeps its generator's values: they are the scales.
inline bool ue8m0_made_from_init(const Init& init) {
  return init.kind != InitKind::file && init.kind != InitKind::values && init.kind != InitKind::groups;
}

// The report's words for what fill_ue8m0_scales makes of `init`.
inline std::string describe_ue8m0_init(const Init& init) {
  if (!ue8m0_made_from_init(init)) return describe_init(init);
  if (init.kind == InitKind::ones) return "ue8m0 scales 1";
  return strprintf("ue8m0 scales 2^-3..2^3 seed %llu", (unsigned long long)init.seed);
}

inline void fill_ue8m0_scales(const ScaleOperand& s, Tensor& t, int64_t i_extent, int64_t K) {
  const InitKind kind = t.init.kind;
  if (!ue8m0_made_from_init(t.init)) return;
  // Every byte 1.0 first: the bytes of a packed element past the last K block hold 1.0 too, so
  // a kernel that reads them (a wrong byte order) still sees a valid scale under --ones.
  std::fill(t.host.begin(), t.host.end(), static_cast<unsigned char>(127));
  const uint64_t stream = stream_of(t.name.c_str());
  int64_t i_blocks = 0, k_blocks = 0;
  scale_blocks(s, i_extent, K, &i_blocks, &k_blocks);
  // The blocks numbered on from one group to the next (a grouped GEMM's [G, ...] scales, a
  // batched GEMM's [L, ...]).
  fill_group_scales(s, t, i_extent, K, [&](int64_t g, int64_t ib, int64_t kb) {
    if (kind == InitKind::ones) return 1.0;
    const uint64_t bits = counter_hash(t.init.seed, stream, uint64_t((g * i_blocks + ib) * k_blocks + kb), 0);
    return std::ldexp(1.0, int(bits % 7) - 3);
  });
}

}  // namespace repro
