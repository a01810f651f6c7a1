// gpt_step.cpp - tokens/s and step memory of one GPT training step
// (forward + backward + AdamW update, one compiled function).
//
//   ./gpt_step [small|medium] [steps]
//
// small  = d_model 256, 4 layers, 4 heads, context 128, batch 16
// medium = d_model 512, 8 layers, 8 heads, context 256, batch 8
// Prints one machine-readable line "nova ..." that bench/gpt_step_peer.sh
// sets beside PyTorch's. Step memory, as for the peer: peak resident over
// the whole run minus resident once parameters and batch exist. So the
// AdamW state counts on both sides (PyTorch creates it in its first step,
// Nova when the step is made), and Nova's peak includes its compile (the
// process side of it: the compiler itself runs in a child process, whose
// peak is printed apart). Flops per step are counted as 6 * params * tokens
// + the attention matmuls (12 * layers * B * T^2 * d), the usual estimate.
#include <nova/nova.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "memory.hpp"

int main(int argc, char** argv) {
  using nova::nn::GPTConfig;
  bool medium = argc > 1 && std::strcmp(argv[1], "medium") == 0;
  int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  GPTConfig c = medium ? GPTConfig{.vocab = 256, .context = 256, .d_model = 512, .layers = 8, .heads = 8}
                       : GPTConfig{.vocab = 256, .context = 128, .d_model = 256, .layers = 4, .heads = 4};
  if (const char* layers = std::getenv("NOVA_BENCH_LAYERS")) c.layers = std::atoi(layers); // bench/gpt_fits.sh
  // A word-piece vocabulary's logits (e.g. 8192) instead of bytes' (the peer too).
  if (const char* vocab = std::getenv("NOVA_BENCH_VOCAB")) c.vocab = std::atoi(vocab);
  std::int64_t B = medium ? 8 : 16, T = c.context;

  double rss_start = nova_bench::rss_mib();
  nova::Params params = nova::nn::gpt_init(c, 1);
  nova::Tensor x = nova::Tensor::empty({B, T}, nova::DType::i32), y = nova::Tensor::empty({B, T}, nova::DType::i32);
  std::uint64_t rng = 7;
  for (std::int64_t i = 0; i < B * T; ++i) {
    x.data<std::int32_t>()[i] = static_cast<std::int32_t>(nova::splitmix64(rng) % c.vocab);
    y.data<std::int32_t>()[i] = static_cast<std::int32_t>(nova::splitmix64(rng) % c.vocab);
  }
  double rss_init = nova_bench::rss_mib(); // parameters and batch
  // NOVA_BENCH_SMAPS=1: where the step memory beyond the plan lives (which
  // mappings grew from here to the end of the steps).
  const bool smaps = std::getenv("NOVA_BENCH_SMAPS") != nullptr;
  std::map<std::string, double> mappings_init;
  if (smaps) mappings_init = nova_bench::rss_by_mapping();
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); },
      params, nova::AdamW{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1},
      {.clip_grad_norm = 1.0});
  double state = 0;
  for (const nova::Tensor& s : step.optimizer_state()) state += double(s.numel()) * double(nova::size_of(s.dtype())) / (1 << 20);
  // bench/gpt_fits.sh: a budget for the whole step memory. The compiler's
  // budget is its arena's, so the optimizer state and the process's own
  // ~10 MiB beside the plan (measured: 8-11 MiB) come off first.
  if (const char* b = std::getenv("NOVA_BENCH_STEP_BUDGET_MIB")) {
    double arena_mib = std::atof(b) - state - 16.0;
    if (arena_mib <= 0) {
      std::printf("nova: the optimizer state alone (%.1f MiB) leaves no arena in a %s MiB step budget\n", state, b);
      return 1;
    }
    nova::set_memory_budget(static_cast<std::uint64_t>(arena_mib * (1 << 20)));
  }

  auto t0 = std::chrono::steady_clock::now();
  try {
    step(x, y, nova::static_arg(c)); // trace + compile + run
  } catch (const nova::CompileError& e) { // a memory budget no plan fits (gpt_fits.sh), or a compiler failure
    std::printf("nova: %s\n", e.what());
    return 1;
  }
  double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double compile_peak = nova_bench::peak_mib();
  step(x, y, nova::static_arg(c));

  nova::reset_profile();     // NOVA_PROFILE=1: warmed-up steps only
  nova_bench::reset_peak(); // the steps' own peak, without the compile
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step(x, y, nova::static_arg(c));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  double step_peak = nova_bench::peak_mib();
  if (smaps) nova_bench::print_rss_growth(mappings_init);
  double peak = std::max(compile_peak, step_peak);

  // The plan's own figure: the arena every step's temporaries live in.
  const nova::ExecutableDesc* desc = step.executable(x, y, nova::static_arg(c))->description();
  double arena = desc ? double(desc->arena_bytes) / (1 << 20) : 0.0;

  double n_params = double(params.numel());
  double flops = 6.0 * n_params * double(B * T) + 12.0 * double(c.layers * B * T * T * c.d_model);
  nova::CacheStats stats = nova::cache_stats();
  double compiler = double(stats.compile_peak_bytes) / (1 << 20);
  std::printf("nova %s: matmuls %s, activations %s (nova/precision.hpp)\n", medium ? "medium" : "small",
              std::string(nova::name_of(nova::matmul_precision())).c_str(),
              std::string(nova::name_of(nova::activation_precision())).c_str());
  std::printf("nova %s: params %.2fM, first step (compile+run) %.1f s, step %.3f s, %.0f tokens/s, "
              "%.1f GFLOP/s; params+batch %.1f MiB; step memory %.1f MiB = peak %.1f - after init %.1f "
              "(first steps' peak %.1f, steps' peak %.1f); planned: arena %.1f + AdamW state %.1f = %.1f MiB; "
              "compiler process peak %s\n",
              medium ? "medium" : "small", n_params / 1e6, first, secs, double(B * T) / secs,
              flops / secs * 1e-9, rss_init - rss_start, peak - rss_init, peak, rss_init, compile_peak,
              step_peak, arena, state, arena + state,
              stats.compiles_in_child ? (std::to_string(int(compiler + 0.5)) + " MiB").c_str()
                                      : (stats.compiles ? "not measured (NOVA_COMPILE=inline)" : "none (disk cache hit)"));
  std::printf("RESULT nova tokens_per_s=%.1f step_mib=%.1f arena_mib=%.1f planned_mib=%.1f compiler_mib=%.1f\n",
              double(B * T) / secs, peak - rss_init, arena, arena + state, compiler);
  return 0;
}
