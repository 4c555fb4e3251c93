// ---------------------------------------------------------------------------------------------
// repro harness runtime: the reference GEMM from int8 tensor cores (reference.provider: emulated)
//
// The fp64 tensor cores of a GPU like the H200 are ~30 times slower than its int8 ones, so the
// reference can be computed faster from int8 GEMMs whose products and sums are exact integers
// (the Ozaki scheme, in its slicing form). Each row of A (and each column of B) is scaled by a
// power of two to (-1, 1) and cut into S slices of 7 bits plus the element's sign:
//
//     a_ik = 2^(E_i + 1) * sum_t d_t,ik * 2^(-7 (t + 1)),     d_t,ik integers in [-127, 127]
//
// and the product is the sum over slice pairs (t, u) of int8 GEMMs d_t(A) * d_u(B), whose
// int32 sums are exact. Pairs with the same level t + u share a power of two, so a level is
// one int32 accumulation; the levels are added in fp64, finest first.
//
// The slices are chosen per operand from the inputs themselves: an analysis pass finds, per row,
// the highest set bit of every element, then how many slices each element needs to be exact.
// The plan takes the slice counts with the least estimated time; the elements beyond them (few:
// those far below their row's largest) are carried as exact residuals and added per output
// (emulated_residuals.cuh). Every int32 sum is exact; the only roundings are the fp64 additions
// of the levels (and of K chunks when K * pairs would overflow int32), alpha's product, and
// three per operand with residuals: for every output,
//
//     |emulated - exact| <= F * 2^-53 * sum_k |a_ik b_kj|,  F = the `roundings` it reports
//
// (docs/tolerances.md). An all-ones or small-integer operand is one slice: its reference is one
// int8 GEMM. Where an operand holds Inf or NaN, or would need more than kMaxResiduals residual
// elements, the reference is the fp64 tensor cores' instead, and the run says why.
//
// The second scheme, residues (emulated_moduli.cuh), reaches the same exactness with one int8
// GEMM per modulus instead of one per slice pair: fewer GEMMs for wide rows (f32), more for
// narrow ones (fp8). The plan weighs the schemes REPRO_EMULATED_SCHEME allows.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "emulated_residuals.cuh"

