//===- ConfigureKernels.cpp - the nova-configure-kernels pass ----*- C++ -*-===//
//
// Writes each kernel's #nova.lowering_config, computed by the target's
// configurator from the kernel's root op and the target facts given as this
// pass's options. Kernels are deduplicated first, so each distinct kernel is
// configured once, and the decision is a pure function of the kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuConfigurator.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVACONFIGUREKERNELS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct NovaConfigureKernels : mlir::nova::impl::NovaConfigureKernelsBase<NovaConfigureKernels> {
  using NovaConfigureKernelsBase::NovaConfigureKernelsBase;

  void runOnOperation() override {
    ModuleOp kernels = nova::kernelsModule(getOperation());
    if (!kernels)
      return;
    nova::CpuFacts facts{vectorBits, vectorRegisters, cores, l1dBytes, l2Bytes, fmaUnits, fmaLatency};
    // bf16 matmuls where the user asked for them and the target multiplies
    // bf16 (AMX, else AVX512-BF16 with 512-bit vectors); elsewhere they stay
    // float32.
    auto precision = getOperation()->getAttrOfType<StringAttr>(nova::kMatmulPrecisionAttr);
    bool bf16 = precision && precision.getValue() == "bf16";
    facts.amxBf16Matmul = amxBf16 && bf16;
    facts.dotBf16Matmul = !amxBf16 && avx512Bf16 && vectorBits >= 512 && bf16;
    for (auto kernel : kernels.getOps<func::FuncOp>()) {
      Operation *root = nova::kernelRoot(kernel);
      if (!root) {
        kernel.emitError("nova-configure-kernels: kernel has no compute op");
        return signalPassFailure();
      }
      nova::LoweringConfigAttr config = nova::configureCpuKernel(root, facts);
      // Ops beside the root (a matmul's initializing fill and epilogue) are
      // split over workgroups only by the matmul lowering; anything else
      // with several compute ops runs whole.
      bool single = llvm::all_of(kernel.front().without_terminator(), [&](Operation &op) {
        return &op == root || !isa<linalg::LinalgOp>(op);
      });
      if (!single && !config.isMatmul())
        config = nova::LoweringConfigAttr::get(&getContext(), "loops", 1,
                                               SmallVector<int64_t>(config.getTile().size(), 0), {}, {});
      kernel->setAttr(nova::LoweringConfigAttr::name, config);
      // What it computes, while its op is still whole (distribution tiles it).
      nova::recordDescription(kernel);
    }
  }
};

} // namespace
