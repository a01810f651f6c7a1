// optim/sgd.hpp - SGD with momentum and weight decay, as in torch.optim.SGD
// (dampening 0): g += wd p; buf = momentum buf + g; p -= lr buf.
#pragma once

#include "nova/optim/optimizer.hpp"

namespace nova {

struct SGD {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;

  int state_count() const { return momentum != 0.0 ? 1 : 0; }

  optim::Update update(const Expr<>& p, const Expr<>& grad, const std::vector<Expr<>>& state,
                       const Expr<>& /*step*/, const Expr<>& lr_now) const {
    Expr<> g = weight_decay != 0.0 ? Expr<>(grad + p * weight_decay) : grad;
    if (momentum == 0.0) return {p - lr_now * g, {}};
    Expr<> buf = state[0] * momentum + g;
    return {p - lr_now * buf, {buf}};
  }
};

} // namespace nova

// Every hyperparameter by name: the cache key (all but lr) and checkpoints.
BOOST_HANA_ADAPT_STRUCT(nova::SGD, lr, momentum, weight_decay);
