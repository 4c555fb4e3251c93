// ---------------------------------------------------------------------------------------------
// repro harness runtime: the reference cache (--reference-cache DIR; issue 9)
//
// Most reruns change the kernel, not its inputs: the same shapes, dtypes, seeds and files give
// the same operands, and the same operands and GEMM give the same fp64 reference. So the
// reference is stored under a hash of exactly what determines it: every operand's dtype, shape
// and strides, its content (the bytes of an operand read from a file; the generator, its
// parameters and seed, and the tensor's name for a generated one, whose bytes are a pure function
// of those and may exist only on the device), and the GEMM's extents, alpha and beta. An edited
// input file changes its bytes and so the key; a change to the generators themselves must bump
// kGeneratorVersion.
//
// The file holds a header (magic, key, element count) and the doubles; anything that does not
// match exactly is ignored and recomputed. Written to a temporary name and renamed, so an
// interrupted run never leaves a half file under a valid name. The directory keeps the
// kReferenceCacheEntries most recently used references; older ones are deleted.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "device_compare.cuh"

namespace repro {

constexpr int kReferenceCacheEntries = 4;
// Bumped whenever generators.cuh or dtype.cuh would make different bits from the same spec.
constexpr uint64_t kGeneratorVersion = 1;
// Larger references are recomputed each time rather than written (8192^2 outputs are 512 MiB).
constexpr size_t kReferenceCacheMaxBytes = size_t(2) << 30;
constexpr char kReferenceCacheMagic[16] = "repro-reference";

// 128 bits of hash over a byte range, from two differently seeded lanes of mix64 over 8-byte
// words. Parallel over fixed chunks whose hashes are folded in order: the key does not depend
// on the core count.
struct Hash128 {
  uint64_t lo = 0x6A09E667F3BCC908ull, hi = 0xBB67AE8584CAA73Bull;
  void add(uint64_t word) {
    lo = mix64(lo ^ word);
    hi = mix64(hi + word * 0x9E3779B97F4A7C15ull);
  }
  void add_bytes(const unsigned char* bytes, size_t size) {
    constexpr size_t kChunk = size_t(1) << 22;
    const int64_t chunks = int64_t((size + kChunk - 1) / kChunk);
    std::vector<Hash128> parts(size_t(std::max<int64_t>(chunks, 0)));
    parallel_for(chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        const size_t begin = size_t(c) * kChunk, end = std::min(size, begin + kChunk);
        Hash128& h = parts[size_t(c)];
        size_t at = begin;
        for (; at + 8 <= end; at += 8) {
          uint64_t word;
          std::memcpy(&word, bytes + at, 8);
          h.add(word);
        }
        uint64_t tail = 0;
        std::memcpy(&tail, bytes + at, end - at);
        h.add(tail ^ (uint64_t(end - at) << 56));
      }
    });
    add(uint64_t(size));
    for (const Hash128& part : parts) add(part.lo), add(part.hi);
  }
  std::string hex() const { return strprintf("%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo); }
};

// The key of a GEMM's reference: the operands that enter it, as stored, and the problem.
inline std::string reference_key(const GemmProblem& p) {
  Hash128 h;
  const auto add_double = [&](double v) { h.add(double_bits(v)); };
  for (int64_t v : {p.L, p.M, p.N, p.K, int64_t(p.batched)}) h.add(uint64_t(v));
  add_double(p.alpha);
  add_double(p.beta);
  for (const ScaleSpec* scale : {&p.scale_a_spec, &p.scale_b_spec})
    for (int64_t v : {int64_t(scale->encoding), scale->block[0], scale->block[1]}) h.add(uint64_t(v));
  const Tensor* operands[] = {p.a, p.b, p.beta != 0.0 ? p.c : nullptr, p.bias, p.scale_a, p.scale_b};
  for (const Tensor* t : operands) {
    if (t == nullptr) {
      h.add(0);
      continue;
    }
    h.add(uint64_t(t->dtype) + 1);
    h.add(uint64_t(t->rank));
    for (int d = 0; d < t->rank; ++d) h.add(uint64_t(t->shape[d])), h.add(uint64_t(t->strides[d]));
    // Values that are not the generator's own (a file, a list, scales made from the init): their bytes.
    if (t->init.kind == InitKind::file || t->init.kind == InitKind::values || t->init.kind == InitKind::groups ||
        t->scale_tensor) {
      h.add_bytes(t->host.data(), t->host.size());
    } else {
      h.add(kGeneratorVersion);
      h.add(uint64_t(t->init.kind) + 1);
      add_double(t->init.p0);
      add_double(t->init.p1);
      h.add(t->init.seed);
      h.add(stream_of(t->name.c_str()));
    }
  }
  return h.hex();
}

struct ReferenceCache {
  std::string dir;  // empty: no cache
  std::string key;

  std::string path() const { return join_path(dir, key + ".f64"); }

  // The cached reference into *ref; false when there is none that matches exactly.
  bool load(size_t count, std::vector<double>* ref) const {
    if (dir.empty()) return false;
    FILE* f = std::fopen(path().c_str(), "rb");
    if (f == nullptr) return false;
    char magic[16] = {}, stored_key[32] = {};
    uint64_t stored_count = 0;
    bool ok = std::fread(magic, 1, 16, f) == 16 && std::memcmp(magic, kReferenceCacheMagic, 16) == 0 &&
              std::fread(stored_key, 1, 32, f) == 32 && std::memcmp(stored_key, key.data(), 32) == 0 &&
              std::fread(&stored_count, 8, 1, f) == 1 && stored_count == count;
    if (ok) {
      ref->resize(count);
      ok = std::fread(ref->data(), sizeof(double), count, f) == count && std::fgetc(f) == EOF;
    }
    std::fclose(f);
    if (ok) utime(path().c_str(), nullptr);  // most recently used: the last to be evicted
    return ok;
  }

  // Stores the reference (best effort: a cache that cannot be written only costs time), then
  // evicts all but the newest entries. Returns what happened, for the report.
  std::string store(const std::vector<double>& ref) const {
    if (dir.empty()) return "";
    const size_t bytes = ref.size() * sizeof(double);
    if (bytes > kReferenceCacheMaxBytes)
      return strprintf("not cached: %zu MiB is over the cache's %zu MiB limit", bytes >> 20,
                       kReferenceCacheMaxBytes >> 20);
    const std::string folder_error = make_directories(dir);
    if (!folder_error.empty()) return "not cached: " + folder_error;
    const std::string temporary = path() + strprintf(".%d.tmp", int(getpid()));
    FILE* f = std::fopen(temporary.c_str(), "wb");
    if (f == nullptr) return strprintf("not cached: cannot write %s: %s", temporary.c_str(), std::strerror(errno));
    const uint64_t count = ref.size();
    bool ok = std::fwrite(kReferenceCacheMagic, 1, 16, f) == 16 && std::fwrite(key.data(), 1, 32, f) == 32 &&
              std::fwrite(&count, 8, 1, f) == 1 && std::fwrite(ref.data(), sizeof(double), ref.size(), f) == ref.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(temporary.c_str(), path().c_str()) != 0) {
      std::remove(temporary.c_str());
      return "not cached: the write failed";
    }
    evict();
    return "cached for reruns with the same inputs";
  }

  void evict() const {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return;
    std::vector<std::pair<double, std::string>> entries;  // (mtime, path)
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() != 36 || name.compare(32, 4, ".f64") != 0) continue;
      struct stat st;
      const std::string full = join_path(dir, name);
      if (stat(full.c_str(), &st) == 0) entries.emplace_back(double(st.st_mtim.tv_sec) + 1e-9 * st.st_mtim.tv_nsec, full);
    }
    closedir(d);
    std::sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    for (size_t i = kReferenceCacheEntries; i < entries.size(); ++i) std::remove(entries[i].second.c_str());
  }
};

}  // namespace repro
