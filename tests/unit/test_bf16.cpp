// test_bf16.cpp - bf16 matmuls (nova/precision.hpp) on AMX tiles or as
// AVX512-BF16 dot products (Bf16Matmul.cpp), whichever this CPU has.
//
// With the precision bf16, a float32 matmul must equal the float64 product
// of its operands rounded to bfloat16 (round to nearest even) up to float32
// summation (1e-5 relative), and the float64 product of the unrounded
// operands up to bf16 rounding (1e-2): and be measurably off it (> 1e-5),
// which fp32 kernels are not, so the test sees the bf16 path run. Skipped
// on CPUs with neither (bf16 steps run in float32 there).
#include "testing.hpp"

#include <bit>
#include <cstring>

using nova::DType;
using nova::Tensor;
using namespace nova_test;

namespace {

/// The kernels' choice (ConfigureKernels.cpp): AMX, else AVX512-BF16 dot
/// products on 512-bit vectors.
bool has_bf16_matmuls() {
  nova::TargetDesc host = nova::host_target();
  return (host.has("amx_bf16") && host.has("amx_tile")) || (host.has("avx512_bf16") && host.vector_bits >= 512);
}

/// `x` (f32) with every element rounded to bfloat16, round to nearest even.
Tensor rounded_to_bf16(const Tensor& x) {
  Tensor y = x.clone();
  for (float& v : y.span<float>()) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(v);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    v = std::bit_cast<float>(u);
  }
  return y;
}

/// Sets the precision for the life of the object.
struct PrecisionScope {
  explicit PrecisionScope(nova::MatmulPrecision p) : previous(nova::matmul_precision()) {
    nova::set_matmul_precision(p);
  }
  ~PrecisionScope() { nova::set_matmul_precision(previous); }
  nova::MatmulPrecision previous;
};

/// `whole`: the result is whole 32 x 32 blocks, all of it on the tiles.
/// Otherwise the rows and columns past the last whole block run in float32,
/// so the result is only within bf16 rounding of either reference.
template <class F> void check_bf16(F f, const Tensor& a, const Tensor& b, bool whole = true) {
  PrecisionScope bf16(nova::MatmulPrecision::bf16);
  Tensor got = nova::jit(f)(a, b);
  Tensor exact = nova::jit(f, nova::ExecMode::interpreted)(a, b);
  Tensor of_rounded =
      nova::jit(f, nova::ExecMode::interpreted)(rounded_to_bf16(a), rounded_to_bf16(b));
  double vs_rounded = rel_error(got, of_rounded), vs_exact = rel_error(got, exact);
  INFO("against the rounded operands ", vs_rounded, ", against the exact ones ", vs_exact);
  CHECK(vs_rounded <= (whole ? 1e-5 : 1e-2));
  CHECK(vs_exact <= 1e-2);
  CHECK(vs_exact > 1e-5);
}

} // namespace

