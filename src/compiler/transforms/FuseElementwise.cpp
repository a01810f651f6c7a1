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
  if (!consumer.getMatchingIndexingMap(fused).isPermutation())
    return false;
  // Only into the producer's one consumer: fusing a value used by several
  // ops clones its computation into each of them (and its own producers
  // into each clone), which recomputes it and, over a training step's
  // shared subgraphs, makes the pass quadratic in the graph.
  Operation *producer = fused->get().getDefiningOp();
  return producer && llvm::all_of(producer->getUsers(),
                                  [&](Operation *user) { return user == fused->getOwner(); });
}

struct NovaFuseElementwise
    : mlir::nova::impl::NovaFuseElementwiseBase<NovaFuseElementwise> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, readsEachElementOnce);
    // A step is one long block: region simplification (block merging) costs
    // most of the time and finds nothing to do there.
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
