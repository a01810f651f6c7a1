// optim/adamw.hpp - AdamW (decoupled weight decay), as in torch.optim.AdamW:
//   p *= 1 - lr wd
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// State per parameter: m, v. The bias corrections use the in-graph step t.
#pragma once

#include <cmath>

#include "nova/optim/optimizer.hpp"

namespace nova {

struct AdamW {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;

  int state_count() const { return 2; }

  optim::Update update(const Expr<>& p, const Expr<>& g, const std::vector<Expr<>>& state,
                       const Expr<>& step, const Expr<>& lr_now) const {
    Expr<> decayed = weight_decay != 0.0 ? Expr<>(p - p * (lr_now * weight_decay)) : p;
    Expr<> m = state[0] * beta1 + g * (1.0 - beta1);
    Expr<> v = state[1] * beta2 + g * g * (1.0 - beta2);
    // 1 - beta^t = 1 - exp(t log beta)
    Expr<> bc1 = 1.0 - nova::exp(step * std::log(beta1));
    Expr<> bc2 = 1.0 - nova::exp(step * std::log(beta2));
    // As torch's fused AdamW orders it: the bias corrections fold into two
    // scalars, so each element takes one sqrt and one division (not three
    // divisions: the per-element cost of the update).
    Expr<> step_size = lr_now / bc1;
    Expr<> inv_sqrt_bc2 = 1.0 / nova::sqrt(bc2);
    Expr<> denom = nova::sqrt(v) * inv_sqrt_bc2 + eps;
    return {decayed - step_size * m / denom, {m, v}};
  }
};

} // namespace nova

// Every hyperparameter by name: the cache key (all but lr) and checkpoints.
BOOST_HANA_ADAPT_STRUCT(nova::AdamW, lr, beta1, beta2, eps, weight_decay);
