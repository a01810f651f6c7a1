//===- CudaTarget.cpp - the CUDA target ---------------------------------===//

#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/Pipeline.h"
#include "compiler/target/cuda/PtxAssembler.h"
#include "compiler/target/cuda/ParallelPtx.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>
#include <thread>

using namespace mlir;
using namespace mlir::nova;

namespace {

struct GpuConfigureKernels : PassWrapper<GpuConfigureKernels, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuConfigureKernels)
  GpuConfigureKernels() = default;
  GpuConfigureKernels(const GpuConfigureKernels &other) : PassWrapper(other) {}
  explicit GpuConfigureKernels(const ::nova::TargetDesc &t) : fixed(t), hasFixed(true) {}
  StringRef getArgument() const final { return "nova-configure-gpu-kernels"; }
  StringRef getDescription() const final {
    return "Configure each kernel for a GPU (matmuls: the analytic GPU configurator)";
  }
  Option<std::string> targetName{*this, "target", llvm::cl::desc("a built-in GPU target (sm_80, ..., h200)"),
                                 llvm::cl::init("sm_90a")};
  ::nova::TargetDesc fixed;
  bool hasFixed = false;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    ModuleOp kernels = kernelsModule(top);
    if (!kernels)
      return;
    ::nova::TargetDesc target = fixed;
    if (!hasFixed) { // from the option
      target = ::nova::builtin_gpu_target(targetName);
      if (!target.is_gpu()) {
        top.emitError("nova-configure-gpu-kernels: '" + targetName + "' is not a built-in GPU target");
        return signalPassFailure();
      }
    }
    auto precision = top->getAttrOfType<StringAttr>(kMatmulPrecisionAttr);
    const bool bf16 = precision && precision.getValue() == "bf16";
    const bool tf32 = precision && precision.getValue() == "tf32";
    MLIRContext *ctx = &getContext();
    for (auto kernel : kernels.getOps<func::FuncOp>()) {
      Operation *root = kernelRoot(kernel);
      auto generic = dyn_cast_or_null<linalg::GenericOp>(root);
      std::optional<MatmulOperands> m = generic ? matchMatmul(generic) : std::nullopt;
      if (!m) {
        // Until the other GPU kernels exist: one block runs it.
        kernel->setAttr(LoweringConfigAttr::name, LoweringConfigAttr::get(ctx, "serial", 1, {}, {}, {}));
        continue;
      }
      GpuMatmulProblem p;
      p.batch = m->batch();
      p.m = m->M;
      p.n = m->N;
      p.k = m->K;
      Type element = cast<MemRefType>(m->lhs.getType()).getElementType();
      // float32 multiplies in float32 (CUDA cores) unless the step asked
      // for tf32 or bf16 (nova::set_matmul_precision), as PyTorch's default does.
      p.operand = element.isF64()    ? GpuOperand::f64
                  : element.isF16()  ? GpuOperand::f16
                  : element.isBF16() ? GpuOperand::bf16
                  : bf16             ? GpuOperand::bf16
                  : tf32             ? GpuOperand::tf32
                                     : GpuOperand::f32;
      p.lhsTransposed = m->transposeA;
      p.rhsTransposed = m->rhsColumns;
      // The tensor-core decisions (mma.sync or wgmma) are the step
      // planner's (StepMmaMatmul.h, in nova-gpu-threads), which re-plans
      // every matmul it can build; this view is for the rest.
      p.allowWgmma = false;
      p.allowSplitK = false;
      GpuMatmulConfig c = configureGpuMatmul(p, target);
      kernel->setAttr(LoweringConfigAttr::name, toLoweringConfig(c, m->batchRank > 0, ctx));
      SmallVector<Attribute> why;
      for (const std::string &line : c.why)
        why.push_back(StringAttr::get(ctx, line));
      if (!m->prologueInputs.empty())
        why.push_back(StringAttr::get(ctx, "its fused lhs prologue has no GPU kernel yet"));
      kernel->setAttr(kGpuWhyAttr, ArrayAttr::get(ctx, why));
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuConfigureKernels(const ::nova::TargetDesc &target) {
  return std::make_unique<GpuConfigureKernels>(target);
}

void mlir::nova::registerGpuConfigureKernels() { PassRegistration<GpuConfigureKernels>(); }

void mlir::nova::CudaTarget::addBeforeFusionPasses(OpPassManager &pm) const {
  pm.addPass(createGpuBf16Operands(desc));
}

void mlir::nova::CudaTarget::addConfigurePasses(OpPassManager &pm) const {
  pm.addPass(createGpuConfigureKernels(desc));
  pm.addPass(createGpuThreadsConfigure(desc));
  // The kernels nova-gpu-threads made (split parts, side-by-side launches:
  // one per block of layers, alike) deduplicated again.
  pm.addPass(createNovaDedupKernels());
}

std::vector<mlir::nova::Stage> mlir::nova::CudaTarget::codegenStages() const {
  auto threads = [](OpPassManager &pm) {
    pm.addPass(createGpuMapThreads());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  };
  ::nova::TargetDesc target = desc;
  auto gpu = [target](OpPassManager &pm) { pm.addPass(createGpuOutlineKernels(target)); };
  return {{"threads", threads}, {"gpu", gpu}};
}

FailureOr<Artifact> mlir::nova::CudaTarget::emit(ModuleOp kernels, const PipelineOptions &options,
                                                 CompileReport &report, std::string &error) const {
  Stopwatch clock;
  // The kernels in shards, one a CPU (ParallelPtx.h).
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  FailureOr<std::string> ptx = emitPtxInParallel(kernels, desc, threads, error);
  if (failed(ptx))
    return failure();
  // A named string: GCC 12 warns (-Warray-bounds, wrongly) on the literal
  // made a temporary std::string here.
  static const std::string kPtxPhase = "PTX (MLIR to NVVM, LLVM NVPTX)";
  report.add(kPtxPhase, clock.lap());
  report.codegenThreads = threads;
  Artifact artifact;
  artifact.format = "ptx";
  artifact.bytes.assign(ptx->begin(), ptx->end());
  report.objectBytes = artifact.bytes.size();
  std::optional<std::string> ptxas = options.assembleGpuBinary ? findPtxas() : std::nullopt;
  if (!ptxas)
    return artifact;
  std::string why;
  FailureOr<Cubin> cubin = assemblePtx(*ptxas, *ptx, desc.cpu, why);
  report.add("cubin (ptxas " + desc.cpu + ")", clock.lap());
  if (failed(cubin)) {
    // The PTX stays: the driver compiles it at load (and says what it
    // thinks of it). A ptxas older than the PTX ISA lands here too.
    llvm::errs() << "nova: warning: the step's PTX was not assembled into a cubin, so the driver will "
                    "compile it at each load: "
                 << why;
    return artifact;
  }
  artifact.binaryFormat = "cubin";
  artifact.binary = std::move(cubin->bytes);
  report.objectBytes += artifact.binary.size();
  if (explainEnabled()) {
    const PtxasKernelInfo *most = nullptr;
    std::string spills;
    for (const PtxasKernelInfo &k : cubin->kernels) {
      if (!most || k.registers > most->registers)
        most = &k;
      if (k.spillStoreBytes || k.spillLoadBytes)
        spills += " " + k.name + " (" + std::to_string(k.spillStoreBytes) + " B stored, " +
                  std::to_string(k.spillLoadBytes) + " B loaded)";
    }
    std::string line = "  cubin for " + desc.cpu + " by " + *ptxas + ": " + std::to_string(artifact.binary.size()) +
                       " bytes, " + std::to_string(cubin->kernels.size()) + " kernels";
    if (most)
      line += ", most registers " + std::to_string(most->registers) + " (" + most->name + ")";
    line += spills.empty() ? ", no spills\n" : ", spills:" + spills + "\n";
    for (const std::string &note : cubin->performanceNotes)
      line += "    ptxas: " + note + "\n";
    report.kernelLines += line;
  }
  return artifact;
}
