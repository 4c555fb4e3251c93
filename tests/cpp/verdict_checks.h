// The self-test's checks of the probe verdicts that read more than one probe: operand_layout
// (probe.cuh), the per-tile scale decode and its verdict (probe_ops.cuh), and the grouped
// GEMMs' spills and store races (probe_ops.cuh, grouped.cuh). Included by runtime_selftest.cu
// after its check framework. Where a defect is a kernel of ours, its arithmetic is emulated on
// the host and run through the same probes, so the test reads what the probe suite would.
#pragma once

// ------------------------------------------------------------------ emulated GEMM probes

using Matrix = std::vector<double>;  // row-major
// An emulated kernel: A [M, K], B [K, N] (logical, row-major) -> D [M, N].
using EmulatedGemm = std::function<Matrix(const Matrix& a, const Matrix& b)>;

struct EmulatedShape {
  int64_t M, N, K, tile_m, tile_n, tile_k;
};

Matrix reference_product(const EmulatedShape& s, const Matrix& a, const Matrix& b) {
  Matrix d(size_t(s.M * s.N), 0.0);
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t n = 0; n < s.N; ++n) d[size_t(m * s.N + n)] += a[size_t(m * s.K + k)] * b[size_t(k * s.N + n)];
  return d;
}

// One probe as judge_probe reads it: the emulated kernel's output against the exact product.
ProbeOutcome emulated_probe(const EmulatedShape& s, const std::string& name, const std::string& inputs, const Matrix& a,
                            const Matrix& b, const EmulatedGemm& kernel) {
  const Matrix want = reference_product(s, a, b);
  const Tensor out = output_with(DType::f32, {s.M, s.N}, kernel(a, b));
  ProbeOutcome o;
  o.name = name;
  o.inputs = inputs;
  o.comparison = compare_output(out, want, 1, s.M, s.N, kExact, s.tile_m, s.tile_n);
  o.passed = o.comparison.passed;
  if (!o.passed) {
    o.pattern = classify(o.comparison, 0, kExact);
    o.axes = error_axes(out, want, 1, s.M, s.N);
  }
  return o;
}

// The plain suite of run_probes (ones, K slices, row and column codes, identity) on a kernel.
std::vector<ProbeOutcome> emulated_suite(const EmulatedShape& s, const EmulatedGemm& kernel) {
  const auto matrix = [](int64_t rows, int64_t cols, const std::function<double(int64_t, int64_t)>& f) {
    Matrix x(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) x[size_t(r * cols + c)] = f(r, c);
    return x;
  };
  const Matrix ones_a = matrix(s.M, s.K, [](int64_t, int64_t) { return 1.0; });
  const Matrix ones_b = matrix(s.K, s.N, [](int64_t, int64_t) { return 1.0; });
  std::vector<ProbeOutcome> probes = {emulated_probe(s, "ones", "A = 1, B = 1", ones_a, ones_b, kernel)};
  const int64_t count = ceil_div(s.K, s.tile_k);
  for (int64_t slice : slices_to_probe(count)) {
    const int64_t k0 = slice * s.tile_k, k1 = std::min(s.K, k0 + s.tile_k);
    ProbeOutcome o = emulated_probe(s, strprintf("k-slice %lld/%lld", (long long)slice, (long long)count),
                                    strprintf("A = 1, B = 1 on k %lld-%lld", (long long)k0, (long long)(k1 - 1)), ones_a,
                                    matrix(s.K, s.N, [&](int64_t k, int64_t) { return k >= k0 && k < k1 ? 1.0 : 0.0; }),
                                    kernel);
    if (!o.passed) o.note = slice_note(o, double(k1 - k0));
    probes.push_back(o);
  }
  const auto code = [](int digit, int64_t i) { return double(1 << ((i >> (2 * digit)) & 3)); };
  for (int d = 0; d < 2; ++d)
    probes.push_back(emulated_probe(s, strprintf("row code %d", d), "", matrix(s.M, s.K, [&](int64_t m, int64_t) {
                                      return code(d, m);
                                    }), ones_b, kernel));
  for (int d = 0; d < 2; ++d)
    probes.push_back(emulated_probe(s, strprintf("col code %d", d), "", ones_a, matrix(s.K, s.N, [&](int64_t, int64_t n) {
                                      return code(d, n);
                                    }), kernel));
  probes.push_back(emulated_probe(s, "identity", "", matrix(s.M, s.K, [](int64_t m, int64_t k) {
                                    return double((m + 2 * k) % 7 + 1);
                                  }),
                                  matrix(s.K, s.N, [&](int64_t k, int64_t n) { return k == n % s.K ? 1.0 : 0.0; }),
                                  kernel));
  return probes;
}

