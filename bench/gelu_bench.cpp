// gelu_bench.cpp - what GELU (tanh form) and its gradient cost as
// elementwise kernels on this CPU, against a kernel of the same traffic
// that does no arithmetic to speak of (y = 2 x, and dy 2 x for the
// gradient's two inputs), in one run: the ratio is the arithmetic's price.
//
//   ./gelu_bench [rows cols]        (default 256 1024: 1 MiB an operand, cache-resident)
//
// Medians of 15 rounds of 50 calls each, the kernels round robin. Each
// result is checked against float64 (relative 1e-5).
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

using nova::Tensor;

std::vector<double> median_us(const std::vector<std::function<void()>>& fs) {
  for (int i = 0; i < 5; ++i)
    for (auto& f : fs) f();
  std::vector<std::vector<double>> t(fs.size());
  for (int round = 0; round < 15; ++round)
    for (std::size_t k = 0; k < fs.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) fs[k]();
      t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 50 * 1e6);
    }
  std::vector<double> medians;
  for (auto& ts : t) {
    std::sort(ts.begin(), ts.end());
    medians.push_back(ts[ts.size() / 2]);
  }
  return medians;
}

auto gelu = [](auto h) { return nova::gelu(h); };
auto gelu_grad = [](auto h, auto dy) {
  return nova::gradients(nova::sum(nova::gelu(h) * dy), {nova::Expr<>(h)})[0];
};
auto twice = [](auto h) { return h * 2.0; };
auto product = [](auto h, auto dy) { return h * dy * 2.0; };

double worst(const Tensor& got, const std::function<double(std::size_t)>& want) {
  auto g = got.to_vector();
  double w = 0;
  for (std::size_t i = 0; i < g.size(); ++i) w = std::max(w, std::abs(g[i] - want(i)) / std::max(1.0, std::abs(want(i))));
  return w;
}

} // namespace

int main(int argc, char** argv) {
  const std::int64_t rows = argc > 2 ? std::atoll(argv[1]) : 256, cols = argc > 2 ? std::atoll(argv[2]) : 1024;
  Tensor h = Tensor::randn({rows, cols}, 1, nova::DType::f32), dy = Tensor::randn({rows, cols}, 2, nova::DType::f32);
  auto f = nova::jit(gelu);
  auto g = nova::jit(gelu_grad);
  auto t = nova::jit(twice);
  auto p = nova::jit(product);
  const auto hv = h.to_vector(), dv = dy.to_vector();
  const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
  auto ref = [&](std::size_t i) {
    double x = hv[i];
    return 0.5 * x * (1 + std::tanh(c * (x + k * x * x * x)));
  };
  auto ref_grad = [&](std::size_t i) {
    double x = hv[i], th = std::tanh(c * (x + k * x * x * x));
    return dv[i] * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * k * x * x));
  };
  const double e1 = worst(f(h), ref), e2 = worst(g(h, dy), ref_grad);
  if (e1 > 1e-5 || e2 > 1e-5) {
    std::fprintf(stderr, "gelu_bench: off from float64 by %.3e (gelu), %.3e (gradient)\n", e1, e2);
    return 1;
  }
  auto us = median_us({[&] { f(h); }, [&] { t(h); }, [&] { g(h, dy); }, [&] { p(h, dy); }});
  std::printf("gelu_bench: %lldx%lld f32, %s; max error vs float64 %.2e, %.2e\n", (long long)rows, (long long)cols,
              nova::target_from_env().describe().c_str(), e1, e2);
  std::printf("  gelu            %8.1f us   2 x       %8.1f us   ratio %.3f\n", us[0], us[1], us[0] / us[1]);
  std::printf("  gelu gradient   %8.1f us   2 x dy    %8.1f us   ratio %.3f\n", us[2], us[3], us[2] / us[3]);
  std::printf("RESULT gelu_us=%.1f twice_us=%.1f gelu_grad_us=%.1f product_us=%.1f\n", us[0], us[1], us[2], us[3]);
}
