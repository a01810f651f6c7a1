//===- FuseElementwise.cpp - the nova-fuse-elementwise pass ------*- C++ -*-===//
//
// linalg's producer-consumer fusion with one rule added: fuse only where the
// consumer reads each element of the producer's result once (its indexing map
// for that operand is a permutation of all loops). Otherwise the producer's
// arithmetic would be repeated for every iteration that reads the element —
// N times for a matmul operand. And only into the producer's one consumer,
// except a broadcast (free to clone) and a producer the step also returns
// (fused as one more output of the consumer: multi-output fusion).
//
// A value cheap to recompute that is larger than what it is computed from
// (a broadcast, a one-hot of labels, a broadcast that also scales) fuses
// into every consumer that reads it once, as a broadcast does: it is not
// materialized for them. The cross-entropy's one-hot of the labels, read by
// the loss and by its gradient, was a [tokens, vocabulary] f32 buffer live
// from the forward to the backward.
//
// An elementwise op whose one use is a tensor.expand_shape read elementwise
// by one consumer is first rewritten over the expanded shape, so that it
// fuses across the reshape: the bias add of a product [B*T, d] and the
// residual add the graph makes of it as [B, T, d] become one op (and so the
// product's one epilogue, nova-outline-kernels).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAFUSEELEMENTWISE
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// The consumer reads each element of the fused operand once (its indexing
/// map is a permutation of all loops). Otherwise the producer's arithmetic
/// would be repeated for every iteration that reads the element.
bool readsOnce(OpOperand *fused) {
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  return consumer && consumer.getMatchingIndexingMap(fused).isPermutation();
}

/// A generic that only moves its input (a broadcast: its body yields a
/// block argument).
bool onlyMoves(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic && generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
         generic.getBody()->getOperations().size() == 1 &&
         generic.getBody()->getTerminator()->getOperand(0) == generic.getBody()->getArgument(0);
}

/// At most this many ops (besides the yield) in a body cheap enough to
/// recompute wherever its value is read.
constexpr size_t kCheapBodyOps = 8;

/// A generic that writes more than it reads and is cheap to recompute: all
/// loops parallel, one result its body does not read, every input read
/// through a map that is not a permutation of the loops (a broadcast, the
/// labels of a one-hot), a body of a few arith ops (and linalg.index).
bool cheapExpansion(Operation *producer) {
  auto op = dyn_cast_or_null<linalg::GenericOp>(producer);
  if (!op || op.getNumDpsInits() != 1 || op.getNumLoops() != op.getNumParallelLoops() ||
      op.payloadUsesValueFromOperand(op.getDpsInitOperand(0)))
    return false;
  for (OpOperand *input : op.getDpsInputOperands())
    if (op.getMatchingIndexingMap(input).isPermutation())
      return false;
  Block *body = op.getBody();
  if (body->getOperations().size() > kCheapBodyOps + 1)
    return false;
  return llvm::all_of(body->without_terminator(), [](Operation &inner) {
    return isa<linalg::IndexOp>(inner) ||
           (inner.getDialect() && inner.getDialect()->getNamespace() == "arith" && inner.getNumRegions() == 0);
  });
}

/// linalg's producer-consumer fusion decides with this.
bool fuseInto(OpOperand *fused) {
  if (!readsOnce(fused))
    return false;
  // Only into the producer's one consumer: fusing a value used by several
  // ops clones its computation into each of them (and its own producers
  // into each clone), which recomputes it and, over a training step's
  // shared subgraphs, makes the pass quadratic in the graph. But a value
  // that only moves or expands its inputs costs next to nothing to
  // recompute in each consumer that reads it once, and is then never
  // stored for them: a broadcast's input is read through the clone's
  // indexing map (the grad-clip scale broadcast to every gradient's
  // shape), and the cross-entropy's one-hot of the labels, read by the
  // loss and by its gradient, is no [tokens, vocabulary] buffer. (An
  // expansion reads its inputs through non-permutation maps, so their
  // producers do not follow it into each consumer.)
  Operation *producer = fused->get().getDefiningOp();
  if (onlyMoves(producer) || cheapExpansion(producer))
    return true;
  return producer && llvm::all_of(producer->getUsers(), [&](Operation *user) { return user == fused->getOwner(); });
}

/// linalg's reshape propagation decides with this: only an expand_shape
/// (`fused` its source operand) of an all-parallel, non-matmul generic used
/// by nothing else, itself used only by an all-parallel generic that reads
/// it once, and so takes the expanded op by elementwise fusion next. Every
/// other reshape stays (a matmul's operands are read as the rows they are).
bool expandAcross(OpOperand *fused) {
  auto expand = dyn_cast<tensor::ExpandShapeOp>(fused->getOwner());
  auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
  if (!expand || !producer || !producer->hasOneUse() || producer.getNumDpsInits() != 1 ||
      producer.getNumLoops() != producer.getNumParallelLoops() || mlir::nova::isTaggedMatmul(producer) ||
      !expand->hasOneUse())
    return false;
  OpOperand &use = *expand->getUses().begin();
  auto consumer = dyn_cast<linalg::GenericOp>(use.getOwner());
  return consumer && consumer.getNumLoops() == consumer.getNumParallelLoops() &&
         !mlir::nova::isTaggedMatmul(consumer) && readsOnce(&use);
}

/// A producer whose result the step also returns fuses into its one
/// consumer, the fused op yielding that result as well: AdamW's new m and
/// v are returned and read by the parameter update, so one pass computes
/// all three. (linalg's pattern keeps such a producer beside the fused op,
/// computing the value twice; here every use moves to the fused op.)
struct FuseReturnedProducer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer, PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      auto producer = operand.get().getDefiningOp<linalg::GenericOp>();
      if (!producer || producer->getNumResults() != 1 || !readsOnce(&operand) ||
          !linalg::areElementwiseOpsFusable(&operand))
        continue;
      bool returnedToo = false, otherUse = false;
      for (Operation *user : producer->getUsers()) {
        if (isa<func::ReturnOp>(user))
          returnedToo = true;
        else if (user != consumer.getOperation())
          otherUse = true;
      }
      if (!returnedToo || otherUse)
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> fused = linalg::fuseElementwiseOps(rewriter, &operand);
      if (failed(fused))
        continue;
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceAllUsesWith(original, replacement);
      rewriter.eraseOp(consumer);
      rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

struct NovaFuseElementwise
    : mlir::nova::impl::NovaFuseElementwiseBase<NovaFuseElementwise> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, fuseInto);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, expandAcross);
    patterns.add<FuseReturnedProducer>(&getContext());
    // A step is one long block: region simplification (block merging) costs
    // most of the time and finds nothing to do there.
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
