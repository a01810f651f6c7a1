// test_gradients.cpp - every VJP against central finite differences, float64.
//
// For an op f and inputs x, the loss L = sum(f(x) * w) with a fixed random
// w; dL/dx from nova.gradient (interpreted and compiled) must match
// (L(x + h e_i) - L(x - h e_i)) / 2h within 1e-6 of max(1, |g|_inf).
#include "testing.hpp"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <typeinfo>
#include <utility>

#include "nova/detail/trace.hpp"

using nova::DType;
using nova::Shape;
using nova::Tensor;
using namespace nova_test;

namespace {

constexpr double kTol = 1e-6;

Tensor perturbed(const Tensor& x, std::size_t i, double delta) {
  Tensor y = x.clone();
  y.span<double>()[i] += delta;
  return y;
}

/// The nova ops in the forward graph of each checked F, written to
/// $NOVA_GRAD_JSON at exit (CI's reliability.json counts them).
struct CheckedOps {
  std::set<std::string> ops;
  ~CheckedOps() {
    const char* path = std::getenv("NOVA_GRAD_JSON");
    if (!path) return;
    std::ofstream out(path);
    out << "{\"ops\": [";
    const char* sep = "";
    for (const auto& op : ops) out << std::exchange(sep, ", ") << '"' << op << '"';
    out << "]}\n";
  }
};
CheckedOps& checked_ops() {
  static CheckedOps ops;
  return ops;
}

/// Records the ops F traces to on inputs like `xs`.
template <class F, class... X> void record_ops(const X&... xs) {
  std::unique_ptr<nova::detail::Builder> b = nova::detail::make_builder("ops");
  {
    nova::detail::TraceScope scope(*b);
    F{}(nova::detail::trace_argument(*b, xs.spec())...);
  }
  std::string ir = b->ir();
  static const std::regex op_name(R"(\bnova\.([a-z_]+)\b)");
  for (std::sregex_iterator it(ir.begin(), ir.end(), op_name), end; it != end; ++it)
    checked_ops().ops.insert((*it)[1].str());
}

/// Checks d/dx_k of sum(F(xs...) * w) for each float input k (integer inputs,
/// such as gather indices and dropout seeds, are held fixed).
template <class F, class... X> void check_grads(const X&... xs) {
  record_ops<F>(xs...);
  Tensor out = nova::jit([](auto... x) { return F{}(x...); }, nova::ExecMode::interpreted)(xs...);
  Gen g;
  INFO("seed = ", g.seed, ", op ", std::string(typeid(F).name()));
  Tensor w = g.randn(out.shape(), DType::f64);
  auto loss_fn = [](auto w, auto... x) { return nova::sum(F{}(x...) * w); };
  auto loss = nova::jit(loss_fn, nova::ExecMode::interpreted);
  auto grads_fn = [](auto w, auto... x) {
    auto l = nova::sum(F{}(x...) * w);
    std::vector<nova::Expr<>> wrt;
    (..., (nova::is_floating(x.dtype()) ? wrt.push_back(nova::Expr<>(x)) : void()));
    return nova::gradients(l, wrt);
  };
  std::vector<Tensor> interp = nova::jit(grads_fn, nova::ExecMode::interpreted)(w, xs...);
  std::vector<Tensor> compiled = nova::jit(grads_fn)(w, xs...);
  std::vector<Tensor> inputs{xs...};
  std::size_t g_index = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!nova::is_floating(inputs[k].dtype())) continue;
    INFO("input ", k, " ", nova::to_string(inputs[k].spec()));
    REQUIRE(g_index < interp.size());
    REQUIRE(interp[g_index].spec() == inputs[k].spec());
    auto gi = interp[g_index].to_vector(), gc = compiled[g_index].to_vector();
    ++g_index;
    double scale = 1.0;
    for (double v : gi) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < gi.size(); ++i) {
      double h = 1e-6 * std::max(1.0, std::abs(inputs[k].to_vector()[i]));
      auto at = [&](double delta) {
        std::vector<Tensor> in = inputs;
        in[k] = perturbed(inputs[k], i, delta);
        return std::apply([&](const auto&... a) { return loss(w, a...); },
                          [&]<std::size_t... I>(std::index_sequence<I...>) {
                            return std::make_tuple(in[I]...);
                          }(std::make_index_sequence<sizeof...(X)>{}))
            .at({});
      };
      double fd = (at(h) - at(-h)) / (2 * h);
      INFO("element ", i, ": analytic ", gi[i], ", finite difference ", fd);
      CHECK(std::abs(gi[i] - fd) <= kTol * scale);
      CHECK(std::abs(gc[i] - gi[i]) <= 1e-12 * scale);
    }
  }
  CHECK(g_index == interp.size());
}

