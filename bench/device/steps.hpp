// steps.hpp - what make_steps (here) and run_steps (on the GPU machine)
// agree on: a step file's one line, and the inputs it stands for. A step is
// a GPT's (bench/gpt_step's configs) or an MLP's: in -> hidden (GELU) ->
// out classes, cross-entropy over a batch of samples.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nova/nn/gpt.hpp"
#include "nova/nn/losses.hpp"
#include "nova/nova.hpp"
#include "nova/tensor.hpp"

namespace steps {

struct StepFile {
  /// "gpt" (c) or "mlp" (in, hidden, out).
  std::string model = "gpt";
  nova::nn::GPTConfig c;
  std::int64_t in = 0, hidden = 0, out = 0;
  std::int64_t batch = 0;
  std::uint64_t param_seed = 0, token_seed = 0;
  double lr = 0;
  /// One step on the CPU: its loss, and its updated parameters' sum of squares.
  double loss = 0, params_sumsq = 0;
};

/// Tokens (GPT) or samples (MLP) a step trains on.
inline std::int64_t samples_per_step(const StepFile& f) { return f.model == "mlp" ? f.batch : f.batch * f.c.context; }

/// The MLP's parameters: N(0, 1/fan_in) weights, zero biases.
inline nova::Params mlp_init(std::int64_t in, std::int64_t hidden, std::int64_t out, std::uint64_t seed) {
  nova::Params p;
  p.add("w1", nova::init::normal({in, hidden}, 1.0 / std::sqrt(double(in)), seed, nova::DType::f32));
  p.add("b1", nova::Tensor::zeros({hidden}, nova::DType::f32));
  p.add("w2", nova::init::normal({hidden, out}, 1.0 / std::sqrt(double(hidden)), seed + 1, nova::DType::f32));
  p.add("b2", nova::Tensor::zeros({out}, nova::DType::f32));
  return p;
}

/// The MLP's loss (make_steps traces it; bench/device/mlp_step_peer.py is
/// the same model in PyTorch).
template <class P, class X, class Y> nova::Expr<> mlp_loss(const P& p, const X& x, const Y& y) {
  return nova::nn::cross_entropy(nova::matmul(nova::gelu(nova::matmul(x, p["w1"]) + p["b1"]), p["w2"]) + p["b2"], y);
}

/// The step's model's parameters, from the parameter seed.
inline nova::Params init(const StepFile& f) {
  return f.model == "mlp" ? mlp_init(f.in, f.hidden, f.out, f.param_seed) : nova::nn::gpt_init(f.c, f.param_seed);
}

/// The batch (GPT: tokens and their targets; MLP: samples in [-1, 1) and
/// their classes), from an LCG of the token seed.
inline void tokens(const StepFile& f, nova::Tensor& x, nova::Tensor& y) {
  const bool mlp = f.model == "mlp";
  x = mlp ? nova::Tensor::empty({f.batch, f.in}, nova::DType::f32)
          : nova::Tensor::empty({f.batch, f.c.context}, nova::DType::i32);
  y = nova::Tensor::empty(mlp ? nova::Shape{f.batch} : nova::Shape{f.batch, f.c.context}, nova::DType::i32);
  std::uint64_t s = f.token_seed;
  auto next = [&] { return s = s * 6364136223846793005ull + 1442695040888963407ull; };
  if (mlp) {
    for (float& v : x.span<float>()) v = float(double(next() >> 11) / double(1ull << 53) * 2.0 - 1.0);
    for (std::int32_t& v : y.span<std::int32_t>()) v = static_cast<std::int32_t>((next() >> 33) % std::uint64_t(f.out));
    return;
  }
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    next();
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((s >> 33) % std::uint64_t(f.c.vocab));
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((s >> 13) % std::uint64_t(f.c.vocab));
  }
}

/// A train step's inputs as TrainStep passes them: parameters (init), the
/// optimizer's state (zeros, as before a first step), step 0, lr, the batch.
inline std::vector<nova::Tensor> inputs(const StepFile& f, const std::vector<nova::TensorSpec>& specs) {
  std::vector<nova::Tensor> in;
  nova::Params params = init(f);
  for (const auto& p : params.tensors()) in.push_back(p);
  if (specs.size() < in.size() + 4) throw std::runtime_error("the step takes too few inputs for this " + f.model);
  while (in.size() < specs.size() - 4) in.push_back(nova::Tensor::zeros(specs[in.size()].shape, specs[in.size()].dtype));
  in.push_back(nova::Tensor::full({}, 0.0, specs[in.size()].dtype));
  in.push_back(nova::Tensor::full({}, f.lr, specs[in.size()].dtype));
  nova::Tensor x, y;
  tokens(f, x, y);
  in.push_back(x);
  in.push_back(y);
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!(in[i].spec() == specs[i])) throw std::runtime_error("input " + std::to_string(i) + " does not match the step");
  return in;
}

/// The parameters' sum of squares (after a step: they are updated in place).
inline double params_sumsq(const std::vector<nova::Tensor>& in, const StepFile& f) {
  std::size_t n = init(f).size();
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (double v : in[i].to_vector()) sum += v * v;
  return sum;
}

/// The line: the model, its sizes (gpt: vocab context d_model layers heads;
/// mlp: in hidden out), batch, seeds, lr, the CPU's loss and sum of squares.
inline void write(const std::string& path, const StepFile& f) {
  std::ofstream out(path);
  char line[512];
  const bool mlp = f.model == "mlp";
  std::string sizes = mlp ? std::to_string(f.in) + " " + std::to_string(f.hidden) + " " + std::to_string(f.out)
                          : std::to_string(f.c.vocab) + " " + std::to_string(f.c.context) + " " +
                                std::to_string(f.c.d_model) + " " + std::to_string(f.c.layers) + " " +
                                std::to_string(f.c.heads);
  std::snprintf(line, sizeof line, "%s %s %lld %llu %llu %.17g %.17g %.17g\n", f.model.c_str(), sizes.c_str(),
                (long long)f.batch, (unsigned long long)f.param_seed, (unsigned long long)f.token_seed, f.lr, f.loss,
                f.params_sumsq);
  out << line;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline StepFile read(const std::string& path) {
  std::ifstream in(path);
  StepFile f;
  long long v[6] = {};
  unsigned long long seeds[2];
  if (!(in >> f.model) || (f.model != "gpt" && f.model != "mlp"))
    throw std::runtime_error("cannot read " + path + ": not a gpt or mlp step");
  const int sizes = f.model == "mlp" ? 3 : 5;
  for (int i = 0; i < sizes; ++i) in >> v[i];
  if (!(in >> v[5] >> seeds[0] >> seeds[1] >> f.lr >> f.loss >> f.params_sumsq))
    throw std::runtime_error("cannot read " + path);
  if (f.model == "mlp")
    f.in = v[0], f.hidden = v[1], f.out = v[2];
  else
    f.c.vocab = v[0], f.c.context = v[1], f.c.d_model = v[2], f.c.layers = v[3], f.c.heads = v[4];
  f.batch = v[5];
  f.param_seed = seeds[0], f.token_seed = seeds[1];
  return f;
}

} // namespace steps