TEST_CASE("bf16 matmuls: products of bf16-rounded operands, f32 sums, every layout and edge") {
  if (!has_bf16_matmuls()) {
    MESSAGE("skipped: this CPU has neither AMX nor AVX512-BF16 (bf16 matmuls run in float32 here)");
    return;
  }
  Gen g;
  INFO("seed = ", g.seed);
  using nova::Transpose;
  auto nn = [](auto a, auto b) { return nova::matmul(a, b); };
  auto ta = [](auto a, auto b) { return nova::matmul(a, b, Transpose::a); };
  auto tb = [](auto a, auto b) { return nova::matmul(a, b, Transpose::b); };
  auto tt = [](auto a, auto b) { return nova::matmul(a, b, Transpose::both); };
  // Whole 32 x 32 blocks: several k slabs (K = 1100 > 512, a tail of k
  // that is not a multiple of 32, an odd one), every layout, batched.
  check_bf16(nn, g.randn({64, 1100}), g.randn({1100, 96}));
  check_bf16(nn, g.randn({32, 45}), g.randn({45, 64}));
  check_bf16(ta, g.randn({77, 64}), g.randn({77, 32}));
  check_bf16(tb, g.randn({64, 83}), g.randn({64, 83}));
  check_bf16(tb, g.randn({32, 96}), g.randn({96, 96}));
  check_bf16(tt, g.randn({96, 64}), g.randn({32, 96}));
  check_bf16(nn, g.randn({2, 64, 40}), g.randn({2, 40, 64}));
  // Rows and columns past the last whole block (in float32).
  check_bf16(nn, g.randn({70, 45}), g.randn({45, 99}), false);
  check_bf16(ta, g.randn({77, 50}), g.randn({77, 48}), false);
  check_bf16(tb, g.randn({33, 83}), g.randn({40, 83}), false);
  // A GELU-fed lhs, computed as it is packed (FuseMatmulPrologue.cpp):
  // row-major and transposed (a weight gradient's), K with a tail past
  // whole 16s. Its rounding is of GELU(a), so within bf16's bound only.
  auto gelu_nn = [](auto a, auto b) { return nova::matmul(nova::gelu(a), b); };
  auto gelu_ta = [](auto a, auto b) { return nova::matmul(nova::gelu(a), b, Transpose::a); };
  check_bf16(gelu_nn, g.randn({64, 72}), g.randn({72, 64}), false);
  check_bf16(gelu_ta, g.randn({72, 64}), g.randn({72, 96}), false);
  // Epilogues on the sums in one slab: a light one (a bias-like add) and a
  // heavy one (a math op, taken a vector at a time through a scratch).
  auto plus_one = [](auto a, auto b) { return nova::matmul(a, b) + 1.0; };
  auto tanh_of = [](auto a, auto b) { return nova::tanh(nova::matmul(a, b) * 0.1); };
  check_bf16(plus_one, g.randn({64, 96}), g.randn({96, 64}), false);
  check_bf16(tanh_of, g.randn({64, 96}), g.randn({96, 64}), false);
}

TEST_CASE("bf16 steps' causal attention: the forward's and the backward's products on bf16 operands, within bf16's bound") {
  if (!has_bf16_matmuls()) {
    MESSAGE("skipped: this CPU has neither AMX nor AVX512-BF16");
    return;
  }
  nova::TargetDesc host = nova::host_target();
  Gen g;
  INFO("seed = ", g.seed);
  PrecisionScope bf16(nova::MatmulPrecision::bf16);
  // The default scale, 1 / sqrt(head): logits of unit spread on random
  // inputs (0.7 with heads of 64 made them 5.6 wide, so peaked that bf16's
  // rounding of q and k moved the outputs by up to 1.5e-2).
  auto attention = [](auto qkv, std::int64_t h) { return nova::causal_attention(qkv, h); };
  auto gradient = [](auto qkv, auto w, std::int64_t h) {
    return nova::gradients(nova::sum(nova::causal_attention(qkv, h) * w), {qkv})[0];
  };
  // Heads of 64 and 32 columns; T a multiple of 16, not one, and odd (the
  // last key pair half past T); the rows of a block past T's end.
  struct Case {
    std::int64_t B, T, heads, hd;
  };
  for (Case c : {Case{2, 64, 2, 64}, Case{1, 40, 3, 32}, Case{2, 37, 1, 64}, Case{2, 36, 1, 64}, Case{2, 38, 1, 64}, Case{2, 64, 1, 64}, Case{1, 5, 2, 32}}) {
    INFO("B ", c.B, " T ", c.T, " heads ", c.heads, " head ", c.hd);
    Tensor qkv = g.randn({c.B, c.T, 3 * c.heads * c.hd});
    Tensor got = nova::jit(attention)(qkv, nova::static_arg(c.heads));
    Tensor want = nova::jit(attention, nova::ExecMode::interpreted)(qkv, nova::static_arg(c.heads));
    double err = rel_error(got, want);
    MESSAGE("forward against float64: ", err);
    CHECK(err <= 1e-2);
    // With AVX512-BF16 the products round their operands: measurably off
    // float64, which the f32 kernel is not.
    if (host.has("avx512_bf16") && host.vector_bits >= 512)
      CHECK(err > 1e-5);
    Tensor w = g.randn({c.B, c.T, c.heads * c.hd});
    Tensor dgot = nova::jit(gradient)(qkv, w, nova::static_arg(c.heads));
    Tensor dwant = nova::jit(gradient, nova::ExecMode::interpreted)(qkv, w, nova::static_arg(c.heads));
    double derr = rel_error(dgot, dwant);
    MESSAGE("gradient against float64: ", derr);
    CHECK(derr <= 1e-2);
    // The backward recomputes S and takes dP, dq, dk and dv from rounded
    // operands too (its P then the forward's): off float64 as well. T = 37
    // ends on a backward block moved back by an odd number of rows, whose
    // first pair holds a row the block before did (zeroed: counted twice,
    // the gradient was off by 0.10).
    if (host.has("avx512_bf16") && host.vector_bits >= 512)
      CHECK(derr > 1e-5);
  }
}

