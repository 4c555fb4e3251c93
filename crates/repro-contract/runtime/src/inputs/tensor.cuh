// ---------------------------------------------------------------------------------------------
// repro harness runtime: tensors
//
// A tensor has a logical shape (what the spec names: [M, K]) and a storage layout (element
// strides, so col_major or padded leading dimensions are just strides). Values are defined on
// logical indices, so a col_major tensor holds the same matrix as a row_major one.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "npy.cuh"

namespace repro {

// Storage offset (elements) of the element at row-major logical index `logical_index` of a
// tensor with this shape and these strides; Tensor and, on the device, DeviceLayout use it.
REPRO_HD inline int64_t logical_offset(int rank, const int64_t* shape, const int64_t* strides, int64_t logical_index) {
  int64_t result = 0;
  for (int d = rank - 1; d >= 0; --d) {
    result += (logical_index % shape[d]) * strides[d];
    logical_index /= shape[d];
  }
  return result;
}

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  int rank = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};  // in elements
  bool output = false;
  Lifetime intermediate = Lifetime::none;  // an operator's own state (spec: intermediate): made from init
  Init init;
  bool scale_tensor = false;  // a scaled GEMM's scales (scales.cuh): made on the host, also on the device path
  std::vector<unsigned char> host;  // storage_bytes() bytes, laid out as on the device
  void* device = nullptr;
  // A captured launch's output (spec: capture, production.cuh): its files, and the contents
  // production's output had before the launch, which a run starts from instead of the poison.
  std::string capture_before, capture_after;
  void* initial_device = nullptr;
  // An intermediate's reference file (spec: tensors.X.reference.file), relative to spec.yaml's folder unless absolute:
  // what it holds once its producer launch has run, for the spec's own inputs. Empty for none.
  std::string reference_file;

  int64_t numel() const { return product(rank, shape); }

  // Elements spanned in storage: 1 + the offset of the last element; 0 when empty.
  int64_t storage_elements() const {
    if (numel() == 0) return 0;
    int64_t last = 0;
    for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d];
    return last + 1;
  }

  size_t storage_bytes() const { return size_t(storage_elements()) * dtype_bytes(dtype); }

  // Storage offset (elements) of the element at logical coordinates `index`.
  int64_t offset(const int64_t* index) const {
    int64_t result = 0;
    for (int d = 0; d < rank; ++d) result += index[d] * strides[d];
    return result;
  }

  // Storage offset of the element at logical row-major index `logical_index`.
  int64_t logical_offset(int64_t logical_index) const { return repro::logical_offset(rank, shape, strides, logical_index); }
};

// An input: neither an output nor an intermediate. --ones, --init, the probes and the device's
// input generator set inputs; an intermediate always starts as its init says.
inline bool is_input(const Tensor& t) { return !t.output && t.intermediate == Lifetime::none; }

// Packed strides for the tensor's shape; col_major swaps the last two dimensions (a leading
// batch dimension stays outermost), as the spec's `layout: col_major` means.
inline void set_packed_strides(Tensor& t, bool col_major) {
  int order[4] = {0, 1, 2, 3};
  if (col_major && t.rank >= 2) std::swap(order[t.rank - 1], order[t.rank - 2]);
  int64_t step = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    t.strides[order[i]] = step;
    step *= t.shape[order[i]];
  }
}

inline std::string resolve_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

// Allocates and fills tensor.host: outputs are poisoned everywhere; inputs get their init
// pattern (or file) at every logical element; storage no logical element maps to (padding from
// explicit strides) is zero. File paths are relative to base_dir unless absolute.
inline bool fill_host(Tensor& tensor, const std::string& base_dir, std::string* error) {
  tensor.host.assign(tensor.storage_bytes(), 0);
  if (tensor.output) {
    fill_poison(tensor.dtype, tensor.host.data(), tensor.storage_elements());
    return true;
  }
  const int64_t numel = tensor.numel();
  const size_t element_bytes = dtype_bytes(tensor.dtype);
  if (tensor.init.kind == InitKind::file) {
    std::vector<unsigned char> logical;
    const std::string path = resolve_path(base_dir, tensor.init.path);
    if (!load_tensor_file(path, tensor.name.c_str(), tensor.dtype, tensor.rank, tensor.shape, &logical, error))
      return false;
    for (int64_t i = 0; i < numel; ++i)
      std::memcpy(tensor.host.data() + tensor.logical_offset(i) * int64_t(element_bytes),
                  logical.data() + i * int64_t(element_bytes), element_bytes);
    return true;
  }
  if (tensor.init.kind == InitKind::values || tensor.init.kind == InitKind::groups) {
    const std::vector<double> values = listed_values(tensor.init, numel);
    for (int64_t i = 0; i < numel; ++i) encode(tensor.dtype, tensor.host.data(), tensor.logical_offset(i), values[size_t(i)]);
    return true;
  }
  const uint64_t stream = stream_of(tensor.name.c_str());
  parallel_for(numel, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double value = generate_value(tensor.init, stream, i, tensor.rank, tensor.shape);
      encode(tensor.dtype, tensor.host.data(), tensor.logical_offset(i), value);
    }
  });
  return true;
}

// A tensor's expected values from a .npy (op: file's expected outputs, an intermediate's reference
// file), as doubles in logical order: in the tensor's own dtype, or f32 or f64 (a NumPy or PyTorch
// reference in higher precision), with exactly its shape. False with `error` when the file cannot
// be read, `*misfit` set when it holds another shape or dtype.
inline bool load_expected_values(const std::string& path, const Tensor& t, const std::string& what,
                                 std::vector<double>* values, bool* misfit, std::string* error) {
  *misfit = false;
  NpyHeader header;
  if (!peek_npy_header(path, &header, error)) return false;
  DType stored = t.dtype;
  if (!npy_descr_accepted(t.dtype, header.descr))
    stored = npy_descr_accepted(DType::f64, header.descr)   ? DType::f64
             : npy_descr_accepted(DType::f32, header.descr) ? DType::f32
                                                            : t.dtype;
  std::vector<unsigned char> logical;
  if (!load_tensor_file(path, what.c_str(), stored, t.rank, t.shape, &logical, error)) {
    *misfit = true;
    return false;
  }
  values->resize(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) (*values)[size_t(i)] = decode(stored, logical.data(), i);
  return true;
}

// Writes the tensor's logical elements, row-major, as .npy (for --dump and bug reports).
inline bool write_npy(const std::string& path, const Tensor& tensor, const void* storage, std::string* error) {
  const size_t element_bytes = dtype_bytes(tensor.dtype);
  std::vector<unsigned char> logical(size_t(tensor.numel()) * element_bytes);
  const unsigned char* bytes = static_cast<const unsigned char*>(storage);
  for (int64_t i = 0; i < tensor.numel(); ++i)
    std::memcpy(logical.data() + i * int64_t(element_bytes), bytes + tensor.logical_offset(i) * int64_t(element_bytes),
                element_bytes);
  return write_npy(path, tensor.dtype, tensor.rank, tensor.shape, logical.data(), error);
}

}  // namespace repro
