// test_transformer.cpp - the transformer ops and the GPT model.
//
// New ops against the interpreter and finite differences (float64); a tiny
// GPT's loss and every parameter's gradient against finite differences; the
// compiled GPT against the interpreter (fp32).
#include "testing.hpp"

#include <nova/detail/philox.hpp>

using nova::DType;
using nova::Shape;
using nova::Tensor;
using namespace nova_test;

namespace {

double fd_tol(const std::vector<double>& g) {
  double s = 1.0;
  for (double v : g) s = std::max(s, std::abs(v));
  return 1e-6 * s;
}

} // namespace

TEST_CASE("gather and its scatter-add gradient, repeated and out-of-range indices") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor table = g.randn({5, 3}, DType::f64);
  Tensor idx = Tensor::from<std::int32_t>({2, 3}, {4, 0, 4, 1, 7, -1}); // 7 and -1: out of range
  Tensor rows = nova::jit([](auto t, auto i) { return nova::gather(t, i); })(table, idx);
  CHECK(rows.shape() == Shape{2, 3, 3});
  CHECK(rows.at({0, 0, 2}) == table.at({4, 2}));
  CHECK(rows.at({1, 0, 1}) == table.at({1, 1}));
  CHECK(rows.at({1, 1, 0}) == 0.0);
  CHECK(rows.at({1, 2, 2}) == 0.0);
  Tensor ref = nova::jit([](auto t, auto i) { return nova::gather(t, i); }, nova::ExecMode::interpreted)(table, idx);
  CHECK(rel_error(rows, ref) == 0.0);

  Tensor w = g.randn({2, 3, 3}, DType::f64);
  auto grad_fn = [](auto w, auto t, auto i) {
    return nova::gradients(nova::sum(nova::gather(t, i) * w), {t})[0];
  };
  Tensor gc = nova::jit(grad_fn)(w, table, idx);
  Tensor gi = nova::jit(grad_fn, nova::ExecMode::interpreted)(w, table, idx);
  CHECK(rel_error(gc, gi) <= 1e-14);
  // Row 4 was read twice: its gradient is the sum of both cotangents.
  CHECK(std::abs(gc.at({4, 1}) - (w.at({0, 0, 1}) + w.at({0, 2, 1}))) <= 1e-14);
  CHECK(gc.at({2, 0}) == 0.0); // never read
  CHECK(gc.at({3, 2}) == 0.0);
}

TEST_CASE("a scatter-add large enough to split over workgroups: exact and deterministic") {
  // 2048 updates of 64 columns (2^17 points): the kernel splits the columns
  // over the cores; each column still sums its updates in index order, so
  // the result equals the interpreter's float64 sums bit for bit.
  Gen g;
  INFO("seed = ", g.seed);
  Tensor table = g.randn({37, 64}, DType::f64);
  Tensor idx = Tensor::empty({64, 32}, DType::i32);
  for (std::int64_t i = 0; i < 64 * 32; ++i)
    idx.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % 41 - 2);
  Tensor w = g.randn({64, 32, 64}, DType::f64);
  auto grad_fn = [](auto w, auto t, auto i) {
    return nova::gradients(nova::sum(nova::gather(t, i) * w), {t})[0];
  };
  Tensor gc = nova::jit(grad_fn)(w, table, idx);
  Tensor gi = nova::jit(grad_fn, nova::ExecMode::interpreted)(w, table, idx);
  CHECK(rel_error(gc, gi) == 0.0);
  Tensor again = nova::jit(grad_fn)(w, table, idx);
  CHECK(rel_error(again, gc) == 0.0);
}

TEST_CASE("slice, pad, causal mask") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({3, 5, 4}, DType::f64);
  CHECK(compare([](auto x) { return nova::slice(x, {1, 2, 0}, {2, 2, 4}); }, x) == 0.0);
  CHECK(compare([](auto x) { return nova::slice_last(x, 1, 2) * 2.0; }, x) == 0.0);
  Tensor grad = nova::jit([](auto x) {
    return nova::gradients(nova::sum(nova::slice(x, {1, 2, 0}, {2, 2, 4})), {x})[0];
  })(x);
  CHECK(grad.at({1, 2, 3}) == 1.0);
  CHECK(grad.at({0, 2, 3}) == 0.0);
  CHECK(grad.at({2, 4, 0}) == 0.0);
  Tensor m = nova::jit([](auto x) { return nova::causal_mask(3, 3) + nova::sum(x) * 0.0; })(
      Tensor::zeros({1}));
  CHECK(m.at({1, 1}) == 0.0);
  CHECK(m.at({2, 0}) == 0.0);
  CHECK(std::isinf(m.at({0, 1})));
  CHECK(m.at({0, 2}) < 0);
}

