//===- Interpreter.h - the float64 reference evaluator of nova IR -*- C++ -*-===//
//
// Evaluates a nova-dialect function op by op in double precision. It is the
// oracle every numerical test compares compiled code with, and the engine
// behind NOVA_INTERPRET=1. Its per-op code is the specification of each op.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_INTERPRETER_INTERPRETER_H
#define NOVA_COMPILER_INTERPRETER_INTERPRETER_H

#include "nova/executable.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <vector>

namespace mlir::nova {

/// A dense row-major array of doubles.
struct NDArray {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// Runs `func` on `inputs`; fails (with a diagnostic on the op) on an op it
/// does not know.
FailureOr<std::vector<NDArray>> interpret(func::FuncOp func,
                                          const std::vector<NDArray> &inputs);

/// An executable that interprets `module`'s function `funcName`; it owns the
/// module.
std::shared_ptr<::nova::Executable>
makeInterpreterExecutable(OwningOpRef<ModuleOp> module, const std::string &funcName,
                          std::vector<::nova::TensorSpec> inputs,
                          std::vector<::nova::TensorSpec> outputs,
                          std::vector<int> aliases);

} // namespace mlir::nova

#endif // NOVA_COMPILER_INTERPRETER_INTERPRETER_H
