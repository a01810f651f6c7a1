// detail/builder.hpp - the narrow interface between the front end and the
// compiler library.
//
// The front end (header-only) calls op() once per user operation while a step
// is traced; the compiler library implements it by building the nova op with
// MLIR and inferring its type from the op's own shape rule, so shape errors
// come back as nova::ShapeError naming the op, the shapes and the user's line.
// Nothing here mentions MLIR.
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nova/executable.hpp"
#include "nova/tensor.hpp"

namespace nova {

/// How a traced step is executed.
enum class ExecMode : std::uint8_t {
  compiled,    // lowered to native code (the default)
  interpreted, // nova IR evaluated op by op in float64 (also: NOVA_INTERPRET=1)
};

namespace detail {

using ValueId = std::int32_t;
using AttrValue = std::variant<bool, std::int64_t, double, std::vector<std::int64_t>>;

struct NamedAttr {
  std::string_view name;
  AttrValue value;
};

class Builder {
 public:
  virtual ~Builder() = default;

  /// A new argument of the step.
  virtual ValueId argument(const TensorSpec& spec) = 0;

  /// Appends op `name` ("nova.add") with the given operands and attributes.
  /// Its result type is the op's inferred type, or `result` for ops whose type
  /// is not inferable (broadcast, reshape, constant). Returns the id of the
  /// first result; further results have the following ids. Throws ShapeError.
  virtual ValueId op(std::string_view name, std::span<const ValueId> operands,
                     std::span<const NamedAttr> attrs, const TensorSpec* result,
                     const std::source_location& where) = 0;

  virtual TensorSpec spec(ValueId value) const = 0;

  /// Ends the step with `results`, then lowers and compiles it (or prepares
  /// the interpreter). `aliases` (empty, or one per result) names the
  /// argument each result is written into in place, or -1. Throws
  /// CompileError.
  virtual std::shared_ptr<Executable> finish(std::span<const ValueId> results,
                                             std::span<const int> aliases, ExecMode mode) = 0;

  /// The nova IR built so far, as text.
  virtual std::string ir() const = 0;

  /// The named scope (nova::named_scope, "block3/attention") the ops appended
  /// from now on belong to; empty: none.
  virtual void set_scope(const std::string& scope) { (void)scope; }
};

/// Implemented by the compiler library. `name` becomes the function's symbol.
std::unique_ptr<Builder> make_builder(std::string_view name);

/// The compiler's version and build (a hash of the library itself): equal
/// only in processes running the same build. Implemented by the compiler
/// library; data-parallel ranks compare it (dist::agree_on_executable).
std::string compiler_build();

/// ExecMode::interpreted if NOVA_INTERPRET=1 is set, else `requested`.
ExecMode effective_mode(ExecMode requested);

} // namespace detail
} // namespace nova
