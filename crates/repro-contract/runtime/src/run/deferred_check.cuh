// ---------------------------------------------------------------------------------------------
// repro harness runtime: a queued check judged while the next one runs
//
// A device reference is cross-checked on the host (reference_cross_check.cuh): a sample of its
// outputs recomputed by the CPU, so that a faulty GPU cannot vouch for itself. At 1024^3 that
// sample takes the host longer than the device takes for the reference, the kernel and the
// comparison together, and a check alone waits for it. In a queue (queue.cuh), when the next
// check is already there to run, the sample is judged while that check runs instead: the check's
// verdict and report are held back until then.
//
// What is held back, and in what order it comes out (a check's text still ends in its
// disposition, and a check's text never mixes with another's):
// - the checked check (N) prints its report up to its reference line, which says the
//   cross-check is judged below; its disposition line, its JSON report and `queue   end of check
//   N` are kept;
// - the next check (N+1) runs with its standard output held in memory, up to the first moment
//   its host would wait for the device (host_idle(): its own reference GEMM under way, or its
//   first kernel, which may hang) or its end; there the host joins N's sample and judges the
//   reference's values at it, which were copied back before N's buffers went back (no CUDA is
//   called: N+1's kernel may have faulted);
// - agreed: N's line "ref     host cross-check ... judged while the next check ran", its
//   disposition, its JSON report and its end line are printed, then what N+1 printed so far, and
//   N+1 goes on printing as it runs;
// - disagreed: N ends the process as a check alone would (its message, "Disposition: Failed
//   (fault)", its report with exit code 4), and N+1 runs again in a fresh process (the queue's
//   isolation, repro's engine/run/queue.rs).
// A fatal error or a usage error of N+1 settles N first (before_exit), so N's result is never
// lost to N+1's end. Only one check is held at a time; a check with nothing after it, or whose
// next line has not arrived on standard input, is judged at once as before.
//
// Why it still proves what it did: the same sample, from the same buffers, recomputed and
// judged the same way; only the moment of the judgement moves, and nothing of the check is
// reported before it.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "reference_cross_check.cuh"

#include <fcntl.h>
#include <functional>
#include <memory>
#include <sys/mman.h>

