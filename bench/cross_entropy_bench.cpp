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
// (8 N V). The fused step is also traced with NOVA_ROW_STATS=0, its
// backward recomputing the rows' max and sum (what nova-share-row-statistics
// saves). All forms are checked against the composed one (relative 1e-5)
// and timed round robin, medians of 20.
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

/// Median seconds of `reps` runs of each of `fs`, round robin (after 3
/// warm-ups each), so a machine whose speed drifts slows all alike.
std::vector<double> median_seconds(int reps, const std::vector<std::function<void()>>& fs) {
  for (int i = 0; i < 3; ++i)
    for (auto& f : fs) f();
  std::vector<std::vector<double>> t(fs.size());
  for (int i = 0; i < reps; ++i)
    for (std::size_t k = 0; k < fs.size(); ++k) {
      auto t0 = clock_type::now();
      fs[k]();
      t[k].push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
  std::vector<double> medians;
  for (auto& ts : t) {
    std::sort(ts.begin(), ts.end());
    medians.push_back(ts[ts.size() / 2]);
  }
  return medians;
}

auto fused = [](auto z, auto y) {
  nova::Expr<> loss = nova::nn::cross_entropy(z, y);
  return std::vector<nova::Expr<>>{loss, nova::gradients(loss, {z})[0]};
};

// The same step under a type of its own: the in-process cache keys a step
// by its C++ type, so this one is traced apart (with NOVA_ROW_STATS=0).
auto fused_recomputing = [](auto z, auto y) { return fused(z, y); };

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
  std::printf("cross_entropy_bench: loss + d(logits), f32, median of 20 runs each, round robin; fused = "
              "nova::nn::cross_entropy (its backward reads the forward's row max and sum), recomputing = the same "
              "traced with NOVA_ROW_STATS=0 (its backward recomputes them), composed = log_softmax, one-hot, sum, "
              "mean\n");
  std::printf("%8s %8s %10s %10s %10s %10s %12s %12s %10s\n", "tokens", "vocab", "fused ms", "recomp. ms",
              "comp. ms", "fused GB/s", "recomp./fused", "comp./fused", "max diff");
  int status = 0;
  for (auto [n, v] : cases) {
    nova::Tensor z = nova::Tensor::randn({n, v}, 1, nova::DType::f32);
    nova::Tensor y = nova::Tensor::zeros({n}, nova::DType::i32);
    auto labels = y.span<std::int32_t>();
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>((i * 7919 + 13) % v);
    auto f = nova::jit(fused);
    auto r = nova::jit(fused_recomputing);
    auto c = nova::jit(composed);
    std::vector<nova::Tensor> a = f(z, y), b = c(z, y);
    // NOVA_ROW_STATS is read when a step is traced: at r's first call.
    setenv("NOVA_ROW_STATS", "0", 1);
    std::vector<nova::Tensor> d = r(z, y);
    unsetenv("NOVA_ROW_STATS");
    const double diff = std::max({rel_error(a[0], b[0]), rel_error(a[1], b[1]), rel_error(d[1], b[1])});
    if (!(diff <= 1e-5)) status = 1;
    std::vector<double> t = median_seconds(20, {[&] { f(z, y); }, [&] { r(z, y); }, [&] { c(z, y); }});
    const double bytes = 8.0 * double(n) * double(v);
    std::printf("%8lld %8lld %10.3f %10.3f %10.3f %10.2f %11.3fx %11.3fx %10.1e\n", (long long)n, (long long)v,
                t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, bytes / t[0] * 1e-9, t[1] / t[0], t[2] / t[0], diff);
  }
  return status;
}
