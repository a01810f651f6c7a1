// test_train.cpp - nova::train_step: one compiled function per shape set,
// in-place updates, optimizers against double-precision references.
#include "testing.hpp"

using nova::DType;
using nova::Tensor;
using namespace nova_test;

namespace {

auto linear_mse = [](const nova::ParamExprs& p, auto x, auto y) {
  return nova::nn::mse(nova::matmul(x, p["w"]), y);
};

/// dL/dw of mean((x w - y)^2) in double: 2/(N*M) x^T (x w - y).
std::vector<double> mse_grad(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& y, int n, int k, int m) {
  std::vector<double> r(static_cast<std::size_t>(n * m)), g(static_cast<std::size_t>(k * m), 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += x[i * k + p] * w[p * m + j];
      r[i * m + j] = acc - y[i * m + j];
    }
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < m; ++j) {
      double acc = 0;
      for (int i = 0; i < n; ++i) acc += x[i * k + p] * r[i * m + j];
      g[p * m + j] = 2.0 * acc / (n * m);
    }
  return g;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, s = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

} // namespace

TEST_CASE("AdamW matches a double-precision reference after several steps") {
  for (DType dt : {DType::f64, DType::f32}) {
    for (auto mode : {nova::ExecMode::compiled, nova::ExecMode::interpreted}) {
      Gen g;
      INFO("seed = ", g.seed, ", ", nova::name_of(dt), ", mode ", static_cast<int>(mode));
      const int n = 8, k = 5, m = 3;
      Tensor x = g.randn({n, k}, dt), y = g.randn({n, m}, dt);
      nova::Params params;
      params.add("w", g.randn({k, m}, dt));
      nova::AdamW opt{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
      auto step = nova::train_step(linear_mse, params, opt, {.mode = mode});

      // Reference AdamW (torch.optim.AdamW semantics), in double.
      auto xs = x.to_vector(), ys = y.to_vector(), w = params["w"].to_vector();
      std::vector<double> mm(w.size(), 0.0), vv(w.size(), 0.0);
      for (int t = 1; t <= 6; ++t) {
        auto grad = mse_grad(xs, w, ys, n, k, m);
        for (std::size_t i = 0; i < w.size(); ++i) {
          w[i] *= 1 - opt.lr * opt.weight_decay;
          mm[i] = opt.beta1 * mm[i] + (1 - opt.beta1) * grad[i];
          vv[i] = opt.beta2 * vv[i] + (1 - opt.beta2) * grad[i] * grad[i];
          double mh = mm[i] / (1 - std::pow(opt.beta1, t)), vh = vv[i] / (1 - std::pow(opt.beta2, t));
          w[i] -= opt.lr * mh / (std::sqrt(vh) + opt.eps);
        }
        step(x, y);
      }
      CHECK(step.steps() == 6);
      double tol = dt == DType::f64 ? 1e-10 : 1e-5;
      CHECK(max_rel(params["w"].to_vector(), w) <= tol);
      CHECK(max_rel(step.optimizer_state()[0].to_vector(), mm) <= tol * 10);
    }
  }
}

TEST_CASE("SGD with momentum and weight decay matches its reference") {
  Gen g;
  INFO("seed = ", g.seed);
  const int n = 6, k = 4, m = 2;
  Tensor x = g.randn({n, k}, DType::f64), y = g.randn({n, m}, DType::f64);
  nova::Params params;
  params.add("w", g.randn({k, m}, DType::f64));
  nova::SGD opt{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  auto step = nova::train_step(linear_mse, params, opt);
  auto xs = x.to_vector(), ys = y.to_vector(), w = params["w"].to_vector();
  std::vector<double> buf(w.size(), 0.0);
  for (int t = 0; t < 5; ++t) {
    auto grad = mse_grad(xs, w, ys, n, k, m);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double gi = grad[i] + opt.weight_decay * w[i];
      buf[i] = opt.momentum * buf[i] + gi;
      w[i] -= opt.lr * buf[i];
    }
    step(x, y);
  }
  CHECK(max_rel(params["w"].to_vector(), w) <= 1e-12);
}

TEST_CASE("a training step compiles once, runs many times, and the loss falls") {
  nova::clear_cache();
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({32, 4});
  // A learnable target: y = x w* + noise-free.
  Tensor w_true = g.randn({4, 2});
  Tensor y = nova::jit([](auto x, auto w) { return nova::matmul(x, w); })(x, w_true);
  nova::Params params;
  params.add("w", nova::init::xavier_uniform({4, 2}, g.seed));
  auto step = nova::train_step(linear_mse, params, nova::AdamW{.lr = 0.05, .weight_decay = 0.0});
  auto before = nova::cache_stats().compiles;
  double first = step(x, y), last = first;
  for (int i = 0; i < 200; ++i) last = step(x, y);
  CHECK(nova::cache_stats().compiles == before + 1);
  CHECK(last < first * 1e-2);
  // Learning-rate changes do not recompile.
  step.set_lr(0.01);
  step(x, y);
  CHECK(nova::cache_stats().compiles == before + 1);
}

TEST_CASE("gradient clipping by global norm bounds the update") {
  Gen g;
  Tensor x = g.randn({8, 3}, DType::f64), y = g.randn({8, 1}, DType::f64);
  nova::Params params;
  params.add("w", Tensor::full({3, 1}, 100.0, DType::f64));
  Tensor before = params["w"].clone();
  // SGD without momentum: the step is lr * clipped gradient, whose norm <= 0.5.
  auto step = nova::train_step(linear_mse, params, nova::SGD{.lr = 1.0}, {.clip_grad_norm = 0.5});
  step(x, y);
  double norm2 = 0;
  for (int i = 0; i < 3; ++i) norm2 += std::pow(params["w"].at({i, 0}) - before.at({i, 0}), 2);
  CHECK(std::sqrt(norm2) <= 0.5 + 1e-9);
  CHECK(std::sqrt(norm2) >= 0.5 - 1e-6);
}

TEST_CASE("training errors are named, not crashes") {
  Gen g;
  Tensor x = g.randn({4, 3}), y = g.randn({4, 2});
  nova::Params params;
  params.add("w", g.randn({3, 2}));
  SUBCASE("a loss that is not a scalar") {
    auto step = nova::train_step(
        [](const nova::ParamExprs& p, auto x) { return nova::matmul(x, p["w"]); }, params,
        nova::SGD{});
    try {
      step(x);
      FAIL("no error");
    } catch (const nova::ShapeError& e) {
      CHECK(std::string(e.what()).find("loss must be a scalar") != std::string::npos);
    }
  }
  SUBCASE("a gradient asked for an integer tensor") {
    Tensor labels = Tensor::from<std::int32_t>({2}, {1, 0});
    auto f = nova::jit([](auto l) {
      auto s = nova::sum(nova::one_hot(l, 3));
      return nova::gradients(s, {l})[0];
    });
    try {
      f(labels);
      FAIL("no error");
    } catch (const nova::ShapeError& e) {
      CHECK(std::string(e.what()).find("integer tensor") != std::string::npos);
    }
  }
  SUBCASE("a parameter whose shape changed between calls") {
    auto step = nova::train_step(linear_mse, params, nova::AdamW{});
    step(x, y);
    params["w"] = g.randn({3, 5});
    CHECK_THROWS_AS(step(x, y), nova::ShapeError);
  }
  SUBCASE("an unknown parameter name") {
    auto step = nova::train_step(
        [](const nova::ParamExprs& p, auto x) { return nova::sum(x * p["missing"]); }, params,
        nova::SGD{});
    CHECK_THROWS_AS(step(x), nova::ShapeError);
  }
  SUBCASE("a parameter that shares memory with the batch") {
    // Updated in place while read as data: the kernels assume no overlap.
    nova::Params shared;
    shared.add("w", g.randn({4, 4}));
    Tensor alias = shared["w"];
    auto step = nova::train_step(linear_mse, shared, nova::SGD{});
    try {
      step(alias, alias);
      FAIL("no error");
    } catch (const nova::ShapeError& e) {
      CHECK(std::string(e.what()).find("share memory") != std::string::npos);
    }
  }
  SUBCASE("integer parameters") {
    nova::Params ints;
    ints.add("i", Tensor::from<std::int32_t>({2}, {1, 2}));
    CHECK_THROWS_AS(nova::train_step(linear_mse, ints, nova::SGD{}), nova::ShapeError);
  }
}

TEST_CASE("optimizer hyperparameters key the step by value; the learning rate does not") {
  nova::clear_cache();
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({8, 4}), y = g.randn({8, 2});
  nova::Params p1, p2, p3;
  p1.add("w", g.randn({4, 2}));
  p2.add("w", g.randn({4, 2}));
  p3.add("w", g.randn({4, 2}));
  // beta2 = 0.9375: a step no other test compiles.
  auto s1 = nova::train_step(linear_mse, p1, nova::AdamW{.lr = 0.1, .beta2 = 0.9375});
  auto s2 = nova::train_step(linear_mse, p2, nova::AdamW{.lr = 0.001, .beta2 = 0.9375});
  auto s3 = nova::train_step(linear_mse, p3, nova::AdamW{.lr = 0.1, .beta2 = 0.9376});
  CHECK(s1.executable(x, y) == s2.executable(x, y)); // the lr is a runtime input
  CHECK(s1.executable(x, y) != s3.executable(x, y)); // beta2 shapes the trace
  CHECK(s1.stable_key(x, y) == s2.stable_key(x, y));
  CHECK(s1.stable_key(x, y) != s3.stable_key(x, y));
}