namespace repro {

// -------------------------------------------------------------------------- planning
//
// What auto weighs, measured (docs/performance.md): the fp64 tensor cores do 1.9e13 multiply-adds
// a second (H200, run 68; H100, run 76); each int8 kernel's rate per GEMM, for slices and for
// residues, measured on the H100 (runs 76-79: see EmulationRates); the analysis, slicing and
// residual passes take ~1 ms plus ~30 ps per operand element.
// auto emulates when that estimate is under kAutoShare of the fp64 one (a margin for the noise
// of shared machines), skips the analysis where even one slice pair would not be, and skips it
// where a sample of the rows says the plan would not be (sampled_plan_loses). A residual
// element costs its correction a term per output it reaches (kResidualSecondsPerTerm below;
// runs 68 and 74 on the H200 measured 9 and 12.2 ps a term). Analysis and slicing: 4.98 ms at
// 8192^3 bf16 in run 74 (this model: 5.0), 5.3-5.4 ms in runs 76-77.
constexpr double kDmmaMacsPerSecond = 1.9e13;
constexpr double kEmulationFixedSeconds = 1.0e-3, kEmulationSecondsPerElement = 30e-12;
constexpr double kAutoShare = 0.8;

// Multiply-adds a second of one int8 GEMM: a slice pair's, and a modulus's.
struct EmulationRates {
  double slice_pair, modulus;
};
// Runs 76 and 79 (H100, 8192^3, `erc kernels`): mma.sync 345-371 int8 TOPS on slices; wgmma
// fed by cp.async 478-513; by TMA 693-731; by TMA multicast (run 79, its stage handed back with
// one .release.cta arrival a warp) 901-1025. A modulus's rate is the GEMM kernel's alone: erc
// kernels' moduli rows also hold the reconstruction and the residue planes' allocation, which
// the plan counts apart (kReconstructionSecondsPerResidue). ncu (run 79, TMA): 9 moduli in
// 10.4-11.2 ms, 12 in 15.3-16.4, 4.1-4.8e14 multiply-adds a second; multicast 1.1-1.3x that.
// mma.sync and cp.async: their moduli rows less ~4 ms of reconstruction run at their slice
// pairs' rate (a modulus's fold writes a byte where a level's reads and writes a double).
constexpr EmulationRates kMmaSyncRates{1.8e14, 1.8e14}, kWgmmaRates{2.5e14, 2.5e14}, kTmaRates{3.5e14, 4.2e14},
    kTmaMulticastRates{4.5e14, 5.0e14};

// A correction costs ~15 ps a term where the other operand is read along its contiguous axis,
// more where not (a memory sector per term: 5x assumed) (run 76, `erc speed`: 1.1e10 terms in
// 171.6 ms; run 79, ncu: 9.0e7 terms in 0.57 + 1.01 ms). However few the elements, their
// collection, sort and corrections take ~0.5 ms (run 80, `erc stages 2048`: 0.48 ms for 3 x 3
// slices + ~350 elements an operand, which saved 0.33 ms of GEMMs against 5 x 5 slices; with
// 0.2 ms counted here the plan took them and the reference got slower).
constexpr double kResidualSecondsPerTerm = 1.5e-11, kStridedResidualSecondsPerTerm = 7.5e-11;
constexpr double kResidualFixedSeconds = 5e-4;
// At most this many residual elements per operand (16 bytes each, twice for the sort).
constexpr int64_t kMaxResiduals = int64_t(1) << 22;

inline double dmma_seconds(const GemmProblem& p) { return double(p.L) * p.M * p.N * p.K / kDmmaMacsPerSecond; }

// `gemm_rate`: multiply-adds a second of one of its int8 GEMMs (EmulationRates).
inline double emulation_seconds(const GemmProblem& p, int gemms, double gemm_rate, double residual_seconds = 0) {
  const double elements = double(p.L) * double(p.M + p.N) * double(p.K);
  return kEmulationFixedSeconds + elements * kEmulationSecondsPerElement +
         gemms * double(p.L) * p.M * p.N * p.K / gemm_rate + residual_seconds;
}

// The rates of the kernel the emulation runs (emulated_kernel()).
inline EmulationRates emulation_rates() {
  switch (emulated_kernel()) {
    case EmulatedKernel::mma_sync: return kMmaSyncRates;
    case EmulatedKernel::wgmma: return kWgmmaRates;
    case EmulatedKernel::tma: return kTmaRates;
    case EmulatedKernel::tma_multicast: return kTmaMulticastRates;
  }
  return kWgmmaRates;
}

inline bool emulation_pays(const GemmProblem& p, int pairs) {
  return emulation_seconds(p, pairs, emulation_rates().slice_pair) < kAutoShare * dmma_seconds(p);
}

// The moduli's reconstruction, per output and modulus: its residues read and the Chinese
// remainder sum (run 87, ncu at 8192^2 on the H200: 0.89 ms for 8 moduli, 1.52 for 12; 1.6-1.9
// ps. Garner's digits before took 3.8-5.2 ps, runs 79 and 86).
constexpr double kReconstructionSecondsPerResidue = 2e-12;

// Which schemes the plan weighs: REPRO_EMULATED_SCHEME=slices, moduli or auto (both, the one
// with the lower estimate; the default).
enum class SchemeChoice { slices, moduli, automatic };

inline SchemeChoice emulation_scheme_choice() {
  static const SchemeChoice choice = [] {
    const char* name = std::getenv("REPRO_EMULATED_SCHEME");
    if (name == nullptr || *name == '\0' || std::strcmp(name, "auto") == 0) return SchemeChoice::automatic;
    if (std::strcmp(name, "slices") == 0) return SchemeChoice::slices;
    if (std::strcmp(name, "moduli") == 0) return SchemeChoice::moduli;
    usage_error(strprintf(
        "REPRO_EMULATED_SCHEME=%s is not a scheme of the emulated reference: use slices, moduli or auto, or unset it",
        name));
  }();
  return choice;
}

// What the residual elements of a plan cost (their corrections): a term per output each reaches.
// Correction A reads B along N, correction B reads A along M.
inline double residual_seconds(const GemmProblem& p, int64_t a_residuals, int64_t b_residuals) {
  const DeviceMatrix a_matrix = device_matrix(*p.a), b_matrix = device_matrix(*p.b);
  const double a_term = std::llabs(b_matrix.col_stride) == 1 ? kResidualSecondsPerTerm : kStridedResidualSecondsPerTerm;
  const double b_term = std::llabs(a_matrix.row_stride) == 1 ? kResidualSecondsPerTerm : kStridedResidualSecondsPerTerm;
  if (a_residuals + b_residuals == 0) return 0;
  return kResidualFixedSeconds + double(a_residuals) * double(p.N) * a_term + double(b_residuals) * double(p.M) * b_term;
}

// The slice counts with the least estimated time: each operand from 1 to kMaxEmulationSlices,
// the elements beyond them carried as residuals (at most kMaxResiduals each). No slices when
// every count leaves more residuals than that.
inline EmulationPlan plan_slices(const GemmProblem& p, const OperandAnalysis& a, const OperandAnalysis& b,
                                 EmulationRates rates) {
  EmulationPlan plan;
  for (int sa = 1; sa <= kMaxEmulationSlices; ++sa)
    for (int sb = 1; sb <= kMaxEmulationSlices; ++sb) {
      const int64_t ra = a.beyond(sa), rb = b.beyond(sb);
      if (ra > kMaxResiduals || rb > kMaxResiduals) continue;
      const double seconds = emulation_seconds(p, sa * sb, rates.slice_pair, residual_seconds(p, ra, rb));
      if (plan.a_slices == 0 || seconds < plan.seconds)
        plan.a_slices = sa, plan.b_slices = sb, plan.a_residuals = ra, plan.b_residuals = rb, plan.seconds = seconds;
    }
  plan.a_bits = kEmulationSliceBits * plan.a_slices, plan.b_bits = kEmulationSliceBits * plan.b_slices;
  return plan;
}

// The integer widths with the least estimated time for the moduli (emulated_moduli.cuh): each
// operand from 4 to kMaxModuliWidth bits, by 4, and as many moduli as they need; none when no
// widths fit kMaxModuli moduli and kMaxResiduals residuals.
inline EmulationPlan plan_moduli(const GemmProblem& p, const OperandAnalysis& a, const OperandAnalysis& b,
                                 EmulationRates rates) {
  EmulationPlan plan;
  plan.scheme = EmulationScheme::moduli;
  for (int wa = kModuliWidthStep; wa <= kMaxModuliWidth; wa += kModuliWidthStep)
    for (int wb = kModuliWidthStep; wb <= kMaxModuliWidth; wb += kModuliWidthStep) {
      const int64_t ra = a.beyond_bits(wa), rb = b.beyond_bits(wb);
      const int moduli = moduli_needed(wa, wb, p.K);
      if (ra > kMaxResiduals || rb > kMaxResiduals || moduli == 0) continue;
      const double seconds = emulation_seconds(p, moduli, rates.modulus, residual_seconds(p, ra, rb)) +
                             double(p.L) * double(p.M) * double(p.N) * moduli * kReconstructionSecondsPerResidue;
      if (plan.a_slices == 0 || seconds < plan.seconds)
        plan.a_slices = plan.b_slices = moduli, plan.a_bits = wa, plan.b_bits = wb, plan.a_residuals = ra,
        plan.b_residuals = rb, plan.seconds = seconds;
    }
  return plan;
}

// The plan with the least estimated time among the schemes `choice` allows (the moduli, where
// they alone are asked for and none fit, give way to slices), or why the operands cannot be
// emulated.
inline EmulationPlan plan_emulation(const GemmProblem& p, const OperandAnalysis& a, const OperandAnalysis& b,
                                    EmulationRates rates, SchemeChoice choice = emulation_scheme_choice()) {
  if (a.nonfinite || b.nonfinite) {
    EmulationPlan plan;
    plan.refusal = strprintf("%s holds Inf or NaN, which int8 slices cannot carry", a.nonfinite ? "A" : "B");
    return plan;
  }
  EmulationPlan plan = plan_slices(p, a, b, rates);
  if (choice != SchemeChoice::slices) {
    const EmulationPlan moduli = plan_moduli(p, a, b, rates);
    if (moduli.a_slices > 0 && (choice == SchemeChoice::moduli || plan.a_slices == 0 || moduli.seconds < plan.seconds))
      plan = moduli;
  }
  if (plan.a_slices == 0) {
    const bool a_wide = a.beyond(kMaxEmulationSlices) > kMaxResiduals;
    plan.refusal = strprintf(
        "%lld elements of %s need more than %d int8 slices of %d bits (a row spans %d bits, its largest value over "
        "its smallest nonzero bit), more than the %lld carried apart",
        (long long)(a_wide ? a : b).beyond(kMaxEmulationSlices), a_wide ? "A" : "B", kMaxEmulationSlices,
        kEmulationSliceBits, (a_wide ? a : b).widest_bits, (long long)kMaxResiduals);
  }
  return plan;
}

// The plan's planes, as the `ref` line names them.
inline std::string describe_planes(const EmulationPlan& plan) {
  if (plan.moduli())
    return strprintf("exact residues: A %d bits x B %d bits modulo %d moduli", plan.a_bits, plan.b_bits, plan.pairs());
  return strprintf("exact slices: A %d x B %d", plan.a_slices, plan.b_slices);
}

// Where the emulation's grids cannot reach (a grid's y and z dimensions stop at 65535 blocks)
// or there is nothing to compute, why; empty where it can run.
inline std::string emulation_extent_limit(const GemmProblem& p) {
  if (p.M == 0 || p.N == 0 || p.K == 0) return "the GEMM is empty (M, N or K is 0)";
  constexpr int64_t kGridLimit = 65535;
  // The slicing grid covers the rows padded to whole GEMM tiles (B: 256): 4194048.
  constexpr int64_t kSlicedRowsLimit = kGridLimit * kSliceTile / kWgmmaTileN * kWgmmaTileN;
  if (std::max(p.M, p.N) > kSlicedRowsLimit)
    return strprintf("M and N stop at %lld for its slicing kernels", (long long)kSlicedRowsLimit);
  if (p.L > kGridLimit || ceil_div(p.K, kExtentChunk) > kGridLimit)
    return strprintf("the batch count stops at %lld and K at %lld for its analysis", (long long)kGridLimit,
                     (long long)(kGridLimit * kExtentChunk));
  return "";
}

// -------------------------------------------------------------------------- which reference
//
// reference.provider device: the fp64 tensor cores; emulated: the int8 tensor cores (slices or
// residues) unless the inputs need too many (then the fp64 tensor cores, and the run says why);
// auto: the int8 tensor cores where they cost less than the fp64 GEMM.
enum class ReferenceMethod { dmma, emulated, automatic };

inline ReferenceMethod reference_method(const std::string& provider) {
  if (provider == "emulated") return ReferenceMethod::emulated;
  if (provider == "device") return ReferenceMethod::dmma;
  return ReferenceMethod::automatic;
}

inline std::string emulation_engine(const EmulationPlan& plan, int roundings) {
  const std::string residuals =
      plan.a_residuals + plan.b_residuals == 0
          ? ""
          : strprintf(" + %lld and %lld residual elements", (long long)plan.a_residuals, (long long)plan.b_residuals);
  return strprintf("int8 tensor cores (%s), %s = %d int8 GEMM%s%s, error <= %d * 2^-53 of sum |a b|",
                   emulated_kernel_title(emulated_kernel()), describe_planes(plan).c_str(), plan.pairs(),
                   plan.pairs() == 1 ? "" : "s", residuals.c_str(), roundings);
}

// Why auto keeps fp64: the plan `estimated` (the whole analysis's, or a sample's) against fp64.
inline std::string auto_keeps_fp64(const GemmProblem& p, const EmulationPlan& plan, const std::string& estimated) {
  return strprintf("auto: not emulated, %s%s (%d GEMMs: ~%.1f ms against ~%.1f ms in fp64)", estimated.c_str(),
                   describe_planes(plan).c_str(), plan.pairs(), 1e3 * plan.seconds, 1e3 * dmma_seconds(p));
}

// -------------------------------------------------------------------------- auto's first look
//
// The analysis of every element, which the plan needs, costs its time even where the plan then
// loses to fp64 (bf16 at 4096^3: 1.2-1.6 ms more than fp64 alone, runs 80-82). auto first
// analyzes kSampleRows rows of each operand, evenly spaced in its first batch, with the counts
// scaled to the whole operand, and skips the whole analysis where the sample's plan is over
// kAutoShare of fp64's estimate by kSampleMargin (the sample may hold more or fewer wide elements
// than the whole). Where the sample's plan wins or is refused, the whole analysis decides.
// Operands with block scales (their scales are indexed by row) and operands of fewer than
// kSampleMinimumRows rows (whose whole analysis is short) are analyzed whole at once.
constexpr int64_t kSampleRows = 256, kSampleMinimumRows = 4 * kSampleRows;
constexpr double kSampleMargin = 1.25;

// The counts of a sample's analysis scaled to the whole operand (by `factor`: its rows over the
// sample's), each rounded up.
inline void scale_need_counts(OperandAnalysis* sample, double factor) {
  for (int64_t& count : sample->need_counts) count = int64_t(std::ceil(double(count) * factor));
}

// The analysis of kSampleRows of the operand's I rows (the first batch), scaled to all of them;
// its buffer goes into `scratch`.
inline OperandAnalysis analyze_sample(const DeviceMatrix& source, int64_t i_stride, int64_t k_stride, int64_t L,
                                      int64_t I, int64_t K, std::vector<void*>* scratch) {
  OperandAnalysis sample =
      analyze_operand(source, i_stride * (I / kSampleRows), k_stride, 1, kSampleRows, K, ScaleOperand());
  scratch->push_back(sample.extent.top);
  scale_need_counts(&sample, double(source.batch_stride == 0 ? 1 : L) * double(I) / double(kSampleRows));
  return sample;
}

// Why auto keeps fp64 without the whole analysis, or "" where the whole analysis is to decide.
inline std::string sampled_plan_loses(const GemmProblem& p, std::vector<void*>* scratch) {
  if (p.scale_a != nullptr || p.scale_b != nullptr || p.M < kSampleMinimumRows || p.N < kSampleMinimumRows) return "";
  const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
  const OperandAnalysis a_sample = analyze_sample(a, a.row_stride, a.col_stride, p.L, p.M, p.K, scratch);
  const OperandAnalysis b_sample = analyze_sample(b, b.col_stride, b.row_stride, p.L, p.N, p.K, scratch);
  const EmulationPlan plan = plan_emulation(p, a_sample, b_sample, emulation_rates());
  if (!plan.refusal.empty() || plan.seconds < kSampleMargin * kAutoShare * dmma_seconds(p)) return "";
  return auto_keeps_fp64(p, plan, strprintf("a sample of %lld rows of each operand estimates ", (long long)kSampleRows));
}

// Starts the reference GEMM (alpha A B + beta C + bias) from the operands' device copies, on the
// default stream; see launch_dmma_reference_gemm for `into`. The emulation's analysis waits for
// the GPU once (a few KiB of row extents); the GEMMs run while the caller goes on.
inline ReferenceGemmLaunch launch_reference_gemm(const GemmProblem& p, ReferenceMethod method,
                                                 double* into = nullptr) {
  ReferenceGemmLaunch launch;
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.start));
  REPRO_CUDA_CHECK(cudaEventCreate(&launch.stop));
  REPRO_CUDA_CHECK(cudaEventRecord(launch.start));
  std::string not_emulated;
  if (method == ReferenceMethod::automatic && !emulation_pays(p, 1)) {
    // Too small for even one int8 GEMM to beat the fp64 one: no analysis.
  } else if (method != ReferenceMethod::dmma) {
    if (!emulation_supported()) {
      not_emulated = "the int8 mma.sync it needs runs on sm_80 and later";
    } else if (const std::string why = emulation_extent_limit(p); !why.empty()) {
      not_emulated = why;
    } else if (p.L > 1 &&
               (problem_scales(p, true, true).batch_stride != 0 || problem_scales(p, false, true).batch_stride != 0)) {
      // Its analysis and slicing read one scale tensor for every batch.
      not_emulated = "its slicing reads one set of block scales for every batch, and these are [L, ...]";
    } else if (const std::string loses =
                   method == ReferenceMethod::automatic ? sampled_plan_loses(p, &launch.scratch) : "";
               !loses.empty()) {
      not_emulated = loses;
    } else {
      const DeviceMatrix a = device_matrix(*p.a), b = device_matrix(*p.b);
      const ScaleOperand scale_a = problem_scales(p, true, true), scale_b = problem_scales(p, false, true);
      const OperandAnalysis a_rows = analyze_operand(a, a.row_stride, a.col_stride, p.L, p.M, p.K, scale_a);
      const OperandAnalysis b_rows = analyze_operand(b, b.col_stride, b.row_stride, p.L, p.N, p.K, scale_b);
      // Each the start of its analysis buffer.
      launch.scratch.insert(launch.scratch.end(), {a_rows.extent.top, b_rows.extent.top});
      const EmulationPlan plan = plan_emulation(p, a_rows, b_rows, emulation_rates());
      if (!plan.refusal.empty()) {
        not_emulated = plan.refusal;
      } else if (method == ReferenceMethod::automatic && !(plan.seconds < kAutoShare * dmma_seconds(p))) {
        not_emulated = auto_keeps_fp64(p, plan, "");
      } else {
        const int a_moduli_bits = plan.moduli() ? plan.a_bits : 0, b_moduli_bits = plan.moduli() ? plan.b_bits : 0;
        const SlicedOperand a_slices = slice_operand(a, a.row_stride, a.col_stride, p.M, p.K, scale_a, a_rows,
                                                     plan.a_slices, kWgmmaTileM, a_moduli_bits);
        const SlicedOperand b_slices = slice_operand(b, b.col_stride, b.row_stride, p.N, p.K, scale_b, b_rows,
                                                     plan.b_slices, kWgmmaTileN, b_moduli_bits);
        launch.scratch.push_back(a_slices.data);
        launch.scratch.push_back(b_slices.data);
        const Residuals a_residuals =
            collect_residuals(a, a.row_stride, a.col_stride, a_slices.batches, p.M, p.K, scale_a, a_slices.top,
                              plan.a_bits, plan.a_residuals, &launch.scratch);
        const Residuals b_residuals =
            collect_residuals(b, b.col_stride, b.row_stride, b_slices.batches, p.N, p.K, scale_b, b_slices.top,
                              plan.b_bits, plan.b_residuals, &launch.scratch);
        launch.out = into != nullptr ? into : allocate_reference_doubles(p.L * p.M * p.N, "its output");
        if (p.L * p.M * p.N > 0) {
          launch_emulated_gemm(p, plan, a_slices, b_slices, launch.out, &launch.roundings, &launch.scratch);
          const CorrectionArgs corrections{a,           b,           scale_a,          scale_b,          a_slices.top,
                                           plan.a_bits, a_slices.batches, b_slices.batches, launch.out,
                                           p.alpha,     p.L,         p.M,              p.N,              p.K};
          launch_residual_corrections(corrections, a_residuals, b_residuals);
          // Each correction: its Dot2 sum, alpha's product, the addition to the output.
          launch.roundings += 3 * ((a_residuals.count > 0) + (b_residuals.count > 0));
        }
        launch.emulated = true;
        launch.engine = emulation_engine(plan, launch.roundings);
      }
    }
  }
  if (!launch.emulated) {
    launch_dmma_reference_gemm(p, into, &launch);
    if (!not_emulated.empty()) {
      if (method == ReferenceMethod::emulated) launch.fallback = not_emulated;
      else launch.engine += "; " + not_emulated;
    }
  }
  launch_reference_epilogue(p, launch.out);
  REPRO_CUDA_CHECK(cudaEventRecord(launch.stop));
  return launch;
}

}  // namespace repro
