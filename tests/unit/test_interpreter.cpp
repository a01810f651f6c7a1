// test_interpreter.cpp - the reference interpreter against hand-computed values.
//
// The interpreter is the oracle of every other numerical test, so its own
// ops are checked on cases small enough to compute by hand.
#include "scoped_env.hpp"
#include "testing.hpp"

using nova::Tensor;

namespace {
template <class F, class... Args> Tensor interpret(F f, const Args&... args) {
  return nova::jit(f, nova::ExecMode::interpreted)(args...);
}
std::vector<double> values(const Tensor& t) { return t.to_vector(); }
} // namespace

TEST_CASE("interpreter: arithmetic and broadcasting") {
  Tensor a = Tensor::from<double>({2, 2}, {1, 2, 3, 4});
  Tensor r = Tensor::from<double>({2}, {10, 20});
  CHECK(values(interpret([](auto a, auto r) { return a + r; }, a, r)) ==
        std::vector<double>{11, 22, 13, 24});
  CHECK(values(interpret([](auto a, auto r) { return a * r - a; }, a, r)) ==
        std::vector<double>{9, 38, 27, 76});
  CHECK(values(interpret([](auto a) { return nova::maximum(a, 2.5 - a); }, a)) ==
        std::vector<double>{1.5, 2, 3, 4});
  CHECK(values(interpret([](auto a) { return nova::relu(2.5 - a); }, a)) ==
        std::vector<double>{1.5, 0.5, 0, 0});
}

TEST_CASE("interpreter: matmul and its transposes") {
  Tensor a = Tensor::from<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from<double>({3, 2}, {7, 8, 9, 10, 11, 12});
  // [1 2 3; 4 5 6] [7 8; 9 10; 11 12] = [58 64; 139 154]
  CHECK(values(interpret([](auto a, auto b) { return nova::matmul(a, b); }, a, b)) ==
        std::vector<double>{58, 64, 139, 154});
  // a^T a = [17 22 27; 22 29 36; 27 36 45]
  CHECK(values(interpret([](auto a) { return nova::matmul(a, a, nova::Transpose::a); }, a)) ==
        std::vector<double>{17, 22, 27, 22, 29, 36, 27, 36, 45});
  // a a^T = [14 32; 32 77]
  CHECK(values(interpret([](auto a) { return nova::matmul(a, a, nova::Transpose::b); }, a)) ==
        std::vector<double>{14, 32, 32, 77});
}

TEST_CASE("interpreter: reductions, softmax, layout") {
  Tensor a = Tensor::from<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values(interpret([](auto a) { return nova::sum(a, {0}); }, a)) ==
        std::vector<double>{5, 7, 9});
  CHECK(values(interpret([](auto a) { return nova::mean(a, {1}, true); }, a)) ==
        std::vector<double>{2, 5});
  CHECK(values(interpret([](auto a) { return nova::max(a); }, a)) == std::vector<double>{6});
  Tensor l = Tensor::from<double>({2}, {0, std::log(3.0)});
  auto s = values(interpret([](auto l) { return nova::softmax(l); }, l));
  CHECK(s[0] == doctest::Approx(0.25).epsilon(1e-15));
  CHECK(s[1] == doctest::Approx(0.75).epsilon(1e-15));
  CHECK(values(interpret([](auto a) { return nova::transpose(a); }, a)) ==
        std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(values(interpret([](auto a) { return nova::reshape(a, {3, 2}); }, a)) ==
        std::vector<double>{1, 2, 3, 4, 5, 6});
  Tensor c = Tensor::from<double>({2, 1}, {1, 2});
  CHECK(values(interpret([](auto c) { return nova::broadcast(c, {2, 3}); }, c)) ==
        std::vector<double>{1, 1, 1, 2, 2, 2});
}

