// test_cache.cpp - one trace and one compile per key; hits do neither.
#include "testing.hpp"

#include <cstring>
#include <thread>

using nova::Tensor;
using namespace nova_test;

namespace {
auto mlp_step = [](auto x, auto w1, auto b1, auto w2, auto b2) {
  return nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2;
};
} // namespace

TEST_CASE("repeated calls compile once; new shapes compile again") {
  nova::clear_cache();
  Gen g;
  auto step = nova::jit(mlp_step);
  Tensor x = g.randn({4, 8}), w1 = g.randn({8, 16}), b1 = g.randn({16}), w2 = g.randn({16, 2}),
         b2 = g.randn({2});
  Tensor y1 = step(x, w1, b1, w2, b2);
  Tensor y2 = step(x, w1, b1, w2, b2);
  Tensor y3 = step(x, w1, b1, w2, b2);
  auto s = nova::cache_stats();
  CHECK(s.traces == 1);
  CHECK(s.compiles == 1);
  CHECK(s.hits == 2);
  CHECK(y1.to_vector() == y3.to_vector());

  // A new batch size is a new key.
  Tensor x2 = g.randn({9, 8});
  Tensor y4 = step(x2, w1, b1, w2, b2);
  CHECK(y4.shape() == nova::Shape{9, 2});
  CHECK(nova::cache_stats().compiles == 2);
  step(x2, w1, b1, w2, b2);
  CHECK(nova::cache_stats().compiles == 2);

  // A new dtype is a new key too.
  auto f64 = [](const Tensor& t) { return t.to(nova::DType::f64); };
  step(f64(x), f64(w1), f64(b1), f64(w2), f64(b2));
  CHECK(nova::cache_stats().compiles == 3);

  // Another jit object of the same step type shares the entries.
  auto again = nova::jit(mlp_step);
  again(x, w1, b1, w2, b2);
  CHECK(nova::cache_stats().compiles == 3);
}

TEST_CASE("a changed static argument recompiles; the same value hits") {
  nova::clear_cache();
  Gen g;
  // The layer count shapes the trace: it must be part of the key.
  auto step = nova::jit([](auto x, int layers) {
    auto h = nova::Expr<>(x);
    for (int i = 0; i < layers; ++i) h = nova::tanh(h);
    return h;
  });
  Tensor x = g.randn({5});
  Tensor one = step(x, nova::static_arg(1));
  Tensor three = step(x, nova::static_arg(3));
  CHECK(nova::cache_stats().compiles == 2);
  step(x, nova::static_arg(3));
  CHECK(nova::cache_stats().compiles == 2);
  double v = x.at({2});
  CHECK(std::abs(one.at({2}) - std::tanh(v)) < 1e-6);
  CHECK(std::abs(three.at({2}) - std::tanh(std::tanh(std::tanh(v)))) < 1e-6);

  // Strings are static arguments too.
  auto named = nova::jit([](auto x, std::string act) {
    return act == "relu" ? nova::relu(x) : nova::tanh(x);
  });
  named(x, nova::static_arg(std::string("relu")));
  Tensor t = named(x, nova::static_arg(std::string("tanh")));
  CHECK(nova::cache_stats().compiles == 4);
  CHECK(std::abs(t.at({2}) - std::tanh(v)) < 1e-6);
}

TEST_CASE("compiled and interpreted executables are different entries") {
  nova::clear_cache();
  Gen g;
  Tensor x = g.randn({3});
  auto f = [](auto x) { return nova::exp(x); };
  nova::jit(f)(x);
  nova::jit(f, nova::ExecMode::interpreted)(x);
  CHECK(nova::cache_stats().compiles == 2);
  CHECK(nova::cache_stats().entries == 2);
}

TEST_CASE("non-contiguous inputs are accepted (copied to contiguous)") {
  Gen g;
  Tensor x = g.randn({3, 4});
  std::vector<std::int64_t> perm{1, 0};
  Tensor xt = x.permute(perm);
  Tensor y = nova::jit([](auto x) { return x * 2.0; })(xt);
  CHECK(y.shape() == nova::Shape{4, 3});
  CHECK(y.at({3, 1}) == doctest::Approx(2 * x.at({1, 3})));
}

