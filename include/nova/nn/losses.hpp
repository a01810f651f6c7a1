// nn/losses.hpp - loss functions written over expressions.
#pragma once

#include "nova/expr/ops.hpp"

namespace nova::nn {

/// Mean softmax cross-entropy of `logits` [..., C] against integer `labels`
/// [...]: -mean(log_softmax(logits)[label]). log_softmax subtracts the max,
/// so large logits stay finite.
template <expression L, expression Y>
Expr<> cross_entropy(const L& logits, const Y& labels,
                     std::source_location loc = std::source_location::current()) {
  bool leading = labels.rank() + 1 == logits.rank();
  for (std::int64_t i = 0; leading && i < labels.rank(); ++i) leading = labels.dim(i) == logits.dim(i);
  if (!leading)
    throw ShapeError("nova::nn::cross_entropy: labels " + to_string(labels.spec()) +
                     " must have the logits' shape " + to_string(logits.spec()) +
                     " without the class dim\n  at " + detail::where(loc));
  if (labels.dtype() != DType::i32 && labels.dtype() != DType::i64)
    throw ShapeError("nova::nn::cross_entropy: labels must be i32 or i64 class indices, got " +
                     to_string(labels.spec()) + "\n  at " + detail::where(loc));
  named_scope scope("cross_entropy");
  Expr<> targets = one_hot(labels, logits.dim(-1), logits.dtype(), loc);
  Expr<> picked = sum(mul(log_softmax(logits, -1, loc), targets, loc), {-1}, false, loc);
  return neg(mean(picked, {}, false, loc), loc);
}

/// Mean squared error.
template <expression P, expression T>
Expr<> mse(const P& prediction, const T& target,
           std::source_location loc = std::source_location::current()) {
  if (prediction.shape() != target.shape())
    throw ShapeError("nova::nn::mse: prediction " + to_string(prediction.spec()) +
                     " and target " + to_string(target.spec()) + " must have one shape\n  at " +
                     detail::where(loc));
  Expr<> d = sub(prediction, target, loc);
  return mean(mul(d, d, loc), {}, false, loc);
}

} // namespace nova::nn
