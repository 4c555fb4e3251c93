// =====================================================================================================
// repro_inject.cpp: the CUDA injection library behind `repro capture` (docs/cli.md, `repro capture`).
//
// The driver loads it through CUDA_INJECTION64_PATH and calls InitializeInjection() inside cuInit,
// so it records one kernel launch of an unmodified program. It owns: the CUPTI subscription
// (driver-API launch and cuTensorMapEncode* callbacks, module-loaded resource callbacks), the
// choice of the launch to record, and every file below. `repro capture` sets the environment,
// runs the program and reads these files; nothing else talks to this library.
//
// One file of ~1,800 lines on purpose: repro embeds it (inject.rs, include_str!) and compiles it
// alone with the host compiler, cached under the hash of this one source; splitting it would
// make that cache key and the compile line several files for no reader's gain. Its sections are
// marked below: configuration, session files, module and encode tracking, the launch record,
// the window of launches.
//
// Environment (set by repro; a missing or invalid one gives status "bad_environment"):
//   REPRO_CAPTURE_OUT        existing absolute directory for the files below
//   REPRO_CAPTURE_KERNEL     ECMAScript regex, searched in the demangled kernel name
//   REPRO_CAPTURE_LAUNCH     N >= 1: record the N-th matching launch
//   REPRO_CAPTURE_MAX_BYTES  most device bytes to copy; a launch over it is refused, not recorded
//   REPRO_CAPTURE_DEVICE     device ordinal whose launches count (absent or -1: any)
//   REPRO_CAPTURE_STOP       "1": _exit(0) once the capture is written
//   REPRO_CAPTURE_LAUNCHES   optional, N >= 1: a window of N consecutive launches (any kernel) from
//                            the recorded one; 1 or absent: the one launch, as always
//   REPRO_CAPTURE_THROUGH    optional regex: the window ends with the first later launch matching it
//   REPRO_CAPTURE_WINDOW_MAX most launches a window may hold (default 64, a spec's `launches:` limit)
//
// Files in REPRO_CAPTURE_OUT (JSON is written to NAME.partial then renamed, so a reader or a
// later crash never sees half a file; capture.json is written last and is the commit marker):
//   session.json             status, counters, kernels seen, notes; rewritten at attach, on each
//                            status change and newly listed kernel, and at exit (counters lag
//                            in between: launches do not write files)
//   capture.json             the recorded launch: config, params, pointers, tensor maps, buffers
//   params.bin               the packed kernel parameter bytes
//   buffers/b<i>.before.bin  each allocation the parameters point into, before the launch
//   buffers/b<i>.after.bin   the same after the launch, only where it changed
//   module.cubin             the cubin that holds the kernel
//
// With a window (REPRO_CAPTURE_LAUNCHES > 1 or REPRO_CAPTURE_THROUGH), window.json replaces
// capture.json as the commit marker: one launch record per launch of the window (the keys of
// capture.json, its parameter bytes in launches/l<k>.params.bin, its cubin in launches/m<j>.cubin,
// identical modules shared), and the buffers of the whole window: each allocation copied to
// buffers/b<i>.before.bin before the first launch that points into it, and once more after the
// last launch (b<i>.after.bin where the window changed it), with the launches that changed it.
// Memsets and copies into an allocation the window already saw are listed, not replayed.
//
// Why one file of ~1,400 lines: repro compiles it on the user's machine with the host compiler
// alone (no build system, no other sources to carry), and its parts (the CUPTI callbacks, the
// recording, the JSON writer) share one state that must never be seen half-built by a callback.
//
// Rules that shape the code: the host program must never crash or stop because of us (every
// failure becomes a status or a note), and launches we do not record must cost one lock and a
// hash lookup (two with REPRO_CAPTURE_DEVICE) and nothing else: only the recorded launch
// synchronizes its stream. The driver is resolved with dlsym: no libcuda.so exists where this is
// built. Needs CUDA 12.8+ headers (cuTensorMapEncodeIm2colWide) and a 12.4+ driver
// (cuFuncGetParamInfo).
// =====================================================================================================
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>  // with the *_params structs of every driver and runtime call
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace {

constexpr uint64_t kCubinCap = 1ull << 30;          // all kept cubins together
constexpr uint64_t kUnparsedCubinMax = 64ull << 20; // an unreadable ELF is kept below this
constexpr size_t kEncodeCap = 65536;                // tensor-map encodes remembered
constexpr size_t kKernelListCap = 200;              // kernels listed in session.json
constexpr size_t kNotesCap = 100;

// ---- the driver, resolved at run time ---------------------------------------------------------
struct Driver {
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*memGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*ctxGetDevice)(CUdevice*) = nullptr;
  CUresult (*ctxGetDeviceOf)(CUdevice*, CUcontext) = nullptr;  // cuCtxGetDevice_v2, optional
  CUresult (*streamSynchronize)(CUstream) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;  // optional: the end of a window
  CUresult (*streamIsCapturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*pointerGetAttribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*funcGetParamInfo)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernelGetParamInfo)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernelGetFunction)(CUfunction*, CUkernel) = nullptr;
  CUresult (*funcGetAttribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*funcGetName)(const char**, CUfunction) = nullptr;
  CUresult (*deviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*getErrorName)(CUresult, const char**) = nullptr;
};

template <class F>
void bind(void* lib, F& fn, const char* name) { fn = reinterpret_cast<F>(dlsym(lib, name)); }

// Fills the table; `missing` names what capture cannot do without (the rest is optional).
bool load_driver(Driver& d, std::string& missing) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);  // cuInit is running: it is loaded
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) { missing = "libcuda.so.1"; return false; }
  bind(lib, d.memcpyDtoH, "cuMemcpyDtoH_v2");
  bind(lib, d.memGetAddressRange, "cuMemGetAddressRange_v2");
  bind(lib, d.ctxGetDevice, "cuCtxGetDevice");
  bind(lib, d.ctxGetDeviceOf, "cuCtxGetDevice_v2");
  bind(lib, d.streamSynchronize, "cuStreamSynchronize");
  bind(lib, d.ctxSynchronize, "cuCtxSynchronize");
  bind(lib, d.streamIsCapturing, "cuStreamIsCapturing");
  bind(lib, d.pointerGetAttribute, "cuPointerGetAttribute");
  bind(lib, d.funcGetParamInfo, "cuFuncGetParamInfo");
  bind(lib, d.kernelGetParamInfo, "cuKernelGetParamInfo");
  bind(lib, d.kernelGetFunction, "cuKernelGetFunction");
  bind(lib, d.funcGetAttribute, "cuFuncGetAttribute");
  bind(lib, d.funcGetName, "cuFuncGetName");
  bind(lib, d.deviceGetName, "cuDeviceGetName");
  bind(lib, d.deviceGetAttribute, "cuDeviceGetAttribute");
  bind(lib, d.getErrorName, "cuGetErrorName");
  const std::pair<bool, const char*> required[] = {
      {d.memcpyDtoH != nullptr, "cuMemcpyDtoH_v2"},
      {d.memGetAddressRange != nullptr, "cuMemGetAddressRange_v2"},
      {d.ctxGetDevice != nullptr, "cuCtxGetDevice"},
      {d.streamSynchronize != nullptr, "cuStreamSynchronize"},
      {d.funcGetParamInfo != nullptr, "cuFuncGetParamInfo (CUDA 12.4+ driver)"}};
  for (const auto& r : required)
    if (!r.first) missing += (missing.empty() ? "" : ", ") + std::string(r.second);
  return missing.empty();
}

// ---- environment ----------------------------------------------------------------------------
struct Config {
  std::string out, pattern;
  std::regex re;
  uint64_t launch = 1, max_bytes = 0;
  int device = -1;
  bool stop = false;
  // The window (empty `through` and window_launches <= 1: the one launch of before).
  uint64_t window_launches = 0, window_max = 64;
  std::string through;
  std::regex through_re;
  bool window() const { return window_launches > 1 || !through.empty(); }
};

bool parse_u64(const char* s, uint64_t& v) {
  if (!s || !*s || *s == '-' || *s == '+') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno || *end) return false;
  v = x;
  return true;
}