TEST_CASE("layer norm and causal attention: gradients against finite differences") {
  Gen g;
  INFO("seed = ", g.seed);
  const std::int64_t B = 2, T = 3, d = 4;
  Tensor x = g.randn({B, T, d}, DType::f64);
  Tensor gamma = g.randn({d}, DType::f64), beta = g.randn({d}, DType::f64);
  Tensor wqkv = g.randn({d, 3 * d}, DType::f64), bqkv = g.randn({3 * d}, DType::f64);
  Tensor wo = g.randn({d, d}, DType::f64), bo = g.randn({d}, DType::f64);
  Tensor w = g.randn({B, T, d}, DType::f64);

  auto loss_fn = [](auto w, auto x, auto gamma, auto beta, auto wqkv, auto bqkv, auto wo, auto bo) {
    auto h = nova::nn::layer_norm(x, gamma, beta);
    return nova::sum(nova::nn::causal_self_attention(h, wqkv, bqkv, wo, bo, 2) * w);
  };
  auto grad_fn = [](auto w, auto x, auto gamma, auto beta, auto wqkv, auto bqkv, auto wo, auto bo) {
    auto h = nova::nn::layer_norm(x, gamma, beta);
    auto l = nova::sum(nova::nn::causal_self_attention(h, wqkv, bqkv, wo, bo, 2) * w);
    return nova::gradients(l, {x, gamma, beta, wqkv, bqkv, wo, bo});
  };
  std::vector<Tensor> inputs{x, gamma, beta, wqkv, bqkv, wo, bo};
  auto loss = nova::jit(loss_fn, nova::ExecMode::interpreted);
  std::vector<Tensor> grads = nova::jit(grad_fn, nova::ExecMode::interpreted)(w, x, gamma, beta, wqkv, bqkv, wo, bo);
  std::vector<Tensor> compiled = nova::jit(grad_fn)(w, x, gamma, beta, wqkv, bqkv, wo, bo);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input ", k);
    CHECK(rel_error(compiled[k], grads[k]) <= 1e-12);
    auto gk = grads[k].to_vector();
    for (std::size_t i = 0; i < gk.size(); i += 3) {
      auto eval = [&](double delta) {
        std::vector<Tensor> in = inputs;
        in[k] = inputs[k].clone();
        in[k].span<double>()[i] += delta;
        return loss(w, in[0], in[1], in[2], in[3], in[4], in[5], in[6]).at({});
      };
      double h = 1e-6;
      double fd = (eval(h) - eval(-h)) / (2 * h);
      INFO("element ", i, ": analytic ", gk[i], " fd ", fd);
      CHECK(std::abs(gk[i] - fd) <= fd_tol(gk));
    }
  }
  // Causality: the output at position 0 does not depend on later positions.
  Tensor later = g.randn({B, T, d}, DType::f64);
  auto attn = nova::jit([](auto x, auto gamma, auto beta, auto wqkv, auto bqkv, auto wo, auto bo) {
    return nova::nn::causal_self_attention(nova::nn::layer_norm(x, gamma, beta), wqkv, bqkv, wo, bo, 2);
  });
  Tensor changed = x.clone();
  for (std::int64_t t = 1; t < T; ++t)
    for (std::int64_t j = 0; j < d; ++j) changed.span<double>()[static_cast<std::size_t>(t * d + j)] += 1.0;
  Tensor a = attn(x, gamma, beta, wqkv, bqkv, wo, bo), c = attn(changed, gamma, beta, wqkv, bqkv, wo, bo);
  for (std::int64_t j = 0; j < d; ++j) CHECK(a.at({0, 0, j}) == doctest::Approx(c.at({0, 0, j})).epsilon(1e-12));
}

namespace {
const nova::nn::GPTConfig kTiny{.vocab = 7, .context = 5, .d_model = 8, .layers = 2, .heads = 2};

auto gpt_loss = [](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
  return nova::nn::gpt_loss(c, p, x, y);
};
} // namespace

