// GPU check of the device reference
// (crates/repro-contract/runtime/src/reference/device_reference.cuh): every output of the fp64
// device GEMM against the host reference (reference_gemm), over ragged sizes, every operand layout
// the kernel distinguishes, batches, alpha, beta * C, bias and mixed dtypes. Run by
// scripts/gpu-check.sh (part `reference`); tests/runtime.rs only compiles it, for the three code
// paths of the kernel (sm_90a: m16n8k4 DMMA, sm_80: m8n8k4 DMMA, sm_75: FMA).
//
//   nvcc -std=c++17 -O2 -Icrates/repro-contract/runtime/include $(printf -- '-I%s ' crates/repro-contract/runtime/src/*/)
//        -gencode=arch=compute_90a,code=sm_90a -o drc tests/cpp/device_reference_check.cu
//   (one -I per folder of the runtime's sources: they include one another by bare name, as the
//   artifact holds them flat)
//   ./drc                               # one line per case, then "N passed, M failed"
//   ./drc corrupt                       # damages one sampled output: the cross-check must exit 4
//   ./drc ops                           # scaled and grouped GEMMs (docs/spec.md, `reference`), bit for bit
//   ./drc compare                       # the device comparison against the host's, and its time
//   ./drc parts 1024,2048,4096          # the fp64 reference's parts timed: packing, cuBLAS, in all
//   REPRO_CUBLAS=all ./drc [ops|corrupt] # the same with cuBLAS's DGEMM for every GEMM (off: never)
//
// Integer-valued cases must agree bit for bit (their sums are exact in any order); the others
// within 1e-13 of the magnitude of their terms (fp64 sums in two orders).
// The whole runtime library, as one translation unit (what librepro_runtime.a is built from).
#include "../../crates/repro-contract/runtime/src/run/runtime.cu"
#include "test_rng.h"
#include "test_tensors.h"

using namespace repro;

namespace {

struct Case {
  const char* name;
  Operand a, b;
  int64_t L, M, N, K;
  bool integers;      // small integers: every sum exact, so device == host bit for bit
  bool with_c_bias;   // beta * C (f32) and bias (f32)
  double alpha, beta;
};

void fill(Tensor& t, bool integers, TestRng& rng) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double value = integers ? double(int64_t(rng.next() % 15) - 7)
                                  : (rng.uniform() * 2 - 1) * std::ldexp(1.0, int(rng.next() % 9) - 4);
    encode(t.dtype, t.host.data(), t.logical_offset(i), value);  // rounded to the dtype: exact operands
  }
}

// The operands of a case, on both sides.
struct Problem {
  Tensor a, b, c, bias, out;
  GemmProblem gemm;
  ~Problem() {
    for (Tensor* t : {&a, &b, &c, &bias, &out})
      if (t->device != nullptr) cudaFree(t->device);
  }
};

void build(const Case& k, Problem* p) {
  TestRng rng{0x9E3779B97F4A7C15ull ^ uint64_t(k.M * 131 + k.N * 7 + k.K)};
  p->a = make_tensor("A", k.a);
  p->b = make_tensor("B", k.b);
  const std::vector<int64_t> out_shape = k.L > 1 ? std::vector<int64_t>{k.L, k.M, k.N} : std::vector<int64_t>{k.M, k.N};
  p->out = make_tensor("D", Operand{DType::f32, out_shape, {}}, true);
  fill(p->a, k.integers, rng);
  fill(p->b, k.integers, rng);
  upload(p->a);
  upload(p->b);
  p->gemm = GemmProblem{&p->a, &p->b, nullptr, nullptr, &p->out, k.alpha, k.beta, k.L, k.M, k.N, k.K, k.L > 1};
  if (k.with_c_bias) {
    p->c = make_tensor("C", Operand{DType::f32, out_shape, {}});
    p->bias = make_tensor("bias", Operand{DType::f32, {k.N}, {}});
    fill(p->c, k.integers, rng);
    fill(p->bias, k.integers, rng);
    upload(p->c);
    upload(p->bias);
    p->gemm.c = &p->c;
    p->gemm.bias = &p->bias;
  }
}

// The largest |device - host| relative to sum_k |a b| (+ |beta c| + |bias|) of its output, and
// how many outputs differ at all.
struct Agreement {
  int64_t differing = 0;
  double worst = 0;
};

