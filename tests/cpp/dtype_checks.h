// The self-test's checks of dtype.cuh and tensor.cuh's layout: sizes and names, the encodings
// against CUDA's own conversions and at their edges, rounding and ulps, poison, and where an
// element lies on the device. Included by runtime_selftest.cu inside its check framework.
#pragma once

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

double cuda_decode_oracle(DType dtype, uint64_t bits) {
  switch (dtype) {
    case DType::f16: return __half2float(__half(__half_raw{uint16_t(bits)}));
    case DType::bf16: {
      __nv_bfloat16_raw raw;
      raw.x = uint16_t(bits);
      return __bfloat162float(__nv_bfloat16(raw));
    }
    case DType::e4m3:
    case DType::e5m2:
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(bits), dtype == DType::e4m3 ? __NV_E4M3 : __NV_E5M2)));
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
  // Every bit pattern of each narrow format decodes to what CUDA's host conversion makes of it
  // (NaN to a NaN).
  for (DType dtype : {DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    int mismatches = 0;
    for (uint64_t bits = 0; bits < (uint64_t(1) << (8 * dtype_bytes(dtype))); ++bits) {
      const double ours = decode_bits(dtype, bits), theirs = cuda_decode_oracle(dtype, bits);
      if (!same_bits(ours, theirs) && !(std::isnan(ours) && std::isnan(theirs)) && ++mismatches <= 5)
        std::printf("  %s 0x%llx: ours %.17g, CUDA %.17g\n", dtype_name(dtype), (unsigned long long)bits, ours, theirs);
    }
    record(mismatches == 0, __FILE__, __LINE__,
           std::string("decode(") + dtype_name(dtype) + ") matches CUDA's host conversion on every bit pattern: " +
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
