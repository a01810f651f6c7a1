//===- Pipeline.h - the whole lowering, in order -----------------*- C++ -*-===//

#ifndef NOVA_COMPILER_PIPELINE_H
#define NOVA_COMPILER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::nova {

struct PipelineOptions {
  /// If set, the IR after each stage is written to <dir>/<NN>-<stage>.mlir.
  std::string dumpDir;
  /// Run the verifier after every pass (always on in tests and debug builds).
  bool verifyEachPass = true;
};

/// Options from the environment: NOVA_DUMP_IR=<dir>.
PipelineOptions pipelineOptionsFromEnv();

/// nova IR → LLVM dialect, ready for the CPU JIT. On failure the diagnostics
/// have been emitted on the module's context.
LogicalResult lowerToLLVM(ModuleOp module, const PipelineOptions &options);

/// Registers `nova-lower-to-llvm` (the same stages) as a nova-opt pipeline.
void registerNovaPipelines();

} // namespace mlir::nova

#endif // NOVA_COMPILER_PIPELINE_H
