//===- TestMmaMatmul.cpp - nova-opt entry to the GPU matmul generator ----===//
//
// --nova-test-mma-matmul="m=256 n=256 k=256 type=bf16 target=sm_80" adds a
// gpu.module @nova_kernels with the mma.sync matmul kernel @matmul to the
// module (with wgmma=true on sm_90a, the TMA + wgmma kernel where the
// configurator picks it): the configurator's decision for that target, or the block given
// (block-m, block-n, block-k, warps-m, warps-n, stages; all or none);
// transpose-a / transpose-b; an epilogue (scale, bias, activation =
// relu | gelu, residual; with a given block, persistent-blocks: a
// persistent wgmma kernel of that many blocks, and cluster-m: in clusters
// of that many CTAs along M). Lit tests check its IR and, through
// gpu-lower-to-nvvm-pipeline, its PTX.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuPasses.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/WgmmaMatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "nova/target.hpp"

#include <algorithm>

using namespace mlir;
using namespace mlir::nova;

namespace {

struct TestMmaMatmul : PassWrapper<TestMmaMatmul, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestMmaMatmul)
  TestMmaMatmul() = default;
  TestMmaMatmul(const TestMmaMatmul &other) : PassWrapper(other) {}
  StringRef getArgument() const final { return "nova-test-mma-matmul"; }
  StringRef getDescription() const final { return "Add the mma.sync matmul kernel for the given shape"; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect, vector::VectorDialect, LLVM::LLVMDialect,
                    arith::ArithDialect, memref::MemRefDialect, scf::SCFDialect>();
  }

  Option<int64_t> m{*this, "m", llvm::cl::init(256)}, n{*this, "n", llvm::cl::init(256)},
      k{*this, "k", llvm::cl::init(256)};
  Option<std::string> type{*this, "type", llvm::cl::desc("f16, bf16, tf32 or 3xtf32"), llvm::cl::init("f16")};
  Option<std::string> target{*this, "target", llvm::cl::desc("a NOVA_TARGET GPU name"), llvm::cl::init("sm_80")};
  Option<int64_t> blockM{*this, "block-m", llvm::cl::init(0)}, blockN{*this, "block-n", llvm::cl::init(0)},
      blockK{*this, "block-k", llvm::cl::init(0)}, warpsM{*this, "warps-m", llvm::cl::init(0)},
      warpsN{*this, "warps-n", llvm::cl::init(0)}, stages{*this, "stages", llvm::cl::init(0)},
      splitK{*this, "split-k", llvm::cl::desc("parts of K (mma.sync; the configurator's when 0)"),
             llvm::cl::init(0)},
      persistentBlocks{*this, "persistent-blocks",
                       llvm::cl::desc("wgmma: blocks looping over the tiles (with a given block; else the "
                                      "configurator's)"),
                       llvm::cl::init(0)},
      clusterM{*this, "cluster-m", llvm::cl::desc("wgmma, persistent: CTAs a cluster along M (B multicast)"),
               llvm::cl::init(1)};
  Option<bool> transposeA{*this, "transpose-a", llvm::cl::init(false)},
      transposeB{*this, "transpose-b", llvm::cl::init(false)}, bias{*this, "bias", llvm::cl::init(false)},
      residual{*this, "residual", llvm::cl::init(false)},
      wgmma{*this, "wgmma", llvm::cl::desc("allow the wgmma kernel (sm_90a)"), llvm::cl::init(false)};
  Option<std::string> activation{*this, "activation", llvm::cl::desc("none, relu or gelu"), llvm::cl::init("none")};
  Option<double> scale{*this, "scale", llvm::cl::init(1.0)};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    GpuMatmulProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.operand = type == "bf16"     ? GpuOperand::bf16
                : type == "tf32"   ? GpuOperand::tf32
                : type == "3xtf32" ? GpuOperand::tf32x3
                                   : GpuOperand::f16;
    p.allowWgmma = wgmma;
    p.allowSplitK = false;
    p.lhsTransposed = transposeA;
    p.rhsTransposed = transposeB;
    MmaEpilogue epilogue;
    epilogue.scale = scale;
    epilogue.bias = bias;
    epilogue.residual = residual;
    epilogue.activation = activation == "relu"   ? MmaEpilogue::Activation::relu
                          : activation == "gelu" ? MmaEpilogue::Activation::gelu_tanh
                                                 : MmaEpilogue::Activation::none;
    ::nova::TargetDesc desc = ::nova::builtin_gpu_target(target);
    if (!desc.is_gpu()) {
      module.emitError("nova-test-mma-matmul: '" + target + "' is not a built-in GPU target");
      return signalPassFailure();
    }
    GpuMatmulConfig c = configureGpuMatmul(p, desc);
    if (blockM) {
      c.blockM = blockM;
      c.blockN = blockN;
      c.blockK = blockK;
      c.warpsM = warpsM;
      c.warpsN = warpsN;
      c.warpM = c.kind == GpuMmaKind::wgmma ? 64 : blockM / std::max<int64_t>(1, warpsM);
      c.warpN = blockN / std::max<int64_t>(1, warpsN);
      c.mmaN = c.kind == GpuMmaKind::wgmma ? blockN : c.mmaN;
      c.stages = stages;
      c.threads = c.kind == GpuMmaKind::wgmma ? wgmmaBlockThreads(warpsM) : 32 * warpsM * warpsN;
      c.tiles = ((p.m + blockM - 1) / blockM) * ((p.n + blockN - 1) / blockN);
      c.persistentBlocks = persistentBlocks;
      c.clusterM = clusterM;
    }
    if (splitK)
      c.splitK = splitK;
    gpu::GPUModuleOp kernels = addKernelsModule(module);
    std::string error;
    if (c.kind == GpuMmaKind::wgmma ? failed(buildWgmmaMatmulKernel(kernels, "matmul", p, c, error, {}, epilogue))
                                    : failed(buildMmaSyncMatmulKernel(kernels, "matmul", p, c, error, {}, epilogue))) {
      module.emitError(error);
      return signalPassFailure();
    }
  }
};

} // namespace

void mlir::nova::registerNovaGpuPasses() {
  PassRegistration<TestMmaMatmul>();
  registerGpuInlineMath();
  registerGpuConfigureKernels();
  registerGpuBf16Operands();
  registerGpuThreadsPasses();
}
