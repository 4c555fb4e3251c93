// Host-only self-test of the harness runtime (crates/repro-contract/runtime/src). Needs no GPU: it
// never calls a CUDA API that needs a device. Built and run by tests/suite/runtime.rs; by hand (one
// -I per folder of the runtime's sources: they include one another by bare name, as the artifact
// holds them flat):
//
//   nvcc -std=c++17 -O2 -Icrates/repro-contract/runtime/include $(printf -- '-I%s ' crates/repro-contract/runtime/src/*/)
//        -gencode=arch=compute_90a,code=sm_90a -o runtime_selftest tests/cpp/runtime_selftest.cu
//   ./runtime_selftest                                     # the self-test: "N passed, M failed"
//   ./runtime_selftest values PATTERN DTYPE SEED NAME SHAPE  # generated storage bits, hex, one per line
//   ./runtime_selftest encode DTYPE < f64-bits             # encode_bits of each hex f64 bit pattern
//   ./runtime_selftest fatal JSON_PATH                     # exercises fatal(): exit 5 and a JSON report
//
// The checks of each concern are in a header of their own beside this file (dtype_checks.h,
// io_checks.h, compare_checks.h, emulation_checks.h, ops_checks.h, attention_checks.h,
// verdict_checks.h, group_scale_checks.h), included where they run; this file holds the check
// framework, the generators', reference's and probe reading's checks, the modes
// tests/suite/runtime.rs calls, and main.
//
// The whole runtime library, as one translation unit (what librepro_runtime.a is built from).
#include "../../crates/repro-contract/runtime/src/run/runtime.cu"

// CUDA's own host-side conversions: an independent oracle for encode().
#include <cuda_fp8.h>

#include <fcntl.h>
#include <fstream>
#include <functional>
#include <numeric>

#include "test_rng.h"

using namespace repro;

namespace {

// ------------------------------------------------------------------ a tiny check framework

int g_passed = 0;
int g_failed = 0;

void record(bool ok, const char* file, int line, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAILED %s:%d: %s\n", file, line, what.c_str());
  }
}

std::string show(const std::string& v) { return "\"" + v + "\""; }
std::string show(double v) { return strprintf("%.17g", v); }
template <typename T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
std::string show(T v) {
  return std::to_string(v);
}

template <typename A, typename B>
void record_equal(const A& a, const B& b, const char* a_text, const char* b_text, const char* file, int line) {
  const bool ok = a == b;
  record(ok, file, line, ok ? "" : std::string(a_text) + " == " + b_text + ": " + show(a) + " vs " + show(b));
}

#define CHECK(cond) record((cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ(a, b) record_equal((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_CONTAINS(text, part)                                                                       \
  do {                                                                                                   \
    const std::string check_text_ = (text);                                                              \
    record(check_text_.find(part) != std::string::npos, __FILE__, __LINE__,                              \
           std::string(#text) + " contains \"" + (part) + "\": got \"" + check_text_ + "\"");           \
  } while (0)

// Bit-exact double comparison (NaN == NaN, -0 != +0).
bool same_bits(double a, double b) { return double_bits(a) == double_bits(b); }

// A scratch directory, removed with everything in it at exit.
struct ScratchDir {
  std::string path;
  std::vector<std::string> files;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/repro-selftest-XXXXXX";
    if (mkdtemp(&pattern[0]) == nullptr) {
      std::perror("mkdtemp");
      std::exit(2);
    }
    path = pattern;
  }
  std::string file(const std::string& name) {
    files.push_back(path + "/" + name);
    return files.back();
  }
  ~ScratchDir() {
    for (const std::string& f : files)
      if (unlink(f.c_str()) != 0) rmdir(f.c_str());  // a folder, listed after its files
    rmdir(path.c_str());
  }
};

// A host tensor with the given logical shape; row-major unless strides are given.
Tensor make_tensor(const char* name, DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                   bool output = false) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.rank = int(shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = shape[size_t(d)];
    t.strides[d] = strides.empty() ? stride : strides[size_t(d)];
    stride *= shape[size_t(d)];
  }
  t.output = output;
  return t;
}

// Sets tensor element at logical index i.
void set_logical(Tensor& t, int64_t i, double v) { encode(t.dtype, t.host.data(), t.logical_offset(i), v); }
double get_logical(const Tensor& t, int64_t i) { return decode(t.dtype, t.host.data(), t.logical_offset(i)); }


#include "dtype_checks.h"

// ------------------------------------------------------------------ generators

// parallel_for's parked workers (base.cuh): every chunk of every call run exactly once, calls
// of changing sizes back to back (a late worker must not take a chunk of the next call), alerts
// before some calls, between calls and with no call after them (a woken worker must go back to
// waiting, not run a chunk twice or miss the next call), pauses past the spin so that some
// calls find the workers parked, a call from inside a chunk (the pool is taken: threads of its
// own), and the pool driven with more chunks than this machine's cores.
void test_host_workers() {
  bool every_once = true;
  for (int round = 0; round < 3000; ++round) {
    if (round % 3 == 0) HostWorkers::instance().alert();
    if (round % 500 == 7) HostWorkers::instance().alert(), HostWorkers::instance().alert();
    if (round % 250 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const int64_t chunks = 2 + round % 19;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(chunks));
    for (auto& h : hits) h.store(0);
    const auto call = [](const void* context, int64_t t) {
      (*static_cast<std::vector<std::atomic<int>>*>(const_cast<void*>(context)))[size_t(t)].fetch_add(1);
    };
    every_once &= HostWorkers::instance().run(chunks, call, &hits);
    for (const auto& h : hits) every_once &= h.load() == 1;
  }
  CHECK(every_once);
  std::vector<std::atomic<int>> items(1000);
  for (auto& item : items) item.store(0);
  parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) items[size_t(i)].fetch_add(1);
    parallel_for(64, 1, [&](int64_t, int64_t) {});  // nested: must not wait for itself
  });
  bool covered = true;
  for (const auto& item : items) covered &= item.load() == 1;
  CHECK(covered);
}

