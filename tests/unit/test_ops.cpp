// test_ops.cpp - every op, compiled, against the float64 reference interpreter.
//
// Random inputs from a fresh seed (printed on failure), several shapes per op
// including broadcasting, size-1 dims and rank 0; fp32 results within 1e-5
// normwise of the reference, fp64 results within 1e-12.
#include "testing.hpp"

using nova::DType;
using nova::Shape;
using nova::Tensor;
using namespace nova_test;

namespace {

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{7}, {7}},          {{4, 5}, {5}},       {{3, 1, 6}, {1, 4, 6}},
    {{1}, {2, 3}},       {{}, {3}},           {{2, 3, 4}, {2, 3, 4}},
    {{5, 1}, {1, 1}},    {{1, 1, 1}, {2, 1, 3}},
};

template <class F> void check_binary(F f, bool positive_rhs = false) {
  for (auto [sa, sb] : kBroadcastPairs) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", shapes ", nova::to_string(sa), " and ", nova::to_string(sb),
           ", ", nova::name_of(dt));
      Tensor a = g.randn(sa, dt);
      Tensor b = positive_rhs ? g.positive(sb, dt) : g.randn(sb, dt);
      CHECK(compare(f, a, b) <= (dt == DType::f32 ? kF32Tol : kF64Tol));
    }
  }
}

template <class F> void check_unary(F f, bool positive_input = false, double f32_tol = kF32Tol) {
  for (Shape s : std::vector<Shape>{{}, {1}, {9}, {3, 1, 4}, {2, 3, 5, 2}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", shape ", nova::to_string(s), ", ", nova::name_of(dt));
      Tensor x = positive_input ? g.positive(s, dt) : g.randn(s, dt);
      CHECK(compare(f, x) <= (dt == DType::f32 ? f32_tol : kF64Tol));
    }
  }
}

} // namespace

TEST_CASE("elementwise binary ops with broadcasting") {
  SUBCASE("add") { check_binary([](auto a, auto b) { return a + b; }); }
  SUBCASE("sub") { check_binary([](auto a, auto b) { return nova::sub(a, b); }); }
  SUBCASE("mul") { check_binary([](auto a, auto b) { return a * b; }); }
  SUBCASE("div") { check_binary([](auto a, auto b) { return a / b; }, true); }
  SUBCASE("maximum") { check_binary([](auto a, auto b) { return nova::maximum(a, b); }); }
}

TEST_CASE("elementwise unary ops") {
  SUBCASE("neg") { check_unary([](auto x) { return -x; }); }
  SUBCASE("exp") { check_unary([](auto x) { return nova::exp(x); }); }
  SUBCASE("log") { check_unary([](auto x) { return nova::log(x); }, true); }
  SUBCASE("tanh") { check_unary([](auto x) { return nova::tanh(x); }); }
  SUBCASE("sqrt") { check_unary([](auto x) { return nova::sqrt(x); }, true); }
  SUBCASE("rsqrt") { check_unary([](auto x) { return nova::rsqrt(x); }, true); }
  SUBCASE("relu") { check_unary([](auto x) { return nova::relu(x); }); }
  SUBCASE("gelu tanh") { check_unary([](auto x) { return nova::gelu(x); }); }
  SUBCASE("gelu erf") { check_unary([](auto x) { return nova::gelu(x, nova::GeluApprox::none); }); }
}

TEST_CASE("scalars mix with tensors") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({4, 3});
  CHECK(compare([](auto x) { return 2.0 * x - 0.5 + x / 4.0; }, x) <= kF32Tol);
  CHECK(compare([](auto x) { return 1.0 - x * 3; }, x) <= kF32Tol);
}

