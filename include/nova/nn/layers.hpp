// nn/layers.hpp - layers as plain functions over expressions.
//
// Weights are stored [in, out] and applied as x @ W + b, as in GPT-2's
// checkpoints; inputs may have any number of leading dims.
#pragma once

#include <cmath>
#include <optional>

#include "nova/expr/ops.hpp"

namespace nova::nn {

/// x [..., in] @ w [in, out] + b [out] -> [..., out]. Leading dims are
/// flattened into one so the product is a single 2-D matmul.
template <expression X, expression W, expression B>
Expr<> linear(const X& x, const W& w, const B& b,
              std::source_location loc = std::source_location::current()) {
  Shape out_shape = x.shape();
  if (out_shape.empty())
    throw ShapeError("nova::nn::linear: the input must have rank >= 1, got " +
                     to_string(x.spec()) + "\n  at " + detail::where(loc));
  out_shape.back() = w.dim(-1);
  Expr<> flat = reshape(x, {-1, x.dim(-1)}, loc);
  Expr<> y = add(matmul(flat, w, Transpose::none, loc), b, loc);
  return reshape(y, out_shape, loc);
}

/// The same without bias.
template <expression X, expression W>
Expr<> linear(const X& x, const W& w, std::source_location loc = std::source_location::current()) {
  Shape out_shape = x.shape();
  out_shape.back() = w.dim(-1);
  return reshape(matmul(reshape(x, {-1, x.dim(-1)}, loc), w, Transpose::none, loc), out_shape, loc);
}

/// LayerNorm over the last dim (nova::layer_norm, ops.hpp): one op, traced
/// under the scope "layer_norm".
using nova::layer_norm;

/// Rows of `table` [vocab, d] for integer `tokens` [...] -> [..., d].
template <expression T, expression I>
Expr<> embedding(const T& table, const I& tokens,
                 std::source_location loc = std::source_location::current()) {
  named_scope scope("embedding");
  return gather(table, tokens, loc);
}

/// Causal multi-head self-attention on x [B, T, d] with a fused QKV
/// projection [d, 3d] (+ bias); head h takes columns [h*hd, (h+1)*hd) of each
/// of q, k and v; scores are scaled by 1/sqrt(hd) and masked causally.
/// With `seed`, dropout (rate `dropout`, stream `stream`) is applied to the
/// attention probabilities. `fused`: the part between the projections is
/// one nova::causal_attention op, except when dropout needs the
/// probabilities.
template <expression X>
Expr<> causal_self_attention(const X& x, const Expr<>& w_qkv, const Expr<>& b_qkv,
                             const Expr<>& w_out, const Expr<>& b_out, std::int64_t heads,
                             std::source_location loc = std::source_location::current(),
                             const Expr<>* seed = nullptr, double dropout = 0.0,
                             std::int64_t stream = 0, bool fused = true) {
  if (x.rank() != 3)
    throw ShapeError("nova::nn::causal_self_attention: x must be [B, T, d], got " +
                     to_string(x.spec()) + "\n  at " + detail::where(loc));
  std::int64_t B = x.dim(0), T = x.dim(1), d = x.dim(2);
  if (heads <= 0 || d % heads != 0)
    throw ShapeError("nova::nn::causal_self_attention: d_model " + std::to_string(d) +
                     " is not divisible by " + std::to_string(heads) + " heads\n  at " +
                     detail::where(loc));
  std::int64_t hd = d / heads;
  Expr<> qkv = linear(x, w_qkv, b_qkv, loc);
  if (fused && !(seed && dropout > 0)) {
    std::optional<named_scope> scope(std::in_place, "attention");
    Expr<> merged = causal_attention(qkv, heads, 1.0 / std::sqrt(double(hd)), loc);
    scope.reset();
    return linear(merged, w_out, b_out, loc);
  }
  auto split_heads = [&](std::int64_t part) {
    Expr<> t = slice_last(qkv, part * d, d, loc);
    return permute(reshape(t, {B, T, heads, hd}, loc), {0, 2, 1, 3}, loc); // [B, H, T, hd]
  };
  // The projections are matmuls of their own; "attention" is what lies
  // between them: the head split, scores, mask, softmax, the product with v.
  std::optional<named_scope> scope(std::in_place, "attention");
  Expr<> q = split_heads(0), k = split_heads(1), v = split_heads(2);
  Expr<> scores = matmul(q, k, Transpose::b, loc) * (1.0 / std::sqrt(double(hd)));
  Expr<> masked = add(scores, causal_mask(T, T, x.dtype(), loc), loc);
  Expr<> probs = softmax(masked, -1, loc);
  if (seed && dropout > 0) probs = nova::dropout(probs, *seed, dropout, stream, loc);
  Expr<> att = matmul(probs, v, Transpose::none, loc); // [B, H, T, hd]
  Expr<> merged = reshape(permute(att, {0, 2, 1, 3}, loc), {B, T, d}, loc);
  scope.reset();
  return linear(merged, w_out, b_out, loc);
}

} // namespace nova::nn
