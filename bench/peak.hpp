// peak.hpp - the machine's fp32 FMA peak, measured rather than assumed.
//
// Each of `threads` threads runs a loop of independent vector FMAs (12
// accumulators: enough to cover latency x pipes on every x86 core we meet)
// for ~0.2 s; peak = total flops / wall time. The widest vectors the CPU has
// are used (AVX-512, else AVX2+FMA, else SSE mul+add counted as one FMA).
// Clock and turbo are whatever the machine gives under that load, so a
// kernel's "fraction of peak" is against the same clock it ran at.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace nova_bench {

namespace detail {

#if defined(__x86_64__)
// 12 independent FMAs on registers 2..13 of kind `r` ("zmm" / "ymm"),
// looping `iters` times; the clobbers name the xmm aliases of all of them.
#define NOVA_BENCH_FMA(r, n) "vfmadd231ps %%" r "1, %%" r "1, %%" r #n "\n\t"
#define NOVA_BENCH_FMA_LOOP(r, iters)                                                                \
  asm volatile("vxorps %%" r "0, %%" r "0, %%" r "0\n\t"                                            \
               "vmovaps %%" r "0, %%" r "1\n\t"                                                     \
               "1:\n\t" NOVA_BENCH_FMA(r, 2) NOVA_BENCH_FMA(r, 3) NOVA_BENCH_FMA(r, 4)                \
                   NOVA_BENCH_FMA(r, 5) NOVA_BENCH_FMA(r, 6) NOVA_BENCH_FMA(r, 7) NOVA_BENCH_FMA(r, 8)  \
                       NOVA_BENCH_FMA(r, 9) NOVA_BENCH_FMA(r, 10) NOVA_BENCH_FMA(r, 11)                 \
                           NOVA_BENCH_FMA(r, 12) NOVA_BENCH_FMA(r, 13) "dec %0\n\t"                   \
                                                                       "jnz 1b\n\t"                   \
               : "+r"(iters)                                                                          \
               :                                                                                      \
               : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",       \
                 "xmm10", "xmm11", "xmm12", "xmm13", "cc")
__attribute__((target("avx512f"))) inline void fma_loop_512(std::int64_t iters) { NOVA_BENCH_FMA_LOOP("zmm", iters); }
__attribute__((target("avx2,fma"))) inline void fma_loop_256(std::int64_t iters) { NOVA_BENCH_FMA_LOOP("ymm", iters); }
#undef NOVA_BENCH_FMA_LOOP
#undef NOVA_BENCH_FMA
#endif

} // namespace detail

struct Peak {
  double gflops = 0;  // all threads
  int lanes = 4;      // fp32 lanes per vector used
  int threads = 1;
};

/// Measured fp32 FMA peak over `threads` threads (2 flops per lane per FMA).
inline Peak measure_peak(int threads) {
  Peak p;
  p.threads = threads < 1 ? 1 : threads;
#if defined(__x86_64__)
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) return p; // no measurement: gflops 0
  p.lanes = avx512 ? 16 : 8;
  const std::int64_t iters = 40'000'000; // x 12 FMAs: ~0.2 s at 2-3 GHz with 2 pipes
  auto body = [&] { avx512 ? detail::fma_loop_512(iters) : detail::fma_loop_256(iters); };
  body(); // wake the clock
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < p.threads; ++t) pool.emplace_back(body);
  body();
  for (auto& t : pool) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.gflops = double(p.threads) * double(iters) * 12.0 * p.lanes * 2.0 / secs * 1e-9;
#endif
  return p;
}

} // namespace nova_bench