TEST_CASE("matmul: 2-D, batched, transposed, size-1 dims") {
  struct Case { Shape a, b; nova::Transpose t; };
  const std::vector<Case> cases = {
      {{4, 8}, {8, 3}, nova::Transpose::none},     {{1, 5}, {5, 1}, nova::Transpose::none},
      {{8, 4}, {8, 3}, nova::Transpose::a},        {{4, 8}, {3, 8}, nova::Transpose::b},
      {{8, 4}, {3, 8}, nova::Transpose::both},     {{2, 3, 6}, {2, 6, 5}, nova::Transpose::none},
      {{2, 2, 3, 4}, {2, 2, 4, 5}, nova::Transpose::none}, {{3, 6, 2}, {3, 5, 6}, nova::Transpose::both},
      {{33, 64}, {64, 17}, nova::Transpose::none},
      // Large enough for the vector kernel, with leftover rows and columns
      // (the column edge a masked tile; below: several slabs of K, N under
      // one vector, a transposed rhs's edge).
      {{13, 40}, {40, 70}, nova::Transpose::none}, {{40, 13}, {70, 40}, nova::Transpose::both},
      {{2, 14, 9}, {2, 9, 35}, nova::Transpose::none}, {{12, 5}, {5, 64}, nova::Transpose::none},
      {{30, 1100}, {1100, 45}, nova::Transpose::none}, {{100, 30}, {30, 3}, nova::Transpose::none},
      {{50, 600}, {21, 600}, nova::Transpose::b},
  };
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", ", nova::to_string(c.a), " x ", nova::to_string(c.b), " t=",
           static_cast<int>(c.t), ", ", nova::name_of(dt));
      Tensor a = g.randn(c.a, dt), b = g.randn(c.b, dt);
      double err = compare([](auto a, auto b, auto t) { return nova::matmul(a, b, t); }, a, b,
                           nova::static_arg(c.t));
      CHECK(err <= (dt == DType::f32 ? kF32Tol : kF64Tol));
    }
  }
}

TEST_CASE("matmul with a transposed lhs computed by elementwise ops: fused into the lhs packing") {
  // nova-fuse-matmul-prologue: the lhs value is computed while it is packed
  // (one and two producer inputs, a reshape between, edge rows, column
  // remainder, batched, a broadcast scalar, and 2401 rows, whose blocks'
  // slabs are over L2: packed a run of row tiles at a time, the last run
  // short; 448 columns, whose slab takes more than half of a 1 MiB L2: one
  // column block, the rows split between the cores); each against the
  // interpreter.
  struct Case { Shape a, b; };
  const std::vector<Case> cases = {
      {{8, 6}, {8, 64}},   {{32, 64}, {32, 48}},  {{33, 60}, {33, 64}}, {{70, 100}, {70, 50}},
      {{2, 9, 14}, {2, 9, 35}}, {{256, 64}, {256, 128}}, {{600, 2401}, {600, 70}}, {{600, 300}, {600, 448}},
  };
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", ", nova::to_string(c.a), " x ", nova::to_string(c.b), ", ", nova::name_of(dt));
      Tensor a = g.randn(c.a, dt), b = g.randn(c.b, dt), a2 = g.randn(c.a, dt);
      double one = compare([](auto a, auto b) { return nova::matmul(nova::gelu(a) * 2.0, b, nova::Transpose::a); },
                           a, b);
      CHECK(one <= (dt == DType::f32 ? kF32Tol : kF64Tol));
      double two = compare(
          [](auto a, auto a2, auto b) { return nova::matmul(nova::tanh(a) * a2 - a2, b, nova::Transpose::a); }, a,
          a2, b);
      CHECK(two <= (dt == DType::f32 ? kF32Tol : kF64Tol));
    }
  }
  // Through a reshape: [2, 16, 24] computed, read as [32, 24].
  Gen g;
  INFO("seed = ", g.seed);
  Tensor a = g.randn({2, 16, 24}), b = g.randn({32, 40});
  double err = compare(
      [](auto a, auto b) { return nova::matmul(nova::reshape(nova::exp(a) + 1.0, {32, 24}), b, nova::Transpose::a); },
      a, b);
  CHECK(err <= kF32Tol);
}

TEST_CASE("matmul with a row-major lhs computed by elementwise ops: packed with the producer applied") {
  // The forward GELU before the MLP's second matmul: the register kernel
  // packs the lhs rows, computing the producer on k-vectors (K not a
  // multiple of the vector, edge rows, column remainder, batched, reshaped;
  // 448 columns in one column block, as in the transposed test above).
  struct Case { Shape a, b; };
  const std::vector<Case> cases = {
      {{6, 8}, {8, 64}}, {{32, 64}, {64, 48}}, {{33, 61}, {61, 64}}, {{70, 100}, {100, 50}},
      {{2, 9, 14}, {2, 14, 35}}, {{256, 96}, {96, 128}}, {{300, 600}, {600, 448}},
  };
  for (const auto& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", ", nova::to_string(c.a), " x ", nova::to_string(c.b), ", ", nova::name_of(dt));
      Tensor a = g.randn(c.a, dt), b = g.randn(c.b, dt);
      double err = compare([](auto a, auto b) { return nova::matmul(nova::gelu(a), b); }, a, b);
      CHECK(err <= (dt == DType::f32 ? kF32Tol : kF64Tol));
    }
  }
  Gen g;
  INFO("seed = ", g.seed);
  Tensor a = g.randn({2, 16, 24}), b = g.randn({24, 40});
  double err = compare(
      [](auto a, auto b) { return nova::matmul(nova::reshape(nova::gelu(a), {32, 24}), b); }, a, b);
  CHECK(err <= kF32Tol);
}

