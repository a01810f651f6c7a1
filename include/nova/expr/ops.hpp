// expr/ops.hpp - the operations a step is written with.
//
// Each function appends one nova op (plus explicit broadcasts) to the trace
// and returns an Expr whose static element type and rank follow from its
// operands' (see the result_* helpers). Named functions take the caller's
// source line as a defaulted last parameter; operators take their operands by
// value and report the line their copies were made at, the operator's (see
// Expr's copy constructor).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "nova/expr/expr.hpp"

namespace nova {

namespace detail {

// ---- static result types --------------------------------------------------

template <class A, class B> constexpr bool same_or_unknown_v =
    std::is_void_v<A> || std::is_void_v<B> || std::is_same_v<A, B>;

template <class A, class B>
using common_element_t = std::conditional_t<std::is_void_v<A>, B, A>;

constexpr int broadcast_rank(int a, int b) {
  return a == dynamic_rank || b == dynamic_rank ? dynamic_rank : std::max(a, b);
}

// ---- emitting ops -----------------------------------------------------------

inline Expr<> emit(std::string_view name, std::initializer_list<ValueId> operands,
                   std::initializer_list<NamedAttr> attrs, const TensorSpec* result,
                   const std::source_location& loc) {
  Builder& b = *current_trace().builder;
  ValueId id = b.op(name, std::span<const ValueId>(operands.begin(), operands.size()),
                    std::span<const NamedAttr>(attrs.begin(), attrs.size()), result, loc);
  return Expr<>(id, b.spec(id), loc);
}

/// Retypes an untyped result to the statically known type (checked).
template <class T, int Rank>
Expr<T, Rank> typed(const Expr<>& e, const std::source_location& loc) {
  return Expr<T, Rank>(e, loc);
}

inline Expr<> broadcast_to(const Expr<>& x, const Shape& shape, const std::source_location& loc) {
  if (x.shape() == shape) return x;
  TensorSpec spec{x.dtype(), shape};
  return emit("nova.broadcast", {x.id()}, {}, &spec, loc);
}

/// A rank-0 constant of `dtype`.
inline Expr<> scalar_constant(double value, DType dtype, const std::source_location& loc) {
  TensorSpec spec{dtype, {}};
  return emit("nova.constant", {}, {{"value", value}}, &spec, loc);
}

template <expression A, expression B>
auto binary(std::string_view name, const A& a, const B& b, const std::source_location& loc) {
  using TA = typename A::element;
  using TB = typename B::element;
  static_assert(same_or_unknown_v<TA, TB>,
                "nova: the operands of an elementwise op have different element types");
  constexpr int rank = broadcast_rank(A::static_rank, B::static_rank);
  auto shape = broadcast_shapes(a.shape(), b.shape());
  if (!shape)
    throw ShapeError(std::string(name) + ": cannot broadcast " + to_string(a.spec()) +
                     " with " + to_string(b.spec()) + "\n  at " + where(loc));
  Expr<> lhs = broadcast_to(a, *shape, loc), rhs = broadcast_to(b, *shape, loc);
  return typed<common_element_t<TA, TB>, rank>(emit(name, {lhs.id(), rhs.id()}, {}, nullptr, loc),
                                              loc);
}

template <expression A>
auto unary(std::string_view name, const A& a, std::initializer_list<NamedAttr> attrs,
           const std::source_location& loc) {
  return typed<typename A::element, A::static_rank>(emit(name, {a.id()}, attrs, nullptr, loc), loc);
}

/// Normalises user axes (negative counts from the end; empty means all) to
/// the sorted, unique list the ops take.
inline std::vector<std::int64_t> normalize_axes(std::string_view op, std::vector<std::int64_t> axes,
                                                std::int64_t rank,
                                                const std::source_location& loc) {
  if (axes.empty())
    for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes) {
    if (a < -rank || a >= rank)
      throw ShapeError(std::string(op) + ": axis " + std::to_string(a) +
                       " is out of range for rank " + std::to_string(rank) + "\n  at " +
                       where(loc));
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    throw ShapeError(std::string(op) + ": repeated axis\n  at " + where(loc));
  return axes;
}

template <expression A>
auto reduce(std::string_view name, const A& x, std::vector<std::int64_t> axes, bool keep_dims,
            const std::source_location& loc) {
  auto norm = normalize_axes(name, std::move(axes), x.rank(), loc);
  // keep_dims is a run-time flag, so the result's rank is not static.
  Expr<> r = emit(name, {x.id()}, {{"axes", norm}, {"keep_dims", keep_dims}}, nullptr, loc);
  return typed<typename A::element, dynamic_rank>(r, loc);
}

} // namespace detail

/// A tensor of `shape` whose elements all equal `value`.
inline Expr<> constant(double value, DType dtype, const Shape& shape = {},
                       std::source_location loc = std::source_location::current()) {
  TensorSpec spec{dtype, shape};
  return detail::emit("nova.constant", {}, {{"value", value}}, &spec, loc);
}

// ---- elementwise --------------------------------------------------------------

#define NOVA_BINARY_FN(FN, OPNAME, OPERATOR)                                               \
  template <expression A, expression B>                                                    \
  auto FN(const A& a, const B& b, std::source_location loc = std::source_location::current()) { \
    return detail::binary(OPNAME, a, b, loc);                                              \
  }                                                                                        \
  template <expression A, expression B> auto operator OPERATOR(A a, B b) {                 \
    return detail::binary(OPNAME, a, b, b.loc());                                          \
  }                                                                                        \
  template <expression A, scalar S> auto operator OPERATOR(A a, S s) {                     \
    const std::source_location& loc = a.loc();                                             \
    return detail::binary(OPNAME, a,                                                       \
                          detail::typed<typename A::element, 0>(                           \
                              detail::scalar_constant(static_cast<double>(s), a.dtype(), loc), loc), \
                          loc);                                                            \
  }                                                                                        \
  template <scalar S, expression B> auto operator OPERATOR(S s, B b) {                     \
    const std::source_location& loc = b.loc();                                             \
    return detail::binary(OPNAME,                                                          \
                          detail::typed<typename B::element, 0>(                           \
                              detail::scalar_constant(static_cast<double>(s), b.dtype(), loc), loc), \
                          b, loc);                                                         \
  }

NOVA_BINARY_FN(add, "nova.add", +)
NOVA_BINARY_FN(sub, "nova.sub", -)
NOVA_BINARY_FN(mul, "nova.mul", *)
NOVA_BINARY_FN(div, "nova.div", /)
#undef NOVA_BINARY_FN

/// Elementwise maximum (NaN if either operand is NaN), with broadcasting.
template <expression A, expression B>
auto maximum(const A& a, const B& b, std::source_location loc = std::source_location::current()) {
  return detail::binary("nova.max", a, b, loc);
}

template <expression A> auto operator-(A a) { return detail::unary("nova.neg", a, {}, a.loc()); }

#define NOVA_UNARY_FN(FN, OPNAME)                                                          \
  template <expression A>                                                                  \
  auto FN(const A& a, std::source_location loc = std::source_location::current()) {        \
    return detail::unary(OPNAME, a, {}, loc);                                              \
  }
NOVA_UNARY_FN(neg, "nova.neg")
NOVA_UNARY_FN(exp, "nova.exp")
NOVA_UNARY_FN(log, "nova.log")
NOVA_UNARY_FN(tanh, "nova.tanh")
NOVA_UNARY_FN(sqrt, "nova.sqrt")
NOVA_UNARY_FN(rsqrt, "nova.rsqrt")
NOVA_UNARY_FN(relu, "nova.relu")
NOVA_UNARY_FN(erf, "nova.erf")
#undef NOVA_UNARY_FN

/// Elementwise minimum, with broadcasting.
template <expression A, expression B>
auto minimum(const A& a, const B& b, std::source_location loc = std::source_location::current()) {
  return neg(maximum(neg(a, loc), neg(b, loc), loc), loc);
}

/// 1.0 where a > b, else 0.0 (a mask: no gradient flows through it).
template <expression A, expression B>
auto greater(const A& a, const B& b, std::source_location loc = std::source_location::current()) {
  return detail::binary("nova.greater", a, b, loc);
}

enum class GeluApprox { tanh, none };

/// GELU; GeluApprox::tanh is GPT-2's approximation, GeluApprox::none uses erf.
template <expression A>
auto gelu(const A& a, GeluApprox approx = GeluApprox::tanh,
          std::source_location loc = std::source_location::current()) {
  return detail::unary("nova.gelu", a, {{"approximate", approx == GeluApprox::tanh}}, loc);
}

// ---- contraction ----------------------------------------------------------------

enum class Transpose { none, a, b, both };

/// (Batched) matrix product. Both operands have the same rank >= 2 and equal
/// leading batch dims; Transpose::a/b/both read an operand's last two dims
/// swapped without materialising the transpose.
template <expression A, expression B>
auto matmul(const A& a, const B& b, Transpose t = Transpose::none,
            std::source_location loc = std::source_location::current()) {
  static_assert(detail::same_or_unknown_v<typename A::element, typename B::element>,
                "nova::matmul: operands have different element types");
  static_assert(A::static_rank == dynamic_rank || A::static_rank >= 2,
                "nova::matmul: the left operand must have rank >= 2");
  static_assert(B::static_rank == dynamic_rank || B::static_rank >= 2,
                "nova::matmul: the right operand must have rank >= 2");
  static_assert(A::static_rank == dynamic_rank || B::static_rank == dynamic_rank ||
                    A::static_rank == B::static_rank,
                "nova::matmul: operands must have the same rank");
  constexpr int rank = A::static_rank != dynamic_rank ? A::static_rank : B::static_rank;
  bool ta = t == Transpose::a || t == Transpose::both;
  bool tb = t == Transpose::b || t == Transpose::both;
  auto r = detail::emit("nova.matmul", {a.id(), b.id()},
                        {{"transpose_a", ta}, {"transpose_b", tb}}, nullptr, loc);
  return detail::typed<detail::common_element_t<typename A::element, typename B::element>, rank>(
      r, loc);
}

// ---- layout ---------------------------------------------------------------------

/// Numpy-style broadcast to `shape`.
template <expression A>
Expr<typename A::element> broadcast(const A& x, const Shape& shape,
                                    std::source_location loc = std::source_location::current()) {
  if (!broadcast_shapes(x.shape(), shape) || *broadcast_shapes(x.shape(), shape) != shape)
    throw ShapeError("nova.broadcast: cannot broadcast " + to_string(x.spec()) + " to " +
                     to_string(shape) + "\n  at " + detail::where(loc));
  return detail::typed<typename A::element, dynamic_rank>(detail::broadcast_to(x, shape, loc),
                                                         loc);
}

/// Row-major reshape; one extent may be -1 (inferred).
template <expression A>
Expr<typename A::element> reshape(const A& x, Shape shape,
                                  std::source_location loc = std::source_location::current()) {
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer_at < 0) infer_at = static_cast<std::int64_t>(i);
    else if (shape[i] < 0)
      throw ShapeError("nova.reshape: bad target shape " + to_string(shape) + "\n  at " +
                       detail::where(loc));
    else known *= shape[i];
  }
  if (infer_at >= 0) {
    if (known == 0 || numel(x.shape()) % known != 0)
      throw ShapeError("nova.reshape: cannot reshape " + to_string(x.spec()) + " to " +
                       to_string(shape) + "\n  at " + detail::where(loc));
    shape[static_cast<std::size_t>(infer_at)] = numel(x.shape()) / known;
  }
  if (x.shape() == shape) return x;
  TensorSpec spec{x.dtype(), shape};
  return detail::typed<typename A::element, dynamic_rank>(
      detail::emit("nova.reshape", {x.id()}, {}, &spec, loc), loc);
}

