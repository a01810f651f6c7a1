//===- Pipeline.cpp - every pass of the CPU lowering, in order ---*- C++ -*-===//
//
// Read this file to know the compiler. Each stage is a list of passes; the IR
// after each stage can be dumped (NOVA_DUMP_IR=<dir>) and the verifier runs
// after every pass.
//
//   1 nova        the traced step, as built by the front end
//   2 graph       nova.gradient expanded (autodiff); dead code removed
//   3 linalg      nova → linalg on tensors; elementwise chains fused where
//                 each element is read once
//   4 bufferized  memref in/out signature; one-shot bufferization; each
//                 temporary freed right after its last use
//   5 loops       matmuls → register-blocked vector kernels whose column
//                 tiles run as tasks on the async runtime's threads; the
//                 rest of linalg → loops → cf; strided metadata expanded
//   6 llvm        everything → LLVM dialect, ready for the JIT
//
// The reference interpreter runs on the IR after stage 2.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipeline.h"
#include "compiler/target/cpu/CpuTarget.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/AsyncToLLVM/AsyncToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Async/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <functional>

using namespace mlir;

namespace {

struct Stage {
  const char *name;
  std::function<void(OpPassManager &)> addPasses;
};

void addGraphStage(OpPassManager &pm) {
  pm.addPass(nova::createNovaAutodiff());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addLinalgStage(OpPassManager &pm) {
  pm.addPass(nova::createNovaLowerToLinalg());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(nova::createNovaFuseElementwise());
  // No CSE here: it would merge equal tensor.empty ops, and empty-tensor
  // elimination would then give two results one destination buffer (seen:
  // the gradient of a / b wrote both cotangents into the first output).
}

void addBufferizeStage(OpPassManager &pm) {
  pm.addPass(nova::createNovaDestinationPassing());
  bufferization::OneShotBufferizationOptions options;
  options.setFunctionBoundaryTypeConversion(
      bufferization::LayoutMapOption::IdentityLayoutMap);
  // Lets results be computed straight into the caller's output buffers
  // instead of a temporary that is then copied.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createOneShotBufferizePass(options));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(nova::createNovaEarlyDealloc());
}

void addLoopsStage(OpPassManager &pm) {
  nova::NovaVectorizeMatmulOptions matmul;
  matmul.vectorBits = nova::hostVectorBits();
  pm.addPass(nova::createNovaVectorizeMatmul(matmul));
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // The matmul kernels' parallel column loops become tasks on MLIR's async
  // runtime thread pool, one block of iterations per core. (Making every
  // elementwise loop parallel too was tried: compile time grew 7x and the
  // GPT step got slower, with a dispatch per small loop.)
  int32_t threads = static_cast<int32_t>(nova::hostThreads());
  if (threads > 1) {
    pm.addPass(createAsyncParallelForPass(/*asyncDispatch=*/true, threads, /*minTaskSize=*/1));
    pm.addPass(createAsyncToAsyncRuntimePass());
    pm.addPass(createAsyncRuntimeRefCountingPass());
    pm.addPass(createAsyncRuntimeRefCountingOptPass());
  }
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
}

void addLLVMStage(OpPassManager &pm) {
  // f32 transcendentals as inline polynomials; then math ops with an LLVM
  // intrinsic; the rest (f64 tanh, erf) call libm.
  pm.addPass(nova::createNovaApproximateMath());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertAsyncToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

const std::vector<Stage> &stages() {
  static const std::vector<Stage> all = {
      {"graph", addGraphStage},
      {"linalg", addLinalgStage},
      {"bufferized", addBufferizeStage},
      {"loops", addLoopsStage},
      {"llvm", addLLVMStage},
  };
  return all;
}

void dump(ModuleOp module, const std::string &dir, int index, StringRef name) {
  llvm::sys::fs::create_directories(dir);
  std::string path = dir + "/" + std::to_string(index) + "-" + name.str() + ".mlir";
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    module.print(os);
}

} // namespace

mlir::nova::PipelineOptions mlir::nova::pipelineOptionsFromEnv() {
  PipelineOptions options;
  if (const char *dir = std::getenv("NOVA_DUMP_IR"))
    options.dumpDir = dir;
  return options;
}

static LogicalResult runStages(ModuleOp module, const nova::PipelineOptions &options,
                               size_t first, size_t last) {
  if (first == 0 && !options.dumpDir.empty())
    dump(module, options.dumpDir, 1, "nova");
  for (size_t i = first; i < last; ++i) {
    const Stage &stage = stages()[i];
    PassManager pm(module.getContext());
    pm.enableVerifier(options.verifyEachPass);
    stage.addPasses(pm);
    if (failed(pm.run(module)))
      return failure();
    if (!options.dumpDir.empty())
      dump(module, options.dumpDir, static_cast<int>(i) + 2, stage.name);
  }
  return success();
}

LogicalResult mlir::nova::runGraphStage(ModuleOp module, const PipelineOptions &options) {
  return runStages(module, options, 0, 1);
}

LogicalResult mlir::nova::lowerToLLVM(ModuleOp module, const PipelineOptions &options) {
  return runStages(module, options, 1, stages().size());
}

void mlir::nova::registerNovaPipelines() {
  PassPipelineRegistration<>(
      "nova-lower-to-llvm", "Every stage of Nova's CPU pipeline, in order",
      [](OpPassManager &pm) {
        for (const Stage &stage : stages())
          stage.addPasses(pm);
      });
}
