// optim/optimizer.hpp - what an optimizer is to nova::train_step.
//
// An optimizer is a small, trivially copyable struct of hyperparameters,
// adapted with BOOST_HANA_ADAPT_STRUCT so every member but `lr` enters the
// cache key by value (lr is a runtime input), with two member functions:
//   int state_count() const                 tensors of state per parameter
//   Update update(p, g, state, step, lr) const
// update() builds the new parameter and state as expressions in the traced
// step; `step` is the 1-based step number and `lr` the learning rate, both
// rank-0 tensors that are inputs of the step (so schedules never recompile).
#pragma once

#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/concept/struct.hpp>
#include <concepts>
#include <type_traits>
#include <vector>

#include "nova/expr/ops.hpp"

namespace nova::optim {

struct Update {
  Expr<> param;
  std::vector<Expr<>> state;
};

template <class O>
concept optimizer = std::is_trivially_copyable_v<O> && boost::hana::Struct<O>::value &&
    requires(const O& o, const Expr<>& e, const std::vector<Expr<>>& s) {
      { o.state_count() } -> std::convertible_to<int>;
      { o.update(e, e, s, e, e) } -> std::same_as<Update>;
      { o.lr } -> std::convertible_to<double>;
    };

} // namespace nova::optim