TEST_CASE("interpreter: transcendental ops at known points") {
  Tensor x = Tensor::from<double>({3}, {0, 1, -1});
  auto g = values(interpret([](auto x) { return nova::gelu(x, nova::GeluApprox::none); }, x));
  CHECK(g[0] == 0.0);
  CHECK(g[1] == doctest::Approx(0.8413447460685429).epsilon(1e-15)); // Phi(1)
  CHECK(g[2] == doctest::Approx(-0.15865525393145707).epsilon(1e-14));
  auto gt = values(interpret([](auto x) { return nova::gelu(x); }, x));
  CHECK(gt[1] == doctest::Approx(0.8411919906082768).epsilon(1e-15)); // GPT-2's formula at 1
  Tensor four = Tensor::from<double>({1}, {4});
  CHECK(values(interpret([](auto x) { return nova::sqrt(x) + nova::rsqrt(x); }, four)) ==
        std::vector<double>{2.5});
  CHECK(values(interpret([](auto x) { return nova::log(nova::exp(x)); }, four))[0] ==
        doctest::Approx(4).epsilon(1e-15));
}

TEST_CASE("interpreter: NOVA_INTERPRET_NOISE perturbs what rounds, by its size, reproducibly") {
  nova_test::Env env;
  // d/dx [sqrt(x) rsqrt(x / 2)] = 0, the sum of two terms of size
  // 1 / (sqrt(2) x) that cancel: what a float32 run may cancel exactly
  // by luck, and Monte Carlo arithmetic does not.
  auto flat = [](auto x) {
    nova::Expr<> y = nova::sqrt(x) * nova::rsqrt(x * 0.5);
    return nova::gradients(nova::sum(y), {nova::Expr<>(x)});
  };
  const std::vector<double> xs = {4, 1, 9, 0.25};
  Tensor x = Tensor::from<double>({4}, xs);
  auto gradient = [&](const char* noise) {
    if (noise) env.set("NOVA_INTERPRET_NOISE", noise);
    else env.unset("NOVA_INTERPRET_NOISE");
    return values(nova::jit(flat, nova::ExecMode::interpreted)(x)[0]);
  };
  for (double g : gradient(nullptr)) CHECK(std::abs(g) < 1e-15);
  const auto one = gradient("1e-6:1"), again = gradient("1e-6:1"), two = gradient("1e-6:2");
  CHECK(one == again);
  CHECK(one != two);
  double largest = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double term = 1 / (std::sqrt(2.0) * xs[i]);
    INFO("x = " << xs[i] << ", gradient " << one[i] << ", terms of " << term);
    // Each term is the product of at most 6 rounded results.
    CHECK(std::abs(one[i]) <= 2 * 6e-6 * term);
    largest = std::max(largest, std::abs(one[i]) / term);
  }
  CHECK(largest > 1e-8);
  // One draw an op: every element's terms move alike, so the gradients are
  // the same multiple of their terms.
  const auto aligned = gradient("1e-6:1:op");
  CHECK(std::abs(aligned[0]) > 1e-9);
  for (std::size_t i = 1; i < xs.size(); ++i)
    CHECK(aligned[i] * xs[i] == doctest::Approx(aligned[0] * xs[0]).epsilon(1e-6));
  // Copies, sign changes and choices stay exact.
  env.set("NOVA_INTERPRET_NOISE", "1e-3:7");
  Tensor m = Tensor::from<double>({2, 2}, {1.5, -2, 3, 0.125});
  CHECK(values(interpret([](auto m) { return nova::transpose(nova::relu(-m)); }, m)) ==
        std::vector<double>{0, 0, 2, 0});
  // An infinity (a mask's -inf) stays what it is: not -inf + inf.
  const auto masked = values(interpret([](auto m) { return nova::exp(nova::log(m * 0.0)) + m; }, m));
  for (std::size_t i = 0; i < masked.size(); ++i) CHECK(masked[i] == doctest::Approx(m.to_vector()[i]).epsilon(2e-3));
  for (const char* bad : {"abc", "1e-7:", "2", "1e-7:x", "-1e-7", "1e-7:1:each", "1e-7:1:op:2"}) {
    env.set("NOVA_INTERPRET_NOISE", bad);
    CHECK_THROWS_AS(interpret([](auto m) { return m * 2.0; }, m), nova::Error);
  }
}

