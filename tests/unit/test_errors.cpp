// test_errors.cpp - bad input gives a named exception, never a crash.
#include "testing.hpp"

#include <optional>

#include <string>

using nova::Tensor;
using namespace nova_test;

namespace {
/// The message of the ShapeError `f` throws (fails the test if none).
template <class F> std::string shape_error(F&& f) {
  try {
    f();
  } catch (const nova::ShapeError& e) {
    return e.what();
  }
  FAIL("no nova::ShapeError thrown");
  return {};
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
} // namespace

TEST_CASE("mismatched contraction dims name the op, both shapes and the line") {
  Gen g;
  Tensor a = g.randn({4, 8}), b = g.randn({7, 3});
  auto msg = shape_error([&] { nova::jit([](auto a, auto b) { return nova::matmul(a, b); })(a, b); });
  CHECK(contains(msg, "nova.matmul"));
  CHECK(contains(msg, "8 vs 7"));
  CHECK(contains(msg, "4x8xf32"));
  CHECK(contains(msg, "7x3xf32"));
  CHECK(contains(msg, "test_errors.cpp:"));
}

TEST_CASE("wrong rank for matmul") {
  Gen g;
  Tensor a = g.randn({8}), b = g.randn({8, 3});
  auto msg = shape_error([&] { nova::jit([](auto a, auto b) { return nova::matmul(a, b); })(a, b); });
  CHECK(contains(msg, "rank"));
}

TEST_CASE("shapes that do not broadcast") {
  Gen g;
  Tensor a = g.randn({4, 3}), b = g.randn({4, 2});
  auto msg = shape_error([&] { nova::jit([](auto a, auto b) { return a + b; })(a, b); });
  CHECK(contains(msg, "nova.add"));
  CHECK(contains(msg, "f32[4, 3]"));
  CHECK(contains(msg, "f32[4, 2]"));
  CHECK(contains(msg, "test_errors.cpp:"));
}

TEST_CASE("losses check their own operands and name themselves, the shapes and the line") {
  Gen g;
  Tensor logits = g.randn({8, 4}), labels = Tensor::zeros({7}, nova::DType::i32);
  auto msg = shape_error([&] {
    nova::jit([](auto l, auto y) { return nova::nn::cross_entropy(l, y); })(logits, labels);
  });
  CHECK(contains(msg, "nova::nn::cross_entropy: labels i32[7] must have the logits' shape f32[8, 4]"));
  CHECK(contains(msg, "test_errors.cpp:"));
  msg = shape_error([&] {
    nova::jit([](auto l, auto y) { return nova::nn::cross_entropy(l, y); })(logits, g.randn({8}));
  });
  CHECK(contains(msg, "labels must be i32 or i64 class indices, got f32[8]"));
  msg = shape_error([&] {
    nova::jit([](auto p, auto t) { return nova::nn::mse(p, t); })(g.randn({4, 1}), g.randn({4}));
  });
  CHECK(contains(msg, "nova::nn::mse: prediction f32[4, 1] and target f32[4] must have one shape"));
  CHECK(contains(msg, "test_errors.cpp:"));
}

TEST_CASE("mixed dtypes") {
  Gen g;
  Tensor a = g.randn({3}), b = g.randn({3}, nova::DType::f64);
  auto msg = shape_error([&] { nova::jit([](auto a, auto b) { return a * b; })(a, b); });
  CHECK(contains(msg, "nova.mul"));
  CHECK(contains(msg, "3xf32"));
  CHECK(contains(msg, "3xf64"));
}

TEST_CASE("float-only ops reject integer tensors") {
  Tensor i = Tensor::from<std::int32_t>({2}, {1, 2});
  auto msg = shape_error([&] { nova::jit([](auto x) { return nova::exp(x); })(i); });
  CHECK(contains(msg, "nova.exp"));
}

TEST_CASE("bad axes, reshapes and permutations") {
  Gen g;
  Tensor x = g.randn({2, 3});
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::sum(x, {2}); })(x); }),
                 "out of range"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::sum(x, {0, -2}); })(x); }),
                 "repeated axis"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::reshape(x, {4, 2}); })(x); }),
                 "nova.reshape"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::reshape(x, {-1, 4}); })(x); }),
                 "nova.reshape"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::permute(x, {0, 0}); })(x); }),
                 "nova.transpose"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::softmax(x, 3); })(x); }),
                 "nova.softmax"));
  CHECK(contains(shape_error([&] { nova::jit([](auto x) { return nova::broadcast(x, {3, 3}); })(x); }),
                 "nova.broadcast"));
}

TEST_CASE("a typed parameter checks the traced rank and dtype") {
  Gen g;
  Tensor v = g.randn({3});
  auto msg = shape_error([&] {
    nova::jit([](nova::Matrix<float> m) { return nova::transpose(m); })(v);
  });
  CHECK(contains(msg, "rank-2"));
  Tensor d = g.randn({3, 3}, nova::DType::f64);
  msg = shape_error([&] { nova::jit([](nova::Matrix<float> m) { return nova::transpose(m); })(d); });
  CHECK(contains(msg, "f32"));
}

namespace {
std::optional<nova::Expr<>> kept_expr; // a global, so the step captures nothing
} // namespace

TEST_CASE("undefined tensors and expressions outside a trace") {
  Tensor undefined;
  CHECK_THROWS_AS(nova::jit([](auto x) { return -x; })(undefined), nova::ShapeError);
  // Building an expression when no step is being traced is a named error,
  // not a crash or a dangling graph.
  CHECK_THROWS_WITH(nova::causal_mask(2, 2),
                    doctest::Contains("can only be built while a step is traced"));
  // An expression kept from a trace and used after the trace ended is
  // refused the same way.
  nova::jit([](auto x) {
    kept_expr.emplace(x + 1.0);
    return x;
  })(Tensor::zeros({2}));
  REQUIRE(kept_expr.has_value());
  CHECK_THROWS_WITH(*kept_expr + *kept_expr, doctest::Contains("can only be built while a step is traced"));
  kept_expr.reset();
}

TEST_CASE("empty tensors (a zero extent) run and produce empty results") {
  Tensor e = Tensor::zeros({0, 3});
  Tensor y = nova::jit([](auto x) { return nova::exp(x) + 1.0; })(e);
  CHECK(y.shape() == nova::Shape{0, 3});
  Tensor w = Tensor::zeros({3, 2});
  Tensor z = nova::jit([](auto a, auto b) { return nova::matmul(a, b); })(e, w);
  CHECK(z.shape() == nova::Shape{0, 2});
  // An empty contraction sums nothing: zeros.
  Tensor a = Tensor::zeros({2, 0}), b = Tensor::zeros({0, 3});
  Tensor c = nova::jit([](auto a, auto b) { return nova::matmul(a, b); })(a, b);
  CHECK(c.to_vector() == std::vector<double>(6, 0.0));
}

TEST_CASE("calling an executable with the wrong inputs is an error, not a crash") {
  Gen g;
  Tensor x = g.randn({3});
  // The compiled executable itself, reached without the jit wrapper.
  auto exe = nova::jit([](auto x) { return x + x; }).executable(x);
  CHECK(exe->kind() == "cpu");
  std::vector<Tensor> inputs{g.randn({4})};
  CHECK_THROWS_AS((*exe)(inputs), nova::ShapeError);
  CHECK_THROWS_AS((*exe)(std::vector<Tensor>{}), nova::ShapeError);
  std::vector<Tensor> wrong_dtype{g.randn({3}, nova::DType::f64)};
  CHECK_THROWS_AS((*exe)(wrong_dtype), nova::ShapeError);
}
