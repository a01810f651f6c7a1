// expr/expr.hpp - nova::Expr, the value a step computes with while it is traced.
//
// An Expr is a small value: the id of an SSA value in the step being traced,
// plus its dtype and shape. Its C++ type carries what is known statically:
// the element type T (void: not known) and the rank (dynamic_rank: not
// known). Operators combine the static parts at compile time, so a rank or
// dtype error in code with static types fails to compile at the user's line;
// the dynamic parts are checked while tracing, by the op's own shape rule.
#pragma once

#include <concepts>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

#include "nova/detail/builder.hpp"
#include "nova/dtype.hpp"
#include "nova/error.hpp"
#include "nova/shape.hpp"
#include "nova/tensor.hpp"

namespace nova {

inline constexpr int dynamic_rank = -1;

namespace detail {

/// The trace in progress on this thread: set by nova::jit around the call
/// of the user's step.
struct Trace {
  Builder* builder = nullptr;
  std::string scope; // the innermost nova::named_scope path, "" for none
};

inline thread_local Trace* active_trace = nullptr;

inline Trace& current_trace() {
  if (!active_trace)
    throw Error("nova: tensor expressions can only be built while a step is traced "
                "(inside the function given to nova::jit)");
  return *active_trace;
}

} // namespace detail

/// Names the ops traced while it lives, like jax.named_scope: NOVA_PROFILE
/// and NOVA_EXPLAIN group kernels by it (the library's own layers name
/// "attention", "layer_norm", "mlp", "cross_entropy", "optimizer", ...).
/// Nested scopes join with '/'. Gradients of an op keep its scope. Outside a
/// trace it does nothing. Scopes are not part of any cache key.
class named_scope {
 public:
  explicit named_scope(std::string_view name) {
    if (!detail::active_trace) return;
    trace_ = detail::active_trace;
    previous_ = trace_->scope;
    trace_->scope = previous_.empty() ? std::string(name) : previous_ + "/" + std::string(name);
    trace_->builder->set_scope(trace_->scope);
  }
  ~named_scope() {
    if (!trace_) return;
    trace_->scope = previous_;
    trace_->builder->set_scope(previous_);
  }
  named_scope(const named_scope&) = delete;
  named_scope& operator=(const named_scope&) = delete;

 private:
  detail::Trace* trace_ = nullptr;
  std::string previous_;
};

namespace detail {

inline std::string where(const std::source_location& loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

template <class T> struct is_expr : std::false_type {};

} // namespace detail

template <class T = void, int Rank = dynamic_rank>
class Expr {
  static_assert(std::is_void_v<T> || element_type<T>,
                "nova::Expr<T, Rank>: T must be void, float, double, int32_t or int64_t");
  static_assert(Rank >= dynamic_rank, "nova::Expr<T, Rank>: Rank must be >= 0 or dynamic_rank");

 public:
  using element = T;
  static constexpr int static_rank = Rank;

  /// Wraps a traced value; checks the static parts against the dynamic ones.
  Expr(detail::ValueId id, TensorSpec spec,
       std::source_location loc = std::source_location::current())
      : id_(id), spec_(std::move(spec)), loc_(loc) {
    check(loc);
  }

  /// Copies record where they are made. Operators cannot take a defaulted
  /// source_location, but they take their operands by value, and a copy
  /// constructor's default argument is evaluated at the call: so an operand
  /// copied into `a + b` knows the line of the `+` (an operand that is itself
  /// a result arrives without a copy and keeps the line of the op that made it).
  Expr(const Expr& other, std::source_location loc = std::source_location::current())
      : id_(other.id_), spec_(other.spec_), loc_(loc) {}
  Expr(Expr&& other, std::source_location loc = std::source_location::current()) noexcept
      : id_(other.id_), spec_(std::move(other.spec_)), loc_(loc) {}
  Expr& operator=(const Expr&) = default;
  Expr& operator=(Expr&&) noexcept = default;

  /// Converts between static views of the same value (for example from the
  /// untyped Expr<> the tracer passes to a typed lambda parameter). Statically
  /// incompatible views do not compile; dynamic parts are checked.
  template <class U, int R>
  Expr(const Expr<U, R>& other, std::source_location loc = std::source_location::current())
      : id_(other.id()), spec_(other.spec()), loc_(loc) {
    static_assert(std::is_void_v<T> || std::is_void_v<U> || std::is_same_v<T, U>,
                  "nova::Expr: cannot convert between different element types");
    static_assert(Rank == dynamic_rank || R == dynamic_rank || Rank == R,
                  "nova::Expr: cannot convert between different ranks");
    check(loc);
  }

  detail::ValueId id() const { return id_; }
  const TensorSpec& spec() const { return spec_; }
  DType dtype() const { return spec_.dtype; }
  const Shape& shape() const { return spec_.shape; }
  std::int64_t rank() const { return static_cast<std::int64_t>(spec_.shape.size()); }
  /// Where this value was made or last copied (see the copy constructor).
  const std::source_location& loc() const { return loc_; }
  /// Extent of dim `i`; negative i counts from the end.
  std::int64_t dim(std::int64_t i) const {
    std::int64_t r = rank();
    if (i < -r || i >= r)
      throw ShapeError("nova: dim " + std::to_string(i) + " out of range for shape " +
                       to_string(spec_.shape));
    return spec_.shape[static_cast<std::size_t>(i < 0 ? i + r : i)];
  }

 private:
  void check(const std::source_location& loc) const {
    if constexpr (!std::is_void_v<T>) {
      if (spec_.dtype != dtype_v<T>)
        throw ShapeError("nova: expected a " + std::string(name_of(dtype_v<T>)) +
                         " tensor, got " + to_string(spec_) + "\n  at " + detail::where(loc));
    }
    if constexpr (Rank != dynamic_rank) {
      if (static_cast<int>(spec_.shape.size()) != Rank)
        throw ShapeError("nova: expected a rank-" + std::to_string(Rank) + " tensor, got " +
                         to_string(spec_) + "\n  at " + detail::where(loc));
    }
  }

  detail::ValueId id_;
  TensorSpec spec_;
  std::source_location loc_;
};

namespace detail {
template <class T, int R> struct is_expr<Expr<T, R>> : std::true_type {};
} // namespace detail

/// Anything a Nova op accepts as a tensor operand.
template <class E>
concept expression = detail::is_expr<std::remove_cvref_t<E>>::value;

/// Plain C++ numbers mix with expressions (`x * 0.5`).
template <class S>
concept scalar = std::is_arithmetic_v<S>;

template <class T> using Vector = Expr<T, 1>;
template <class T> using Matrix = Expr<T, 2>;

} // namespace nova