/// Permutes dims: result dim i is input dim perm[i].
template <expression A>
auto permute(const A& x, std::vector<std::int64_t> perm,
             std::source_location loc = std::source_location::current()) {
  return detail::unary("nova.transpose", x, {{"permutation", std::move(perm)}}, loc);
}

/// Swaps the last two dims.
template <expression A>
auto transpose(const A& x, std::source_location loc = std::source_location::current()) {
  static_assert(A::static_rank == dynamic_rank || A::static_rank >= 2,
                "nova::transpose: needs rank >= 2");
  std::vector<std::int64_t> perm;
  for (std::int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  if (perm.size() < 2)
    throw ShapeError("nova.transpose: needs rank >= 2, got " + to_string(x.spec()) + "\n  at " +
                     detail::where(loc));
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return permute(x, std::move(perm), loc);
}

// ---- reductions -------------------------------------------------------------------

/// Sum over `axes` (negative counts from the end; empty: all axes).
template <expression A>
auto sum(const A& x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
         std::source_location loc = std::source_location::current()) {
  return detail::reduce("nova.reduce_sum", x, std::move(axes), keep_dims, loc);
}
template <expression A>
auto mean(const A& x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
          std::source_location loc = std::source_location::current()) {
  return detail::reduce("nova.reduce_mean", x, std::move(axes), keep_dims, loc);
}
/// Maximum over `axes`.
template <expression A>
auto max(const A& x, std::vector<std::int64_t> axes = {}, bool keep_dims = false,
         std::source_location loc = std::source_location::current()) {
  return detail::reduce("nova.reduce_max", x, std::move(axes), keep_dims, loc);
}

/// Numerically stable softmax along `axis` (negative counts from the end).
template <expression A>
auto softmax(const A& x, std::int64_t axis = -1,
             std::source_location loc = std::source_location::current()) {
  std::int64_t a = detail::normalize_axes("nova.softmax", {axis}, x.rank(), loc).front();
  return detail::unary("nova.softmax", x, {{"axis", a}}, loc);
}

/// Numerically stable log(softmax(x)) along `axis`.
template <expression A>
auto log_softmax(const A& x, std::int64_t axis = -1,
                 std::source_location loc = std::source_location::current()) {
  std::int64_t a = detail::normalize_axes("nova.log_softmax", {axis}, x.rank(), loc).front();
  return detail::unary("nova.log_softmax", x, {{"axis", a}}, loc);
}

// ---- indices ----------------------------------------------------------------------

/// One-hot encoding of integer labels [...] as a float tensor [..., classes];
/// a label outside [0, classes) gives a row of zeros.
template <expression A>
Expr<> one_hot(const A& labels, std::int64_t classes, DType dtype = DType::f32,
               std::source_location loc = std::source_location::current()) {
  if (classes <= 0 || !is_floating(dtype) || is_floating(labels.dtype()))
    throw ShapeError("nova.one_hot: needs integer labels, a positive class count and a float "
                     "result dtype; got labels " + to_string(labels.spec()) + ", " +
                     std::to_string(classes) + " classes\n  at " + detail::where(loc));
  Shape shape = labels.shape();
  shape.push_back(classes);
  TensorSpec spec{dtype, shape};
  return detail::emit("nova.one_hot", {labels.id()}, {}, &spec, loc);
}

namespace detail {
/// The operands of a cross-entropy, checked in the name of `op`.
template <expression L, expression Y>
void check_cross_entropy(std::string_view op, const L& logits, const Y& labels,
                         const std::source_location& loc) {
  bool leading = logits.rank() >= 1 && labels.rank() + 1 == logits.rank();
  for (std::int64_t i = 0; leading && i < labels.rank(); ++i) leading = labels.dim(i) == logits.dim(i);
  if (!leading)
    throw ShapeError(std::string(op) + ": labels " + to_string(labels.spec()) +
                     " must have the logits' shape " + to_string(logits.spec()) +
                     " without the class dim\n  at " + where(loc));
  if (labels.dtype() != DType::i32 && labels.dtype() != DType::i64)
    throw ShapeError(std::string(op) + ": labels must be i32 or i64 class indices, got " +
                     to_string(labels.spec()) + "\n  at " + where(loc));
  if (!is_floating(logits.dtype()) || logits.dim(-1) < 1)
    throw ShapeError(std::string(op) + ": logits must be floating point with at least one class, got " +
                     to_string(logits.spec()) + "\n  at " + where(loc));
}
} // namespace detail

/// Softmax cross-entropy of each row of `logits` [..., C] against its integer
/// label in `labels` [...]: log(sum(exp(row))) - row[label], the result
/// shaped like `labels`. A label outside [0, C) gives a loss of 0 and no
/// gradient (PyTorch's ignore_index). One op: the compiler runs it as one
/// pass per row that never stores the log-probabilities, and its gradient
/// (softmax - one_hot) * g as one more.
template <expression L, expression Y>
Expr<> softmax_cross_entropy(const L& logits, const Y& labels,
                             std::source_location loc = std::source_location::current()) {
  detail::check_cross_entropy("nova.cross_entropy", logits, labels, loc);
  return detail::emit("nova.cross_entropy", {logits.id(), labels.id()}, {}, nullptr, loc);
}

/// Rows of `table` [rows, width] picked by integer `indices`: the result is
/// indices' shape + [width]. An index outside [0, rows) reads zeros. The
/// gradient with respect to the table is a scatter-add.
template <expression T, expression I>
Expr<typename T::element> gather(const T& table, const I& indices,
                                 std::source_location loc = std::source_location::current()) {
  return detail::typed<typename T::element, dynamic_rank>(
      detail::emit("nova.gather", {table.id(), indices.id()}, {}, nullptr, loc), loc);
}

/// The box x[offsets : offsets + sizes].
template <expression A>
auto slice(const A& x, std::vector<std::int64_t> offsets, std::vector<std::int64_t> sizes,
           std::source_location loc = std::source_location::current()) {
  return detail::unary("nova.slice", x, {{"offsets", std::move(offsets)}, {"sizes", std::move(sizes)}},
                       loc);
}

/// Columns [begin, begin + count) of the last dim.
template <expression A>
auto slice_last(const A& x, std::int64_t begin, std::int64_t count,
                std::source_location loc = std::source_location::current()) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(x.rank()), 0);
  std::vector<std::int64_t> sizes(x.shape().begin(), x.shape().end());
  if (sizes.empty())
    throw ShapeError("nova.slice: cannot slice a scalar\n  at " + detail::where(loc));
  offsets.back() = begin;
  sizes.back() = count;
  return slice(x, std::move(offsets), std::move(sizes), loc);
}

