// make_steps.cpp - the training steps bench/device/check.sh runs on a GPU,
// compiled here (where LLVM is) for NOVA_TARGET (a GPU, e.g. h200).
//
//   NOVA_TARGET=h200 [NOVA_REQUIRE_CUBIN=1] make_steps OUT_DIR
// (NOVA_REQUIRE_CUBIN=1: fail where a step carries no cubin: prepare.sh sets
// it where ptxas is, so a step ptxas refused is seen here, not on the GPU.)
//
// bench/gpt_step's small and medium GPT (AdamW 0.9/0.95, weight decay 0.1,
// gradient clipping 1.0), each with float32 matmuls and with bf16 allowed
// (on a GPU: tf32 tensor cores). For each, OUT_DIR gets
//   <name>.nexe   the step for the GPU;
//   <name>.step   one line: the model, batch, seeds and learning rate
//                 run_steps rebuilds the inputs from (gpt_init, zero AdamW
//                 state, the tokens' LCG: the same as here), then the loss
//                 and the updated parameters' sum of squares one step on
//                 this machine's CPU gives, which the GPU's must match.
// The inputs are rebuilt there rather than carried: the medium GPT's
// parameters and AdamW state alone are about 300 MB.
// Also `dp1_small_fp32`: the small step compiled data-parallel for a group
// of one rank (a loopback communicator), so its gradient sums run through
// the data-parallel path (NCCL on a GPU) with a world size of 1. And
// `mlp_fp32`, `mlp_bf16`: an MLP's step (steps.hpp: 1024 -> 4096 (GELU) ->
// 1024 classes, a batch of 1024 samples, the same AdamW and clipping). And
// `gpt_wide_bf16`: the medium GPT with 4 heads of 128 columns (attention's
// backward on the tensor cores in halves of its tiles), bf16 allowed. And,
// for a target with wgmma, `gpt_medium_bf16_cluster`: the medium bf16 step
// compiled with NOVA_GPU_CLUSTER=2 (its persistent wgmma matmuls in
// clusters of 2 sharing B's tile by TMA multicast), beside the step without.
// And `gpt_medium_bf16_act`: the medium bf16 step with activations kept in
// bf16 (nova::set_activation_precision: the MLP's pre-activation h), its
// CPU twin likewise, against the same autocast peer.
#include <nova/aot.hpp>
#include <nova/distributed.hpp>
#include <nova/nova.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "steps.hpp"

constexpr std::uint64_t kParamSeed = 20261202, kTokenSeed = 12345;

