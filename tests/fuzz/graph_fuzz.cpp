// graph_fuzz.cpp - differential fuzzing of the compiler against the float64
// reference interpreter.
//
//   graph_fuzz [graphs = 500] [first seed = 1] [max ops = 12]
//
// Graph g is a pure function of its seed: the seed picks three input shapes,
// then a sequence of ops over a pool of values (elementwise unary and binary
// ops with broadcasting, reductions, matmul, softmax, log_softmax, layer
// norm, causal attention, transposes, reshapes, slices, concatenating pads),
// each op's operands drawn from the pool with the shapes it needs made by
// construction (a size-1 dim broadcast, a slice to match, a reshape).
// Transcendentals see bounded inputs (tanh first, 1 + x^2 under a log or a
// root) so nothing overflows. The step returns the graph's result and the
// gradient of sum(result * w) with respect to every input, so every op's
// VJP and every kernel it lowers to are compiled; it runs compiled and
// interpreted in float64 and the two must agree to 1e-9 (normwise relative).
//
// A mismatch is shrunk: the shortest prefix of the op sequence that still
// mismatches is printed with its seed (`graph_fuzz 1 SEED OPS` replays it),
// to be kept as a regression test. Exit status: 0 when every graph agrees.
// NOVA_FUZZ_JSON=<file> also writes the run's numbers there.
#include <nova/nova.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using nova::DType;
using nova::Expr;
using nova::Shape;
using nova::Tensor;

namespace {

/// splitmix64: the fuzzer's only source of randomness.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % std::uint64_t(n)); }
  bool coin() { return next() & 1; }
};

/// The three input shapes of graph `seed` (decided before tracing, because
/// the inputs are made outside the step).
std::vector<Shape> input_shapes(std::uint64_t seed) {
  Rng r{seed * 7919 + 17};
  std::int64_t rank = 1 + r.below(3);
  Shape base;
  for (std::int64_t i = 0; i < rank; ++i) base.push_back(1 + r.below(6));
  std::vector<Shape> shapes{base};
  // The second: the same shape with some dims set to 1 (broadcastable);
  // the third: a fresh small shape.
  Shape b = base;
  for (auto& d : b)
    if (r.below(3) == 0) d = 1;
  shapes.push_back(b);
  Shape c;
  for (std::int64_t i = 0, n = 1 + r.below(3); i < n; ++i) c.push_back(1 + r.below(5));
  shapes.push_back(c);
  return shapes;
}

std::int64_t count_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

/// Builds graph `seed`'s first `ops` ops over the pool (the inputs first).
struct GraphBuilder {
  Rng r;
  std::vector<Expr<>> pool;

  Expr<> pick() { return pool[static_cast<std::size_t>(r.below(std::int64_t(pool.size())))]; }
  Expr<> bounded(const Expr<>& x) { return nova::tanh(x); }
  Expr<> positive(const Expr<>& x) { return x * x + 1.0; }

  /// `y` made broadcast-compatible with `x` (same rank; each dim equal or 1),
  /// by slicing, reshaping or reducing y.
  Expr<> like(const Expr<>& x, Expr<> y) {
    if (y.shape() == x.shape()) return y;
    // Flatten y, take as many elements as x has (repeating by broadcast
    // when y is too small), reshape to x's shape or to a size-1 variant.
    std::int64_t n = count_of(x.shape());
    Expr<> flat = nova::reshape(y, {count_of(y.shape())});
    if (count_of(y.shape()) >= n) return nova::reshape(nova::slice(flat, {0}, {n}), x.shape());
    Shape ones(x.shape().size(), 1);
    Expr<> first = nova::reshape(nova::slice(flat, {0}, {1}), ones);
    return first; // [1, ..., 1]: broadcasts against x
  }