/// Inputs: one stream for the file, so successive draws differ (a fresh
/// Gen per draw would repeat its first tensor: max(a, a) has no gradient
/// to check). The same command draws the same inputs.
Gen& inputs() {
  static Gen g;
  return g;
}
Tensor r(const Shape& s) { return inputs().randn(s, DType::f64); }
Tensor pos(const Shape& s) { return inputs().positive(s, DType::f64); }

#define OP1(NAME, EXPR) struct NAME { auto operator()(auto x) const { return EXPR; } };
#define OP2(NAME, EXPR) struct NAME { auto operator()(auto a, auto b) const { return EXPR; } };
OP2(Add, a + b)
OP2(Sub, a - b)
OP2(Mul, a * b)
OP2(Div, a / b)
OP2(Max, nova::maximum(a, b))
OP2(Min, nova::minimum(a, b))
OP1(Neg, -x)
OP1(Exp, nova::exp(x))
OP1(Log, nova::log(x))
OP1(Tanh, nova::tanh(x))
OP1(Sqrt, nova::sqrt(x))
OP1(Rsqrt, nova::rsqrt(x))
OP1(Relu, nova::relu(x))
OP1(Erf, nova::erf(x))
OP1(GeluTanh, nova::gelu(x))
OP1(GeluErf, nova::gelu(x, nova::GeluApprox::none))
OP2(Matmul, nova::matmul(a, b))
OP2(MatmulTA, nova::matmul(a, b, nova::Transpose::a))
OP2(MatmulTB, nova::matmul(a, b, nova::Transpose::b))
OP2(MatmulTT, nova::matmul(a, b, nova::Transpose::both))
OP1(Broadcast, nova::broadcast(x, {2, 3, 4}))
OP1(Reshape, nova::reshape(x, {4, -1}))
OP1(Permute, nova::permute(x, {2, 0, 1}))
OP1(SumAll, nova::sum(x))
OP1(SumAxis, nova::sum(x, {1}))
OP1(MeanKeep, nova::mean(x, {0, 2}, true))
OP1(MaxAxis, nova::max(x, {-1}))
OP1(MaxKeep, nova::max(x, {0}, true))
OP1(Softmax, nova::softmax(x, 1))
OP1(LogSoftmax, nova::log_softmax(x))
OP1(Chain, nova::sum(nova::tanh(nova::matmul(x, nova::transpose(x)) * 0.1)) + nova::exp(x * -0.5) / 3.0)
OP2(Mse, nova::nn::mse(a, b))
OP1(SliceBox, nova::slice(x, {1, 0, 2}, {2, 3, 2}))
OP1(SliceLast, nova::slice_last(x, 1, 3))
OP2(Gather, nova::gather(a, b))
OP1(Attention, nova::causal_attention(x, 2))
OP1(AttentionOneHead, nova::causal_attention(x, 1, 0.7))
OP2(Dropout, nova::dropout(a, b, 0.3, 5))
OP2(Greater, nova::greater(a, b) * a)
// pad and scatter_add have no front-end function (they are the VJPs of slice
// and gather); their own VJPs (second-order gradients) are checked through
// the tracer directly.
struct Pad {
  auto operator()(auto x) const {
    return nova::detail::emit("nova.pad", {x.id()},
                              {{"low", std::vector<std::int64_t>{1, 0}},
                               {"high", std::vector<std::int64_t>{0, 2}}},
                              nullptr, std::source_location::current());
  }
};
struct ScatterAdd {
  auto operator()(auto indices, auto updates) const {
    nova::TensorSpec spec{updates.dtype(), {4, updates.dim(-1)}};
    return nova::detail::emit("nova.scatter_add", {indices.id(), updates.id()}, {}, &spec,
                              std::source_location::current());
  }
};
struct LayerNorm {
  auto operator()(auto x, auto gamma, auto beta) const { return nova::layer_norm(x, gamma, beta, 1e-3); }
};
struct SoftmaxCrossEntropy {
  auto operator()(auto logits, auto labels) const { return nova::softmax_cross_entropy(logits, labels); }
};
struct Mlp {
  auto operator()(auto x, auto w1, auto b1, auto w2, auto b2) const {
    return nova::log_softmax(nova::matmul(nova::gelu(nova::matmul(x, w1) + b1), w2) + b2);
  }
};
#undef OP1
#undef OP2

} // namespace