/// LayerNorm over the last dim of `x` [..., d]: (x - mean) / sqrt(var +
/// eps) * gamma + beta per row (biased variance), gamma and beta [d]. One
/// op (traced under the scope "layer_norm"): the compiler runs it as one
/// pass per row block, and its gradient recomputes the row statistics
/// instead of keeping them.
template <expression X, expression G, expression B>
auto layer_norm(const X& x, const G& gamma, const B& beta, double eps = 1e-5,
                std::source_location loc = std::source_location::current()) {
  if (x.rank() < 1)
    throw ShapeError("nova.layer_norm: the input must be [..., d], got " + to_string(x.spec()) +
                     "\n  at " + detail::where(loc));
  std::int64_t d = x.dim(x.rank() - 1);
  for (const auto* p : {&gamma.spec(), &beta.spec()})
    if (p->shape != Shape{d} || p->dtype != x.dtype())
      throw ShapeError(std::string("nova.layer_norm: ") + (p == &gamma.spec() ? "gamma" : "beta") +
                       " must be " + to_string(TensorSpec{x.dtype(), {d}}) + " for the input " +
                       to_string(x.spec()) + ", got " + to_string(*p) + "\n  at " +
                       detail::where(loc));
  if (!(eps > 0.0))
    throw ShapeError("nova.layer_norm: eps must be positive\n  at " + detail::where(loc));
  named_scope scope("layer_norm");
  return detail::emit("nova.layer_norm", {x.id(), gamma.id(), beta.id()}, {{"eps", eps}}, nullptr,
                      loc);
}