TEST_CASE("matmul epilogue reading the result with its rows split: the result buffer dropped") {
  // The GELU gradient of the MLP backward: (x W) reshaped to [B, T, N]
  // times a [B, T, N] input, as the matmul's epilogue. With K in one slab and
  // whole register tiles the result is never stored and has no buffer
  // (nova-drop-unstored-results); with a column edge (N = 70, or N = 5
  // below one vector) the edge's tile runs it too, its last vector masked,
  // in one slab of K or several (K = 600). Each against the interpreter.
  struct Case { std::int64_t b, t, k, n; };
  for (Case c : std::vector<Case>{{2, 12, 40, 64}, {2, 12, 40, 70}, {4, 7, 33, 128}, {2, 16, 600, 64},
                                  {2, 16, 600, 70}, {3, 5, 9, 5}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", B ", c.b, " T ", c.t, " K ", c.k, " N ", c.n, ", ", nova::name_of(dt));
      Tensor x = g.randn({c.b * c.t, c.k}, dt), w = g.randn({c.k, c.n}, dt), h = g.randn({c.b, c.t, c.n}, dt);
      auto shape = nova::static_arg(std::array<std::int64_t, 3>{c.b, c.t, c.n});
      double err = compare(
          [](auto x, auto w, auto h, std::array<std::int64_t, 3> s) {
            return nova::reshape(nova::matmul(x, w), {s[0], s[1], s[2]}) * nova::tanh(h);
          },
          x, w, h, shape);
      CHECK(err <= (dt == DType::f32 ? kF32Tol : kF64Tol));
    }
  }
}

namespace {
/// Up to two reduction axes as a trivially copyable static argument
/// (axes shape the trace, so they must enter the cache key).
struct Axes {
  std::int64_t n = 0, a = 0, b = 0;
  std::vector<std::int64_t> list() const {
    std::vector<std::int64_t> v{a, b};
    v.resize(static_cast<std::size_t>(n));
    return v;
  }
};
} // namespace

TEST_CASE("reductions over axes, keep_dims or not") {
  const std::vector<std::pair<Shape, Axes>> cases = {
      {{7}, {}},              {{4, 5}, {1, 1}},    {{4, 5}, {1, 0}},   {{3, 1, 6}, {2, 0, 2}},
      {{2, 3, 4}, {1, -1}},   {{2, 3, 4}, {}},     {{1, 1}, {1, 1}},   {{2, 3, 4, 5}, {2, 1, 3}},
  };
  for (const auto& [shape, axes] : cases) {
    for (bool keep : {false, true}) {
      Gen g;
      INFO("seed = ", g.seed, ", shape ", nova::to_string(shape), ", ", axes.n, " axes, keep ",
           keep);
      Tensor x = g.randn(shape);
      auto ax = nova::static_arg(axes);
      auto k = nova::static_arg(keep);
      CHECK(compare([](auto x, Axes a, bool k) { return nova::sum(x, a.list(), k); }, x, ax, k) <=
            kF32Tol);
      CHECK(compare([](auto x, Axes a, bool k) { return nova::mean(x, a.list(), k); }, x, ax, k) <=
            kF32Tol);
      CHECK(compare([](auto x, Axes a, bool k) { return nova::max(x, a.list(), k); }, x, ax, k) ==
            0.0);
    }
  }
}

