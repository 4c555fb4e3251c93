// ---------------------------------------------------------------------------------------------
// repro harness runtime: queue
//
// --queue FILE (or - for standard input): a queue of checks of this one instantiation, run one
// after the other in one process and one CUDA context, so that a campaign, a sweep or a shrink
// pays for the process and the context once rather than per check (docs/cli.md, "A queue of
// checks").
//
// The file holds one check per line: its options, as on the command line, separated by tabs (a
// word may hold spaces; repro writes these files). Empty lines and lines starting with `#` are
// skipped. A check's options are the command line's (all but --queue) followed by its line's,
// so the command line holds what every check shares (--timeout, --reference-cache) and a line
// may override it (a later --size wins). A line may not name the files of the whole run
// (--queue, --json, --spec) nor --emit-inputs, --bench or --help; --dump DIR is a check's own.
// A file is read and checked whole before the first check runs: a bad line is a usage error
// naming its number. Standard input (`--queue -`) is read line by line, each check run when its
// line arrives (a bad line ends the queue there): repro holds a harness open this way and sends
// a check once it has the last one's result (shrink's search decides its next check from it).
//
// Each check prints `queue   check N of T: WORDS` (`queue   check N: WORDS` from standard input),
// then the report a process of its own would print, ending in its Disposition line, and
// `queue   end of check N` once the context is checked; with --json FILE each check's JSON
// report is appended to FILE as one line the moment it ends, with `"check": N` (from 0) first.
// Between checks nothing of one check reaches the next: the spec is read afresh, the report's
// fields, the stressor's state and the TMA descriptors printed start empty, and the device
// buffers are taken back (device_buffers.cuh; outputs are poisoned before every launch as
// always).
//
// Isolation: a check that cannot go on (a fault, a hang, a sticky CUDA error) ends the process
// as it would end a process of its own (fatal(): its line written, exit 4 or 5), and after each
// check the context is checked for an error a kernel left behind; repro starts a fresh process
// for the rest of the queue, so no later check runs in a context that faulted.
//
// Exit: 0 when every check passed, 1 when every check ran and at least one failed, 7 when there
// is no device (at the first check), and a fatal check's own code.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "deferred_check.cuh"
#include "run_options.cuh"

#include <poll.h>

namespace repro {

inline Options parse_options(int argc, char** argv);  // harness_main.cuh

// Bounds on a queue file: a queue is a list of short option lines, and these keep a wrong path
// (/dev/zero, a binary) from being read without end.
constexpr size_t kMaxQueueBytes = size_t(64) << 20;
constexpr size_t kMaxQueueChecks = size_t(1) << 20;
constexpr size_t kMaxQueueWords = 512;

struct QueuedCheck {
  long long line = 0;              // in the file, from 1
  std::vector<std::string> words;  // its options
};

inline std::string read_queue_text(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) usage_error(strprintf("--queue %s: cannot read it: %s", path.c_str(), std::strerror(errno)));
  std::string text;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) {
    text.append(buffer, n);
    if (text.size() > kMaxQueueBytes)
      usage_error(strprintf("--queue %s: larger than %zu MiB; a queue is a list of option lines", path.c_str(),
                            kMaxQueueBytes >> 20));
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) usage_error(strprintf("--queue %s: cannot read it", path.c_str()));
  return text;
}

// The options the whole run owns: a queue's line may not set them.
inline const char* queue_refused_option(const std::string& word) {
  for (const char* option : {"--queue", "--json", "--spec", "--emit-inputs", "--bench", "--warmup",
                             "--flush-l2", "--help", "-h"}) {
    const size_t n = std::strlen(option);
    if (word.compare(0, n, option) == 0 && (word.size() == n || word[n] == '=')) return option;
  }
  return nullptr;
}

