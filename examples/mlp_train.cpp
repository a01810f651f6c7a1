// mlp_train.cpp - train an MLP classifier; forward, backward and AdamW update
// run as one compiled function per step.
//
//   ./mlp_train            1500 steps (a few seconds on 2 cores)
//   ./mlp_train --short    300 steps (used as a test)
//
// The task is synthetic, seeded and learnable: 20-dimensional Gaussian
// inputs labelled by a fixed random "teacher" network (4 classes). Every
// step draws a fresh batch (seeded by the step number); the student is
// scored on 2048 held-out examples.
#include <nova/nova.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace {

constexpr std::int64_t kIn = 20, kHidden = 128, kClasses = 4;

/// The student: logits = gelu(x w1 + b1) w2 + b2.
template <class P, class X> nova::Expr<> logits(const P& w1, const P& b1, const P& w2, const P& b2, const X& x) {
  return nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2;
}

/// Labels from a fixed random teacher: argmax(tanh(x a) b).
nova::Tensor teacher_labels(const nova::Tensor& x) {
  nova::Tensor a = nova::Tensor::randn({kIn, 32}, 1001, nova::DType::f32, 0.15);
  nova::Tensor b = nova::Tensor::randn({32, kClasses}, 1002);
  nova::Tensor scores = nova::jit([](auto x, auto a, auto b) {
    return nova::matmul(nova::tanh(nova::matmul(x, a)), b);
  })(x, a, b);
  std::int64_t n = x.shape()[0];
  nova::Tensor labels = nova::Tensor::empty({n}, nova::DType::i32);
  auto s = scores.span<float>();
  auto l = labels.span<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < kClasses; ++c)
      if (s[i * kClasses + c] > s[i * kClasses + best]) best = c;
    l[i] = best;
  }
  return labels;
}

double accuracy(const nova::Tensor& scores, const nova::Tensor& labels) {
  auto s = scores.span<float>();
  auto l = labels.span<std::int32_t>();
  std::int64_t n = labels.numel(), right = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < kClasses; ++c)
      if (s[i * kClasses + c] > s[i * kClasses + best]) best = c;
    right += best == l[i];
  }
  return double(right) / double(n);
}

} // namespace

int main(int argc, char** argv) {
  bool short_run = argc > 1 && std::strcmp(argv[1], "--short") == 0;
  const int steps = short_run ? 300 : 1500;
  const std::int64_t batch = 128, n_test = 2048;

  nova::Tensor x_test = nova::Tensor::randn({n_test, kIn}, 2);
  nova::Tensor y_test = teacher_labels(x_test);

  nova::Params params;
  params.add("w1", nova::init::kaiming_uniform({kIn, kHidden}, 11));
  params.add("b1", nova::init::zeros({kHidden}));
  params.add("w2", nova::init::xavier_uniform({kHidden, kClasses}, 12));
  params.add("b2", nova::init::zeros({kClasses}));

  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y) {
        return nova::nn::cross_entropy(logits(p["w1"], p["b1"], p["w2"], p["b2"], x), y);
      },
      params, nova::AdamW{.lr = 1e-2, .weight_decay = 1e-4});
  auto evaluate = nova::jit([](auto x, auto w1, auto b1, auto w2, auto b2) {
    return logits(w1, b1, w2, b2, x);
  });
  auto test_accuracy = [&] {
    return accuracy(evaluate(x_test, params["w1"], params["b1"], params["w2"], params["b2"]), y_test);
  };

  std::printf("mlp_train: %lld -> %lld -> %lld, batch %lld, %d steps, AdamW\n", (long long)kIn,
              (long long)kHidden, (long long)kClasses, (long long)batch, steps);
  std::printf("  initial test accuracy %.3f (chance 0.25)\n", test_accuracy());
  auto t0 = std::chrono::steady_clock::now();
  double loss = 0, first_loss = 0;
  for (int s = 0; s < steps; ++s) {
    nova::Tensor x = nova::Tensor::randn({batch, kIn}, 1000 + static_cast<std::uint64_t>(s));
    loss = step(x, teacher_labels(x));
    if (s == 0) first_loss = loss;
    if ((s + 1) % (steps / 5) == 0) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("  step %5d  loss %.4f  test accuracy %.3f  %.0f steps/s\n", s + 1, loss,
                  test_accuracy(), (s + 1) / secs);
    }
  }
  double acc = test_accuracy();
  auto stats = nova::cache_stats();
  std::printf("  final: loss %.4f (from %.4f), test accuracy %.3f; %llu compiles (%llu steps "
              "loaded from the disk cache) for %d steps\n",
              loss, first_loss, acc, (unsigned long long)stats.compiles,
              (unsigned long long)stats.disk_hits, steps);
  bool ok = acc > (short_run ? 0.88 : 0.92) && loss < first_loss * 0.5;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
