// ---------------------------------------------------------------------------------------------
// repro harness runtime: tensor files (.npy and raw .bin)
//
// Files hold a tensor's elements in its own storage format, in logical row-major order (a .npy
// may also be Fortran order), whatever layout the tensor has on the device. Formats numpy lacks
// travel as raw bits: bf16 as <u2, fp8 as |u1 (ml_dtypes' |V2 / |V1 void types are accepted).
// ---------------------------------------------------------------------------------------------
#pragma once

#include "generators.cuh"

namespace repro {

// The descr written for each dtype.
inline const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f64: return "<f8";
    case DType::f32:
    case DType::tf32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
    case DType::e4m3:
    case DType::e5m2: return "|u1";
    case DType::i8: return "|i1";
    case DType::u8: return "|u1";
    case DType::i32: return "<i4";
    case DType::u32: return "<u4";
    case DType::i64: return "<i8";
    case DType::boolean: return "|b1";
  }
  return "?";
}

// Other descrs that hold the same bytes: raw-bit carriers for bf16 and fp8.
inline std::vector<std::string> npy_descr_alternatives(DType dtype) {
  switch (dtype) {
    case DType::bf16: return {"|V2", "<V2", "<i2"};
    case DType::e4m3:
    case DType::e5m2: return {"|V1", "|i1"};
    default: return {};
  }
}

inline bool npy_descr_accepted(DType dtype, std::string descr) {
  // Byte order is meaningless for one-byte types; numpy writes '|', other writers '<'.
  if (descr.size() == 3 && descr[2] == '1' && (descr[0] == '<' || descr[0] == '=')) descr[0] = '|';
  if (descr == npy_descr(dtype)) return true;
  const std::vector<std::string> alternatives = npy_descr_alternatives(dtype);
  return std::find(alternatives.begin(), alternatives.end(), descr) != alternatives.end();
}

// "[3, 4]"
inline std::string format_shape(int rank, const int64_t* shape) {
  std::string text = "[";
  for (int d = 0; d < rank; ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

inline int64_t product(int rank, const int64_t* shape) {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= shape[d];
  return count;
}

// Reads a whole regular file of at most `limit` bytes. Checked before anything is read: a fifo
// would block the open or the read forever, a device such as /dev/zero never ends, and a file
// larger than the tensor can hold is refused without reading it into memory.
inline bool read_file_bytes(const std::string& path, std::vector<unsigned char>* bytes, std::string* error,
                            size_t limit = SIZE_MAX) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = path + " is not a regular file (" +
             (S_ISFIFO(st.st_mode)  ? "a fifo"
              : S_ISCHR(st.st_mode) ? "a character device"
              : S_ISDIR(st.st_mode) ? "a folder"
                                    : "not a plain file") +
             "); give a .npy or .bin file";
    return false;
  }
  if (size_t(st.st_size) > limit) {
    *error = path + " is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(limit) +
             " this tensor's data can take; it is not read";
    return false;
  }
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  bytes->clear();
  unsigned char buffer[1 << 16];
  size_t got;
  // Bounded even if the file grows while it is read.
  while (bytes->size() <= limit && (got = std::fread(buffer, 1, sizeof buffer, file)) > 0)
    bytes->insert(bytes->end(), buffer, buffer + got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) *error = "cannot read " + path + ": read error";
  return !failed;
}

// Writes (mode "wb") or appends (mode "ab") `size` bytes and closes the file, so they are on
// disk when this returns.
inline bool write_file_bytes(const std::string& path, const void* data, size_t size, std::string* error,
                             const char* mode = "wb") {
  FILE* file = std::fopen(path.c_str(), mode);
  if (file == nullptr) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(data, 1, size, file) == size;
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) *error = "cannot write " + path + ": " + std::strerror(errno);
  return written && closed;
}

inline bool write_text_file(const std::string& path, const std::string& text, std::string* error) {
  return write_file_bytes(path, text.data(), text.size(), error);
}

// Appends `line` and a newline to `path`: a queue's reports, each on disk when its check ends,
// so that a process that dies later leaves every finished check's line behind. The file stays
// open for the process's next line (a queue writes all its reports to one file): opened and
// closed for each, it cost each check of a queue a lookup and two more system calls while its
// next check waited.
inline bool append_line(const std::string& path, const std::string& line, std::string* error) {
  static FILE* file = nullptr;
  static std::string open_path;
  if (file == nullptr || open_path != path) {
    if (file != nullptr) std::fclose(file);
    open_path = path;
    file = std::fopen(path.c_str(), "ab");
    if (file == nullptr) {
      *error = "cannot write " + path + ": " + std::strerror(errno);
      return false;
    }
  }
  const std::string text = line + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file) != text.size() || std::fflush(file) != 0) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    std::fclose(file);
    file = nullptr;
    return false;
  }
  return true;
}

