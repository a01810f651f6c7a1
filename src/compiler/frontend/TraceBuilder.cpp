//===- TraceBuilder.cpp - the front end's builder, on MLIR -------*- C++ -*-===//
//
// Implements nova::detail::Builder (include/nova/detail/builder.hpp). Ops are
// created generically by name: the result type comes from the op's own
// InferTypeOpInterface rule, then the op is verified at once, so the first
// bad op stops the trace with the dialect's message, located at the user's
// source line. finish() closes the function and hands it to the compile
// driver (CompileDriver.cpp), which finds or compiles the executable.
//
//===----------------------------------------------------------------------===//

#include "nova/detail/builder.hpp"
#include "nova/executable_desc.hpp"
#include "nova/memory.hpp"
#include "nova/precision.hpp"

#include "compiler/CompileDriver.h"
#include "compiler/Context.h"
#include "compiler/Diagnostics.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cstdlib>
#include <string_view>
#include <variant>

using namespace mlir;

namespace {

Type elementType(MLIRContext *ctx, ::nova::DType t) {
  switch (t) {
  case ::nova::DType::f32: return Float32Type::get(ctx);
  case ::nova::DType::f64: return Float64Type::get(ctx);
  case ::nova::DType::i32: return IntegerType::get(ctx, 32);
  case ::nova::DType::i64: return IntegerType::get(ctx, 64);
  }
  return {};
}

::nova::DType dtypeOf(Type t) {
  if (t.isF32()) return ::nova::DType::f32;
  if (t.isF64()) return ::nova::DType::f64;
  if (t.isInteger(32)) return ::nova::DType::i32;
  return ::nova::DType::i64;
}

RankedTensorType tensorType(MLIRContext *ctx, const ::nova::TensorSpec &spec) {
  return RankedTensorType::get(spec.shape, elementType(ctx, spec.dtype));
}

::nova::TensorSpec specOf(Type type) {
  auto t = cast<RankedTensorType>(type);
  return {dtypeOf(t.getElementType()), ::nova::Shape(t.getShape().begin(), t.getShape().end())};
}

Attribute toAttr(Builder &b, const ::nova::detail::AttrValue &v) {
  return std::visit(
      [&](const auto &x) -> Attribute {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return b.getBoolAttr(x);
        else if constexpr (std::is_same_v<T, std::int64_t>) return b.getI64IntegerAttr(x);
        else if constexpr (std::is_same_v<T, double>) return b.getF64FloatAttr(x);
        else return b.getDenseI64ArrayAttr(x);
      },
      v);
}

using mlir::nova::DiagnosticCollector;

class TraceBuilder final : public ::nova::detail::Builder {
public:
  explicit TraceBuilder(std::string_view name)
      : lock(mlir::nova::compilerMutex()), ctx(&mlir::nova::compilerContext()), builder(ctx),
        name(name) {
    module = ModuleOp::create(UnknownLoc::get(ctx));
    // The matmul precision (nova/precision.hpp) travels with the step: the
    // configurator reads it, and it is part of the step's structural key.
    if (::nova::matmul_precision() != ::nova::MatmulPrecision::fp32)
      (*module)->setAttr(mlir::nova::kMatmulPrecisionAttr,
                         builder.getStringAttr(::nova::name_of(::nova::matmul_precision())));
    if (::nova::activation_precision() != ::nova::ActivationPrecision::fp32)
      (*module)->setAttr(mlir::nova::kActivationPrecisionAttr,
                         builder.getStringAttr(::nova::name_of(::nova::activation_precision())));
    // NOVA_REMAT=0, NOVA_IN_PLACE=0, NOVA_ARENA_REUSE=0 and NOVA_ROW_STATS=0 turn those off
    // (to measure them, to bisect), and the memory budget (nova/memory.hpp)
    // asks for a plan that fits; as attributes all are part of the key too.
    // Whether attention is recomputed is the target's choice
    // (Target::recomputesAttention) unless NOVA_REMAT=cheap (no) or
    // NOVA_REMAT=1 (yes) says.
    // NOVA_REMAT=2 recomputes as a memory budget's second plan does
    // (matmuls, attention, softmaxes and reductions too), budget or not:
    // to test that level, and to measure it.
    const char *remat = std::getenv("NOVA_REMAT");
    if (remat && (std::string_view(remat) == "0" || std::string_view(remat) == "2"))
      (*module)->setAttr(mlir::nova::kRematAttr, builder.getI64IntegerAttr(std::string_view(remat) == "2" ? 2 : 0));
    else if (remat && (std::string_view(remat) == "cheap" || std::string_view(remat) == "1"))
      (*module)->setAttr(mlir::nova::kRematAttentionAttr, builder.getBoolAttr(std::string_view(remat) == "1"));
    for (auto [env, attr] : {std::pair{"NOVA_IN_PLACE", mlir::nova::kInPlaceAttr},
                             std::pair{"NOVA_ARENA_REUSE", mlir::nova::kArenaReuseAttr},
                             std::pair{"NOVA_ROW_STATS", mlir::nova::kRowStatsAttr}})
      if (const char *v = std::getenv(env); v && std::string_view(v) == "0")
        (*module)->setAttr(attr, builder.getBoolAttr(false));
    // NOVA_DIST_BUCKET_MB: the gradient bucket of data-parallel steps
    // (nova-bucket-all-reduce; 25 MiB when absent), in MiB, fractions allowed.
    if (const char *mb = std::getenv("NOVA_DIST_BUCKET_MB")) {
      char *end = nullptr;
      double v = std::strtod(mb, &end);
      if (end == mb || *end != '\0' || !(v > 0) || v > 1e6)
        throw ::nova::Error("nova: NOVA_DIST_BUCKET_MB='" + std::string(mb) +
                            "' is not a positive number of MiB");
      (*module)->setAttr(mlir::nova::kBucketBytesAttr,
                         builder.getI64IntegerAttr(static_cast<int64_t>(v * 1024 * 1024)));
    }
    if (std::uint64_t budget = ::nova::memory_budget())
      (*module)->setAttr(mlir::nova::kMemoryBudgetAttr,
                         builder.getI64IntegerAttr(static_cast<int64_t>(budget)));
    builder.setInsertionPointToEnd(module->getBody());
    func = builder.create<func::FuncOp>(UnknownLoc::get(ctx), this->name,
                                        builder.getFunctionType({}, {}));
    builder.setInsertionPointToStart(func.addEntryBlock());
  }