bool is_directory(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// REPRO_CAPTURE_OUT is read first by the caller: without it there is nowhere to report.
bool parse_config(Config& c, std::string& err) {
  const char* kernel = getenv("REPRO_CAPTURE_KERNEL");
  if (!kernel || !*kernel) { err = "REPRO_CAPTURE_KERNEL is not set"; return false; }
  c.pattern = kernel;
  try {
    c.re = std::regex(c.pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    err = "REPRO_CAPTURE_KERNEL is not a valid ECMAScript regex: " + std::string(e.what());
    return false;
  }
  if (!parse_u64(getenv("REPRO_CAPTURE_LAUNCH"), c.launch) || c.launch == 0) {
    err = "REPRO_CAPTURE_LAUNCH must be an integer >= 1";
    return false;
  }
  if (!parse_u64(getenv("REPRO_CAPTURE_MAX_BYTES"), c.max_bytes)) {
    err = "REPRO_CAPTURE_MAX_BYTES must be a non-negative integer";
    return false;
  }
  const char* dev = getenv("REPRO_CAPTURE_DEVICE");
  uint64_t d = 0;
  if (dev && *dev && strcmp(dev, "-1") != 0) {
    if (!parse_u64(dev, d) || d > 1u << 20) { err = "REPRO_CAPTURE_DEVICE must be -1 or an ordinal"; return false; }
    c.device = static_cast<int>(d);
  }
  const char* stop = getenv("REPRO_CAPTURE_STOP");
  if (stop && *stop && strcmp(stop, "0") != 0 && strcmp(stop, "1") != 0) {
    err = "REPRO_CAPTURE_STOP must be 0 or 1";
    return false;
  }
  c.stop = stop && strcmp(stop, "1") == 0;
  const char* launches = getenv("REPRO_CAPTURE_LAUNCHES");
  if (launches && *launches && (!parse_u64(launches, c.window_launches) || c.window_launches == 0)) {
    err = "REPRO_CAPTURE_LAUNCHES must be an integer >= 1";
    return false;
  }
  const char* most = getenv("REPRO_CAPTURE_WINDOW_MAX");
  if (most && *most && (!parse_u64(most, c.window_max) || c.window_max == 0)) {
    err = "REPRO_CAPTURE_WINDOW_MAX must be an integer >= 1";
    return false;
  }
  if (c.window_launches > c.window_max) {
    err = "REPRO_CAPTURE_LAUNCHES is over REPRO_CAPTURE_WINDOW_MAX";
    return false;
  }
  const char* through = getenv("REPRO_CAPTURE_THROUGH");
  if (through && *through) {
    c.through = through;
    try {
      c.through_re = std::regex(c.through, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      err = "REPRO_CAPTURE_THROUGH is not a valid ECMAScript regex: " + std::string(e.what());
      return false;
    }
  }
  return true;
}

// ---- a small JSON writer --------------------------------------------------------------------
// Everything outside printable ASCII is written as \uXXXX: kernel names and error strings reach
// the reader intact whatever bytes they hold (bytes that are not UTF-8 are read as Latin-1).
class Json {
 public:
  Json& obj() { return open('{', '}'); }
  Json& arr() { return open('[', ']'); }
  Json& end() { s_ += closers_.back(); closers_.pop_back(); first_ = false; return *this; }
  Json& key(const char* k) {
    if (!first_) s_ += ',';
    first_ = false;
    quote(k, strlen(k));
    s_ += ':';
    after_key_ = true;
    return *this;
  }
  Json& str(const std::string& v) { prefix(); quote(v.data(), v.size()); return *this; }
  Json& str_or_null(const std::string& v) { return v.empty() ? null() : str(v); }
  Json& null() { prefix(); s_ += "null"; return *this; }
  Json& boolean(bool v) { prefix(); s_ += v ? "true" : "false"; return *this; }
  Json& hex(uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "\"0x%llx\"", static_cast<unsigned long long>(v));
    prefix();
    s_ += b;
    return *this;
  }
  template <class T>
  Json& num(T v) {
    static_assert(std::is_integral<T>::value, "integers only");
    prefix();
    s_ += std::to_string(v);
    return *this;
  }
  Json& real(double v) {
    char b[32];
    snprintf(b, sizeof b, "%.17g", v);
    prefix();
    s_ += (v == v && v - v == 0) ? b : "null";  // NaN and infinities are not JSON
    return *this;
  }
  template <class V>
  Json& nums(const V& v) { arr(); for (auto x : v) num(x); return end(); }
  const std::string& text() { return s_; }

 private:
  Json& open(char c, char close) { prefix(); s_ += c; closers_.push_back(close); first_ = true; return *this; }
  void prefix() {
    if (after_key_) { after_key_ = false; return; }
    if (!first_) s_ += ',';
    first_ = false;
  }
  void u(unsigned cp) { char b[16]; snprintf(b, sizeof b, "\\u%04x", cp); s_ += b; }
  // Decodes one UTF-8 sequence at p; returns its length, 0 when it is not valid UTF-8.
  static size_t utf8(const unsigned char* p, size_t n, unsigned& cp) {
    size_t len = p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (len == 0 || len > n) return 0;
    cp = p[0] & (0x7f >> len);
    for (size_t i = 1; i < len; ++i) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (p[i] & 0x3f);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    return overlong || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000) ? 0 : len;
  }
  void quote(const char* d, size_t n) {
    s_ += '"';
    const unsigned char* p = reinterpret_cast<const unsigned char*>(d);
    for (size_t i = 0; i < n;) {
      unsigned c = p[i], cp = 0;
      if (c == '"' || c == '\\') { s_ += '\\'; s_ += static_cast<char>(c); ++i; continue; }
      if (c >= 0x20 && c < 0x7f) { s_ += static_cast<char>(c); ++i; continue; }
      size_t len = c >= 0x80 ? utf8(p + i, n - i, cp) : 0;
      if (len == 0) { u(c); ++i; continue; }
      if (cp >= 0x10000) { cp -= 0x10000; u(0xd800 + (cp >> 10)); u(0xdc00 + (cp & 0x3ff)); }
      else u(cp);
      i += len;
    }
    s_ += '"';
  }
  std::string s_;
  std::vector<char> closers_;
  bool first_ = true, after_key_ = false;
};

// ---- files ----------------------------------------------------------------------------------
// Writes PATH.partial, optionally fsyncs it, renames it over PATH. Returns "" or the error.
std::string write_file(const std::string& path, const void* data, size_t n, bool durable) {
  std::string tmp = path + ".partial";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "open " + tmp + ": " + strerror(errno);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { std::string e = strerror(errno); close(fd); return "write " + tmp + ": " + e; }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (durable && fsync(fd) != 0) { std::string e = strerror(errno); close(fd); return "fsync " + tmp + ": " + e; }
  if (close(fd) != 0) return "close " + tmp + ": " + strerror(errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return "rename " + tmp + ": " + strerror(errno);
  return "";
}

// ---- ELF symbols of a cubin -----------------------------------------------------------------
template <class T>
bool read_at(const char* d, size_t n, uint64_t off, T& out) {
  if (off > n || n - off < sizeof(T)) return false;
  memcpy(&out, d + off, sizeof(T));  // cubin images need not be aligned
  return true;
}

// Calls visit(name, len) for each STT_FUNC symbol of an ELF64 little-endian image until visit
// returns true. Returns false when the image is not such an ELF or has no readable .symtab.
bool for_each_function(const char* d, size_t n, const std::function<bool(const char*, size_t)>& visit) {
  Elf64_Ehdr eh;
  if (!read_at(d, n, 0, eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > n)
    return false;
  for (unsigned s = 0; s < eh.e_shnum; ++s) {
    Elf64_Shdr sym, str;
    if (!read_at(d, n, eh.e_shoff + uint64_t(s) * sizeof(Elf64_Shdr), sym)) return false;
    if (sym.sh_type != SHT_SYMTAB) continue;
    if (sym.sh_link >= eh.e_shnum || !read_at(d, n, eh.e_shoff + uint64_t(sym.sh_link) * sizeof(Elf64_Shdr), str) ||
        sym.sh_entsize != sizeof(Elf64_Sym) || sym.sh_offset > n || sym.sh_size > n - sym.sh_offset ||
        str.sh_offset > n || str.sh_size > n - str.sh_offset)
      return false;
    const char* strtab = d + str.sh_offset;
    for (uint64_t k = 0; k < sym.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym e;
      read_at(d, n, sym.sh_offset + k * sizeof(Elf64_Sym), e);
      if (ELF64_ST_TYPE(e.st_info) != STT_FUNC || e.st_name >= str.sh_size) continue;
      size_t room = str.sh_size - e.st_name, len = strnlen(strtab + e.st_name, room);
      if (len < room && len > 0 && visit(strtab + e.st_name, len)) return true;
    }
    return true;
  }
  return false;
}

// ---- state shared by all callback threads ---------------------------------------------------
struct KernelInfo {
  std::string mangled, demangled;
  bool matches = false, listed = false;
  uint64_t launches = 0;
};

struct Encode {  // one successful cuTensorMapEncode* call
  const char* kind = "tiled";
  int data_type = 0, interleave = 0, swizzle = 0, l2 = 0, oob = 0;
  uint32_t rank = 0, channels = 0, pixels = 0;
  uint64_t address = 0, seq = 0;
  std::vector<uint64_t> dims, strides;
  std::vector<uint32_t> box, element_strides;
  std::vector<int> lower, upper;        // im2col corners (rank - 2 each)
  int lower_w = 0, upper_w = 0, mode = 0;  // im2col_wide
};

// Waiting for launch N; Recording it (one launch, or the window's launches one after another);
// Done. A window stays Recording from its first launch's API_ENTER to its last one's API_EXIT.
enum class Phase { Waiting, Recording, Done };

struct Window;

struct State {
  Config cfg;
  Driver drv;
  std::mutex mu;  // everything up to the next mutex
  bool active = false;
  std::string status = "attached", message;
  Phase phase = Phase::Waiting;
  uint64_t launches_seen = 0, kernels_unlisted = 0, notes_dropped = 0, refused_total = 0, window_recorded = 0;
  std::vector<std::pair<uint64_t, uint64_t>> refused_buffers;
  std::unordered_map<CUfunction, KernelInfo*> by_func;  // cleared when a module unloads
  std::unordered_map<std::string, std::unique_ptr<KernelInfo>> by_name;
  std::vector<KernelInfo*> kernels;
  std::unordered_map<uint32_t, int> ctx_device;  // contextUid -> ordinal
  std::set<int> other_devices;
  std::deque<std::shared_ptr<const std::string>> cubins;  // oldest first
  uint64_t cubin_bytes = 0;
  std::vector<std::string> notes;
  std::atomic<uint64_t> matched{0}, in_graph_capture{0};

  std::mutex names_mu;  // demangle + regex decisions per mangled name
  std::unordered_map<std::string, bool> name_match;

  std::mutex encodes_mu;
  std::unordered_map<std::string, Encode> encodes;  // key: the 128 bytes of the CUtensorMap
  std::deque<std::pair<std::string, uint64_t>> encode_order;
  uint64_t encode_seq = 0;

  std::mutex io_mu;  // serializes session.json writes; taken before mu, never inside it

  // The window being recorded (REPRO_CAPTURE_LAUNCHES/THROUGH), from its first launch's API_ENTER
  // until it is written. window_mu serializes its launches' recording; taken before mu.
  std::mutex window_mu;
  Window* window = nullptr;
  std::atomic<bool> in_window{false};
};

State* g = nullptr;  // never freed: callbacks may run during static destruction

void note_locked(std::string s) {
  if (g->notes.size() < kNotesCap) g->notes.push_back(std::move(s));
  else ++g->notes_dropped;
}
void note(std::string s) { std::lock_guard<std::mutex> l(g->mu); note_locked(std::move(s)); }

std::string cu_name(CUresult r) {
  const char* s = nullptr;
  if (g->drv.getErrorName && g->drv.getErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

// Only "_Z" names: __cxa_demangle also reads type manglings, and would turn an extern "C"
// kernel named "f" into "float".
std::string demangle(const std::string& mangled) {
  if (mangled.compare(0, 2, "_Z") != 0) return mangled;
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : mangled;
  free(d);
  return out;
}

bool name_matches(const std::string& mangled) {
  {
    std::lock_guard<std::mutex> l(g->names_mu);
    auto it = g->name_match.find(mangled);
    if (it != g->name_match.end()) return it->second;
  }
  bool m = std::regex_search(demangle(mangled), g->cfg.re);  // a const regex is thread-safe
  std::lock_guard<std::mutex> l(g->names_mu);
  g->name_match.emplace(mangled, m);
  return m;
}

// ---- session.json ---------------------------------------------------------------------------
std::string session_json(bool at_exit) {
  std::string message = g->message;
  if (at_exit && g->status == "attached" && g->phase == Phase::Waiting)
    message = "the program exited after " + std::to_string(g->matched.load()) + " launches matching '" +
              g->cfg.pattern + "'; launch " + std::to_string(g->cfg.launch) + " never came";
  if (at_exit && g->status == "attached" && g->phase == Phase::Recording && g->cfg.window())
    message = "the program exited inside the window, after " + std::to_string(g->window_recorded) + " of its launches (" +
              (g->cfg.through.empty() ? std::to_string(g->cfg.window_launches) + " wanted"
                                      : "none of them matching '" + g->cfg.through + "'") +
              "); nothing was written";
  Json j;
  j.obj().key("version").num(1).key("status").str(g->status).key("message").str(message);
  j.key("pid").num(static_cast<long>(getpid())).key("launches_seen").num(g->launches_seen);
  j.key("matched").num(g->matched.load()).key("kernels").arr();
  for (const KernelInfo* k : g->kernels) j.obj().key("name").str(k->demangled).key("launches").num(k->launches).end();
  j.end();
  if (g->status == "refused") {
    j.key("refused").obj().key("total").num(g->refused_total).key("max_bytes").num(g->cfg.max_bytes);
    j.key("buffers").arr();
    for (const auto& b : g->refused_buffers) j.obj().key("base").hex(b.first).key("size").num(b.second).end();
    j.end().end();
  }
  j.key("notes").arr();
  for (const std::string& n : g->notes) j.str(n);
  if (uint64_t n = g->in_graph_capture.load())
    j.str(std::to_string(n) + " matching launches were made during CUDA stream capture and not counted "
          "(launches replayed from a CUDA graph are not seen)");
  if (g->kernels_unlisted) j.str(std::to_string(g->kernels_unlisted) + " more kernels were seen and not listed");
  if (g->notes_dropped) j.str(std::to_string(g->notes_dropped) + " more notes were dropped");
  j.end().end();
  return j.text() + "\n";
}

void write_session(bool durable, bool at_exit = false) {
  std::lock_guard<std::mutex> io(g->io_mu);
  std::string text;
  {
    std::lock_guard<std::mutex> l(g->mu);
    text = session_json(at_exit);
  }
  std::string err = write_file(g->cfg.out + "/session.json", text.data(), text.size(), durable);
  static std::atomic<bool> told{false};  // one line on the program's stderr, not one per write
  if (!err.empty() && !told.exchange(true)) fprintf(stderr, "repro capture: %s\n", err.c_str());
}

void set_status(const char* status, std::string message) {
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->status = status;
    g->message = std::move(message);
  }
  write_session(true);
}

// ---- module cubins --------------------------------------------------------------------------
// Keeps a cubin only when it can hold a matching kernel, so the 1 GiB cap is rarely reached.
void on_module_loaded(const CUpti_ResourceData* rd) {
  auto* m = static_cast<const CUpti_ModuleResourceData*>(rd->resourceDescriptor);
  if (!m || !m->pCubin || m->cubinSize == 0) return;
  bool holds = false;
  bool parsed = for_each_function(m->pCubin, m->cubinSize, [&](const char* s, size_t n) {
    return holds = name_matches(std::string(s, n));
  });
  // A window records launches of any kernel: then every module is kept (under the same cap).
  if (!g->cfg.window() && (parsed ? !holds : m->cubinSize >= kUnparsedCubinMax)) return;
  if (g->cfg.window() && !parsed && m->cubinSize >= kUnparsedCubinMax) return;
  std::lock_guard<std::mutex> l(g->mu);
  for (const auto& c : g->cubins)  // the same module loaded in another context
    if (c->size() == m->cubinSize && memcmp(c->data(), m->pCubin, m->cubinSize) == 0) return;
  g->cubins.push_back(std::make_shared<const std::string>(m->pCubin, m->cubinSize));
  g->cubin_bytes += m->cubinSize;
  while (g->cubin_bytes > kCubinCap && !g->cubins.empty()) {
    g->cubin_bytes -= g->cubins.front()->size();
    note_locked("dropped a kept cubin of " + std::to_string(g->cubins.front()->size()) +
                " bytes: kept cubins are capped at 1 GiB");
    g->cubins.pop_front();
  }
}

// The most recently loaded kept cubin whose symbol table holds `mangled`.
std::shared_ptr<const std::string> find_module(const std::string& mangled) {
  std::deque<std::shared_ptr<const std::string>> cubins;
  {
    std::lock_guard<std::mutex> l(g->mu);
    cubins = g->cubins;
  }
  for (auto it = cubins.rbegin(); it != cubins.rend(); ++it) {
    const std::string& c = **it;
    bool found = false;
    bool parsed = for_each_function(c.data(), c.size(), [&](const char* s, size_t n) {
      return found = n == mangled.size() && memcmp(s, mangled.data(), n) == 0;
    });
    if (!parsed) found = memmem(c.data(), c.size(), mangled.c_str(), mangled.size() + 1) != nullptr;
    if (found) return *it;
  }
  return nullptr;
}

// ---- tensor-map encodes ---------------------------------------------------------------------
template <class P>
bool fill_common(Encode& e, const P* p) {
  if (p->tensorRank < 1 || p->tensorRank > 5 || !p->globalDim || !p->elementStrides) return false;
  e.data_type = p->tensorDataType;
  e.rank = p->tensorRank;
  e.address = reinterpret_cast<uint64_t>(p->globalAddress);
  e.dims.assign(p->globalDim, p->globalDim + e.rank);
  if (p->globalStrides) e.strides.assign(p->globalStrides, p->globalStrides + e.rank - 1);
  e.element_strides.assign(p->elementStrides, p->elementStrides + e.rank);
  e.interleave = p->interleave;
  e.swizzle = p->swizzle;
  e.l2 = p->l2Promotion;
  e.oob = p->oobFill;
  return true;
}

std::atomic<uint64_t> encodes_traced{0}, encodes_wrapped{0};  // for the notes of a capture

// Remembers one successful encode: its output bytes with its arguments. `params` is the CUPTI
// parameter struct of `cbid`, from a callback or built by an entry-point wrapper below.
void remember_encode(CUpti_CallbackId cbid, const void* params) {
  Encode e;
  const CUtensorMap* map = nullptr;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled) {
    auto* p = static_cast<const cuTensorMapEncodeTiled_params*>(params);
    if (!fill_common(e, p) || !p->boxDim) return;
    e.box.assign(p->boxDim, p->boxDim + e.rank);
    map = p->tensorMap;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col) {
    auto* p = static_cast<const cuTensorMapEncodeIm2col_params*>(params);
    if (!fill_common(e, p) || e.rank < 3 || !p->pixelBoxLowerCorner || !p->pixelBoxUpperCorner) return;
    e.kind = "im2col";
    e.lower.assign(p->pixelBoxLowerCorner, p->pixelBoxLowerCorner + e.rank - 2);
    e.upper.assign(p->pixelBoxUpperCorner, p->pixelBoxUpperCorner + e.rank - 2);
    e.channels = p->channelsPerPixel;
    e.pixels = p->pixelsPerColumn;
    map = p->tensorMap;
  } else {
    auto* p = static_cast<const cuTensorMapEncodeIm2colWide_params*>(params);
    if (!fill_common(e, p)) return;
    e.kind = "im2col_wide";
    e.lower_w = p->pixelBoxLowerCornerWidth;
    e.upper_w = p->pixelBoxUpperCornerWidth;
    e.mode = p->mode;
    e.channels = p->channelsPerPixel;
    e.pixels = p->pixelsPerColumn;
    map = p->tensorMap;
  }
  if (!map) return;
  std::string key(reinterpret_cast<const char*>(map), sizeof(CUtensorMap));
  std::lock_guard<std::mutex> l(g->encodes_mu);
  e.seq = ++g->encode_seq;
  g->encode_order.emplace_back(key, e.seq);
  g->encodes[key] = std::move(e);
  while (g->encode_order.size() > kEncodeCap) {  // forget encodes older than the last 65536
    auto it = g->encodes.find(g->encode_order.front().first);
    if (it != g->encodes.end() && it->second.seq == g->encode_order.front().second) g->encodes.erase(it);
    g->encode_order.pop_front();
  }
}

// API_EXIT of a traced encode.
void on_encode(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue ||
      *static_cast<const CUresult*>(cb->functionReturnValue) != CUDA_SUCCESS)
    return;
  ++encodes_traced;
  remember_encode(cbid, cb->functionParams);
}

// ---- encoders reached through entry points ----------------------------------------------------
// A program that links no libcuda gets the encoder from cudaGetDriverEntryPoint[ByVersion] (as
// CUTLASS and our capture_app do) or cuGetProcAddress, and CUPTI does not trace calls made
// through that pointer. So at the exit of those lookups the returned pointer is swapped for a
// wrapper that calls the driver's function and remembers a successful encode. A call CUPTI does
// trace as well is remembered twice under the same key, which changes nothing.
struct EncoderEntry {
  const char* symbol;
  CUpti_CallbackId cbid;
  void* wrapper;
  std::atomic<void*> real{nullptr};
};

CUresult CUDAAPI wrapped_tiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                               const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                               CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
CUresult CUDAAPI wrapped_im2col(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const int*, const int*, cuuint32_t, cuuint32_t, const cuuint32_t*,
                                CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                CUtensorMapFloatOOBfill);
CUresult CUDAAPI wrapped_im2col_wide(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, int, int, cuuint32_t, cuuint32_t, const cuuint32_t*,
                                     CUtensorMapInterleave, CUtensorMapIm2ColWideMode, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncoderEntry encoders[] = {
    {"cuTensorMapEncodeTiled", CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled, reinterpret_cast<void*>(&wrapped_tiled)},
    {"cuTensorMapEncodeIm2col", CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col,
     reinterpret_cast<void*>(&wrapped_im2col)},
    {"cuTensorMapEncodeIm2colWide", CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2colWide,
     reinterpret_cast<void*>(&wrapped_im2col_wide)},
};

template <class Fn>
Fn real_encoder(size_t i) { return reinterpret_cast<Fn>(encoders[i].real.load()); }

void remember_wrapped(CUresult r, CUpti_CallbackId cbid, const void* params) {
  if (r != CUDA_SUCCESS || !g) return;
  ++encodes_wrapped;
  try {
    remember_encode(cbid, params);
  } catch (...) {  // out of memory: this encode goes unrecognized, the program goes on
  }
}

CUresult CUDAAPI wrapped_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                               const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                               const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                               CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  auto real = real_encoder<decltype(&wrapped_tiled)>(0);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(map, type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob);
  cuTensorMapEncodeTiled_params p{map, type, rank, address, dims, strides, box, element_strides,
                                  interleave, swizzle, l2, oob};
  remember_wrapped(r, encoders[0].cbid, &p);
  return r;
}

CUresult CUDAAPI wrapped_im2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                const cuuint64_t* dims, const cuuint64_t* strides, const int* lower, const int* upper,
                                cuuint32_t channels, cuuint32_t pixels, const cuuint32_t* element_strides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  auto real = real_encoder<decltype(&wrapped_im2col)>(1);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(map, type, rank, address, dims, strides, lower, upper, channels, pixels, element_strides,
                    interleave, swizzle, l2, oob);
  cuTensorMapEncodeIm2col_params p{map,   type,     rank,     address,         dims,       strides, lower, upper,
                                   channels, pixels, element_strides, interleave, swizzle, l2,    oob};
  remember_wrapped(r, encoders[1].cbid, &p);
  return r;
}

CUresult CUDAAPI wrapped_im2col_wide(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                     const cuuint64_t* dims, const cuuint64_t* strides, int lower_w, int upper_w,
                                     cuuint32_t channels, cuuint32_t pixels, const cuuint32_t* element_strides,
                                     CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode,
                                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                     CUtensorMapFloatOOBfill oob) {
  auto real = real_encoder<decltype(&wrapped_im2col_wide)>(2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(map, type, rank, address, dims, strides, lower_w, upper_w, channels, pixels, element_strides,
                    interleave, mode, swizzle, l2, oob);
  cuTensorMapEncodeIm2colWide_params p{map,      type,   rank,           address,    dims, strides, lower_w, upper_w,
                                       channels, pixels, element_strides, interleave, mode, swizzle, l2,      oob};
  remember_wrapped(r, encoders[2].cbid, &p);
  return r;
}

// API_EXIT of cuGetProcAddress[_v2] or cudaGetDriverEntryPoint[ByVersion]: `*pfn` becomes the
// wrapper when `symbol` names an encoder. Every encoder has a single ABI version so far; should a
// second one appear, a lookup of it keeps the driver's pointer (the wrapper's signature would lie).
void on_entry_point(const char* symbol, void** pfn, bool succeeded) {
  if (!succeeded || !symbol || !pfn || !*pfn) return;
  for (EncoderEntry& e : encoders) {
    if (strcmp(symbol, e.symbol) != 0 || *pfn == e.wrapper) continue;
    void* expected = nullptr;
    if (!e.real.compare_exchange_strong(expected, *pfn) && expected != *pfn) return;
    *pfn = e.wrapper;
    return;
  }
}

void on_driver_lookup(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue) return;
  bool ok = *static_cast<const CUresult*>(cb->functionReturnValue) == CUDA_SUCCESS;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2) {
    auto* p = static_cast<const cuGetProcAddress_v2_params*>(cb->functionParams);
    ok = ok && (!p->symbolStatus || *p->symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS);
    on_entry_point(p->symbol, p->pfn, ok);
  } else {
    auto* p = static_cast<const cuGetProcAddress_params*>(cb->functionParams);
    on_entry_point(p->symbol, p->pfn, ok);
  }
}

