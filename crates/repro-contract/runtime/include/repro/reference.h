// ---------------------------------------------------------------------------------------------
// repro/reference.h: what a custom reference (spec: reference: { op: custom }) sees.
//
// The reference is a host C++ function of yours, in a header the spec names:
//
//   #include <repro/reference.h>
//   inline void column_sum_reference(repro::In X, repro::Out D) {   // one parameter per tensor,
//     for (int64_t n = 0; n < D.shape(0); ++n) {                    // in the spec's order
//       double sum = 0;
//       for (int64_t b = 0; b < X.shape(0); ++b) sum += X(b, n);
//       D(n) = sum;
//     }
//   }
//
// Every tensor arrives as f64 values in logical row-major order, whatever its dtype and strides:
// an input holds exactly the values the kernel reads (a bf16 input's values are bf16 values), an
// integer tensor (row pointers, indices) its integers. Each output must be written completely:
// its elements start as "not written" markers, and a reference that leaves one stops the run.
// An index outside a tensor's shape stops the run too (exit 2), naming the tensor and the index.
//
// The reference is compiled with the runtime's flags (-std=c++17 -O3), never the production
// ones, so no production flag (--use_fast_math, -D...) changes its values.
//
// Outputs computed from other outputs (spec: reference.upstream, `{ Y: [Mean, Rstd] }`): write
// the upstream ones first and read them back, `Y(r, c) = (X(r, c) - Mean(r)) * Rstd(r)`. When an
// output is wrong, the harness calls the reference once more with its upstream outputs given the
// kernel's values: reading Mean(r) then gives the kernel's Mean, and writes to Mean are dropped,
// so Y's second reference says what Y should be from the kernel's own statistics. An output
// element is therefore a value to assign and read (`double m = Mean(r);`), not a `double&`;
// `data()` bypasses this and reads the reference's own values.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <cstdint>
#include <type_traits>

namespace repro {

// One tensor as the runtime hands it over: plain data, so that the reference's translation unit
// and the runtime need agree on nothing else.
struct ReferenceTensor {
  const char* name;
  int rank;
  int64_t shape[4];
  int64_t strides[4];  // in elements of `values`: packed row-major
  double* values;
  bool output;
  // An output given the kernel's values (reference.upstream): every read returns them, and
  // writes are dropped. Null otherwise.
  const double* given;
};

// Stops the run: `tensor` was indexed with `count` indices, the first bad one at `dimension`.
[[noreturn]] void reference_index_error(const ReferenceTensor& tensor, int count, const int64_t* indices,
                                        int dimension);

// One element of an output: assigned (`Y(i) = v`, `Y(i) += v`) and read (`double y = Y(i)`). For
// an output given the kernel's values, reads return the kernel's value and writes are dropped.
class OutputElement {
 public:
  OutputElement(double* slot, const double* given) : slot_(slot), given_(given) {}

  operator double() const { return given_ != nullptr ? *given_ : *slot_; }
  OutputElement& operator=(double value) {
    if (given_ == nullptr) *slot_ = value;
    return *this;
  }
  // `Y(i) = Mean(r)` assigns the value, not the element.
  OutputElement& operator=(const OutputElement& other) { return *this = double(other); }
  OutputElement& operator+=(double value) { return *this = double(*this) + value; }
  OutputElement& operator-=(double value) { return *this = double(*this) - value; }
  OutputElement& operator*=(double value) { return *this = double(*this) * value; }
  OutputElement& operator/=(double value) { return *this = double(*this) / value; }

 private:
  double* slot_;
  const double* given_;
};

// A tensor of f64 values. `Value` is `const double` for inputs (repro::In), `double` for outputs
// (repro::Out), so that a reference cannot write an input.
template <typename Value>
class ReferenceView {
  // What indexing gives: the input's value, or the output's element.
  using Element = typename std::conditional<std::is_const<Value>::value, Value&, OutputElement>::type;

 public:
  explicit ReferenceView(const ReferenceTensor& tensor) : tensor_(&tensor) {}

  const char* name() const { return tensor_->name; }
  int rank() const { return tensor_->rank; }
  int64_t shape(int dimension) const {
    if (dimension < 0 || dimension >= tensor_->rank) {
      const int64_t d = dimension;
      reference_index_error(*tensor_, -1, &d, 0);
    }
    return tensor_->shape[dimension];
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < tensor_->rank; ++d) n *= tensor_->shape[d];
    return n;
  }
  // Every element, row-major.
  Value* data() const { return tensor_->values; }

  // The element at a logical index, one index per dimension; checked against the shape.
  template <typename... Index>
  Element operator()(Index... index) const {
    const int64_t indices[] = {static_cast<int64_t>(index)...};
    constexpr int count = sizeof...(Index);
    if (count != tensor_->rank) reference_index_error(*tensor_, count, indices, -1);
    int64_t offset = 0;
    for (int d = 0; d < count; ++d) {
      if (indices[d] < 0 || indices[d] >= tensor_->shape[d]) reference_index_error(*tensor_, count, indices, d);
      offset += indices[d] * tensor_->strides[d];
    }
    return element(offset);
  }
  template <typename... Index>
  Element at(Index... index) const {
    return (*this)(index...);
  }

 private:
  template <typename V = Value>
  typename std::enable_if<std::is_const<V>::value, Element>::type element(int64_t offset) const {
    return tensor_->values[offset];
  }
  template <typename V = Value>
  typename std::enable_if<!std::is_const<V>::value, Element>::type element(int64_t offset) const {
    return OutputElement(tensor_->values + offset, tensor_->given == nullptr ? nullptr : tensor_->given + offset);
  }

  const ReferenceTensor* tensor_;
};

using In = ReferenceView<const double>;
using Out = ReferenceView<double>;

}  // namespace repro
