// jit.hpp - nova::jit: trace a step once per key, compile it, cache it, run it.
//
//   auto step = nova::jit([](auto x, auto w) { return nova::relu(nova::matmul(x, w)); });
//   nova::Tensor y = step(x, w);   // first call: trace + compile + cache + run
//   y = step(x, w);                // same shapes: a cache hit, compiled code only
//
// The cache key is the step's C++ type + the execution mode + every tensor
// argument's dtype and shape + the value of every nova::static_arg. The step
// must not capture anything: a capture could change the trace without
// changing the key. Values the trace depends on (a layer count, a flag) are
// passed as nova::static_arg(v), which enters the key.
#pragma once

#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nova/cache.hpp"
#include "nova/expr/expr.hpp"

namespace nova {

/// A value the trace depends on; its value is part of the cache key. The
/// step receives the bare value.
template <class T> struct Static {
  T value;
};

template <class T> Static<std::decay_t<T>> static_arg(T&& value) {
  using V = std::decay_t<T>;
  static_assert(std::is_trivially_copyable_v<V> || std::is_same_v<V, std::string>,
                "nova::static_arg: the value must be trivially copyable or a std::string");
  return {std::forward<T>(value)};
}

namespace detail {

template <class T> struct is_static : std::false_type {};
template <class T> struct is_static<Static<T>> : std::true_type {};

/// One address per C++ type, fixed at link time: the type part of a key.
/// Deliberately not const: GCC's identical-code folding (-fipa-icf, on at
/// -O2) may merge identical read-only variables, which would give two step
/// types one address and let them share cache entries.
template <class T> inline char type_tag = 0;
template <class T> std::uint64_t type_tag_word() {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&type_tag<T>));
}

/// What the step receives for each argument while traced.
template <class Arg> struct traced_arg {
  static_assert(std::is_same_v<Arg, Tensor> || is_static<Arg>::value,
                "nova::jit: every argument of a step must be a nova::Tensor or a "
                "nova::static_arg(value)");
};
template <> struct traced_arg<Tensor> { using type = Expr<>; };
template <class T> struct traced_arg<Static<T>> { using type = T; };
template <class Arg> using traced_arg_t = typename traced_arg<std::decay_t<Arg>>::type;

inline void append_bytes(std::vector<std::uint64_t>& words, const void* data, std::size_t n) {
  words.push_back(n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, static_cast<const char*>(data) + i, std::min<std::size_t>(8, n - i));
    words.push_back(w);
  }
}

inline void append_key(std::vector<std::uint64_t>& words, const Tensor& t) {
  if (!t.defined()) throw ShapeError("nova::jit: an argument is an undefined (empty) nova::Tensor");
  words.push_back(0x7e50'0000ull | static_cast<std::uint64_t>(t.dtype()));
  words.push_back(static_cast<std::uint64_t>(t.rank()));
  for (auto d : t.shape()) words.push_back(static_cast<std::uint64_t>(d));
}

template <class T> void append_key(std::vector<std::uint64_t>& words, const Static<T>& s) {
  words.push_back(type_tag_word<T>());
  if constexpr (std::is_same_v<T, std::string>) append_bytes(words, s.value.data(), s.value.size());
  else append_bytes(words, &s.value, sizeof(T));
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

/// The executable for `key`, or the one `compile()` makes (then cached).
template <class Compile>
std::shared_ptr<Executable> lookup_or_compile(const CacheKey& key, Compile&& compile) {
  std::shared_ptr<Executable> exe = cache_lookup(key);
  if (!exe) {
    exe = compile();
    cache_insert(key, exe);
  }
  return exe;
}

/// Makes `builder` the active trace while alive (operators find it through
/// active_trace) and counts the trace; restores the previous one after.
class TraceScope {
 public:
  TraceScope(Builder& builder, std::source_location declared_at)
      : trace_{&builder, declared_at}, previous_(active_trace) {
    active_trace = &trace_;
    count_trace();
  }
  ~TraceScope() { active_trace = previous_; }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace trace_;
  Trace* previous_;
};

template <class Arg> decltype(auto) traced_value(const Arg& a, Builder& b) {
  if constexpr (std::is_same_v<Arg, Tensor>) {
    ValueId id = b.argument(a.spec());
    return Expr<>(id, a.spec());
  } else {
    return (a.value);
  }
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
    std::vector<Tensor> outputs = (*exe)(inputs);
    std::size_t i = 0;
    return Output::take(outputs, i);
  }

  /// The executable these arguments select (traced and compiled on a miss),
  /// without running it: for ahead-of-time compilation and benchmarks.
  template <class... Args> std::shared_ptr<Executable> executable(const Args&... args) const {
    using Result = std::invoke_result_t<const F&, detail::traced_arg_t<Args>...>;
    using Output = detail::step_output<std::decay_t<Result>>;
    ExecMode mode = detail::effective_mode(mode_);

    CacheKey key;
    key.words.reserve(8 + 4 * sizeof...(Args));
    key.words.push_back(detail::type_tag_word<F>());
    key.words.push_back(static_cast<std::uint64_t>(mode));
    detail::append_keys(key.words, args...);
    return detail::lookup_or_compile(key, [&] { return trace_and_compile<Result, Output>(mode, args...); });
  }

 private:
  template <class Result, class Output, class... Args>
  std::shared_ptr<Executable> trace_and_compile(ExecMode mode, const Args&... args) const {
    auto builder = detail::make_builder("step");
    detail::TraceScope scope(*builder, declared_at_);
    // Arguments are numbered left to right (braced init order).
    auto traced = std::tuple<detail::traced_arg_t<Args>...>{detail::traced_value(args, *builder)...};
    Result result = std::apply(f_, traced);
    std::vector<detail::ValueId> ids;
    Output::ids(result, ids);
    detail::count_compile();
    return builder->finish(ids, {}, mode);
  }

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
