//===- Kernels.h - what every kernel pass needs to know ----------*- C++ -*-===//
//
// After nova-outline-kernels a module holds the step (the launch plan) and a
// nested `module @kernels` of func.func kernels, each
// `(index %workgroup, memref...)` with one compute op (the root) before
// its return, and, once configured, a `nova.lowering_config`.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_KERNELS_H
#define NOVA_COMPILER_TRANSFORMS_KERNELS_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::nova {

inline constexpr llvm::StringLiteral kKernelsModuleName = "kernels";

/// The nested `module @kernels`, or null.
ModuleOp kernelsModule(ModuleOp top);

/// The kernel's compute op: the last op before its return (null if none).
Operation *kernelRoot(func::FuncOp kernel);

/// The kernel's configuration, or null before nova-configure-kernels.
LoweringConfigAttr loweringConfig(func::FuncOp kernel);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TRANSFORMS_KERNELS_H
