// test_memory.cpp - the memory budget (nova/memory.hpp): a plan over budget
// is made again with more recomputation, the same numbers come out, and a
// budget nothing fits fails at compile time naming the budget and the
// smallest plan.
#include "testing.hpp"

#include <cstdlib>

#include "scoped_env.hpp"

using nova::DType;
using nova::Tensor;
using namespace nova_test;

namespace {

bool switched_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "0";
}

struct BudgetScope {
  explicit BudgetScope(std::uint64_t bytes) : previous(nova::memory_budget()) { nova::set_memory_budget(bytes); }
  ~BudgetScope() { nova::set_memory_budget(previous); }
  std::uint64_t previous;
};

struct Run {
  std::uint64_t arena = 0;
  std::uint64_t flops = 0; // the launches' flops, as the kernels count them
  std::uint64_t io = 0; // bytes of the step's inputs and (not aliased) outputs
  std::vector<double> losses;
};

/// `steps` steps (none: compiled only, e.g. for a GPU this machine lacks).
/// Each `Variant` is a step type of its own: the in-process cache keys a
/// step by its type, shapes and settings, not by the NOVA_* switches read
/// when it is traced, so a test that changes one traces another type.
template <int Variant = 0>
Run train(std::uint64_t seed, int steps = 4) {
  nova::nn::GPTConfig c{.vocab = 32, .context = 16, .d_model = 32, .layers = 2, .heads = 2};
  nova::Params params = nova::nn::gpt_init(c, seed);
  Tensor x = Tensor::empty({4, 16}, DType::i32), y = Tensor::empty({4, 16}, DType::i32);
  for (std::int64_t i = 0; i < 64; ++i) {
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 5 + 1) % 32);
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 5 + 6) % 32);
  }
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) { return nova::nn::gpt_loss(c, p, x, y); },
      params, nova::AdamW{.lr = 3e-3});
  Run r;
  const nova::ExecutableDesc* d = step.executable(x, y, nova::static_arg(c))->description();
  r.arena = d->arena_bytes;
  for (const nova::LaunchDesc& l : d->launches) r.flops += d->kernels[l.kernel].flops;
  r.io = nova::io_bytes(d->inputs, d->outputs, d->aliases);
  for (int s = 0; s < steps; ++s) r.losses.push_back(step(x, y, nova::static_arg(c)));
  return r;
}

} // namespace

TEST_CASE("a memory budget: more recomputation until the plan fits, the same losses") {
  if (switched_off("NOVA_ARENA_REUSE") || switched_off("NOVA_REMAT")) {
    // Without reuse every recomputed value adds bytes, and without
    // rematerialization nothing is recomputed: no budget is met by
    // recomputing (the budget error is still checked below).
    MESSAGE("skipped: NOVA_ARENA_REUSE=0 or NOVA_REMAT=0");
    return;
  }
  Gen g;
  INFO("seed = ", g.seed);
  Run free = train(g.seed);
  REQUIRE(free.arena > 0);
  Run tight;
  {
    BudgetScope budget(free.arena - 1);
    tight = train(g.seed);
  }
  INFO("arena without a budget ", free.arena, " bytes, with ", tight.arena);
  CHECK(tight.arena <= free.arena - 1);
  REQUIRE(tight.losses.size() == free.losses.size());
  for (std::size_t i = 0; i < free.losses.size(); ++i)
    CHECK(std::abs(tight.losses[i] - free.losses[i]) <= 1e-5 * std::abs(free.losses[i]));
}

TEST_CASE("a budget's plan recomputes the cheapest values first, each product once") {
  // Just under the arena without a budget, the plan needs little: the
  // cheapest recomputations (a block's qkv or fc1 product, one product for
  // its whole output) and no more than fit. The first level-2 search
  // recomputed by gap alone, whatever a value's chain ran again (a
  // residual's chain both MLP products), and cloned each value's producers
  // for each late use.
  if (switched_off("NOVA_ARENA_REUSE") || switched_off("NOVA_REMAT")) {
    MESSAGE("skipped: NOVA_ARENA_REUSE=0 or NOVA_REMAT=0");
    return;
  }
  Gen g;
  INFO("seed = ", g.seed);
  Env env;
  env.set("NOVA_CACHE", "off");
  Run base = train<1>(g.seed, 2);
  Run tight;
  {
    BudgetScope budget(base.arena - 1);
    tight = train<2>(g.seed, 2);
  }
  INFO("flops ", base.flops, " -> ", tight.flops, ", arena ", base.arena, " -> ", tight.arena);
  CHECK(tight.arena < base.arena);
  CHECK(tight.flops > base.flops);
  CHECK(tight.flops * 10 <= base.flops * 11); // 2.8% here; 19.0% by the first search
  REQUIRE(tight.losses.size() == base.losses.size());
  for (std::size_t i = 0; i < base.losses.size(); ++i)
    CHECK(std::abs(tight.losses[i] - base.losses[i]) <= 1e-5 * std::abs(base.losses[i]));
}

TEST_CASE("a budget no plan fits fails at compile time, naming the budget and the smallest plan") {
  Gen g;
  BudgetScope budget(4096);
  try {
    train(g.seed);
    FAIL("no nova::CompileError for a 4096-byte budget");
  } catch (const nova::CompileError& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("needs more memory than its budget") != std::string::npos);
    CHECK(msg.find("4096 bytes") != std::string::npos);
    CHECK(msg.find("the smallest plan found needs an arena of") != std::string::npos);
    if (switched_off("NOVA_REMAT"))
      CHECK(msg.find("nothing recomputed, NOVA_REMAT=0") != std::string::npos);
    else
      CHECK(msg.find("matmuls and attention recomputed too") != std::string::npos);
  }
}