// One line of a queue: false for a line to skip (empty, or a `#` comment), else its check.
inline bool parse_queue_line(const std::string& path, long long line_number, std::string line, QueuedCheck* check) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty() || line[0] == '#') return false;
  const std::string where = strprintf("--queue %s line %lld", path.c_str(), line_number);
  check->line = line_number;
  check->words.clear();
  for (size_t at = 0;;) {
    const size_t tab = line.find('\t', at);
    const std::string word = line.substr(at, tab == std::string::npos ? std::string::npos : tab - at);
    if (word.empty())
      usage_error(where + ": an empty option (options are separated by one tab, with none at either end)");
    if (const char* refused = queue_refused_option(word))
      usage_error(strprintf("%s: %s belongs to the whole run, not to one check of a queue (give it on the command "
                            "line, or run the check on its own)",
                            where.c_str(), refused));
    check->words.push_back(word);
    if (check->words.size() > kMaxQueueWords)
      usage_error(strprintf("%s: more than %zu options", where.c_str(), kMaxQueueWords));
    if (tab == std::string::npos) break;
    at = tab + 1;
  }
  return true;
}

// A queue file, read and checked whole before the first check runs.
inline std::vector<QueuedCheck> read_queue(const std::string& path) {
  const std::string text = read_queue_text(path);
  std::vector<QueuedCheck> checks;
  long long line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    QueuedCheck check;
    if (!parse_queue_line(path, line_number, line, &check)) continue;
    if (checks.size() == kMaxQueueChecks)
      usage_error(strprintf("--queue %s line %lld: more than %zu checks; split the queue", path.c_str(), line_number,
                            kMaxQueueChecks));
    checks.push_back(std::move(check));
  }
  return checks;
}

constexpr size_t kMaxQueueLineBytes = size_t(1) << 20;

// Standard input read line by line, and whether a whole line is already there: a check may then
// be held back while the next one runs (deferred_check.cuh). Read with read(2) into a buffer of
// its own, so that what stdio would have buffered is visible here.
class StandardInputLines {
 public:
  // The next line, at most kMaxQueueLineBytes; false at the end of the input. A held check is
  // settled before the read would block: whoever feeds the queue may wait for its end line.
  bool next(long long line_number, std::string* line) {
    for (;;) {
      const size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        *line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        check_length(line_number, *line);
        return true;
      }
      check_length(line_number, buffer_);
      if (ended_) {
        *line = std::move(buffer_);
        buffer_.clear();
        return !line->empty();
      }
      if (!readable()) settle_held_check();
      fill();
    }
  }

  // Whether a whole line is there to read without waiting.
  bool line_ready() {
    while (buffer_.find('\n') == std::string::npos && !ended_ && readable()) fill();
    return buffer_.find('\n') != std::string::npos;
  }

 private:
  static bool readable() {
    pollfd input{STDIN_FILENO, POLLIN, 0};
    return poll(&input, 1, 0) > 0;
  }
  void fill() {
    char chunk[1 << 12];
    ssize_t n;
    while ((n = read(STDIN_FILENO, chunk, sizeof(chunk))) < 0 && errno == EINTR) {
    }
    if (n <= 0) ended_ = true;
    else buffer_.append(chunk, size_t(n));
  }
  static void check_length(long long line_number, const std::string& line) {
    if (line.size() > kMaxQueueLineBytes)
      usage_error(strprintf("--queue - line %lld: longer than %zu bytes", line_number, kMaxQueueLineBytes));
  }
  std::string buffer_;
  bool ended_ = false;
};

// A new check: nothing of the one before but the context, the stream and the buffers to reuse.
inline void begin_queued_check(long long index) {
  g_queue_check = index;
  g_report_held = nullptr;  // a check held back concluded into its own
  g_report_fields.clear();
  stress_begin_check();
  tma_printed() = TmaPrinted();
  device_buffer_pool().reclaim();
}

// After a check: an error a kernel left in the context (a fault the check's own calls did not
// see) ends the process, so that the next check does not run in a context that faulted.
inline void require_clean_context(long long index) {
  const cudaError_t synchronized = cudaDeviceSynchronize();
  const cudaError_t last = cudaGetLastError();
  const cudaError_t error = synchronized != cudaSuccess ? synchronized : last;
  if (error == cudaSuccess) return;
  std::printf("queue   the context holds an error after check %lld: %s (%s); the rest of the queue needs a fresh "
              "process\n",
              index + 1, cudaGetErrorName(error), cudaGetErrorString(error));
  exit_now(kExitCudaError);
}