Agreement agreement(const Problem& p, const std::vector<double>& device, const std::vector<double>& host) {
  const GemmProblem& g = p.gemm;
  Agreement result;
  for (int64_t l = 0; l < g.L; ++l)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t n = 0; n < g.N; ++n) {
        const size_t i = size_t((l * g.M + m) * g.N + n);
        if (device[i] == host[i]) continue;
        double scale = 0;
        for (int64_t k = 0; k < g.K; ++k)
          scale += std::fabs(matrix_element(*g.a, l, m, k) * matrix_element(*g.b, l, k, n));
        scale = std::fabs(g.alpha) * scale + std::fabs(host[i]) + 1e-300;
        ++result.differing;
        result.worst = std::max(result.worst, std::fabs(device[i] - host[i]) / scale);
      }
  return result;
}

int run_cases() {
  // Strides are in elements. "k-contiguous" and "i-contiguous" are the two load orders of the
  // kernel's tile loader (OperandTileLoad); padded strides and a shared (rank-2) B under a batched
  // A exercise its address arithmetic.
  const std::vector<Case> cases = {
      {"bf16 A row-major x B row-major, ragged 257x263x259, integers",
       {DType::bf16, {257, 259}, {}}, {DType::bf16, {259, 263}, {}}, 1, 257, 263, 259, true, false, 1.0, 0.0},
      {"bf16 A row-major x B column-major, one whole tile 128x128x16",
       {DType::bf16, {128, 16}, {}}, {DType::bf16, {16, 128}, {1, 16}}, 1, 128, 128, 16, false, false, 1.0, 0.0},
      {"f32 A column-major x B row-major, alpha 2, beta -0.5 C, bias, 300x200x1000",
       {DType::f32, {300, 1000}, {1, 300}}, {DType::f32, {1000, 200}, {}}, 1, 300, 200, 1000, false, true, 2.0, -0.5},
      {"batched f16 A (padded strides) x shared e4m3 B, 3x70x90x45, integers, C and bias",
       {DType::f16, {3, 70, 45}, {70 * 48 + 5, 48, 1}}, {DType::e4m3, {45, 90}, {1, 45}}, 3, 70, 90, 45, true, true, 1.0, 1.0},
      {"f64 x f64, 1x1x1",
       {DType::f64, {1, 1}, {}}, {DType::f64, {1, 1}, {}}, 1, 1, 1, 1, false, false, 1.0, 0.0},
      {"f64 x f64, 5x300x3 (K below one k-step of 4)",
       {DType::f64, {5, 3}, {}}, {DType::f64, {3, 300}, {}}, 1, 5, 300, 3, false, false, -1.5, 0.0},
      {"i8 x u8, 129x130x131, integers",
       {DType::i8, {129, 131}, {}}, {DType::u8, {131, 130}, {}}, 1, 129, 130, 131, true, false, 1.0, 0.0},
      {"e5m2 A column-major x i32 B column-major, 2x33x200x77 batched, integers",
       {DType::e5m2, {2, 33, 77}, {33 * 77, 1, 33}}, {DType::i32, {2, 77, 200}, {77 * 200, 1, 77}}, 2, 33, 200, 77,
       true, false, 1.0, 0.0},
      {"bf16 A row-major x B column-major, 1024x1024x1024",
       {DType::bf16, {1024, 1024}, {}}, {DType::bf16, {1024, 1024}, {1, 1024}}, 1, 1024, 1024, 1024, false, false,
       1.0, 0.0},
  };
  int passed = 0, failed = 0;
  std::printf("device reference kernel: %s\n", reference_engine().c_str());
  for (const Case& k : cases) {
    Problem p;
    build(k, &p);
    std::vector<double> host;
    reference_gemm(p.gemm, &host);
    const DeviceReference reference = compute_device_reference(p.gemm, ReferenceMethod::dmma);
    std::vector<double> device(host.size());
    REPRO_CUDA_CHECK(
        cudaMemcpy(device.data(), reference.values, device.size() * sizeof(double), cudaMemcpyDeviceToHost));
    cudaFree(reference.values);
    const Agreement a = agreement(p, device, host);
    const bool ok = k.integers ? a.differing == 0 : a.worst <= 1e-13;
    (ok ? passed : failed) += 1;
    std::printf("%-4s %s: %lld outputs, %lld differ from the host (worst %.1e of the terms' magnitude; %s), "
                "%s %.3f ms, cross-check of %lld samples\n",
                ok ? "ok" : "FAIL", k.name, (long long)host.size(), (long long)a.differing, a.worst,
                k.integers ? "must be 0" : "bound 1e-13", reference.engine.c_str(), reference.kernel_ms,
                (long long)reference.check.samples);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

// A device reference that the host disagrees with: one sampled output of a correct GEMM is
// overwritten between the kernel and the judging, as a faulty GPU might have computed it.
int corrupt_one_output() {
  const Case k = {"bf16 512x512x512", {DType::bf16, {512, 512}, {}}, {DType::bf16, {512, 512}, {}}, 1, 512, 512, 512,
                  false, false, 1.0, 0.0};
  Problem p;
  build(k, &p);
  CrossCheckSample sample = fetch_cross_check_sample(p.gemm);
  ReferenceGemmLaunch launch = launch_reference_gemm(p.gemm, ReferenceMethod::dmma);
  double* values = launch.out;
  compute_cross_check_sample(p.gemm, &sample);
  finish_reference_gemm(&launch);
  const int64_t victim = sample.output_offset(p.gemm, sample.count() / 2);
  double wrong = 0;
  REPRO_CUDA_CHECK(cudaMemcpy(&wrong, values + victim, sizeof(double), cudaMemcpyDeviceToHost));
  wrong = wrong * (1 + 1e-6) + 1e-3;  // far above the 1e-10 bound, far below any visible error
  REPRO_CUDA_CHECK(cudaMemcpy(values + victim, &wrong, sizeof(double), cudaMemcpyHostToDevice));
  // Fetched after the damage (a check fetches them right behind its GEMM, which wrote them).
  StoredValues sampled = fetch_sampled_device_values(p.gemm, sample, values);
  judge_cross_check_sample(p.gemm, sample, sampled);  // exits 4 (kExitCudaError) through fatal()
  std::printf("the cross-check accepted a damaged reference\n");
  return 1;
}

// The scaled and grouped GEMMs (docs/spec.md, `reference`) on the device against the host, bit
// for bit (integer operands and power-of-two or small-integer scales: every sum exact in any
// order): a scaled GEMM whose A scales are f32 per row and 128 of K and whose B scales are packed
// ue8m0 (four K blocks to an int32) per 128 x 128, K ending in a partial block; and a grouped
// GEMM in each layout.
int run_op_cases() {
  int passed = 0, failed = 0;
  TestRng rng{0x22u};
  const auto report = [&](const char* name, const std::vector<double>& device, const std::vector<double>& host,
                          double kernel_ms) {
    int64_t differing = 0;
    for (size_t i = 0; i < host.size(); ++i) differing += double_bits(device[i]) != double_bits(host[i]);
    const bool ok = device.size() == host.size() && differing == 0;
    (ok ? passed : failed) += 1;
    std::printf("%-4s %s: %lld outputs, %lld differ from the host bit for bit (must be 0), kernels %.3f ms\n",
                ok ? "ok" : "FAIL", name, (long long)host.size(), (long long)differing, kernel_ms);
  };
  const auto fetch = [](const DeviceReference& r, size_t count) {
    std::vector<double> values(count);
    REPRO_CUDA_CHECK(cudaMemcpy(values.data(), r.values, count * sizeof(double), cudaMemcpyDeviceToHost));
    cudaFree(r.values);
    return values;
  };
  {
    const int64_t M = 300, N = 200, K = 1000, KB = 8;
    Tensor a = make_tensor("A", Operand{DType::e4m3, {M, K}, {}});
    Tensor b = make_tensor("B", Operand{DType::e4m3, {K, N}, {1, K}});
    Tensor sa = make_tensor("SA", Operand{DType::f32, {M, KB}, {1, M}});  // MN-major, as DeepGEMM keeps it
    Tensor sb = make_tensor("SB", Operand{DType::i32, {KB / 4, 2}, {}});
    Tensor d = make_tensor("D", Operand{DType::f32, {M, N}, {}}, true);
    fill(a, true, rng);
    fill(b, true, rng);
    for (int64_t i = 0; i < sa.numel(); ++i) encode(sa.dtype, sa.host.data(), sa.logical_offset(i), double(1 + rng.next() % 5));
    for (unsigned char& byte : sb.host) byte = static_cast<unsigned char>(124 + rng.next() % 7);
    for (Tensor* t : {&a, &b, &sa, &sb}) upload(*t);
    GemmProblem p{&a, &b, nullptr, nullptr, &d, 1.0, 0.0, 1, M, N, K, false};
    p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = 128;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0_packed;
    p.scale_b_spec.block[0] = 128, p.scale_b_spec.block[1] = 128;
    std::vector<double> host;
    reference_gemm(p, &host);
    const DeviceReference r = compute_device_reference(p, ReferenceMethod::dmma);
    report("scaled e4m3 300x200x1000, SA f32 [1, 128] MN-major, SB packed ue8m0 [128, 128]", fetch(r, host.size()),
           host, r.kernel_ms);
    for (Tensor* t : {&a, &b, &sa, &sb}) cudaFree(t->device);
  }
  {
    // Batched, each batch its own scales ([L, ...]): the pack kernel reads batch l's, and the
    // cross-check (compute_device_reference exits 4 where the host's sample disagrees) scales
    // each sampled line with its batch's. The emulated reference falls back, saying why.
    const int64_t L = 3, M = 130, N = 150, K = 600, KB = 5;
    Tensor a = make_tensor("A", Operand{DType::e4m3, {L, M, K}, {}});
    Tensor b = make_tensor("B", Operand{DType::e4m3, {L, K, N}, {K * N, 1, K}});
    Tensor sa = make_tensor("SA", Operand{DType::f32, {L, M, KB}, {M * KB, 1, M}});  // MN-major per batch
    Tensor sb = make_tensor("SB", Operand{DType::i32, {L, 2, 2}, {}});  // packed: ceil(5 / 4) = 2
    Tensor d = make_tensor("D", Operand{DType::f32, {L, M, N}, {}}, true);
    fill(a, true, rng);
    fill(b, true, rng);
    for (int64_t i = 0; i < sa.numel(); ++i) encode(sa.dtype, sa.host.data(), sa.logical_offset(i), double(1 + rng.next() % 5));
    for (unsigned char& byte : sb.host) byte = static_cast<unsigned char>(124 + rng.next() % 7);
    for (Tensor* t : {&a, &b, &sa, &sb}) upload(*t);
    GemmProblem p{&a, &b, nullptr, nullptr, &d, 1.0, 0.0, L, M, N, K, true};
    p.scale_a = &sa, p.scale_b = &sb;
    p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = 128;
    p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0_packed;
    p.scale_b_spec.block[0] = 128, p.scale_b_spec.block[1] = 128;
    std::vector<double> host;
    reference_gemm(p, &host);
    const DeviceReference r = compute_device_reference(p, ReferenceMethod::dmma);
    report("batched scaled e4m3 3x130x150x600, SA f32 [L, ...] MN-major, SB packed ue8m0 [L, ...]",
           fetch(r, host.size()), host, r.kernel_ms);
    const DeviceReference e = compute_device_reference(p, ReferenceMethod::emulated);
    std::printf("     emulated asked for, fell back: %s\n", e.fallback.c_str());
    if (e.fallback.empty()) ++failed;
    report("batched scaled, emulated asked for (the fp64 fallback)", fetch(e, host.size()), host, e.kernel_ms);
    for (Tensor* t : {&a, &b, &sa, &sb}) cudaFree(t->device);
  }
  const int64_t N = 90, K = 64;
  struct Layout {
    const char* name;
    GroupedLayout layout;
    std::vector<int64_t> a_shape, b_shape, out_shape, meta_shape;
    std::vector<double> meta;  // per group (masked, k_grouped); for contiguous: the groups' rows
  };
  const std::vector<Layout> layouts = {
      {"grouped contiguous, groups [100, 0, 150, 37] aligned to 16, 333 rows", GroupedLayout::contiguous,
       {333, K}, {4, K, N}, {333, N}, {333}, {100, 0, 150, 37}},
      {"grouped masked, 4 x 130 rows, masked_m [130, 0, 77, 1]", GroupedLayout::masked,
       {4, 130, K}, {4, K, N}, {4, 130, N}, {4}, {130, 0, 77, 1}},
      {"grouped k_grouped, 150 rows, k_sizes [40, 0, 17, 7] of 70", GroupedLayout::k_grouped,
       {150, 70}, {70, N}, {4, 150, N}, {4}, {40, 0, 17, 7}},
  };
  for (const Layout& l : layouts) {
    Tensor a = make_tensor("A", Operand{DType::bf16, l.a_shape, {}});
    Tensor b = make_tensor("B", Operand{DType::bf16, l.b_shape, {}});
    Tensor meta = make_tensor("G", Operand{DType::i32, l.meta_shape, {}});
    Tensor d = make_tensor("D", Operand{DType::f32, l.out_shape, {}}, true);
    fill(a, true, rng);
    fill(b, true, rng);
    meta.init.kind = l.layout == GroupedLayout::contiguous ? InitKind::groups : InitKind::values;
    meta.init.values = l.meta;
    meta.init.align = 16;
    std::string error;
    fill_host(meta, "", &error);
    for (Tensor* t : {&a, &b, &meta}) upload(*t);
    GroupedProblem p;
    p.layout = l.layout, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d, p.alpha = 0.5;
    p.G = 4, p.M = a.shape[a.rank - 2], p.N = N, p.K = a.shape[a.rank - 1];
    p.groups = read_group_metadata(p);
    std::vector<double> host;
    reference_grouped_gemm(p, &host);
    const DeviceReference r = compute_device_grouped_reference(p, ReferenceMethod::dmma);
    report(l.name, fetch(r, host.size()), host, r.kernel_ms);
    for (Tensor* t : {&a, &b, &meta}) cudaFree(t->device);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

// ------------------------------------------------------------------ the comparison on the device
//
// device_comparison (device_compare.cuh) against the host's compare_output on the same bf16
// output and fp64 reference, with bad, NaN, Inf, unwritten and not-judged outputs among them:
// every count equal, the norms within 1e-10 (their sums run in another order). Then the device
// passes' time (median of 5; the reference's rms, the comparison, and the bitwise comparison of
// two runs), the numbers docs/performance.md quotes. The last case's output is 1.5x the
// reference throughout: its residual takes the device's second pass (residual_squares), the
// others' come from the comparison's sums.
int run_compare_cases() {
  int passed = 0, failed = 0;
  const std::pair<int64_t, double> cases[] = {{2048, 1.0}, {8192, 1.0}, {16384, 1.0}, {2048, 1.5}};
  for (const auto& [n, scale] : cases) {
    TestRng rng{0x5EEDull + uint64_t(n)};
    Tensor out = make_tensor("D", Operand{DType::bf16, {n, n}, {}}, true);
    std::vector<double> want(size_t(n * n));
    for (int64_t i = 0; i < n * n; ++i) {
      want[size_t(i)] = (rng.uniform() * 2 - 1) * 64.0;
      double got = want[size_t(i)] * scale;
      if (i % 1009 == 0) got *= 1.25;                         // bad
      encode(out.dtype, out.host.data(), i, got);
      if (i % 100003 == 1) store_bits(out.dtype, out.host.data(), i, 0xFFFF);  // unwritten (poison)
      if (i % 100003 == 2) encode(out.dtype, out.host.data(), i, std::nan(""));
      if (i % 100003 == 3) encode(out.dtype, out.host.data(), i, HUGE_VAL);
      if (i % 100003 == 4) want[size_t(i)] = not_compared_value();
    }
    upload(out);
    double* want_device = nullptr;
    REPRO_CUDA_CHECK(cudaMalloc(&want_device, want.size() * sizeof(double)));
    REPRO_CUDA_CHECK(cudaMemcpy(want_device, want.data(), want.size() * sizeof(double), cudaMemcpyHostToDevice));
    const Tolerance tol{2e-2, 2e-2, 1e-3, false};
    Comparison device;
    std::vector<double> pass_ms;
    for (int round = 0; round < 5; ++round) {
      REPRO_CUDA_CHECK(cudaDeviceSynchronize());
      const auto start = std::chrono::steady_clock::now();
      const double ref_rms = device_reference_rms(out, want_device, n * n);
      device = device_comparison(out, want_device, 1, n, n, tol, 128, 128, ref_rms);
      pass_ms.push_back(seconds_since(start) * 1e3);
    }
    std::vector<double> differences_ms;
    int64_t differences = 0;
    for (int round = 0; round < 5; ++round) {
      const auto start = std::chrono::steady_clock::now();
      differences = device_differences(out, out.device);
      differences_ms.push_back(seconds_since(start) * 1e3);
    }
    std::sort(pass_ms.begin(), pass_ms.end());
    std::sort(differences_ms.begin(), differences_ms.end());
    const Comparison host = compare_output(out, want, 1, n, n, tol, 128, 128);
    // Every quantity that differs is named with both values: a bare FAIL (as in this check's
    // first GPU run) says nothing about which one.
    std::string differs;
    const auto same = [&](const char* name, double d, double h, double relative) {
      if (d == h || std::fabs(d - h) <= relative * std::fabs(h)) return;
      char line[160];
      std::snprintf(line, sizeof line, " %s %.17g/%.17g", name, d, h);
      differs += line;
    };
    same("bad", double(device.bad), double(host.bad), 0.0);
    same("nan", double(device.nan), double(host.nan), 0.0);
    same("inf", double(device.inf), double(host.inf), 0.0);
    same("unwritten", double(device.unwritten), double(host.unwritten), 0.0);
    same("not_compared", double(device.not_compared), double(host.not_compared), 0.0);
    same("count", double(device.count), double(host.count), 0.0);
    same("max_abs", device.max_abs, host.max_abs, 0.0);
    same("max_rel", device.max_rel, host.max_rel, 0.0);
    same("differences", double(differences), 0.0, 0.0);
    // The norms are sums of up to 2^28 terms added in another order (and fused multiply-adds on
    // the device): 1e-10 is well above that rounding and far below any real disagreement.
    same("rel_l2", device.rel_l2, host.rel_l2, 1e-10);
    same("ratio", device.ratio, host.ratio, 1e-10);
    same("residual", device.residual, host.residual, 1e-10);
    const bool ok = differs.empty() && device.bad > 0 && device.unwritten > 0 && device.nan > 0 && device.inf > 0;
    (ok ? passed : failed) += 1;
    std::printf("%-4s compare %lld^2 bf16%s: bad %lld/%lld, nan %lld/%lld, inf %lld/%lld, unwritten %lld/%lld, "
                "not judged %lld/%lld, relL2 %.6e/%.6e, residual %.3e/%.3e (device/host); device passes %.2f ms "
                "(rms + comparison), bitwise %.2f ms\n",
                ok ? "ok" : "FAIL", (long long)n,
                scale != 1.0 ? strprintf(" (%gx the reference)", scale).c_str() : "", (long long)device.bad,
                (long long)host.bad, (long long)device.nan, (long long)host.nan, (long long)device.inf, (long long)host.inf,
                (long long)device.unwritten, (long long)host.unwritten, (long long)device.not_compared,
                (long long)host.not_compared, device.rel_l2, host.rel_l2, device.residual, host.residual,
                pass_ms[2], differences_ms[2]);
    if (!differs.empty()) std::printf("     differ (device/host):%s\n", differs.c_str());
    cudaFree(want_device);
    cudaFree(out.device);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

// The "fp64 GEMM" phase of a queued check (launch_reference_gemm with --reference device), timed
// whole and part by part on the default stream (CUDA events, median of 5 after a warm-up): the
// packing of A and of B into fp64 copies, and cuBLAS's DGEMM on them, at square bf16 sizes laid
// out as tests/gpu/bench_tiled_bf16_8192.yaml's (A [M, K], B [K, N], both row-major). Prints
// times only: what docs/performance.md's per-check floor reads beside check-floor.sh.
int run_reference_parts(const char* list) {
  g_queue_check = 0;  // a queued check: cuBLAS from kCublasMinimumProducts on (cublas_gemm.cuh)
  std::vector<int64_t> sizes;
  for (const char* p = list; *p;) {
    sizes.push_back(std::atoll(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  cudaEvent_t start, stop;
  REPRO_CUDA_CHECK(cudaEventCreate(&start));
  REPRO_CUDA_CHECK(cudaEventCreate(&stop));
  const auto median_ms = [&](const auto& body) {
    std::vector<float> times;
    for (int round = 0; round < 6; ++round) {
      REPRO_CUDA_CHECK(cudaEventRecord(start, 0));
      body();
      REPRO_CUDA_CHECK(cudaEventRecord(stop, 0));
      REPRO_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      REPRO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (round > 0) times.push_back(ms);  // the first warms up
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  std::printf("| M = N = K | pack A (ms) | pack B (ms) | cuBLAS DGEMM on the copies (ms) | launch_reference_gemm (ms) | "
              "its own event time (ms) | engine |\n|---|---|---|---|---|---|---|\n");
  for (const int64_t n : sizes) {
    TestRng rng{0xFA57ull + uint64_t(n)};
    Tensor a = make_tensor("A", Operand{DType::bf16, {n, n}, {}});
    Tensor b = make_tensor("B", Operand{DType::bf16, {n, n}, {}});
    Tensor d = make_tensor("D", Operand{DType::bf16, {n, n}, {}}, true);
    for (Tensor* t : {&a, &b}) {
      for (int64_t i = 0; i < t->numel(); ++i) encode(t->dtype, t->host.data(), i, rng.uniform() * 2 - 1);
      upload(*t);
    }
    upload(d);
    const GemmProblem p{&a, &b, nullptr, nullptr, &d, 1.0, 0.0, 1, n, n, n, false};
    start_loading_cublas(p.L, p.M, p.N, p.K);
    const DeviceMatrix da = device_matrix(a), db = device_matrix(b);
    const int64_t Mp = ceil_div(n, kRefTileM) * kRefTileM, Np = ceil_div(n, kRefTileN) * kRefTileN;
    const int64_t Kp = ceil_div(n, kRefTileK) * kRefTileK;
    PackedOperand pa, pb;
    const double pack_a = median_ms([&] {
      give_back_scratch(pa.data);
      pa = pack_operand(da, da.row_stride, da.col_stride, 1, n, n, Mp, Kp, problem_scales(p, true, true));
    });
    const double pack_b = median_ms([&] {
      give_back_scratch(pb.data);
      pb = pack_operand(db, db.col_stride, db.row_stride, 1, n, n, Np, Kp, problem_scales(p, false, true));
    });
    double* out = allocate_reference_doubles(n * n, "its output");
    std::string engine;
    const double gemm = median_ms([&] {
      engine.clear();
      if (!cublas_reference_gemm(pa.data, pa.batch_stride, pb.data, pb.batch_stride, out, 1.0, 1, n, n, n, Mp, Np,
                                 &engine))
        engine = "(no cuBLAS: " + engine + ")";
    });
    double own = 0;
    const double whole = median_ms([&] {
      ReferenceGemmLaunch launch = launch_reference_gemm(p, ReferenceMethod::dmma);
      own = finish_reference_gemm(&launch);
      give_back_scratch(launch.out);
      engine = launch.engine;
    });
    std::printf("| %lld | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", (long long)n, pack_a, pack_b, gemm, whole, own,
                engine.c_str());
    for (void* buffer : {static_cast<void*>(pa.data), static_cast<void*>(pb.data), static_cast<void*>(out)})
      give_back_scratch(buffer);
    pa = PackedOperand(), pb = PackedOperand();
    REPRO_CUDA_CHECK(cudaDeviceSynchronize());
    for (Tensor* t : {&a, &b, &d}) cudaFree(t->device), t->device = nullptr;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  set_command_line(argc, argv);
  if (no_cuda_device()) return kExitNoDevice;
  if (argc == 2 && std::string(argv[1]) == "corrupt") return corrupt_one_output();
  if (argc == 2 && std::string(argv[1]) == "ops") return run_op_cases();
  if (argc == 2 && std::string(argv[1]) == "compare") return run_compare_cases();
  if (argc == 3 && std::string(argv[1]) == "parts") return run_reference_parts(argv[2]);
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s [corrupt | ops | compare | parts SIZES]\n", argv[0]);
    return kExitUsage;
  }
  return run_cases();
}