void test_hash_and_log() {
  CHECK_EQ(stream_of(""), uint64_t(0xCBF29CE484222325ull));  // FNV-1a 64 reference values
  CHECK_EQ(stream_of("a"), uint64_t(0xAF63DC4C8601EC8Cull));
  CHECK_EQ(stream_of("foobar"), uint64_t(0x85944171F73967E8ull));
  CHECK_EQ(mix64(0x9E3779B97F4A7C15ull), uint64_t(0xE220A8397B1DCDAFull));  // splitmix64(0)'s first output
  CHECK(counter_hash(1, 2, 3, 4) != counter_hash(1, 2, 3, 5));
  CHECK(counter_hash(0, 0, 0, 0) != 0);
  CHECK_EQ(unit_interval(~uint64_t(0)), 1.0 - 0x1.0p-53);
  CHECK_EQ(unit_interval(0), 0.0);
  // The hand-written log agrees with libm to within 2 ulp over (0, 1) and beyond.
  TestRng rng{42};
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(0.5 + 0.5 * rng.uniform(), int(rng.next() % 80) - 60) + 1e-300;
    const double error = std::fabs(deterministic_log(x) - std::log(x)) / std::max(std::fabs(std::log(x)), 1e-300);
    worst = std::max(worst, error);
  }
  record(worst <= 4.5e-16, __FILE__, __LINE__, strprintf("deterministic_log relative error %.3g <= 4.5e-16", worst));
  CHECK_EQ(deterministic_log(1.0), 0.0);
  CHECK(std::fabs(deterministic_log(0.5) + 0.69314718055994531) < 1e-16);
}

Init init_of(const std::string& text, uint64_t seed = 2024) {
  Init init;
  std::string error;
  if (!parse_init(text, &init, &error)) std::printf("  parse_init(%s): %s\n", text.c_str(), error.c_str());
  init.seed = seed;
  return init;
}

void test_generators() {
  const int64_t shape1[1] = {200000};
  const uint64_t stream = stream_of("A");

  // uniform: in [lo, hi), mean and variance of U(lo, hi), deterministic, seed- and name-dependent.
  const Init uniform = init_of("uniform:-2:6");
  double sum = 0, sum2 = 0, lo = HUGE_VAL, hi = -HUGE_VAL;
  for (int64_t i = 0; i < shape1[0]; ++i) {
    const double v = generate_value(uniform, stream, i, 1, shape1);
    sum += v, sum2 += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const double mean = sum / double(shape1[0]), var = sum2 / double(shape1[0]) - mean * mean;
  CHECK(lo >= -2.0 && hi < 6.0 && lo < -1.99 && hi > 5.99);
  record(std::fabs(mean - 2.0) < 0.03 && std::fabs(var - 64.0 / 12.0) < 0.06, __FILE__, __LINE__,
         strprintf("uniform:-2:6 mean %.4f var %.4f", mean, var));
  CHECK(same_bits(generate_value(uniform, stream, 7, 1, shape1), generate_value(uniform, stream, 7, 1, shape1)));
  CHECK(generate_value(uniform, stream, 7, 1, shape1) != generate_value(uniform, stream_of("B"), 7, 1, shape1));
  CHECK(generate_value(uniform, stream, 7, 1, shape1) != generate_value(init_of("uniform:-2:6", 2025), stream, 7, 1, shape1));
  CHECK(generate_value(uniform, stream, 7, 1, shape1) != generate_value(uniform, stream, 8, 1, shape1));

  // int_uniform: integers in [lo, hi], each about equally often.
  const Init ints = init_of("int_uniform");
  int64_t histogram[9] = {0};
  bool integral = true, in_range = true;
  for (int64_t i = 0; i < 90000; ++i) {
    const double v = generate_value(ints, stream, i, 1, shape1);
    integral = integral && v == std::floor(v);
    in_range = in_range && v >= -4 && v <= 4;
    if (in_range) ++histogram[int(v) + 4];
  }
  CHECK(integral && in_range);
  bool flat = true;
  for (int64_t count : histogram) flat = flat && count > 9400 && count < 10600;
  CHECK(flat);
  CHECK_EQ(generate_value(init_of("int_uniform:3:3"), stream, 5, 1, shape1), 3.0);

  // normal: mean and standard deviation.
  for (const char* text : {"normal", "normal:10:0.5"}) {
    const Init normal = init_of(text);
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int64_t i = 0; i < n; ++i) {
      const double v = generate_value(normal, stream, i, 1, shape1);
      s += v, s2 += v * v;
    }
    const double m = s / n, sd = std::sqrt(s2 / n - m * m);
    record(std::fabs(m - normal.p0) < 0.01 * normal.p1 + 1e-3 && std::fabs(sd / normal.p1 - 1.0) < 0.01, __FILE__,
           __LINE__, strprintf("%s: mean %.4f std %.4f", text, m, sd));
  }

  // ones, zeros, iota, identity.
  const int64_t matrix[2] = {3, 4};
  CHECK_EQ(generate_value(init_of("ones"), stream, 5, 2, matrix), 1.0);
  CHECK_EQ(generate_value(init_of("zeros"), stream, 5, 2, matrix), 0.0);
  CHECK_EQ(generate_value(init_of("iota"), stream, 11, 2, matrix), 11.0);
  std::string identity;
  for (int64_t i = 0; i < 12; ++i) identity += generate_value(init_of("identity"), stream, i, 2, matrix) == 1.0 ? '1' : '0';
  CHECK_EQ(identity, std::string("100001000010"));
  const int64_t batch[3] = {2, 2, 3};
  identity.clear();
  for (int64_t i = 0; i < 12; ++i) identity += generate_value(init_of("identity"), stream, i, 3, batch) == 1.0 ? '1' : '0';
  CHECK_EQ(identity, std::string("100010100010"));
  const int64_t vector[1] = {3};
  identity.clear();
  for (int64_t i = 0; i < 3; ++i) identity += generate_value(init_of("identity"), stream, i, 1, vector) == 1.0 ? '1' : '0';
  CHECK_EQ(identity, std::string("100"));
  CHECK(std::isnan(generate_value(init_of("file:x.npy"), stream, 0, 1, vector)));
}

