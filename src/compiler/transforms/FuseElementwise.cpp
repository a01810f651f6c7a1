//===- FuseElementwise.cpp - the nova-fuse-elementwise pass ------*- C++ -*-===//
//
// linalg's producer-consumer fusion with one rule added: fuse only where the
// consumer reads each element of the producer's result once (its indexing map
// for that operand is a permutation of all loops). Otherwise the producer's
// arithmetic would be repeated for every iteration that reads the element —
// N times for a matmul operand.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAFUSEELEMENTWISE
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

bool readsEachElementOnce(OpOperand *fused) {
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  if (!consumer)
    return false;
  return consumer.getMatchingIndexingMap(fused).isPermutation();
}

struct NovaFuseElementwise
    : mlir::nova::impl::NovaFuseElementwiseBase<NovaFuseElementwise> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, readsEachElementOnce);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