TEST_CASE("a tiny GPT: loss and every parameter's gradient against finite differences") {
  Gen g;
  INFO("seed = ", g.seed);
  nova::Params params = nova::nn::gpt_init(kTiny, g.seed, DType::f64);
  // Larger weights than GPT-2's 0.02 make the check sensitive.
  for (auto& t : params.tensors())
    for (auto& v : t.span<double>()) v = v * 10.0 + 0.01;
  Tensor x = Tensor::from<std::int32_t>({2, 4}, {1, 3, 3, 6, 0, 2, 5, 4});
  Tensor y = Tensor::from<std::int32_t>({2, 4}, {3, 3, 6, 1, 2, 5, 4, 0});

  std::vector<std::string> names = params.names();
  auto loss_of = [&](nova::Params& p, nova::ExecMode mode) {
    return nova::eval_step(gpt_loss, p, mode)(x, y, nova::static_arg(kTiny)).at({});
  };
  REQUIRE(params.size() == 29);

  // Gradients through train_step's own tracing: one SGD step with lr = 1
  // moves each parameter by exactly -gradient.
  nova::Params trained = nova::nn::gpt_init(kTiny, 0, DType::f64);
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto from = params.tensors()[i].span<double>();
    std::copy(from.begin(), from.end(), trained.tensors()[i].span<double>().begin());
  }
  auto step = nova::train_step(gpt_loss, trained, nova::SGD{.lr = 1.0});
  double l0 = step(x, y, nova::static_arg(kTiny));
  CHECK(std::abs(l0 - loss_of(params, nova::ExecMode::interpreted)) <= 1e-12 * std::abs(l0));
  CHECK(std::abs(l0 - loss_of(params, nova::ExecMode::compiled)) <= 1e-12 * std::abs(l0));

  for (std::size_t k = 0; k < params.size(); ++k) {
    INFO("parameter ", names[k]);
    auto before = params.tensors()[k].to_vector(), after = trained.tensors()[k].to_vector();
    std::vector<double> grad(before.size());
    for (std::size_t i = 0; i < before.size(); ++i) grad[i] = before[i] - after[i];
    // A few elements of each parameter by central differences.
    for (std::size_t i = 0; i < before.size(); i += std::max<std::size_t>(1, before.size() / 4)) {
      auto eval = [&](double delta) {
        double saved = params.tensors()[k].span<double>()[i];
        params.tensors()[k].span<double>()[i] = saved + delta;
        double l = loss_of(params, nova::ExecMode::interpreted);
        params.tensors()[k].span<double>()[i] = saved;
        return l;
      };
      double h = 1e-6;
      double fd = (eval(h) - eval(-h)) / (2 * h);
      INFO("element ", i, ": analytic ", grad[i], " fd ", fd);
      CHECK(std::abs(grad[i] - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
    }
  }
}

TEST_CASE("the compiled GPT matches the interpreter in fp32, and a training step lowers the loss") {
  Gen g;
  INFO("seed = ", g.seed);
  nova::nn::GPTConfig c{.vocab = 11, .context = 8, .d_model = 32, .layers = 2, .heads = 4};
  nova::Params params = nova::nn::gpt_init(c, g.seed);
  Tensor x = Tensor::empty({3, 8}, DType::i32), y = Tensor::empty({3, 8}, DType::i32);
  for (std::int64_t i = 0; i < 24; ++i) {
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 3) % 11);
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 10) % 11);
  }
  auto logits = [](const nova::ParamExprs& p, auto x, nova::nn::GPTConfig c) {
    return nova::nn::gpt_logits(c, p, x);
  };
  auto run = [&](nova::ExecMode mode) { return nova::eval_step(logits, params, mode)(x, nova::static_arg(c)); };
  CHECK(rel_error(run(nova::ExecMode::compiled), run(nova::ExecMode::interpreted)) <= 1e-5);

  auto step = nova::train_step(gpt_loss, params, nova::AdamW{.lr = 3e-3, .weight_decay = 0.0});
  double first = step(x, y, nova::static_arg(c)), last = first;
  for (int i = 0; i < 40; ++i) last = step(x, y, nova::static_arg(c));
  CHECK(last < first * 0.5);
}

TEST_CASE("Philox4x32-10 reference: the Random123 known answer for zero counter and key") {
  CHECK(nova::detail::philox_word(0, 0, 0) == 0x6627e8d5u);
}