TEST_CASE("softmax along each axis, with large logits") {
  for (Shape s : std::vector<Shape>{{5}, {3, 4}, {2, 1, 6}, {2, 3, 4}}) {
    for (std::int64_t axis = -1; axis >= -static_cast<std::int64_t>(s.size()); --axis) {
      Gen g;
      INFO("seed = ", g.seed, ", shape ", nova::to_string(s), ", axis ", axis);
      Tensor x = g.randn(s);
      CHECK(compare([](auto x, std::int64_t a) { return nova::softmax(x, a); }, x,
                    nova::static_arg(axis)) <= kF32Tol);
      // exp would overflow fp32 without the max subtraction. The large
      // logits are made in fp32 beforehand, so both sides see the same input.
      Tensor big = Tensor::from<float>(s, [&] {
        std::vector<float> v;
        for (double e : x.to_vector()) v.push_back(static_cast<float>(e * 1000.0 + 500.0));
        return v;
      }());
      CHECK(compare([](auto x, std::int64_t a) { return nova::softmax(x, a); }, big,
                    nova::static_arg(axis)) <= kF32Tol);
    }
  }
}

TEST_CASE("the per-row cross-entropy and its gradient on the CPU: vector rows, odd class counts, ignored labels, large logits") {
  // 64 classes: whole vectors; 37: one lane; [2, 9, 48] viewed as 18 rows.
  auto losses = [](auto x, auto y) { return nova::softmax_cross_entropy(x, y); };
  auto grad = [](auto w, auto x, auto y) {
    return nova::gradients(nova::sum(nova::softmax_cross_entropy(x, y) * w), {x})[0];
  };
  for (Shape s : std::vector<Shape>{{37, 64}, {11, 37}, {2, 9, 48}}) {
    Gen g;
    INFO("seed = ", g.seed, ", logits ", nova::to_string(s));
    Shape rows(s.begin(), s.end() - 1);
    Tensor x = g.randn(s), y = class_labels(rows, s.back()), w = g.randn(rows);
    CHECK(compare(losses, x, y) <= kF32Tol);
    CHECK(compare(grad, w, x, y) <= kF32Tol);
    Tensor big = Tensor::from<float>(s, [&] {
      std::vector<float> v;
      for (double e : x.to_vector()) v.push_back(static_cast<float>(e * 1000.0 + 500.0));
      return v;
    }());
    CHECK(compare(losses, big, y) <= kF32Tol);
    CHECK(compare(grad, w, big, y) <= kF32Tol);
  }
}

TEST_CASE("layout: broadcast, reshape, transpose, permute") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor v = g.randn({3});
  CHECK(compare([](auto v) { return nova::broadcast(v, {2, 4, 3}); }, v) == 0.0);
  Tensor c = g.randn({3, 1});
  CHECK(compare([](auto c) { return nova::broadcast(c, {2, 3, 5}); }, c) == 0.0);
  Tensor x = g.randn({2, 3, 4});
  CHECK(compare([](auto x) { return nova::reshape(x, {6, 4}); }, x) == 0.0);
  CHECK(compare([](auto x) { return nova::reshape(x, {-1}); }, x) == 0.0);
  CHECK(compare([](auto x) { return nova::reshape(x, {4, 1, 3, 2}); }, x) == 0.0);
  Tensor s = g.randn({});
  CHECK(compare([](auto s) { return nova::reshape(s, {1, 1}); }, s) == 0.0);
  Tensor one = g.randn({1, 1});
  CHECK(compare([](auto s) { return nova::reshape(s, {}); }, one) == 0.0);
  CHECK(compare([](auto x) { return nova::transpose(x); }, x) == 0.0);
  CHECK(compare([](auto x) { return nova::permute(x, {2, 0, 1}); }, x) == 0.0);
  // Layout ops keep integer tensors too.
  Tensor ints = Tensor::from<std::int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto t = nova::jit([](auto x) { return nova::transpose(x); })(ints);
  CHECK(t.dtype() == DType::i32);
  CHECK(t.to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("a step may return several results") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({3, 4});
  auto step = nova::jit([](auto x) { return std::make_tuple(nova::exp(x), nova::sum(x), x); });
  auto [e, s, same] = step(x);
  auto xs = x.to_vector();
  double total = 0;
  for (double v : xs) total += v;
  CHECK(s.rank() == 0);
  CHECK(std::abs(s.to_vector()[0] - total) <= 1e-5 * std::max(1.0, std::abs(total)));
  CHECK(same.to_vector() == xs);
  CHECK(std::abs(e.at({1, 2}) - std::exp(x.at({1, 2}))) <= 1e-6 * std::exp(x.at({1, 2})));
}