namespace repro {

// The check held back.
struct HeldCheck {
  long long index = -1;                        // in the queue, from 0
  std::shared_ptr<PendingCrossCheck> pending;  // its host sample, still being computed
  std::vector<double> device_values;           // its reference at the sample, copied back
  FinishedReport report;                       // filled when the check concludes
};

struct DeferredChecks {
  std::function<bool()> next_check_ready;  // set by the queue: another check is there to run
  std::unique_ptr<HeldCheck> held;
  int real_stdout = -1;  // standard output while `capture` stands in for it
  int capture = -1;      // an in-memory file holding the running check's output
  std::vector<FinishedReport> waiting;  // reports of checks that ended while one was held
};

// Where the last settling's time went (benchmarks: the next check's report says it beside
// reference_settle_ms): waiting for the sample, judging it, printing what was held, and handing
// back what waited on it.
struct SettleParts {
  long long check = -1;  // the check whose host settled it (g_queue_check then)
  double wait_seconds = 0, judge_seconds = 0, output_seconds = 0, release_seconds = 0;
};
inline SettleParts g_settle_parts;

inline DeferredChecks& deferred_checks() {
  static DeferredChecks* state = new DeferredChecks();  // never destroyed: used until exit
  return *state;
}

// Whether this check's cross-check may be judged while the next check runs.
inline bool may_defer_cross_check() {
  DeferredChecks& state = deferred_checks();
  return g_queue_check >= 0 && state.held == nullptr && state.next_check_ready && state.next_check_ready();
}

// Whether a check is held back.
inline bool check_held() { return deferred_checks().held != nullptr; }

// The running check's standard output into memory, while a check before it is held back.
inline void hold_output() {
  DeferredChecks& state = deferred_checks();
  if (state.capture >= 0) return;
  std::fflush(stdout);
  int file = -1;
#ifdef MFD_CLOEXEC
  file = memfd_create("repro-queued-check-output", MFD_CLOEXEC);
#endif
  if (file < 0) {
    FILE* temporary = std::tmpfile();
    if (temporary != nullptr) file = dup(fileno(temporary)), std::fclose(temporary);
  }
  // Reports wait for the held check's in any case, so that the reports file keeps the order.
  g_reports_waiting = &state.waiting;
  if (file < 0) return;  // nowhere to hold it: printed as it comes (still after the held check's start)
  state.real_stdout = dup(STDOUT_FILENO);
  if (state.real_stdout < 0 || dup2(file, STDOUT_FILENO) < 0) {
    if (state.real_stdout >= 0) close(state.real_stdout);
    close(file);
    state.real_stdout = -1;
    return;
  }
  state.capture = file;
}

// The reports that waited for a held check's, written in their order (emit), or dropped with
// the process that ends as the held check's fault (their checks run again in a fresh one).
inline void release_waiting_reports(bool emit) {
  DeferredChecks& state = deferred_checks();
  g_reports_waiting = nullptr;
  if (emit)
    for (const FinishedReport& report : state.waiting) emit_json_report(report);
  state.waiting.clear();
}

// Standard output back; what was held is returned (not printed).
inline std::string end_held_output() {
  DeferredChecks& state = deferred_checks();
  if (state.capture < 0) return "";
  std::fflush(stdout);
  dup2(state.real_stdout, STDOUT_FILENO);
  close(state.real_stdout);
  state.real_stdout = -1;
  std::string text;
  char buffer[1 << 16];
  lseek(state.capture, 0, SEEK_SET);
  for (ssize_t n; (n = read(state.capture, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) text.append(buffer, size_t(n));
  close(state.capture);
  state.capture = -1;
  return text;
}

inline void print_held_output(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

inline void settle_held_check();


// Holds this check back: its cross-check (`reference->pending`, moved out) goes on while the
// next check runs; its report waits for it. The reference's values at the sample, fetched behind
// its GEMM, are read now (no CUDA is called once they are).
inline void defer_cross_check(DeviceReference* reference) {
  DeferredChecks& state = deferred_checks();
  auto held = std::make_unique<HeldCheck>();
  held->index = g_queue_check;
  // From here on the host's sample calls no CUDA (its operands are on the host).
  reference->pending->copied.get_future().wait();
  held->device_values = read_sampled_device_values(reference->pending->device_values);
  held->pending = std::move(reference->pending);
  g_report_held = &held->report;
  state.held = std::move(held);
  g_before_exit = &settle_held_check;
  g_host_idle = &settle_held_check;
}

// Judges the held check's reference on its sample and prints what it held back (see the top),
// then the output and reports held behind it; nothing to do when no check is held (nothing is
// held behind none: hold_output runs only while a check is held). A disagreement ends the
// process as the held check's fault.
inline void settle_held_check() {
  DeferredChecks& state = deferred_checks();
  if (state.held == nullptr) return;
  std::unique_ptr<HeldCheck> held = std::move(state.held);
  g_host_idle = nullptr;
  const auto start = std::chrono::steady_clock::now();
  held->pending->done.wait();
  g_settle_parts = SettleParts();
  g_settle_parts.check = g_queue_check;
  g_settle_parts.wait_seconds = seconds_since(start);
  const CrossCheckSample& sample = held->pending->sample;
  std::string disagreement;
  const CrossCheck check = judge_sampled_values(held->pending->problem, sample, held->device_values, &disagreement);
  const double check_seconds = seconds_since(start);
  g_settle_parts.judge_seconds = check_seconds - g_settle_parts.wait_seconds;
  const auto output_start = std::chrono::steady_clock::now();
  const bool concluded = !held->report.disposition.empty();
  const std::string held_output = end_held_output();
  if (g_report_held == &held->report) g_report_held = nullptr;  // settled before the check's own end
  if (!disagreement.empty()) {
    // The held check's fault, reported as a check alone reports it; what the next check printed
    // goes with the process (it runs again in a fresh one).
    if (concluded) g_report_fields = held->report.fields;
    g_queue_check = held->index;
    g_before_exit = nullptr;
    release_waiting_reports(false);
    fatal(kExitCudaError, "fault", disagreement);
  }
  const std::string line = strprintf(
      "ref     host cross-check of %lld outputs, judged while the next check ran: recomputed in %.3f s, %.3f s "
      "waited for, max difference %.1e of the terms' magnitude",
      (long long)check.samples, sample.host_seconds, check_seconds, check.max_relative);
  const std::pair<const char*, double> times[] = {{"reference_check_ms", check_seconds * 1e3},
                                                  {"reference_host_ms", sample.host_seconds * 1e3},
                                                  {"reference_decode_ms", sample.decode_seconds * 1e3}};
  if (!concluded) {
    // Settled from the held check's own early end (a fatal or usage error after its
    // reference): the line joins its text, the times its report, and its end goes on.
    std::printf("%s\n", line.c_str());
    for (const auto& [key, value] : times) report_set(key, JsonWriter().value(value).str());
    print_held_output(held_output);
    const auto release_start = std::chrono::steady_clock::now();
    g_settle_parts.output_seconds = seconds_since(output_start);
    release_waiting_reports(true);
    release_on_sample_thread(std::move(held->pending));
    g_settle_parts.release_seconds = seconds_since(release_start);
    return;
  }
  for (const auto& [key, value] : times) set_report_field(&held->report.fields, key, JsonWriter().value(value).str());
  std::printf("%s\n%s\n", line.c_str(), held->report.disposition_line.c_str());
  std::fflush(stdout);
  emit_json_report(held->report);
  std::printf("queue   end of check %lld\n", held->index + 1);
  std::fflush(stdout);
  print_held_output(held_output);
  const auto release_start = std::chrono::steady_clock::now();
  g_settle_parts.output_seconds = seconds_since(output_start);
  release_waiting_reports(true);
  if (g_before_exit == &settle_held_check) g_before_exit = nullptr;
  release_on_sample_thread(std::move(held->pending));
  g_settle_parts.release_seconds = seconds_since(release_start);
}

}  // namespace repro