  void step() {
    Expr<> x = pick();
    std::int64_t rank = x.rank();
    DType t = x.dtype();
    switch (r.below(20)) {
    case 0: pool.push_back(-x); break;
    case 1: pool.push_back(nova::exp(bounded(x))); break;
    case 2: pool.push_back(nova::log(positive(x))); break;
    case 3: pool.push_back(nova::tanh(x)); break;
    case 4: pool.push_back(nova::sqrt(positive(x)) * nova::rsqrt(positive(x * 0.5))); break;
    case 5: pool.push_back(nova::relu(x) + nova::erf(bounded(x)) + nova::gelu(bounded(x))); break;
    case 6: pool.push_back(x + like(x, pick()) - like(x, pick()) * 0.5); break;
    case 7: pool.push_back(x * like(x, pick()) / positive(like(x, pick()))); break;
    case 8: pool.push_back(nova::maximum(x, like(x, pick()))); break;
    case 9: { // reductions over one axis
      if (rank == 0) break;
      std::int64_t axis = r.below(rank);
      bool keep = r.coin();
      std::int64_t kind = r.below(3);
      pool.push_back(kind == 0   ? nova::sum(x, {axis}, keep)
                     : kind == 1 ? nova::mean(x, {axis}, keep)
                                 : nova::max(x, {axis}, keep));
      break;
    }
    case 10: { // x as [m, k] times a [k, n] made from the pool, lhs transposed half the time
      if (rank < 1) break;
      Expr<> a = nova::reshape(x, {count_of(x.shape()) / x.dim(-1), x.dim(-1)});
      std::int64_t k = a.dim(-1), n = 1 + r.below(4);
      Expr<> first = nova::reshape(nova::slice(nova::reshape(pick(), {-1}), {0}, {1}), {1, 1});
      Expr<> b = nova::broadcast(nova::tanh(first) + 0.25, {k, n}) +
                 nova::broadcast(like(nova::constant(0.0, t, {k, n}), pick()), {k, n}) * 0.5;
      if (r.coin()) pool.push_back(nova::matmul(nova::transpose(a), b, nova::Transpose::a));
      else pool.push_back(nova::matmul(a, b));
      break;
    }
    case 11: if (rank > 0) pool.push_back(nova::softmax(x, r.below(rank))); break;
    case 12: if (rank > 0) pool.push_back(nova::log_softmax(x, r.below(rank))); break;
    case 13: { // layer norm with gamma, beta from the pool
      if (rank == 0) break;
      std::int64_t d = x.dim(-1);
      Expr<> one = nova::reshape(nova::slice(nova::reshape(nova::tanh(pick()), {-1}), {0}, {1}), {1});
      Expr<> gamma = nova::broadcast(one, {d}) * 0.5 + 0.75, beta = nova::broadcast(one, {d}) * 0.1;
      pool.push_back(nova::layer_norm(x, gamma, beta, 1e-3));
      break;
    }
    case 14: { // causal attention on x as [1, T, 3d], columns cut to 3 x heads
      if (rank == 0) break;
      std::int64_t cols = x.dim(-1), rows = count_of(x.shape()) / cols;
      std::int64_t heads = 1 + r.below(2), width = 3 * heads * (cols / (3 * heads));
      if (width == 0) break;
      Expr<> m = nova::slice_last(nova::reshape(x, {1, rows, cols}), 0, width);
      pool.push_back(nova::reshape(nova::causal_attention(m, heads), {rows, width / 3}));
      break;
    }
    case 15: { // first and last dims swapped
      if (rank < 2) break;
      std::vector<std::int64_t> perm(static_cast<std::size_t>(rank));
      for (std::int64_t i = 0; i < rank; ++i) perm[static_cast<std::size_t>(i)] = i;
      std::swap(perm[0], perm[static_cast<std::size_t>(rank - 1)]);
      pool.push_back(nova::permute(x, perm));
      break;
    }
    case 16: pool.push_back(nova::reshape(x, {count_of(x.shape())})); break;
    case 17: if (rank > 0 && x.dim(-1) > 1) pool.push_back(nova::slice_last(x, 1, x.dim(-1) - 1)); break;
    case 18: { // a size-1 leading dim stretched
      if (rank == 0 || x.dim(0) != 1) break;
      Shape wide = x.shape();
      wide[0] = 3;
      pool.push_back(nova::broadcast(x, wide));
      break;
    }
    default: pool.push_back(x * 1.5 - 0.25); break;
    }
  }
};

/// The step: graph `seed` with `ops` ops; returns its result and the
/// gradient of sum(result * w) with respect to the three inputs.
struct FuzzStep {
  auto operator()(auto a, auto b, auto c, std::uint64_t seed, std::int64_t ops) const {
    GraphBuilder g{Rng{seed}, {a, b, c}};
    for (std::int64_t i = 0; i < ops; ++i) g.step();
    Expr<> out = g.pool.back();
    Expr<> loss = nova::sum(out * out * 0.5 + out);
    std::vector<Expr<>> result = nova::gradients(loss, {Expr<>(a), Expr<>(b), Expr<>(c)});
    result.push_back(out);
    return result;
  }
};