TEST_CASE("interpreter: under NOVA_INTERPRET_NOISE a bf16 or tf32 product moves by its operands' roundoff") {
  nova_test::Env env;
  const nova::MatmulPrecision before = nova::matmul_precision();
  Tensor a = Tensor::from<double>({2, 3}, {1, -2, 3, 0.5, 4, -1});
  Tensor b = Tensor::from<double>({3, 2}, {2, 1, 1, -3, 0.25, 2});
  const std::vector<double> exact = {0.75, 13, 4.75, -13.5}; // a b
  const std::vector<double> terms = {4.75, 13, 5.25, 14.5};  // |a| |b|
  // Each sum's running sums S_k (2, 0, 0.75; 1, 7, 13; 1, 5, 4.75;
  // 0.5, -11.5, -13.5): its accumulation's rounding, in float32 at every
  // precision, under one draw an op all of one sign, sum_k |S_k|.
  const std::vector<double> spreads = {2.75, 21, 10.75, 25.5};
  auto product = [&](nova::MatmulPrecision p) {
    nova::set_matmul_precision(p);
    auto r = values(interpret([](auto a, auto b) { return nova::matmul(a, b); }, a, b));
    nova::set_matmul_precision(before);
    return r;
  };
  // f32's roundoff, one draw for the op: all four move by one multiple of
  // their terms' magnitudes times twice the operands' roundoff (f32's own
  // at fp32) plus their running sums' coherent spread times f32's.
  env.set("NOVA_INTERPRET_NOISE", "6e-8:3:op");
  for (auto [p, roundoff] : {std::pair{nova::MatmulPrecision::bf16, 0x1p-8}, {nova::MatmulPrecision::tf32, 0x1p-10},
                             {nova::MatmulPrecision::fp32, 3e-8}}) {
    const auto got = product(p);
    auto size = [&](std::size_t i) { return terms[i] * 2 * roundoff + spreads[i] * 6e-8; };
    const double moved = (got[0] - exact[0]) / size(0);
    INFO("precision " << nova::name_of(p) << ": moved by " << moved << " of its size");
    CHECK(std::abs(moved) <= 1);
    CHECK(std::abs(moved) > 0.01);
    for (std::size_t i = 1; i < exact.size(); ++i)
      CHECK((got[i] - exact[i]) / size(i) == doctest::Approx(moved).epsilon(1e-6));
  }
}