void on_runtime_lookup(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue) return;
  bool ok = *static_cast<const cudaError_t*>(cb->functionReturnValue) == cudaSuccess;
  if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050 ||
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_ptsz_v12050) {
    auto* p = static_cast<const cudaGetDriverEntryPointByVersion_v12050_params*>(cb->functionParams);
    ok = ok && (!p->driverStatus || *p->driverStatus == cudaDriverEntryPointSuccess);
    on_entry_point(p->symbol, p->funcPtr, ok);
  } else {
    auto* p = static_cast<const cudaGetDriverEntryPoint_v11030_params*>(cb->functionParams);
    ok = ok && (!p->driverStatus || *p->driverStatus == cudaDriverEntryPointSuccess);
    on_entry_point(p->symbol, p->funcPtr, ok);
  }
}

bool find_encode(const uint8_t* bytes, Encode& out) {
  std::lock_guard<std::mutex> l(g->encodes_mu);
  auto it = g->encodes.find(std::string(reinterpret_cast<const char*>(bytes), sizeof(CUtensorMap)));
  if (it == g->encodes.end()) return false;
  out = it->second;
  return true;
}

// ---- launches -------------------------------------------------------------------------------
struct Launch {
  const char* api = "";
  CUfunction f = nullptr;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, smem = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  const CUlaunchAttribute* attrs = nullptr;
  unsigned nattrs = 0;
  bool ptsz = false;
};

