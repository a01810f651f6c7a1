// compile_time.cpp - how long the first call of a GPT training step takes:
// trace + (compile | load from the disk cache), then optionally the step's
// speed.
//
//   ./compile_time [small|medium] [layers] [steps]
//
// Prints one "RESULT ..." line for bench/compile_time.sh: first_call_s (from
// the call to the moment the executable is ready: trace, key, disk lookup,
// compile or load), whether it compiled or loaded, launches and kernels, and
// tokens/s over `steps` steps (0: none). Run it twice
// with the same NOVA_CACHE_DIR: the first process compiles (cold), the
// second traces and loads (warm start).
#include <nova/nova.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>


int main(int argc, char** argv) {
  using nova::nn::GPTConfig;
  bool medium = argc > 1 && std::strcmp(argv[1], "medium") == 0;
  GPTConfig c = medium ? GPTConfig{.vocab = 256, .context = 256, .d_model = 512, .layers = 8, .heads = 8}
                       : GPTConfig{.vocab = 256, .context = 128, .d_model = 256, .layers = 4, .heads = 4};
  if (argc > 2) c.layers = std::atoi(argv[2]);
  int steps = argc > 3 ? std::atoi(argv[3]) : 0;
  std::int64_t B = medium ? 8 : 16, T = c.context;

  nova::Params params = nova::nn::gpt_init(c, 1);
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); },
      params, nova::AdamW{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1},
      {.clip_grad_norm = 1.0});
  nova::Tensor x = nova::Tensor::zeros({B, T}, nova::DType::i32), y = nova::Tensor::zeros({B, T}, nova::DType::i32);
  for (std::int64_t i = 0; i < B * T; ++i) {
    x.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7) % 256);
    y.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 13 + 1) % 256);
  }

  auto t0 = std::chrono::steady_clock::now();
  auto exe = step.executable(x, y, nova::static_arg(c));
  double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto stats = nova::cache_stats();

  double tokens_per_s = 0;
  if (steps > 0) {
    step(x, y, nova::static_arg(c)); // warm-up: arenas, pages
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step(x, y, nova::static_arg(c));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
    tokens_per_s = double(B * T) / secs;
  }
  const nova::ExecutableDesc* desc = exe->description();
  std::printf("RESULT config=%s layers=%lld first_call_s=%.4f compiled=%llu loaded=%llu "
              "launches=%zu kernels=%zu tokens_per_s=%.1f\n",
              medium ? "medium" : "small", (long long)c.layers, first,
              (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits,
              desc ? desc->launches.size() : size_t(0), desc ? desc->kernels.size() : size_t(0),
              tokens_per_s);
  return 0;
}
