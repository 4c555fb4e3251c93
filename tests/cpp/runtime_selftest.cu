// Host-only self-test of the harness runtime (templates/runtime/src). Needs no GPU: it never
// calls a CUDA API that needs a device. Built and run by tests/suite/runtime.rs; by hand:
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -o runtime_selftest tests/cpp/runtime_selftest.cu
//   ./runtime_selftest                                     # the self-test: "N passed, M failed"
//   ./runtime_selftest values PATTERN DTYPE SEED NAME SHAPE  # generated storage bits, hex, one per line
//   ./runtime_selftest encode DTYPE < f64-bits             # encode_bits of each hex f64 bit pattern
//   ./runtime_selftest fatal JSON_PATH                     # exercises fatal(): exit 5 and a JSON report
//
// The whole runtime library, as one translation unit (what librepro_runtime.a is built from).
#include "../../templates/runtime/src/runtime.cu"

// CUDA's own host-side conversions: an independent oracle for encode().
#include <cuda_fp8.h>

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


// ------------------------------------------------------------------ dtype

void test_dtype_basics() {
  CHECK_EQ(std::string(dtype_name(DType::boolean)), std::string("bool"));
  CHECK_EQ(std::string(dtype_name(DType::e4m3)), std::string("e4m3"));
  DType parsed = DType::f64;
  CHECK(parse_dtype("bf16", &parsed) && parsed == DType::bf16);
  CHECK(parse_dtype("bool", &parsed) && parsed == DType::boolean);
  CHECK(!parse_dtype("float", &parsed));
  CHECK_EQ(dtype_bytes(DType::tf32), size_t(4));
  CHECK_EQ(dtype_bytes(DType::bf16), size_t(2));
  CHECK_EQ(dtype_bytes(DType::e5m2), size_t(1));
  CHECK_EQ(dtype_bytes(DType::i64), size_t(8));
  CHECK(dtype_is_float(DType::tf32) && dtype_is_float(DType::e4m3));
  CHECK(!dtype_is_float(DType::i8) && !dtype_is_float(DType::boolean));
}

uint64_t cuda_oracle(DType dtype, double v) {
  switch (dtype) {
    case DType::f16: return __half_raw(__double2half(v)).x;
    case DType::bf16: return __nv_bfloat16_raw(__double2bfloat16(v)).x;
    case DType::e4m3: return __nv_cvt_double_to_fp8(v, __NV_SATFINITE, __NV_E4M3);  // saturating, like encode
    case DType::e5m2: return __nv_cvt_double_to_fp8(v, __NV_NOSAT, __NV_E5M2);      // overflow -> inf, like encode
    default: return 0;
  }
}

// Doubles that stress rounding in `dtype`: every representable value, the midpoints between
// neighbours (ties), points a hair off the midpoints (one double ulp, and 2^-40 relative: bits
// a 32-bit shortcut would drop), and random doubles across and beyond the format's range.
std::vector<double> rounding_probe_values(DType dtype) {
  const int bits = int(dtype_bytes(dtype)) * 8;
  std::vector<double> representable;
  for (uint64_t b = 0; b < (uint64_t(1) << bits); ++b) {
    const double v = decode_bits(dtype, b);
    if (!std::isnan(v)) representable.push_back(v);
  }
  std::sort(representable.begin(), representable.end());
  representable.erase(std::unique(representable.begin(), representable.end()), representable.end());
  std::vector<double> values = representable;
  for (size_t i = 0; i + 1 < representable.size(); ++i) {
    const double lo = representable[i], hi = representable[i + 1];
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    const double mid = lo + (hi - lo) / 2;  // exact: the formats are far narrower than double
    values.insert(values.end(), {mid, std::nextafter(mid, HUGE_VAL), std::nextafter(mid, -HUGE_VAL),
                                 mid + std::fabs(mid) * 0x1.0p-40, mid - std::fabs(mid) * 0x1.0p-40});
  }
  TestRng rng{0x1234567887654321ull};
  const int max_exponent = float_format(dtype).bias + 2;
  const int min_exponent = 1 - float_format(dtype).bias - float_format(dtype).mantissa_bits - 3;
  for (int i = 0; i < 200000; ++i) {
    const int exponent = min_exponent + int(rng.next() % uint64_t(max_exponent - min_exponent + 1));
    const double v = std::ldexp(1.0 + rng.uniform(), exponent);
    values.push_back(rng.next() & 1 ? -v : v);
  }
  values.insert(values.end(), {0.0, -0.0, HUGE_VAL, -HUGE_VAL, 4.9406564584124654e-324, -2.2250738585072009e-308,
                               1.7976931348623157e308, -1.7976931348623157e308});
  return values;
}

