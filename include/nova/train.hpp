// train.hpp - nova::train_step: forward, backward and optimizer update as one
// compiled function.
//
//   nova::Params params;  params.add("w", nova::init::xavier_uniform({784, 10}, 1));
//   auto step = nova::train_step(
//       [](const nova::ParamExprs& p, auto x, auto y) {
//         return nova::nn::cross_entropy(nova::matmul(x, p["w"]), y);
//       },
//       params, nova::AdamW{.lr = 3e-4});
//   double loss = step(x, labels);   // one call: forward + backward + update
//
// The traced function takes (parameters, optimizer state, step, lr, batch...)
// and returns (loss, new parameters, new state, step + 1); every result but
// the loss overwrites its input in place, so parameters and state stay in
// the same Nova-owned tensors. The gradient is a nova.gradient op expanded by
// the compiler (nova-autodiff), so all of it is one function.
//
// Data parallel: run the same step on every rank, each on its own batch,
// with the rank's communicator set on the calling thread
// (nova::dist::set_communicator); the gradients are then summed over the
// ranks and averaged before the update, inside the compiled step.
#pragma once

#include <string>
#include <vector>

#include <boost/hana/for_each.hpp>
#include <boost/hana/string.hpp>

#include "nova/distributed.hpp"
#include "nova/jit.hpp"
#include "nova/optim/clip.hpp"
#include "nova/optim/optimizer.hpp"
#include "nova/params.hpp"

namespace nova {

namespace detail {
/// Every parameter's dtype, shape and name.
inline void append_param_keys(std::vector<std::uint64_t>& words, const Params& params) {
  for (const auto& p : params.tensors()) append_tensor_key(words, p);
  for (const auto& name : params.names()) append_value(words, name);
}

/// An optimizer's hyperparameters, by value, except the learning rate: it is
/// a runtime input of the step, so changing it never recompiles.
template <class Opt> void append_optimizer_key(std::vector<std::uint64_t>& words, const Opt& opt) {
  boost::hana::for_each(boost::hana::accessors<Opt>(), [&](auto member) {
    std::string_view name = boost::hana::to<const char*>(boost::hana::first(member));
    if (name == "lr") return;
    append_value(words, name);
    append_value(words, boost::hana::second(member)(opt));
  });
}
} // namespace detail

struct TrainOptions {
  /// Clip gradients to this global L2 norm; 0 disables clipping.
  double clip_grad_norm = 0.0;
  ExecMode mode = ExecMode::compiled;
};

template <class F, optim::optimizer Opt>
class TrainStep {
  static_assert(std::is_empty_v<F>,
                "nova::train_step: the loss function must not capture anything; pass values "
                "the trace depends on as nova::static_arg(value)");

 public:
  TrainStep(F f, Params& params, Opt opt, TrainOptions options, std::source_location declared_at)
      : f_(f), params_(&params), opt_(opt), options_(options), declared_at_(declared_at) {
    if (params.size() == 0) throw Error("nova::train_step: no parameters to train");
    DType dtype = params.tensors()[0].dtype();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params.tensors()[i];
      if (p.dtype() != dtype || !is_floating(dtype))
        throw ShapeError("nova::train_step: parameters must share one float dtype; '" +
                         params.names()[i] + "' is " + to_string(p.spec()));
      specs_.push_back(p.spec());
      for (int k = 0; k < opt_.state_count(); ++k) state_.push_back(Tensor::zeros(p.shape(), dtype));
    }
    step_ = Tensor::zeros({}, dtype);
    lr_ = Tensor::full({}, opt_.lr, dtype);
  }

  /// One training step on a batch; returns the loss before the update.
  template <class... Batch> double operator()(const Batch&... batch) {
    check_params();
    std::shared_ptr<Executable> exe = executable(batch...);
    std::vector<Tensor> inputs;
    inputs.reserve(params_->size() + state_.size() + 2 + sizeof...(Batch));
    for (const auto& p : params_->tensors()) inputs.push_back(p);
    for (const auto& s : state_) inputs.push_back(s);
    inputs.push_back(step_);
    inputs.push_back(lr_);
    detail::append_tensors(inputs, batch...);
    std::vector<Tensor> outputs = (*exe)(inputs, detail::where(declared_at_));
    return outputs[0].at({});
  }

