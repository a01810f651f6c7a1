//===- DropUnstoredResults.cpp - the nova-drop-unstored-results pass -===//
//
// A configured matmul kernel whose register tiles all go through their
// epilogue in one slab (MatmulKernel.h: resultNeverStored; the vector-FMA
// and the AVX512-BF16 kernels, not AMX's tiles) never reads or
// writes its result buffer: the sums live in registers until the epilogue
// stores what it computes from them. Such a buffer is still a kernel
// parameter and an arena buffer of the plan (16 MiB for the medium GPT's
// MLP, live beside the saved activation the GELU gradient reads). This pass
// takes it out of both: the kernel gets a placeholder allocation in its
// place (`nova.unstored`, which nova-vectorize-matmul erases once nothing
// uses it, and refuses to keep), each launch loses the operand, and the
// step's allocation goes.
//
// Only when every launch of the kernel passes the buffer as an allocation
// that nothing else in the step uses (kernels are shared between layers by
// nova-dedup-kernels: all of them must agree). `nova.in_place = false`
// (NOVA_IN_PLACE=0) keeps every result buffer. The GPU's matmul kernels
// with a fused epilogue never store their product either: nova-gpu-threads
// drops theirs by the same dropUnstoredResult (MatmulKernel.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVADROPUNSTOREDRESULTS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// The kernel argument that is its matmul's result and is never stored, or
/// null.
BlockArgument unstoredResult(func::FuncOp kernel) {
  auto config = nova::loweringConfig(kernel);
  if (!config || !config.isMatmul() || config.isAmxMatmul())
    return {};
  auto op = dyn_cast_or_null<linalg::GenericOp>(nova::kernelRoot(kernel));
  std::optional<nova::MatmulOperands> m = op ? nova::matchMatmul(op) : std::nullopt;
  if (!m)
    return {};
  auto [fill, epilogue] = nova::matmulNeighbours(*m);
  // The AVX512-BF16 kernel (Bf16Matmul.cpp) starts from zeros only with the
  // zero fill folded in, and runs the rows below its last whole 32-row
  // block as a float32 copy of the generic, which stores.
  if (config.getKind() == "bf16_matmul" && (!fill || m->M % 32 != 0))
    return {};
  ArrayRef<int64_t> reg = config.getRegisterTile();
  int64_t kc = config.getCacheTile().empty() ? std::max<int64_t>(m->K, 1) : config.getCacheTile()[0];
  if (reg.size() != 2 || !nova::resultNeverStored(*m, reg[1], kc, fill, epilogue))
    return {};
  return nova::resultArgumentOnlyEpilogueReads(kernel, *m, fill, epilogue);
}

struct NovaDropUnstoredResults : mlir::nova::impl::NovaDropUnstoredResultsBase<NovaDropUnstoredResults> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto inPlace = top->getAttrOfType<BoolAttr>(nova::kInPlaceAttr);
    if (inPlace && !inPlace.getValue())
      return; // NOVA_IN_PLACE=0
    ModuleOp kernels = nova::kernelsModule(top);
    if (!kernels)
      return;
    llvm::DenseMap<StringAttr, SmallVector<nova::LaunchOp>> launches;
    top.walk([&](nova::LaunchOp launch) { launches[launch.getKernelAttr().getLeafReference()].push_back(launch); });
    for (auto kernel : kernels.getOps<func::FuncOp>()) {
      BlockArgument arg = unstoredResult(kernel);
      if (!arg)
        continue;
      auto it = launches.find(kernel.getSymNameAttr());
      if (it != launches.end())
        nova::dropUnstoredResult(kernel, arg, it->second);
    }
  }
};

} // namespace