TEST_CASE("bf16 steps' attention on a qkv only it reads: made in bf16 (nova-bf16-attention-qkv), bit for bit the f32 qkv's result") {
  nova::TargetDesc host = nova::host_target();
  if (!host.has("avx512_bf16") || host.vector_bits < 512) {
    MESSAGE("skipped: this CPU has no AVX512-BF16 dot products on 512-bit vectors");
    return;
  }
  Gen g;
  INFO("seed = ", g.seed);
  PrecisionScope bf16(nova::MatmulPrecision::bf16);
  // qkv = 0.5 x, made in the step. Returned as well, it stays f32 (a
  // reader other than attention), and the kernels round q, k and v as they
  // pack them; not returned, it is made in bf16 and the kernels read it as
  // is. The same roundings, so the same bits, forward and backward (its
  // gradient 0.5 dqkv does not read qkv).
  auto only = [](auto x, auto w, std::int64_t h) {
    auto out = nova::causal_attention(x * 0.5, h);
    return std::make_tuple(out, nova::gradients(nova::sum(out * w), {x})[0]);
  };
  auto also = [](auto x, auto w, std::int64_t h) {
    auto qkv = x * 0.5;
    auto out = nova::causal_attention(qkv, h);
    return std::make_tuple(out, nova::gradients(nova::sum(out * w), {x})[0], qkv);
  };
  for (std::int64_t T : {64, 37}) {
    INFO("T ", T);
    Tensor x = g.randn({2, T, 3 * 2 * 64}), w = g.randn({2, T, 2 * 64});
    auto [o1, d1] = nova::jit(only)(x, w, nova::static_arg(std::int64_t{2}));
    auto [o2, d2, qkv] = nova::jit(also)(x, w, nova::static_arg(std::int64_t{2}));
    CHECK(o1.to_vector() == o2.to_vector());
    CHECK(d1.to_vector() == d2.to_vector());
    auto [want, dwant] = nova::jit(only, nova::ExecMode::interpreted)(x, w, nova::static_arg(std::int64_t{2}));
    CHECK(rel_error(o1, want) <= 1e-2);
    CHECK(rel_error(o1, want) > 1e-5);
    CHECK(rel_error(d1, dwant) <= 1e-2);
  }
}

/// Sets the activation precision for the life of the object.
struct ActivationScope {
  explicit ActivationScope(nova::ActivationPrecision p) : previous(nova::activation_precision()) {
    nova::set_activation_precision(p);
  }
  ~ActivationScope() { nova::set_activation_precision(previous); }
  nova::ActivationPrecision previous;
};

