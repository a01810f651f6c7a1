//===- FuseMatmulPrologue.cpp - the nova-fuse-matmul-prologue pass -*- C++ -*-===//
//
// A weight gradient dW = act^T dy whose activation is computed right before
// it only for it (a GELU recomputed in the backward, nova-rematerialize) would
// write that activation to memory and read it back once: at the backward's
// peak, the largest buffer live (16 MiB in the medium GPT). The register
// kernel packs a transposed lhs once per block anyway (VectorizeMatmul.cpp),
// so the producer's arithmetic can run there instead: the matmul generic takes
// the producer's inputs in place of its lhs, its body computes the lhs value
// from them, and the activation never exists. A row-major lhs computed so
// is packed too (it is otherwise read in place, once per column tile, where
// the producer would run N / NR times): the forward GELU before the MLP's
// second matmul, whose 16 MiB result was the medium GPT's forward peak.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAFUSEMATMULPROLOGUE
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// An elementwise generic that can run on vectors while the lhs is packed:
/// all loops parallel, every input (of the result's shape, any float type)
/// read through the identity map, one
/// result into an empty tensor, a body of arith and math ops on its inputs.
bool isPrologue(linalg::GenericOp p) {
  if (p.getNumDpsInits() != 1 || p->getNumResults() != 1 || p.getNumParallelLoops() != p.getNumLoops() ||
      !p.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>() ||
      p.payloadUsesValueFromOperand(p.getDpsInitOperand(0)) || p.getNumDpsInputs() == 0)
    return false;
  auto type = cast<RankedTensorType>(p->getResult(0).getType());
  // Inputs of the result's shape; a narrower float one (a bf16 activation,
  // nova-bf16-saved-activations) is widened by the body.
  for (OpOperand *in : p.getDpsInputOperands()) {
    auto t = dyn_cast<RankedTensorType>(in->get().getType());
    if (!t || t.getShape() != type.getShape() || !isa<FloatType>(t.getElementType()) ||
        !p.getMatchingIndexingMap(in).isIdentity())
      return false;
  }
  for (Operation &op : p.getRegion().front().without_terminator())
    if (op.getNumRegions() != 0 || op.getNumResults() != 1 ||
        !isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) || isa<arith::SelectOp>(op))
      return false;
  return true;
}

/// The fused matmul, or failure if `matmul`'s lhs has no such producer.
LogicalResult fuse(linalg::GenericOp matmul) {
  if (!mlir::nova::isTaggedMatmul(matmul) || matmul.getNumDpsInputs() != 2 || matmul.getNumDpsInits() != 1)
    return failure();
  OpOperand *lhs = matmul.getDpsInputOperand(0);
  AffineMap lhsMap = matmul.getMatchingIndexingMap(lhs);
  Value value = lhs->get();
  Operation *reshape = nullptr;
  if (auto c = value.getDefiningOp<tensor::CollapseShapeOp>()) {
    reshape = c;
    value = c.getSrc();
  } else if (auto e = value.getDefiningOp<tensor::ExpandShapeOp>()) {
    reshape = e;
    value = e.getSrc();
  }
  auto producer = value.getDefiningOp<linalg::GenericOp>();
  if (!producer || !value.hasOneUse() || (reshape && !lhs->get().hasOneUse()) || !isPrologue(producer))
    return failure();

  OpBuilder b(matmul);
  Location loc = matmul.getLoc();
  // The producer's inputs, shaped as the lhs.
  SmallVector<Value> inputs;
  for (OpOperand *in : producer.getDpsInputOperands()) {
    Value v = in->get();
    if (auto c = dyn_cast_or_null<tensor::CollapseShapeOp>(reshape))
      v = b.create<tensor::CollapseShapeOp>(loc, v, c.getReassociationIndices());
    else if (auto e = dyn_cast_or_null<tensor::ExpandShapeOp>(reshape))
      v = b.create<tensor::ExpandShapeOp>(loc, e.getResultType(), v, e.getReassociationIndices());
    inputs.push_back(v);
  }
  Value rhs = matmul.getDpsInputs()[1];
  SmallVector<AffineMap> maps(inputs.size(), lhsMap);
  maps.push_back(matmul.getMatchingIndexingMap(matmul.getDpsInputOperand(1)));
  maps.push_back(matmul.getMatchingIndexingMap(matmul.getDpsInitOperand(0)));
  SmallVector<Value> allInputs(inputs);
  allInputs.push_back(rhs);
  auto fused = b.create<linalg::GenericOp>(
      loc, matmul->getResultTypes(), allInputs, matmul.getDpsInits(), maps, matmul.getIteratorTypesArray(),
      [&](OpBuilder &bb, Location bl, ValueRange args) {
        IRMapping map;
        Block &pBody = producer.getRegion().front();
        for (auto [i, in] : llvm::enumerate(producer.getDpsInputOperands()))
          map.map(pBody.getArgument(in->getOperandNumber()), args[i]);
        for (Operation &op : pBody.without_terminator())
          bb.clone(op, map);
        Value lhsValue = map.lookup(pBody.getTerminator()->getOperand(0));
        Block &mBody = matmul.getRegion().front();
        IRMapping mm;
        mm.map(mBody.getArgument(0), lhsValue);
        mm.map(mBody.getArgument(1), args[inputs.size()]);
        mm.map(mBody.getArgument(2), args[inputs.size() + 1]);
        for (Operation &op : mBody.without_terminator())
          bb.clone(op, mm);
        bb.create<linalg::YieldOp>(bl, mm.lookup(mBody.getTerminator()->getOperand(0)));
      });
  fused->setDiscardableAttrs(matmul->getDiscardableAttrDictionary());
  matmul->replaceAllUsesWith(fused);
  matmul->erase();
  if (reshape && reshape->use_empty())
    reshape->erase();
  Operation *empty = producer.getDpsInitOperand(0)->get().getDefiningOp();
  producer->erase();
  if (empty->use_empty())
    empty->erase();
  return success();
}

struct FuseMatmulPrologue : mlir::nova::impl::NovaFuseMatmulPrologueBase<FuseMatmulPrologue> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> matmuls;
    getOperation().walk([&](linalg::GenericOp op) {
      if (mlir::nova::isTaggedMatmul(op))
        matmuls.push_back(op);
    });
    for (linalg::GenericOp op : matmuls)
      (void)fuse(op);
  }
};

} // namespace
