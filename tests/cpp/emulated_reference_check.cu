// GPU check of the emulated reference
// (crates/repro-contract/runtime/src/emulated/emulated_reference.cuh): its error bound, and its
// speed beside the fp64 tensor cores'. Run by scripts/gpu-check.sh (part `emulated`);
// tests/runtime.rs only compiles it.
//
//   nvcc -std=c++17 -O2 -Icrates/repro-contract/runtime/include $(printf -- '-I%s ' crates/repro-contract/runtime/src/*/)
//        -gencode=arch=compute_90a,code=sm_90a -o erc tests/cpp/emulated_reference_check.cu
//   (one -I per folder of the runtime's sources: they include one another by bare name, as the
//   artifact holds them flat)
//   ./erc            # the accuracy battery: one line per input class (plain GEMMs, then grouped
//                    # GEMMs with block scales), then "N passed, M failed"
//   ./erc speed [N]  # reference kernels, fp64 tensor cores vs int8 emulation, 2048^3 to 16384^3 (or N^3),
//                    # then what a residual element costs at 8192^3 (or N^3)
//   ./erc stages [N] # one emulated reference at N^3 (default 8192) step by step, each step's host time
//   ./erc kernels [N] # every int8 GEMM kernel on the same slices: the same bits on awkward shapes, then
//                    # each one's time at N^3 (default 8192) for 2 x 2 and 3 x 3 slices
//
// Accuracy: each output is checked against a sum that is exact to ~2^-100 of its terms (Dot2:
// error-free products and sums, Ogita, Rump and Oishi 2005), as |value - exact| / sum_k |a b|
// in units of u = 2^-53. The emulation must stay within the bound it states (its `roundings`,
// docs/tolerances.md), plus one u for the exact sum's own final rounding; the fp64 tensor cores'
// and the host's errors are shown beside it. Inputs whose exponent range needs more slices than
// the emulation takes must make it fall back to the fp64 tensor cores, and say why. Grouped GEMMs
// with block scales (issue 61) go through the grouped reference, each output held to its own
// group's bound (run_grouped_accuracy).
#include "../../crates/repro-contract/runtime/src/run/runtime.cu"
#include "test_rng.h"
#include "test_tensors.h"

#include <functional>

using namespace repro;

namespace {

enum class Fill {
  uniform,       // uniform in [-1, 1]
  ones,          // every element 1
  integers,      // integers in [-7, 7]
  int8_extremes, // -128, 127, -1, 1 mixed
  spread,        // uniform significand times 2^e, e uniform in [-spread, spread]
  cancel,        // A's second half repeats its first, B's second half negates its first: sums exactly 0
  full_mantissa, // every significand bit set (255/128 for bf16), exponents in [-3, 3]
  subnormal,     // f16 subnormals (2^-24 .. 2^-14) beside values near 1
};

struct AccuracyCase {
  const char* name;
  DType a_dtype, b_dtype;
  int64_t L, M, N, K;
  Fill fill;
  int spread;                    // Fill::spread: the exponent range, +-
  bool b_column_major;
  bool c_bias;                   // beta * C and bias (f32)
  double alpha, beta;
  bool expect_emulated;          // false: the emulation must refuse and say why
};

double fill_value(Fill fill, int spread, int64_t k, int64_t K, TestRng& rng, bool is_b, double mirror) {
  switch (fill) {
    case Fill::uniform: return rng.uniform() * 2 - 1;
    case Fill::ones: return 1.0;
    case Fill::integers: return double(int64_t(rng.next() % 15) - 7);
    case Fill::int8_extremes: {
      const double values[4] = {-128, 127, -1, 1};
      return values[rng.next() % 4];
    }
    case Fill::spread: return (rng.uniform() + 0.5) * std::ldexp(rng.next() % 2 ? 1.0 : -1.0, int(rng.next() % uint64_t(2 * spread + 1)) - spread);
    case Fill::cancel:
      if (k < K / 2) return rng.uniform() * 2 - 1;
      return is_b ? -mirror : mirror;
    case Fill::full_mantissa: return (rng.next() % 2 ? 255.0 : -255.0) / 128.0 * std::ldexp(1.0, int(rng.next() % 7) - 3);
    case Fill::subnormal:
      return rng.next() % 2 ? (rng.uniform() * 2 - 1) : std::ldexp(double(rng.next() % 1023 + 1), -24);
  }
  return 0;
}

// Fills a [.., I, K]-indexed operand (A: rows m, B: columns n) element by element through
// matrix offsets, so any stride order works; the cancelling fill mirrors along K.
void fill_operand(Tensor& t, bool is_b, int64_t L, int64_t I, int64_t K, const AccuracyCase& c, TestRng& rng) {
  for (int64_t l = 0; l < (t.rank == 3 ? L : 1); ++l)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t offset = is_b ? matrix_offset(t, l, k, i) : matrix_offset(t, l, i, k);
        double mirror = 0;
        if (c.fill == Fill::cancel && k >= K / 2)
          mirror = decode(t.dtype, t.host.data(), is_b ? matrix_offset(t, l, k - K / 2, i) : matrix_offset(t, l, i, k - K / 2));
        encode(t.dtype, t.host.data(), offset, fill_value(c.fill, c.spread, k, K, rng, is_b, mirror));
      }
}

// Dot2: the sum of products as if in twice the working precision, and sum |a b|.
struct ExactSum {
  double value, magnitude;
};

ExactSum exact_dot(const GemmProblem& p, int64_t l, int64_t m, int64_t n) {
  double s = 0, c = 0, magnitude = 0;
  for (int64_t k = 0; k < p.K; ++k) {
    const double a = matrix_element(*p.a, l, m, k), b = matrix_element(*p.b, l, k, n);
    const double product = a * b, product_error = std::fma(a, b, -product);
    const double t = s + product, z = t - s, sum_error = (s - (t - z)) + (product - z);
    s = t;
    c += product_error + sum_error;
    magnitude += std::fabs(product);
  }
  return {s + c, magnitude};
}

struct CaseResult {
  double emulated = 0, dmma = 0, host = 0;  // max error / (sum |a b| ...), in units of 2^-53
  ReferenceGemmLaunch launch;
};

std::vector<double> device_values(const double* device, int64_t count) {
  std::vector<double> values(static_cast<size_t>(count) + 0);
  REPRO_CUDA_CHECK(cudaMemcpy(values.data(), device, values.size() * sizeof(double), cudaMemcpyDeviceToHost));
  return values;
}

void run_grouped_accuracy(int* passed, int* failed);

