// steps.hpp - what make_steps (here) and run_steps (on the GPU machine)
// agree on: a step file's one line, and the inputs it stands for.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nova/nn/gpt.hpp"
#include "nova/tensor.hpp"

namespace steps {

struct StepFile {
  nova::nn::GPTConfig c;
  std::int64_t batch = 0;
  std::uint64_t param_seed = 0, token_seed = 0;
  double lr = 0;
  /// One step on the CPU: its loss, and its updated parameters' sum of squares.
  double loss = 0, params_sumsq = 0;
};

/// The batch's tokens (inputs and targets), from an LCG of the token seed.
inline void tokens(const StepFile& f, nova::Tensor& x, nova::Tensor& y) {
  x = nova::Tensor::empty({f.batch, f.c.context}, nova::DType::i32);
  y = nova::Tensor::empty({f.batch, f.c.context}, nova::DType::i32);
  std::uint64_t s = f.token_seed;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((s >> 33) % std::uint64_t(f.c.vocab));
    y.span<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((s >> 13) % std::uint64_t(f.c.vocab));
  }
}

/// A train step's inputs as TrainStep passes them: parameters (gpt_init),
/// the optimizer's state (zeros, as before a first step), step 0, lr, tokens.
inline std::vector<nova::Tensor> inputs(const StepFile& f, const std::vector<nova::TensorSpec>& specs) {
  std::vector<nova::Tensor> in;
  nova::Params params = nova::nn::gpt_init(f.c, f.param_seed);
  for (const auto& p : params.tensors()) in.push_back(p);
  if (specs.size() < in.size() + 4) throw std::runtime_error("the step takes too few inputs for this GPT");
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
  std::size_t n = nova::nn::gpt_init(f.c, f.param_seed).size();
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (double v : in[i].to_vector()) sum += v * v;
  return sum;
}

inline void write(const std::string& path, const StepFile& f) {
  std::ofstream out(path);
  char line[512];
  std::snprintf(line, sizeof line, "%lld %lld %lld %lld %lld %lld %llu %llu %.17g %.17g %.17g\n",
                (long long)f.c.vocab, (long long)f.c.context, (long long)f.c.d_model, (long long)f.c.layers,
                (long long)f.c.heads, (long long)f.batch, (unsigned long long)f.param_seed,
                (unsigned long long)f.token_seed, f.lr, f.loss, f.params_sumsq);
  out << line;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline StepFile read(const std::string& path) {
  std::ifstream in(path);
  StepFile f;
  long long v[6];
  unsigned long long seeds[2];
  if (!(in >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> seeds[0] >> seeds[1] >> f.lr >> f.loss >> f.params_sumsq))
    throw std::runtime_error("cannot read " + path);
  f.c.vocab = v[0], f.c.context = v[1], f.c.d_model = v[2], f.c.layers = v[3], f.c.heads = v[4], f.batch = v[5];
  f.param_seed = seeds[0], f.token_seed = seeds[1];
  return f;
}

} // namespace steps
