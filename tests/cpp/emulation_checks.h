// The self-test's checks of the emulated reference's host side (emulated_*.cuh): digits and
// truncation, the width histogram, the step table, the planner, and the residues (CRT
// reconstruction, 128-bit rounding, a modular GEMM done the kernels' way). Included by
// runtime_selftest.cu inside its check framework.
#pragma once

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
  // At the ends of the exponent range: the largest double and a subnormal, kept or dropped whole.
  const double largest = std::ldexp(0x1.fffffffffffffp0, 1023), smallest = std::ldexp(3.0, -1074);
  CHECK(truncated_to_bits(-largest, 1023, 53) == -largest && truncated_to_bits(largest, 1023, 52) == largest - std::ldexp(1.0, 971));
  CHECK(truncated_to_bits(smallest, 1023, 53) == 0.0 && truncated_to_bits(smallest, -1073, 2) == smallest);
  CHECK(truncated_to_bits(-smallest, -1073, 1) == -std::ldexp(1.0, -1073));
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
  const EmulationPlan chosen = plan_emulation(p, wide, narrow, kTmaRates, SchemeChoice::slices);
  CHECK(chosen.refusal.empty() && chosen.a_slices == 3 && chosen.b_slices == 2);
  CHECK(chosen.a_residuals == 5000 && chosen.b_residuals == 0);
  OperandAnalysis ill = wide;
  ill.need_counts[kNeedBins - 1] = kMaxResiduals + 1, ill.widest_bits = 145;
  const EmulationPlan refused = plan_emulation(p, ill, narrow, kTmaRates, SchemeChoice::automatic);
  CHECK(refused.refusal.find("4194305 elements of A need more than 8 int8 slices") != std::string::npos);
  // auto's first look: a sample's counts scaled to the whole operand, each rounded up.
  OperandAnalysis sample;
  sample.need_counts = {0, 5, 3};
  scale_need_counts(&sample, 16.0);
  CHECK(sample.need_counts == std::vector<int64_t>({0, 80, 48}));
  scale_need_counts(&sample, 1.01);
  CHECK(sample.need_counts == std::vector<int64_t>({0, 81, 49}));
  OperandAnalysis infinite = narrow;
  infinite.nonfinite = true;
  CHECK(plan_emulation(p, narrow, infinite, kTmaRates, SchemeChoice::slices).refusal ==
        "B holds Inf or NaN, which int8 slices cannot carry");

  // Where the grids cannot reach, or nothing is to be computed, it says so (and the fp64 engine runs).
  CHECK(emulation_extent_limit(p).empty());
  GemmProblem empty = p, tall = p;
  empty.K = 0, tall.M = 5000000;
  CHECK(emulation_extent_limit(empty) == "the GEMM is empty (M, N or K is 0)");
  CHECK(emulation_extent_limit(tall) == "M and N stop at 4194048 for its slicing kernels");
  tall.M = 4194048;
  CHECK(emulation_extent_limit(tall).empty());
  tall.N = 4194049;
  CHECK(emulation_extent_limit(tall) == "M and N stop at 4194048 for its slicing kernels");
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