void test_parse_init() {
  Init init;
  init.seed = 77;
  std::string error;
  CHECK(parse_init("uniform", &init, &error) && init.kind == InitKind::uniform && init.p0 == -1 && init.p1 == 1);
  CHECK_EQ(init.seed, uint64_t(77));  // the seed is not the pattern's business
  CHECK(parse_init("uniform:-0.5:2e1", &init, &error) && init.p0 == -0.5 && init.p1 == 20.0);
  CHECK(parse_init("int_uniform", &init, &error) && init.kind == InitKind::int_uniform && init.p0 == -4 && init.p1 == 4);
  CHECK(parse_init("int_uniform:-8:7", &init, &error) && init.p0 == -8 && init.p1 == 7);
  CHECK(parse_init("normal", &init, &error) && init.kind == InitKind::normal && init.p0 == 0 && init.p1 == 1);
  CHECK(parse_init("normal:1:0.25", &init, &error) && init.p0 == 1 && init.p1 == 0.25);
  CHECK(parse_init("identity", &init, &error) && init.kind == InitKind::identity);
  CHECK(parse_init("iota", &init, &error) && init.kind == InitKind::iota);
  CHECK(parse_init("file:data/a:b.npy", &init, &error) && init.kind == InitKind::file && init.path == "data/a:b.npy");
  CHECK(parse_init("zeros", &init, &error) && init.kind == InitKind::zeros && init.path.empty());

  const struct {
    const char* text;
    const char* says;
  } bad[] = {
      {"gaussian", "unknown pattern \"gaussian\""},
      {"uniform:1", "give both parameters, as in uniform:LO:HI"},
      {"uniform:1:2:3", "give both parameters"},
      {"uniform:a:1", "\"a\" is not a finite number (uniform:LO:HI)"},
      {"uniform:1:inf", "\"inf\" is not a finite number"},
      {"uniform::1", "\"\" is not a finite number"},
      {"uniform:2:1", "LO must not exceed HI"},
      {"int_uniform:0.5:2", "int_uniform bounds must be integers"},
      {"normal:0:-1", "STD must not be negative"},
      {"ones:1", "ones takes no parameters"},
      {"file:", "file: needs a path"},
      {"", "unknown pattern \"\""},
  };
  for (const auto& b : bad) {
    error.clear();
    const Init before = init;
    CHECK(!parse_init(b.text, &init, &error));
    CHECK_CONTAINS(error, b.says);
    CHECK_CONTAINS(error, std::string("valid forms: ") + kInitForms);
    CHECK(init.kind == before.kind && init.p0 == before.p0);  // untouched on error
  }
  CHECK_EQ(describe_init(init_of("uniform")), std::string("uniform[-1, 1] seed 2024"));
  CHECK_EQ(describe_init(init_of("int_uniform:-8:7", 5)), std::string("int_uniform[-8, 7] seed 5"));
  CHECK_EQ(describe_init(init_of("normal:0:0.5")), std::string("normal(mean 0, std 0.5) seed 2024"));
  CHECK_EQ(describe_init(init_of("ones")), std::string("ones"));
  CHECK_EQ(describe_init(init_of("file:a.npy")), std::string("file a.npy"));
}

#include "io_checks.h"

// ------------------------------------------------------------------ reference

Tensor filled(const char* name, DType dtype, std::vector<int64_t> shape, const std::vector<double>& logical,
              std::vector<int64_t> strides = {}) {
  Tensor t = make_tensor(name, dtype, shape, strides);
  t.host.assign(t.storage_bytes(), 0xEE);  // garbage in padding: must not be read
  for (size_t i = 0; i < logical.size(); ++i) set_logical(t, int64_t(i), logical[i]);
  return t;
}

