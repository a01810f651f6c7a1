//===- Pipeline.h - the whole compiler, in order -----------------*- C++ -*-===//

#ifndef NOVA_COMPILER_PIPELINE_H
#define NOVA_COMPILER_PIPELINE_H

#include "compiler/target/Target.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::nova {

struct PipelineOptions {
  /// If set, the IR after each stage is written to <dir>/<NN>-<stage>.mlir.
  std::string dumpDir;
  /// Run the verifier after every pass (always on in tests and debug builds).
  bool verifyEachPass = true;
  /// Assemble a GPU step's PTX into machine code for its chip when ptxas
  /// is here (PtxAssembler.h); off for steps that only the emulator runs.
  bool assembleGpuBinary = true;
};

/// Options from the environment: NOVA_DUMP_IR=<dir>.
PipelineOptions pipelineOptionsFromEnv();

/// `options` for compiling the step `step`: its dumps go to <dir>/<step>/,
/// so that a program's later steps (an evaluation step after the training
/// step) do not overwrite them.
PipelineOptions pipelineOptionsForStep(PipelineOptions options, llvm::StringRef step);

/// Stage "graph": autodiff and clean-up, still in the nova dialect (what the
/// interpreter runs). On failure the diagnostics went to the context.
LogicalResult runGraphStage(ModuleOp module, const PipelineOptions &options);

/// The shared stages after "graph", up to kernels: linalg, bufferized,
/// kernels (outlined, deduplicated, configured for `target`, distributed).
/// Afterwards the step is a launch plan and `module @kernels` holds the kernels.
LogicalResult runKernelStages(ModuleOp module, const Target &target,
                              const PipelineOptions &options);

/// The target's codegen stages, on the kernels module alone.
LogicalResult runCodegenStages(ModuleOp kernels, const Target &target,
                               const PipelineOptions &options);

/// nova-opt pipelines: `nova-lower-to-kernels` (every shared stage) and
/// `nova-cpu-codegen` (the CPU tail, nested on the kernels module), for the
/// host target.
void registerNovaPipelines();

} // namespace mlir::nova

#endif // NOVA_COMPILER_PIPELINE_H
