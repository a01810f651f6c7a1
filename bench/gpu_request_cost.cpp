// gpu_request_cost.cpp - where a GPU training step's kernels take more
// memory transactions than their bytes need, measured without a GPU.
//
//   gpu_request_cost [fp32|bf16|tf32] [layers]   (NOVA_TARGET: h200 unless set)
//
// A GPT step with bench/gpt_step's small shapes cut down to what the
// emulator runs in a minute (d_model 256, 4 heads of 64 columns, vocab 256,
// context 64, a batch of 2, one layer unless asked; AdamW and gradient
// clipping as there) is compiled for NOVA_TARGET and run once under the
// lane-level emulator (NOVA_GPU=emulate) with NOVA_EMULATOR_COST=1: each
// kernel's line gives its shared-memory wavefronts against the fewest the
// bank model allows and its global 32-byte sectors against the fewest its
// bytes need (docs/notes.md, "Shared-memory banks and global sectors"),
// with the ops that take more. These are counts, not times: a sector one
// warp wastes another may find in L1 or L2.
#include <nova/nova.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) try {
  const std::string precision = argc > 1 ? argv[1] : "fp32";
  const std::int64_t layers = argc > 2 ? std::atoll(argv[2]) : 1;
  if ((precision != "fp32" && precision != "bf16" && precision != "tf32") || layers < 1) {
    std::fprintf(stderr, "usage: gpu_request_cost [fp32|bf16|tf32] [layers]\n");
    return 2;
  }
  nova::set_matmul_precision(precision == "bf16"   ? nova::MatmulPrecision::bf16
                             : precision == "tf32" ? nova::MatmulPrecision::tf32
                                                   : nova::MatmulPrecision::fp32);
  ::setenv("NOVA_TARGET", std::getenv("NOVA_TARGET") ? std::getenv("NOVA_TARGET") : "h200", 1);
  ::setenv("NOVA_GPU", "emulate", 1);
  ::setenv("NOVA_EMULATOR_COST", "1", 1);
  using nova::nn::GPTConfig;
  const GPTConfig c{.vocab = 256, .context = 64, .d_model = 256, .layers = layers, .heads = 4};
  const std::int64_t batch = 2;
  nova::Params params = nova::nn::gpt_init(c, 20261205);
  const nova::AdamW opt{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); }, params,
      opt, {.clip_grad_norm = 1.0});
  nova::Tensor x = nova::Tensor::empty({batch, c.context}, nova::DType::i32);
  nova::Tensor y = nova::Tensor::empty({batch, c.context}, nova::DType::i32);
  for (std::int64_t i = 0; i < batch * c.context; ++i) {
    x.data<std::int32_t>()[i] = std::int32_t((i * 37 + 11) % c.vocab);
    y.data<std::int32_t>()[i] = std::int32_t((i * 53 + 7) % c.vocab);
  }
  std::printf("gpu_request_cost: a GPT step (d_model %lld, %lld heads, context %lld, batch %lld, %lld layer(s)), "
              "%s matmuls, for %s, under the emulator; each kernel once:\n",
              (long long)c.d_model, (long long)c.heads, (long long)c.context, (long long)batch, (long long)layers,
              precision.c_str(), std::getenv("NOVA_TARGET"));
  std::fflush(stdout);
  const double loss = step(x, y, nova::static_arg(c));
  std::printf("gpu_request_cost: loss %.6f\n", loss);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpu_request_cost: %s\n", e.what());
  return 1;
}