// The three parameter shapes: cuLaunchKernel (with `extra`), cuLaunchCooperativeKernel (without),
// cuLaunchKernelEx (a CUlaunchConfig). Each _ptsz variant has the same layout as its base.
template <class P>
bool decode_classic(Launch& L, const void* raw, const char* api, bool ptsz) {
  auto* p = static_cast<const P*>(raw);
  L.api = api, L.ptsz = ptsz, L.f = p->f;
  L.grid[0] = p->gridDimX, L.grid[1] = p->gridDimY, L.grid[2] = p->gridDimZ;
  L.block[0] = p->blockDimX, L.block[1] = p->blockDimY, L.block[2] = p->blockDimZ;
  L.smem = p->sharedMemBytes, L.stream = p->hStream, L.params = p->kernelParams;
  if constexpr (std::is_same<P, cuLaunchKernel_params>::value || std::is_same<P, cuLaunchKernel_ptsz_params>::value)
    L.extra = p->extra;
  return true;
}

template <class P>
bool decode_ex(Launch& L, const void* raw, const char* api, bool ptsz) {
  auto* p = static_cast<const P*>(raw);
  L.api = api, L.ptsz = ptsz, L.f = p->f, L.params = p->kernelParams, L.extra = p->extra;
  if (const CUlaunchConfig* c = p->config) {
    L.grid[0] = c->gridDimX, L.grid[1] = c->gridDimY, L.grid[2] = c->gridDimZ;
    L.block[0] = c->blockDimX, L.block[1] = c->blockDimY, L.block[2] = c->blockDimZ;
    L.smem = c->sharedMemBytes, L.stream = c->hStream;
    L.attrs = c->attrs, L.nattrs = c->attrs ? c->numAttrs : 0;
  }
  return true;
}