/// Causal multi-head self-attention on a fused projection `qkv` [B, T, 3d]
/// (columns: q | k | v; head h takes columns [h*hd, (h+1)*hd) of each,
/// hd = d / heads): softmax(scale q k^T + causal mask) v per head, merged
/// back into [B, T, d]. `scale` <= 0 means 1 / sqrt(hd). One op: the
/// compiler runs it (and its gradient) as one kernel per (batch, head) that
/// never stores the T x T probabilities; the same math as the unfused
/// slice / matmul / softmax / matmul graph.
template <expression A>
auto causal_attention(const A& qkv, std::int64_t heads, double scale = 0.0,
                      std::source_location loc = std::source_location::current()) {
  if (qkv.rank() != 3 || qkv.dim(2) % 3 != 0)
    throw ShapeError("nova.causal_attention: qkv must be [B, T, 3d], got " +
                     to_string(qkv.spec()) + "\n  at " + detail::where(loc));
  std::int64_t d = qkv.dim(2) / 3;
  if (heads <= 0 || d % heads != 0)
    throw ShapeError("nova.causal_attention: d = " + std::to_string(d) + " (qkv " +
                     to_string(qkv.spec()) + ") is not divisible by " + std::to_string(heads) +
                     " heads\n  at " + detail::where(loc));
  if (scale <= 0.0) scale = 1.0 / std::sqrt(double(d / heads));
  return detail::emit("nova.causal_attention", {qkv.id()}, {{"heads", heads}, {"scale", scale}},
                      nullptr, loc);
}

