// test_tensor.cpp - nova::Tensor, without any compiler involved.
#include <doctest/doctest.h>

#include <nova/tensor.hpp>

#include <cstdint>

using nova::DType;
using nova::Tensor;

TEST_CASE("storage is 64-byte aligned and contiguous") {
  Tensor t = Tensor::zeros({3, 5});
  CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0);
  CHECK(t.is_contiguous());
  CHECK(t.strides() == nova::Shape{5, 1});
  CHECK(t.numel() == 15);
}

TEST_CASE("from/at/to_vector round trip, and dtype conversion") {
  Tensor t = Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(t.at({1, 2}) == 6.0);
  CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  Tensor d = t.to(DType::f64);
  CHECK(d.dtype() == DType::f64);
  CHECK(d.data<double>()[4] == 5.0);
  Tensor i = Tensor::from<std::int32_t>({2}, {7, -3});
  CHECK(i.to(DType::f32).to_vector() == std::vector<double>{7, -3});
}

TEST_CASE("permute is a strided view; contiguous() copies it row-major") {
  Tensor t = Tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<std::int64_t> perm{1, 0};
  Tensor p = t.permute(perm);
  CHECK(p.shape() == nova::Shape{3, 2});
  CHECK_FALSE(p.is_contiguous());
  CHECK(p.at({2, 1}) == 6.0);
  Tensor c = p.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("seeded random tensors are reproducible and differ across seeds") {
  Tensor a = Tensor::randn({100}, 42), b = Tensor::randn({100}, 42), c = Tensor::randn({100}, 43);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
}

TEST_CASE("bad input throws a named error") {
  CHECK_THROWS_AS(Tensor::empty({2, -1}), nova::ShapeError);
  CHECK_THROWS_AS((Tensor::from<float>({2, 2}, {1, 2, 3})), nova::ShapeError);
  Tensor t = Tensor::zeros({2, 2});
  CHECK_THROWS_AS(t.data<double>(), nova::ShapeError);
  CHECK_THROWS_AS(t.at({2, 0}), nova::ShapeError);
  CHECK_THROWS_AS(t.at({0}), nova::ShapeError);
  CHECK_THROWS_AS(Tensor().raw_data(), nova::Error);
  std::vector<std::int64_t> bad{0, 0};
  CHECK_THROWS_AS(t.permute(bad), nova::ShapeError);
}
