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

/// Stage "graph": autodiff and clean-up, still in the nova dialect (what the
/// interpreter runs). On failure the diagnostics went to the context.
LogicalResult runGraphStage(ModuleOp module, const PipelineOptions &options);

/// The stages after "graph": nova IR → LLVM dialect, ready for the CPU JIT.
LogicalResult lowerToLLVM(ModuleOp module, const PipelineOptions &options);

/// Registers `nova-lower-to-llvm` (the same stages) as a nova-opt pipeline.
void registerNovaPipelines();

} // namespace mlir::nova

#endif // NOVA_COMPILER_PIPELINE_H