TEST_CASE("a GPU step's arena fits its device: the memory less the inputs, outputs and a reserve is a budget (NOVA_GPU_MEMORY)") {
  // Without reuse, rematerialization or in-place updates recomputing
  // finds no smaller plan for this step (its compile error is still
  // checked in the CPU's case above).
  if (switched_off("NOVA_ARENA_REUSE") || switched_off("NOVA_REMAT") || switched_off("NOVA_IN_PLACE")) {
    MESSAGE("skipped: NOVA_ARENA_REUSE=0, NOVA_REMAT=0 or NOVA_IN_PLACE=0");
    return;
  }
  // Compiled for an H100 (no GPU here: compiled, not run), PTX only.
  nova_test::Env env;
  env.set("NOVA_TARGET", "sm_90a");
  env.set("NOVA_PTXAS", "off");
  env.unset("NOVA_GPU");
  Gen g;
  INFO("seed = ", g.seed);
  const Run free = train(g.seed, 0);
  REQUIRE(free.arena > 0);
  // The reserve for the driver and runtime: max(512 MiB, 1/16 of the memory).
  const std::uint64_t reserve = std::uint64_t{512} << 20;
  env.set("NOVA_GPU_MEMORY", std::to_string(reserve + free.io + free.arena - 1));
  const Run tight = train(g.seed, 0);
  INFO("arena on an 80 GB H100 ", free.arena, " bytes, with one byte less than it free ", tight.arena);
  CHECK(tight.arena <= free.arena - 1);
  CHECK(tight.io == free.io);
  // A device the step cannot fit: a compile error naming it and the sizes.
  env.set("NOVA_GPU_MEMORY", std::to_string(reserve + free.io + 4096));
  try {
    train(g.seed, 0);
    FAIL("no nova::CompileError for a GPU with 4096 bytes for the arena");
  } catch (const nova::CompileError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("needs more memory than sm_90a has: no plan fits 0.0 MiB for the arena: the GPU's") !=
          std::string::npos);
    CHECK(msg.find("(NOVA_GPU_MEMORY) less the step's inputs and outputs") != std::string::npos);
    CHECK(msg.find("512.0 MiB kept for the driver and runtime") != std::string::npos);
    CHECK(msg.find("the smallest plan found needs an arena of") != std::string::npos);
  }
  // What NOVA_GPU_MEMORY takes: at most the entry's memory, bytes with K, M or G.
  env.set("NOVA_GPU_MEMORY", "100G");
  CHECK_THROWS_WITH_AS(nova::target_from_env(), doctest::Contains("NOVA_GPU_MEMORY must be at most the"), nova::Error);
  env.set("NOVA_GPU_MEMORY", "-1");
  CHECK_THROWS_WITH_AS(nova::target_from_env(), doctest::Contains("NOVA_GPU_MEMORY is '-1'; give bytes"), nova::Error);
  env.set("NOVA_GPU_MEMORY", "10G");
  CHECK(nova::target_from_env().memory_bytes == std::int64_t{10} << 30);
  CHECK(nova::target_from_env().describe().find("10.0 GiB of memory") != std::string::npos);
}

TEST_CASE("a cross-entropy gradient is written over its logits: one buffer of [rows, classes], the same gradient") {
  // logits = x w; the loss's gradient d(logits) = (softmax - onehot) / rows
  // needs the logits only until it is made, so it takes their buffer
  // (nova-reuse-dying-inputs): the step's arena holds one [rows, classes]
  // buffer, not two. The update w - lr x^T d(logits) is checked against
  // the float64 interpreter's gradient.
  if (switched_off("NOVA_IN_PLACE") || switched_off("NOVA_ARENA_REUSE")) {
    MESSAGE("skipped: NOVA_IN_PLACE=0 or NOVA_ARENA_REUSE=0");
    return;
  }
  constexpr std::int64_t rows = 256, d = 8, classes = 512;
  Gen g;
  INFO("seed = ", g.seed);
  nova::Params params;
  params.add("w", g.randn({d, classes}));
  const Tensor w0 = params["w"].clone();
  Tensor x = g.randn({rows, d}), y = Tensor::empty({rows}, DType::i32);
  for (std::int64_t r = 0; r < rows; ++r)
    y.span<std::int32_t>()[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 37 + 5) % classes);
  const double lr = 0.5;
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y) { return nova::nn::cross_entropy(nova::matmul(x, p["w"]), y); },
      params, nova::SGD{.lr = lr});
  const nova::ExecutableDesc* desc = step.executable(x, y)->description();
  const std::uint64_t logits = rows * classes * sizeof(float);
  INFO("arena ", desc->arena_bytes, " bytes; logits ", logits);
  CHECK(desc->arena_bytes >= logits);
  CHECK(desc->arena_bytes < logits + logits / 2);
  step(x, y);

  auto gradient = [](auto x, auto w, auto y) {
    return nova::gradients(nova::nn::cross_entropy(nova::matmul(x, w), y), {w})[0];
  };
  const std::vector<double> grad = nova::jit(gradient, nova::ExecMode::interpreted)(x, w0, y).to_vector();
  const std::vector<double> before = w0.to_vector(), after = params["w"].to_vector();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    double expected = before[i] - lr * grad[i];
    worst = std::max(worst, std::abs(after[i] - expected));
    scale = std::max(scale, std::abs(lr * grad[i]));
  }
  INFO("largest error of the update ", worst, " against the largest step ", scale);
  CHECK(scale > 0);
  CHECK(worst <= 1e-5 * std::max(1.0, scale));
  // The bound is far below the update itself: a gradient 1% off fails it.
  CHECK(scale * 1e-2 > 1e-5 * std::max(1.0, scale));
}