TEST_CASE("dropout: compiled == reference bit for bit, rate, scale, seeds and streams") {
  Gen g;
  INFO("seed = ", g.seed);
  auto seed_tensor = [](std::int64_t s) {
    Tensor t = Tensor::empty({}, DType::i64);
    t.data<std::int64_t>()[0] = s;
    return t;
  };
  auto drop = [](auto x, auto s, double rate, std::int64_t stream) { return nova::dropout(x, s, rate, stream); };
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = g.randn({3, 50, 7}, dt);
    auto s = seed_tensor(static_cast<std::int64_t>(g.seed % (1ull << 50)));
    Tensor a = nova::jit(drop)(x, s, nova::static_arg(0.3), nova::static_arg(std::int64_t{2}));
    Tensor b = nova::jit(drop, nova::ExecMode::interpreted)(x, s, nova::static_arg(0.3), nova::static_arg(std::int64_t{2}));
    // The mask is integer arithmetic: identical. Kept values differ only by
    // the rounding of the scale (fp32: x * f32(1/(1-p)) vs x / (1-p)).
    auto av = a.to_vector(), bv = b.to_vector();
    std::size_t mask_mismatch = 0;
    for (std::size_t i = 0; i < av.size(); ++i) mask_mismatch += (av[i] == 0.0) != (bv[i] == 0.0);
    CHECK(mask_mismatch == 0);
    CHECK(rel_error(a, b) <= (dt == DType::f32 ? 3e-7 : 1e-15));
  }
  // Keep fraction and scale on 200k elements.
  Tensor ones = Tensor::full({200000}, 1.0);
  Tensor d = nova::jit(drop)(ones, seed_tensor(42), nova::static_arg(0.25), nova::static_arg(std::int64_t{0}));
  auto v = d.to_vector();
  std::size_t kept = 0, wrong_scale = 0;
  for (double e : v) {
    if (e != 0.0) {
      ++kept;
      wrong_scale += std::abs(e - 1.0 / 0.75) > 1e-6;
    }
  }
  CHECK(wrong_scale == 0);
  CHECK(std::abs(double(kept) / 200000.0 - 0.75) < 0.005);
  // Other seeds and streams give other masks; the same ones the same mask.
  Tensor d2 = nova::jit(drop)(ones, seed_tensor(43), nova::static_arg(0.25), nova::static_arg(std::int64_t{0}));
  Tensor d3 = nova::jit(drop)(ones, seed_tensor(42), nova::static_arg(0.25), nova::static_arg(std::int64_t{1}));
  Tensor d4 = nova::jit(drop)(ones, seed_tensor(42), nova::static_arg(0.25), nova::static_arg(std::int64_t{0}));
  CHECK(d2.to_vector() != v);
  CHECK(d3.to_vector() != v);
  CHECK(d4.to_vector() == v);
  // The gradient applies the same mask: d/dx sum(dropout(x) * w) = mask * w / (1 - p).
  Tensor x = g.randn({40}, DType::f64), w = g.randn({40}, DType::f64);
  auto grad = nova::jit([](auto x, auto w, auto s) {
    return nova::gradients(nova::sum(nova::dropout(x, s, 0.5) * w), {x})[0];
  })(x, w, seed_tensor(7));
  Tensor kept_x = nova::jit([](auto x, auto s) { return nova::dropout(x, s, 0.5); })(
      Tensor::full({40}, 1.0, DType::f64), seed_tensor(7));
  for (std::int64_t i = 0; i < 40; ++i)
    CHECK(grad.at({i}) == doctest::Approx(kept_x.at({i}) * w.at({i})).epsilon(1e-14));
}