bool decode_launch(CUpti_CallbackId cbid, const void* p, Launch& L) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return decode_classic<cuLaunchKernel_params>(L, p, "cuLaunchKernel", false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return decode_classic<cuLaunchKernel_ptsz_params>(L, p, "cuLaunchKernel_ptsz", true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return decode_classic<cuLaunchCooperativeKernel_params>(L, p, "cuLaunchCooperativeKernel", false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return decode_classic<cuLaunchCooperativeKernel_ptsz_params>(L, p, "cuLaunchCooperativeKernel_ptsz", true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return decode_ex<cuLaunchKernelEx_params>(L, p, "cuLaunchKernelEx", false);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return decode_ex<cuLaunchKernelEx_ptsz_params>(L, p, "cuLaunchKernelEx_ptsz", true);
    default:
      return false;
  }
}

// A _ptsz entry point's null stream is the per-thread stream, not the legacy one.
CUstream sync_stream(const Launch& L) { return !L.stream && L.ptsz ? CU_STREAM_PER_THREAD : L.stream; }

// Synchronizing a capturing stream would invalidate the program's graph capture; an error here
// (the legacy stream during a global-mode capture elsewhere) is as unsafe.
bool in_stream_capture(const Launch& L) {
  if (!g->drv.streamIsCapturing) return false;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return g->drv.streamIsCapturing(sync_stream(L), &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Called with g->mu held. -1 when the driver cannot tell.
int device_of(const CUpti_CallbackData* cb) {
  auto it = g->ctx_device.find(cb->contextUid);
  if (it != g->ctx_device.end()) return it->second;
  CUdevice d = -1;
  CUresult r = g->drv.ctxGetDeviceOf && cb->context ? g->drv.ctxGetDeviceOf(&d, cb->context) : g->drv.ctxGetDevice(&d);
  if (r != CUDA_SUCCESS) return -1;
  g->ctx_device.emplace(cb->contextUid, d);
  return d;
}

struct Gate {
  KernelInfo* k = nullptr;
  bool matches = false, pending = false, listed_now = false, in_window = false;
};

// The per-launch fast path: one lock, one hash lookup, counters. The first launch of a function
// also names it (outside the lock: demangling and the regex are the slow part).
Gate account(const Launch& L, const CUpti_CallbackData* cb) {
  std::unique_lock<std::mutex> lk(g->mu);
  auto it = g->by_func.find(L.f);
  if (it == g->by_func.end()) {
    lk.unlock();
    const char* raw = cb->symbolName;
    if ((!raw || !*raw) && g->drv.funcGetName && g->drv.funcGetName(&raw, L.f) != CUDA_SUCCESS) raw = nullptr;
    std::string mangled = raw && *raw ? raw : "<unnamed>";
    bool m = name_matches(mangled);
    std::string dem = demangle(mangled);
    lk.lock();
    auto& slot = g->by_name[mangled];
    if (!slot) slot.reset(new KernelInfo{mangled, dem, m, false, 0});
    it = g->by_func.emplace(L.f, slot.get()).first;
  }
  Gate out;
  out.k = it->second;
  int dev = g->cfg.device >= 0 ? device_of(cb) : -1;  // a second lookup only when filtering
  if (g->cfg.device >= 0 && dev != g->cfg.device) {
    if (out.k->matches && g->other_devices.insert(dev).second)
      note_locked("a kernel matching the regex was launched on device " + std::to_string(dev) +
                  ", not REPRO_CAPTURE_DEVICE=" + std::to_string(g->cfg.device) + "; not counted");
    return out;
  }
  ++g->launches_seen;
  ++out.k->launches;
  if (!out.k->listed) {
    out.k->listed = true;
    if (g->kernels.size() < kKernelListCap) g->kernels.push_back(out.k), out.listed_now = true;
    else ++g->kernels_unlisted;
  }
  out.matches = out.k->matches;
  out.pending = g->phase == Phase::Waiting;
  out.in_window = g->in_window.load();
  return out;
}

// ---- the recorded launch --------------------------------------------------------------------
struct Slot { size_t offset, size; };
struct Buffer {
  uint64_t base = 0, size = 0, changed_bytes = 0;
  bool managed = false, have_before = false, after_written = false;
  bool copied = false;  // its before copy was attempted (a window copies each allocation once)
  std::vector<uint8_t> before;
  std::vector<uint8_t> current;     // a window's: the contents after the last launch that reached it
  uint64_t first_launch = 0;        // a window's: the launch (from 1) that first pointed into it
  std::vector<uint64_t> written_by;  // a window's: the launches after which it had changed
  std::string error;
};
struct Pointer { size_t param, offset; uint64_t value; size_t buffer; uint64_t byte_offset; };
struct TensorMap { size_t param, offset; Encode enc; long buffer; uint64_t byte_offset; };

struct Recording {
  CUpti_CallbackId cbid = 0;
  Launch L;
  CUfunction func = nullptr;  // a CUfunction even when the program launched a CUkernel
  uint64_t number = 0;
  uint64_t index = 0;  // its place in a window, from 1 (0: a launch recorded alone)
  int device = -1, cc[2] = {0, 0};
  std::string mangled, demangled, device_name, launch_result, launch_error;
  std::vector<std::string> notes;  // what went wrong on the way, for the reader of capture.json
  std::vector<Slot> layout;
  std::vector<uint8_t> params;
  std::vector<TensorMap> tmaps;
  std::vector<Pointer> ptrs;
  // The allocations the parameters point into: the launch's own, or its window's, shared by
  // every launch of it (a pointer's `buffer` indexes this list either way).
  std::shared_ptr<std::vector<Buffer>> memory = std::make_shared<std::vector<Buffer>>();
  std::vector<Buffer>& bufs = *memory;
  std::vector<std::pair<const char*, int>> fattrs;
  std::shared_ptr<const std::string> module;  // a window's launch: its cubin, found at API_EXIT

  Recording() = default;
  explicit Recording(std::shared_ptr<std::vector<Buffer>> shared) : memory(std::move(shared)), bufs(*memory) {}
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
};

thread_local Recording* tl_rec = nullptr;  // set from API_ENTER to API_EXIT of the recorded launch

void add_note(Recording& r, const std::string& s) { r.notes.push_back(s); }

void resolve_function(Recording& r) {
  int v = 0;
  CUfunction fn = nullptr;
  r.func = r.L.f;
  if (g->drv.funcGetAttribute && g->drv.funcGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, r.L.f) == CUDA_SUCCESS) return;
  if (g->drv.kernelGetFunction &&
      g->drv.kernelGetFunction(&fn, reinterpret_cast<CUkernel>(r.L.f)) == CUDA_SUCCESS && fn)
    r.func = fn;
}

void collect_layout(Recording& r) {
  for (size_t i = 0; i < 4096; ++i) {
    size_t off = 0, size = 0;
    CUresult e = g->drv.funcGetParamInfo(r.func, i, &off, &size);
    if (e != CUDA_SUCCESS && g->drv.kernelGetParamInfo)
      e = g->drv.kernelGetParamInfo(reinterpret_cast<CUkernel>(r.L.f), i, &off, &size);
    if (e != CUDA_SUCCESS) break;
    r.layout.push_back({off, size});
  }
}

// Packs the parameter values at their device-side offsets, from kernelParams or `extra`.
void collect_params(Recording& r) {
  size_t total = 0;
  for (const Slot& s : r.layout) total = std::max(total, s.offset + s.size);
  if (r.L.params) {
    r.params.assign(total, 0);
    for (size_t i = 0; i < r.layout.size(); ++i)
      if (r.L.params[i]) memcpy(r.params.data() + r.layout[i].offset, r.L.params[i], r.layout[i].size);
    return;
  }
  const void* buf = nullptr;
  size_t size = 0;
  for (size_t i = 0; r.L.extra && r.L.extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (r.L.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = r.L.extra[i + 1];
    else if (r.L.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && r.L.extra[i + 1]) size = *static_cast<size_t*>(r.L.extra[i + 1]);
  }
  r.params.assign(std::max(total, buf ? size : 0), 0);
  if (buf) memcpy(r.params.data(), buf, size);
  if (!buf && total) add_note(r, "the launch passed no parameter values; params.bin is zeros");
  else if (size < total) add_note(r, "the extra buffer is shorter than the parameter layout; zero-padded");
}

bool allocation_of(uint64_t v, uint64_t& base, uint64_t& size) {
  CUdeviceptr b = 0;
  size_t s = 0;
  if (v < 0x10000 || g->drv.memGetAddressRange(&b, &s, v) != CUDA_SUCCESS || s == 0) return false;
  base = b, size = s;
  return true;
}

size_t add_buffer(Recording& r, uint64_t base, uint64_t size) {
  for (size_t i = 0; i < r.bufs.size(); ++i)
    if (r.bufs[i].base == base) { r.bufs[i].size = std::max(r.bufs[i].size, size); return i; }
  Buffer b;
  b.base = base, b.size = size;
  uint64_t managed = 0;  // the driver writes a boolean of unspecified width: start from zero
  if (g->drv.pointerGetAttribute &&
      g->drv.pointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, base) == CUDA_SUCCESS)
    b.managed = managed != 0;
  r.bufs.push_back(std::move(b));
  return r.bufs.size() - 1;
}

// A CUtensorMap is 64-byte aligned, as a parameter or inside a by-value struct, so it starts at
// a multiple of 64 bytes from its parameter's start. Not from offset 0 of the layout:
// cuFuncGetParamInfo's offsets are those of the parameter bank, where sm_90's first parameter
// may sit at 112 (seen on the H200 for a kernel whose first parameter is a map).
void find_tensor_maps(Recording& r) {
  for (size_t i = 0; i < r.layout.size(); ++i) {
    const Slot& s = r.layout[i];
    if (s.size < sizeof(CUtensorMap)) continue;
    size_t end = std::min(s.offset + s.size, r.params.size());
    for (size_t o = s.offset; o + sizeof(CUtensorMap) <= end; o += 64) {
      TensorMap t{i, o, Encode(), -1, 0};
      if (!find_encode(r.params.data() + o, t.enc)) continue;
      uint64_t base = 0, size = 0;
      if (allocation_of(t.enc.address, base, size)) {
        t.buffer = static_cast<long>(add_buffer(r, base, size));
        t.byte_offset = t.enc.address - base;
      }
      r.tmaps.push_back(std::move(t));
      o += sizeof(CUtensorMap) - 64;
    }
    // A parameter of exactly a CUtensorMap's size and alignment that matched no encode is most
    // likely a map encoded before we attached, or through a path we do not see: say so, with
    // what was seen, since the spec writer then falls back to replay.
    bool matched = std::any_of(r.tmaps.begin(), r.tmaps.end(), [&](const TensorMap& t) { return t.param == i; });
    if (!matched && s.size == sizeof(CUtensorMap))
      add_note(r, "parameter " + std::to_string(i) + " is CUtensorMap-sized and matches none of the " +
                      std::to_string(encodes_traced.load()) + " traced and " + std::to_string(encodes_wrapped.load()) +
                      " entry-point tensor-map encodes seen");
  }
}

bool in_tensor_map(const Recording& r, size_t o) {
  for (const TensorMap& t : r.tmaps)
    if (o + 8 > t.offset && o < t.offset + sizeof(CUtensorMap)) return true;
  return false;
}

void find_pointers(Recording& r) {
  for (size_t i = 0; i < r.layout.size(); ++i) {
    const Slot& s = r.layout[i];
    for (size_t k = 0; k + 8 <= s.size && s.offset + k + 8 <= r.params.size(); k += 8) {
      size_t o = s.offset + k;
      uint64_t v = 0, base = 0, size = 0;
      memcpy(&v, r.params.data() + o, 8);
      if (in_tensor_map(r, o) || !allocation_of(v, base, size)) continue;
      r.ptrs.push_back({i, o, v, add_buffer(r, base, size), v - base});
    }
  }
}

// Reads each buffer back; `into` selects before (at entry) or a scratch copy (at exit).
bool copy_buffer(Buffer& b, std::vector<uint8_t>& into) {
  try {
    into.resize(b.size);
  } catch (const std::bad_alloc&) {
    b.error = "out of host memory for " + std::to_string(b.size) + " bytes";
    return false;
  }
  CUresult e = g->drv.memcpyDtoH(into.data(), b.base, b.size);
  if (e != CUDA_SUCCESS) { b.error = "cuMemcpyDtoH: " + cu_name(e); into.clear(); return false; }
  return true;
}

std::string buffer_path(size_t i, const char* when) {
  return "buffers/b" + std::to_string(i) + "." + when + ".bin";
}

void save(Recording& r, const std::string& rel, const void* data, size_t n) {
  std::string err = write_file(g->cfg.out + "/" + rel, data, n, false);
  if (!err.empty()) add_note(r, err);
}

void copy_before(Recording& r) {
  CUresult e = g->drv.streamSynchronize(sync_stream(r.L));
  if (e != CUDA_SUCCESS) add_note(r, "cuStreamSynchronize before the launch: " + cu_name(e));
  std::string dir = g->cfg.out + "/buffers";
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) add_note(r, "mkdir " + dir + ": " + strerror(errno));
  for (size_t i = 0; i < r.bufs.size(); ++i) {
    Buffer& b = r.bufs[i];
    if (b.copied) continue;  // a window's allocation an earlier launch already pointed into
    b.copied = true;
    b.first_launch = r.index;
    b.have_before = copy_buffer(b, b.before);
    if (b.have_before) save(r, buffer_path(i, "before"), b.before.data(), b.size);
  }
}

void query_attributes(Recording& r) {
  static const std::pair<CUfunction_attribute, const char*> kAttrs[] = {
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "max_dynamic_shared_size_bytes"},
      {CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, "preferred_shared_memory_carveout"},
      {CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, "non_portable_cluster_size_allowed"},
      {CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "cluster_scheduling_policy_preference"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, "required_cluster_width"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, "required_cluster_height"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, "required_cluster_depth"},
      {CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, "cluster_size_must_be_set"},
      {CU_FUNC_ATTRIBUTE_NUM_REGS, "num_regs"},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared_size_bytes"},
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "const_size_bytes"},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local_size_bytes"},
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max_threads_per_block"},
      {CU_FUNC_ATTRIBUTE_BINARY_VERSION, "binary_version"},
      {CU_FUNC_ATTRIBUTE_PTX_VERSION, "ptx_version"}};
  for (const auto& a : kAttrs) {
    int v = 0;
    if (g->drv.funcGetAttribute && g->drv.funcGetAttribute(&v, a.first, r.func) == CUDA_SUCCESS)
      r.fattrs.emplace_back(a.second, v);
  }
  char name[256] = {0};
  if (r.device >= 0 && g->drv.deviceGetName && g->drv.deviceGetName(name, sizeof name - 1, r.device) == CUDA_SUCCESS)
    r.device_name = name;
  if (r.device >= 0 && g->drv.deviceGetAttribute) {
    g->drv.deviceGetAttribute(&r.cc[0], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r.device);
    g->drv.deviceGetAttribute(&r.cc[1], CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, r.device);
  }
}

// What a launch passes, read from its parameters: the function, its parameter layout and bytes,
// the tensor maps and the pointers among them, and the allocations they point into. Returns the
// bytes those allocations hold (what --max-bytes bounds).
uint64_t read_launch(Recording& r) {
  resolve_function(r);
  collect_layout(r);
  collect_params(r);
  find_tensor_maps(r);
  find_pointers(r);
  uint64_t total = 0;
  for (const Buffer& b : r.bufs) total += b.size;
  return total;
}