// What a .npy header says.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // where the elements start in the file
};

// Reads the header's Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }: just the literal forms numpy writes.
class NpyDictParser {
 public:
  explicit NpyDictParser(const std::string& text) : text_(text) {}

  bool parse(NpyHeader* header, std::string* why) {
    bool has_descr = false, has_order = false, has_shape = false;
    if (!consume('{')) return fail("expected '{'", why);
    while (!consume('}')) {
      std::string key;
      if (!parse_string(&key) || !consume(':')) return fail("expected 'key': value", why);
      if (key == "descr") {
        if (!parse_string(&header->descr))
          return fail("descr is not a string (structured dtypes are not supported)", why);
        has_descr = true;
      } else if (key == "fortran_order") {
        if (!parse_bool(&header->fortran_order)) return fail("fortran_order is not True or False", why);
        has_order = true;
      } else if (key == "shape") {
        if (!parse_shape(&header->shape)) return fail("shape is not a tuple of integers", why);
        has_shape = true;
      } else {
        return fail("unexpected key '" + key + "'", why);
      }
      if (!consume(',') && !peek('}')) return fail("expected ',' or '}'", why);
    }
    if (!has_descr || !has_order || !has_shape) return fail("descr, fortran_order or shape is missing", why);
    return true;
  }

 private:
  static bool fail(const std::string& message, std::string* why) {
    *why = message;
    return false;
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool consume(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool parse_string(std::string* out) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) return false;
    *out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool parse_bool(bool* out) {
    skip_space();
    for (const char* word : {"True", "False"}) {
      if (text_.compare(pos_, std::strlen(word), word) == 0) {
        *out = word[0] == 'T';
        pos_ += std::strlen(word);
        return true;
      }
    }
    return false;
  }
  bool parse_shape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!consume('(')) return false;
    while (!consume(')')) {
      skip_space();
      const size_t start = pos_;
      int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])))
        value = value * 10 + (text_[pos_++] - '0');
      if (pos_ == start) return false;
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 longs
      shape->push_back(value);
      if (!consume(',') && !peek(')')) return false;
    }
    return true;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

inline bool parse_npy_header(const std::string& path, const std::vector<unsigned char>& file, NpyHeader* header,
                             std::string* error) {
  static const unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 10 || !std::equal(kMagic, kMagic + 6, file.begin())) {
    *error = path + " is not a .npy file (it does not start with \\x93NUMPY)";
    return false;
  }
  const int major = file[6];
  size_t length_bytes;
  if (major == 1) {
    length_bytes = 2;
  } else if (major == 2 || major == 3) {  // 3 differs from 2 only in allowing UTF-8 in the header
    length_bytes = 4;
  } else {
    *error = path + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(file[7]);
    return false;
  }
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) header_length |= size_t(file[8 + i]) << (8 * i);
  const size_t header_start = 8 + length_bytes;
  if (file.size() < header_start + header_length) {
    *error = path + " is truncated inside its .npy header";
    return false;
  }
  const std::string text(file.begin() + header_start, file.begin() + header_start + header_length);
  std::string why;
  if (!NpyDictParser(text).parse(header, &why)) {
    *error = path + ": cannot read the .npy header (" + why + "): " + text;
    return false;
  }
  header->data_offset = header_start + header_length;
  return true;
}

inline std::string describe_npy_requirement(DType dtype) {
  std::string text = std::string(npy_descr(dtype));
  const std::vector<std::string> alternatives = npy_descr_alternatives(dtype);
  for (size_t i = 0; i < alternatives.size(); ++i) text += (i ? ", " : " (also accepted: ") + alternatives[i];
  return alternatives.empty() ? text : text + ")";
}

// The header of a .npy, read from its first bytes (which numpy keeps under 64 KiB).
inline bool peek_npy_header(const std::string& path, NpyHeader* header, std::string* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = "cannot read " + path + (stat(path.c_str(), &st) != 0 ? std::string(": ") + std::strerror(errno)
                                                                   : std::string(": not a regular file"));
    return false;
  }
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::vector<unsigned char> head(size_t(1) << 20);
  head.resize(std::fread(head.data(), 1, head.size(), file));
  std::fclose(file);
  return parse_npy_header(path, head, header, error);
}

