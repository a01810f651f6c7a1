//===- ShareRowStatistics.cpp - the nova-share-row-statistics pass -*- C++ -*-===//
//
// Pairs each backward nova.cross_entropy_kernel with the forward of the
// same logits and labels earlier in its block: the forward writes the
// rows' max and sum of exponentials as a second result, the backward reads
// them (see Passes.td). A backward with no such forward (a gradient whose
// loss value is never used, so the forward was dropped) keeps computing
// them itself; so does every backward of a step traced with
// NOVA_ROW_STATS=0 (the module's nova.row_stats), to measure the pass.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVASHAREROWSTATISTICS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;
using mlir::nova::CrossEntropyKernelOp;

namespace {

/// A cross-entropy kernel op on tensors with these inputs and inits
/// (`backward` as given), its results typed like the inits.
CrossEntropyKernelOp build(OpBuilder &b, Location loc, ValueRange inputs, ValueRange inits, bool backward) {
  OperationState state(loc, CrossEntropyKernelOp::getOperationName());
  state.addOperands(inputs);
  state.addOperands(inits);
  state.addTypes(inits.getTypes());
  state.addAttribute(CrossEntropyKernelOp::getOperandSegmentSizeAttr(),
                     b.getDenseI32ArrayAttr({static_cast<int32_t>(inputs.size()), static_cast<int32_t>(inits.size())}));
  if (backward)
    state.addAttribute("backward", b.getUnitAttr());
  return cast<CrossEntropyKernelOp>(b.create(state));
}

/// `to` takes `from`'s other attributes (a scope, a name): all but the
/// operand segments and `backward`, which `build` set.
void copyOtherAttributes(Operation *from, Operation *to) {
  for (NamedAttribute a : from->getAttrs())
    if (a.getName() != CrossEntropyKernelOp::getOperandSegmentSizeAttr() && a.getName() != "backward")
      to->setAttr(a.getName(), a.getValue());
}

/// The forward of `backward`'s logits and labels before it in its block,
/// given its stats (made here if it had none); null if there is none.
CrossEntropyKernelOp forwardWithStats(CrossEntropyKernelOp backward) {
  Value logits = backward.getInputs()[0], labels = backward.getInputs()[1];
  CrossEntropyKernelOp forward;
  for (Operation *user : logits.getUsers()) {
    auto op = dyn_cast<CrossEntropyKernelOp>(user);
    if (op && !op.getBackward() && op.getInputs()[1] == labels && op->getBlock() == backward->getBlock() &&
        op->isBeforeInBlock(backward) && op->getNumResults() > 0) {
      forward = op;
      break;
    }
  }
  if (!forward || forward.getStats())
    return forward;
  OpBuilder b(forward);
  Location loc = forward.getLoc();
  auto x = cast<RankedTensorType>(logits.getType());
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(2);
  Value stats = b.create<tensor::EmptyOp>(loc, shape, x.getElementType());
  CrossEntropyKernelOp paired = build(b, loc, forward.getInputs(), {forward.getInit(), stats}, false);
  copyOtherAttributes(forward, paired);
  forward->getResult(0).replaceAllUsesWith(paired->getResult(0));
  forward->erase();
  return paired;
}

struct NovaShareRowStatistics : mlir::nova::impl::NovaShareRowStatisticsBase<NovaShareRowStatistics> {
  void runOnOperation() override {
    auto enabled = getOperation()->getAttrOfType<BoolAttr>(mlir::nova::kRowStatsAttr);
    if (enabled && !enabled.getValue())
      return; // NOVA_ROW_STATS=0
    SmallVector<CrossEntropyKernelOp> backwards;
    getOperation().walk([&](CrossEntropyKernelOp op) {
      if (op.getBackward() && !op.getStats() && op->getNumResults() == 1)
        backwards.push_back(op);
    });
    for (CrossEntropyKernelOp backward : backwards) {
      CrossEntropyKernelOp forward = forwardWithStats(backward);
      if (!forward)
        continue;
      OpBuilder b(backward);
      SmallVector<Value> inputs(backward.getInputs());
      inputs.push_back(forward->getResult(1));
      CrossEntropyKernelOp reading = build(b, backward.getLoc(), inputs, backward.getInits(), true);
      copyOtherAttributes(backward, reading);
      backward->getResult(0).replaceAllUsesWith(reading->getResult(0));
      backward->erase();
    }
  }
};

} // namespace