inline std::string queue_words_text(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : " ") + shell_quote(word);
  return text;
}

inline int run_queue(int argc, char** argv, const Options& command_line, const HarnessSpec& harness,
                     int (*run_one)(const Options&, const HarnessSpec&)) {
  // The command line's words, but --queue and its value: every check starts from them.
  std::vector<std::string> shared;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--queue") {
      ++i;
      continue;
    }
    if (word.rfind("--queue=", 0) == 0) continue;
    shared.push_back(word);
  }
  const std::string& path = command_line.queue_path;
  const auto options_of = [&](const QueuedCheck& check) {
    std::vector<std::string> words = {argv[0]};
    words.insert(words.end(), shared.begin(), shared.end());
    words.insert(words.end(), check.words.begin(), check.words.end());
    std::vector<char*> pointers;
    for (std::string& word : words) pointers.push_back(&word[0]);
    g_usage_context = strprintf("--queue %s line %lld: ", path.c_str(), check.line);
    Options parsed = parse_options(int(pointers.size()), pointers.data());
    g_usage_context.clear();
    parsed.queue_path.clear();
    return parsed;
  };
  // The reports of this process only: a queue's --json file is written afresh.
  if (!command_line.json_path.empty()) {
    std::string error;
    if (!write_text_file(command_line.json_path, "", &error)) usage_error(error);
  }
  size_t passed = 0, failed = 0, index = 0;
  // One check: its marker, its run, the context checked, and the line that says it is over (a
  // program feeding standard input waits for it before it sends the next).
  // A check held back (deferred_check.cuh) ends with its cross-check's judgement, which prints its
  // disposition and end line; the check after it runs with its output held until then.
  const auto run_check_of_queue = [&](const QueuedCheck& check, const Options& options, const std::string& of) {
    begin_queued_check((long long)index);
    if (check_held()) hold_output();
    std::printf("queue   check %zu%s: %s\n", index + 1, of.c_str(), queue_words_text(check.words).c_str());
    std::fflush(stdout);
    const int code = run_one(options, harness);
    std::fflush(stdout);
    // The check before, if this one's run gave it no moment to be judged in, is judged now.
    const bool this_one_held = check_held() && deferred_checks().held->index == (long long)index;
    if (!this_one_held) settle_held_check();
    if (code == kExitNoDevice) return code;  // nothing of the queue can run here
    (code == kExitPassed ? passed : failed) += 1;
    require_clean_context((long long)index);
    if (!this_one_held) {
      std::printf("queue   end of check %zu\n", index + 1);
      std::fflush(stdout);
    }
    ++index;
    return 0;
  };
  if (path == "-") {
    // Standard input: each line is read and run as it comes (a program holds the harness open
    // and sends its next check when the last one's result is in), so a bad line ends the queue
    // when it comes. A program that sends a check's line before the last one's result lets that
    // one's cross-check be judged while the next runs.
    StandardInputLines input;
    deferred_checks().next_check_ready = [&input] { return input.line_ready(); };
    std::string line;
    QueuedCheck check;
    for (long long line_number = 1; input.next(line_number, &line); ++line_number) {
      if (!parse_queue_line(path, line_number, line, &check)) continue;
      if (const int code = run_check_of_queue(check, options_of(check), "")) return code;
    }
  } else {
    const std::vector<QueuedCheck> checks = read_queue(path);
    std::vector<Options> options;
    for (const QueuedCheck& check : checks) options.push_back(options_of(check));
    deferred_checks().next_check_ready = [&] { return index + 1 < checks.size(); };
    for (size_t i = 0; i < checks.size(); ++i)
      if (const int code = run_check_of_queue(checks[i], options[i], strprintf(" of %zu", checks.size()))) return code;
  }
  settle_held_check();
  deferred_checks().next_check_ready = nullptr;
  std::printf("queue   %zu checks: %zu passed, %zu failed\n", index, passed, failed);
  return failed > 0 ? kExitMismatch : kExitPassed;
}

}  // namespace repro