void refuse(const Recording& r, uint64_t total) {
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->status = "refused";
    g->message = "launch " + std::to_string(r.number) + " of " + r.demangled + " points into " +
                 std::to_string(r.bufs.size()) + " allocations of " + std::to_string(total) +
                 " bytes in all, over REPRO_CAPTURE_MAX_BYTES=" + std::to_string(g->cfg.max_bytes);
    g->refused_total = total;
    for (const Buffer& b : r.bufs) g->refused_buffers.emplace_back(b.base, b.size);
    g->phase = Phase::Done;
  }
  write_session(true);
}

// API_ENTER of launch N: everything that must be read before the kernel runs.
void begin_recording(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, const Launch& L, const KernelInfo* k, uint64_t n) {
  std::unique_ptr<Recording> r(new Recording);
  r->cbid = cbid, r->L = L, r->number = n;
  r->mangled = k->mangled, r->demangled = k->demangled;
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->phase = Phase::Recording;
    r->device = device_of(cb);
  }
  const uint64_t total = read_launch(*r);
  if (total > g->cfg.max_bytes) return refuse(*r, total);
  save(*r, "params.bin", r->params.data(), r->params.size());
  copy_before(*r);
  query_attributes(*r);
  tl_rec = r.release();
}

const char* launch_attribute_name(unsigned id) {
  static const char* const kNames[] = {
      "IGNORE", "ACCESS_POLICY_WINDOW", "COOPERATIVE", "SYNCHRONIZATION_POLICY", "CLUSTER_DIMENSION",
      "CLUSTER_SCHEDULING_POLICY_PREFERENCE", "PROGRAMMATIC_STREAM_SERIALIZATION", "PROGRAMMATIC_EVENT",
      "PRIORITY", "MEM_SYNC_DOMAIN_MAP", "MEM_SYNC_DOMAIN", "PREFERRED_CLUSTER_DIMENSION",
      "LAUNCH_COMPLETION_EVENT", "DEVICE_UPDATABLE_KERNEL_NODE", "PREFERRED_SHARED_MEMORY_CARVEOUT", nullptr,
      "NVLINK_UTIL_CENTRIC_SCHEDULING"};
  return id < sizeof kNames / sizeof kNames[0] ? kNames[id] : nullptr;
}

// Each attribute's value as numbers (events and graph nodes as their handle values: kept for the
// record, not replayable); an id this file does not know: the union's 16 32-bit words.
void write_launch_attribute(Json& j, const CUlaunchAttribute& a) {
  const CUlaunchAttributeValue& v = a.value;
  unsigned id = static_cast<unsigned>(a.id);
  const char* name = launch_attribute_name(id);
  j.obj().key("id").num(id).key("name");
  name ? j.str(std::string("CU_LAUNCH_ATTRIBUTE_") + name) : j.null();
  j.key("value").arr();
  switch (id) {
    case 1:
      j.num(reinterpret_cast<uint64_t>(v.accessPolicyWindow.base_ptr)).num(uint64_t(v.accessPolicyWindow.num_bytes));
      j.real(v.accessPolicyWindow.hitRatio).num(int(v.accessPolicyWindow.hitProp)).num(int(v.accessPolicyWindow.missProp));
      break;
    case 4: j.num(v.clusterDim.x).num(v.clusterDim.y).num(v.clusterDim.z); break;
    case 11: j.num(v.preferredClusterDim.x).num(v.preferredClusterDim.y).num(v.preferredClusterDim.z); break;
    case 7:
      j.num(reinterpret_cast<uint64_t>(v.programmaticEvent.event)).num(v.programmaticEvent.flags);
      j.num(v.programmaticEvent.triggerAtBlockStart);
      break;
    case 9: j.num(int(v.memSyncDomainMap.default_)).num(int(v.memSyncDomainMap.remote)); break;
    case 12: j.num(reinterpret_cast<uint64_t>(v.launchCompletionEvent.event)).num(v.launchCompletionEvent.flags); break;
    case 13:
      j.num(v.deviceUpdatableKernelNode.deviceUpdatable).num(reinterpret_cast<uint64_t>(v.deviceUpdatableKernelNode.devNode));
      break;
    case 2: case 3: case 5: case 6: case 8: case 10: case 14: case 16: {
      int32_t x = 0;  // one int or enum
      memcpy(&x, &v, sizeof x);
      j.num(x);
      break;
    }
    default: {
      uint32_t w[sizeof(CUlaunchAttributeValue) / 4];
      memcpy(w, &v, sizeof w);
      for (uint32_t x : w) j.num(x);
    }
  }
  j.end().end();
}

void write_tensor_map(Json& j, const TensorMap& t) {
  const Encode& e = t.enc;
  j.obj().key("param").num(t.param).key("offset").num(t.offset).key("kind").str(e.kind);
  j.key("data_type").num(e.data_type).key("rank").num(e.rank).key("global_address").hex(e.address);
  j.key("buffer");
  t.buffer >= 0 ? j.num(t.buffer) : j.null();
  j.key("byte_offset").num(t.byte_offset).key("dims").nums(e.dims).key("strides").nums(e.strides);
  j.key("box").nums(e.box).key("element_strides").nums(e.element_strides);
  j.key("interleave").num(e.interleave).key("swizzle").num(e.swizzle);
  j.key("l2_promotion").num(e.l2).key("oob_fill").num(e.oob);
  if (strcmp(e.kind, "im2col") == 0)
    j.key("pixel_box_lower_corner").nums(e.lower).key("pixel_box_upper_corner").nums(e.upper);
  if (strcmp(e.kind, "im2col_wide") == 0)
    j.key("pixel_box_lower_corner_width").num(e.lower_w).key("pixel_box_upper_corner_width").num(e.upper_w).key("mode").num(e.mode);
  if (strcmp(e.kind, "tiled") != 0) j.key("channels_per_pixel").num(e.channels).key("pixels_per_column").num(e.pixels);
  j.end();
}

// One launch record: capture.json itself, or an entry of window.json's `launches` (whose
// buffers are the window's, listed once beside them: `buffers` is then false).
void launch_object(Json& j, const Recording& r, size_t module_size, const std::string& module_note,
                   const std::string& params_file, const std::string& module_file, bool buffers) {
  j.obj().key("version").num(1).key("kernel").obj().key("mangled").str(r.mangled).key("demangled").str(r.demangled).end();
  j.key("launch_number").num(r.number).key("api").str(r.L.api);
  j.key("device").obj().key("ordinal").num(r.device).key("name").str(r.device_name).key("cc").nums(r.cc).end();
  j.key("stream").hex(reinterpret_cast<uint64_t>(r.L.stream));
  j.key("grid").nums(r.L.grid).key("block").nums(r.L.block).key("smem").num(r.L.smem).key("cluster");
  const CUlaunchAttribute* cluster = nullptr;
  for (unsigned i = 0; i < r.L.nattrs; ++i)
    if (r.L.attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) cluster = &r.L.attrs[i];
  if (cluster) j.arr().num(cluster->value.clusterDim.x).num(cluster->value.clusterDim.y).num(cluster->value.clusterDim.z).end();
  else j.null();
  j.key("launch_attributes").arr();
  for (unsigned i = 0; i < r.L.nattrs; ++i) write_launch_attribute(j, r.L.attrs[i]);
  j.end().key("function_attributes").obj();
  for (const auto& a : r.fattrs) j.key(a.first).num(a.second);
  j.end().key("params").obj().key("file").str(params_file).key("size").num(r.params.size()).key("layout").arr();
  for (size_t i = 0; i < r.layout.size(); ++i)
    j.obj().key("index").num(i).key("offset").num(r.layout[i].offset).key("size").num(r.layout[i].size).end();
  j.end().end().key("pointers").arr();
  for (const Pointer& p : r.ptrs)
    j.obj().key("param").num(p.param).key("offset").num(p.offset).key("value").hex(p.value)
        .key("buffer").num(p.buffer).key("byte_offset").num(p.byte_offset).end();
  j.end().key("tensor_maps").arr();
  for (const TensorMap& t : r.tmaps) write_tensor_map(j, t);
  j.end().key("buffers").arr();
  for (size_t i = 0; buffers && i < r.bufs.size(); ++i) {
    const Buffer& b = r.bufs[i];
    j.obj().key("id").num(i).key("base").hex(b.base).key("size").num(b.size).key("managed").boolean(b.managed);
    j.key("before").str_or_null(b.have_before ? buffer_path(i, "before") : "");
    j.key("after").str_or_null(b.after_written ? buffer_path(i, "after") : "");
    j.key("changed_bytes").num(b.changed_bytes);
    if (!b.error.empty()) j.key("error").str(b.error);
    j.end();
  }
  j.end().key("module");
  if (module_size) j.obj().key("file").str(module_file).key("size").num(module_size).end();
  else j.null().key("module_note").str(module_note);
  j.key("launch_result").str(r.launch_result).key("launch_error").str_or_null(r.launch_error);
  j.key("notes").arr();
  for (const std::string& n : r.notes) j.str(n);
  j.end().end();
}

std::string capture_json(const Recording& r, size_t module_size, const std::string& module_note) {
  Json j;
  launch_object(j, r, module_size, module_note, "params.bin", "module.cubin", true);
  return j.text() + "\n";
}

void copy_after(Recording& r) {
  std::vector<uint8_t> after;
  for (size_t i = 0; i < r.bufs.size(); ++i) {
    Buffer& b = r.bufs[i];
    if (!b.have_before || !copy_buffer(b, after)) continue;
    if (memcmp(after.data(), b.before.data(), b.size) == 0) continue;
    for (uint64_t k = 0; k < b.size; ++k) b.changed_bytes += after[k] != b.before[k];
    save(r, buffer_path(i, "after"), after.data(), b.size);
    b.after_written = true;
  }
}

// API_EXIT of the recorded launch: the outputs, the module, then capture.json last.
// The capture is over: the session says so (`done`, what was recorded, or why its commit file
// could not be written), and with REPRO_CAPTURE_STOP the program ends here.
void finish_capture(const std::string& err, const std::string& recorded, const char* commit_file) {
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->phase = Phase::Done;
    if (err.empty()) {
      g->status = "captured";
      g->message = recorded;
    } else {
      g->message = std::string("writing ") + commit_file + " failed: " + err;
    }
  }
  write_session(true);
  if (g->cfg.stop) {
    fflush(nullptr);
    _exit(0);
  }
}

