// params.hpp - named parameters owned by Nova, and the usual initialisers.
//
// A Params is an ordered list of (name, Tensor). Order is the order of
// add(); names are unique. A training step updates these tensors in place.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nova/expr/expr.hpp"
#include "nova/tensor.hpp"

namespace nova {

class Params {
 public:
  /// Adds a parameter; throws if the name is taken or the tensor undefined.
  Tensor& add(std::string name, Tensor value) {
    if (find(name) >= 0) throw Error("nova::Params: a parameter named '" + name + "' exists");
    if (!value.defined()) throw Error("nova::Params: parameter '" + name + "' is undefined");
    names_.push_back(std::move(name));
    tensors_.push_back(value.contiguous());
    return tensors_.back();
  }
  Tensor& operator[](std::string_view name) { return tensors_[index(name)]; }
  const Tensor& operator[](std::string_view name) const { return tensors_[index(name)]; }

  std::size_t size() const { return tensors_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  std::vector<Tensor>& tensors() { return tensors_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  /// Total element count.
  std::int64_t numel() const {
    std::int64_t n = 0;
    for (const auto& t : tensors_) n += t.numel();
    return n;
  }
  /// Position of `name`, or -1.
  std::int64_t find(std::string_view name) const {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return static_cast<std::int64_t>(i);
    return -1;
  }

 private:
  std::size_t index(std::string_view name) const {
    std::int64_t i = find(name);
    if (i < 0) throw Error("nova::Params: no parameter named '" + std::string(name) + "'");
    return static_cast<std::size_t>(i);
  }

  std::vector<std::string> names_;
  std::vector<Tensor> tensors_;
};

/// The parameters as the loss function sees them while traced.
class ParamExprs {
 public:
  ParamExprs(const std::vector<std::string>* names, std::vector<Expr<>> values)
      : names_(names), values_(std::move(values)) {}
  const Expr<>& operator[](std::string_view name) const {
    for (std::size_t i = 0; i < names_->size(); ++i)
      if ((*names_)[i] == name) return values_[i];
    throw ShapeError("nova: the loss function asks for a parameter named '" + std::string(name) +
                     "', which does not exist");
  }
  const Expr<>& at(std::size_t i) const { return values_.at(i); }
  std::size_t size() const { return values_.size(); }

 private:
  const std::vector<std::string>* names_;
  std::vector<Expr<>> values_;
};

/// Initialisers; each draws from a seeded generator, so runs are repeatable.
namespace init {

inline Tensor zeros(const Shape& shape, DType dtype = DType::f32) { return Tensor::zeros(shape, dtype); }

inline Tensor normal(const Shape& shape, double stddev, std::uint64_t seed, DType dtype = DType::f32) {
  return Tensor::randn(shape, seed, dtype, stddev);
}

/// Glorot/Xavier uniform for a weight stored [in, out]: U(-a, a), a = sqrt(6 / (in + out)).
inline Tensor xavier_uniform(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32) {
  if (shape.size() != 2) throw ShapeError("nova::init::xavier_uniform: needs a 2-D [in, out] shape");
  double a = std::sqrt(6.0 / double(shape[0] + shape[1]));
  return Tensor::uniform(shape, seed, -a, a, dtype);
}

/// He/Kaiming uniform (ReLU gain) for a weight stored [in, out]: a = sqrt(6 / in).
inline Tensor kaiming_uniform(const Shape& shape, std::uint64_t seed, DType dtype = DType::f32) {
  if (shape.size() != 2) throw ShapeError("nova::init::kaiming_uniform: needs a 2-D [in, out] shape");
  double a = std::sqrt(6.0 / double(shape[0]));
  return Tensor::uniform(shape, seed, -a, a, dtype);
}

} // namespace init
} // namespace nova