int run_accuracy() {
  using F = Fill;
  const DType bf16 = DType::bf16, f16 = DType::f16, f32 = DType::f32, e4m3 = DType::e4m3, i8 = DType::i8;
  const std::vector<AccuracyCase> cases = {
      {"random bf16, uniform [-1, 1]", bf16, bf16, 1, 256, 256, 4096, F::uniform, 0, false, false, 1, 0, true},
      {"random f16, uniform [-1, 1]", f16, f16, 1, 256, 256, 4096, F::uniform, 0, false, false, 1, 0, true},
      {"random f32, uniform [-1, 1]", f32, f32, 1, 256, 256, 4096, F::uniform, 0, false, false, 1, 0, true},
      {"random e4m3, uniform [-1, 1]", e4m3, e4m3, 1, 256, 256, 4096, F::uniform, 0, false, false, 1, 0, true},
      {"random int8, -128 / 127 / -1 / 1", i8, i8, 1, 256, 256, 4096, F::int8_extremes, 0, false, false, 1, 0, true},
      {"all ones, bf16", bf16, bf16, 1, 256, 256, 4096, F::ones, 0, false, false, 1, 0, true},
      {"small integers, bf16", bf16, bf16, 1, 256, 256, 4096, F::integers, 0, false, false, 1, 0, true},
      {"ill-scaled bf16, 2^-20 .. 2^20 in a row", bf16, bf16, 1, 256, 256, 4096, F::spread, 20, false, false, 1, 0, true},
      {"ill-scaled bf16, 2^-60 .. 2^60 in a row", bf16, bf16, 1, 256, 256, 4096, F::spread, 60, false, false, 1, 0, true},
      {"ill-scaled f32, 2^-60 .. 2^60 in a row", f32, f32, 1, 256, 256, 4096, F::spread, 60, false, false, 1, 0, true},
      {"ill-scaled f32, 2^-60 .. 2^60, K = 2^17: more residuals than carried", f32, f32, 1, 64, 64, 131072, F::spread,
       60, false, false, 1, 0, false},
      {"adversarial: exact cancellation, bf16", bf16, bf16, 1, 256, 256, 4096, F::cancel, 0, false, false, 1, 0, true},
      {"adversarial: full significands, bf16", bf16, bf16, 1, 256, 256, 4096, F::full_mantissa, 0, false, false, 1, 0, true},
      {"adversarial: f16 subnormals beside ~1", f16, f16, 1, 256, 256, 4096, F::subnormal, 0, false, false, 1, 0, true},
      {"K = 2^18: int32 sums folded in chunks, bf16", bf16, bf16, 1, 64, 64, 262144, F::uniform, 0, false, false, 1, 0, true},
      {"batched 3, column-major B, ragged 200x136x1000, alpha 1.5, beta C, bias", bf16, bf16, 3, 200, 136, 1000,
       F::uniform, 0, true, true, 1.5, -0.5, true},
  };
  int passed = 0, failed = 0;
  std::printf("| input class | emulated | slices (A x B) | bound (u) | emulated error (u) | fp64 tensor cores (u) | host (u) | |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const AccuracyCase& c : cases) {
    TestRng rng{0x5DEECE66Dull ^ uint64_t(c.M * 131 + c.N * 7 + c.K + int(c.fill) * 1000003 + c.spread)};
    const bool batched = c.L > 1;
    const auto shape = [&](int64_t rows, int64_t cols) {
      return batched ? std::vector<int64_t>{c.L, rows, cols} : std::vector<int64_t>{rows, cols};
    };
    Tensor a = make_tensor("A", Operand{c.a_dtype, shape(c.M, c.K), {}});
    std::vector<int64_t> b_strides;
    if (c.b_column_major) b_strides = batched ? std::vector<int64_t>{c.K * c.N, 1, c.K} : std::vector<int64_t>{1, c.K};
    Tensor b = make_tensor("B", Operand{c.b_dtype, shape(c.K, c.N), b_strides});
    Tensor out = make_tensor("D", Operand{DType::f32, shape(c.M, c.N), {}}, true);
    Tensor cm = make_tensor("C", Operand{DType::f32, shape(c.M, c.N), {}});
    Tensor bias = make_tensor("bias", Operand{DType::f32, {c.N}, {}});
    fill_operand(a, false, c.L, c.M, c.K, c, rng);
    fill_operand(b, true, c.L, c.N, c.K, c, rng);
    for (int64_t i = 0; i < cm.numel(); ++i) encode(DType::f32, cm.host.data(), cm.logical_offset(i), rng.uniform() - 0.5);
    for (int64_t i = 0; i < bias.numel(); ++i) encode(DType::f32, bias.host.data(), i, rng.uniform() - 0.5);
    upload(a);
    upload(b);
    upload(cm);
    upload(bias);
    GemmProblem p{&a, &b, nullptr, nullptr, &out, c.alpha, c.beta, c.L, c.M, c.N, c.K, batched};
    if (c.c_bias) p.c = &cm, p.bias = &bias;

    CaseResult r;
    r.launch = launch_reference_gemm(p, ReferenceMethod::emulated);
    finish_reference_gemm(&r.launch);
    ReferenceGemmLaunch dmma = launch_reference_gemm(p, ReferenceMethod::dmma);
    finish_reference_gemm(&dmma);
    const int64_t count = c.L * c.M * c.N;
    const std::vector<double> emulated = device_values(r.launch.out, count), fp64 = device_values(dmma.out, count);
    cudaFree(r.launch.out);
    cudaFree(dmma.out);
    std::vector<double> host;
    reference_gemm(p, &host);
    // Every output: its error against the exact sum, relative to what bounds it.
    std::vector<double> worst(3 * size_t(count), 0.0);
    parallel_for(count, 16, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const int64_t l = o / (c.M * c.N), m = o / c.N % c.M, n = o % c.N;
        const ExactSum e = exact_dot(p, l, m, n);
        const double cv = c.c_bias ? matrix_element(cm, l, m, n) : 0.0, bv = c.c_bias ? decode(DType::f32, bias.host.data(), n) : 0.0;
        const double exact = epilogue_value(p, e.value, cv, bv);
        const double scale = std::fabs(c.alpha) * e.magnitude + std::fabs(c.beta * cv) + std::fabs(bv);
        const double unit = std::ldexp(std::max(scale, 1e-300), -53);
        const size_t i = size_t(o);
        worst[3 * i] = std::fabs(emulated[i] - exact) / unit;
        worst[3 * i + 1] = std::fabs(fp64[i] - exact) / unit;
        worst[3 * i + 2] = std::fabs(host[i] - exact) / unit;
      }
    });
    for (int64_t o = 0; o < count; ++o) {
      r.emulated = std::max(r.emulated, worst[3 * size_t(o)]);
      r.dmma = std::max(r.dmma, worst[3 * size_t(o) + 1]);
      r.host = std::max(r.host, worst[3 * size_t(o) + 2]);
    }
    // The bound: the emulation's roundings, the epilogue's (beta C, bias: two more), and the
    // exact sum's own final rounding.
    const double bound = r.launch.roundings + (c.c_bias ? 2 : 0) + 1;
    std::string slices = "-", verdict;
    bool ok;
    if (r.launch.emulated) {
      // The plan ("exact slices: A 2 x B 2 = 4 int8 GEMMs"), after the kernel's name, whose own
      // "TMA multicast" once passed for the plan's "A ".
      const size_t found = r.launch.engine.find("exact "), at = found == std::string::npos ? 0 : found;
      slices = r.launch.engine.substr(at, r.launch.engine.find(", error", at) - at);
      ok = c.expect_emulated && r.emulated <= bound;
      verdict = ok ? "ok" : (c.expect_emulated ? "FAILED: over the bound" : "FAILED: emulated, should have refused");
    } else {
      ok = !c.expect_emulated && !r.launch.fallback.empty() && r.emulated <= 64;
      verdict = ok ? "falls back: " + r.launch.fallback : "FAILED: fell back: " + r.launch.fallback;
    }
    std::printf("| %s | %s | %s | %s | %.2f | %.2f | %.2f | %s |\n", c.name, r.launch.emulated ? "yes" : "no",
                slices.c_str(), r.launch.emulated ? strprintf("%.0f", bound).c_str() : "-", r.emulated, r.dmma, r.host,
                verdict.c_str());
    (ok ? passed : failed)++;
    for (Tensor* t : {&a, &b, &cm, &bias}) cudaFree(t->device);
  }
  run_grouped_accuracy(&passed, &failed);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