TEST_CASE("interpreter: under NOVA_INTERPRET_NOISE a long sum moves by its running sums' rounding, inside LayerNorm too") {
  nova_test::Env env;
  const std::int64_t n = 12000;
  const double u = 6e-8;
  // A mean of n ones: its running sums k (k = 1..n) round in turn, about
  // u sqrt(n / 3) = 63 u of the mean; rounding the result, or each term,
  // once would say u.
  Tensor ones = Tensor::from<double>({n}, std::vector<double>(n, 1.0));
  double mean = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    env.set("NOVA_INTERPRET_NOISE", "6e-8:" + std::to_string(seed));
    mean = std::max(mean, std::abs(values(interpret([](auto x) { return nova::mean(x); }, ones))[0] - 1));
  }
  INFO("a mean of " << n << " ones moved by " << mean / u << " u");
  CHECK(mean > 5 * u);
  CHECK(mean <= (2 + std::sqrt(double(n) / 3)) * u);
  // One draw an op: the running sums' roundings all of one sign, as a sum
  // of one value repeated rounds (u sum_k k / n = u (n + 1) / 2).
  double coherent = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    env.set("NOVA_INTERPRET_NOISE", "6e-8:" + std::to_string(seed) + ":op");
    coherent = std::max(coherent, std::abs(values(interpret([](auto x) { return nova::mean(x); }, ones))[0] - 1));
  }
  INFO("drawn once an op: " << coherent / u << " u");
  CHECK(coherent > (2 + std::sqrt(double(n) / 3)) * u);
  CHECK(coherent <= (2 + double(n + 1) / 2) * u);
  // The gradient of a LayerNorm over one row of n sums to 0: its two sums'
  // rounding shifts all n elements alike, which the row's sum collects (up
  // to about n sqrt(n / 3) u times a term's size). Rounding only the
  // results and the row sum's terms (the noise before the running sums)
  // moved it 2393 u times a term's size; the running sums, 271107.
  std::vector<double> xs(n), ws(n);
  for (std::int64_t i = 0; i < n; ++i) {
    xs[i] = std::sin(0.37 * double(i));
    ws[i] = 1.5 + std::cos(0.11 * double(i));
  }
  Tensor x = Tensor::from<double>({n}, xs), w = Tensor::from<double>({n}, ws);
  auto row_sum = [](auto x, auto w) {
    nova::Expr<> gamma = nova::broadcast(nova::reshape(nova::slice(w, {0}, {1}), {1}), {n}), beta = gamma * 0.0;
    auto dx = nova::gradients(nova::sum(nova::layer_norm(x, gamma, beta, 1e-3) * w), {nova::Expr<>(x)});
    return nova::sum(dx[0]);
  };
  env.unset("NOVA_INTERPRET_NOISE");
  CHECK(std::abs(values(interpret(row_sum, x, w))[0]) < 1e-9);
  double moved = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    env.set("NOVA_INTERPRET_NOISE", "6e-8:" + std::to_string(seed));
    moved = std::max(moved, std::abs(values(interpret(row_sum, x, w))[0]));
  }
  // gamma w's terms are at most 2.5 * 2.5; rstd about sqrt(2).
  const double term = 2.5 * 2.5 * std::sqrt(2.0);
  INFO("the row's gradient summed moved by " << moved / (u * term) << " u x a term's size");
  CHECK(moved > 2 * double(n) * u * term);
  CHECK(moved <= 4 * double(n) * std::sqrt(double(n) / 3) * u * term);
}

TEST_CASE("interpreter: under NOVA_INTERPRET_NOISE bf16 attention moves by its operands' roundoff, float32's by its own") {
  nova_test::Env env;
  const nova::MatmulPrecision before = nova::matmul_precision();
  const std::int64_t T = 5, d = 4;
  std::vector<double> x(T * 3 * d);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * double(i) + 0.3);
  Tensor qkv = Tensor::from<double>({1, T, 3 * d}, x);
  auto attention = [&](nova::MatmulPrecision p) {
    nova::set_matmul_precision(p);
    auto r = values(interpret([](auto m) { return nova::causal_attention(m, 2); }, qkv));
    nova::set_matmul_precision(before);
    return r;
  };
  env.unset("NOVA_INTERPRET_NOISE");
  const auto exact = attention(nova::MatmulPrecision::fp32);
  env.set("NOVA_INTERPRET_NOISE", "6e-8:5");
  // Each output is a weighted mean of values of at most 1 in magnitude.
  double bf16 = 0, f32 = 0;
  for (auto [p, moved] : {std::pair{nova::MatmulPrecision::bf16, &bf16}, {nova::MatmulPrecision::fp32, &f32}}) {
    const auto got = attention(p);
    for (std::size_t i = 0; i < exact.size(); ++i) *moved = std::max(*moved, std::abs(got[i] - exact[i]));
  }
  INFO("moved by " << bf16 << " (bf16), " << f32 << " (f32)");
  // q, k, v and the probabilities rounded at 2^-8: the scores move by up to
  // 2^-7 |q| |k| (d = 2 a head: 2^-6), the weights by about that, the
  // output by that and v's own 2^-8 and P's.
  CHECK(bf16 <= 6 * 0x1p-8);
  CHECK(bf16 > 0.05 * 0x1p-8);
  CHECK(f32 <= 4 * 6e-8);
  CHECK(f32 > 0);
}