TEST_CASE("elementwise binary VJPs, with broadcasting") {
  for (auto [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{5}, {5}}, {{3, 4}, {4}}, {{2, 1, 3}, {4, 1}}, {{}, {3}}}) {
    INFO(nova::to_string(sa), " and ", nova::to_string(sb));
    check_grads<Add>(r(sa), r(sb));
    check_grads<Sub>(r(sa), r(sb));
    check_grads<Mul>(r(sa), r(sb));
    check_grads<Div>(r(sa), pos(sb));
    check_grads<Max>(r(sa), r(sb));
    check_grads<Min>(r(sa), r(sb));
  }
}

TEST_CASE("elementwise unary VJPs") {
  for (Shape s : std::vector<Shape>{{}, {7}, {2, 3}}) {
    INFO(nova::to_string(s));
    check_grads<Neg>(r(s));
    check_grads<Exp>(r(s));
    check_grads<Log>(pos(s));
    check_grads<Tanh>(r(s));
    check_grads<Sqrt>(pos(s));
    check_grads<Rsqrt>(pos(s));
    check_grads<Relu>(r(s));
    check_grads<Erf>(r(s));
    check_grads<GeluTanh>(r(s));
    check_grads<GeluErf>(r(s));
  }
}

TEST_CASE("matmul VJPs: every transpose flag, batched, size-1 dims") {
  check_grads<Matmul>(r({3, 4}), r({4, 2}));
  check_grads<Matmul>(r({1, 4}), r({4, 1}));
  check_grads<Matmul>(r({2, 3, 4}), r({2, 4, 5}));
  check_grads<MatmulTA>(r({4, 3}), r({4, 2}));
  check_grads<MatmulTB>(r({3, 4}), r({2, 4}));
  check_grads<MatmulTT>(r({4, 3}), r({2, 4}));
  check_grads<MatmulTT>(r({2, 4, 3}), r({2, 5, 4}));
}

TEST_CASE("layout and reduction VJPs") {
  check_grads<Broadcast>(r({3, 1}));
  check_grads<Broadcast>(r({4}));
  check_grads<Reshape>(r({2, 2, 3}));
  check_grads<Permute>(r({2, 3, 4}));
  check_grads<SumAll>(r({3, 4}));
  check_grads<SumAxis>(r({2, 3, 4}));
  check_grads<MeanKeep>(r({2, 3, 4}));
  check_grads<MaxAxis>(r({3, 5}));
  check_grads<MaxKeep>(r({4, 2}));
}

TEST_CASE("softmax, log_softmax, losses and a chain that reuses its input") {
  check_grads<Softmax>(r({2, 5}));
  check_grads<Softmax>(r({3, 4, 2}));
  check_grads<LogSoftmax>(r({3, 6}));
  check_grads<Mse>(r({4, 3}), r({4, 3}));
  check_grads<Chain>(r({3, 4}));
}

