// The self-test's checks of compare.cuh and report.cuh: the comparison's counts and errors, the
// JSON report and its lines, and the defect pattern read from one comparison (classify).
// Included by runtime_selftest.cu inside its check framework.
#pragma once

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

// ------------------------------------------------------------------ an operator's calls

// An intermediate's reference file (operator_calls.cuh): read from an absolute path as written in
// an artifact's spec.yaml (resolve_path keeps it; run 108 found it joined under the spec's
// folder), in f64 for an f32 intermediate; not judged for other inputs, nor when it is missing.
void test_intermediate_reference_file(ScratchDir& dir) {
  CHECK(resolve_path("/spec/dir", "/abs/w.npy") == "/abs/w.npy");
  CHECK(resolve_path("/spec/dir", "w.npy") == "/spec/dir/w.npy");
  const std::vector<double> values = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensor workspace = output_with(DType::f32, {2, 4}, values);
  workspace.name = "workspace";
  std::string error;
  const int64_t shape[] = {2, 4};
  workspace.reference_file = dir.file("workspace_reference.npy");
  CHECK(write_npy(workspace.reference_file, DType::f64, 2, shape, values.data(), &error));
  IntermediateTrace trace;
  intermediate_reference_file_values(workspace, "", &trace);
  CHECK(trace.unjudged.empty() && trace.want == values);
  IntermediateTrace ones;
  intermediate_reference_file_values(workspace, "--ones", &ones);
  CHECK_CONTAINS(ones.unjudged, "workspace's reference file holds its values for the spec's own inputs, and --ones changed them");
  CHECK(ones.want.empty());
  workspace.reference_file = dir.path + "/no_such_reference.npy";
  IntermediateTrace missing;
  intermediate_reference_file_values(workspace, "", &missing);
  CHECK_CONTAINS(missing.unjudged, "workspace's reference file");
  CHECK(missing.want.empty());
}

// Repeated calls judged one by one (operator_calls.cuh): run_differences counts the outputs wrong
// in each of the two runs it compares, CallJudgement names the first wrong call, and right on the
// first call and wrong on every later one is state_across_calls, naming the persistent state.
void test_operator_calls() {
  const std::vector<double> want = {1, 2, 3, 4, 5, 6, 7, 8};
  const Tensor first = output_with(DType::f32, {2, 4}, want);
  const Tensor later = output_with(DType::f32, {2, 4}, {1, 2, 0, 4, 5, 0, 7, 8});
  const RunDifferences d = run_differences(first, first.host, later.host, want, kExact);
  CHECK(d.total == 2 && d.first_wrong == 0 && d.later_wrong == 2 && d.stale == 0);
  const RunDifferences same = run_differences(later, later.host, later.host, want, kExact);
  CHECK(same.total == 0 && same.first_wrong == 2 && same.later_wrong == 2);

  CallJudgement calls;  // repeat 3: call 1 right, calls 2 and 3 wrong
  calls.record(1, d.first_wrong, d.later_wrong);
  calls.record(2, d.first_wrong, d.later_wrong);
  CHECK(calls.first_wrong_call() == 2 && calls.all_later_wrong(3));
  CHECK(calls.describe(3) == "call 1 right; call 2: 2 outputs wrong; call 3: 2 outputs wrong");
  std::vector<Tensor> tensors(2);
  tensors[0].name = "tile_counters", tensors[0].intermediate = Lifetime::persist;
  tensors[1].name = "workspace", tensors[1].intermediate = Lifetime::call;
  CHECK(has_intermediates(tensors) && has_persistent_intermediates(tensors));
  const Pattern state = state_across_calls(calls, tensors, 3);
  CHECK(state.cls == "state_across_calls");
  CHECK(state.evidence.find("call 2 is the first wrong one (2 outputs)") != std::string::npos);
  CHECK(state.evidence.find("(tile_counters, lifetime: persist)") != std::string::npos);

  CallJudgement some;  // repeat 3: only call 3 wrong, no more wrong outputs than call 1 elsewhere
  some.record(1, 0, 0);
  some.record(2, 0, 5);
  CHECK(some.first_wrong_call() == 3 && !some.all_later_wrong(3));
  CHECK(some.describe(3) == "call 1 right; call 3: 5 outputs wrong; the other calls right");
  CallJudgement right;
  right.record(1, 0, 0);
  CHECK(right.first_wrong_call() == 0 && right.describe(2) == "all 2 calls right");
  right.first_run_wrong = true;
  CHECK(right.first_wrong_call() == 1);
}
