// mlp_forward.cpp - a two-layer MLP forward pass, traced, compiled and cached.
//
//   ./mlp_forward            batch 256, 784 -> 512 -> 10, 20 calls
//   ./mlp_forward --short    a small, fast configuration (used as a test)
//
// Prints the first call (trace + compile + run), a cache-hit call, the
// cache counters, and the largest deviation from the float64 reference
// interpreter on the same inputs.
#include <nova/nova.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

auto mlp = [](auto x, auto w1, auto b1, auto w2, auto b2) {
  return nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2;
};

} // namespace

int main(int argc, char** argv) {
  bool short_run = argc > 1 && std::strcmp(argv[1], "--short") == 0;
  const std::int64_t batch = short_run ? 16 : 256, in = short_run ? 32 : 784,
                     hidden = short_run ? 64 : 512, out = 10;
  const int calls = short_run ? 3 : 20;

  using nova::Tensor;
  Tensor x = Tensor::randn({batch, in}, 1);
  Tensor w1 = Tensor::randn({in, hidden}, 2, nova::DType::f32, 1.0 / std::sqrt(double(in)));
  Tensor b1 = Tensor::randn({hidden}, 3, nova::DType::f32, 0.1);
  Tensor w2 = Tensor::randn({hidden, out}, 4, nova::DType::f32, 1.0 / std::sqrt(double(hidden)));
  Tensor b2 = Tensor::randn({out}, 5, nova::DType::f32, 0.1);

  auto step = nova::jit(mlp);
  auto t0 = std::chrono::steady_clock::now();
  Tensor y = step(x, w1, b1, w2, b2); // trace, compile, cache, run
  double first = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) y = step(x, w1, b1, w2, b2); // cache hits
  double per_call = seconds_since(t0) / calls;

  Tensor reference = nova::jit(mlp, nova::ExecMode::interpreted)(x, w1, b1, w2, b2);
  auto got = y.to_vector(), want = reference.to_vector();
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }

  auto stats = nova::cache_stats();
  std::printf("mlp_forward: x[%lld, %lld] -> %lld -> %lld\n", (long long)batch, (long long)in,
              (long long)hidden, (long long)out);
  std::printf("  first call (trace + compile + run): %8.1f ms\n", first * 1e3);
  std::printf("  cached call:                        %8.3f ms\n", per_call * 1e3);
  std::printf("  cache: %llu traces, %llu compiles, %llu loaded from disk, %llu hits\n",
              (unsigned long long)stats.traces, (unsigned long long)stats.compiles,
              (unsigned long long)stats.disk_hits, (unsigned long long)stats.hits);
  std::printf("  y[0, 0:3] = %.5f %.5f %.5f\n", y.at({0, 0}), y.at({0, 1}), y.at({0, 2}));
  std::printf("  max |y - float64 reference| / max |reference| = %.2e\n", err / scale);

  // The example doubles as a test: the numbers must hold.
  // Two steps (compiled and interpreted), the compiled one possibly found in
  // the on-disk cache a previous run filled.
  bool ok = stats.compiles + stats.disk_hits == 2 && stats.hits == static_cast<unsigned long long>(calls) &&
            err / scale < 1e-5;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
