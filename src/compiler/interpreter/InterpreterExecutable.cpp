//===- InterpreterExecutable.cpp - NOVA_INTERPRET=1 --------------*- C++ -*-===//
//
// Wraps interpret() as a runtime executable: inputs are widened to double,
// outputs narrowed to their dtype. NOVA_INTERPRET_NOISE=<relative>[:<seed>[:op]]
// (read at each run) interprets with that RoundingNoise.
//
//===----------------------------------------------------------------------===//

#include "compiler/Context.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdlib>
#include <string>

using namespace mlir;

namespace {

/// NOVA_INTERPRET_NOISE=<relative>[:<seed>[:op]]'s RoundingNoise (none
/// when unset or empty).
mlir::nova::RoundingNoise noiseFromEnvironment() {
  const char *v = std::getenv("NOVA_INTERPRET_NOISE");
  if (!v || !*v)
    return {};
  const std::string text = v;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(text).split(parts, ':');
  mlir::nova::RoundingNoise noise;
  bool parsed = parts.size() <= 3 && !parts[0].getAsDouble(noise.relative) &&
                (parts.size() < 2 || !parts[1].getAsInteger(10, noise.seed)) &&
                (parts.size() < 3 || parts[2] == "op");
  noise.perOp = parts.size() == 3;
  if (!parsed || !(noise.relative >= 0 && noise.relative < 1))
    throw ::nova::Error("NOVA_INTERPRET_NOISE=" + text +
                        ": expected a relative size in [0, 1), then optionally a seed and \"op\" (one draw "
                        "an op), as 6e-8, 6e-8:2 or 6e-8:2:op");
  return noise;
}

class InterpreterExecutable final : public ::nova::Executable {
public:
  InterpreterExecutable(OwningOpRef<ModuleOp> module, std::string funcName,
                        std::vector<::nova::TensorSpec> in,
                        std::vector<::nova::TensorSpec> out, std::vector<int> aliases)
      : Executable(std::move(in), std::move(out), std::move(aliases)), module(std::move(module)),
        funcName(std::move(funcName)) {}

  std::string kind() const override { return "interpreter"; }

  void run(std::span<const ::nova::Tensor> inputs,
           std::span<::nova::Tensor> outputs) const override {
    mlir::nova::RoundingNoise noise = noiseFromEnvironment();
    std::vector<mlir::nova::NDArray> args;
    for (const auto &t : inputs)
      args.push_back({t.shape(), t.to_vector()});
    std::string diagnostics;
    FailureOr<std::vector<mlir::nova::NDArray>> results;
    {
      std::lock_guard lock(mlir::nova::compilerMutex());
      ModuleOp m = module.get();
      ScopedDiagnosticHandler handler(m.getContext(), [&](Diagnostic &d) {
        diagnostics += d.str() + "\n";
        return success();
      });
      auto func = m.lookupSymbol<func::FuncOp>(funcName);
      if (noise.relative > 0)
        if (auto p = m->getAttrOfType<StringAttr>(mlir::nova::kMatmulPrecisionAttr))
          // bf16 rounds to nearest (8 significant bits); tf32 operands
          // keep 11 significant bits, truncated (the tensor cores drop
          // f32's low 13: GpuEmulator's tf32).
          noise.productRelative = p.getValue() == "bf16" ? 0x1p-8 : p.getValue() == "tf32" ? 0x1p-10 : 0;
      results = mlir::nova::interpret(func, args, noise);
    }
    if (failed(results))
      throw ::nova::Error("nova interpreter: " + diagnostics);
    // Every result is computed before any is written, so in-place (aliased)
    // outputs cannot disturb the computation.
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto &values = (*results)[i].data;
      ::nova::Tensor t = ::nova::Tensor::from<double>(
          outputs[i].shape(), std::span<const double>(values.data(), values.size()));
      ::nova::Tensor converted = t.to(outputs[i].dtype());
      std::memcpy(outputs[i].raw_data(), converted.raw_data(),
                  values.size() * ::nova::size_of(outputs[i].dtype()));
    }
  }

private:
  OwningOpRef<ModuleOp> module;
  std::string funcName;
};

} // namespace

std::shared_ptr<::nova::Executable> mlir::nova::makeInterpreterExecutable(
    OwningOpRef<ModuleOp> module, const std::string &funcName,
    std::vector<::nova::TensorSpec> inputs, std::vector<::nova::TensorSpec> outputs,
    std::vector<int> aliases) {
  return std::make_shared<InterpreterExecutable>(std::move(module), funcName,
                                                 std::move(inputs), std::move(outputs),
                                                 std::move(aliases));
}
