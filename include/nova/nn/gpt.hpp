// nn/gpt.hpp - a GPT-2-shaped decoder, written over expressions.
//
// Token + learned position embeddings; per block x += attn(LN1(x)),
// x += mlp(LN2(x)) (pre-LayerNorm, eps 1e-5, biased variance); fused QKV
// [d, 3d] with bias; scores scaled by 1/sqrt(head_dim) with a causal mask
// (diagonal kept); output projection with bias; MLP d -> 4d -> d with
// tanh-GELU; final LayerNorm; lm_head [d, vocab] without bias (or tied to
// the token embedding). Weights are [in, out], applied as x @ W + b. The
// loss is the mean next-token cross-entropy over every position.
//
// Parameter names: wte, wpe, blocks.<i>.ln1.{gamma,beta},
// blocks.<i>.attn.{w_qkv,b_qkv,w_out,b_out}, blocks.<i>.ln2.{gamma,beta},
// blocks.<i>.mlp.{w_fc,b_fc,w_proj,b_proj}, ln_f.{gamma,beta}, lm_head.
#pragma once

#include <boost/hana/adapt_struct.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "nova/nn/layers.hpp"
#include "nova/nn/losses.hpp"
#include "nova/params.hpp"

namespace nova::nn {

/// A nova::static_arg (it shapes the trace): adapted below, so it is keyed
/// member by member, never by its bytes (which include padding).
struct GPTConfig {
  std::int64_t vocab = 256;
  std::int64_t context = 128;
  std::int64_t d_model = 256;
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  double ln_eps = 1e-5;
  bool tie_embeddings = false;
  /// Dropout on embeddings, attention probabilities and both residual
  /// branches (GPT-2's places); used only when a seed is given.
  double dropout = 0.0;
  /// Attention as one nova.causal_attention op (one kernel per head, the
  /// probabilities never stored) instead of the slice / matmul / softmax /
  /// matmul graph. Dropout on the probabilities needs the graph: with a
  /// seed and dropout > 0 the graph is used either way.
  bool fused_attention = true;
};

inline std::string block_name(std::int64_t i, const char* rest) {
  return "blocks." + std::to_string(i) + "." + rest;
}

/// GPT-2's initialisation: N(0, 0.02) for weights and embeddings, N(0,
/// 0.02 / sqrt(2 * layers)) for the projections into the residual stream,
/// zeros for biases, ones/zeros for LayerNorm.
inline Params gpt_init(const GPTConfig& c, std::uint64_t seed, DType dtype = DType::f32) {
  Params p;
  std::uint64_t s = seed;
  auto normal = [&](const Shape& shape, double stddev) { return init::normal(shape, stddev, s++, dtype); };
  const double std_w = 0.02, std_res = 0.02 / std::sqrt(2.0 * double(c.layers));
  const std::int64_t d = c.d_model;
  p.add("wte", normal({c.vocab, d}, std_w));
  p.add("wpe", normal({c.context, d}, std_w));
  for (std::int64_t i = 0; i < c.layers; ++i) {
    p.add(block_name(i, "ln1.gamma"), Tensor::full({d}, 1.0, dtype));
    p.add(block_name(i, "ln1.beta"), Tensor::zeros({d}, dtype));
    p.add(block_name(i, "attn.w_qkv"), normal({d, 3 * d}, std_w));
    p.add(block_name(i, "attn.b_qkv"), Tensor::zeros({3 * d}, dtype));
    p.add(block_name(i, "attn.w_out"), normal({d, d}, std_res));
    p.add(block_name(i, "attn.b_out"), Tensor::zeros({d}, dtype));
    p.add(block_name(i, "ln2.gamma"), Tensor::full({d}, 1.0, dtype));
    p.add(block_name(i, "ln2.beta"), Tensor::zeros({d}, dtype));
    p.add(block_name(i, "mlp.w_fc"), normal({d, 4 * d}, std_w));
    p.add(block_name(i, "mlp.b_fc"), Tensor::zeros({4 * d}, dtype));
    p.add(block_name(i, "mlp.w_proj"), normal({4 * d, d}, std_res));
    p.add(block_name(i, "mlp.b_proj"), Tensor::zeros({d}, dtype));
  }
  p.add("ln_f.gamma", Tensor::full({d}, 1.0, dtype));
  p.add("ln_f.beta", Tensor::zeros({d}, dtype));
  if (!c.tie_embeddings) p.add("lm_head", normal({d, c.vocab}, std_w));
  return p;
}

/// The MLP of a block: d -> 4d (tanh-GELU) -> d, with biases.
inline Expr<> mlp(const Expr<>& x, const Expr<>& w_fc, const Expr<>& b_fc, const Expr<>& w_proj,
                  const Expr<>& b_proj, std::source_location loc = std::source_location::current()) {
  named_scope scope("mlp");
  return linear(gelu(linear(x, w_fc, b_fc, loc), GeluApprox::tanh, loc), w_proj, b_proj, loc);
}

/// Block `i` (pre-LayerNorm): x + attn(LN1(x)), then + mlp(LN2(.)). With a
/// seed and c.dropout > 0, dropout on the attention probabilities and on both
/// residual branches (streams 1 + 3i, 2 + 3i, 3 + 3i).
inline Expr<> gpt_block(const GPTConfig& c, const ParamExprs& p, std::int64_t i, const Expr<>& x,
                        const Expr<>* seed = nullptr,
                        std::source_location loc = std::source_location::current()) {
  auto w = [&](const char* name) { return p[block_name(i, name)]; };
  named_scope scope("block" + std::to_string(i));
  const Expr<>* s = seed && c.dropout > 0 ? seed : nullptr;
  auto drop = [&](const Expr<>& v, std::int64_t stream) -> Expr<> {
    return s ? Expr<>(dropout(v, *s, c.dropout, stream, loc)) : v;
  };
  Expr<> h = layer_norm(x, w("ln1.gamma"), w("ln1.beta"), c.ln_eps, loc);
  Expr<> attn = causal_self_attention(h, w("attn.w_qkv"), w("attn.b_qkv"), w("attn.w_out"),
                                      w("attn.b_out"), c.heads, loc, s, c.dropout, 1 + 3 * i,
                                      c.fused_attention);
  Expr<> y = add(x, drop(attn, 2 + 3 * i), loc);
  Expr<> h2 = layer_norm(y, w("ln2.gamma"), w("ln2.beta"), c.ln_eps, loc);
  Expr<> m = mlp(h2, w("mlp.w_fc"), w("mlp.b_fc"), w("mlp.w_proj"), w("mlp.b_proj"), loc);
  return add(y, drop(m, 3 + 3 * i), loc);
}

/// Logits [B, T, vocab] for tokens [B, T] (integers, T <= context). With a
/// `seed` (rank-0 i64) and c.dropout > 0, dropout is applied (training).
template <expression I>
Expr<> gpt_logits(const GPTConfig& c, const ParamExprs& p, const I& tokens,
                  const Expr<>* seed = nullptr,
                  std::source_location loc = std::source_location::current()) {
  auto drop = [&](const Expr<>& v, std::int64_t stream) -> Expr<> {
    return seed && c.dropout > 0 ? Expr<>(dropout(v, *seed, c.dropout, stream, loc)) : v;
  };
  if (tokens.rank() != 2 || tokens.dim(1) > c.context)
    throw ShapeError("nova::nn::gpt_logits: tokens must be [B, T] with T <= context " +
                     std::to_string(c.context) + ", got " + to_string(tokens.spec()) + "\n  at " +
                     detail::where(loc));
  std::int64_t T = tokens.dim(1);
  Expr<> positions = slice(p["wpe"], {0, 0}, {T, c.d_model}, loc);
  Expr<> x = drop(add(embedding(p["wte"], tokens, loc), positions, loc), 0); // [B, T, d]
  for (std::int64_t i = 0; i < c.layers; ++i) x = gpt_block(c, p, i, x, seed, loc);
  Expr<> out = layer_norm(x, p["ln_f.gamma"], p["ln_f.beta"], c.ln_eps, loc);
  if (c.tie_embeddings) {
    Expr<> flat = reshape(out, {-1, c.d_model}, loc);
    return reshape(matmul(flat, p["wte"], Transpose::b, loc), {tokens.dim(0), T, c.vocab}, loc);
  }
  return linear(out, p["lm_head"], loc);
}

/// Mean next-token cross-entropy: targets [B, T] are the tokens shifted by one.
template <expression I, expression Y>
Expr<> gpt_loss(const GPTConfig& c, const ParamExprs& p, const I& tokens, const Y& targets,
                std::source_location loc = std::source_location::current()) {
  return cross_entropy(gpt_logits(c, p, tokens, nullptr, loc), targets, loc);
}

/// The same with dropout (c.dropout) drawn from `seed` (rank-0 i64).
template <expression I, expression Y, expression S>
Expr<> gpt_loss(const GPTConfig& c, const ParamExprs& p, const I& tokens, const Y& targets,
                const S& seed, std::source_location loc = std::source_location::current()) {
  Expr<> s = seed;
  return cross_entropy(gpt_logits(c, p, tokens, &s, loc), targets, loc);
}

} // namespace nova::nn

BOOST_HANA_ADAPT_STRUCT(nova::nn::GPTConfig, vocab, context, d_model, layers, heads, ln_eps,
                        tie_embeddings, dropout, fused_attention);
