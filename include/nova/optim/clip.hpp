// optim/clip.hpp - gradient clipping by global norm, as
// torch.nn.utils.clip_grad_norm_: every gradient is scaled by
// min(1, max_norm / (||g||_2 + 1e-6)), the norm taken over all gradients.
#pragma once

#include <vector>

#include "nova/expr/ops.hpp"

namespace nova::optim {

inline std::vector<Expr<>> clip_by_global_norm(const std::vector<Expr<>>& grads, double max_norm) {
  if (grads.empty()) return grads;
  Expr<> total = sum(grads[0] * grads[0]);
  for (std::size_t i = 1; i < grads.size(); ++i) total = total + sum(grads[i] * grads[i]);
  Expr<> norm = nova::sqrt(total);
  Expr<> coef = minimum(max_norm / (norm + 1e-6), constant(1.0, norm.dtype()));
  std::vector<Expr<>> out;
  for (const auto& g : grads) out.push_back(g * coef);
  return out;
}

} // namespace nova::optim