void test_conversions_match_cuda() {
  for (DType dtype : {DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    int mismatches = 0;
    for (double v : rounding_probe_values(dtype)) {
      const uint64_t ours = encode_bits(dtype, v), theirs = cuda_oracle(dtype, v);
      if (ours != theirs && ++mismatches <= 5)
        std::printf("  %s(%.17g = 0x%016llx): ours 0x%llx, CUDA 0x%llx\n", dtype_name(dtype), v,
                    (unsigned long long)double_bits(v), (unsigned long long)ours, (unsigned long long)theirs);
    }
    record(mismatches == 0, __FILE__, __LINE__,
           std::string("encode(") + dtype_name(dtype) + ") matches CUDA's host conversion: " +
               std::to_string(mismatches) + " mismatches");
  }
  // tf32 has f16's 10 fraction bits with f32's exponent range: in f16's normal range the two
  // round identically, which makes f16 an oracle for tf32 there.
  int mismatches = 0;
  for (double v : rounding_probe_values(DType::f16)) {
    if (!(std::fabs(v) >= 0x1.0p-14 && std::fabs(v) <= 65504.0)) continue;
    const double ours = round_to(DType::tf32, v), theirs = double(__half2float(__double2half(v)));
    if (!same_bits(ours, theirs) && ++mismatches <= 5) std::printf("  tf32(%.17g): %.17g vs %.17g\n", v, ours, theirs);
  }
  record(mismatches == 0, __FILE__, __LINE__, "tf32 rounds like f16 in f16's normal range");
  // f32: encode is the C++ cast; the same probe values must round trip through it.
  mismatches = 0;
  for (double v : rounding_probe_values(DType::f16))
    if (!same_bits(round_to(DType::f32, v), double(float(v)))) ++mismatches;
  CHECK_EQ(mismatches, 0);
}

void test_conversion_edge_cases() {
  // Ties to even, and no double rounding through f32: 1 + 2^-11 + 2^-40 lies above the f16 tie
  // at 1 + 2^-11, but rounds to exactly that tie in f32, which then rounds down to 1.
  CHECK_EQ(encode_bits(DType::f16, 1.0 + 0x1.0p-11), uint64_t(0x3C00));
  CHECK_EQ(encode_bits(DType::f16, 1.0 + 3 * 0x1.0p-11), uint64_t(0x3C02));
  CHECK_EQ(encode_bits(DType::f16, 1.0 + 0x1.0p-11 + 0x1.0p-40), uint64_t(0x3C01));
  CHECK_EQ(encode_bits(DType::bf16, 1.0 + 0x1.0p-8), uint64_t(0x3F80));
  CHECK_EQ(encode_bits(DType::bf16, 1.0 + 0x1.0p-8 + 0x1.0p-30), uint64_t(0x3F81));
  CHECK_EQ(encode_bits(DType::tf32, 1.0 + 0x1.0p-11), uint64_t(0x3F800000));
  CHECK_EQ(encode_bits(DType::tf32, 1.0 + 0x1.0p-11 + 0x1.0p-40), uint64_t(0x3F802000));
  CHECK_EQ(encode_bits(DType::f32, 1.0 + 0x1.0p-24), uint64_t(0x3F800000));
  CHECK_EQ(encode_bits(DType::f32, 1.0 + 0x1.0p-24 + 0x1.0p-50), uint64_t(0x3F800001));
  // Subnormals and underflow.
  CHECK_EQ(encode_bits(DType::f16, 0x1.0p-24), uint64_t(0x0001));
  CHECK_EQ(encode_bits(DType::f16, 0x1.0p-25), uint64_t(0x0000));  // tie with 0: even
  CHECK_EQ(encode_bits(DType::f16, 0x1.8p-25), uint64_t(0x0001));
  CHECK_EQ(encode_bits(DType::f16, -0x1.0p-30), uint64_t(0x8000));  // underflow keeps the sign
  CHECK_EQ(encode_bits(DType::e4m3, 0x1.0p-9), uint64_t(0x01));
  CHECK_EQ(encode_bits(DType::e4m3, 0x1.0p-10), uint64_t(0x00));
  CHECK_EQ(encode_bits(DType::e5m2, 0x1.0p-16), uint64_t(0x01));
  CHECK_EQ(encode_bits(DType::tf32, 0x1.0p-136), uint64_t(0x00002000));  // smallest tf32 subnormal
  CHECK_EQ(encode_bits(DType::tf32, 0x1.0p-137), uint64_t(0x00000000));
  CHECK_EQ(encode_bits(DType::bf16, 0x1.0p-133), uint64_t(0x0001));
  // Overflow: f16/bf16/tf32/e5m2 go to inf once past max + half an ulp; e4m3 saturates at 448.
  CHECK_EQ(encode_bits(DType::f16, 65504.0), uint64_t(0x7BFF));
  CHECK_EQ(encode_bits(DType::f16, 65519.0), uint64_t(0x7BFF));
  CHECK_EQ(encode_bits(DType::f16, 65520.0), uint64_t(0x7C00));
  CHECK_EQ(encode_bits(DType::f16, -1e10), uint64_t(0xFC00));
  CHECK_EQ(encode_bits(DType::tf32, 0x1.FFCp127), uint64_t(0x7F7FE000));  // max tf32
  CHECK_EQ(encode_bits(DType::tf32, 0x1.FFDp127), uint64_t(0x7F7FE000));
  CHECK_EQ(encode_bits(DType::tf32, 0x1.FFEp127), uint64_t(0x7F800000));  // its tie with 2^128: inf
  CHECK_EQ(encode_bits(DType::e5m2, 57344.0), uint64_t(0x7B));
  CHECK_EQ(encode_bits(DType::e5m2, 61440.0), uint64_t(0x7C));
  CHECK_EQ(encode_bits(DType::e4m3, 448.0), uint64_t(0x7E));
  CHECK_EQ(encode_bits(DType::e4m3, 464.0), uint64_t(0x7E));
  CHECK_EQ(encode_bits(DType::e4m3, 1e9), uint64_t(0x7E));
  CHECK_EQ(encode_bits(DType::e4m3, -HUGE_VAL), uint64_t(0xFE));
  CHECK_EQ(encode_bits(DType::e4m3, 240.0), uint64_t(0x77));
  // NaN encodes to each format's canonical NaN.
  const double nan = std::nan("");
  CHECK_EQ(encode_bits(DType::f64, -nan), uint64_t(0x7FF8000000000000ull));
  CHECK_EQ(encode_bits(DType::f32, -nan), uint64_t(0x7FC00000));
  CHECK_EQ(encode_bits(DType::tf32, nan), uint64_t(0x7FC00000));
  CHECK_EQ(encode_bits(DType::f16, nan), uint64_t(0x7E00));
  CHECK_EQ(encode_bits(DType::bf16, nan), uint64_t(0x7FC0));
  CHECK_EQ(encode_bits(DType::e4m3, nan), uint64_t(0x7F));
  CHECK_EQ(encode_bits(DType::e5m2, nan), uint64_t(0x7E));
  // Decoding special encodings.
  CHECK_EQ(decode_bits(DType::e4m3, 0x7E), 448.0);
  CHECK(std::isnan(decode_bits(DType::e4m3, 0x7F)) && std::isnan(decode_bits(DType::e4m3, 0xFF)));
  CHECK_EQ(decode_bits(DType::e4m3, 0x78), 256.0);  // exponent field all ones is still finite in E4M3FN
  CHECK_EQ(decode_bits(DType::e5m2, 0x7C), HUGE_VAL);
  CHECK(std::isnan(decode_bits(DType::e5m2, 0x7D)));
  CHECK_EQ(decode_bits(DType::f16, 0xFC00), -HUGE_VAL);
  CHECK_EQ(decode_bits(DType::bf16, 0x7F80), HUGE_VAL);
  CHECK_EQ(decode_bits(DType::f16, 0x0001), 0x1.0p-24);
  CHECK(same_bits(decode_bits(DType::f16, 0x8000), -0.0));
  CHECK_EQ(decode_bits(DType::tf32, 0x3F802000), 1.0 + 0x1.0p-10);
  // Every encoding of the narrow formats survives decode -> encode (NaNs become canonical).
  for (DType dtype : {DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    int broken = 0;
    for (uint64_t b = 0; b < (uint64_t(1) << (8 * dtype_bytes(dtype))); ++b) {
      const double v = decode_bits(dtype, b);
      const uint64_t back = encode_bits(dtype, v);
      if (back != (std::isnan(v) ? canonical_nan_bits(dtype) : b)) ++broken;
    }
    record(broken == 0, __FILE__, __LINE__, std::string("decode/encode round trip of every ") + dtype_name(dtype));
  }
  // Integers: round half to even, then clamp; NaN is 0.
  CHECK_EQ(decode_bits(DType::i32, encode_bits(DType::i32, 2.5)), 2.0);
  CHECK_EQ(decode_bits(DType::i32, encode_bits(DType::i32, 3.5)), 4.0);
  CHECK_EQ(decode_bits(DType::i32, encode_bits(DType::i32, -2.5)), -2.0);
  CHECK_EQ(decode_bits(DType::i32, encode_bits(DType::i32, -2.5000001)), -3.0);
  CHECK_EQ(encode_bits(DType::i8, 300.0), uint64_t(0x7F));
  CHECK_EQ(encode_bits(DType::i8, -1e30), uint64_t(0x80));
  CHECK_EQ(encode_bits(DType::i8, -1.0), uint64_t(0xFF));
  CHECK_EQ(encode_bits(DType::u8, -3.0), uint64_t(0));
  CHECK_EQ(encode_bits(DType::u8, 255.5), uint64_t(255));
  CHECK_EQ(encode_bits(DType::u32, 1e12), uint64_t(0xFFFFFFFFu));
  CHECK_EQ(encode_bits(DType::i32, -1.0), uint64_t(0xFFFFFFFFu));
  CHECK_EQ(encode_bits(DType::i64, 1e19), uint64_t(INT64_MAX));
  CHECK_EQ(encode_bits(DType::i64, -1e19), uint64_t(INT64_MIN));
  CHECK_EQ(encode_bits(DType::i64, 0x1.0p62), uint64_t(1) << 62);
  CHECK_EQ(encode_bits(DType::i32, nan), uint64_t(0));
  CHECK_EQ(decode_bits(DType::i8, 0x80), -128.0);
  CHECK_EQ(decode_bits(DType::i64, 0xFFFFFFFFFFFFFFFFull), -1.0);
  CHECK_EQ(encode_bits(DType::boolean, 0.5), uint64_t(1));
  CHECK_EQ(encode_bits(DType::boolean, -0.0), uint64_t(0));
  CHECK_EQ(decode_bits(DType::boolean, 0x02), 1.0);
}

void test_round_to_and_ulp() {
  CHECK_EQ(round_to(DType::bf16, 1001.0), 1000.0);  // bf16 spacing in [512, 1024) is 4
  CHECK_EQ(round_to(DType::bf16, 1002.0), 1000.0);  // ties: 1000 = 250 * 4 has the even significand
  CHECK_EQ(round_to(DType::bf16, 1006.0), 1008.0);
  CHECK_EQ(round_to(DType::e4m3, 17.0), 16.0);
  CHECK_EQ(round_to(DType::f64, 0.1), 0.1);
  CHECK_EQ(round_to(DType::i8, 7.49), 7.0);
  CHECK_EQ(ulp_at(DType::f64, 1.0), 0x1.0p-52);
  CHECK_EQ(ulp_at(DType::f32, 1.0), 0x1.0p-23);
  CHECK_EQ(ulp_at(DType::f32, 1.99), 0x1.0p-23);
  CHECK_EQ(ulp_at(DType::f32, -2.0), 0x1.0p-22);
  CHECK_EQ(ulp_at(DType::tf32, 1.0), 0x1.0p-10);
  CHECK_EQ(ulp_at(DType::bf16, 1000.0), 4.0);
  CHECK_EQ(ulp_at(DType::bf16, 1001.0), 4.0);
  CHECK_EQ(ulp_at(DType::f16, 0x1.0p-20), 0x1.0p-24);  // subnormal range: fixed spacing
  CHECK_EQ(ulp_at(DType::f16, 0.0), 0x1.0p-24);
  CHECK_EQ(ulp_at(DType::e4m3, 448.0), 32.0);
  CHECK_EQ(ulp_at(DType::e5m2, 1.0), 0.25);
  CHECK_EQ(ulp_at(DType::i32, 12345.0), 1.0);
  CHECK(std::isnan(ulp_at(DType::f32, HUGE_VAL)));
}

void test_poison() {
  const DType all[] = {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2,
                       DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::boolean};
  for (DType dtype : all) {
    std::vector<unsigned char> storage(3 * dtype_bytes(dtype), 0);
    fill_poison(dtype, storage.data(), 3);
    bool all_poison = true;
    for (int i = 0; i < 3; ++i) all_poison = all_poison && is_poison(dtype, storage.data(), i);
    record(all_poison, __FILE__, __LINE__, std::string("fill_poison/is_poison for ") + dtype_name(dtype));
    if (dtype_is_float(dtype))
      record(std::isnan(decode(dtype, storage.data(), 1)), __FILE__, __LINE__,
             std::string("poison is NaN in ") + dtype_name(dtype));
    encode(dtype, storage.data(), 1, 1.0);
    record(!is_poison(dtype, storage.data(), 1) && is_poison(dtype, storage.data(), 2), __FILE__, __LINE__,
           std::string("a written element is no longer poison in ") + dtype_name(dtype));
  }
  std::vector<unsigned char> partly(4, 0xFF);
  partly[2] = 0x7F;
  CHECK(!is_poison(DType::f32, partly.data(), 0));
}

// The device passes' layout (device_inputs.cuh): its shortcut for row-major tensors without
// gaps must give every element the offset the general rule gives, and must not be taken for
// any other layout.
void test_device_layout() {
  struct Case {
    std::vector<int64_t> shape, strides;
    bool dense;
  };
  const std::vector<Case> cases = {
      {{7}, {1}, true},
      {{7}, {2}, false},
      {{3, 5}, {5, 1}, true},
      {{3, 5}, {1, 3}, false},           // column-major
      {{3, 5}, {8, 1}, false},           // padded rows
      {{1, 5}, {99, 1}, true},           // an extent-1 dimension's stride never counts
      {{4, 1, 6}, {6, 1234, 1}, true},
      {{2, 3, 4}, {12, 1, 3}, false},    // batched column-major
      {{2, 2, 3, 4}, {24, 12, 4, 1}, true},
      {{2, 2, 3, 4}, {48, 12, 4, 1}, false},  // a gap between batches
  };
  for (const Case& c : cases) {
    Tensor t;
    t.dtype = DType::f32;
    t.rank = int(c.shape.size());
    for (int d = 0; d < t.rank; ++d) t.shape[d] = c.shape[size_t(d)], t.strides[d] = c.strides[size_t(d)];
    const DeviceLayout layout = device_layout(t);
    CHECK_EQ(layout.dense, c.dense);
    bool same = true;
    for (int64_t i = 0; i < t.numel(); ++i) same = same && layout.logical_offset(i) == t.logical_offset(i);
    CHECK(same);
  }
}

// ------------------------------------------------------------------ generators

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

// ------------------------------------------------------------------ npy

// A .npy file written by hand, to test what write_npy never produces.
std::string handmade_npy(const std::string& dict, const void* data, size_t bytes, int major = 1) {
  std::string file("\x93NUMPY", 6);
  file += char(major);
  file += char(0);
  const size_t length = dict.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) file += char((length >> (8 * i)) & 0xFF);
  file += dict;
  file.append(static_cast<const char*>(data), bytes);
  return file;
}

void write_text(const std::string& path, const std::string& content) {
  std::string error;
  if (!write_file_bytes(path, content.data(), content.size(), &error)) std::printf("  %s\n", error.c_str());
}

void test_npy(ScratchDir& dir) {
  std::string error;
  // Round trip of every dtype, rank 1 to 4.
  const DType all[] = {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2,
                       DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::boolean};
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
  for (DType dtype : all) {
    for (const std::vector<int64_t>& shape : shapes) {
      const int rank = int(shape.size());
      const int64_t numel = product(rank, shape.data());
      std::vector<unsigned char> data(size_t(numel) * dtype_bytes(dtype));
      for (int64_t i = 0; i < numel; ++i) encode(dtype, data.data(), i, double(i % 5) - 2.0);
      const std::string path = dir.file(std::string("rt_") + dtype_name(dtype) + std::to_string(rank) + ".npy");
      std::vector<unsigned char> loaded;
      const bool ok = write_npy(path, dtype, rank, shape.data(), data.data(), &error) &&
                      load_tensor_file(path, "T", dtype, rank, shape.data(), &loaded, &error);
      record(ok && loaded == data, __FILE__, __LINE__,
             std::string("npy round trip of ") + dtype_name(dtype) + " " + format_shape(rank, shape.data()) + " " + error);
    }
  }
  // The header numpy expects: version 1.0, data 64-byte aligned, the descr of the dtype.
  std::vector<unsigned char> file;
  const int64_t shape23[2] = {2, 3};
  {
    // Unbounded inputs are refused before any read: a device never ends, a fifo blocks.
    std::vector<unsigned char> logical;
    const int64_t shape2[2] = {4, 4};
    std::string why;
    CHECK(!load_tensor_file("/dev/zero.npy", "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK(!read_file_bytes("/dev/zero", &logical, &why, 1 << 20));
    CHECK_CONTAINS(why, "is not a regular file (a character device)");
    const std::string fifo = dir.path + "/fifo.npy";
    CHECK(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(!load_tensor_file(fifo, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "is not a regular file (a fifo)");
    // Larger than the tensor: refused by its size, unread.
    const std::string big = dir.path + "/big.bin";
    std::vector<unsigned char> bytes(65, 0);
    CHECK(write_file_bytes(big, bytes.data(), bytes.size(), &why));
    CHECK(!load_tensor_file(big, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "has 65 bytes; tensor Z (f32 [4, 4]) needs exactly 64");
    const std::string big_npy = dir.path + "/big.npy";
    std::vector<unsigned char> huge((size_t(1) << 20) + 200, 0);
    CHECK(write_file_bytes(big_npy, huge.data(), huge.size(), &why));
    CHECK(!load_tensor_file(big_npy, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "this tensor's data can take; it is not read");
  }
  read_file_bytes(dir.path + "/rt_bf162.npy", &file, &error);
  const size_t header_length = file[8] | (size_t(file[9]) << 8);
  CHECK(file[6] == 1 && file[7] == 0 && (10 + header_length) % 64 == 0 && file[10 + header_length - 1] == '\n');
  CHECK_CONTAINS(std::string(file.begin() + 10, file.begin() + 10 + long(header_length)),
                 "{'descr': '<u2', 'fortran_order': False, 'shape': (3, 5), }");
  read_file_bytes(dir.path + "/rt_i81.npy", &file, &error);
  CHECK_CONTAINS(std::string(file.begin(), file.end()), "'descr': '|i1', 'fortran_order': False, 'shape': (7,), }");

  // Fortran order: column-major data, loaded into logical row-major order.
  const float column_major[6] = {1, 4, 2, 5, 3, 6};  // [[1, 2, 3], [4, 5, 6]]
  const std::string fortran = dir.file("fortran.npy");
  write_text(fortran, handmade_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", column_major, 24));
  std::vector<unsigned char> loaded;
  CHECK(load_tensor_file(fortran, "A", DType::f32, 2, shape23, &loaded, &error));
  std::string order;
  for (int i = 0; i < 6; ++i) order += format_value(decode(DType::f32, loaded.data(), i));
  CHECK_EQ(order, std::string("123456"));
  // Rank 3, Fortran order: element (i, j, k) sits at i + 2 j + 4 k.
  int16_t f3[16];
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) f3[i + 2 * j + 4 * k] = int16_t(100 * i + 10 * j + k);
  const int64_t shape224[3] = {2, 2, 4};
  const std::string fortran3 = dir.file("fortran3.npy");
  write_text(fortran3, handmade_npy("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2, 4)}", f3, sizeof f3, 2));
  CHECK(load_tensor_file(fortran3, "B", DType::bf16, 3, shape224, &loaded, &error));  // bf16 accepts raw <i2
  bool fortran_ok = loaded.size() == 32;
  for (int64_t i = 0; fortran_ok && i < 16; ++i) {
    const int64_t want = 100 * (i / 8) + 10 * ((i / 4) % 2) + i % 4;
    fortran_ok = int16_t(load_bits(DType::bf16, loaded.data(), i)) == want;
  }
  CHECK(fortran_ok);

  // Raw-bit carriers for bf16 and fp8, and numpy's other spellings of one-byte types.
  const unsigned char two_bytes[12] = {0x80, 0x3F};
  const std::string void2 = dir.file("void2.npy");
  write_text(void2, handmade_npy("{'descr': '|V2', 'fortran_order': False, 'shape': (2, 3), }", two_bytes, 12));
  CHECK(load_tensor_file(void2, "A", DType::bf16, 2, shape23, &loaded, &error) && decode(DType::bf16, loaded.data(), 0) == 1.0);
  const unsigned char six_bytes[6] = {0x38, 0, 0, 0, 0, 0};
  const std::string int8 = dir.file("int8.npy");
  write_text(int8, handmade_npy("{\"descr\": \"<i1\", \"fortran_order\": False, \"shape\": (2, 3)}", six_bytes, 6));
  CHECK(load_tensor_file(int8, "A", DType::e4m3, 2, shape23, &loaded, &error) && decode(DType::e4m3, loaded.data(), 0) == 1.0);
  CHECK(load_tensor_file(int8, "A", DType::i8, 2, shape23, &loaded, &error));

  // Mismatches name the file, what it holds, and what the tensor needs.
  const std::string f32_file = dir.path + "/rt_f322.npy";  // f32 [3, 5]
  const int64_t shape35[2] = {3, 5}, shape53[2] = {5, 3};
  CHECK(!load_tensor_file(f32_file, "A", DType::bf16, 2, shape35, &loaded, &error));
  CHECK_CONTAINS(error, f32_file + " holds <f4 [3, 5] but tensor A (bf16 [3, 5]) needs <u2 (also accepted: |V2, <V2, <i2) [3, 5]");
  CHECK(!load_tensor_file(f32_file, "A", DType::f32, 2, shape53, &loaded, &error));
  CHECK_CONTAINS(error, "holds <f4 [3, 5] but tensor A (f32 [5, 3]) needs <f4 [5, 3]");
  CHECK(!load_tensor_file(f32_file, "A", DType::f32, 1, shape35 + 1, &loaded, &error));
  CHECK_CONTAINS(error, "needs <f4 [5]");
  const std::string big_endian = dir.file("big.npy");
  write_text(big_endian, handmade_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", column_major, 24));
  CHECK(!load_tensor_file(big_endian, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "holds >f4 [2, 3]");
  const std::string truncated = dir.file("truncated.npy");
  write_text(truncated, handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", column_major, 20));
  CHECK(!load_tensor_file(truncated, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "is truncated: 24 bytes of elements expected, 20 present");
  const std::string not_npy = dir.file("not.npy");
  write_text(not_npy, "hello, world");
  CHECK(!load_tensor_file(not_npy, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "is not a .npy file");
  const std::string bad_header = dir.file("badheader.npy");
  write_text(bad_header, handmade_npy("{'descr': '<f4', 'shape': (2, 3), }", column_major, 24));
  CHECK(!load_tensor_file(bad_header, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "cannot read the .npy header (descr, fortran_order or shape is missing)");
  CHECK(!load_tensor_file(dir.path + "/missing.npy", "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "cannot read " + dir.path + "/missing.npy: No such file or directory");
  CHECK(!load_tensor_file(dir.path + "/a.txt", "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "unknown file type for tensor A (f32 [2, 3]); use .npy, or .bin");

  // .bin: raw elements, exactly numel * bytes.
  const std::string bin = dir.file("a.bin");
  write_text(bin, std::string(reinterpret_cast<const char*>(column_major), 24));
  CHECK(load_tensor_file(bin, "A", DType::f32, 2, shape23, &loaded, &error) && decode(DType::f32, loaded.data(), 1) == 4.0f);
  CHECK(!load_tensor_file(bin, "A", DType::f16, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, bin + " has 24 bytes; tensor A (f16 [2, 3]) needs exactly 12 (6 elements x 2 bytes)");
}

// ------------------------------------------------------------------ tensors

void test_tensors(ScratchDir& dir) {
  std::string error;
  Tensor row = make_tensor("A", DType::bf16, {3, 4});
  Tensor col = make_tensor("A", DType::bf16, {3, 4}, {1, 3});
  Tensor padded = make_tensor("A", DType::bf16, {3, 4}, {6, 1});
  CHECK_EQ(row.numel(), int64_t(12));
  CHECK_EQ(col.storage_elements(), int64_t(12));
  CHECK_EQ(padded.storage_elements(), int64_t(16));
  CHECK_EQ(padded.storage_bytes(), size_t(32));
  const int64_t index[2] = {2, 1};
  CHECK_EQ(col.offset(index), int64_t(5));
  CHECK_EQ(padded.offset(index), int64_t(13));
  CHECK_EQ(col.logical_offset(9), int64_t(5));
  CHECK_EQ(make_tensor("E", DType::f32, {0, 4}).storage_elements(), int64_t(0));
  // The same logical values whatever the layout; padding is zero.
  CHECK(fill_host(row, "", &error) && fill_host(col, "", &error) && fill_host(padded, "", &error));
  bool same = true;
  for (int64_t i = 0; i < 12; ++i) same = same && same_bits(get_logical(row, i), get_logical(col, i)) &&
                                           same_bits(get_logical(row, i), get_logical(padded, i));
  CHECK(same);
  CHECK(get_logical(row, 0) != get_logical(row, 1));
  CHECK(decode(DType::bf16, padded.host.data(), 4) == 0.0 && decode(DType::bf16, padded.host.data(), 11) == 0.0);
  // Outputs are poison everywhere, padding included.
  Tensor out = make_tensor("D", DType::f32, {2, 3}, {4, 1}, true);
  CHECK(fill_host(out, "", &error));
  bool poisoned = out.host.size() == 7 * 4;  // 1 * 4 + 2 + 1 elements
  for (int64_t e = 0; e < out.storage_elements(); ++e) poisoned = poisoned && is_poison(DType::f32, out.host.data(), e);
  CHECK(poisoned);
  // File inits: relative to base_dir; a col_major tensor still reads the file as logical order.
  const int64_t shape[2] = {3, 4};
  std::string written = dir.file("a_rowmajor.npy");
  CHECK(write_npy(written, col, col.host.data(), &error));
  Tensor from_file = make_tensor("A", DType::bf16, {3, 4}, {1, 3});
  from_file.init = init_of("file:a_rowmajor.npy");
  CHECK(fill_host(from_file, dir.path, &error));
  CHECK(from_file.host == col.host);
  Tensor absolute = make_tensor("A", DType::bf16, {3, 4});
  absolute.init = init_of("file:" + written);
  CHECK(fill_host(absolute, "/nonexistent", &error) && absolute.host == row.host);
  std::vector<unsigned char> logical;
  CHECK(load_tensor_file(written, "A", DType::bf16, 2, shape, &logical, &error) && logical == row.host);
  Tensor missing = make_tensor("A", DType::bf16, {3, 4});
  missing.init = init_of("file:nope.npy");
  CHECK(!fill_host(missing, dir.path, &error));
  CHECK_CONTAINS(error, dir.path + "/nope.npy");
  // Different names with the same seed differ.
  Tensor other = make_tensor("B", DType::bf16, {3, 4});
  CHECK(fill_host(other, "", &error) && other.host != row.host);
}

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

// ------------------------------------------------------------------ compare

// An output tensor holding `values` (logical order); NaN entries of `poison_mask` stay poison.
Tensor output_with(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values,
                   const std::vector<int64_t>& unwritten = {}, std::vector<int64_t> strides = {}) {
  Tensor t = make_tensor("D", dtype, shape, strides, true);
  std::string error;
  fill_host(t, "", &error);
  for (size_t i = 0; i < values.size(); ++i)
    if (std::find(unwritten.begin(), unwritten.end(), int64_t(i)) == unwritten.end()) set_logical(t, int64_t(i), values[i]);
  return t;
}

const Tolerance kExact{0, 0, 0, true};

void test_compare() {
  // Exact mode: K = 1000, a kernel that drops 8 of K gives 992: 0.8% off, and bad.
  std::vector<double> want(4 * 8, 1000.0);
  std::vector<double> got = want;
  got[13] = 992.0;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Comparison c = compare_output(output_with(dtype, {4, 8}, got), want, 1, 4, 8, kExact, 2, 4);
    CHECK(c.bad == 1 && !c.passed && c.count == 32 && c.first.size() == 1);
    CHECK(c.first[0].m == 1 && c.first[0].n == 5 && c.first[0].got == 992.0 && c.first[0].want == 1000.0);
    CHECK(c.bad_per_tile == std::vector<int64_t>({0, 1, 0, 0}));
    const Comparison loose = compare_output(output_with(dtype, {4, 8}, got), want, 1, 4, 8,
                                            default_tolerance(dtype, DType::bf16, DType::bf16, 1000.0), 2, 4);
    if (dtype == DType::bf16) CHECK(loose.passed);  // what random-input tolerance would have let through
  }
  // Exact mode where the answer is not representable: 1001 in bf16 lies between 1000 and 1004,
  // and either neighbour is within one bf16 ulp (4) of it.
  const std::vector<double> want1001(1, 1001.0);
  CHECK(compare_output(output_with(DType::bf16, {1, 1}, {1000.0}), want1001, 1, 1, 1, kExact, 1, 1).passed);
  CHECK(compare_output(output_with(DType::bf16, {1, 1}, {1004.0}), want1001, 1, 1, 1, kExact, 1, 1).passed);
  CHECK(!compare_output(output_with(DType::bf16, {1, 1}, {1008.0}), want1001, 1, 1, 1, kExact, 1, 1).passed);
  CHECK(!compare_output(output_with(DType::bf16, {1, 1}, {996.0}), want1001, 1, 1, 1, kExact, 1, 1).passed);
  CHECK(!compare_output(output_with(DType::f32, {1, 1}, {1000.0}), want1001, 1, 1, 1, kExact, 1, 1).passed);

  // Tolerance mode on random data.
  TestRng rng{7};
  std::vector<double> ref(64 * 48);
  for (double& v : ref) v = rng.uniform() * 2 - 1;
  const Tolerance f32_tol = default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(ref));
  std::vector<double> close = ref;
  for (double& v : close) v *= 1 + 1e-6;
  Comparison c = compare_output(output_with(DType::f32, {64, 48}, close), ref, 1, 64, 48, f32_tol, 16, 16);
  CHECK(c.passed && c.bad == 0 && c.rel_l2 < 2e-6 && std::fabs(c.ratio - 1.0) < 2e-6);
  close[100] += 0.5;
  c = compare_output(output_with(DType::f32, {64, 48}, close), ref, 1, 64, 48, f32_tol, 16, 16);
  CHECK(!c.passed && c.bad == 1 && c.first[0].m == 2 && c.first[0].n == 4);
  // Near-zero outputs: atol = rtol * rms absorbs cancellation error.
  std::vector<double> tiny = {1e-9, 1.0};
  CHECK(compare_output(output_with(DType::f32, {1, 2}, {2e-9, 1.0}), tiny, 1, 1, 2,
                       default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(tiny)), 1, 2).bad == 0);

  // Unwritten outputs, NaN, Inf, counted apart; poison is not NaN.
  c = compare_output(output_with(DType::f32, {64, 48}, ref, {5, 48 * 60 + 7, 48 * 61 + 40}), ref, 1, 64, 48, f32_tol,
                     16, 16);
  CHECK(c.unwritten == 3 && c.bad == 3 && c.nan == 0 && !c.passed);
  CHECK(c.first[0].poison && c.first[0].m == 0 && c.first[0].n == 5);
  CHECK(c.unwritten_row_min == 0 && c.unwritten_row_max == 61 && c.unwritten_col_min == 5 && c.unwritten_col_max == 40);
  CHECK(c.rel_l2 < 1e-7);  // unwritten elements stay out of the norms: only f32 rounding remains
  std::vector<double> nonfinite = ref;
  nonfinite[3] = NAN, nonfinite[4] = HUGE_VAL, nonfinite[5] = -HUGE_VAL;
  c = compare_output(output_with(DType::f32, {64, 48}, nonfinite), ref, 1, 64, 48, f32_tol, 16, 16);
  CHECK(c.nan == 1 && c.inf == 2 && c.bad == 3 && c.unwritten == 0 && std::isfinite(c.rel_l2));
  // Where the reference itself is not finite, the output must match it.
  std::vector<double> want_inf = {HUGE_VAL, NAN};
  CHECK(compare_output(output_with(DType::f32, {1, 2}, {HUGE_VAL, NAN}), want_inf, 1, 1, 2, f32_tol, 1, 2).passed);
  CHECK(compare_output(output_with(DType::f32, {1, 2}, {1.0, NAN}), want_inf, 1, 1, 2, f32_tol, 1, 2).bad == 1);
  // An integer output may equal the poison: -1 in i8 where the reference says -1 is written.
  std::vector<double> minus_one = {-1.0, -1.0};
  c = compare_output(output_with(DType::i8, {1, 2}, {-1.0}, {1}), minus_one, 1, 1, 2,
                     default_tolerance(DType::i8, DType::i8, DType::i8, 1.0), 1, 2);
  CHECK(c.passed && c.unwritten == 0);
  c = compare_output(output_with(DType::i8, {1, 2}, {-1.0}, {1}), std::vector<double>{-1.0, 3.0}, 1, 1, 2,
                     default_tolerance(DType::i8, DType::i8, DType::i8, 1.0), 1, 2);
  CHECK(c.unwritten == 1 && !c.passed);
  // The residual visits every output, the last ones too, when some earlier ones are not compared:
  // 256 x 1024 outputs (4 chunks), 100 not compared near the start, the last 50 wrong by 2x.
  // (The residual's pass once split the outputs by the count left after the not-compared ones
  // and so skipped the last 100, the wrong ones among them: 0.000188 where this is 0.0137. The
  // device's comparison disagreed with it in device_reference_check's `compare` mode.)
  {
    const int64_t rows = 256, cols = 1024, count = rows * cols;
    std::vector<double> want_many(static_cast<size_t>(count)), got_many(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) want_many[size_t(i)] = got_many[size_t(i)] = double(i % 13 + 1);
    for (int64_t i = count - 50; i < count; ++i) got_many[size_t(i)] *= 2.0;
    for (int64_t i = 10; i < 110; ++i) want_many[size_t(i)] = not_compared_value();
    const auto compared = [](int64_t i) { return i < 10 || i >= 110; };
    double cross = 0.0, ref2 = 0.0, got2 = 0.0;
    for (int64_t i = 0; i < count; ++i)
      if (compared(i))
        cross += got_many[size_t(i)] * want_many[size_t(i)], ref2 += want_many[size_t(i)] * want_many[size_t(i)],
            got2 += got_many[size_t(i)] * got_many[size_t(i)];
    double residual2 = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      const double r = got_many[size_t(i)] - cross / ref2 * want_many[size_t(i)];
      if (compared(i)) residual2 += r * r;
    }
    c = compare_output(output_with(DType::f32, {rows, cols}, got_many), want_many, 1, rows, cols, f32_tol, 16, 16);
    CHECK(c.not_compared == 100 && c.count == count - 100 && c.bad == 50);
    CHECK(std::fabs(c.residual - std::sqrt(residual2 / got2)) <= 1e-12 * std::sqrt(residual2 / got2));
  }
  // Layout and batches: a col_major output and a rank-3 output are compared logically.
  std::vector<double> batched(2 * 3 * 5);
  for (size_t i = 0; i < batched.size(); ++i) batched[i] = double(i);
  std::vector<double> wrong = batched;
  wrong[15 + 5 + 2] = -1;
  c = compare_output(output_with(DType::f32, {2, 3, 5}, wrong, {}, {1, 2, 6}), batched, 2, 3, 5, kExact, 2, 4);
  CHECK(c.bad == 1 && c.first[0].l == 1 && c.first[0].m == 1 && c.first[0].n == 2);
  CHECK(c.bad_per_tile == std::vector<int64_t>({1, 0, 0, 0}));
  // Scale statistics.
  std::vector<double> doubled = ref;
  for (double& v : doubled) v *= 2;
  c = compare_output(output_with(DType::f32, {64, 48}, doubled), ref, 1, 64, 48, f32_tol, 16, 16);
  CHECK(std::fabs(c.ratio - 2.0) < 1e-6 && c.residual < 1e-7 && c.max_rel > 0.99 && c.rel_l2 > 0.99);
  CHECK(std::fabs(c.ref_rms - reference_rms(ref)) < 1e-15);
  // Many chunks (compared in parallel, merged in order): the first mismatches stay in row-major
  // order, and the counts, the unwritten span and the per-row table are whole.
  {
    const int64_t M = 1024, N = 1024;
    std::vector<double> big_ref(size_t(M * N), 3.0), big_got = big_ref;
    for (int64_t i : {int64_t(900000), int64_t(5), int64_t(300001), int64_t(70000)}) big_got[size_t(i)] = 4.0;
    const Comparison big = compare_output(output_with(DType::f32, {M, N}, big_got, {1000, 1048575}), big_ref, 1, M,
                                          N, kExact, 128, 128);
    CHECK_EQ(big.bad, int64_t(6));
    CHECK_EQ(big.unwritten, int64_t(2));
    CHECK(big.first.size() == 6 && big.first[0].n == 5 && big.first[1].n == 1000 && big.first[2].m == 68 &&
          big.first[3].m == 292 && big.first[4].m == 878 && big.first[5].m == 1023);
    CHECK(big.unwritten_row_min == 0 && big.unwritten_row_max == 1023 && big.unwritten_col_min == 1000 &&
          big.unwritten_col_max == 1023);
    CHECK(big.bad_per_row[0] == 2 && big.bad_per_row[1023] == 1 && big.bad_per_tile[0] == 1 &&
          big.bad_per_tile[7] == 1);
    CHECK(big.max_abs == 1.0 && big.ratio > 1.0);
  }
  // Repeat runs.
  Tensor first = output_with(DType::bf16, {4, 8}, want, {}, {1, 4});
  const std::vector<unsigned char> first_storage = first.host;
  CHECK_EQ(run_differences(first, first_storage, first.host, want, kExact).total, int64_t(0));
  // Output 3: right in the first run, wrong in the second (a race). Output 30: wrong in both
  // runs, differently (stale data). -0.0 differs from 0.0 bit for bit, and counts.
  set_logical(first, 30, 16.0);
  const std::vector<unsigned char> earlier = first.host;
  set_logical(first, 3, 1008.0);
  set_logical(first, 30, -0.0);
  RunDifferences d = run_differences(first, earlier, first.host, want, kExact);
  CHECK_EQ(d.total, int64_t(2));
  CHECK_EQ(d.stale, int64_t(1));
  CHECK_EQ(d.wrong, int64_t(2));
  // One flipped output among two wrong ones moves the errors: a race. A few flipped among many
  // outputs wrong in every run is stale data that matched by chance.
  CHECK(is_race(d) && !is_race(RunDifferences{3270, 3200, 363072}) && is_race(RunDifferences{17, 0, 17}));
  CHECK(is_race(RunDifferences{862556, 433317, 640000}) && !is_race(RunDifferences{0, 0, 5}));
  RunDifferences most;
  keep_most(most, d);
  keep_most(most, RunDifferences{1, 1});
  CHECK_EQ(most.total, int64_t(2));

  // Default tolerances.
  const Tolerance bf16 = default_tolerance(DType::bf16, DType::bf16, DType::bf16, 2.0);
  CHECK(bf16.rel_l2 == 1e-2 && bf16.rtol == 1.6e-2 && bf16.atol == 3.2e-2 && !bf16.exact);
  const Tolerance tf32 = default_tolerance(DType::f32, DType::tf32, DType::f32, 1.0);
  CHECK(tf32.rel_l2 == 5e-3 && tf32.rtol == 2e-2);
  const Tolerance fp8 = default_tolerance(DType::bf16, DType::e4m3, DType::e4m3, 1.0);
  CHECK(fp8.rel_l2 == 1e-2 && fp8.rtol == 2e-2);
  CHECK(default_tolerance(DType::e4m3, DType::e4m3, DType::e4m3, 1.0).rtol == 1.25e-1);
  CHECK(default_tolerance(DType::f64, DType::f64, DType::f64, 1.0).rel_l2 == 1e-12);
  const Tolerance ints = default_tolerance(DType::i32, DType::i8, DType::i8, 100.0);
  CHECK(ints.rel_l2 == 0 && ints.rtol == 0 && ints.atol == 0);
}

// ------------------------------------------------------------------ report

void test_json_and_lines() {
  JsonWriter w;
  w.begin_object();
  w.field("s", std::string("quote \" backslash \\ newline \n tab \t bell \x07 \xC3\xA9"));
  w.field("n", int64_t(-3));
  w.field("u", size_t(7));
  w.field("x", 0.1);
  w.field("big", 1e300);
  w.field("nan", std::nan(""));
  w.field("inf", -HUGE_VAL);
  w.field("t", true);
  w.key("nothing");
  w.null();
  w.key("list");
  w.begin_array();
  w.value(1);
  w.begin_object();
  w.end_object();
  w.begin_array();
  w.end_array();
  w.value("two");
  w.end_array();
  w.key("raw");
  w.raw("{\"k\":[1,2]}");
  w.key("chained").begin_array().value(int64_t(3)).value(2.5).begin_object().field("z", false).end_object().end_array();
  w.end_object();
  CHECK_EQ(w.str(), std::string("{\"s\":\"quote \\\" backslash \\\\ newline \\n tab \\t bell \\u0007 \xC3\xA9\","
                                "\"n\":-3,\"u\":7,\"x\":0.1,\"big\":1e+300,\"nan\":null,\"inf\":null,\"t\":true,"
                                "\"nothing\":null,\"list\":[1,{},[],\"two\"],\"raw\":{\"k\":[1,2]},"
                                "\"chained\":[3,2.5,{\"z\":false}]}"));
  CHECK_EQ(JsonWriter::json_number(1.0 / 3.0), std::string("0.33333333333333331"));
  CHECK_EQ(JsonWriter::json_number(1000.0), std::string("1000"));

  CHECK_EQ(format_value(1000.0), std::string("1000"));
  CHECK_EQ(format_value(-2.0), std::string("-2"));
  CHECK_EQ(format_value(0.5), std::string("0.5"));
  CHECK_EQ(format_value(1.0 / 3.0), std::string("0.333333"));
  CHECK_EQ(format_value(1e20), std::string("1e+20"));
  CHECK_EQ(format_value(std::nan("")), std::string("nan"));
  CHECK_EQ(format_value(-HUGE_VAL), std::string("-inf"));

  // The report line as docs/cli.md ("Report") shows it, verbatim.
  std::vector<double> want(384 * 512, 1000.0);
  Comparison c = compare_output(output_with(DType::bf16, {512, 384}, want), want, 1, 512, 384, kExact, 128, 128);
  CHECK_EQ(format_comparison_line("D", c),
           std::string("D       relL2 0.000e+00  max_abs 0  ratio 1.0000  bad 0/196608  nan 0  unwritten 0"));
  CHECK_EQ(format_comparison_line("output_tensor", c).substr(0, 20), std::string("output_tensor relL2 "));

  std::vector<double> got = want;
  got[130 * 384 + 7] = 2000.0;
  c = compare_output(output_with(DType::bf16, {512, 384}, got, {131 * 384 + 300}), want, 1, 512, 384, kExact, 128, 128);
  CHECK_EQ(format_mismatches("D", c, false),
           std::string("  D[130, 7] tile (1,0) at (2,7): got 2000 want 1000\n"
                       "  D[131, 300] tile (1,2) at (3,44): got poison (never written) want 1000\n"));
  c.bad = 12;
  CHECK_CONTAINS(format_mismatches("D", c, true), "  D[0, 130, 7] tile (1,0) at (2,7)");
  CHECK_CONTAINS(format_mismatches("D", c, true), "  ... and 10 more\n");
  c.inf = 2;
  CHECK_CONTAINS(format_comparison_line("D", c), "unwritten 1  inf 2");
  JsonWriter cw;
  write_comparison_json(cw, "D", c);
  const std::string json = cw.str();
  CHECK_CONTAINS(json, "{\"tensor\":\"D\",\"passed\":false,");
  CHECK_CONTAINS(json, "\"bad\":12,");
  CHECK_CONTAINS(json, "{\"index\":[0,131,300],\"got\":\"poison\",\"want\":1000}");
  CHECK_CONTAINS(json, "\"tile\":[128,128]");

  report_set("a", "1");
  report_set("b", "2");
  report_set("a", "3");
  CHECK(g_report_fields.size() == 2 && g_report_fields[0].second == "3");
  g_report_fields.clear();
}

void test_classify() {
  TestRng rng{99};
  const int64_t M = 130, N = 96;
  std::vector<double> ref(size_t(M * N));
  for (double& v : ref) v = rng.uniform() * 2 - 1;
  const Tolerance tol = default_tolerance(DType::f32, DType::bf16, DType::bf16, reference_rms(ref));
  const auto run = [&](const std::vector<double>& got, const std::vector<int64_t>& unwritten = {},
                       int64_t repeat_differences = 0, const Tolerance& t = Tolerance{}) {
    const Tolerance used = t.rel_l2 || t.exact ? t : tol;
    const Comparison c =
        compare_output(output_with(DType::f32, {M, N}, got, unwritten), ref, 1, M, N, used, 128, 32);
    return classify(c, repeat_differences, used);
  };

  Pattern p = run(ref);
  CHECK_EQ(p.cls, std::string("ok"));
  std::vector<double> got = ref;
  for (double& v : got) v *= 2;
  p = run(got);
  CHECK_EQ(p.cls, std::string("scale"));
  CHECK_CONTAINS(p.evidence, "every output is 2.000x the reference (least-squares ratio 2.0000, residual");
  // A factor of 0 is no scale: nothing the K loop accumulated reached the outputs.
  p = run(std::vector<double>(ref.size(), 0.0));
  CHECK_EQ(p.cls, std::string("k_coverage"));
  CHECK_CONTAINS(p.evidence, "every output is 0 where the reference is not");
  // A ratio that varies (0.1x in one column, 0.25x in the next: a residual far above the output's
  // rounding) is no scale either, whatever its least-squares ratio (issue 24: 0.176x, residual 9e-2).
  got = ref;
  for (int64_t i = 0; i < int64_t(got.size()); ++i) got[size_t(i)] *= (i % N) % 2 ? 0.25 : 0.1;
  p = run(got);
  CHECK(p.cls != std::string("scale"));
  // Exactly 2x under exact (analytic) comparison: still a scale, with no residual.
  Tolerance exact = tol;
  exact.exact = true;
  got = ref;
  for (double& v : got) v *= 2;
  p = run(got, {}, 0, exact);
  CHECK_EQ(p.cls, std::string("scale"));

  // Boundary: only the partial last tile row (rows 128-129) is wrong.
  got = ref;
  for (int64_t m = 128; m < M; ++m)
    for (int64_t n = 0; n < N; n += 3) got[size_t(m * N + n)] += 1.0;
  p = run(got);
  CHECK_EQ(p.cls, std::string("boundary"));
  CHECK_CONTAINS(p.evidence, "all 64 bad outputs lie in partial edge tiles: the last tile row (rows 128-129, M % 128 = 2)");
  // The same rows left unwritten: unwritten comes first, with the rows it spans.
  std::vector<int64_t> holes;
  for (int64_t n = 0; n < N; ++n) holes.push_back(129 * N + n);
  p = run(ref, holes);
  CHECK_EQ(p.cls, std::string("unwritten"));
  CHECK_EQ(p.evidence, std::string("96 of 12480 outputs were never written (still poison): row 129, columns 0-95"));

  // NaN outputs.
  got = ref;
  got[17] = NAN;
  p = run(got);
  CHECK_EQ(p.cls, std::string("nonfinite"));
  CHECK_CONTAINS(p.evidence, "1 NaN and 0 Inf outputs where the reference is finite, in 1 of 6 tiles");

  // Right every time, but repeat runs differ.
  p = run(ref, {}, 5);
  CHECK_EQ(p.cls, std::string("nondeterministic"));
  CHECK_CONTAINS(p.evidence, "5 of 12480 outputs differ bitwise");

  // Scattered: a few large errors in full tiles.
  got = ref;
  for (int64_t i = 0; i < int64_t(got.size()); i += 397) got[size_t(i)] += 5.0;
  p = run(got);
  CHECK_EQ(p.cls, std::string("scattered"));
  CHECK_CONTAINS(p.evidence, "32 of 12480 outputs are bad (0.26%)");

  // Precision: errors everywhere, none beyond rtol, but relL2 a few times its tolerance (1e-5).
  got = ref;
  for (double& v : got) v += (rng.uniform() - 0.5) * 1e-4 * std::fabs(v);
  p = run(got);
  CHECK_EQ(p.cls, std::string("precision"));
  CHECK_CONTAINS(p.evidence, "against a tolerance of 1.0e-05; no single output is outside rtol/atol");

  // row_mapping: rows 2i and 2i+1 exchanged (the swap_rows_store defect).
  got = ref;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) got[size_t(m * N + n)] = ref[size_t((m ^ 1) * N + n)];
  p = run(got);
  CHECK_EQ(p.cls, std::string("row_mapping"));
  CHECK_CONTAINS(p.evidence, "rows 2i and 2i+1 exchanged: 130 of the 130 rows with errors hold exactly");
  // col_mapping: each column holds the next one's values; the last one holds zeros.
  got = ref;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) got[size_t(m * N + n)] = n + 1 < N ? ref[size_t(m * N + n + 1)] : 0.0;
  p = run(got);
  CHECK_EQ(p.cls, std::string("col_mapping"));
  CHECK_CONTAINS(p.evidence, "columns each holds the next one's values (i <- i+1): 95 of the 96 columns");
  // layout: right only on the residue diagonal m = n (mod 8) (a swizzle mismatch).
  got = ref;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      if (m % 8 != n % 8) got[size_t(m * N + n)] += 1.0;
  p = run(got);
  CHECK_EQ(p.cls, std::string("layout"));
  CHECK_CONTAINS(p.evidence, "right only where m = n (mod 8), wrong elsewhere");
  {
    // Whole rows 64-127 of every 128-row tile read as zero (a TMA box half the tile), plus a
    // few stray errors: the dominant pattern wins and the strays are counted.
    const int64_t M2 = 300, N2 = 64;
    std::vector<double> ref2(size_t(M2 * N2));
    for (double& v : ref2) v = rng.uniform() * 2 - 1;
    std::vector<double> got2 = ref2;
    for (int64_t m = 0; m < M2; ++m)
      for (int64_t n = 0; n < N2; ++n)
        if (m % 128 >= 64) got2[size_t(m * N2 + n)] = 0.0;
    got2[3] += 4.0;
    got2[size_t(10 * N2 + 7)] += 4.0;
    const Tolerance tol2 = default_tolerance(DType::f32, DType::bf16, DType::bf16, reference_rms(ref2));
    const Comparison c2 =
        compare_output(output_with(DType::f32, {M2, N2}, got2), ref2, 1, M2, N2, tol2, 128, 128);
    p = classify(c2, 0, tol2);
    CHECK_EQ(p.cls, std::string("row_mapping"));
    CHECK_CONTAINS(p.evidence, "whole rows are wrong and every other row is right: rows 64-127 of every 128-row tile "
                               "(128 rows) (and 2 stray bad outputs elsewhere)");
    // Not periodic in the tile: plain ranges.
    got2 = ref2;
    for (int64_t m : {5, 6, 7, 200})
      for (int64_t n = 0; n < N2; ++n) got2[size_t(m * N2 + n)] += 3.0;
    p = classify(compare_output(output_with(DType::f32, {M2, N2}, got2), ref2, 1, M2, N2, tol2, 128, 128), 0, tol2);
    CHECK_EQ(p.cls, std::string("row_mapping"));
    CHECK_CONTAINS(p.evidence, "rows 5-7, 200;");
  }
  CHECK_EQ(ranges_text({1, 2, 3, 5, 7, 8, 10, 12, 14, 16, 18}, 3), std::string("1-3, 5, 7-8 (and 5 more)"));

  // Exact mode (--ones, K = 1000): every output 992 is a uniform factor 0.992.
  std::vector<double> ones(64, 1000.0);
  const Comparison c = compare_output(output_with(DType::bf16, {8, 8}, std::vector<double>(64, 992.0)), ones, 1, 8, 8,
                                      kExact, 4, 4);
  p = classify(c, 0, kExact);
  CHECK_EQ(p.cls, std::string("scale"));
  CHECK_CONTAINS(p.evidence, "every output is 0.992x the reference");
}

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

// ------------------------------------------------------------------ the emulated reference's plan

// The host side of reference.provider: emulated (emulated_*.cuh): the digits and truncation of
// an element, the step table's order and folds, and the slice counts the planner picks.
void test_emulation_plan() {
  // Digits of 7 bits below the row's top reconstruct the element; fewer truncate it, and the
  // residual is what they dropped.
  const double x = -0x1.f3p-3;  // 9 significant bits, top = -3
  signed char digits[kMaxEmulationSlices];
  slice_digits(x, -3, 2, digits);
  CHECK(digits[0] == -int(std::floor(std::fabs(x) * 4 * 128)) && digits[0] < 0);
  CHECK(std::ldexp(double(digits[0]) * 128 + digits[1], -3 + 1 - 14) == x);
  CHECK(truncated_to_bits(x, -3, 14) == x);
  const double tiny = 0x1.ffp-20;  // 9 bits down to 2^-28: with top -3, 4 slices hold it, 2 do not
  CHECK(width_needed(tiny, -3) == 26 && width_needed(x, -3) == 9 && width_needed(0.0, -3) == 0);
  CHECK(truncated_to_bits(tiny, -3, 14) == 0.0);
  CHECK(truncated_to_bits(tiny, -3, 28) == tiny);
  // 3 slices keep down to 2^-23: 511 * 2^-28 keeps 15 * 2^-23 and leaves 31 * 2^-28.
  CHECK(truncated_to_bits(tiny, -3, 21) == std::ldexp(15.0, -23));
  CHECK(tiny - truncated_to_bits(tiny, -3, 21) == std::ldexp(31.0, -28));
  // The widths' bins: at most 4 bits (and zeros) in bin 0, then one bin between thresholds.
  CHECK(width_bin(0) == 0 && width_bin(4) == 0 && width_bin(5) == 1 && width_bin(14) == 4 && width_bin(57) == kNeedBins - 1);

  // Steps: levels finest first, each level's pairs per K tile, a fold closing each level, the
  // last one negated; K chunks fold within a level once 2^17 terms are in an int32 sum.
  EmulationPlan plan;
  plan.a_slices = 2, plan.b_slices = 3;
  SlicedOperand a, b;
  a.Kp = b.Kp = 3 * kEmulatedTileK, a.Ip = 128, b.Ip = 256;
  int folds = 0;
  std::vector<EmulationStep> steps = emulation_steps(plan, a, b, &folds);
  CHECK(steps.size() == size_t(3 * 6));
  CHECK(folds == 4);
  CHECK(steps.front().fold == 0 && steps[2].fold == 1 + 3);  // level 3 = (1, 2): one pair a tile
  CHECK(steps.back().fold == -1);                            // level 0 ends it, negated
  CHECK(steps[0].a_offset == 1 * a.slice_stride() && steps[0].b_offset == 2 * b.slice_stride());
  CHECK(steps[0].a_plane == 1 && steps[0].b_plane == 2 && steps[0].k_tile == 0 && steps[1].k_tile == 1 && steps[5].k_tile == 1);
  CHECK(steps[0].fresh == 0 && steps[2].fresh == 1 && steps[8].fold == 1 + 2 && steps[8].fresh == 0);  // the first fold alone starts afresh
  a.Kp = b.Kp = 2000 * kEmulatedTileK;
  steps = emulation_steps(plan, a, b, &folds);
  // Levels of 1, 2, 2, 1 pairs: 1024 or 512 tile-pairs per fold over 2000 K tiles.
  CHECK(folds == 2 + 4 + 4 + 2);

  // The planner: the slices with the least estimated time, the rest as residuals.
  Tensor ta = make_tensor("A", DType::bf16, {8192, 8192}), tb = make_tensor("B", DType::bf16, {8192, 8192});
  Tensor tout = make_tensor("D", DType::f32, {8192, 8192});
  const GemmProblem p{&ta, &tb, nullptr, nullptr, &tout, 1.0, 0.0, 1, 8192, 8192, 8192, false};
  OperandAnalysis wide, narrow;
  wide.need_counts.assign(kNeedBins, 0), narrow.need_counts.assign(kNeedBins, 0);
  // Elements needing 2, 3 and 6 slices (widths up to 14, 21 and 42 bits).
  wide.need_counts[size_t(width_bin(14))] = 60000000, wide.need_counts[size_t(width_bin(21))] = 7000000;
  wide.need_counts[size_t(width_bin(42))] = 5000;
  narrow.need_counts[size_t(width_bin(14))] = 67000000;
  CHECK(wide.beyond(3) == 5000 && wide.beyond_bits(20) == 7005000 && wide.beyond(6) == 0);
  const EmulationPlan chosen = plan_emulation(p, wide, narrow, kWgmmaMacsPerSecondPerPair, SchemeChoice::slices);
  CHECK(chosen.refusal.empty() && chosen.a_slices == 3 && chosen.b_slices == 2);
  CHECK(chosen.a_residuals == 5000 && chosen.b_residuals == 0);
  OperandAnalysis ill = wide;
  ill.need_counts[kNeedBins - 1] = kMaxResiduals + 1, ill.widest_bits = 145;
  const EmulationPlan refused = plan_emulation(p, ill, narrow, kWgmmaMacsPerSecondPerPair, SchemeChoice::automatic);
  CHECK(refused.refusal.find("4194305 elements of A need more than 8 int8 slices") != std::string::npos);
  OperandAnalysis infinite = narrow;
  infinite.nonfinite = true;
  CHECK(plan_emulation(p, narrow, infinite, kWgmmaMacsPerSecondPerPair, SchemeChoice::slices).refusal ==
        "B holds Inf or NaN, which int8 slices cannot carry");

  // Where the grids cannot reach, or nothing is to be computed, it says so (and the fp64 engine runs).
  CHECK(emulation_extent_limit(p).empty());
  GemmProblem empty = p, tall = p;
  empty.K = 0, tall.M = 5000000;
  CHECK(emulation_extent_limit(empty) == "the GEMM is empty (M, N or K is 0)");
  CHECK(emulation_extent_limit(tall) == "M and N stop at 4194240 for its slicing kernels");
}

// The moduli (emulated_moduli.cuh) on the host: residues of integers and back, the exact product
// of integer matrices from its residues, the plan, the steps.
__int128 random_int128(TestRng& rng, int bits) {
  const unsigned __int128 magnitude = ((unsigned __int128)rng.next() << 64 | rng.next()) >> (128 - bits);
  return rng.next() % 2 ? -(__int128)magnitude : (__int128)magnitude;
}

int residue_of(__int128 x, int m) {
  int r = int(x % m);
  return r < 0 ? r + m : r;
}

void test_moduli() {
  // Pairwise coprime, so the product of the first N is their least common multiple.
  for (int j = 0; j < kMaxModuli; ++j)
    for (int k = j + 1; k < kMaxModuli; ++k) CHECK(std::gcd(emulation_modulus(j), emulation_modulus(k)) == 1);
  CHECK(moduli_needed(24, 24, 1000) == 8);   // 2^59 <= 255 ... 229 ~ 2^63.4; 7 give ~2^55.6
  CHECK(moduli_needed(36, 36, 8192) == 11);  // 2^86 <= ~2^86.8
  CHECK(moduli_needed(52, 52, 1 << 20) == 0);  // 2^125 needs more than 16

  // One rounding from 128 bits: exact below 2^53, ties to even above.
  CHECK(uint128_to_double(Uint128(1) << 64) == std::ldexp(1.0, 64));
  CHECK(uint128_to_double((Uint128(1) << 64) + 1) == std::ldexp(1.0, 64));
  const Uint128 tie = ((Uint128(1) << 53) + 1) << 11;  // 2^64 + 2^11: halfway, rounds to even (2^64)
  CHECK(uint128_to_double(tie) == std::ldexp(1.0, 64));
  CHECK(uint128_to_double(tie + 1) == std::ldexp(1.0, 64) + std::ldexp(1.0, 12));
  CHECK(uint128_to_double(~Uint128(0)) == std::ldexp(1.0, 128));

  // Any integer in (-M/2, M/2] from its residues, rounded once.
  TestRng rng{0x600D5EEDull};
  bool all_exact = true;
  for (int count : {1, 5, 11, 16})
    for (int trial = 0; trial < 2000; ++trial) {
      const ModuliInverses inverses = moduli_inverses(count);
      int bits = 1;
      while (bits < 127 && (Uint128(1) << bits) < moduli_product(count) / 2) ++bits;
      const __int128 x = random_int128(rng, std::max(1, bits - 1 - trial % 8));
      int residues[kMaxModuli];
      for (int n = 0; n < count; ++n) residues[n] = residue_of(x, emulation_modulus(n));
      all_exact = all_exact && reconstruct_from_residues(residues, inverses) == double(x);
    }
  CHECK(all_exact);

  // An element as an integer of `bits` below its row's top, and its residues: balanced, and the
  // same integer as truncated_to_bits keeps.
  signed char digits[kMaxModuli];
  const double y = -0x1.234567p-3;  // top -3: 25 bits
  residue_digits(y, -3, 32, moduli_table(kMaxModuli), digits);
  const __int128 integer = -(__int128)std::ldexp(std::fabs(truncated_to_bits(y, -3, 32)), 32 - 1 + 3);
  for (int n = 0; n < kMaxModuli; ++n) {
    const int m = emulation_modulus(n);
    CHECK(std::abs(int(digits[n])) <= (m - 1) / 2);
    CHECK(residue_of(__int128(digits[n]) - integer, m) == 0);
  }

  // A small GEMM of integers the residues' way, as the kernels do it (int32 sums of int8
  // products per modulus, folded modulo it in chunks), against the exact 128-bit product.
  const int M = 5, N = 7, K = 300, count = moduli_needed(40, 40, K);
  std::vector<double> a(size_t(M) * K), b(size_t(K) * N);
  for (double& v : a) v = std::ldexp(double(random_int128(rng, 40)), -20);
  for (double& v : b) v = std::ldexp(double(random_int128(rng, 40)), -7);
  bool products_exact = true;
  const ModuliInverses inverses = moduli_inverses(count);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      int residues[kMaxModuli];
      __int128 exact = 0;
      // Rows as integers below a top of 2^20 (A) and 2^33 (B): 40 bits each.
      for (int k = 0; k < K; ++k)
        exact += (__int128)std::ldexp(a[size_t(m) * K + k], 40 - 1 - 19) * (__int128)std::ldexp(b[size_t(k) * N + n], 40 - 1 - 32);
      for (int t = 0; t < count; ++t) {
        unsigned char folded = 0;
        for (int chunk = 0; chunk < K; chunk += 128) {
          int sum = 0;
          for (int k = chunk; k < std::min(K, chunk + 128); ++k) {
            signed char da[kMaxModuli], db[kMaxModuli];
            residue_digits(a[size_t(m) * K + k], 19, 40, moduli_table(count), da);
            residue_digits(b[size_t(k) * N + n], 32, 40, moduli_table(count), db);
            sum += int(da[t]) * int(db[t]);
          }
          folded = fold_residue(sum, emulation_modulus(t), chunk == 0, folded);
        }
        residues[t] = folded;
      }
      products_exact = products_exact && reconstruct_from_residues(residues, inverses) == double(exact);
    }
  CHECK(products_exact);

  // Steps: per modulus its K tiles, a fold after the last (and every 2^17 terms), fresh at each
  // modulus's first fold.
  EmulationPlan plan;
  plan.scheme = EmulationScheme::moduli, plan.a_slices = plan.b_slices = 3, plan.a_bits = plan.b_bits = 20;
  SlicedOperand sa, sb;
  sa.Kp = sb.Kp = 2000 * kEmulatedTileK, sa.Ip = 128, sb.Ip = 256;
  int folds = 0;
  const std::vector<EmulationStep> steps = emulation_steps(plan, sa, sb, &folds);
  CHECK(steps.size() == size_t(3 * 2000) && folds == 3 * 2);
  CHECK(steps[1023].fold == 1 && steps[1023].fresh == 1 && steps[1999].fold == 1 && steps[1999].fresh == 0);
  CHECK(steps[2000].a_offset == sa.slice_stride() && steps[2000].b_offset == sb.slice_stride());
  CHECK(steps[2000].a_plane == 1 && steps[2000].b_plane == 1 && steps[2000].k_tile == 0 && steps[2001].k_tile == 1);
  CHECK(steps.back().fold == -3);

  // The plan: f32-like rows of ~36 bits take 11 moduli where slices would take 6 x 6.
  Tensor ta = make_tensor("A", DType::f32, {8192, 8192}), tb = make_tensor("B", DType::f32, {8192, 8192});
  Tensor tout = make_tensor("D", DType::f32, {8192, 8192});
  const GemmProblem p{&ta, &tb, nullptr, nullptr, &tout, 1.0, 0.0, 1, 8192, 8192, 8192, false};
  OperandAnalysis f32_rows;
  f32_rows.need_counts.assign(kNeedBins, 0);
  f32_rows.need_counts[size_t(width_bin(36))] = 67000000;
  const EmulationPlan moduli = plan_emulation(p, f32_rows, f32_rows, kWgmmaMacsPerSecondPerPair, SchemeChoice::automatic);
  CHECK(moduli.moduli() && moduli.pairs() == 11 && moduli.a_bits == 36 && moduli.b_bits == 36);
  CHECK(describe_planes(moduli) == "exact residues: A 36 bits x B 36 bits modulo 11 moduli");
  const EmulationPlan slices = plan_emulation(p, f32_rows, f32_rows, kWgmmaMacsPerSecondPerPair, SchemeChoice::slices);
  CHECK(!slices.moduli() && slices.pairs() == 36 && slices.a_bits == 42);
}

}  // namespace

// ------------------------------------------------------------------ scaled and grouped GEMMs

void test_scales() {
  // Packed ue8m0: K block kb is byte kb % 4 of element kb / 4 along the K-block axis.
  Tensor sb = make_tensor("SB", DType::i32, {2, 3});  // [ceil(KB/4), NB] with KB = 6
  sb.host.assign(sb.storage_bytes(), 0x7F);
  ScaleSpec spec_b;
  spec_b.tensor = 0;
  spec_b.encoding = ScaleEncoding::ue8m0_packed;
  spec_b.block[0] = 16, spec_b.block[1] = 8;  // [bk, bn]
  const ScaleOperand s = scale_operand(spec_b, sb, sb.host.data(), false);
  CHECK(same_bits(scale_at(s, 0, 0), 1.0));
  set_scale(s, sb.host.data(), 2, 5, 0.25);  // n block 2, K block 5: element (1, 2), byte 1
  CHECK(same_bits(scale_of_block(s, 2, 5), 0.25));
  CHECK(same_bits(scale_at(s, 16 + 7, 5 * 16 + 15), 0.25));
  CHECK_EQ(int(sb.host[size_t((1 * 3 + 2) * 4 + 1)]), 125);
  CHECK(same_bits(scale_of_block(s, 2, 4), 1.0));  // its neighbour byte is untouched
  CHECK(std::isnan(ue8m0_value(255)));
  CHECK(same_bits(ue8m0_value(127 + 3), 8.0));

  // D = sum over K blocks of SA(m, kb) SB(kb, n) A B against a naive loop: SA f32 per row and
  // 128 of K, SB ue8m0 in u8 per [128, 16]; K = 300 ends in a partial block.
  const int64_t M = 37, N = 29, K = 300, KB = 3;
  Tensor a = make_tensor("A", DType::bf16, {M, K});
  Tensor b = make_tensor("B", DType::bf16, {K, N}, {1, K});
  std::string error;
  fill_host(a, "", &error);
  fill_host(b, "", &error);
  Tensor sa = make_tensor("SA", DType::f32, {M, KB});
  Tensor sb8 = make_tensor("SB", DType::u8, {KB, 2});
  sa.host.assign(sa.storage_bytes(), 0);
  sb8.host.assign(sb8.storage_bytes(), 0);
  for (int64_t i = 0; i < M * KB; ++i) set_logical(sa, i, 0.5 + double(i % 7) / 4);
  for (int64_t i = 0; i < KB * 2; ++i) sb8.host[size_t(i)] = static_cast<unsigned char>(124 + i);
  Tensor d = make_tensor("D", DType::f32, {M, N}, {}, true);
  GemmProblem p{&a, &b, nullptr, nullptr, &d, 2.0, 0.0, 1, M, N, K, false};
  p.scale_a = &sa, p.scale_b = &sb8;
  p.scale_a_spec.tensor = 0, p.scale_a_spec.block[0] = 1, p.scale_a_spec.block[1] = 128;
  p.scale_b_spec.tensor = 1, p.scale_b_spec.encoding = ScaleEncoding::ue8m0;
  p.scale_b_spec.block[0] = 128, p.scale_b_spec.block[1] = 16;
  std::vector<double> ref;
  reference_gemm(p, &ref);
  double worst = 0.0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0.0;
      for (int64_t kb = 0; kb < KB; ++kb) {
        double partial = 0.0;
        for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k)
          partial += get_logical(a, m * K + k) * get_logical(b, k * N + n);
        sum += get_logical(sa, m * KB + kb) * std::ldexp(1.0, int(124 + kb * 2 + n / 16) - 127) * partial;
      }
      worst = std::max(worst, std::fabs(ref[size_t(m * N + n)] - 2.0 * sum) / (std::fabs(2.0 * sum) + 1e-300));
    }
  record(worst < 1e-13, __FILE__, __LINE__, strprintf("scaled reference_gemm vs naive loop: worst %.3g", worst));
}

void test_grouped() {
  std::string error;
  const int64_t N = 11, K = 13;
  // contiguous: groups [5, 0, 9] aligned to 4 take rows 0-7 (5 of group 0), 8-19 (9 of group 2).
  Init groups;
  groups.kind = InitKind::groups;
  groups.values = {5, 0, 9};
  groups.align = 4;
  const std::vector<double> index = listed_values(groups, 22);
  CHECK(index == std::vector<double>({0, 0, 0, 0, 0, -1, -1, -1, 2, 2, 2, 2, 2, 2, 2, 2, 2, -1, -1, -1, -1, -1}));
  const auto naive = [](const Tensor& a, const Tensor& b, int64_t a_row, int64_t b_base, int64_t k0, int64_t kg,
                        int64_t n, int64_t a_k, int64_t b_n) {
    double sum = 0.0;
    for (int64_t k = k0; k < k0 + kg; ++k) sum += get_logical(a, a_row * a_k + k) * get_logical(b, b_base + k * b_n + n);
    return sum;
  };
  const auto check_layout = [&](GroupedProblem& p, const char* what, const std::function<double(int64_t, int64_t, int64_t)>& want) {
    p.groups = read_group_metadata(p);
    std::vector<double> got;
    reference_grouped_gemm(p, &got);
    int64_t wrong = 0;
    for (int64_t l = 0; l < p.batches(); ++l)
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t n = 0; n < p.N; ++n) {
          const double w = want(l, m, n), have = got[size_t((l * p.M + m) * p.N + n)];
          wrong += is_not_compared(w) ? !is_not_compared(have) : std::fabs(have - w) > 1e-12 * (std::fabs(w) + 1);
        }
    record(got.size() == size_t(p.output_count()) && wrong == 0, __FILE__, __LINE__,
           strprintf("grouped %s reference vs naive: %lld outputs wrong", what, (long long)wrong));
  };
  {
    const int64_t M = 22, G = 3;
    Tensor a = make_tensor("A", DType::bf16, {M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("I", DType::i32, {M}), d = make_tensor("D", DType::f32, {M, N}, {}, true);
    meta.init = groups;
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::contiguous, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K;
    check_layout(p, "contiguous", [&](int64_t, int64_t m, int64_t n) {
      const int64_t g = int64_t(index[size_t(m)]);
      return g < 0 ? not_compared_value() : naive(a, b, m, g * K * N, 0, K, n, K, N);
    });
    std::vector<double> ones;
    analytic_grouped_ones(p, &ones);
    CHECK(same_bits(ones[0], double(K)) && is_not_compared(ones[size_t(5 * N)]));
    CHECK_CONTAINS(describe_groups(p), "8 of 22 rows are padding");
  }
  {
    const int64_t M = 7, G = 3;
    Tensor a = make_tensor("A", DType::f32, {G, M, K}), b = make_tensor("B", DType::bf16, {G, K, N});
    Tensor meta = make_tensor("MM", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    meta.init.kind = InitKind::values;
    meta.init.values = {7, 0, 3};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K, p.alpha = 0.5;
    const int64_t rows[] = {7, 0, 3};
    check_layout(p, "masked", [&](int64_t g, int64_t m, int64_t n) {
      return m >= rows[g] ? not_compared_value() : 0.5 * naive(a, b, g * M + m, g * K * N, 0, K, n, K, N);
    });
  }
  {
    const int64_t M = 5, G = 3, K_total = 20;
    Tensor a = make_tensor("A", DType::bf16, {M, K_total}), b = make_tensor("B", DType::bf16, {K_total, N});
    Tensor meta = make_tensor("KS", DType::i32, {G}), d = make_tensor("D", DType::f32, {G, M, N}, {}, true);
    meta.init.kind = InitKind::values;
    meta.init.values = {8, 0, 9};
    fill_host(a, "", &error), fill_host(b, "", &error), fill_host(meta, "", &error);
    GroupedProblem p;
    p.layout = GroupedLayout::k_grouped, p.a = &a, p.b = &b, p.metadata = &meta, p.out = &d;
    p.G = G, p.M = M, p.N = N, p.K = K_total;
    const int64_t k0[] = {0, 8, 8}, kg[] = {8, 0, 9};
    check_layout(p, "k_grouped", [&](int64_t g, int64_t m, int64_t n) {
      return naive(a, b, m, 0, k0[g], kg[g], n, K_total, N);
    });
  }

  // Not-compared outputs are skipped and counted, whatever the output holds there.
  Tensor out = make_tensor("D", DType::f32, {2, 3}, {}, true);
  out.host.assign(out.storage_bytes(), 0);
  for (int64_t i = 0; i < 6; ++i) set_logical(out, i, double(i));
  std::vector<double> want = {0, 1, 2, 3, 4, 5};
  want[4] = not_compared_value();
  set_logical(out, 4, 1e30);
  const Comparison c = compare_output(out, want, 1, 2, 3, Tolerance{0, 0, 0, true}, 0, 0);
  CHECK(c.passed);
  CHECK_EQ(c.not_compared, int64_t(1));
  CHECK_EQ(c.count, int64_t(5));
  CHECK_CONTAINS(format_comparison_line("D", c), "(1 not compared)");
}

// Kernels that are no GEMM (custom.cuh): outputs of any rank, localized by index with the
// launch's block, and the frame, exactness and reference checks around them.
void test_custom_classify() {
  TestRng rng{18};
  // The frame: rank 1 is [1, 1, N]; rank 4 folds its two leading dimensions into L.
  const OutputFrame f1 = output_frame(make_tensor("D", DType::f32, {1000}), {256});
  CHECK(f1.L == 1 && f1.M == 1 && f1.N == 1000 && f1.block_m == 1 && f1.block_n == 256);
  const OutputFrame f4 = output_frame(make_tensor("D", DType::f32, {2, 3, 8, 32}), {8, 32});
  CHECK(f4.L == 6 && f4.M == 8 && f4.N == 32 && f4.block_m == 8 && f4.block_n == 32);
  CHECK_EQ(element_name(make_tensor("Y", DType::f32, {5, 7}), 17), std::string("Y[2, 3]"));

  const int64_t N = 1000;
  std::vector<double> ref(static_cast<size_t>(N));
  for (double& v : ref) v = rng.uniform() * 2 - 1;
  const Tolerance tol = default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(ref));
  const auto run1 = [&](const std::vector<double>& got, const std::vector<int64_t>& unwritten = {}) {
    const Comparison c = compare_output(output_with(DType::f32, {N}, got, unwritten), ref, 1, 1, N, tol, 1, 256, 1);
    return classify(c, 0, tol);
  };
  CHECK_EQ(run1(ref).cls, std::string("ok"));
  // The last, partial block of a 1-D launch (elements 768-999) wrong, full blocks right.
  std::vector<double> got = ref;
  for (int64_t i = 768; i < N; ++i) got[size_t(i)] += 1.0;
  Pattern p = run1(got);
  CHECK_EQ(p.cls, std::string("boundary"));
  CHECK_CONTAINS(p.evidence, "the last, partial block of the launch: elements 768-999 (N % 256 = 232)");
  // Element i holds the reference's i + 1 (a row pointer read one past): layout, not columns.
  for (int64_t i = 0; i < N; ++i) got[size_t(i)] = i + 1 < N ? ref[size_t(i + 1)] : 0.0;
  p = run1(got);
  CHECK_EQ(p.cls, std::string("layout"));
  CHECK_CONTAINS(p.evidence, "elements each holds the next one's values (i <- i+1)");
  // Every fourth element wrong: a period.
  got = ref;
  for (int64_t i = 3; i < N; i += 4) got[size_t(i)] += 1.0;
  p = run1(got);
  CHECK_EQ(p.cls, std::string("layout"));
  CHECK_CONTAINS(p.evidence, "right only where i mod 8 is 0-2, 4-6, wrong elsewhere");
  // Unwritten elements are named as elements.
  p = run1(ref, {5, 6, 7});
  CHECK_EQ(p.cls, std::string("unwritten"));
  CHECK_CONTAINS(p.evidence, "3 of 1000 outputs were never written (still poison): elements 5-7");
  // A 1-D output has no whole columns: scattered single errors stay scattered.
  got = ref;
  for (int64_t i : {3, 250, 600}) got[size_t(i)] += 1.0;
  CHECK_EQ(run1(got).cls, std::string("scattered"));

  // 2-D: the image border (the last column) is boundary even where the blocks are full; whole
  // rows say a row's index; the mismatch lines name blocks.
  const int64_t H = 64, W = 64;
  std::vector<double> image(static_cast<size_t>(H * W));
  for (double& v : image) v = rng.uniform() * 2 - 1;
  const Tolerance tol2 = default_tolerance(DType::f32, DType::f32, DType::f32, reference_rms(image));
  const auto run2 = [&](const std::vector<double>& values) {
    return compare_output(output_with(DType::f32, {H, W}, values), image, 1, H, W, tol2, 8, 32, 2);
  };
  got = image;
  for (int64_t y = 0; y < H; ++y) got[size_t(y * W + W - 1)] += 1.0;
  Comparison c = run2(got);
  p = classify(c, 0, tol2);
  CHECK_EQ(p.cls, std::string("boundary"));
  CHECK_CONTAINS(p.evidence, "all 64 bad outputs lie on the output's border (the last column (63): 64, the last row (63): 1, the first row (0): 1)");
  CHECK_CONTAINS(format_mismatches("D", c, false), "  D[0, 63] block (0,1) at (0,31): got");
  got = image;
  for (int64_t x = 0; x < W; ++x) got[size_t(5 * W + x)] += 1.0, got[size_t(9 * W + x)] += 1.0;
  p = classify(run2(got), 0, tol2);
  CHECK_EQ(p.cls, std::string("row_mapping"));
  CHECK_CONTAINS(p.evidence, "rows 5, 9; a row's index, stride or offset is wrong");
  // All zeros is no k_coverage outside a GEMM.
  CHECK_EQ(classify(run2(std::vector<double>(image.size(), 0.0)), 0, tol2).cls, std::string("scattered"));
  CHECK_CONTAINS(format_heatmap(run2(got)), "blocks  bad share per 8x32 output block, 8 x 2 blocks");

  // Exactness: integer inputs and an integer reference below 2^24.
  SpecInfo spec;
  spec.tensors.push_back(make_tensor("X", DType::f32, {4}));
  std::string error;
  spec.tensors[0].init = Init{InitKind::ones, 0, 0, 0, "", {}, 1};
  fill_host(spec.tensors[0], "", &error);
  CHECK(exact_comparison(spec, {{4.0, 16777216.0}}));
  CHECK(!exact_comparison(spec, {{0.5}}));
  CHECK(!exact_comparison(spec, {{33554432.0}}));
  set_logical(spec.tensors[0], 2, 0.25);
  CHECK(!exact_comparison(spec, {{4.0}}));
  CHECK_EQ(iota_period(DType::bf16), int64_t(251));
  // The block an input element falls in, for the block-code probe: [8, 32] over a [16, 64] input.
  const Tensor in = make_tensor("X", DType::f32, {16, 64});
  CHECK_EQ(input_block(in, 0, {8, 32}), int64_t(0));
  CHECK_EQ(input_block(in, 40, {8, 32}), int64_t(1));
  CHECK_EQ(input_block(in, 9 * 64 + 33, {8, 32}), int64_t(3));
  CHECK_EQ(custom_class_rank("nondeterministic") < custom_class_rank("boundary"), true);
}

// ------------------------------------------------------------------ attention

#include "attention_checks.h"
#include "verdict_checks.h"

// The probe's fills run on several threads where every element has storage of its own, and
// write what one thread would; aliased storage (stride 0, overlapping dimensions) is told apart.
void test_probe_fills() {
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {1, 3})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {6, 1})));
  CHECK(elements_distinct(make_tensor("A", DType::bf16, {1, 4}, {0, 1})));  // stride 0, extent 1
  CHECK(!elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {0, 1})));  // rows broadcast
  CHECK(!elements_distinct(make_tensor("A", DType::bf16, {3, 4}, {2, 1})));  // rows overlap
  Tensor big = make_tensor("B", DType::f32, {700, 300}, {1, 700});  // column-major, 4 chunks or more
  big.host.assign(big.storage_bytes(), 0);
  fill_matrix(big, [](int64_t, int64_t k, int64_t n) { return double(k * 1000 + n); });
  bool same = true;
  for (int64_t i = 0; i < big.numel(); ++i)
    same = same && decode(big.dtype, big.host.data(), big.logical_offset(i)) == double(i / 300 * 1000 + i % 300);
  CHECK(same);
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
  test_hash_and_log();
  test_generators();
  test_parse_init();
  test_npy(dir);
  test_tensors(dir);
  test_reference_cache(dir);
  test_reference();
  test_scales();
  test_grouped();
  test_compare();
  test_json_and_lines();
  test_classify();
  test_custom_classify();
  test_attention_reference();
  test_attention_probe_decoders();
  test_attention_device_reference_host_side();
  test_attention_backward();
  test_probe_verdicts();
  test_operand_layout_verdict();
  test_scale_tile_decode();
  test_grouped_spills();
  test_heatmap();
  test_trace_verdicts();
  test_bench_summary();
  test_emulation_plan();
  test_moduli();
  test_probe_fills();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
