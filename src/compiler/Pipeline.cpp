//===- Pipeline.cpp - every stage of the compiler, in order ------*- C++ -*-===//
//
// Read this file to know the compiler. Each stage is a list of passes; the IR
// after each stage can be dumped (NOVA_DUMP_IR=<dir>, a folder per step) and the verifier runs
// after every pass.
//
// Shared by every target:
//   1 nova        the traced step, as built by the front end
//   2 graph       nova.gradient expanded (autodiff); dead code removed
//   3 linalg      nova → linalg on tensors; elementwise chains fused where
//                 each element is read once
//   4 bufferized  memref in/out signature; one-shot bufferization
//   5 kernels     transposes that only feed matmuls become views; every
//                 compute op outlined into a kernel of `module @kernels`
//                 (the step becomes a launch plan: allocs and nova.launch);
//                 identical kernels merged; data-parallel gradient sums
//                 grouped into buckets started after their last producer
//                 and waited for before their first reader; a kernel's
//                 own allocations freed
//                 in it; each configured by the target (#nova.lowering_config)
//                 and split over workgroups
// Then the compile driver (CompileDriver.cpp) takes the launch plan out of
// the step (LaunchPlan.cpp) and the target's codegen runs on the kernels:
//   CPU  6 loops  matmul register kernels; linalg → loops → cf
//        7 llvm   → LLVM dialect, bare-pointer memrefs, runtime entry points
//        then LLVM -O3 per kernel, in parallel, linked into one shared object
//
// The reference interpreter runs on the IR after stage 2.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipeline.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace {

using mlir::nova::Stage;

void addGraphStage(OpPassManager &pm) {
  pm.addPass(mlir::nova::createNovaAutodiff());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addLinalgStage(OpPassManager &pm, const mlir::nova::Target &target) {
  // Before lowering (on the nova ops, after the graph stage's CSE).
  pm.addPass(mlir::nova::createNovaRematerialize({.attention = target.recomputesAttention()}));
  pm.addPass(mlir::nova::createNovaLowerToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(mlir::nova::createNovaShareRowStatistics());
  target.addBeforeFusionPasses(pm);
  pm.addPass(mlir::nova::createNovaFuseElementwise());
  pm.addPass(mlir::nova::createNovaBf16SavedActivations());
  if (target.fusesMatmulPrologues())
    pm.addPass(mlir::nova::createNovaFuseMatmulPrologue());
  pm.addPass(mlir::nova::createNovaMergeDisjointSums());
  pm.addPass(mlir::nova::createNovaReuseDyingInputs());
  // No CSE here: it would merge equal tensor.empty ops, and empty-tensor
  // elimination would then give two results one destination buffer (seen:
  // the gradient of a / b wrote both cotangents into the first output).
}

void addBufferizeStage(OpPassManager &pm) {
  pm.addPass(mlir::nova::createNovaDestinationPassing());
  bufferization::OneShotBufferizationOptions options;
  options.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  // Lets results be computed straight into the caller's output buffers
  // instead of a temporary that is then copied.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createOneShotBufferizePass(options));
  pm.addPass(createCanonicalizerPass());
  // No deallocation at the step's level: its allocations become arena
  // buffers placed by the launch plan from the launches that use them.
  // (MLIR's deallocation simplification was also quadratic in the step's
  // size: 1.3 s of a 16-layer GPT's compile.)
}

void addKernelStage(OpPassManager &pm, const mlir::nova::Target &target) {
  pm.addPass(mlir::nova::createNovaFoldTransposes());
  pm.addPass(mlir::nova::createNovaOutlineKernels());
  pm.addPass(mlir::nova::createNovaDedupKernels());
  // Data parallel: each bucket of gradients summed over the ranks while the
  // backward goes on (the launch order is final from here).
  pm.addPass(mlir::nova::createNovaBucketAllReduce());
  // Buffers a kernel allocates for itself (inside its loops) are freed in it.
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm.nest<ModuleOp>(), dealloc);
  target.addConfigurePasses(pm);
}

std::vector<Stage> kernelStages(const mlir::nova::Target &target) {
  return {
      {"linalg", [&target](OpPassManager &pm) { addLinalgStage(pm, target); }},
      {"bufferized", addBufferizeStage},
      {"kernels", [&target](OpPassManager &pm) { addKernelStage(pm, target); }},
  };
}

void dump(ModuleOp module, const std::string &dir, int index, StringRef name) {
  llvm::sys::fs::create_directories(dir);
  std::string path = dir + "/" + std::to_string(index) + "-" + name.str() + ".mlir";
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    module.print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
}

/// Runs `stages` on `module`, numbering dumps from `firstIndex`.
LogicalResult runStages(ModuleOp module, const std::vector<Stage> &stages,
                        const mlir::nova::PipelineOptions &options, int firstIndex) {
  for (size_t i = 0; i < stages.size(); ++i) {
    PassManager pm(module.getContext());
    pm.enableVerifier(options.verifyEachPass);
    stages[i].addPasses(pm);
    if (failed(pm.run(module)))
      return failure();
    if (!options.dumpDir.empty())
      dump(module, options.dumpDir, firstIndex + static_cast<int>(i), stages[i].name);
  }
  return success();
}

} // namespace

mlir::nova::PipelineOptions mlir::nova::pipelineOptionsFromEnv() {
  PipelineOptions options;
  if (const char *dir = std::getenv("NOVA_DUMP_IR"))
    options.dumpDir = dir;
  return options;
}

mlir::nova::PipelineOptions mlir::nova::pipelineOptionsForStep(PipelineOptions options, StringRef step) {
  if (!options.dumpDir.empty()) // (two appends: GCC 12 warned, wrongly, of an overflow in "/" + std::string)
    options.dumpDir.append("/").append(step.data(), step.size());
  return options;
}

LogicalResult mlir::nova::runGraphStage(ModuleOp module, const PipelineOptions &options) {
  if (!options.dumpDir.empty())
    dump(module, options.dumpDir, 1, "nova");
  return runStages(module, {{"graph", addGraphStage}}, options, 2);
}

LogicalResult mlir::nova::runKernelStages(ModuleOp module, const Target &target,
                                          const PipelineOptions &options) {
  return runStages(module, kernelStages(target), options, 3);
}

LogicalResult mlir::nova::runCodegenStages(ModuleOp kernels, const Target &target,
                                           const PipelineOptions &options) {
  return runStages(kernels, target.codegenStages(), options, 6);
}

void mlir::nova::registerNovaPipelines() {
  // nova-opt compiles for this machine.
  static std::unique_ptr<Target> host = makeTarget(::nova::target_from_env());
  PassPipelineRegistration<>(
      "nova-lower-to-kernels", "Every shared stage: graph, linalg, bufferized, kernels",
      [](OpPassManager &pm) {
        addGraphStage(pm);
        for (const Stage &stage : kernelStages(*host))
          stage.addPasses(pm);
      });
  PassPipelineRegistration<>(
      "nova-cpu-codegen", "The CPU tail (loops, llvm), on the nested module @kernels",
      [](OpPassManager &pm) {
        OpPassManager &kernels = pm.nest<ModuleOp>();
        for (const Stage &stage : host->codegenStages())
          stage.addPasses(kernels);
      });
}