void test_reference() {
  // D = 0.5 * A B + 2 C + bias with A [[1,2,3],[4,5,6]], B [[7,8],[9,10],[11,12]] (col_major):
  // A B = [[58, 64], [139, 154]].
  Tensor a = filled("A", DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = filled("B", DType::bf16, {3, 2}, {7, 8, 9, 10, 11, 12}, {1, 3});
  Tensor c = filled("C", DType::f16, {2, 2}, {1, 1, 1, 1});
  Tensor bias = filled("bias", DType::f32, {2}, {10, 20});
  Tensor d = make_tensor("D", DType::f32, {2, 2}, {}, true);
  std::vector<double> ref;
  reference_gemm(GemmProblem{&a, &b, &c, &bias, &d, 0.5, 2.0, 1, 2, 2, 3, false}, &ref);
  CHECK(ref == std::vector<double>({41, 54, 81.5, 99}));
  // beta = 0: C is not read at all (BLAS), even if it holds NaN.
  Tensor c_nan = filled("C", DType::f32, {2, 2}, {NAN, NAN, NAN, NAN});
  reference_gemm(GemmProblem{&a, &b, &c_nan, nullptr, &d, 1.0, 0.0, 1, 2, 2, 3, false}, &ref);
  CHECK(ref == std::vector<double>({58, 64, 139, 154}));

  // Batched: A [2, 2, 3] with padded strides, B shared (rank 2), C per batch.
  Tensor a3 = filled("A", DType::f32, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12}, {16, 8, 1});
  Tensor c3 = filled("C", DType::f32, {2, 2, 2}, {0, 0, 0, 0, 1, 2, 3, 4});
  Tensor d3 = make_tensor("D", DType::f32, {2, 2, 2}, {}, true);
  reference_gemm(GemmProblem{&a3, &b, &c3, nullptr, &d3, 1.0, 1.0, 2, 2, 2, 3, true}, &ref);
  CHECK(ref == std::vector<double>({58, 64, 139, 154, 117, 130, 281, 312}));

  // A ragged random problem (M, N, K not multiples of the register tile) against a naive loop.
  const int64_t M = 37, N = 29, K = 53;
  Tensor ra = make_tensor("A", DType::bf16, {M, K});
  Tensor rb = make_tensor("B", DType::bf16, {K, N}, {1, K});
  std::string error;
  fill_host(ra, "", &error);
  fill_host(rb, "", &error);
  Tensor rd = make_tensor("D", DType::f32, {M, N}, {}, true);
  reference_gemm(GemmProblem{&ra, &rb, nullptr, nullptr, &rd, 1.5, 0.0, 1, M, N, K, false}, &ref);
  double worst = 0.0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += get_logical(ra, m * K + k) * get_logical(rb, k * N + n);
      worst = std::max(worst, std::fabs(ref[size_t(m * N + n)] - 1.5 * sum) / (std::fabs(1.5 * sum) + 1e-300));
    }
  record(ref.size() == size_t(M * N) && worst < 1e-13, __FILE__, __LINE__,
         strprintf("reference_gemm vs naive loop: worst relative difference %.3g", worst));

  // Larger problems against a naive sequential-k loop: several K-blocks, more than one block of
  // rows and of columns, ragged M and N edges, column-major B, and both operands batched.
  TestRng rng{0x5eed0fa11ab1e5ull};
  // Random f32 values; with `exact_products` they are v * 2^e with an 8-bit integer v and e in
  // [-12, 12]: every product is then exact in double, so a fused multiply-add rounds just like a
  // multiply and an add (the test holds under -ffp-contract=fast), while sums mixing magnitudes
  // 2^48 apart round at almost every step, and so depend on the order of k.
  const auto fill_random = [&](Tensor& t, bool exact_products) {
    t.host.assign(t.storage_bytes(), 0xEE);
    int64_t count = 1;
    for (int d = 0; d < t.rank; ++d) count *= t.shape[d];
    for (int64_t i = 0; i < count; ++i)
      set_logical(t, i, exact_products ? std::ldexp(double(int64_t(rng.next() % 255) - 127), int(rng.next() % 25) - 12)
                                       : rng.uniform() * 2 - 1);
  };
  // Runs reference_gemm on p and compares every output with alpha * (sequential-k sum) + beta * C
  // + bias: exactly (==) with `exact`, else within 1e-13 of the magnitude of its terms (what an
  // FMA-contracting host compiler may move it by).
  const auto check_against_naive = [&](const GemmProblem& p, bool exact, int line) {
    std::vector<double> got;
    reference_gemm(p, &got);
    const int64_t L = p.L, M = p.M, N = p.N, K = p.K;
    // The operands' logical values, decoded once: A as [La][M][K], B as [Lb][K][N].
    const auto logical_values = [](const Tensor& t, int64_t count) {
      std::vector<double> values(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) values[size_t(i)] = get_logical(t, i);
      return values;
    };
    const std::vector<double> av = logical_values(*p.a, (p.a->rank == 3 ? L : 1) * M * K);
    const std::vector<double> bv = logical_values(*p.b, (p.b->rank == 3 ? L : 1) * K * N);
    int64_t mismatched = 0, order_sensitive = 0;
    double worst = 0.0;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const double* a_row = av.data() + ((p.a->rank == 3 ? l : 0) * M + m) * K;
          const double* b_col = bv.data() + (p.b->rank == 3 ? l : 0) * K * N + n;
          double sum = 0.0, reversed = 0.0, scale = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double term = a_row[k] * b_col[k * N];
            sum += term;
            scale += std::fabs(term);
          }
          for (int64_t k = K - 1; k >= 0; --k) reversed += a_row[k] * b_col[k * N];
          order_sensitive += reversed != sum;
          double want = p.alpha * sum;
          scale *= std::fabs(p.alpha);
          if (p.c != nullptr && p.beta != 0.0) {
            const double c = p.beta * get_logical(*p.c, (l * M + m) * N + n);
            want += c;
            scale += std::fabs(c);
          }
          if (p.bias != nullptr) {
            const double bias = get_logical(*p.bias, n);
            want += bias;
            scale += std::fabs(bias);
          }
          const double have = got[size_t((l * M + m) * N + n)];
          mismatched += have != want;
          worst = std::max(worst, std::fabs(have - want) / (scale + 1e-300));
        }
    const bool ok = got.size() == size_t(L * M * N) && (exact ? mismatched == 0 : worst < 1e-13);
    record(ok, __FILE__, line,
           strprintf("reference_gemm %lldx%lldx%lldx%lld vs naive loop: %lld outputs differ, worst relative "
                     "difference %.3g",
                     (long long)L, (long long)M, (long long)N, (long long)K, (long long)mismatched, worst));
    // The exact comparison has teeth: summing k in reverse changes many of these outputs.
    if (exact)
      record(order_sensitive > L * M * N / 4, __FILE__, line,
             strprintf("order-sensitive sums: %lld of %lld", (long long)order_sensitive, (long long)(L * M * N)));
  };
  {
    // 133 x 301 x 700: K is 2 full K-blocks of 256 and a ragged one; 133 rows and 301 columns are
    // more than one block each, and not whole numbers of register tiles (3 or 4 by 8) or blocks.
    const int64_t M2 = 133, N2 = 301, K2 = 700;
    Tensor a2 = make_tensor("A", DType::f32, {M2, K2});
    Tensor b2 = make_tensor("B", DType::f32, {K2, N2}, {1, K2});
    Tensor c2 = make_tensor("C", DType::f32, {M2, N2});
    Tensor bias2 = make_tensor("bias", DType::f32, {N2});
    Tensor d2 = make_tensor("D", DType::f32, {M2, N2}, {}, true);
    for (bool exact : {false, true}) {
      for (Tensor* t : {&a2, &b2, &c2, &bias2}) fill_random(*t, exact);
      check_against_naive(GemmProblem{&a2, &b2, &c2, &bias2, &d2, 2.0, 0.5, 1, M2, N2, K2, false}, exact, __LINE__);
    }
  }
  {
    // Both operands batched, with padded strides (A row-major, B column-major in each batch).
    const int64_t L3 = 3, M3 = 37, N3 = 45, K3 = 300;
    Tensor a3b = make_tensor("A", DType::f32, {L3, M3, K3}, {M3 * K3 + 7, K3, 1});
    Tensor b3b = make_tensor("B", DType::bf16, {L3, K3, N3}, {K3 * N3 + 3, 1, K3});
    Tensor c3b = make_tensor("C", DType::f32, {L3, M3, N3});
    Tensor d3b = make_tensor("D", DType::f32, {L3, M3, N3}, {}, true);
    for (Tensor* t : {&a3b, &b3b, &c3b}) fill_random(*t, true);
    check_against_naive(GemmProblem{&a3b, &b3b, &c3b, nullptr, &d3b, 1.0, -0.75, L3, M3, N3, K3, true}, true, __LINE__);
  }

  std::vector<double> expected;
  analytic_ones(GemmProblem{&ra, &rb, nullptr, nullptr, &rd, 2.0, 0.0, 3, M, N, K, true}, &expected);
  CHECK(expected.size() == size_t(3 * M * N) && expected.front() == 106.0 && expected.back() == 106.0);
}

// ------------------------------------------------------------------ the cross-check's host side

// What the cross-check fetched is decoded on every core, behind the reference GEMM
// (reference_cross_check.cuh): the same values as one decode per element, across the threads'
// chunk boundaries, for every dtype.
void test_cross_check_decode() {
  for (DType dtype : {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2, DType::i8,
                      DType::u8, DType::i32, DType::u32, DType::i64, DType::boolean}) {
    const int64_t count = 3 * 65536 + 17;
    StoredValues stored = host_stored_values(dtype, count);
    TestRng rng{0x5EED ^ uint64_t(dtype)};
    for (int64_t i = 0; i < count; ++i) store_bits(dtype, stored.data(), i, rng.next());
    const HostValues values = decode_stored(stored);
    int64_t differing = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double want = decode(dtype, stored.data(), i), got = values[size_t(i)];
      differing += !(same_bits(got, want) || (std::isnan(got) && std::isnan(want)));
    }
    CHECK_EQ(stored.count(), count);
    CHECK_EQ(differing, int64_t(0));
  }
}