  /// The executable for this batch's shapes (compiled on a miss). In a
  /// data-parallel group of more than one rank, the first call for each
  /// shape compiles on rank 0 only (or finds the step in its caches) and
  /// every other rank loads rank 0's executable, after checking that its own
  /// step has the same stable key: so the ranks run one program, and none
  /// waits for its own compile. Every rank must make that call.
  template <class... Batch> std::shared_ptr<Executable> executable(const Batch&... batch) {
    ExecMode mode = detail::effective_mode(options_.mode);
    CacheKey key = key_of(/*stable=*/false, mode, batch...);
    auto compile = [&] {
      return detail::traced_executable(key, "train_step", mode,
                                       [&](detail::Builder& b) { return trace(b, batch...); });
    };
    std::shared_ptr<dist::Communicator> comm = dist::communicator();
    if (!comm || comm->size() < 2) return compile();
    std::array<std::uint64_t, 2> stable = stable_key(batch...);
    for (const auto& [k, exe] : synced_)
      if (k == stable) return exe;
    std::shared_ptr<Executable> exe =
        dist::agree_on_executable(*comm, stable, detail::compiler_build(), compile, detail::where(declared_at_));
    synced_.emplace_back(stable, exe);
    return exe;
  }

  /// The key equal in every process running the same build (see jit.hpp).
  template <class... Batch> std::array<std::uint64_t, 2> stable_key(const Batch&... batch) const {
    ExecMode mode = detail::effective_mode(options_.mode);
    return detail::key_digest(key_of(/*stable=*/true, mode, batch...));
  }

  Params& params() { return *params_; }
  /// Optimizer state, opt.state_count() tensors per parameter in parameter
  /// order; writable so a checkpoint can be restored into it.
  std::vector<Tensor>& optimizer_state() { return state_; }
  const std::vector<Tensor>& optimizer_state() const { return state_; }
  /// Names for the state tensors: "<param>.state<k>".
  std::vector<std::string> optimizer_state_names() const {
    std::vector<std::string> names;
    for (const auto& p : params_->names())
      for (int k = 0; k < opt_.state_count(); ++k) names.push_back(p + ".state" + std::to_string(k));
    return names;
  }
  /// Steps taken so far.
  std::int64_t steps() const { return static_cast<std::int64_t>(step_.at({})); }
  /// Restores the step counter (when resuming from a checkpoint).
  void set_steps(std::int64_t n) { step_ = Tensor::full({}, static_cast<double>(n), step_.dtype()); }
  double lr() const { return lr_.at({}); }
  /// Changes the learning rate from the next step on (no recompilation).
  void set_lr(double lr) { lr_ = Tensor::full({}, lr, lr_.dtype()); }

 private:
  void check_params() const {
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      const Tensor& p = params_->tensors()[i];
      if (!p.defined() || p.spec() != specs_[i])
        throw ShapeError("nova::train_step: parameter '" + params_->names()[i] + "' was " +
                         to_string(specs_[i]) + " when the optimizer state was created, now " +
                         (p.defined() ? to_string(p.spec()) : std::string("undefined")) +
                         "\n  the step is declared at " + detail::where(declared_at_));
      if (!p.is_contiguous())
        throw ShapeError("nova::train_step: parameter '" + params_->names()[i] +
                         "' is not contiguous; it is updated in place\n  the step is declared at " +
                         detail::where(declared_at_));
    }
  }

  /// The data-parallel group's size if the calling thread has a
  /// communicator (nova/distributed.hpp), else 0: a step traced for N ranks
  /// sums and averages its gradients over them.
  static int world_size() {
    std::shared_ptr<dist::Communicator> comm = dist::communicator();
    return comm ? comm->size() : 0;
  }

  /// The step's key: the loss function's and the optimizer's types by their
  /// address in this process, or (`stable`) by a hash the C++ compiler
  /// computes, equal in every process of the build (and on every rank).
  template <class... Batch>
  CacheKey key_of(bool stable, ExecMode mode, const Batch&... batch) const {
    std::uint64_t type_word = stable ? detail::stable_type_hash<F>(declared_at_) : detail::type_tag_word<F>();
    CacheKey key = detail::key_start(type_word, static_cast<std::uint8_t>(mode));
    detail::append_value(key.words, static_cast<std::int64_t>(world_size()));
    key.words.push_back(stable ? detail::stable_type_hash<Opt>(declared_at_) : detail::type_tag_word<Opt>());
    detail::append_optimizer_key(key.words, opt_);
    detail::append_value(key.words, options_.clip_grad_norm);
    detail::append_param_keys(key.words, *params_);
    detail::append_keys(key.words, batch...);
    return key;
  }

  template <class... Batch> detail::TraceResult trace(detail::Builder& b, const Batch&... batch) {
    std::size_t n = params_->size();
    int k = opt_.state_count();
    std::vector<Expr<>> params, state;
    for (const auto& spec : specs_) params.push_back(detail::trace_argument(b, spec));
    for (const auto& s : state_) state.push_back(detail::trace_argument(b, s.spec()));
    Expr<> step = detail::trace_argument(b, step_.spec());
    Expr<> lr = detail::trace_argument(b, lr_.spec());
    auto traced = std::tuple<detail::traced_arg_t<Batch>...>{detail::traced_value(batch, b)...};

    ParamExprs views(&params_->names(), params);
    Expr<> loss = std::apply([&](const auto&... x) { return Expr<>(f_(views, x...)); }, traced);
    std::vector<Expr<>> grads = gradients(loss, params, declared_at_);
    if (int world = world_size(); world > 0) {
      // Data parallel: each gradient summed over the ranks (bucketed and
      // overlapped with the backward by the compiler), then averaged; the
      // 1 / world scale fuses into whatever reads it first.
      named_scope scope("all_reduce");
      for (auto& g : grads) {
        TensorSpec spec = g.spec();
        g = detail::emit("nova.all_reduce", {g.id()}, {}, &spec, declared_at_) * (1.0 / world);
      }
    }
    named_scope optimizer_scope("optimizer"); // clipping and the update
    if (options_.clip_grad_norm > 0) grads = optim::clip_by_global_norm(grads, options_.clip_grad_norm);
    Expr<> next_step = step + 1.0;

    // Results: loss, then each result overwriting the argument it updates.
    detail::TraceResult r{{loss.id()}, {-1}};
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<Expr<>> s(state.begin() + static_cast<std::ptrdiff_t>(i * k),
                            state.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
      optim::Update u = opt_.update(params[i], grads[i], s, next_step, lr);
      r.results.push_back(u.param.id());
      r.aliases.push_back(static_cast<int>(i));
      for (int j = 0; j < k; ++j) {
        r.results.push_back(u.state[static_cast<std::size_t>(j)].id());
        r.aliases.push_back(static_cast<int>(n + i * k + j));
      }
    }
    r.results.push_back(next_step.id());
    r.aliases.push_back(static_cast<int>(n + state.size()));
    return r;
  }

  F f_;
  Params* params_;
  Opt opt_;
  TrainOptions options_;
  std::source_location declared_at_;
  std::vector<TensorSpec> specs_;
  std::vector<Tensor> state_;
  Tensor step_, lr_;
  /// Data parallel: the executables the ranks agreed on, by stable key.
  std::vector<std::pair<std::array<std::uint64_t, 2>, std::shared_ptr<Executable>>> synced_;
};