void finish_recording(const CUpti_CallbackData* cb) {
  std::unique_ptr<Recording> r(tl_rec);
  tl_rec = nullptr;
  CUresult res = cb->functionReturnValue ? *static_cast<const CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
  r->launch_result = res == CUDA_SUCCESS ? "CUDA_SUCCESS" : cu_name(res);
  CUresult e = g->drv.streamSynchronize(sync_stream(r->L));
  if (e != CUDA_SUCCESS) r->launch_error = cu_name(e) + " (cuStreamSynchronize after the launch)";
  copy_after(*r);
  size_t module_size = 0;
  std::string module_note;
  if (auto m = find_module(r->mangled)) {
    std::string err = write_file(g->cfg.out + "/module.cubin", m->data(), m->size(), false);
    if (err.empty()) module_size = m->size();
    else module_note = err;
  } else {
    module_note = "no loaded cubin holds " + r->mangled +
                  " (loaded before capture attached, or dropped over the 1 GiB cap)";
  }
  std::string text = capture_json(*r, module_size, module_note);
  std::string err = write_file(g->cfg.out + "/capture.json", text.data(), text.size(), true);
  finish_capture(err, "recorded launch " + std::to_string(r->number) + " of " + r->demangled, "capture.json");
}


// ---- a window of launches -------------------------------------------------------------------
// From launch N of the matching kernels, the launches that follow it on the same context, whatever
// kernel they run (an operator's kernels have different names, and a fill kernel between them
// matters for a bit-for-bit replay): each its own launch record, the allocations shared. Each
// allocation is copied before the first launch that points into it (no earlier launch of the
// window reached it, so that is its state before the operator) and, for the spec writer's
// inputs/intermediates/outputs, after every launch that points into it and once after the last.

// A memset or copy into an allocation the window already saw: its effect is in the copies, but a
// replay of the launches alone would not make it, so the capture lists it.
struct MemoryOperation {
  std::string api;
  size_t buffer;
  uint64_t address, after_launch;
};

struct Window {
  std::shared_ptr<std::vector<Buffer>> memory = std::make_shared<std::vector<Buffer>>();
  std::vector<std::unique_ptr<Recording>> launches;  // in the order their API_EXIT came
  uint64_t started = 0;                              // launches whose API_ENTER was recorded
  uint32_t context = 0;                              // contextUid of its first launch
  bool other_context_noted = false;
  bool through_seen = false;  // a launch after the first matched REPRO_CAPTURE_THROUGH
  std::vector<MemoryOperation> memory_ops;
};

// Called with window_mu held: the window is dropped, nothing is written.
void abandon_window(const char* status, const std::string& message) {
  delete g->window;
  g->window = nullptr;
  g->in_window = false;
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->status = status;
    g->message = message;
    g->phase = Phase::Done;
  }
  write_session(true);
}

// X(function, its destination field): the memsets and copies whose destination is a device
// address in their first argument. 2D/3D copies (a descriptor) are not decoded.
#define REPRO_MEMORY_OPERATIONS(X)                                                                                  \
  X(cuMemsetD8_v2, dstDevice) X(cuMemsetD16_v2, dstDevice) X(cuMemsetD32_v2, dstDevice)                             \
  X(cuMemsetD2D8_v2, dstDevice) X(cuMemsetD2D16_v2, dstDevice) X(cuMemsetD2D32_v2, dstDevice)                       \
  X(cuMemsetD8_v2_ptds, dstDevice) X(cuMemsetD16_v2_ptds, dstDevice) X(cuMemsetD32_v2_ptds, dstDevice)              \
  X(cuMemsetD2D8_v2_ptds, dstDevice) X(cuMemsetD2D16_v2_ptds, dstDevice) X(cuMemsetD2D32_v2_ptds, dstDevice)        \
  X(cuMemsetD8Async, dstDevice) X(cuMemsetD16Async, dstDevice) X(cuMemsetD32Async, dstDevice)                       \
  X(cuMemsetD2D8Async, dstDevice) X(cuMemsetD2D16Async, dstDevice) X(cuMemsetD2D32Async, dstDevice)                 \
  X(cuMemsetD8Async_ptsz, dstDevice) X(cuMemsetD16Async_ptsz, dstDevice) X(cuMemsetD32Async_ptsz, dstDevice)        \
  X(cuMemsetD2D8Async_ptsz, dstDevice) X(cuMemsetD2D16Async_ptsz, dstDevice) X(cuMemsetD2D32Async_ptsz, dstDevice)  \
  X(cuMemcpyHtoD_v2, dstDevice) X(cuMemcpyHtoDAsync_v2, dstDevice) X(cuMemcpyDtoD_v2, dstDevice)                    \
  X(cuMemcpyDtoDAsync_v2, dstDevice) X(cuMemcpyHtoD_v2_ptds, dstDevice) X(cuMemcpyHtoDAsync_v2_ptsz, dstDevice)     \
  X(cuMemcpyDtoD_v2_ptds, dstDevice) X(cuMemcpyDtoDAsync_v2_ptsz, dstDevice) X(cuMemcpy, dst)                       \
  X(cuMemcpyAsync, dst) X(cuMemcpy_ptds, dst) X(cuMemcpyAsync_ptsz, dst) X(cuMemcpyPeer, dstDevice)                 \
  X(cuMemcpyPeerAsync, dstDevice) X(cuMemcpyPeer_ptds, dstDevice) X(cuMemcpyPeerAsync_ptsz, dstDevice)

const CUpti_CallbackId kMemoryOperations[] = {
#define REPRO_ID(fn, field) CUPTI_DRIVER_TRACE_CBID_##fn,
    REPRO_MEMORY_OPERATIONS(REPRO_ID)
#undef REPRO_ID
};

// The destination of memory operation `cbid`, false for any other callback.
bool memory_destination(CUpti_CallbackId cbid, const void* params, uint64_t& dst, const char*& api) {
  switch (cbid) {
#define REPRO_CASE(fn, field)                                                \
  case CUPTI_DRIVER_TRACE_CBID_##fn:                                         \
    dst = static_cast<uint64_t>(static_cast<const fn##_params*>(params)->field); \
    api = #fn;                                                               \
    return true;
    REPRO_MEMORY_OPERATIONS(REPRO_CASE)
#undef REPRO_CASE
    default:
      return false;
  }
}

bool is_memory_operation(CUpti_CallbackId cbid) {
  return std::find(std::begin(kMemoryOperations), std::end(kMemoryOperations), cbid) != std::end(kMemoryOperations);
}

// API_ENTER of a memset or copy while a window is open: listed when it writes into an allocation
// the window already copied (one it has not seen yet is copied later, with what it wrote).
void on_memory_operation(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite != CUPTI_API_ENTER || !g->in_window.load()) return;
  uint64_t dst = 0;
  const char* api = "";
  if (!memory_destination(cbid, cb->functionParams, dst, api)) return;
  std::lock_guard<std::mutex> wl(g->window_mu);
  Window* w = g->window;
  if (!w || cb->contextUid != w->context) return;
  for (size_t i = 0; i < w->memory->size(); ++i) {
    const Buffer& b = (*w->memory)[i];
    if (b.copied && dst >= b.base && dst - b.base < b.size) {
      w->memory_ops.push_back({api, i, dst, w->started});
      return;
    }
  }
}

// The buffers a launch's parameters point into (indices into its window's memory).
std::vector<size_t> buffers_of(const Recording& r) {
  std::set<size_t> ids;
  for (const Pointer& p : r.ptrs) ids.insert(p.buffer);
  for (const TensorMap& t : r.tmaps)
    if (t.buffer >= 0) ids.insert(static_cast<size_t>(t.buffer));
  return std::vector<size_t>(ids.begin(), ids.end());
}

// API_ENTER of a launch of the window (its first one included): as begin_recording, except that
// only the allocations no earlier launch of the window reached are copied.
void window_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, const Launch& L, const KernelInfo* k,
                   uint64_t matched_number) {
  std::lock_guard<std::mutex> wl(g->window_mu);
  Window* w = g->window;
  if (!w) return;
  if (w->started > 0 && cb->contextUid != w->context) {
    if (!w->other_context_noted) note("a launch in another context than the window's was left out of it");
    w->other_context_noted = true;
    return;
  }
  if (in_stream_capture(L))
    return abandon_window("window_broken", "launch " + std::to_string(w->started + 1) + " of the window (" + k->demangled +
                                               ") was made during CUDA stream capture: it does not run now, so the "
                                               "window cannot be recorded; capture outside the graph capture");
  // Launches of other threads that start before the window's last one returned are not its own.
  const uint64_t bound = g->cfg.window_launches ? g->cfg.window_launches : g->cfg.window_max;
  if (w->started >= bound || w->through_seen) return;
  if (w->started == 0) w->context = cb->contextUid;
  std::unique_ptr<Recording> r(new Recording(w->memory));
  r->cbid = cbid, r->L = L, r->index = ++w->started;
  r->number = r->index == 1 ? matched_number : r->index;
  r->mangled = k->mangled, r->demangled = k->demangled;
  {
    std::lock_guard<std::mutex> l(g->mu);
    r->device = device_of(cb);
  }
  const uint64_t total = read_launch(*r);
  if (total > g->cfg.max_bytes) {
    {
      std::lock_guard<std::mutex> l(g->mu);
      g->refused_total = total;
      for (const Buffer& b : r->bufs) g->refused_buffers.emplace_back(b.base, b.size);
    }
    return abandon_window("refused", "launch " + std::to_string(r->index) + " of the window (" + r->demangled +
                                         ") brings the window's allocations to " + std::to_string(r->bufs.size()) +
                                         ", of " + std::to_string(total) + " bytes in all, over REPRO_CAPTURE_MAX_BYTES=" +
                                         std::to_string(g->cfg.max_bytes));
  }
  std::string dir = g->cfg.out + "/launches";
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) add_note(*r, "mkdir " + dir + ": " + strerror(errno));
  save(*r, "launches/l" + std::to_string(r->index) + ".params.bin", r->params.data(), r->params.size());
  copy_before(*r);
  query_attributes(*r);
  tl_rec = r.release();
}