int main(int argc, char** argv) try {
  const char* target = std::getenv("NOVA_TARGET");
  if (argc < 2 || !target) {
    // (A CPU target works too: run_steps then runs the flow on this machine.)
    std::fprintf(stderr, "usage: NOVA_TARGET=<a GPU, e.g. h200> make_steps OUT_DIR\n");
    return 2;
  }
  const std::string gpu = target, dir = argv[1];
  std::filesystem::create_directories(dir);
  using nova::nn::GPTConfig;
  struct Size {
    const char* name;
    GPTConfig c;
    std::int64_t batch;
  };
  const Size sizes[] = {{"small", {.vocab = 256, .context = 128, .d_model = 256, .layers = 4, .heads = 4}, 16},
                        {"medium", {.vocab = 256, .context = 256, .d_model = 512, .layers = 8, .heads = 8}, 8},
                        {"wide", {.vocab = 256, .context = 256, .d_model = 512, .layers = 8, .heads = 4}, 8}};
  struct Variant {
    const Size* size;
    nova::MatmulPrecision precision;
    bool data_parallel;
    bool cluster = false;
    bool bf16_activations = false;
  };
  std::vector<Variant> variants;
  for (const Size& size : sizes)
    for (auto precision : {nova::MatmulPrecision::fp32, nova::MatmulPrecision::bf16})
      if (std::string(size.name) != "wide" || precision == nova::MatmulPrecision::bf16)
        variants.push_back({&size, precision, false});
  variants.push_back({&sizes[0], nova::MatmulPrecision::fp32, true});
  if (nova::named_target(gpu).has("wgmma.bf16"))
    variants.push_back({&sizes[1], nova::MatmulPrecision::bf16, false, true});
  variants.push_back({&sizes[1], nova::MatmulPrecision::bf16, false, false, true});
  // The step for the GPU saved, its CPU twin run once on the inputs
  // run_steps rebuilds (its loss and parameters are what the GPU's must
  // match), and its line written; `args`: the step's arguments after the batch.
  auto emit = [&](const std::string& name, auto& step, steps::StepFile f, const auto&... args) {
    nova::Tensor x, y;
    steps::tokens(f, x, y);
    ::setenv("NOVA_TARGET", gpu.c_str(), 1);
    auto on_gpu = step.executable(x, y, args...);
    nova::aot::save(*on_gpu, dir + "/" + name + ".nexe");
    ::setenv("NOVA_TARGET", "host", 1);
    auto on_cpu = step.executable(x, y, args...);
    std::vector<nova::Tensor> inputs = steps::inputs(f, on_cpu->input_specs());
    std::vector<nova::Tensor> outputs = (*on_cpu)(inputs);
    f.loss = outputs[0].at({});
    f.params_sumsq = steps::params_sumsq(inputs, f);
    steps::write(dir + "/" + name + ".step", f);
    ::setenv("NOVA_TARGET", gpu.c_str(), 1);
    const std::string& format = on_gpu->description()->binary_format;
    std::printf("make_steps: %s for %s: %zu launches of %zu kernels, %zu gradient sums, arena %.1f MiB, %s; CPU "
                "loss %.6f\n",
                name.c_str(), gpu.c_str(), on_gpu->description()->launches.size(),
                on_gpu->description()->kernels.size(), on_gpu->description()->collectives.size(),
                double(on_gpu->description()->arena_bytes) / (1 << 20),
                format.empty() ? "PTX only" : (format + " and PTX").c_str(), f.loss);
    const char* require = std::getenv("NOVA_REQUIRE_CUBIN");
    if (require && std::string(require) == "1" && format.empty())
      throw std::runtime_error(name + " carries no cubin: ptxas refused its PTX (its warning above says why)");
  };
  const nova::AdamW opt{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  for (const Variant& v : variants) {
    const Size& size = *v.size;
    const auto precision = v.precision;
    nova::set_matmul_precision(precision);
    nova::set_activation_precision(v.bf16_activations ? nova::ActivationPrecision::bf16
                                                      : nova::ActivationPrecision::fp32);
    // A group of one: the step is traced data-parallel (its sums, world size 1).
    auto group = v.data_parallel ? nova::dist::loopback_group(1)
                                 : std::vector<std::shared_ptr<nova::dist::Communicator>>{};
    nova::dist::set_communicator(v.data_parallel ? group[0] : nullptr);
    const std::string name = std::string(v.data_parallel ? "dp1_" : "gpt_") + size.name + "_" +
                             std::string(nova::name_of(precision)) + (v.cluster ? "_cluster" : "") +
                             (v.bf16_activations ? "_act" : "");
    // (Read by the GPU target only: the CPU twin is the same step.)
    if (v.cluster)
      ::setenv("NOVA_GPU_CLUSTER", "2", 1);
    else
      ::unsetenv("NOVA_GPU_CLUSTER");
    const GPTConfig c = size.c;
    nova::Params params = nova::nn::gpt_init(c, kParamSeed);
    auto step = nova::train_step(
        [](const nova::ParamExprs& p, auto x, auto y, GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); },
        params, opt, {.clip_grad_norm = 1.0});
    steps::StepFile f;
    f.c = c;
    f.batch = size.batch;
    f.param_seed = kParamSeed;
    f.token_seed = kTokenSeed;
    f.lr = opt.lr;
    emit(name, step, f, nova::static_arg(c));
    ::unsetenv("NOVA_GPU_CLUSTER");
    nova::set_activation_precision(nova::ActivationPrecision::fp32);
    nova::dist::set_communicator(nullptr);
  }
  for (auto precision : {nova::MatmulPrecision::fp32, nova::MatmulPrecision::bf16}) {
    nova::set_matmul_precision(precision);
    steps::StepFile f;
    f.model = "mlp";
    f.in = 1024, f.hidden = 4096, f.out = 1024, f.batch = 1024;
    f.param_seed = kParamSeed;
    f.token_seed = kTokenSeed;
    f.lr = opt.lr;
    nova::Params params = steps::mlp_init(f.in, f.hidden, f.out, f.param_seed);
    auto step = nova::train_step([](const nova::ParamExprs& p, auto x, auto y) { return steps::mlp_loss(p, x, y); },
                                 params, opt, {.clip_grad_norm = 1.0});
    emit("mlp_" + std::string(nova::name_of(precision)), step, f);
  }
  nova::set_matmul_precision(nova::MatmulPrecision::fp32);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "make_steps: %s\n", e.what());
  return 1;
}