TEST_CASE("activations kept in bf16 (nova-bf16-saved-activations): the forward's pre-activations rounded, gradients within bf16's bound") {
  // fp32 matmuls, so the only rounding is the kept pre-activations' (any
  // CPU): three GELU layers, each h = x W + b kept from its forward to its
  // GELU's gradient across the layers after it. Errors against float64
  // above float32's (so the rounding ran) and within bf16's; the same
  // step with fp32 activations within float32's (so nothing else changed).
  Gen g;
  INFO("seed = ", g.seed);
  auto mlp = [](auto x, auto w1, auto w2, auto w3, auto w4, auto b) {
    auto h1 = nova::gelu(nova::matmul(x, w1) + b);
    auto h2 = nova::gelu(nova::matmul(h1, w2) + b);
    auto h3 = nova::gelu(nova::matmul(h2, w3) + b);
    auto loss = nova::sum(nova::matmul(h3, w4));
    auto d = nova::gradients(loss, {w1, w2, w3, x});
    return std::make_tuple(loss, d[0], d[1], d[2], d[3]);
  };
  for (std::int64_t rows : {64, 37}) {
    INFO("rows ", rows);
    auto weight = [&](const nova::Shape& s) { return Tensor::uniform(s, g.seed + g.count++, -0.3, 0.3); };
    Tensor x = g.randn({rows, 48}), w1 = weight({48, 64}), w2 = weight({64, 64}), w3 = weight({64, 64}),
           w4 = weight({64, 16}), b = g.randn({64});
    auto want = nova::jit(mlp, nova::ExecMode::interpreted)(x, w1, w2, w3, w4, b);
    auto fp32 = nova::jit(mlp)(x, w1, w2, w3, w4, b);
    ActivationScope scope(nova::ActivationPrecision::bf16);
    auto bf16 = nova::jit(mlp)(x, w1, w2, w3, w4, b);
    auto check = [&](const char* what, const Tensor& got32, const Tensor& got16, const Tensor& exact) {
      double e32 = rel_error(got32, exact), e16 = rel_error(got16, exact);
      INFO(std::string(what), ": fp32 activations ", e32, ", bf16 ", e16);
      CHECK(e32 <= 1e-5);
      CHECK(e16 <= 1e-2);
      CHECK(e16 > 1e-5);
    };
    check("dW1", std::get<1>(fp32), std::get<1>(bf16), std::get<1>(want));
    check("dW2", std::get<2>(fp32), std::get<2>(bf16), std::get<2>(want));
    check("dx", std::get<4>(fp32), std::get<4>(bf16), std::get<4>(want));
    double e3 = rel_error(std::get<3>(bf16), std::get<3>(want));
    INFO("dW3 ", e3);
    CHECK(e3 <= 1e-2);
  }
}

TEST_CASE("the precision is part of the key: fp32 and bf16 steps compile apart") {
  if (!has_bf16_matmuls()) {
    MESSAGE("skipped: this CPU has neither AMX nor AVX512-BF16");
    return;
  }
  Gen g;
  Tensor a = g.randn({64, 128}), b = g.randn({128, 64});
  auto step = nova::jit([](auto a, auto b) { return nova::matmul(a, b); });
  Tensor fp32 = step(a, b);
  Tensor bf16;
  {
    PrecisionScope scope(nova::MatmulPrecision::bf16);
    bf16 = step(a, b);
  }
  Tensor again = step(a, b);
  Tensor want = nova::jit([](auto a, auto b) { return nova::matmul(a, b); }, nova::ExecMode::interpreted)(a, b);
  CHECK(rel_error(fp32, want) <= 1e-5);
  CHECK(rel_error(again, want) <= 1e-5);
  CHECK(rel_error(bf16, want) > 1e-5);
  CHECK(rel_error(bf16, want) <= 1e-2);
}

TEST_CASE("a GPT trains with bf16 matmuls, close to its fp32 twin") {
  if (!has_bf16_matmuls()) {
    MESSAGE("skipped: this CPU has neither AMX nor AVX512-BF16");
    return;
  }
  Gen g;
  INFO("seed = ", g.seed);
  nova::nn::GPTConfig c{.vocab = 64, .context = 32, .d_model = 64, .layers = 2, .heads = 2};
  Tensor x = Tensor::empty({4, 32}, DType::i32), y = Tensor::empty({4, 32}, DType::i32);
  for (std::int64_t i = 0; i < 128; ++i) {
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 3) % 64);
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 10) % 64);
  }
  auto losses = [&](nova::MatmulPrecision p) {
    PrecisionScope scope(p);
    nova::Params params = nova::nn::gpt_init(c, g.seed);
    auto step = nova::train_step(
        [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
          return nova::nn::gpt_loss(c, p, x, y);
        },
        params, nova::AdamW{.lr = 3e-3, .weight_decay = 0.0});
    std::vector<double> out;
    for (int s = 0; s < 20; ++s) out.push_back(step(x, y, nova::static_arg(c)));
    return out;
  };
  std::vector<double> fp32 = losses(nova::MatmulPrecision::fp32), bf16 = losses(nova::MatmulPrecision::bf16);
  INFO("fp32 ", fp32.front(), " -> ", fp32.back(), ", bf16 ", bf16.front(), " -> ", bf16.back());
  CHECK(bf16.back() < 0.8 * bf16.front());
  CHECK(std::abs(bf16.front() - fp32.front()) <= 1e-2 * fp32.front());
  CHECK(std::abs(bf16.back() - fp32.back()) <= 5e-2 * fp32.back());
}
