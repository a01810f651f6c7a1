// mlp_forward_bench.cpp - what a cache hit costs, what a compile costs, and
// how fast the compiled MLP runs.
//
//   ./mlp_forward_bench [batch in hidden out] [--json]
//
// Counts first: flops = 2*B*(in*hidden + hidden*out); the fewest bytes are
// the inputs, weights and output once. Reports GFLOP/s and the fraction of
// this machine's fp32 peak given by NOVA_PEAK_GFLOPS (default: the CI
// machine, 2 cores x 2.1 GHz x 2 AVX-512 FMA units x 16 lanes x 2 = 268.8).
//
// Hit overhead = time of step(args) on a hit - time of exe->run(...) on
// preallocated tensors, measured on a tiny step where both are microseconds.
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

/// Median seconds of `reps` runs of f (after 3 warm-ups).
template <class F> double median_seconds(int reps, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = clock_type::now();
    f();
    t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

auto mlp = [](auto x, auto w1, auto b1, auto w2, auto b2) {
  return nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2;
};
auto tiny = [](auto x) { return x + x; };

} // namespace

int main(int argc, char** argv) {
  std::int64_t B = 256, I = 784, H = 512, O = 10;
  if (argc >= 5) {
    B = std::atoll(argv[1]); I = std::atoll(argv[2]); H = std::atoll(argv[3]); O = std::atoll(argv[4]);
  }
  double peak = 268.8;
  if (const char* p = std::getenv("NOVA_PEAK_GFLOPS")) peak = std::atof(p);

  using nova::Tensor;
  Tensor x = Tensor::randn({B, I}, 1), w1 = Tensor::randn({I, H}, 2), b1 = Tensor::randn({H}, 3),
         w2 = Tensor::randn({H, O}, 4), b2 = Tensor::randn({O}, 5);

  // First call: trace + compile + run.
  auto step = nova::jit(mlp);
  auto t0 = clock_type::now();
  step(x, w1, b1, w2, b2);
  double first = std::chrono::duration<double>(clock_type::now() - t0).count();

  double run = median_seconds(20, [&] { step(x, w1, b1, w2, b2); });
  double flops = 2.0 * double(B) * double(I * H + H * O);
  double bytes = 4.0 * double(B * I + I * H + H + H * O + O + B * O);

  // Hit overhead on a tiny step.
  Tensor small = Tensor::randn({4}, 6);
  auto tiny_step = nova::jit(tiny);
  auto exe = tiny_step.executable(small);
  std::vector<Tensor> in{small};
  std::vector<Tensor> out{Tensor::empty({4})};
  double t_hit = median_seconds(20001, [&] { tiny_step(small); });
  double t_run = median_seconds(20001, [&] { exe->run(in, out); });

  std::printf("mlp_forward_bench: B=%lld %lld -> %lld -> %lld (fp32)\n", (long long)B,
              (long long)I, (long long)H, (long long)O);
  std::printf("  flops %.3g, minimal bytes %.3g (arithmetic intensity %.1f flop/byte)\n", flops,
              bytes, flops / bytes);
  std::printf("  first call (trace+compile+run)  %9.2f ms\n", first * 1e3);
  std::printf("  compiled step, median           %9.3f ms  = %7.2f GFLOP/s = %5.1f%% of %.0f GFLOP/s peak\n",
              run * 1e3, flops / run * 1e-9, 100.0 * flops / run * 1e-9 / peak, peak);
  std::printf("  tiny step: cache-hit call       %9.2f us\n", t_hit * 1e6);
  std::printf("  tiny step: compiled code alone  %9.2f us\n", t_run * 1e6);
  std::printf("  hit overhead                    %9.2f us (target < 5 us)\n", (t_hit - t_run) * 1e6);
  return 0;
}