// A tiled K loop over tiles of tile_k, `b_of(k0, k, n0, n)` giving the B element the kernel
// multiplies with A[m, k0 + k] for output column n0 + n, and `k_tiles` the tiles it visits (a
// K tile may come twice, or not at all).
EmulatedGemm tiled_kernel(const EmulatedShape& s, const std::vector<int64_t>& k_tiles,
                          const std::function<double(const Matrix&, int64_t, int64_t, int64_t, int64_t)>& b_of) {
  return [=](const Matrix& a, const Matrix& b) {
    Matrix d(size_t(s.M * s.N), 0.0);
    for (int64_t n0 = 0; n0 < s.N; n0 += s.tile_n)
      for (int64_t kt : k_tiles)
        for (int64_t k = 0; k < s.tile_k && kt * s.tile_k + k < s.K; ++k)
          for (int64_t n = 0; n < s.tile_n && n0 + n < s.N; ++n) {
            const double bv = b_of(b, kt * s.tile_k, k, n0, n);
            if (bv == 0.0) continue;
            for (int64_t m = 0; m < s.M; ++m) d[size_t(m * s.N + n0 + n)] += a[size_t(m * s.K + kt * s.tile_k + k)] * bv;
          }
    return d;
  };
}

void test_operand_layout_verdict() {
  // tma_gemm with defect (c) (kernels/tma_gemm.cuh, examples/tma_gemm_swapped_b_coords.yaml):
  // BN = 128, BK = 64, B's box asked for at (n0, k0) instead of (k0, n0), so the B tile of
  // output columns n0.. at K tile k0 holds B[n0 + k][k0 + n], zero where that is out of bounds.
  // M is small here: the rows play no part in a B-side defect.
  const EmulatedShape s{16, 256, 1040, 128, 128, 64};
  std::vector<int64_t> every;
  for (int64_t kt = 0; kt < ceil_div(s.K, s.tile_k); ++kt) every.push_back(kt);
  const auto right_b = [&](const Matrix& b, int64_t k0, int64_t k, int64_t n0, int64_t n) {
    return b[size_t((k0 + k) * s.N + n0 + n)];
  };
  const auto swapped_b = [&](const Matrix& b, int64_t k0, int64_t k, int64_t n0, int64_t n) {
    return n0 + k < s.K && k0 + n < s.N ? b[size_t((n0 + k) * s.N + k0 + n)] : 0.0;
  };
  const std::vector<ProbeOutcome> swapped = emulated_suite(s, tiled_kernel(s, every, swapped_b));
  // The probe line of a slice that arrives in one column tile only: not "every output 0".
  CHECK_EQ(swapped[3].name, std::string("k-slice 2/17"));
  CHECK_EQ(swapped[3].note, std::string("4096 of 4096 outputs wrong, holding 0-256 where 64 is right, changing from "
                                        "column to column only (scattered)"));
  Pattern p = probe_verdict(swapped, "", "");
  CHECK_EQ(p.cls, std::string("operand_layout"));
  CHECK_CONTAINS(p.evidence, "B is read from the wrong place: the identity probe (B = I): whole columns are wrong and "
                             "every other column is right: columns 64-127 of every 128-column tile (128 columns)");
  CHECK_CONTAINS(p.evidence, "14 of the 16 K slices probed never reach the output (k-slice 1/17 (k 64-127), "
                             "k-slice 3/17 (k 192-255)");
  CHECK_CONTAINS(p.evidence, "the other 2 arrive with values that change from column to column but not from row to "
                             "row (k-slice 0/17 (k 0-63): 0-256 where 64 is right; k-slice 2/17 (k 128-191): 0-256 "
                             "where 64 is right)");
  CHECK_CONTAINS(p.evidence, "ones: 192-256 where 1040 is right, changing from column to column");
  // The same kernel at N = 200 (the example's old size): columns 64-127 and 192-199.
  const EmulatedShape s200{16, 200, 1040, 128, 128, 64};
  const auto swapped_200 = [&](const Matrix& b, int64_t k0, int64_t k, int64_t n0, int64_t n) {
    return n0 + k < s200.K && k0 + n < s200.N ? b[size_t((n0 + k) * s200.N + k0 + n)] : 0.0;
  };
  p = probe_verdict(emulated_suite(s200, tiled_kernel(s200, every, swapped_200)), "", "");
  CHECK_EQ(p.cls, std::string("operand_layout"));
  CHECK_CONTAINS(p.evidence, "columns 64-127, 192-199");

  // The K loop's own defects keep their class: every output of a slice alike.
  p = probe_verdict(emulated_suite(s, tiled_kernel(s, every, right_b)), "", "");
  CHECK_EQ(p.cls, std::string("ok"));
  std::vector<int64_t> twice = every;
  twice.push_back(0);  // k_tile_twice: the first K tile accumulated again
  p = probe_verdict(emulated_suite(s, tiled_kernel(s, twice, right_b)), "", "");
  CHECK_EQ(p.cls, std::string("k_coverage"));
  CHECK_CONTAINS(p.evidence, "k-slice 0/17 (k 0-63): every output 128 where 64 is right: the slice is counted twice");
  std::vector<int64_t> dropped(every.begin(), every.end() - 1);  // drop_last_k: the partial last tile
  p = probe_verdict(emulated_suite(s, tiled_kernel(s, dropped, right_b)), "", "");
  CHECK_EQ(p.cls, std::string("k_coverage"));
  CHECK_CONTAINS(p.evidence, "k-slice 16/17 (k 1024-1039): every output 0 where 16 is right: the slice is missing");
  // Every K tile read as the first one (a K offset never advanced): ones right, slices wrong
  // but alike everywhere: K coverage, not an operand.
  p = probe_verdict(emulated_suite(s, tiled_kernel(s, every, [&](const Matrix& b, int64_t, int64_t k, int64_t n0, int64_t n) {
                      return b[size_t(k * s.N + n0 + n)];
                    })),
                    "", "");
  CHECK_EQ(p.cls, std::string("k_coverage"));

  // The A side, on synthetic outcomes: slices that change from row to row and row codes wrong in
  // whole rows name A.
  const int64_t M = 256, N = 64;
  const auto row_wise = [](double right, double wrong) {
    return [=](int64_t m, int64_t) { return m % 128 >= 64 ? wrong : right; };
  };
  const auto constant = [](double v) { return [v](int64_t, int64_t) { return v; }; };
  const auto synthetic = [&](const std::string& name, const std::string& inputs, std::function<double(int64_t, int64_t)> got,
                             double want) { return synthetic_probe(name, inputs, M, N, got, constant(want)); };
  std::vector<ProbeOutcome> probes = {synthetic("ones", "A = 1, B = 1", row_wise(48, 32), 64)};
  probes.push_back(synthetic("k-slice 0/2", "A = 1, B = 1 on k 0-31", row_wise(16, 0), 32));
  probes.push_back(synthetic("k-slice 1/2", "A = 1, B = 1 on k 32-63", constant(0), 32));
  probes.push_back(synthetic("row code 0", "", row_wise(64, 0), 64));
  p = probe_verdict(probes, "", "");
  CHECK_EQ(p.cls, std::string("operand_layout"));
  CHECK_CONTAINS(p.evidence, "A is read from the wrong place: row code 0: whole rows are wrong");
  CHECK_CONTAINS(p.evidence, "from row to row but not from column to column");
  // Without a witness in whole rows it stays a K coverage reading.
  probes.pop_back();
  CHECK_EQ(probe_verdict(probes, "", "").cls, std::string("k_coverage"));
}

