// test_gpu_steps.cpp - whole steps compiled for CUDA targets, checked without a GPU.
//
// NOVA_GPU=emulate runs a GPU step's kernels (the GPU IR their PTX is made
// from) launch by launch under the lane-level emulator: the results and
// several training steps match the float64 interpreter. Without it a GPU
// step compiles to PTX that ptxas accepts (when the CUDA toolkit is here),
// and running it on this machine (no GPU) is a named error.
#include "testing.hpp"
#include "scoped_env.hpp"

#include <nova/executable_desc.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

using nova::DType;
using nova::Tensor;
using namespace nova_test;

namespace {

auto mlp_loss = [](const nova::ParamExprs& p, auto x, auto y) {
  auto h = nova::tanh(nova::matmul(x, p["w1"]) + p["b1"]);
  auto out = nova::matmul(h, p["w2"]) + p["b2"];
  return nova::mean((out - y) * (out - y));
};

auto gpt_loss = [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
  return nova::nn::gpt_loss(c, p, x, y);
};

const nova::nn::GPTConfig kGpt{.vocab = 11, .context = 8, .d_model = 16, .layers = 1, .heads = 2};

nova::Params mlp_params(Gen& g) {
  nova::Params p;
  p.add("w1", g.randn({6, 16}, DType::f32));
  p.add("b1", g.randn({16}, DType::f32));
  p.add("w2", g.randn({16, 3}, DType::f32));
  p.add("b2", g.randn({3}, DType::f32));
  return p;
}

void tokens(Tensor& x, Tensor& y) {
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 3) % 11);
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 5 + 10) % 11);
  }
}

nova::Params copy(const nova::Params& from) {
  nova::Params p;
  for (const auto& name : from.names()) p.add(name, from[name].clone());
  return p;
}

/// Restores the default matmul precision when a test ends, however it ends.
struct Fp32AtExit {
  ~Fp32AtExit() { nova::set_matmul_precision(nova::MatmulPrecision::fp32); }
};

