// jit.hpp - nova::jit: trace a step once per key, compile it, cache it, run it.
//
//   auto step = nova::jit([](auto x, auto w) { return nova::relu(nova::matmul(x, w)); });
//   nova::Tensor y = step(x, w);   // first call: trace + compile + cache + run
//   y = step(x, w);                // same shapes: a cache hit, compiled code only
//
// The cache key is the step's C++ type + the execution mode + the target +
// every tensor argument's dtype and shape + the value of every
// nova::static_arg (detail/step_key.hpp). The step must not capture
// anything: a capture could change the trace without changing the key.
// Values the trace depends on (a layer count, a flag, a config struct) are
// passed as nova::static_arg(v), which enters the key by value.
#pragma once

#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nova/cache.hpp"
#include "nova/detail/step_key.hpp"
#include "nova/detail/trace.hpp"
#include "nova/expr/expr.hpp"

namespace nova {

/// A value the trace depends on; its value is part of the cache key. The
/// step receives the bare value.
template <class T> struct Static {
  T value;
};

template <class T> Static<std::decay_t<T>> static_arg(T&& value) {
  using V = std::decay_t<T>;
  static_assert(!std::is_pointer_v<V>,
                "nova::static_arg: a pointer cannot be a static argument (its value differs from "
                "process to process); pass the value it points to");
  static_assert(detail::keyable_v<V>,
                "nova::static_arg: the value must be an arithmetic type, an enum, a std::string, "
                "a std::array of those, a struct adapted with BOOST_HANA_ADAPT_STRUCT, or a "
                "trivially copyable struct without padding");
  return {std::forward<T>(value)};
}

namespace detail {

template <class T> struct is_static : std::false_type {};
template <class T> struct is_static<Static<T>> : std::true_type {};

/// What the step receives for each argument while traced.
template <class Arg> struct traced_arg {
  static_assert(std::is_same_v<Arg, Tensor> || is_static<Arg>::value,
                "nova::jit: every argument of a step must be a nova::Tensor or a "
                "nova::static_arg(value)");
};
template <> struct traced_arg<Tensor> { using type = Expr<>; };
template <class T> struct traced_arg<Static<T>> { using type = T; };
template <class Arg> using traced_arg_t = typename traced_arg<std::decay_t<Arg>>::type;

inline void append_key(std::vector<std::uint64_t>& words, const Tensor& t) { append_tensor_key(words, t); }

template <class T> void append_key(std::vector<std::uint64_t>& words, const Static<T>& s) {
  words.push_back(0x57a7'0000ull); // a static argument follows
  append_value(words, s.value);
}

/// The output side: an Expr becomes a Tensor; tuples and vectors map elementwise.
template <class R> struct step_output;
template <class T, int Rank> struct step_output<Expr<T, Rank>> {
  using type = Tensor;
  static void ids(const Expr<T, Rank>& e, std::vector<ValueId>& out) { out.push_back(e.id()); }
  static Tensor take(std::vector<Tensor>& ts, std::size_t& i) { return std::move(ts[i++]); }
};
template <class... E> struct step_output<std::tuple<E...>> {
  using type = std::tuple<typename step_output<E>::type...>;
  static void ids(const std::tuple<E...>& t, std::vector<ValueId>& out) {
    std::apply([&](const auto&... e) { (step_output<std::decay_t<decltype(e)>>::ids(e, out), ...); }, t);
  }
  static type take(std::vector<Tensor>& ts, std::size_t& i) {
    return type{step_output<E>::take(ts, i)...}; // braced init: left-to-right
  }
};
template <class A, class B> struct step_output<std::pair<A, B>> : step_output<std::tuple<A, B>> {};
template <class E> struct step_output<std::vector<E>> {
  using type = std::vector<typename step_output<E>::type>;
  static void ids(const std::vector<E>& v, std::vector<ValueId>& out) {
    for (const auto& e : v) step_output<E>::ids(e, out);
  }
  static type take(std::vector<Tensor>& ts, std::size_t& i) {
    type out;
    while (i < ts.size()) out.push_back(step_output<E>::take(ts, i));
    return out;
  }
};

/// Appends the key words of every argument (tensors: dtype and shape;
/// static arguments: their value).
template <class... Args> void append_keys(std::vector<std::uint64_t>& words, const Args&... args) {
  boost::hana::for_each(boost::hana::make_tuple(std::cref(args)...),
                        [&](auto a) { append_key(words, a.get()); });
}

/// Appends the tensor arguments (made contiguous) to `inputs`, in order.
template <class... Args> void append_tensors(std::vector<Tensor>& inputs, const Args&... args) {
  boost::hana::for_each(boost::hana::make_tuple(std::cref(args)...), [&](auto a) {
    if constexpr (std::is_same_v<std::decay_t<decltype(a.get())>, Tensor>)
      inputs.push_back(a.get().contiguous());
  });
}

template <class Arg> decltype(auto) traced_value(const Arg& a, Builder& b) {
  if constexpr (std::is_same_v<Arg, Tensor>) return trace_argument(b, a.spec());
  else return (a.value);
}

} // namespace detail

template <class F>
class Jit {
  static_assert(std::is_empty_v<F>,
                "nova::jit: the step must not capture anything (a captured value could "
                "change the trace without changing the cache key); pass such values as "
                "arguments with nova::static_arg(value)");