// ------------------------------------------------------------------------ grouped, with block scales
//
// Grouped GEMMs with block scales (issue 61) through the grouped reference
// (compute_device_grouped_reference, grouped.cuh): each group's GEMM is a plain one on windows of
// the operands and of their scales, emulated where the emulation takes it. Every output is judged
// as above, against the exact sum of its scaled products over its group's K range, indexed
// straight from the whole tensors rather than through the runtime's windows: a window that reads
// another group's rows or scales shows as an error instead of being repeated by the check.
//
// The operands are e4m3 (4 significant bits) and the scales f32 with random 24-bit significands
// or ue8m0 powers of two, so SA * A and SB * B have at most 28 significant bits each and are
// exact in a double; their product (up to 56 bits) is split exactly by TwoProduct, so Dot2's sum
// is as exact as for unscaled inputs. The scales spread over 2^-8 .. 2^8, so that a scaled row
// spans ~16 bits more than its elements and the slicing has to carry them.
//
// Each group's GEMM is planned on its own inputs and states its own roundings: the battery runs
// each group's GEMM again alone to learn its plan and bound, checks each output against its own
// group's bound, and checks that the grouped reference wrote that launch's bits.

// The element of `t` at `index` (one entry per dimension), through its strides, from its host bytes.
double element_at(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0, d = 0;
  for (int64_t i : index) offset += i * t.strides[d++];
  return decode(t.dtype, t.host.data(), offset);
}

// K block `kb` of a packed ue8m0 scale tensor (four K blocks to an i32 element, byte kb % 4, the
// least significant first): `index` names the element, its K-block entry at `k_axis` replaced by
// kb / 4.
double packed_ue8m0_at(const Tensor& t, std::vector<int64_t> index, int k_axis, int64_t kb) {
  index[size_t(k_axis)] = kb / 4;
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides[d];
  return ue8m0_value(t.host[size_t(offset * 4 + kb % 4)]);
}

// An f32 scale with a random significand, 2^-8 .. 2^9; a ue8m0 byte for 2^-8 .. 2^8.
double spread_scale(TestRng& rng) { return (1.0 + rng.uniform()) * std::ldexp(1.0, int(rng.next() % 17) - 8); }
unsigned char spread_ue8m0(TestRng& rng) { return static_cast<unsigned char>(127 - 8 + int(rng.next() % 17)); }

void fill_e4m3(Tensor& t, TestRng& rng) {
  for (int64_t i = 0; i < t.numel(); ++i) encode(t.dtype, t.host.data(), t.logical_offset(i), rng.uniform() * 2 - 1);
}

// An output's scaled products over its group's K range, x[k] = SA A and y[k] = SB B (the vectors
// cleared, then filled); false where the output is not compared (padding rows, rows past
// masked_m).
using ScaledTerms = std::function<bool(int64_t batch, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y)>;

// One group's GEMM run alone, as the grouped reference runs it.
struct GroupLaunch {
  int64_t group = 0;
  bool emulated = false;
  int roundings = 0;
  std::string plan, fallback;
};

// The plan ("exact slices: A 2 x B 2 = 4 int8 GEMMs") out of an emulated launch's engine.
std::string plan_of(const std::string& engine) {
  const size_t found = engine.find("exact "), at = found == std::string::npos ? 0 : found;
  return engine.substr(at, engine.find(", error", at) - at);
}

// Judges the grouped reference of `p` (its metadata read and checked first, as the harness
// does) and prints its row. `fallback_group`: the group whose GEMM the emulation must refuse
// and say why (-1: every group's must be emulated); its outputs, the fp64 tensor cores', are held
// to 64 u as the plain battery's fallback is.
bool check_grouped_case(const char* name, GroupedProblem& p, const ScaledTerms& terms, int64_t fallback_group) {
  p.groups = read_group_metadata(p);
  check_group_scale_blocks(p);
  const int64_t count = p.output_count();
  // beta C: its product and its addition, as the plain battery's epilogue; and the exact sum's
  // own final rounding.
  const double extra = (p.c != nullptr ? 2 : 0) + 1;
  std::vector<double> alone(size_t(count), not_compared_value()), bound(size_t(count), extra);
  std::vector<GroupLaunch> launches;
  for (const GroupGemm& gg : group_gemms(p)) {
    if (gg.k == 0) continue;  // no GEMM: the grouped reference writes zeros (or beta C) itself
    const GroupOperands operands = group_operands(p, gg, /*host_bytes*/ false);
    ReferenceGemmLaunch launch = launch_reference_gemm(group_problem(p, gg, operands), ReferenceMethod::emulated);
    finish_reference_gemm(&launch);
    const int64_t offset = output_offset(p, gg), outputs = gg.rows * p.N;
    const std::vector<double> values = device_values(launch.out, outputs);
    cudaFree(launch.out);
    std::copy(values.begin(), values.end(), alone.begin() + std::ptrdiff_t(offset));
    std::fill_n(bound.begin() + std::ptrdiff_t(offset), size_t(outputs), launch.emulated ? launch.roundings + extra : 64.0);
    launches.push_back({gg.group, launch.emulated, launch.roundings, launch.emulated ? plan_of(launch.engine) : "-",
                        launch.fallback});
  }
  const DeviceReference emulated_reference = compute_device_grouped_reference(p, ReferenceMethod::emulated);
  const DeviceReference fp64_reference = compute_device_grouped_reference(p, ReferenceMethod::dmma);
  const std::vector<double> emulated = device_values(emulated_reference.values, count),
                            fp64 = device_values(fp64_reference.values, count);
  cudaFree(emulated_reference.values);
  cudaFree(fp64_reference.values);
  std::vector<double> host;
  reference_grouped_gemm(p, &host);

  // Per output: the three errors in u, whether it is over its bound, whether the grouped reference
  // wrote other bits than its group's GEMM alone, whether a reference wrote where none should.
  std::vector<double> worst(3 * size_t(count), 0.0);
  std::vector<unsigned char> over(size_t(count), 0), differ(size_t(count), 0), written(size_t(count), 0);
  const int64_t per_batch = p.M * p.N;
  parallel_for(count, 16, [&](int64_t begin, int64_t end) {
    std::vector<double> x, y;
    for (int64_t o = begin; o < end; ++o) {
      const int64_t l = o / per_batch, m = o / p.N % p.M, n = o % p.N;
      const size_t i = size_t(o);
      x.clear(), y.clear();
      if (!terms(l, m, n, &x, &y)) {
        written[i] = !is_not_compared(emulated[i]) || !is_not_compared(fp64[i]) || !is_not_compared(host[i]);
        continue;
      }
      double s = 0, c = 0, magnitude = 0;
      for (size_t k = 0; k < x.size(); ++k) {
        const double product = x[k] * y[k], product_error = std::fma(x[k], y[k], -product);
        const double t = s + product, z = t - s, sum_error = (s - (t - z)) + (product - z);
        s = t;
        c += product_error + sum_error;
        magnitude += std::fabs(product);
      }
      const double cv = p.c != nullptr ? matrix_element(*p.c, l, m, n) : 0.0;
      const double exact = p.alpha * (s + c) + (p.c != nullptr ? p.beta * cv : 0.0);
      const double scale = std::fabs(p.alpha) * magnitude + (p.c != nullptr ? std::fabs(p.beta * cv) : 0.0);
      const double unit = std::ldexp(std::max(scale, 1e-300), -53);
      worst[3 * i] = std::fabs(emulated[i] - exact) / unit;
      worst[3 * i + 1] = std::fabs(fp64[i] - exact) / unit;
      worst[3 * i + 2] = std::fabs(host[i] - exact) / unit;
      over[i] = !(worst[3 * i] <= bound[i]);
      // Empty K ranges run no GEMM of their own: nothing alone to compare with.
      differ[i] = !is_not_compared(alone[i]) && double_bits(alone[i]) != double_bits(emulated[i]);
    }
  });
  double emulated_error = 0, fp64_error = 0, host_error = 0;
  int64_t over_count = 0, differ_count = 0, written_count = 0;
  for (int64_t o = 0; o < count; ++o) {
    const size_t i = size_t(o);
    emulated_error = std::max(emulated_error, worst[3 * i]);
    fp64_error = std::max(fp64_error, worst[3 * i + 1]);
    host_error = std::max(host_error, worst[3 * i + 2]);
    over_count += over[i], differ_count += differ[i], written_count += written[i];
  }

  // Which groups were emulated, their plans and bounds; which fell back and why.
  int64_t emulated_groups = 0;
  int lowest = 0, highest = 0;
  std::string plans, fallback, wrong_groups;
  for (const GroupLaunch& g : launches) {
    if (g.emulated != (g.group != fallback_group))
      wrong_groups += strprintf("%sgroup %lld %s", wrong_groups.empty() ? "" : ", ", (long long)g.group,
                                g.emulated ? "emulated, should have refused" : "fell back");
    if (!g.emulated) {
      if (fallback.empty()) fallback = g.fallback;
      continue;
    }
    lowest = emulated_groups == 0 ? g.roundings : std::min(lowest, g.roundings);
    highest = emulated_groups == 0 ? g.roundings : std::max(highest, g.roundings);
    ++emulated_groups;
    if (plans.find(g.plan) == std::string::npos) plans += (plans.empty() ? "" : "; ") + g.plan;
  }
  const int64_t gemms = int64_t(launches.size());
  std::string bound_text = "-";
  if (emulated_groups > 0)
    bound_text = lowest == highest ? strprintf("%.0f", highest + extra)
                                   : strprintf("%.0f-%.0f", lowest + extra, highest + extra);
  std::string verdict;
  if (!wrong_groups.empty()) verdict = "FAILED: " + wrong_groups + (fallback.empty() ? "" : ": " + fallback);
  else if (fallback_group >= 0 && (fallback.empty() || emulated_reference.fallback.empty()))
    verdict = "FAILED: fell back without saying why";
  else if (over_count > 0) verdict = strprintf("FAILED: %lld outputs over their group's bound", (long long)over_count);
  else if (differ_count > 0)
    verdict = strprintf("FAILED: %lld outputs differ from their group's GEMM alone", (long long)differ_count);
  else if (written_count > 0)
    verdict = strprintf("FAILED: %lld outputs not compared were written", (long long)written_count);
  else verdict = fallback_group >= 0 ? strprintf("ok; group %lld falls back: %s", (long long)fallback_group, fallback.c_str())
                                      : "ok";
  const std::string emulated_text =
      emulated_groups == gemms ? strprintf("yes, all %lld GEMMs", (long long)gemms)
                               : strprintf("%lld of %lld GEMMs", (long long)emulated_groups, (long long)gemms);
  std::printf("| %s | %s | %s | %s | %.2f | %.2f | %.2f | %s |\n", name, emulated_text.c_str(),
              plans.empty() ? "-" : plans.c_str(), bound_text.c_str(), emulated_error, fp64_error, host_error,
              verdict.c_str());
  std::fflush(stdout);
  return verdict.rfind("ok", 0) == 0;
}

