//===- FuseElementwise.cpp - the nova-fuse-elementwise pass ------*- C++ -*-===//
//
// linalg's producer-consumer fusion with one rule added: fuse only where the
// consumer reads each element of the producer's result once (its indexing map
// for that operand is a permutation of all loops). Otherwise the producer's
// arithmetic would be repeated for every iteration that reads the element —
// N times for a matmul operand. And only into the producer's one consumer
// (besides the step's return).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
  // A use by the step's return is no clone: linalg keeps that result as
  // one more output of the fused op (AdamW's new m and v are returned and
  // read by the parameter update: one pass computes all three).
  Operation *producer = fused->get().getDefiningOp();
  // A producer that only moves its input (a broadcast: its body yields a
  // block argument) costs nothing to clone into each consumer, and its own
  // input is read through the clone's indexing map instead of being
  // materialized at full size (the grad-clip scale broadcast to every
  // gradient's shape).
  if (auto generic = dyn_cast_or_null<linalg::GenericOp>(producer))
    if (generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
        generic.getBody()->getOperations().size() == 1 &&
        generic.getBody()->getTerminator()->getOperand(0) == generic.getBody()->getArgument(0))
      return true;
  return producer && llvm::all_of(producer->getUsers(), [&](Operation *user) {
           return user == fused->getOwner() || isa<func::ReturnOp>(user);
         });
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
