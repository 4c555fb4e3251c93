// ---------------------------------------------------------------------------------------------
// repro harness runtime: input generators (the init patterns of docs/spec.md, `inputs`)
//
// Every generated value is a pure function of (pattern, seed, tensor name, logical index): no
// generator state, no library RNG, no libm. The same spec therefore gives the same tensor in
// this harness, in `repro` (crates/repro-contract/src/inputs/generators.rs mirrors this file bit for bit), on any
// machine and under any host compiler flags:
//
//   counter hash  h(seed, stream, index, draw) = mix(mix(mix(mix(seed ^ kSeedSalt) ^ stream)
//                                                        ^ index) ^ draw)
//                 with mix = the splitmix64 finalizer and stream = FNV-1a 64 of the tensor name
//   uniform       lo + (hi - lo) * u,   u = (h >> 11) * 2^-53 in [0, 1)
//   int_uniform   lo + (h mod (hi - lo + 1))
//   row_ramp      1 + the element's row (its second-to-last coordinate; a rank-1 tensor's index):
//                 every row, and so every tile of rows, holds values of its own, so a tile that
//                 reads another tile's data (a stale buffer, a wrong tile index) shows
//   normal        Marsaglia's polar method: draws 2j and 2j+1 give v1, v2 = 2u - 1 for
//                 j = 0, 1, ... until 0 < s = v1^2 + v2^2 < 1; value = mean + std * (v1 *
//                 sqrt(-2 ln(s) / s)), ln by deterministic_log() below.
//
// Only + - * / and sqrt touch the values; IEEE 754 rounds those exactly the same everywhere.
// What could still differ is a host compiler fusing a*b+c into one FMA (g++ does that under
// -march=native unless told otherwise), so every product that feeds a sum goes through
// rounded_product().
// ---------------------------------------------------------------------------------------------
#pragma once

#include "dtype.cuh"