// ------------------------------------------------------------------ scale probes, per tile

// The output of the scale probe of digit d (base 16) where output tile (tm, tn) used the scale
// block `used(m, tn)` for its row m (scale_a; -1: no code, the output 0).
Tensor scale_probe_output(int64_t M, int64_t N, int64_t tile_n, int d, double unit,
                          const std::function<int64_t(int64_t, int64_t)>& used) {
  std::vector<double> v(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t block = used(m, n / tile_n);
      v[size_t(m * N + n)] = block < 0 ? 0.0 : unit * std::ldexp(1.0, int((block >> (4 * d)) & 15));
    }
  return output_with(DType::f32, {M, N}, v);
}

void test_scale_tile_decode() {
  // fp8_scaled_gemm with scale_row_stride at BM = 64: per-row SA blocks, tiles 64 x 128, M = N
  // = 256. Tile row 1 reads the SA rows of rows 128-191, tile rows 2 and 3 read past SA's end
  // (zeros there).
  const int64_t M = 256, N = 256, tm = 64, tn = 128;
  const double unit = 256.0;
  const auto defect = [&](int64_t m, int64_t) -> int64_t { return m < 64 ? m : m < 128 ? m + 64 : -1; };
  ScaleSideDecode a = scale_side_decode(true, M, N, 1, tm, tn);
  for (int d = 0; d < 2; ++d) add_scale_digit(a, scale_probe_output(M, N, tn, d, unit, defect), d, 4, unit);
  ScaleFinding f;
  const std::string text = scale_tile_findings(a, f);
  CHECK_CONTAINS(text, "tiles (1,0)-(1,1) (rows 64-127) used scale_a row blocks 128-191 instead of 64-127");
  CHECK_CONTAINS(text, "tiles (2,0)-(3,1) (rows 128-255) no scale_a row block's code arrived (the output is 0)");
  CHECK_EQ(f.misused_tiles, int64_t(2));
  CHECK_EQ(int64_t(std::count(f.foreign.begin(), f.foreign.end(), true)), int64_t(4));
  // [128, 128] blocks of A, one per 128-row tile: tile (1,0) took block 0's scale.
  ScaleSideDecode blocks = scale_side_decode(true, 256, 128, 128, 128, 128);
  add_scale_digit(blocks, scale_probe_output(256, 128, 128, 0, unit, [](int64_t, int64_t) { return int64_t(0); }), 0, 4,
                  unit);
  ScaleFinding fb;
  CHECK_EQ(scale_tile_findings(blocks, fb), std::string("tile (1,0) (rows 128-255) used scale_a row block 0 instead of 1"));
  // Codes of blocks there are not: scale_b column blocks 5 where there are 2.
  ScaleSideDecode b = scale_side_decode(false, 128, 256, 128, 128, 128);
  std::vector<double> v(size_t(128 * 256));
  for (int64_t i = 0; i < 128 * 256; ++i) v[size_t(i)] = unit * (i % 256 < 128 ? 1.0 : 32.0);
  add_scale_digit(b, output_with(DType::f32, {128, 256}, v), 0, 4, unit);
  ScaleFinding fc;
  CHECK_CONTAINS(scale_tile_findings(b, fc), "tile (0,1) (columns 128-255) the codes of scale_b column blocks 5 arrived, "
                                             "which do not exist (there are 2)");

  // The verdict: the plain probes (every scale 1) fail only in the tiles where no code arrived,
  // and elsewhere a tile used another block's scale: scale_mapping, not the plain probes' class.
  const auto got = [](int64_t m, int64_t) { return m >= 128 ? 0.0 : 256.0; };
  const auto right = [](int64_t, int64_t) { return 256.0; };
  std::vector<ProbeOutcome> probes;
  ProbeOutcome ones = synthetic_probe("ones", "A = 1, B = 1", M, N, got, right);
  ones.comparison = compare_output(output_with(DType::f32, {M, N}, [&] {
                                     std::vector<double> x(size_t(M * N));
                                     for (int64_t i = 0; i < M * N; ++i) x[size_t(i)] = got(i / N, i % N);
                                     return x;
                                   }()),
                                   std::vector<double>(size_t(M * N), 256.0), 1, M, N, kExact, tm, tn);
  ones.pattern = classify(ones.comparison, 0, kExact);
  probes.push_back(ones);
  ProbeOutcome scale_probe;
  scale_probe.name = "scale_a rows 0";
  probes.push_back(scale_probe);
  f.text = text + "; " + outside_scales_note();
  Pattern p = probe_verdict(probes, "", "", f);
  CHECK_EQ(p.cls, std::string("scale_mapping"));
  CHECK_CONTAINS(p.evidence, "the plain probes (every scale 1) fail (ones) only in the output tiles where the scale "
                             "probes got no block's code; the scale probes: tiles (1,0)-(1,1) (rows 64-127) used");
  CHECK_CONTAINS(p.evidence, "`repro run SPEC --sanitize memcheck`");
  // No tile used another block's scale: the zeros may be the data path's own; the plain class
  // stands, with a note.
  ScaleFinding only_zeros = f;
  only_zeros.misused_tiles = 0;
  p = probe_verdict(probes, "", "", only_zeros);
  CHECK_EQ(p.cls, std::string("row_mapping"));
  CHECK_CONTAINS(p.evidence, "the scale probes got no scale block's code in the same output tiles");
  // Plain failures outside the tiles the scales explain keep their own class.
  ScaleFinding elsewhere = f;
  std::fill(elsewhere.foreign.begin(), elsewhere.foreign.end(), false);
  elsewhere.foreign[0] = true;
  CHECK_EQ(probe_verdict(probes, "", "", elsewhere).cls, std::string("row_mapping"));
}

