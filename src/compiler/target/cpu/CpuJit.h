//===- CpuJit.h - LLVM-dialect module → callable executable ------*- C++ -*-===//

#ifndef NOVA_COMPILER_TARGET_CPU_CPUJIT_H
#define NOVA_COMPILER_TARGET_CPU_CPUJIT_H

#include "nova/executable.hpp"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>

namespace mlir::nova {

/// JIT-compiles `module` (LLVM dialect; `funcName` has the memref in/out
/// signature of nova-destination-passing) for the host CPU. Throws
/// ::nova::CompileError with LLVM's message on failure.
std::shared_ptr<::nova::Executable>
compileForCpu(ModuleOp module, const std::string &funcName,
              std::vector<::nova::TensorSpec> inputs,
              std::vector<::nova::TensorSpec> outputs, std::vector<int> aliases);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CPU_CPUJIT_H