namespace repro {

// values and groups list their elements (spec.yaml's `init: { values }` / `{ groups, align }`):
// fill_host() writes them, nothing generates them.
enum class InitKind { ones, zeros, iota, identity, uniform, int_uniform, normal, row_ramp, file, values, groups };

// An init pattern. p0/p1 are lo/hi for uniform and int_uniform, mean/std for normal.
struct Init {
  InitKind kind = InitKind::uniform;
  double p0 = -1.0;
  double p1 = 1.0;
  uint64_t seed = 2024;
  std::string path;  // file: relative to the spec's directory unless absolute
  std::vector<double> values;  // values: every element; groups: each group's row count
  int64_t align = 1;           // groups: each group's rows padded with -1 to a multiple of this
};

// The elements of a `values` or `groups` init for a tensor of `numel` elements (the Rust mirror
// is inputs::listed_values): a values list as given, zeros past its end; a group index with
// group g's rows g, each group's run padded with -1 to a multiple of `align`, -1 after the last.
inline std::vector<double> listed_values(const Init& init, int64_t numel) {
  std::vector<double> out;
  if (init.kind == InitKind::values) {
    out = init.values;
  } else {
    const int64_t align = std::max<int64_t>(1, init.align);
    for (size_t group = 0; group < init.values.size() && int64_t(out.size()) < numel; ++group) {
      const int64_t rows = int64_t(init.values[group]);
      const int64_t padded = (rows + align - 1) / align * align;
      for (int64_t row = 0; row < padded; ++row) out.push_back(row < rows ? double(group) : -1.0);
    }
  }
  out.resize(size_t(numel), init.kind == InitKind::values ? 0.0 : -1.0);
  return out;
}

// The numbers of an Init without its file path: what a kernel can take by value.
struct InitValues {
  InitKind kind;
  double p0, p1;
  uint64_t seed;
};

inline InitValues values_of(const Init& init) { return InitValues{init.kind, init.p0, init.p1, init.seed}; }

// a * b rounded to double before anything else sees it. The volatile store is what stops a host
// compiler from contracting `x + a * b` into an FMA, whatever -ffp-contract or -march says; on
// the device, __dmul_rn is the multiplication nvcc never fuses.
REPRO_HD inline double rounded_product(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  volatile double product = a * b;
  return product;
#endif
}

// splitmix64's output finalizer (Steele, Lea, Flood 2014): a bijection of 64-bit words whose
// every output bit depends on every input bit.
REPRO_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The golden-ratio constant splitmix64 steps by; keeps seed 0 away from mix64's fixed point 0.
constexpr uint64_t kSeedSalt = 0x9E3779B97F4A7C15ull;

REPRO_HD inline uint64_t counter_hash(uint64_t seed, uint64_t stream, uint64_t index, uint64_t draw) {
  return mix64(mix64(mix64(mix64(seed ^ kSeedSalt) ^ stream) ^ index) ^ draw);
}

// The i-th of a spread of sample indices into [0, extent): the first and the last always in
// (0 and 1 give them), the others hashed over the whole range. `salt` makes unrelated spreads
// differ (the device-input check, the rows and columns the cross-check fetches).
inline int64_t spread_index(int64_t i, int64_t extent, uint64_t salt) {
  return i == 0 ? 0 : i == 1 ? extent - 1 : int64_t(mix64(uint64_t(i) ^ salt) % uint64_t(extent));
}

// FNV-1a 64 of the tensor's name: tensors that share a seed still get different values.
inline uint64_t stream_of(const char* tensor_name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (const unsigned char* c = reinterpret_cast<const unsigned char*>(tensor_name); *c; ++c) {
    hash ^= *c;
    hash *= 0x100000001B3ull;
  }
  return hash;
}

// The top 53 bits of a hash as a double in [0, 1).
REPRO_HD inline double unit_interval(uint64_t hash) { return double(hash >> 11) * 0x1.0p-53; }

// ln(x) for a positive normal double, using only + - * / so that it is bit-identical on every
// machine (std::log is not: libm implementations differ in the last bit).
//   x = m * 2^e with m in [sqrt(1/2), sqrt(2));  ln x = e ln 2 + 2 atanh(t),  t = (m-1)/(m+1)
//   atanh(t) = t (1 + t^2/3 + t^4/5 + ...), |t| <= 0.1716, t^2 <= 0.0295: the 12 terms up to
//   t^22/23 leave a remainder below 2^-53 relative.
REPRO_HD inline double deterministic_log(double x) {
  const uint64_t bits = double_bits(x);
  int exponent = int((bits >> 52) & 0x7FF) - 1022;                          // x = m * 2^exponent,
  double m = double_from_bits((bits & ((uint64_t(1) << 52) - 1)) | (uint64_t(1022) << 52));  // m in [0.5, 1)
  if (m < 0x1.6A09E667F3BCDp-1) {  // sqrt(1/2)
    m *= 2.0;
    exponent -= 1;
  }
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = rounded_product(t, t);
  constexpr int kTerms = 12;
  double series = 1.0 / (2 * kTerms - 1);
  for (int k = kTerms - 2; k >= 0; --k) series = 1.0 / (2 * k + 1) + rounded_product(t2, series);
  constexpr double kLn2 = 0x1.62E42FEFA39EFp-1;
  return rounded_product(double(exponent), kLn2) + rounded_product(2.0 * t, series);
}

// Rejection is 21.5% likely per pair; 64 rejections in a row (p ~ 1e-43) never happen, but the
// bound keeps the loop finite by construction. The fallback is the mean.
constexpr int kMaxNormalPairs = 64;

REPRO_HD inline double normal_value(double mean, double std_dev, uint64_t seed, uint64_t stream, uint64_t index) {
  for (uint64_t pair = 0; pair < kMaxNormalPairs; ++pair) {
    const double v1 = 2.0 * unit_interval(counter_hash(seed, stream, index, 2 * pair)) - 1.0;  // exact
    const double v2 = 2.0 * unit_interval(counter_hash(seed, stream, index, 2 * pair + 1)) - 1.0;
    const double s = rounded_product(v1, v1) + rounded_product(v2, v2);
    if (s > 0.0 && s < 1.0) {
      const double factor = std::sqrt(-2.0 * deterministic_log(s) / s);
      return mean + rounded_product(std_dev, rounded_product(v1, factor));
    }
  }
  return mean;
}

// The value of a tensor's element at `logical_index` (row-major over the logical shape, whatever
// the storage layout) before it is rounded to the tensor's dtype.
//   iota      the logical index itself
//   identity  1 where the last two logical coordinates are equal, else 0; a rank-1 tensor is
//             read as one row [1, n], so it is e_0 (1 at index 0)
//   file      not generated: fill_host() loads it; NaN here
REPRO_HD inline double generate_value(const InitValues& init, uint64_t stream, int64_t logical_index, int rank,
                                      const int64_t* shape) {
  switch (init.kind) {
    case InitKind::ones: return 1.0;
    case InitKind::zeros: return 0.0;
    case InitKind::iota: return double(logical_index);
    case InitKind::identity: {
      const int64_t columns = shape[rank - 1];
      const int64_t column = logical_index % columns;
      const int64_t row = rank >= 2 ? (logical_index / columns) % shape[rank - 2] : 0;
      return row == column ? 1.0 : 0.0;
    }
    case InitKind::uniform: {
      const double u = unit_interval(counter_hash(init.seed, stream, uint64_t(logical_index), 0));
      return init.p0 + rounded_product(init.p1 - init.p0, u);
    }
    case InitKind::int_uniform: {
      const uint64_t span = uint64_t(init.p1 - init.p0) + 1;
      return init.p0 + double(counter_hash(init.seed, stream, uint64_t(logical_index), 0) % span);
    }
    case InitKind::normal: return normal_value(init.p0, init.p1, init.seed, stream, uint64_t(logical_index));
    case InitKind::row_ramp: {
      const int64_t row = rank >= 2 ? (logical_index / shape[rank - 1]) % shape[rank - 2] : logical_index;
      return double(row + 1);
    }
    case InitKind::file:
    case InitKind::values:
    case InitKind::groups: break;
  }
  return double_from_bits(0x7FF8000000000000ull);
}

inline double generate_value(const Init& init, uint64_t stream, int64_t logical_index, int rank, const int64_t* shape) {
  return generate_value(values_of(init), stream, logical_index, rank, shape);
}

constexpr const char* kInitForms =
    "ones | zeros | iota | identity | uniform[:LO:HI] | int_uniform[:LO:HI] | normal[:MEAN:STD] | row_ramp | file:PATH";

// Parses the --init pattern syntax (kInitForms). Sets kind, p0, p1 and path; leaves out->seed as
// it is, so a seed chosen by the spec or --seed survives a pattern given on the command line.
inline bool parse_init(const std::string& text, Init* out, std::string* error) {
  const auto fail = [&](const std::string& why) {
    *error = "bad init pattern \"" + text + "\": " + why + "; valid forms: " + kInitForms;
    return false;
  };
  if (text.compare(0, 5, "file:") == 0) {
    if (text.size() == 5) return fail("file: needs a path");
    out->kind = InitKind::file;
    out->path = text.substr(5);
    return true;
  }

  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(text.substr(start, colon - start));
  parts.push_back(text.substr(start));

  struct Form {
    const char* name;
    InitKind kind;
    bool takes_parameters;
    double default_p0, default_p1;
  };
  static const Form kForms[] = {
      {"ones", InitKind::ones, false, 0, 0},
      {"zeros", InitKind::zeros, false, 0, 0},
      {"iota", InitKind::iota, false, 0, 0},
      {"identity", InitKind::identity, false, 0, 0},
      {"uniform", InitKind::uniform, true, -1, 1},
      {"int_uniform", InitKind::int_uniform, true, -4, 4},
      {"normal", InitKind::normal, true, 0, 1},
      {"row_ramp", InitKind::row_ramp, false, 0, 0},
  };
  const Form* form = nullptr;
  for (const Form& candidate : kForms)
    if (parts[0] == candidate.name) form = &candidate;
  if (form == nullptr) return fail("unknown pattern \"" + parts[0] + "\"");

  double p0 = form->default_p0, p1 = form->default_p1;
  if (!form->takes_parameters && parts.size() > 1) return fail(std::string(form->name) + " takes no parameters");
  if (form->takes_parameters && parts.size() != 1) {
    const std::string usage = std::string(form->name) + (form->kind == InitKind::normal ? ":MEAN:STD" : ":LO:HI");
    if (parts.size() != 3) return fail("give both parameters, as in " + usage);
    double* targets[2] = {&p0, &p1};
    for (int i = 0; i < 2; ++i) {
      const std::string& number = parts[i + 1];
      char* end = nullptr;
      errno = 0;
      *targets[i] = std::strtod(number.c_str(), &end);
      const bool whole = !number.empty() && end == number.c_str() + number.size();
      if (!whole || errno == ERANGE || !std::isfinite(*targets[i]))
        return fail("\"" + number + "\" is not a finite number (" + usage + ")");
    }
  }
  switch (form->kind) {
    case InitKind::uniform:
      if (!(p0 <= p1)) return fail("LO must not exceed HI");
      break;
    case InitKind::int_uniform:
      if (p0 != std::floor(p0) || p1 != std::floor(p1)) return fail("int_uniform bounds must be integers");
      if (!(p0 <= p1)) return fail("LO must not exceed HI");
      // Keeps hi - lo and every lo + offset exact in a double.
      if (std::fabs(p0) > 0x1.0p52 || std::fabs(p1) > 0x1.0p52)
        return fail("int_uniform bounds must lie within +-2^52");
      break;
    case InitKind::normal:
      if (p1 < 0) return fail("STD must not be negative");
      break;
    default: break;
  }
  out->kind = form->kind;
  out->p0 = p0;
  out->p1 = p1;
  out->path.clear();
  return true;
}

// How a report names an init, e.g. "uniform[-1, 1] seed 2024".
inline std::string describe_init(const Init& init) {
  const std::string seed = " seed " + std::to_string(init.seed);
  switch (init.kind) {
    case InitKind::ones: return "ones";
    case InitKind::zeros: return "zeros";
    case InitKind::iota: return "iota";
    case InitKind::identity: return "identity";
    case InitKind::row_ramp: return "row_ramp";
    case InitKind::uniform: return "uniform[" + format_value(init.p0) + ", " + format_value(init.p1) + "]" + seed;
    case InitKind::int_uniform:
      return "int_uniform[" + format_value(init.p0) + ", " + format_value(init.p1) + "]" + seed;
    case InitKind::normal:
      return "normal(mean " + format_value(init.p0) + ", std " + format_value(init.p1) + ")" + seed;
    case InitKind::file: return "file " + init.path;
    case InitKind::values: return strprintf("%zu listed values", init.values.size());
    case InitKind::groups: {
      std::string rows;
      for (double v : init.values) rows += (rows.empty() ? "" : ", ") + format_value(v);
      return "groups of [" + rows + "] rows, aligned to " + std::to_string(init.align);
    }
  }
  return "?";
}

}  // namespace repro
