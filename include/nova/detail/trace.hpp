// detail/trace.hpp - the one trace-and-compile routine of jit, train_step
// and eval_step.
//
// traced_executable(key, name, mode, body) returns the cached
// executable for `key`, or traces `body` once: a builder is made, set as the
// active trace (operators find it there), `body(builder)` declares the
// arguments and returns the result ids and in-place aliases, and the builder
// hands the finished function to the compiler. Concurrent callers with one
// key share one trace and one compile.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "nova/cache.hpp"
#include "nova/detail/builder.hpp"
#include "nova/expr/expr.hpp"

namespace nova::detail {

/// Makes `builder` the active trace while alive and counts the trace;
/// restores the previous one after.
class TraceScope {
 public:
  explicit TraceScope(Builder& builder) : trace_{&builder, {}}, previous_(active_trace) {
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

/// What a traced body returns: its results, and for each the argument it
/// overwrites in place (-1: a fresh output). `aliases` may be empty.
struct TraceResult {
  std::vector<ValueId> results;
  std::vector<int> aliases;
};

/// A new argument of the step being traced.
inline Expr<> trace_argument(Builder& b, const TensorSpec& spec) { return Expr<>(b.argument(spec), spec); }

template <class Body>
std::shared_ptr<Executable> traced_executable(const CacheKey& key, std::string_view name,
                                              ExecMode mode, Body&& body) {
  return cache_get_or_compile(key, [&]() -> std::shared_ptr<Executable> {
    std::unique_ptr<Builder> builder = make_builder(name);
    TraceScope scope(*builder);
    TraceResult r = body(*builder);
    return builder->finish(r.results, r.aliases, mode);
  });
}

} // namespace nova::detail
