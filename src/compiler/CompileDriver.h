//===- CompileDriver.h - a traced step → a runnable executable ---*- C++ -*-===//
//
// The compiler's one entry point after tracing: key the traced module, find
// it in the on-disk cache or compile it (shared stages, launch plan, the
// target's codegen), publish it, load it with the runtime. The front end's
// builder calls compileStep(); ahead-of-time builds call
// compileToDescription() for a named target.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_COMPILEDRIVER_H
#define NOVA_COMPILER_COMPILEDRIVER_H

#include "compiler/Pipeline.h"
#include "nova/detail/builder.hpp"
#include "nova/executable_desc.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace mlir::nova {

/// What the traced function takes and returns, in the runtime's terms.
struct StepSignature {
  std::string name;
  std::vector<::nova::TensorSpec> inputs, outputs;
  /// One per output: the input it overwrites in place, or -1.
  std::vector<int> aliases;
};

/// The compiler's own build: the LLVM version and a hash of libnova.so.
/// Part of every key, so a rebuilt compiler never reuses another's code.
const std::string &compilerBuild();

/// 128 bits: the traced module's structure (ops, operand numbering, types,
/// attributes; never locations or pointers), the target's hash and the
/// compiler version.
std::array<uint64_t, 2> stepKey(ModuleOp traced, const ::nova::TargetDesc &target);

/// Compiles the traced module (which it transforms in place) for `target`.
/// Throws ::nova::CompileError with the compiler's diagnostics. For a GPU
/// target, `gpuKernels` (if given) receives the kernels as GPU IR before
/// PTX: what the emulator runs.
::nova::ExecutableDesc compileToDescription(ModuleOp traced, const StepSignature &signature,
                                            const ::nova::TargetDesc &target,
                                            const PipelineOptions &options,
                                            OwningOpRef<ModuleOp> *gpuKernels = nullptr);

/// The executable for a traced step: interpreted, loaded from the disk
/// cache, or compiled (and published). Throws ::nova::CompileError.
std::shared_ptr<::nova::Executable> compileStep(OwningOpRef<ModuleOp> traced,
                                                const StepSignature &signature,
                                                ::nova::ExecMode mode);

} // namespace mlir::nova

#endif // NOVA_COMPILER_COMPILEDRIVER_H