TEST_CASE("a GPT with dropout trains; dropout off without a seed") {
  Gen g;
  INFO("seed = ", g.seed);
  nova::nn::GPTConfig c{.vocab = 11, .context = 8, .d_model = 16, .layers = 1, .heads = 2, .dropout = 0.1};
  nova::Params params = nova::nn::gpt_init(c, g.seed);
  Tensor x = Tensor::empty({2, 8}, DType::i32), y = Tensor::empty({2, 8}, DType::i32);
  for (std::int64_t i = 0; i < 16; ++i) {
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 5 + 1) % 11);
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 5 + 6) % 11);
  }
  auto step = nova::train_step(
      [](const nova::ParamExprs& p, auto x, auto y, auto seed, nova::nn::GPTConfig c) {
        return nova::nn::gpt_loss(c, p, x, y, seed);
      },
      params, nova::AdamW{.lr = 3e-3, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int i = 0; i < 40; ++i) {
    Tensor s = Tensor::full({}, double(i), DType::i64);
    last = step(x, y, s, nova::static_arg(c));
    if (i == 0) first = last;
  }
  CHECK(last < first * 0.6);
  // Dropout is off without a seed: the loss equals the same model's with
  // dropout 0 exactly; with a seed it differs, and one seed gives one mask.
  auto loss = [&](nova::nn::GPTConfig cfg, const Tensor* seed) {
    if (!seed)
      return nova::eval_step([](const nova::ParamExprs& p, auto x, auto y, nova::nn::GPTConfig c) {
               return nova::nn::gpt_loss(c, p, x, y);
             }, params)(x, y, nova::static_arg(cfg)).at({});
    return nova::eval_step([](const nova::ParamExprs& p, auto x, auto y, auto s, nova::nn::GPTConfig c) {
             return nova::nn::gpt_loss(c, p, x, y, s);
           }, params)(x, y, *seed, nova::static_arg(cfg)).at({});
  };
  nova::nn::GPTConfig off = c;
  off.dropout = 0.0;
  Tensor s1 = Tensor::full({}, 1.0, DType::i64), s2 = Tensor::full({}, 2.0, DType::i64);
  CHECK(loss(c, nullptr) == loss(off, nullptr));
  CHECK(loss(c, &s1) != loss(c, nullptr));
  CHECK(loss(c, &s1) == loss(c, &s1));
  CHECK(loss(c, &s1) != loss(c, &s2));
}

namespace {

/// Attention on qkv [B, T, 3d] as the unfused graph: slices, head split,
/// q k^T * scale + causal mask, softmax, p v, heads merged.
template <class Q>
nova::Expr<> unfused_attention(const Q& qkv, std::int64_t heads, double scale) {
  std::int64_t B = qkv.dim(0), T = qkv.dim(1), d = qkv.dim(2) / 3, hd = d / heads;
  auto split = [&](std::int64_t part) {
    auto t = nova::slice_last(qkv, part * d, d);
    return nova::permute(nova::reshape(t, {B, T, heads, hd}), {0, 2, 1, 3});
  };
  auto scores = nova::matmul(split(0), split(1), nova::Transpose::b) * scale;
  auto probs = nova::softmax(nova::add(scores, nova::causal_mask(T, T, qkv.dtype())), -1);
  auto att = nova::matmul(probs, split(2));
  return nova::reshape(nova::permute(att, {0, 2, 1, 3}), {B, T, d});
}

struct AttentionShape {
  std::int64_t B, T, d, heads;
};

} // namespace