double rel_error(const Tensor& got, const Tensor& want) {
  auto a = got.to_vector(), b = want.to_vector();
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (!std::isnan(a[i])) diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / std::max(scale, 1.0);
}

/// Compiled against interpreted; the worst relative error (infinite when
/// shapes differ; an exception is reported as -1).
double run(std::uint64_t seed, std::int64_t ops, std::string* error) {
  std::vector<Shape> shapes = input_shapes(seed);
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    in.push_back(Tensor::randn(shapes[i], seed * 31 + i, DType::f64));
  try {
    auto compiled = nova::jit(FuzzStep{})(in[0], in[1], in[2], nova::static_arg(seed), nova::static_arg(ops));
    auto reference = nova::jit(FuzzStep{}, nova::ExecMode::interpreted)(
        in[0], in[1], in[2], nova::static_arg(seed), nova::static_arg(ops));
    double worst = 0;
    for (std::size_t i = 0; i < compiled.size(); ++i) worst = std::max(worst, rel_error(compiled[i], reference[i]));
    return worst;
  } catch (const nova::Error& e) {
    if (error) *error = e.what();
    return -1;
  }
}

} // namespace

int main(int argc, char** argv) {
  std::int64_t graphs = argc > 1 ? std::atoll(argv[1]) : 500;
  std::uint64_t first = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 1;
  std::int64_t max_ops = argc > 3 ? std::atoll(argv[3]) : 12;
  const double bound = 1e-9;
  int mismatches = 0, errors = 0;
  double worst = 0;
  for (std::int64_t g = 0; g < graphs; ++g) {
    std::uint64_t seed = first + std::uint64_t(g);
    std::int64_t ops = graphs == 1 && argc > 3 ? max_ops : 1 + std::int64_t(Rng{seed}.below(max_ops));
    std::string error;
    double err = run(seed, ops, &error);
    if (err >= 0 && err <= bound) {
      worst = std::max(worst, err);
      continue;
    }
    // Shrink: the shortest prefix that still fails the same way.
    std::int64_t smallest = ops;
    for (std::int64_t n = 1; n < ops; ++n) {
      std::string e2;
      double r2 = run(seed, n, &e2);
      if ((err < 0) == (r2 < 0) && (r2 < 0 || r2 > bound)) {
        smallest = n;
        break;
      }
    }
    if (err < 0) {
      ++errors;
      std::printf("ERROR   graph seed %llu, %lld ops (shrunk to %lld): %s\n  replay: graph_fuzz 1 %llu %lld\n",
                  (unsigned long long)seed, (long long)ops, (long long)smallest, error.c_str(),
                  (unsigned long long)seed, (long long)smallest);
    } else {
      ++mismatches;
      std::printf("MISMATCH graph seed %llu, %lld ops (shrunk to %lld): relative error %.3e > %.0e\n  replay: graph_fuzz 1 %llu %lld\n",
                  (unsigned long long)seed, (long long)ops, (long long)smallest, err, bound,
                  (unsigned long long)seed, (long long)smallest);
    }
  }
  if (const char* path = std::getenv("NOVA_FUZZ_JSON")) {
    // The run's numbers for CI's reliability.json.
    if (FILE* f = std::fopen(path, "w")) {
      std::fprintf(f,
                   "{\"graphs\": %lld, \"first_seed\": %llu, \"max_ops\": %lld, \"mismatches\": %d, "
                   "\"errors\": %d, \"worst_agreeing_error\": %.3e, \"bound\": %.0e}\n",
                   (long long)graphs, (unsigned long long)first, (long long)max_ops, mismatches, errors,
                   worst, bound);
      std::fclose(f);
    }
  }
  std::printf("graph_fuzz: %lld graphs (seeds %llu..%llu, up to %lld ops), %d mismatches, %d errors, "
              "worst agreeing error %.2e (bound %.0e)\n",
              (long long)graphs, (unsigned long long)first, (unsigned long long)(first + graphs - 1),
              (long long)max_ops, mismatches, errors, worst, bound);
  return mismatches + errors == 0 ? 0 : 1;
}