// ------------------------------------------------------------------ the reference cache

void test_reference_cache(ScratchDir& scratch) {
  Tensor a = make_tensor("A", DType::bf16, {33, 20});
  Tensor b = make_tensor("B", DType::bf16, {20, 17}, {1, 20});
  Tensor d = make_tensor("D", DType::f32, {33, 17}, {}, true);
  std::string error;
  fill_host(a, "", &error);
  fill_host(b, "", &error);
  GemmProblem p{&a, &b, nullptr, nullptr, &d, 1.0, 0.0, 1, 33, 17, 20, false};
  const std::string key = reference_key(p);
  CHECK_EQ(key.size(), size_t(32));
  CHECK_EQ(reference_key(p), key);  // a pure function of the operands
  // A generated operand is keyed by its generator (its bytes may exist only on the device), a
  // file's by its bytes.
  a.host[7] ^= 1;
  CHECK_EQ(reference_key(p), key);
  a.host[7] ^= 1;
  a.init.seed += 1;
  CHECK(reference_key(p) != key);
  a.init.seed -= 1;
  a.init.kind = InitKind::file;
  const std::string file_key = reference_key(p);
  CHECK(file_key != key);
  a.host[7] ^= 1;
  CHECK(reference_key(p) != file_key);
  a.host[7] ^= 1;
  a.init.kind = InitKind::uniform;
  CHECK_EQ(reference_key(p), key);
  // Another alpha, another layout: another key.
  p.alpha = 2.0;
  CHECK(reference_key(p) != key);
  p.alpha = 1.0;
  Tensor b_row_major = make_tensor("B", DType::bf16, {20, 17});
  b_row_major.host = b.host;
  GemmProblem q = p;
  q.b = &b_row_major;
  CHECK(reference_key(q) != key);
  // C enters the key only when beta reads it.
  Tensor c = make_tensor("C", DType::f32, {33, 17});
  fill_host(c, "", &error);
  GemmProblem with_c = p;
  with_c.c = &c;
  CHECK_EQ(reference_key(with_c), key);
  with_c.beta = 1.0;
  CHECK(reference_key(with_c) != key);

  // Stored, then loaded bit for bit; a wrong count or a damaged file is a miss.
  ReferenceCache cache{scratch.path + "/cache", key};
  std::vector<double> ref, loaded;
  reference_gemm(p, &ref);
  CHECK(!cache.load(ref.size(), &loaded));
  CHECK_CONTAINS(cache.store(ref), "cached");
  scratch.files.push_back(cache.path());
  CHECK(cache.load(ref.size(), &loaded) && loaded == ref);
  CHECK(!cache.load(ref.size() + 1, &loaded));
  {
    FILE* f = std::fopen(cache.path().c_str(), "ab");
    std::fputc(0, f);
    std::fclose(f);
  }
  CHECK(!cache.load(ref.size(), &loaded));
  // Only the newest kReferenceCacheEntries stay.
  for (int i = 0; i < kReferenceCacheEntries + 2; ++i) {
    ReferenceCache other{cache.dir, strprintf("%032x", i)};
    other.store(ref);
    scratch.files.push_back(other.path());
  }
  int kept = 0;
  for (int i = 0; i < kReferenceCacheEntries + 2; ++i)
    if (access(ReferenceCache{cache.dir, strprintf("%032x", i)}.path().c_str(), F_OK) == 0) ++kept;
  CHECK_EQ(kept, kReferenceCacheEntries);
  CHECK(access(cache.path().c_str(), F_OK) != 0);  // the oldest went first
  scratch.files.push_back(cache.dir);  // removed (as an empty folder) after the files
}

#include "compare_checks.h"

// ------------------------------------------------------------------ the probe suite's reading

// A probe outcome from a synthetic output: `got(m, n)` against the exact `want(m, n)`.
template <typename Got, typename Want>
ProbeOutcome synthetic_probe(const std::string& name, const std::string& inputs, int64_t M, int64_t N, Got got,
                             Want want, int64_t differences = 0) {
  std::vector<double> g(size_t(M * N)), w(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) g[size_t(m * N + n)] = got(m, n), w[size_t(m * N + n)] = want(m, n);
  ProbeOutcome o;
  o.name = name;
  o.inputs = inputs;
  o.differences = differences;
  const Tensor out = output_with(DType::f32, {M, N}, g);
  o.comparison = compare_output(out, w, 1, M, N, kExact, 64, 64);
  o.passed = o.comparison.passed && differences == 0;
  if (!o.passed) {
    o.pattern = classify(o.comparison, differences, kExact);
    o.axes = error_axes(out, w, 1, M, N);  // as judge_probe does
  }
  return o;
}