TEST_CASE("fused causal attention against the unfused graph in float64: result and gradient") {
  Gen g;
  INFO("seed = ", g.seed);
  // Head dims 2, 4, 16, 64 (lanes 2..8 in f64); T not a multiple of the row
  // block (6 on AVX-512) nor of the vector width, and T = 1; T = 260, whose
  // backward takes 24-row blocks with its scratches in L2 (one 6-row
  // block's fill half of L1), the last block moved back.
  for (AttentionShape s : {AttentionShape{3, 7, 6, 3}, AttentionShape{2, 13, 12, 3},
                           AttentionShape{2, 17, 32, 2}, AttentionShape{1, 40, 64, 1},
                           AttentionShape{2, 1, 8, 2}, AttentionShape{1, 260, 64, 1}}) {
    INFO("B ", s.B, " T ", s.T, " d ", s.d, " heads ", s.heads);
    Tensor qkv = g.randn({s.B, s.T, 3 * s.d}, DType::f64);
    Tensor w = g.randn({s.B, s.T, s.d}, DType::f64);
    auto heads = nova::static_arg(s.heads);
    // scale 0.7, not the default 1/sqrt(hd): the attribute is honoured.
    auto fused = [](auto qkv, std::int64_t h) { return nova::causal_attention(qkv, h, 0.7); };
    auto graph = [](auto qkv, std::int64_t h) { return unfused_attention(qkv, h, 0.7); };
    auto fused_grad = [](auto w, auto qkv, std::int64_t h) {
      return nova::gradients(nova::sum(nova::causal_attention(qkv, h, 0.7) * w), {qkv})[0];
    };
    auto graph_grad = [](auto w, auto qkv, std::int64_t h) {
      return nova::gradients(nova::sum(unfused_attention(qkv, h, 0.7) * w), {qkv})[0];
    };
    constexpr auto interp = nova::ExecMode::interpreted;
    Tensor want = nova::jit(graph, interp)(qkv, heads);
    Tensor want_grad = nova::jit(graph_grad, interp)(w, qkv, heads);
    // The reference semantics of the fused ops agree with the graph...
    CHECK(rel_error(nova::jit(fused, interp)(qkv, heads), want) <= 1e-14);
    CHECK(rel_error(nova::jit(fused_grad, interp)(w, qkv, heads), want_grad) <= 1e-14);
    // ...and so does the compiled kernel, forward and backward.
    CHECK(rel_error(nova::jit(fused)(qkv, heads), want) <= kF64Tol);
    CHECK(rel_error(nova::jit(fused_grad)(w, qkv, heads), want_grad) <= kF64Tol);
    // In fp32 (16 lanes, polynomial exp), against the float64 graph on the
    // same rounded inputs.
    Tensor qkv32 = qkv.to(DType::f32), w32 = w.to(DType::f32);
    CHECK(rel_error(nova::jit(fused)(qkv32, heads), nova::jit(graph, interp)(qkv32, heads)) <=
          kF32Tol);
    CHECK(rel_error(nova::jit(fused_grad)(w32, qkv32, heads),
                    nova::jit(graph_grad, interp)(w32, qkv32, heads)) <= kF32Tol);
  }
}

TEST_CASE("fused causal attention: its gradient against finite differences, causality") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor qkv = g.randn({2, 5, 12}, DType::f64), w = g.randn({2, 5, 4}, DType::f64);
  auto loss = nova::jit([](auto w, auto qkv) { return nova::sum(nova::causal_attention(qkv, 2) * w); },
                        nova::ExecMode::interpreted);
  Tensor grad = nova::jit([](auto w, auto qkv) {
    return nova::gradients(nova::sum(nova::causal_attention(qkv, 2) * w), {qkv})[0];
  })(w, qkv);
  auto gv = grad.to_vector();
  for (std::size_t i = 0; i < gv.size(); ++i) {
    auto eval = [&](double delta) {
      Tensor in = qkv.clone();
      in.span<double>()[i] += delta;
      return loss(w, in).at({});
    };
    double h = 1e-6, fd = (eval(h) - eval(-h)) / (2 * h);
    INFO("element ", i, ": analytic ", gv[i], " fd ", fd);
    CHECK(std::abs(gv[i] - fd) <= fd_tol(gv));
  }
  // Row t of the result reads rows <= t only: changing the last row of qkv
  // leaves every earlier row of the result bit for bit the same.
  auto attn = nova::jit([](auto qkv) { return nova::causal_attention(qkv, 2); });
  Tensor changed = qkv.clone();
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t j = 0; j < 12; ++j) changed.span<double>()[static_cast<std::size_t>((b * 5 + 4) * 12 + j)] += 3.0;
  Tensor a = attn(qkv), c = attn(changed);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 4; ++t)
      for (std::int64_t j = 0; j < 4; ++j) CHECK(a.at({b, t, j}) == c.at({b, t, j}));
  CHECK(a.at({0, 4, 0}) != c.at({0, 4, 0}));
}

TEST_CASE("causal attention: shape errors name the op and the shapes") {
  Tensor bad = Tensor::zeros({2, 5, 10}, DType::f32), odd = Tensor::zeros({2, 5, 12}, DType::f32);
  CHECK_THROWS_WITH_AS(nova::jit([](auto x) { return nova::causal_attention(x, 2); })(bad),
                       doctest::Contains("nova.causal_attention: qkv must be [B, T, 3d]"), nova::ShapeError);
  CHECK_THROWS_WITH_AS(nova::jit([](auto x) { return nova::causal_attention(x, 3); })(odd),
                       doctest::Contains("is not divisible by 3 heads"), nova::ShapeError);
}