 public:
  Jit(F f, ExecMode mode, std::source_location declared_at)
      : f_(f), mode_(mode), declared_at_(declared_at) {}

  /// Runs the step: a cache hit runs compiled code; a miss traces and
  /// compiles first.
  template <class... Args> auto operator()(const Args&... args) const {
    using Result = std::invoke_result_t<const F&, detail::traced_arg_t<Args>...>;
    using Output = detail::step_output<std::decay_t<Result>>;
    std::shared_ptr<Executable> exe = executable(args...);
    std::vector<Tensor> inputs;
    inputs.reserve(sizeof...(Args));
    detail::append_tensors(inputs, args...);
    std::vector<Tensor> outputs = (*exe)(inputs, detail::where(declared_at_));
    std::size_t i = 0;
    return Output::take(outputs, i);
  }

  /// The executable these arguments select (traced and compiled on a miss),
  /// without running it: for ahead-of-time compilation and benchmarks.
  template <class... Args> std::shared_ptr<Executable> executable(const Args&... args) const {
    using Result = std::invoke_result_t<const F&, detail::traced_arg_t<Args>...>;
    using Output = detail::step_output<std::decay_t<Result>>;
    ExecMode mode = detail::effective_mode(mode_);
    CacheKey key = detail::key_start(detail::type_tag_word<F>(), static_cast<std::uint8_t>(mode));
    detail::append_keys(key.words, args...);
    return detail::traced_executable(key, "step", mode, [&](detail::Builder& b) {
      // Arguments are numbered left to right (braced init order).
      auto traced = std::tuple<detail::traced_arg_t<Args>...>{detail::traced_value(args, b)...};
      Result result = std::apply(f_, traced);
      detail::TraceResult r;
      Output::ids(result, r.results);
      return r;
    });
  }

  /// The key of these arguments that is equal in every process running the
  /// same build (and on every rank): see detail/step_key.hpp.
  template <class... Args> std::array<std::uint64_t, 2> stable_key(const Args&... args) const {
    ExecMode mode = detail::effective_mode(mode_);
    CacheKey key = detail::key_start(detail::stable_type_hash<F>(declared_at_), static_cast<std::uint8_t>(mode));
    detail::append_keys(key.words, args...);
    return detail::key_digest(key);
  }

 private:
  F f_;
  ExecMode mode_;
  std::source_location declared_at_;
};

/// Wraps a step function: a captureless callable over nova::Expr values
/// (generic lambdas work) returning an Expr, a tuple of them or a vector.
template <class F>
Jit<F> jit(F f, ExecMode mode = ExecMode::compiled,
           std::source_location declared_at = std::source_location::current()) {
  return Jit<F>(f, mode, declared_at);
}

} // namespace nova