TEST_CASE("slice, pad, gather, scatter-add, greater, dropout, LayerNorm and causal attention VJPs") {
  check_grads<SliceBox>(r({3, 4, 5}));
  check_grads<SliceLast>(r({2, 5}));
  // Repeated rows (their gradients add) and an index past the table (reads
  // zeros, no gradient).
  check_grads<Gather>(r({5, 3}), Tensor::from<std::int32_t>({2, 3}, {4, 0, 4, 2, 7, 0}));
  check_grads<Dropout>(r({4, 6}), Tensor::full({}, 12345.0, DType::i64));
  check_grads<LayerNorm>(r({3, 6}), r({6}), r({6}));
  check_grads<LayerNorm>(r({2, 2, 4}), r({4}), r({4}));
  check_grads<Attention>(r({2, 5, 12}));
  check_grads<AttentionOneHead>(r({1, 3, 6}));
  check_grads<Greater>(r({3, 4}), r({4}));
  check_grads<Pad>(r({2, 3}));
  check_grads<ScatterAdd>(Tensor::from<std::int64_t>({5}, {3, 0, 3, 9, 1}), r({5, 2}));
}

TEST_CASE("cross-entropy: gradient against finite differences and a closed form") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor logits = g.randn({5, 7}, DType::f64);
  Tensor labels = Tensor::from<std::int32_t>({5}, {0, 6, 3, 3, 1});
  auto ce = [](auto z, auto y) { return nova::nn::cross_entropy(z, y); };
  auto dce = [](auto z, auto y) {
    return nova::gradients(nova::nn::cross_entropy(z, y), {z})[0];
  };
  Tensor grad = nova::jit(dce)(logits, labels);
  // Closed form: (softmax(z) - onehot(y)) / N.
  auto z = logits.to_vector();
  for (int n = 0; n < 5; ++n) {
    double m = -1e300, s = 0;
    for (int c = 0; c < 7; ++c) m = std::max(m, z[n * 7 + c]);
    for (int c = 0; c < 7; ++c) s += std::exp(z[n * 7 + c] - m);
    for (int c = 0; c < 7; ++c) {
      double p = std::exp(z[n * 7 + c] - m) / s;
      double want = (p - (c == static_cast<int>(labels.at({n})) ? 1.0 : 0.0)) / 5.0;
      CHECK(std::abs(grad.at({n, c}) - want) <= 1e-12);
    }
  }
  // Finite differences on a few logits.
  auto loss = nova::jit(ce);
  for (std::size_t i : {0u, 13u, 34u}) {
    double h = 1e-6;
    double fd = (loss(perturbed(logits, i, h), labels).at({}) -
                 loss(perturbed(logits, i, -h), labels).at({})) / (2 * h);
    CHECK(std::abs(grad.to_vector()[i] - fd) <= 1e-8);
  }
  // Large logits stay finite.
  Tensor big = Tensor::full({2, 3}, 1e4, DType::f32);
  Tensor y2 = Tensor::from<std::int32_t>({2}, {0, 2});
  double l = nova::jit(ce)(big, y2).at({});
  CHECK(std::abs(l - std::log(3.0)) < 1e-5);
}

TEST_CASE("cross-entropy in f32 at logits near 1000: the gradient read from the forward's row statistics and the "
          "one recomputing them both match the closed form, to the bit alike") {
  Gen g;
  INFO("seed = ", g.seed);
  const std::int64_t n = 9, c = 37;
  Tensor logits = g.randn({n, c}, DType::f32);
  for (float& v : logits.span<float>()) v = 1000.0f + 30.0f * v;
  Tensor labels = class_labels({n}, c);
  // Loss and gradient in one step: the backward reads the forward's max and
  // sum (nova-share-row-statistics). The gradient alone: no forward is left
  // to read from, the backward recomputes them.
  auto both = [](auto z, auto y) {
    nova::Expr<> loss = nova::nn::cross_entropy(z, y);
    return std::vector<nova::Expr<>>{loss, nova::gradients(loss, {z})[0]};
  };
  auto alone = [](auto z, auto y) { return nova::gradients(nova::nn::cross_entropy(z, y), {z})[0]; };
  std::vector<Tensor> paired = nova::jit(both)(logits, labels);
  Tensor recomputed = nova::jit(alone)(logits, labels);
  auto z = logits.to_vector();
  auto gp = paired[1].to_vector(), gr = recomputed.to_vector();
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int32_t y = labels.span<std::int32_t>()[static_cast<std::size_t>(i)];
    bool counted = y >= 0 && y < c;
    double m = -1e300, sum = 0;
    for (std::int64_t k = 0; k < c; ++k) m = std::max(m, double(z[i * c + k]));
    for (std::int64_t k = 0; k < c; ++k) sum += std::exp(double(z[i * c + k]) - m);
    for (std::int64_t k = 0; k < c; ++k) {
      double p = std::exp(double(z[i * c + k]) - m) / sum;
      double want = counted ? (p - (k == y ? 1.0 : 0.0)) / double(n) : 0.0; // the mean over all n rows
      std::size_t at = static_cast<std::size_t>(i * c + k);
      worst = std::max(worst, std::abs(gp[at] - want));
      CHECK(gp[at] == gr[at]);
    }
  }
  INFO("largest error ", worst);
  CHECK(worst <= 1e-6);
}