namespace {

/// LayerNorm as the unfused graph the op replaces.
template <class X, class G, class B>
nova::Expr<> unfused_layer_norm(const X& x, const G& gamma, const B& beta, double eps) {
  auto centered = nova::sub(x, nova::mean(x, {-1}, true));
  auto var = nova::mean(nova::mul(centered, centered), {-1}, true);
  auto normed = nova::mul(centered, nova::rsqrt(var + eps));
  return nova::add(nova::mul(normed, gamma), beta);
}

} // namespace

TEST_CASE("fused layer norm against the unfused graph in float64: result and every gradient") {
  Gen g;
  INFO("seed = ", g.seed);
  // d = 5 (1 lane), 24 (8 lanes), 64; 7 rows (not a multiple of the 4 rows
  // interleaved); rank 1; 64 x 32 rows of 48 (split over workgroups).
  for (nova::Shape shape : {nova::Shape{2, 3, 5}, nova::Shape{7, 24}, nova::Shape{4, 64},
                            nova::Shape{16}, nova::Shape{64, 32, 48}}) {
    INFO("shape ", nova::to_string(nova::TensorSpec{DType::f64, shape}));
    std::int64_t d = shape.back();
    Tensor x = g.randn(shape, DType::f64), w = g.randn(shape, DType::f64);
    Tensor gamma = g.randn({d}, DType::f64), beta = g.randn({d}, DType::f64);
    auto fused = [](auto x, auto g, auto b) { return nova::layer_norm(x, g, b, 1e-3); };
    auto graph = [](auto x, auto g, auto b) { return unfused_layer_norm(x, g, b, 1e-3); };
    auto fused_grad = [](auto w, auto x, auto g, auto b) {
      return nova::gradients(nova::sum(nova::layer_norm(x, g, b, 1e-3) * w), {x, g, b});
    };
    auto graph_grad = [](auto w, auto x, auto g, auto b) {
      return nova::gradients(nova::sum(unfused_layer_norm(x, g, b, 1e-3) * w), {x, g, b});
    };
    constexpr auto interp = nova::ExecMode::interpreted;
    Tensor want = nova::jit(graph, interp)(x, gamma, beta);
    std::vector<Tensor> want_grad = nova::jit(graph_grad, interp)(w, x, gamma, beta);
    CHECK(rel_error(nova::jit(fused, interp)(x, gamma, beta), want) <= 1e-14);
    CHECK(rel_error(nova::jit(fused)(x, gamma, beta), want) <= kF64Tol);
    std::vector<Tensor> ref_grad = nova::jit(fused_grad, interp)(w, x, gamma, beta);
    std::vector<Tensor> got_grad = nova::jit(fused_grad)(w, x, gamma, beta);
    for (std::size_t k = 0; k < 3; ++k) {
      INFO("gradient ", k);
      CHECK(rel_error(ref_grad[k], want_grad[k]) <= 1e-13);
      CHECK(rel_error(got_grad[k], want_grad[k]) <= kF64Tol);
    }
    Tensor x32 = x.to(DType::f32), g32 = gamma.to(DType::f32), b32 = beta.to(DType::f32);
    CHECK(rel_error(nova::jit(fused)(x32, g32, b32), nova::jit(graph, interp)(x32, g32, b32)) <=
          kF32Tol);
    std::vector<Tensor> got32 = nova::jit(fused_grad)(w.to(DType::f32), x32, g32, b32);
    std::vector<Tensor> want32 = nova::jit(graph_grad, interp)(w.to(DType::f32), x32, g32, b32);
    for (std::size_t k = 0; k < 3; ++k) CHECK(rel_error(got32[k], want32[k]) <= kF32Tol);
  }
}

TEST_CASE("layer norm: shape errors name the op and the shapes") {
  Tensor x = Tensor::zeros({4, 8}), bad = Tensor::zeros({7}), ok = Tensor::zeros({8});
  CHECK_THROWS_WITH_AS(nova::jit([](auto x, auto g, auto b) { return nova::layer_norm(x, g, b); })(x, bad, ok),
                       doctest::Contains("nova.layer_norm: gamma must be f32[8] for the input f32[4, 8], got f32[7]"),
                       nova::ShapeError);
  CHECK_THROWS_WITH_AS(nova::jit([](auto x, auto g, auto b) { return nova::layer_norm(x, g, b); })(x, ok, bad),
                       doctest::Contains("nova.layer_norm: beta must be f32[8]"), nova::ShapeError);
}