TEST_CASE("steps can be called from several threads at once") {
  Gen g;
  INFO("seed = ", g.seed);
  auto step = nova::jit([](auto x, auto w) { return nova::tanh(nova::matmul(x, w)); });
  Tensor w = g.randn({16, 8});
  std::vector<Tensor> xs;
  for (int t = 0; t < 4; ++t) xs.push_back(g.randn({32, 16}));
  std::vector<Tensor> want;
  for (const auto& x : xs) want.push_back(nova::jit([](auto x, auto w) { return nova::tanh(nova::matmul(x, w)); },
                                                    nova::ExecMode::interpreted)(x, w));
  std::vector<double> worst(4, 0.0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) worst[t] = std::max(worst[t], rel_error(step(xs[t], w), want[t]));
    });
  for (auto& th : threads) th.join();
  for (double e : worst) CHECK(e <= kF32Tol);
}

TEST_CASE("the stable key: equal for equal steps, different for two step types of equal shapes") {
  Tensor x = Tensor::randn({6, 4}, 5), w = Tensor::randn({4, 3}, 6);
  auto a = nova::jit([](auto x, auto w) { return nova::matmul(x, w); });
  auto b = nova::jit([](auto x, auto w) { return nova::matmul(x, w) * 1.0; });
  CHECK(a.stable_key(x, w) == a.stable_key(x, w));
  CHECK(a.stable_key(x, w) != b.stable_key(x, w));
  // Shapes and static values are part of it; tensor values are not.
  CHECK(a.stable_key(x, w) == a.stable_key(Tensor::zeros({6, 4}), Tensor::zeros({4, 3})));
  CHECK(a.stable_key(x, w) != a.stable_key(Tensor::zeros({7, 4}), w));
  auto s = nova::jit([](auto x, double k) { return x * k; });
  CHECK(s.stable_key(x, nova::static_arg(2.0)) == s.stable_key(x, nova::static_arg(2.0)));
  CHECK(s.stable_key(x, nova::static_arg(2.0)) != s.stable_key(x, nova::static_arg(3.0)));
  // (Equal in two processes: tests/cache/disk_cache.sh.)
}

TEST_CASE("static arguments are keyed by value, structs member by member") {
  nova::clear_cache();
  Tensor x = Tensor::randn({2, 3}, 8);
  auto step = nova::jit([](auto x, nova::nn::GPTConfig c) { return x * double(c.layers); });
  nova::nn::GPTConfig c1, c2;
  // Same members, different padding bytes: one entry.
  std::memset(static_cast<void*>(&c1), 0xab, sizeof c1);
  std::memset(static_cast<void*>(&c2), 0x00, sizeof c2);
  c1 = nova::nn::GPTConfig{};
  c2 = nova::nn::GPTConfig{};
  step(x, nova::static_arg(c1));
  step(x, nova::static_arg(c2));
  CHECK(nova::cache_stats().entries == 1);
  c2.dropout = 0.25;
  step(x, nova::static_arg(c2));
  CHECK(nova::cache_stats().entries == 2);
}

TEST_CASE("threads that miss on one key together compile it once") {
  nova::clear_cache();
  Tensor x = Tensor::randn({64, 64}, 9);
  // A step of its own, so no earlier test compiled it.
  auto step = nova::jit([](auto x) { return nova::tanh(nova::matmul(x, x)) + 0.125; });
  std::vector<std::thread> threads;
  std::vector<Tensor> results(6);
  for (int t = 0; t < 6; ++t) threads.emplace_back([&, t] { results[t] = step(x); });
  for (auto& th : threads) th.join();
  auto s = nova::cache_stats();
  CHECK(s.traces == 1);
  CHECK(s.compiles + s.disk_hits == 1);
  CHECK(s.entries == 1);
  for (const auto& r : results) CHECK(r.to_vector() == results[0].to_vector());
}