// A group-index (contiguous) or per-group (masked, k_grouped) metadata tensor holding `values`.
Tensor metadata_tensor(const char* name, const std::vector<int64_t>& values) {
  Tensor t = make_tensor(name, Operand{DType::i32, {int64_t(values.size())}, {}});
  for (size_t i = 0; i < values.size(); ++i) encode(DType::i32, t.host.data(), int64_t(i), double(values[i]));
  return t;
}

void run_grouped_accuracy(int* passed, int* failed) {
  const DType e4m3 = DType::e4m3, f32 = DType::f32, i32 = DType::i32, u8 = DType::u8;
  constexpr int64_t BK = 128, BN = 128;  // DeepGEMM's blocks: 128 of K, 128 of N for the weights
  const auto tally = [&](bool ok) { (ok ? *passed : *failed) += 1; };
  const auto free_all = [](std::initializer_list<Tensor*> tensors) {
    for (Tensor* t : tensors) cudaFree(t->device);
  };
  TestRng rng{0x61u};
  {
    // Contiguous: groups of 200, 0, 333 and 64 rows, each padded to 16 (rows of index -1), then
    // 32 rows of padding. B [G, K, N] K-major (DeepGEMM's [G, N, K] weights); SA f32 [M_total,
    // KB] per row and 128 of K, MN-major; SB f32 [G, KB, NB] per 128 x 128. K = 1000 ends in a
    // partial block, N = 384.
    const int64_t G = 4, M = 640, N = 384, K = 1000, KB = ceil_div(K, BK), NB = ceil_div(N, BN);
    std::vector<int64_t> index(size_t(M), -1);
    const int64_t starts[] = {0, 200, 208, 544}, sizes[] = {200, 0, 333, 64};
    for (int64_t g = 0; g < G; ++g)
      for (int64_t m = starts[g]; m < starts[g] + sizes[g]; ++m) index[size_t(m)] = g;
    Tensor a = make_tensor("A", Operand{e4m3, {M, K}, {}});
    Tensor b = make_tensor("B", Operand{e4m3, {G, K, N}, {K * N, 1, K}});
    Tensor sa = make_tensor("SA", Operand{f32, {M, KB}, {1, M}});
    Tensor sb = make_tensor("SB", Operand{f32, {G, KB, NB}, {}});
    Tensor meta = metadata_tensor("I", index);
    Tensor d = make_tensor("D", Operand{f32, {M, N}, {}}, true);
    fill_e4m3(a, rng), fill_e4m3(b, rng);
    for (Tensor* s : {&sa, &sb})
      for (int64_t i = 0; i < s->numel(); ++i) encode(f32, s->host.data(), s->logical_offset(i), spread_scale(rng));
    for (Tensor* t : {&a, &b, &sa, &sb, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = GroupedLayout::contiguous, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = BK;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = BN;
    tally(check_grouped_case(
        "grouped contiguous e4m3, groups 200 / 0 / 333 / 64 of 640 rows, K 1000, SA f32 [1, 128] SB f32 [128, 128] "
        "2^-8..2^8",
        p,
        [&](int64_t, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y) {
          const int64_t g = index[size_t(m)];
          if (g < 0) return false;
          for (int64_t k = 0; k < K; ++k) {
            x->push_back(element_at(a, {m, k}) * element_at(sa, {m, k / BK}));
            y->push_back(element_at(b, {g, k, n}) * element_at(sb, {g, k / BK, n / BN}));
          }
          return true;
        },
        -1));
    free_all({&a, &b, &sa, &sb, &meta});
  }
  {
    // Masked: 4 groups of up to 256 rows, masked_m 256, 0, 77, 1; SA and SB packed ue8m0 (four K
    // blocks to an i32; K = 896 is 7 blocks, so each row's second element has a byte no block
    // reads); alpha 1.5, beta -0.5 C.
    const int64_t G = 4, M = 256, N = 320, K = 896, KB = ceil_div(K, BK), KP = ceil_div(KB, 4), NB = ceil_div(N, BN);
    const std::vector<int64_t> masked_m = {256, 0, 77, 1};
    Tensor a = make_tensor("A", Operand{e4m3, {G, M, K}, {}});
    Tensor b = make_tensor("B", Operand{e4m3, {G, K, N}, {K * N, 1, K}});
    Tensor sa = make_tensor("SA", Operand{i32, {G, M, KP}, {}});
    Tensor sb = make_tensor("SB", Operand{i32, {G, KP, NB}, {}});
    Tensor c = make_tensor("C", Operand{f32, {G, M, N}, {}});
    Tensor meta = metadata_tensor("MM", masked_m);
    Tensor d = make_tensor("D", Operand{f32, {G, M, N}, {}}, true);
    fill_e4m3(a, rng), fill_e4m3(b, rng);
    // Every byte a spread scale, the unread ones too (a kernel reading them would show).
    for (Tensor* s : {&sa, &sb})
      for (unsigned char& byte : s->host) byte = spread_ue8m0(rng);
    for (int64_t i = 0; i < c.numel(); ++i) encode(f32, c.host.data(), i, rng.uniform() - 0.5);
    for (Tensor* t : {&a, &b, &sa, &sb, &c, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb, p.c = &c, p.alpha = 1.5, p.beta = -0.5;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.encoding = ScaleEncoding::ue8m0_packed;
    p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = BK;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0_packed;
    p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = BN;
    tally(check_grouped_case(
        "grouped masked e4m3, 4 x 256 rows, masked_m 256 / 0 / 77 / 1, K 896, SA SB packed ue8m0 2^-8..2^8, alpha "
        "1.5, beta C",
        p,
        [&](int64_t g, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y) {
          if (m >= masked_m[size_t(g)]) return false;
          for (int64_t k = 0; k < K; ++k) {
            x->push_back(element_at(a, {g, m, k}) * packed_ue8m0_at(sa, {g, m, 0}, 2, k / BK));
            y->push_back(element_at(b, {g, k, n}) * packed_ue8m0_at(sb, {g, 0, n / BN}, 1, k / BK));
          }
          return true;
        },
        -1));
    free_all({&a, &b, &sa, &sb, &c, &meta});
  }
  {
    // k_grouped (a weight gradient): K ranges 512, 0, 128, 640 of K_total 1408 (the last 128
    // columns in no group); A [M, K_total] and B [K_total, N] both MN-major; SA f32 [M, KB]
    // per row, SB f32 [KB, NB], each group's scales from its K range's first block.
    const int64_t G = 4, M = 256, N = 200, K = 1408, KB = ceil_div(K, BK), NB = ceil_div(N, BN);
    const std::vector<int64_t> k_sizes = {512, 0, 128, 640};
    Tensor a = make_tensor("A", Operand{e4m3, {M, K}, {1, M}});
    Tensor b = make_tensor("B", Operand{e4m3, {K, N}, {}});
    Tensor sa = make_tensor("SA", Operand{f32, {M, KB}, {}});
    Tensor sb = make_tensor("SB", Operand{f32, {KB, NB}, {}});
    Tensor meta = metadata_tensor("KS", k_sizes);
    Tensor d = make_tensor("D", Operand{f32, {G, M, N}, {}}, true);
    fill_e4m3(a, rng), fill_e4m3(b, rng);
    for (Tensor* s : {&sa, &sb})
      for (int64_t i = 0; i < s->numel(); ++i) encode(f32, s->host.data(), s->logical_offset(i), spread_scale(rng));
    for (Tensor* t : {&a, &b, &sa, &sb, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = BK;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = BN;
    std::vector<int64_t> k_first(size_t(G), 0);
    for (int64_t g = 1; g < G; ++g) k_first[size_t(g)] = k_first[size_t(g - 1)] + k_sizes[size_t(g - 1)];
    tally(check_grouped_case(
        "grouped k_grouped e4m3, K ranges 512 / 0 / 128 / 640 of 1408, MN-major A and B, SA SB f32 2^-8..2^8", p,
        [&](int64_t g, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y) {
          for (int64_t k = k_first[size_t(g)]; k < k_first[size_t(g)] + k_sizes[size_t(g)]; ++k) {
            x->push_back(element_at(a, {m, k}) * element_at(sa, {m, k / BK}));
            y->push_back(element_at(b, {k, n}) * element_at(sb, {k / BK, n / BN}));
          }
          return true;
        },
        -1));
    free_all({&a, &b, &sa, &sb, &meta});
  }
  {
    // k_grouped_blocks (DeepGEMM's k-grouped weight gradient): A flat, group g's [M, k_g] block
    // at M * k0(g); B flat, its [N, k_g] block at N * k0(g); SA flat f32, [M, k_g / 128] blocks;
    // SB flat ue8m0 in u8, [N, k_g / 128] blocks (one scale per column of B and 128 of K).
    const int64_t G = 4, M = 128, N = 160, K = 768;
    const std::vector<int64_t> k_sizes = {256, 0, 384, 128};
    Tensor a = make_tensor("A", Operand{e4m3, {M * K}, {}});
    Tensor b = make_tensor("B", Operand{e4m3, {N * K}, {}});
    Tensor sa = make_tensor("SA", Operand{f32, {M * K / BK}, {}});
    Tensor sb = make_tensor("SB", Operand{u8, {N * K / BK}, {}});
    Tensor meta = metadata_tensor("KS", k_sizes);
    Tensor d = make_tensor("D", Operand{f32, {G, M, N}, {}}, true);
    fill_e4m3(a, rng), fill_e4m3(b, rng);
    for (int64_t i = 0; i < sa.numel(); ++i) encode(f32, sa.host.data(), i, spread_scale(rng));
    for (unsigned char& byte : sb.host) byte = spread_ue8m0(rng);
    for (Tensor* t : {&a, &b, &sa, &sb, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped_blocks, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = BK;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0;
    p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = 1;
    std::vector<int64_t> k_first(size_t(G), 0);
    for (int64_t g = 1; g < G; ++g) k_first[size_t(g)] = k_first[size_t(g - 1)] + k_sizes[size_t(g - 1)];
    tally(check_grouped_case(
        "grouped k_grouped_blocks e4m3, K ranges 256 / 0 / 384 / 128, SA f32 SB ue8m0 per row and 128 of K, "
        "2^-8..2^8",
        p,
        [&](int64_t g, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y) {
          const int64_t k0 = k_first[size_t(g)], kg = k_sizes[size_t(g)];
          for (int64_t k = 0; k < kg; ++k) {
            x->push_back(element_at(a, {M * k0 + m * kg + k}) * element_at(sa, {M * k0 / BK + m * (kg / BK) + k / BK}));
            y->push_back(element_at(b, {N * k0 + n * kg + k}) *
                         ue8m0_value(sb.host[size_t(N * k0 / BK + n * (kg / BK) + k / BK)]));
          }
          return true;
        },
        -1));
    free_all({&a, &b, &sa, &sb, &meta});
  }
  {
    // k_grouped where one group cannot be emulated: group 1's K range of 2^17 has scales over
    // 2^-60 .. 2^60 (per row and 128 of K), so most of its scaled elements lie more than 8
    // slices (or 52 bits) below their row's largest: more than the 2^22 residuals carried. That
    // group falls back to the fp64 tensor cores and says why; group 0 stays emulated.
    const int64_t G = 2, M = 64, N = 64, K0 = 512, K = K0 + (int64_t(1) << 17), KB = ceil_div(K, BK);
    const std::vector<int64_t> k_sizes = {K0, K - K0};
    Tensor a = make_tensor("A", Operand{e4m3, {M, K}, {}});
    Tensor b = make_tensor("B", Operand{e4m3, {K, N}, {1, K}});
    Tensor sa = make_tensor("SA", Operand{f32, {M, KB}, {}});
    Tensor sb = make_tensor("SB", Operand{f32, {KB, 1}, {}});
    Tensor meta = metadata_tensor("KS", k_sizes);
    Tensor d = make_tensor("D", Operand{f32, {G, M, N}, {}}, true);
    fill_e4m3(a, rng), fill_e4m3(b, rng);
    const auto wide_scale = [&](int64_t kb) {
      if (kb < K0 / BK) return spread_scale(rng);
      return (1.0 + rng.uniform()) * std::ldexp(1.0, int(rng.next() % 121) - 60);
    };
    for (int64_t m = 0; m < M; ++m)
      for (int64_t kb = 0; kb < KB; ++kb) encode(f32, sa.host.data(), m * KB + kb, wide_scale(kb));
    for (int64_t kb = 0; kb < KB; ++kb) encode(f32, sb.host.data(), kb, wide_scale(kb));
    for (Tensor* t : {&a, &b, &sa, &sb, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = BK;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.block[0] = BK, p.scale_b_spec.block[1] = N;
    tally(check_grouped_case(
        "grouped k_grouped e4m3, K ranges 512 / 2^17, group 1's f32 scales 2^-60..2^60: more residuals than carried",
        p,
        [&](int64_t g, int64_t m, int64_t n, std::vector<double>* x, std::vector<double>* y) {
          const int64_t k_begin = g == 0 ? 0 : K0, k_end = g == 0 ? K0 : K;
          for (int64_t k = k_begin; k < k_end; ++k) {
            x->push_back(element_at(a, {m, k}) * element_at(sa, {m, k / BK}));
            y->push_back(element_at(b, {k, n}) * element_at(sb, {k / BK, 0}));
          }
          return true;
        },
        1));
    free_all({&a, &b, &sa, &sb, &meta});
  }
}

// ------------------------------------------------------------------------ speed

// Uniform [-1, 1] inputs made on the device (a hash of the index), rounded to the dtype.
__global__ void fill_uniform_kernel(DType dtype, unsigned char* data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t x = (uint64_t(i) + seed) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
    encode(dtype, data, i, double(x >> 11) * 0x1.0p-52 - 1.0);
  }
}

// Device copies of `a` and `b` (no host copies), uniform in [-1, 1], with seeds `seed` and
// `seed + 1`.
void make_uniform_on_device(Tensor& a, Tensor& b, uint64_t seed) {
  a.host.clear(), b.host.clear();
  REPRO_CUDA_CHECK(cudaMalloc(&a.device, a.storage_bytes()));
  REPRO_CUDA_CHECK(cudaMalloc(&b.device, b.storage_bytes()));
  fill_uniform_kernel<<<4096, 256>>>(a.dtype, static_cast<unsigned char*>(a.device), a.numel(), seed);
  fill_uniform_kernel<<<4096, 256>>>(b.dtype, static_cast<unsigned char*>(b.device), b.numel(), seed + 1);
  REPRO_CUDA_CHECK(cudaGetLastError());
}

// Square operands of `dtype`, uniform in [-1, 1] and made on the device, and an f32 output
// (host side only), for the timing modes.
struct UniformOperands {
  Tensor a, b, out;
  int64_t size;
  UniformOperands(DType dtype, int64_t size_)
      : a(make_tensor("A", Operand{dtype, {size_, size_}, {}})),
        b(make_tensor("B", Operand{dtype, {size_, size_}, {}})),
        out(make_tensor("D", Operand{DType::f32, {size_, size_}, {}}, true)),
        size(size_) {
    make_uniform_on_device(a, b, 1);
  }
  UniformOperands(const UniformOperands&) = delete;
  UniformOperands& operator=(const UniformOperands&) = delete;
  ~UniformOperands() {
    cudaFree(a.device);
    cudaFree(b.device);
  }
  GemmProblem problem() { return GemmProblem{&a, &b, nullptr, nullptr, &out, 1.0, 0.0, 1, size, size, size, false}; }
};

double median_ms(const GemmProblem& p, ReferenceMethod method, std::string* engine) {
  std::vector<double> times;
  for (int round = 0; round < 4; ++round) {
    ReferenceGemmLaunch launch = launch_reference_gemm(p, method);
    const double ms = finish_reference_gemm(&launch);
    cudaFree(launch.out);
    if (round > 0) times.push_back(ms);  // the first warms up
    *engine = launch.engine;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The emulation's passes before its GEMM (analysis with its read-back, slicing), by events.
double preparation_ms(const GemmProblem& p) {
  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
  REPRO_CUDA_CHECK(cudaEventRecord(start));
  const OperandAnalysis a_rows = analyze_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, ScaleOperand());
  const OperandAnalysis b_rows = analyze_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, ScaleOperand());
  const EmulationPlan plan = plan_emulation(p, a_rows, b_rows, emulation_rates());
  const SlicedOperand a_slices = slice_operand(a, a.row_stride, a.col_stride, p.M, p.K, ScaleOperand(), a_rows,
                                               plan.a_slices, kWgmmaTileM, plan.moduli() ? plan.a_bits : 0);
  const SlicedOperand b_slices = slice_operand(b, b.col_stride, b.row_stride, p.N, p.K, ScaleOperand(), b_rows,
                                               plan.b_slices, kWgmmaTileN, plan.moduli() ? plan.b_bits : 0);
  REPRO_CUDA_CHECK(cudaEventRecord(stop));
  REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  for (void* buffer : {(void*)a_rows.extent.top, (void*)b_rows.extent.top, (void*)a_slices.data, (void*)b_slices.data})
    cudaFree(buffer);
  return ms;
}

// What a residual element costs (the planner's kResidualSecondsPerTerm): uniform [-1, 1] bf16
// operands cut into `slices` slices each, so that the elements below 2^(-7 slices + 1) of their
// row's largest are residuals; their corrections alone, by events, per term (one output a
// residual reaches). The median of 3.
void residual_cost_line(const GemmProblem& p, int slices) {
  const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
  const OperandAnalysis a_rows = analyze_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, ScaleOperand());
  const OperandAnalysis b_rows = analyze_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, ScaleOperand());
  const int64_t a_count = a_rows.beyond(slices), b_count = b_rows.beyond(slices);
  std::vector<void*> scratch = {a_rows.extent.top, b_rows.extent.top};
  const SlicedOperand a_slices = slice_operand(a, a.row_stride, a.col_stride, p.M, p.K, ScaleOperand(), a_rows, slices, kWgmmaTileM);
  const SlicedOperand b_slices = slice_operand(b, b.col_stride, b.row_stride, p.N, p.K, ScaleOperand(), b_rows, slices, kWgmmaTileN);
  scratch.push_back(a_slices.data), scratch.push_back(b_slices.data);
  const Residuals a_residuals = collect_residuals(a, a.row_stride, a.col_stride, a_slices.batches, p.M, p.K,
                                                  ScaleOperand(), a_slices.top, a_slices.bits, a_count, &scratch);
  const Residuals b_residuals = collect_residuals(b, b.col_stride, b.row_stride, b_slices.batches, p.N, p.K,
                                                  ScaleOperand(), b_slices.top, b_slices.bits, b_count, &scratch);
  double* out = allocate_reference_doubles(p.L * p.M * p.N, "the output");
  const CorrectionArgs args{a, b, ScaleOperand(), ScaleOperand(), a_slices.top, a_slices.bits, a_slices.batches,
                            b_slices.batches, out, 1.0, p.L, p.M, p.N, p.K};
  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int round = 0; round < 3; ++round) {
    REPRO_CUDA_CHECK(cudaEventRecord(start));
    launch_residual_corrections(args, a_residuals, b_residuals);
    REPRO_CUDA_CHECK(cudaEventRecord(stop));
    REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  const double terms = double(a_count) * double(p.N) + double(b_count) * double(p.M);
  std::printf("residuals of %s %lld^3 at %d x %d slices: %lld + %lld elements, %.3e terms, corrections %.2f ms, "
              "%.2f ps a term\n",
              dtype_name(p.a->dtype), (long long)p.M, slices, slices, (long long)a_count, (long long)b_count, terms,
              times[1], terms > 0 ? times[1] * 1e9 / terms : 0.0);
  cudaFree(out);
  for (void* buffer : scratch) cudaFree(buffer);
}

int run_speed(int64_t only_size) {
  std::printf("| M = N = K | inputs | fp64 tensor cores (ms) | emulated (ms) | of which analysis and slicing (ms) | emulated / fp64 | emulation |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t size : {2048, 4096, 8192, 16384}) {
    if (only_size != 0 && size != only_size) continue;
    for (DType dtype : {DType::bf16, DType::f16, DType::e4m3, DType::f32}) {
      UniformOperands operands(dtype, size);
      const GemmProblem p = operands.problem();
      std::string dmma_engine, emulated_engine;
      const double dmma = median_ms(p, ReferenceMethod::dmma, &dmma_engine);
      const double emulated = median_ms(p, ReferenceMethod::emulated, &emulated_engine);
      const double preparation = preparation_ms(p);
      std::printf("| %lld | %s | %.2f | %.2f | %.2f | %.2fx | %s |\n", (long long)size, dtype_name(dtype), dmma,
                  emulated, preparation, emulated / dmma, emulated_engine.c_str());
      std::fflush(stdout);
    }
  }
  // The residuals' cost, at 2 and 3 slices (~64 and ~0.5 residual elements a row).
  const int64_t size = only_size != 0 ? only_size : 8192;
  UniformOperands operands(DType::bf16, size);
  for (int slices : {2, 3}) residual_cost_line(operands.problem(), slices);
  return 0;
}


// The sum of an output's bit patterns modulo 2^64 (order-free): two builds of the emulation
// print the same for the same bits.
__global__ void bits_sum_kernel(const double* values, int64_t count, unsigned long long* sum) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    local += static_cast<unsigned long long>(__double_as_longlong(values[i]));
  atomicAdd(sum, local);
}

unsigned long long bits_sum(const double* values, int64_t count) {
  unsigned long long* sum = nullptr;
  unsigned long long host = 0;
  REPRO_CUDA_CHECK(cudaMalloc(&sum, sizeof host));
  REPRO_CUDA_CHECK(cudaMemset(sum, 0, sizeof host));
  bits_sum_kernel<<<1024, 256>>>(values, count, sum);
  REPRO_CUDA_CHECK(cudaMemcpy(&host, sum, sizeof host, cudaMemcpyDeviceToHost));
  cudaFree(sum);
  return host;
}

// One emulated reference step by step, each timed on the host with the device drained after it
// (so a step's time holds its allocations, copies and waits as well as its kernels): where the
// time outside the int8 GEMMs goes. Under ncu the same run gives each kernel's own time.
int run_stages(int64_t size) {
  std::printf("| inputs | plan | analysis A | analysis B | plan | slicing A | slicing B | residuals | output | GEMMs | corrections | frees | total (ms) | the output's bits, summed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (DType dtype : {DType::bf16, DType::f16, DType::e4m3, DType::f32}) {
    UniformOperands operands(dtype, size);
    const GemmProblem p = operands.problem();
    for (int round = 0; round < 2; ++round) {  // the first warms up
      REPRO_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> ms;
      auto last = std::chrono::steady_clock::now();
      const auto step = [&] {
        REPRO_CUDA_CHECK(cudaDeviceSynchronize());
        const auto now = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
      };
      const DeviceMatrix da = device_matrix(operands.a), db = device_matrix(operands.b);
      const OperandAnalysis a_rows = analyze_operand(da, da.row_stride, da.col_stride, p.L, p.M, p.K, ScaleOperand());
      step();
      const OperandAnalysis b_rows = analyze_operand(db, db.col_stride, db.row_stride, p.L, p.N, p.K, ScaleOperand());
      step();
      const EmulationPlan plan = plan_emulation(p, a_rows, b_rows, emulation_rates());
      step();
      const SlicedOperand a_slices = slice_operand(da, da.row_stride, da.col_stride, p.M, p.K, ScaleOperand(), a_rows,
                                                   plan.a_slices, kWgmmaTileM, plan.moduli() ? plan.a_bits : 0);
      step();
      const SlicedOperand b_slices = slice_operand(db, db.col_stride, db.row_stride, p.N, p.K, ScaleOperand(), b_rows,
                                                   plan.b_slices, kWgmmaTileN, plan.moduli() ? plan.b_bits : 0);
      step();
      std::vector<void*> scratch;
      const Residuals a_residuals = collect_residuals(da, da.row_stride, da.col_stride, a_slices.batches, p.M, p.K,
                                                      ScaleOperand(), a_slices.top, plan.a_bits, plan.a_residuals, &scratch);
      const Residuals b_residuals = collect_residuals(db, db.col_stride, db.row_stride, b_slices.batches, p.N, p.K,
                                                      ScaleOperand(), b_slices.top, plan.b_bits, plan.b_residuals, &scratch);
      step();
      double* result = allocate_reference_doubles(p.L * p.M * p.N, "its output");
      step();
      int roundings = 0;
      launch_emulated_gemm(p, plan, a_slices, b_slices, result, &roundings, &scratch);
      step();
      const CorrectionArgs corrections{da, db, ScaleOperand(), ScaleOperand(), a_slices.top, plan.a_bits,
                                       a_slices.batches, b_slices.batches, result, p.alpha, p.L, p.M, p.N, p.K};
      launch_residual_corrections(corrections, a_residuals, b_residuals);
      step();
      const unsigned long long checksum = bits_sum(result, p.L * p.M * p.N);
      last = std::chrono::steady_clock::now();  // the checksum is not a step
      for (void* buffer : scratch) cudaFree(buffer);
      for (void* buffer : {(void*)a_rows.extent.top, (void*)b_rows.extent.top, (void*)a_slices.data,
                           (void*)b_slices.data, (void*)result})
        cudaFree(buffer);
      step();
      if (round == 0) continue;
      double total = 0;
      std::string row = strprintf("| %s | %s |", dtype_name(dtype), describe_planes(plan).c_str());
      for (double t : ms) row += strprintf(" %.2f |", t), total += t;
      std::printf("%s %.2f | %016llx |\n", row.c_str(), total, checksum);
      std::fflush(stdout);
    }
  }
  return 0;
}

// ------------------------------------------------------------------------ the int8 kernels

// Outputs of `a` and `b` (count doubles each, on the device) that differ in any bit.
__global__ void count_differences_kernel(const double* a, const double* b, int64_t count, unsigned long long* differ) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    local += __double_as_longlong(a[i]) != __double_as_longlong(b[i]);
  if (local != 0) atomicAdd(differ, local);
}

unsigned long long count_differences(const double* a, const double* b, int64_t count) {
  unsigned long long* differ = nullptr;
  REPRO_CUDA_CHECK(cudaMalloc(&differ, sizeof(unsigned long long)));
  REPRO_CUDA_CHECK(cudaMemset(differ, 0, sizeof(unsigned long long)));
  count_differences_kernel<<<1024, 256>>>(a, b, count, differ);
  unsigned long long host = 0;
  REPRO_CUDA_CHECK(cudaMemcpy(&host, differ, sizeof(host), cudaMemcpyDeviceToHost));
  cudaFree(differ);
  return host;
}

// Uniform [-1, 1] operands of `dtype` cut into `slices` slices each, or with `moduli_bits`,
// into residues of integers of that width modulo `slices` moduli (the elements beyond either
// left out: the kernels are compared, not the reference), and every available kernel run on
// them: each one's output against mma.sync's, bit for bit, and with `time`, each one's median of
// 3 runs after a warm-up. Returns the number of kernels whose output differs.
int compare_kernels(const char* name, DType dtype, int64_t L, int64_t M, int64_t N, int64_t K, int slices, bool time,
                    int moduli_bits = 0) {
  const bool batched = L > 1;
  const auto shape = [&](int64_t rows, int64_t cols) {
    return batched ? std::vector<int64_t>{L, rows, cols} : std::vector<int64_t>{rows, cols};
  };
  Tensor a = make_tensor("A", Operand{dtype, shape(M, K), {}});
  Tensor b = make_tensor("B", Operand{dtype, shape(K, N), {}});
  Tensor out = make_tensor("D", Operand{DType::f32, shape(M, N), {}}, true);
  make_uniform_on_device(a, b, 3);
  const GemmProblem p{&a, &b, nullptr, nullptr, &out, 1.0, 0.0, L, M, N, K, batched};
  const DeviceMatrix am = device_matrix(a), bm = device_matrix(b);
  const OperandAnalysis a_rows = analyze_operand(am, am.row_stride, am.col_stride, L, M, K, ScaleOperand());
  const OperandAnalysis b_rows = analyze_operand(bm, bm.col_stride, bm.row_stride, L, N, K, ScaleOperand());
  EmulationPlan plan;
  plan.a_slices = plan.b_slices = slices;
  plan.scheme = moduli_bits > 0 ? EmulationScheme::moduli : EmulationScheme::slices;
  plan.a_bits = plan.b_bits = moduli_bits > 0 ? moduli_bits : kEmulationSliceBits * slices;
  const SlicedOperand a_slices =
      slice_operand(am, am.row_stride, am.col_stride, M, K, ScaleOperand(), a_rows, slices, kWgmmaTileM, moduli_bits);
  const SlicedOperand b_slices =
      slice_operand(bm, bm.col_stride, bm.row_stride, N, K, ScaleOperand(), b_rows, slices, kWgmmaTileN, moduli_bits);
  std::vector<void*> scratch;
  const int64_t count = L * M * N;
  double* expected = allocate_reference_doubles(count, "mma.sync's output");
  double* actual = allocate_reference_doubles(count, "the output");
  int roundings = 0, differing = 0;
  launch_emulated_gemm(p, plan, a_slices, b_slices, expected, &roundings, &scratch, EmulatedKernel::mma_sync);
  REPRO_CUDA_CHECK(cudaDeviceSynchronize());
  std::string times;
  for (int k = 0; k < kEmulatedKernels; ++k) {
    const EmulatedKernel kernel = EmulatedKernel(k);
    if (!emulated_kernel_available(kernel)) continue;
    REPRO_CUDA_CHECK(cudaMemset(actual, 0xFF, size_t(count) * sizeof(double)));  // NaNs: a missed output shows
    launch_emulated_gemm(p, plan, a_slices, b_slices, actual, &roundings, &scratch, kernel);
    REPRO_CUDA_CHECK(cudaDeviceSynchronize());
    const unsigned long long differ = count_differences(expected, actual, count);
    differing += differ != 0;
    std::string cell = differ == 0 ? "same bits" : strprintf("**%llu outputs differ**", differ);
    if (time) {
      std::vector<double> ms;
      for (int round = 0; round < 4; ++round) {
        cudaEvent_t start, stop;
        REPRO_CUDA_CHECK(cudaEventCreate(&start));
        REPRO_CUDA_CHECK(cudaEventCreate(&stop));
        REPRO_CUDA_CHECK(cudaEventRecord(start));
        std::vector<void*> buffers;
        launch_emulated_gemm(p, plan, a_slices, b_slices, actual, &roundings, &buffers, kernel);
        REPRO_CUDA_CHECK(cudaEventRecord(stop));
        REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
        float elapsed = 0;
        REPRO_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
        if (round > 0) ms.push_back(elapsed);  // the first warms up
        for (void* buffer : buffers) cudaFree(buffer);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
      }
      std::sort(ms.begin(), ms.end());
      // int8 operations a second (2 per multiply-add), over every int8 GEMM. The time is the
      // whole launch_emulated_gemm: for moduli also the residue planes' allocation and the
      // reconstruction, which the planner counts apart.
      const double tops = 2.0 * double(count) * double(K) * plan.pairs() / (ms[1] * 1e-3) / 1e12;
      cell += strprintf(", %.2f ms, %.0f int8 TOPS%s", ms[1], tops, moduli_bits > 0 ? " with the reconstruction" : "");
    }
    times += strprintf(" %s: %s |", emulated_kernel_title(kernel), cell.c_str());
  }
  std::printf("| %s | %s |%s\n", name, describe_planes(plan).c_str(), times.c_str());
  std::fflush(stdout);
  for (void* buffer : {(void*)a_rows.extent.top, (void*)b_rows.extent.top, (void*)a_slices.data, (void*)b_slices.data,
                       (void*)expected, (void*)actual, a.device, b.device})
    cudaFree(buffer);
  for (void* buffer : scratch) cudaFree(buffer);
  return differing;
}

int run_kernels(int64_t size) {
  const DType bf16 = DType::bf16;
  std::printf("| case | slices | each kernel against mma.sync |\n|---|---|---|\n");
  int differing = 0;
  // Ragged edges in M, N and K; batches; an odd number of 128-row tiles (a cluster of two
  // rounds the grid up); K long enough that a level folds in several chunks.
  differing += compare_kernels("ragged 200 x 136 x 1000", bf16, 1, 200, 136, 1000, 3, false);
  differing += compare_kernels("batched 3, 384 x 512 x 4096 (3 tiles of M)", bf16, 3, 384, 512, 4096, 2, false);
  differing += compare_kernels("K = 2^18, 64 x 300: folds within a level", bf16, 1, 64, 300, 262144, 3, false);
  differing += compare_kernels("one slice, 1000 x 1000 x 777", DType::i8, 1, 1000, 1000, 777, 1, false);
  differing += compare_kernels("moduli, batched 3, 200 x 136 x 1000", DType::f32, 3, 200, 136, 1000, 8, false, 24);
  differing += compare_kernels("moduli, K = 2^18, 64 x 300", DType::f32, 1, 64, 300, 262144, 11, false, 32);
  differing += compare_kernels(strprintf("%lld^3", (long long)size).c_str(), bf16, 1, size, size, size, 2, true);
  differing += compare_kernels(strprintf("%lld^3", (long long)size).c_str(), bf16, 1, size, size, size, 3, true);
  differing += compare_kernels(strprintf("%lld^3", (long long)size).c_str(), DType::f32, 1, size, size, size, 11, true, 36);
  std::printf("%s\n", differing == 0 ? "every kernel gives the same bits" : "FAILED: kernels differ");
  return differing == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  set_command_line(argc, argv);
  if (no_cuda_device()) return kExitNoDevice;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!mode.empty() && mode != "speed" && mode != "kernels" && mode != "stages") {
    std::fprintf(stderr, "usage: %s [speed [N] | kernels [N] | stages [N]]\n", argv[0]);
    return kExitUsage;
  }
  if (mode == "speed") return run_speed(argc > 2 ? std::atoll(argv[2]) : 0);
  if (mode == "kernels") return run_kernels(argc > 2 ? std::atoll(argv[2]) : 8192);
  if (mode == "stages") return run_stages(argc > 2 ? std::atoll(argv[2]) : 8192);
  return run_accuracy();
}