// Loads a tensor's elements from `path` (.npy or .bin) into `logical`: numel elements of the
// tensor's storage format, logical row-major. The file's shape and element type must match the
// tensor exactly; the error says what the file holds and what the tensor needs.
inline bool load_tensor_file(const std::string& path, const char* tensor_name, DType dtype, int rank,
                             const int64_t* shape, std::vector<unsigned char>* logical, std::string* error) {
  const int64_t numel = product(rank, shape);
  const size_t element_bytes = dtype_bytes(dtype);
  const size_t data_bytes = size_t(numel) * element_bytes;
  const std::string tensor = std::string("tensor ") + tensor_name + " (" + dtype_name(dtype) + " " +
                             format_shape(rank, shape) + ")";
  const auto has_suffix = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (!has_suffix(".npy") && !has_suffix(".bin")) {
    *error = path + ": unknown file type for " + tensor + "; use .npy, or .bin with raw " + dtype_name(dtype) +
             " elements in row-major order";
    return false;
  }
  std::vector<unsigned char> file;
  // A .bin is the data alone; a .npy adds its header (64 KiB at most in practice, 1 MiB allowed).
  const size_t limit = has_suffix(".bin") ? data_bytes : data_bytes + (size_t(1) << 20);
  const auto wrong_bin_size = [&](size_t size) {
    *error = path + " has " + std::to_string(size) + " bytes; " + tensor + " needs exactly " +
             std::to_string(data_bytes) + " (" + std::to_string(numel) + " elements x " +
             std::to_string(element_bytes) + " bytes)";
    return false;
  };
  // A .bin of the wrong size is named by its size, before it is read.
  struct stat st;
  if (has_suffix(".bin") && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) != data_bytes)
    return wrong_bin_size(size_t(st.st_size));
  if (!read_file_bytes(path, &file, error, limit)) return false;

  if (has_suffix(".bin")) {
    if (file.size() != data_bytes) return wrong_bin_size(file.size());  // it changed while it was read
    logical->swap(file);
    return true;
  }

  NpyHeader header;
  if (!parse_npy_header(path, file, &header, error)) return false;
  const bool shape_matches =
      int(header.shape.size()) == rank && std::equal(header.shape.begin(), header.shape.end(), shape);
  if (!shape_matches || !npy_descr_accepted(dtype, header.descr)) {
    *error = path + " holds " + header.descr + " " + format_shape(int(header.shape.size()), header.shape.data()) +
             " but " + tensor + " needs " + describe_npy_requirement(dtype) + " " + format_shape(rank, shape);
    return false;
  }
  if (file.size() - header.data_offset < data_bytes) {
    *error = path + " is truncated: " + std::to_string(data_bytes) + " bytes of elements expected, " +
             std::to_string(file.size() - header.data_offset) + " present";
    return false;
  }
  const unsigned char* data = file.data() + header.data_offset;
  if (!header.fortran_order || rank <= 1) {
    logical->assign(data, data + data_bytes);
    return true;
  }
  // Fortran order: the first coordinate varies fastest in the file.
  logical->resize(data_bytes);
  std::vector<int64_t> coordinate(size_t(rank), 0);  // of logical element i, last dim fastest
  for (int64_t i = 0; i < numel; ++i) {
    int64_t file_index = 0;
    for (int d = rank - 1; d >= 0; --d) file_index = file_index * shape[d] + coordinate[size_t(d)];
    std::memcpy(logical->data() + size_t(i) * element_bytes, data + size_t(file_index) * element_bytes, element_bytes);
    for (int d = rank - 1; d >= 0 && ++coordinate[size_t(d)] == shape[d]; --d) coordinate[size_t(d)] = 0;
  }
  return true;
}

// Writes numel elements of `dtype` storage, given in logical row-major order, as a version 1.0
// .npy (C order) that numpy.load reads directly.
inline bool write_npy(const std::string& path, DType dtype, int rank, const int64_t* shape, const void* logical,
                      std::string* error) {
  std::string dict = std::string("{'descr': '") + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
  for (int d = 0; d < rank; ++d) dict += std::to_string(shape[d]) + (rank == 1 ? "," : (d + 1 < rank ? ", " : ""));
  dict += "), }";
  // numpy pads the header with spaces and a newline so the data starts 64-byte aligned.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::vector<unsigned char> file = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  file.push_back(static_cast<unsigned char>(dict.size() & 0xFF));
  file.push_back(static_cast<unsigned char>(dict.size() >> 8));
  file.insert(file.end(), dict.begin(), dict.end());
  const unsigned char* bytes = static_cast<const unsigned char*>(logical);
  file.insert(file.end(), bytes, bytes + size_t(product(rank, shape)) * dtype_bytes(dtype));
  return write_file_bytes(path, file.data(), file.size(), error);
}

}  // namespace repro