// ------------------------------------------------------------------ grouped GEMMs: spills

// A grouped problem's outputs ([batches][M][N], f32) from value(batch, m, n).
Tensor grouped_output(const GroupedProblem& p, const std::function<double(int64_t, int64_t, int64_t)>& value,
                      const std::vector<int64_t>& unwritten_rows = {}) {
  std::vector<double> v(size_t(p.output_count()));
  std::vector<int64_t> poison;
  for (int64_t l = 0; l < p.batches(); ++l)
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N; ++n) {
        const int64_t i = (l * p.M + m) * p.N + n;
        v[size_t(i)] = value(l, m, n);
        if (std::find(unwritten_rows.begin(), unwritten_rows.end(), l * p.M + m) != unwritten_rows.end())
          poison.push_back(i);
      }
  return output_with(DType::f32, {p.batches(), p.M, p.N}, v, poison);
}

void test_grouped_spills() {
  // grouped_masked_spill's problem: M_max 200, masked_m [170, 200, 0, 90], 128-row tiles; group
  // code probe 0 (G = 4: one digit), K = 16.
  Tensor mm = make_tensor("MM", DType::i32, {4});
  mm.init.kind = InitKind::values;
  mm.init.values = {170, 200, 0, 90};
  std::string error;
  fill_host(mm, "", &error);
  Tensor a = make_tensor("A", DType::f32, {4, 200, 16}), b = make_tensor("B", DType::f32, {4, 16, 8});
  Tensor d = make_tensor("D", DType::f32, {4, 200, 8}, {}, true);
  GroupedProblem p;
  p.layout = GroupedLayout::masked, p.a = &a, p.b = &b, p.metadata = &mm, p.out = &d;
  p.G = 4, p.M = 200, p.N = 8, p.K = 16;
  p.groups = read_group_metadata(p);
  const double unit = 16.0;
  const auto code = [&](int64_t g) { return unit * std::ldexp(1.0, int(g & 3)); };
  const auto decoded = [&](const Tensor& out) { return decode_groups(p, {out.host}, out, 2, 128); };
  // store_box_spills: group 1 rows 0-55 written with zeros by group 0's second tile.
  const Tensor zeros = grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return l == 1 && m < 56 ? 0.0 : code(l); });
  GroupFinding f = decoded(zeros);
  CHECK_EQ(f.text, std::string("group 1 rows 0-55 were written with zeros (every output 0, stored: not the poison): they "
                               "lie in the footprint of group 0's tile at its rows 128-255, 128 rows tall where group 0 "
                               "has 170 valid rows and M_max is 200: it reaches group 1's rows 0-55, a store that spills "
                               "across the group boundary"));
  CHECK_EQ(f.spill_rows, int64_t(56));
  CHECK_EQ(f.rows, int64_t(0));
  // store_spills: those rows hold group 0's product (A[1] @ B[0]).
  f = decoded(grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return l == 1 && m < 56 ? code(0) : code(l); }));
  CHECK_CONTAINS(f.text, "group 1 rows 0-55 hold group 0's product: they lie in the footprint of group 0's tile");
  CHECK_EQ(f.rows, int64_t(56));
  // Never written: poison, no store to blame.
  f = decoded(grouped_output(p, [&](int64_t l, int64_t, int64_t) { return code(l); }, {200, 201, 202}));
  CHECK_EQ(f.text, std::string("group 1 rows 0-2 were never written (they still hold the poison)"));
  CHECK_EQ(f.spill_rows, int64_t(0));
  // A store race that leaves every other four rows zero: one clause, its rows gathered.
  f = decoded(grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return l == 1 && m < 16 && m % 8 < 4 ? 0.0 : code(l); }));
  CHECK_CONTAINS(f.text, "group 1 rows 0-3, 8-11 were written with zeros (every output 0, stored: not the poison): they "
                         "lie in the footprint of group 0's tile");
  CHECK_EQ(f.spill_rows, int64_t(8));
  // A mixture.
  f = decoded(grouped_output(p, [&](int64_t l, int64_t m, int64_t n) { return l == 1 && m < 11 ? 3.0 * n : code(l); }));
  CHECK_CONTAINS(f.text, "group 1 rows 0-10 hold no group's product (a mixture, or another K extent): they lie in");
  // masked_wrong_group: all of group 1's rows hold group 0's product; no footprint covers them all.
  f = decoded(grouped_output(p, [&](int64_t l, int64_t, int64_t) { return l == 1 ? code(0) : code(l); }));
  CHECK_EQ(f.text, std::string("group 1 rows 0-199 hold group 0's product"));

  // The runs differ only in which store came last: right in one run, 0 in the other.
  const std::vector<double> want =
      expand_on_host(grouped_expected(p, [&](int64_t g) { return std::ldexp(1.0, int(g & 3)); }), p.G, p.M, p.N);
  // The grouped answers: alpha * K * code(g) on the rows group g's GEMM writes (its first
  // masked_m rows), not compared past them.
  bool answers = int64_t(want.size()) == p.output_count();
  for (const GroupGemm& gg : group_gemms(p))
    for (int64_t r = 0; r < p.M && answers; ++r)
      for (int64_t n = 0; n < p.N; ++n) {
        const double w = want[size_t((gg.batch * p.M + r) * p.N + n)];
        answers = answers && (r < gg.rows ? w == p.alpha * double(gg.k) * std::ldexp(1.0, int(gg.group & 3))
                                          : is_not_compared(w));
      }
  CHECK(answers);
  const Tensor right = grouped_output(p, [&](int64_t l, int64_t, int64_t) { return code(l); });
  const Tolerance exact{0, 0, 0, true};
  std::string note = store_race_note(p, zeros, {zeros.host, right.host}, want, exact, 128);
  CHECK_CONTAINS(note, "its runs differ in 448 outputs (group 1 rows 0-55), each right in some runs and 0 (written, "
                       "not the poison) in the others, in rows that another group's tile also covers");
  // Two different wrong values, or a row no other tile reaches: a race of values.
  const Tensor other = grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return l == 1 && m < 56 ? 5.0 : code(l); });
  CHECK_EQ(store_race_note(p, zeros, {zeros.host, right.host, other.host}, want, exact, 128), std::string());
  const Tensor far = grouped_output(p, [&](int64_t l, int64_t m, int64_t) { return l == 1 && m == 120 ? 0.0 : code(l); });
  CHECK_EQ(store_race_note(p, far, {far.host, right.host}, want, exact, 128), std::string());

  // The verdict: a difference explained as a store race is no race; the spill is group_mapping.
  const auto outcome = [](const std::string& name, bool passed, int64_t differences, int64_t wrong) {
    ProbeOutcome o;
    o.name = name;
    o.passed = passed;
    o.differences = differences;
    o.wrong_in_runs = wrong;
    if (!passed) o.pattern = {"scattered", "448 of 3680 outputs are bad"};
    return o;
  };
  std::vector<ProbeOutcome> probes = {outcome("ones", false, 448, 448), outcome("group code 0", false, 448, 448),
                                      outcome("random", true, 0, 0)};
  Pattern v = grouped_verdict(probes, GroupFinding());
  CHECK_EQ(v.cls, std::string("nondeterministic"));
  probes[0].store_race = note;
  probes[1].store_race = note;
  v = grouped_verdict(probes, decoded(zeros));
  CHECK_EQ(v.cls, std::string("group_mapping"));
  CHECK_CONTAINS(v.evidence, "group codes: group 1 rows 0-55 were written with zeros");
  CHECK_CONTAINS(v.evidence, "; probe ones: its runs differ in 448 outputs");
  // The codes' runs all lost the race, ones' did not: the store race alone names it.
  v = grouped_verdict(probes, GroupFinding());
  CHECK_EQ(v.cls, std::string("group_mapping"));
  CHECK_CONTAINS(v.evidence, "another group's tile stores over a group's rows in some runs; probe ones: its runs differ");
  // A deterministic zero spill fails ones; the decode names the tile, not k_coverage.
  probes = {outcome("ones", false, 0, 0), outcome("group code 0", false, 0, 0), outcome("random", false, 0, 0)};
  CHECK_EQ(grouped_verdict(probes, decoded(zeros)).cls, std::string("group_mapping"));
  CHECK_EQ(grouped_verdict(probes, GroupFinding()).cls, std::string("k_coverage"));

  // Contiguous (grouped_contiguous_spill): groups of 300, 200, 0, 410 rows aligned to 32; tile 2
  // (rows 256-383) holds groups 0 and 1, and rows 256-299 hold group 1's product.
  Init groups;
  groups.kind = InitKind::groups;
  groups.values = {300, 200, 0, 410};
  groups.align = 32;
  Tensor index = make_tensor("I", DType::i32, {1000});
  index.init = groups;
  fill_host(index, "", &error);
  Tensor ca = make_tensor("A", DType::f32, {1000, 16}), cb = make_tensor("B", DType::f32, {4, 16, 8});
  Tensor cd = make_tensor("D", DType::f32, {1000, 8}, {}, true);
  GroupedProblem c;
  c.layout = GroupedLayout::contiguous, c.a = &ca, c.b = &cb, c.metadata = &index, c.out = &cd;
  c.G = 4, c.M = 1000, c.N = 8, c.K = 16;
  c.groups = read_group_metadata(c);
  const Tensor spilled = grouped_output(c, [&](int64_t, int64_t m, int64_t) {
    const int64_t g = c.groups[size_t(m)];
    return m >= 256 && m < 300 ? code(1) : g < 0 ? 0.0 : code(g);
  });
  f = decode_groups(c, {spilled.host}, spilled, 2, 128);
  CHECK_EQ(f.text, std::string("rows 256-299 (group 0) hold group 1's product: they lie in the 128-row tile at rows "
                               "256-383, which they share with group 1 (rows 320-383), whose pass stored the whole tile "
                               "over them (a store that spills across the group boundary), unless their own pass used "
                               "group 1's weights"));
}
