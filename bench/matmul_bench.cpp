// matmul_bench.cpp - fp32 matmul GFLOP/s of Nova's compiled kernels, against
// the measured machine peak; bench/matmul_peer.sh runs the BLAS peers on the
// same shapes beside it.
//
//   ./matmul_bench [shape ...]
//
// A shape is "MxNxK" (C[M,N] = A[M,K] B[K,N]), optionally "<batch>b" in
// front ("64bx128x128x64": 64 independent products) and ":ta" / ":tb" after
// (A or B read transposed: stored [K,M] / [N,K], as the GPT's weight
// gradients and attention scores read them). No shapes: square n = 256, 512,
// 1024, 2048 and every matmul shape of the small GPT training step.
//
// Each shape is one compiled step (nova::jit of nova::matmul), timed as the
// median of repeated runs into a preallocated result for at least 0.3 s
// after warm-up; 64 sampled
// entries are checked against a float64 dot product (|err| <= 1e-4 x the sum of
// |terms|, else exit 1). Prints, per shape, one "RESULT nova shape=... gflops=..."
// line for the peer script, and the peak as "RESULT peak gflops=...".
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "peak.hpp"

namespace {

struct Shape {
  std::string name;
  std::int64_t batch = 0, M = 0, N = 0, K = 0;
  nova::Transpose t = nova::Transpose::none;
};

bool parse(const std::string& s, Shape& out) {
  out = Shape{s};
  std::string dims = s, suffix;
  if (auto c = s.find(':'); c != std::string::npos) {
    dims = s.substr(0, c);
    suffix = s.substr(c + 1);
  }
  long long b = 0, m = 0, n = 0, k = 0;
  if (std::sscanf(dims.c_str(), "%lldbx%lldx%lldx%lld", &b, &m, &n, &k) == 4) {
    out.batch = b;
  } else if (std::sscanf(dims.c_str(), "%lldx%lldx%lld", &m, &n, &k) != 3) {
    return false;
  }
  out.M = m, out.N = n, out.K = k;
  if (suffix == "ta") out.t = nova::Transpose::a;
  else if (suffix == "tb") out.t = nova::Transpose::b;
  else if (!suffix.empty()) return false;
  return m > 0 && n > 0 && k > 0 && b >= 0;
}

auto mm_none = [](auto a, auto b) { return nova::matmul(a, b); };
auto mm_ta = [](auto a, auto b) { return nova::matmul(a, b, nova::Transpose::a); };
auto mm_tb = [](auto a, auto b) { return nova::matmul(a, b, nova::Transpose::b); };

template <class F> double median_seconds(F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  double total = 0;
  while (total < 0.3 || t.size() < 5) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.push_back(s);
    total += s;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Max over 64 sampled entries of |C - ref| / sum |terms| (ref in float64).
double sampled_error(const Shape& s, const nova::Tensor& a, const nova::Tensor& b, const nova::Tensor& c) {
  const float *A = a.data<float>(), *B = b.data<float>(), *C = c.data<float>();
  std::uint64_t rng = 99;
  double worst = 0;
  std::int64_t batches = std::max<std::int64_t>(s.batch, 1);
  for (int i = 0; i < 64; ++i) {
    std::int64_t bi = std::int64_t(nova::splitmix64(rng) % std::uint64_t(batches));
    std::int64_t r = std::int64_t(nova::splitmix64(rng) % std::uint64_t(s.M));
    std::int64_t col = std::int64_t(nova::splitmix64(rng) % std::uint64_t(s.N));
    const float* Ab = A + bi * s.M * s.K;
    const float* Bb = B + bi * s.K * s.N;
    double ref = 0, mag = 0;
    for (std::int64_t k = 0; k < s.K; ++k) {
      double x = s.t == nova::Transpose::a ? Ab[k * s.M + r] : Ab[r * s.K + k];
      double y = s.t == nova::Transpose::b ? Bb[col * s.K + k] : Bb[k * s.N + col];
      ref += x * y;
      mag += std::fabs(x * y);
    }
    double got = C[bi * s.M * s.N + r * s.N + col];
    worst = std::max(worst, std::fabs(got - ref) / std::max(mag, 1e-30));
  }
  return worst;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty())
    names = {"256x256x256", "512x512x512", "1024x1024x1024", "2048x2048x2048",
             // the small GPT step (d 256, B*T 2048, 4 heads of 64, T 128): forward,
             // input gradients (rhs transposed), weight gradients (lhs transposed)
             "2048x768x256", "2048x256x256", "2048x1024x256", "2048x256x1024",
             "2048x256x768:tb", "2048x256x256:tb", "2048x1024x256:tb", "2048x256x1024:tb",
             "256x768x2048:ta", "256x256x2048:ta", "256x1024x2048:ta", "1024x256x2048:ta",
             // attention per batch x head: scores q k^T, p v, and their gradients
             "64bx128x128x64:tb", "64bx128x64x128", "64bx128x64x128:ta", "64bx128x128x64"};

  int threads = nova::default_thread_count();
  nova_bench::Peak peak = nova_bench::measure_peak(threads);
  // bf16 matmuls (NOVA_MATMUL_PRECISION=bf16) round the operands: their
  // bound is bf16's.
  nova::MatmulPrecision precision = nova::matmul_precision();
  double bound = precision == nova::MatmulPrecision::fp32 ? 1e-4 : 1e-2;
  std::printf("matmul_bench: %s matmuls (error bound %.0e), %d threads, %s\n",
              std::string(nova::name_of(precision)).c_str(), bound, threads,
              nova::target_from_env().describe().c_str());
  std::printf("  measured peak %.1f GFLOP/s (%d-lane FMA loop on %d threads)\n", peak.gflops, peak.lanes,
              peak.threads);
  std::printf("RESULT peak gflops=%.1f\n", peak.gflops);
  if (precision == nova::MatmulPrecision::bf16)
    std::printf("  (bf16 products: a dot product's lane or an AMX tile multiplies more than an f32 FMA; peak%% is "
                "of the f32 FMAs)\n");
  std::printf("  %-22s %10s %10s %8s %10s\n", "shape", "ms", "GFLOP/s", "peak%", "max err");
  int failures = 0;
  std::uint64_t seed = 1;
  for (const std::string& name : names) {
    Shape s;
    if (!parse(name, s)) {
      std::fprintf(stderr, "matmul_bench: cannot read shape '%s' (want [Bbx]MxNxK[:ta|:tb])\n", name.c_str());
      return 2;
    }
    auto dims = [&](std::int64_t r, std::int64_t c) {
      return s.batch ? nova::Shape{s.batch, r, c} : nova::Shape{r, c};
    };
    nova::Tensor a = nova::Tensor::randn(s.t == nova::Transpose::a ? dims(s.K, s.M) : dims(s.M, s.K), seed++);
    nova::Tensor b = nova::Tensor::randn(s.t == nova::Transpose::b ? dims(s.N, s.K) : dims(s.K, s.N), seed++);
    nova::Tensor c;
    double secs = 0;
    // Timed into a preallocated result, as the peers are (out=): a fresh
    // multi-MiB result per call would time the kernel's page faults.
    auto time_it = [&](auto f) {
      auto step = nova::jit(f);
      c = step(a, b);
      auto exe = step.executable(a, b);
      std::vector<nova::Tensor> in{a, b}, out{c};
      secs = median_seconds([&] { exe->run(in, out); });
    };
    if (s.t == nova::Transpose::a) time_it(mm_ta);
    else if (s.t == nova::Transpose::b) time_it(mm_tb);
    else time_it(mm_none);
    double err = sampled_error(s, a, b, c);
    double flops = 2.0 * double(std::max<std::int64_t>(s.batch, 1)) * double(s.M) * double(s.N) * double(s.K);
    double gflops = flops / secs * 1e-9;
    bool bad = !(err <= bound);
    failures += bad;
    std::printf("  %-22s %10.3f %10.1f %7.1f%% %10.2e%s\n", name.c_str(), secs * 1e3, gflops,
                peak.gflops > 0 ? 100.0 * gflops / peak.gflops : 0.0, err, bad ? "  WRONG" : "");
    std::printf("RESULT nova shape=%s gflops=%.2f\n", name.c_str(), gflops);
  }
  return failures ? 1 : 0;
}