/// [T, S] additive attention mask: 0 where column <= row, -inf above.
inline Expr<> causal_mask(std::int64_t rows, std::int64_t cols, DType dtype = DType::f32,
                          std::source_location loc = std::source_location::current()) {
  TensorSpec spec{dtype, {rows, cols}};
  return detail::emit("nova.causal_mask", {}, {}, &spec, loc);
}

/// Inverted dropout: each element is zeroed with probability `rate`, the
/// rest scaled by 1 / (1 - rate). The mask is Philox4x32-10 of (seed,
/// stream, element index): `seed` is a rank-0 i64 tensor (pass a new one
/// each step), `stream` tells apart the dropouts of one step.
template <expression A, expression S>
auto dropout(const A& x, const S& seed, double rate, std::int64_t stream = 0,
             std::source_location loc = std::source_location::current()) {
  if (rate < 0.0 || rate >= 1.0)
    throw ShapeError("nova.dropout: rate " + std::to_string(rate) + " is not in [0, 1)\n  at " +
                     detail::where(loc));
  if (seed.dtype() != DType::i64 || seed.rank() != 0)
    throw ShapeError("nova.dropout: the seed must be a rank-0 i64 tensor, got " +
                     to_string(seed.spec()) + "\n  at " + detail::where(loc));
  if (rate == 0.0) return detail::typed<typename A::element, A::static_rank>(Expr<>(x), loc);
  auto r = detail::emit("nova.dropout", {x.id(), seed.id()}, {{"rate", rate}, {"stream", stream}},
                        nullptr, loc);
  return detail::typed<typename A::element, A::static_rank>(r, loc);
}

// ---- differentiation --------------------------------------------------------------

/// d loss / d wrt[i] for each i, built in the same step (reverse mode, by the
/// compiler's nova-autodiff pass). `loss` must be a scalar (rank 0).
inline std::vector<Expr<>> gradients(const Expr<>& loss, const std::vector<Expr<>>& wrt,
                                     std::source_location loc = std::source_location::current()) {
  detail::Builder& b = *detail::current_trace().builder;
  std::vector<detail::ValueId> operands{loss.id()};
  for (const auto& w : wrt) operands.push_back(w.id());
  detail::ValueId first = b.op("nova.gradient", operands, {}, nullptr, loc);
  std::vector<Expr<>> grads;
  for (std::size_t i = 0; i < wrt.size(); ++i) {
    auto id = static_cast<detail::ValueId>(first + static_cast<detail::ValueId>(i));
    grads.emplace_back(id, b.spec(id), loc);
  }
  return grads;
}

} // namespace nova
