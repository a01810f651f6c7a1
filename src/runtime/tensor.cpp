// tensor.cpp - storage, factories, conversions and printing of nova::Tensor.
//
// Storage comes from detail::allocate_buffer (memory.hpp): 64-byte aligned,
// and huge pages for large tensors.
#include "nova/tensor.hpp"

#include "memory.hpp"
#include "storage.hpp"

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

namespace nova {
namespace {

std::shared_ptr<detail::Storage> allocate(std::size_t bytes) {
  return std::make_shared<detail::Storage>(static_cast<std::byte*>(detail::allocate_buffer(bytes)), bytes);
}

void check_shape(const Shape& shape) {
  for (auto d : shape)
    if (d < 0) throw ShapeError("nova::Tensor: negative extent in shape " + to_string(shape));
}

template <class F> void fill_with(Tensor& t, F&& next) {
  switch (t.dtype()) {
  case DType::f32: for (auto& v : t.span<float>()) v = static_cast<float>(next()); break;
  case DType::f64: for (auto& v : t.span<double>()) v = next(); break;
  case DType::i32: for (auto& v : t.span<std::int32_t>()) v = static_cast<std::int32_t>(next()); break;
  case DType::i64: for (auto& v : t.span<std::int64_t>()) v = static_cast<std::int64_t>(next()); break;
  }
}

double load(const std::byte* p, DType t) {
  switch (t) {
  case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
  case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
  case DType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return static_cast<double>(v); }
  case DType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

void store(std::byte* p, DType t, double v) {
  switch (t) {
  case DType::f32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
  case DType::f64: std::memcpy(p, &v, 8); break;
  case DType::i32: { auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
  case DType::i64: { auto x = static_cast<std::int64_t>(v); std::memcpy(p, &x, 8); break; }
  }
}

/// Calls f(element offset) for every element of `t`, row-major.
template <class F> void for_each_offset(const Tensor& t, F&& f) {
  std::int64_t n = t.numel();
  if (n == 0) return;
  std::vector<std::int64_t> idx(t.shape().size(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t off = t.offset();
    for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    f(off);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

} // namespace

detail::Storage::~Storage() { detail::free_buffer(bytes); }

void detail::Storage::copy_back(const DeviceHolder* holder) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!held_.load(std::memory_order_relaxed) || (holder && holder_ != holder)) return;
  holder_->copy_to_host(device_, bytes, size);
  held_.store(false, std::memory_order_release);
  holder_ = nullptr;
}

std::string to_string(const TensorSpec& spec) {
  return std::string(name_of(spec.dtype)) + to_string(spec.shape);
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  check_shape(shape);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.storage_ = allocate(static_cast<std::size_t>(nova::numel(shape)) * size_of(dtype));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.storage_->bytes, 0, static_cast<std::size_t>(t.numel()) * size_of(dtype));
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  fill_with(t, [&] { return value; });
  return t;
}

Tensor Tensor::randn(const Shape& shape, std::uint64_t seed, DType dtype, double stddev) {
  Tensor t = empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  fill_with(t, [&] { return dist(gen); });
  return t;
}

Tensor Tensor::uniform(const Shape& shape, std::uint64_t seed, double lo, double hi, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  fill_with(t, [&] { return dist(gen); });
  return t;
}

std::byte* Tensor::host_bytes() const {
  if (!storage_) throw Error("nova::Tensor: the tensor is undefined (default-constructed)");
  return storage_->host();
}

void* Tensor::raw_data() const { return host_bytes() + offset_ * static_cast<std::int64_t>(size_of(dtype_)); }

void Tensor::check_dtype(DType want) const {
  if (want != dtype_)
    throw ShapeError("nova::Tensor: element access as " + std::string(name_of(want)) +
                     " but the tensor is " + nova::to_string(spec()));
}

void Tensor::check_contiguous() const {
  if (!is_contiguous())
    throw ShapeError("nova::Tensor: span() needs a contiguous tensor; call contiguous() first");
}

double Tensor::at(std::span<const std::int64_t> index) const {
  if (index.size() != shape_.size())
    throw ShapeError("nova::Tensor::at: " + std::to_string(index.size()) +
                     " indices for shape " + nova::to_string(shape_));
  std::int64_t off = offset_;
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d])
      throw ShapeError("nova::Tensor::at: index out of range for shape " + nova::to_string(shape_));
    off += index[d] * strides_[d];
  }
  return load(host_bytes() + off * static_cast<std::int64_t>(size_of(dtype_)), dtype_);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(numel()));
  auto elem = static_cast<std::int64_t>(size_of(dtype_));
  const std::byte* bytes = host_bytes();
  for_each_offset(*this, [&](std::int64_t off) { out.push_back(load(bytes + off * elem, dtype_)); });
  return out;
}

Tensor Tensor::clone() const { return to(dtype_); }

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType dtype) const {
  Tensor out = empty(shape_, dtype);
  auto src_elem = static_cast<std::int64_t>(size_of(dtype_));
  auto dst_elem = static_cast<std::int64_t>(size_of(dtype));
  std::int64_t k = 0;
  const std::byte* bytes = host_bytes();
  for_each_offset(*this, [&](std::int64_t off) {
    store(out.storage_->bytes + (k++) * dst_elem, dtype, load(bytes + off * src_elem, dtype_));
  });
  return out;
}

Tensor Tensor::permute(std::span<const std::int64_t> dims) const {
  if (dims.size() != shape_.size())
    throw ShapeError("nova::Tensor::permute: " + std::to_string(dims.size()) + " dims for shape " +
                     nova::to_string(shape_));
  Tensor t = *this;
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto d = dims[i];
    if (d < 0 || d >= rank() || seen[static_cast<std::size_t>(d)])
      throw ShapeError("nova::Tensor::permute: not a permutation of " + std::to_string(rank()) + " dims");
    seen[static_cast<std::size_t>(d)] = true;
    t.shape_[i] = shape_[static_cast<std::size_t>(d)];
    t.strides_[i] = strides_[static_cast<std::size_t>(d)];
  }
  return t;
}

std::string Tensor::to_string(int max_elements) const {
  std::ostringstream os;
  os << "Tensor(" << nova::to_string(spec());
  if (defined()) {
    auto v = to_vector();
    os << ", [";
    for (std::size_t i = 0; i < v.size() && static_cast<int>(i) < max_elements; ++i)
      os << (i ? ", " : "") << v[i];
    if (static_cast<int>(v.size()) > max_elements) os << ", ...";
    os << "]";
  }
  os << ")";
  return os.str();
}

} // namespace nova