void test_probe_verdicts() {
  const int64_t M = 130, N = 70, K = 100, tile_k = 32;  // 4 slices: 32, 32, 32, 4
  const auto constant = [](double v) { return [v](int64_t, int64_t) { return v; }; };
  const auto suite = [&](double ones_got, int doubled_slice, int missing_slice, double slice_factor) {
    std::vector<ProbeOutcome> probes;
    probes.push_back(synthetic_probe("ones", "A = 1, B = 1", M, N, constant(ones_got), constant(double(K))));
    for (int s = 0; s < 4; ++s) {
      const double len = double(std::min<int64_t>(K, (s + 1) * tile_k) - s * tile_k);
      const double got = s == doubled_slice ? 2 * len : s == missing_slice ? 0.0 : slice_factor * len;
      ProbeOutcome o = synthetic_probe(strprintf("k-slice %d/4", s), strprintf("A = 1, B = 1 on k %d-%d", s * 32,
                                                                               int(s * 32 + len - 1)),
                                       M, N, constant(got), constant(len));
      if (!o.passed) o.note = slice_note(o, len);
      probes.push_back(o);
    }
    probes.push_back(synthetic_probe("row code 0", "", M, N, constant(1.0), constant(1.0)));
    probes.push_back(synthetic_probe("random", "", M, N, constant(1.0), constant(1.0)));
    return probe_verdict(probes, "", "");
  };
  // The first K tile accumulated twice (k_tile_twice): ones is 132 for 100, slice 0 is 64 for 32.
  Pattern p = suite(132, 0, -1, 1.0);
  CHECK_EQ(p.cls, std::string("k_coverage"));
  CHECK_CONTAINS(p.evidence, "1 of the 4 K slices probed are wrong, the others right: k-slice 0/4 (k 0-31): every output 64 where 32 is "
                             "right: the slice is counted twice");
  // The partial last K tile dropped (drop_last_k).
  p = suite(96, -1, 3, 1.0);
  CHECK_EQ(p.cls, std::string("k_coverage"));
  CHECK_CONTAINS(p.evidence, "k-slice 3/4 (k 96-99): every output 0 where 4 is right: the slice is missing");
  // Every slice twice: the accumulation itself over-counts.
  p = suite(200, -1, -1, 2.0);
  CHECK_EQ(p.cls, std::string("scale"));
  CHECK_CONTAINS(p.evidence, "every K slice is off by the same factor");
  // No slice right, most contributing nothing, ones off by a varying factor (B tiles loaded from
  // swapped coordinates, issue 24): K coverage, not a scale nor scattered.
  {
    std::vector<ProbeOutcome> probes;
    probes.push_back(synthetic_probe("ones", "A = 1, B = 1", M, N,
                                     [](int64_t, int64_t n) { return n % 2 ? 20.0 : 12.0; }, constant(double(K))));
    probes.back().pattern = classify(probes.back().comparison, 0, kExact);
    for (int s = 0; s < 4; ++s) {
      const double len = double(std::min<int64_t>(K, (s + 1) * tile_k) - s * tile_k);
      ProbeOutcome o = synthetic_probe(strprintf("k-slice %d/4", s), strprintf("A = 1, B = 1 on k %d-%d", s * 32,
                                                                               int(s * 32 + len - 1)),
                                       M, N, [s](int64_t, int64_t n) { return s == 0 ? double(n % 5) : 0.0; },
                                       constant(len));
      o.note = slice_note(o, len);
      probes.push_back(o);
    }
    p = probe_verdict(probes, "", "");
    CHECK_EQ(p.cls, std::string("k_coverage"));
    CHECK_CONTAINS(p.evidence, "3 of the 4 K slices probed never reach the output, and the others are wrong too");
    CHECK(p.evidence.find("same factor") == std::string::npos);
  }
  // Nondeterminism wins over everything else.
  std::vector<ProbeOutcome> racy = {synthetic_probe("ones", "", M, N, constant(1.0), constant(1.0), 17)};
  p = probe_verdict(racy, "", "");
  CHECK_EQ(p.cls, std::string("nondeterministic"));
  CHECK_CONTAINS(p.evidence, "probe ones: 17 outputs differ bitwise");
  // All right.
  p = suite(100, -1, -1, 1.0);
  CHECK_EQ(p.cls, std::string("ok"));
  // Rows 64-127 of each 128-row tile wrong and noisy, but wrong in every run (a TMA box that
  // leaves them unfilled): the structure names the defect, the noise is a note.
  {
    const auto half_rows = [](int64_t m, int64_t) { return m % 128 >= 64 ? 7.0 : 100.0; };
    ProbeOutcome stale = synthetic_probe("ones", "", M, N, half_rows, constant(100.0), 40);
    stale.stale_differences = 40;
    stale.wrong_in_runs = 3000;
    stale.pattern = classify(stale.comparison, 0, kExact);
    std::vector<ProbeOutcome> probes = {stale};
    p = probe_verdict(probes, "", "");
    CHECK(p.cls != std::string("nondeterministic"));
    CHECK_CONTAINS(p.evidence, "the wrong outputs also change between runs (probe ones: 40 of 40 outputs that differ "
                               "are right in no run)");
    // A few right by coincidence (stale data equal to the answer) still read as stale...
    probes[0].stale_differences = 30;
    CHECK(probe_verdict(probes, "", "").cls != std::string("nondeterministic"));
    // ...but errors that move between runs are a race.
    probes[0].stale_differences = 0;
    probes[0].wrong_in_runs = 60;
    p = probe_verdict(probes, "", "");
    CHECK_EQ(p.cls, std::string("nondeterministic"));
  }

  // Row codes decoded: rows 2i and 2i+1 exchanged.
  const double unit = 100.0;  // alpha * K
  Tensor out0 = output_with(DType::f32, {M, N}, std::vector<double>(size_t(M * N), 0.0));
  Tensor out1 = out0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t source = m ^ 1;
      encode(DType::f32, out0.host.data(), out0.logical_offset(m * N + n), unit * double(1 << (source & 3)));
      encode(DType::f32, out1.host.data(), out1.logical_offset(m * N + n), unit * double(1 << ((source >> 2) & 3)));
    }
  const std::string rows = decode_lines(out0, out1, N, M, 64, unit, true);
  CHECK_CONTAINS(rows, "rows 2i and 2i+1 exchanged (130 of the 130 misplaced rows)");
  // Rows 64-127 of every 128-row tile get nothing.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const bool lost = m % 128 >= 64;
      encode(DType::f32, out0.host.data(), out0.logical_offset(m * N + n), lost ? 0.0 : unit * double(1 << (m & 3)));
      encode(DType::f32, out1.host.data(), out1.logical_offset(m * N + n),
             lost ? 0.0 : unit * double(1 << ((m >> 2) & 3)));
    }
  CHECK_EQ(decode_lines(out0, out1, N, M, 128, unit, true),
           std::string("rows 64-127 receive nothing (the output is 0: no A row values arrive)"));

  const std::vector<int64_t> sampled = slices_to_probe(100);
  CHECK(sampled.size() <= size_t(kMaxSlices) && sampled.front() == 0 && sampled.back() == 99);
  CHECK_EQ(slices_to_probe(5).size(), size_t(5));
}

// ------------------------------------------------------------------ bench statistics

void test_bench_summary() {
  BenchResult r;
  r.ms = {3.0, 1.0, 2.0, 10.0};  // even count: the median is the mean of the middle two
  summarize(r);
  CHECK(r.median == 2.5 && r.min == 1.0 && r.max == 10.0 && r.mean == 4.0);
  r.ms = {5.0, 4.0, 6.0};
  summarize(r);
  CHECK(r.median == 5.0 && r.min == 4.0 && r.max == 6.0 && r.mean == 5.0);
}

