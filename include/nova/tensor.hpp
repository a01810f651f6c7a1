// tensor.hpp - nova::Tensor, the runtime's n-d array.
//
// A Tensor is a dtype, a shape, strides (in elements) and a shared, 64-byte
// aligned CPU buffer with an element offset. Copies share the buffer (like
// torch.Tensor); clone() copies the data. Compiled steps read contiguous
// inputs and write into Tensors the runtime allocates.
//
// A GPU step that updates a whole tensor in place (a parameter, optimizer
// state) keeps the new values on the device until the host asks for them:
// raw_data() (and so data, span, at, to_vector, ...) copies them back
// first. So take a pointer after the step you want to see: a pointer taken
// before a GPU step does not see that step's update.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nova/dtype.hpp"
#include "nova/error.hpp"
#include "nova/shape.hpp"

namespace nova {

namespace detail {
struct Storage;      // src/runtime/storage.hpp
struct TensorAccess; // the runtime's view of a tensor's storage
} // namespace detail

/// What a tensor is without its data: the unit of shape checking and of
/// compiled-step signatures.
struct TensorSpec {
  DType dtype = DType::f32;
  Shape shape;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

std::string to_string(const TensorSpec& spec); // "f32[4, 3]"

class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised storage of the given dtype and shape.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  /// Normal(0, stddev) samples from a seeded generator (std::mt19937_64).
  static Tensor randn(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32,
                      double stddev = 1.0);
  /// Uniform [lo, hi) samples from a seeded generator.
  static Tensor uniform(const Shape& shape, std::uint64_t seed, double lo, double hi,
                        DType dtype = DType::f32);
  /// Copies `values` (row-major) into a new tensor; the count must match.
  template <element_type T>
  static Tensor from(const Shape& shape, std::span<const T> values);
  template <element_type T>
  static Tensor from(const Shape& shape, std::initializer_list<T> values) {
    return from<T>(shape, std::span<const T>(values.begin(), values.size()));
  }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const { return nova::numel(shape_); }
  std::int64_t offset() const { return offset_; }
  TensorSpec spec() const { return {dtype_, shape_}; }
  bool is_contiguous() const { return strides_ == contiguous_strides(shape_); }

  /// Pointer to the first element (offset applied), its values current
  /// (copied back from a GPU step that updated them in place).
  void* raw_data() const;
  /// Typed access; throws ShapeError if T is not the tensor's dtype.
  template <element_type T> T* data() const {
    check_dtype(dtype_v<T>);
    return static_cast<T*>(raw_data());
  }
  /// The elements of a contiguous tensor as a span.
  template <element_type T> std::span<T> span() const {
    check_contiguous();
    return {data<T>(), static_cast<std::size_t>(numel())};
  }

  /// Element at a multi-index, converted to double (for tests and printing).
  double at(std::span<const std::int64_t> index) const;
  double at(std::initializer_list<std::int64_t> index) const {
    return at(std::span<const std::int64_t>(index.begin(), index.size()));
  }
  /// All elements, row-major, as doubles.
  std::vector<double> to_vector() const;

  /// Deep copy into fresh contiguous storage.
  Tensor clone() const;
  /// This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A view with permuted dims (shares storage; not contiguous in general).
  Tensor permute(std::span<const std::int64_t> dims) const;
  /// Copy converted to another dtype.
  Tensor to(DType dtype) const;

  std::string to_string(int max_elements = 16) const;

 private:
  friend struct detail::TensorAccess;
  void check_dtype(DType want) const;
  void check_contiguous() const;
  /// The storage's host bytes, current (raw_data without the offset).
  std::byte* host_bytes() const;

  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
  std::shared_ptr<detail::Storage> storage_;
};

template <element_type T>
Tensor Tensor::from(const Shape& shape, std::span<const T> values) {
  if (static_cast<std::int64_t>(values.size()) != nova::numel(shape))
    throw ShapeError("nova::Tensor::from: " + std::to_string(values.size()) +
                     " values do not fill shape " + nova::to_string(shape));
  Tensor t = empty(shape, dtype_v<T>);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

} // namespace nova
