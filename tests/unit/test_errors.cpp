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
/// Whether `msg` names this file's `line` ("test_errors.cpp:<line>" at the end
/// of a line of the message, so 20 does not match 209).
bool names_line(const std::string& msg, int line) {
  std::string at = "test_errors.cpp:" + std::to_string(line);
  for (std::size_t p = msg.find(at); p != std::string::npos; p = msg.find(at, p + 1))
    if (p + at.size() == msg.size() || msg[p + at.size()] == '\n') return true;
  return false;
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
  CHECK(names_line(msg, __LINE__ - 5));
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
  auto msg = shape_error([&] { nova::jit([](auto a, auto b) { return nova::add(a, b); })(a, b); });
  CHECK(contains(msg, "nova.add"));
  CHECK(contains(msg, "f32[4, 3]"));
  CHECK(contains(msg, "f32[4, 2]"));
  CHECK(names_line(msg, __LINE__ - 4));
}

TEST_CASE("an operator's error names the operator's line, not the step's") {
  Gen g;
  Tensor a = g.randn({3, 4}), b = g.randn({4, 3});
  auto step = nova::jit([](auto a, auto b) {
    auto c = nova::exp(a);
    return c + b; // the error's line
  });
  const int plus_line = __LINE__ - 2;
  auto msg = shape_error([&] { step(a, b); });
  INFO(msg);
  CHECK(contains(msg, "nova.add: cannot broadcast f32[3, 4] with f32[4, 3]"));
  CHECK(names_line(msg, plus_line));
  // Both operands results of other ops (no copies): the line of the op that
  // made the right one.
  msg = shape_error([&] {
    nova::jit([](auto a, auto b) {
      return (a * 2.0) -
             nova::tanh(b);
    })(a, b);
  });
  INFO(msg);
  CHECK(contains(msg, "nova.sub: cannot broadcast"));
  CHECK(names_line(msg, __LINE__ - 5));
  // A scalar on the left, an operand that does not broadcast on the right.
  msg = shape_error([&] {
    nova::jit([](auto a, auto b) {
      auto s = 1.0 / a;
      return s * b;
    })(a, b);
  });
  INFO(msg);
  CHECK(contains(msg, "nova.mul: cannot broadcast"));
  CHECK(names_line(msg, __LINE__ - 5));
}

TEST_CASE("losses check their own operands and name themselves, the shapes and the line") {
  Gen g;
  Tensor logits = g.randn({8, 4}), labels = Tensor::zeros({7}, nova::DType::i32);
  auto msg = shape_error([&] {
    nova::jit([](auto l, auto y) { return nova::nn::cross_entropy(l, y); })(logits, labels);
  });
  CHECK(contains(msg, "nova::nn::cross_entropy: labels i32[7] must have the logits' shape f32[8, 4]"));
  CHECK(names_line(msg, __LINE__ - 3));
  msg = shape_error([&] {
    nova::jit([](auto l, auto y) { return nova::nn::cross_entropy(l, y); })(logits, g.randn({8}));
  });
  CHECK(contains(msg, "labels must be i32 or i64 class indices, got f32[8]"));
  msg = shape_error([&] {
    nova::jit([](auto p, auto t) { return nova::nn::mse(p, t); })(g.randn({4, 1}), g.randn({4}));
  });
  CHECK(contains(msg, "nova::nn::mse: prediction f32[4, 1] and target f32[4] must have one shape"));
  CHECK(names_line(msg, __LINE__ - 3));
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

TEST_CASE("a parameter swapped after the step was made names the parameter, both shapes and the step's line") {
  Gen g;
  nova::Params params;
  params.add("w", g.randn({3, 2}));
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x) { return nova::mean(nova::matmul(x, p["w"])); }, params,
      nova::SGD{.lr = 0.1});
  const int step_line = __LINE__ - 3;
  Tensor x = g.randn({4, 3});
  step(x);
  params["w"] = g.randn({2, 2});
  auto msg = shape_error([&] { step(x); });
  INFO(msg);
  CHECK(contains(msg, "parameter 'w' was f32[3, 2] when the optimizer state was created, now f32[2, 2]"));
  CHECK(contains(msg, "the step is declared at "));
  CHECK(names_line(msg, step_line));
  // A batch tensor that is also a parameter, which the step updates in place.
  params["w"] = g.randn({3, 3});
  auto square = nova::train_step(
      [](const nova::ParamExprs& p, auto x) { return nova::mean(nova::matmul(x, p["w"])); }, params,
      nova::SGD{.lr = 0.1});
  const int square_line = __LINE__ - 3;
  msg = shape_error([&] { square(params["w"]); });
  INFO(msg);
  CHECK(contains(msg, "share memory, and one of them is updated in place"));
  CHECK(contains(msg, "the step is declared at "));
  CHECK(names_line(msg, square_line));
}
