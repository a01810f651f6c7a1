// nn/losses.hpp - loss functions written over expressions.
#pragma once

#include "nova/expr/ops.hpp"

namespace nova::nn {

/// Mean softmax cross-entropy of `logits` [..., C] against integer `labels`
/// [...]: the mean over rows of nova::softmax_cross_entropy (one op; it
/// subtracts each row's max, so large logits stay finite). Rows with a label
/// outside [0, C) count as 0 in the mean.
template <expression L, expression Y>
Expr<> cross_entropy(const L& logits, const Y& labels,
                     std::source_location loc = std::source_location::current()) {
  detail::check_cross_entropy("nova::nn::cross_entropy", logits, labels, loc);
  named_scope scope("cross_entropy");
  return mean(softmax_cross_entropy(logits, labels, loc), {}, false, loc);
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