/// A forward-only step over named parameters: `f(const ParamExprs&,
/// batch...)` returns an Expr (or a tuple/vector of them), e.g. a validation
/// loss or logits for sampling. Parameters are read, never written.
template <class F>
class EvalStep {
  static_assert(std::is_empty_v<F>, "nova::eval_step: the function must not capture anything");

 public:
  EvalStep(F f, const Params& params, ExecMode mode, std::source_location declared_at)
      : f_(f), params_(&params), mode_(mode), declared_at_(declared_at) {}

  template <class... Batch> auto operator()(const Batch&... batch) const {
    using Result = std::invoke_result_t<const F&, const ParamExprs&, detail::traced_arg_t<Batch>...>;
    using Output = detail::step_output<std::decay_t<Result>>;
    ExecMode mode = detail::effective_mode(mode_);
    CacheKey key = detail::key_start(detail::type_tag_word<F>(), static_cast<std::uint8_t>(mode));
    detail::append_param_keys(key.words, *params_);
    detail::append_keys(key.words, batch...);
    std::shared_ptr<Executable> exe =
        detail::traced_executable(key, "eval_step", mode, [&](detail::Builder& b) {
          std::vector<Expr<>> params;
          for (const auto& p : params_->tensors()) params.push_back(detail::trace_argument(b, p.spec()));
          auto traced = std::tuple<detail::traced_arg_t<Batch>...>{detail::traced_value(batch, b)...};
          ParamExprs views(&params_->names(), params);
          auto result = std::apply([&](const auto&... x) { return f_(views, x...); }, traced);
          detail::TraceResult r;
          Output::ids(result, r.results);
          return r;
        });
    std::vector<Tensor> inputs;
    for (const auto& p : params_->tensors()) inputs.push_back(p.contiguous());
    detail::append_tensors(inputs, batch...);
    std::vector<Tensor> outputs = (*exe)(inputs, detail::where(declared_at_));
    std::size_t i = 0;
    return Output::take(outputs, i);
  }

 private:
  F f_;
  const Params* params_;
  ExecMode mode_;
  std::source_location declared_at_;
};

template <class F>
EvalStep<F> eval_step(F f, const Params& params, ExecMode mode = ExecMode::compiled,
                      std::source_location declared_at = std::source_location::current()) {
  return EvalStep<F>(f, params, mode, declared_at);
}

/// Builds a training step for `loss_fn(const ParamExprs&, batch...)`, which
/// returns a scalar loss. `params` must outlive the step.
template <class F, optim::optimizer Opt>
TrainStep<F, Opt> train_step(F loss_fn, Params& params, Opt opt, TrainOptions options = {},
                             std::source_location declared_at = std::source_location::current()) {
  return TrainStep<F, Opt>(loss_fn, params, opt, options, declared_at);
}

} // namespace nova