void test_trace_verdicts() {
  const double K = 96, alpha = 1.0;
  const auto stages = [&](double a, double b, double acc, double out) {
    std::vector<TraceReading> s(4);
    const TraceRole roles[4] = {TraceRole::operand, TraceRole::operand, TraceRole::accumulator, TraceRole::output};
    const double values[4] = {a, b, acc, out};
    const char* names[4] = {"A tile", "B tile", "accumulator", "D"};
    for (int i = 0; i < 4; ++i) s[size_t(i)].name = names[i], s[size_t(i)].role = roles[i], s[size_t(i)].absmax = values[i],
                                s[size_t(i)].seen = 100;
    return s;
  };
  Pattern p = trace_verdict(stages(1, 1, 192, 192), K, alpha);
  CHECK_EQ(p.cls, std::string("mma"));
  CHECK_CONTAINS(p.evidence, "accumulator `accumulator` has absmax 192, 2.000x the right 96");
  p = trace_verdict(stages(2, 1, 192, 192), K, alpha);
  CHECK_EQ(p.cls, std::string("load"));
  CHECK_CONTAINS(p.evidence, "operand stage `A tile` has absmax 2, 2.000x the right 1");
  p = trace_verdict(stages(1, 1, 96, 48), K, alpha);
  CHECK_EQ(p.cls, std::string("epilogue"));
  p = trace_verdict(stages(1, 1, 96, 96), K, alpha);
  CHECK_EQ(p.cls, std::string("ok"));
  std::vector<TraceReading> unreached = stages(1, 1, 96, 96);
  unreached[2].seen = 0;
  CHECK_EQ(trace_verdict(unreached, K, alpha).cls, std::string("unreached"));
  // A stale padding value (1e9) without the predicate: the false alarm the predicate avoids.
  CHECK_EQ(trace_verdict(stages(1e9, 1, 96, 96), K, alpha).cls, std::string("load"));
}

void test_heatmap() {
  // 300 x 260 with 128 x 128 tiles: 3 x 3 tiles, the edge ones smaller. Rows 64-127 of every
  // tile wrong: half of every full-height tile, 0 in the last tile row (rows 256-299).
  const int64_t M = 300, N = 260;
  std::vector<double> want(size_t(M * N), 1.0), got = want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      if (m % 128 >= 64) got[size_t(m * N + n)] = 0.0;
  const Comparison c = compare_output(output_with(DType::f32, {M, N}, got), want, 1, M, N, kExact, 128, 128);
  CHECK_EQ(format_heatmap(c), std::string("tiles   bad share per 128x128 output tile, 3 x 3 tiles ('.' none, 1-9 tenths, "
                                          "'#' over 90%):\n  m      0  555\n  m    128  555\n  m    256  ...\n"));
  CHECK_EQ(heat_char(0.95), '#');
  CHECK_EQ(heat_char(0.05), '1');
}

// ------------------------------------------------------------------ modes for tests/runtime.rs

bool parse_shape(const std::string& text, std::vector<int64_t>* shape) {
  shape->clear();
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, x - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
    shape->push_back(std::stoll(part));
    start = x + 1;
  }
  return !shape->empty() && shape->size() <= 4;
}

// values PATTERN DTYPE SEED NAME SHAPE: the storage bits of every element, logical order.
int values_mode(int argc, char** argv) {
  Init init;
  std::string error;
  DType dtype;
  std::vector<int64_t> shape;
  if (argc != 7 || !parse_init(argv[2], &init, &error) || !parse_dtype(argv[3], &dtype) || !parse_shape(argv[6], &shape)) {
    std::fprintf(stderr, "usage: %s values PATTERN DTYPE SEED NAME SHAPE (e.g. uniform bf16 2024 A 4x5)\n%s\n",
                 argv[0], error.c_str());
    return kExitUsage;
  }
  init.seed = std::strtoull(argv[4], nullptr, 10);
  const uint64_t stream = stream_of(argv[5]);
  const int64_t numel = product(int(shape.size()), shape.data());
  for (int64_t i = 0; i < numel; ++i) {
    const double value = generate_value(init, stream, i, int(shape.size()), shape.data());
    std::printf("%0*llx\n", int(2 * dtype_bytes(dtype)), (unsigned long long)encode_bits(dtype, value));
  }
  return 0;
}

// encode DTYPE: for each hex f64 bit pattern on stdin, the storage bits of its conversion.
int encode_mode(int argc, char** argv) {
  DType dtype;
  if (argc != 3 || !parse_dtype(argv[2], &dtype)) {
    std::fprintf(stderr, "usage: %s encode DTYPE < hex-f64-bits\n", argv[0]);
    return kExitUsage;
  }
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    const double value = double_from_bits(std::strtoull(line, nullptr, 16));
    std::printf("%0*llx\n", int(2 * dtype_bytes(dtype)), (unsigned long long)encode_bits(dtype, value));
  }
  return 0;
}

// fatal JSON_PATH: what a hang looks like to the caller.
int fatal_mode(int argc, char** argv) {
  if (argc != 3) return kExitUsage;
  set_command_line(argc, argv);
  set_json_path(argv[2]);
  report_set("spec", json_string("selftest \"quoted\""));
  std::vector<double> want(4, 1.0);
  JsonWriter w;
  write_comparison_json(w, "D", compare_output(output_with(DType::f32, {2, 2}, {1, 2, NAN}, {3}), want, 1, 2, 2,
                                               kExact, 1, 1));
  report_set("output", w.str());
  fatal(kExitHang, "hang", "hang: kernel selftest did not finish within 0.5 s (grid (1,1,1) block (32,1,1))");
}

#include "emulation_checks.h"

}  // namespace

#include "ops_checks.h"

// ------------------------------------------------------------------ attention

// A probe pattern's values over [L][M][N], as the device writes them (ProbeValuesView::at).
inline std::vector<double> expand_on_host(const ProbeValues& v, int64_t L, int64_t M, int64_t N) {
  const ProbeValuesView view = host_view(v);
  std::vector<double> out(size_t(L * M * N));
  for (int64_t i = 0; i < L * M * N; ++i) out[size_t(i)] = view.at(i / (M * N), (i / N) % M, i % N);
  return out;
}

#include "attention_checks.h"
#include "verdict_checks.h"
#include "group_scale_checks.h"