// The window is complete: every allocation copied once more, the cubins, window.json last.
// Called with window_mu held.
void finish_window(Window& w) {
  std::sort(w.launches.begin(), w.launches.end(),
            [](const std::unique_ptr<Recording>& a, const std::unique_ptr<Recording>& b) { return a->index < b->index; });
  Recording& last = *w.launches.back();
  for (Buffer& b : *w.memory) std::vector<uint8_t>().swap(b.current);  // the last copy below replaces them
  CUresult e = g->drv.ctxSynchronize ? g->drv.ctxSynchronize() : g->drv.streamSynchronize(sync_stream(last.L));
  if (e != CUDA_SUCCESS) add_note(last, cu_name(e) + " (synchronizing after the window's last launch)");
  copy_after(last);  // the window's memory: every allocation, against its copy before its first launch
  // The cubins, each distinct module once.
  std::vector<std::shared_ptr<const std::string>> modules;
  Json j;
  j.obj().key("version").num(1).key("window").obj().key("kernel").str(g->cfg.pattern).key("first").num(g->cfg.launch);
  j.key("launches");
  g->cfg.window_launches ? j.num(g->cfg.window_launches) : j.null();
  j.key("through").str_or_null(g->cfg.through).end();
  j.key("launches").arr();
  for (const auto& r : w.launches) {
    size_t module_size = 0;
    std::string module_file, module_note;
    if (r->module) {
      size_t m = 0;
      while (m < modules.size() && modules[m] != r->module) ++m;
      module_file = "launches/m" + std::to_string(m + 1) + ".cubin";
      if (m == modules.size()) {
        modules.push_back(r->module);
        std::string err = write_file(g->cfg.out + "/" + module_file, r->module->data(), r->module->size(), false);
        if (!err.empty()) module_note = err;
      }
      if (module_note.empty()) module_size = r->module->size();
    } else {
      module_note = "no loaded cubin holds " + r->mangled + " (loaded before capture attached, or dropped over the 1 GiB cap)";
    }
    launch_object(j, *r, module_size, module_note, "launches/l" + std::to_string(r->index) + ".params.bin",
                  module_file, false);
  }
  j.end().key("buffers").arr();
  const std::vector<Buffer>& bufs = *w.memory;
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    j.obj().key("id").num(i).key("base").hex(b.base).key("size").num(b.size).key("managed").boolean(b.managed);
    j.key("before").str_or_null(b.have_before ? buffer_path(i, "before") : "");
    j.key("after").str_or_null(b.after_written ? buffer_path(i, "after") : "");
    j.key("changed_bytes").num(b.changed_bytes).key("first_launch").num(b.first_launch);
    j.key("written_by").nums(b.written_by);
    if (!b.error.empty()) j.key("error").str(b.error);
    j.end();
  }
  j.end().key("memory_operations").arr();
  for (const MemoryOperation& m : w.memory_ops)
    j.obj().key("api").str(m.api).key("buffer").num(m.buffer).key("address").hex(m.address).key("after_launch").num(m.after_launch).end();
  j.end().end();
  std::string text = j.text() + "\n";
  std::string err = write_file(g->cfg.out + "/window.json", text.data(), text.size(), true);
  const size_t count = w.launches.size();
  const std::string first = w.launches.front()->demangled;
  delete g->window;
  g->window = nullptr;
  g->in_window = false;
  finish_capture(err,
                 "recorded a window of " + std::to_string(count) + " launches from launch " +
                     std::to_string(g->cfg.launch) + " of " + first,
                 "window.json");
}

// API_EXIT of a launch of the window: what it changed, its module; the window ends here when it
// is complete, or is refused when it grew past its bound.
void finish_window_launch(const CUpti_CallbackData* cb) {
  std::unique_ptr<Recording> r(tl_rec);
  tl_rec = nullptr;
  CUresult res = cb->functionReturnValue ? *static_cast<const CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
  r->launch_result = res == CUDA_SUCCESS ? "CUDA_SUCCESS" : cu_name(res);
  CUresult e = g->drv.streamSynchronize(sync_stream(r->L));
  if (e != CUDA_SUCCESS) r->launch_error = cu_name(e) + " (cuStreamSynchronize after the launch)";
  r->module = find_module(r->mangled);
  std::lock_guard<std::mutex> wl(g->window_mu);
  Window* w = g->window;
  if (!w) return;
  std::vector<uint8_t> now;
  for (size_t i : buffers_of(*r)) {
    Buffer& b = (*w->memory)[i];
    if (!b.have_before || !copy_buffer(b, now)) continue;
    const std::vector<uint8_t>& was = b.current.empty() ? b.before : b.current;
    if (now.size() == was.size() && memcmp(now.data(), was.data(), now.size()) == 0) continue;
    b.written_by.push_back(r->index);
    b.current.swap(now);
  }
  if (!g->cfg.through.empty() && r->index > 1 && std::regex_search(r->demangled, g->cfg.through_re))
    w->through_seen = true;
  w->launches.push_back(std::move(r));
  const uint64_t recorded = w->launches.size();
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->window_recorded = recorded;
  }
  if (recorded < w->started) return;  // another thread's launch of the window has not returned yet
  if (g->cfg.through.empty() ? recorded == g->cfg.window_launches : w->through_seen) return finish_window(*w);
  const uint64_t bound = g->cfg.window_launches ? g->cfg.window_launches : g->cfg.window_max;
  if (recorded >= bound)
    abandon_window("window_too_long", "the window held " + std::to_string(recorded) + " launches (the most " +
                                          (g->cfg.window_launches ? "--launches allows" : "a window may hold") +
                                          ") and none of them after the first matched '" + g->cfg.through + "'");
}

// API_ENTER of launch N when a window is asked for: opens it, and records its first launch.
void begin_window(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, const Launch& L, const KernelInfo* k, uint64_t n) {
  {
    std::lock_guard<std::mutex> wl(g->window_mu);
    std::lock_guard<std::mutex> l(g->mu);
    g->phase = Phase::Recording;
    g->window = new Window();
    g->in_window = true;
  }
  window_launch(cbid, cb, L, k, n);
}

void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (tl_rec && tl_rec->cbid == cbid) tl_rec->index ? finish_window_launch(cb) : finish_recording(cb);
    return;
  }
  Launch L;
  if (!decode_launch(cbid, cb->functionParams, L) || !L.f) return;
  Gate gate = account(L, cb);
  if (gate.listed_now) write_session(false);
  if (gate.in_window) return window_launch(cbid, cb, L, gate.k, 0);
  if (!gate.matches) return;
  if (gate.pending && in_stream_capture(L)) { ++g->in_graph_capture; return; }
  uint64_t n = ++g->matched;
  if (gate.pending && n == g->cfg.launch)
    g->cfg.window() ? begin_window(cbid, cb, L, gate.k, n) : begin_recording(cbid, cb, L, gate.k, n);
}

// A failure (out of memory, mostly) while recording ends the capture; elsewhere it only costs
// that cubin or encode. Either way it is reported, and the program goes on.
void on_failure(const char* what) {
  {
    std::lock_guard<std::mutex> l(g->mu);
    if (g->phase == Phase::Recording) {
      g->phase = Phase::Done;
      g->message = std::string("recording the launch failed: ") + what;
    } else {
      note_locked(std::string("a callback failed: ") + what);
    }
  }
  write_session(true);
}

// An exception must not cross into CUPTI's C code.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      auto* rd = static_cast<const CUpti_ResourceData*>(data);
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) on_module_loaded(rd);
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {  // its CUfunctions may be reused
        std::lock_guard<std::mutex> l(g->mu);
        g->by_func.clear();
      }
      return;
    }
    auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return on_runtime_lookup(cbid, cb);
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled || cbid == CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col ||
        cbid == CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2colWide)
      on_encode(cbid, cb);
    else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress || cbid == CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2)
      on_driver_lookup(cbid, cb);
    else if (g->cfg.window() && is_memory_operation(cbid))
      on_memory_operation(cbid, cb);
    else
      on_launch(cbid, cb);
  } catch (const std::exception& e) {
    try {
      on_failure(e.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

// ---- attaching ------------------------------------------------------------------------------
std::string cupti_message(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "CUPTI error " + std::to_string(int(r));
  return s;
}

void at_exit() {
  try {
    if (g && g->active) write_session(true, true);
  } catch (...) {
  }
}

// Returns "" or what failed ("busy": another subscriber). Im2colWide alone is optional: it is the
// newest entry point, and without it only such maps go unrecognized.
std::string subscribe() {
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = cuptiSubscribe(&sub, on_callback, nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) return "busy";
  if (r != CUPTI_SUCCESS) return "cuptiSubscribe: " + cupti_message(r);
  const CUpti_CallbackId required[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled, CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col};
  for (CUpti_CallbackId id : required) {
    r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
    if (r != CUPTI_SUCCESS) {
      cuptiUnsubscribe(sub);
      return "cuptiEnableCallback(driver " + std::to_string(id) + "): " + cupti_message(r);
    }
  }
  if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2colWide) != CUPTI_SUCCESS)
    note("this CUPTI cannot trace cuTensorMapEncodeIm2colWide; such maps are not recognized");
  // The lookups whose result is swapped for an encoder wrapper. Failing to watch one only loses
  // the maps encoded through that lookup, so it is a note, not an error.
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress, CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2})
    if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id) != CUPTI_SUCCESS)
      note("this CUPTI cannot trace cuGetProcAddress; maps encoded through it are not recognized");
  for (CUpti_CallbackId id :
       {CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030, CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_ptsz_v11030,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_ptsz_v12050})
    if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id) != CUPTI_SUCCESS)
      note("this CUPTI cannot trace cudaGetDriverEntryPoint; maps encoded through it are not recognized");
  // A window lists the memsets and copies into memory it already copied; one launch needs none.
  if (g->cfg.window())
    for (CUpti_CallbackId id : kMemoryOperations)
      if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id) != CUPTI_SUCCESS) {
        note("this CUPTI cannot trace the memsets and copies inside a window; they are not listed");
        break;
      }
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING}) {
    r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id);
    if (r != CUPTI_SUCCESS) {
      cuptiUnsubscribe(sub);
      return "cuptiEnableCallback(resource " + std::to_string(id) + "): " + cupti_message(r);
    }
  }
  return "";
}

void initialize() {
  g = new State();
  const char* out = getenv("REPRO_CAPTURE_OUT");
  if (!out || out[0] != '/' || !is_directory(out)) {
    fprintf(stderr, "repro capture: REPRO_CAPTURE_OUT is not an existing absolute directory; capture is off\n");
    return;
  }
  g->cfg.out = out;
  std::string err;
  if (!parse_config(g->cfg, err)) return set_status("bad_environment", err);
  if (!load_driver(g->drv, err)) return set_status("bad_environment", "the CUDA driver lacks " + err);
  err = subscribe();
  if (err == "busy")
    return set_status("cupti_busy", "another tool or profiler (nsys, ncu, the program's own CUPTI use) "
                                    "already subscribed to CUPTI");
  if (!err.empty()) return set_status("cupti_error", err);
  {
    std::lock_guard<std::mutex> l(g->mu);
    g->active = true;
  }
  atexit(at_exit);
  write_session(true);
}

}  // namespace

// Called by the CUDA driver inside cuInit. Always reports success: a failed capture is recorded in
// session.json and must not change what the program does.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  try {
    initialize();
  } catch (...) {
  }
  return 1;
}