  ::nova::detail::ValueId argument(const ::nova::TensorSpec &spec) override {
    inputs.push_back(spec);
    BlockArgument arg =
        func.front().addArgument(tensorType(ctx, spec), UnknownLoc::get(ctx));
    return remember(arg);
  }

  ::nova::detail::ValueId op(std::string_view opName,
                             std::span<const ::nova::detail::ValueId> operands,
                             std::span<const ::nova::detail::NamedAttr> attrs,
                             const ::nova::TensorSpec *result,
                             const std::source_location &where) override {
    Location loc = FileLineColLoc::get(ctx, where.file_name(), where.line(), where.column());
    if (!scope.empty()) // kept through lowering and autodiff: kernels are classed by it
      loc = NameLoc::get(StringAttr::get(ctx, scope), loc);
    OperationState state(loc, StringRef(opName.data(), opName.size()));
    if (!state.name.isRegistered())
      throw ::nova::Error("nova: unknown op '" + std::string(opName) + "'");
    for (auto id : operands)
      state.addOperands(values.at(static_cast<size_t>(id)));
    for (const auto &a : attrs)
      state.addAttribute(StringRef(a.name.data(), a.name.size()), toAttr(builder, a.value));

    DiagnosticCollector diags(ctx);
    if (result) {
      state.addTypes(tensorType(ctx, *result));
    } else {
      auto *infer = state.name.getInterface<InferTypeOpInterface>();
      SmallVector<Type> types;
      if (!infer ||
          failed(infer->inferReturnTypes(ctx, loc, state.operands,
                                         state.attributes.getDictionary(ctx),
                                         state.getRawProperties(), state.regions, types)))
        throw shapeError(opName, diags.text, where);
      state.addTypes(types);
    }
    Operation *op = builder.create(state);
    if (failed(verify(op))) {
      op->erase();
      throw shapeError(opName, diags.text, where);
    }
    ::nova::detail::ValueId first = remember(op->getResult(0));
    for (Value extra : op->getResults().drop_front())
      remember(extra);
    return first;
  }

  void set_scope(const std::string &s) override { scope = s; }

  ::nova::TensorSpec spec(::nova::detail::ValueId id) const override {
    return specOf(values.at(static_cast<size_t>(id)).getType());
  }

  std::shared_ptr<::nova::Executable>
  finish(std::span<const ::nova::detail::ValueId> results, std::span<const int> aliases,
         ::nova::ExecMode mode) override {
    SmallVector<Value> returned;
    std::vector<::nova::TensorSpec> outputs;
    for (auto id : results) {
      returned.push_back(values.at(static_cast<size_t>(id)));
      outputs.push_back(spec(id));
    }
    builder.create<func::ReturnOp>(UnknownLoc::get(ctx), returned);
    func.setFunctionType(builder.getFunctionType(
        func.front().getArgumentTypes(), ValueRange(returned).getTypes()));

    std::vector<int> resultAliases(aliases.begin(), aliases.end());
    resultAliases.resize(results.size(), -1);
    if (llvm::any_of(resultAliases, [](int a) { return a >= 0; })) {
      SmallVector<int64_t> attr(resultAliases.begin(), resultAliases.end());
      func->setAttr("nova.result_aliases", builder.getDenseI64ArrayAttr(attr));
    }

    mlir::nova::StepSignature signature{name, inputs, outputs, resultAliases};
    return mlir::nova::compileStep(std::move(module), signature, mode);
  }

  std::string ir() const override {
    std::string s;
    llvm::raw_string_ostream os(s);
    ModuleOp m = module.get();
    m.print(os);
    return s;
  }

private:
  ::nova::detail::ValueId remember(Value v) {
    values.push_back(v);
    return static_cast<::nova::detail::ValueId>(values.size() - 1);
  }

  static ::nova::ShapeError shapeError(std::string_view opName, const std::string &why,
                                       const std::source_location &where) {
    std::string msg = why.empty() ? std::string(opName) + ": invalid operands" : why;
    return ::nova::ShapeError(msg + "\n  at " + where.file_name() + ":" +
                              std::to_string(where.line()));
  }

  std::unique_lock<std::recursive_mutex> lock;
  MLIRContext *ctx;
  OpBuilder builder;
  std::string name;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  std::vector<Value> values;
  std::string scope; // nova::named_scope in force
  std::vector<::nova::TensorSpec> inputs;
};

} // namespace

namespace nova::detail {
std::string compiler_build() {
  return ::nova::compiler_version() + ", " + mlir::nova::compilerBuild();
}

std::unique_ptr<Builder> make_builder(std::string_view name) {
  return std::make_unique<TraceBuilder>(name);
}
} // namespace nova::detail