// The probes' patterns (probe_values.cuh): what ProbeValuesView::at gives, on the host, is what
// the device writes (the same function; the harness compares a sample of every expansion), so
// these pin the patterns themselves: the tables, their batches, the identity kinds, the grouped
// answers. Aliased storage (stride 0, overlapping dimensions) is told apart: it is filled on
// the host, in order.
void test_probe_values() {
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {1, 3})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {6, 1})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {1, 4}, {0, 1})));  // stride 0, extent 1
  CHECK(!elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {0, 1})));  // rows broadcast
  CHECK(!elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {2, 1})));  // rows overlap

  // A product of a row table of 2 batches and a column table of one (it holds for every batch).
  const ProbeValues ramp = ProbeValues::constant(3.0)
                               .with_rows(2, 5, [](int64_t b, int64_t r) { return double(1 + r + 10 * b); })
                               .with_columns(1, 4, [](int64_t, int64_t c) { return double(1 << c); });
  const std::vector<double> got = expand_on_host(ramp, 2, 5, 4);
  bool same = got.size() == 40;
  for (int64_t i = 0; i < 40 && same; ++i) {
    const int64_t b = i / 20, r = (i / 4) % 5, c = i % 4;
    same = got[size_t(i)] == 3.0 * double(1 + r + 10 * b) * double(1 << c);
  }
  CHECK(same);
  CHECK(expand_on_host(ProbeValues::constant(7.0), 1, 2, 2) == std::vector<double>(4, 7.0));
  // The identity probe: A[m,k] = (m + 2k) mod 7 + 1, B[k,n] = 1 where k = n mod K, and
  // D[m,n] = alpha A[m, n mod K] (K = 3, N = 7: B repeats every 3 columns).
  const int64_t K = 3;
  const ProbeValuesView a = host_view(ProbeValues::identity(ProbeValues::Kind::identity_a, 1.0, K));
  const ProbeValuesView b = host_view(ProbeValues::identity(ProbeValues::Kind::identity_b, 1.0, K));
  const ProbeValuesView d = host_view(ProbeValues::identity(ProbeValues::Kind::identity_output, 2.0, K));
  bool identity = true;
  for (int64_t m = 0; m < 9; ++m)
    for (int64_t n = 0; n < 7; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += a.at(0, m, k) * b.at(0, k, n);
      identity = identity && d.at(0, m, n) == 2.0 * sum && a.at(0, m, n % K) == double((m + 2 * (n % K)) % 7 + 1);
    }
  CHECK(identity);
  CHECK_EQ(b.at(0, 1, 4), 1.0);
  CHECK_EQ(b.at(0, 2, 4), 0.0);
}


// A queued check held back for its cross-check (deferred_check.cuh), on the host: the next
// check's output held in memory and given back whole; the held check's judgement line,
// disposition and end line printed before it; its report written before the next check's
// (which ended while it was held), so the reports file keeps the checks' order.
void test_held_check(ScratchDir& scratch) {
  // Standard output into a file of the test's own while the runtime prints.
  const std::string printed_path = scratch.file("held-stdout.txt");
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  const int printed = open(printed_path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  dup2(printed, STDOUT_FILENO);

  hold_output();
  std::printf("held line\n");
  CHECK_EQ(end_held_output(), std::string("held line\n"));
  std::printf("after\n");

  // A held check 0 (a sample of no outputs: nothing to compute), then check 1 ends while it is
  // held, then the held one is settled.
  const std::string reports = scratch.file("held-reports.jsonl");
  const std::string json_before = g_json_path;
  set_json_path(reports);
  const long long check_before = g_queue_check;
  auto held = std::make_unique<HeldCheck>();
  held->index = 0;
  held->pending = std::make_shared<PendingCrossCheck>();
  held->pending->done = SampleThread::instance().post([] {});
  g_queue_check = 0;
  g_report_fields = {{"mode", "\"reference\""}};
  g_report_held = &held->report;
  conclude(kExitPassed, "", "");  // check 0's end: held
  deferred_checks().held = std::move(held);
  g_queue_check = 1;
  g_report_held = nullptr;
  g_report_fields = {{"mode", "\"ones\""}};
  hold_output();
  std::printf("queue   check 2: --ones\n");
  conclude(kExitPassed, "", "");  // check 1's end, while check 0 is held
  settle_held_check();
  CHECK(!check_held());
  CHECK(g_reports_waiting == nullptr);

  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(printed);
  std::string text, line;
  std::ifstream printed_in(printed_path);
  while (std::getline(printed_in, line)) text += line + "\n";
  // In order: what was printed before, the held check's last lines, then the next check's.
  const size_t judged = text.find("ref     host cross-check of 0 outputs, judged while the next check ran");
  const size_t held_end = text.find("Disposition: Passed\nqueue   end of check 1\n");
  const size_t next = text.find("queue   check 2: --ones\nDisposition: Passed\n");
  CHECK_EQ(text.rfind("after\n", 0), size_t(0));
  CHECK(judged != std::string::npos && held_end != std::string::npos && next != std::string::npos);
  CHECK(judged < held_end && held_end < next);
  std::ifstream reports_in(reports);
  std::vector<std::string> lines;
  while (std::getline(reports_in, line)) lines.push_back(line);
  CHECK_EQ(lines.size(), size_t(2));
  if (lines.size() == 2) {
    CHECK_CONTAINS(lines[0], "{\"check\":0,\"mode\":\"reference\"");
    CHECK_CONTAINS(lines[0], "\"reference_check_ms\":");
    CHECK_CONTAINS(lines[1], "{\"check\":1,\"mode\":\"ones\"");
  }
  set_json_path(json_before);
  g_queue_check = check_before;
  g_report_fields.clear();
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "values") return values_mode(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "encode") return encode_mode(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "fatal") return fatal_mode(argc, argv);
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s [values ... | encode DTYPE | fatal JSON_PATH]\n", argv[0]);
    return kExitUsage;
  }
  ScratchDir dir;
  test_dtype_basics();
  test_conversions_match_cuda();
  test_conversion_edge_cases();
  test_round_to_and_ulp();
  test_poison();
  test_device_layout();
  test_host_workers();
  test_hash_and_log();
  test_generators();
  test_parse_init();
  test_npy(dir);
  test_tensors(dir);
  test_reference_cache(dir);
  test_cross_check_decode();
  test_held_check(dir);
  test_reference();
  test_scales();
  test_batched_scales();
  test_grouped();
  test_grouped_scales();
  test_compare();
  test_operator_calls();
  test_intermediate_reference_file(dir);
  test_json_and_lines();
  test_classify();
  test_custom_classify();
  test_output_order();
  test_attention_reference();
  test_attention_probe_decoders();
  test_attention_device_reference_host_side();
  test_attention_backward();
  test_probe_verdicts();
  test_operand_layout_verdict();
  test_scale_tile_decode();
  test_grouped_spills();
  test_group_scale_probes();
  test_k_grouped_blocks_probes();
  test_heatmap();
  test_trace_verdicts();
  test_bench_summary();
  test_emulation_plan();
  test_element_bit_range();
  test_width_bin();
  test_element_integer();
  test_moduli();
  test_probe_values();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