/// The largest relative difference between two parameter sets' changes
/// from `init` (with SGD, the gradients' difference).
double update_error(const nova::Params& got, const nova::Params& want, const nova::Params& init) {
  double worst = 0;
  for (const auto& name : want.names()) {
    auto a = got[name].to_vector(), b = want[name].to_vector(), o = init[name].to_vector();
    double diff = 0, scale = 1e-30;
    for (std::size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::abs((a[i] - o[i]) - (b[i] - o[i])));
      scale = std::max(scale, std::abs(b[i] - o[i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

/// The largest relative difference between two parameter sets.
double params_error(const nova::Params& got, const nova::Params& want) {
  double worst = 0;
  for (const auto& name : want.names()) worst = std::max(worst, rel_error(got[name], want[name]));
  return worst;
}

} // namespace

TEST_CASE("an MLP training step on an emulated A100 matches the interpreter over several AdamW steps") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({32, 6}, DType::f32), y = g.randn({32, 3}, DType::f32);
  nova::Params init = mlp_params(g);
  nova::AdamW opt{.lr = 0.02, .weight_decay = 0.01};
  nova::Params reference = copy(init);
  auto ref_step = nova::train_step(mlp_loss, reference, opt, {.mode = nova::ExecMode::interpreted});
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) want.push_back(ref_step(x, y));

  Env env;
  env.set("NOVA_TARGET", "sm_80");
  env.set("NOVA_GPU", "emulate");
  nova::Params params = copy(init);
  auto step = nova::train_step(mlp_loss, params, opt);
  for (int i = 0; i < 4; ++i) {
    double loss = step(x, y);
    CAPTURE(i);
    CHECK(std::abs(loss - want[static_cast<std::size_t>(i)]) <= 1e-5 * std::max(1.0, std::abs(want[static_cast<std::size_t>(i)])));
  }
  CHECK(step.executable(x, y)->kind() == "gpu-emulator");
  CHECK(params_error(params, reference) <= 1e-5);
}

TEST_CASE("a tiny GPT on an emulated H100: logits, losses and SGD updates (its gradients) match the interpreter within fp32 bounds") {
  Gen g;
  INFO("seed = ", g.seed);
  nova::Params init = nova::nn::gpt_init(kGpt, g.seed);
  Tensor x = Tensor::empty({2, 8}, DType::i32), y = Tensor::empty({2, 8}, DType::i32);
  tokens(x, y);
  auto logits = [](const nova::ParamExprs& p, auto x, nova::nn::GPTConfig c) { return nova::nn::gpt_logits(c, p, x); };
  Tensor want = nova::eval_step(logits, init, nova::ExecMode::interpreted)(x, nova::static_arg(kGpt));
  // SGD: each update is the gradient, so the updates compare the gradients.
  nova::SGD opt{.lr = 0.5};
  nova::Params reference = copy(init);
  auto ref_step = nova::train_step(gpt_loss, reference, opt, {.mode = nova::ExecMode::interpreted});
  std::vector<double> losses;
  for (int i = 0; i < 2; ++i) losses.push_back(ref_step(x, y, nova::static_arg(kGpt)));

  Env env;
  env.set("NOVA_TARGET", "sm_90a");
  env.set("NOVA_GPU", "emulate");
  Tensor got = nova::eval_step(logits, init)(x, nova::static_arg(kGpt));
  CHECK(rel_error(got, want) <= 1e-5);
  nova::Params params = copy(init);
  auto step = nova::train_step(gpt_loss, params, opt);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(std::abs(step(x, y, nova::static_arg(kGpt)) - losses[static_cast<std::size_t>(i)]) <= 1e-5 * losses[0]);
  }
  CHECK(update_error(params, reference, init) <= 1e-5);
}

TEST_CASE("a GPT training step compiles to PTX for sm_80, sm_86 and sm_90a, f32 and tf32 matmuls; ptxas accepts it; running it is a named error") {
  const std::filesystem::path ptxas = "/usr/local/cuda/bin/ptxas";
  const bool have_ptxas = std::filesystem::exists(ptxas);
  if (!have_ptxas) MESSAGE("no ptxas at /usr/local/cuda/bin: the PTX is not assembled");
  nova::Params init = nova::nn::gpt_init(kGpt, 7);
  Tensor x = Tensor::empty({2, 8}, DType::i32), y = Tensor::empty({2, 8}, DType::i32);
  tokens(x, y);
  for (const char* chip : {"sm_80", "sm_86", "sm_90a"})
  for (auto precision : {nova::MatmulPrecision::fp32, nova::MatmulPrecision::bf16}) {
    CAPTURE(chip);
    CAPTURE(nova::name_of(precision));
    Fp32AtExit restore;
    nova::set_matmul_precision(precision);
    Env env;
    env.set("NOVA_TARGET", chip);
    env.set("NOVA_CACHE", "off");
    env.unset("NOVA_GPU");
    nova::Params params = copy(init);
    auto step = nova::train_step(gpt_loss, params, nova::AdamW{});
    std::string error;
    try {
      step(x, y, nova::static_arg(kGpt));
    } catch (const nova::Error& e) {
      error = e.what();
    }
    INFO(error);
    CHECK(error.find("this executable is for a CUDA device") != std::string::npos);
    CHECK(error.find("NOVA_GPU=emulate") != std::string::npos);
    const nova::ExecutableDesc* desc = step.executable(x, y, nova::static_arg(kGpt))->description();
    REQUIRE(desc != nullptr);
    CHECK(desc->object_format == "ptx");
    CHECK(desc->launches.size() > 20);
    for (const auto& k : desc->kernels) CHECK((k.threads >= 1 && k.threads <= 1024));
    std::string ptx(desc->object.begin(), desc->object.end());
    CHECK(ptx.find(".target " + std::string(chip)) != std::string::npos);
    CHECK(ptx.find(".entry " + desc->kernels[0].symbol) != std::string::npos);
    // bf16 allowed: the f32 matmuls on the tensor cores as tf32.
    bool tensor_cores = ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos;
    CHECK(tensor_cores == (precision == nova::MatmulPrecision::bf16));
    if (!have_ptxas) continue;
    auto dir = std::filesystem::temp_directory_path() / ("nova-ptx-" + std::to_string(unique_number()));
    std::filesystem::create_directories(dir);
    {
      std::ofstream(dir / "step.ptx") << ptx;
    }
    std::string cmd = ptxas.string() + " -arch=" + chip + " " + (dir / "step.ptx").string() + " -o " +
                      (dir / "step.cubin").string() + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe)) out += buf;
    int status = ::pclose(pipe);
    INFO(cmd, "\n", out);
    CHECK(status == 0);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("with bf16 matmuls allowed, a GPT's matmuls run as the mma.sync kernel (tf32) on an emulated A100") {
  // f32 operands as tf32 (10 mantissa bits): within tf32's error of the
  // interpreter. Matmuls whose shapes the kernel refuses (the vocabulary's
  // 11 columns are not whole 16-byte chunks) keep the scalar threads.
  Gen g;
  INFO("seed = ", g.seed);
  nova::Params init = nova::nn::gpt_init(kGpt, g.seed);
  Tensor x = Tensor::empty({2, 8}, DType::i32), y = Tensor::empty({2, 8}, DType::i32);
  tokens(x, y);
  nova::SGD opt{.lr = 0.5};
  nova::Params reference = copy(init);
  auto ref_step = nova::train_step(gpt_loss, reference, opt, {.mode = nova::ExecMode::interpreted});
  double want = ref_step(x, y, nova::static_arg(kGpt));

  Env env;
  env.set("NOVA_TARGET", "sm_80");
  env.set("NOVA_GPU", "emulate");
  Fp32AtExit restore;
  nova::set_matmul_precision(nova::MatmulPrecision::bf16);
  nova::Params params = copy(init);
  auto step = nova::train_step(gpt_loss, params, opt);
  double got = step(x, y, nova::static_arg(kGpt));
  const nova::ExecutableDesc* desc = step.executable(x, y, nova::static_arg(kGpt))->description();
  CHECK(std::abs(got - want) <= 1e-3 * want);
  CHECK(update_error(params, reference, init) <= 5e-3);
  REQUIRE(desc != nullptr);
  int mma = 0, scalar = 0;
  for (const auto& k : desc->kernels) (k.shared_bytes > 0 ? mma : scalar)++;
  INFO("mma.sync kernels: ", mma, ", scalar-thread kernels: ", scalar);
  CHECK(mma >= 4);
  CHECK(scalar > 0);
}