// agrees(dtype, bits) for every bit pattern of the narrow floats (f16, bf16, e4m3, e5m2) and, for
// each of `wide` (f32 or tf32), patterns of every exponent field: random fractions, subnormals,
// the ends, both signs.
template <typename Agrees>
void check_every_float_pattern(Agrees agrees, uint64_t seed, std::initializer_list<DType> wide) {
  for (DType dtype : {DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    int mismatches = 0;
    for (uint64_t bits = 0; bits < (uint64_t(1) << (8 * dtype_bytes(dtype))); ++bits) mismatches += !agrees(dtype, bits);
    CHECK(mismatches == 0);
  }
  TestRng rng{seed};
  int mismatches = 0;
  for (uint64_t exponent = 0; exponent < 256; ++exponent)
    for (uint64_t fraction : {uint64_t(0), uint64_t(1), uint64_t(0x7FFFFF), uint64_t(0x400000), rng.next() & 0x7FFFFF,
                              rng.next() & 0x7FFFFF, rng.next() & 0x7FF000})
      for (uint64_t sign : {uint64_t(0), uint64_t(1) << 31})
        for (DType dtype : wide) mismatches += !agrees(dtype, sign | exponent << 23 | fraction);
  CHECK(mismatches == 0);
}

// The analysis reads f32 and narrower floats as bits (element_bit_range): the same highest and
// lowest set bits as the value, and Inf/NaN refused, for every bit pattern of the narrow floats
// and for f32 patterns of every exponent field (random fractions, subnormals, the ends); and the
// width pass and the residuals' collection the same width (element_width).
void test_element_bit_range() {
  const auto agrees = [](DType dtype, uint64_t bits) {
    const BitsFormat format = analysis_format(dtype, ScaleOperand());
    const double x = decode_bits(dtype, bits);
    int top = 0, lowest = 0;
    const bool finite = element_bit_range(format, bits, &top, &lowest);
    if (!std::isfinite(x)) return !finite;
    // The width in rows whose top is the element's or above it.
    for (int above : {0, 3, 20}) {
      const int row_top = x == 0 ? above : std::ilogb(x) + above;
      if (element_width(format, bits, row_top) != width_needed(x, row_top)) return false;
    }
    if (x == 0) return finite && top == kNoTop && lowest == kNoBottom;
    return finite && top == std::ilogb(x) && lowest == top + 1 - width_needed(x, top);
  };
  check_every_float_pattern(agrees, 7, {DType::f32, DType::tf32});
  // Read as values: scaled operands, integers, f64.
  ScaleOperand scaled;
  const unsigned char scale_byte = 127;
  scaled.data = &scale_byte;
  CHECK(analysis_format(DType::bf16, scaled).exponent_max == 0 && analysis_format(DType::i8, ScaleOperand()).exponent_max == 0);
  CHECK(analysis_format(DType::f64, ScaleOperand()).exponent_max == 0);
}

// The slicing pass reads f32 and narrower floats as bits too (element_integer): the same
// integer a', the same residue digits for every modulus and the same slice digits as the fp64
// path (residue_integer, residue_digit, slice_digits), for every bit pattern of the narrow floats
// and f32 patterns of every exponent field, in rows whose top is the element's or above it (so
// that some elements are residuals, wider than the plan's bits).
void test_element_integer() {
  const ModuliTable table = moduli_table(kMaxModuli);
  ResidueModulus moduli[kMaxModuli];
  for (int n = 0; n < kMaxModuli; ++n) moduli[n] = residue_modulus(n);
  const auto agrees = [&](DType dtype, uint64_t bits) {
    const BitsFormat format = analysis_format(dtype, ScaleOperand());
    const double x = decode_bits(dtype, bits);
    if (!std::isfinite(x)) return true;  // the plan refuses them
    for (int above : {0, 3, 20, 40}) {
      const int top = x == 0 ? above : std::ilogb(x) + above;
      for (int width : {7, 14, 24, 28, 36, 52}) {  // residues
        const ElementInteger e = element_integer(format, bits, top, width);
        if (double(element_integer_value(e)) != residue_integer(x, top, width)) return false;
        for (int n = 0; n < kMaxModuli; ++n)
          if (element_residue_digit(e, moduli[n]) != residue_digit(residue_integer(x, top, width), x < 0, table, n))
            return false;
      }
      for (int slices = 1; slices <= kMaxEmulationSlices; ++slices) {
        const int width = kEmulationSliceBits * slices;
        const ElementInteger e = element_integer(format, bits, top, width);
        signed char digits[kMaxEmulationSlices];
        slice_digits(x, top, slices, digits);
        for (int t = 0; t < slices; ++t) {
          const int digit = int(element_integer_value(e) >> (width - kEmulationSliceBits * (t + 1))) & 127;
          if ((e.negative ? -digit : digit) != digits[t]) return false;
        }
      }
    }
    return element_integer_value(element_integer(format, bits, kNoTop, 24)) == 0;  // a row of zeros
  };
  check_every_float_pattern(agrees, 11, {DType::f32});
}

// width_bin's arithmetic against the thresholds it stands for, for every width an element can
// have (f64: up to 2^1024 over 2^-1074) and the zeros' 0.
void test_width_bin() {
  int mismatches = 0;
  for (int width = -1; width <= 2200; ++width) {
    int bin = 0;
    for (int t = 0; t < kWidthThresholdCount; ++t) bin += width > width_threshold(t);
    mismatches += width_bin(width) != bin;
  }
  CHECK(mismatches == 0);
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
      const ModuliConstants constants = moduli_constants(count);
      int bits = 1;
      while (bits < 127 && (Uint128(1) << bits) < moduli_product(count) / 2) ++bits;
      const __int128 x = random_int128(rng, std::max(1, bits - 1 - trial % 8));
      int residues[kMaxModuli];
      for (int n = 0; n < count; ++n) residues[n] = residue_of(x, emulation_modulus(n));
      all_exact = all_exact && reconstruct_from_residues(residues, constants) == double(x);
    }
  CHECK(all_exact);

  // Every count: the sum's limbs hold it exactly below four limbs, and the integers at the edges
  // of (-M/2, M/2) (where S / M is nearest a half and the fp64 estimate of q can be one off),
  // zero and one come back.
  bool limbs_hold = true, edges_exact = true;
  for (int count = 1; count <= kMaxModuli; ++count) {
    const ModuliConstants constants = moduli_constants(count);
    const int limbs = with_moduli_count(count, [](auto n) { return moduli_limbs<decltype(n)::value>(); });
    const Uint128 product = moduli_product(count);
    if (limbs < kModuliLimbs) limbs_hold = limbs_hold && Uint128(count) * 255 * product < (Uint128(1) << (32 * limbs));
    const __int128 half = static_cast<__int128>(product / 2);
    for (const __int128 x : {half, half - 1, -half, 1 - half, __int128(0), __int128(1), __int128(-1), half / 2}) {
      int residues[kMaxModuli];
      for (int n = 0; n < count; ++n) residues[n] = residue_of(x, emulation_modulus(n));
      edges_exact = edges_exact && reconstruct_from_residues(residues, constants) == double(x);
    }
  }
  CHECK(limbs_hold);
  CHECK(edges_exact);

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
  const ModuliConstants constants = moduli_constants(count);
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
      products_exact = products_exact && reconstruct_from_residues(residues, constants) == double(exact);
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
  const EmulationPlan moduli = plan_emulation(p, f32_rows, f32_rows, kTmaRates, SchemeChoice::automatic);
  CHECK(moduli.moduli() && moduli.pairs() == 11 && moduli.a_bits == 36 && moduli.b_bits == 36);
  CHECK(describe_planes(moduli) == "exact residues: A 36 bits x B 36 bits modulo 11 moduli");
  const EmulationPlan slices = plan_emulation(p, f32_rows, f32_rows, kTmaRates, SchemeChoice::slices);
  CHECK(!slices.moduli() && slices.pairs() == 36 && slices.a_bits == 42);
}