namespace {
// A LayerNorm's output and its three gradients (of a weighted sum of it),
// under two types: the jit cache keys a step by its type, so the second is
// traced apart (with NOVA_ROW_STATS=0 below).
auto layer_norm_grads = [](auto x, auto gamma, auto beta, auto w) {
  nova::Expr<> y = nova::layer_norm(x, gamma, beta, 1e-5);
  return std::vector<nova::Expr<>>{y, nova::gradients(nova::sum(y * w), {x, gamma, beta})[0],
                                   nova::gradients(nova::sum(y * w), {x, gamma, beta})[1],
                                   nova::gradients(nova::sum(y * w), {x, gamma, beta})[2]};
};
auto layer_norm_grads_recomputing = [](auto x, auto gamma, auto beta, auto w) {
  return layer_norm_grads(x, gamma, beta, w);
};
} // namespace

TEST_CASE("LayerNorm in f32: the backward and the normalized input reading the forward's row mean and rstd give "
          "the values recomputing them gives, to the bit") {
  Gen g;
  INFO("seed = ", g.seed);
  Tensor x = g.randn({3, 5, 24}), gamma = g.randn({24}), beta = g.randn({24}), w = g.randn({3, 5, 24});
  for (float& v : x.span<float>()) v = 40.0f + 3.0f * v; // rows far from 0: the centered variance matters
  std::vector<Tensor> shared = nova::jit(layer_norm_grads)(x, gamma, beta, w);
  setenv("NOVA_ROW_STATS", "0", 1);
  std::vector<Tensor> recomputed = nova::jit(layer_norm_grads_recomputing)(x, gamma, beta, w);
  unsetenv("NOVA_ROW_STATS");
  REQUIRE(shared.size() == recomputed.size());
  for (std::size_t i = 0; i < shared.size(); ++i) {
    INFO("result ", i);
    auto a = shared[i].to_vector(), b = recomputed[i].to_vector();
    REQUIRE(a.size() == b.size());
    std::size_t differing = 0;
    for (std::size_t k = 0; k < a.size(); ++k) differing += a[k] != b[k];
    CHECK(differing == 0);
  }
}

TEST_CASE("the per-row cross-entropy op: VJP, rank 3 and i64 labels, an out-of-range label ignored") {
  check_grads<SoftmaxCrossEntropy>(r({4, 7}), Tensor::from<std::int32_t>({4}, {6, 0, 3, 3}));
  // Labels -1 and 5 (of 5 classes): those rows' losses and gradients are 0.
  check_grads<SoftmaxCrossEntropy>(r({2, 3, 5}), Tensor::from<std::int64_t>({2, 3}, {4, -1, 0, 2, 5, 1}));
  Tensor z = r({2, 5});
  Tensor losses = nova::jit(SoftmaxCrossEntropy{})(z, Tensor::from<std::int32_t>({2}, {1, 5}));
  CHECK(losses.at({1}) == 0.0);
  CHECK(losses.at({0}) > 0.0);
}

TEST_CASE("a whole MLP: every parameter's gradient against finite differences") {
  check_grads<Mlp>(r({4, 5}), r({5, 6}), r({6}), r({6, 3}), r({3}));
}
