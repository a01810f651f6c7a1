// cross_entropy_bench.cpp - what the fused cross-entropy op buys: the loss
// and its gradient with respect to the logits, as one step, fused
// (nova::nn::cross_entropy: nova.cross_entropy, one row kernel each way)
// against the same math composed of the ops it replaced (log_softmax, a
// one-hot of the labels, their product summed over the classes, the
// negated mean: nova's cross-entropy until 2026-12-03), on this CPU, in one
// run.
//
//   ./cross_entropy_bench [tokens vocabulary ...]
//
// Minimal bytes: the logits read once and their gradient written once
// (8 N V). Both forms are checked against each other (relative 1e-5) and
// timed alternately (a run of one, a run of the other), medians of 20.
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

/// Median seconds of `reps` runs of f and of g, alternating (after 3
/// warm-ups each), so a machine whose speed drifts slows both alike.
template <class F, class G> std::pair<double, double> median_seconds(int reps, F&& f, G&& g) {
  for (int i = 0; i < 3; ++i) {
    f();
    g();
  }
  std::vector<double> tf, tg;
  auto time = [](auto& h) {
    auto t0 = clock_type::now();
    h();
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  for (int i = 0; i < reps; ++i) {
    tf.push_back(time(f));
    tg.push_back(time(g));
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[tf.size() / 2], tg[tg.size() / 2]};
}

auto fused = [](auto z, auto y) {
  nova::Expr<> loss = nova::nn::cross_entropy(z, y);
  return std::vector<nova::Expr<>>{loss, nova::gradients(loss, {z})[0]};
};

auto composed = [](auto z, auto y) {
  nova::Expr<> onehot = nova::one_hot(y, z.dim(-1), z.dtype());
  nova::Expr<> picked = nova::sum(nova::log_softmax(z, -1) * onehot, {-1});
  nova::Expr<> loss = -nova::mean(picked);
  return std::vector<nova::Expr<>>{loss, nova::gradients(loss, {z})[0]};
};

double rel_error(const nova::Tensor& a, const nova::Tensor& b) {
  auto x = a.to_vector(), y = b.to_vector();
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::int64_t, std::int64_t>> cases;
  for (int i = 1; i + 1 < argc; i += 2) cases.push_back({std::atoll(argv[i]), std::atoll(argv[i + 1])});
  if (cases.empty()) cases = {{2048, 256}, {2048, 8192}, {512, 50257}};
  std::printf("cross_entropy_bench: loss + d(logits), f32, median of 20 runs each, alternating; composed = log_softmax, "
              "one-hot, sum, mean\n");
  std::printf("%8s %8s %12s %12s %10s %10s %14s %10s\n", "tokens", "vocab", "fused ms", "composed ms", "fused GB/s",
              "comp. GB/s", "composed/fused", "max diff");
  int status = 0;
  for (auto [n, v] : cases) {
    nova::Tensor z = nova::Tensor::randn({n, v}, 1, nova::DType::f32);
    nova::Tensor y = nova::Tensor::zeros({n}, nova::DType::i32);
    auto labels = y.span<std::int32_t>();
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>((i * 7919 + 13) % v);
    auto f = nova::jit(fused);
    auto c = nova::jit(composed);
    std::vector<nova::Tensor> a = f(z, y), b = c(z, y);
    const double diff = std::max(rel_error(a[0], b[0]), rel_error(a[1], b[1]));
    if (!(diff <= 1e-5)) status = 1;
    auto [tf, tc] = median_seconds(20, [&] { f(z, y); }, [&] { c(z, y); });
    const double bytes = 8.0 * double(n) * double(v);
    std::printf("%8lld %8lld %12.3f %12.3f %10.2f %10.2f %13.3fx %10.1e\n", (long long)n, (long long)v, tf * 1e3,
                tc * 1e3, bytes / tf * 1e-9, bytes / tc * 1e-9, tc / tf, diff);
  }
  return status;
}
